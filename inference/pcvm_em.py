"""PCVM_EM as the 2009 paper of Chen, Tino & Yao runs it (the authors' pcvm_train.m):
every basis column starts in the model, the precisions alpha are re-estimated from the
weights at each iteration, and weights that fall below a threshold are pruned for good.
It selects a model (active columns and alphas) end to end.

It shares the probit E-step of ``em.py`` (Hbar = f + s N(f)/Phi(s f)); the M-step here is
the authors' closed-form ridge update with their alpha rule (optionally the same update
constrained to w >= 0, by the frozen-alpha EM's box QP). The factor-2 difference between the authors' alpha update and
the posterior-mean update of the Gamma hyper-prior is explained in DERIVATIONS.md §1.2;
:class:`TopDownEMConfig` offers both.

Why the paper's loop rarely stops (DERIVATIONS.md §1.2.1, measured by
``benchmarks/pcvm_em_stopping.py``): on nearly separable training data the EM's linear
rate tends to 1 (the probit likelihood's curvature at well-classified points vanishes,
the complete-data curvature does not), so max|w - w_old| shrinks by a factor
0.994-0.99999 per iteration towards a fixed point whose weights lie in the tens to
hundreds; the 1e-3 rule then needs thousands of iterations (or more), and the
500-iteration cap stops far from the fixed point. And the unconstrained ridge M-step can
send weights far below 0, where the paper's pruning sets them to 0 in one jump that
breaks the ascent (the monitor fell by up to 1.5e9 on diabetis), after which the weights
run away for a while.
``newton=True`` (``TopDownEMConfig.fixed_point()``) adds Newton steps on the monitored
objective once the active set holds and stops on its scaled gradient: the paper's loop,
run to its own fixed point in tens of iterations instead of thousands. ``mstep=
"nonnegative"`` maximizes the M-step's objective over w >= 0 exactly, so that a prune
never moves f by more than the threshold; it has the same fixed points but takes another
path to them, and ends at other ones. The default stays the authors' loop
(``TopDownEMConfig()`` == ``TopDownEMConfig.paper()``): the fixed points it creeps towards
have a *higher* test error than its capped iterate on thyroid and twonorm (lower on
diabetis and waveform), so a converging default would change the published method's
results, not only its stop (the table is in DERIVATIONS.md §1.2.1).

The loop runs on the host in jitted chunks; when the active set has shrunk past a power
of two the host compacts it to a narrower padded width, so late iterations do not pay for
the columns already pruned.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve
from jax.scipy.special import log_ndtr

from ..models.pcvm import PCVM
from ..models.checks import check_design
from ..models.special import inverse_mills_ratio
from .compile_cache import CompiledPrograms, run_compiled
from .contracts import EndToEndFit
from .em import ALL_PRUNED, CONVERGED, ITERATION_CAP, NON_FINITE, RUNNING, box_qp, latent_mean
from .posterior import FitInfo, PointPosterior

__all__ = ["TopDownEMConfig", "fit_top_down", "fit_end_to_end"]

_PROGRAMS = CompiledPrograms("pcvm_em")


# ----------------------------------------------------------------------------------
# Top-down PCVM_EM (Chen, Tino & Yao 2009, as in the authors' pcvm_train.m)
# ----------------------------------------------------------------------------------
_ALPHA_UPDATES = {"code": 0.5, "derived": 1.0}
_MSTEPS = ("ridge", "nonnegative")


@dataclass(frozen=True)
class TopDownEMConfig:
    """Settings of :func:`fit_top_down`; the defaults are the authors' loop
    (``paper()``), ``fixed_point()`` is the loop that stops (DERIVATIONS.md §1.2.1).

    - max_iter: 500 (EM iterations; a Newton step rides on an iteration, it is not one).
    - tol: the paper's stop, max|w - w_old| < 1e-3 (checked from iteration 2 on); used when
      ``newton`` is False.
    - prune_threshold: w_i <= 1e-3 is set to 0 and leaves the model for good.

    - newton: after every EM iteration that left the active set (and the bias's place in
      the monitor) as it was for the second time in a row, try one damped Newton step
      on the monitored objective in (log w, b), kept only if it raises the objective
      and keeps every weight above the threshold. Stop when the active set held, the
      Hessian is negative definite (no damping needed) and the scaled gradient
      ``max_i |w_i dF/dw_i|, |b dF/db|`` is below ``grad_tol``: a strict local maximum of the
      monitor on the active set, i.e. a fixed point of the paper's iteration.
      False: the paper's iteration and stop (``tol``).
    - grad_tol: 1e-6, the scaled-gradient stop of ``newton`` (F changes by at most ~1e-6
      per unit of relative change of a weight).
    - mstep: "ridge" (the paper): w = M (I + M K^T K M)^-1 M K^T (Hbar - b), then weights
      <= threshold, negative ones included, are set to 0. "nonnegative": the same
      objective maximized over w >= 0 (a box QP in u = M^-1 w, projected Newton), so a
      weight reaches 0 by the constraint and no prune moves f by more than the
      threshold; its fixed points with every kept weight above the threshold are the
      ridge M-step's.

    - alpha_update: how the precisions are re-estimated from the current weights.

      - "code" (default): alpha_i = (2c + 1) / (2 (w_i^2 + 2d)), which for c = d = 0 is the
        authors' 1 / (2 w_i^2) (their M = sqrt(2) diag(w)), and likewise
        alpha_b = 1 / (2 b^2) for the bias (``S = sqrt(2)|b|`` in their code).
      - "derived": alpha_i = (2c + 1) / (w_i^2 + 2d), the posterior mean of alpha_i under
        the Gamma(c, d) hyper-prior (= 1 / w_i^2 for c = d = 0, the Gaussian-Jeffreys rule).

      The default is "code" because this algorithm exists in the zoo to reproduce the
      published PCVM_EM numbers, which came from that code; the two differ by a factor
      2 (DERIVATIONS.md §1.2). "code" prunes less aggressively: its fixed points maximize
      log-likelihood - 1/2 sum log w_i, "derived" ones log-likelihood - sum log w_i.

    - gamma_shape, gamma_rate: c and d of the Gamma hyper-prior (0, 0 in the paper).
    - n_restarts: random initializations; the best is kept by the final value of the
      objective the algorithm increases (see :func:`fit_top_down`). The authors' code
      runs once; the EPCVM paper's 8 initializations are picked by test error on CV
      folds, which is a model-selection protocol outside this function.
    - min_bucket: smallest padded width of the active set (see :func:`fit_top_down`).
    - max_alpha_bias: cap on the reported bias precision (b can collapse to exactly 0).
    """

    max_iter: int = 500
    tol: float = 1e-3
    prune_threshold: float = 1e-3
    alpha_update: str = "code"
    gamma_shape: float = 0.0
    gamma_rate: float = 0.0
    n_restarts: int = 1
    min_bucket: int = 16
    max_alpha_bias: float = 1e12
    newton: bool = False
    grad_tol: float = 1e-6
    mstep: str = "ridge"

    def __post_init__(self):
        if self.alpha_update not in _ALPHA_UPDATES:
            raise ValueError(
                f"alpha_update must be one of {sorted(_ALPHA_UPDATES)}; got {self.alpha_update!r}"
            )
        if self.mstep not in _MSTEPS:
            raise ValueError(f"mstep must be one of {list(_MSTEPS)}; got {self.mstep!r}")
        if not isinstance(self.newton, (bool, np.bool_)):
            raise ValueError(f"TopDownEMConfig.newton must be True or False; got {self.newton!r}")
        for name in ("max_iter", "n_restarts", "min_bucket"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"TopDownEMConfig.{name} must be a positive integer")
        for name in ("tol", "prune_threshold", "max_alpha_bias", "grad_tol"):
            v = float(getattr(self, name))
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"TopDownEMConfig.{name} must be positive and finite")
        for name in ("gamma_shape", "gamma_rate"):
            v = float(getattr(self, name))
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"TopDownEMConfig.{name} must be >= 0 and finite")

    @classmethod
    def paper(cls, **changes) -> "TopDownEMConfig":
        """The authors' pcvm_train.m: ridge M-step, prune negatives, stop on max|dw| < tol."""
        return cls(**{"newton": False, "mstep": "ridge", **changes})

    @classmethod
    def fixed_point(cls, **changes) -> "TopDownEMConfig":
        """The paper's loop with Newton steps, stopped at a strict local maximum of the
        monitor: the fixed point the paper's loop creeps towards, in tens of iterations.
        ``fixed_point(mstep="nonnegative")`` also removes the prune jumps (runaway)."""
        return cls(**{"newton": True, **changes})

    @property
    def alpha_scale(self) -> float:
        """rho in alpha = rho (2c + 1) / (w^2 + 2d): 1/2 for "code", 1 for "derived"."""
        return _ALPHA_UPDATES[self.alpha_update]


