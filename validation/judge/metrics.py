"""How far an approximate posterior is from the NUTS reference.

Four families, all from one call, :func:`posterior_metrics`:

* per coordinate: standardized mean error ``|m - m_ref| / sd_ref``, sd ratio ``sd / sd_ref`` and
  the 1-D Wasserstein-1 distance between the approximation's and the reference's draws;
* joint: KL( N(m, S) || N(m_ref, S_ref) ) between Gaussian fits (S_ref the reference's
  sample covariance);
* predictive on a test set: mean ``|p - p_ref|``, test log-likelihood, error rate, AUC;
* Pareto k-hat of the approximation used as an importance proposal for the exact
  posterior (Yao, Vehtari, Simpson & Gelman 2018, "Yes, but did it work?").

Without a reference (every sampler ran out of time) only the test-set error rate,
log-likelihood and AUC exist: :func:`metrics_without_reference`.

Thresholds live below, named, with the reason for each value.
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import numpy as np
from scipy.stats import wasserstein_distance
from sklearn.metrics import roc_auc_score

# the weights live with the engines that resample by them; importance_log_weights is also
# this module's for its callers (tests/validation/judge/test_metrics.py)
from ...inference.importance import KHAT_GOOD as _KHAT_GOOD, KHAT_TRUSTED  # one scale: PSIS's
from ...inference.importance import (
    density_problem, importance_log_weights, inside_support as _inside, joint_importance_log_weights,
    joint_weights_problem,
    khat_threshold, on_joint, psis, support_mask,
)
from ...inference.posterior import DrawsPosterior
from ...models.base import checked_problem, flatten, is_classifier
from ...models.checks import check_features
from ..references import ESS_BULK_MIN, ESS_TAIL_MIN, MAX_DIVERGENCES, RHAT_MAX  # noqa: F401  (one rule, re-exported)

# --------------------------------------------------------------------------------------
# Thresholds: the one place where "good enough" is defined.
# --------------------------------------------------------------------------------------
#: ``|m - m_ref| / sd_ref`` below this is "accurate mean". A certified reference has bulk ESS
#: >= ESS_BULK_MIN (400), so its own mean is uncertain by sd/sqrt(400) = 0.05 sd; 0.1 sd is
#: twice that (an honest engine is not flagged for the reference's noise) and small
#: against the posterior spread a user acts on.
STD_MEAN_ERR_OK = 2.0 / math.sqrt(ESS_BULK_MIN)
#: sd / sd_ref inside [SD_RATIO_LOW, SD_RATIO_HIGH] is "accurate spread". The relative MC
#: error of an sd from ESS 400 is about 1/sqrt(2 * 400) = 0.035, so a 10% band is ~3 MC
#: errors wide; the band is symmetric on the log scale (0.9 and 1/0.9). Laplace-type
#: approximations of classification posteriors typically miss by more than this.
SD_RATIO_LOW = 0.9
SD_RATIO_HIGH = 1.0 / 0.9
#: mean ``|p - p_ref|`` on the test set below this: the approximation's predictions are as
#: good as the exact posterior's for a decision maker (2 percentage points).
PRED_MAE_OK = 0.02
#: Pareto k-hat (Vehtari et al. 2024, PSIS): below 0.5 the importance-weighted estimate
#: converges quickly - the approximation is close in the tails too; up to
#: min(1 - 1/log10 S, 0.7) usable with slower convergence (S the draws it was fitted from:
#: importance.khat_threshold; 0.7 from S = 2155 on); above it the weights' variance is
#: effectively infinite, or too large for S draws, and the approximation misses posterior mass.
#: KHAT_OK is that threshold's cap; a metric row carries its own, for its S (khat_threshold).
KHAT_GOOD = _KHAT_GOOD
KHAT_OK = KHAT_TRUSTED
#: fewer importance draws inside the support than this: k-hat is not estimated (the
#: Pareto tail would hold only a handful of points)
MIN_DRAWS_FOR_KHAT = 100
#: a Gaussian over many non-negative weights puts most draws outside the support (each
#: coordinate near 0 halves the inside share). Proposal draws are then added in batches
#: until this many lie inside, up to KHAT_MAX_DRAWS_FACTOR * n_draws draws in all: the
#: inside draws are draws of the proposal truncated to the support, whose k-hat is the
#: approximation's (zero weights do not change the upper tail of the weights).
KHAT_TARGET_INSIDE = 1000
KHAT_MAX_DRAWS_FACTOR = 25
#: log weights spread less than this are constant: the proposal equals the target up to
#: its normalizer, the weights have no tail at all, and k-hat is reported as 0
CONSTANT_LOG_WEIGHT_SPREAD = 1e-6
#: predicted probabilities are clipped to [eps, 1 - eps] for the test log-likelihood, so
#: one confident mistake costs at most -log(eps) = 34.5 nats instead of -inf
PROB_CLIP = 1e-15

THRESHOLDS: dict[str, Any] = {
    "reference_rhat_max": RHAT_MAX,
    "reference_ess_bulk_min": ESS_BULK_MIN,
    "reference_ess_tail_min": ESS_TAIL_MIN,
    "reference_max_divergences": MAX_DIVERGENCES,
    "std_mean_err_ok": STD_MEAN_ERR_OK,
    "sd_ratio_band": (SD_RATIO_LOW, SD_RATIO_HIGH),
    "pred_mae_ok": PRED_MAE_OK,
    "khat_good": KHAT_GOOD,
    "khat_ok": KHAT_OK,
}

#: every key of a comparison's metrics (:func:`posterior_metrics`): the classifier's
#: predictive metrics, the per-coordinate and joint distances, k-hat and the null reasons
METRIC_KEYS = (
    "pred_mae", "test_error", "test_log_lik", "auc",
    "std_mean_err", "std_mean_err_median", "std_mean_err_max",
    "sd_ratio", "sd_ratio_median", "wasserstein", "kl_gauss",
    "khat", "khat_reason", "khat_draws", "khat_threshold", "outside_support_fraction", "null_reasons",
)
#: the metrics of the held-out test set alone: they need no reference
HELD_OUT_KEYS = ("test_error", "test_log_lik", "auc")
#: the metrics only a classifier has (predictive probabilities on a test set): absent from the
#: metrics of a general model (models/general.py), not null
CLASSIFIER_KEYS = ("pred_mae", *HELD_OUT_KEYS)


def metric_keys(classifier: bool = True) -> tuple[str, ...]:
    """The keys of a comparison's metrics: :data:`METRIC_KEYS`, less :data:`CLASSIFIER_KEYS` for
    a model without a classifier part."""
    return METRIC_KEYS if classifier else tuple(k for k in METRIC_KEYS if k not in CLASSIFIER_KEYS)


# --------------------------------------------------------------------------------------
# Building blocks (usable on their own)
# --------------------------------------------------------------------------------------
def standardized_mean_error(mean, ref_mean, ref_sd) -> np.ndarray:
    """``|m - m_ref| / sd_ref`` per coordinate."""
    return np.abs(np.asarray(mean) - np.asarray(ref_mean)) / np.asarray(ref_sd)


def sd_ratio(sd, ref_sd) -> np.ndarray:
    """``sd / sd_ref`` per coordinate: the approximation's standard deviations over the
    reference's (1 where they agree; "accurate spread" between ``SD_RATIO_LOW`` and
    ``SD_RATIO_HIGH``)."""
    return np.asarray(sd) / np.asarray(ref_sd)


def wasserstein_per_coordinate(draws: np.ndarray, ref_draws: np.ndarray) -> np.ndarray:
    """W1 between the empirical marginals, per column. draws: (n, d), ref_draws: (S, d)."""
    return np.array([wasserstein_distance(draws[:, j], ref_draws[:, j]) for j in range(draws.shape[1])])


def gaussian_kl(mean0, cov0, mean1, cov1) -> float:
    """KL( N(mean0, cov0) || N(mean1, cov1) ) in nats; raises LinAlgError if a covariance
    is not positive definite."""
    mean0, mean1 = np.asarray(mean0, float), np.asarray(mean1, float)
    L0 = np.linalg.cholesky(np.asarray(cov0, float))
    L1 = np.linalg.cholesky(np.asarray(cov1, float))
    d = mean0.size
    # tr(S1^-1 S0) = ||L1^-1 L0||_F^2 ; Mahalanobis term via L1^-1 (m1 - m0)
    M = np.linalg.solve(L1, L0)
    z = np.linalg.solve(L1, mean1 - mean0)
    logdet0 = 2.0 * np.sum(np.log(np.diag(L0)))
    logdet1 = 2.0 * np.sum(np.log(np.diag(L1)))
    return float(0.5 * (np.sum(M**2) + z @ z - d + logdet1 - logdet0))


def pareto_khat(approx, spec, Phi, y, theta: np.ndarray, key=None) -> tuple[float | None, str | None, float]:
    """(k-hat, reason if None, outside_support_fraction) of approx as a proposal.

    k-hat is estimated on the draws with non-zero weight: zero weights sit at the bottom
    of the weight distribution and do not change its upper tail, which is what k
    measures. How much proposal mass was wasted is reported separately. A model whose
    sites' own density needs other latents integrated out with no closed form (it has
    ``log_joint``, not ``log_density_sites``) is measured on the joint, when the
    approximation covers it (:func:`~zoo.inference.importance.joint_importance_log_weights`).
    How many draws the shape was fitted from, which sets the threshold it is judged by:
    :func:`khat_with_draws`.
    """
    return khat_with_draws(approx, spec, Phi, y, theta, key)[:3]


def khat_with_draws(approx, spec, Phi, y, theta: np.ndarray, key=None):
    """:func:`pareto_khat` and, fourth, S: the number of draws with non-zero weight the
    Pareto shape was fitted from (None where there is no k-hat), so that k-hat is judged by
    ``importance.khat_threshold(S)``."""
    mask = support_mask(spec, Phi)
    if approx.kind == "draws" and getattr(approx, "log_weights", None) is not None:
        # the engine weighed its own draws on the model's whole latent space (SVI, Pathfinder)
        return _khat_of(np.asarray(approx.log_weights, float).ravel())
    if approx.kind == "draws" and "psis_khat" in approx.info.extra:
        # importance-corrected draws: the k-hat of the weights they were resampled by, which
        # says whether they can be trusted (inference/importance.py)
        extra = approx.info.extra
        khat = extra["psis_khat"]
        return (float(khat), None, 0.0, extra.get("psis_draws")) if math.isfinite(khat) else (
            None, "too few draws in the tail of the importance weights to fit a Pareto shape", 0.0, None)
    if approx.kind == "point":
        return None, "point estimate: no proposal density", 1.0 - float(_inside(mask, theta).mean()), None
    if not hasattr(approx, "log_density_flat"):
        return None, f"{approx.kind} posterior: no proposal density", 1.0 - float(_inside(mask, theta).mean()), None
    problem = density_problem(spec)
    if problem:
        return None, problem, 0.0, None
    if on_joint(spec):
        problem = joint_weights_problem(approx, spec)
        if problem:
            return None, problem, 0.0, None
        factors = approx.hyper_factors
        log_w, degenerate = joint_importance_log_weights(approx, spec, Phi, y, theta,
                                                         jax.random.PRNGKey(0) if key is None else key)
        inside = np.ones(theta.shape[0], bool)
        broken = ~np.isfinite(log_w)
        if broken.any() and np.all(degenerate[broken]):
            # not a bug of the model or the engine: q's own draws cannot be represented
            shapes = [float(np.min(s)) for s, _ in factors.values()]
            return None, (f"undefined here: {int(degenerate.sum())} of {degenerate.size} draws of the "
                          f"approximation's Gamma factors (shapes down to {min(shapes):.1g}) underflow to 0 or "
                          "overflow, where log p - log q cannot be evaluated"), 0.0, None
    else:
        log_w, inside = importance_log_weights(approx, spec, Phi, y, theta)
    finite = np.isfinite(log_w)
    if np.any(inside & ~finite):
        raise FloatingPointError(
            f"log p(theta, y) - log q(theta) is not finite at {int(np.sum(inside & ~finite))} draws "
            "inside the support"
        )
    return _khat_of(np.where(inside, log_w, -np.inf))


def _khat_of(log_w: np.ndarray) -> tuple[float | None, str | None, float, int | None]:
    """(k-hat, reason if None, fraction of zero weights, draws it was fitted from) of log
    weights, -inf for weight 0."""
    finite = np.isfinite(log_w)
    outside = float(1.0 - finite.mean())
    fitted = int(finite.sum())
    if fitted < MIN_DRAWS_FOR_KHAT:
        return None, (
            f"only {fitted} of {finite.size} proposal draws lie inside the support "
            f"(need {MIN_DRAWS_FOR_KHAT})"
        ), outside, None
    lw = log_w[finite]
    if np.ptp(lw) < CONSTANT_LOG_WEIGHT_SPREAD:
        return 0.0, None, outside, fitted
    _, khat = psis(lw)  # the zoo's PSIS: one definition whichever ArviZ is installed
    if not math.isfinite(khat):
        return None, "Pareto fit of the importance weights failed (non-finite k-hat)", outside, None
    return khat, None, outside, fitted


def _proposal_draws_for_khat(approx, mask, theta, key, n_draws: int) -> np.ndarray:
    """theta plus further proposal draws until KHAT_TARGET_INSIDE lie in the target's support."""
    if approx.kind != "gaussian" or not mask.any():
        return theta
    target = min(KHAT_TARGET_INSIDE, n_draws)
    batches, inside = [theta], int(_inside(mask, theta).sum())
    total, cap = theta.shape[0], KHAT_MAX_DRAWS_FACTOR * n_draws
    batch_key = jax.random.fold_in(key, 1)
    while inside < target and total < cap:
        batch_key, sub = jax.random.split(batch_key)
        more = np.asarray(approx.sample_flat(sub, n_draws), dtype=float)
        batches.append(more)
        inside += int(_inside(mask, more).sum())
        total += more.shape[0]
    return np.concatenate(batches, axis=0)


