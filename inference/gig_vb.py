"""Mean-field variational Bayes for GIG-hierarchical logistic regression: the paper's
Algorithm 1 (Horii; derived in DERIVATIONS.md §3.2), for both mixing families of
``models/gig_logistic.py``.

The logistic likelihood is bounded by Jaakkola & Jordan with one xi_j per data point,

    log sigma(t) >= log sigma(xi) + (t - xi)/2 - lambda(xi) (t^2 - xi^2),
    lambda(xi) = tanh(xi / 2) / (4 xi),

which makes q(beta) q(tau) q(h) conjugate. One sweep updates, in order,

1. q(beta) = N(bbar, Sigma), Sigma = (S^-1 + 2 X^T Lambda X)^-1, bbar = Sigma X^T (y - 1/2),
   S = diag(1 / E[1/tau]);
2. q(tau_i) = GIG(rho - 1/2, A_i, B_i) with E[beta_i^2] = bbar_i^2 + Sigma_ii:
   gamma mixing A_i = E[a_i], B_i = E[beta_i^2]; inverse-gamma mixing A_i = 0,
   B_i = E[b_i] + E[beta_i^2] (an inverse gamma);
3. q(h_i) = ``Gamma(k + |rho|, theta + E[tau_i]/2)`` (gamma mixing) or
   ``Gamma(k + |rho|, theta + E[1/tau_i]/2)`` (inverse-gamma mixing);
4. xi_j = sqrt(x_j^T Sigma x_j + (x_j^T bbar)^2).

At the paper's rho = 1 step 2 is GIG(1/2, a, B): E[tau] = (1 + sqrt(a B)) / a,
E[1/tau] = sqrt(a / B), and step 3 is the paper's a-update - **as a quotient**,
E[a_i] = (k + 1) / (theta + E[tau_i] / 2). The paper prints the product
(k + 1)(theta + E[tau_i]/2); our derivation gives the quotient: q(a_i) is proportional
to p(a_i) exp(E[log p(tau_i | a_i)]) = a^(k-1) e^(-theta a) * a e^(-a E[tau_i]/2), a
Gamma(k + 1, theta + E[tau_i]/2) whose mean is the quotient (DERIVATIONS.md §3.2), and
the product breaks the monotone ELBO at the first sweep; the monotone-ELBO test
here would catch it.

Step 1 has the paper's two exact branches: for p <= n, Sigma = U (I + 2 U X^T Lambda X U)^-1
U with U = S^(1/2) (a p x p Cholesky); for p > n, Woodbury,
Sigma = S - S X^T (Lambda^-1 / 2 + X S X^T)^-1 X S, which needs only an n x n Cholesky -
and the iteration never forms the p x p Sigma in that branch: it needs bbar, diag Sigma and
diag(X Sigma X^T), all O(n^2 p). The full Sigma is built once, for the returned posterior.

The evidence lower bound (DERIVATIONS.md §3.2, generalized to any rho and both families) is computed
after every one of the four updates; each is the exact maximizer of the ELBO in its own
factor, so none may lower it (``info.extra["elbo_by_update"]``, tested). The E[log tau]
terms cancel between p(beta | tau), p(tau | h) and the entropy of q(tau) for every rho (the
exponents -1/2 + (rho - 1) - (rho - 3/2) sum to 0), so no derivative of log K in its
order is needed.

Initialization (the paper's): E[h] = k / theta (q(h) = the prior), xi = 1, and q(tau) with
E[1/tau] = 1, i.e. S = I (exactly so at rho = 1 and for the inverse-gamma family; for other
rho in the gamma family B is set equal to A, which gives S close to I).

Speed (DERIVATIONS.md §3.4; measured in ``benchmarks/gig_vb_costs.py``):

* **SQUAREM** (Varadhan & Roland 2008), the default: two plain sweeps, the squared
  extrapolation of their differences in the log of q(tau)'s A and B, q(h)'s rate and xi, and
  one sweep from the extrapolated point, kept only if its ELBO is not below the second plain
  sweep's - so the iterate's ELBO (``trace``) never falls, as in the plain iteration. Where
  coefficients are pruned (E[1/tau_i] -> infinity, the paper's k = 1e-6) the plain sweeps
  converge sublinearly: thousands of sweeps on a1a and w1a; SQUAREM needs a few hundred.
  ``accelerate="none"`` is Algorithm 1 sweep by sweep.
* **The stopping rule** is on the ELBO the user reads: one iteration (a cycle of three
  sweeps, or one plain sweep) raises it by at most ``tol * max(1, |ELBO|)``; optionally also
  on E[beta] (``beta_tol``, the earlier second rule).
* **Sparse designs** (binary features: w1a is 96 % zeros): in the primal branch q(beta) is
  computed from the pairs of nonzeros of each row - X^T Lambda X as a scatter-add, x_j^T Sigma
  x_j as a sum over the row's pairs - in O(pairs + p^3) instead of O(n p^2)
  (``design="auto"`` picks it when the pairs are few; ``uses_pairs``).
* **Many data sets of one design** (SBC's simulations): :func:`fit_many` (``fit.many``)
  runs their loops as one vmapped program, in either design form.

Predictive: the paper's (14), sigmoid(x^T bbar / sqrt(1 + pi x^T Sigma x / 8)) - what
``GaussianPosterior.predict_proba`` computes with ``GIGLogistic.gaussian_prob``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve
from jax.scipy.special import digamma, gammaln

from ..models.gig_logistic import GIGLogistic
from ..models.special import log_bessel_kv
from ..models.checks import check_design, check_spec
from .posterior import GaussianPosterior
from .compile_cache import CompiledPrograms, finish_each, fit_rows, run_batched
from .contracts import EndToEndFit
from .jaakkola_jordan import (BRANCHES, CONVERGED, ITERATION_CAP, NON_FINITE, RUNNING, STATUS, ascent_fit_info,
                              check_iteration_settings, full_covariance, gaussian_block,
                              jj_lambda, scaled_cholesky, uses_woodbury)

__all__ = ["GIGVBConfig", "VBResult", "BRANCHES", "DESIGNS", "run", "fit", "fit_many", "fit_end_to_end", "elbo",
           "largest_relative_fall", "uses_pairs", "count_pairs"]

ENGINE_NAME = "vb"
DESIGNS = ("auto", "dense", "sparse")
_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class GIGVBConfig:
    """Settings of the VB iteration.

    - max_iter: sweeps (each updates q(beta), q(tau), q(h), xi once); an accelerated run
      finishes its last three-sweep cycle, so it may end up to two sweeps past it.

    Stopping rules, checked after every iteration (one plain sweep, or one SQUAREM cycle of
    three sweeps); the run stops when any rule that is not None holds:

    - tol: the iteration raised the ELBO by at most ``tol * max(1, |ELBO|)``. The default 1e-10
      stopped a1a, w1a and the synthetic designs we tried with the ELBO within 1e-3 nats of
      the converged fit's, the training predictive within 1e-4 on average and the test
      accuracy within one test point of it (DERIVATIONS.md §3.4; measured by
      ``benchmarks/gig_vb_costs.py``);
    - beta_tol: no coordinate of E[beta] moved by more than ``beta_tol * (1 + max |E[beta]|)``
      (the engine's earlier second rule; with ``accelerate="none"``, tol = beta_tol = 1e-9
      is the earlier default).
    - accelerate: "squarem" (default) or "none" (plain coordinate ascent, Algorithm 1).
    - design: "auto", "dense" or "sparse" (q(beta) from the nonzero pairs of the design;
      primal branch only - the Woodbury branch is always dense).
    - branch: "auto" (Woodbury when p > n, as the paper), "primal" or "woodbury".
    - a_update: "quotient" (ours, E[a_i] = (k + 1) / (theta + E[tau_i] / 2), DERIVATIONS.md
      §3.2) or "printed" (Algorithm 1 as printed, the product (k + 1)(theta + E[tau_i] / 2)).
      "printed" is a misprint kept as a planted defect for ``validation/runs/battery.py``; its
      ELBO falls, and it is never the engine's answer.
    """

    max_iter: int = 5000
    tol: float | None = 1e-10
    beta_tol: float | None = None
    accelerate: str = "squarem"
    design: str = "auto"
    branch: str = "auto"
    a_update: str = "quotient"

    def __post_init__(self):
        rules = {name: getattr(self, name) for name in ("tol", "beta_tol") if getattr(self, name) is not None}
        check_iteration_settings(self.max_iter, **rules)
        if self.branch not in BRANCHES:
            raise ValueError(f"branch must be one of {BRANCHES}, got {self.branch!r}")
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {DESIGNS}, got {self.design!r}")
        if self.accelerate not in ("squarem", "none"):
            raise ValueError(f"accelerate must be 'squarem' or 'none', got {self.accelerate!r}")
        if self.a_update not in ("quotient", "printed"):
            raise ValueError(f"a_update must be 'quotient' or 'printed', got {self.a_update!r}")


class _Q(NamedTuple):
    """The variational parameters, plus the pieces of q(beta) the ELBO needs."""

    bbar: jnp.ndarray  # (p,) E[beta]
    sigma_diag: jnp.ndarray  # (p,) Sigma_ii
    f_mean: jnp.ndarray  # (n,) X bbar
    f_var: jnp.ndarray  # (n,) x_j^T Sigma x_j
    logdet_sigma: jnp.ndarray  # ()
    tau_a: jnp.ndarray  # (p,) A of q(tau) = GIG(rho - 1/2, A, B)
    tau_b: jnp.ndarray  # (p,) B of q(tau)
    h_shape: jnp.ndarray  # (p,) shape of q(h)
    h_rate: jnp.ndarray  # (p,) rate of q(h)
    xi: jnp.ndarray  # (n,)
    # moments of the current q(tau), refreshed whenever q(tau) changes (so that the
    # Bessel functions of rho != 1 are evaluated once per sweep, not in every expectation)
    e_tau: jnp.ndarray  # (p,) E[tau] (NaN in the inverse-gamma family, where it is not used)
    e_inv_tau: jnp.ndarray  # (p,) E[1/tau]
    log_k: jnp.ndarray  # (p,) log K_{rho - 1/2}(sqrt(A B)) (gamma family)


class VBResult(NamedTuple):
    """What :func:`run` returns: the final q(beta) = N(bbar, cov), the final variational
    parameters ``q``, and the run's record - the ELBO after every sweep (``trace``) and after
    each of its four updates (``elbo_by_update``), the stop ``status``, the branch and design
    form used, and timings. Per-sweep arrays have ``n_iter`` rows."""

    bbar: np.ndarray
    cov: np.ndarray
    q: dict  # final variational parameters (numpy)
    trace: np.ndarray  # (n_iter,) ELBO after each sweep
    elbo_by_update: np.ndarray  # (n_iter, 4) ELBO after the beta, tau, h, xi updates
    elbo_initial: float
    n_iter: int
    status: str
    branch: str
    seconds: float
    compile_seconds: float
    sweep_kind: np.ndarray  # (n_iter,) PLAIN, EXTRAPOLATED (kept) or REJECTED per sweep
    step: np.ndarray  # (n_iter,) SQUAREM's step length on the rows of extrapolated sweeps, else NaN
    elbo_abs: np.ndarray  # (n_iter,) sum of |summands of the ELBO| of the iterate after each sweep
    design: str  # "dense" or "pairs"


class _Family(NamedTuple):
    """Static facts of the iteration (part of the compilation key)."""

    gamma_mixing: bool  # False: inverse-gamma mixing
    half_order: bool  # q(tau) has GIG index 1/2 (the paper's rho = 1): Bessel-free forms
    woodbury: bool
    sparse: bool  # q(beta) from the design's nonzero pairs (primal branch only)


def _with_tau_moments(q: _Q, order, fam: _Family) -> _Q:
    e_tau, e_inv_tau, log_k = _tau_moments(q, order, fam)
    return q._replace(e_tau=e_tau, e_inv_tau=e_inv_tau, log_k=log_k)


def _tau_moments(q: _Q, order, fam: _Family):
    """E[tau], E[1/tau] and log K_order(sqrt(A B)) under q(tau) = GIG(order, A, B).

    Gamma mixing (A, B > 0): E[tau] = sqrt(B/A) K_{o+1}/K_o, E[1/tau] = sqrt(A/B) K_{o-1}/K_o,
    at o = 1/2 in closed form (K_{1/2} = K_{-1/2} = sqrt(pi / 2w) e^-w, K_{3/2} = K_{1/2}
    (1 + 1/w)). Inverse-gamma mixing (A = 0): InvGamma(-o, B/2), E[1/tau] = -2 o / B; its
    E[tau] is never needed (and the log K slot is unused), so both are returned as NaN.
    """
    if not fam.gamma_mixing:
        nan = jnp.full_like(q.tau_b, jnp.nan)
        return nan, -2.0 * order / q.tau_b, nan
    omega = jnp.sqrt(q.tau_a * q.tau_b)
    root = jnp.sqrt(q.tau_b / q.tau_a)
    if fam.half_order:
        return root * (1.0 + 1.0 / omega), 1.0 / root, 0.5 * jnp.log(jnp.pi / (2.0 * omega)) - omega
    log_k = log_bessel_kv(order, omega)
    return (root * jnp.exp(log_bessel_kv(order + 1.0, omega) - log_k),
            jnp.exp(log_bessel_kv(order - 1.0, omega) - log_k) / root, log_k)


def _elbo_terms(q: _Q, y, hyper, fam: _Family):
    """The summands of the evidence lower bound of the current q (module docstring; the
    E[log tau] terms, which cancel, left out): arrays over points and coefficients, and
    scalars. Their sum is the ELBO; the sum of their absolute values sets the scale of its
    float64 rounding error (``elbo_abs``, DERIVATIONS.md §3.4)."""
    rho, k, theta = hyper[0], hyper[1], hyper[2]
    nu = jnp.abs(rho)
    order = rho - 0.5
    lam = jj_lambda(q.xi)
    lik = (jax.nn.log_sigmoid(q.xi) + (y - 0.5) * q.f_mean - 0.5 * q.xi
           - lam * (q.f_var + q.f_mean ** 2 - q.xi ** 2))  # jj_likelihood_bound, per point
    e_tau, e_inv_tau, log_k = q.e_tau, q.e_inv_tau, q.log_k
    b_sq = q.bbar ** 2 + q.sigma_diag
    p = q.bbar.shape[0]
    prior_beta = -0.5 * _LOG_2PI - 0.5 * e_inv_tau * b_sq
    e_h = q.h_shape / q.h_rate
    e_log_h = digamma(q.h_shape) - jnp.log(q.h_rate)
    if fam.gamma_mixing:  # tau | a ~ Gamma(rho, rate a / 2)
        prior_tau = nu * (e_log_h - jnp.log(2.0)) - gammaln(nu) - 0.5 * e_h * e_tau
        entropy_tau = (-0.5 * order * (jnp.log(q.tau_a) - jnp.log(q.tau_b)) + jnp.log(2.0)
                       + log_k + 0.5 * (q.tau_a * e_tau + q.tau_b * e_inv_tau))
    else:  # tau | b ~ InvGamma(-rho, scale b / 2); q(tau) = InvGamma(1/2 - rho, scale B / 2)
        prior_tau = nu * (e_log_h - jnp.log(2.0)) - gammaln(nu) - 0.5 * e_h * e_inv_tau
        alpha = -order
        entropy_tau = -alpha * jnp.log(0.5 * q.tau_b) + gammaln(alpha) + 0.5 * q.tau_b * e_inv_tau
    prior_h = k * jnp.log(theta) - gammaln(k) + (k - 1.0) * e_log_h - theta * e_h
    entropy_beta = jnp.stack([0.5 * q.logdet_sigma, 0.5 * p * (1.0 + _LOG_2PI)])
    entropy_h = q.h_shape - jnp.log(q.h_rate) + gammaln(q.h_shape) + (1.0 - q.h_shape) * digamma(q.h_shape)
    return lik, prior_beta, prior_tau, prior_h, entropy_beta, entropy_tau, entropy_h


def _elbo(q: _Q, y, hyper, fam: _Family):
    """The evidence lower bound of the current q."""
    return sum(jnp.sum(t) for t in _elbo_terms(q, y, hyper, fam))


def _elbo_abs(q: _Q, y, hyper, fam: _Family):
    """Sum of the absolute values of the ELBO's summands (its rounding scale)."""
    return sum(jnp.sum(jnp.abs(t)) for t in _elbo_terms(q, y, hyper, fam))


