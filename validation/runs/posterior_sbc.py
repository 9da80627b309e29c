"""Posterior SBC: calibration of an engine conditional on the observed data (Säilynoja,
Johnson, Martin & Vehtari 2025, "Posterior SBC: simulation-based calibration checking
conditional on data").

Prior SBC (``sbc.py``) asks whether an engine is calibrated averaged over the whole prior,
most of whose data sets look nothing like the one a user has. Posterior SBC asks it where
the user is. With y the observed labels on the design Phi:

1. theta_i ~ p(theta | y): a draw of the certified reference posterior of the observed data;
2. y~_i ~ p(y~ | theta_i): new labels from the model itself at design rows Phi~ (by default
   the training design again, so the new data set has the observed one's size);
3. the engine's posterior given both data sets, p(theta | y, y~_i), on the stacked design;
4. the rank of theta_i (and of the predictive and log-likelihood quantities of ``sbc.py``,
   the log-likelihood taken over the stacked labels) among L of its draws.

Why the ranks are uniform for an exact posterior: y and y~ are independent given theta, so
p(theta | y) p(y~ | theta) is proportional to p(theta | y, y~) p(y~ | y): drawing theta from the
posterior of y and then y~ is a joint draw of (theta, y~) given y, and theta is then a draw
from p(theta | y, y~) - the posterior the engine approximates. Steps 1-4 are prior SBC with the
prior replaced by p(theta | y) and the data by y~, so the uniformity test, its false-alarm
rate and its power statement (``sbc.summarize``, ``judge/sbc_verdict.py``) carry over
unchanged. Two differences a reader must keep in mind:

* the truths are S draws of a reference chain, thinned evenly over its chains, not
  independent draws; a certified reference has a bulk ESS of at least 400 in every
  coordinate, so S up to a few hundred thinned draws are close to independent (a run with
  S above the reference's smallest bulk ESS says so in its reason);
* posterior SBC needs no proper prior (only the posterior of y), so it also applies to
  models whose prior SBC cannot start; and it cannot see errors the engine makes only on
  data sets unlike y.

An engine that ignores y~ (it returns p(theta | y) whatever the new data) has exactly
uniform ranks in every parameter: only the data-dependent quantity (the log-likelihood of
the stacked labels, which the truth generated) catches it - tested in
tests/validation/runs/test_posterior_sbc.py.

Runs are stored and resumed as ``sbc.py``'s are: each simulation atomically in its own file
under ``psbc-<key>/``, the key naming the model, engine, conditioning case (spec, data,
truths), settings and code; a simulation's new labels and keys depend on its index alone, so
a longer run extends a shorter one. ``executor``: any ``map(fn, iterable)`` (a Dask client's
``get_executor()``); each task is a chunk of simulations with everything it needs.
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

from ..base.code_digest import code_digest, spec_key
from ..base.signing import SBC_SIMULATION, write_signed_json
from ..records import registry
from ..references import first_certified_reference
from ..references.nuts_program import as_numpy_key
from ..judge import sbc_verdict
from . import fence, sbc, sbc_simulation
from .sbc_result import SBCResult
from .compare import CompareConfig, default_references, prepare_problem

#: the fold_in stream of a simulation's key that draws its new labels
LABEL_STREAM = 2
#: file format of the stored simulations
POSTERIOR_SBC_FORMAT = 1
#: predictive quantities: the linear predictor at this many held-out rows
N_PREDICTIVE_ROWS = 3
#: the ``kind`` of a posterior SBC run's result (SBC from the prior has None)
KIND = "posterior SBC"


@dataclass(frozen=True, eq=False)
class ConditioningCase:
    """The observed data posterior SBC conditions on and the reference posterior of them.

    spec, Phi (N, M), y (N,): the frozen model and data; Phi_new: held-out rows for the
    predictive quantities; reference: a reference run (``validation.references.Reference``)
    of (spec, Phi, y), whose draws are the truths; label: how reports name the case."""

    spec: Any
    Phi: np.ndarray
    y: np.ndarray
    Phi_new: np.ndarray
    reference: Any
    label: str = "observed data"

    def digest(self) -> str:
        """A short hex digest (16 characters) of the case: the spec, the data, the held-out rows
        and the reference's draws; part of the run's key (``run_key``), so that stored
        simulations are reused only for the same case."""
        h = hashlib.sha256()
        h.update(json.dumps(self.spec.to_dict(), sort_keys=True, default=str).encode())
        for a in (self.Phi, self.y, self.Phi_new, self.reference.posterior.flat_draws()):
            h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        return h.hexdigest()[:16]


def default_case(model: str, *, variant: str | None = None, cache_dir=None, data: str | None = None,
                 progress: bool = False) -> ConditioningCase:
    """The case ``zoo compare --model MODEL`` judges (its data split, its hyper-parameters
    selected once), conditioned on its training labels, with the first certified of the
    model's reference samplers (read from ``cache_dir`` when it holds the run). variant: the
    case of one of the model's variants (the posterior an engine of that variant fits).
    Raises ValueError when no reference certifies: truths from an uncertified chain would
    make every verdict meaningless."""
    config = CompareConfig(model=model, cache_dir=cache_dir, **({} if data is None else {"data": data}))
    prepared = prepare_problem(config)
    spec = prepared.spec if variant is None else prepared.variants[variant]
    reference, _ = first_certified_reference(spec, prepared.Phi_train, prepared.y_train,
                                             configs=default_references(model), cache_dir=cache_dir,
                                             progress=progress)
    if not reference.certified:
        raise ValueError(f"no certified reference of {model}'s default case"
                         + (f" ({variant})" if variant else "") + ": posterior SBC draws its truths from "
                         f"one; the closest run failed: {'; '.join(reference.failures)}")
    return ConditioningCase(spec, np.asarray(prepared.Phi_train, dtype=float), np.asarray(prepared.y_train, dtype=float),
                            np.asarray(prepared.Phi_test[:N_PREDICTIVE_ROWS], dtype=float), reference,
                            label=f"{model} default case ({config.data}, {len(prepared.y_train)} training points)")


def truths(case: ConditioningCase, n_sims: int) -> dict[str, np.ndarray]:
    """``n_sims`` reference draws, thinned evenly over its chains (sbc's thinning)."""
    posterior = case.reference.posterior
    total = posterior.flat_draws().shape[0]
    if n_sims > total:
        raise ValueError(f"posterior SBC with {n_sims} simulations needs as many reference draws; the "
                         f"reference has {total}")
    return sbc_simulation.posterior_draws(posterior, None, n_sims)


_LABEL_PROGRAMS: dict[str, Callable] = {}


def _label_program(spec, Phi_tilde: np.ndarray) -> Callable:
    """(params of one draw, key) -> new labels at ``Phi_tilde`` drawn from the model itself:
    the observed site's distribution at those parameters (its mean is P(y = 1)), one uniform
    per row. Checks once that the parameters fix every latent site of the model (a site
    left out would be drawn from its prior, silently changing what is simulated)."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.distributions.distribution import Unit

    key = spec_key(spec, np.asarray(Phi_tilde, dtype=float))
    if key in _LABEL_PROGRAMS:
        return _LABEL_PROGRAMS[key]
    Phi_j = jnp.asarray(Phi_tilde)
    obs = sbc_simulation.observed_site(spec, Phi_j)
    names = {s.name for s in spec.sites(Phi_j.shape[1])}
    trace = handlers.trace(handlers.seed(spec.model, jax.random.PRNGKey(0))).get_trace(Phi_j)
    latent = {n for n, s in trace.items() if s["type"] == "sample" and n != obs
              and not s["is_observed"] and not isinstance(s["fn"], Unit)}
    if latent - names:
        raise ValueError(f"{type(spec).__name__}.model has latent sites {sorted(latent - names)} that "
                         f"spec.sites does not list: posterior SBC cannot hold them at the truth")

    def labels(params, k):
        tr = handlers.trace(handlers.substitute(handlers.seed(spec.model, jax.random.PRNGKey(0)), params)
                            ).get_trace(Phi_j)
        p = tr[obs]["fn"].mean
        return (jax.random.uniform(k, p.shape) < p).astype(p.dtype)

    _LABEL_PROGRAMS.clear() if len(_LABEL_PROGRAMS) > 16 else None
    _LABEL_PROGRAMS[key] = jax.jit(labels)
    return _LABEL_PROGRAMS[key]


def new_rows(case: ConditioningCase, n_new_data: int | None) -> np.ndarray:
    """The design rows of the new labels: the training design again (None), or its first
    ``n_new_data`` rows, cycled when more than N."""
    n = case.Phi.shape[0] if n_new_data is None else int(n_new_data)
    if n < 1:
        raise ValueError(f"n_new_data must be at least 1; got {n_new_data}")
    return case.Phi[np.arange(n) % case.Phi.shape[0]]


def _simulation_key(settings: sbc_simulation.SBCSettings, index: int):
    import jax

    return jax.random.fold_in(jax.random.PRNGKey(settings.seed), index)


def _stacked(case_spec, Phi, y, Phi_tilde, truth: dict[str, np.ndarray], key) -> np.ndarray:
    """The observed labels followed by new labels drawn at ``truth``."""
    import jax

    y_tilde = np.asarray(_label_program(case_spec, Phi_tilde)(
        {k: np.asarray(v) for k, v in truth.items()}, jax.random.fold_in(key, LABEL_STREAM)))
    return np.concatenate([np.asarray(y, dtype=float), y_tilde])


@dataclass(frozen=True)
class _Chunk:
    """Simulations ``indices`` of one run with everything they need, picklable for a worker.
    engine: a registry name, a sampler name or ``module:function`` (resolved in the worker)."""

    model: str
    engine: str
    variant: str | None
    spec: Any
    Phi: np.ndarray
    y: np.ndarray
    Phi_tilde: np.ndarray
    Phi_new: np.ndarray
    truths: tuple[dict[str, np.ndarray], ...]
    indices: tuple[int, ...]
    paths: tuple[str, ...]
    settings: sbc_simulation.SBCSettings
    # the most seconds one simulation's fit may take (fence.py); None: no limit
    time_limit: float | None = None


@functools.lru_cache(maxsize=8)
def _resolved(model: str, engine: str, settings: sbc_simulation.SBCSettings, variant: str | None) -> sbc_simulation.ResolvedEngine:
    """A chunk's engine, resolved once per worker process (an engine that compiles per spec
    object then compiles once per chunk, not once per simulation)."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    resolved = sbc_simulation.resolve_engine(registry.get_model(model), engine, settings)
    return resolved if variant is None else replace(resolved, variant=variant)


