"""Simulation-based calibration (SBC) of any engine, the reference samplers included: a run.

If parameters are drawn from the prior, data are simulated from the model given them,
and an exact posterior is computed from those data, then the rank of the true value
among L independent posterior draws is uniform on {0, ..., L} (Talts et al. 2018),
for every parameter and every function of the parameters. An engine whose ranks are not
uniform does not give the posterior of the model it claims to approximate.

The work is in three places, one job each:

* ``sbc_simulation.py``: the problem (a proper prior on a fixed design), the engine
  resolver, and one simulation (prior draw, fit, ranks);
* this module: a run - many simulations, each stored atomically on its own and reused
  by a rerun, on any executor - and its summary;
* ``validation/judge/``: the statistics of the ranks - the uniformity test and the shape of
  a failure (``rank_uniformity.py``), what a run could have seen (``rank_power.py``), and the
  verdict that joins them (``sbc_verdict.py``): calibrated, miscalibrated, or too few
  simulations to call.

Not applicable, with the reason instead of ranks: point estimates (no distribution to
rank in) and engines that fit a different model (their ranks against this model's prior
would only restate that they are not this model's posterior).

Long runs: every finished simulation is written atomically to its own file under the
run's folder, keyed by everything that determines it; a rerun reuses what is there and
does only the rest. ``executor``: any object with ``map(fn, iterable)`` (a
``concurrent.futures`` executor; ``distributed.Client.get_executor()`` for a Dask
cluster); None runs the simulations one after another in this process.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from ...models.base import is_classifier
from ..base.code_digest import code_digest
from ..base.signing import SBC_SIMULATION, read_signed_json, write_signed_json
from ..judge.rank_uniformity import contraction_view, coverage_view
from ..judge.sbc_verdict import MIN_RANKED, NOT_APPLICABLE, rank_verdict
from ..records import registry
from ..references.nuts_program import default_layout
from .engines import engine_label, model_name
from .sbc_result import SBCCounts, SBCResult
from .sbc_simulation import (
    ResolvedEngine,
    SBCProblem,
    SBCSettings,
    problem_for,
    quantity_names,
    ranks_log_lik,
    resolve_engine,
    simulate_batch,
    simulate_one,
)
from . import fence

#: file format of the stored simulations (bump when their content changes; 2: each
#: simulation also keeps the truth and its posterior's mean and sd of every quantity, which
#: the coverage and contraction views read)
SBC_FORMAT = 2


def quantity_glossary(names: list[str]) -> dict[str, str]:
    """What each kind of ranked quantity is: name pattern -> meaning."""
    out: dict[str, str] = {}
    for name in names:
        base, bracket, _ = name.partition("[")
        if base == "f_new":
            out["f_new[k]"] = ("the linear predictor f = phi(x_k)' w (the model's own linear_predictor) at the k-th "
                               "held-out design row: it probes the predictive")
        elif name == "log_lik":
            out["log_lik"] = ("the log-likelihood of the simulated data (a classifier's labels, a general model's "
                              "observed sites) under each draw: a test quantity that depends on the data, so it "
                              "sees joint errors the marginals hide")
        else:
            key = f"{base}[i]" if bracket else base
            out[key] = (f"the i-th coordinate of the model's parameter {base}" if bracket
                        else f"the model's parameter {base}") + " (its truth drawn from the prior)"
    return out


# --------------------------------------------------------------------------------------

# A run: many simulations, stored one by one, resumable
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Task:
    """Everything one simulation needs, picklable for a process or a Dask worker. model: a
    model's name, or a user's model as it was given (a ``module:attr`` path or a Model),
    which the worker adds to its own registry (``engines.model_name``)."""

    model: Any
    engine: str
    problem_kwargs: tuple[tuple[str, Any], ...]
    settings: SBCSettings
    index: int
    path: str
    # a reference sampler run on one of the model's variants (gridRVM's s-grid): its name
    variant: str | None = None
    # the most seconds the fit may take (fence.py); None: no limit
    time_limit: float | None = None


@dataclass(frozen=True)
class _BatchTask:
    """Simulations ``indices`` of one run with the engine's batched fit (one compiled
    program for all of them), each written to its own path as it would be alone. model:
    as :class:`_Task`'s."""

    model: Any
    engine: str
    problem_kwargs: tuple[tuple[str, Any], ...]
    settings: SBCSettings
    indices: tuple[int, ...]
    paths: tuple[str, ...]
    variant: str | None = None
    time_limit: float | None = None  # per simulation of the batch