def _update_beta(q: _Q, design, hyper, fam: _Family):
    s, lam = 1.0 / q.e_inv_tau, jj_lambda(q.xi)
    if fam.sparse:
        bbar, sd, fm, fv, logdet = _sparse_gaussian_block(design, s, lam)
    else:
        bbar, sd, fm, fv, logdet = gaussian_block(design.X, design.r, s, lam, fam.woodbury)
    return q._replace(bbar=bbar, sigma_diag=sd, f_mean=fm, f_var=fv, logdet_sigma=logdet)


def _update_tau(q: _Q, hyper, fam: _Family):
    b_sq = q.bbar ** 2 + q.sigma_diag
    e_h = q.h_shape / q.h_rate
    if fam.gamma_mixing:
        q = q._replace(tau_a=e_h, tau_b=b_sq)
    else:
        q = q._replace(tau_b=e_h + b_sq)
    return _with_tau_moments(q, hyper[0] - 0.5, fam)


def _update_h(q: _Q, hyper, fam: _Family):
    rho, k, theta = hyper[0], hyper[1], hyper[2]
    stat = q.e_tau if fam.gamma_mixing else q.e_inv_tau
    shape = jnp.full_like(q.h_shape, k + jnp.abs(rho))
    rate = theta + 0.5 * stat
    # hyper[3] = 1: the printed product form (a planted defect, GIGVBConfig.a_update): a
    # Gamma of the same shape whose mean is (k + |rho|)(theta + stat / 2)
    rate = jnp.where(hyper[3] > 0.5, 1.0 / rate, rate)
    return q._replace(h_shape=shape, h_rate=rate)


