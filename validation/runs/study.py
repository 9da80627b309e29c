"""Studies: grids of comparisons, SBC replicates and defect batteries, run on Dask.

A study is a small TOML file (``validation/runs/studies/example.toml`` is the shipped one)::
    name = "example"

    [[compare]]                 # every model x data x split is one cell
    models = ["pcvm"]
    data = ["ripley", "banana"]
    splits = [0, 1]
    engines = ["laplace", "ep"] # optional: the model's default engines
    params = { width = 0.7 }    # optional --param values

    [[sbc]]                     # every engine x replicate is one cell
    model = "pcvm"
    engines = ["ep", "laplace"]
    replicates = 2              # independent SBC runs (seeds 0, 1, ...)
    sims = 100                  # simulations per run

    [[defects]]                 # one cell: the battery of one engine
    model = "pcvm"
    engine = "ep"
    defects = ["cov x 0.5", "cov x 2"]  # optional: all that apply
    datasets = 100
    sbc_replicates = 20
    sbc_sims = 100
    problem = { n = 60, n_basis = 6 }   # optional: the SBC design (sbc.problem_for)
    reference_samplers = ["pg-gibbs"]   # optional: default, the model's reference chain

The cells run on Dask distributed (:func:`run_study`): a ``LocalCluster`` of this
machine's cores by default, or an existing cluster given by its scheduler address. Each
cell's result is written atomically to ``OUT/cells/<kind>-<key>.json``, the key a digest
of everything that determines the cell (its description, the settings, and the code of
the modules that compute it). A rerun of the same command skips every cell whose file
exists, so a study killed at any moment (``kill -9`` included) loses no finished cell and
redoes none; work inside a cell (SBC simulations, battery data sets) is also kept and
resumed. A worker that dies mid-cell is replaced by the scheduler, which reruns its cell
elsewhere (Dask's own retry of lost tasks). A cell file that cannot be read back (invalid
JSON, or not a finished cell of this key) is named in a warning and computed again. When
every cell is done, the report wing's ``study_report.write_study_report`` gathers them in
``OUT/report.md`` (with SBC figures under ``OUT/figures/``); ``zoo study`` writes it.
:func:`read_study` reads a stored study back (the cells ``study.json`` lists) for a report
written again without running anything.

The LocalCluster's workers live no longer than the process that started them
(:func:`cluster_client`, which ``zoo reproduce --jobs N`` shares): on Ctrl-C the driver
kills them at once; on ``kill -9`` or SIGTERM of the driver they exit by themselves (Dask's
own pipe from the driver, and Linux's parent-death signal for a worker stuck in C code).
Workers of an external cluster (``--scheduler``) belong to that cluster and keep running.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import zoo

from ...inference.contracts import EngineReturnError
from ...inference.posterior import ApproximationFailed
from ..base.atomic import write_json_atomic
from ..base.signing import STUDY_CELL, read_signed_json, write_signed_json
from ..base.code_digest import code_digest
from ..base.processes import die_with_parent
from ..base.result_format import frozen, thawed
from .fence import DEFAULT_ENGINE_TIME_LIMIT, check_time_limit
from .engines import user_modules
# what a study can run: its kinds of cells, one table (study_kinds.py)
from .study_kinds import STUDY_KINDS, is_int, unknown_key

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

#: bump when a cell's stored content changes meaning
STUDY_FORMAT = 1


@dataclass(frozen=True)
class Cell:
    """One unit of work: its kind and a JSON-able description of what to compute."""

    kind: str
    spec: tuple[tuple[str, Any], ...]

    @property
    def params(self) -> dict[str, Any]:
        """The description as a plain dict, its tuples back to lists: what the cell's kind
        computes from, as the study file gave it."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.spec}

    def key(self) -> str:
        """Digest of the description and of the code that computes this kind of cell."""

        kind = STUDY_KINDS[self.kind]
        # a user's engine's or model's own module is digested too: its stored cells go stale with its code
        modules = kind.code_modules + user_modules([*kind.engines(self.params), self.params.get("model")])
        payload = {"format": STUDY_FORMAT, "kind": self.kind, "cell": self.params, "code": code_digest(modules)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def label(self) -> str:
        """The cell in a few words, as its kind words it (``compare pcvm ripley split 0``), for
        progress lines, failures and the report."""
        return STUDY_KINDS[self.kind].label(self.params)


def frozen_params(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))