class TopDownState(NamedTuple):
    """State of the top-down EM on a padded active set of width m."""

    w: jax.Array  # (m,) weights; 0 on pruned and padding columns
    b: jax.Array  # ()
    active: jax.Array  # (m,) bool
    f: jax.Array  # (n,) linear predictor used by the next E-step
    it: jax.Array
    delta: jax.Array  # max|w - w_old| of the last iteration (the paper's stop)
    grad: jax.Array  # scaled gradient of the monitor after the last iteration (newton)
    stable: jax.Array  # iterations in a row that kept the active set and the bias's place
    status: jax.Array
    trace: jax.Array  # (max_iter,) objective after iteration t at index t - 1
    n_active_trace: jax.Array  # (max_iter,) active weights after iteration t
    bias_active_trace: jax.Array  # (max_iter,) bool: the bias term is in the monitor
    delta_trace: jax.Array  # (max_iter,) max|w - w_old| of iteration t
    shift_trace: jax.Array  # (max_iter,) max|f change| caused by iteration t's pruning
    newton_trace: jax.Array  # (max_iter,) bool: a Newton step was taken at iteration t
    grad_trace: jax.Array  # (max_iter,) scaled gradient (NaN where not computed)
    margin_trace: jax.Array  # (max_iter,) min_n s_n f_n after iteration t (runaway: << 0)
    w_min_trace: jax.Array  # (max_iter,) smallest active weight after iteration t


