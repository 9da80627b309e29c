"""``zoo reproduce``: named entries that rerun a paper's experiment and write our numbers
beside the published ones.

    from zoo import reproductions as reproduce
    from zoo.validation.report.reproduction_report import write_reproduction_report
    reproduce.ENTRIES                      # name -> Entry
    result = reproduce.run(reproduce.ReproductionConfig("ggig-table1", reps=3), out="zoo-reproduce", jobs=2)
    write_reproduction_report(result)      # <out>/ggig-table1/table.md

A run returns a ``ReproductionResult`` (``validation/runs/reproduction_result.py``: our numbers,
the paper's, and a reproduced / NOT reproduced marker with its criterion) and stores it as
``<out>/<entry name>/table.json``; the report wing writes ``table.md`` from it. Each entry keeps
its finished units of work in ``<out>/<entry name>/cells/`` (see :mod:`.cells`), so an
interrupted run resumes where it stopped. Cells depend on the options that shape them
(sizes, grids, seed) through their keys; changing ``--reps`` only adds or reuses cells.
"""
from __future__ import annotations

import importlib
import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..validation.base.atomic import write_json_atomic
from ..validation.runs.limits import REPETITIONS
from ..validation.runs.reproduction_result import ReproductionResult
from . import bblr_fig7, bblr_kernel, bblr_table14, bblr_uci, bblr_w1a, ggig, gridrvm, horii
from .cells import CellsFailed, CellStore, CellTask
from .entry import Entry, Option, RunContext

__all__ = ["Option", "Entry", "ENTRIES", "RunContext", "ReproductionConfig", "ReproductionResult", "get_entry", "check",
           "run", "CellStore", "CellTask", "CellsFailed"]


def _entries() -> dict[str, Entry]:
    return {e.name: e for e in ggig.ENTRIES + horii.ENTRIES + gridrvm.ENTRIES + bblr_uci.ENTRIES + bblr_w1a.ENTRIES
            + bblr_kernel.ENTRIES + bblr_table14.ENTRIES + bblr_fig7.ENTRIES}


ENTRIES: dict[str, Entry] = _entries()


def get_entry(name: str) -> Entry:
    """The registered entry called ``name`` (a key of ``ENTRIES``); ValueError naming the
    available ones otherwise."""
    if name not in ENTRIES:
        raise ValueError(f"unknown reproduce entry {name!r}; available: {', '.join(ENTRIES)}")
    return ENTRIES[name]


#: the largest factor an entry multiplies the run's seed by to seed a cell (cv_seed = seed x
#: SEED_STRIDE + repetition), and so the largest --seed whose cells' seeds stay what numpy's
#: legacy generators and scikit-learn take (below 2**32) at every repetition
SEED_STRIDE = 100_003
MAX_SEED = (2**32 - 1 - REPETITIONS.maximum) // SEED_STRIDE


def check(name: str, *, reps: int | None = None, jobs: int = 1, seed: int = 0, **options) -> tuple[Entry, int, dict]:
    """(the entry, its repetitions, its options parsed): everything :func:`run` checks
    before the first cell, in the order a user reads them - the entry, --reps, --jobs,
    --seed, unknown options, each option's kind and bounds, and the entry's own relations
    (``Entry.checked``). ValueError in one line naming the problem; nothing is computed
    or written. ``zoo reproduce`` calls it before it checks its folders."""
    entry = get_entry(name)
    reps = entry.default_reps if reps is None else reps
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        raise ValueError(f"--reps must be a positive integer; got {reps!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be a positive integer; got {jobs!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"--seed must be an integer from 0 to {MAX_SEED} for zoo reproduce (cells seed numpy and "
                         f"scikit-learn with seed x {SEED_STRIDE} + repetition, which must stay below 2**32); "
                         f"got {seed!r}")
    known = {o.name for o in entry.options}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"entry {name!r} has no option {', '.join(unknown)}; its options: "
                         f"{', '.join(sorted(known)) or 'none'}")
    return entry, reps, entry.checked(reps, options)


