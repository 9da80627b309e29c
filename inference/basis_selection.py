"""Sequential basis selection by marginal likelihood (Tipping & Faul 2003) for PCVM
(derived in DERIVATIONS.md §1.5).

EPCVM (Chen, Tino & Yao 2014, Section II-E) grows the model from a single basis function
by the fast marginal-likelihood rules of Tipping & Faul, applied to a *Gaussianization*
of the classification likelihood: at the current active set and alpha an engine
approximates the posterior by a Gaussian and the likelihood by a regression likelihood
with per-point noise precision B_n and effective target t_hat_n,

    Laplace (EPCVM_Lap):  B_n = lambda^2 sigma_n (1 - sigma_n),  t_hat = f + B^{-1} lambda (t - sigma)
    EP      (EPCVM_EP):   B_n = 1 / v_n,                        t_hat = m_n   (site parameters)

This module only sees that Gaussianization (:class:`Gaussianized`), so both engines share
it: ``select_basis(Phi_all, y, gaussianize)`` with ``gaussianize`` from
``inference/pcvm_laplace.py`` or ``inference/expectation_propagation.py``.

Dependence of the log evidence on one alpha_i (everything else fixed):

    l(alpha_i) = 1/2 [log alpha_i - log(alpha_i + s_i) + q_i^2 / (alpha_i + s_i)],

maximized at alpha_i = s_i^2 / (q_i^2 - s_i) when theta_i = q_i^2 - s_i > 0, else at
alpha_i = infinity (basis out). Here exp(q_i w - s_i w^2 / 2) is the message the
(Gaussianized) likelihood sends to w_i once all other weights are integrated out. With
the Gaussianized posterior N(mean, cov) over [b, w_active]:

* out of the model (candidate column phi)::

      S = phi^T B phi - phi^T B Phi~ cov Phi~^T B phi,   Q = phi^T B (t_hat - Phi~ mean),

  s = S, q = Q;
* in the model (the bias included): the posterior marginal of w_i is the product of its
  prior N(0, 1/alpha_i), its own extra site exp(h_i w - d_i w^2 / 2) (if the engine has
  one, see :class:`Gaussianized`) and the message, so ::

      s_i = 1/cov_ii - alpha_i - d_i,   q_i = mean_i / cov_ii - h_i.

For a plain Gaussian likelihood (no sites) these are exactly Tipping & Faul's S, Q with
the in-model conversion s = alpha S/(alpha - S), q = alpha Q/(alpha - S) (tested). For
EPCVM_Lap the Laplace covariance contains the indicator curvature D and the mode its
push k ("Sigma includes D", DERIVATIONS.md §1.5); the site (d, h) = (D_i, k_i + D_i w_i) is the
quadratic expansion of log sigma(beta w_i) at the mode, so dividing it out leaves the
likelihood's message - the same quantity the out-of-model factors measure, whose Sigma
includes D for the *other* weights. (SparseBayes' literal recipe - S_i from phi_i with a
Sigma that includes D, then the alpha-conversion - mixes the two: alpha_i - S_i can then
turn negative.) Q = phi^T B (t_hat - Phi~ mean) is Tipping's "at the mode" form; it equals
the textbook phi^T B t_hat - phi^T B Phi~ cov Phi~^T B t_hat when the mean is
cov Phi~^T B t_hat (no sites) and stays right when sites shift the mean.

The rule is the paper's: l(alpha) above, without the log 2 Phi(.) normalizer that the
truncated prior would add (DERIVATIONS.md §1.5). (Adding that normalizer, each positive weight
gains up to log 2 of evidence, and on Ripley the selection then grows to ~80 basis
functions without converging in 1000 steps - so it is not offered.)

Rules (DERIVATIONS.md §1.5, with the truncated prior):

* start: the bias plus the candidate with the largest normalized projection
  phi^T (2t - 1) / ||phi|| onto the +-1 targets, both at alpha = 0.5 (EPCVM Section V:
  "alpha_0,i = 0.5"); the largest *positive* projection, since the weight must be >= 0;
* add an out-of-model candidate only if theta > 0 and q > 0 (its would-be mean
  q / (alpha + s) must be positive under the truncated prior);
* re-estimate an in-model basis if theta > 0 and q > 0 (mean > 0);
* delete an in-model basis if theta <= 0, or if q <= 0 (its mean went negative, which the
  truncated prior forbids; such deletions go first, whatever their Gaussian Delta L);
  the last remaining basis function is never deleted;
* the bias is never deleted; its precision is re-estimated by the same rule and clipped to
  ``max_alpha_bias`` when theta_0 <= 0 (b is then pinned near 0 - the Gaussian rule's
  "remove" without changing the model structure). ``reestimate_bias=False`` keeps it fixed
  at ``initial_alpha_bias``;
* the action taken is the one with the largest predicted Delta L;
* stop when there is nothing left to do: no candidate can be added, no basis must be
  deleted and every in-model ``|Delta log alpha|`` (bias included) is below
  ``min_delta_log_alpha`` (or gains less than ``min_delta_log_evidence``) -> converged.
  The iteration cap stops with converged=False, and so does a return to a state already
  visited (same active set and alphas): the rules are deterministic in that state, so
  the run would cycle forever. That happens with EPCVM_Lap on diabetis (width 1, 374
  points): add k is predicted to gain 0.0013 nats, and from the next state delete k
  is predicted to gain 0.0018 (the indicator site divided out of the in-model factors
  never entered the out-of-model ones). The run stops at the cycle's state with the
  highest log evidence (with ``score``, at the best-scoring state visited, as always).

After every action the engine re-Gaussianizes at the new active set (Laplace: a Newton
solve warm-started at the previous mode), so the realized change of the log evidence
differs from the predicted Delta L by the re-fit; ``history`` records both. For
EPCVM_Lap the largest part of that difference is the indicator's normalizer
log 2 E[sigma(beta w_i)], which the rule leaves out and which lies in [0, log 2] for a
positive mean: adds realize more than predicted, re-estimates and deletions can realize
down to about log 2 less.

Cost per iteration: the Gaussianization on Phi[:, active] only, O(N M^2 + M^3), plus the
factors of all K candidates, O(N K M + K M^2).

Large N (DERIVATIONS.md §1.5, "Large N"): ``Phi_all`` may be a :class:`KernelCandidates`,
the RBF candidate columns never formed whole - every step recomputes the kernel in tiles
(B and t_hat change at every point after each re-fit, so no product of an earlier step
stays valid), memory O(N M + block^2) instead of O(N K). ``SelectionConfig(scan=
"working-set")`` scores all K candidates only now and then (a stated deviation from the
paper; convergence is still certified by a full scan), and ``reestimate="batch"`` applies
every allowed re-estimate in one step (another; kept only when it ends at least as high
as the paper's single step).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..models.basis import rbf_kernel
from ..models.checks import (
    check_binary_labels,
    check_design,
    check_features,
    check_positive,
)
from ..models.pcvm import PCVM
from .compile_cache import CompiledPrograms
from .posterior import FitInfo, GaussianPosterior


class Gaussianized(NamedTuple):
    """A Gaussian approximation of the posterior at the current active set and alpha.

    - mean: (M+1,) posterior mean of [b, w_active].
    - cov: (M+1, M+1) posterior covariance.
    - noise_precision: (N,) B, the precision of the equivalent regression likelihood.
    - targets: (N,) t_hat, its targets.
    - log_evidence: the engine's approximate log marginal likelihood (monitor).
    - site_precision, site_shift: (M+1,) or None. Gaussian factors exp(shift theta -
      precision theta^2 / 2) on single coordinates that the engine folded into mean/cov
      besides the likelihood and the N(0, 1/alpha) prior (Laplace: the quadratic
      expansion of log sigma(beta w_i) at the mode; EP: the truncation sites). The
      selection divides them out of the in-model factors, so that in- and out-of-model
      factors both describe the likelihood alone. None = no such factors.
    - converged: whether the engine's own inner iteration converged.
    - state: anything engine-specific the next call may want (handed back in WarmStart).
    """

    mean: np.ndarray
    cov: np.ndarray
    noise_precision: np.ndarray
    targets: np.ndarray
    log_evidence: float
    site_precision: np.ndarray | None = None
    site_shift: np.ndarray | None = None
    converged: bool = True
    state: Any = None


class WarmStart(NamedTuple):
    """What the selection hands to the next ``gaussianize`` call.

    - mean: (M_new+1,) the previous posterior mean mapped to the new active set (the bias
      first; an added column starts at 0; a deleted column is dropped).
    - previous: the previous Gaussianized (its per-data-point noise_precision/targets and
      ``state`` stay meaningful across active-set changes, e.g. EP site parameters).
    - active: (M_new,) the new active candidate indices; previous_active: the old ones.
    """

    mean: np.ndarray | None
    previous: Gaussianized | None
    active: np.ndarray
    previous_active: np.ndarray


#: gaussianize(spec_active, Phi_active (N, M), y (N,) 0/1, warm_start or None) -> Gaussianized
GaussianizeFn = Callable[[PCVM, np.ndarray, np.ndarray, "WarmStart | None"], Gaussianized]


@dataclass(frozen=True)
class SelectionConfig:
    """Settings of the sequential selection.

    - initial_alpha, initial_alpha_bias: EPCVM Section V uses alpha_0,i = 0.5.
    - min_delta_log_alpha: 1e-3 as in Tipping's SparseBayes (MinDeltaLogAlpha); 1e-6 is
      also in use. On Ripley (widths 0.5 and 1.0) 1e-6 returns the same
      active set with log evidence within 5e-4, in 35-55% more steps.
    - min_delta_log_evidence: a re-estimate of a kept alpha (or of the bias) whose predicted
      evidence gain is below this many nats is not taken. Without it, nearly separable
      data (thyroid, a 112-point subset, widths 0.5 and 1.0) let EP's selection creep
      for 1000 steps: alphas drift towards 0 by ~0.2% a step at gains of 5e-7 nats, each
      step just above min_delta_log_alpha (on separable data the evidence is nearly flat
      along a joint scaling of all alphas). Additions and deletions are never filtered.
      1e-4 rather than 1e-5: on 5-fold-CV training sets of heart, breast_cancer and
      diabetis it halved the steps of Laplace and EP selection (e.g. EP on heart at
      width 2: 1000 capped steps -> 761 converged; Laplace on breast_cancer at width 1:
      1000 -> 122) for evidence losses of 0.05-0.65 nats and identical validation and
      test errors.
    - zero_factor: theta = q^2 - s below this counts as 0 (SparseBayes ZeroFactor).
    - max_iter: cap on the number of actions.
    - template: the PCVM spec whose link constants (surrogate slope, indicator sharpness)
      the selected specs inherit.
    - scan: which out-of-model candidates are scored at a step.

      - "full" (the paper's, and Tipping & Faul's): every candidate at every step.
      - "working-set" (NOT the paper's; a deviation for large N, measured in
        benchmarks/epcvm_scaling.py): a full scan only every ``refresh_every`` steps and
        whenever the working set has nothing left to do; in between, only the
        ``working_set_size`` candidates with the largest Q^2/S of the last full scan (plus
        any column deleted since) are scored, from their cached kernel columns. An add
        can then be missed, or taken later than the paper would take it, but convergence
        is only declared by a full scan: the returned state satisfies the paper's
        stopping rule over all candidates (DERIVATIONS.md §1.5).

    - reestimate: what a step does when the best action is a re-estimate (of a kept alpha or
      of the bias).

      - "single" (the paper's): that one re-estimate.
      - "batch" (NOT the paper's; a deviation for large N, measured in
        benchmarks/epcvm_scaling.py): every re-estimate the rules allow at that state at
        once, each alpha set to its own optimum s^2/(q^2 - s) with the others held. The
        batch is kept only if its re-fit ends at least as high as the single re-estimate
        would: its realized evidence gain is at least the single's predicted gain, or
        else the single is fitted too and the higher of the two is kept. Adds and
        deletions are untouched, and the stopping rule is the same, so the returned state
        is still a fixed point of the paper's rule (DERIVATIONS.md §1.5).

    - working_set_size, refresh_every: see ``scan``.
    - audit: with scan="working-set", run a full scan beside every working-set step as well
      and record in ``history`` whether it picks the same action ("audit_same_action") -
      a diagnostic of the deviation, as expensive as scan="full".
    """

    initial_alpha: float = 0.5
    initial_alpha_bias: float = 0.5
    reestimate_bias: bool = True
    max_alpha_bias: float = 1e6
    min_delta_log_alpha: float = 1e-3
    min_delta_log_evidence: float = 1e-4
    zero_factor: float = 1e-12
    max_iter: int = 1000
    template: PCVM = field(default_factory=PCVM)
    scan: str = "full"
    reestimate: str = "single"
    working_set_size: int = 512
    refresh_every: int = 25
    audit: bool = False

    def __post_init__(self):
        check_positive(self.initial_alpha, "initial_alpha")
        check_positive(self.initial_alpha_bias, "initial_alpha_bias")
        check_positive(self.max_alpha_bias, "max_alpha_bias")
        check_positive(self.min_delta_log_alpha, "min_delta_log_alpha")
        if not self.min_delta_log_evidence >= 0:
            raise ValueError("SelectionConfig.min_delta_log_evidence must be >= 0")
        if self.max_iter < 0:
            raise ValueError("SelectionConfig.max_iter must be >= 0")
        if self.scan not in SCANS:
            raise ValueError(f"SelectionConfig.scan must be one of {SCANS}, got {self.scan!r}")
        if self.reestimate not in REESTIMATES:
            raise ValueError(f"SelectionConfig.reestimate must be one of {REESTIMATES}, got {self.reestimate!r}")
        if not (isinstance(self.working_set_size, (int, np.integer)) and self.working_set_size >= 1):
            raise ValueError(f"SelectionConfig.working_set_size must be a positive integer, got {self.working_set_size!r}")
        if not (isinstance(self.refresh_every, (int, np.integer)) and self.refresh_every >= 1):
            raise ValueError(f"SelectionConfig.refresh_every must be a positive integer, got {self.refresh_every!r}")


#: the candidate scans of SelectionConfig.scan
SCANS = ("full", "working-set")
#: the re-estimation rules of SelectionConfig.reestimate
REESTIMATES = ("single", "batch")


class Factors(NamedTuple):
    """Sparsity and quality factors of every candidate and of the bias."""

    s: np.ndarray  # (K,)
    q: np.ndarray  # (K,)
    s_bias: float
    q_bias: float


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """The outcome of :func:`select_basis`.

    - active: (M,) selected candidate indices (in order of the columns of the final model).
    - alpha: (M,) their precisions; alpha_bias: the bias precision.
    - spec: frozen probit PCVM with that alpha and alpha_bias (the model for NUTS & co.).
    - posterior: the Gaussianized fit at the final active set and alpha.
    - trace: (n_iter+1,) log evidence after each Gaussianization.
    - history: one dict per action (iteration, action, index, alpha_old, alpha_new,
      delta_predicted, log_evidence_before/after, n_active; forced_by_truncation for
      deletions). With reestimate="batch" a kept batch is action "batch", index None,
      indices (its members, -1 the bias), delta_predicted the sum of the members' own
      predictions. On every step where a batch was tried: batch_size and
      single_delta_predicted (the paper's step's prediction); where the single was
      fitted too, batch_log_evidence and single_log_evidence.
    - factors: the s, q factors at the returned state (None if ``score`` picked an earlier
      one); seconds: wall time of the whole run (compilation included);
    - n_inner_unconverged: Gaussianizations whose own iteration did not converge;
    - best_iteration: with ``score``, the step whose state is returned;
    - scans: one (kind, M, n_scored) per candidate scan, kind "full" or "working-set", M the
      active-set size it saw and n_scored the out-of-model candidates it scored (what the
      scan's products cost: 2 N n_scored (M + 2) flops);
    - timings: wall seconds by part: "gaussianize", "full_scan", "working_set" (scoring
      and building the working set), "columns" (active kernel columns), "total".
    """

    active: np.ndarray
    alpha: np.ndarray
    alpha_bias: float
    spec: PCVM
    posterior: Gaussianized
    trace: np.ndarray
    n_iter: int
    converged: bool
    reason: str
    history: list[dict[str, Any]] = field(default_factory=list)
    factors: Factors | None = None
    seconds: float = float("nan")
    n_inner_unconverged: int = 0
    best_iteration: int | None = None
    scans: list[tuple[str, int, int]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_full_scans(self) -> int:
        """How many of the candidate scans in ``scans`` were full ones."""
        return sum(1 for kind, _, _ in self.scans if kind == "full")


def marginal_likelihood_term(alpha, s, q):
    """l(alpha) = 1/2 [log alpha - log(alpha + s) + q^2/(alpha + s)], with l(inf) = 0."""
    alpha = np.asarray(alpha, dtype=float)
    s = np.asarray(s, dtype=float)
    q = np.asarray(q, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # log(alpha / (alpha + s)) = -log1p(s / alpha) is exact for huge alpha
        val = 0.5 * (-np.log1p(s / alpha) + q**2 / (alpha + s))
    return np.where(np.isinf(alpha), 0.0, val)


def optimal_alpha(s, q, config: "SelectionConfig"):
    """The maximizer of l(alpha) over (0, inf] and whether it is finite.

    alpha = s^2 / (q^2 - s) if q^2 - s > zero_factor, with q > 0 and s > 0 also required
    (under the truncated prior the would-be mean q / (alpha + s) must be positive).
    Returns (alpha (K,) with inf for "out", relevant (K,) bool).
    """
    s = np.asarray(s, dtype=float)
    q = np.asarray(q, dtype=float)
    theta = q**2 - s
    relevant = (q > 0) & (s > 0) & (theta > config.zero_factor)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(relevant, s**2 / theta, np.inf), relevant


def _candidate_factors(Phi_all, design, B, targets, mean, cov):
    """Out-of-model S, Q (K,) for every column of Phi_all (N, K); design (N, P) = [1 | Phi_active | 0]."""
    resid = B * (targets - design @ mean)
    BPhi = B[:, None] * Phi_all
    cross = design.T @ BPhi  # (P, K)
    S = jnp.sum(Phi_all * BPhi, axis=0) - jnp.sum(cross * (cov @ cross), axis=0)
    return S, Phi_all.T @ resid


_FACTOR_PROGRAMS = CompiledPrograms("basis_selection factors")


def compile_stats() -> tuple[int, float]:
    """(number, total seconds) of factor executables compiled so far in this process
    (dense: one per (N, K, bucket); kernel tiles: one per tile shape and bucket)."""
    (n_dense, s_dense), (n_tiles, s_tiles) = _FACTOR_PROGRAMS.stats(), _TILE_PROGRAMS.stats()
    return n_dense + n_tiles, s_dense + s_tiles


def _bucket(n: int, minimum: int = 16) -> int:
    size = minimum
    while size < n:
        size *= 2
    return size


def _dense_out_of_model(g: Gaussianized, Phi_all: np.ndarray, Phi_active: np.ndarray, step: int | None = None):
    """Out-of-model S, Q (K,) of every column of a dense Phi_all (N, K), given the active
    columns Phi_active (N, M); compiled, padded to a power-of-two number of weights (with
    ``step``: to a multiple of it, as the working set does - less padding at large M)."""
    N, K = Phi_all.shape
    M = Phi_active.shape[1]
    P = 1 + (_bucket(M) if step is None else step * max(1, -(-M // step)))
    design = np.zeros((N, P))
    design[:, 0] = 1.0
    design[:, 1 : M + 1] = Phi_active
    mean = np.asarray(g.mean, dtype=float)
    cov = np.asarray(g.cov, dtype=float)
    mean_p = np.zeros(P)
    mean_p[: M + 1] = mean
    cov_p = np.zeros((P, P))
    cov_p[: M + 1, : M + 1] = cov
    args = (Phi_all, design, np.asarray(g.noise_precision, dtype=float),
            np.asarray(g.targets, dtype=float), mean_p, cov_p)
    key = (N, K, P)
    executable, _ = _FACTOR_PROGRAMS.get(key, lambda: jax.jit(_candidate_factors).lower(*args).compile())
    S, Q = executable(*args)
    return np.array(S), np.array(Q)


def _with_in_model(s: np.ndarray, q: np.ndarray, g: Gaussianized, active: np.ndarray,
                   alpha: np.ndarray, alpha_bias: float) -> Factors:
    """Overwrite the active entries of s, q with the in-model identities and add the bias."""
    M = len(active)
    cov = np.asarray(g.cov, dtype=float)
    mean = np.asarray(g.mean, dtype=float)
    # in the model: posterior precision = alpha + site precision + s, and
    # posterior precision x mean = site shift + q (the bias has index 0)
    prec_diag = 1.0 / np.diag(cov)
    d = np.zeros(M + 1) if g.site_precision is None else np.asarray(g.site_precision, dtype=float)
    h = np.zeros(M + 1) if g.site_shift is None else np.asarray(g.site_shift, dtype=float)
    s[active] = prec_diag[1:] - alpha - d[1:]
    q[active] = mean[1:] * prec_diag[1:] - h[1:]
    return Factors(s=s, q=q, s_bias=float(prec_diag[0] - alpha_bias - d[0]),
                   q_bias=float(mean[0] * prec_diag[0] - h[0]))


def sparsity_quality_factors(g: Gaussianized, Phi_all, active: np.ndarray,
                             alpha: np.ndarray, alpha_bias: float,
                             Phi_active: np.ndarray | None = None) -> Factors:
    """s, q for all K candidates (out-of-model formula, then the in-model identities).

    - g: the Gaussianization at ``active`` (mean/cov over [b, w_active]).
    - Phi_all: (N, K) array, or :class:`KernelCandidates` (scored tile by tile, never
      formed); active: (M,) indices into its columns; alpha: (M,).
    - Phi_active: (N, M) the active columns, if the caller has them (else computed).

    Dense: the O(N K M) part runs compiled, padded to a power-of-two number of columns
    (zero columns and zero covariance entries leave S and Q unchanged), so a selection
    run compiles it a handful of times (the numpy version of these products was up to
    100x slower on a loaded machine, where multi-threaded BLAS thrashes on such small
    sizes). KernelCandidates: see :func:`blocked_out_of_model`.
    """
    active = np.asarray(active, dtype=int)
    if Phi_active is None:
        Phi_active = active_columns(Phi_all, active)
    if isinstance(Phi_all, KernelCandidates):
        s, q = blocked_out_of_model(g, Phi_all, Phi_active)
    else:
        s, q = _dense_out_of_model(g, Phi_all, Phi_active)
    return _with_in_model(s, q, g, active, alpha, alpha_bias)


def active_columns(Phi_all, active) -> np.ndarray:
    """The columns ``active`` of a dense (N, K) array or of :class:`KernelCandidates`, as
    an (N, M) float64 array."""
    active = np.asarray(active, dtype=int)
    if isinstance(Phi_all, KernelCandidates):
        return Phi_all.columns(active)
    return np.asarray(Phi_all)[:, active]


# ---------------------------------------------------------------------------------
# Kernel candidates scored in tiles (DERIVATIONS.md §1.5, "Large N")
# ---------------------------------------------------------------------------------
#: float32 adds integers exactly below this
_FLOAT32_EXACT = 1 << 24

_TILE_PROGRAMS = CompiledPrograms("basis_selection kernel tiles")


def _tile_kernel(XI, XJ, nI, nJ, inv_two_w2, integer: bool):
    """k(x_i, x_j) for a tile of rows XI (r, D) and columns XJ (c, D), nI / nJ their
    squared norms.

    integer=True: XI, XJ hold integers (stored as float32) whose products and sums stay
    below 2^24, so G = XI XJ^T is exact in float32 (half the cost of float64) and the
    squared distances nI + nJ - 2 G are exact integers. Otherwise the dense basis's
    float64 formula (up to summation order).
    """
    if integer:
        G = jnp.dot(XI, XJ.T, preferred_element_type=jnp.float32).astype(jnp.float64)
        return jnp.exp(-(nI[:, None] + nJ[None, :] - 2.0 * G) * inv_two_w2)
    d2 = jnp.maximum(nI[:, None] + nJ[None, :] - 2.0 * (XI @ XJ.T), 0.0)
    return jnp.exp(-d2 * inv_two_w2)


# Products are written with the tile on the right (W_I^T K, v_I^T K^2) rather than as
# K^T W_I: XLA's CPU dot transposes a (b, b) operand first (measured 1.5x slower).
def _tile_one_way(XI, XJ, nI, nJ, WTI, vI, inv_two_w2, *, integer: bool):
    """Column sums of a tile: (K^T W_I)^T = W_I^T K (p, c) and (K o K)^T v_I (c,)."""
    Kt = _tile_kernel(XI, XJ, nI, nJ, inv_two_w2, integer)
    return WTI @ Kt, vI @ (Kt * Kt)


def _tile_two_way(XI, XJ, nI, nJ, WTI, WJ, vI, vJ, inv_two_w2, *, integer: bool):
    """A tile of a symmetric kernel serves both its column block (K^T W_I) and its row
    block (K W_J): k(x_i, x_j) = k(x_j, x_i)."""
    Kt = _tile_kernel(XI, XJ, nI, nJ, inv_two_w2, integer)
    K2 = Kt * Kt
    return WTI @ Kt, vI @ K2, Kt @ WJ, K2 @ vJ


class KernelCandidates:
    """Label-signed RBF candidate columns phi_j(x_n) = s_j exp(-||x_n - c_j||^2 / (2 width^2))
    that are never stored whole: the selection scores them tile by tile
    (DERIVATIONS.md §1.5, "Large N").

    X: (N, D) the data points (rows of the design); width: the RBF width (the
    convention of ``models.basis``); signs: (K,) +1/-1 per column (PCVM: the label of the
    centre's point), None = all +1; centres: (K, D), default X itself (PCVM's candidates:
    one per training point), which makes the kernel symmetric so that every tile off the
    diagonal serves two blocks; block_size: tile side (a tile holds block_size^2 kernel
    values; memory per scan O((N + K) p + block_size^2) for p = M + 2 product columns).

    Integer inputs (e.g. LIBSVM's binary features) take an exact fast path: their cross
    products in float32, where integers below 2^24 are exact. With the symmetric kernel,
    repeated inputs are scored once (``deduplicate``): rows with the same x share one
    kernel row, so their W and v rows are summed first, and centres with the same x share
    one column up to its sign (a1a.t: 23,875 distinct inputs of 30,956, 41% fewer tiles).

    ``columns(idx)`` gives some columns as a dense (N, len(idx)) array (computed as
    ``RBFBasis.transform`` computes them); ``products(W, v)`` gives Phi^T W and
    (Phi o Phi)^T v for all K columns in one pass over the tiles. ``largest_tile`` and
    ``kernel_entries`` record the largest tile ever evaluated and the number of kernel
    values computed (tests read them; the benchmark counts cost with them).
    """

    def __init__(self, X, width: float, signs=None, *, centres=None, block_size: int = 1024,
                 deduplicate: bool = True):

        X = check_features(X, name="X", min_features=1)
        if not (np.isfinite(width) and width > 0):
            raise ValueError(f"kernel width must be a positive finite number, got {width!r}")
        if not (isinstance(block_size, (int, np.integer)) and block_size >= 1):
            raise ValueError(f"block_size must be a positive integer, got {block_size!r}")
        self.symmetric = centres is None
        C = X if centres is None else check_features(centres, n_features=X.shape[1], name="centres")
        K = C.shape[0]
        if signs is None:
            signs = np.ones(K)
        signs = np.asarray(signs, dtype=float)
        if signs.shape != (K,) or not np.all(np.isin(signs, (-1.0, 1.0))):
            raise ValueError(f"signs must be a vector of +1/-1, one per centre ({K}), got shape {signs.shape}")
        self.X, self.centres, self.signs = X, C, signs
        self.width = float(width)
        self.block_size = int(block_size)
        self.largest_tile = (0, 0)
        self.kernel_entries = 0
        both = X if self.symmetric else np.concatenate([X, C])
        # |x . c| <= max ||x||^2 by Cauchy-Schwarz, and every partial sum of a product of
        # integer vectors is bounded by the same: all exact in float32 below 2^24
        self.integer = bool(np.all(both == np.rint(both))
                            and np.max(np.sum(both * both, axis=1)) < _FLOAT32_EXACT)
        self._inverse = None
        if self.symmetric and deduplicate:
            unique, inverse = np.unique(X, axis=0, return_inverse=True)
            if len(unique) < len(X):
                from scipy import sparse

                self._inverse = inverse.reshape(-1)
                # (U, N) 0/1 matrix summing the rows of each distinct input
                self._aggregate = sparse.csr_matrix(
                    (np.ones(len(X)), (self._inverse, np.arange(len(X)))), shape=(len(unique), len(X)))
                self._row_blocks = self._blocks(unique)
        if self._inverse is None:
            self._row_blocks = self._blocks(X)
        self._col_blocks = self._row_blocks if self.symmetric else self._blocks(C)

    @classmethod
    def from_basis(cls, basis, X, *, block_size: int = 1024, deduplicate: bool = True) -> "KernelCandidates":
        """The candidate columns of an ``RBFBasis`` (e.g. ``pcvm_basis(X, y, width)``)
        evaluated at the data X, i.e. ``basis.transform(X)`` without forming it."""
        X = np.asarray(X, dtype=float)
        centres = None if np.array_equal(basis.centres, X) else basis.centres
        return cls(X, basis.width, basis.signs, centres=centres, block_size=block_size, deduplicate=deduplicate)

    @property
    def n_distinct(self) -> int:
        """Rows (and, when symmetric, columns) the tiles run over: distinct inputs if deduplicated."""
        return self.X.shape[0] if self._inverse is None else self._aggregate.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        """(N, K): the shape of the design these candidates stand for, data points by
        candidate columns."""
        return self.X.shape[0], self.centres.shape[0]

    def _blocks(self, A: np.ndarray):
        """(list of padded device blocks (b, D), their squared norms, true lengths)."""
        b = min(self.block_size, A.shape[0])
        n_blocks = -(-A.shape[0] // b)
        padded = np.zeros((n_blocks * b, A.shape[1]))
        padded[: A.shape[0]] = A
        norms = np.sum(padded * padded, axis=1)
        dtype = jnp.float32 if self.integer else jnp.float64
        blocks = [jnp.asarray(padded[i * b : (i + 1) * b], dtype=dtype) for i in range(n_blocks)]
        return blocks, [jnp.asarray(norms[i * b : (i + 1) * b]) for i in range(n_blocks)], b

    def columns(self, idx) -> np.ndarray:
        """Columns idx as a dense (N, len(idx)) float64 array (RBFBasis.transform's numbers)."""

        idx = np.asarray(idx, dtype=int).reshape(-1)
        if idx.size == 0:
            return np.zeros((self.X.shape[0], 0))
        return rbf_kernel(self.X, self.centres[idx], self.width) * self.signs[idx][None, :]

    def _program(self, two_way: bool, args: tuple):
        """The compiled tile program for these argument shapes (compiled ahead of time,
        so that its compilation is counted by :func:`compile_stats`, not as run time)."""
        key = (two_way, self.integer, tuple((a.shape, str(a.dtype)) for a in args))

        def build():
            fn = _tile_two_way if two_way else _tile_one_way
            return jax.jit(partial(fn, integer=self.integer)).lower(*args).compile()

        program, _ = _TILE_PROGRAMS.get(key, build)
        return program

    def products(self, W: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Phi^T W (K, p), (Phi o Phi)^T v (K,)) over all K columns, tile by tile.

        W: (N, p); v: (N,). No array larger than (max(N, K), p) or (block_size,
        block_size) is formed. The p columns are padded with zeros to a multiple of 16,
        so that a selection whose M changes by one compiles a new tile program only
        every 16 basis functions.
        """
        W = np.asarray(W, dtype=float)
        v = np.asarray(v, dtype=float)
        N, K = self.shape
        if W.ndim != 2 or W.shape[0] != N or v.shape != (N,):
            raise ValueError(f"products needs W of shape ({N}, p) and v of shape ({N},); got {W.shape}, {v.shape}")
        p = W.shape[1]
        p_pad = 16 * max(1, -(-p // 16))
        if self._inverse is not None:  # one row per distinct input: sum the rows it stands for
            W, v = self._aggregate @ W, self._aggregate @ v
        n_rows = W.shape[0]
        rows, row_norms, br = self._row_blocks
        cols, col_norms, bc = self._col_blocks
        Wp = np.zeros((len(rows) * br, p_pad))
        Wp[:n_rows, :p] = W
        vp = np.zeros(len(rows) * br)
        vp[:n_rows] = v
        W_blocks = [jnp.asarray(Wp[i * br : (i + 1) * br]) for i in range(len(rows))]
        WT_blocks = [jnp.asarray(Wp[i * br : (i + 1) * br].T.copy()) for i in range(len(rows))]
        v_blocks = [jnp.asarray(vp[i * br : (i + 1) * br]) for i in range(len(rows))]
        UT = [jnp.zeros((p_pad, bc)) for _ in cols]  # (Phi^T W)^T by column block
        a = [jnp.zeros(bc) for _ in cols]
        scale = jnp.float64(1.0 / (2.0 * self.width**2))
        one_way = self._program(False, (rows[0], cols[0], row_norms[0], col_norms[0], WT_blocks[0], v_blocks[0],
                                        scale))
        if self.symmetric:
            two_way = self._program(True, (rows[0], cols[0], row_norms[0], col_norms[0], WT_blocks[0],
                                           W_blocks[0], v_blocks[0], v_blocks[0], scale)) if len(cols) > 1 else None
            U_rows = [jnp.zeros((br, p_pad)) for _ in rows]  # contributions K W_J to row blocks
            for j in range(len(cols)):
                for i in range(j + 1):
                    if i == j:
                        dUT, da = one_way(rows[i], cols[j], row_norms[i], col_norms[j], WT_blocks[i], v_blocks[i],
                                          scale)
                        UT[j], a[j] = UT[j] + dUT, a[j] + da
                    else:
                        dUT, da_j, dU_i, da_i = two_way(rows[i], cols[j], row_norms[i], col_norms[j], WT_blocks[i],
                                                        W_blocks[j], v_blocks[i], v_blocks[j], scale)
                        UT[j], a[j] = UT[j] + dUT, a[j] + da_j
                        U_rows[i], a[i] = U_rows[i] + dU_i, a[i] + da_i
                    self.kernel_entries += br * bc
            U_all = np.concatenate([np.asarray(ut).T + np.asarray(ur) for ut, ur in zip(UT, U_rows)])
        else:
            for j in range(len(cols)):
                for i in range(len(rows)):
                    dUT, da = one_way(rows[i], cols[j], row_norms[i], col_norms[j], WT_blocks[i], v_blocks[i],
                                      scale)
                    UT[j], a[j] = UT[j] + dUT, a[j] + da
                    self.kernel_entries += br * bc
            U_all = np.concatenate([np.asarray(ut).T for ut in UT])
        self.largest_tile = max(self.largest_tile, (br, bc))
        a_all = np.concatenate([np.asarray(x) for x in a])
        if self._inverse is not None:  # each centre takes the column of its distinct input
            U_all, a_all = U_all[self._inverse], a_all[self._inverse]
        U_all = U_all[:K, :p] * self.signs[:, None]
        return U_all, a_all[:K]


def blocked_out_of_model(g: Gaussianized, cands: KernelCandidates, Phi_active: np.ndarray):
    """Out-of-model S, Q (K,) of every candidate of ``cands``, never forming Phi_all.

    With W = B o [1 | Phi_active | r], r = t_hat - [1 | Phi_active] mean, one pass over
    the kernel tiles gives U = Phi^T W (K, M + 2) and a = (Phi o Phi)^T B; then
    S = a - rowsum((U_c cov) o U_c) with U_c the first M + 1 columns of U (the
    cross products phi^T B [1 | Phi_active]), and Q = the last column. The same sums as
    the dense formula, re-associated over tiles.
    """
    N = Phi_active.shape[0]
    design = np.concatenate([np.ones((N, 1)), Phi_active], axis=1)
    B = np.asarray(g.noise_precision, dtype=float)
    mean = np.asarray(g.mean, dtype=float)
    cov = np.asarray(g.cov, dtype=float)
    resid = np.asarray(g.targets, dtype=float) - design @ mean
    W = B[:, None] * np.concatenate([design, resid[:, None]], axis=1)
    U, a = cands.products(W, B)
    cross = U[:, :-1]
    S = a - np.sum(cross * (cross @ cov), axis=1)
    return S, U[:, -1].copy()


def _spec_for(template: PCVM, alpha: np.ndarray, alpha_bias: float) -> PCVM:
    return template.with_params(alpha=np.asarray(alpha, dtype=float), alpha_bias=float(alpha_bias), surrogate=False)


def _initial_basis(Phi_all, t: np.ndarray) -> int:
    if isinstance(Phi_all, KernelCandidates):
        U, sq = Phi_all.products((2.0 * t - 1.0)[:, None], np.ones(len(t)))
        dot, norms = U[:, 0], np.sqrt(sq)
    else:
        norms = np.linalg.norm(Phi_all, axis=0)
        dot = Phi_all.T @ (2.0 * t - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        proj = np.where(norms > 0, dot / norms, -np.inf)
    if not np.any(proj > 0):
        raise ValueError(
            "no candidate column has a positive projection on the +-1 targets; with "
            "non-negative weights none of them can start the model (are the columns "
            "label-signed, e.g. from pcvm_basis?)"
        )
    return int(np.argmax(proj))


def _map_mean(mean: np.ndarray, old_active: np.ndarray, new_active: np.ndarray) -> np.ndarray:
    out = np.zeros(len(new_active) + 1)
    out[0] = mean[0]
    where = {int(k): j for j, k in enumerate(old_active)}
    for j, k in enumerate(new_active):
        if int(k) in where:
            out[j + 1] = mean[where[int(k)] + 1]
    return out


#: the working set's column buffer grows in steps of this many columns
_WORKING_SLACK = 32


class _Scanner:
    """Scores the candidates at each step, by ``config.scan`` (see SelectionConfig).

    Keeps the working set (indices and their cached kernel columns) between steps, the
    log of scans and the time spent. ``factors`` returns (Factors, kind): kind "full"
    when every candidate was scored.
    """

    def __init__(self, Phi_all, config: SelectionConfig):
        self.Phi_all = Phi_all
        self.config = config
        self.K = Phi_all.shape[1]
        self.working = np.zeros(0, dtype=int)
        self.Phi_working: np.ndarray | None = None  # (N, capacity), the set's columns first
        self._device = None  # its device copy
        self.since_full = 0
        self.log: list[tuple[str, int, int]] = []
        self.seconds = {"full_scan": 0.0, "working_set": 0.0}

    def full(self, g, active, alpha, alpha_bias, Phi_active) -> Factors:
        t0 = time.perf_counter()
        f = sparsity_quality_factors(g, self.Phi_all, active, alpha, alpha_bias, Phi_active)
        self.log.append(("full", len(active), self.K - len(active)))
        self.since_full = 0
        if self.config.scan == "working-set":
            self._rebuild(f, active)
        self.seconds["full_scan"] += time.perf_counter() - t0
        return f

    def _rebuild(self, f: Factors, active) -> None:
        """The working set: the out-of-model candidates with q > 0 and the largest q^2 / s
        (the Delta L of an add is increasing in q^2 / s), with their kernel columns."""
        t0 = time.perf_counter()
        out = np.ones(self.K, dtype=bool)
        out[active] = False
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(out & (f.q > 0) & (f.s > 0), f.q**2 / f.s, -np.inf)
        n = min(self.config.working_set_size, int(np.sum(np.isfinite(ratio))))
        self.working = np.sort(np.argsort(-ratio, kind="stable")[:n])
        # room for columns deleted later; zero columns score S = Q = 0 (never relevant),
        # and a width in steps of _WORKING_SLACK lets the compiled factor program be reused
        self.Phi_working = np.zeros((self.Phi_all.shape[0], _WORKING_SLACK * (n // _WORKING_SLACK + 1)))
        self.Phi_working[:, :n] = active_columns(self.Phi_all, self.working)
        self._device = None
        self.seconds["full_scan"] -= time.perf_counter() - t0
        self.seconds["working_set"] += time.perf_counter() - t0

    def include(self, k: int, column: np.ndarray) -> None:
        """A column just deleted from the model joins the working set (it may return)."""
        if self.config.scan != "working-set" or k in set(self.working.tolist()):
            return
        n = len(self.working)
        if n == self.Phi_working.shape[1]:
            more = np.zeros((self.Phi_working.shape[0], _WORKING_SLACK))
            self.Phi_working = np.concatenate([self.Phi_working, more], axis=1)
        self.Phi_working[:, n] = column
        self.working = np.append(self.working, k)
        self._device = None

    def partial(self, g, active, alpha, alpha_bias, Phi_active) -> Factors:
        """Exact s, q of the working set and of the model; every other candidate NaN (not
        scored: never relevant to _choose_action)."""
        t0 = time.perf_counter()
        s = np.full(self.K, np.nan)
        q = np.full(self.K, np.nan)
        n = len(self.working)
        if n:
            if self._device is None:  # one transfer per change of the set, not per step
                self._device = jnp.asarray(self.Phi_working)
            S, Q = _dense_out_of_model(g, self._device, Phi_active, step=_WORKING_SLACK)
            s[self.working] = S[:n]
            q[self.working] = Q[:n]
        f = _with_in_model(s, q, g, np.asarray(active, dtype=int), alpha, alpha_bias)
        self.log.append(("working-set", len(active), int(n - np.isin(self.working, active).sum())))
        self.since_full += 1
        self.seconds["working_set"] += time.perf_counter() - t0
        return f

    def factors(self, g, active, alpha, alpha_bias, Phi_active) -> tuple[Factors, str]:
        if (self.config.scan == "full" or not self.log
                or self.since_full >= self.config.refresh_every):
            return self.full(g, active, alpha, alpha_bias, Phi_active), "full"
        return self.partial(g, active, alpha, alpha_bias, Phi_active), "working-set"


def _choose_action(f: Factors, active: np.ndarray, alpha: np.ndarray, alpha_bias: float,
                   config: SelectionConfig, K: int):
    """The next action as (priority, Delta L, kind, candidate index or -1 for the bias,
    new alpha), or None when converged; plus a short note when a wanted deletion is
    blocked."""
    options, note = _candidate_actions(f, active, alpha, alpha_bias, config, K)
    if not options:
        return None, note
    return max(options, key=lambda o: (o[0], o[1])), ""


def _candidate_actions(f: Factors, active: np.ndarray, alpha: np.ndarray, alpha_bias: float,
                       config: SelectionConfig, K: int):
    """Every action the rules allow at this state, each as in :func:`_choose_action`, and
    the note of a blocked deletion."""
    in_model = np.zeros(K, dtype=bool)
    in_model[active] = True
    alpha_cur = np.full(K, np.inf)
    alpha_cur[active] = alpha
    s, q = f.s, f.q
    alpha_new, relevant = optimal_alpha(s, q, config)
    delta = marginal_likelihood_term(alpha_new, s, q) - marginal_likelihood_term(alpha_cur, s, q)
    # an in-model s <= 0 (round-off on a column the data do not inform) makes l undefined;
    # such a column is deleted (not relevant) and its Delta L is taken as 0
    delta = np.where(np.isfinite(delta), delta, 0.0)

    options: list[tuple[float, int, str, int, float]] = []  # (priority, Delta L, kind, index, alpha)
    add = np.flatnonzero(~in_model & relevant)
    for k in add:
        options.append((0, float(delta[k]), "add", int(k), float(alpha_new[k])))
    for j, k in enumerate(active):
        if relevant[k]:
            if (abs(math.log(alpha_new[k]) - math.log(alpha[j])) >= config.min_delta_log_alpha
                    and delta[k] >= config.min_delta_log_evidence):
                options.append((0, float(delta[k]), "reestimate", int(k), float(alpha_new[k])))
        elif len(active) > 1:
            # q <= 0: the mean went negative; the truncated prior wants it out first
            options.append((1 if q[k] <= 0 else 0, float(delta[k]), "delete", int(k), math.inf))
    blocked = len(active) == 1 and not relevant[active[0]]

    if config.reestimate_bias:
        s0, q0 = f.s_bias, f.q_bias
        theta0 = q0**2 - s0
        if s0 > 0 and theta0 > config.zero_factor:
            a0 = min(s0**2 / theta0, config.max_alpha_bias)
        else:
            a0 = config.max_alpha_bias
        if abs(math.log(a0) - math.log(alpha_bias)) >= config.min_delta_log_alpha:
            d0 = float(marginal_likelihood_term(a0, max(s0, 1e-300), q0)
                       - marginal_likelihood_term(alpha_bias, max(s0, 1e-300), q0))
            if d0 >= config.min_delta_log_evidence:
                options.append((0, d0, "bias", -1, a0))
    return options, ("the only active basis function has theta <= 0 or q <= 0 and is kept"
                     if blocked and not options else "")


def _apply_reestimates(actions, active: np.ndarray, alpha: np.ndarray, alpha_bias: float):
    """alpha and alpha_bias with the re-estimates in ``actions`` (as from _candidate_actions)
    applied together."""
    alpha = alpha.copy()
    for _, _, kind, k, a_new in actions:
        if kind == "bias":
            alpha_bias = a_new
        else:
            alpha[int(np.flatnonzero(active == k)[0])] = a_new
    return alpha, float(alpha_bias)


def select_basis(Phi_all, y, gaussianize: GaussianizeFn, *, config: SelectionConfig | None = None,
                 score: Callable[[Gaussianized], float] | None = None,
                 progress: Callable[[int, dict[str, Any]], None] | None = None) -> SelectionResult:
    """Tipping & Faul's sequential add / re-estimate / delete for PCVM.

    - Phi_all: (N, K) candidate columns (label-signed basis; no bias column - the bias is
      always in the model), or :class:`KernelCandidates` for large N (the same columns,
      never formed: memory O(N M) instead of O(N K)). y: (N,) labels (0/1 or -1/+1).
    - gaussianize: engine callback, see ``GaussianizeFn`` (the type alias in this module).
    - score: optional; if given, the returned state is the visited one with the smallest
      score(Gaussianized) (EPCVM_EP keeps the model with the smallest leave-one-out
      error); by default the last one.
    - progress: optional; called after every step as ``progress(step, state)`` with state
      {"basis functions": M, "log evidence": after the step, "scan": "full" or
      "working-set"} (the scikit-learn classifier's verbose lines). It only reads.

    Returns a :class:`SelectionResult`.
    """
    config = SelectionConfig() if config is None else config
    t_start = time.perf_counter()
    Phi_all, t = check_candidates(Phi_all, y)
    N, K = Phi_all.shape
    timings = {"gaussianize": 0.0, "columns": 0.0}
    column_cache: dict[int, np.ndarray] = {}

    def columns_of(act: np.ndarray) -> np.ndarray:
        """Phi_all[:, act]; for kernel candidates from a cache of the columns in use."""
        if not isinstance(Phi_all, KernelCandidates):
            return Phi_all[:, act]
        t0 = time.perf_counter()
        missing = [int(k) for k in act if int(k) not in column_cache]
        if missing:
            for k, col in zip(missing, Phi_all.columns(np.asarray(missing)).T):
                column_cache[k] = col
        out = np.stack([column_cache[int(k)] for k in act], axis=1)
        timings["columns"] += time.perf_counter() - t0
        return out

    def fit(alpha_, alpha_bias_, Phi_active, warm):
        t0 = time.perf_counter()
        g_ = gaussianize(_spec_for(config.template, alpha_, alpha_bias_), Phi_active, t, warm)
        timings["gaussianize"] += time.perf_counter() - t0
        _check_gaussianized(g_, N, Phi_active.shape[1])
        return g_

    scanner = _Scanner(Phi_all, config)
    t0 = time.perf_counter()
    active = np.array([_initial_basis(Phi_all, t)])
    scanner.seconds["full_scan"] += time.perf_counter() - t0
    alpha = np.array([config.initial_alpha])
    alpha_bias = float(config.initial_alpha_bias)
    Phi_active = columns_of(active)
    g = fit(alpha, alpha_bias, Phi_active, None)
    trace = [float(g.log_evidence)]
    history: list[dict[str, Any]] = []
    n_inner_bad = 0 if g.converged else 1
    best = (score(g), 0, active, alpha, alpha_bias, g) if score is not None else None

    converged, reason, n_iter = False, "", 0
    factors = None
    # Cycle guard: the rules are deterministic in (active set, alpha), so a return to a
    # visited state repeats forever. It happens when the in-model and out-of-model
    # factors of one column disagree (EPCVM_Lap's indicator site is divided out of the
    # first but never entered the second): add k predicts a gain, and so does delete k.
    visited = {_state_key(active, alpha, alpha_bias): 0}
    light_states = [(active, alpha, alpha_bias)]
    while True:
        factors, scan = scanner.factors(g, active, alpha, alpha_bias, Phi_active)
        action, note = _choose_action(factors, active, alpha, alpha_bias, config, K)
        if action is None and scan != "full":
            # nothing left in the working set: only a full scan may declare convergence
            factors, scan = scanner.full(g, active, alpha, alpha_bias, Phi_active), "full"
            action, note = _choose_action(factors, active, alpha, alpha_bias, config, K)
        if action is None:
            converged, reason = True, note
            break
        if n_iter >= config.max_iter:
            reason = f"iteration cap ({config.max_iter}) reached with actions still pending"
            break
        _, delta, kind, k, a_new = action
        old_active = active
        record = {"iteration": n_iter + 1, "action": kind, "index": k, "alpha_new": a_new,
                  "delta_predicted": delta, "log_evidence_before": trace[-1]}
        if config.scan != "full":
            record["scan"] = scan
            if config.audit and scan != "full":
                t_audit = time.perf_counter()
                full = sparsity_quality_factors(g, Phi_all, active, alpha, alpha_bias, Phi_active)
                paper, _ = _choose_action(full, active, alpha, alpha_bias, config, K)
                record["audit_same_action"] = paper is not None and paper[2:4] == action[2:4]
                record["audit_paper_action"] = None if paper is None else (paper[2], paper[3], paper[1])
                timings["audit"] = timings.get("audit", 0.0) + time.perf_counter() - t_audit
        g_next = None
        if config.reestimate == "batch" and kind in ("reestimate", "bias"):
            batch = [o for o in _candidate_actions(factors, active, alpha, alpha_bias, config, K)[0]
                     if o[2] in ("reestimate", "bias")]
            if len(batch) > 1:
                alpha_b, alpha_bias_b = _apply_reestimates(batch, active, alpha, alpha_bias)
                warm = WarmStart(np.asarray(g.mean), g, active, active)
                g_b = fit(alpha_b, alpha_bias_b, Phi_active, warm)
                keep = g_b.log_evidence - trace[-1] >= delta
                record.update(batch_size=len(batch), single_delta_predicted=delta)
                if not keep:  # fit the paper's single step as well; keep the higher
                    alpha_s, alpha_bias_s = _apply_reestimates([action], active, alpha, alpha_bias)
                    g_s = fit(alpha_s, alpha_bias_s, Phi_active, warm)
                    keep = g_b.log_evidence >= g_s.log_evidence
                    record.update(batch_log_evidence=float(g_b.log_evidence),
                                  single_log_evidence=float(g_s.log_evidence))
                    if not keep:
                        g_next = g_s
                if keep:
                    kind, g_next = "batch", g_b
                    record.update(action="batch", index=None, indices=[o[3] for o in batch],
                                  delta_predicted=float(sum(o[1] for o in batch)))
                    alpha, alpha_bias = alpha_b, alpha_bias_b
        if kind == "batch":
            pass  # applied above
        elif kind == "add":
            record["alpha_old"] = math.inf
            active = np.append(active, k)
            alpha = np.append(alpha, a_new)
        elif kind == "reestimate":
            j = int(np.flatnonzero(active == k)[0])
            record["alpha_old"] = float(alpha[j])
            alpha = alpha.copy()
            alpha[j] = a_new
        elif kind == "delete":
            j = int(np.flatnonzero(active == k)[0])
            record["alpha_old"] = float(alpha[j])
            record["forced_by_truncation"] = bool(factors.q[k] <= 0)
            scanner.include(k, Phi_active[:, j])
            active = np.delete(active, j)
            alpha = np.delete(alpha, j)
        else:  # bias
            record["alpha_old"] = alpha_bias
            alpha_bias = a_new
        warm = WarmStart(_map_mean(np.asarray(g.mean), old_active, active), g, active, old_active)
        if kind in ("add", "delete"):  # re-estimates keep the columns
            Phi_active = columns_of(active)
        g = fit(alpha, alpha_bias, Phi_active, warm) if g_next is None else g_next
        n_iter += 1
        n_inner_bad += 0 if g.converged else 1
        trace.append(float(g.log_evidence))
        record["log_evidence_after"] = trace[-1]
        record["n_active"] = int(len(active))
        history.append(record)
        if progress is not None:
            progress(n_iter, {"basis functions": int(len(active)), "log evidence": trace[-1], "scan": scan})
        if score is not None:
            sc = score(g)
            if sc <= best[0]:
                best = (sc, n_iter, active, alpha, alpha_bias, g)
        key = _state_key(active, alpha, alpha_bias)
        if key in visited:
            first = visited[key]
            cycle = history[first:]
            reason = (f"cycle: step {n_iter} returned to the state of step {first} ("
                      + ", ".join(f"{h['action']} {h['index'] if h['index'] is not None else len(h['indices'])}"
                                  for h in cycle[:6])
                      + (", ..." if len(cycle) > 6 else "") + "); stopped there")
            if score is None:
                # every state of the cycle recurs; keep the one with the highest evidence
                j = first + int(np.argmax(trace[first:n_iter]))
                if j != first:  # the state of step `first` is the current one
                    active, alpha, alpha_bias = light_states[j]
                    warm = WarmStart(_map_mean(np.asarray(g.mean), light_states[first][0], active), g,
                                     active, light_states[first][0])
                    g = fit(alpha, alpha_bias, columns_of(active), warm)
                    reason += f"; returned the cycle's best state (step {j})"
            factors = None  # the loop's factors belong to the state before the last action
            break
        visited[key] = n_iter
        light_states.append((active, alpha, alpha_bias))
        if isinstance(Phi_all, KernelCandidates):  # keep only the columns in use
            in_use = set(active.tolist())
            for k_old in [k_ for k_ in column_cache if k_ not in in_use]:
                del column_cache[k_old]

    best_iteration = None
    if score is not None:
        _, best_iteration, active, alpha, alpha_bias, g = best
        factors = None if best_iteration != n_iter else factors
    total = time.perf_counter() - t_start
    timings.update(scanner.seconds)
    timings["total"] = total
    return SelectionResult(
        active=np.asarray(active, dtype=int),
        alpha=np.asarray(alpha, dtype=float),
        alpha_bias=float(alpha_bias),
        spec=_spec_for(config.template, alpha, alpha_bias),
        posterior=g,
        trace=np.asarray(trace),
        n_iter=n_iter,
        converged=converged,
        reason=reason,
        history=history,
        factors=factors,
        seconds=total,
        n_inner_unconverged=n_inner_bad,
        best_iteration=best_iteration,
        scans=list(scanner.log),
        timings=timings,
    )


def check_candidates(Phi_all, y):
    """(candidates, 0/1 labels): a dense Phi_all checked as a design, or KernelCandidates."""
    if isinstance(Phi_all, KernelCandidates):
        return Phi_all, check_binary_labels(y, n_samples=Phi_all.shape[0])
    return check_design(Phi_all, y, name="Phi_all")


def fit_with_selection(
    Phi_all, y, gaussianize: GaussianizeFn, *, engine: str, objective: str,
    engine_compile_stats: Callable[[], tuple[int, float]],
    cholesky_of: Callable[[Gaussianized], np.ndarray],
    extra: Callable[[SelectionResult, Gaussianized], dict[str, Any]],
    config: SelectionConfig | None = None, score: Callable[[Gaussianized], float] | None = None,
    refit: Callable[[SelectionResult], Gaussianized | None] | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> tuple[GaussianPosterior, SelectionResult]:
    """The selection driver both PCVM engines share (EPCVM_Lap and EPCVM_EP): run
    :func:`select_basis`, optionally refit the selected model, and assemble the
    Gaussian posterior over [b, w_active] with its FitInfo.

    - engine / objective: the FitInfo labels; engine_compile_stats: the engine's
      (count, seconds) compile counter, read before and after so that
      ``info.compile_seconds`` holds this call's compilation (engine programs and the
      selection's factor programs) and ``info.seconds`` the warm rest;
    - cholesky_of(g): the lower Cholesky factor of g.cov from the engine's state;
    - extra(selection, selected): engine-specific ``info.extra`` entries, given the final
      selection and the Gaussianization the selection itself ended with (before any
      refit);
    - score: as in :func:`select_basis`;
    - refit(selection): an optional final fit of the selected model (EP refits with its
      paper settings); None keeps the selection's own Gaussianization.
    - progress: as in :func:`select_basis`.

    Returns (posterior, selection) with ``posterior.spec = selection.spec``; predict with
    ``posterior.predict_proba(Phi_new[:, selection.active])``.
    """
    config = SelectionConfig() if config is None else config
    (n_engine, s_engine), (n_factors, s_factors) = engine_compile_stats(), compile_stats()
    t0 = time.perf_counter()
    selection = select_basis(Phi_all, y, gaussianize, config=config, score=score, progress=progress)
    selected = selection.posterior
    g = refit(selection) if refit is not None else None
    if g is not None:
        selection = dataclasses.replace(selection, posterior=g)
    g = selection.posterior
    elapsed = time.perf_counter() - t0
    (n_engine2, s_engine2), (n_factors2, s_factors2) = engine_compile_stats(), compile_stats()
    compile_s = (s_engine2 - s_engine) + (s_factors2 - s_factors)
    converged = bool(selection.converged and g.converged)
    reason = selection.reason if not selection.converged else ("" if g.converged else g.state.reason)
    info = FitInfo(
        engine=engine,
        converged=converged,
        n_iter=selection.n_iter,
        reason=reason,
        seconds=elapsed - compile_s,
        compile_seconds=compile_s,
        objective=objective,
        trace=np.asarray(selection.trace),
        extra={
            "active": np.asarray(selection.active),
            "log_evidence": float(g.log_evidence),
            "n_compiles": (n_engine2 - n_engine) + (n_factors2 - n_factors),
            "n_inner_unconverged": selection.n_inner_unconverged,
            **extra(selection, selected),
        },
    )
    spec, M = selection.spec, len(selection.active)
    posterior = GaussianPosterior(spec, spec.sites(M), np.asarray(g.mean), np.asarray(cholesky_of(g)), info)
    return posterior, selection


def _state_key(active: np.ndarray, alpha: np.ndarray, alpha_bias: float) -> tuple:
    """Hashable selection state; alphas to 10 significant digits (a revisit reproduces
    them to round-off, since the same factors give the same s^2 / theta)."""
    return (tuple(int(k) for k in active), tuple(float(f"{a:.10g}") for a in alpha),
            float(f"{alpha_bias:.10g}"))


def _check_gaussianized(g: Gaussianized, N: int, M: int) -> None:
    if np.shape(g.mean) != (M + 1,) or np.shape(g.cov) != (M + 1, M + 1):
        raise ValueError(
            f"gaussianize returned mean {np.shape(g.mean)} / cov {np.shape(g.cov)}; "
            f"expected ({M + 1},) / ({M + 1}, {M + 1}) for {M} active columns plus the bias"
        )
    if np.shape(g.noise_precision) != (N,) or np.shape(g.targets) != (N,):
        raise ValueError("gaussianize returned noise_precision/targets of the wrong length")
    if not (np.all(np.isfinite(g.mean)) and np.all(np.isfinite(g.cov)) and np.isfinite(g.log_evidence)
            and np.all(np.isfinite(g.noise_precision)) and np.all(np.isfinite(g.targets))):
        raise FloatingPointError("gaussianize returned a non-finite Gaussianization")
    if np.any(np.diag(g.cov) <= 0):
        raise FloatingPointError("gaussianize returned a covariance with a non-positive diagonal")