def _hyper_penalty(v, rho, c, d):
    """-rho (c + 1/2) log(d + v^2 / 2): the alpha-marginal log prior whose tangent
    minorizer is the M-step's -1/2 alpha v^2 with alpha = rho (2c + 1) / (v^2 + 2d)."""
    return -rho * (c + 0.5) * jnp.log(d + 0.5 * v**2)


def _bias_in_monitor(b, d):
    """A collapsed bias (b = 0, absorbing when d = 0) leaves the monitor like a pruned weight."""
    return (b != 0.0) | (d > 0.0)


def _top_down_objective(sf, w, b, active, rho, c, d):
    """log-likelihood + marginal log prior of the active weights and the bias."""
    pen_w = jnp.sum(jnp.where(active, _hyper_penalty(jnp.where(active, w, 1.0), rho, c, d), 0.0))
    bias_in = _bias_in_monitor(b, d)
    pen_b = jnp.where(bias_in, _hyper_penalty(jnp.where(bias_in, b, 1.0), rho, c, d), 0.0)
    return jnp.sum(log_ndtr(sf)) + pen_w + pen_b


def _monitor_derivatives(K, s, w, b, active, bias_in, rho, c, d):
    """Gradient and Hessian of the monitor F in theta = [b, log w_1, ..., log w_m]
    (DERIVATIONS.md §1.2.1). Coordinates not in the monitor (pruned or padding weights,
    an absorbed bias) get gradient 0 and Hessian row -e_i, so a Newton step leaves them."""
    f = K @ w + b
    u = s * f
    lam = inverse_mills_ratio(u)
    D = lam * (lam + u)  # -d2/du2 log Phi(u), in (0, 1)
    k2 = rho * (2.0 * c + 1.0)
    pen1 = lambda v: -k2 * v / (2.0 * d + v**2)  # noqa: E731  d/dv of the penalty
    pen2 = lambda v: -k2 * (2.0 * d - v**2) / (2.0 * d + v**2) ** 2  # noqa: E731
    w_safe = jnp.where(active, w, 1.0)
    b_safe = jnp.where(bias_in, b, 1.0)
    gw = K.T @ (s * lam) + pen1(w_safe)  # dF/dw
    gb = jnp.sum(s * lam) + pen1(b_safe)
    Hww = -(K.T * D[None, :]) @ K + jnp.diag(pen2(w_safe))
    Hbb = -jnp.sum(D) + pen2(b_safe)
    Hbw = -(D @ K)
    # log coordinates for the weights: d/dv = w d/dw
    gv = w_safe * gw
    Hvv = w_safe[:, None] * Hww * w_safe[None, :] + jnp.diag(gv)
    Hbv = Hbw * w_safe
    keep = jnp.concatenate([bias_in[None], active])
    g = jnp.where(keep, jnp.concatenate([gb[None], gv]), 0.0)
    H = jnp.block([[Hbb[None, None], Hbv[None, :]], [Hbv[:, None], Hvv]])
    both = keep[:, None] & keep[None, :]
    H = jnp.where(both, H, 0.0) - jnp.diag(jnp.where(keep, 0.0, 1.0))
    # scale-free stationarity residual: w dF/dw for the weights, b dF/db for the bias
    scaled = jnp.where(keep, jnp.concatenate([(b_safe * gb)[None], gv]), 0.0)
    return g, H, jnp.max(jnp.abs(scaled))


