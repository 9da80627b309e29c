"""Resumable units of work for ``zoo reproduce``.

A *cell* is one finished unit of work - one fit (with its own cross-validation) on one
split or repetition. Each is stored as ``<out>/cells/<key>.json``, written atomically, so
a killed run leaves only whole cells behind and a rerun with the same ``--out`` skips
every cell it finds. A cell file that cannot be read back (invalid JSON, or not a
finished cell) is named in a warning and computed again.

With ``--jobs`` above 1 the cells run on the Dask LocalCluster of ``zoo study``
(:func:`zoo.validation.runs.study.cluster_client`: one way of running grids in this project),
started on the first call of :meth:`CellStore.run` that has work for it and kept until
the store is closed. Its workers die with this process - on Ctrl-C, SIGTERM or
``kill -9`` alike - so an abandoned run leaves no worker behind still writing cells.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
from typing import Any, NamedTuple

from ..validation.base.signing import REPRODUCTION_CELL, unsigned, write_signed_json
from ..validation.runs.study import cluster_client, failure_line, read_cell_file

__all__ = ["CellTask", "CellStore", "CellsFailed", "cell_key"]


class CellsFailed(RuntimeError):
    """Cells of one :meth:`CellStore.run` call raised: every other cell of the call ran
    and was stored, and ``failed`` holds (key, one-line reason) of each that did not. A
    failed cell is not stored, so the next run of the entry computes it again (after a
    fix, or for a worker that was lost)."""

    def __init__(self, failed: list[tuple[str, str]], total: int):
        self.failed = list(failed)
        self.total = int(total)
        super().__init__(f"{len(self.failed)} of {self.total} cells failed; first: {self.failed[0][0]}: "
                         f"{self.failed[0][1]}")


def cell_key(prefix: str, kwargs: dict) -> str:
    """Readable prefix + a hash of every setting that shapes the cell, so that a run with
    other sizes or grids never picks up a cell computed under different settings."""
    import hashlib

    digest = hashlib.sha1(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:10]
    return f"{prefix}/{digest}"


class CellTask(NamedTuple):
    """What to compute for one cell.

    * key: unique name inside the entry's output folder ("/" separates levels).
    * func: "module:function" that returns a JSON-able dict; it must be importable in a
      fresh process, so a worker can run it.
    * kwargs: plain-data keyword arguments of ``func``.
    * cost: a rough relative cost, so that the longest cells start first.
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

    t0 = time.perf_counter()
    result = _resolve(func)(**kwargs)
    result = {**result, "cell_seconds": time.perf_counter() - t0}
    write_signed_json(result, path, REPRODUCTION_CELL)
    # read back what was written, so a computed cell looks exactly like a reused one
    with open(path, encoding="utf-8") as fh:
        return unsigned(json.load(fh))


def _cell_problem(result) -> str | None:
    """Why a stored cell is not a finished one: every cell ``_compute_and_store`` writes is
    a dict with its ``cell_seconds``."""
    if not isinstance(result, dict):
        return f"a {type(result).__name__}, not a cell"
    if "cell_seconds" not in result:
        return "no 'cell_seconds': not a finished cell"
    return None


