"""Posterior-accuracy metrics: identities and planted defects.

Most tests use a model whose posterior is exactly Gaussian (independent normal means,
known variance), so that "the correct Gaussian" exists and the reference can be exact
iid draws - no NUTS needed, and every expected value is known in closed form. The
truncated-support test uses a tiny PCVM, where a Gaussian proposal must put mass below 0.

Monte Carlo tolerances (S = 4000 reference draws, iid): a reference mean is off by
sd/sqrt(S) (so a standardized mean error by 1/sqrt(S) = 0.016), a reference sd by
sd/sqrt(2 S) (sd ratios by 0.011); we allow 4 such standard errors.
"""
from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import ndtr as scipy_ndtr
from scipy.stats import chi2, norm
from problems import NormalMeans
from sklearn.metrics import roc_auc_score

import zoo  # noqa: F401  (float64)
from zoo.inference.posterior import (
    DrawsPosterior,
    FitInfo,
    GaussianPosterior,
    PointPosterior,
)
from zoo.models.pcvm import PCVM
from zoo.validation.judge import metrics
from zoo.validation.judge.metrics import (
    KHAT_GOOD,
    KHAT_OK,
    METRIC_KEYS,
    SD_RATIO_LOW,
    STD_MEAN_ERR_OK,
    assess,
    gaussian_kl,
    importance_log_weights,
    posterior_metrics,
)

S_CHAINS, S_DRAWS = 4, 1000
S = S_CHAINS * S_DRAWS
MEAN_TOL = 4.0 / math.sqrt(S)  # standardized units
SD_TOL = 4.0 / math.sqrt(2.0 * S)  # relative