def _newton_step(K, s, w, b, active, bias_in, rho, c, d, w_min, grad_tol):
    """One damped Newton step on the monitor in (b, log w). Returns (w, b, taken,
    at_max, scaled_grad): ``at_max`` when the undamped Hessian is negative definite and
    the scaled gradient is below grad_tol (then no step is taken)."""
    g, H, scaled = _monitor_derivatives(K, s, w, b, active, bias_in, rho, c, d)
    P = -H
    n_p = P.shape[0]
    eye = jnp.eye(n_p)
    mu0 = 1e-10 * (1.0 + jnp.max(jnp.abs(jnp.diag(P))))

    # smallest damping mu in {0, mu0 2^k} that makes P + mu I positive definite
    def chol_ok(L):
        return jnp.all(jnp.isfinite(L))

    def damp_cond(carry):
        k, mu, L = carry
        return (~chol_ok(L)) & (k < 80)

    def damp_body(carry):
        k, mu, _ = carry
        mu = jnp.where(mu == 0.0, mu0, 2.0 * mu)
        return k + 1, mu, jnp.linalg.cholesky(P + mu * eye)

    _, mu, L = lax.while_loop(damp_cond, damp_body, (0, jnp.asarray(0.0), jnp.linalg.cholesky(P)))
    ok = chol_ok(L)
    at_max = ok & (mu == 0.0) & (scaled < grad_tol)
    step = cho_solve((L, True), g)
    step = jnp.where(ok & jnp.all(jnp.isfinite(step)), step, 0.0)
    slope = g @ step  # > 0 for an ascent direction
    f0 = _top_down_objective(s * (K @ w + b), w, b, active, rho, c, d)
    # at most a factor e^5 per step on any weight
    tau0 = jnp.minimum(1.0, 5.0 / jnp.maximum(jnp.max(jnp.abs(step[1:])), 1e-300))

    def trial(tau):
        w_t = jnp.where(active, w * jnp.exp(tau * step[1:]), 0.0)
        b_t = jnp.where(bias_in, b + tau * step[0], b)
        value = _top_down_objective(s * (K @ w_t + b_t), w_t, b_t, active, rho, c, d)
        good = (
            jnp.all(jnp.where(active, w_t > w_min, True))
            & jnp.where(bias_in & (d == 0.0), jnp.abs(b_t) > w_min, True)
            & jnp.isfinite(value)
            & (value >= f0 + 1e-4 * tau * slope)
        )
        return w_t, b_t, good

    def ls_cond(carry):
        j, tau, good = carry
        return (~good) & (j < 30)

    def ls_body(carry):
        j, tau, _ = carry
        tau = 0.5 * tau
        return j + 1, tau, trial(tau)[2]

    _, tau, good = lax.while_loop(ls_cond, ls_body, (0, tau0, trial(tau0)[2]))
    w_t, b_t, _ = trial(tau)
    taken = ok & good & (slope > 0.0) & ~at_max
    return jnp.where(taken, w_t, w), jnp.where(taken, b_t, b), taken, at_max, scaled


