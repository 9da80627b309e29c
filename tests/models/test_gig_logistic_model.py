"""The GIG-hierarchical logistic model as written once in NumPyro (default tier).

Both parameterizations must be the same model: their prior draws of tau are checked
against the closed-form marginal of tau (the hyper-parameter integrated out), and their
draws of beta against each other.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest
from numpyro.infer import Predictive
from scipy import stats

import zoo  # noqa: F401
from zoo.models.gig_logistic import GIGLogistic

N_DRAWS, D = 4000, 3  # 12000 i.i.d. draws per quantity (the coordinates are independent)
#: KS critical value at level 1e-4: one-sample 1.95 / sqrt(n), two-sample 1.95 sqrt(2 / n)
KS_ONE = 1.95 / np.sqrt(N_DRAWS * D)
KS_TWO = 1.95 * np.sqrt(2.0 / (N_DRAWS * D))


def _prior_draws(spec, seed):
    Phi = np.zeros((2, D))
    out = Predictive(spec.model, num_samples=N_DRAWS)(jax.random.PRNGKey(seed), Phi)
    tau = np.asarray(out["tau"]).ravel() if "tau" in out else None
    return tau, np.asarray(out["beta"]).ravel()


def _tau_marginal_cdf(spec):
    """tau with h integrated out. Gamma mixing, rho = 1: tau | a ~ Exp(rate a/2) with
    a ~ Gamma(k, theta) gives P(tau <= t) = 1 - (1 + t / (2 theta))^-k (a Lomax law).
    Inverse-gamma mixing, rho = -1: tau | b ~ InvGamma(1, b/2), P(tau <= t | b) =
    exp(-b / (2 t)), so P(tau <= t) = (1 + 1 / (2 theta t))^-k."""
    k, theta = spec.k, spec.theta
    if spec.mixing == "gamma":
        return lambda t: 1.0 - (1.0 + t / (2.0 * theta)) ** -k
    return lambda t: (1.0 + 1.0 / (2.0 * theta * t)) ** -k


# four parameterizations x two mixings of prior draws through KS tests (among the costliest):
# slow tier; the default tier keeps the log densities against scipy
@pytest.mark.slow
@pytest.mark.parametrize("mixing,rho", [("gamma", 1.0), ("inverse-gamma", -1.0)])
def test_both_parameterizations_are_the_same_prior(mixing, rho):
    draws = {}
    for i, par in enumerate(("centred", "noncentred", "marginal", "collapsed")):
        spec = GIGLogistic(rho=rho, k=2.0, theta=1.5, mixing=mixing, parameterization=par)
        tau, beta = _prior_draws(spec, seed=10 + i)
        if tau is not None:  # the collapsed form has no tau
            assert stats.kstest(tau, _tau_marginal_cdf(spec)).statistic < KS_ONE, par
        draws[par] = beta
    assert stats.ks_2samp(draws["centred"], draws["noncentred"]).statistic < KS_TWO
    assert stats.ks_2samp(draws["centred"], draws["marginal"]).statistic < KS_TWO
    assert stats.ks_2samp(draws["centred"], draws["collapsed"]).statistic < KS_TWO
    # and the collapsed form's density (the quadrature) is that of the centred draws:
    # compare P(|beta| < t) with the integral of exp(log_marginal_prior)
    spec = GIGLogistic(rho=rho, k=2.0, theta=1.5, mixing=mixing)
    grid = np.linspace(-1.0, 1.0, 2001)
    mass = np.trapezoid(np.exp(np.asarray(spec.log_marginal_prior(grid))), grid)
    frac = np.mean(np.abs(draws["centred"]) < 1.0)
    assert abs(frac - mass) < 4 * np.sqrt(mass * (1 - mass) / draws["centred"].size)


def test_log_beta_prime_against_scipy():
    from zoo.models.distributions import LogBetaPrime

    for a, b in [(1.0, 2.0), (0.5, 1e-6), (3.0, 0.7)]:
        d = LogBetaPrime(a, b)
        u = np.linspace(-5, 5, 11)
        # density of log X for X ~ betaprime(a, b): f_X(e^u) e^u
        np.testing.assert_allclose(np.asarray(d.log_prob(u)), stats.betaprime(a, b).logpdf(np.exp(u)) + u, rtol=1e-10)
    draws = np.asarray(LogBetaPrime(1.0, 2.0).sample(jax.random.PRNGKey(4), (N_DRAWS * D,)))
    assert stats.kstest(np.exp(draws), stats.betaprime(1.0, 2.0).cdf).statistic < KS_ONE


def test_sites_and_link():
    spec = GIGLogistic()
    (site,) = spec.sites(7)
    assert site.name == "beta" and site.shape == (7,)
    f = np.array([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(spec.prob(f), 1 / (1 + np.exp(-f)))
    # MacKay's predictive is exact at zero variance
    np.testing.assert_allclose(spec.gaussian_prob(f, np.zeros(3)), spec.prob(f))


@pytest.mark.parametrize("kwargs,match", [
    ({"rho": -1.0}, "rho must be > 0"), ({"rho": 1.0, "mixing": "inverse-gamma"}, "rho must be < 0"),
    ({"k": 0.0}, "k"), ({"theta": -1.0}, "theta"), ({"mixing": "beta"}, "mixing"),
    ({"parameterization": "whitened"}, "parameterization"), ({"rho": float("nan")}, "rho"),
])
def test_invalid_hyper_parameters_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GIGLogistic(**kwargs)


def test_paper_prior():
    spec = GIGLogistic.paper_prior()
    assert (spec.k, spec.theta, spec.rho, spec.mixing) == (1e-6, 1e-6, 1.0, "gamma")


@pytest.mark.parametrize("spec", [GIGLogistic(), GIGLogistic(k=0.5, theta=2.0), GIGLogistic(rho=2.5),
                                  GIGLogistic(rho=-1.5, mixing="inverse-gamma"), GIGLogistic.paper_prior()])
def test_marginal_prior_of_beta_against_quad(spec):
    """p(beta) = int N(beta | 0, tau) p(tau) dtau with tau's closed-form marginal (a scaled
    beta prime law; for inverse-gamma mixing 1/tau has it), by scipy's adaptive quadrature
    over v = log of the mixed variable, with the beta prime density written from
    betaln (scipy's own betaprime pdf loses digits at the paper's k = 1e-6)."""
    from scipy import integrate, special

    nu, k, scale = abs(spec.rho), spec.k, 2 * spec.theta

    def integrand(v, b):
        x = np.exp(v)  # tau (gamma mixing) or 1/tau (inverse-gamma mixing)
        log_px = ((nu - 1) * np.log(x / scale) - (nu + k) * np.log1p(x / scale)
                  - special.betaln(nu, k) - np.log(scale))
        var = x if spec.mixing == "gamma" else 1 / x
        return np.exp(log_px + v + stats.norm.logpdf(b, scale=np.sqrt(var)))

    for b in (0.05, 0.7, 3.0):
        ref = integrate.quad(integrand, -120, 120, args=(b,), limit=500, epsabs=0, epsrel=1e-12,
                             points=[-40, -20, -10, -5, 0, 5, 10, 20, 40])[0]
        ours = float(np.exp(spec.log_marginal_prior(b)))
        assert ours == pytest.approx(ref, rel=1e-9), (b, ours, ref)


def test_log_density_sites_is_the_marginal_joint():
    spec = GIGLogistic()
    X = np.array([[1.0, -0.5], [0.3, 2.0], [-1.2, 0.4]])
    y = np.array([1.0, 0.0, 1.0])
    beta = np.array([0.4, -1.1])
    f = X @ beta
    expect = np.sum(y * -np.log1p(np.exp(-f)) + (1 - y) * -np.log1p(np.exp(f))) + np.sum(np.asarray(spec.log_marginal_prior(beta)))
    assert float(spec.log_density_sites({"beta": beta}, X, y)) == pytest.approx(float(expect), rel=1e-12)