class CellStore:
    """The cells of one entry run, kept in ``folder/cells``.

    ``computed`` and ``reused`` count the cells of this process's calls to :meth:`run`
    (a rerun over a finished folder computes none). ``progress``: a progress bar with an
    ETA on stderr (for a terminal); otherwise ``log`` gets a line with the ETA about
    every tenth of the cells. Use it as a context manager (or call :meth:`close`) so the
    worker cluster of ``jobs > 1`` is stopped.
    """

    def __init__(self, folder: str, *, jobs: int = 1, jax_cache: str | None = None, log=None,
                 progress: bool = False):
        self.folder = os.fspath(folder)
        self.cells_dir = os.path.join(self.folder, "cells")
        self.jobs = int(jobs)
        self.jax_cache = jax_cache
        self.progress = bool(progress)
        self.computed = 0
        self.reused = 0
        #: (key, one-line reason) of every cell that raised in this store's calls
        self.failed: list[tuple[str, str]] = []
        self._log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._cluster = contextlib.ExitStack()
        self._client = None
        os.makedirs(self.cells_dir, exist_ok=True)

    def __enter__(self) -> "CellStore":
        return self

    def __exit__(self, *exc) -> bool:
        # an exception (Ctrl-C included) reaches the cluster, which then kills its workers
        # at once instead of waiting for their cells
        self._client = None
        return self._cluster.__exit__(*exc)

    def close(self) -> None:
        """Stop the worker cluster of ``jobs > 1`` if one was started (what leaving a
        ``with`` block does)."""
        self.__exit__(None, None, None)

    def path(self, key: str) -> str:
        """The file of cell ``key``: ``<folder>/cells/<key>.json`` with each "/" of the key
        as "__". ValueError for an empty key, one that starts with "/" or holds ".."."""
        if not key or key.startswith("/") or ".." in key:
            raise ValueError(f"bad cell key {key!r}")
        return os.path.join(self.cells_dir, key.replace("/", "__") + ".json")

    def get(self, key: str) -> dict | None:
        """The stored cell, or None when it is missing or damaged (with a warning naming
        the file): the cell is then computed again."""

        return read_cell_file(self.path(key), _cell_problem, REPRODUCTION_CELL)

    def _workers(self):
        if self._client is None:
            # the workers' scratch beside the cells (cleared by the next run), not in /tmp
            scratch = os.path.join(os.path.dirname(self.cells_dir), "dask")
            self._client = self._cluster.enter_context(cluster_client(n_workers=self.jobs, jax_cache=self.jax_cache,
                                                                      scratch=scratch))
        return self._client

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
        if not todo:
            return {k: results[k] for k in keys}
        self._log(f"{what}: {len(todo)} to compute, {len(results)} found on disk")
        todo.sort(key=lambda t: -t.cost)
        failed: list[tuple[str, str]] = []
        with _Progress(what, len(todo), self.progress, self._log) as bar:
            def done(task, result):
                results[task.key] = result
                self.computed += 1
                bar.update()

            def fail(task, err):
                # one bad cell (a bad setting, a fit that raises, a lost worker) must not
                # cost the others: it is named, and the rest of the call goes on
                failed.append((task.key, failure_line(err)))
                self._log(f"  cell {task.key} failed: {failed[-1][1]}")
                bar.update()

            if self.jobs <= 1 or len(todo) <= 1:
                for task in todo:
                    try:
                        result = _compute_and_store(task.func, task.kwargs, self.path(task.key))
                    except Exception as err:  # noqa: BLE001  (reported as the cell's failure)
                        fail(task, err)
                    else:
                        done(task, result)
            else:
                from distributed import as_completed

                client = self._workers()
                # the costliest first: Dask runs the highest priority first
                futures = {client.submit(_compute_and_store, t.func, t.kwargs, self.path(t.key), pure=False,
                                         priority=len(todo) - n): t for n, t in enumerate(todo)}
                for fut in as_completed(futures):
                    try:
                        result = fut.result()
                    except Exception as err:  # noqa: BLE001  (a worker's error, or a lost worker)
                        fail(futures[fut], err)
                    else:
                        done(futures[fut], result)
        self.failed.extend(failed)
        if failed:
            raise CellsFailed(failed, len(keys))
        return {k: results[k] for k in keys}


class _Progress:
    """A tqdm bar (elapsed, ETA) when ``bar``; else a log line with elapsed time and ETA
    about every tenth of the cells (logs and pipes, where a bar would be noise)."""

    def __init__(self, what: str, total: int, bar: bool, log):
        self.what, self.total, self.log, self.n = what, total, log, 0
        self.step = max(1, total // 10)
        self.t0 = time.perf_counter()
        self.bar = None
        if bar:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=what, unit="cell", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False

    def update(self) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.n % self.step == 0 or self.n == self.total:
            elapsed = time.perf_counter() - self.t0
            eta = elapsed / self.n * (self.total - self.n)
            self.log(f"  {self.what}: {self.n}/{self.total} done (elapsed {elapsed:.0f} s, ETA {eta:.0f} s)")
