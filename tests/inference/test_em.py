"""Tests of the frozen-alpha PCVM EM engine (zoo.inference.em).

It is checked against quantities computed from the NumPyro model alone (log density,
its gradient by jax.grad, an L-BFGS-B optimum of it), never against the EM derivation
itself. The top-down PCVM_EM (pcvm_em.py) has its own file, test_pcvm_em.py.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from numpyro.infer.util import log_density
from scipy import stats

import zoo  # noqa: F401  (float64)
from zoo.inference import em
from zoo.models.basis import pcvm_basis
from zoo.models.pcvm import PCVM

# EM stopping rule used for the accuracy tests: tight enough that the iterate is
# within round-off of the fixed point (observed KKT residual ~2e-11 on this problem).
TIGHT = em.EMConfig(tol=1e-12)


# --------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def small_problem():
    """40 points, 8 label-signed RBF columns of which two have their sign flipped.

    The flipped columns point away from their class, so the unconstrained optimum
    would give them negative weights: the constrained MAP has them exactly at 0, and
    the KKT test below has both free and bound coordinates to check.
    """
    rng = np.random.default_rng(1)
    n = 40
    y = (np.arange(n) % 2).astype(float)
    X = rng.normal(size=(n, 2)) + 1.2 * (2.0 * y[:, None] - 1.0)
    Phi = pcvm_basis(X, y, 1.0).transform(X)[:, :8]
    Phi[:, [1, 4]] *= -1.0
    spec = PCVM(alpha=np.linspace(0.5, 3.0, 8), alpha_bias=0.5)
    return spec, Phi, y


@pytest.fixture(scope="module")
def small_fit(small_problem):
    spec, Phi, y = small_problem
    return em.fit(spec, Phi, y, config=TIGHT)


def numpyro_log_density(spec, Phi, y, theta):
    return log_density(spec.model, (Phi,), {"y": y}, {"b": theta[0], "w": theta[1:]})[0]


def jitted_log_density(spec, Phi, y):
    """theta -> NumPyro log density, compiled once (eager NumPyro is slow to dispatch)."""
    return jax.jit(lambda theta: numpyro_log_density(spec, Phi, y, theta))


# --------------------------------------------------------------------------- E-step
def test_inverse_mills_ratio_is_stable_and_exact():
    """On a coarse grid over [-40, 40], densely over [-60, -10] (where the JAX path
    switches to erfcx's asymptotic series at u = -20 sqrt 2) and very densely over
    [-38, -37.2], the band where jax.scipy.special.erfcx returns 0 (models/special.py)."""
    u = np.concatenate([np.linspace(-40.0, 40.0, 161), np.linspace(-60.0, -10.0, 5001),
                        np.linspace(-38.0, -37.2, 801)])
    expected = np.exp(stats.norm.logpdf(u) - stats.norm.logcdf(u))
    got = np.asarray(em.inverse_mills_ratio(jnp.asarray(u)))
    assert np.all(np.isfinite(got))
    # both sides are float64 evaluations of the same function: round-off only
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-300)


# --------------------------------------------------------------------------- objective
def test_log_joint_equals_numpyro_log_density(small_problem):
    """Exact equality (constants included), at interior points and with w_i = 0
    exactly, which is on the boundary of TruncatedNormal's support."""
    spec, Phi, y = small_problem
    A = np.concatenate([np.ones((Phi.shape[0], 1)), Phi], axis=1)
    s = 2.0 * y - 1.0
    prec = np.concatenate([[spec.alpha_bias], spec.alpha_vector(Phi.shape[1])])
    density = jitted_log_density(spec, Phi, y)
    rng = np.random.default_rng(3)
    for zeros in ([], [0, 3], list(range(8))):
        theta = np.concatenate([[rng.normal()], rng.exponential(0.7, 8)])
        theta[1 + np.asarray(zeros, dtype=int)] = 0.0
        ref = float(density(theta))
        assert np.isfinite(ref), "NumPyro must give a finite density at w = 0"
        ours = float(em.log_joint(A, s, theta, prec))
        # same float64 sums in a different order: round-off ~1e-13 on values ~1e1
        assert ours == pytest.approx(ref, rel=1e-12, abs=1e-10)


def test_trace_is_the_numpyro_log_density_at_start_and_end(small_problem, small_fit):
    spec, Phi, y = small_problem
    trace = small_fit.info.trace
    assert small_fit.info.objective == "log joint"
    assert trace.shape == (small_fit.info.n_iter + 1,)
    density = jitted_log_density(spec, Phi, y)
    start = float(density(np.zeros(9)))
    end = float(density(small_fit.value))
    assert trace[0] == pytest.approx(start, rel=1e-12)
    assert trace[-1] == pytest.approx(end, rel=1e-12)


def test_trace_is_monotone(small_problem):
    """EM never decreases the log posterior; allow float round-off only (1e-9 relative,
    far above the ~1e-15 relative error of summing 40 float64 terms)."""
    spec, Phi, y = small_problem
    init = {"b": -1.0, "w": np.random.default_rng(5).exponential(2.0, 8)}
    post = em.fit(spec, Phi, y, config=TIGHT, init=init)
    trace = post.info.trace
    steps = np.diff(trace)
    assert np.all(steps >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] - trace[0] > 1.0  # the start is far from the MAP: the test has content
    assert post.info.converged


# --------------------------------------------------------------------------- optimum
def test_kkt_conditions_of_the_constrained_map(small_problem, small_fit):
    """Gradient of NumPyro's log density (jax.grad, independent of the EM algebra):
    ~0 on free coordinates (b and w_i > 0), <= 0 where w_i = 0."""
    spec, Phi, y = small_problem
    theta = small_fit.value
    grad = np.asarray(jax.jit(jax.grad(jitted_log_density(spec, Phi, y)))(jnp.asarray(theta)))
    at_zero = np.concatenate([[False], theta[1:] == 0.0])
    assert at_zero.sum() == 2 and (~at_zero).sum() == 7  # the flipped columns, and the rest
    # EM stopped at max|dtheta| < 1e-12; the gradient residual there is ~1e-11. A wrong
    # M-step (e.g. clipping an unconstrained solution) leaves residuals of order 0.1.
    assert np.max(np.abs(grad[~at_zero])) < 1e-7
    assert np.all(grad[at_zero] < -0.1)  # strictly active bounds, not degenerate ones
    assert small_fit.info.extra["kkt_residual"] < 1e-7
    assert small_fit.info.converged


def test_map_agrees_with_lbfgsb_on_numpyro_density(small_problem, small_fit):
    spec, Phi, y = small_problem
    value_and_grad = jax.jit(jax.value_and_grad(lambda t: -numpyro_log_density(spec, Phi, y, t)))
    res = scipy.optimize.minimize(
        lambda t: tuple(np.asarray(v) for v in value_and_grad(t)),
        np.concatenate([[0.0], np.ones(8)]),
        jac=True,
        method="L-BFGS-B",
        bounds=[(None, None)] + [(0.0, None)] * 8,
        options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000),
    )
    # a strictly concave problem; both optimizers reach ~1e-10 of the unique MAP
    np.testing.assert_allclose(small_fit.value, res.x, atol=1e-6)