def run_chunk(chunk: _Chunk, resolved: sbc_simulation.ResolvedEngine | None = None) -> list[dict[str, Any]]:
    """The simulations of ``chunk``: new labels, the engine's fit on the stacked data, the
    ranks; each result written atomically to its path. resolved: the engine (None: from the
    chunk's names, in a worker)."""
    resolved = _resolved(chunk.model, chunk.engine, chunk.settings, chunk.variant) if resolved is None else resolved
    spec, settings = chunk.spec, chunk.settings
    Phi_all = np.vstack([chunk.Phi, chunk.Phi_tilde])
    keys = [_simulation_key(settings, i) for i in chunk.indices]
    ys = [_stacked(spec, chunk.Phi, chunk.y, chunk.Phi_tilde, t, k) for t, k in zip(chunk.truths, keys)]
    results: list[dict[str, Any]] = []
    if resolved.batched is not None:
        import jax

        # each simulation's fit keyed by its own key, as in sbc_simulation.simulate_batch
        fit_keys = np.stack([as_numpy_key(jax.random.fold_in(k, sbc_simulation.FIT_STREAM)) for k in keys])
        posteriors, share = sbc_simulation.fenced_batch(resolved.batched, spec, Phi_all, np.stack(ys), fit_keys,
                                             chunk.time_limit)
        fitted, by_index = [], {}
        for index, key, truth, y, posterior in zip(chunk.indices, keys, chunk.truths, ys, posteriors):
            if isinstance(posterior, (BaseException, str)):
                by_index[index] = sbc_simulation.failed_fit(index, 0, share, posterior)
            else:
                fitted.append((index, key, truth, y, 0, posterior, share))
        by_index.update(sbc_simulation.rank_many(spec, Phi_all, chunk.Phi_new, fitted, settings))
        results = [by_index[i] for i in chunk.indices]
    else:
        for index, key, truth, y in zip(chunk.indices, keys, chunk.truths, ys):
            posterior, outcome = sbc_simulation.fenced_fit(resolved.fit, spec, Phi_all, y, index, 0, chunk.time_limit)
            if posterior is None:
                results.append(outcome)
                continue
            results.append(sbc_simulation.rank_simulation(spec, Phi_all, chunk.Phi_new, posterior, key, truth, y, index, 0,
                                       outcome, settings))
    for result, path in zip(results, chunk.paths):
        write_signed_json(result, path, SBC_SIMULATION)
    return results


