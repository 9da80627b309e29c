"""Resumable units of work for ``zoo reproduce``.

A *cell* is one finished unit of work - one fit (with its own cross-validation) on one
split or repetition. Each is stored as ``<out>/cells/<key>.json``, written atomically, so
a killed run leaves only whole cells behind and a rerun with the same ``--out`` skips
every cell it finds. Cells run in ``--jobs`` worker processes started with *spawn*:
a forked child of a process that has already started JAX can deadlock.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, NamedTuple

__all__ = ["CellTask", "CellStore", "cell_key"]


def cell_key(prefix: str, kwargs: dict) -> str:
    """Readable prefix + a hash of every setting that shapes the cell, so that a run with
    other sizes or grids never picks up a cell computed under different settings."""
    import hashlib

    digest = hashlib.sha1(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:10]
    return f"{prefix}/{digest}"


class CellTask(NamedTuple):
    """What to compute for one cell.

    key: unique name inside the entry's output folder ("/" separates levels).
    func: "module:function" that returns a JSON-able dict; it must be importable in a
        fresh process, so a worker can run it.
    kwargs: plain-data keyword arguments of ``func``.
    cost: a rough relative cost, so that the longest cells start first.
    """

    key: str
    func: str
    kwargs: dict
    cost: float = 1.0


def _resolve(func: str):
    module, _, name = func.partition(":")
    return getattr(importlib.import_module(module), name)


def _compute_and_store(func: str, kwargs: dict, path: str) -> dict:
    """Worker side: compute one cell and write it (a crash of the parent keeps it)."""
    from ..atomic import write_json_atomic

    t0 = time.perf_counter()
    result = _resolve(func)(**kwargs)
    result = {**result, "cell_seconds": time.perf_counter() - t0}
    write_json_atomic(result, path)
    # read back what was written, so a computed cell looks exactly like a reused one
    return _read(path)


def _read(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def _worker_init(jax_cache: str | None) -> None:
    import zoo

    zoo.enable_compilation_cache(jax_cache)


class CellStore:
    """The cells of one entry run, kept in ``folder/cells``.

    ``computed`` and ``reused`` count the cells of this process's calls to :meth:`run`
    (a rerun over a finished folder computes none).
    """

    def __init__(self, folder: str, *, jobs: int = 1, jax_cache: str | None = None, log=None):
        self.folder = os.fspath(folder)
        self.cells_dir = os.path.join(self.folder, "cells")
        self.jobs = int(jobs)
        self.jax_cache = jax_cache
        self.computed = 0
        self.reused = 0
        self._log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        os.makedirs(self.cells_dir, exist_ok=True)

    def path(self, key: str) -> str:
        if not key or key.startswith("/") or ".." in key:
            raise ValueError(f"bad cell key {key!r}")
        return os.path.join(self.cells_dir, key.replace("/", "__") + ".json")

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        return _read(path) if os.path.exists(path) else None

    def run(self, tasks: list[CellTask], what: str = "cells") -> dict[str, dict]:
        """Compute the missing cells of ``tasks``; return every cell's result by key."""
        keys = [t.key for t in tasks]
        if len(set(keys)) != len(keys):
            raise ValueError("cell keys must be unique within one call")
        results: dict[str, Any] = {}
        todo = []
        for task in tasks:
            found = self.get(task.key)
            if found is None:
                todo.append(task)
            else:
                results[task.key] = found
        self.reused += len(results)
        if todo:
            self._log(f"{what}: {len(todo)} to compute, {len(results)} found on disk")
        todo.sort(key=lambda t: -t.cost)
        t0 = time.perf_counter()
        step = max(1, len(todo) // 10)

        def done(task, result, n):
            results[task.key] = result
            self.computed += 1
            if n % step == 0 or n == len(todo):
                self._log(f"  {what}: {n}/{len(todo)} done ({time.perf_counter() - t0:.0f} s)")

        if self.jobs <= 1 or len(todo) <= 1:
            for n, task in enumerate(todo, 1):
                done(task, _compute_and_store(task.func, task.kwargs, self.path(task.key)), n)
        elif todo:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(self.jobs, len(todo)), mp_context=ctx,
                                     initializer=_worker_init, initargs=(self.jax_cache,)) as pool:
                futures = {pool.submit(_compute_and_store, t.func, t.kwargs, self.path(t.key)): t for t in todo}
                for n, fut in enumerate(as_completed(futures), 1):
                    done(futures[fut], fut.result(), n)
        return {k: results[k] for k in keys}
