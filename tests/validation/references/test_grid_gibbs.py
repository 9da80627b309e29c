"""gridRVM's second reference sampler (Polya-Gamma Gibbs, validation/references/grid_gibbs.py) and its parts.

What would make it wrong, and the test that would see it:
* a Gamma conditional of alpha or beta that is not the model's (a wrong shape, a rate
  summing the wrong weights) -> log_joint differences in alpha (beta) against the
  conditional's log density differences, an exact identity, for the p-grid and the rvm;
* an s-grid slice target that is not the model's, or a missing Jacobian of the log ->
  the same identity with the log-Jacobian added;
* a wrong ridge move (a wrong GIG parameter, a missing Jacobian or Haar factor) -> its
  GIG against log_joint along the ridge (exact), and the move applied to draws of the
  Gamma prior must leave that prior as it is (the move does not look at w);
* a wrong w | omega, alpha, beta draw in either branch (Cholesky, Bhattacharya et al.)
  -> mean and covariance of many draws against the Gaussian conditional computed with
  numpy, for M > N and M <= N, and the two branches against each other;
* a chain that does not target the posterior -> against NUTS on a small problem where
  NUTS certifies, through the reference machinery, for the three priors; for the p-grid
  also with the ridge move off (the move must change the mixing, never the target).

Tolerances. The identities are exact up to float64 round-off (1e-10 on log densities of
size ~100). The statistical checks compare an estimate with its Monte Carlo standard error
(sd / sqrt(n) for independent draws; sd / sqrt(bulk ESS) for chains, the approach of
tests/validation/references/test_pg_gibbs.py) at a Bonferroni threshold: each test's K comparisons share a
false-alarm probability of 1e-3 (z = the 1 - 1e-3 / (2K) normal quantile, about 4.2 for
K = 30), so a correct sampler fails this file with probability below about 1e-2.
Fixed seeds throughout.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from problems import grid_table_problem
from scipy import stats
from scipy.special import digamma, polygamma

from zoo.models.distributions import GIG
from zoo.models.grid_rvm import GridRVM
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.judge.verdict import threshold
from zoo.validation.references import ReferenceConfig, run_reference
from zoo.validation.references import grid_gibbs as G

#: the family-wise false-alarm probability of each statistical test
FAMILY_ALARM = 1e-3


def _z(n_tests: int) -> float:
    """Bonferroni z for ``n_tests`` two-sided normal comparisons sharing FAMILY_ALARM."""
    return threshold(n_tests, false_alarm=FAMILY_ALARM)


def _data(n_obs, shape, seed, signal=1.0):
    """A table problem with random logistic weights (tests/problems.py)."""
    return grid_table_problem(shape, n_obs, seed, signal="random", scale=signal)


def _log_joint(spec, X, y, w, alpha, beta=None):
    params = {"w": jnp.asarray(w), "alpha": jnp.asarray(alpha)}
    if spec.prior != "rvm":
        params["beta"] = jnp.asarray(beta)
    return float(spec.log_joint(params, X, y))


SHAPE = (3, 4)
HYPER = {"a0": 1.5, "b0": 0.8, "c0": 2.5, "d0": 1.3}


# -- the conjugate conditionals -----------------------------------------------------------
@pytest.mark.parametrize("prior", ["p-grid", "rvm"])
def test_gamma_conditionals_are_the_model_density(prior):
    """For fixed w (and beta), log_joint(alpha1) - log_joint(alpha2) is the difference of
    the Gamma conditional's log densities, exactly; likewise beta given w and alpha."""
    X, y = _data(15, SHAPE, 0)
    spec = GridRVM(SHAPE, prior, **HYPER)
    rng = np.random.default_rng(1)
    w = rng.standard_normal(spec.n_weights)
    n_alpha = spec.hyper_shapes["alpha"][0]
    beta = rng.gamma(2.0, 0.5, SHAPE[1]) if prior == "p-grid" else None
    alphas = [rng.gamma(2.0, 0.5, n_alpha) for _ in range(4)]
    sh, rate = (np.asarray(v) for v in G.alpha_gamma_params(prior, SHAPE, jnp.asarray(w),
                                                            None if beta is None else jnp.asarray(beta),
                                                            spec.a0, spec.b0))
    assert sh.shape == rate.shape == (n_alpha,)
    for a1, a2 in zip(alphas, alphas[1:]):
        model = _log_joint(spec, X, y, w, a1, beta) - _log_joint(spec, X, y, w, a2, beta)
        cond = np.sum(stats.gamma.logpdf(a1, sh, scale=1 / rate) - stats.gamma.logpdf(a2, sh, scale=1 / rate))
        assert model == pytest.approx(cond, abs=1e-10)
    if prior == "p-grid":
        alpha = alphas[0]
        sh, rate = (np.asarray(v) for v in G.beta_gamma_params(SHAPE, jnp.asarray(w), jnp.asarray(alpha),
                                                               spec.c0, spec.d0))
        betas = [rng.gamma(2.0, 0.5, SHAPE[1]) for _ in range(4)]
        for b1, b2 in zip(betas, betas[1:]):
            model = _log_joint(spec, X, y, w, alpha, b1) - _log_joint(spec, X, y, w, alpha, b2)
            cond = np.sum(stats.gamma.logpdf(b1, sh, scale=1 / rate) - stats.gamma.logpdf(b2, sh, scale=1 / rate))
            assert model == pytest.approx(cond, abs=1e-10)