def _update_xi(q: _Q):
    return q._replace(xi=jnp.sqrt(q.f_var + q.f_mean ** 2))


def _initial_q(design, hyper, fam: _Family) -> _Q:
    rho, k, theta = hyper[0], hyper[1], hyper[2]
    n, p = _design_shape(design)
    e_h0 = jnp.full((p,), k / theta)
    if fam.gamma_mixing:  # GIG(rho - 1/2, A, B) with A = B = E[a]: E[1/tau] = 1 at rho = 1
        tau_a, tau_b = e_h0, e_h0
    else:  # InvGamma(1/2 - rho, B / 2) with E[1/tau] = (1/2 - rho) / (B / 2) = 1
        tau_a, tau_b = jnp.zeros(p), jnp.full((p,), 2.0 * (0.5 - rho))
    q = _Q(jnp.zeros(p), jnp.ones(p), jnp.zeros(n), jnp.zeros(n), jnp.zeros(()), tau_a, tau_b,
           jnp.full((p,), k), jnp.full((p,), theta), jnp.ones(n), jnp.ones(p), jnp.ones(p), jnp.zeros(p))
    q = _with_tau_moments(q, rho - 0.5, fam)
    # q(beta) consistent with the initial q(tau) and xi, so that the first ELBO is defined
    return _update_beta(q, design, hyper, fam)


