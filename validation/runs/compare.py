"""One call that fits a list of engines and the NUTS reference on the same frozen spec
and data, and returns a table of posterior-accuracy metrics.

    results = compare(CompareConfig(model="pcvm", data="ripley", engines=("em", "laplace", "ep")))

``zoo compare`` is a thin shell around :func:`compare` plus
:func:`zoo.validation.report.compare_report.write_report`. The result is typed
(``runs/results.py``: :class:`~zoo.validation.runs.results.ComparisonResult`, its engine rows,
reference summaries and verdicts); ``to_json()`` gives the results.json layout.

When every reference sampler runs out of its time limit there is no reference: the
engines are still fitted, timed and scored on the test set, every metric that needs a
reference is None with that reason, and ``result.reference`` says there is none -
``sampler_name`` None, not certified, one failure per sampler, every number None
(``result.reference.ran_out_of_time``).
"""
from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import jax
import numpy as np

from ... import data as datasets
from ...inference.contracts import EngineReturnError
from ...models.base import is_classifier
from ...models.checks import check_seed
from ...inference.posterior import ApproximationFailed
from ..judge.metrics import (
    METRIC_KEYS,
    metrics_without_reference,
    posterior_metrics,
    pruned_weights_vs_reference,
)
from ..judge import evidence
from ..judge.distribution import distribution_verdict
from ..judge.verdict import (
    DISTRIBUTION,
    JOINT,
    MARGINAL,
    Verdict,
    chains_draws_flat,
    joint_verdict,
    moments_and_mcse,
    not_applicable,
    verdict,
)
from ..records import registry
from ..records.user_model import OWN_DATA, Model
from ..references import (
    NoReference,
    ReferenceConfig,
    ReferenceTimeout,
    first_certified_reference,
)
from .engines import engine_label, is_user_engine, model_name, resolve_entry
from .fence import (
    DEFAULT_ENGINE_TIME_LIMIT,
    EngineTimeout,
    check_time_limit,
    isolated_timed_fit,
    limited,
    posterior_problem,
)
from .results import AgainstVariant, ComparisonResult, EngineRow, ReferenceSummary


@dataclass(frozen=True)
class CompareConfig:
    """What one comparison runs: the model (a registered name or a user's
    :class:`~zoo.validation.records.user_model.Model`), its data set and split, the engines,
    the ``--param`` values, the reference samplers tried in order, and the settings of the
    metrics, the evidence verdict and the engine time limit. What is left None is filled in
    from the model's record when the config is made; a value the run would refuse (an
    unknown model, a parameter out of its domain, a repeated engine) is a ValueError, in one
    line, before any work."""

    # a model's name, or a user's Model (validation/records/user_model.py)
    model: str | Model = registry.DEFAULT_MODEL
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
    # the device the computation ran on and why (the command line's --device choice,
    # zoo/devices.py), for the report; None: the platform JAX used, without a why
    device: str | None = None
    # the evidence verdict of every engine that reports a log evidence or a bound on it
    # (:data:`EVIDENCE_MODES`): "bridge" judges it against bridge sampling from the
    # reference's draws (under a second on most default cases, half a minute on GIG's),
    # "checked" also runs AIS and judges only against a reference log Z the two agree on
    # (10 s to 20 minutes more), "off" skips it
    evidence: str = "bridge"
    # the most seconds one call of an engine's fit may take (validation/runs/fence.py:
    # stopped the next time it runs Python code); None: no limit
    engine_time_limit: float | None = DEFAULT_ENGINE_TIME_LIMIT

    def __post_init__(self):
        # a user's model (a Model, or a "module:attr" path to one): its record joins this
        # process's registry under its name (a name the zoo already uses for another model is
        # refused), and the config keeps the name, as it does for the zoo's own models
        object.__setattr__(self, "model", model_name(self.model))
        record = registry.get_model(self.model)  # ValueError naming the known models
        if record.own_data and (self.data not in (None, OWN_DATA) or self.split != 0):
            raise ValueError(f"model {self.model} brings its own data: no --data or --split (got "
                             f"{self.data if self.data not in (None, OWN_DATA) else f'split {self.split}'})")
        # every value before any work: a hyper-parameter out of its domain, a seed numpy or
        # JAX would refuse only after the cross-validation
        record.check_params(self.params)
        check_seed(self.seed)
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
        if self.evidence not in EVIDENCE_MODES:
            raise ValueError(f"evidence must be one of {', '.join(EVIDENCE_MODES)}; got {self.evidence!r}")
        if self.metric_draws < 100:
            raise ValueError(f"metric_draws must be at least 100; got {self.metric_draws}")
        object.__setattr__(self, "engine_time_limit", check_time_limit(self.engine_time_limit, "engine_time_limit"))


