"""Atomic file writes: finished work appears whole or not at all.

Every file the project writes (reports, figures, netCDF, cache entries, benchmark
cells) goes through :func:`atomic_write`: the content is written to a temporary file in
the target folder, flushed, given the permissions a plain ``open`` would give, and
renamed over the target. A killed run leaves at most a ``.tmp-*`` file, never a
half-written one that looks finished.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path, write: Callable[[str], None], *, suffix: str = "") -> str:
    """Call ``write(tmp_path)`` and rename the result to ``path``; return ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    os.close(fd)
    try:
        write(tmp)
        # mkstemp creates 0600; give the file the mode an ordinary open() would
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def write_text_atomic(path, text: str) -> str:
    """Write ``text`` to ``path`` as UTF-8 (whatever the locale), flushed and synced to disk
    before :func:`atomic_write` renames it into place; return ``path``."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:  # whatever the locale
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return atomic_write(path, write, suffix=".txt")


def write_json_atomic(obj: Any, path) -> str:
    """JSON with numpy scalars/arrays converted and non-finite floats as null."""
    return write_text_atomic(path, json.dumps(_jsonable(obj), indent=2))


def _jsonable(o: Any) -> Any:
    """numpy -> plain Python; NaN/inf -> None, so the JSON is strict."""
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return _jsonable(o.tolist())
    if isinstance(o, (np.floating, float)):
        return float(o) if np.isfinite(o) else None
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def save_figure(fig, path: str) -> None:
    """Write a matplotlib Figure as PNG, atomically (a reader never sees half a file). Needs no
    matplotlib import: the figure brings its own ``savefig``."""
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"), suffix=".png")