def _top_down_chunk(K, s, state: TopDownState, shrink_at, tol, w_min, rho, c, d, grad_tol,
                    *, mstep: str, newton: bool):
    """Run top-down EM iterations on a padded active set until it is done or the
    number of active columns drops to ``shrink_at`` (the host then compacts).

    K: (n, m) active basis columns, zero columns for padding; s: (n,) +-1.
    """
    n = K.shape[0]
    m = K.shape[1]
    max_iter = state.trace.shape[0]
    KtK = K.T @ K
    col_sums = jnp.sum(K, axis=0)  # 1^T K
    eye = jnp.eye(m)
    prec_scale = rho * (2.0 * c + 1.0)

    def step(st: TopDownState) -> TopDownState:
        Z = latent_mean(st.f, s)
        # U-form (authors' code): with Mdiag = alpha^{-1/2} (0 for pruned weights),
        # w = M (I + M K^T K M)^{-1} M K^T (Z - b 1). I + M K^T K M >= I, so the
        # Cholesky never fails, and pruned weights stay exactly 0.
        Mdiag = jnp.where(st.active, jnp.sqrt((st.w**2 + 2.0 * d) / prec_scale), 0.0)
        H = eye + Mdiag[:, None] * KtK * Mdiag[None, :]
        rhs = Mdiag * (K.T @ Z - st.b * col_sums)
        if mstep == "ridge":
            u = cho_solve((jnp.linalg.cholesky(H), True), rhs)
        else:
            # max -1/2 u^T H u + rhs^T u over u >= 0 (w = M u >= 0), from the current w
            u0 = jnp.where(st.active, st.w / jnp.where(st.active, Mdiag, 1.0), 0.0)
            u = box_qp(H, rhs, jnp.zeros(m), jnp.maximum(u0, 0.0), eye, jnp.zeros(m, dtype=bool),
                        1e-12, 50, 40).theta
        w_em = Mdiag * u
        S2 = (st.b**2 + 2.0 * d) / prec_scale  # 1 / alpha_b; b = 0 with d = 0 is absorbing
        b_new = S2 * (jnp.sum(Z) - col_sums @ w_em) / (1.0 + S2 * n)
        # With d = 0, b = 0 is absorbing and the update b_new ~ 2 b^2 (...) drives a small
        # bias to 0 double-exponentially (to underflow within a few iterations in the
        # authors' code). Absorbing it at the weights' threshold gives the same limit
        # without the log|b| term of the monitor diverging on the way.
        b_new = jnp.where((d == 0.0) & (jnp.abs(b_new) <= w_min), 0.0, b_new)
        active_new = st.active & (w_em > w_min)
        w_new = jnp.where(active_new, w_em, 0.0)
        shift = jnp.max(jnp.abs(K @ (w_em - w_new)))  # how far this iteration's pruning moved f
        bias_in = _bias_in_monitor(b_new, d)
        same = jnp.all(active_new == st.active) & (bias_in == _bias_in_monitor(st.b, d))
        stable = jnp.where(same, st.stable + 1, 0)
        it = st.it + 1
        if newton:
            def try_newton(args):
                w_, b_ = args
                return _newton_step(K, s, w_, b_, active_new, bias_in, rho, c, d, w_min, grad_tol)

            def skip(args):
                w_, b_ = args
                return w_, b_, jnp.asarray(False), jnp.asarray(False), jnp.asarray(jnp.nan)

            w_new, b_new, took, at_max, grad = lax.cond(
                (stable >= 2) & jnp.all(jnp.isfinite(w_new)) & jnp.isfinite(b_new),
                try_newton, skip, (w_new, b_new))
            done = at_max & (it > 1)
        else:
            took, grad = jnp.asarray(False), jnp.asarray(jnp.nan)
            done = (it > 1) & (jnp.max(jnp.abs(w_new - st.w)) < tol)
        f_new = K @ w_new + b_new
        value = _top_down_objective(s * f_new, w_new, b_new, active_new, rho, c, d)
        finite = jnp.all(jnp.isfinite(w_new)) & jnp.isfinite(b_new) & jnp.isfinite(value)
        delta = jnp.max(jnp.abs(w_new - st.w))
        n_active = jnp.sum(active_new)
        status = jnp.where(
            ~finite,
            NON_FINITE,
            jnp.where(
                n_active == 0,
                ALL_PRUNED,
                jnp.where(done, CONVERGED, jnp.where(it >= max_iter, ITERATION_CAP, RUNNING)),
            ),
        )
        keep = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
        return TopDownState(
            w=keep(w_new, st.w),
            b=keep(b_new, st.b),
            active=keep(active_new, st.active),
            f=keep(f_new, st.f),
            it=it,
            delta=delta,
            grad=grad,
            stable=stable,
            status=status,
            trace=st.trace.at[it - 1].set(value),
            n_active_trace=st.n_active_trace.at[it - 1].set(n_active),
            bias_active_trace=st.bias_active_trace.at[it - 1].set(bias_in),
            delta_trace=st.delta_trace.at[it - 1].set(delta),
            shift_trace=st.shift_trace.at[it - 1].set(shift),
            newton_trace=st.newton_trace.at[it - 1].set(took),
            grad_trace=st.grad_trace.at[it - 1].set(grad),
            margin_trace=st.margin_trace.at[it - 1].set(jnp.min(s * f_new)),
            w_min_trace=st.w_min_trace.at[it - 1].set(jnp.min(jnp.where(active_new, w_new, jnp.inf))),
        )

    def keep_going(st):
        return (st.status == RUNNING) & (jnp.sum(st.active) > shrink_at)

    return lax.while_loop(keep_going, step, state)


# one compiled function per (M-step, newton): the compile cache keys on the function
_CHUNKS = {
    (mstep, newton): jax.jit(partial(_top_down_chunk, mstep=mstep, newton=newton))
    for mstep in _MSTEPS
    for newton in (False, True)
}


