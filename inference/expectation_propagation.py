"""EPCVM expectation propagation (Chen, Tino & Yao 2014, Sec. II-D) at frozen alpha
(derived in DERIVATIONS.md §1.4).

Target: the true PCVM posterior over the flat parameter theta = [b, w_1..w_M] (D = M+1),

    p(theta | y)  propto  N(theta | 0, diag(1/alpha_bias, 1/alpha))       (Gaussian prior)
                          * prod_i 2 * 1[w_i >= 0]                         (truncation sites)
                          * prod_n Phi(s_n a_n^T theta)                    (probit likelihood sites)

with a_n = [1, Phi_n] the n-th row of ``spec.flat_design(Phi)`` and s_n = 2 y_n - 1.

Every site is a factor of one projection u = g^T theta of theta: g = s_n a_n for a
likelihood site, g = e_i for the truncation site of weight i. Both are the same factor
family, Phi(u / eps) with eps^2 = 1 (probit) or eps -> 0 (the step function 1[u >= 0]),
so one routine computes the moments of both. A site is approximated by
exp(-tau u^2 / 2 + nu u) (natural parameters tau >= 0, nu); the paper's (m, v) are
m = nu / tau, v = 1 / tau (DERIVATIONS.md §1.4).

Updates are sequential, as in the paper: one sweep visits the N likelihood sites and then
the M truncation sites, each time forming the cavity, matching the moments of the tilted
distribution and applying the change as a rank-one (Sherman-Morrison) update of the
covariance (V_new = V - c (V g)(V g)^T: the minus sign of DERIVATIONS.md §1.4, which corrects the
"+" of the seed's step (f)). After every sweep the posterior is recomputed from the
site parameters by a Cholesky factorization of the precision (written as XLA loops, not
LAPACK calls: see ``_cholesky``), which stops the round-off drift of the rank-one
updates, and the EP approximation of log p(y | alpha) (the trace) and the leave-one-out
error estimate are evaluated from the cavities of that posterior.

Guard rule (counted in ``info.extra["guarded_updates"]``): an update is skipped, and the
site keeps its old parameters, when its cavity is not a proper Gaussian (cavity precision
<= 0) or when the proposed (damped) site would have a negative or non-finite precision.
Both sites are log-concave in u, so in exact arithmetic the tilted variance never
exceeds the cavity variance and neither case can occur; the guard is there for round-off
(e.g. a truncation site whose cavity lies hundreds of standard deviations below zero).
The tilted moments are computed with asymptotic series where the direct formulas cancel
(see ``_tilt_factors``), so in practice the guard does not fire.

Parallel schedule (``EPConfig(schedule="parallel")``): every site is updated at once from
the cavities of the same posterior, then the posterior is recomputed - one O(K D^2) pass
of a few matrix products instead of K dependent rank-one updates (about ten times
cheaper per sweep on Ripley). The fixed points are the same equations as the sequential
schedule's (each site equals the moment match against its own cavity), so both stop at
the same point up to the tolerance (tested). All site precisions stay >= 0, so q's
precision matrix stays positive definite under any step. Parallel EP is a Jacobi
iteration where the sequential one is Gauss-Seidel: it can overshoot (the step starts at
``damping`` and is halved whenever the largest proposed site change fails to decrease),
and it can crawl - on near-separable data with small alpha one mode of its Jacobian has
eigenvalue ~0.98 (seen on Ripley during selection: 445 parallel sweeps against 7
sequential ones). So the run watches its own rate: when the observed contraction
predicts more than ``EPConfig.handover`` further parallel sweeps, or half of
``max_sweeps`` is spent, it continues with sequential sweeps in the same compiled loop.
The sequential schedule (the paper's) stays the default of :func:`fit`; the basis
selection uses the parallel one for its many inner runs and then refits the selected
model sequentially.

Shapes: N data points, M basis columns, D = M + 1 parameters. Internally D is padded up to
a power of two >= ``_MIN_PADDED_DIM`` (beyond 64 a multiple of 64; padding coordinates:
unit prior precision, no data, no active site, hence exactly decoupled) so that basis
selection, which changes M often, reuses one or two compiled programs.
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
from jax.scipy.special import log_ndtr

from ..models.pcvm import PCVM
from ..models.checks import check_design, check_spec
from ..models.special import inverse_mills_ratio
from . import basis_selection
from .basis_selection import Gaussianized, SelectionConfig, SelectionResult, WarmStart
from .posterior import FitInfo, GaussianPosterior
from .compile_cache import CompiledPrograms, finish_each, fit_rows, padded_size, run_batched
from .linalg import lower_triangular_inverse
from .contracts import EndToEndFit

__all__ = [
    "EPConfig",
    "EPSites",
    "EPState",
    "EPResult",
    "Gaussianized",
    "fit",
    "fit_many",
    "run",
    "run_many",
    "gaussianize",
    "fit_with_selection",
    "fit_end_to_end",
    "SELECTION_EP_CONFIG",
    "compile_stats",
    "make_gaussianizer",
    "loo_score",
    "EPGaussianizationState",
    "site_moments",
    "sparsity_quality",
]

#: the parameter dimension is padded to a power of two >= this: one compiled program
#: covers every model with up to 15 basis functions (the usual size after selection)
_MIN_PADDED_DIM = 16
#: the parallel schedule halves its step at most down to this
_MIN_PARALLEL_STEP = 2.0**-10
#: the parallel schedule judges its contraction over the last _RATE_WINDOW sweeps, and
#: hands over to sequential sweeps (EPConfig.handover) never before _SWITCH_MIN_SWEEPS
#: parallel sweeps (the first ones are a transient)
_RATE_WINDOW = 3
_SWITCH_MIN_SWEEPS = 6
_SCHEDULES = ("sequential", "parallel")
#: below z = -_SERIES_SWITCH the tilted moments use asymptotic series in 1/z^2; there
#: the direct formula (relative error ~ eps z^4) and the 9-term series agree to ~5e-11
_SERIES_SWITCH = 18.0
_LOG_2 = math.log(2.0)

# Asymptotic series in u = 1/z^2 (z -> -inf) of 1 - kappa(z) and |z| h(z), see
# _tilt_factors. Coefficients derived by exact power-series arithmetic from the
# Mills-ratio expansion R(x) = sum_k (-1)^k (2k-1)!! x^-(2k+1), x = -z.
_VAR_RATIO_SERIES = (1.0, -6.0, 50.0, -518.0, 6354.0, -89782.0, 1435330.0, -25625910.0, 505785122.0)
_SITE_MEAN_SERIES = (2.0, -6.0, 42.0, -414.0, 5058.0, -72486.0, 1182762.0, -21573054.0, 434358018.0)


# --------------------------------------------------------------------------------------
# configuration, state
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EPConfig:
    """Settings of the EP engine.

    max_sweeps: cap on full passes over all sites (the paper gives none; 100 is ample:
        Ripley with 20 columns and alpha = 10 converges in 7).
    tolerance: stop when no site parameter (tau, nu) changed by more than this over a
        sweep, relative to ``max(1, |old value|)`` (the paper: "until the sites converge").
    damping: step in natural parameters, new = (1 - damping) old + damping proposed;
        1.0 is the undamped EP of the paper. For the parallel schedule it is the initial
        step, halved whenever the largest proposed site change fails to decrease.
    schedule: "sequential" (the paper's: one site after the other, each update seen by
        the next) or "parallel" (all sites from the same posterior, then one
        recomputation; much cheaper per sweep, same fixed point; the convergence test
        then uses the proposed, undamped change; a run that converges slowly switches to
        sequential sweeps, see the module docstring). max_sweeps caps both together.
    truncation_sites: True (the paper's EP). False switches PCVM's M truncation sites off:
        EP then approximates the posterior under the untruncated N(0, 1/alpha) prior, which
        is not PCVM's. It exists as a planted defect for ``validation/runs/battery.py`` (what an
        implementation that forgot the truncation would return); never use it otherwise.
    step_control: True (ours). False turns the parallel schedule into naive undamped
        Jacobi EP: the step stays at ``damping`` (no halving when the site changes stop
        decreasing) and the run never hands over to sequential sweeps; if it has not
        converged after max_sweeps it returns its last iterate (``converged`` False). Like
        ``truncation_sites`` it exists only as a planted defect ("EP without damping").
    handover: (parallel schedule) continue with sequential sweeps once the observed
        contraction predicts more than this many further parallel sweeps (on Ripley a
        sequential sweep costs ~15-20 parallel ones and converges several times faster
        where parallel EP crawls; 30-100 gave the same selection time within noise).
    """

    max_sweeps: int = 100
    tolerance: float = 1e-6
    damping: float = 1.0
    schedule: str = "sequential"
    handover: float = 50.0
    truncation_sites: bool = True
    step_control: bool = True

    def __post_init__(self):
        if not (isinstance(self.max_sweeps, (int, np.integer)) and self.max_sweeps >= 1):
            raise ValueError(f"max_sweeps must be a positive integer, got {self.max_sweeps!r}")
        if not (np.isfinite(self.tolerance) and self.tolerance > 0):
            raise ValueError(f"tolerance must be positive and finite, got {self.tolerance!r}")
        if not (0.0 < self.damping <= 1.0):
            raise ValueError(f"damping must be in (0, 1], got {self.damping!r}")
        if self.schedule not in _SCHEDULES:
            raise ValueError(f"schedule must be one of {_SCHEDULES}, got {self.schedule!r}")
        if not self.handover >= 0:
            raise ValueError(f"handover must be >= 0, got {self.handover!r}")


class EPSites(NamedTuple):
    """Natural parameters of all K site approximations exp(-tau u^2/2 + nu u).

    Order: the N likelihood sites, then one truncation site per (padded) weight.
    precision: (K,) tau >= 0; shift: (K,) nu.
    """

    precision: jnp.ndarray
    shift: jnp.ndarray


class EPProblem(NamedTuple):
    """The arrays that define one EP problem (padded shapes).

    directions: (K, Dp) rows g_k with u_k = g_k^T theta; noise_var: (K,) 1 for probit
    sites, 0 for step sites; active: (K,) False for the truncation sites of padding
    coordinates; is_likelihood: (K,); prior_precision: (Dp,); n_weights: number of real
    (unpadded) weights M, for the 2^M normaliser of the truncated prior.
    """

    directions: jnp.ndarray
    noise_var: jnp.ndarray
    active: jnp.ndarray
    is_likelihood: jnp.ndarray
    prior_precision: jnp.ndarray
    n_weights: jnp.ndarray


class EPState(NamedTuple):
    """State of the sweep loop.

    mean (Dp,), cov (Dp, Dp): current Gaussian q(theta); chol_cov: lower Cholesky
    factor of cov (from the last recomputation); sites: EPSites; sweep: sweeps done;
    max_change: largest relative site change of the last sweep; guarded: (2,) skipped
    updates so far [likelihood, truncation]; finite: posterior is finite; log_evidence,
    loo_error, cavity_mean (K,), cavity_var (K,): monitors at the current posterior (NaN
    before the first sweep); step: the current damping (constant for the sequential
    schedule, adaptive for the parallel one); parallel: whether the next sweep is a
    parallel one; parallel_sweeps: how many were; the traces have one slot per possible
    sweep (NaN beyond ``sweep``).
    """

    mean: jnp.ndarray
    cov: jnp.ndarray
    chol_cov: jnp.ndarray
    sites: EPSites
    sweep: jnp.ndarray
    max_change: jnp.ndarray
    guarded: jnp.ndarray
    finite: jnp.ndarray
    log_evidence: jnp.ndarray
    loo_error: jnp.ndarray
    cavity_mean: jnp.ndarray
    cavity_var: jnp.ndarray
    step: jnp.ndarray
    parallel: jnp.ndarray
    parallel_sweeps: jnp.ndarray
    log_evidence_trace: jnp.ndarray
    change_trace: jnp.ndarray
    loo_error_trace: jnp.ndarray


class EPResult(NamedTuple):
    """Everything :func:`run` found, unpadded (D = M + 1).

    mean (D,), cov (D, D), chol (D, D) lower Cholesky factor of cov;
    likelihood_sites / truncation_sites: EPSites of sizes N and M;
    cavity_mean / cavity_var: (N,) cavity moments of u_n = s_n a_n^T theta at the final
    posterior; log_evidence: log Z_EP; loo_error; n_sweeps; converged; reason;
    guarded: {"likelihood": int, "truncation": int}; traces per sweep; seconds,
    compile_seconds; schedule: the schedule(s) actually run ("sequential", "parallel" or
    "parallel+sequential" when a parallel run switched); parallel_sweeps: how many of
    the sweeps were parallel.
    """

    mean: np.ndarray
    cov: np.ndarray
    chol: np.ndarray
    likelihood_sites: EPSites
    truncation_sites: EPSites
    cavity_mean: np.ndarray
    cavity_var: np.ndarray
    log_evidence: float
    loo_error: float
    n_sweeps: int
    converged: bool
    reason: str
    guarded: dict
    log_evidence_trace: np.ndarray
    change_trace: np.ndarray
    loo_error_trace: np.ndarray
    seconds: float
    compile_seconds: float
    schedule: str = "sequential"
    parallel_sweeps: int = 0


# --------------------------------------------------------------------------------------
# moments of the tilted distributions
# --------------------------------------------------------------------------------------
def _series(coefs, u):
    acc = jnp.zeros_like(u)
    for c in reversed(coefs):
        acc = acc * u + c
    return acc


def _tilt_factors(z):
    """kappa(z), 1 - kappa(z) and h(z) for the tilt Phi(.) at standardized cavity mean z.

    lambda = N(z)/Phi(z), kappa = lambda (z + lambda), h = z + 1/(z + lambda).
    1 - kappa is Var / sigma^2 of N(mu, sigma^2) truncated to [0, inf) at z = mu / sigma;
    h is the site mean in units of the tilt scale. As z -> -inf, kappa -> 1 and both
    direct formulas cancel catastrophically (relative error about eps z^4 and eps z^2);
    below z = -18 the asymptotic series in u = 1/z^2

        1 - kappa = u (1 - 6u + 50u^2 - 518u^3 + ...),  h = (2 - 6u + 42u^2 - ...) / |z|

    are used instead (the two forms agree to ~5e-11 at the switch). One erfcx call: the
    tilted moments sit in the innermost loop, and each special function adds compile time.
    """
    z_direct = jnp.maximum(z, -_SERIES_SWITCH)
    lam = inverse_mills_ratio(z_direct)
    z_plus_lam = z_direct + lam
    kappa_direct = lam * z_plus_lam
    z_series = jnp.minimum(z, -_SERIES_SWITCH)
    u = 1.0 / z_series**2
    use_series = z < -_SERIES_SWITCH
    one_minus_kappa = jnp.where(
        use_series, u * _series(_VAR_RATIO_SERIES, u), 1.0 - kappa_direct
    )
    kappa = jnp.where(use_series, 1.0 - one_minus_kappa, kappa_direct)
    h = jnp.where(
        use_series, _series(_SITE_MEAN_SERIES, u) / (-z_series), z_direct + 1.0 / z_plus_lam
    )
    return kappa, one_minus_kappa, h


def site_moments(cavity_mean, cavity_var, noise_var):
    """Moment matching for the factor Phi(u / eps) times the cavity N(u | mu, sigma^2).

    noise_var = eps^2: 1 for the probit likelihood, 0 for the step 1[u >= 0].
    Returns (tau, nu): the natural parameters of the Gaussian site that reproduces the
    tilted mean and variance. With s^2 = eps^2 + sigma^2, z = mu / s, lambda = N(z)/Phi(z),
    kappa = lambda (z + lambda)::

        tau  = kappa / (eps^2 + sigma^2 (1 - kappa))     (= 1/v_n of DERIVATIONS.md §1.4)
        m    = s (z + 1/(z + lambda))                     (= m_n of DERIVATIONS.md §1.4)
        nu   = tau m

    The tilted normaliser is Z = Phi(z). The tilted variance is sigma^2 - sigma^4 kappa / s^2.
    """
    scale = jnp.sqrt(noise_var + cavity_var)
    z = cavity_mean / scale
    kappa, one_minus_kappa, h = _tilt_factors(z)
    tau = kappa / (noise_var + cavity_var * one_minus_kappa)
    return tau, tau * (scale * h)


# --------------------------------------------------------------------------------------
# the EP iteration: init / sweep (pure functions)
# --------------------------------------------------------------------------------------
def _cholesky(P):
    """Lower Cholesky factor of a positive definite P (n, n), column by column.

    Why not ``jnp.linalg.cholesky``: on CPU that is a LAPACK call into the OpenBLAS that
    scipy loads, whose threads are not limited by ``import zoo`` (it loads later); at these
    sizes a call can wait longer for its threads than a whole parallel sweep takes
    (benchmarks/README.md, "Measurements behind design choices"). Column j is s / sqrt(s_j) below the
    diagonal with s = P[:, j] - L L[j]^T, where only the columns < j of L are filled yet.
    Not positive definite: NaN (caught by the ``finite`` flag).
    """
    n = P.shape[0]
    rows = jnp.arange(n)

    def body(j, L):
        s = P[:, j] - L @ L[j]
        d = jnp.sqrt(s[j])
        return L.at[:, j].set(jnp.where(rows > j, s / d, jnp.where(rows == j, d, 0.0)))

    return jax.lax.fori_loop(0, n, body, jnp.zeros_like(P))




def _posterior_from_sites(problem: EPProblem, sites: EPSites):
    """Gaussian q(theta) from the prior and all sites: (mean, cov, chol_cov).

    chol_cov is the lower Cholesky factor C of cov = P^-1, from the Cholesky factor of
    the precision with rows and columns reversed: J P J = R R^T gives P^-1 = C C^T with
    C = J R^-T J, lower triangular. Unlike cholesky(P^-1) this never squares the
    condition number, which matters when a truncation site pins a weight with a huge
    precision.
    """
    G = problem.directions
    precision = jnp.diag(problem.prior_precision) + (G * sites.precision[:, None]).T @ G
    shift = G.T @ sites.shift
    R = _cholesky(precision[::-1, ::-1])
    C = lower_triangular_inverse(R).T[::-1, ::-1]
    cov = C @ C.T
    cov = 0.5 * (cov + cov.T)
    mean = C @ (C.T @ shift)
    return mean, cov, C


def _cavities(problem: EPProblem, sites: EPSites, mean, cov):
    """Marginal and cavity moments of every u_k; invalid (inactive) entries are harmless."""
    G = problem.directions
    post_var = jnp.sum((G @ cov) * G, axis=1)
    post_mean = G @ mean
    safe_post_var = jnp.where(problem.active, post_var, 1.0)
    cav_precision = 1.0 / safe_post_var - sites.precision
    cav_shift = post_mean / safe_post_var - sites.shift
    return safe_post_var, post_mean, cav_precision, cav_shift


def _log_evidence(problem: EPProblem, sites: EPSites, mean, chol_cov, post_var, post_mean,
                  cav_precision, cav_shift):
    """log Z_EP of the current sites, each normalised so that it integrates against its
    current cavity to the tilted normaliser Z_k:
        log Z_EP = Psi(q) - Psi(prior) + sum_k [ log Z_k + psi(cavity_k) - psi(q_k) ] + M log 2

    Psi(h, P) = h^T P^-1 h / 2 - log|P| / 2 is the Gaussian log-partition function in D
    dimensions, psi(m, s^2) = m^2 / (2 s^2) + log(s^2) / 2 its 1-D version for the marginal
    of u_k (q_k: under q, cavity_k: q without site k). M log 2 is the normaliser
    of the truncated prior 2 N(w | 0, 1/alpha) 1[w >= 0], so that the result approximates
    log p(y | alpha) of the model; it is exact when there is one site.
    """
    valid = cav_precision > 0
    cav_var = jnp.where(valid, 1.0 / jnp.where(valid, cav_precision, 1.0), 1.0)
    cav_mean = cav_shift * cav_var
    log_z = log_ndtr(cav_mean / jnp.sqrt(problem.noise_var + cav_var))
    site_terms = (
        log_z
        + 0.5 * jnp.log(cav_var) + 0.5 * cav_mean**2 / cav_var
        - 0.5 * jnp.log(post_var) - 0.5 * post_mean**2 / post_var
    )
    site_sum = jnp.sum(jnp.where(problem.active, site_terms, 0.0))
    shift = problem.directions.T @ sites.shift
    psi_post = 0.5 * mean @ shift + jnp.sum(jnp.log(jnp.diag(chol_cov)))  # -log|P|/2
    psi_prior = -0.5 * jnp.sum(jnp.log(problem.prior_precision))
    all_valid = jnp.all(valid | ~problem.active)
    value = psi_post - psi_prior + site_sum + problem.n_weights * _LOG_2
    return jnp.where(all_valid, value, jnp.nan), cav_mean, cav_var


def _loo_error(problem: EPProblem, cav_mean):
    """Fraction of likelihood sites whose cavity (leave-one-out) mean of s_n a_n^T theta
    is negative, i.e. misclassified by the cavity-mean classifier."""
    counted = problem.is_likelihood & problem.active
    return jnp.sum(counted & (cav_mean < 0.0)) / jnp.sum(counted)


def init(problem: EPProblem, sites: EPSites, trace_length: int, damping=1.0, parallel=False) -> EPState:
    """State with the given sites (zeros: q = prior, the paper's initialisation);
    trace_length: slots for the per-sweep monitors (at least the number of sweeps);
    damping: the (initial) step; parallel: start with parallel sweeps."""
    mean, cov, chol_cov = _posterior_from_sites(problem, sites)
    nan_trace = jnp.full((trace_length,), jnp.nan)
    return EPState(
        mean=mean,
        cov=cov,
        chol_cov=chol_cov,
        sites=sites,
        sweep=jnp.asarray(0),
        max_change=jnp.asarray(jnp.inf),
        guarded=jnp.zeros(2, dtype=jnp.int32),
        finite=jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(cov)),
        log_evidence=jnp.asarray(jnp.nan),
        loo_error=jnp.asarray(jnp.nan),
        cavity_mean=jnp.full_like(sites.shift, jnp.nan),
        cavity_var=jnp.full_like(sites.shift, jnp.nan),
        step=jnp.asarray(damping, dtype=sites.shift.dtype),
        parallel=jnp.asarray(parallel, dtype=bool),
        parallel_sweeps=jnp.asarray(0),
        log_evidence_trace=nan_trace,
        change_trace=nan_trace,
        loo_error_trace=nan_trace,
    )


def update_site(problem: EPProblem, carry, k, damping):
    """One sequential EP update of site k: cavity, moment matching, rank-one update.

    carry = (mean, cov, precision, shift, guarded). Returns the new carry and whether
    the update was guarded (skipped; see the module docstring for the rule).
    """
    mean, cov, precision, shift, guarded = carry
    g = problem.directions[k]
    active = problem.active[k]
    cov_g = cov @ g
    post_var = g @ cov_g
    post_mean = g @ mean
    tau_old, nu_old = precision[k], shift[k]

    safe_post_var = jnp.where(post_var > 0, post_var, 1.0)
    cav_precision = 1.0 / safe_post_var - tau_old
    cav_shift = post_mean / safe_post_var - nu_old
    cavity_ok = (post_var > 0) & (cav_precision > 0) & jnp.isfinite(cav_precision) & jnp.isfinite(cav_shift)
    cav_var = jnp.where(cavity_ok, 1.0 / jnp.where(cavity_ok, cav_precision, 1.0), 1.0)
    cav_mean = jnp.where(cavity_ok, cav_shift * cav_var, 0.0)

    tau_tilted, nu_tilted = site_moments(cav_mean, cav_var, problem.noise_var[k])
    tau_new = (1.0 - damping) * tau_old + damping * tau_tilted
    nu_new = (1.0 - damping) * nu_old + damping * nu_tilted
    site_ok = jnp.isfinite(tau_new) & jnp.isfinite(nu_new) & (tau_new >= 0.0)

    accept = active & cavity_ok & site_ok
    was_guarded = active & ~(cavity_ok & site_ok)
    d_tau = jnp.where(accept, tau_new - tau_old, 0.0)
    d_nu = jnp.where(accept, nu_new - nu_old, 0.0)
    # Sherman-Morrison: (P + d_tau g g^T)^-1 and the matching mean; 1 + d_tau var > 0
    # because the new site precision is >= 0 and the cavity is proper.
    denom = 1.0 + d_tau * jnp.where(accept, post_var, 0.0)
    cov = cov - jnp.outer(cov_g, cov_g) * (d_tau / denom)
    mean = mean + cov_g * ((d_nu - d_tau * jnp.where(accept, post_mean, 0.0)) / denom)
    precision = precision.at[k].add(d_tau)
    shift = shift.at[k].add(d_nu)
    kind = jnp.where(problem.is_likelihood[k], 0, 1)
    guarded = guarded.at[kind].add(was_guarded.astype(guarded.dtype))
    return (mean, cov, precision, shift, guarded), was_guarded


def _relative_change(new, old):
    return jnp.abs(new - old) / jnp.maximum(1.0, jnp.abs(old))


def _finish_sweep(problem: EPProblem, state: EPState, sites: EPSites, guarded, max_change, step,
                  parallel, parallel_sweeps) -> EPState:
    """A fresh posterior from the new sites (Cholesky of the precision: no drift) and the
    per-sweep monitors; shared by both schedules."""
    mean, cov, chol_cov = _posterior_from_sites(problem, sites)
    post_var, post_mean, cav_precision, cav_shift = _cavities(problem, sites, mean, cov)
    log_evidence, cav_mean, cav_var = _log_evidence(
        problem, sites, mean, chol_cov, post_var, post_mean, cav_precision, cav_shift
    )
    loo = _loo_error(problem, cav_mean)
    finite = jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(cov)) & jnp.isfinite(max_change)
    i = state.sweep
    return EPState(
        mean=mean,
        cov=cov,
        chol_cov=chol_cov,
        sites=sites,
        sweep=i + 1,
        max_change=max_change,
        guarded=guarded,
        finite=finite,
        log_evidence=log_evidence,
        loo_error=loo,
        cavity_mean=cav_mean,
        cavity_var=cav_var,
        step=step,
        parallel=parallel,
        parallel_sweeps=parallel_sweeps,
        log_evidence_trace=state.log_evidence_trace.at[i].set(log_evidence),
        change_trace=state.change_trace.at[i].set(max_change),
        loo_error_trace=state.loo_error_trace.at[i].set(loo),
    )


def sweep(problem: EPProblem, state: EPState, damping) -> EPState:
    """One sequential pass over all sites, then a fresh posterior and the monitors."""
    K = problem.directions.shape[0]

    def body(carry, k):
        return update_site(problem, carry, k, damping)

    carry0 = (state.mean, state.cov, state.sites.precision, state.sites.shift, state.guarded)
    (_, _, precision, shift, guarded), _ = jax.lax.scan(body, carry0, jnp.arange(K))
    change = jnp.maximum(
        _relative_change(precision, state.sites.precision), _relative_change(shift, state.sites.shift)
    )
    max_change = jnp.max(jnp.where(problem.active, change, 0.0))
    return _finish_sweep(problem, state, EPSites(precision, shift), guarded, max_change, state.step,
                         state.parallel, state.parallel_sweeps)


def parallel_sweep(problem: EPProblem, state: EPState, tolerance, max_sweeps, handover=50.0,
                   step_control=True) -> EPState:
    """Every site moment-matched against its cavity under the same q, one damped step.

    ``max_change`` is the largest relative change the undamped proposal would make
    (zero exactly at an EP fixed point, whatever the step). The step is halved (down to
    ``_MIN_PARALLEL_STEP``) when that change did not decrease since the last sweep: the
    sign of an overshooting, oscillating update. The guard rule is the sequential one.
    ``parallel`` turns False (sequential sweeps from now on) when the contraction of
    max_change over the last ``_RATE_WINDOW`` sweeps predicts more than ``handover``
    sweeps to reach the tolerance, or when half of max_sweeps is spent. ``step_control``
    False (the planted defect of EPConfig): neither halving nor handover.
    """
    sites = state.sites
    _, _, cav_precision, cav_shift = _cavities(problem, sites, state.mean, state.cov)
    cavity_ok = (cav_precision > 0) & jnp.isfinite(cav_precision) & jnp.isfinite(cav_shift)
    cav_var = jnp.where(cavity_ok, 1.0 / jnp.where(cavity_ok, cav_precision, 1.0), 1.0)
    cav_mean = jnp.where(cavity_ok, cav_shift * cav_var, 0.0)
    tau_tilted, nu_tilted = site_moments(cav_mean, cav_var, problem.noise_var)
    site_ok = jnp.isfinite(tau_tilted) & jnp.isfinite(nu_tilted) & (tau_tilted >= 0.0)
    accept = problem.active & cavity_ok & site_ok
    was_guarded = problem.active & ~(cavity_ok & site_ok)
    guarded = state.guarded + jnp.stack([
        jnp.sum(was_guarded & problem.is_likelihood), jnp.sum(was_guarded & ~problem.is_likelihood)
    ]).astype(state.guarded.dtype)
    change = jnp.maximum(
        _relative_change(tau_tilted, sites.precision), _relative_change(nu_tilted, sites.shift)
    )
    max_change = jnp.max(jnp.where(accept, change, 0.0))
    step = jnp.where(step_control & (max_change >= state.max_change),
                     jnp.maximum(0.5 * state.step, _MIN_PARALLEL_STEP), state.step)
    # a convex combination of precisions >= 0 stays >= 0: q's precision stays PD
    precision = jnp.where(accept, sites.precision + step * (tau_tilted - sites.precision), sites.precision)
    shift = jnp.where(accept, sites.shift + step * (nu_tilted - sites.shift), sites.shift)
    # contraction per sweep over the last _RATE_WINDOW sweeps (a single ratio is too
    # noisy: an overshoot that the step halving repairs makes it > 1 for one sweep)
    n_parallel = state.parallel_sweeps + 1
    earlier = state.change_trace[jnp.maximum(state.sweep - _RATE_WINDOW, 0)]
    rate = (max_change / earlier) ** (1.0 / _RATE_WINDOW)
    contracting = rate < 1.0
    predicted = jnp.where(
        max_change > tolerance,
        jnp.where(contracting, jnp.log(tolerance / max_change) / jnp.log(jnp.where(contracting, rate, 0.5)),
                  jnp.inf),
        0.0,
    )
    slow = (n_parallel >= _SWITCH_MIN_SWEEPS) & (predicted > handover)
    keep_parallel = ~step_control | (~slow & (2 * n_parallel < max_sweeps))
    return _finish_sweep(problem, state, EPSites(precision, shift), guarded, max_change, step,
                         keep_parallel, n_parallel)


def _run_loop(problem: EPProblem, sites: EPSites, tolerance, damping, max_sweeps, parallel,
              handover=50.0, step_control=True, *, trace_length: int, with_parallel: bool = True):
    """The sweep loop. with_parallel (static): compile both schedules into one program,
    ``parallel`` (run time) choosing the first sweep's - so that a parallel run that hands
    over, and the selection's final sequential refit, need no second compilation.
    Without it only the sequential sweep is compiled (``parallel`` is ignored): about
    half the compile time, for :func:`fit`."""
    state = init(problem, sites, trace_length, damping, parallel & with_parallel)

    def cond(s: EPState):
        return (s.sweep < max_sweeps) & (s.max_change > tolerance) & s.finite

    def body(s: EPState):
        if not with_parallel:
            return sweep(problem, s, damping)
        return jax.lax.cond(
            s.parallel,
            lambda s: parallel_sweep(problem, s, tolerance, max_sweeps, handover, step_control),
            lambda s: sweep(problem, s, damping),
            s,
        )

    state = jax.lax.while_loop(cond, body, state)
    return state, state.chol_cov


# compiled programs, keyed by the padded shapes, the trace length and whether the
# parallel schedule is compiled in
_PROGRAMS = CompiledPrograms("expectation_propagation")


def compile_stats() -> tuple[int, float]:
    """(number, total seconds) of EP programs compiled so far in this process."""
    return _PROGRAMS.stats()


def _trace_length(max_sweeps: int) -> int:
    """Trace buffers are rounded up to a power of two (>= 128): max_sweeps itself is a
    run-time argument, so changing it rarely costs a compilation."""
    return max(128, 1 << (int(max_sweeps) - 1).bit_length())


# The compiled program takes three packed arrays and returns one: with a dozen inputs
# and twenty outputs, the per-array transfer and dispatch cost (~30-60 us each on a busy
# CPU) was about half the time of a warm EP run inside the basis selection.
def _pack(problem: EPProblem, sites: EPSites, config: EPConfig):
    """(directions (K, Dp), per-site columns (K, 5), head (Dp + 7,)), all float64.

    columns: noise_var, active, is_likelihood, site precision, site shift;
    head: prior_precision, then n_weights, tolerance, damping, max_sweeps, parallel,
    handover, step_control.
    """
    columns = np.stack([problem.noise_var, problem.active, problem.is_likelihood,
                        sites.precision, sites.shift], axis=1).astype(np.float64)
    head = np.concatenate([
        np.asarray(problem.prior_precision, dtype=np.float64),
        [float(problem.n_weights), float(config.tolerance), float(config.damping),
         float(config.max_sweeps), float(config.schedule == "parallel"), float(config.handover),
         float(config.step_control)],
    ])
    return np.asarray(problem.directions, dtype=np.float64), columns, head


def _run_packed(directions, columns, head, *, trace_length: int, with_parallel: bool):
    Dp = directions.shape[1]
    problem = EPProblem(directions, columns[:, 0], columns[:, 1] > 0.5, columns[:, 2] > 0.5,
                        head[:Dp], head[Dp])
    sites = EPSites(columns[:, 3], columns[:, 4])
    tolerance, damping = head[Dp + 1], head[Dp + 2]
    max_sweeps = jnp.round(head[Dp + 3]).astype(jnp.int32)
    return _run_loop(problem, sites, tolerance, damping, max_sweeps, head[Dp + 4] > 0.5, head[Dp + 5],
                     head[Dp + 6] > 0.5,
                     trace_length=trace_length, with_parallel=with_parallel)


def _flat_output(*args, trace_length: int, with_parallel: bool):
    out = _run_packed(*args, trace_length=trace_length, with_parallel=with_parallel)
    leaves = jax.tree_util.tree_leaves(out)
    return jnp.concatenate([jnp.ravel(leaf).astype(jnp.float64) for leaf in leaves])


def _compiled(directions, columns, head, max_sweeps: int, parallel: bool):
    """(executable, unpack function, compile seconds) for these padded shapes.

    A parallel run needs the program with both schedules; a sequential run uses it if
    it is already compiled for this shape (e.g. the final refit of a selection), and
    otherwise compiles the sequential-only program.
    """
    trace_length = _trace_length(int(max_sweeps))
    both = (directions.shape, trace_length, True)
    key = both if parallel or both in _PROGRAMS else (directions.shape, trace_length, False)
    with_parallel = key[2]

    def build():
        program = partial(_run_packed, trace_length=trace_length, with_parallel=with_parallel)
        shapes = jax.eval_shape(program, directions, columns, head)
        leaves, treedef = jax.tree_util.tree_flatten(shapes)
        sizes = [int(np.prod(leaf.shape)) for leaf in leaves]
        offsets = np.cumsum([0] + sizes)

        def unpack(flat: np.ndarray):
            parts = [flat[a:b].reshape(leaf.shape).astype(leaf.dtype)
                     for a, b, leaf in zip(offsets[:-1], offsets[1:], leaves)]
            return jax.tree_util.tree_unflatten(treedef, parts)

        fn = jax.jit(partial(_flat_output, trace_length=trace_length, with_parallel=with_parallel))
        return fn.lower(directions, columns, head).compile(), unpack

    (compiled, unpack), seconds = _PROGRAMS.get(key, build)
    return compiled, unpack, seconds


# --------------------------------------------------------------------------------------
# problem assembly and the driver
# --------------------------------------------------------------------------------------
def _padded_dim(D: int) -> int:
    """The padded parameter dimension (compile_cache.padded_size, at least _MIN_PADDED_DIM)."""
    return padded_size(D, _MIN_PADDED_DIM)


def _alpha_vector(spec: PCVM, M: int) -> np.ndarray:
    """spec.alpha_vector(M) in numpy (this runs once per EP run of a selection, where a
    device round trip per call costs more than the EP sweeps)."""
    alpha = np.asarray(spec.alpha, dtype=float)
    if alpha.ndim == 0:
        return np.full(M, float(alpha))
    if alpha.shape != (M,):
        return np.asarray(spec.alpha_vector(M))  # raises the spec's own error
    return alpha


def _build_problem(spec: PCVM, Phi: np.ndarray, config: EPConfig) -> EPProblem:
    """The padded problem as host (numpy) arrays, before the labels sign it (see
    :func:`_labelled`): the likelihood directions are the rows [1 | Phi_n] of
    ``spec.flat_design(Phi)``. Everything here is shared by all data sets of one design,
    which is what lets :func:`run_many` run them as one program."""
    N, M = Phi.shape
    D = M + 1
    Dp = _padded_dim(D)
    directions = np.zeros((N + Dp - 1, Dp))
    directions[:N, 0] = 1.0
    directions[:N, 1:D] = Phi
    directions[N:, 1:] = np.eye(Dp - 1)  # truncation site of coordinate 1 + i
    noise_var = np.concatenate([np.ones(N), np.zeros(Dp - 1)])
    active = np.concatenate([np.ones(N, bool), np.arange(Dp - 1) < M])
    is_likelihood = np.concatenate([np.ones(N, bool), np.zeros(Dp - 1, bool)])
    prior_precision = np.ones(Dp)
    prior_precision[0] = float(spec.alpha_bias)
    prior_precision[1:D] = _alpha_vector(spec, M)
    problem = EPProblem(
        directions=directions,
        noise_var=noise_var,
        active=active,
        is_likelihood=is_likelihood,
        prior_precision=prior_precision,
        n_weights=np.float64(M),
    )
    if not config.truncation_sites:  # the planted defect (see EPConfig): likelihood sites only
        problem = problem._replace(active=problem.active & problem.is_likelihood, n_weights=np.float64(0.0))
    return problem


def _labelled(problem: EPProblem, y01: np.ndarray, M: int) -> EPProblem:
    """The problem of one data set: likelihood row n becomes s_n [1 | Phi_n], s_n = 2 y_n - 1,
    the only part of a problem that depends on y. Only the M + 1 real columns are signed
    (a sign flip is exact), so that the padding stays +0.0 rather than -0.0."""
    N = y01.shape[0]
    directions = problem.directions.copy()
    directions[:N, : M + 1] *= (2.0 * y01 - 1.0)[:, None]
    return problem._replace(directions=directions)


def _initial_sites(problem: EPProblem, N: int, M: int, likelihood_sites: EPSites | None = None,
                   truncation_sites: EPSites | None = None) -> EPSites:
    """All sites zero (q = prior, the paper's initialisation), or the given warm start
    (likelihood sites (N,), truncation sites (M,)) checked and placed."""
    K = problem.directions.shape[0]
    precision = np.zeros(K)
    shift = np.zeros(K)
    for start, size, given, label in ((0, N, likelihood_sites, "likelihood"), (N, M, truncation_sites, "truncation")):
        if given is None:
            continue
        tau0 = np.asarray(given.precision, dtype=float)
        nu0 = np.asarray(given.shift, dtype=float)
        if tau0.shape != (size,) or nu0.shape != (size,):
            raise ValueError(f"warm-start {label} sites must have shape ({size},), got {tau0.shape} and {nu0.shape}")
        if not (np.all(np.isfinite(tau0)) and np.all(np.isfinite(nu0)) and np.all(tau0 >= 0)):
            raise ValueError(f"warm-start {label} site precisions must be finite and >= 0, shifts finite")
        precision[start : start + size], shift[start : start + size] = tau0, nu0
    return EPSites(precision, shift)


def run_problem(problem: EPProblem, sites: EPSites, config: EPConfig):
    """Run the compiled sweep loop on an assembled problem (padded shapes).

    Returns (final EPState, lower Cholesky factor of its covariance, warm seconds,
    compile seconds), as host (numpy) arrays. Programs are cached by shape, so only
    the first call per shape compiles; its compile time is reported separately from the
    run time.
    """
    args = _pack(problem, sites, config)
    compiled, unpack, compile_seconds = _compiled(*args, config.max_sweeps, config.schedule == "parallel")
    start = time.perf_counter()
    state, chol_cov = unpack(np.asarray(compiled(*args)))
    return state, chol_cov, time.perf_counter() - start, compile_seconds


def _check_spec(spec) -> None:
    check_spec(spec, PCVM, "EP")
    if spec.surrogate:
        raise ValueError(
            "the EP engine approximates the true PCVM (probit link, hard truncation); "
            "use PCVM(surrogate=False). The surrogate model is the Laplace engine's."
        )


def run(
    spec: PCVM,
    Phi,
    y,
    *,
    config: EPConfig | None = None,
    likelihood_sites: EPSites | None = None,
    truncation_sites: EPSites | None = None,
) -> EPResult:
    """Run EP and return everything it computed (see :class:`EPResult`).

    Phi: (N, M) basis matrix (without the bias column); y: (N,) labels (0/1 or -1/+1);
    likelihood_sites (N,) / truncation_sites (M,): optional warm start (default: all
    sites zero, i.e. q = prior, the paper's initialisation).
    """
    config = EPConfig() if config is None else config
    _check_spec(spec)
    Phi, y01 = check_design(Phi, y)
    N, M = Phi.shape
    problem = _labelled(_build_problem(spec, Phi, config), y01, M)
    sites = _initial_sites(problem, N, M, likelihood_sites, truncation_sites)
    state, chol_cov, seconds, compile_seconds = run_problem(problem, sites, config)
    return _result(state, chol_cov, N, M, config, seconds, compile_seconds)


def _result(state: EPState, chol_cov, N: int, M: int, config: EPConfig, seconds: float,
            compile_seconds: float) -> EPResult:
    """The final state of one run (host arrays, padded shapes) as an :class:`EPResult`.

    Raises FloatingPointError when the posterior is not finite: the caller of :func:`run`
    sees it raised, each entry of :func:`run_many` as its own result.
    """
    D = M + 1
    n_sweeps = int(state.sweep)
    finite = bool(state.finite) and bool(np.all(np.isfinite(chol_cov[:D, :D])))
    if not finite:
        raise FloatingPointError(
            f"EP produced a non-finite posterior after {n_sweeps} sweeps "
            "(a site update overflowed); try damping < 1"
        )
    converged = float(state.max_change) <= config.tolerance
    reason = "" if converged else (
        f"reached max_sweeps={config.max_sweeps} with max relative site change "
        f"{float(state.max_change):.3g} > tolerance {config.tolerance:g}"
    )
    parallel_sweeps = int(state.parallel_sweeps)
    schedule = config.schedule
    if schedule == "parallel" and parallel_sweeps < n_sweeps:
        schedule = "parallel+sequential"
    precision = np.asarray(state.sites.precision)
    shift = np.asarray(state.sites.shift)
    guarded = np.asarray(state.guarded)
    return EPResult(
        mean=state.mean[:D],
        cov=state.cov[:D, :D],
        chol=chol_cov[:D, :D],
        likelihood_sites=EPSites(precision[:N], shift[:N]),
        truncation_sites=EPSites(precision[N : N + M], shift[N : N + M]),
        cavity_mean=state.cavity_mean[:N],
        cavity_var=state.cavity_var[:N],
        log_evidence=float(state.log_evidence),
        loo_error=float(state.loo_error),
        n_sweeps=n_sweeps,
        converged=converged,
        reason=reason,
        guarded={"likelihood": int(guarded[0]), "truncation": int(guarded[1])},
        log_evidence_trace=state.log_evidence_trace[:n_sweeps],
        change_trace=state.change_trace[:n_sweeps],
        loo_error_trace=state.loo_error_trace[:n_sweeps],
        seconds=seconds,
        compile_seconds=compile_seconds,
        schedule=schedule,
        parallel_sweeps=parallel_sweeps,
    )


def run_many(spec: PCVM, Phi, ys, *, config: EPConfig | None = None) -> list:
    """:func:`run` (cold start) for each row of ``ys`` (D, N), as one compiled program.

    Entry i is ``run(spec, Phi, ys[i], config=config)`` to round-off, or the exception
    that call would have raised (a refused label vector, a non-finite posterior), returned
    rather than raised so that one data set's failure does not lose the others. A bad
    spec or Phi concerns every entry and is raised.

    Only the likelihood directions s_n [1 | Phi_n] depend on y, so the data sets share
    one program: :func:`~zoo.inference.compile_cache.run_batched` over the signed
    directions, the site columns and the settings shared. Each EPResult's ``seconds`` and
    ``compile_seconds`` are the batch's divided by the number of data sets that ran in it
    (all of them unless some label vectors were refused).

    Under ``jax.vmap`` every data set runs until the slowest has stopped (each keeps its
    own final state), and for ``schedule="parallel"`` both sweep kinds are computed at
    every sweep (a run-time choice between them becomes a select), so a batch costs about
    the slowest member's sweeps times D.
    """
    config = EPConfig() if config is None else config
    _check_spec(spec)
    Phi, _ = check_design(Phi)
    N, M = Phi.shape
    problem = _build_problem(spec, Phi, config)
    # the site columns and the head (prior, settings) do not depend on y: shared
    _, columns, head = _pack(problem, _initial_sites(problem, N, M), config)
    trace_length = _trace_length(config.max_sweeps)
    # the sequential schedule needs no parallel sweep; compiling it in would make every
    # sweep of the batch compute both (see above)
    with_parallel = config.schedule == "parallel"
    program = partial(_run_packed, trace_length=trace_length, with_parallel=with_parallel)

    def run_rows(ys01):
        directions = np.stack([_labelled(problem, y01, M).directions for y01 in ys01])
        out, seconds, compile_seconds = run_batched(
            _PROGRAMS, ("run_packed", trace_length, with_parallel), program, (directions,), (columns, head))
        B = len(ys01)
        return finish_each(out, B, lambda i, item: _result(*item, N, M, config, seconds / B, compile_seconds / B))

    return fit_rows(ys, N, run_rows)


def fit(spec: PCVM, Phi, y, *, config: EPConfig | None = None) -> GaussianPosterior:
    """EP approximation N(mean, cov) of p([b, w] | y, alpha) for the true PCVM model.

    Phi: (N, M) basis matrix; y: (N,) labels. Returns a GaussianPosterior over the flat
    vector [b, w_1..w_M]. info.trace is log Z_EP per sweep; info.extra holds
    "log_evidence", "loo_error" (leave-one-out error from the likelihood cavities),
    "guarded_updates" ({"likelihood", "truncation"} counts of skipped updates),
    "guard_rule", "max_site_change" (per sweep), "loo_error_trace", "damping",
    "schedule" (the schedule(s) run, see :class:`EPConfig`) and "parallel_sweeps".
    """
    config = EPConfig() if config is None else config
    result = run(spec, Phi, y, config=config)
    return _to_posterior(spec, result, config)


def fit_many(spec: PCVM, Phi, ys, *, config: EPConfig | None = None) -> list:
    """:func:`fit` for each row of ``ys`` (D, N) on one design, as one compiled program
    (:func:`run_many`): entry i is ``fit(spec, Phi, ys[i], config=config)`` to round-off,
    or the exception that call would have raised. Each entry's ``info.seconds`` is the
    warm time of the whole batch divided by the number of data sets that ran in it, and
    ``info.compile_seconds`` the batch's compile time divided alike."""
    config = EPConfig() if config is None else config
    out = []
    for result in run_many(spec, Phi, ys, config=config):
        if isinstance(result, BaseException):
            out.append(result)
            continue
        try:
            out.append(_to_posterior(spec, result, config))
        except Exception as err:  # noqa: BLE001 - one data set's failure, as fit would raise it
            out.append(err)
    return out


# the batched form of the fixed-spec contract (inference/contracts.py)
fit.many = fit_many


def _to_posterior(spec: PCVM, result: EPResult, config: EPConfig) -> GaussianPosterior:
    M = result.mean.shape[0] - 1
    info = FitInfo(
        engine="ep",
        converged=result.converged,
        n_iter=result.n_sweeps,
        reason=result.reason,
        seconds=result.seconds,
        compile_seconds=result.compile_seconds,
        objective="log Z_EP (EP approximation of log p(y | alpha), truncated-prior normaliser included)",
        trace=result.log_evidence_trace,
        extra={
            "log_evidence": result.log_evidence,
            "loo_error": result.loo_error,
            "guarded_updates": dict(result.guarded),
            "guard_rule": "skip the update when the cavity precision <= 0 or the damped "
            "site precision is negative or non-finite",
            "max_site_change": result.change_trace,
            "loo_error_trace": result.loo_error_trace,
            "damping": float(config.damping),
            "schedule": result.schedule,
            "parallel_sweeps": result.parallel_sweeps,
        },
    )
    return GaussianPosterior(spec, spec.sites(M), result.mean, result.chol, info)


# --------------------------------------------------------------------------------------
# Gaussianization for the sequential basis selection (EPCVM_EP end to end)
# --------------------------------------------------------------------------------------
class EPGaussianizationState(NamedTuple):
    """What :func:`gaussianize` keeps in ``Gaussianized.state``.

    likelihood_sites: EPSites (N,); truncation_sites: EPSites (M,), in the order of the
    active columns; chol: (M+1, M+1) lower Cholesky factor of cov; loo_error;
    n_sweeps; guarded: skipped-update counts; reason: why EP did not converge ("" if it
    did); seconds / compile_seconds of this EP run; schedule: the schedule(s) run.
    """

    likelihood_sites: EPSites
    truncation_sites: EPSites
    chol: np.ndarray
    loo_error: float
    n_sweeps: int
    guarded: dict
    reason: str
    seconds: float
    compile_seconds: float
    schedule: str = "sequential"


def _gaussianized_from(result: EPResult, y01: np.ndarray) -> Gaussianized:
    signs = 2.0 * y01 - 1.0
    tau, nu = result.likelihood_sites
    # a site with zero precision carries no information; its target is irrelevant
    site_mean = np.where(tau > 0, nu / np.where(tau > 0, tau, 1.0), 0.0)
    # the truncation sites as per-coordinate factors (none on the bias): the selection
    # divides them out of the in-model factors, as it does Laplace's indicator expansion
    site_precision = np.concatenate([[0.0], result.truncation_sites.precision])
    site_shift = np.concatenate([[0.0], result.truncation_sites.shift])
    return Gaussianized(
        mean=result.mean,
        cov=result.cov,
        noise_precision=tau,
        targets=signs * site_mean,
        log_evidence=result.log_evidence,
        site_precision=site_precision,
        site_shift=site_shift,
        converged=result.converged,
        state=EPGaussianizationState(
            likelihood_sites=result.likelihood_sites,
            truncation_sites=result.truncation_sites,
            chol=result.chol,
            loo_error=result.loo_error,
            n_sweeps=result.n_sweeps,
            guarded=result.guarded,
            reason=result.reason,
            seconds=result.seconds,
            compile_seconds=result.compile_seconds,
            schedule=result.schedule,
        ),
    )


def _warm_sites(warm_start, N: int, M: int):
    """Initial sites from a WarmStart (or a previous Gaussianized): the likelihood sites
    as they were, and the truncation sites of columns that stay active (new columns 0)."""
    previous = getattr(warm_start, "previous", warm_start)
    if previous is None:
        return None, None
    state = getattr(previous, "state", None)
    if not isinstance(state, EPGaussianizationState):
        raise TypeError("warm_start must come from this engine's gaussianize")
    likelihood = state.likelihood_sites
    truncation = None
    if isinstance(warm_start, WarmStart):
        old = {int(k): j for j, k in enumerate(np.asarray(warm_start.previous_active))}
        tau, nu = np.zeros(M), np.zeros(M)
        for j, k in enumerate(np.asarray(warm_start.active)):
            i = old.get(int(k))
            if i is not None:
                tau[j] = state.truncation_sites.precision[i]
                nu[j] = state.truncation_sites.shift[i]
        truncation = EPSites(tau, nu)
    elif np.shape(state.truncation_sites.precision) == (M,):  # same active set
        truncation = state.truncation_sites
    return likelihood, truncation


def gaussianize(spec_active: PCVM, Phi_active, y, warm_start: WarmStart | None = None, *,
                config: EPConfig | None = None) -> Gaussianized:
    """EP on the active columns, returned as the regression problem basis selection needs.

    spec_active: PCVM with alpha (M,) and alpha_bias; Phi_active: (N, M) active columns;
    y: (N,) labels; warm_start: None, a :class:`~zoo.inference.basis_selection.WarmStart` from ``select_basis`` or a
    previous Gaussianized of this engine. EP restarts from its site parameters: all
    likelihood sites, and the truncation sites of columns that stay active (an added
    column's truncation site starts at zero).

    Returns Gaussianized(mean (M+1,), cov (M+1, M+1), noise_precision (N,), targets (N,),
    log_evidence = log Z_EP, site_precision (M+1,), site_shift (M+1,), converged,
    state: :class:`EPGaussianizationState`).

    The likelihood sites are Gaussian in the unsigned output f_n = a_n^T theta:
    Phi(s_n f_n) ~ N(t_n | f_n, 1/noise_precision_n) with t_n = s_n m_n, so that without
    truncation sites the posterior would be (A + Phi^T Lambda^-1 Phi)^-1 with Phi = [1|Phi]
    and Lambda = diag(1/noise_precision).

    Truncation sites: ``mean`` and ``cov`` are the FULL EP posterior, i.e. the truncation
    sites exp(-tau_i w_i^2/2 + nu_i w_i) are included; ``site_precision`` /
    ``site_shift`` hand them to the selection as [0, tau] / [0, nu] (the bias has none).
    The selection then treats them like the prior, as it treats Laplace's indicator
    expansion: with B = diag(noise_precision), Sigma = cov, mu = mean,

    * candidate j not in the model (it has no truncation site yet)::

          S_j = phi_j^T B phi_j - phi_j^T B Phi Sigma Phi^T B phi_j
          Q_j = phi_j^T B (t - Phi mu)

    * column m in the model, its own truncation site divided out::

          s_m = 1/Sigma_mm - alpha_m - tau_m,   q_m = mu_m / Sigma_mm - nu_m,

      the message the likelihood sites send to w_m - the same quantity S_j, Q_j measure
      for a column outside (see :func:`sparsity_quality`).
    """
    config = EPConfig() if config is None else config
    Phi_active, y01 = check_design(Phi_active, y, name="Phi_active")
    N, M = Phi_active.shape
    likelihood, truncation = (None, None) if warm_start is None else _warm_sites(warm_start, N, M)
    result = run(spec_active, Phi_active, y01, config=config,
                 likelihood_sites=likelihood, truncation_sites=truncation)
    return _gaussianized_from(result, y01)


def make_gaussianizer(config: EPConfig | None = None):
    """:func:`gaussianize` with a fixed EPConfig, in the 4-argument form select_basis calls."""
    return partial(gaussianize, config=config)


def sparsity_quality(gaussianized: Gaussianized, design_active, Phi_candidates, alpha_active, active_index=None):
    """Tipping-Faul s, q for every candidate column, with EP's truncation sites on the
    prior side.

    design_active: (N, M+1) = [1 | Phi_active]; Phi_candidates: (N, C) all candidate
    columns; alpha_active: (M,) alphas of the active weights; active_index: (M,) position
    of each active weight among the candidates (or None if none of them is a candidate).
    Returns (s, q), each (C,): out-of-model factors for inactive candidates, in-model
    factors with the weight's own truncation site divided out for the active ones. In the
    regression whose data are the likelihood sites plus one pseudo-observation per
    truncation site (target nu_i/tau_i, noise 1/tau_i, design row e_i), both are
    phi^T C^-1 phi and phi^T C^-1 t with C the covariance of the data without that
    column's contribution and without its own pseudo-observation. See :func:`gaussianize`;
    ``basis_selection.sparsity_quality_factors`` computes the same numbers.
    """
    B = np.asarray(gaussianized.noise_precision)
    t = np.asarray(gaussianized.targets)
    Sigma = np.asarray(gaussianized.cov)
    mu = np.asarray(gaussianized.mean)
    Ad = np.asarray(design_active)
    C = np.asarray(Phi_candidates)
    BC = B[:, None] * C
    proj = Ad.T @ BC  # (M+1, C)
    S = np.sum(C * BC, axis=0) - np.sum(proj * (Sigma @ proj), axis=0)
    Q = BC.T @ (t - Ad @ mu)
    s, q = S.copy(), Q.copy()
    if active_index is not None:
        idx = np.asarray(active_index, dtype=int)
        M = len(idx)
        g = gaussianized
        d = np.zeros(M + 1) if g.site_precision is None else np.asarray(g.site_precision)
        h = np.zeros(M + 1) if g.site_shift is None else np.asarray(g.site_shift)
        diag = np.diag(Sigma)[1:]
        s[idx] = 1.0 / diag - np.asarray(alpha_active, dtype=float) - d[1:]
        q[idx] = mu[1:] / diag - h[1:]
    return s, q


def loo_score(g: Gaussianized) -> float:
    """The EPCVM_EP model-selection score: EP's leave-one-out error estimate."""
    return float(g.state.loo_error)


#: EP settings of the runs inside the selection loop: the parallel schedule (same fixed
#: point as the sequential one, an order of magnitude cheaper per sweep)
SELECTION_EP_CONFIG = EPConfig(schedule="parallel")


def fit_with_selection(
    Phi_all, y, *, config: SelectionConfig | None = None, ep_config: EPConfig | None = None,
    selection_ep_config: EPConfig | None = None, progress=None,
) -> tuple[GaussianPosterior, SelectionResult]:
    """EPCVM_EP: sequential basis selection with EP Gaussianization.

    Phi_all: (N, K) candidate columns (e.g. ``pcvm_basis(X, y, width).transform(X)``), or
    ``basis_selection.KernelCandidates`` for large N (never formed); y: (N,) labels. As in the paper, the returned model is the visited one with the
    smallest leave-one-out error estimate (the latest among ties), not the last iterate.

    selection_ep_config: EP settings of the many runs inside the selection loop (default
        :data:`SELECTION_EP_CONFIG`, the parallel schedule at tolerance 1e-6).
    progress: ``progress(step, state)`` after every selection step
        (``basis_selection.select_basis``), or None.
    ep_config: EP settings of the final fit of the returned model (default ``EPConfig()``:
        the sequential EP of the paper, as :func:`fit` runs it), warm-started from the
        sites the selection found for it. Skipped when equal to ``selection_ep_config``.

    Returns (posterior, selection): the EP posterior over [b, w_active] with
    ``posterior.spec = selection.spec``; predict with
    ``posterior.predict_proba(Phi_new[:, selection.active])``. ``selection.posterior`` is
    the Gaussianization of that final fit. ``info.seconds`` is warm time; the compilation
    of EP programs and of the selection's factor programs is in ``info.compile_seconds``.
    ``info.extra``: "loo_error" / "log_evidence" of the final fit, "loo_error_selection"
    (the score the selection saw), "best_iteration", sweep and run counts, "n_handovers"
    (inner parallel runs that finished sequentially), the schedules used, and the
    guarded-update counts of all runs.
    """
    ep_config = EPConfig() if ep_config is None else ep_config
    selection_ep_config = SELECTION_EP_CONFIG if selection_ep_config is None else selection_ep_config
    # the counts of each inner run only (a whole state holds N-vectors of sites: kept
    # for every step, they would grow with N times the number of steps)
    runs: list[EPGaussianizationState] = []

    def gaussianize_and_log(spec_active, Phi_active, y_, warm_start):
        g = gaussianize(spec_active, Phi_active, y_, warm_start, config=selection_ep_config)
        runs.append(g.state._replace(likelihood_sites=None, truncation_sites=None, chol=None))
        return g

    def refit_with_paper_settings(selection):
        if ep_config == selection_ep_config:
            return None
        Phi_checked, y01 = basis_selection.check_candidates(Phi_all, y)
        return gaussianize(selection.spec, basis_selection.active_columns(Phi_checked, selection.active), y01,
                           selection.posterior, config=ep_config)

    def ep_details(selection, selected):
        state: EPGaussianizationState = selection.posterior.state
        refitted = selection.posterior is not selected
        return {
            "best_iteration": selection.best_iteration,
            "loo_error": state.loo_error,
            "loo_error_selection": loo_score(selected),
            "ep_sweeps": state.n_sweeps,
            "ep_sweeps_total": int(sum(r.n_sweeps for r in runs)),
            "guarded_updates": {  # all runs, the final refit included
                kind: int(sum(r.guarded[kind] for r in runs)) + (state.guarded[kind] if refitted else 0)
                for kind in ("likelihood", "truncation")
            },
            "n_ep_runs": len(runs),
            "selection_schedule": selection_ep_config.schedule,
            "n_handovers": int(sum(r.schedule == "parallel+sequential" for r in runs)),
            "final_schedule": state.schedule,
        }

    return basis_selection.fit_with_selection(
        Phi_all, y, gaussianize_and_log, engine="ep", objective="log Z_EP per selection iteration",
        engine_compile_stats=compile_stats, cholesky_of=lambda g: g.state.chol, extra=ep_details,
        config=config, score=loo_score, refit=refit_with_paper_settings, progress=progress,
    )


def fit_end_to_end(Phi_all, y, *, seed: int = 0, config: SelectionConfig | None = None,
                   ep_config: EPConfig | None = None, selection_ep_config: EPConfig | None = None,
                   progress=None):
    """Registry form of :func:`fit_with_selection` (deterministic: ``seed`` is unused)."""
    posterior, selection = fit_with_selection(Phi_all, y, config=config, ep_config=ep_config,
                                              selection_ep_config=selection_ep_config, progress=progress)
    return EndToEndFit(posterior=posterior, spec=selection.spec, active=np.asarray(selection.active))