def test_sgrid_slice_targets_are_the_model_density_in_log_coordinates():
    """log_joint(alpha = e^x) + sum x (the Jacobian) minus the sum of the slice targets of
    every x_i does not depend on x; the same for log beta."""
    X, y = _data(15, SHAPE, 2)
    spec = GridRVM(SHAPE, "s-grid", **HYPER)
    rng = np.random.default_rng(3)
    w = rng.standard_normal(spec.n_weights)
    W = jnp.asarray(w.reshape(SHAPE))
    alpha, beta = rng.gamma(2.0, 0.5, SHAPE[0]), rng.gamma(2.0, 0.5, SHAPE[1])

    def slice_sum(xs, lines, other, shape0, rate0):
        return sum(float(G.sgrid_log_conditional(jnp.asarray(x), line, jnp.log(other), shape0, rate0))
                   for x, line in zip(xs, lines))

    diffs = []
    for shift in (-3.0, 0.0, 0.7, 2.5):
        x = np.log(alpha) + shift * np.array([1.0, -0.5, 0.3])
        diffs.append(_log_joint(spec, X, y, w, np.exp(x), beta) + x.sum()
                     - slice_sum(x, W, beta, spec.a0, spec.b0))
    np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-10)
    diffs = []
    for shift in (-3.0, 0.0, 0.7, 2.5):
        x = np.log(beta) + shift * np.array([1.0, -0.5, 0.3, 0.2])
        diffs.append(_log_joint(spec, X, y, w, alpha, np.exp(x)) + x.sum()
                     - slice_sum(x, W.T, alpha, spec.c0, spec.d0))
    np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-10)
    # far out on the right e^x overflows: outside every slice, not NaN
    assert float(G.sgrid_log_conditional(jnp.asarray(800.0), W[0], jnp.log(beta), 1.0, 1.0)) == -np.inf
    # far out on the left (a vague prior's switched-off factor, DERIVATIONS.md §5.7): the
    # sum alpha + beta in log space stays exact where e^x underflows
    far = float(G.sgrid_log_conditional(jnp.asarray(-1e6), W[0], jnp.log(beta), 1e-6, 1e-6))
    assert far == pytest.approx(1e-6 * -1e6 + 0.5 * np.sum(np.log(beta)), rel=1e-12)


# -- the ridge move -----------------------------------------------------------------------
def test_ridge_gig_is_the_model_density_along_the_ridge():
    """log_joint(c alpha, beta / c) - log_joint(alpha, beta), plus the log-Jacobian
    (M1 - M2) log c of the map and the Haar measure's -log c, is the GIG log density
    ratio of c against 1 - exactly, for every c (DERIVATIONS.md §5.5). The precisions,
    hence the likelihood and w's prior, do not change."""
    X, y = _data(15, SHAPE, 4)
    spec = GridRVM(SHAPE, "p-grid", **HYPER)
    rng = np.random.default_rng(5)
    w = rng.standard_normal(spec.n_weights)
    alpha, beta = rng.gamma(2.0, 0.5, SHAPE[0]), rng.gamma(2.0, 0.5, SHAPE[1])
    gig = GIG(*G.ridge_gig_params(SHAPE, jnp.asarray(alpha), jnp.asarray(beta),
                                  spec.a0, spec.b0, spec.c0, spec.d0))
    base = _log_joint(spec, X, y, w, alpha, beta)
    m1, m2 = SHAPE
    for c in (0.05, 0.6, 1.7, 20.0):
        model = _log_joint(spec, X, y, w, c * alpha, beta / c) - base + (m1 - m2 - 1) * np.log(c)
        assert model == pytest.approx(float(gig.log_prob(c) - gig.log_prob(1.0)), abs=1e-10)
        np.testing.assert_allclose(spec.precision(c * alpha, beta / c), spec.precision(alpha, beta), rtol=1e-13)