def _next_pow2(k: int) -> int:
    return 1 << max(0, int(k) - 1).bit_length()


def _shrink_threshold(width: int, min_bucket: int) -> int:
    """Active count at which a chunk returns so the host can compact: the largest power
    of two below ``width``; -1 (never) once width is at the smallest bucket."""
    if width <= min_bucket:
        return -1
    return _next_pow2(width) // 2


def _top_down_single(Phi, s, key, config: TopDownEMConfig, progress=None):
    """One top-down run from the random start of ``key``; host loop over jitted chunks
    (``progress(iteration, state)`` after each chunk, if given)."""
    n, M = Phi.shape
    k_w, k_b, k_h1, k_h2 = jax.random.split(key, 4)
    # initialization of pcvm_train.m: w ~ U(0,1) + 0.2, b ~ N(0,1), and the first
    # E-step uses a random latent H = 10 U(0,1) y + U(0,1) instead of f
    w0 = np.asarray(jax.random.uniform(k_w, (M,))) + 0.2
    b0 = float(jax.random.normal(k_b, ()))
    h0 = 10.0 * np.asarray(jax.random.uniform(k_h1, (n,))) * s + np.asarray(jax.random.uniform(k_h2, (n,)))

    T = config.max_iter
    state = TopDownState(
        w=w0, b=np.float64(b0), active=np.ones(M, dtype=bool), f=h0,
        it=np.int64(0), delta=np.float64(np.inf), grad=np.float64(np.nan), stable=np.int64(0),
        status=np.int64(RUNNING),
        trace=np.full(T, np.nan),
        n_active_trace=np.zeros(T, dtype=np.int64),
        bias_active_trace=np.zeros(T, dtype=bool),
        delta_trace=np.full(T, np.nan),
        shift_trace=np.full(T, np.nan),
        newton_trace=np.zeros(T, dtype=bool),
        grad_trace=np.full(T, np.nan),
        margin_trace=np.full(T, np.nan),
        w_min_trace=np.full(T, np.nan),
    )
    scalars = tuple(
        np.float64(v)
        for v in (config.tol, config.prune_threshold, config.alpha_scale, config.gamma_shape,
                  config.gamma_rate, config.grad_tol)
    )
    chunk = _CHUNKS[(config.mstep, bool(config.newton))]
    columns = np.arange(M)  # original column of each padded position (-1: padding)
    K = Phi
    seconds = compile_seconds = 0.0
    n_chunks = 0
    while True:
        shrink_at = np.int64(_shrink_threshold(K.shape[1], config.min_bucket))
        state, run_s, comp_s = run_compiled(_PROGRAMS, chunk, K, s, state, shrink_at, *scalars)
        seconds += run_s
        compile_seconds += comp_s
        n_chunks += 1
        if progress is not None:
            progress(int(state.it), {"basis functions": int(np.sum(np.asarray(state.active)))})
        if int(state.status) != RUNNING:
            break
        # compact to the next power-of-two width: few distinct shapes (few compiles),
        # and the O(m^3) iterations run at the size of the surviving active set
        t0 = time.perf_counter()
        keep = np.flatnonzero(np.asarray(state.active))
        width = max(config.min_bucket, _next_pow2(len(keep)))
        K = np.zeros((n, width))
        K[:, : len(keep)] = Phi[:, columns[keep]]
        w = np.zeros(width)
        w[: len(keep)] = np.asarray(state.w)[keep]
        active = np.zeros(width, dtype=bool)
        active[: len(keep)] = True
        new_columns = np.full(width, -1)
        new_columns[: len(keep)] = columns[keep]
        columns = new_columns
        state = state._replace(w=w, active=active)
        seconds += time.perf_counter() - t0

    active = np.asarray(state.active)
    it = int(state.it)
    return dict(
        w=np.asarray(state.w)[active],
        b=float(state.b),
        columns=columns[active],
        status=int(state.status),
        n_iter=it,
        delta=float(state.delta),
        grad=float(state.grad),
        trace=np.asarray(state.trace)[:it],
        n_active_trace=np.asarray(state.n_active_trace)[:it],
        bias_active_trace=np.asarray(state.bias_active_trace)[:it],
        delta_trace=np.asarray(state.delta_trace)[:it],
        shift_trace=np.asarray(state.shift_trace)[:it],
        newton_trace=np.asarray(state.newton_trace)[:it],
        grad_trace=np.asarray(state.grad_trace)[:it],
        margin_trace=np.asarray(state.margin_trace)[:it],
        w_min_trace=np.asarray(state.w_min_trace)[:it],
        seconds=seconds,
        compile_seconds=compile_seconds,
        n_chunks=n_chunks,
    )


