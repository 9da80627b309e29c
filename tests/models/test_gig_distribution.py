"""The GIG distribution and log K_nu against scipy (default tier).

log K_nu is our own quadrature (models/special.py), so it is checked against scipy's
``kve`` over the orders and arguments the GIG-hierarchical model reaches and beyond; the
GIG density, moments and exact sampler against ``scipy.stats.geninvgauss`` for a, b > 0
and against Gamma / inverse-gamma for the boundary cases b = 0 and a = 0.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import zoo  # noqa: F401  (float64)
from zoo.models.distributions import GIG
from zoo.models.special import log_bessel_k_half, log_bessel_kv


def test_log_bessel_kv_matches_scipy_over_orders_and_arguments():
    nu = np.array([0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 50.0, 200.0])
    x = np.geomspace(1e-8, 1e5, 40)
    N, X = np.meshgrid(nu, x, indexing="ij")
    with np.errstate(over="ignore"):
        ref = np.log(special.kve(N, X)) - X  # kve = K e^x, finite far beyond K itself
    ok = np.isfinite(ref)
    ours = np.asarray(log_bessel_kv(N, X))
    assert ok.sum() > 300  # the comparison covers most of the grid
    # relative accuracy on log K; 1e-12 is ~1e4 ulp, the quadrature reaches ~1e-14
    np.testing.assert_allclose(ours[ok], ref[ok], rtol=1e-12, atol=1e-12)
    # negative orders: K_{-nu} = K_nu
    np.testing.assert_allclose(np.asarray(log_bessel_kv(-N, X))[ok], ref[ok], rtol=1e-12, atol=1e-12)


def test_log_bessel_kv_where_scipy_overflows_follows_the_small_x_asymptote():
    # K_nu(x) ~ Gamma(nu)/2 (2/x)^nu as x -> 0 (nu > 0); scipy's kve overflows here
    nu, x = np.array([50.0, 200.0]), np.array([1e-6, 1e-6])
    asym = special.gammaln(nu) - np.log(2.0) + nu * np.log(2.0 / x)
    np.testing.assert_allclose(np.asarray(log_bessel_kv(nu, x)), asym, rtol=1e-10)


def test_log_bessel_kv_gradient_in_x_is_the_recurrence():
    # d/dx K_nu = -(K_{nu-1} + K_{nu+1}) / 2
    for nu, x in [(0.5, 0.3), (1.0, 2.0), (3.7, 15.0), (0.0, 1e-3)]:
        grad = float(jax.grad(lambda xx: log_bessel_kv(nu, xx))(x))
        expect = -(special.kv(nu - 1, x) + special.kv(nu + 1, x)) / (2 * special.kv(nu, x))
        assert grad == pytest.approx(expect, rel=1e-9)


def test_log_bessel_kv_edges_and_half_order():
    assert float(log_bessel_kv(1.0, 0.0)) == np.inf
    assert np.isnan(float(log_bessel_kv(1.0, -1.0)))
    x = np.geomspace(1e-3, 1e3, 13)
    np.testing.assert_allclose(np.asarray(log_bessel_k_half(x)), np.asarray(log_bessel_kv(0.5, x)), rtol=1e-13)


#: (p, a, b): Horii's q(tau) order 1/2, near-Gamma and near-inverse-gamma shapes, a
#: tiny omega = sqrt(a b) (flat log-density), a large one (sharp), negative p
BESSEL_CASES = [(0.5, 2.0, 3.0), (1.0, 1e-6, 5.0), (-2.0, 3.0, 1e-8), (0.0, 1e-4, 1e-4),
                (5.0, 100.0, 0.01), (-0.5, 7.0, 7.0), (0.5, 1e3, 1e3)]


def _scipy_law(p, a, b):
    if a > 0 and b > 0:
        return stats.geninvgauss(p, np.sqrt(a * b), scale=np.sqrt(b / a))
    if b == 0:
        return stats.gamma(p, scale=2.0 / a)
    return stats.invgamma(-p, scale=b / 2.0)


@pytest.mark.parametrize("p,a,b", BESSEL_CASES + [(1.0, 2.0, 0.0), (3.5, 0.4, 0.0), (-3.0, 0.0, 2.0)])
def test_gig_log_prob_and_moments_match_scipy(p, a, b):
    law = _scipy_law(p, a, b)
    x = law.ppf([0.01, 0.2, 0.5, 0.8, 0.99])
    d = GIG(p, a, b)
    np.testing.assert_allclose(np.asarray(d.log_prob(x)), law.logpdf(x), rtol=1e-11, atol=1e-11)
    assert float(d.mean) == pytest.approx(law.mean(), rel=1e-10)
    assert float(d.variance) == pytest.approx(law.var(), rel=1e-9)
    if a > 0 and b > 0:  # E[1/x] in closed form (DERIVATIONS.md §3.3): sqrt(a/b) K_{p+1}/K_p - 2p/b
        ratio = special.kve(p + 1, np.sqrt(a * b)) / special.kve(p, np.sqrt(a * b))
        assert float(d.moment(-1.0)) == pytest.approx(np.sqrt(a / b) * ratio - 2 * p / b, rel=1e-9)


def test_gig_boundary_moments_that_do_not_exist_are_infinite():
    assert float(GIG(-1.5, 0.0, 2.0).variance) == np.inf  # InvGamma(1.5): no variance
    assert float(GIG(-0.5, 0.0, 2.0).mean) == np.inf


@pytest.mark.parametrize("p,a,b", BESSEL_CASES + [(1.0, 2.0, 0.0), (-3.0, 0.0, 2.0)])
@pytest.mark.long
def test_gig_sampler_is_exact(p, a, b):
    """KS test of 4000 draws (fixed seed) against the scipy law. Under an exact sampler
    the KS statistic exceeds its 1e-4 critical value (1.95 / sqrt(n)) with probability
    1e-4 per case; a wrong envelope or a biased acceptance moves it far beyond."""
    n = 4000
    draws = np.asarray(GIG(p, a, b).sample(jax.random.PRNGKey(11), (n,)))
    assert draws.shape == (n,) and np.all(draws > 0)
    ks = stats.kstest(draws, _scipy_law(p, a, b).cdf).statistic
    assert ks < 1.95 / np.sqrt(n), f"KS statistic {ks:.4f}"


@pytest.mark.long
def test_gig_batches_sample_elementwise():
    d = GIG(jnp.array([0.5, 1.0, -3.0]), jnp.array([2.0, 2.0, 0.0]), jnp.array([3.0, 0.0, 2.0]))
    draws = np.asarray(d.sample(jax.random.PRNGKey(3), (3000,)))
    assert draws.shape == (3000, 3)
    # means within 5 Monte Carlo standard errors (fixed seed)
    se = np.sqrt(np.asarray(d.variance) / 3000)
    assert np.all(np.abs(draws.mean(0) - np.asarray(d.mean)) < 5 * se)


def test_gig_log_prob_gradients_are_finite_in_every_branch():
    # NUTS differentiates the model's log density in x and in a (tau_i | a_i ~ GIG(1, a_i, 0))
    for p, a, b in [(1.0, 2.0, 0.0), (-3.0, 0.0, 2.0), (0.5, 2.0, 3.0)]:
        g = jax.grad(lambda x, aa: GIG(p, aa, b).log_prob(x), argnums=(0, 1))(1.3, a)
        assert np.all(np.isfinite(np.asarray(g)))
    # Gamma case: d/da log p = p/a - x/2
    g = jax.grad(lambda aa: GIG(1.0, aa, 0.0).log_prob(1.3))(2.0)
    assert float(g) == pytest.approx(1.0 / 2.0 - 1.3 / 2.0, rel=1e-12)


@pytest.mark.parametrize("p,a,b,match", [
    (1.0, -1.0, 1.0, "a >= 0"), (1.0, 0.0, 0.0, "a > 0 or b > 0"),
    (-1.0, 2.0, 0.0, "b = 0 .* p > 0"), (1.0, 0.0, 2.0, "a = 0 .* p < 0"), (np.nan, 1.0, 1.0, "finite"),
])
def test_gig_rejects_parameters_outside_the_family(p, a, b, match):
    with pytest.raises(ValueError, match=match):
        GIG(p, a, b)