# --------------------------------------------------------------------------------------
# The design: dense, or its nonzero pairs (DERIVATIONS.md §3.4)
# --------------------------------------------------------------------------------------
class _Dense(NamedTuple):
    X: jnp.ndarray  # (n, p)
    r: jnp.ndarray  # (n,) y - 1/2


class _Pairs(NamedTuple):
    """A design by its nonzeros: X_jc for (rows, cols), and per row j every pair c1 <= c2 of
    its nonzero columns with the product X_jc1 X_jc2 (twice it off the diagonal, for f_var)."""

    rows: jnp.ndarray  # (nnz,) row of each nonzero, ascending
    cols: jnp.ndarray  # (nnz,)
    vals: jnp.ndarray  # (nnz,)
    pair_row: jnp.ndarray  # (P,) ascending
    pair_flat: jnp.ndarray  # (P,) c1 * p + c2, c1 <= c2
    pair_val: jnp.ndarray  # (P,) X_jc1 X_jc2
    pair_val_sym: jnp.ndarray  # (P,) the same, doubled where c1 < c2
    g: jnp.ndarray  # (p,) X^T (y - 1/2)
    n_rows: jnp.ndarray  # (n,) zeros: carries n in its shape


def _design_shape(design) -> tuple[int, int]:
    """(n, p) of a _Dense or _Pairs design."""
    if isinstance(design, _Pairs):
        return design.n_rows.shape[0], design.g.shape[0]
    return design.X.shape


#: the pair form is used (design "auto") when the pairs number fewer than n p^2 / this:
#: on the machine we measured (benchmarks/gig_vb_costs.py, "design" rows; benchmarks/README.md), the
#: scatter-add and gather of one pair cost as much as 50-250 multiply-adds of XLA's dense
#: products, and the two forms broke even between pairs = n p^2 / 130 and n p^2 / 60 in
#: three runs
PAIR_COST = 100