def _labels01(y, name: str) -> np.ndarray:
    y = np.asarray(y).ravel()
    values = set(np.unique(y).tolist())
    if values <= {0, 1}:
        return y.astype(float)
    if values <= {-1, 1}:
        return (y == 1).astype(float)
    raise ValueError(f"{name} must be coded 0/1 or -1/+1; found {sorted(values)!r}")


def held_out_metrics(p, y_test) -> tuple[dict[str, Any], dict[str, str]]:
    """({test_error, test_log_lik, auc}, null_reasons).

    p: (m,) predictive probabilities; y_test: (m,) 0/1. test_log_lik is the mean per test
    point (comparable across test sizes); test_error thresholds p at 0.5; auc is None
    when y_test holds one class.
    """
    p = np.asarray(p, float)
    y = np.asarray(y_test, float)
    pc = np.clip(p, PROB_CLIP, 1.0 - PROB_CLIP)
    out: dict[str, Any] = {
        "test_error": float(np.mean((p > 0.5) != (y == 1))),
        "test_log_lik": float(np.mean(y * np.log(pc) + (1.0 - y) * np.log1p(-pc))),
        "auc": None,
    }
    reasons = {}
    if len(np.unique(y)) == 2:
        out["auc"] = float(roc_auc_score(y, p))
    else:
        reasons["auc"] = "test set holds one class: AUC undefined"
    return out, reasons