INFO = FitInfo("test", True, 0)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    M, n = 5, 30
    spec = NormalMeans()
    Phi = rng.normal(rng.normal(0, 1, M), 1.0, size=(n, M))
    y = np.tile([0.0, 1.0], n // 2)
    Phi_test = rng.normal(0.0, 0.5, size=(40, M))
    y_test = (rng.random(40) < scipy_ndtr(Phi_test.sum(1))).astype(float)
    mean, sd = spec.exact_posterior(Phi)
    sites = spec.sites(M)
    exact = GaussianPosterior(spec, sites, mean, np.eye(M) * sd, INFO)
    ref_draws = mean + sd * rng.normal(size=(S_CHAINS, S_DRAWS, M))
    reference = DrawsPosterior(spec, sites, {"mu": ref_draws}, INFO)
    return dict(spec=spec, Phi=Phi, y=y, Phi_test=Phi_test, y_test=y_test, mean=mean, sd=sd,
                exact=exact, reference=reference, sites=sites)


def _w1_same_distribution_bound(sd, n, m):
    """W1 between n and m iid draws of N(., sd^2): mean + 4 concentration widths.

    W1 is Lipschitz in the underlying standard normals with constant
    L = sd sqrt(1/n + 1/m), so P(W1 > E W1 + 4 L) <= exp(-8) (Gaussian concentration);
    E W1 ~ L sqrt(2/pi) int sqrt(F (1 - F)) dx (two Brownian bridges), F the standard
    normal cdf.
    """
    L = sd * math.sqrt(1.0 / n + 1.0 / m)
    J = quad(lambda x: math.sqrt(norm.cdf(x) * norm.sf(x)), -np.inf, np.inf)[0]
    return L * (math.sqrt(2.0 / math.pi) * J + 4.0)


def _metrics(problem, approx, seed=1, n_draws=S):
    return posterior_metrics(
        approx, problem["reference"], problem["Phi"], problem["y"], problem["Phi_test"],
        problem["y_test"], key=jax.random.PRNGKey(seed), n_draws=n_draws,
    )


def test_exact_gaussian_against_its_own_draws(problem):
    m = _metrics(problem, problem["exact"])
    assert tuple(m) == METRIC_KEYS
    json.dumps(m, allow_nan=False)  # strict JSON: no NaN anywhere
    assert max(m["std_mean_err"]) < MEAN_TOL
    assert np.all(np.abs(np.array(m["sd_ratio"]) - 1.0) < SD_TOL)
    # 2 S KL(true || fit on S draws) -> chi^2 with d + d(d+1)/2 degrees of freedom (Wilks)
    d = problem["mean"].size
    assert 0.0 <= m["kl_gauss"] < chi2.ppf(0.9999, d + d * (d + 1) // 2) / (2 * S)
    assert max(m["wasserstein"]) < _w1_same_distribution_bound(problem["sd"], S, S)
    # p_ref averages p over S draws; p(1-p) <= 1/4 bounds its MC sd by 0.5 / sqrt(S)
    assert m["pred_mae"] < 4.0 * 0.5 / math.sqrt(S)
    assert m["khat"] is not None and m["khat"] <= KHAT_GOOD
    assert m["outside_support_fraction"] == 0.0
    assert m["null_reasons"] == {}
    # the predictive scores of the exact predictive probabilities, computed by hand
    pt = scipy_ndtr(problem["Phi_test"] @ problem["mean"] / np.sqrt(1.0 + problem["sd"] ** 2 * (problem["Phi_test"] ** 2).sum(1)))
    yt = problem["y_test"]
    assert m["test_error"] == pytest.approx(np.mean((pt > 0.5) != (yt == 1)))
    assert m["test_log_lik"] == pytest.approx(np.mean(yt * np.log(pt) + (1 - yt) * np.log(1 - pt)), rel=1e-12)
    assert m["auc"] == pytest.approx(roc_auc_score(yt, pt))
    assert assess(m) == {"mean_ok": True, "sd_ok": True, "pred_ok": True, "khat_good": True, "khat_ok": True}


def test_exact_proposal_has_constant_importance_weights(problem):
    """log p(theta, y) - log q(theta) = log p(y) for the exact posterior: this checks the
    log-density plumbing (model, flat order, Gaussian density) to round-off."""
    theta = np.asarray(problem["exact"].sample_flat(jax.random.PRNGKey(3), 500))
    log_w, inside = importance_log_weights(problem["exact"], problem["spec"], problem["Phi"], problem["y"], theta)
    assert inside.all()
    assert np.ptp(log_w) < 1e-8


def test_draws_posterior_against_itself(problem):
    ref = problem["reference"]
    m = _metrics(problem, ref)
    assert m["std_mean_err_max"] == 0.0
    np.testing.assert_allclose(m["sd_ratio"], 1.0, rtol=1e-12)
    assert m["pred_mae"] == 0.0
    assert m["khat"] is None and m["khat_reason"] == "draws posterior: no proposal density"
    assert m["null_reasons"]["khat"] == m["khat_reason"]


def test_shrunk_gaussian_is_flagged(problem):
    """Halve the sd (the covariance shrinks 4x).

    For p = N(0, 1) and q = N(0, s^2) the weights p/q have a Pareto tail with
    k = 1 - s^2 = 0.75 > KHAT_OK (halving only the covariance gives k = 0.5: on the
    boundary, so not a usable planted defect). k-hat from 4000 draws is noisy: over 200
    seeds (5 dimensions) its mean was 0.87 with sd 0.12, and one draw set exceeded 0.7 with
    probability 0.92. The median over 5 independent draw sets exceeds 0.7 with
    probability >= 0.998 (at least 3 of 5 successes), so that is what we test.
    """
    p = problem
    shrunk = GaussianPosterior(p["spec"], p["sites"], p["mean"], p["exact"].chol * 0.5, INFO)
    runs = [_metrics(p, shrunk, seed=seed) for seed in range(1, 6)]
    m = runs[0]
    assert abs(m["sd_ratio_median"] - 0.5) < 0.5 * SD_TOL
    assert m["sd_ratio_median"] < SD_RATIO_LOW
    assert np.median([r["khat"] for r in runs]) > KHAT_OK
    assert max(m["std_mean_err"]) < MEAN_TOL  # the mean is still right
    flags = assess(m)
    assert flags["sd_ok"] is False and flags["khat_ok"] is False and flags["mean_ok"] is True


def test_shifted_gaussian_is_flagged(problem):
    p = problem
    shifted = GaussianPosterior(p["spec"], p["sites"], p["mean"] + 0.5 * p["sd"], p["exact"].chol, INFO)
    m = _metrics(p, shifted)
    assert np.all(np.abs(np.array(m["std_mean_err"]) - 0.5) < MEAN_TOL)
    assert m["std_mean_err_median"] > STD_MEAN_ERR_OK
    assert np.all(np.abs(np.array(m["sd_ratio"]) - 1.0) < SD_TOL)
    # KL(N(m + 0.5 sd, C) || N(m, C)) = d 0.5^2 / 2. MC error of the fitted reference:
    # its mean error e (sd 1/sqrt(S) per standardized coordinate) enters as
    # 0.5 sum (0.5 + e_j)^2, sd 0.5 sqrt(d / S); its variance error (relative sd sqrt(2/S))
    # as 0.125 sum eps_j, sd 0.125 sqrt(2 d / S); the covariance-fit term as in the
    # identity test (chi^2 quantile / 2S). 4 standard deviations of the first two.
    d = p["mean"].size
    tol = 4.0 * math.sqrt((0.25 * d + 0.125**2 * 2 * d) / S) + chi2.ppf(0.9999, d + d * (d + 1) // 2) / (2 * S)
    assert abs(m["kl_gauss"] - d * 0.125) < tol
    assert assess(m)["mean_ok"] is False


def test_point_estimate(problem):
    p = problem
    point = PointPosterior(p["spec"], p["sites"], np.asarray(p["mean"]), INFO)
    m = _metrics(p, point)
    json.dumps(m, allow_nan=False)
    assert m["sd_ratio"] is None and m["sd_ratio_median"] is None and m["kl_gauss"] is None
    assert m["khat"] is None and m["khat_reason"] == "point estimate: no proposal density"
    assert set(m["null_reasons"]) == {"sd_ratio", "sd_ratio_median", "kl_gauss", "khat", "khat_draws", "khat_threshold"}
    assert max(m["std_mean_err"]) < MEAN_TOL
    # W1 between a point mass at the mean and N(mean, sd^2) is E|X - mean| = sd sqrt(2/pi);
    # its MC sd is sd sqrt(1 - 2/pi) / sqrt(S)
    expected = p["sd"] * math.sqrt(2.0 / math.pi)
    tol = 4.0 * p["sd"] * math.sqrt(1.0 - 2.0 / math.pi) / math.sqrt(S)
    np.testing.assert_allclose(m["wasserstein"], expected, atol=tol)
    flags = assess(m)
    assert flags["sd_ok"] is None and flags["khat_ok"] is None


def test_gaussian_kl_known_value():
    # KL(N(0,1) || N(1, 4)) = log 2 + (1 + 1) / 8 - 1/2
    assert gaussian_kl([0.0], [[1.0]], [1.0], [[4.0]]) == pytest.approx(math.log(2.0) - 0.25, rel=1e-12)
    assert gaussian_kl(np.zeros(3), np.eye(3), np.zeros(3), np.eye(3)) == pytest.approx(0.0, abs=1e-14)


def test_mismatched_sites_rejected(problem):
    p = problem
    other = GaussianPosterior(p["spec"], p["spec"].sites(2), np.zeros(2), np.eye(2), INFO)
    with pytest.raises(ValueError, match="sites"):
        _metrics(p, other)


# --- truncated support: a Gaussian proposal for PCVM's non-negative weights -------------
def _pcvm_log_joint(spec, Phi, y, theta):
    """PCVM log joint written out by hand: b ~ N(0, 1/alpha_b), w_i ~ 2 N(0, 1/alpha) on
    w >= 0, y ~ Bernoulli(Phi(b + Phi w))."""
    b, w = theta[:, 0], theta[:, 1:]
    alpha = np.asarray(spec.alpha_vector(Phi.shape[1]))
    lp = norm.logpdf(b, 0.0, 1.0 / math.sqrt(spec.alpha_bias))
    lp += np.sum(math.log(2.0) + norm.logpdf(w, 0.0, 1.0 / np.sqrt(alpha)), axis=1)
    f = b[:, None] + w @ Phi.T
    lp += np.sum(y * norm.logcdf(f) + (1 - y) * norm.logcdf(-f), axis=1)
    return lp


@pytest.mark.long
def test_gaussian_proposal_for_truncated_pcvm_posterior():
    rng = np.random.default_rng(5)
    n, M = 12, 3
    spec = PCVM(alpha=1.0, alpha_bias=1e-2)
    Phi = rng.normal(size=(n, M))
    y = np.tile([0.0, 1.0], n // 2)
    sites = spec.sites(M)
    mean = np.array([0.2, 0.6, 0.3, 1.0])  # [b, w_1..w_3]
    sd = np.array([0.8, 0.5, 0.4, 0.6])
    proposal = GaussianPosterior(spec, sites, mean, np.diag(sd), INFO)
    # stand-in reference (|Gaussian| draws): the support and k-hat metrics do not use it
    ref_flat = np.abs(np.asarray(proposal.sample_flat(jax.random.PRNGKey(0), S)))
    reference = DrawsPosterior(
        spec, sites, {"b": ref_flat[:, 0].reshape(S_CHAINS, S_DRAWS),
                      "w": ref_flat[:, 1:].reshape(S_CHAINS, S_DRAWS, M)}, INFO,
    )
    m = posterior_metrics(proposal, reference, Phi, y, Phi[:6], y[:6], key=jax.random.PRNGKey(2), n_draws=S)
    # exact mass of the Gaussian outside w >= 0 (independent coordinates); binomial MC error
    p_out = 1.0 - np.prod(scipy_ndtr(mean[1:] / sd[1:]))
    assert m["outside_support_fraction"] == pytest.approx(p_out, abs=4.0 * math.sqrt(p_out * (1 - p_out) / S))
    assert m["outside_support_fraction"] > 0.0
    assert m["khat"] is not None and math.isfinite(m["khat"]) and m["khat_reason"] is None
    assert "khat" not in m["null_reasons"]

    # the importance weights are log p(theta, y) - log q(theta) of the model as written
    theta = np.asarray(proposal.sample_flat(jax.random.PRNGKey(4), 300))
    log_w, inside = importance_log_weights(proposal, spec, Phi, y, theta)
    assert np.all(np.isneginf(log_w[~inside])) and (~inside).any()
    expected = _pcvm_log_joint(spec, Phi, y, theta[inside]) - np.asarray(proposal.log_density_flat(theta[inside]))
    np.testing.assert_allclose(log_w[inside], expected, rtol=0, atol=1e-9)


def test_khat_not_estimated_when_almost_all_draws_are_outside():
    spec = PCVM(alpha=1.0)
    M = 2
    Phi = np.eye(M)[[0, 1, 0, 1]]
    y = np.array([0.0, 1.0, 1.0, 0.0])
    sites = spec.sites(M)
    far_negative = GaussianPosterior(spec, sites, np.array([0.0, -5.0, -5.0]), np.eye(3) * 0.5, INFO)
    khat, reason, outside = metrics.pareto_khat(
        far_negative, spec, Phi, y, np.asarray(far_negative.sample_flat(jax.random.PRNGKey(0), 1000))
    )
    assert khat is None and "inside the support" in reason and outside > 0.99


def test_metrics_on_missing_moments_are_not_computed(problem):
    """A reference without a posterior mean (heavy tails: sample moments of its draws can
    overflow) gets None, with the reason, for every metric built on mean or sd - not a
    crash on the non-finite sample moments, and not a number that estimates nothing."""
    ref = problem["reference"]
    draws = np.array(ref.draws["mu"])
    draws[0, :3, 0] = [1e200, -1e250, 3e300]  # a Cauchy-like tail: the sample variance overflows
    heavy = DrawsPosterior(ref.spec, ref.sites, {"mu": draws}, INFO)
    moments = {"mean_exists": False, "sd_exists": False, "reason": "test: tail r^-1"}
    m = posterior_metrics(problem["exact"], heavy, problem["Phi"], problem["y"], problem["Phi_test"],
                          problem["y_test"], key=jax.random.PRNGKey(1), n_draws=S, moments=moments)
    for k in ("std_mean_err", "std_mean_err_max", "sd_ratio", "sd_ratio_median", "kl_gauss", "wasserstein"):
        assert m[k] is None and "test: tail" in m["null_reasons"][k]
    json.dumps(m, allow_nan=False)
    # the same draws without the moments statement are refused, not reported as numbers
    with pytest.raises((FloatingPointError, ValueError)):
        posterior_metrics(problem["exact"], heavy, problem["Phi"], problem["y"], problem["Phi_test"],
                          problem["y_test"], key=jax.random.PRNGKey(1), n_draws=S)


def test_a_moment_of_unknown_existence_is_nulled_and_called_unknown():
    from zoo.validation.judge.metrics import null_undefined_moments

    out = null_undefined_moments({"sd_ratio": 0.3, "std_mean_err": [0.1], "null_reasons": {}},
                                 {"mean_exists": True, "sd_exists": None, "reason": "tail r^-2"})
    assert out["sd_ratio"] is None and "may not exist here (not established)" in out["null_reasons"]["sd_ratio"]
    out = null_undefined_moments({"sd_ratio": 0.3, "null_reasons": {}},
                                 {"mean_exists": False, "sd_exists": False, "reason": "tail r^-1"})
    assert "does not exist here" in out["null_reasons"]["sd_ratio"]