@pytest.mark.long
def test_ridge_move_leaves_the_gamma_prior_invariant():
    """The move's conditional does not involve w, so it must leave the Gamma prior of
    (alpha, beta) invariant: prior draws moved once keep E log alpha_i = psi(a0) - log b0
    (sd sqrt(psi'(a0))), E alpha_i = a0 / b0, and likewise for beta. The draws are
    independent, so the standard errors are the prior sds over sqrt(n). A wrong GIG
    exponent (p off by one) shifts E log alpha by about 10 standard errors here."""
    spec = GridRVM(SHAPE, "p-grid", **HYPER)
    n = 20000
    k_a, k_b, k_move = jax.random.split(jax.random.PRNGKey(11), 3)
    alpha = jax.random.gamma(k_a, spec.a0, (n, SHAPE[0])) / spec.b0
    beta = jax.random.gamma(k_b, spec.c0, (n, SHAPE[1])) / spec.d0
    move = jax.jit(jax.vmap(lambda k, a, b: G.ridge_move(k, SHAPE, a, b, spec.a0, spec.b0, spec.c0, spec.d0)))
    alpha2, beta2 = (np.asarray(v) for v in move(jax.random.split(k_move, n), alpha, beta))
    np.testing.assert_allclose(np.asarray(spec.precision(alpha2, beta2)), np.asarray(spec.precision(alpha, beta)),
                               rtol=1e-12)
    assert not np.allclose(alpha2, np.asarray(alpha))  # it moved
    z = _z(2 * (SHAPE[0] + SHAPE[1]))
    for draws, a, b in ((alpha2, spec.a0, spec.b0), (beta2, spec.c0, spec.d0)):
        log_mean, log_sd = digamma(a) - np.log(b), np.sqrt(polygamma(1, a))
        assert np.all(np.abs(np.log(draws).mean(0) - log_mean) < z * log_sd / np.sqrt(n))
        assert np.all(np.abs(draws.mean(0) - a / b) < z * np.sqrt(a) / b / np.sqrt(n))


# -- the w draw ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_obs, shape", [(20, (2, 3)), (8, (3, 4))], ids=["M<=N", "M>N"])
@pytest.mark.long
def test_w_draw_is_the_gaussian_conditional_in_both_branches(n_obs, shape):
    """Mean and every covariance entry of 20,000 draws of each branch against N(m, V)
    computed with numpy; then the branches against each other. Precisions from 1e-2 to
    1e2, so that the scaled coordinates and the N x N system both see a wide range.
    Standard errors: sd / sqrt(n) of the draw (mean) and of the centred products
    (x_i - m_i)(x_j - m_j) (covariance, centred at the exact m)."""
    X, y = _data(n_obs, shape, 6)
    m_w = shape[0] * shape[1]
    rng = np.random.default_rng(7)
    omega = rng.uniform(0.05, 0.3, n_obs)
    prec = np.exp(rng.uniform(np.log(1e-2), np.log(1e2), m_w))
    kappa = y - 0.5
    V = np.linalg.inv(X.T @ (omega[:, None] * X) + np.diag(prec))
    m = V @ X.T @ kappa
    n = 20000
    iu = np.triu_indices(m_w)
    z = _z(2 * (m_w + iu[0].size) + 2 * m_w)
    draws = {}
    for bcm, seed in ((False, 8), (True, 9)):
        keys = jax.random.split(jax.random.PRNGKey(seed), n)
        draw = jax.jit(jax.vmap(lambda k: G.draw_w(k, jnp.asarray(X), jnp.asarray(kappa), jnp.asarray(omega),
                                                   jnp.asarray(prec), bcm)))
        d = np.asarray(draw(keys))
        draws[bcm] = d
        assert np.all(np.abs(d.mean(0) - m) < z * np.sqrt(np.diag(V) / n)), bcm
        prods = ((d - m)[:, :, None] * (d - m)[:, None, :])[:, iu[0], iu[1]]
        assert np.all(np.abs(prods.mean(0) - V[iu]) < z * prods.std(0) / np.sqrt(n)), bcm
    # the two branches against each other (independent draws: the variances add)
    a, b = draws[False], draws[True]
    assert np.all(np.abs(a.mean(0) - b.mean(0)) < z * np.sqrt((a.var(0) + b.var(0)) / n))
    # and the sampler picks the N x N branch exactly when M > N
    spec = GridRVM(shape, "rvm")
    assert G.GridGibbsChains(spec, X, y, num_chains=1).bcm == (m_w > n_obs)
    assert G.GridGibbsChains(spec, X, y, num_chains=1, w_method="bcm").bcm
    assert not G.GridGibbsChains(spec, X, y, num_chains=1, w_method="cholesky").bcm


