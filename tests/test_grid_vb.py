"""gridRVM's variational Bayes: a monotone ELBO, each block update against a brute-force
maximization of the ELBO in that block, the two exact forms of q(w), the reduction of
both grids to the RVM at M2 = 1, the predictive, and bad input."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

from zoo.inference import grid_vb
from zoo.inference.jaakkola_jordan import jj_lambda
from zoo.models.gig_logistic import GIGLogistic
from zoo.models.grid_rvm import GridRVM

PRIORS = ("p-grid", "s-grid", "rvm")


def _problem(shape=(3, 4), n=30, seed=0):
    """A table problem whose signal sits in row 0 and column 1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, shape[0] * shape[1]))
    w = np.zeros(shape)
    w[0] = 2.0
    w[:, min(1, shape[1] - 1)] += 1.0
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ w.ravel()))).astype(float)
    return X, y


def _spec(prior, paper=False, shape=(3, 4)):
    return GridRVM.paper_prior(shape, prior) if paper else GridRVM(shape, prior)


@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("paper", [False, True], ids=["proper", "paper-prior"])
def test_the_elbo_never_falls_in_any_block_update(prior, paper):
    X, y = _problem()
    post = grid_vb.fit(_spec(prior, paper), X, y, config=grid_vb.VBConfig(max_iter=400))
    extra = post.info.extra
    assert extra["elbo_by_update"].shape[1] == len(grid_vb.UPDATES)
    # relative to the ELBO's size; round-off is ~1e-13 here
    assert extra["largest_relative_decrease"] < 1e-10
    assert np.all(np.diff(post.info.trace) >= -1e-10 * np.abs(post.info.trace[1:]))