def fit_top_down(Phi, y, *, config: TopDownEMConfig | None = None, key,
                 progress=None) -> tuple[PointPosterior, PCVM, np.ndarray]:
    """The 2009 PCVM_EM: start with every basis column, re-estimate alpha, prune.

    Each iteration (as in the authors' pcvm_train.m, kernel width fixed)::

      E-step  Hbar = f + s N(f)/Phi(s f)  (the first iteration uses the random H of the
              initialization instead of f);
      alphas  alpha_i from the previous w_i, alpha_b from the previous b (see
              ``TopDownEMConfig.alpha_update`` for the factor-2 choice);
      M-step  w = M (I + M K^T K M)^{-1} M K^T (Hbar - b 1) with M = diag(alpha)^{-1/2},
              by Cholesky (``mstep="ridge"``, the paper), or the same quadratic
              maximized over w >= 0 (``mstep="nonnegative"``); then
              b = (1^T Hbar - 1^T K w) / (n + alpha_b) with the new w;
      prune   w_i <= prune_threshold -> 0, for good (M_ii = 0 keeps it there). One
              deviation from the code: with d = 0 the bias is also set to 0 once
              |b| <= prune_threshold. b = 0 is absorbing there and the code's update
              drives a small b to 0 double-exponentially anyway; doing it at the
              threshold keeps the monitor's log|b| term from diverging on the way;
      Newton  (``config.newton``; off in the paper) once the active set has held for two
              iterations, one damped Newton step on the monitor in (b, log w), kept if
              it raises the monitor and keeps every weight above the threshold.

    Stops (``newton``) at a strict local maximum of the monitor on the active set:
    negative definite Hessian and scaled gradient max|w_i dF/dw_i| < grad_tol - a fixed
    point of the paper's iteration; or (paper) when max|w - w_old| < tol from iteration
    2 on; or at max_iter. DERIVATIONS.md §1.2.1 says why the paper's stop is rarely met.

    Monitor (info.trace, objective "log marginal posterior (active set)"): the function
    these steps increase, log-likelihood + sum_active -rho(c+1/2) log(d + w_i^2/2) + the
    same for b; it is the tangent-minorized objective of the alpha re-estimation. It is
    monotone between prunings only: a prune removes a term (and, with the ridge M-step,
    sets a possibly large negative weight to 0). The first iteration is not an ascent
    step either (its E-step uses the random H).

    Pruning vs. shapes: the loop runs under jit on a *padded* active set whose width is
    a power of two (the first chunk uses all M columns); padded and pruned columns have
    M_ii = 0, which the U-form turns into exact zeros. When the active count falls to
    half the width the chunk returns and the host compacts to the next power of two.
    Masking alone would pay O(M^3) per iteration for all 500 iterations; the active set
    typically collapses to a few percent of M within tens of iterations, and the
    power-of-two widths cap the distinct compiled shapes at log2(M).

    Restarts: ``config.n_restarts`` random starts (keys split from ``key``); the kept run
    has the highest final monitor value among runs that ended without a numerical
    failure. This is an in-sample criterion (the paper picks initializations by test
    error on CV folds); every run's summary is in info.extra["restarts"].

    Diagnostics in info.extra, one entry per iteration: "n_active_trace",
    "bias_active_trace", "delta_trace" (max|w - w_old|), "shift_trace" (max|f change|
    caused by the iteration's pruning: large when a prune removed a large negative
    weight), "newton_trace" (a Newton step was taken), "grad_trace" (the scaled
    gradient where computed), "margin_trace" (min_n s_n f_n: a runaway sends it far
    below 0), "w_min_trace" (the smallest active weight).

    Args:
        - Phi: (n, M) basis (label-signed kernel columns; M = n in the paper).
        - y: (n,) labels 0/1 or -1/+1.
        - config: :class:`TopDownEMConfig`.
        - key: a jax PRNG key (or an int seed).
        - progress: ``progress(iteration, state)`` whenever the host regains control (after
          each compiled chunk: at every compaction of the active set and at the end),
          state {"basis functions": the active count}; or None.

    Returns:
        (posterior, spec_selected, active_columns): ``spec_selected`` is
        ``PCVM(alpha=<alpha of the active weights at the final w>, alpha_bias=...)``;
        ``active_columns`` (k,) indexes the columns of Phi kept; ``posterior`` is a
        PointPosterior over [b, w_active] for ``spec_selected`` - predict with
        ``posterior.predict_proba(Phi_new[:, active_columns])``.
    """
    config = config or TopDownEMConfig()
    Phi, y01 = check_design(Phi, y)
    if isinstance(key, (int, np.integer)):
        key = jax.random.PRNGKey(int(key))
    s = 2.0 * y01 - 1.0
    keys = jax.random.split(key, config.n_restarts)
    runs = [_top_down_single(Phi, s, k, config, progress) for k in keys]

    def final_value(run):
        return run["trace"][-1] if run["status"] != NON_FINITE and run["trace"].size else -np.inf

    values = np.array([final_value(r) for r in runs])
    best = int(np.argmax(values))  # all failed: run 0, reported as not converged
    run = runs[best]

    rho, c, d = config.alpha_scale, config.gamma_shape, config.gamma_rate
    alpha = rho * (2.0 * c + 1.0) / (run["w"] ** 2 + 2.0 * d)
    with np.errstate(divide="ignore"):
        alpha_bias = rho * (2.0 * c + 1.0) / np.float64(run["b"] ** 2 + 2.0 * d)
    alpha_bias = float(min(alpha_bias, config.max_alpha_bias))
    spec = PCVM(alpha=alpha, alpha_bias=alpha_bias)

    status = run["status"]
    if config.newton:
        converged_reason = (
            f"local maximum of the monitor: scaled gradient {run['grad']:.1e} < grad_tol = "
            f"{config.grad_tol:g}, Hessian negative definite, active set held "
            f"({int(run['newton_trace'].sum())} Newton steps)"
        )
        cap_reason = (
            f"iteration cap {config.max_iter} reached (last scaled gradient {run['grad']:.1e}, "
            f"grad_tol {config.grad_tol:g}; max|delta w| = {run['delta']:.2e})"
        )
    else:
        converged_reason = f"max|delta w| = {run['delta']:.2e} < tol = {config.tol:g}"
        cap_reason = (
            f"iteration cap {config.max_iter} reached with max|delta w| = {run['delta']:.2e} "
            f"(tol {config.tol:g}); the paper's loop converges slowly on nearly separable data, "
            f"TopDownEMConfig.fixed_point() runs it to its fixed point (DERIVATIONS.md §1.2.1)"
        )
    reason = {
        CONVERGED: converged_reason,
        ITERATION_CAP: cap_reason,
        NON_FINITE: f"non-finite update at iteration {run['n_iter']}; returning the last finite iterate",
        ALL_PRUNED: f"every basis column was pruned at iteration {run['n_iter']}",
    }[status]
    info = FitInfo(
        engine="em_top_down",
        converged=status == CONVERGED,
        n_iter=run["n_iter"],
        reason=reason,
        seconds=float(sum(r["seconds"] for r in runs)),
        compile_seconds=float(sum(r["compile_seconds"] for r in runs)),
        objective="log marginal posterior (active set)",
        trace=run["trace"],
        extra={
            "alpha_update": config.alpha_update,
            "mstep": config.mstep,
            "newton": bool(config.newton),
            "active_columns": run["columns"],
            "n_active_trace": run["n_active_trace"],
            "bias_active_trace": run["bias_active_trace"],
            "delta_trace": run["delta_trace"],
            "shift_trace": run["shift_trace"],
            "newton_trace": run["newton_trace"],
            "grad_trace": run["grad_trace"],
            "margin_trace": run["margin_trace"],
            "w_min_trace": run["w_min_trace"],
            "best_restart": best,
            "restarts": [
                {
                    "final_objective": float(final_value(r)),
                    "n_active": int(r["w"].size),
                    "n_iter": r["n_iter"],
                    "status": r["status"],
                    "chunks": r["n_chunks"],
                }
                for r in runs
            ],
        },
    )
    value = np.concatenate([[run["b"]], run["w"]])
    posterior = PointPosterior(spec=spec, sites=spec.sites(run["w"].size), value=value, info=info)
    return posterior, spec, run["columns"]


def fit_end_to_end(Phi_all, y, *, seed: int = 0, config: TopDownEMConfig | None = None, progress=None):
    """Registry form of :func:`fit_top_down` (``seed`` seeds the random initializations)."""
    posterior, spec, active = fit_top_down(Phi_all, y, config=config, key=jax.random.PRNGKey(int(seed)),
                                           progress=progress)
    return EndToEndFit(posterior=posterior, spec=spec, active=np.asarray(active))