def default_references(model: str, samplers: tuple[str, ...] | None = None, *, nuts_draws: int | None = None,
                       **overrides) -> tuple[ReferenceConfig, ...]:
    """The reference samplers tried for ``model``, in order (its record's references), each
    with the model's own settings, then ``overrides`` (None values are ignored, so CLI
    options left unset keep the defaults).

    samplers: keep only these samplers, in this order (e.g. ("slice-gibbs",)); each must be
    one the model can use (NUTS or one of its own); one the model's chain does not list
    starts from ReferenceConfig's defaults. Each config is handed its sampler by the
    model's record
    (:meth:`~zoo.validation.records.model_record.ModelRecord.reference_config`).
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
    return tuple(record.reference_config({**settings, "sampler": name, **(nuts if name == "nuts" else {}), **given})
                 for name, settings in chain.items())


#: how ``compare`` judges the engines' log evidence (CompareConfig.evidence)
EVIDENCE_MODES = ("bridge", "checked", "off")


@dataclass
class Comparison:
    """Everything a report needs: the typed result plus the objects behind it."""

    result: ComparisonResult
    prepared: Any
    # None when every reference sampler ran out of time
    reference: Any
    # the model variants that have a reference (not those whose samplers all ran out of time)
    variant_references: dict[str, Any]
    posteriors: dict[str, Any]
    split: Any
    # every reference sampler run, in order (the last certified one, if any, is `reference`)
    references_tried: list = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C stopped the comparison (the rows of the engines that finished are
        kept; the others say they were not run)."""
        return self.result.interrupted


def timed_fit(fit, spec, Phi, y):
    """Call an engine twice: the first call compiles, the second is the warm time."""
    t0 = time.perf_counter()
    fit(spec, Phi, y)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    posterior = fit(spec, Phi, y)
    warm = time.perf_counter() - t0
    return posterior, warm, max(cold - warm, 0.0)


def failed_row(entry, err: BaseException | str) -> EngineRow:
    """The row of an engine whose fit raised ``err`` (or could not be measured, ``err`` the
    reason): the reason, no numbers, no verdicts.

    Every metric is present and None with the failure as its null reason, so readers of
    results.json that look keys up keep working and nothing looks like a measurement.
    """
    # a user's engine's failure, and a time limit's, are already one line that names the
    # engine and what went wrong
    reason = (err if isinstance(err, str) else str(err) if isinstance(err, (EngineReturnError, EngineTimeout))
              else " ".join(f"{type(err).__name__}: {err}".split()))
    values = [k for k in METRIC_KEYS if k not in ("khat_reason", "null_reasons")]
    metrics = {**{k: None for k in values}, "khat_reason": None,
               "null_reasons": {k: f"engine failed: {reason}" for k in values}}
    return EngineRow(name=entry.name, metrics=metrics, kind=entry.kind, description=entry.description,
                     other_model=entry.other_model, n_basis=None, seconds=None, compile_seconds=None,
                     converged=False, reason=reason, n_iter=None, objective="", speedup_vs_reference=None,
                     failure=reason, pruned_vs_reference=None)


def _without_undefined_moments(rows, moments):
    """Pruned-weight rows with the reference mean / sd blanked where they do not exist
    (the quantiles and P(|w| < 0.1) always exist)."""
    if not rows or not moments:
        return rows
    drop = [k for k, flag in (("ref_mean", "mean_exists"), ("ref_sd", "sd_exists")) if moments.get(flag) is not True]
    return [{**r, **{k: None for k in drop}} for r in rows]


@dataclass(frozen=True)
class _Truth:
    """What every engine of one comparison is measured against: the reference (None when
    every sampler ran out of time, ``no_reference`` saying so), the reference of each model
    variant an engine fits (or why there is none), the reference's moments and Monte Carlo
    errors (shared by every engine's verdict) and the frozen problem."""

    prepared: Any
    reference: Any
    no_reference: NoReference | None
    variant_refs: dict[str, Any]
    variants_without_reference: dict[str, NoReference]
    ref_moments: dict[str, Any] | None
    metric_draws: int


