"""One call that fits a list of engines and the NUTS reference on the same frozen spec
and data, and returns a table of posterior-accuracy metrics.

    results = compare(CompareConfig(model="pcvm", data="ripley", engines=("em", "laplace", "ep")))

``zoo compare`` is a thin shell around :func:`compare` plus :func:`zoo.validation.report.write_report`.

When every reference sampler runs out of its time limit there is no reference: the
engines are still fitted, timed and scored on the test set, every metric that needs a
reference is None with that reason, and ``results["reference"]`` says there is none -
``sampler_name`` None, not certified, one failure per sampler, every number None
(:func:`reference_ran_out_of_time` is the test readers use).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import jax
import numpy as np

from ... import data as datasets
from ...inference.contracts import EngineReturnError
from ...inference.posterior import ApproximationFailed
from ..base.atomic import write_json_atomic  # noqa: F401  (re-exported for callers)
from ..judge.metrics import (
    METRIC_KEYS,
    metrics_without_reference,
    posterior_metrics,
    pruned_weights_vs_reference,
)
from ..judge.verdict import (
    NOT_APPLICABLE,
    chains_draws_flat,
    joint_verdict,
    moments_and_mcse,
    not_applicable,
    verdict,
)
from ..records import registry
from ..references import (
    NoReference,
    ReferenceConfig,
    ReferenceTimeout,
    first_certified_reference,
)
from .engines import engine_label, resolve_entry


@dataclass(frozen=True)
class CompareConfig:
    model: str = "pcvm"
    data: str | None = None  # None: the model's default (its record's default_data)
    split: int = 0
    # engine names, a user's "module:function" paths or callables (validation/runs/engines.py);
    # None: the model's default (its record's default_engines)
    engines: tuple[str | Callable, ...] | None = None
    params: dict[str, float] = field(default_factory=dict)
    # one ReferenceConfig, or several tried in order (the first certified one is the
    # reference); None: the model's default (its record's references)
    reference: ReferenceConfig | tuple[ReferenceConfig, ...] | None = None
    seed: int = 0
    metric_draws: int = 4000
    cache_dir: str | None = None

    def __post_init__(self):
        record = registry.get_model(self.model)  # ValueError naming the known models
        if self.data is None:
            object.__setattr__(self, "data", record.default_data)
        if self.engines is None:
            object.__setattr__(self, "engines", record.default_engines)
        if self.reference is None:
            object.__setattr__(self, "reference", default_references(self.model))
        elif isinstance(self.reference, ReferenceConfig):
            object.__setattr__(self, "reference", (self.reference,))
        else:
            object.__setattr__(self, "reference", tuple(self.reference))
        if not self.reference or not all(isinstance(r, ReferenceConfig) for r in self.reference):
            raise ValueError("reference must be a ReferenceConfig or a non-empty sequence of them")
        if not self.engines:
            raise ValueError("no engines given: name at least one, e.g. --engines laplace,ep")
        object.__setattr__(self, "engines", tuple(self.engines))
        labels = [engine_label(e) for e in self.engines]
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ValueError(f"engines named more than once: {', '.join(repeated)}")
        if self.metric_draws < 100:
            raise ValueError(f"metric_draws must be at least 100; got {self.metric_draws}")


def default_references(model: str, samplers: tuple[str, ...] | None = None, *, nuts_draws: int | None = None,
                       **overrides) -> tuple[ReferenceConfig, ...]:
    """The reference samplers tried for ``model``, in order (its record's references), each
    with the model's own settings, then ``overrides`` (None values are ignored, so CLI
    options left unset keep the defaults).

    samplers: keep only these samplers, in this order (e.g. ("slice-gibbs",)); each must be
    one the model can use (NUTS or one of its own); one the model's chain does not list
    starts from ReferenceConfig's defaults.
    nuts_draws: warm-up and kept draws a chain for NUTS only (batteries and SBC run many
    short NUTS references); a Gibbs sampler keeps its record's length, its draws being
    far more autocorrelated.
    """
    record = registry.get_model(model)
    chain = {d.get("sampler", "nuts"): d for d in record.references}
    if samplers is not None:
        unknown = [s for s in samplers if s not in record.sampler_names]
        if unknown or not samplers:
            raise ValueError(f"unknown reference sampler(s) {unknown or samplers} for {model}; "
                             f"known: {', '.join(record.sampler_names)}")
        chain = {s: chain.get(s, {"sampler": s}) for s in samplers}
    given = {k: v for k, v in overrides.items() if v is not None}
    nuts = {} if nuts_draws is None else {"num_warmup": int(nuts_draws), "num_samples": int(nuts_draws)}
    return tuple(ReferenceConfig(**{**settings, "sampler": name, **(nuts if name == "nuts" else {}), **given})
                 for name, settings in chain.items())


@dataclass
class Comparison:
    """Everything a report needs: the results table plus the objects behind it."""

    results: dict[str, Any]
    prepared: Any
    # None when every reference sampler ran out of time
    reference: Any
    # the model variants that have a reference (not those whose samplers all ran out of time)
    variant_references: dict[str, Any]
    posteriors: dict[str, Any]
    split: Any
    # every reference sampler run, in order (the last certified one, if any, is `reference`)
    references_tried: list = field(default_factory=list)


def timed_fit(fit, spec, Phi, y):
    """Call an engine twice: the first call compiles, the second is the warm time."""
    t0 = time.perf_counter()
    fit(spec, Phi, y)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    posterior = fit(spec, Phi, y)
    warm = time.perf_counter() - t0
    return posterior, warm, max(cold - warm, 0.0)


def failed_row(entry, err: BaseException) -> dict[str, Any]:
    """The results row of an engine whose fit raised ``err``: the reason, no numbers.

    Every metric key is present and None with the failure as its null reason, so readers
    of results.json that look keys up keep working and nothing looks like a measurement.
    """
    # a user's engine's failure is already one line that names the engine and what went wrong
    reason = str(err) if isinstance(err, EngineReturnError) else f"{type(err).__name__}: {err}"
    values = [k for k in METRIC_KEYS if k not in ("khat_reason", "null_reasons")]
    return {
        **{k: None for k in values},
        "khat_reason": None,
        "null_reasons": {k: f"engine failed: {reason}" for k in values},
        "kind": entry.kind,
        "description": entry.description,
        "other_model": entry.other_model,
        "n_basis": None,
        "seconds": None,
        "compile_seconds": None,
        "converged": False,
        "reason": reason,
        "n_iter": None,
        "objective": "",
        "speedup_vs_reference": None,
        "failure": reason,
        "pruned_vs_reference": None,
    }


def _without_undefined_moments(rows, moments):
    """Pruned-weight rows with the reference mean / sd blanked where they do not exist
    (the quantiles and P(|w| < 0.1) always exist)."""
    if not rows or not moments:
        return rows
    drop = [k for k, flag in (("ref_mean", "mean_exists"), ("ref_sd", "sd_exists")) if moments.get(flag) is not True]
    return [{**r, **{k: None for k in drop}} for r in rows]


def reference_summary(ref) -> dict[str, Any]:
    """One reference run as the results (and the reference tables of benchmarks/) record it:
    certificate, diagnostics, timings, sampler."""
    d = ref.diagnostics
    return {
        "certified": bool(ref.certified),
        "failures": list(ref.failures),
        "rhat_max": d["rhat_max"],
        "ess_bulk_min": d["ess_bulk_min"],
        "ess_tail_min": d["ess_tail_min"],
        "divergences": int(d["divergences"]),
        # NUTS only (None for the Gibbs samplers): energy and tree-depth checks
        "ebfmi_min": d.get("ebfmi_min"),
        "treedepth_fraction": d.get("treedepth_fraction"),
        # every sampled site the certificate covers, latent ones included
        "diagnosed_sites": list(d.get("diagnosed_sites", [])),
        "seconds": float(ref.seconds),
        # sampling alone: JAX's tracing/compilation time taken out (as for the engines)
        "warm_seconds": float(ref.posterior.info.seconds),
        "compile_seconds": float(ref.compile_seconds),
        "from_cache": bool(getattr(ref, "from_cache", False)),
        "sampler_name": ref.sampler,
        "sampler": ref.provenance.get("sampler", {}),
    }


def _no_draws_summary(sampler_name: str | None, failures: list[str]) -> dict[str, Any]:
    """The keys of :func:`reference_summary` for samplers that ran out of time: no draws,
    so no diagnostics and no timings, only which ran out and why."""
    return {
        "certified": False,
        "failures": failures,
        "rhat_max": None,
        "ess_bulk_min": None,
        "ess_tail_min": None,
        "divergences": None,
        "ebfmi_min": None,
        "treedepth_fraction": None,
        "diagnosed_sites": [],
        "seconds": None,
        "warm_seconds": None,
        "compile_seconds": None,
        "from_cache": False,
        "sampler_name": sampler_name,
        "sampler": {},
    }


def _timeout_sentence(sampler: str, time_limit: float) -> str:
    # the words of the warning the user saw when the sampler was stopped
    return str(ReferenceTimeout(sampler, time_limit))


def _missing_reference_summary(err: NoReference) -> dict[str, Any]:
    """The reference summary when there is none: no sampler name, one failure per sampler."""
    return _no_draws_summary(None, [_timeout_sentence(s, limit) for s, limit in err.timed_out])


def timed_out_summary(err: ReferenceTimeout) -> dict[str, Any]:
    """One sampler that ran out of time, as an entry of references_tried."""
    return {**_no_draws_summary(err.sampler, [str(err)]), "time_limit": err.time_limit}


def _timed_out_samplers(err: NoReference) -> list[dict[str, Any]]:
    """references_tried when every sampler ran out of time: each with its time limit."""
    return [timed_out_summary(ReferenceTimeout(s, limit)) for s, limit in err.timed_out]


def reference_ran_out_of_time(summary: dict[str, Any]) -> bool:
    """Whether a reference summary of the results (``reference`` or one of
    ``variant_references``) stands for no reference at all: every sampler ran out of time."""
    return summary.get("sampler_name", "nuts") is None


def compare(config: CompareConfig, *, progress: bool = False) -> Comparison:
    """Run the comparison protocol; see the module docstring of ``protocols``."""
    record = registry.get_model(config.model)
    # a user's engine is checked against the contract here, before any costly work
    entries = [resolve_entry(record, e) for e in config.engines]
    record.check_params(config.params)  # before any data are read or fits run
    split = datasets.load(config.data, config.split, standardize=not record.raw_inputs)

    bar = _progress_bar(progress, total=record.cv_fits + 2 + len(entries), desc="zoo compare")
    bar.set_postfix_str("selecting hyper-parameters")
    prepared = registry.prepare(config.model, split, config.params, progress=bar)
    spec, Phi, y = prepared.spec, prepared.Phi_train, prepared.y_train

    bar.set_postfix_str("reference")
    try:
        reference, tried = first_certified_reference(
            spec, Phi, y, configs=config.reference, cache_dir=config.cache_dir, progress=progress)
        no_reference = None
    except NoReference as err:
        # nothing to measure the engines against, but their timings and test-set figures
        # still make a report - one that says plainly there is no reference
        reference, tried, no_reference = None, [], err
    bar.update(1)
    variant_refs, variants_without_reference = {}, {}
    needed_variants = sorted({e.variant for e in entries} - {None})
    for variant in needed_variants:
        bar.set_postfix_str(f"reference ({variant})")
        try:
            variant_refs[variant], _ = first_certified_reference(
                prepared.variants[variant], Phi, y, configs=config.reference,
                cache_dir=config.cache_dir, progress=progress,
            )
        except NoReference as err:
            variants_without_reference[variant] = err
    bar.update(1)

    key = jax.random.PRNGKey(config.seed)
    engines_out, posteriors = {}, {}
    # the reference's moments and Monte Carlo errors, shared by every engine's verdict
    ref_moments = (moments_and_mcse(chains_draws_flat(reference.posterior))
                   if reference is not None and reference.certified else None)
    for entry in entries:
        bar.set_postfix_str(f"engine {entry.name}")
        try:
            posterior, warm, compile_s = timed_fit(entry.fit(), spec, Phi, y)
        except (ApproximationFailed, FloatingPointError, EngineReturnError) as err:
            # the engine's answer does not exist here (e.g. an indefinite Hessian), a
            # posterior constructor refused non-finite numbers, or a user's engine failed
            # or returned something unusable (one line, validation/runs/engines.py): one failed
            # row, the other engines still compared. Any other exception from one of the
            # zoo's own engines is a bug and propagates.
            engines_out[entry.name] = failed_row(entry, err)
            bar.update(1)
            continue
        posteriors[entry.name] = posterior
        if reference is None:
            m = metrics_without_reference(posterior, prepared.Phi_test, prepared.y_test, str(no_reference))
        else:
            key, sub = jax.random.split(key)
            m = posterior_metrics(
                posterior, reference, Phi, y, prepared.Phi_test, prepared.y_test,
                key=sub, n_draws=config.metric_draws, moments=prepared.moments,
            )
        row = {
            **m,
            # a user's engine is of the kind it returned
            "kind": posterior.kind,
            "description": entry.description,
            "other_model": entry.other_model,
            # an engine that prunes (GGSM's MM) reports how many weights it kept
            "n_basis": int(posterior.info.extra.get("n_active", prepared.hyper.get("n_basis", Phi.shape[1]))),
            "seconds": warm,
            "compile_seconds": compile_s,
            "converged": bool(posterior.info.converged),
            "reason": posterior.info.reason,
            "n_iter": int(posterior.info.n_iter),
            "objective": posterior.info.objective,
            # warm against warm: compilation is excluded on both sides
            "speedup_vs_reference": (float(reference.posterior.info.seconds / warm)
                                     if reference is not None and warm > 0 else None),
            "failure": None,
            # weights the engine pruned to exact zeros, beside the reference's marginals
            "pruned_vs_reference": None if reference is None else _without_undefined_moments(
                pruned_weights_vs_reference(posterior, reference.posterior), prepared.moments),
            "verdict": _verdict(posterior, reference, entry, prepared.moments, ref_moments),
            # the same question of the joint posterior: correlations the marginals cannot see
            "joint_verdict": _verdict(posterior, reference, entry, prepared.moments, None, joint=True),
        }
        variant = entry.variant
        if variant in variant_refs:
            key, sub = jax.random.split(key)
            row[f"vs_{variant}"] = posterior_metrics(
                posterior, variant_refs[variant], Phi, y, prepared.Phi_test, prepared.y_test,
                key=sub, n_draws=config.metric_draws, moments=prepared.variant_moments.get(variant),
            )
            row[f"vs_{variant}"]["reference_certified"] = bool(variant_refs[variant].certified)
            # against the reference of the variant it fits, the engine's distance is its
            # approximation error: no "another model" caveat here
            row[f"vs_{variant}"]["verdict"] = _verdict(posterior, variant_refs[variant], entry,
                                                       prepared.variant_moments.get(variant), None,
                                                       own_model=True)
            row[f"vs_{variant}"]["joint_verdict"] = _verdict(posterior, variant_refs[variant], entry,
                                                             prepared.variant_moments.get(variant), None,
                                                             own_model=True, joint=True)
        elif variant is not None:
            row[f"vs_{variant}"] = {
                **metrics_without_reference(posterior, prepared.Phi_test, prepared.y_test,
                                            str(variants_without_reference[variant])),
                "reference_certified": False,
            }
        engines_out[entry.name] = row
        bar.update(1)
    bar.close()

    results = {
        "model": config.model,
        "data": config.data,
        "split": config.split,
        "n_train": int(Phi.shape[0]),
        "n_test": int(prepared.Phi_test.shape[0]),
        "hyper": prepared.hyper,
        "selection": prepared.selection,
        "moments": prepared.moments,
        "spec": spec.to_dict(),
        "reference": _missing_reference_summary(no_reference) if reference is None else reference_summary(reference),
        # every sampler tried, in order: the report names the one used and why the others not
        "references_tried": _timed_out_samplers(no_reference) if reference is None else [
            timed_out_summary(r) if isinstance(r, ReferenceTimeout) else reference_summary(r) for r in tried],
        "variant_references": {
            v: reference_summary(variant_refs[v]) if v in variant_refs
            else _missing_reference_summary(variants_without_reference[v]) for v in needed_variants},
        "reference_test_error": None if reference is None else float(np.mean(
            (reference.posterior.predict_proba(prepared.Phi_test) > 0.5) != (prepared.y_test == 1))),
        "engines": engines_out,
        "config": {
            "engines": [e.name for e in entries],
            "params": dict(config.params),
            "reference": [asdict(r) for r in config.reference],
            "seed": config.seed,
            "metric_draws": config.metric_draws,
        },
    }
    return Comparison(results, prepared, reference, variant_refs, posteriors, split, tried)


def _verdict(posterior, reference, entry, moments, ref_moments, *, own_model: bool = False,
             joint: bool = False) -> dict[str, Any]:
    """The engine's verdict against a reference (validation/judge/verdict.py): the marginal one,
    or with ``joint`` the verdict on the joint posterior; or why there is none: no
    reference, an uncertified one (its draws are not known to be the posterior), or an
    engine that fits another model (its distance is not an approximation error, unless
    ``own_model``: the reference is that of the variant the engine fits)."""
    if reference is None:
        return not_applicable("no reference posterior")
    if not reference.certified:
        return not_applicable("the reference is not certified: a difference from it would prove nothing")
    if joint:
        v = joint_verdict(posterior, reference.posterior, moments=moments)
    else:
        v = verdict(posterior, reference.posterior, moments=moments, reference_moments=ref_moments)
    if entry.other_model and not own_model and v["status"] != NOT_APPLICABLE:
        v["reason"] = f"fits another model ({entry.other_model}), so this is a distance, not an error: " + v["reason"]
    return v


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


def _progress_bar(enabled: bool, total: int, desc: str):
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step")
