"""The import structure: layers and wings point one way, no module circles, no import hidden in
a function to dodge one.

The project's folders are layers (``data``, ``models`` <- ``inference`` <- ``validation`` <-
``reproductions`` <- ``zoo``), and ``validation/`` is built in wings that import one way
(``base`` <- ``references`` <- ``judge`` <- ``records`` <- ``runs`` <- ``report``). These tests
read every import statement of every module (``ast``; nothing is imported), function-level
imports included, so neither a new upward import nor a circle closed inside a function passes.
Each checker is also run on a planted violation, so a checker that sees nothing fails too.
"""
from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

from repository import REPO

#: top-level folder -> import package (zoo/ is the package root and the top layer)
FOLDERS = {"data": "zoo.data", "models": "zoo.models", "inference": "zoo.inference",
           "validation": "zoo.validation", "reproductions": "zoo.reproductions", "zoo": "zoo"}
#: layer -> the layers its modules may import
ALLOWED = {
    "data": {"data"},
    "models": {"models"},
    "inference": {"models", "inference"},
    "validation": {"data", "models", "inference", "validation"},
    "reproductions": {"data", "models", "inference", "validation", "reproductions"},
    "zoo": {"data", "models", "inference", "validation", "reproductions", "zoo"},
}
#: the wings of validation/, lowest first: a wing may import itself and the wings before it
WINGS = ("base", "references", "judge", "records", "runs", "report")


# --------------------------------------------------------------------------------------
# Reading imports
# --------------------------------------------------------------------------------------
def modules_of(root: pathlib.Path, folders=FOLDERS) -> dict[str, pathlib.Path]:
    """module name -> file, for every .py file of the project's folders under ``root``."""
    out = {}
    for folder, package in folders.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imports_of(module: str, path: pathlib.Path, known: dict[str, pathlib.Path]):
    """(line, target module, inside a function, the import's comment) of every import of a
    project module in ``path``. ``from pkg import name`` imports ``pkg.name`` when that is a
    module, else ``pkg`` (its ``__init__``)."""
    source = path.read_text()
    lines = source.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    # imports under `if TYPE_CHECKING:` or `try:` at module level are still module level
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            targets = [f"{parent}.{a.name}" if f"{parent}.{a.name}" in known else parent for a in node.names]
        else:
            continue
        comment = " ".join(lines[node.lineno - 1].split("#", 1)[1:]).strip()
        if not comment and node.lineno >= 2 and lines[node.lineno - 2].strip().startswith("#"):
            comment = lines[node.lineno - 2].strip().lstrip("#").strip()
        for target in dict.fromkeys(targets):
            if target in known and target != module:
                found.append((node.lineno, target, id(node) not in top, comment))
    return found


def layer_of(module: str) -> str | None:
    """'zoo.inference.em' -> 'inference'; 'zoo.cli' -> 'zoo'; 'zoo' -> None (the root: float64
    and host devices, importable from anywhere)."""
    parts = module.split(".")
    if module == "zoo":
        return None
    return parts[1] if parts[1] in FOLDERS and parts[1] != "zoo" else "zoo"


def wing_of(module: str) -> str | None:
    """'zoo.validation.judge.verdict' -> 'judge'; 'zoo.validation.report.sbc_report' -> 'report';
    'zoo.validation' (the package's own ``__init__``) and a module outside every wing
    ('zoo.validation.loose') -> None."""
    parts = module.split(".")
    if parts[:2] != ["zoo", "validation"] or len(parts) == 2:
        return None
    return parts[2] if parts[2] in WINGS else None


# --------------------------------------------------------------------------------------
# The checkers
# --------------------------------------------------------------------------------------
def upward_imports(root: pathlib.Path, folders=FOLDERS) -> list[str]:
    """Every import of a layer above the importer's, or of a validation wing above its own."""
    known = modules_of(root, folders)
    bad = []
    for module, path in known.items():
        for line, target, _, _ in imports_of(module, path, known):
            where = f"{path.relative_to(root)}:{line} imports {target}"
            layer, target_layer = layer_of(module), layer_of(target)
            if target_layer is not None and layer is not None and target_layer not in ALLOWED[layer]:
                bad.append(f"{where} (layer {target_layer} above {layer})")
            wing, target_wing = wing_of(module), wing_of(target)
            if wing and target_wing and WINGS.index(target_wing) > WINGS.index(wing):
                bad.append(f"{where} (wing {target_wing} above {wing})")
    return bad


def import_circles(root: pathlib.Path, folders=FOLDERS) -> list[list[str]]:
    """The strongly connected components of more than one module in the graph of every import
    (function-level ones included): each is a circle of modules that need each other."""
    known = modules_of(root, folders)
    graph = defaultdict(set)
    for module, path in known.items():
        graph[module] |= {t for _, t, _, _ in imports_of(module, path, known)}
    # Tarjan's algorithm, iterative
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    counter = [0]

    def visit(start):
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))

    for module in sorted(known):
        if module not in index:
            visit(module)
    return circles


def unexplained_late_imports(root: pathlib.Path, folders=FOLDERS) -> list[str]:
    """Every import of a project module inside a function without a comment (on its line or
    the line above) saying why it cannot be at the top."""
    known = modules_of(root, folders)
    return [f"{path.relative_to(root)}:{line} imports {target} inside a function"
            for module, path in known.items()
            for line, target, late, comment in imports_of(module, path, known) if late and not comment]


# --------------------------------------------------------------------------------------
# The project keeps them
# --------------------------------------------------------------------------------------
def test_no_module_imports_a_layer_or_wing_above_its_own():
    assert upward_imports(REPO) == []