def predictive_metrics(p, p_ref, y_test) -> tuple[dict[str, Any], dict[str, str]]:
    """({pred_mae, test_error, test_log_lik, auc}, null_reasons): :func:`held_out_metrics`
    plus pred_mae, the mean ``|p - p_ref|`` over the test set.

    p, p_ref: (m,) predictive probabilities of the approximation and the reference;
    y_test: (m,) 0/1.
    """
    p, p_ref = np.asarray(p, float), np.asarray(p_ref, float)
    held_out, reasons = held_out_metrics(p, y_test)
    return {"pred_mae": float(np.mean(np.abs(p - p_ref))), **held_out}, reasons


def _gaussian_fit(approx, flat_draws: np.ndarray):
    """(mean, cov) of the approximation: exact for a Gaussian, moments of draws otherwise."""
    if approx.kind == "gaussian":
        return np.asarray(approx.mean_vec, float), np.asarray(approx.cov, float)
    return flat_draws.mean(0), np.atleast_2d(np.cov(flat_draws, rowvar=False))


# --------------------------------------------------------------------------------------
# The one call
# --------------------------------------------------------------------------------------
#: metrics that need the reference's mean, or its sd, to exist
_NEEDS_MEAN = ("std_mean_err", "std_mean_err_median", "std_mean_err_max", "wasserstein")
_NEEDS_SD = ("std_mean_err", "std_mean_err_median", "std_mean_err_max", "sd_ratio", "sd_ratio_median", "kl_gauss")


