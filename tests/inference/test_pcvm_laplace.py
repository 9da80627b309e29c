"""EPCVM Laplace engine (inference/pcvm_laplace.py) at frozen alpha.

The engine's objective, gradient and covariance are checked against NumPyro's log
density of the surrogate model (``spec.with_params(surrogate=True).model``), with JAX
autodiff of that density as the independent reference; on a one-weight problem the
mode is checked against a brute-force grid search.

All fast tests use N = 40 or N = 20 and at most 16 weights, so they share the two
compiled Newton programs (N = 40 and N = 20, bucket 16).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy.special import ndtr

import zoo  # noqa: F401  (float64)
from problems import ripley_subset as ripley
from zoo.inference import pcvm_laplace
from zoo.inference.posterior import GaussianPosterior
from zoo.models.basis import pcvm_basis
from zoo.models.pcvm import PCVM


@pytest.fixture(scope="module")
def problem():
    """40 Ripley points, 5 label-signed RBF columns, one alpha per column."""
    X, y = ripley(40, seed=1)
    cols = np.random.default_rng(1).choice(40, 5, replace=False)
    Phi = pcvm_basis(X, y, 0.7).subset(cols).transform(X)
    spec = PCVM(alpha=np.array([0.3, 1.0, 2.0, 0.5, 4.0]), alpha_bias=0.2)
    return Phi, y, spec


def numpyro_log_density(spec: PCVM, Phi, y):
    """theta = [b, w] -> log density of the spec's surrogate NumPyro model."""
    model = spec.with_params(surrogate=True).model
    Phi = jnp.asarray(Phi)
    y = jnp.asarray(y)

    def f(theta):
        return log_density(model, (Phi, y), {}, {"b": theta[0], "w": theta[1:]})[0]

    return f


def test_objective_equals_numpyro_log_density_up_to_a_constant(problem):
    Phi, y, spec = problem
    ld = numpyro_log_density(spec, Phi, y)
    rng = np.random.default_rng(0)
    thetas = rng.normal(scale=1.5, size=(6, 6))
    ours = np.array([pcvm_laplace.surrogate_log_joint(spec, Phi, y, th) for th in thetas])
    ref = np.asarray(jax.jit(jax.vmap(ld))(jnp.asarray(thetas)))
    # the constant (Gaussian normalizers) cancels in differences; values are O(10-100),
    # so 1e-10 absolute is float64 round-off, not a tolerance on the model
    np.testing.assert_allclose(ours - ours[0], ref - ref[0], atol=1e-10)
    assert np.ptp(ref) > 1.0  # the points really differ


def test_gradient_of_numpyro_log_density_vanishes_at_the_mode(problem):
    Phi, y, spec = problem
    post = pcvm_laplace.fit(spec, Phi, y)
    assert post.info.converged, post.info.reason
    grad = np.asarray(jax.jit(jax.grad(numpyro_log_density(spec, Phi, y)))(jnp.asarray(post.mean_vec)))
    # Newton stops at max|grad Q| <= grad_tol = 1e-6; the NumPyro gradient is the same
    # function (Q + const), evaluated independently by autodiff
    assert np.max(np.abs(grad)) <= 1.1e-6
    # the last trace entry is the objective at the returned mode
    assert post.info.trace[-1] == pytest.approx(pcvm_laplace.surrogate_log_joint(spec, Phi, y, post.mean_vec), abs=1e-10)


def test_covariance_is_the_inverse_negative_hessian_of_numpyro_log_density(problem):
    Phi, y, spec = problem
    post = pcvm_laplace.fit(spec, Phi, y)
    hess = np.asarray(jax.jit(jax.hessian(numpyro_log_density(spec, Phi, y)))(jnp.asarray(post.mean_vec)))
    expected = np.linalg.inv(-hess)
    # both sides are exact linear algebra on the same point: round-off only
    np.testing.assert_allclose(post.cov, expected, rtol=1e-9, atol=1e-12)
    # the factor is lower triangular (GaussianPosterior.log_density_flat relies on it)
    assert np.allclose(post.chol, np.tril(post.chol))


