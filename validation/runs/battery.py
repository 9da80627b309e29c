"""Planted defects: engines broken on purpose, to measure whether our detectors catch them.

A detector that never fires proves nothing. Each :class:`Defect` wraps an engine's
fixed-spec fit and returns a fit with the same contract whose answer is wrong in a known,
controlled way; :func:`run_battery` runs the broken engines (and the intact one) through
both detectors over simulated data sets and reports how often each detector fires:

* the **verdicts** - marginal, joint (``validation/judge/verdict.py``) and distribution
  (``validation/judge/distribution.py``) - against a reference sampler run on each
  simulated data set; their false-alarm rate is measured by fitting, as the "engine", a
  second independent run of the reference sampler (an exact engine with Monte Carlo
  error), beside the defects. The same exact answer with a shape defect planted in it
  (:data:`EXACT_SHAPES`: reversed skew, heavy tails, Gaussian marginals of the same means and
  sds, an extra mode; every mean and sd kept) gives the distribution verdict's power on the
  model's own posteriors;
* **SBC** (``validation/runs/sbc.py``) - each replicate is one SBC run of ``n_sims``
  simulations; its false-alarm rate for an exact posterior is measured in
  ``benchmarks/sbc_false_alarm.py``.

The generic defects act on the returned posterior and so apply to any engine with a
distribution (Gaussian or draws): the covariance scaled by 0.5 or 2, the mean moved by 0.5
posterior sd in one coordinate or in all, the correlations dropped or rotated, heavier tails
or an extra mode with the same mean and covariance (the type and these:
``validation/judge/defects.py``).
Engine-specific ones switch on a documented defect of the engine itself and live in the
model's registry record (``ModelRecord.defects``): PCVM's EP with the truncation sites off
(the untruncated prior), GIG's VB with Horii's printed a-update, and gridRVM's VB with the variance left out of
E[w^2], and BBLR's Laplace with plain logistic regression's curvature; :func:`all_defects` gathers
the generic ones and every registered record's. A user's own defect is any function
``defect(fit) -> fit``, or a :class:`Defect` built from one.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from ...inference.contracts import EngineReturnError
from ..base.atomic import write_json_atomic
from ..base.code_digest import code_digest
from ..base.signing import BATTERY_CELL, read_signed_json, write_signed_json
from ..judge.defects import (  # noqa: F401  (re-exported: the battery's public names)
    CORRELATIONS,
    GENERIC,
    Defect,
    config_defect,
    posterior_defect,
    replace_correlations,
    transform_posterior,
)
from ..judge.distribution import distribution_verdict
from ..judge.shapes import SHAPE_DEFECTS
from ..judge.verdict import chains_draws_flat, joint_verdict, moments_and_mcse, verdict
from ..records import registry
from ..references import run_reference
from .compare import default_references
from .engines import import_user_module, is_user_engine, model_name, resolve_entry, user_modules
from .fence import DEFAULT_ENGINE_TIME_LIMIT, EngineTimeout, check_time_limit, posterior_problem, time_limit
from ..judge.sbc_verdict import CALIBRATED, MISCALIBRATED, TOO_FEW
from .battery_result import BatteryResult, BatteryRow
from .sbc import SBCConfig, run_sbc
from .sbc_simulation import SBCSettings, draw_from_prior, problem_for


def specific_defects() -> tuple[Defect, ...]:
    """Every registered model's own defects (its record's ``defects``), each bound to its
    model, in the registry's order."""
    return tuple(d if d.model is not None else replace(d, model=name)
                 for name in registry.model_names() for d in registry.get_model(name).defects)


def all_defects() -> dict[str, Defect]:
    """name -> defect: the generic ones, then every registered model's own."""
    table: dict[str, Defect] = {}
    for d in GENERIC + specific_defects():
        if d.name in table:
            raise ValueError(f"two defects are named {d.name!r} (models {table[d.name].model} and {d.model})")
        table[d.name] = d
    return table