def null_undefined_moments(metrics: dict[str, Any], moments: dict[str, Any] | None) -> dict[str, Any]:
    """``metrics`` with every value built on a posterior moment that does not exist set to
    None, its null reason saying why. A sample mean or sd of draws from a distribution
    without one is finite but estimates nothing (it does not settle as draws grow).

    moments: {"mean_exists", "sd_exists", "reason"} (``Prepared.moments``) or None (all
    exist). Unknown existence (None) nulls too: an unverified moment is not reported.
    """
    if not moments:
        return metrics
    out = dict(metrics)
    reasons = dict(out.get("null_reasons") or {})
    for flag, keys in (("mean_exists", _NEEDS_MEAN), ("sd_exists", _NEEDS_SD)):
        if moments.get(flag) is True:
            continue
        for k in keys:
            if k in out:
                out[k] = None
                reasons[k] = "the posterior " + ("mean" if flag == "mean_exists" else "sd") + (
                    " does not exist here: " if moments.get(flag) is False else
                    " may not exist here (not established): ") + moments["reason"]
    out["null_reasons"] = reasons
    return out


def posterior_metrics(approx, reference, Phi_train, y_train, Phi_test, y_test, *, key,
                      n_draws: int = 4000, moments: dict[str, Any] | None = None) -> dict[str, Any]:
    """All accuracy metrics of ``approx`` against ``reference``, as a flat JSON-able dict.

    approx: a Posterior (Gaussian, point or draws) over the same sites as the reference.
    reference: a :class:`~zoo.validation.references.Reference` or a DrawsPosterior.
    Phi_train (n, M), y_train (n,): the data the posterior conditions on (for k-hat).
    Phi_test (m, M), y_test (m,): held-out data for the predictive metrics.
    key: JAX PRNG key for the approximation's draws; n_draws: how many.
    moments: which posterior moments exist (``Prepared.moments``; None: all do). Metrics
    built on a missing moment are not computed - sample moments of heavy-tailed draws can
    overflow - and come back as None with the reason (:func:`null_undefined_moments`).

    Returns the keys in :data:`METRIC_KEYS`. Every None value has an entry in
    ``null_reasons`` saying why (e.g. a point estimate has no sd ratio).
    """
    if isinstance(reference, DrawsPosterior):
        ref_post = reference
    else:
        ref_post = reference.posterior
        if not getattr(reference, "certified", True):
            warnings.warn(
                "metrics computed against an UNCERTIFIED reference: "
                + "; ".join(getattr(reference, "failures", [])[:3])
            )
    _check_same_sites(approx, ref_post)
    classifier = is_classifier(ref_post.spec)
    if classifier:
        Phi_train = check_features(Phi_train, name="Phi_train")
        Phi_test = check_features(Phi_test, n_features=Phi_train.shape[1], name="Phi_test")
        y_train = _labels01(y_train, "y_train")
        y_test = _labels01(y_test, "y_test")
        if y_test.shape[0] != Phi_test.shape[0] or y_train.shape[0] != Phi_train.shape[0]:
            raise ValueError("labels and design matrices have different numbers of rows")
    else:  # a general model's data and observations; it has no test set and predicts nothing
        Phi_train, y_train = checked_problem(ref_post.spec, Phi_train, y_train)
    # The importance weights are p(theta, y) / q(theta) for the model the *reference*
    # samples: for a row measured against a model variant (laplace vs its surrogate) that
    # is the variant, with the variant's support, not the approximation's own spec.
    spec = ref_post.spec
    null_reasons: dict[str, str] = {}

    mean_exists = moments is None or moments.get("mean_exists") is True
    sd_exists = moments is None or moments.get("sd_exists") is True
    ref_flat = ref_post.flat_draws()
    ref_mean = ref_flat.mean(0) if mean_exists else None
    ref_sd = ref_flat.std(0, ddof=1) if sd_exists else None
    if sd_exists and not np.all(ref_sd > 0):
        raise ValueError("reference draws have zero spread in some coordinate; cannot standardize")

    theta = np.asarray(flatten(approx.sample(key, n_draws), approx.sites), dtype=float)

    sme = standardized_mean_error(approx.mean_flat(), ref_mean, ref_sd) if mean_exists and sd_exists else None
    sd = approx.sd_flat()
    ratio = None
    if sd is None:
        null_reasons["sd_ratio"] = "point estimate: no spread"
        null_reasons["sd_ratio_median"] = "point estimate: no spread"
    elif sd_exists:
        ratio = sd_ratio(sd, ref_sd)

    w1 = wasserstein_per_coordinate(theta, ref_flat) if mean_exists else None

    kl = None
    if approx.kind == "point":
        null_reasons["kl_gauss"] = "point estimate: no covariance"
    elif sd_exists:
        try:
            mean_q, cov_q = _gaussian_fit(approx, theta)
            # KL >= 0; identical fits give -1e-15 from round-off
            kl = max(gaussian_kl(mean_q, cov_q, ref_mean, np.atleast_2d(np.cov(ref_flat, rowvar=False))), 0.0)
        except np.linalg.LinAlgError:
            null_reasons["kl_gauss"] = "a covariance is not positive definite"

    predictive = {}
    if classifier:
        p = np.asarray(approx.predict_proba(Phi_test), float)
        p_ref = np.asarray(ref_post.predict_proba(Phi_test), float)
        predictive, reasons = predictive_metrics(p, p_ref, y_test)
        null_reasons.update(reasons)

    theta_khat = _proposal_draws_for_khat(approx, support_mask(spec, Phi_train), theta, key, n_draws)
    khat, khat_reason, outside, khat_draws = khat_with_draws(approx, spec, Phi_train, y_train, theta_khat,
                                                             key=jax.random.fold_in(key, 2))
    if khat is None:
        null_reasons["khat"] = khat_reason
        null_reasons["khat_draws"] = null_reasons["khat_threshold"] = khat_reason

    out = {
        **predictive,
        "std_mean_err": None if sme is None else sme.tolist(),
        "std_mean_err_median": None if sme is None else float(np.median(sme)),
        "std_mean_err_max": None if sme is None else float(np.max(sme)),
        "sd_ratio": None if ratio is None else ratio.tolist(),
        "sd_ratio_median": None if ratio is None else float(np.median(ratio)),
        "wasserstein": None if w1 is None else w1.tolist(),
        "kl_gauss": kl,
        "khat": khat,
        "khat_reason": khat_reason,
        # k-hat is judged by the number of draws it was fitted from (importance.khat_threshold)
        "khat_draws": khat_draws,
        "khat_threshold": None if khat_draws is None else khat_threshold(khat_draws),
        "outside_support_fraction": outside,
        "null_reasons": null_reasons,
    }
    out = null_undefined_moments(out, moments)
    _check_finite(out)
    return out


