"""EM for the PCVM at frozen precisions: the probit-augmentation EM of Figueiredo (2003) /
Albert & Chib (1993).

:func:`fit` finds the MAP of the PCVM at the spec's *frozen* precisions alpha, i.e. the
mode of p(w, b | y, alpha) with the truncated prior w >= 0 respected exactly. This is the
engine ``zoo compare`` measures against NUTS on the same posterior. The paper's own
algorithm, which re-estimates alpha and prunes columns (PCVM_EM of Chen, Tino & Yao), is
``pcvm_em.py``; it shares the E-step below (DERIVATIONS.md §1.2).

Latent-variable view. With f = Phi w + b and s_n = +-1 the labels, y_n = 1[H_n > 0] for
H_n = f_n + eps_n, eps_n ~ N(0, 1). Given f, H_n is a Gaussian truncated to the side of
its label, so

    E-step:  Hbar_n = f_n + s_n N(f_n) / Phi(s_n f_n)        (inverse Mills ratio)

and the expected complete-data log posterior is, up to a constant,

    Q(w, b) = -1/2 ||Hbar - Phi w - b||^2 - 1/2 sum_i alpha_i w_i^2 - 1/2 alpha_b b^2.

Raising Q raises the log posterior sum_n log Phi(s_n f_n) - 1/2 sum alpha w^2 - 1/2 alpha_b b^2
(the usual EM argument), which is why the frozen-alpha trace is monotone. The M-step
maximizes Q over the box w >= 0 (a bound-constrained quadratic programme).

Numerical safety: the ratio N(u)/Phi(u) is ``models.special.inverse_mills_ratio``, which
has no cancellation for u << 0 (a confidently misclassified point).

Timing: FitInfo.seconds is warm wall time. Every jitted loop is compiled ahead of time
through the bounded cache of ``compile_cache.py``, so a first call pays compilation once
and reports it as compile_seconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve
from jax.scipy.special import log_ndtr

from ..models.pcvm import PCVM
from ..models.special import inverse_mills_ratio
from ..models.checks import check_design, check_spec
from .posterior import FitInfo, PointPosterior
from .compile_cache import CompiledPrograms, run_compiled

__all__ = [
    "EMConfig",
    "fit",
    "inverse_mills_ratio",  # re-exported from models.special (the E-step's ratio)
    "latent_mean",
    "log_joint",
]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)

# loop status codes (shared with pcvm_em.py's top-down loop)
RUNNING, CONVERGED, ITERATION_CAP, NON_FINITE, ALL_PRUNED = 0, 1, 2, 3, 4


# ----------------------------------------------------------------------------------
# E-step and objective
# ----------------------------------------------------------------------------------
def latent_mean(f, s):
    """E[H | f, sign(H) = s] for H ~ N(f, 1): the E-step. f, s: shape (n,)."""
    return f + s * inverse_mills_ratio(s * f)


def _log_prior_constant(precisions):
    """Normalizers of the priors: b ~ N(0, 1/alpha_b), w_i ~ 2 N(0, 1/alpha_i) 1[w_i >= 0].

    precisions: (M + 1,) = [alpha_b, alpha_1..alpha_M]. The factor 2 (log 2 per weight)
    is the truncation normalizer 1 / P(N(0, 1/alpha) >= 0).
    """
    n_weights = precisions.shape[0] - 1
    return 0.5 * jnp.sum(jnp.log(precisions)) - 0.5 * precisions.shape[0] * _LOG_2PI + n_weights * _LOG_2


def _log_joint_signed(sf, theta, precisions):
    """sum_n log Phi(s_n f_n) - 1/2 sum_j prec_j theta_j^2 + prior normalizers.

    sf: (n,) = s * f; theta: (M + 1,) = [b, w]; precisions: (M + 1,). Valid for w >= 0.
    """
    return (
        jnp.sum(log_ndtr(sf))
        - 0.5 * jnp.sum(precisions * theta**2)
        + _log_prior_constant(precisions)
    )


def log_joint(A, s, theta, precisions):
    """Exact log joint log p(y, w, b | alpha) of the probit PCVM at theta = [b, w].

    A: (n, M + 1) = [1 | Phi]; s: (n,) labels as +-1; theta: (M + 1,) with w >= 0;
    precisions: (M + 1,) = [alpha_b, alpha]. Equals
    ``numpyro.infer.util.log_density(spec.model, (Phi,), {"y": y}, {"w": w, "b": b})[0]``,
    constants included (Gaussian normalizers and log 2 per truncated weight).
    """
    return _log_joint_signed(s * (A @ theta), theta, precisions)


# Ahead-of-time compiled loops (warm timings; see compile_cache.py)
_PROGRAMS = CompiledPrograms("em")


def _run_compiled(jitted, *args):
    """(output, warm seconds, compile seconds) of ``jitted(*args)``."""
    return run_compiled(_PROGRAMS, jitted, *args)


# ----------------------------------------------------------------------------------
# Frozen-alpha MAP: EM with an exact box-constrained M-step
# ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EMConfig:
    """Settings of :func:`fit` (MAP at frozen alpha).

    - max_iter: EM iteration cap (the trace buffer has max_iter + 1 entries).
    - tol: stop when ``max_j |theta_new_j - theta_j| < tol``. Probit EM converges linearly, so
      the distance to the MAP is about tol / (1 - rate); the default is tight because
      this engine is compared with NUTS at the 1e-3 level.
    - qp_max_iter: projected-Newton iterations per M-step (usually 1-2 are needed).
    - qp_tol: M-step KKT tolerance, relative to 1 + max|Phi^T Hbar|.
    - line_search_max: halvings of the projected Newton step.
    """

    max_iter: int = 20_000
    tol: float = 1e-9
    qp_max_iter: int = 50
    qp_tol: float = 1e-12
    line_search_max: int = 40

    def __post_init__(self):
        for name in ("max_iter", "qp_max_iter", "line_search_max"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"EMConfig.{name} must be a positive integer")
        for name in ("tol", "qp_tol"):
            v = float(getattr(self, name))
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"EMConfig.{name} must be positive and finite")


class _QPState(NamedTuple):
    theta: jax.Array  # (P,) current feasible point
    grad: jax.Array  # (P,) G theta - c
    chol: jax.Array  # (P, P) Cholesky factor of G restricted to chol_free (identity elsewhere)
    chol_free: jax.Array  # (P,) bool, the free set chol was computed for
    k: jax.Array  # iterations done
    done: jax.Array
    n_factor: jax.Array  # Cholesky factorizations done


def _masked_cholesky(G, free):
    """Cholesky of G_FF embedded in an identity: solving with it gives 0 off the free set."""
    both = free[:, None] & free[None, :]
    Gm = jnp.where(both, G, 0.0) + jnp.diag(jnp.where(free, 0.0, 1.0))
    return jnp.linalg.cholesky(Gm)


def box_qp(G, c, lower, theta, chol, chol_free, qp_tol, max_iter, ls_max):
    """min_theta 1/2 theta^T G theta - c^T theta  subject to theta >= lower.

    Projected Newton with an epsilon-active set (Bertsekas 1982): coordinates at their
    bound whose gradient pushes outward are fixed; a Newton step is taken on the rest,
    then projected, with Armijo backtracking along the projection arc. The factorization
    is cached and reused while the free set stays the same; once the set of zero weights
    has settled (late EM iterations) an M-step costs O(P^2) and its single Newton step
    lands on the exact face minimizer.

    G: (P, P) SPD; c, lower, theta: (P,) (lower = -inf for the bias); theta feasible.
    Returns the final _QPState (theta is feasible, q(theta) never increased).
    """
    diag_G = jnp.diag(G)
    scale = 1.0 + jnp.max(jnp.abs(c))
    sigma = 1e-4  # Armijo fraction

    def projected_gradient(th, g):
        return th - jnp.maximum(th - g, lower)

    g0 = G @ theta - c
    done0 = jnp.max(jnp.abs(projected_gradient(theta, g0))) <= qp_tol * scale
    st0 = _QPState(theta, g0, chol, chol_free, jnp.asarray(0), done0, jnp.asarray(0))

    def body(st: _QPState) -> _QPState:
        th, g = st.theta, st.grad
        pg_norm = jnp.max(jnp.abs(projected_gradient(th, g)))
        eps = jnp.minimum(1e-6, pg_norm)
        fixed = (th <= lower + eps) & (g > 0.0)
        free = ~fixed
        same = jnp.all(free == st.chol_free)
        L = lax.cond(same, lambda: st.chol, lambda: _masked_cholesky(G, free))
        d_newton = cho_solve((L, True), jnp.where(free, -g, 0.0))
        d = jnp.where(free, d_newton, -g / diag_G)
        # a failed factorization must not stop progress: fall back to diagonal scaling
        d = jnp.where(jnp.all(jnp.isfinite(d)), d, -g / diag_G)

        def trial(tau):
            step = jnp.maximum(th + tau * d, lower) - th
            dq = g @ step + 0.5 * step @ (G @ step)
            return step, dq

        def ls_cond(carry):
            j, tau, step, dq = carry
            return (j < ls_max) & ~(dq <= sigma * (g @ step))

        def ls_body(carry):
            j, tau, _, _ = carry
            tau = 0.5 * tau
            step, dq = trial(tau)
            return j + 1, tau, step, dq

        step1, dq1 = trial(1.0)
        _, _, step, dq = lax.while_loop(ls_cond, ls_body, (0, 1.0, step1, dq1))
        ok = (dq <= sigma * (g @ step)) & (dq <= 0.0) & jnp.all(jnp.isfinite(step))
        step = jnp.where(ok, step, 0.0)
        th_new = th + step
        g_new = g + G @ step
        pg_new = jnp.max(jnp.abs(projected_gradient(th_new, g_new)))
        k = st.k + 1
        done = (pg_new <= qp_tol * scale) | (k >= max_iter) | ~ok | jnp.all(step == 0.0)
        return _QPState(th_new, g_new, L, free, k, done, st.n_factor + (~same).astype(int))

    return lax.while_loop(lambda st: ~st.done, body, st0)


class EMState(NamedTuple):
    """State of the frozen-alpha EM loop."""

    theta: jax.Array  # (M + 1,) [b, w], w >= 0
    f: jax.Array  # (n,) A @ theta
    chol: jax.Array  # cached M-step factor
    chol_free: jax.Array
    it: jax.Array
    delta: jax.Array  # max |theta_t - theta_{t-1}|
    status: jax.Array
    trace: jax.Array  # (max_iter + 1,) log joint; trace[0] at the start
    qp_iterations: jax.Array
    factorizations: jax.Array


def _em_frozen_alpha(A, s, precisions, theta0, trace_buffer, tol, qp_tol, qp_max_iter, ls_max):
    """The jitted EM loop. A: (n, P) = [1 | Phi]; s: (n,) +-1; precisions, theta0: (P,);
    trace_buffer: (max_iter + 1,) NaNs (its length sets the iteration cap)."""
    P = A.shape[1]
    max_iter = trace_buffer.shape[0] - 1
    G = A.T @ A + jnp.diag(precisions)  # fixed Hessian of -Q: every M-step shares it
    lower = jnp.concatenate([jnp.array([-jnp.inf]), jnp.zeros(P - 1)])

    f0 = A @ theta0
    state = EMState(
        theta=theta0,
        f=f0,
        chol=jnp.eye(P),
        chol_free=jnp.zeros(P, dtype=bool),
        it=jnp.asarray(0),
        delta=jnp.asarray(jnp.inf),
        status=jnp.asarray(RUNNING),
        trace=trace_buffer.at[0].set(_log_joint_signed(s * f0, theta0, precisions)),
        qp_iterations=jnp.asarray(0),
        factorizations=jnp.asarray(0),
    )

    def step(st: EMState) -> EMState:
        c = A.T @ latent_mean(st.f, s)
        qp = box_qp(G, c, lower, st.theta, st.chol, st.chol_free, qp_tol, qp_max_iter, ls_max)
        theta_new = qp.theta
        f_new = A @ theta_new
        value = _log_joint_signed(s * f_new, theta_new, precisions)
        finite = jnp.isfinite(value) & jnp.all(jnp.isfinite(theta_new))
        delta = jnp.max(jnp.abs(theta_new - st.theta))
        it = st.it + 1
        status = jnp.where(
            ~finite,
            NON_FINITE,
            jnp.where(delta < tol, CONVERGED, jnp.where(it >= max_iter, ITERATION_CAP, RUNNING)),
        )
        # on a numerical failure keep the last finite iterate
        keep = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
        return EMState(
            theta=keep(theta_new, st.theta),
            f=keep(f_new, st.f),
            chol=qp.chol,
            chol_free=qp.chol_free,
            it=it,
            delta=delta,
            status=status,
            trace=st.trace.at[it].set(value),
            qp_iterations=st.qp_iterations + qp.k,
            factorizations=st.factorizations + qp.n_factor,
        )

    final = lax.while_loop(lambda st: st.status == RUNNING, step, state)
    # KKT residual of the *true* log posterior (not of the M-step): gradient
    # A^T (s * N/Phi) - prec * theta must vanish on free coordinates and be <= 0 at w = 0
    grad = A.T @ (s * inverse_mills_ratio(s * final.f)) - precisions * final.theta
    at_bound = (final.theta <= lower)
    kkt = jnp.max(jnp.where(at_bound, jnp.maximum(grad, 0.0), jnp.abs(grad)))
    return final, kkt


_em_frozen_alpha_jit = jax.jit(_em_frozen_alpha)


def _check_pcvm_probit(spec) -> None:
    check_spec(spec, PCVM, "EM")
    if spec.surrogate:
        raise ValueError(
            "the EM engine needs the probit PCVM (surrogate=False): its latent-variable "
            "E-step exists only for the probit link"
        )


def _initial_theta(init, n_basis: int) -> np.ndarray:
    if init is None:
        return np.zeros(n_basis + 1)
    try:
        b = float(np.asarray(init["b"], dtype=float))
        w = np.asarray(init["w"], dtype=float)
    except (KeyError, TypeError) as err:
        raise ValueError(f"init must be a dict with entries 'b' (scalar) and 'w' (vector): {err}") from None
    if w.shape != (n_basis,):
        raise ValueError(f"init['w'] has shape {w.shape}; the design matrix has {n_basis} columns")
    if not (np.all(np.isfinite(w)) and math.isfinite(b)):
        raise ValueError("init contains NaN or infinite values")
    if np.any(w < 0):
        raise ValueError("init['w'] must be non-negative (the PCVM prior truncates w to w >= 0)")
    return np.concatenate([[b], w])


def fit(spec: PCVM, Phi, y, *, config: EMConfig | None = None, init: dict | None = None) -> PointPosterior:
    """MAP of the probit PCVM at the spec's frozen alpha, by EM with exact constrained M-steps.

    Maximizes log p(w, b | y, alpha) subject to w >= 0. Each EM iteration solves the
    M-step - a convex quadratic in [b, w] with Hessian A^T A + diag(alpha_b, alpha), the
    same for all iterations - exactly under the bounds w >= 0 (projected Newton, cached
    Cholesky). Weights at zero are true constrained optima, not pruned negatives.

    Args:
        spec: ``PCVM(alpha, alpha_bias)`` with ``surrogate=False``.
        Phi: (n, M) design matrix (label-signed kernel columns for the PCVM).
        y: (n,) labels, 0/1 or -1/+1.
        config: :class:`EMConfig`.
        init: optional start ``{"b": float, "w": (M,) >= 0}``; default b = 0, w = 0.

    Returns:
        PointPosterior over the flat vector [b, w_1..w_M]. info.trace is the exact log
        joint (NumPyro's log density, constants included) at the start and after every
        iteration; info.extra["kkt_residual"] is the largest violation of the KKT
        conditions of the constrained MAP.
    """
    config = config or EMConfig()
    _check_pcvm_probit(spec)
    Phi, y01 = check_design(Phi, y)
    n, M = Phi.shape
    precisions = np.concatenate([[float(spec.alpha_bias)], np.asarray(spec.alpha_vector(M))])
    theta0 = _initial_theta(init, M)
    A = np.concatenate([np.ones((n, 1)), Phi], axis=1)
    s = 2.0 * y01 - 1.0
    trace_buffer = np.full(config.max_iter + 1, np.nan)
    args = (
        A, s, precisions, theta0, trace_buffer,
        np.float64(config.tol), np.float64(config.qp_tol),
        np.int64(config.qp_max_iter), np.int64(config.line_search_max),
    )
    (final, kkt), seconds, compile_seconds = _run_compiled(_em_frozen_alpha_jit, *args)

    status = int(final.status)
    n_iter = int(final.it)
    reason = {
        CONVERGED: f"max|delta theta| = {float(final.delta):.2e} < tol = {config.tol:g}",
        ITERATION_CAP: (
            f"iteration cap {config.max_iter} reached with max|delta theta| = "
            f"{float(final.delta):.2e} (tol {config.tol:g})"
        ),
        NON_FINITE: f"non-finite log joint at iteration {n_iter}; returning the last finite iterate",
    }[status]
    theta = np.asarray(final.theta)
    info = FitInfo(
        engine="em",
        converged=status == CONVERGED,
        n_iter=n_iter,
        reason=reason,
        seconds=seconds,
        compile_seconds=compile_seconds,
        objective="log joint",
        trace=np.asarray(final.trace)[: n_iter + 1],
        extra={
            "kkt_residual": float(kkt),
            "n_positive_weights": int(np.sum(theta[1:] > 0)),
            "qp_iterations": int(final.qp_iterations),
            "cholesky_factorizations": int(final.factorizations),
        },
    )
    return PointPosterior(spec=spec, sites=spec.sites(M), value=theta, info=info)