def compare(config: CompareConfig, *, progress: bool = False) -> Comparison:
    """Run the comparison protocol: select the hyper-parameters once (the record's
    ``prepare``), find the first certified reference (and one per model variant an engine
    fits), then fit and measure every engine on that frozen posterior."""
    record = registry.get_model(config.model)
    # a user's engine is checked against the contract here, before any costly work
    entries = [resolve_entry(record, e) for e in config.engines]
    bar = _progress_bar(progress, total=record.cv_fits + 2 + len(entries), desc="zoo compare")
    bar.set_postfix_str("selecting hyper-parameters")
    split, prepared = _split_and_problem(config, bar)
    truth, tried = _references(config, prepared, entries, bar, progress)

    key = jax.random.PRNGKey(config.seed)
    rows, posteriors = {}, {}
    interrupted = False
    for i, (entry, given) in enumerate(zip(entries, config.engines)):
        bar.set_postfix_str(f"engine {entry.name}")
        isolated = runs_isolated(given, config.engine_time_limit)
        try:
            row, posterior, key = _fenced_engine(entry, truth, key, config.engine_time_limit, isolated)
        except KeyboardInterrupt:
            # Ctrl-C: the rows that finished stand; this engine and the ones after it say so
            interrupted = True
            for j, later in enumerate(entries[i:]):
                rows[later.name] = failed_row(later, "interrupted (Ctrl-C) while it ran" if j == 0
                                              else "not run: the comparison was interrupted (Ctrl-C)")
            break
        rows[entry.name] = row
        if posterior is not None:
            posteriors[entry.name] = posterior
        bar.update(1)
    bar.close()
    # an interrupted comparison is written at once: no evidence verdicts (they take seconds
    # to minutes), and the result says it was interrupted
    evidence_result = None if interrupted else _evidence(config, entries, posteriors, truth)
    result = _result(config, entries, truth, tried, rows, evidence_result, interrupted=interrupted)
    return Comparison(result, prepared, truth.reference, truth.variant_refs, posteriors, split, tried)


def runs_isolated(given, time_limit: float | None) -> bool:
    """Whether an engine given as ``given`` (a name, a path or a callable) is fitted in a child
    process of its own (``fence.isolated_timed_fit``), which can be killed at ``time_limit``
    wherever it is stuck: a user's engine named by its path, under a limit, where this process
    may have children. One given as a callable (it may not be importable by name: a notebook's)
    runs here, under the in-process limit, and so does every engine in a daemonic process - a
    Dask worker running a study's cell, a multiprocessing pool's worker - which may not start
    children (docs/trust.md: in SBC and studies the limit is in-process)."""
    return (time_limit is not None and isinstance(given, str) and is_user_engine(given)
            and not multiprocessing.current_process().daemon)


def _fenced_engine(entry, truth: "_Truth", key, limit: float | None,
                   isolated: bool = False) -> tuple[EngineRow, Any, Any]:
    """One engine as one unit (validation/runs/fence.py): its fit under the time limit,
    the check that its result can be measured, and the measurement itself. Anything the
    fit raises (``SystemExit`` included) or returns that cannot be measured, and any failure
    while measuring it, is its failed row with one line; (row, its posterior or None, the
    PRNG key left over). ``KeyboardInterrupt`` propagates: the caller stops there.
    isolated: fit in a child process (fence.isolated_timed_fit; ``entry.name`` is the path)."""
    prepared = truth.prepared
    try:
        if isolated:
            posterior, warm, compile_s = isolated_timed_fit(entry.name, prepared.spec, prepared.Phi_train,
                                                            prepared.y_train, limit)
        else:
            posterior, warm, compile_s = timed_fit(limited(entry.fit(), limit, entry.name), prepared.spec,
                                                   prepared.Phi_train, prepared.y_train)
    except (Exception, SystemExit, EngineTimeout) as err:  # noqa: BLE001 - the engine's failure is its row
        # ApproximationFailed: the engine's answer does not exist here (an indefinite
        # Hessian); FloatingPointError: a posterior constructor refused non-finite numbers;
        # EngineReturnError: a user's engine failed or returned something unusable (one
        # line, validation/runs/engines.py); EngineTimeout: past its limit; SystemExit: an
        # engine may not end the run; anything else from one of the zoo's own engines is a
        # bug, shown in its row with its type rather than losing the other rows
        if isinstance(err, SystemExit):
            err = EngineReturnError(f"{entry.name} called exit({err.code!r}): an engine may not end the run")
        return failed_row(entry, err), None, key
    problem = posterior_problem(posterior)
    if problem:
        return failed_row(entry, f"{entry.name} {problem}"), None, key
    try:
        row, key = _engine_row(entry, posterior, warm, compile_s, truth, key)
    except Exception as err:  # noqa: BLE001 - a result that cannot be measured fails its own row
        return failed_row(entry, f"measuring {entry.name}'s result failed: "
                                 + " ".join(f"{type(err).__name__}: {err}".split())), None, key
    return row, posterior, key