def metrics_without_reference(approx, Phi_test, y_test, reason: str) -> dict[str, Any]:
    """The keys of :data:`METRIC_KEYS` for ``approx`` when there is no reference to measure
    it against: the test-set metrics (:data:`HELD_OUT_KEYS`), which need none, and every
    other value None with ``reason`` (e.g. "no reference: nuts ran out of time ...").
    """
    classifier = is_classifier(approx.spec)
    held_out, null_reasons = {}, {}
    if classifier:
        Phi_test = check_features(Phi_test, name="Phi_test")
        y_test = _labels01(y_test, "y_test")
        if y_test.shape[0] != Phi_test.shape[0]:
            raise ValueError("y_test and Phi_test have different numbers of rows")
        held_out, null_reasons = held_out_metrics(approx.predict_proba(Phi_test), y_test)
    unmeasured = [k for k in metric_keys(classifier) if k not in HELD_OUT_KEYS and k not in ("khat_reason", "null_reasons")]
    out = {
        **{k: None for k in unmeasured},
        **held_out,
        "khat_reason": reason,
        "null_reasons": {**{k: reason for k in unmeasured}, **null_reasons},
    }
    _check_finite(out)
    return out


def assess(metrics: dict[str, Any]) -> dict[str, bool | None]:
    """Pass/fail of each thresholded metric (None where the metric is None)."""
    def within(v, ok):
        return None if v is None else bool(ok(v))

    return {
        "mean_ok": within(metrics["std_mean_err_max"], lambda v: v <= STD_MEAN_ERR_OK),
        "sd_ok": within(metrics["sd_ratio"], lambda v: all(SD_RATIO_LOW <= r <= SD_RATIO_HIGH for r in v)),
        "pred_ok": within(metrics["pred_mae"], lambda v: v <= PRED_MAE_OK),
        "khat_good": within(metrics["khat"], lambda v: v <= KHAT_GOOD),
        # judged by its sample size: min(1 - 1/log10 S, 0.7) (importance.khat_threshold)
        "khat_ok": within(metrics["khat"], lambda v: v <= (metrics.get("khat_threshold") or KHAT_OK)),
    }


