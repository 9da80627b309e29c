"""The BBLR model (models/bblr.py): its likelihood in the tails, its priors, its density
as NumPyro computes it, the paper's (a, b) configurations and bad hyper-parameters."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, special, stats

import zoo  # noqa: F401  (float64)
from zoo.models.bblr import BBLR, BetaBernoulliLogistic, GaussLaplaceMixture, bb_log_prob
from zoo.models.special import expected_sigmoid


def _direct(y, f, a, b, gamma):
    # the textbook formula, fine where nothing under- or overflows
    p = a + b * special.expit(gamma * f)
    return np.where(y > 0.5, np.log(p), np.log(1.0 - p))


@pytest.mark.parametrize("a, b, gamma", [(0.0, 1.0, 1.0), (0.1, 0.8, 1.0), (0.3, 0.5, 4.0), (0.05, 0.95, 200.0)])
def test_log_prob_is_the_formula_where_the_formula_is_accurate(a, b, gamma):
    f = np.linspace(-3, 3, 61) / gamma  # scores gamma f in [-3, 3]
    for y in (0.0, 1.0):
        np.testing.assert_allclose(bb_log_prob(y, f, a, b, gamma), _direct(y, f, a, b, gamma), rtol=1e-12, atol=1e-13)


def test_log_prob_in_the_tails_is_finite_and_exact():
    # at gamma f = +-1e3 the naive log(a + b sigmoid) loses everything: sigmoid(-1e3)
    # underflows, 1 - p cancels. The bounded likelihood costs at most -log a (or -log c)
    a, b = 0.1, 0.7
    c = 1 - a - b
    assert float(bb_log_prob(1.0, -1e3, a, b, 1.0)) == pytest.approx(math.log(a), rel=1e-15)
    assert float(bb_log_prob(0.0, 1e3, a, b, 1.0)) == pytest.approx(math.log(c), rel=1e-15)
    assert float(bb_log_prob(1.0, 1e3, a, b, 1.0)) == pytest.approx(math.log(a + b), rel=1e-15)
    # a = 0, b = 1 (logistic regression): the loss grows without bound, exactly
    assert float(bb_log_prob(1.0, -1e3, 0.0, 1.0, 1.0)) == pytest.approx(-1e3, rel=1e-15)
    assert float(bb_log_prob(0.0, 1e3, 0.0, 1.0, 1.0)) == pytest.approx(-1e3, rel=1e-15)
    # just inside the tail, against log_expit (accurate there): a + b sigmoid(t) with a = 0
    t = np.array([-745.0, -200.0, -40.0, 40.0, 200.0])
    np.testing.assert_allclose(bb_log_prob(1.0, t, 0.0, 1.0, 1.0), special.log_expit(t), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(bb_log_prob(0.0, t, 0.0, 1.0, 1.0), special.log_expit(-t), rtol=1e-13, atol=1e-300)
    # gradients stay finite far out (NUTS and the engines differentiate it)
    g = jax.grad(lambda f: bb_log_prob(1.0, f, a, b, 1.0))(-1e3)
    assert np.isfinite(float(g)) and abs(float(g)) < 1e-300


def test_a_zero_b_one_gamma_one_is_logistic_regression():
    rng = np.random.default_rng(0)
    Phi, y, w = rng.standard_normal((30, 4)), rng.integers(0, 2, 30).astype(float), rng.standard_normal(4)
    spec = BBLR(a=0.0, b=1.0, gamma=1.0, lam=2.0)
    f = Phi @ w
    expected = np.sum(y * special.log_expit(f) + (1 - y) * special.log_expit(-f))
    assert float(spec.log_likelihood(w, Phi, y)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("prior", ["gaussian", "gauss-laplace"])
def test_numpyro_density_is_the_log_joint(prior):
    rng = np.random.default_rng(1)
    Phi, y, w = rng.standard_normal((25, 5)), rng.integers(0, 2, 25).astype(float), rng.standard_normal(5)
    spec = BBLR(a=0.1, b=0.6, gamma=3.0, prior=prior, lam=0.5, pi=0.3, s2=2.0, ell=0.2)
    lp, _ = log_density(spec.model, (Phi,), {"y": y}, {"w": jnp.asarray(w)})
    if prior == "gaussian":
        prior_lp = np.sum(stats.norm.logpdf(w, scale=1 / math.sqrt(0.5)))
    else:
        prior_lp = np.sum(np.log(0.3 * stats.norm.pdf(w, scale=math.sqrt(2.0)) + 0.7 * stats.laplace.pdf(w, scale=0.2)))
    expected = prior_lp + np.sum(_direct(y, Phi @ w, 0.1, 0.6, 3.0))
    assert float(lp) == pytest.approx(expected, rel=1e-12)
    assert float(spec.log_joint(w, Phi, y)) == pytest.approx(expected, rel=1e-12)


def test_gauss_laplace_mixture_is_a_density_with_the_right_moments():
    d = GaussLaplaceMixture(0.3, 2.0, 0.2)
    total = sum(integrate.quad(lambda v: math.exp(float(d.log_prob(v))), lo, hi)[0]
                for lo, hi in ((-np.inf, 0.0), (0.0, np.inf)))
    assert total == pytest.approx(1.0, abs=1e-10)
    # 200,000 draws: variance pi s2 + (1 - pi) 2 ell^2 = 0.656, the sample variance's sd
    # sqrt((m4 - v^2) / n) is ~0.005 here; 5 sds
    draws = np.asarray(d.sample(jax.random.PRNGKey(0), (200_000,)))
    assert np.var(draws) == pytest.approx(0.3 * 2.0 + 0.7 * 2 * 0.04, abs=0.025)
    r = np.asarray(d.responsibility(jnp.array([0.0, 5.0])))
    assert 0 < r[0] < 0.5 < r[1] <= 1  # near 0 the Laplace's peak, far out the Gaussian's tail


def test_predictive_under_a_gaussian_is_a_plus_b_times_the_exact_integral():
    spec = BBLR(a=0.1, b=0.7, gamma=5.0)
    for m, v in [(0.3, 0.0), (0.3, 0.01), (-1.0, 2.0), (2.0, 40.0)]:
        sd = math.sqrt(v)
        if v == 0:
            ref = 0.1 + 0.7 * special.expit(5.0 * m)
        else:
            ref = 0.1 + 0.7 * integrate.quad(lambda f: special.expit(5.0 * f) * stats.norm.pdf(f, m, sd),
                                             m - 15 * sd, m + 15 * sd, points=[0.0], limit=400)[0]
        assert float(spec.gaussian_prob(m, v)) == pytest.approx(ref, abs=1e-10)


def test_expected_sigmoid_against_adaptive_quadrature_in_both_regimes():
    # both fixed-node rules (narrow sd <= 5, wide sd > 5) against scipy's quad; beyond
    # +-40 the sigmoid is 0 / 1 to 4e-18, so the Gaussian's mass there is taken by its cdf
    worst = 0.0
    for m in (-300.0, -20.0, -0.5, 0.0, 1.7, 40.0):
        for s in (0.0, 1e-3, 1.0, 4.99, 5.0, 5.01, 50.0, 5000.0):
            got = float(expected_sigmoid(m, s))
            if s == 0:
                ref = special.expit(m)
            else:
                lo, hi = max(-40.0, m - 15 * s), min(40.0, m + 15 * s)
                mid = 0.0 if lo >= hi else integrate.quad(
                    lambda t: special.expit(t) * stats.norm.pdf(t, m, s), lo, hi,
                    points=[p for p in (0.0, m) if lo < p < hi], limit=500, epsabs=1e-15, epsrel=1e-13)[0]
                ref = mid + stats.norm.sf(40.0, m, s)
            worst = max(worst, abs(got - ref))
    assert worst < 1e-11


def test_sampled_labels_follow_the_bounded_probability():
    f = jnp.array([-1e3, 0.0, 1e3])
    d = BetaBernoulliLogistic(f, 0.2, 0.6, 1.0)
    y = np.asarray(d.sample(jax.random.PRNGKey(1), (40_000,)))
    # binomial sd of a share at 40,000 draws <= 0.0025; 4 sds
    np.testing.assert_allclose(y.mean(0), [0.2, 0.5, 0.8], atol=0.01)


def test_the_papers_configurations_of_a_and_b():
    a, b = BBLR.ab_from_beta_prior(1.0, 1.0, 100.0)
    assert (a, b) == pytest.approx((1 / 102, 100 / 102))
    y = np.array([1] * 30 + [0] * 70)
    spec = BBLR.from_counts(y)  # BBLR2: alpha = N+, beta = N-, n = N
    assert (spec.a, spec.b, spec.c) == pytest.approx((0.15, 0.5, 0.35))
    assert BBLR.weak_prior().a == pytest.approx(1 / 102)


@pytest.mark.parametrize("kwargs, message", [
    ({"a": -0.1}, "a must be >= 0"), ({"b": 0.0}, "b must be positive"),
    ({"a": 0.5, "b": 0.6}, "a \\+ b must be <= 1"), ({"gamma": 0.0}, "gamma must be positive"),
    ({"lam": -1.0}, "lam must be positive"), ({"gamma": float("nan")}, "gamma must be finite"),
    ({"prior": "horseshoe"}, "prior must be one of"), ({"prior": "gauss-laplace", "pi": 1.0}, "pi must lie in"),
    ({"ell": 0.0}, "ell must be positive"),
])
def test_bad_hyper_parameters_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BBLR(**kwargs)