def prepare_problem(config: CompareConfig):
    """The frozen posterior a comparison of ``config`` would judge - its data split loaded,
    its hyper-parameters selected once (the record's ``prepare``), its moments analysed -
    without any reference run. A ``Prepared``: ``spec``, ``Phi_train``, ``y_train``,
    ``Phi_test``, ``y_test``, ``moments``. What a practitioner has who cannot afford a
    reference (see :func:`fit_engines`)."""
    return _split_and_problem(config)[1]


def _split_and_problem(config: CompareConfig, progress=None):
    """(the data split, the frozen problem on it): the parameters checked before any data are
    read, inputs standardized on the training split unless the model uses them raw."""
    record = registry.get_model(config.model)
    record.check_params(config.params)
    if record.own_data:  # a user's model on its own data: nothing to load, split or select
        return None, registry.prepare(config.model, None, config.params, progress=progress)
    split = datasets.load(config.data, config.split, standardize=not record.raw_inputs)
    return split, registry.prepare(config.model, split, config.params, progress=progress)


def fit_engines(config: CompareConfig, prepared=None) -> dict[str, Any]:
    """Each engine of ``config`` fitted to the frozen posterior (``prepared``, from
    :func:`prepare_problem`; None: made here), with no reference: name -> Posterior.
    Engines whose answer does not exist here (ApproximationFailed, one line) or that fail
    the contract raise as in :func:`compare`'s rows, naming the engine."""
    record = registry.get_model(config.model)
    entries = [resolve_entry(record, e) for e in config.engines]
    prepared = prepare_problem(config) if prepared is None else prepared
    posteriors = {}
    for entry in entries:
        try:
            posteriors[entry.name] = entry.fit()(prepared.spec, prepared.Phi_train, prepared.y_train)
        except (ApproximationFailed, FloatingPointError) as err:
            raise ApproximationFailed(f"{entry.name}: {err}") from err
    return posteriors


def _references(config: CompareConfig, prepared, entries, bar, progress: bool) -> tuple[_Truth, list]:
    """The reference of the frozen model and of every variant an engine fits, each the
    first certified of ``config.reference``'s samplers; (truth, every run tried)."""
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
    for variant in sorted({e.variant for e in entries} - {None}):
        bar.set_postfix_str(f"reference ({variant})")
        try:
            variant_refs[variant], _ = first_certified_reference(
                prepared.variants[variant], Phi, y, configs=config.reference,
                cache_dir=config.cache_dir, progress=progress,
            )
        except NoReference as err:
            variants_without_reference[variant] = err
    bar.update(1)
    ref_moments = (moments_and_mcse(chains_draws_flat(reference.posterior))
                   if reference is not None and reference.certified else None)
    return _Truth(prepared, reference, no_reference, variant_refs, variants_without_reference, ref_moments,
                  config.metric_draws), tried


