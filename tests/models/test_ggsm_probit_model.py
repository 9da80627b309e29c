"""The GGSM probit model (models/ggsm_probit.py) and its GeneralizedNormal prior.

Statistical checks use fixed seeds; the Kolmogorov-Smirnov bound is the 0.1% critical
value 1.95 / sqrt(n), so a correct sampler fails it with probability 0.001 per seed -
and since the seed is fixed, a pass is reproducible.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, stats

import zoo  # noqa: F401  (float64)
from zoo.models.basis import LinearBasis, RBFBasis, WithBias
from zoo.models.distributions import GeneralizedNormal
from zoo.models.ggsm_probit import Q_GRID, GGSMProbit


def scipy_gennorm(lam, q):
    return stats.gennorm(beta=q, scale=lam ** (1.0 / q))


@pytest.mark.parametrize("q", Q_GRID)
@pytest.mark.parametrize("lam", [0.3, 1.0, 4.0])
def test_log_prob_mean_and_variance_match_scipy_gennorm(q, lam):
    d = GeneralizedNormal(lam, q)
    x = np.array([-3.0, -0.7, -1e-3, 0.2, 1.5, 6.0])
    np.testing.assert_allclose(d.log_prob(x), scipy_gennorm(lam, q).logpdf(x), rtol=1e-10, atol=1e-10)
    assert float(d.mean) == 0.0
    assert float(d.variance) == pytest.approx(scipy_gennorm(lam, q).var(), rel=1e-10)


@pytest.mark.parametrize("q", Q_GRID)
def test_samples_follow_the_distribution(q):
    n, lam = 20000, 0.8
    x = np.asarray(GeneralizedNormal(lam, q).sample(jax.random.PRNGKey(11), (n,)))
    ks = stats.kstest(x, scipy_gennorm(lam, q).cdf).statistic
    assert ks < 1.95 / math.sqrt(n)
    assert abs(np.mean(x > 0) - 0.5) < 3.3 * 0.5 / math.sqrt(n)  # symmetric signs


def test_location_shifts_the_law():
    d = GeneralizedNormal(2.0, 1.5, loc=3.0)
    assert float(d.log_prob(3.0 + 0.4)) == pytest.approx(float(GeneralizedNormal(2.0, 1.5).log_prob(0.4)))
    assert float(d.mean) == 3.0


@pytest.mark.parametrize("bad", [dict(q=0.0), dict(q=-1.0), dict(q=2.5), dict(q=float("nan")),
                                 dict(a=0.0), dict(b=-1.0), dict(a=float("inf"))])
def test_invalid_hyper_parameters_raise(bad):
    with pytest.raises(ValueError):
        GGSMProbit(**bad)


def test_model_log_density_is_prior_plus_probit_likelihood():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    Phi = WithBias(LinearBasis.fit(X)).transform(X)
    y = (rng.uniform(size=12) < 0.5).astype(float)
    spec = GGSMProbit(q=0.5, a=2.0, b=0.7)
    w, lam = np.array([0.3, -1.2, 0.0, 2.0]), 0.9
    got, _ = log_density(spec.model, (Phi, y), {}, {"lam": lam, "w": w})
    f = Phi @ w
    expected = (stats.invgamma(2.0, scale=0.7).logpdf(lam)
                + scipy_gennorm(lam, 0.5).logpdf(w).sum()
                + np.sum(np.where(y == 1, stats.norm.logcdf(f), stats.norm.logcdf(-f))))
    assert float(got) == pytest.approx(expected, rel=1e-10)
    assert [s.name for s in spec.sites(Phi.shape[1])] == ["lam", "w"]
    np.testing.assert_allclose(spec.linear_predictor({"w": w}, Phi), f)


@pytest.mark.parametrize("q", [0.5, 2.0])
def test_marginal_prior_integrates_lambda_out(q):
    """log p(w1) - log p(w2) from -(a + n/q) log(b + sum|w|^q) equals the ratio of the
    numerically integrated int prod GN(w_i | lam, q) InvGamma(lam | a, b) dlam."""
    spec = GGSMProbit(q=q, a=1.5, b=0.8)
    w1, w2 = np.array([0.2, -0.5, 1.0]), np.array([1.5, 0.1, -2.0])

    def integrated(w):
        def integrand(lam):
            return math.exp(scipy_gennorm(lam, q).logpdf(w).sum() + stats.invgamma(1.5, scale=0.8).logpdf(lam))
        return integrate.quad(integrand, 0, np.inf, limit=200)[0]

    expected = math.log(integrated(w1)) - math.log(integrated(w2))
    got = float(spec.log_marginal_prior(jnp.asarray(w1)) - spec.log_marginal_prior(jnp.asarray(w2)))
    assert got == pytest.approx(expected, rel=1e-6)


def test_bias_column_basis():
    X = np.arange(6.0).reshape(3, 2)
    Phi = WithBias(LinearBasis.fit(X)).transform(X)
    np.testing.assert_array_equal(Phi, np.c_[np.ones(3), X])
    K = WithBias(RBFBasis.fit(X, 1.0))
    assert K.n_basis == 4 and K.transform(X).shape == (3, 4)
    np.testing.assert_array_equal(K.subset([0, 2]).transform(X), K.transform(X)[:, [0, 2]])