def count_pairs(X) -> int:
    """Pairs c1 <= c2 of nonzero columns summed over the rows of X."""
    m = np.count_nonzero(X, axis=1).astype(np.int64)
    return int(np.sum(m * (m + 1) // 2))


def uses_pairs(X, woodbury: bool, design: str = "auto") -> bool:
    """Whether q(beta) is computed from the nonzero pairs of X (primal branch only)."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if design == "sparse" and woodbury:
        raise ValueError("design='sparse' computes q(beta) in the primal branch; this design "
                         f"of shape {tuple(np.shape(X))} runs the Woodbury branch (p > n or branch='woodbury')")
    if woodbury or design == "dense":
        return False
    if design == "sparse":
        return True
    n, p = X.shape
    return PAIR_COST * count_pairs(X) < n * p * p


def _pairs(X: np.ndarray, r: np.ndarray) -> _Pairs:
    n, p = X.shape
    if n * p >= 2 ** 31 or count_pairs(X) >= 2 ** 31:
        raise ValueError(f"design of shape {X.shape} is too large for the pair form; use design='dense'")
    rows, cols = np.nonzero(X)  # row-major: rows ascending, columns ascending within a row
    vals = X[rows, cols]
    counts = np.bincount(rows, minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)])
    first, second, owner = [], [], []
    triu = {}
    for j in np.flatnonzero(counts):
        m = int(counts[j])
        if m not in triu:
            triu[m] = np.triu_indices(m)
        a, b = triu[m]
        first.append(starts[j] + a)
        second.append(starts[j] + b)
        owner.append(np.full(a.size, j))
    first = np.concatenate(first) if first else np.zeros(0, int)
    second = np.concatenate(second) if second else np.zeros(0, int)
    owner = np.concatenate(owner) if owner else np.zeros(0, int)
    c1, c2 = cols[first], cols[second]
    prod = vals[first] * vals[second]
    i32 = np.int32
    return _Pairs(jnp.asarray(rows.astype(i32)), jnp.asarray(cols.astype(i32)), jnp.asarray(vals),
                  jnp.asarray(owner.astype(i32)), jnp.asarray((c1 * p + c2).astype(i32)), jnp.asarray(prod),
                  jnp.asarray(np.where(c1 < c2, 2.0, 1.0) * prod), jnp.asarray(X.T @ r), jnp.zeros(n))


def _sparse_gaussian_block(d: _Pairs, s, lam):
    """gaussian_block's primal branch from the nonzero pairs: X^T Lambda X as a scatter-add
    of lambda_j X_jc1 X_jc2 over the pairs, x_j^T Sigma x_j as a sum of Sigma over row j's
    pairs, X bbar over the nonzeros - O(pairs + p^3) instead of O(n p^2) (DERIVATIONS.md §3.4)."""
    n, p = _design_shape(d)
    upper = jax.ops.segment_sum(lam[d.pair_row] * d.pair_val, d.pair_flat, num_segments=p * p).reshape(p, p)
    gram = upper + upper.T - jnp.diag(jnp.diag(upper))
    u = jnp.sqrt(s)
    M = jnp.eye(p) + 2.0 * u[:, None] * gram * u[None, :]
    L = jnp.linalg.cholesky(M)
    sigma = u[:, None] * cho_solve((L, True), jnp.eye(p)) * u[None, :]
    mu = sigma @ d.g
    f_var = jax.ops.segment_sum(sigma.reshape(-1)[d.pair_flat] * d.pair_val_sym, d.pair_row, num_segments=n,
                                indices_are_sorted=True)
    f_mean = jax.ops.segment_sum(d.vals * mu[d.cols], d.rows, num_segments=n, indices_are_sorted=True)
    logdet = jnp.sum(jnp.log(s)) - 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    return mu, jnp.diag(sigma), f_mean, f_var, logdet


# --------------------------------------------------------------------------------------
# The iteration: plain coordinate ascent, or SQUAREM on its sweep map (DERIVATIONS.md §3.4)
# --------------------------------------------------------------------------------------
#: the hyper vector of the compiled loop: rho, k, theta, printed a-update flag, tol, beta_tol
#: (a negative tolerance switches its rule off)
N_HYPER = 6
PLAIN, EXTRAPOLATED, REJECTED = 0, 1, 2
SWEEP_KINDS = {PLAIN: "plain", EXTRAPOLATED: "extrapolated, kept", REJECTED: "extrapolated, rejected"}
#: SQUAREM's growth factor of its largest step (Varadhan & Roland's mstep)
STEP_FACTOR = 8.0


def _point(q: _Q, fam: _Family):
    """The coordinates of q that the next sweep reads, on the log scale: q(tau)'s A (gamma
    family) and B, q(h)'s rate, and xi. The sweep's q(beta) update reads E[1/tau] and xi,
    its q(tau) update E[h]; nothing else of q survives a sweep."""
    parts = ([q.tau_a] if fam.gamma_mixing else []) + [q.tau_b, q.h_rate, q.xi]
    # xi_j = 0 exactly for a row of zeros; the floor keeps its logarithm finite (and fixed)
    return jnp.log(jnp.maximum(jnp.concatenate(parts), jnp.finfo(jnp.float64).tiny))


def _at_point(q: _Q, point, hyper, fam: _Family) -> _Q:
    """q with the coordinates of ``_point`` replaced (q(tau)'s moments refreshed): a valid
    q whose q(beta) is the one it had - so every ELBO of the sweep that follows is an ELBO."""
    p, n = q.tau_b.shape[0], q.xi.shape[0]
    parts = jnp.split(jnp.exp(point), np.cumsum([p] * (3 if fam.gamma_mixing else 2)))
    if fam.gamma_mixing:
        q = q._replace(tau_a=parts[0])
    q = q._replace(tau_b=parts[-3], h_rate=parts[-2], xi=parts[-1])
    return _with_tau_moments(q, hyper[0] - 0.5, fam)


class _Loop(NamedTuple):
    q: _Q  # the current iterate (after a sweep)
    it: jnp.ndarray  # sweeps done
    status: jnp.ndarray
    last: jnp.ndarray  # ELBO of the iterate
    step_max: jnp.ndarray  # SQUAREM's largest step length
    by_update: jnp.ndarray  # (max_iter, 4) ELBO after each update of each sweep
    trace: jnp.ndarray  # (max_iter,) ELBO of the iterate after each sweep
    kind: jnp.ndarray  # (max_iter,) PLAIN, EXTRAPOLATED or REJECTED
    step: jnp.ndarray  # (max_iter,) the step length of an extrapolation (its sweep's row), else NaN
    scale: jnp.ndarray  # (max_iter,) _elbo_abs of the iterate after each sweep


def _iteration(design, y, hyper, *, fam: _Family, max_iter: int, accelerate: bool):
    """(initial loop state, first ELBO, one iteration: a sweep, or a SQUAREM cycle of three)."""
    q0 = _initial_q(design, hyper, fam)
    # the starting q(beta) is already optimal for the starting q(tau), so the first ELBO
    # is that of the paper's initialization after its step 1
    elbo0 = _elbo(q0, y, hyper, fam)
    updates = (lambda q: _update_beta(q, design, hyper, fam), lambda q: _update_tau(q, hyper, fam),
               lambda q: _update_h(q, hyper, fam), _update_xi)

    def sweep(q):
        values = []
        for update in updates:
            q = update(q)
            values.append(_elbo(q, y, hyper, fam))
        return q, jnp.stack(values)

    def plain(s: _Loop):
        q, values = sweep(s.q)
        i = s.it
        return s._replace(q=q, it=i + 1, last=values[-1], by_update=s.by_update.at[i].set(values),
                          kind=s.kind.at[i].set(PLAIN), trace=s.trace.at[i].set(values[-1]),
                          scale=s.scale.at[i].set(_elbo_abs(q, y, hyper, fam)))

    def squarem(s: _Loop):
        # two plain sweeps, the squared extrapolation of their differences, one sweep from
        # there (which makes it a q again), kept only if its ELBO is not below the plain
        # one. The three sweeps are one scanned sweep (one copy of it to compile): the
        # third starts from the extrapolated point instead of the last q.
        t0 = _point(s.q, fam)

        def one(c, i):
            q, t1, q2, e2, step = c
            r, v = t1 - t0, _point(q2, fam) - 2.0 * t1 + t0
            ratio = jnp.sqrt(jnp.sum(r ** 2) / jnp.maximum(jnp.sum(v ** 2), 1e-300))
            step = jnp.where(i == 2, jnp.clip(jnp.where(jnp.isfinite(ratio), ratio, s.step_max), 1.0, s.step_max),
                             step)
            start = lax.cond(i == 2, lambda: _at_point(q2, t0 + 2.0 * step * r + step ** 2 * v, hyper, fam),
                             lambda: q)
            q, values = sweep(start)
            t1 = jnp.where(i == 0, _point(q, fam), t1)
            q2 = jax.tree_util.tree_map(lambda a, b: jnp.where(i == 1, a, b), q, q2)
            e2 = jnp.where(i == 1, values[-1], e2)
            return (q, t1, q2, e2, step), (values, _elbo_abs(q, y, hyper, fam))

        (q3, _, q2, e2, step), (values, scale) = lax.scan(one, (s.q, t0, s.q, s.last, jnp.asarray(1.0)),
                                                          jnp.arange(3))
        keep = jnp.all(jnp.isfinite(values[2])) & jnp.all(jnp.isfinite(_point(q3, fam))) & (values[2, -1] >= e2)
        q = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), q3, q2)
        last = jnp.where(keep, values[2, -1], e2)
        at_max = step >= s.step_max
        step_max = jnp.where(at_max, jnp.where(keep, STEP_FACTOR * s.step_max,
                                               jnp.maximum(1.0, s.step_max / STEP_FACTOR)), s.step_max)
        i = s.it
        kind = jnp.stack([PLAIN, PLAIN, jnp.where(keep, EXTRAPOLATED, REJECTED)])
        return s._replace(q=q, it=i + 3, last=last, step_max=step_max,
                          by_update=lax.dynamic_update_slice(s.by_update, values, (i, 0)),
                          trace=lax.dynamic_update_slice(s.trace, jnp.stack([values[0, -1], e2, last]), (i,)),
                          kind=lax.dynamic_update_slice(s.kind, kind, (i,)),
                          step=lax.dynamic_update_slice(s.step, jnp.stack([jnp.nan, jnp.nan, step]), (i,)),
                          scale=lax.dynamic_update_slice(
                              s.scale, jnp.stack([scale[0], scale[1], jnp.where(keep, scale[2], scale[1])]), (i,)))

    def body(s: _Loop):
        new = squarem(s) if accelerate else plain(s)
        finite = jnp.isfinite(new.last) & jnp.all(jnp.isfinite(new.q.bbar))
        # the stopping rules (GIGVBConfig), each off when its tolerance is negative; E[beta]
        # counts from the second sweep on (the first q(beta) update repeats the initial one)
        rise = new.last - s.last
        moved = jnp.max(jnp.abs(new.q.bbar - s.q.bbar))
        small = (((hyper[4] >= 0) & (jnp.abs(rise) <= hyper[4] * jnp.maximum(1.0, jnp.abs(new.last))))
                 | ((hyper[5] >= 0) & (s.it >= 1) & (moved <= hyper[5] * (1.0 + jnp.max(jnp.abs(new.q.bbar))))))
        status = jnp.where(~finite, NON_FINITE,
                           jnp.where(small, CONVERGED, jnp.where(new.it >= max_iter, ITERATION_CAP, RUNNING)))
        return new._replace(status=status)

    # an accelerated run ends its last cycle: up to two sweeps past max_iter
    rows = max_iter + (2 if accelerate else 0)
    init = _Loop(q0, jnp.asarray(0), jnp.asarray(RUNNING), elbo0, jnp.asarray(1.0),
                 jnp.full((rows, 4), jnp.nan), jnp.full((rows,), jnp.nan),
                 jnp.full((rows,), PLAIN), jnp.full((rows,), jnp.nan), jnp.full((rows,), jnp.nan))
    return init, elbo0, body


def _run_loop(design, y, hyper, *, fam: _Family, max_iter: int, accelerate: bool):
    init, elbo0, body = _iteration(design, y, hyper, fam=fam, max_iter=max_iter, accelerate=accelerate)
    return lax.while_loop(lambda s: s.status == RUNNING, body, init), elbo0


_PROGRAMS = CompiledPrograms("gig_vb")


def _compiled(design, fam: _Family, max_iter: int, accelerate: bool):
    """(executable, compile seconds spent in this call) of the VB loop for this design's shapes."""
    shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), design)
    key = (type(design).__name__, tuple((a.shape, str(a.dtype)) for a in jax.tree_util.tree_leaves(shapes)),
           fam, max_iter, accelerate)

    def build():
        fn = jax.jit(lambda d, y, hyper: _run_loop(d, y, hyper, fam=fam, max_iter=max_iter, accelerate=accelerate))
        return fn.lower(shapes, jax.ShapeDtypeStruct((_design_shape(design)[0],), jnp.float64),
                        jax.ShapeDtypeStruct((N_HYPER,), jnp.float64)).compile()

    return _PROGRAMS.get(key, build)


