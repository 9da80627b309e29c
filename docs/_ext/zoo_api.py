"""The API reference's own rules, as a Sphinx extension (docs/conf.py loads it).

* Every module of the package gets a page: at the start of each build the pages under
  ``docs/api/_generated/`` are written from the package's folders (pyproject.toml's
  package-dir), one page per wing, so a new module cannot be left out.
* A public name without a docstring is a warning, which the build (``-W``) turns into an
  error: a public module, class, function, method or property whose docstring is empty.
  Public: not starting with an underscore, and named in the module's ``__all__`` where the
  module has one (autodoc documents exactly those). Attributes (dataclass fields, constants)
  are documented by ``#:`` comments where they are; an undocumented one is not an error.
* A link of the guide to a folder of the repository (``[benchmarks/results/](../benchmarks/results/)``,
  which a repository browser shows as the folder) is no page of the site: its text stays, as
  text, instead of a broken link. Links to files that are not pages become downloads (MyST).
"""
from __future__ import annotations

import os

from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: the import package's sub-packages and the repository folders they are installed from
#: (pyproject.toml, [tool.setuptools.package-dir]); each is one page of the reference
WINGS = (
    ("zoo", "zoo", "The package, the command line and the classifier"),
    ("zoo.models", "models", "Models: each written once in NumPyro"),
    ("zoo.inference", "inference", "Inference engines and the posterior types"),
    ("zoo.validation", "validation", "Validation: the package"),
    ("zoo.validation.base", "validation/base", "Validation: base (ArviZ adapter, atomic files, digests)"),
    ("zoo.validation.references", "validation/references", "Validation: references (NUTS and the other samplers, certification, cache)"),
    ("zoo.validation.judge", "validation/judge", "Validation: the judge (verdicts, metrics, SBC's tests, evidence)"),
    ("zoo.validation.records", "validation/records", "Validation: model records and the registry"),
    ("zoo.validation.runs", "validation/runs", "Validation: runs (compare, SBC, battery, study)"),
    ("zoo.validation.report", "validation/report", "Validation: reports"),
    ("zoo.data", "data", "Data sets"),
    ("zoo.reproductions", "reproductions", "Reproductions of the papers' experiments"),
)
CHECKED = ("module", "class", "exception", "function", "method", "property", "classmethod", "staticmethod")


def modules_of(root: str, package: str, folder: str) -> list[str]:
    """The modules of one wing: its package and every .py file directly in its folder
    (sub-folders are wings of their own, or data)."""
    path = os.path.join(root, folder)
    names = [package] if os.path.exists(os.path.join(path, "__init__.py")) else []
    for f in sorted(os.listdir(path)):
        if f.endswith(".py") and f != "__init__.py" and not f.startswith("_"):
            names.append(f"{package}.{f[:-3]}")
    return names


def write_pages(app) -> None:
    root = app.srcdir
    out = os.path.join(root, "docs", "api", "_generated")
    os.makedirs(out, exist_ok=True)
    for package, folder, title in app.config.zoo_api_wings:
        lines = [f"# {title}", "", f"`{package}`, from the repository's `{folder}/`.", ""]
        for module in modules_of(root, package, folder):
            lines += [f"## `{module}`", "", "```{eval-rst}", f".. automodule:: {module}", "   :members:",
                      "   :undoc-members:", "   :show-inheritance:", "```", ""]
        text = "\n".join(lines)
        path = os.path.join(out, f"{package}.md")
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:  # unchanged pages keep their time stamp: Sphinx rebuilds only what changed
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)


def check_docstring(app, what, name, obj, options, lines) -> None:
    if what not in CHECKED or name.rsplit(".", 1)[-1].startswith("_"):
        return
    owner = getattr(obj, "__module__", None)
    if what != "module" and isinstance(owner, str) and not name.startswith(owner + "."):
        return  # another package's object imported here (autodoc does not show it): not ours to document
    if not any(line.strip() for line in lines):
        logger.warning(f"{name}: a public {what} without a docstring", type="zoo", subtype="docstring")


def skip_foreign(app, what, name, obj, skip, options):
    """A method another package attaches to one of our classes (scikit-learn's metadata-routing
    ``set_*_request``) is that package's to document, in its own terms: not shown here."""
    owner = getattr(obj, "__module__", None)
    ours = {package.split(".")[0] for package, _, _ in app.config.zoo_api_wings}
    if callable(obj) and isinstance(owner, str) and owner.split(".")[0] not in ours:
        return True
    return None


class FolderLinks(SphinxPostTransform):
    """Links to repository folders keep their text and lose the link (module docstring)."""

    default_priority = 8  # before MyST's resolver (9), which would warn about them

    def run(self, **kwargs) -> None:
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain"):
                continue
            target = str(node.get("reftarget", "")).split("#")[0]
            if not target:
                continue
            _, path = self.env.relfn2path(target, node.get("refdoc", self.env.docname))
            if os.path.isdir(path):
                node.replace_self(node.children)


def setup(app):
    app.add_config_value("zoo_api_wings", WINGS, "env")  # (package, folder, title) per page
    app.add_post_transform(FolderLinks)
    app.connect("builder-inited", write_pages)
    app.connect("autodoc-process-docstring", check_docstring)
    app.connect("autodoc-skip-member", skip_foreign)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
