"""The API reference's rules (docs/_ext/zoo_api.py): every module of the package has a page,
and a public name without a docstring fails the build.

The first is checked against pyproject.toml's package list; the second on a small site built
with the extension, one function planted without a docstring (the whole site's build, about a
minute, is CI's: `.ci/run`)."""
from __future__ import annotations

import importlib.util
import os
import sys
import tomllib

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXT = os.path.join(REPO, "docs", "_ext", "zoo_api.py")


def _extension():
    pytest.importorskip("sphinx")
    spec = importlib.util.spec_from_file_location("zoo_api_under_test", EXT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_of_the_distribution_has_a_page():
    ext = _extension()
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)
    packages = set(project["tool"]["setuptools"]["packages"])
    paged = {package for package, _, _ in ext.WINGS}
    assert packages == paged, (sorted(packages - paged), sorted(paged - packages))
    listed = {m for package, folder, _ in ext.WINGS for m in ext.modules_of(REPO, package, folder)}
    for package, folder, _ in ext.WINGS:  # every .py file of every package folder is a listed module
        for f in os.listdir(os.path.join(REPO, folder)):
            if f.endswith(".py") and f != "__init__.py":
                assert f"{package}.{f[:-3]}" in listed, f"{folder}/{f} has no section in the API reference"


def _site(tmp_path, body: str):
    """A one-module site built by the extension with the build's own options (-W -n)."""
    from sphinx.cmd.build import build_main

    src = tmp_path / "site"
    (src / "demo_pkg").mkdir(parents=True)
    (src / "demo_pkg" / "__init__.py").write_text('"""A package to document."""\n' + body)
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(src)!r}, {os.path.dirname(EXT)!r}]\n"
        "extensions = ['sphinx.ext.autodoc', 'myst_parser', 'zoo_api']\n"
        "zoo_api_wings = (('demo_pkg', 'demo_pkg', 'Demo'),)\n"
        "nitpicky = True\n")
    (src / "index.rst").write_text("Demo\n====\n\n.. toctree::\n\n   docs/api/_generated/demo_pkg\n")
    out = tmp_path / "out"
    status = build_main(["-b", "html", "-W", "--keep-going", "-q", "-E", str(src), str(out)])
    sys.modules.pop("demo_pkg", None)
    return status


def test_a_public_function_without_a_docstring_fails_the_build(tmp_path, capsys):
    _extension()
    bare = "def public():\n    return 1\n\n\ndef _private():\n    return 2\n"
    assert _site(tmp_path / "bare", bare) != 0
    assert "demo_pkg.public: a public function without a docstring" in capsys.readouterr().err
    documented = 'def public():\n    """Returns one."""\n    return 1\n\n\ndef _private():\n    return 2\n'
    assert _site(tmp_path / "documented", documented) == 0