def _check_spec(spec):
    check_spec(spec, GIGLogistic, "vb")


def _hyper(spec: GIGLogistic, config: GIGVBConfig):
    def rule(tol):
        return -1.0 if tol is None else float(tol)

    return jnp.asarray([spec.rho, spec.k, spec.theta, 1.0 if config.a_update == "printed" else 0.0,
                        rule(config.tol), rule(config.beta_tol)])


class _Setup(NamedTuple):
    """What a run needs apart from the labels (shared by :func:`run` and :func:`fit_many`)."""

    fam: _Family
    woodbury: bool
    sparse: bool
    max_iter: int
    accelerate: bool
    hyper: jnp.ndarray


def _setup(spec: GIGLogistic, X, config: GIGVBConfig) -> _Setup:
    n, p = X.shape
    woodbury = uses_woodbury(n, p, config.branch)
    # the choice of the pair form reads the design's nonzeros only, never the labels
    sparse = uses_pairs(X, woodbury, config.design)
    return _Setup(_family(spec, woodbury, sparse), woodbury, sparse, int(config.max_iter),
                  config.accelerate == "squarem", _hyper(spec, config))


def _design(X, r, sparse: bool):
    return _pairs(X, r) if sparse else _Dense(jnp.asarray(X), jnp.asarray(r))