#: simulations per batched task: a task is the unit a Dask worker takes and the unit that is
#: written before the next starts (resumability); the compiled program is built once per
#: worker process and reused by its later tasks, so small tasks cost little. Where the
#: chains run as lanes of one vectorized program (an accelerator), a task is as wide as
#: :data:`SIMS_PER_VECTORIZED_BATCH`: the lanes are what the accelerator is good at
SIMS_PER_BATCH = 10
SIMS_PER_VECTORIZED_BATCH = 1000
#: simulations per task of an engine's ``fit.many``: one vmapped program over the data sets;
#: an engine's fit takes milliseconds, so a task of 64 is still a fraction of a second, and
#: 64 is one of the batch sizes its programs are compiled for (compile_cache.batch_size_for)
SIMS_PER_ENGINE_BATCH = 64


def sims_per_batch(resolved: ResolvedEngine | None = None) -> int:
    """Simulations per batched task of ``resolved`` on this process's device (see
    ``SIMS_PER_BATCH``); None: a sampler's (NUTS's)."""
    if resolved is not None and not resolved.accelerator_pays:
        return SIMS_PER_ENGINE_BATCH
    return SIMS_PER_VECTORIZED_BATCH if default_layout(4) == "vectorized" else SIMS_PER_BATCH


@functools.lru_cache(maxsize=8)
def _problem(model: str, problem_kwargs) -> tuple[Any, SBCProblem]:
    """The record and SBC problem of a task, kept per process: every task of a run in one
    worker then holds the same spec object, and an engine that caches its compiled program
    per spec object (ADVI, Pathfinder, auto-laplace) compiles once per worker, not once per
    simulation (~5 s a fit instead of ~0.4 s for ADVI on PCVM's problem)."""
    record = registry.get_model(model_name(model))
    return record, problem_for(record, **dict(problem_kwargs))