def run_key(model: str, engine: str, case: ConditioningCase, Phi_tilde: np.ndarray, settings: sbc_simulation.SBCSettings,
            fit: Callable) -> str:
    """What determines a run's simulations (not their number): model, engine, case,
    new rows, settings and the code of this module, sbc.py, the model and the engine."""
    s = asdict(settings)
    s.pop("n_sims")
    s.pop("false_alarm")
    modules = (__name__, sbc.__name__, type(case.spec).__module__, sbc._fit_module(fit))
    payload = {"format": POSTERIOR_SBC_FORMAT, "model": model, "engine": engine, "case": case.digest(),
               "new_rows": hashlib.sha256(np.ascontiguousarray(Phi_tilde, dtype=float).tobytes()).hexdigest()[:16],
               "settings": s, "code": code_digest(modules)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PosteriorSBCConfig:
    """One posterior SBC run, described: ``engine`` (a registry engine, a reference sampler,
    ``"sampler@variant"``, ``module:function`` or a Python function with the fixed-spec
    contract) on ``model``, conditioned on ``case`` (None: :func:`default_case` of the
    model, or of the variant the engine fits). settings: as SBC's. n_new_data: rows of the
    new data set (None: the training design again). chunk_size: simulations per task.
    engine_time_limit: as in :class:`~zoo.validation.runs.sbc.SBCConfig`."""

    model: str
    engine: str | Callable
    settings: sbc_simulation.SBCSettings = sbc_simulation.SBCSettings()
    case: ConditioningCase | None = None
    n_new_data: int | None = None
    chunk_size: int = 25
    engine_time_limit: float | None = fence.DEFAULT_ENGINE_TIME_LIMIT

    def __post_init__(self):
        if not isinstance(self.settings, sbc_simulation.SBCSettings):
            raise ValueError(f"settings must be an SBCSettings, got {type(self.settings).__name__}")
        fence.check_time_limit(self.engine_time_limit, "engine_time_limit")
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {self.chunk_size!r}")


def run_posterior_sbc(config: PosteriorSBCConfig, *, out_dir=None, cache_dir=None, executor=None,
                      progress: Callable | None = None) -> SBCResult:
    """Posterior SBC of ``config.engine`` on ``config.model`` (:class:`PosteriorSBCConfig`).
    out_dir, executor, progress: as in ``sbc.run_sbc``; cache_dir: where the conditioning
    case's reference is read from or stored.

    Returns an :class:`~zoo.validation.runs.sbc_result.SBCResult` as ``sbc.run_sbc`` does
    (so the report's ``summary_line``, ``plot_sbc`` and ``plot_sbc_views``,
    validation/report/sbc_report.py, read it), with ``kind`` :data:`KIND` and
    ``conditioning`` set.
    """
    import tempfile

    if not isinstance(config, PosteriorSBCConfig):
        raise TypeError(f"run_posterior_sbc takes a PosteriorSBCConfig, got {type(config).__name__}")
    model, engine, case, settings = config.model, config.engine, config.case, config.settings
    limit = config.engine_time_limit
    record = registry.get_model(model)
    variant = None
    if isinstance(engine, str) and "@" in engine and ":" not in engine:
        engine, variant = engine.split("@", 1)  # "grid-gibbs@s-grid": a sampler on a variant's posterior
        if engine not in record.sampler_names:
            raise ValueError(f"ENGINE@VARIANT names a reference sampler on a variant; {engine!r} is not one of "
                             f"{', '.join(record.sampler_names)}")
    resolved = sbc_simulation.resolve_engine(record, engine, settings)
    if variant is not None:
        resolved = replace(resolved, variant=variant, label=f"{resolved.label}@{variant}")
    label = resolved.label
    context = dict(model=model, engine=label, kind=KIND, variant=resolved.variant)
    if resolved.not_applicable:
        return SBCResult(**context, settings=settings, status=sbc_verdict.NOT_APPLICABLE,
                         reason=resolved.not_applicable)
    if callable(engine) and executor is not None:
        raise ValueError("an engine given as a Python function runs in this process only; "
                         "give it as 'module:function' to run it on an executor")
    if case is None:
        case = default_case(model, variant=resolved.variant, cache_dir=cache_dir)
    Phi_tilde = new_rows(case, config.n_new_data)
    draws = truths(case, settings.n_sims)
    ess = (case.reference.diagnostics or {}).get("ess_bulk_min")
    context["conditioning"] = {
        "case": case.label, "n_observed": int(case.Phi.shape[0]), "n_new_data": int(Phi_tilde.shape[0]),
        "n_basis": int(case.Phi.shape[1]), "reference_sampler": case.reference.sampler,
        "reference_certified": bool(case.reference.certified),
        "reference_ess_bulk_min": None if ess is None else float(ess),
        "truths": "reference draws thinned evenly over its chains"}
    context["spec"] = case.spec.to_dict()
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="zoo-psbc-")
        out_dir = tmp.name
    try:
        name = label if callable(engine) else engine
        key = run_key(model, f"{name}@{resolved.variant}", case, Phi_tilde, settings, resolved.fit)
        folder = os.path.join(os.fspath(out_dir), f"psbc-{key}")
        paths, results = sbc.stored_simulations(folder, settings.n_sims)
        reused = len(results)
        todo = [i for i in range(settings.n_sims) if i not in results]
        size = config.chunk_size
        chunks = [_Chunk(model, name, resolved.variant, case.spec, case.Phi,
                         case.y, Phi_tilde, case.Phi_new,
                         tuple({k: np.asarray(v[i]) for k, v in draws.items()} for i in part),
                         tuple(part), tuple(paths[i] for i in part), settings, limit)
                  for part in (todo[j:j + size] for j in range(0, len(todo), size))]
        t0 = time.perf_counter()
        run = functools.partial(run_chunk, resolved=resolved) if executor is None else run_chunk
        mapper = map if executor is None else executor.map
        for done in mapper(run, chunks):
            for r in done:
                results[r["index"]] = r
            if progress:
                progress(len(results), settings.n_sims)
        wall = time.perf_counter() - t0
        names = sbc_simulation.quantity_names(case.spec, case.Phi, case.Phi_new)
        result = sbc.summarize([results[i] for i in range(settings.n_sims)], names, settings, **context,
                               key=key, folder=folder, reused=reused, wall_seconds=wall)
        # sbc's words for its quantities, with posterior SBC's truths and labels
        glossary = {k: v.replace("its truth drawn from the prior",
                                 "its truth a draw of the reference posterior of the observed data")
                    .replace("of the simulated labels", "of the observed and simulated labels")
                    for k, v in result.glossary.items()}
        reason = result.reason
        if ess is not None and settings.n_sims > ess:
            reason += (f"; the {settings.n_sims} truths are more than the reference's smallest bulk "
                       f"ESS ({ess:.0f}): they are not all close to independent")
        return replace(result, glossary=glossary, reason=reason)
    finally:
        if tmp is not None:
            tmp.cleanup()


__all__ = ["ConditioningCase", "default_case", "truths", "new_rows", "run_posterior_sbc",
           "PosteriorSBCConfig", "run_chunk", "KIND"]