def _vb_result(out: _Loop, elbo0, X, r, setup: _Setup, seconds: float, compile_seconds: float) -> VBResult:
    """The VBResult of one finished loop (its final state ``out`` and first ELBO) on labels
    with r = y - 1/2."""
    n_iter = int(out.it)
    # the returned q(beta): the one for the final q(tau) and xi (a last Gaussian update),
    # so that the posterior and the reported parameters belong together
    cov = full_covariance(X, np.asarray(1.0 / out.q.e_inv_tau), np.asarray(jj_lambda(out.q.xi)), setup.woodbury)
    return VBResult(bbar=cov @ (X.T @ r), cov=cov, q={k: np.asarray(v) for k, v in out.q._asdict().items()},
                    trace=np.asarray(out.trace)[:n_iter], elbo_by_update=np.asarray(out.by_update)[:n_iter],
                    elbo_initial=float(elbo0), n_iter=n_iter, status=STATUS.get(int(out.status), "running"),
                    branch="woodbury" if setup.woodbury else "primal", seconds=seconds,
                    compile_seconds=compile_seconds, sweep_kind=np.asarray(out.kind)[:n_iter],
                    step=np.asarray(out.step)[:n_iter], elbo_abs=np.asarray(out.scale)[:n_iter],
                    design="pairs" if setup.sparse else "dense")


def run(spec: GIGLogistic, Phi, y, *, config: GIGVBConfig | None = None) -> VBResult:
    """Run Algorithm 1 (SQUAREM-accelerated by default) to its stop. Phi: (n, p) design;
    y: (n,) labels 0/1 or -1/+1."""
    _check_spec(spec)
    config = config or GIGVBConfig()
    X, y01 = check_design(Phi, y)
    setup = _setup(spec, X, config)
    r = y01 - 0.5
    design = _design(X, r, setup.sparse)
    compiled, compile_seconds = _compiled(design, setup.fam, setup.max_iter, setup.accelerate)
    t0 = time.perf_counter()
    out, elbo0 = jax.block_until_ready(compiled(design, jnp.asarray(y01), setup.hyper))
    seconds = time.perf_counter() - t0
    return _vb_result(out, elbo0, X, r, setup, seconds, compile_seconds)