def _task_problem(task: _Task | _BatchTask):
    """A task's problem, resolved engine and spec, rebuilt from names in a worker."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    record, problem = _problem(task.model, task.problem_kwargs)
    resolved = resolve_engine(record, task.engine, task.settings)
    if task.variant is not None:
        resolved = replace(resolved, variant=task.variant)
    spec = problem.spec if resolved.variant is None else problem.variants[resolved.variant]
    return problem, resolved, spec


def _run_task(task: _Task) -> dict[str, Any]:
    """One simulation in a worker: fit, write the result atomically. Returns the result."""
    problem, resolved, spec = _task_problem(task)
    result = simulate_one(spec, problem.Phi, problem.Phi_new, resolved.fit, task.index, task.settings,
                          task.time_limit)
    write_signed_json(result, task.path, SBC_SIMULATION)
    return result


def _run_batch_task(task: _BatchTask) -> list[dict[str, Any]]:
    """A batch of simulations in a worker (:func:`simulate_batch`); each result written
    atomically to its path. Returns the results."""
    problem, resolved, spec = _task_problem(task)
    results = simulate_batch(spec, problem.Phi, problem.Phi_new, resolved.batched, task.indices, task.settings,
                             task.time_limit)
    for result, path in zip(results, task.paths):
        write_signed_json(result, path, SBC_SIMULATION)
    return results


def _fit_module(fit: Callable) -> str:
    # through partials and the return-value check to the engine's own code
    while isinstance(fit, functools.partial) or hasattr(fit, "__wrapped_engine__"):
        fit = fit.func if isinstance(fit, functools.partial) else fit.__wrapped_engine__
    return fit.__module__


def run_key(model: str, engine: str, problem: SBCProblem, settings: SBCSettings, fit: Callable) -> str:
    """What determines a run's simulations (not the number of them: a longer run extends a
    shorter one): model, engine, problem, settings, and the code of this module, of the
    model and of the engine (its module and the zoo modules it imports) - a stored
    simulation of code that has since changed is not reused."""

    s = asdict(settings)
    s.pop("n_sims")
    s.pop("false_alarm")
    modules = (__name__, type(problem.spec).__module__, _fit_module(fit))
    # a reference sampler's options come from the model's record, outside the digested code
    options = repr(sorted(fit.keywords.items())) if isinstance(fit, functools.partial) else ""
    payload = {"format": SBC_FORMAT, "model": model, "engine": engine, "problem": problem.digest(),
               "settings": s, "code": code_digest(modules), "options": options}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def stored_simulations(folder: str, n_sims: int) -> tuple[list[str], dict[int, dict[str, Any]]]:
    """(the path of each of a run's ``n_sims`` simulations in ``folder``, made if missing;
    the results already stored there, by index): what a resumed run reuses - only those
    signed with this user's key for this run's folder and this simulation's name
    (base/signing.py); any other is named in a warning and simulated again."""
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"{i:05d}.json") for i in range(n_sims)]
    results: dict[int, dict[str, Any]] = {}
    for i, p in enumerate(paths):
        stored = read_signed_json(p, SBC_SIMULATION, "stored SBC simulation")
        if stored is not None:
            results[i] = stored
    return paths, results


@dataclass(frozen=True)
class SBCConfig:
    """One SBC run, described: ``engine`` (a registry engine, a reference sampler name,
    ``"sampler@variant"``, ``"module:function"``, or a Python function with the fixed-spec
    contract) on ``model``: a registered model's name, a user's Model
    (``validation/records/user_model.py``) or a ``"module:attr"`` path to one.

    settings: simulations, draws ranked, seed (:class:`SBCSettings`). variant: the model
    variant a function or a reference sampler fits (a registry engine names its own).
    problem: the simulated design's keywords (``problem_for``: n, n_basis, n_new, seed),
    as a mapping or pairs. engine_time_limit: the most seconds one simulation's fit may
    take (validation/runs/fence.py; a batched fit gets it once per simulation); past it the
    simulation fails with that reason. None: no limit."""

    model: Any
    engine: str | Callable
    settings: SBCSettings = SBCSettings()
    variant: str | None = None
    problem: tuple[tuple[str, Any], ...] = ()
    engine_time_limit: float | None = fence.DEFAULT_ENGINE_TIME_LIMIT

    def __post_init__(self):
        problem = self.problem.items() if isinstance(self.problem, dict) else self.problem
        object.__setattr__(self, "problem", tuple(sorted((str(k), v) for k, v in problem)))
        if not isinstance(self.settings, SBCSettings):
            raise ValueError(f"settings must be an SBCSettings, got {type(self.settings).__name__}")
        fence.check_time_limit(self.engine_time_limit, "engine_time_limit")
        if isinstance(self.engine, str) and "@" in self.engine and ":" not in self.engine:
            if self.variant is not None:
                raise ValueError(f"engine {self.engine!r} names a variant and variant={self.variant!r} another")
            engine, variant = self.engine.split("@", 1)  # "grid-gibbs@s-grid": a sampler on a variant
            object.__setattr__(self, "engine", engine)
            object.__setattr__(self, "variant", variant)


def run_sbc(config: SBCConfig, *, out_dir=None, executor=None, progress: Callable | None = None) -> SBCResult:
    """SBC of ``config.engine`` on ``config.model`` (:class:`SBCConfig`).

    out_dir: where the simulations are kept (one JSON each, under ``sims-<key>/``); a
    rerun with the same key reuses them. None: a temporary folder, discarded. executor:
    anything with ``map`` (a Dask ``Client.get_executor()``); None: here, one after another.
    progress(done, total): called as simulations finish.
    Returns the :class:`SBCResult` (status, reason, counts, the uniformity test, ...).
    """
    import tempfile

    if not isinstance(config, SBCConfig):
        raise TypeError(f"run_sbc takes an SBCConfig, got {type(config).__name__}")
    engine, variant, settings = config.engine, config.variant, config.settings
    # a user's model is added to this process's registry here and to each worker's by its
    # tasks, which carry it as it was given (model_ref)
    model_ref = config.model
    model = model_name(model_ref)
    limit = config.engine_time_limit
    record = registry.get_model(model)
    if record.sbc_spec is None:
        return SBCResult(model=model, engine=engine_label(engine), settings=settings, status=NOT_APPLICABLE,
                         reason=record.no_sbc or f"{record.title} names no proper prior to draw parameters from (an "
                                                 "improper prior has no prior draws, so SBC cannot start)")
    problem_kwargs = dict(config.problem)
    # the problem (a model with its own data refuses problem keywords here: problem_for), which
    # the tasks of this process will use too (one spec object: see _problem)
    problem = _problem(model_ref, config.problem)[1]
    resolved = resolve_engine(record, engine, settings)
    if variant is not None:
        # a function that approximates one of the model's variants, or a reference sampler
        # run on a variant's posterior (our ground truth there needs SBC as much)
        if not callable(engine) and engine not in record.sampler_names:
            raise ValueError("variant= is for engines given as functions and for reference samplers; "
                             "a registry engine names its own")
        if variant not in problem.variants:
            raise ValueError(f"{record.title} has no variant {variant!r}; variants: {', '.join(problem.variants) or 'none'}")
        resolved = replace(resolved, variant=variant,
                           label=resolved.label if callable(engine) else f"{resolved.label}@{variant}")
    spec = problem.spec if resolved.variant is None else problem.variants[resolved.variant]
    context = dict(model=model, engine=resolved.label, variant=resolved.variant,
                   design={**problem_kwargs, **problem.design()},
                   spec=spec.to_dict())
    if resolved.not_applicable:
        return SBCResult(**context, settings=settings, status=NOT_APPLICABLE, reason=resolved.not_applicable)
    if callable(engine) and executor is not None:
        raise ValueError("an engine given as a Python function runs in this process only; "
                         "give it as 'module:function' to run it on an executor")
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="zoo-sbc-")
        out_dir = tmp.name
    try:
        key = run_key(model, (resolved.label if callable(engine) else engine) + f"@{resolved.variant}",
                      problem, settings, resolved.fit)
        folder = os.path.join(os.fspath(out_dir), f"sims-{key}")
        paths, results = stored_simulations(folder, settings.n_sims)
        reused = len(results)
        todo = [i for i in range(settings.n_sims) if i not in results]
        t0 = time.perf_counter()
        if callable(engine):
            # a Python function runs here, one batch or one simulation at a time
            size = sims_per_batch(resolved) if resolved.batched is not None else 1
            for chunk in (todo[i:i + size] for i in range(0, len(todo), size)):
                if resolved.batched is not None:
                    done = simulate_batch(spec, problem.Phi, problem.Phi_new, resolved.batched, chunk, settings,
                                          limit)
                else:
                    done = [simulate_one(spec, problem.Phi, problem.Phi_new, resolved.fit, chunk[0], settings,
                                         limit)]
                for r in done:
                    results[r["index"]] = r
                    write_signed_json(r, paths[r["index"]], SBC_SIMULATION)
                if progress:
                    progress(len(results), settings.n_sims)
        elif resolved.batched is not None:
            size = sims_per_batch(resolved)
            chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
            tasks = [_BatchTask(model_ref, engine, config.problem, settings, tuple(chunk),
                                tuple(paths[i] for i in chunk), variant=variant, time_limit=limit) for chunk in chunks]
            mapper = map if executor is None else executor.map
            for batch in mapper(_run_batch_task, tasks):
                for r in batch:
                    results[r["index"]] = r
                if progress:
                    progress(len(results), settings.n_sims)
        else:
            tasks = [_Task(model_ref, engine, config.problem, settings, i, paths[i],
                           variant=variant, time_limit=limit) for i in todo]
            mapper = map if executor is None else executor.map
            for r in mapper(_run_task, tasks):
                results[r["index"]] = r
                if progress:
                    progress(len(results), settings.n_sims)
        wall = time.perf_counter() - t0
        return summarize([results[i] for i in range(settings.n_sims)],
                         quantity_names(spec, problem.Phi, problem.Phi_new), settings,
                         **context, key=key, folder=folder, reused=reused, wall_seconds=wall,
                         unseen=_unseen(spec))
    finally:
        if tmp is not None:
            tmp.cleanup()


def _unseen(spec) -> str | None:
    """What a run of ``spec`` ranks nothing for and so cannot see, or None: a general model
    judged on some of its sites (or on quantities it computes) ranks no log-likelihood."""
    if is_classifier(spec) or ranks_log_lik(spec):
        return None
    return ("the log-likelihood of the simulated data is not ranked (the model is judged on "
            f"{', '.join(s.name for s in spec.sites())}, not on every latent site: a draw of those does not fix "
            "the likelihood), so errors that show only in the joint through the likelihood cannot be seen")


def summarize(results: list[dict[str, Any]], names: list[str], settings: SBCSettings, *, model: str,
              engine: str, unseen: str | None = None, **context) -> SBCResult:
    """The verdict of a run from its simulations (each as ``sbc_simulation`` stores it):
    their counts, and the judge's verdict (``judge/sbc_verdict.py``) on the ranks of those
    that succeeded, with the run's own notes (failed fits) added to its reason before the
    power line. unseen: what the run ranks nothing for, said in the reason (``_unseen``).
    ``context``: the other fields of the :class:`SBCResult` (design, spec, key, ...)."""
    ok = [r for r in results if r["status"] == "ok"]
    failed = [r for r in results if r["status"] == "failed"]
    points = [r for r in results if r["status"] == "point"]
    seconds = [r["seconds"] for r in results if "seconds" in r]
    counts = SBCCounts(n_sims=len(results), ok=len(ok), failed=len(failed), point=len(points),
                       redraws=int(sum(r.get("redraws", 0) for r in results)),
                       not_converged=int(sum(not r.get("converged", True) for r in ok)),
                       fit_seconds_median=float(np.median(seconds)) if seconds else None)
    failures = tuple(sorted({r["message"] for r in failed})[:5])
    head = dict(model=model, engine=engine, settings=settings, counts=counts, **context)
    if points:
        return SBCResult(**head, status=NOT_APPLICABLE, reason="the engine returned point estimates")
    if len(ok) < MIN_RANKED:
        # the reason names what went wrong, not only how often (a user's engine that returns
        # None, an array or non-finite draws fails every simulation with the same line)
        why = (f"; the fits failed with: {failures[0]}" + (f" (and {len(failures) - 1} other message"
               f"{'s' if len(failures) > 2 else ''})" if len(failures) > 1 else "")) if failures else ""
        return SBCResult(**head, status=NOT_APPLICABLE, failure_messages=failures,
                         reason=f"only {len(ok)} of {len(results)} fits succeeded: too few to test uniformity{why}")
    ranks = np.array([r["ranks"] for r in ok])
    n_draws = ok[0]["n_draws"]
    verdict = rank_verdict(ranks, n_draws, names, false_alarm=settings.false_alarm, seed=settings.seed)
    reason = verdict.reason
    if failed:
        reason += (f"; {len(failed)} of {len(results)} fits failed and are missing from the ranks, "
                   "which can bias them")
    if unseen:
        reason += f"; {unseen}"
    reason += f"; {verdict.power.line}"
    # the contraction view needs each simulation's truth and posterior mean and sd, which
    # simulations of format 1 (and ranks given alone) do not have
    contraction = (contraction_view([r["truth"] for r in ok], [r["post_mean"] for r in ok],
                                    [r["post_sd"] for r in ok], names)
                   if all("post_mean" in r for r in ok) else None)
    return SBCResult(**head, status=verdict.status, reason=reason, failure_messages=failures,
                     uniformity=verdict.uniformity, power=verdict.power,
                     glossary=quantity_glossary(names), ranks=ranks.tolist(),
                     coverage=coverage_view(ranks, n_draws, names, false_alarm=settings.false_alarm,
                                            seed=settings.seed),
                     contraction=contraction)


def rank_summary(ranks, names: list[str], n_draws: int, *, settings: SBCSettings | None = None,
                 model: str = "(ranks)", engine: str = "(ranks)") -> SBCResult:
    """The SBC verdict of ranks computed elsewhere (e.g. by
    :func:`~zoo.validation.judge.rank_uniformity.conjugate_normal_ranks` or a user's own
    simulation loop): ``ranks`` (simulations, quantities), each the rank of the
    true value among ``n_draws`` posterior draws; ``names`` one per quantity. The result is
    an :class:`SBCResult` as :func:`run_sbc` returns, so the report's ``sbc_figure`` and
    ``summary_line`` (validation/report/sbc_report.py) read it."""
    settings = settings or SBCSettings(n_sims=len(ranks), n_draws=n_draws)
    ranks = np.asarray(ranks)
    if ranks.ndim != 2 or ranks.shape[1] != len(names):
        raise ValueError(f"ranks must be (simulations, quantities) with one name per quantity: got shape "
                         f"{ranks.shape} and {len(names)} name(s)")
    if not np.issubdtype(ranks.dtype, np.integer) or ranks.min() < 0 or ranks.max() > n_draws:
        raise ValueError(f"ranks must be integers from 0 to n_draws = {n_draws}")
    results = [{"status": "ok", "ranks": r.tolist(), "n_draws": int(n_draws)} for r in ranks]
    return summarize(results, list(names), settings, model=model, engine=engine)


__all__ = ["run_sbc", "SBCConfig", "SBCResult", "SBCCounts", "SBCSettings", "problem_for", "summarize",
           "rank_summary", "quantity_glossary", "stored_simulations", "run_key", "sims_per_batch",
           "SBC_FORMAT"]
