"""A digest of the source code that defines a model or a sampler, for cache keys.

Why: a cached reference is only valid for the code that produced it. A hand-bumped
version number is forgotten the day a log density changes; a digest of the source is
not. The digest of a module covers its own source and, transitively, the source of every
module of the ``zoo`` package it imports (read from its import statements, not by
importing anything), so a change to a distribution that a model uses changes the model's
digest too. Third-party code enters cache keys through package versions instead.

The digest is of the text: a change to a comment also changes it. That costs a
recomputation, never a wrong answer.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import pathlib

_PACKAGE = "zoo"


def _source_path(module: str) -> pathlib.Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return pathlib.Path(spec.origin)


def _package_of(module: str, path: pathlib.Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imported_modules(module: str, path: pathlib.Path) -> set[str]:
    """Modules of the zoo package that ``module`` (source at ``path``) imports."""
    package = _package_of(module, path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                parent = ".".join(base + ([node.module] if node.module else []))
            else:
                parent = node.module or ""
            found.add(parent)
            # "from . import registry" imports a module; "from .x import name" a name
            found.update(f"{parent}.{alias.name}" for alias in node.names)
    return {m for m in found if (m == _PACKAGE or m.startswith(_PACKAGE + ".")) and _source_path(m) is not None}


def module_closure(start: str, *, exclude: tuple[str, ...] = ()) -> list[str]:
    """``start`` and every zoo module it imports, directly or not, sorted; modules in
    ``exclude`` are neither included nor followed. ``start`` itself may lie outside the
    package (a user's model); only zoo modules are followed from it."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen or module in exclude:
            continue
        path = _source_path(module)
        if path is None:
            continue
        seen.add(module)
        todo.extend(_imported_modules(module, path) - seen)
    return sorted(seen)


def code_digest(modules, *, exclude: tuple[str, ...] = (), objects=()) -> str:
    """sha256 over the sources of the closures of ``modules`` (see :func:`module_closure`)
    and of ``objects`` (classes or functions, by ``inspect.getsource``)."""
    h = hashlib.sha256()
    names = sorted({m for start in modules for m in module_closure(start, exclude=exclude)})
    for name in names:
        h.update(name.encode())
        h.update(_source_path(name).read_bytes())
    for obj in objects:
        h.update(f"{obj.__module__}.{obj.__qualname__}".encode())
        h.update(inspect.getsource(obj).encode())
    return h.hexdigest()