# -- the chain against NUTS ---------------------------------------------------------------
GRID = (3, 3)


def _compare_means(first, second, names, z):
    """Every coordinate of every named site: |mean difference| < z * the joint Monte Carlo
    standard error, sd / sqrt(bulk ESS) per chain set."""
    for name in names:
        a, b = first[name], second[name]
        a, b = a.reshape(a.shape[:2] + (-1,)), b.reshape(b.shape[:2] + (-1,))
        for j in range(a.shape[2]):
            se = np.sqrt(np.var(a[..., j]) / adapter.ess_bulk(a[..., j])
                         + np.var(b[..., j]) / adapter.ess_bulk(b[..., j]))
            assert abs(a[..., j].mean() - b[..., j].mean()) < z * se, (name, j)


def _posterior_draws(reference, names):
    return {name: np.asarray(reference.idata.posterior[name].values) for name in names}


# the p-grid run (with the ridge move on and off) stays in the default tier; the s-grid's and
# the rvm's conditionals are checked exactly above, and their whole chains here in the slow
# tier (their chains are the costly part of this file)
@pytest.mark.slow  # all three chains (the p-grid one alone was among the default tier's costliest)
@pytest.mark.parametrize("prior", ["p-grid", "s-grid", "rvm"])
def test_agrees_with_nuts_where_nuts_certifies(prior, tmp_path):
    """A 3 x 3 table, 60 overlapping points, the default proper prior (a0 = b0 = c0 = d0
    = 2): NUTS certifies, so does the Gibbs sampler (through run_reference, which also
    caches and names it), and the posterior means of w, alpha and beta agree within the
    joint Monte Carlo error. For the p-grid a second Gibbs run with the ridge move off
    must agree with NUTS as well (the move changes the mixing, not the target)."""
    X, y = _data(60, GRID, 10)
    spec = GridRVM(GRID, prior)
    names = ["w", "alpha"] + ([] if prior == "rvm" else ["beta"])
    nuts = run_reference(spec, X, y, config=ReferenceConfig(num_warmup=500, num_samples=1000, seed=1))
    assert nuts.certified, nuts.failures
    cfg = ReferenceConfig(sampler=G.GRID_GIBBS, num_warmup=300, num_samples=2000, seed=3)
    gibbs = run_reference(spec, X, y, config=cfg, cache_dir=tmp_path)
    assert gibbs.certified, gibbs.failures
    assert gibbs.sampler == "grid-gibbs"
    assert run_reference(spec, X, y, config=cfg, cache_dir=tmp_path).from_cache
    stored = gibbs.idata.sample_stats
    assert int(stored["shrink_caps"].values.sum()) == 0
    assert (int(stored["evaluations"].values.sum()) > 0) == (prior == "s-grid")  # zeros when conjugate
    assert set(gibbs.idata.posterior.data_vars) == set(names)
    runs = [_posterior_draws(gibbs, names)]
    if prior == "p-grid":
        chains = G.GridGibbsChains(spec, X, y, num_warmup=300, seed=4, ridge_move=False)
        runs.append(chains.draw(2000)[0])
    nuts_draws = _posterior_draws(nuts, names)
    n_coords = sum(int(np.prod(nuts_draws[k].shape[2:])) for k in names)
    z = _z(n_coords * len(runs))
    for run in runs:
        _compare_means(nuts_draws, run, names, z)


# -- bad input ----------------------------------------------------------------------------
def test_refuses_another_model_and_a_wrong_design():
    from zoo.models.gig_logistic import GIGLogistic

    X, y = _data(10, (2, 2), 0)
    with pytest.raises(ValueError, match="grid-rvm only"):
        G.GridGibbsChains(GIGLogistic(), X, y)
    with pytest.raises(ValueError, match="rows x columns"):
        G.GridGibbsChains(GridRVM((2, 3)), X, y)
    with pytest.raises(ValueError, match="num_warmup"):
        G.GridGibbsChains(GridRVM((2, 2)), X, y, num_warmup=0)
    with pytest.raises(ValueError, match="w_method"):
        G.GridGibbsChains(GridRVM((2, 2)), X, y, w_method="qr")
    with pytest.raises(ValueError, match="s-grid"):
        G.alpha_gamma_params("s-grid", (2, 2), jnp.zeros(4), jnp.ones(2), 1.0, 1.0)