def largest_relative_fall(res: "VBResult") -> float:
    """The largest fall of the ELBO where the theory forbids one, relative to ``max |ELBO|``:
    within every sweep (each update maximizes the ELBO in its factor), from the iterate into
    a plain sweep, and along the iterate's trace (an extrapolation is kept only if it does
    not lower the ELBO). The entry into a sweep from an extrapolated point has no ELBO
    before it (the point is no fixed point of any update) and is not checked."""
    if res.n_iter == 0:
        return 0.0
    by = res.elbo_by_update
    before = np.concatenate([[res.elbo_initial], res.trace[:-1]])
    falls = [np.diff(by, axis=1).ravel(), np.diff(np.concatenate([[res.elbo_initial], res.trace]))]
    plain = res.sweep_kind == PLAIN
    falls.append(by[plain, 0] - before[plain])
    scale = max(1.0, float(np.max(np.abs(by))))
    return float(max(0.0, -np.min(np.concatenate(falls)))) / scale


def elbo(spec: GIGLogistic, Phi, y, q: dict) -> float:
    """The ELBO of given variational parameters (the fields of ``VBResult.q``)."""
    _check_spec(spec)
    X, y01 = check_design(Phi, y)
    hyper = jnp.asarray([spec.rho, spec.k, spec.theta, 0.0, -1.0, -1.0])
    fam = _family(spec, False, False)
    state = _with_tau_moments(_Q(**{k: jnp.asarray(v) for k, v in q.items()}), spec.rho - 0.5, fam)
    return float(_elbo(state, jnp.asarray(y01), hyper, fam))


def _family(spec: GIGLogistic, woodbury: bool, sparse: bool = False) -> _Family:
    gamma_mixing = spec.mixing == "gamma"
    return _Family(gamma_mixing, gamma_mixing and spec.rho == 1.0, bool(woodbury), bool(sparse))


def _posterior(spec: GIGLogistic, res: VBResult) -> GaussianPosterior:
    """The Gaussian posterior of a finished run, with the final q(tau), q(h), xi and the
    iteration's record in ``info.extra``."""
    info = ascent_fit_info(
        ENGINE_NAME, res, "evidence lower bound (Jaakkola-Jordan bound, mean field q(beta) q(tau) q(h)) per sweep",
        {"tau_a": res.q["tau_a"], "tau_b": res.q["tau_b"], "h_shape": res.q["h_shape"], "h_rate": res.q["h_rate"],
         "xi": res.q["xi"], "sweep_kind": res.sweep_kind, "design": res.design})
    # ascent_fit_info reads every step of elbo_by_update as an ascent step; a rejected
    # extrapolation is a trial, not a step, so the fall is measured where the theory forbids one
    info.extra["largest_relative_decrease"] = largest_relative_fall(res)
    return GaussianPosterior(spec, spec.sites(res.bbar.size), res.bbar, scaled_cholesky(res.cov), info)


def fit(spec: GIGLogistic, Phi, y, *, config: GIGVBConfig | None = None) -> GaussianPosterior:
    """q(beta) = N(bbar, Sigma) of Algorithm 1 as a Gaussian posterior over ``beta``."""
    return _posterior(spec, run(spec, Phi, y, config=config))


def fit_many(spec: GIGLogistic, Phi, ys, *, config: GIGVBConfig | None = None) -> list:
    """The batched form of :func:`fit` (``fit.many``): the fits of the label vectors ``ys``
    (D, n), one a row, on the one design Phi, run as one compiled program (the loop under
    ``jax.vmap``), with either design form - the labels enter the dense design only through
    r = y - 1/2 and the pair form only through X^T r, so the pairs are shared by every row.
    Entry i is what ``fit(spec, Phi, ys[i], config=config)`` returns, to round-off, or the
    exception it would have raised (returned, not raised: labels it refuses, a failure of
    its post-processing). A wrong spec, design or config, or a ``ys`` that is not a table
    of n columns, is raised, as for every fit.

    Timing: every entry's ``info.seconds`` is the batch's warm run time divided by the
    number of data sets in the program (those whose labels were accepted), and its
    ``info.compile_seconds`` the compile time of this call divided the same way - 0 when a
    program for this design shape and batch size (padded to a few sizes) was already compiled."""
    _check_spec(spec)
    config = config or GIGVBConfig()
    X, _ = check_design(Phi)
    setup = _setup(spec, X, config)
    # the one field of the design that depends on the labels, replaced row by row
    field = "g" if setup.sparse else "r"
    fam, max_iter, accelerate = setup.fam, setup.max_iter, setup.accelerate

    def one(value, y, design, hyper):
        return _run_loop(design._replace(**{field: value}), y, hyper, fam=fam, max_iter=max_iter,
                         accelerate=accelerate)

    def run_rows(ys01):
        rs = ys01 - 0.5
        design = _design(X, rs[0], setup.sparse)
        per_row = np.stack([X.T @ r for r in rs]) if setup.sparse else rs
        out, seconds, compile_seconds = run_batched(
            _PROGRAMS, (type(design).__name__, fam, max_iter, accelerate), one, (per_row, ys01), (design, setup.hyper))
        n = len(rs)
        return finish_each(out, n, lambda i, item: _posterior(
            spec, _vb_result(*item, X, rs[i], setup, seconds / n, compile_seconds / n)))

    return fit_rows(ys, X.shape[0], run_rows)


fit.many = fit_many


def fit_end_to_end(Phi_all, y, *, seed: int = 0, spec: GIGLogistic | None = None,
                   config: GIGVBConfig | None = None):
    """Registry form: VB selects nothing (the hyper-prior is fixed), so every column is
    kept; sparsity shows as coefficients shrunk towards 0."""
    spec = spec or GIGLogistic()
    post = fit(spec, Phi_all, y, config=config)
    return EndToEndFit(post, spec, np.arange(np.asarray(Phi_all).shape[1]))