def _check_same_sites(approx, ref_post) -> None:
    a = [(s.name, tuple(s.shape)) for s in approx.sites]
    r = [(s.name, tuple(s.shape)) for s in ref_post.sites]
    if a != r:
        raise ValueError(f"approximation sites {a} differ from the reference's {r}")


def _check_finite(out: dict) -> None:
    """Never hand out a NaN silently: every number must be finite or None with a reason."""
    for k, v in out.items():
        values = v if isinstance(v, list) else [v]
        for x in values:
            if isinstance(x, float) and not math.isfinite(x):
                raise FloatingPointError(f"metric {k} is not finite ({x})")


#: the reference's ``P(|w_i| < NEAR_ZERO)`` is shown beside each pruned weight. On the
#: standardized inputs of the GGSM designs a weight below 0.1 moves the linear predictor
#: by less than 0.1 per input sd, i.e. a probability by at most phi(0) * 0.1 = 0.04:
#: "negligible" for a reader, on the scale of the data rather than of the posterior
NEAR_ZERO = 0.1


def pruned_weights_vs_reference(approx, ref_post, site: str = "w") -> list[dict[str, Any]] | None:
    """The weights ``approx`` pruned (``approx.info.extra["pruned"]``, indices into site
    ``site``), each with the reference's marginal: mean, sd, 5% and 95% quantiles and
    ``P(|w| < NEAR_ZERO)``. Sorted by that probability, smallest first: the prunings the
    reference doubts most lead. None if the engine pruned nothing (or does not prune).
    """
    pruned = list((approx.info.extra or {}).get("pruned") or [])
    if not pruned:
        return None
    draws = np.asarray(ref_post.draws[site])
    draws = draws.reshape((-1,) + draws.shape[2:])
    engine_values = np.asarray(approx.mean()[site])
    rows = []
    for i in pruned:
        d = draws[:, int(i)]
        rows.append({
            "index": int(i),
            "engine": float(engine_values[int(i)]),
            "ref_mean": float(d.mean()),
            "ref_sd": float(d.std(ddof=1)),
            "ref_q05": float(np.quantile(d, 0.05)),
            "ref_q95": float(np.quantile(d, 0.95)),
            "ref_p_near_zero": float(np.mean(np.abs(d) < NEAR_ZERO)),
        })
    return sorted(rows, key=lambda r: (r["ref_p_near_zero"], r["index"]))