# the p-grid (the paper's default prior) in the fast tier, the other two priors' compilations
# of both forms in the slow tier
@pytest.mark.parametrize("prior", [p if p == "p-grid" else pytest.param(p, marks=pytest.mark.slow) for p in PRIORS])
def test_primal_and_woodbury_forms_give_the_same_q(prior):
    X, y = _problem(n=8)  # M = 12 > N = 8: the paper's case for Woodbury
    spec = _spec(prior)
    runs = {b: grid_vb.run(spec, X, y, config=grid_vb.VBConfig(branch=b)) for b in ("primal", "woodbury")}
    assert grid_vb.run(spec, X, y).branch == "woodbury"
    assert runs["primal"].n_iter == runs["woodbury"].n_iter
    np.testing.assert_allclose(runs["primal"].mu, runs["woodbury"].mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(runs["primal"].cov, runs["woodbury"].cov, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(runs["primal"].trace, runs["woodbury"].trace, rtol=1e-10)


# --- each block update is the maximizer of the ELBO in its block ------------------------
def _state(prior, sweeps=3, shape=(2, 3), n=14):
    X, y = _problem(shape, n, seed=3)
    spec = _spec(prior, shape=shape)
    res = grid_vb.run(spec, X, y, config=grid_vb.VBConfig(max_iter=sweeps, tol=1e-15, mu_tol=1e-15))
    q = grid_vb._Q(**{k: jnp.asarray(v) for k, v in res.q.items()})
    fam = grid_vb._Family(prior, shape, False, False)
    hyper = grid_vb._hyper(spec, grid_vb.VBConfig())
    return jnp.asarray(X), jnp.asarray(y - 0.5), q, fam, hyper


def _w_from(theta, X, m):
    """q(w) pieces from (mu, lower-triangular L with log-diagonal)."""
    mu = theta[:m]
    L = jnp.zeros((m, m)).at[jnp.tril_indices(m)].set(theta[m:])
    L = L.at[jnp.diag_indices(m)].set(jnp.exp(jnp.diag(L)))
    sigma = L @ L.T
    return dict(mu=mu, sigma_diag=jnp.diag(sigma), f_mean=X @ mu, f_var=jnp.sum((X @ sigma) * X, axis=1),
                logdet_sigma=2.0 * jnp.sum(jnp.log(jnp.diag(L))))


def _blocks(X, r, q, fam, hyper):
    """block name -> (its exact update, unpack(theta) -> fields, a starting theta)."""
    m = q.mu.shape[0]
    L0 = np.linalg.cholesky(np.eye(m) * 0.5)
    theta_w = np.concatenate([np.zeros(m), np.where(np.eye(m, dtype=bool), np.log(np.diag(L0)), L0)[np.tril_indices(m)]])
    blocks = {
        "w": (lambda q: grid_vb._update_w(q, X, r, fam), lambda t: _w_from(t, X, m), theta_w),
        "alpha": (lambda q: grid_vb._update_alpha(q, hyper, fam),
                  lambda t: dict(a=jnp.exp(t[:q.a.size]), b=jnp.exp(t[q.a.size:])), np.zeros(2 * q.a.size)),
        "xi": (grid_vb._update_xi, lambda t: dict(xi=jnp.exp(t)), np.zeros(q.xi.size)),
    }
    if fam.prior != "rvm":
        blocks["beta"] = (lambda q: grid_vb._update_beta(q, hyper, fam),
                          lambda t: dict(c=jnp.exp(t[:q.c.size]), d=jnp.exp(t[q.c.size:])), np.zeros(2 * q.c.size))
    if fam.prior == "s-grid":
        blocks["pi"] = (lambda q: grid_vb._update_pi(q, fam),
                        lambda t: dict(pi=jax.nn.sigmoid(t).reshape(fam.shape)), np.zeros(q.pi.size))
    return blocks


@pytest.mark.parametrize("prior", PRIORS)
def test_each_block_update_maximizes_the_elbo_in_its_block(prior):
    """From a generic starting point, L-BFGS on the ELBO over one block's parameters (the
    others held) finds no value above the closed-form update's, and reaches it."""
    X, r, q, fam, hyper = _state(prior)
    for name, (update, unpack, theta0) in _blocks(X, r, q, fam, hyper).items():
        best_closed = float(grid_vb._elbo(update(q), r, hyper, fam))

        def negative(theta):
            return -grid_vb._elbo(q._replace(**unpack(theta)), r, hyper, fam)

        value_and_grad = jax.jit(jax.value_and_grad(negative))
        res = minimize(lambda t: tuple(np.asarray(v, float) for v in value_and_grad(jnp.asarray(t))), theta0,
                       jac=True, method="L-BFGS-B", options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-10})
        brute = -float(res.fun)
        scale = 1.0 + abs(best_closed)
        assert brute <= best_closed + 1e-9 * scale, f"{prior} {name}: brute force {brute} beats the update {best_closed}"
        assert brute >= best_closed - 1e-6 * scale, f"{prior} {name}: brute force {brute} fell short of {best_closed}"


def test_the_s_grid_weights_are_the_log_sum_bounds_optimum_and_make_it_tight():
    """pi = sigmoid(E log alpha - E log beta); at point masses the bound (7) is tight:
    pi log a + (1 - pi) log b + H(pi) = log(a + b) at pi = a / (a + b)."""
    a, b = 0.7, 2.9
    pi = a / (a + b)
    bound = pi * np.log(a) + (1 - pi) * np.log(b) - pi * np.log(pi) - (1 - pi) * np.log(1 - pi)
    assert bound == pytest.approx(np.log(a + b), rel=1e-14)
    for other in (0.1, 0.5, 0.9):  # any other weight gives less
        value = other * np.log(a) + (1 - other) * np.log(b) - other * np.log(other) - (1 - other) * np.log(1 - other)
        assert value < bound


# --- the RVM as a special case ----------------------------------------------------------
def test_with_one_column_the_grids_give_the_rvms_answer():
    """M2 = 1 with the column precision pinned (p-grid: beta ~ Gamma(1e12, 1e12), i.e. 1;
    s-grid: beta ~ Gamma(2, 1e12), i.e. 0) is the RVM: the same q(w) to 1e-6, all three
    run to a tight convergence."""
    X, y = _problem((6, 1), n=40, seed=1)
    tight = grid_vb.VBConfig(max_iter=20000, tol=1e-15, mu_tol=1e-13)
    rvm = grid_vb.run(GridRVM((6, 1), "rvm"), X, y, config=tight)
    pinned_one = grid_vb.run(GridRVM((6, 1), "p-grid", c0=1e12, d0=1e12), X, y, config=tight)
    pinned_zero = grid_vb.run(GridRVM((6, 1), "s-grid", c0=2.0, d0=1e12), X, y, config=tight)
    for other in (pinned_one, pinned_zero):
        np.testing.assert_allclose(other.mu, rvm.mu, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(np.diag(other.cov), np.diag(rvm.cov), rtol=1e-6)


# --- predictive, relevance, end-to-end ---------------------------------------------------
def test_the_predictive_is_mackays_and_its_error_against_the_integral_is_reported():
    X, y = _problem()
    spec = _spec("p-grid")
    post = grid_vb.fit(spec, X, y)
    mean_f = X @ post.mean_vec
    var_f = np.sum((X @ post.cov) * X, axis=1)
    np.testing.assert_allclose(post.predict_proba(X), 1 / (1 + np.exp(-mean_f / np.sqrt(1 + np.pi * var_f / 8))),
                               rtol=1e-10)
    exact = spec.gaussian_prob_exact(mean_f, var_f)
    assert post.info.extra["mackay_error_train"] == pytest.approx(np.max(np.abs(post.predict_proba(X) - exact)),
                                                                  rel=1e-6)
    assert post.info.extra["mackay_error_train"] > 0


def test_relevance_finds_the_signal_row_and_column_and_pruning_counts_them():
    """Under the paper's vague prior, with few data (N = 60 for 12 weights), the p-grid
    keeps exactly the signal's row 0 and column 1 (well-determinedness >= 1/2) and leaves
    the other six weights to the prior; the report counts what is left."""
    X, y = _problem((3, 4), n=60, seed=2)
    post = grid_vb.fit(_spec("p-grid", paper=True), X, y, config=grid_vb.VBConfig(max_iter=3000))
    alpha, beta = post.info.extra["alpha_mean"], post.info.extra["beta_mean"]
    assert np.argmin(alpha) == 0 and np.argmin(beta) == 1
    pruning = post.info.extra["pruning"]
    gamma = post.info.extra["well_determinedness"]
    np.testing.assert_allclose(gamma, 1 - post.info.extra["precision_mean"].ravel() * np.diag(post.cov), rtol=1e-12)
    signal = np.zeros((3, 4), bool)
    signal[0] = signal[:, 1] = True
    np.testing.assert_array_equal(post.info.extra["relevant"].reshape(3, 4), signal)
    assert (pruning["relevant_weights"], pruning["relevant_rows"], pruning["relevant_columns"]) == (6, 3, 4)


def test_the_prior_option_fits_a_variant_with_the_same_constants():
    X, y = _problem()
    spec = _spec("p-grid")
    as_option = grid_vb.fit(spec, X, y, prior="rvm")
    direct = grid_vb.fit(spec.with_params(prior="rvm"), X, y)
    np.testing.assert_allclose(as_option.mean_vec, direct.mean_vec, rtol=1e-12)
    assert as_option.info.extra["prior"] == "rvm"


def test_elbo_function_matches_the_loops_last_value():
    X, y = _problem()
    spec = _spec("s-grid")
    res = grid_vb.run(spec, X, y, config=grid_vb.VBConfig(max_iter=50, tol=1e-15, mu_tol=1e-15))
    assert grid_vb.elbo(spec, X, y, res.q) == pytest.approx(res.trace[-1], rel=1e-12)


def test_the_jj_lambda_limit():
    assert float(jj_lambda(jnp.asarray(0.0))) == 0.125
    assert float(jj_lambda(jnp.asarray(1e-4))) == pytest.approx(0.125, rel=1e-8)


# --- bad input -----------------------------------------------------------------------------
def test_bad_input_is_named():
    X, y = _problem()
    spec = _spec("p-grid")
    with pytest.raises(ValueError, match="rows x columns"):
        grid_vb.fit(spec, X[:, :11], y)
    with pytest.raises(ValueError, match="two classes|one class"):
        grid_vb.fit(spec, X, np.zeros_like(y))
    with pytest.raises(ValueError, match="NaN"):
        grid_vb.fit(spec, np.where(np.arange(X.size).reshape(X.shape) == 5, np.nan, X), y)
    with pytest.raises(TypeError, match="GridRVM"):
        grid_vb.fit(GIGLogistic(), X, y)
    with pytest.raises(ValueError, match="branch"):
        grid_vb.VBConfig(branch="dual")
    with pytest.raises(ValueError, match="max_iter"):
        grid_vb.VBConfig(max_iter=0)
    with pytest.raises(ValueError, match="table shape"):
        grid_vb.fit_end_to_end(X, y)