def _engine_row(entry, posterior, warm: float, compile_s: float, truth: _Truth, key) -> tuple[EngineRow, Any]:
    """The row of an engine that fitted: its metrics and verdicts against the reference,
    and against the reference of the variant it fits; (row, the PRNG key left over)."""
    prepared, reference = truth.prepared, truth.reference
    Phi, y = prepared.Phi_train, prepared.y_train
    if reference is None:
        metrics = metrics_without_reference(posterior, prepared.Phi_test, prepared.y_test, str(truth.no_reference))
    else:
        key, sub = jax.random.split(key)
        metrics = posterior_metrics(posterior, reference, Phi, y, prepared.Phi_test, prepared.y_test,
                                    key=sub, n_draws=truth.metric_draws, moments=prepared.moments)
    against, key = _against_variant(entry, posterior, truth, key)
    row = EngineRow(
        name=entry.name,
        metrics=metrics,
        # a user's engine is of the kind it returned
        kind=posterior.kind,
        description=entry.description,
        other_model=entry.other_model,
        # an engine that prunes (GGSM's MM) reports how many weights it kept
        n_basis=(int(posterior.info.extra.get("n_active", prepared.hyper.get("n_basis", Phi.shape[1])))
                 if is_classifier(prepared.spec) else None),
        seconds=warm,
        compile_seconds=compile_s,
        converged=bool(posterior.info.converged),
        reason=posterior.info.reason,
        n_iter=int(posterior.info.n_iter),
        objective=posterior.info.objective,
        # warm against warm: compilation is excluded on both sides
        speedup_vs_reference=(float(reference.posterior.info.seconds / warm)
                              if reference is not None and warm > 0 else None),
        failure=None,
        # weights the engine pruned to exact zeros, beside the reference's marginals
        pruned_vs_reference=None if reference is None else _without_undefined_moments(
            pruned_weights_vs_reference(posterior, reference.posterior), prepared.moments),
        verdict=_verdict(posterior, reference, entry, prepared.moments, truth.ref_moments),
        # the same question of the joint posterior: correlations the marginals cannot see
        joint_verdict=_verdict(posterior, reference, entry, prepared.moments, None, scope=JOINT),
        # and of the whole marginal distributions: shape, tails, support, modes
        distribution_verdict=_verdict(posterior, reference, entry, prepared.moments, None, scope=DISTRIBUTION),
        against_variant=against,
    )
    return row, key


def _against_variant(entry, posterior, truth: _Truth, key) -> tuple[AgainstVariant | None, Any]:
    """The engine against the reference of the model variant it fits (None for an engine
    of the model itself); against that reference its distance is its approximation error,
    so its verdicts carry no "another model" caveat."""
    variant, prepared = entry.variant, truth.prepared
    if variant is None:
        return None, key
    if variant not in truth.variant_refs:
        return AgainstVariant(
            variant=variant,
            metrics=metrics_without_reference(posterior, prepared.Phi_test, prepared.y_test,
                                              str(truth.variants_without_reference[variant])),
            reference_certified=False), key
    key, sub = jax.random.split(key)
    vref, vmoments = truth.variant_refs[variant], prepared.variant_moments.get(variant)
    return AgainstVariant(
        variant=variant,
        metrics=posterior_metrics(posterior, vref, prepared.Phi_train, prepared.y_train, prepared.Phi_test,
                                  prepared.y_test, key=sub, n_draws=truth.metric_draws, moments=vmoments),
        reference_certified=bool(vref.certified),
        verdict=_verdict(posterior, vref, entry, vmoments, None, own_model=True),
        joint_verdict=_verdict(posterior, vref, entry, vmoments, None, own_model=True, scope=JOINT),
        distribution_verdict=_verdict(posterior, vref, entry, vmoments, None, own_model=True,
                                      scope=DISTRIBUTION)), key


def _evidence(config: CompareConfig, entries, posteriors: dict[str, Any], truth: _Truth) -> dict[str, Any] | None:
    """The evidence verdict of every engine that reports a log evidence or a lower bound on
    it (``evidence.engine_evidence``), against the reference log Z of the model (or variant)
    it fits, computed once per model from that reference's draws; None when the mode is
    "off" or no engine reports one. An engine of a model variant (gridRVM's rvm prior) is
    judged against that variant's log Z; one that fits another model the zoo has no
    reference of (GGSM's other priors) gets no verdict; a ``+psis`` engine's evidence is its
    base engine's."""
    if config.evidence == "off":
        return None
    claims = []
    for entry in entries:
        posterior = posteriors.get(entry.name)
        claim = None if posterior is None or entry.name.endswith("+psis") else evidence.engine_evidence(posterior)
        if claim is not None:
            claims.append((entry, claim))
    if not claims:
        return None
    t0 = time.perf_counter()
    Phi, y = truth.prepared.Phi_train, truth.prepared.y_train
    references: dict[str, Any] = {}
    engines = {}
    for entry, (value, kind, source) in claims:
        label = entry.variant or "model"
        if entry.other_model and entry.variant is None:
            engines[entry.name] = {"value": value, "kind": kind, "source": source, "variant": entry.variant,
                                   "verdict": None, "reason": "the engine fits another model: no reference log Z of it"}
            continue
        if label not in references:
            reference = truth.reference if entry.variant is None else truth.variant_refs.get(entry.variant)
            spec = truth.prepared.spec if entry.variant is None else truth.prepared.variants[entry.variant]
            references[label] = (evidence.reference_evidence(spec, Phi, y, reference.idata, seed=config.seed,
                                                             check=config.evidence == "checked")
                                 if reference is not None and reference.certified else None)
        ref = references[label]
        verdict = None if ref is None else evidence.evidence_verdict(value, kind, ref)
        engines[entry.name] = {"value": value, "kind": kind, "source": source, "variant": entry.variant,
                               "verdict": None if verdict is None else verdict.to_json(),
                               "reason": "no certified reference to compute log Z from" if ref is None else ""}
    return {"mode": config.evidence, "seconds": time.perf_counter() - t0,
            "references": {k: None if r is None else r.to_json() for k, r in references.items()},
            "engines": engines}


