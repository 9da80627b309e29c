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

import hashlib
import importlib.util
import inspect
import io
import json
import keyword
import pathlib
import threading
import tokenize

import numpy as np

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


def import_statements(source: str) -> list[tuple[int, str, list[str]]]:
    """Every import statement of ``source`` as (level, module, names): ``import a.b, c``
    gives (0, "a.b", []) and (0, "c", []); ``from ..x import y, z`` gives (2, "x", ["y", "z"]).

    Read with the tokenizer, not ``ast``: under CPython 3.11 an ``ast.parse`` in one thread of
    a process whose other threads also build ASTs can fail with "SystemError: AST
    constructor recursion depth mismatch" (CPython gh-106905), which is what a Dask worker
    computing a cache key met. The tokenizer builds no AST. Statements are logical lines
    that begin with ``import`` or ``from`` (also indented ones, inside functions); a
    statement after a colon on the same line (``if x: import y``) is not seen - the zoo has
    none (a test compares this with ``ast`` on every module)."""
    out: list[tuple[int, str, list[str]]] = []
    line: list[str] = []
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if line:
                out.extend(_statement(line))
            line = []
        elif tok.type not in skip:
            line.append(tok.string)
    return out


def _dotted(tokens: list[str], i: int) -> tuple[str, int]:
    """The dotted name starting at tokens[i] and the index after it."""
    parts = []
    while i < len(tokens) and ((tokens[i].isidentifier() and not keyword.iskeyword(tokens[i])) or tokens[i] == "."):
        parts.append(tokens[i])
        i += 1
    return "".join(parts), i


def _statement(tokens: list[str]) -> list[tuple[int, str, list[str]]]:
    if tokens[0] == "import":
        found, i = [], 1
        while i < len(tokens):
            name, i = _dotted(tokens, i)
            found.append((0, name, []))
            while i < len(tokens) and tokens[i] != ",":  # "as alias"
                i += 1
            i += 1
        return found
    if tokens[0] != "from" or "import" not in tokens:
        return []
    i, level = 1, 0
    while tokens[i] and set(tokens[i]) == {"."}:  # "." or "..." (one token) count their dots
        level += len(tokens[i])
        i += 1
    module, i = _dotted(tokens, i) if tokens[i] != "import" else ("", i)
    names, i, expect_name = [], tokens.index("import", i) + 1, True
    for t in tokens[i:]:
        if t in ("(", ")"):
            continue
        if t == ",":
            expect_name = True
        elif expect_name:
            names.append(t)
            expect_name = False  # what follows until the next comma is "as alias"
    return [(level, module, names)]


#: (module, path, mtime_ns, size) -> the zoo modules it imports. Reading the imports is
#: tokenizing the source (~10 ms a module), and every SBC run and battery cell computes
#: a digest over some 85 modules: 0.8 s each time, most of a 100-simulation SBC run of a
#: fast engine. A file edited since changes its mtime or size and is read again.
_IMPORTS: dict[tuple, frozenset[str]] = {}


def _imported_modules(module: str, path: pathlib.Path) -> set[str]:
    """Modules of the zoo package that ``module`` (source at ``path``) imports."""
    stat = path.stat()
    key = (module, str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _IMPORTS:
        _IMPORTS[key] = frozenset(_read_imported_modules(module, path))
    return set(_IMPORTS[key])


def _read_imported_modules(module: str, path: pathlib.Path) -> set[str]:
    package = _package_of(module, path)
    found: set[str] = set()
    for level, name, names in import_statements(path.read_text(encoding="utf-8")):
        if not names:  # "import a.b"
            found.add(name)
            continue
        if level:
            base = package.split(".")
            base = base[: len(base) - (level - 1)] if level > 1 else base
            parent = ".".join(base + ([name] if name else []))
        else:
            parent = name
        found.add(parent)
        # "from . import registry" imports a module; "from .x import name" a name
        found.update(f"{parent}.{alias}" for alias in names)
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
        h.update(object_source(obj).encode())
    return h.hexdigest()


#: CPython 3.11's ast.parse is not thread-safe (its AST constructor keeps one recursion count per
#: interpreter): two threads parsing at once fail now and then with "SystemError: AST constructor
#: recursion depth mismatch". inspect.getsource parses a class's whole module to find it, and two
#: references computing their cache keys in two threads (threaded Dask workers, the cache's
#: own race test) did exactly that. One lock for every source read here.
_SOURCE_LOCK = threading.Lock()


def object_source(obj) -> str:
    """``inspect.getsource(obj)``, one thread at a time (``_SOURCE_LOCK``)."""
    with _SOURCE_LOCK:
        return inspect.getsource(obj)


def spec_key(spec, *extra) -> str:
    """A digest of a model spec's identity (its class and hyper-parameters) and of
    ``extra`` (arrays by their bytes, anything else by its repr): the key of the programs a
    process compiles once per spec, shape and settings (SBC's prior sampler and ranked
    quantities, NUTS's program)."""
    h = hashlib.sha256(json.dumps([type(spec).__module__, type(spec).__qualname__, spec.to_dict()],
                                  sort_keys=True, default=str).encode())
    for x in extra:
        h.update(np.ascontiguousarray(x).tobytes() if isinstance(x, np.ndarray) else repr(x).encode())
    return h.hexdigest()