# --------------------------------------------------------------------------- top-down
def _bad_inputs(Phi, y):
    nan_Phi = Phi.copy()
    nan_Phi[2, 1] = np.nan
    three = y.copy()
    three[0] = 2.0
    return [
        (nan_Phi, y, "NaN"),
        (Phi, three, "two classes"),
        (Phi, np.ones_like(y), "one class"),
        (Phi, y[:-1], "shape mismatch"),
    ]


def test_fit_rejects_bad_input(small_problem):
    spec, Phi, y = small_problem
    for bad_Phi, bad_y, message in _bad_inputs(Phi, y):
        with pytest.raises(ValueError, match=message):
            em.fit(spec, bad_Phi, bad_y)
    with pytest.raises(ValueError, match="probit"):
        em.fit(PCVM(alpha=1.0, surrogate=True), Phi, y)
    with pytest.raises(ValueError, match="alpha has 3 entries"):
        em.fit(PCVM(alpha=np.ones(3)), Phi, y)
    with pytest.raises(ValueError, match="non-negative"):
        em.fit(spec, Phi, y, init={"b": 0.0, "w": -np.ones(8)})
    with pytest.raises(ValueError, match="tol"):
        em.EMConfig(tol=0.0)


def test_iteration_cap_is_reported(small_problem):
    spec, Phi, y = small_problem
    post = em.fit(spec, Phi, y, config=em.EMConfig(max_iter=3))
    assert not post.info.converged
    assert "iteration cap 3" in post.info.reason
    assert post.info.n_iter == 3 and post.info.trace.shape == (4,)