def test_no_import_circles():
    assert import_circles(REPO) == []


def test_every_function_level_import_says_why():
    assert unexplained_late_imports(REPO) == []


def test_every_validation_module_lies_in_a_wing():
    assert loose_modules(REPO) == []


def loose_modules(root: pathlib.Path, folders=FOLDERS) -> list[str]:
    """The modules of validation/ outside every wing (a file beside the wings' folders)."""
    return [m for m in modules_of(root, folders) if m.startswith("zoo.validation.") and wing_of(m) is None]


def repeated_module_names(root: pathlib.Path) -> dict[str, list[str]]:
    """Module file names used more than once across the package's folders (``__init__.py``
    aside): {name: [paths]}. Two modules of one name in different wings read as one in a
    traceback, a grep or a conversation (``judge/defects.py`` beside ``runs/defects.py``)."""
    seen = defaultdict(list)
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if path.name != "__init__.py":
                seen[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_no_two_modules_share_a_name():
    assert repeated_module_names(REPO) == {}


def test_a_repeated_module_name_is_seen(tmp_path):
    for name in ("models/pcvm.py", "validation/records/pcvm.py", "inference/em.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    for folder in FOLDERS:
        (tmp_path / folder).mkdir(exist_ok=True)
    assert repeated_module_names(tmp_path) == {"pcvm.py": ["models/pcvm.py", "validation/records/pcvm.py"]}


# --------------------------------------------------------------------------------------
# ... and the checkers see planted violations
# --------------------------------------------------------------------------------------
def _plant(root: pathlib.Path, files: dict[str, str]) -> dict[str, str]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {pathlib.Path(n).parts[0] for n in files}:
        for sub in (root / folder).rglob("*"):
            if sub.is_dir() and not (sub / "__init__.py").exists():
                (sub / "__init__.py").write_text("")
        if not (root / folder / "__init__.py").exists():
            (root / folder / "__init__.py").write_text("")
    return {f: FOLDERS[f] for f in {pathlib.Path(n).parts[0] for n in files}}


def test_checkers_catch_planted_violations(tmp_path):
    folders = _plant(tmp_path, {
        "models/m.py": "import numpy\n",
        "inference/ok.py": "from ..models import m\n",
        "inference/up.py": "def f():\n    from ..validation.judge import verdict  # planted\n",
        "validation/base/low.py": "from ..runs import compare  # planted: base reaching up\n",
        "validation/judge/verdict.py": "from ..base import low\n",
        "validation/runs/compare.py": "from ..judge import verdict\n",
        "validation/records/a.py": "from . import b\n",
        "validation/records/b.py": "def g():\n    from . import a\n",
        "validation/report/compare_report.py": "from ..runs import compare\n",
        "validation/runs/study.py": "from ..report import compare_report  # planted: a runner writing a report\n",
        "validation/loose.py": "import numpy\n",
    })
    assert loose_modules(tmp_path, folders) == ["zoo.validation.loose"]
    up = upward_imports(tmp_path, folders)
    assert any("inference/up.py:2 imports zoo.validation.judge.verdict (layer validation above inference)" in b
               for b in up)
    assert any("validation/base/low.py:1 imports zoo.validation.runs.compare (wing runs above base)" in b
               for b in up)
    assert any("validation/runs/study.py:1 imports zoo.validation.report.compare_report (wing report above runs)" in b
               for b in up)
    assert not any("ok.py" in b or "compare_report.py:" in b or "judge/verdict.py" in b for b in up)
    circles = import_circles(tmp_path, folders)
    assert ["zoo.validation.records.a", "zoo.validation.records.b"] in circles
    # base/low -> runs/compare -> judge/verdict -> base/low
    assert ["zoo.validation.base.low", "zoo.validation.judge.verdict", "zoo.validation.runs.compare"] in circles
    late = unexplained_late_imports(tmp_path, folders)
    assert late == ["validation/records/b.py:2 imports zoo.validation.records.a inside a function"]


# --------------------------------------------------------------------------------------
# One door to ArviZ
# --------------------------------------------------------------------------------------
#: the one module that may import ArviZ (it speaks ArviZ 0.2x and 1.x: docs/stacks.md)
ARVIZ_ADAPTER = "zoo.validation.base.arviz_adapter"
ARVIZ_PACKAGES = ("arviz", "arviz_base", "arviz_stats", "arviz_plots")


def arviz_imports(root: pathlib.Path, folders=FOLDERS) -> list[str]:
    """'path:line imports X' for every import of an ArviZ package (function-level ones
    included) in a module other than the adapter."""
    found = []
    for module, path in modules_of(root, folders).items():
        if module == ARVIZ_ADAPTER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                if name.split(".")[0] in ARVIZ_PACKAGES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def test_only_the_adapter_imports_arviz():
    # nothing else may know which ArviZ line is installed (issue 53): a second door would
    # speak one line only
    assert arviz_imports(REPO) == []


def test_an_arviz_import_outside_the_adapter_is_seen(tmp_path):
    folders = _plant(tmp_path, {
        "validation/base/arviz_adapter.py": "import arviz as az\n",
        "validation/runs/table.py": "def f():\n    import arviz as az  # planted\n",
        "inference/k.py": "from arviz_stats.base import array_stats  # planted\n",
    })
    assert sorted(arviz_imports(tmp_path, folders)) == [
        "inference/k.py:1 imports arviz_stats.base", "validation/runs/table.py:2 imports arviz"]