def get_defect(name_or_path: str | Defect | Callable) -> Defect:
    """A defect by name, ``"module:function"`` (a ``defect(fit) -> fit`` or a Defect), a
    Defect, or a function ``defect(fit) -> fit``."""
    if isinstance(name_or_path, Defect):
        return name_or_path
    if callable(name_or_path):
        return Defect(getattr(name_or_path, "__name__", "user defect"), "a user's defect", name_or_path)
    table = all_defects()
    if name_or_path in table:
        return table[name_or_path]
    if ":" in name_or_path:
        module, _, attr = name_or_path.partition(":")
        try:
            # as a user's engine is found: the current folder after every installed package
            obj = getattr(import_user_module(module, f"defect {name_or_path!r}"), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot load defect {name_or_path!r}: {err}") from err
        if not isinstance(obj, Defect):
            problem = _defect_contract_problem(obj)
            if problem:
                raise ValueError(f"defect {name_or_path!r} {problem}")
            obj = Defect(name_or_path, "a user's defect", obj)
        return obj
    raise ValueError(f"unknown defect {name_or_path!r}; known: {', '.join(table)}; or give 'module:function'")


def _defect_contract_problem(obj) -> str | None:
    """Why ``obj`` is not a defect ``defect(fit) -> fit`` (one positional argument), or None."""
    if not callable(obj):
        return f"is a {type(obj).__name__}, not a function defect(fit) -> fit"
    try:
        inspect.signature(obj).bind(lambda *a, **k: None)
    except TypeError as err:
        return f"does not keep the contract defect(fit) -> fit: {err}"
    except ValueError:  # a builtin without a signature: let the call say what is wrong
        return None
    return None


# --------------------------------------------------------------------------------------
# The battery
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatterySettings:
    """n_datasets: simulated data sets for the verdict (each with its own reference run).
    sbc_replicates: independent SBC runs per defect, each of ``sbc_sims`` simulations.
    reference_draws: per chain (4 chains, as many warm-up draws) of each NUTS reference
    run; a model's own Gibbs sampler keeps the settings of the model's record.
    reference_samplers: the reference samplers tried on each data set, in order, until
    one certifies; empty: the model's own chain (as ``zoo compare`` tries them). Naming
    the one that certifies on the model's SBC problem saves the failed runs before it
    (GIG logistic: NUTS leaves divergences in its funnel, PG-Gibbs certifies).
    problem: keyword arguments of ``sbc.problem_for`` (the design).
    engine_time_limit: the most seconds one fit of the engine (intact or broken) may take
    (validation/runs/fence.py); past it that fit fails with the reason. None: no limit. Not
    part of the stored cells' key: it changes which fits finish, not what they compute."""

    n_datasets: int = 100
    sbc_replicates: int = 20
    sbc_sims: int = 100
    reference_draws: int = 1000
    seed: int = 0
    problem: tuple[tuple[str, Any], ...] = field(default_factory=tuple)
    reference_samplers: tuple[str, ...] = ()
    engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT

    def __post_init__(self):
        for name in ("n_datasets", "sbc_replicates", "sbc_sims", "reference_draws"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0")
        object.__setattr__(self, "reference_samplers", tuple(self.reference_samplers))
        object.__setattr__(self, "engine_time_limit", check_time_limit(self.engine_time_limit, "engine_time_limit"))


def battery_references(model, settings: BatterySettings, index: int):
    """The reference samplers tried on data set ``index``, in order: the model's chain (or
    ``settings.reference_samplers``), NUTS with ``settings.reference_draws``, each run
    seeded by the data set. NUTS's programs (``references/nuts_program.py``) are compiled
    on a worker's first data set and reused by every later one and by the twin run.
    model: a name, or a user's model as given (``engines.model_name``), here and below."""

    return default_references(model_name(model), settings.reference_samplers or None, nuts_draws=settings.reference_draws,
                              seed=2 * index)


EXACT = "exact (2nd reference run)"
INTACT = "intact engine"
#: shape defects planted in the exact engine's answer (the second reference run): every mean
#: and sd is then the posterior's own to Monte Carlo error (and the covariance, but for
#: "gaussianized", whose normal scores change the correlations a little - or, for GIG's peaked
#: posteriors, enough for the joint verdict to see), so what the moment verdicts cannot see is
#: the distribution verdict's to flag; name -> transform (judge/shapes.py)
EXACT_SHAPES = {f"exact, {name}": transform for name, (transform, _) in SHAPE_DEFECTS.items()}
#: a cell's statuses per detector: the field of a stored cell that holds them
STATUS_FIELDS = {"verdict": "statuses", "joint verdict": "joint_statuses",
                 "distribution verdict": "distribution_statuses"}


def battery_dataset(model: str, settings: BatterySettings, index: int, variant: str | None = None):
    """Data set ``index`` of a battery: (spec, Phi, y), the labels drawn from the model's
    prior predictive on its SBC problem (``settings.problem``), exactly as the battery's
    verdict cells draw them (``variant``: the spec of that model variant, for an engine
    that fits one). For reading a battery's problems one by one."""
    import jax

    record = registry.get_model(model_name(model))
    problem = problem_for(record, **dict(settings.problem))
    spec = problem.spec if variant is None else problem.variants[variant]
    key = jax.random.fold_in(jax.random.PRNGKey(settings.seed + 7919), index)
    _, y, _ = draw_from_prior(spec, problem.Phi, key)
    return spec, problem.Phi, y


def _verdict_cell(model: str, engine: str, defects: tuple[Defect, ...], index: int, settings: BatterySettings,
                  path: str) -> dict[str, Any]:
    """Data set ``index``: simulate, run the reference twice (two seeds), fit the intact and
    the broken engines, and record each verdict's status. Written atomically to ``path``."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    record = registry.get_model(model_name(model))
    entry = resolve_entry(record, engine)
    spec, Phi, y = battery_dataset(model, settings, index, entry.variant)
    failures: list[str] = []
    for cfg in battery_references(model, settings, index):
        ref = run_reference(spec, Phi, y, config=cfg)
        failures += [f"{cfg.sampler}: {f}" for f in ref.failures]
        if ref.certified:
            break
    # one status per detector (STATUS_FIELDS), all on the same fits
    cell: dict[str, Any] = {"index": index, "certified": bool(ref.certified), "sampler": cfg.sampler,
                            "failures": failures, **{f: {} for f in STATUS_FIELDS.values()}}
    if ref.certified:
        ref_moments = moments_and_mcse(chains_draws_flat(ref.posterior))

        def judge(name, posterior):
            cell["statuses"][name] = verdict(posterior, ref.posterior, reference_moments=ref_moments).status
            cell["joint_statuses"][name] = joint_verdict(posterior, ref.posterior).status
            cell["distribution_statuses"][name] = distribution_verdict(posterior, ref.posterior).status

        twin = run_reference(spec, Phi, y, config=replace(cfg, seed=2 * index + 1))
        judge(EXACT, twin.posterior)
        for name, transform in EXACT_SHAPES.items():
            judge(name, transform(twin.posterior))
        fit = entry.fit()
        for defect in (None, *defects):
            name = INTACT if defect is None else defect.name
            try:
                f = fit if defect is None else defect(fit)
                with time_limit(settings.engine_time_limit, f"{engine} ({name})"):
                    posterior = f(spec, Phi, y)
                problem = posterior_problem(posterior)
                if problem:
                    raise EngineReturnError(f"{engine} ({name}) {problem}")
                judge(name, posterior)
            except (Exception, SystemExit, EngineTimeout) as err:  # noqa: BLE001 - a failed fit is counted
                # with its reason (fence.py: an exit() or the time limit too)
                for field_name in STATUS_FIELDS.values():
                    cell[field_name][name] = f"failed: {type(err).__name__}: {err}"[:300]
    write_signed_json(cell, path, BATTERY_CELL, tail=3)
    return cell


def _cell_complete(cell: dict[str, Any], names) -> bool:
    """A stored cell holds every detector's status of every defect asked for (or had no
    certified reference, so there was nothing to judge)."""
    return not cell["certified"] or all(n in cell.get(f, {}) for f in STATUS_FIELDS.values()
                                        for n in (*names, *EXACT_SHAPES))


def battery_key(model: str, engine: str, settings: BatterySettings) -> str:
    s = asdict(settings)
    for name in ("n_datasets", "sbc_replicates", "engine_time_limit"):
        s.pop(name)
    # a user's engine's module is digested too: its stored cells go stale with its code
    record = registry.get_model(model)
    # a user's model is its function's source and its data (their digests): cells of another
    # version of it are not reused
    own = record.prepare(None, {}).spec.to_dict() if record.own_data else None
    payload = {"model": model, "model_spec": own, "engine": engine, "settings": s,
               "code": code_digest((__name__, "zoo.validation.runs.sbc", "zoo.validation.judge.verdict",
                                    "zoo.validation.judge.distribution", "zoo.validation.judge.shapes",
                                    "zoo.validation.judge.defects", "zoo.validation.references")
                                   + user_modules([engine]))}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BatteryConfig:
    """One battery, described: ``engine`` (a registry engine or ``"module:function"``; the
    battery runs its cells by name, in worker processes too) on ``model`` (a registered
    model's name, a user's Model or a ``"module:attr"`` path to one), with ``defects``
    (names, paths, :class:`Defect` objects or ``defect(fit) -> fit`` functions; None: every
    defect that applies) and ``settings`` (:class:`BatterySettings`)."""

    model: Any
    engine: str
    defects: tuple | None = None
    settings: BatterySettings = BatterySettings()

    def __post_init__(self):
        if self.defects is not None:
            object.__setattr__(self, "defects", tuple(self.defects))
        if not isinstance(self.settings, BatterySettings):
            raise ValueError(f"settings must be a BatterySettings, got {type(self.settings).__name__}")


def run_battery(config: BatteryConfig, *, out_dir, executor=None, progress: Callable | None = None) -> BatteryResult:
    """The defect battery of :class:`BatteryConfig`: each defect through the verdicts and
    through SBC.

    Finished cells are stored under ``out_dir`` (a rerun resumes). ``executor``: anything
    with ``map`` (a Dask ``Client.get_executor()``) for the verdict cells (one per data
    set) and the SBC runs (one per defect and replicate); None: here, one after another.
    progress(stage, done, total): called as cells finish.
    Returns the :class:`BatteryResult`: rows of detector x defect -> detections / trials, with
    the exact engine's and the intact engine's rates beside them; also stored as the run's
    ``battery.json``.
    """
    if not isinstance(config, BatteryConfig):
        raise TypeError(f"run_battery takes a BatteryConfig, got {type(config).__name__}")
    engine, defects, settings = config.engine, config.defects, config.settings
    # the cells carry the model as it was given: a worker adds a user's model to its own registry
    model_ref = config.model
    model = model_name(model_ref)
    if callable(engine):
        raise ValueError("the battery runs its cells by name (in worker processes too): give your engine as "
                         "'module:function', not as a Python function")
    record = registry.get_model(model)
    entry = resolve_entry(record, engine)  # a user's module:function is imported and checked here
    if entry.kind == "point":
        raise ValueError(f"{model} {engine} is a point estimate: neither detector applies to it")
    chosen = [get_defect(d) for d in (defects if defects is not None else all_defects().values())]
    chosen = [d for d in chosen if d.applies_to(model, engine)]
    names = tuple(d.name for d in chosen)
    # the simulated problem before any work: a design the model cannot take, or problem
    # keywords for a model simulated on its own data, fail here (problem_for)
    problem_for(registry.get_model(model), **dict(settings.problem))
    battery_references(model, settings, 0)  # an unknown reference sampler fails here, before any work
    key = battery_key(model, engine, settings)
    # a user's engine path has a ':' (and may have dots): not in a folder name
    tag = engine.replace(":", "--") if is_user_engine(engine) else engine
    folder = os.path.join(os.fspath(out_dir), f"battery-{model}-{tag}-{key}")
    os.makedirs(folder, exist_ok=True)
    t0 = time.perf_counter()

    # the verdict: one cell per data set
    paths = [os.path.join(folder, "verdict", f"{i:05d}.json") for i in range(settings.n_datasets)]
    cells: dict[int, dict] = {}
    for i, p in enumerate(paths):
        cell = read_signed_json(p, BATTERY_CELL, "stored battery cell", tail=3)
        if cell is not None and _cell_complete(cell, names):
            cells[i] = cell
    todo = [i for i in range(settings.n_datasets) if i not in cells]
    run = functools.partial(_verdict_cell_star, model_ref, engine, tuple(chosen), settings)
    mapper = map if executor is None else executor.map
    for cell in mapper(run, [(i, paths[i]) for i in todo]):
        cells[cell["index"]] = cell
        if progress:
            progress("verdict", len(cells), settings.n_datasets)
    certified = [c for c in cells.values() if c["certified"]]
    rows = []
    for detector, field_name in STATUS_FIELDS.items():
        for name in (EXACT, *EXACT_SHAPES, INTACT, *names):
            statuses = [c[field_name].get(name) for c in certified]
            flagged = sum(s == "differs" for s in statuses)
            failed = sum(isinstance(s, str) and s.startswith("failed") for s in statuses)
            # a verdict that does not apply (e.g. the joint one on a pruned posterior) is no trial
            declined = sum(s == "not applicable" for s in statuses)
            rows.append(BatteryRow(detector, name, detected=flagged, trials=len(statuses) - failed - declined,
                                   failed_fits=failed, not_applicable=declined))

    # SBC: replicate runs of the intact and the broken engines
    jobs = [(defect, r) for defect in (None, *chosen) for r in range(settings.sbc_replicates)]
    run = functools.partial(_sbc_run_star, model_ref, engine, settings, os.path.join(folder, "sbc"))
    statuses: dict[str, list[str]] = {}
    for k, (name, status) in enumerate(mapper(run, jobs)):
        statuses.setdefault(name, []).append(status)
        if progress:
            progress("sbc", k + 1, len(jobs))
    for name in (INTACT, *names):
        got = statuses.get(name, [])
        # a run with too few simulations to call is a trial that detected nothing (its power
        # was too low to), counted apart so that a reader sees why
        trials = sum(s in (CALIBRATED, MISCALIBRATED, TOO_FEW) for s in got)
        rows.append(BatteryRow("sbc", name, detected=sum(s == MISCALIBRATED for s in got), trials=trials,
                               failed_fits=len(got) - trials, too_few=sum(s == TOO_FEW for s in got)))
    result = BatteryResult(model=model, engine=engine, settings=asdict(settings),
                           defects={d.name: d.description for d in chosen}, rows=tuple(rows),
                           certified_datasets=len(certified), datasets=len(cells),
                           seconds=time.perf_counter() - t0)
    write_json_atomic(result.to_json(), os.path.join(folder, "battery.json"))
    return result


#: the detectors of a battery, in the order its tables show them
DETECTORS = ("verdict", "joint verdict", "distribution verdict", "sbc")


def _verdict_cell_star(model, engine, defects, settings, args):
    index, path = args
    # a task rerun after its worker died may find its cell done
    cell = read_signed_json(path, BATTERY_CELL, "stored battery cell", tail=3)
    if cell is not None and _cell_complete(cell, [d.name for d in defects]):
        return cell
    return _verdict_cell(model, engine, defects, index, settings, path)


def _sbc_run_star(model, engine, settings, folder, args) -> tuple[str, str]:
    """One SBC replicate of the intact engine (defect None) or a broken one: (name, status).
    Its simulations are stored under ``folder`` by run_sbc, so a rerun resumes."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    defect, r = args
    entry = resolve_entry(registry.get_model(model_name(model)), engine)
    fit = entry.fit()
    f = fit if defect is None else defect(fit)
    f.__name__ = engine if defect is None else f"{engine}+{defect.name}"
    summary = run_sbc(SBCConfig(model, f, settings=SBCSettings(n_sims=settings.sbc_sims, seed=1000 * (r + 1)),
                                problem=settings.problem, variant=entry.variant,
                                engine_time_limit=settings.engine_time_limit), out_dir=folder)
    return (INTACT if defect is None else defect.name), summary.status


__all__ = ["Defect", "GENERIC", "specific_defects", "all_defects", "get_defect", "transform_posterior",
           "replace_correlations", "BatterySettings", "BatteryConfig", "BatteryResult", "BatteryRow",
           "run_battery", "battery_references", "EXACT", "INTACT", "EXACT_SHAPES", "DETECTORS"]