@dataclass(frozen=True)
class ReproductionConfig:
    """One reproduction, described: the ``entry``'s name, its repetitions (None: the entry's
    default), the run's seed, and the entry's own ``options`` (CLI text or Python values; see
    ``ENTRIES[entry].options``; missing ones take their defaults). Checked when made
    (:func:`check`): ValueError in one line naming the problem, before anything runs."""

    entry: str
    reps: int | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        self.checked()

    def checked(self, jobs: int = 1) -> tuple[Entry, int, dict]:
        """(the entry, its repetitions, its options parsed), as :func:`check` gives them."""
        return check(self.entry, reps=self.reps, jobs=jobs, seed=self.seed, **self.options)


def run(config: ReproductionConfig, *, out: str = "zoo-reproduce", jobs: int = 1, jax_cache: str | None = None,
        log: Callable[[str], None] | None = None, progress: bool = False,
        device: str | None = None) -> ReproductionResult:
    """Run the reproduction ``config`` describes; store its result as ``<out>/<entry>/table.json``.

    jobs > 1: the cells run on a Dask LocalCluster of that many worker processes (see
    :mod:`.cells`), whose workers share the JAX compilation cache ``jax_cache`` if given.
    progress: a progress bar with an ETA on stderr. device: where the run computed, in words
    (``zoo.devices.describe``), stated under the settings. Returns the
    :class:`ReproductionResult`; its report (``table.md``) is written by
    ``validation/report/reproduction_report.write_reproduction_report``. Raises ValueError
    for a bad --jobs. Cells that raise do not end the run: the other cells of their step
    finish and are kept, and the result says which cells failed and why (``complete`` False,
    ``failed``: cell and reason) in place of the table (see :class:`.cells.CellsFailed`).
    """
    if not isinstance(config, ReproductionConfig):
        raise TypeError(f"run takes a ReproductionConfig, got {type(config).__name__}")
    entry, reps, parsed = config.checked(jobs)  # the options parsed again (cheap: no fit) and --jobs
    name, seed = config.entry, config.seed
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    out_dir = os.path.join(os.fspath(out), name)
    module, _, func = entry.run.partition(":")
    t0 = time.perf_counter()
    # the store's worker cluster (jobs > 1) is stopped when the entry ends, however it ends
    with CellStore(out_dir, jobs=jobs, jax_cache=jax_cache, log=log, progress=progress) as store:
        ctx = RunContext(entry=entry, reps=reps, seed=int(seed), options=parsed, store=store, out_dir=out_dir,
                         log=log)
        try:
            table = getattr(importlib.import_module(module), func)(ctx)
        except CellsFailed as err:
            table = _incomplete_table(err)
    result = ReproductionResult(
        entry=name, description=entry.description, settings={"reps": reps, "seed": int(seed), "jobs": jobs, **parsed},
        defaults=entry.default_sizes, cells_computed=store.computed, cells_reused=store.reused,
        wall_seconds_this_run=time.perf_counter() - t0, markdown=table["markdown"], table=table["json"],
        device=device, folder=out_dir)
    write_json_atomic(result.to_json(), os.path.join(out_dir, "table.json"))
    return result


def _incomplete_table(err: CellsFailed) -> dict:
    """What an entry writes when cells of one of its steps failed: no table (its numbers
    need every cell), the failed cells with their reasons, and what was kept. The entry
    stops at the step that failed, so the cells of later steps are not run yet."""
    rows = "\n".join(f"| {key} | {reason.replace('|', '/')} |" for key, reason in err.failed)
    markdown = (f"## NOT COMPLETE: {len(err.failed)} of {err.total} cells of a step failed\n\n"
                "No table: its numbers need every cell. The other cells of that step ran and are kept in "
                "`cells/`; the entry stopped at that step, so later steps did not run. The same command "
                "computes only the missing cells (a failed cell is not stored).\n\n"
                "| cell | reason |\n|---|---|\n" + rows + "\n")
    return {"markdown": markdown,
            "json": {"complete": False, "failed": [{"cell": key, "reason": reason} for key, reason in err.failed]}}
