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

The LocalCluster's workers live no longer than the process that started them
(:func:`cluster_client`, which ``zoo reproduce --jobs N`` shares): on Ctrl-C the driver
kills them at once; on ``kill -9`` or SIGTERM of the driver they exit by themselves (Dask's
own pipe from the driver, and Linux's parent-death signal for a worker stuck in C code).
Workers of an external cluster (``--scheduler``) belong to that cluster and keep running.
"""
from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import logging
import os
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

import zoo

from ... import data as datasets
from ...inference.contracts import EngineReturnError
from ...inference.posterior import ApproximationFailed
from ...models.checks import check_seed
from ..base.atomic import write_json_atomic
from ..base.signing import STUDY_CELL, read_signed_json, write_signed_json
from ..base.code_digest import code_digest
from ..base.processes import die_with_parent
from ..records import registry
from .compare import CompareConfig, compare, default_references
from .fence import DEFAULT_ENGINE_TIME_LIMIT, check_time_limit
from .battery import BatterySettings, run_battery
from .engines import is_user_engine, resolve_entry, user_modules
from .limits import (BASIS_FUNCTIONS, CHAIN_DRAWS, DATASETS, DESIGN_POINTS, DRAWS, REPLICATES, SIMULATIONS,
                     check_count)
from .sbc import run_sbc
from .sbc_simulation import SBCSettings

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

#: bump when a cell's stored content changes meaning
STUDY_FORMAT = 1
KINDS = ("compare", "sbc", "defects")


@dataclass(frozen=True)
class Cell:
    """One unit of work: its kind and a JSON-able description of what to compute."""

    kind: str
    spec: tuple[tuple[str, Any], ...]

    @property
    def params(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.spec}

    def key(self) -> str:
        """Digest of the description and of the code that computes this kind of cell."""

        p = self.params
        # a user's engine's own module is digested too: its stored cells go stale with its code
        named = p["engines"] if self.kind == "compare" else [p["engine"]]
        modules = {"compare": ("zoo.validation.runs.compare",), "sbc": ("zoo.validation.runs.sbc",),
                   "defects": ("zoo.validation.runs.battery",)}[self.kind] + user_modules(named)
        payload = {"format": STUDY_FORMAT, "kind": self.kind, "cell": self.params, "code": code_digest(modules)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def label(self) -> str:
        p = self.params
        if self.kind == "compare":
            return f"compare {p['model']} {p['data']} split {p['split']}"
        if self.kind == "sbc":
            return f"sbc {p['model']} {p['engine']} replicate {p['replicate']}"
        return f"defects {p['model']} {p['engine']}"


def frozen_params(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items()))


# --------------------------------------------------------------------------------------
# The study file's schema: every key of every block, with its type, checked before any
# cluster starts - a typo ("split" for "splits") must not quietly run another study
# --------------------------------------------------------------------------------------
#: block kind -> key -> (type, required); types: "str", "int>=1", "int>=0", "list[str]",
#: "list[int]", "table"
SCHEMA: dict[str, dict[str, tuple[str, bool]]] = {
    "compare": {"models": ("list[str]", True), "engines": ("list[str]", False), "data": ("list[str]", False),
                "splits": ("list[int]", False), "params": ("table", False)},
    "sbc": {"model": ("str", True), "engines": ("list[str]", False), "replicates": ("int>=1", False),
            "sims": ("int>=1", False), "draws": ("int>=1", False)},
    "defects": {"model": ("str", True), "engine": ("str", True), "defects": ("list[str]", False),
                "datasets": ("int>=1", False), "sbc_replicates": ("int>=0", False), "sbc_sims": ("int>=1", False),
                "reference_draws": ("int>=1", False), "reference_samplers": ("list[str]", False),
                "problem": ("table", False)},
}
_TYPE_WORDS = {"str": "a string", "int>=1": "a positive integer", "int>=0": "a non-negative integer",
               "list[str]": "a list of strings", "list[int]": "a list of integers",
               "table": "a table ({ key = value, ... })"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fits(value, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind.startswith("int>="):
        return _is_int(value) and value >= int(kind[len("int>="):])
    if kind == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "list[int]":
        return isinstance(value, list) and all(_is_int(v) for v in value)
    return isinstance(value, dict)


def _unknown_key(key: str, known, where: str) -> str:
    near = difflib.get_close_matches(key, list(known), n=1)
    return (f"{where}: unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
            + f"; known: {', '.join(known)}")


def check_schema(config: dict[str, Any], *, where: str = "study") -> None:
    """ValueError naming the first key of a study file that is unknown (with the nearest
    known one), missing, or of the wrong type (a string where a list belongs, ...)."""
    for key in config:
        if key not in ("name", *KINDS):
            raise ValueError(_unknown_key(key, ("name", *KINDS), where))
    if "name" in config and not isinstance(config["name"], str):
        raise ValueError(f"{where}: name must be a string, got {config['name']!r}")
    for kind in KINDS:
        blocks = config.get(kind, [])
        if not (isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)):
            raise ValueError(f"{where}: {kind} must be [[{kind}]] blocks (tables), got {blocks!r}")
        for i, block in enumerate(blocks):
            here = f"{where}: [[{kind}]] block {i + 1}"
            for key, value in block.items():
                if key not in SCHEMA[kind]:
                    raise ValueError(_unknown_key(key, SCHEMA[kind], here))
                expected = SCHEMA[kind][key][0]
                if not _fits(value, expected):
                    raise ValueError(f"{here}: {key} must be {_TYPE_WORDS[expected]}, got {value!r}")
            missing = [k for k, (_, required) in SCHEMA[kind].items() if required and k not in block]
            if missing:
                raise ValueError(f"{here} lacks {', '.join(map(repr, missing))}")


def load_config(path) -> dict[str, Any]:
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
    check_schema(config, where=f"study config {path}")
    return config


def expand(config: dict[str, Any]) -> list[Cell]:
    """Every cell of the study, in a stable order; checked against the schema and the
    registry, so a typo fails before anything runs."""
    check_schema(config)

    cells: list[Cell] = []
    for block in config.get("compare", []):
        for model in block["models"]:
            record = registry.get_model(model)
            engines = block.get("engines", list(record.default_engines))
            for e in engines:
                resolve_entry(record, e)  # a user's module:function is imported and checked here
            record.check_params(block.get("params", {}))
            for data in block.get("data", [record.default_data]):
                for split in block.get("splits", [0]):
                    _check_data(data, split)
                    cells.append(Cell("compare", frozen_params({
                        "model": model, "data": data, "split": int(split), "engines": list(engines),
                        "params": json.dumps(block.get("params", {}), sort_keys=True)})))
    for i, block in enumerate(config.get("sbc", [])):
        model = block["model"]
        record = registry.get_model(model)
        _check_sbc_counts(block, f"study: [[sbc]] block {i + 1}")
        for engine in block.get("engines", list(record.engine_names)):
            if is_user_engine(engine):
                resolve_entry(record, engine)
            elif not record.has_engine(engine) and engine not in record.sampler_names:
                raise ValueError(f"study: {model} has no engine or sampler {engine!r}")
            for r in range(int(block.get("replicates", 1))):
                cells.append(Cell("sbc", frozen_params({"model": model, "engine": engine, "replicate": r,
                                                  "sims": int(block.get("sims", 100)),
                                                  "draws": int(block.get("draws", 99))})))
    for i, block in enumerate(config.get("defects", [])):
        model = block["model"]
        engine = block["engine"]
        resolve_entry(registry.get_model(model), engine)
        _check_battery_counts(block, f"study: [[defects]] block {i + 1}")
        samplers = list(block.get("reference_samplers", []))
        if samplers:
            default_references(model, tuple(samplers))  # an unknown sampler fails here
        cells.append(Cell("defects", frozen_params({
            "model": model, "engine": engine, "defects": list(block.get("defects", [])),
            "datasets": int(block.get("datasets", 100)), "sbc_replicates": int(block.get("sbc_replicates", 20)),
            "sbc_sims": int(block.get("sbc_sims", 100)), "reference_draws": int(block.get("reference_draws", 1000)),
            "reference_samplers": samplers, "problem": json.dumps(block.get("problem", {}), sort_keys=True)})))
    if not cells:
        raise ValueError("study: the config names no cells (add [[compare]], [[sbc]] or [[defects]] blocks)")
    return cells


def _check_sbc_counts(block: dict[str, Any], where: str) -> None:
    """ValueError in one line, naming the block, for an SBC block's counts that no run
    takes: below SBC's own minimums (SBCSettings), or past the bounds of
    ``validation/runs/limits.py`` (``sims = 100000000000000000`` started running)."""
    sims, draws = int(block.get("sims", 100)), int(block.get("draws", 99))
    try:
        check_count(sims, "sims", SIMULATIONS)
        check_count(draws, "draws", DRAWS, over=(sims, "simulations"))
        check_count(int(block.get("replicates", 1)), "replicates", REPLICATES,
                    seconds_each=sims * SIMULATIONS.seconds_each)
        SBCSettings(n_sims=sims, n_draws=draws)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


#: the keys of a battery's ``problem`` table: sbc.problem_for's keywords
PROBLEM_KEYS = ("n", "n_basis", "n_new", "seed")


def _check_battery_counts(block: dict[str, Any], where: str) -> None:
    """As :func:`_check_sbc_counts` for a [[defects]] block: its data sets, SBC replicates
    and simulations, reference draws, and its ``problem`` table (sbc.problem_for's
    keywords, each a positive integer within its bound; seed from 0 to 2**32 - 1)."""
    sims = int(block.get("sbc_sims", 100))
    problem = block.get("problem", {})
    try:
        check_count(int(block.get("datasets", 100)), "datasets", DATASETS)
        check_count(sims, "sbc_sims", SIMULATIONS)
        check_count(int(block.get("sbc_replicates", 20)), "sbc_replicates", REPLICATES,
                    seconds_each=sims * SIMULATIONS.seconds_each)
        check_count(int(block.get("reference_draws", 1000)), "reference_draws", CHAIN_DRAWS,
                    over=(int(block.get("datasets", 100)), "data sets"))
        for key, value in problem.items():
            if key not in PROBLEM_KEYS:
                raise ValueError(_unknown_key(key, PROBLEM_KEYS, "problem"))
            if key == "seed":
                check_seed(value, "problem seed")
                continue
            if not (_is_int(value) and value >= 1):
                raise ValueError(f"problem {key} must be a positive integer, got {value!r}")
            check_count(value, f"problem {key}", BASIS_FUNCTIONS if key == "n_basis" else DESIGN_POINTS)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _check_data(name, split) -> None:
    """ValueError naming an unknown data set or a split it does not have (the loader's own
    message); the data sets are small files, so loading one is the cheapest exact check."""

    datasets.load(name, split, standardize=False)


def cell_path(out_dir, cell: Cell) -> str:
    return os.path.join(os.fspath(out_dir), "cells", f"{cell.kind}-{cell.key()}.json")


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


def run_cell(cell: Cell, out_dir: str, engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT) -> dict[str, Any]:
    """Compute one cell (in a Dask worker) and write its result atomically. Returns it; a
    cell that raises one of :data:`DETERMINISTIC_ERRORS` is stored and returned as failed
    (``"failed"``: the reason in one line), so that one bad cell does not end the study."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    t0 = time.perf_counter()
    try:
        result = _compute_cell(cell, out_dir, engine_time_limit)
    except DETERMINISTIC_ERRORS as err:
        result = {"failed": failure_line(err)}
    out = {"kind": cell.kind, "cell": cell.params, "key": cell.key(), "seconds": time.perf_counter() - t0, **result}
    write_signed_json(out, cell_path(out_dir, cell), STUDY_CELL)
    return out


def _compute_cell(cell: Cell, out_dir: str, engine_time_limit: float | None) -> dict[str, Any]:
    p = cell.params
    work = os.path.join(out_dir, "work")
    if cell.kind == "compare":
        comp = compare(CompareConfig(model=p["model"], data=p["data"], split=p["split"], engines=tuple(p["engines"]),
                                     params=json.loads(p["params"]), cache_dir=os.path.join(work, "references"),
                                     engine_time_limit=engine_time_limit))
        result = {"results": json.loads(json.dumps(comp.result.to_json(), default=_jsonable))}
    elif cell.kind == "sbc":
        summary = run_sbc(p["model"], p["engine"], settings=SBCSettings(
            n_sims=p["sims"], n_draws=p["draws"], seed=1000 * (p["replicate"] + 1)), out_dir=os.path.join(work, "sbc"),
            engine_time_limit=engine_time_limit)
        result = {"summary": summary}
    else:
        settings = BatterySettings(n_datasets=p["datasets"], sbc_replicates=p["sbc_replicates"],
                                   sbc_sims=p["sbc_sims"], reference_draws=p["reference_draws"],
                                   problem=tuple(sorted(json.loads(p["problem"]).items())),
                                   reference_samplers=tuple(p.get("reference_samplers", ())),
                                   engine_time_limit=engine_time_limit)
        # the battery's data sets and SBC replicates fan out over the same cluster: this
        # task secedes from its worker's thread pool while it waits for them
        with _ClusterExecutor() as executor:
            result = {"battery": run_battery(p["model"], p["engine"], p["defects"] or None, settings=settings,
                                             out_dir=os.path.join(work, "defects"), executor=executor)}
    return result


class _ClusterExecutor:
    """Inside a Dask task: an executor on the task's own cluster (``worker_client``);
    outside one (a direct call of run_cell): None, i.e. run here."""

    def __enter__(self):
        try:
            from distributed import get_worker, worker_client

            get_worker()
        except (ImportError, ValueError):
            self._ctx = None
            return None
        self._ctx = worker_client()
        return self._ctx.__enter__().get_executor()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc) if self._ctx is not None else False