def test_one_weight_mode_matches_brute_force_grid():
    X, y = ripley(20, seed=3)
    Phi = pcvm_basis(X, y, 0.7).subset([int(np.flatnonzero(y == 1)[0])]).transform(X)
    spec = PCVM(alpha=0.5, alpha_bias=0.3)
    post = pcvm_laplace.fit(spec, Phi, y)
    ld = jax.jit(jax.vmap(numpyro_log_density(spec, Phi, y)))

    def grid_argmax(centre, half_width, n=401):
        b = np.linspace(centre[0] - half_width, centre[0] + half_width, n)
        w = np.linspace(centre[1] - half_width, centre[1] + half_width, n)
        B, W = np.meshgrid(b, w, indexing="ij")
        vals = np.asarray(ld(jnp.asarray(np.stack([B.ravel(), W.ravel()], 1))))
        i = int(np.argmax(vals))
        return np.array([B.ravel()[i], W.ravel()[i]]), b[1] - b[0]

    coarse, h = grid_argmax(np.zeros(2), 6.0)
    fine, h = grid_argmax(coarse, 3 * h)
    # the grid maximizer is within one grid step (h = 2.2e-4) of the true mode
    assert np.all(np.abs(post.mean_vec - fine) <= h)
    assert post.mean_vec[1] > 0  # the data of this column's class push its weight up


def test_probit_spec_is_kept_and_predicts_with_the_probit_link(problem):
    Phi, y, spec = problem
    post = pcvm_laplace.fit(spec, Phi, y)
    assert isinstance(post, GaussianPosterior)
    assert post.spec is spec and not post.spec.surrogate
    assert [s.support for s in post.sites] == ["real", "nonnegative"]
    surrogate = post.info.extra["surrogate_spec"]
    assert surrogate.surrogate and np.allclose(surrogate.alpha, spec.alpha)
    A = np.c_[np.ones(len(y)), Phi]
    mean_f, var_f = A @ post.mean_vec, np.einsum("ni,ij,nj->n", A, post.cov, A)
    np.testing.assert_allclose(post.predict_proba(Phi), ndtr(mean_f / np.sqrt(1 + var_f)), rtol=1e-12)
    # the same fit on the surrogate spec: same Gaussian, MacKay's logistic predictive
    post_s = pcvm_laplace.fit(surrogate, Phi, y)
    np.testing.assert_allclose(post_s.mean_vec, post.mean_vec, rtol=0, atol=0)
    lam = spec.surrogate_slope
    p_s = 1 / (1 + np.exp(-lam * mean_f / np.sqrt(1 + math.pi * lam**2 * var_f / 8)))
    np.testing.assert_allclose(post_s.predict_proba(Phi), p_s, rtol=1e-12)


def test_trace_is_non_decreasing_and_timing_is_reported(problem):
    Phi, y, spec = problem
    pcvm_laplace.fit(spec, Phi, y)  # compiles (if no earlier test did)
    post = pcvm_laplace.fit(spec, Phi, y)
    trace = post.info.trace
    assert len(trace) == post.info.n_iter + 1 and post.info.n_iter >= 2
    assert np.all(np.diff(trace) >= 0)  # every accepted damped step does not decrease Q
    assert post.info.seconds > 0 and post.info.compile_seconds == 0.0  # warm call
    assert post.info.extra["jitter"] == 0.0


def test_iteration_cap_is_reported_not_hidden(problem):
    Phi, y, spec = problem
    post = pcvm_laplace.fit(spec, Phi, y, config=pcvm_laplace.LaplaceConfig(max_iter=1))
    assert not post.info.converged
    assert "iteration cap" in post.info.reason
    assert post.info.n_iter == 1


def test_bad_inputs_fail_at_the_door(problem):
    Phi, y, spec = problem
    with pytest.raises(ValueError, match="alpha has 3 entries"):
        pcvm_laplace.fit(PCVM(alpha=np.ones(3)), Phi, y)
    with pytest.raises(ValueError, match="one class"):
        pcvm_laplace.fit(spec, Phi, np.ones(len(y)))
    bad = Phi.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pcvm_laplace.fit(spec, bad, y)
    with pytest.raises(TypeError):
        pcvm_laplace.fit("pcvm", Phi, y)