def _result(config: CompareConfig, entries, truth: _Truth, tried: list, rows: dict[str, EngineRow],
            evidence_result: dict[str, Any] | None = None, *, interrupted: bool = False) -> ComparisonResult:
    prepared, reference, no_reference = truth.prepared, truth.reference, truth.no_reference
    classifier = is_classifier(prepared.spec)
    variants = sorted({e.variant for e in entries} - {None})
    return ComparisonResult(
        model=config.model,
        data=config.data,
        split=config.split,
        # a general model's size is its observations' (it has no test set)
        n_train=(int(prepared.Phi_train.shape[0]) if classifier
                 else int(sum(np.size(v) for v in prepared.y_train.values()))),
        n_test=int(prepared.Phi_test.shape[0]) if classifier else None,
        hyper=prepared.hyper,
        selection=prepared.selection,
        moments=prepared.moments,
        spec=prepared.spec.to_dict(),
        reference=(ReferenceSummary.none(no_reference.timed_out) if reference is None
                   else ReferenceSummary.of(reference)),
        # every sampler tried, in order: the report names the one used and why the others not
        references_tried=tuple(
            [ReferenceSummary.timed_out(ReferenceTimeout(s, limit)) for s, limit in no_reference.timed_out]
            if reference is None else
            [ReferenceSummary.timed_out(r) if isinstance(r, ReferenceTimeout) else ReferenceSummary.of(r)
             for r in tried]),
        variant_references={
            v: ReferenceSummary.of(truth.variant_refs[v]) if v in truth.variant_refs
            else ReferenceSummary.none(truth.variants_without_reference[v].timed_out) for v in variants},
        reference_test_error=None if reference is None or not classifier else float(np.mean(
            (reference.posterior.predict_proba(prepared.Phi_test) > 0.5) != (prepared.y_test == 1))),
        engines=rows,
        config={
            "engines": [e.name for e in entries],
            "params": dict(config.params),
            "reference": [r.to_dict() for r in config.reference],
            "seed": config.seed,
            "metric_draws": config.metric_draws,
            "device": config.device or f"{jax.default_backend()}, {jax.local_device_count()} devices",
            "evidence": config.evidence,
            "engine_time_limit": config.engine_time_limit,
        },
        evidence=evidence_result,
        interrupted=interrupted,
    )


def _verdict(posterior, reference, entry, moments, ref_moments, *, own_model: bool = False,
             scope: str = MARGINAL) -> Verdict:
    """The engine's verdict of ``scope`` against a reference: the marginal one
    (validation/judge/verdict.py), the joint one, or the distribution verdict
    (validation/judge/distribution.py); or why there is none: no reference, an uncertified
    one (its draws are not known to be the posterior), or an engine that fits another model
    (its distance is not an approximation error, unless ``own_model``: the reference is that
    of the variant the engine fits). The distribution verdict needs no moments: it is made
    where the posterior's mean or sd does not exist too."""
    if reference is None:
        return not_applicable("no reference posterior", scope=scope)
    if not reference.certified:
        return not_applicable("the reference is not certified: a difference from it would prove nothing",
                              scope=scope)
    if scope == JOINT:
        v = joint_verdict(posterior, reference.posterior, moments=moments)
    elif scope == DISTRIBUTION:
        v = distribution_verdict(posterior, reference.posterior)
    else:
        v = verdict(posterior, reference.posterior, moments=moments, reference_moments=ref_moments)
    if entry.other_model and not own_model and v.applicable:
        v = replace(v, reason=f"fits another model ({entry.other_model}), so this is a distance, not an error: "
                    + v.reason)
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