@dataclass(frozen=True)
class CellResult:
    """A finished (or failed) cell: its ``cell`` (kind and description), its ``key``, the
    ``seconds`` it took (None: not measured, a cell that failed in Dask), and either
    ``result`` - the object its kind's run returned (the kind's ``result_type``:
    ``ComparisonResult``, ``SBCResult``, ``BatteryResult``) - or ``failed``, the reason in
    one line. ``to_json`` / ``from_json`` are the layout of its file ``cells/<kind>-<key>.json``:
    the kind, the description, the key, the seconds and the result under the kind's
    ``payload`` name (or ``failed``)."""

    cell: Cell
    key: str
    seconds: float | None
    result: Any = None
    failed: str | None = None

    def __post_init__(self):
        if (self.result is None) == (self.failed is None):
            raise ValueError("a cell result holds either a result or the reason it failed, not both or neither")

    @property
    def kind(self) -> str:
        """The cell's kind: ``compare``, ``sbc`` or ``defects``."""
        return self.cell.kind

    @property
    def params(self) -> dict[str, Any]:
        """The cell's description as a plain dict (:attr:`Cell.params`)."""
        return self.cell.params

    def label(self) -> str:
        """The cell in a few words (:meth:`Cell.label`)."""
        return self.cell.label()

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the cell's file ``cells/<kind>-<key>.json``: the kind, the
        description, the key and the seconds, then the result's own JSON under its kind's
        ``payload`` name (numpy values made plain) or the one-line ``failed`` reason."""
        out = {"kind": self.kind, "cell": self.params, "key": self.key, "seconds": self.seconds}
        if self.failed is not None:
            return {**out, "failed": self.failed}
        payload = json.loads(json.dumps(self.result.to_json(), default=_jsonable))
        return {**out, STUDY_KINDS[self.kind].payload: payload}

    @classmethod
    def from_json(cls, d: Any) -> "CellResult":
        """The cell a stored JSON object holds; ValueError in one line naming what is wrong
        (not a cell, a kind this zoo does not run, a result its kind's reader refuses)."""
        if not isinstance(d, dict):
            raise ValueError(f"a {type(d).__name__}, not a cell")
        missing = [k for k in ("kind", "cell", "key") if k not in d]
        if missing:
            raise ValueError(f"not a cell: it lacks {', '.join(map(repr, missing))}")
        kind = STUDY_KINDS.get(d["kind"])
        if kind is None:
            raise ValueError(f"a cell of kind {d['kind']!r}, which this zoo does not run")
        cell = Cell(d["kind"], frozen_params(d["cell"]))
        if isinstance(d.get("failed"), str):
            return cls(cell, d["key"], d.get("seconds"), failed=d["failed"])
        if kind.payload not in d:
            raise ValueError(f"no {kind.payload!r}")
        return cls(cell, d["key"], d.get("seconds"), result=kind.result_type.from_json(d[kind.payload]))


@dataclass(frozen=True)
class StudyResult:
    """What :func:`run_study` returns: the study's ``config`` (:class:`StudyConfig`), its ``cells`` in order
    (:class:`CellResult`), how many were ``ran`` now and ``reused`` from an earlier run, the
    study's folder and how the device was chosen (for the report)."""

    config: StudyConfig
    cells: tuple[CellResult, ...]
    ran: int
    reused: int
    out_dir: str
    device: str | None = None

    @property
    def failed(self) -> list[tuple[str, str]]:
        """(cell label, reason) of every cell that failed."""
        return [(c.label(), c.failed) for c in self.cells if c.failed is not None]


def _jsonable(obj):
    # what a run's to_json may leave in numpy: its plain Python value (or its words)
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


# --------------------------------------------------------------------------------------
# The study file's schema: every key of every block, with its type, checked before any
# cluster starts - a typo ("split" for "splits") must not quietly run another study
# --------------------------------------------------------------------------------------
_TYPE_WORDS = {"str": "a string", "int>=1": "a positive integer", "int>=0": "a non-negative integer",
               "list[str]": "a list of strings", "list[int]": "a list of integers",
               "table": "a table ({ key = value, ... })"}


def _fits(value, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind.startswith("int>="):
        return is_int(value) and value >= int(kind[len("int>="):])
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "list[int]":
        return isinstance(value, list) and all(is_int(v) for v in value)
    return isinstance(value, dict)


def check_schema(config: dict[str, Any], *, where: str = "study") -> None:
    """ValueError naming the first key of a study file that is unknown (with the nearest
    known one), missing, or of the wrong type (a string where a list belongs, ...)."""
    for key in config:
        if key not in ("name", *STUDY_KINDS):
            raise ValueError(unknown_key(key, ("name", *STUDY_KINDS), where))
    if "name" in config and not isinstance(config["name"], str):
        raise ValueError(f"{where}: name must be a string, got {config['name']!r}")
    for kind, study_kind in STUDY_KINDS.items():
        blocks = config.get(kind, [])
        if not (isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)):
            raise ValueError(f"{where}: {kind} must be [[{kind}]] blocks (tables), got {blocks!r}")
        for i, block in enumerate(blocks):
            here = f"{where}: [[{kind}]] block {i + 1}"
            for key, value in block.items():
                if key not in study_kind.schema:
                    raise ValueError(unknown_key(key, study_kind.schema, here))
                expected = study_kind.schema[key][0]
                if not _fits(value, expected):
                    raise ValueError(f"{here}: {key} must be {_TYPE_WORDS[expected]}, got {value!r}")
            missing = [k for k, (_, required) in study_kind.schema.items() if required and k not in block]
            if missing:
                raise ValueError(f"{here} lacks {', '.join(map(repr, missing))}")


@dataclass(frozen=True)
class StudyConfig:
    """A study, described: its ``name`` (None: unnamed) and its ``blocks``, kind -> that kind's
    ``[[kind]]`` tables in the file's order. Made by :meth:`from_dict` or :func:`load_config`,
    which check it against the schema first; frozen all the way down. ``to_json`` is the
    study file's own layout (what ``study.json`` records)."""

    name: str | None
    blocks: Mapping[str, tuple[Mapping[str, Any], ...]]

    def __post_init__(self):
        object.__setattr__(self, "blocks", frozen(self.blocks))

    @classmethod
    def from_dict(cls, config: Mapping[str, Any], *, where: str = "study") -> "StudyConfig":
        """The study a parsed TOML file (or any mapping of its layout) describes; ValueError
        naming the first key that is unknown, missing or of the wrong type."""
        if isinstance(config, StudyConfig):
            return config
        if not isinstance(config, Mapping):
            raise ValueError(f"{where}: a study is a table of [[block]]s, got {type(config).__name__}")
        config = thawed(config)
        check_schema(config, where=where)
        return cls(config.get("name"), {kind: tuple(config[kind]) for kind in STUDY_KINDS if kind in config})

    def to_json(self) -> dict[str, Any]:
        """The study file's own layout as plain JSON (what ``study.json`` records): its
        ``name`` where it has one, and each kind's list of ``[[kind]]`` tables."""
        return thawed({**({"name": self.name} if self.name is not None else {}), **self.blocks})


def load_config(path) -> StudyConfig:
    """Read a study TOML file (or the name of a shipped one, e.g. "example")."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"study config {path!r} is a folder; give a .toml file (or the name of a shipped study)")
    if not os.path.exists(path):
        shipped = os.path.join(os.path.dirname(__file__), "studies", f"{path}.toml")
        if os.path.exists(shipped):
            path = shipped
        else:
            raise ValueError(f"study config {path!r} not found (nor a shipped study of that name)")
    with open(path, "rb") as fh:
        try:
            config = tomllib.load(fh)
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            # a binary file is not TOML either: the error names the file, as a syntax error does
            raise ValueError(f"study config {path}: not a TOML file: {err}") from err
    return StudyConfig.from_dict(config, where=f"study config {path}")


def expand(config: StudyConfig | Mapping[str, Any]) -> list[Cell]:
    """Every cell of the study (a :class:`StudyConfig`, or a mapping of a study file's layout),
    in a stable order; checked against the schema and the registry, so a typo fails before
    anything runs."""
    config = StudyConfig.from_dict(config)
    cells: list[Cell] = []
    for kind in STUDY_KINDS.values():
        for i, block in enumerate(config.blocks.get(kind.name, ())):
            # the kinds read plain JSON (a params table is serialized into the cell's key)
            cells += [Cell(kind.name, frozen_params(params))
                      for params in kind.expand(thawed(block), f"study: [[{kind.name}]] block {i + 1}")]
    if not cells:
        raise ValueError("study: the config names no cells (add "
                         + ", ".join(f"[[{k}]]" for k in STUDY_KINDS) + " blocks)")
    return cells


def cell_path(out_dir, cell: Cell) -> str:
    """Where ``cell``'s result is stored in the study's folder ``out_dir``:
    ``cells/<kind>-<key>.json``, its key (:meth:`Cell.key`) a digest of its description and
    of the code that computes it."""
    return _cell_file(out_dir, cell.kind, cell.key())


def _cell_file(out_dir, kind: str, key: str) -> str:
    return os.path.join(os.fspath(out_dir), "cells", f"{kind}-{key}.json")


#: errors that the same cell would raise again on every try (a bad value, a user engine
#: that returns garbage or cannot be imported, an approximation that does not exist here):
#: the cell is recorded as failed with its one-line reason and not retried. Anything else
#: (a killed worker, a full disk) is retried by Dask and, if it persists, reported as
#: failed without being stored, so that the next run of the study tries the cell again.
DETERMINISTIC_ERRORS = (ValueError, TypeError, LookupError, ArithmeticError, ImportError, EngineReturnError,
                        ApproximationFailed)


def failure_line(err: BaseException) -> str:
    """An exception as one line: its type and its message's first line."""
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def run_cell(cell: Cell, out_dir: str, engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT) -> CellResult:
    """Compute one cell (in a Dask worker) and write its result atomically. Returns it; a
    cell that raises one of ``DETERMINISTIC_ERRORS`` is stored and returned as failed
    (``failed``: the reason in one line), so that one bad cell does not end the study."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    t0 = time.perf_counter()
    try:
        result, failed = _compute_cell(cell, out_dir, engine_time_limit), None
    except DETERMINISTIC_ERRORS as err:
        result, failed = None, failure_line(err)
    out = CellResult(cell, cell.key(), time.perf_counter() - t0, result=result, failed=failed)
    write_signed_json(out.to_json(), cell_path(out_dir, cell), STUDY_CELL)
    return out


def _compute_cell(cell: Cell, out_dir: str, engine_time_limit: float | None):
    """The cell's result, computed by its kind (the object its run returns)."""
    return STUDY_KINDS[cell.kind].compute(cell.params, os.path.join(out_dir, "work"), engine_time_limit)


class _Progress:
    """done/total with the elapsed time and an ETA from the mean time per finished cell."""

    def __init__(self, total: int, done: int, stream=None, enabled: bool = True):
        self.total, self.done, self.start_done = total, done, done
        self.t0 = time.perf_counter()
        self.stream, self.enabled = stream, enabled

    def update(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        ran = self.done - self.start_done
        eta = elapsed / ran * (self.total - self.done) if ran else float("nan")
        # sys.stderr looked up now, not at import, so a redirected stream is honoured
        print(f"[{self.done}/{self.total}] {label} (elapsed {elapsed:.0f} s, ETA {eta:.0f} s)",
              file=self.stream or sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# The cluster (shared with ``zoo reproduce --jobs N``: one way of running grids)
# --------------------------------------------------------------------------------------
_DRIVER_PID_ENV = "ZOO_DASK_DRIVER_PID"
_JAX_CACHE_ENV = "ZOO_DASK_JAX_CACHE"


def dask_setup(worker) -> None:
    """Start-up of every worker of a LocalCluster of :func:`cluster_client` (its Dask
    ``preload``): die with the driver, leave Ctrl-C to the driver, and share the driver's
    JAX compilation cache when it has one."""
    # Ctrl-C in a terminal reaches the whole process group; the driver stops the workers
    # itself, and a KeyboardInterrupt inside a worker would only print one more traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(int(os.environ.get(_DRIVER_PID_ENV) or 0))
    if os.environ.get(_JAX_CACHE_ENV):
        zoo.enable_compilation_cache(os.environ[_JAX_CACHE_ENV])


@contextlib.contextmanager
def _quiet_distributed():
    """Dask logs every worker it loses as a warning; while we stop them on purpose, that is
    noise after the one line the user is owed."""
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _stop_now(cluster, client) -> None:
    """Stop a LocalCluster's workers at once (the run is being abandoned): their cells in
    flight are lost either way, and a graceful close waits for them (seconds to minutes)."""
    with _quiet_distributed():
        for nanny in list(cluster.workers.values()):
            pid = getattr(getattr(nanny, "process", None), "pid", None)
            if hasattr(nanny, "close_gracefully"):
                nanny.close_gracefully()  # the nanny must not start a replacement
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            client.close(timeout=5)
        with contextlib.suppress(Exception):
            cluster.close(timeout=5)


@contextlib.contextmanager
def cluster_client(*, n_workers: int | None = None, scheduler: str | None = None, client=None,
                   jax_cache: str | None = None, scratch: str | None = None):
    """A ``distributed.Client`` to run cells on, closed on leaving.

    client: use this one (the caller owns it). scheduler: connect to an existing cluster.
    Otherwise a LocalCluster of ``n_workers`` single-threaded worker processes (default:
    the number of cores), each started by ``dask_setup``: the workers die with this
    process (``kill -9`` and SIGTERM included), ignore Ctrl-C, and use the JAX compilation
    cache ``jax_cache`` if given. An exception or Ctrl-C inside the block kills the
    workers at once instead of waiting for their cells. scratch: the folder of the workers'
    own scratch space (None: Dask's default, under the system's temporary folder). A
    killed study's scratch stays there until the next LocalCluster on the same folder
    clears what no live worker holds, so a study keeps it inside its output folder.
    """
    from distributed import Client, LocalCluster

    if client is not None:
        yield client
        return
    if scheduler is not None:
        with Client(scheduler) as remote:
            yield remote
        return
    env = {_DRIVER_PID_ENV: str(os.getpid())}
    if jax_cache:
        env[_JAX_CACHE_ENV] = os.fspath(jax_cache)
    cluster = LocalCluster(n_workers=n_workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                           dashboard_address=None, preload=[__name__], env=env, local_directory=scratch)
    try:
        local = Client(cluster)
    except BaseException:
        _stop_now(cluster, None)
        raise
    try:
        yield local
    except BaseException:
        _stop_now(cluster, local)
        raise
    # all cells are in: a graceful close, whose only complaint is a worker slower than the
    # nanny's 4 s to exit (it is then killed, losing nothing; seen under load)
    with _quiet_distributed():
        local.close()
        cluster.close()


def read_cell_file(path: str, check, domain: str = STUDY_CELL, *, stacklevel: int = 3) -> dict | None:
    """A finished cell's stored result, or None if there is none; a file that is not signed
    with this user's key as a cell of ``domain`` at this place (base/signing.py: a hand-edited
    verdict, a cell copied from elsewhere, damage), or whose content ``check`` rejects, is
    named in a warning and treated as missing, so the cell is computed again and the file
    replaced."""
    result = read_signed_json(path, domain, "stored cell")
    if result is None:
        return None
    problem = check(result)
    if problem:
        warnings.warn(f"damaged cell file {path} ({problem}); computing the cell again", stacklevel=stacklevel)
        return None
    return result


def _cell_problem(kind: str, key: str):
    """The check :func:`read_cell_file` applies to the stored cell of ``kind`` and ``key``."""
    def check(result) -> str | None:
        if not isinstance(result, dict):
            return f"a {type(result).__name__}, not a cell"
        if result.get("key") != key or result.get("kind") != kind:
            return "not the cell of this key"
        try:
            CellResult.from_json(result)  # a result its kind's reader refuses is no finished cell
        except ValueError as err:
            return str(err)
        return None
    return check


def _study_cell_problem(cell: Cell):
    return _cell_problem(cell.kind, cell.key())


def _stored_cell(out_dir, kind: str, key: str) -> CellResult | None:
    """The stored cell ``cells/<kind>-<key>.json`` of the study folder ``out_dir``, None where
    there is none to trust (:func:`read_cell_file` with :func:`_cell_problem`)."""
    found = read_cell_file(_cell_file(out_dir, kind, key), _cell_problem(kind, key), stacklevel=4)
    return None if found is None else CellResult.from_json(found)


def read_cell(out_dir, cell: Cell) -> CellResult | None:
    """The stored result of ``cell`` (keyed by this code) in the study folder ``out_dir``,
    None where there is none to trust."""
    return _stored_cell(out_dir, cell.kind, cell.key())


def run_study(config, out_dir, *, scheduler: str | None = None, n_workers: int | None = None,
              progress: bool = True, client=None, jax_cache: str | None = None,
              device: str | None = None,
              engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT) -> StudyResult:
    """Run every cell of ``config`` (a :class:`StudyConfig`, a TOML path or the name of a
    shipped study, or a mapping of a study file's layout) not yet done, on Dask.

    scheduler: address of an existing Dask scheduler ("tcp://host:8786"); None starts a
    LocalCluster of ``n_workers`` single-threaded worker processes (default: the number of
    cores; see :func:`cluster_client`). client: an existing ``distributed.Client`` (tests).
    jax_cache: the JAX compilation cache folder the LocalCluster's workers share (None:
    none). device: how the command line chose the device (zoo/devices.py), for the report.
    engine_time_limit: the most seconds one fit of an engine may take in any cell
    (validation/runs/fence.py; None: no limit); not part of the cells' keys.
    A cell that fails is recorded with its reason and the others go on. Returns the
    :class:`StudyResult`; the report is written from it by
    ``validation/report/study_report.write_study_report`` (as ``zoo study`` does).
    """
    from distributed import as_completed

    limit = check_time_limit(engine_time_limit, "engine_time_limit")
    if isinstance(config, (str, os.PathLike)):
        config = load_config(config)
    config = StudyConfig.from_dict(config)
    cells = expand(config)
    out_dir = os.path.abspath(os.fspath(out_dir))
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)
    write_json_atomic({"config": config.to_json(), "cells": [c.params | {"kind": c.kind, "key": c.key()} for c in cells],
                       "device": device}, os.path.join(out_dir, "study.json"))
    results: dict[int, CellResult] = {}
    for i, cell in enumerate(cells):
        found = read_cell(out_dir, cell)
        if found is not None:
            results[i] = found
    todo = [i for i in range(len(cells)) if i not in results]
    bar = _Progress(len(cells), len(results), enabled=progress)
    if todo:
        # the workers' scratch in the study's own folder, not /tmp: what a killed study leaves
        # there is cleared by the next run (Dask removes what no live worker holds)
        with cluster_client(n_workers=n_workers, scheduler=scheduler, client=client, jax_cache=jax_cache,
                            scratch=os.path.join(out_dir, "work", "dask")) as c:
            futures = {c.submit(run_cell, cells[i], out_dir, limit, key=f"zoo-cell-{cells[i].key()}", pure=False,
                                retries=2): i for i in todo}
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as err:  # noqa: BLE001 - still failing after Dask's retries: reported, not stored
                    results[i] = CellResult(cells[i], cells[i].key(), None,
                                            failed=failure_line(err) + " (after Dask's retries; not stored: the "
                                                                       "next run tries the cell again)")
                bar.update(cells[i].label() + (" FAILED" if results[i].failed is not None else ""))
    return StudyResult(config=config, cells=tuple(results[i] for i in range(len(cells))), ran=len(todo),
                       reused=len(cells) - len(todo), out_dir=out_dir, device=device)


def read_study(out_dir, *, device: str | None = None) -> StudyResult:
    """The study stored in ``out_dir`` by :func:`run_study`, read back without running anything:
    its config and its cells as ``study.json`` lists them (kind, description and key: the cells
    that run computed, whatever code reads them now), each cell's result from its file, trusted
    only when signed by this user as that cell (base/signing.py) and read by its kind's reader.
    A cell without such a file is returned as failed with that reason. device: how the device
    was chosen, for the report (None: as ``study.json`` recorded it). For
    ``study_report.report_study``: a stored study reported again."""
    path = os.path.join(os.fspath(out_dir), "study.json")
    try:
        with open(path, encoding="utf-8") as fh:
            stored = json.load(fh)
        config = StudyConfig.from_dict(stored["config"], where=f"stored study {path}")
        listed = [(c["kind"], c["key"], {k: v for k, v in c.items() if k not in ("kind", "key")})
                  for c in stored["cells"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: not a stored study ({failure_line(err)})") from None
    cells, found = [], 0
    for kind, key, params in listed:
        result = _stored_cell(out_dir, kind, key)
        found += result is not None
        cells.append(result if result is not None else CellResult(
            Cell(kind, frozen_params(params)), key, None,
            failed="no finished cell file (not run yet, or damaged): run the study"))
    return StudyResult(config=config, cells=tuple(cells), ran=0, reused=found,
                       out_dir=os.path.abspath(os.fspath(out_dir)),
                       device=device if device is not None else stored.get("device"))


__all__ = ["Cell", "CellResult", "StudyConfig", "StudyResult", "read_study", "read_cell", "load_config", "expand", "run_cell",
           "run_study", "cell_path", "cluster_client", "die_with_parent", "read_cell_file"]
