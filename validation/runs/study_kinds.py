"""The kinds of study cells, as one table: what a study can run.

Each :class:`StudyKind` says, for one kind of ``[[block]]`` of a study file, everything the
study machinery (``study.py``) needs and nothing it has to know by name: the block's keys
and types, how a block expands into cells (checked against the registry before a cluster
starts), each cell's label and the engines it names (their modules are digested into the
cell's key), the code the cell's result depends on, the key its result is stored under,
and how one cell is computed. ``study.py`` reads :data:`STUDY_KINDS` and nothing else about
the kinds; the report wing has one section writer per kind
(``validation/report/study_report.py``, ``SECTIONS``), and a test holds the two tables to
the same kinds.

A new kind of run in a study: its run module (``run(config) -> result``), one
:class:`StudyKind` here and one section in the report (CONTRIBUTING.md, "A new kind of run").
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ... import data as datasets
from ...models.checks import check_seed
from ..records import registry
from .battery import BatteryConfig, BatterySettings, run_battery
from .battery_result import BatteryResult
from .compare import CompareConfig, compare, default_references
from .engines import is_user_engine, model_name, resolve_entry
from .limits import (BASIS_FUNCTIONS, CHAIN_DRAWS, DATASETS, DESIGN_POINTS, DRAWS, REPLICATES, SIMULATIONS,
                     check_count)
from .results import ComparisonResult
from .sbc import SBCConfig, run_sbc
from .sbc_result import SBCResult
from .sbc_simulation import SBCSettings


@dataclass(frozen=True)
class StudyKind:
    """One kind of study cell. ``name``: the block's name in the study file and the cells'
    kind. ``schema``: key -> (type, required), the types ``"str"``, ``"int>=1"``,
    ``"int>=0"``, ``"list[str]"``, ``"list[int]"``, ``"table"``. ``expand(block, where)``:
    the block's cells as parameter dicts (JSON-able), every name checked; ``where`` names
    the block in errors. ``label(params)``: the cell in a few words. ``engines(params)``:
    the engines it names (a user's engine's module is digested into the key).
    ``code_modules``: the modules whose code the result depends on (digested into the key).
    ``payload``: the key of the stored result in the cell's file. ``result_type``: the
    class of the result (with ``to_json`` and ``from_json``: a stored cell is read back as
    the object its run returned). ``compute(params, work, engine_time_limit)``: the result,
    a ``result_type``, computed in a Dask worker (``work``: the study's scratch folder)."""

    name: str
    schema: Mapping[str, tuple[str, bool]]
    expand: Callable[[dict[str, Any], str], list[dict[str, Any]]]
    label: Callable[[dict[str, Any]], str]
    engines: Callable[[dict[str, Any]], list[str]]
    code_modules: tuple[str, ...]
    payload: str
    result_type: type
    compute: Callable[[dict[str, Any], str, float | None], Any]


# --------------------------------------------------------------------------------------
# Shared checks
# --------------------------------------------------------------------------------------
def is_int(v) -> bool:
    """Whether ``v`` is an integer as a study file means one: an ``int`` that is not a
    boolean (TOML's ``true`` is not a count)."""
    return isinstance(v, int) and not isinstance(v, bool)


def unknown_key(key: str, known, where: str) -> str:
    """The one-line message for an unknown ``key`` of a study file at ``where``: the nearest
    of the ``known`` keys if one is close (a typo), then all of them."""
    near = difflib.get_close_matches(key, list(known), n=1)
    return (f"{where}: unknown key {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
            + f"; known: {', '.join(known)}")


# --------------------------------------------------------------------------------------
# [[compare]]: every model x data x split is one comparison
# --------------------------------------------------------------------------------------
def _expand_compare(block: dict[str, Any], where: str) -> list[dict[str, Any]]:
    cells = []
    for model in block["models"]:
        # a user's model is named by its path (module:attr): the cell keeps the path, so that a
        # worker imports it as the study's process did
        record = registry.get_model(model_name(model))
        engines = block.get("engines", list(record.default_engines))
        for e in engines:
            resolve_entry(record, e)  # a user's module:function is imported and checked here
        record.check_params(block.get("params", {}))
        if record.own_data:
            if "data" in block or "splits" in block:
                raise ValueError(f"{where}: model {model} brings its own data: no data or splits")
            cells.append({"model": model, "data": record.default_data, "split": 0, "engines": list(engines),
                          "params": json.dumps(block.get("params", {}), sort_keys=True)})
            continue
        for data in block.get("data", [record.default_data]):
            for split in block.get("splits", [0]):
                _check_data(data, split)
                cells.append({"model": model, "data": data, "split": int(split), "engines": list(engines),
                              "params": json.dumps(block.get("params", {}), sort_keys=True)})
    return cells


def _compute_compare(p: dict[str, Any], work: str, engine_time_limit: float | None):
    comp = compare(CompareConfig(model=p["model"], data=p["data"], split=p["split"], engines=tuple(p["engines"]),
                                 params=json.loads(p["params"]), cache_dir=os.path.join(work, "references"),
                                 engine_time_limit=engine_time_limit))
    return comp.result


COMPARE = StudyKind(
    name="compare",
    schema={"models": ("list[str]", True), "engines": ("list[str]", False), "data": ("list[str]", False),
            "splits": ("list[int]", False), "params": ("table", False)},
    expand=_expand_compare,
    label=lambda p: f"compare {p['model']} {p['data']} split {p['split']}",
    engines=lambda p: list(p["engines"]),
    code_modules=("zoo.validation.runs.compare",),
    payload="results",
    result_type=ComparisonResult,
    compute=_compute_compare,
)


# --------------------------------------------------------------------------------------
# [[sbc]]: every engine x replicate is one SBC run
# --------------------------------------------------------------------------------------
def _expand_sbc(block: dict[str, Any], where: str) -> list[dict[str, Any]]:
    model = block["model"]
    record = registry.get_model(model_name(model))
    _check_sbc_counts(block, where)
    cells = []
    for engine in block.get("engines", list(record.engine_names)):
        if is_user_engine(engine):
            resolve_entry(record, engine)
        elif not record.has_engine(engine) and engine not in record.sampler_names:
            raise ValueError(f"study: {model} has no engine or sampler {engine!r}")
        for r in range(int(block.get("replicates", 1))):
            cells.append({"model": model, "engine": engine, "replicate": r, "sims": int(block.get("sims", 100)),
                          "draws": int(block.get("draws", 99))})
    return cells


def _compute_sbc(p: dict[str, Any], work: str, engine_time_limit: float | None):
    return run_sbc(SBCConfig(p["model"], p["engine"], settings=SBCSettings(
        n_sims=p["sims"], n_draws=p["draws"], seed=1000 * (p["replicate"] + 1)), engine_time_limit=engine_time_limit),
        out_dir=os.path.join(work, "sbc"))


SBC = StudyKind(
    name="sbc",
    schema={"model": ("str", True), "engines": ("list[str]", False), "replicates": ("int>=1", False),
            "sims": ("int>=1", False), "draws": ("int>=1", False)},
    expand=_expand_sbc,
    label=lambda p: f"sbc {p['model']} {p['engine']} replicate {p['replicate']}",
    engines=lambda p: [p["engine"]],
    code_modules=("zoo.validation.runs.sbc",),
    payload="summary",
    result_type=SBCResult,
    compute=_compute_sbc,
)


# --------------------------------------------------------------------------------------
# [[defects]]: one cell, the planted-defect battery of one engine
# --------------------------------------------------------------------------------------
def _expand_defects(block: dict[str, Any], where: str) -> list[dict[str, Any]]:
    model = block["model"]
    engine = block["engine"]
    record = registry.get_model(model_name(model))
    resolve_entry(record, engine)
    _check_battery_counts(block, where)
    if record.own_data and block.get("problem"):
        raise ValueError(f"{where}: model {model} is simulated on its own data: no problem table")
    samplers = list(block.get("reference_samplers", []))
    if samplers:
        default_references(record.name, tuple(samplers))  # an unknown sampler fails here
    return [{"model": model, "engine": engine, "defects": list(block.get("defects", [])),
             "datasets": int(block.get("datasets", 100)), "sbc_replicates": int(block.get("sbc_replicates", 20)),
             "sbc_sims": int(block.get("sbc_sims", 100)), "reference_draws": int(block.get("reference_draws", 1000)),
             "reference_samplers": samplers, "problem": json.dumps(block.get("problem", {}), sort_keys=True)}]


def _compute_defects(p: dict[str, Any], work: str, engine_time_limit: float | None):
    settings = BatterySettings(n_datasets=p["datasets"], sbc_replicates=p["sbc_replicates"],
                               sbc_sims=p["sbc_sims"], reference_draws=p["reference_draws"],
                               problem=tuple(sorted(json.loads(p["problem"]).items())),
                               reference_samplers=tuple(p.get("reference_samplers", ())),
                               engine_time_limit=engine_time_limit)
    # the battery's data sets and SBC replicates fan out over the same cluster: this
    # task secedes from its worker's thread pool while it waits for them
    with _ClusterExecutor() as executor:
        return run_battery(BatteryConfig(p["model"], p["engine"], tuple(p["defects"]) or None, settings=settings),
                           out_dir=os.path.join(work, "defects"), executor=executor)


DEFECTS = StudyKind(
    name="defects",
    schema={"model": ("str", True), "engine": ("str", True), "defects": ("list[str]", False),
            "datasets": ("int>=1", False), "sbc_replicates": ("int>=0", False), "sbc_sims": ("int>=1", False),
            "reference_draws": ("int>=1", False), "reference_samplers": ("list[str]", False),
            "problem": ("table", False)},
    expand=_expand_defects,
    label=lambda p: f"defects {p['model']} {p['engine']}",
    engines=lambda p: [p["engine"]],
    code_modules=("zoo.validation.runs.battery",),
    payload="battery",
    result_type=BatteryResult,
    compute=_compute_defects,
)

#: every kind of study cell, in the order a study file's blocks are expanded
STUDY_KINDS: dict[str, StudyKind] = {kind.name: kind for kind in (COMPARE, SBC, DEFECTS)}


# --------------------------------------------------------------------------------------
# The kinds' own checks and helpers
# --------------------------------------------------------------------------------------
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
                raise ValueError(unknown_key(key, PROBLEM_KEYS, "problem"))
            if key == "seed":
                check_seed(value, "problem seed")
                continue
            if not (is_int(value) and value >= 1):
                raise ValueError(f"problem {key} must be a positive integer, got {value!r}")
            check_count(value, f"problem {key}", BASIS_FUNCTIONS if key == "n_basis" else DESIGN_POINTS)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _check_data(name, split) -> None:
    """ValueError naming an unknown data set or a split it does not have (the loader's own
    message); the data sets are small files, so loading one is the cheapest exact check."""

    datasets.load(name, split, standardize=False)


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


__all__ = ["StudyKind", "STUDY_KINDS", "COMPARE", "SBC", "DEFECTS", "PROBLEM_KEYS", "is_int", "unknown_key"]