def _jsonable(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


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
    the number of cores), each started by :func:`dask_setup`: the workers die with this
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


def read_cell_file(path: str, check, domain: str = STUDY_CELL) -> dict | None:
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
        warnings.warn(f"damaged cell file {path} ({problem}); computing the cell again", stacklevel=3)
        return None
    return result


#: the result each kind of study cell stores beside its description
_PAYLOAD = {"compare": "results", "sbc": "summary", "defects": "battery"}


def _study_cell_problem(cell: Cell):
    def check(result) -> str | None:
        if not isinstance(result, dict):
            return f"a {type(result).__name__}, not a cell"
        if result.get("key") != cell.key() or result.get("kind") != cell.kind:
            return "not the cell of this key"
        if _PAYLOAD[cell.kind] not in result and not isinstance(result.get("failed"), str):
            return f"no {_PAYLOAD[cell.kind]!r}"
        return None
    return check


def run_study(config, out_dir, *, scheduler: str | None = None, n_workers: int | None = None,
              progress: bool = True, client=None, jax_cache: str | None = None,
              device: str | None = None,
              engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT) -> dict[str, Any]:
    """Run every cell of ``config`` (a dict or a TOML path) not yet done, on Dask.

    scheduler: address of an existing Dask scheduler ("tcp://host:8786"); None starts a
    LocalCluster of ``n_workers`` single-threaded worker processes (default: the number of
    cores; see :func:`cluster_client`). client: an existing ``distributed.Client`` (tests).
    jax_cache: the JAX compilation cache folder the LocalCluster's workers share (None:
    none). device: how the command line chose the device (zoo/devices.py), for the report.
    engine_time_limit: the most seconds one fit of an engine may take in any cell
    (validation/runs/fence.py; None: no limit); not part of the cells' keys.
    A cell that fails is recorded with its reason and the others go on. Returns {"config",
    "cells": [...results], "ran": n, "reused": n, "failed": [(cell label, reason), ...],
    "out_dir", "device"}; the report is written from it by
    ``validation/report/study_report.write_study_report`` (as ``zoo study`` does).
    """
    from distributed import as_completed

    limit = check_time_limit(engine_time_limit, "engine_time_limit")
    if not isinstance(config, dict):
        config = load_config(config)
    cells = expand(config)
    out_dir = os.path.abspath(os.fspath(out_dir))
    os.makedirs(os.path.join(out_dir, "cells"), exist_ok=True)
    write_json_atomic({"config": config, "cells": [c.params | {"kind": c.kind, "key": c.key()} for c in cells]},
                      os.path.join(out_dir, "study.json"))
    results: dict[int, dict] = {}
    for i, cell in enumerate(cells):
        found = read_cell_file(cell_path(out_dir, cell), _study_cell_problem(cell))
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
                    cell = cells[i]
                    results[i] = {"kind": cell.kind, "cell": cell.params, "key": cell.key(), "seconds": None,
                                  "failed": failure_line(err) + " (after Dask's retries; not stored: the next run "
                                            "tries the cell again)"}
                bar.update(cells[i].label() + (" FAILED" if "failed" in results[i] else ""))
    ordered = [results[i] for i in range(len(cells))]
    failed = [(cells[i].label(), r["failed"]) for i, r in enumerate(ordered) if "failed" in r]
    return {"config": config, "cells": ordered, "ran": len(todo), "reused": len(cells) - len(todo),
            "failed": failed, "out_dir": out_dir, "device": device}


__all__ = ["Cell", "load_config", "expand", "run_cell", "run_study", "cell_path",
           "cluster_client", "die_with_parent", "read_cell_file"]
