"""EPCVM expectation propagation (Chen, Tino & Yao 2014, Sec. II-D) at frozen alpha.

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
m = nu / tau, v = 1 / tau (NOTES 2.4).

Updates are sequential, as in the paper: one sweep visits the N likelihood sites and then
the M truncation sites, each time forming the cavity, matching the moments of the tilted
distribution and applying the change as a rank-one (Sherman-Morrison) update of the
covariance (V_new = V - c (V g)(V g)^T: the minus sign of NOTES 2.4, which corrects the
"+" of the seed's step (f)). After every sweep the posterior is recomputed from the site parameters by a
Cholesky factorization of the precision, which stops the round-off drift of the rank-one
updates, and the EP approximation of log p(y | alpha) (the trace) and the leave-one-out
error estimate are evaluated from the cavities of that posterior.

Guard rule (counted in ``info.extra["guarded_updates"]``): an update is skipped, and the
site keeps its old parameters, when its cavity is not a proper Gaussian (cavity precision
<= 0) or when the proposed (damped) site would have a negative or non-finite precision.
Both sites are log-concave in u, so in exact arithmetic the tilted variance never
exceeds the cavity variance and neither case can occur; the guard is there for round-off
(e.g. a truncation site whose cavity lies hundreds of standard deviations below zero).
The tilted moments are computed with asymptotic series where the direct formulas cancel
(see :func:`_tilt_factors`), so in practice the guard does not fire.

Shapes: N data points, M basis columns, D = M + 1 parameters. Internally D is padded up to
a multiple of ``_PAD`` (padding coordinates: unit prior precision, no data, no active
site, hence exactly decoupled) so that basis selection, which changes M often, reuses a
handful of compiled programs.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfcx, log_ndtr

from ..models.pcvm import PCVM
from ..validation.inputs import check_design
from .basis_selection import Gaussianized, SelectionConfig, SelectionResult, WarmStart, select_basis
from .posterior import FitInfo, GaussianPosterior

__all__ = [
    "EPConfig",
    "EPSites",
    "EPState",
    "EPResult",
    "Gaussianized",
    "fit",
    "run",
    "gaussianize",
    "fit_with_selection",
    "fit_end_to_end",
    "make_gaussianizer",
    "loo_score",
    "EPGaussianizationState",
    "site_moments",
    "sparsity_quality",
]

#: the parameter dimension is padded to a multiple of this (fewer recompilations)
_PAD = 8
#: below z = -_SERIES_SWITCH the tilted moments use asymptotic series in 1/z^2; there
#: the direct formula (relative error ~ eps z^4) and the 9-term series agree to ~5e-11
_SERIES_SWITCH = 18.0
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
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
        sweep, relative to max(1, |old value|) (the paper: "until the sites converge").
    damping: step in natural parameters, new = (1 - damping) old + damping proposed;
        1.0 is the undamped EP of the paper.
    """

    max_sweeps: int = 100
    tolerance: float = 1e-6
    damping: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.max_sweeps, (int, np.integer)) and self.max_sweeps >= 1):
            raise ValueError(f"max_sweeps must be a positive integer, got {self.max_sweeps!r}")
        if not (np.isfinite(self.tolerance) and self.tolerance > 0):
            raise ValueError(f"tolerance must be positive and finite, got {self.tolerance!r}")
        if not (0.0 < self.damping <= 1.0):
            raise ValueError(f"damping must be in (0, 1], got {self.damping!r}")


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

    mean (Dp,), cov (Dp, Dp): current Gaussian q(theta); chol_precision: lower Cholesky
    factor of its precision (from the last recomputation); sites: EPSites; sweep: sweeps done;
    max_change: largest relative site change of the last sweep; guarded: (2,) skipped
    updates so far [likelihood, truncation]; finite: posterior is finite; log_evidence,
    loo_error, cavity_mean (K,), cavity_var (K,): monitors at the current posterior (NaN
    before the first sweep); the traces have one slot per possible sweep (NaN beyond
    ``sweep``).
    """

    mean: jnp.ndarray
    cov: jnp.ndarray
    chol_precision: jnp.ndarray
    sites: EPSites
    sweep: jnp.ndarray
    max_change: jnp.ndarray
    guarded: jnp.ndarray
    finite: jnp.ndarray
    log_evidence: jnp.ndarray
    loo_error: jnp.ndarray
    cavity_mean: jnp.ndarray
    cavity_var: jnp.ndarray
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
    compile_seconds.
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


# --------------------------------------------------------------------------------------
# moments of the tilted distributions
# --------------------------------------------------------------------------------------
def _series(coefs, u):
    acc = jnp.zeros_like(u)
    for c in reversed(coefs):
        acc = acc * u + c
    return acc


def _inverse_mills(z):
    """lambda(z) = N(z) / Phi(z), accurate for all z (erfcx form; 0 for large z)."""
    return _SQRT_2_OVER_PI / erfcx(-z / math.sqrt(2.0))


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
    lam = _inverse_mills(z_direct)
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
    kappa = lambda (z + lambda):

        tau  = kappa / (eps^2 + sigma^2 (1 - kappa))     (= 1/v_n of NOTES 2.4)
        m    = s (z + 1/(z + lambda))                     (= m_n of NOTES 2.4)
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
def _posterior_from_sites(problem: EPProblem, sites: EPSites):
    """Gaussian q(theta) from the prior and all sites, by Cholesky of the precision."""
    G = problem.directions
    precision = jnp.diag(problem.prior_precision) + (G * sites.precision[:, None]).T @ G
    shift = G.T @ sites.shift
    L = jnp.linalg.cholesky(precision)
    eye = jnp.eye(G.shape[1])
    cov = jax.scipy.linalg.cho_solve((L, True), eye)
    cov = 0.5 * (cov + cov.T)
    mean = jax.scipy.linalg.cho_solve((L, True), shift)
    return mean, cov, L


def _cavities(problem: EPProblem, sites: EPSites, mean, cov):
    """Marginal and cavity moments of every u_k; invalid (inactive) entries are harmless."""
    G = problem.directions
    post_var = jnp.sum((G @ cov) * G, axis=1)
    post_mean = G @ mean
    safe_post_var = jnp.where(problem.active, post_var, 1.0)
    cav_precision = 1.0 / safe_post_var - sites.precision
    cav_shift = post_mean / safe_post_var - sites.shift
    return safe_post_var, post_mean, cav_precision, cav_shift


def _log_evidence(problem: EPProblem, sites: EPSites, mean, L, post_var, post_mean, cav_precision, cav_shift):
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
    psi_post = 0.5 * mean @ shift - jnp.sum(jnp.log(jnp.diag(L)))
    psi_prior = -0.5 * jnp.sum(jnp.log(problem.prior_precision))
    all_valid = jnp.all(valid | ~problem.active)
    value = psi_post - psi_prior + site_sum + problem.n_weights * _LOG_2
    return jnp.where(all_valid, value, jnp.nan), cav_mean, cav_var


def _loo_error(problem: EPProblem, cav_mean):
    """Fraction of likelihood sites whose cavity (leave-one-out) mean of s_n a_n^T theta
    is negative, i.e. misclassified by the cavity-mean classifier."""
    counted = problem.is_likelihood & problem.active
    return jnp.sum(counted & (cav_mean < 0.0)) / jnp.sum(counted)


def init(problem: EPProblem, sites: EPSites, trace_length: int) -> EPState:
    """State with the given sites (zeros: q = prior, the paper's initialisation);
    trace_length: slots for the per-sweep monitors (at least the number of sweeps)."""
    mean, cov, L = _posterior_from_sites(problem, sites)
    nan_trace = jnp.full((trace_length,), jnp.nan)
    return EPState(
        mean=mean,
        cov=cov,
        chol_precision=L,
        sites=sites,
        sweep=jnp.asarray(0),
        max_change=jnp.asarray(jnp.inf),
        guarded=jnp.zeros(2, dtype=jnp.int32),
        finite=jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(cov)),
        log_evidence=jnp.asarray(jnp.nan),
        loo_error=jnp.asarray(jnp.nan),
        cavity_mean=jnp.full_like(sites.shift, jnp.nan),
        cavity_var=jnp.full_like(sites.shift, jnp.nan),
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


def sweep(problem: EPProblem, state: EPState, damping) -> EPState:
    """One pass over all sites, then a fresh posterior and the per-sweep monitors."""
    K = problem.directions.shape[0]

    def body(carry, k):
        return update_site(problem, carry, k, damping)

    carry0 = (state.mean, state.cov, state.sites.precision, state.sites.shift, state.guarded)
    (_, _, precision, shift, guarded), _ = jax.lax.scan(body, carry0, jnp.arange(K))
    sites = EPSites(precision, shift)
    mean, cov, L = _posterior_from_sites(problem, sites)

    post_var, post_mean, cav_precision, cav_shift = _cavities(problem, sites, mean, cov)
    log_evidence, cav_mean, cav_var = _log_evidence(
        problem, sites, mean, L, post_var, post_mean, cav_precision, cav_shift
    )
    loo = _loo_error(problem, cav_mean)

    def rel_change(new, old):
        return jnp.abs(new - old) / jnp.maximum(1.0, jnp.abs(old))

    change = jnp.maximum(
        rel_change(precision, state.sites.precision), rel_change(shift, state.sites.shift)
    )
    max_change = jnp.max(jnp.where(problem.active, change, 0.0))
    finite = jnp.all(jnp.isfinite(mean)) & jnp.all(jnp.isfinite(cov)) & jnp.isfinite(max_change)
    i = state.sweep
    return EPState(
        mean=mean,
        cov=cov,
        chol_precision=L,
        sites=sites,
        sweep=i + 1,
        max_change=max_change,
        guarded=guarded,
        finite=finite,
        log_evidence=log_evidence,
        loo_error=loo,
        cavity_mean=cav_mean,
        cavity_var=cav_var,
        log_evidence_trace=state.log_evidence_trace.at[i].set(log_evidence),
        change_trace=state.change_trace.at[i].set(max_change),
        loo_error_trace=state.loo_error_trace.at[i].set(loo),
    )


def _run_loop(problem: EPProblem, sites: EPSites, tolerance, damping, max_sweeps, *, trace_length: int):
    state = init(problem, sites, trace_length)

    def cond(s: EPState):
        return (s.sweep < max_sweeps) & (s.max_change > tolerance) & s.finite

    state = jax.lax.while_loop(cond, lambda s: sweep(problem, s, damping), state)
    return state, _covariance_cholesky(state.chol_precision)


def _covariance_cholesky(L):
    """Lower-triangular C with C C^T = P^-1, given P = L L^T.

    P^-1 = L^-T L^-1; with L^-1 = Q R (QR), P^-1 = R^T R, so C = R^T (diagonal made
    positive). Unlike cholesky(P^-1) this never squares the condition number, which
    matters when a truncation site pins a weight with a huge precision.
    """
    L_inv = jax.scipy.linalg.solve_triangular(L, jnp.eye(L.shape[0]), lower=True)
    R = jnp.linalg.qr(L_inv, mode="r")
    signs = jnp.where(jnp.diag(R) < 0, -1.0, 1.0)
    return (signs[:, None] * R).T


# compiled programs, keyed by the padded shapes and the trace length
_COMPILED: dict[tuple, Any] = {}


def _trace_length(max_sweeps: int) -> int:
    """Trace buffers are rounded up to a power of two (>= 128): max_sweeps itself is a
    run-time argument, so changing it rarely costs a compilation."""
    return max(128, 1 << (int(max_sweeps) - 1).bit_length())


def _compiled(problem: EPProblem, sites: EPSites, tolerance, damping, max_sweeps):
    trace_length = _trace_length(int(max_sweeps))
    key = (problem.directions.shape, trace_length)
    if key in _COMPILED:
        return _COMPILED[key], 0.0
    start = time.perf_counter()
    fn = jax.jit(lambda p, s, t, d, n: _run_loop(p, s, t, d, n, trace_length=trace_length))
    compiled = fn.lower(problem, sites, tolerance, damping, max_sweeps).compile()
    _COMPILED[key] = compiled
    return compiled, time.perf_counter() - start


# --------------------------------------------------------------------------------------
# problem assembly and the driver
# --------------------------------------------------------------------------------------
def _padded_dim(D: int) -> int:
    return _PAD * ((D + _PAD - 1) // _PAD)


def _build_problem(spec: PCVM, Phi: np.ndarray, y01: np.ndarray) -> EPProblem:
    N, M = Phi.shape
    D = M + 1
    Dp = _padded_dim(D)
    signs = 2.0 * y01 - 1.0
    A = np.asarray(spec.flat_design(Phi))
    directions = np.zeros((N + Dp - 1, Dp))
    directions[:N, :D] = signs[:, None] * A
    directions[N:, 1:] = np.eye(Dp - 1)  # truncation site of coordinate 1 + i
    noise_var = np.concatenate([np.ones(N), np.zeros(Dp - 1)])
    active = np.concatenate([np.ones(N, bool), np.arange(Dp - 1) < M])
    is_likelihood = np.concatenate([np.ones(N, bool), np.zeros(Dp - 1, bool)])
    prior_precision = np.ones(Dp)
    prior_precision[0] = float(spec.alpha_bias)
    prior_precision[1:D] = np.asarray(spec.alpha_vector(M))
    return EPProblem(
        directions=jnp.asarray(directions),
        noise_var=jnp.asarray(noise_var),
        active=jnp.asarray(active),
        is_likelihood=jnp.asarray(is_likelihood),
        prior_precision=jnp.asarray(prior_precision),
        n_weights=jnp.asarray(float(M)),
    )


def run_problem(problem: EPProblem, sites: EPSites, config: EPConfig):
    """Run the compiled sweep loop on an assembled problem (padded shapes).

    Returns (final EPState, lower Cholesky factor of its covariance, warm seconds,
    compile seconds). Programs are cached by shape, so only the first call per shape
    compiles; its compile time is reported separately from the run time.
    """
    tolerance = jnp.asarray(float(config.tolerance))
    damping = jnp.asarray(float(config.damping))
    max_sweeps = jnp.asarray(int(config.max_sweeps))
    compiled, compile_seconds = _compiled(problem, sites, tolerance, damping, max_sweeps)
    start = time.perf_counter()
    state, chol_cov = jax.block_until_ready(compiled(problem, sites, tolerance, damping, max_sweeps))
    return state, chol_cov, time.perf_counter() - start, compile_seconds


def _check_spec(spec) -> None:
    if not isinstance(spec, PCVM):
        raise TypeError(f"the EP engine fits PCVM specs, got {type(spec).__name__}")
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
    problem = _build_problem(spec, Phi, y01)
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
    sites = EPSites(jnp.asarray(precision), jnp.asarray(shift))
    state, chol_cov, seconds, compile_seconds = run_problem(problem, sites, config)

    D = M + 1
    n_sweeps = int(state.sweep)
    finite = bool(state.finite) and bool(np.all(np.isfinite(np.asarray(chol_cov)[:D, :D])))
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
    precision = np.asarray(state.sites.precision)
    shift = np.asarray(state.sites.shift)
    guarded = np.asarray(state.guarded)
    return EPResult(
        mean=np.asarray(state.mean)[:D],
        cov=np.asarray(state.cov)[:D, :D],
        chol=np.asarray(chol_cov)[:D, :D],
        likelihood_sites=EPSites(precision[:N], shift[:N]),
        truncation_sites=EPSites(precision[N : N + M], shift[N : N + M]),
        cavity_mean=np.asarray(state.cavity_mean)[:N],
        cavity_var=np.asarray(state.cavity_var)[:N],
        log_evidence=float(state.log_evidence),
        loo_error=float(state.loo_error),
        n_sweeps=n_sweeps,
        converged=converged,
        reason=reason,
        guarded={"likelihood": int(guarded[0]), "truncation": int(guarded[1])},
        log_evidence_trace=np.asarray(state.log_evidence_trace)[:n_sweeps],
        change_trace=np.asarray(state.change_trace)[:n_sweeps],
        loo_error_trace=np.asarray(state.loo_error_trace)[:n_sweeps],
        seconds=seconds,
        compile_seconds=compile_seconds,
    )


def fit(spec: PCVM, Phi, y, *, config: EPConfig | None = None) -> GaussianPosterior:
    """EP approximation N(mean, cov) of p([b, w] | y, alpha) for the true PCVM model.

    Phi: (N, M) basis matrix; y: (N,) labels. Returns a GaussianPosterior over the flat
    vector [b, w_1..w_M]. info.trace is log Z_EP per sweep; info.extra holds
    "log_evidence", "loo_error" (leave-one-out error from the likelihood cavities),
    "guarded_updates" ({"likelihood", "truncation"} counts of skipped updates),
    "guard_rule", "max_site_change" (per sweep), "loo_error_trace" and "damping".
    """
    config = EPConfig() if config is None else config
    result = run(spec, Phi, y, config=config)
    return _to_posterior(spec, result, config)


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
    did); seconds / compile_seconds of this EP run.
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


def _gaussianized_from(result: EPResult, y01: np.ndarray) -> Gaussianized:
    signs = 2.0 * y01 - 1.0
    tau, nu = result.likelihood_sites
    # a site with zero precision carries no information; its target is irrelevant
    site_mean = np.where(tau > 0, nu / np.where(tau > 0, tau, 1.0), 0.0)
    return Gaussianized(
        mean=result.mean,
        cov=result.cov,
        noise_precision=tau,
        targets=signs * site_mean,
        log_evidence=result.log_evidence,
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
        ),
    )


def _warm_sites(warm_start, N: int, M: int):
    """Initial sites from a WarmStart (or a previous Gaussianized): the likelihood sites
    as they were, and the truncation sites of columns that stay active (new columns 0)."""
    previous = getattr(warm_start, "previous", warm_start)
    if previous is None:
        return None, None
    state = getattr(previous, "state", None)
    if isinstance(state, EPGaussianizationState):
        likelihood = state.likelihood_sites
    else:  # another engine's Gaussianization: its (B, t_hat) as regression sites
        raise TypeError("warm_start must come from this engine's gaussianize")
    truncation = None
    if isinstance(warm_start, WarmStart) and isinstance(state, EPGaussianizationState):
        old = {int(k): j for j, k in enumerate(np.asarray(warm_start.previous_active))}
        tau = np.zeros(M)
        nu = np.zeros(M)
        for j, k in enumerate(np.asarray(warm_start.active)):
            if int(k) in old:
                tau[j] = state.truncation_sites.precision[old[int(k)]]
                nu[j] = state.truncation_sites.shift[old[int(k)]]
        truncation = EPSites(tau, nu)
    elif np.shape(state.truncation_sites.precision) == (M,):  # same active set
        truncation = state.truncation_sites
    return likelihood, truncation


def gaussianize(spec_active: PCVM, Phi_active, y, warm_start: WarmStart | None = None, *,
                config: EPConfig | None = None) -> Gaussianized:
    """EP on the active columns, returned as the regression problem basis selection needs.

    spec_active: PCVM with alpha (M,) and alpha_bias; Phi_active: (N, M) active columns;
    y: (N,) labels; warm_start: None, a :class:`WarmStart` from ``select_basis`` or a
    previous Gaussianized of this engine. EP restarts from its site parameters: all
    likelihood sites, and the truncation sites of columns that stay active.

    Returns Gaussianized(mean (M+1,), cov (M+1, M+1), noise_precision (N,), targets (N,),
    log_evidence = log Z_EP, converged, state: :class:`EPGaussianizationState`).

    The likelihood sites are Gaussian in the unsigned output f_n = a_n^T theta:
    Phi(s_n f_n) ~ N(t_n | f_n, 1/noise_precision_n) with t_n = s_n m_n, so that without
    truncation sites the posterior would be (A + Phi^T Lambda^-1 Phi)^-1 with Phi = [1|Phi]
    and Lambda = diag(1/noise_precision).

    Truncation sites: ``mean`` and ``cov`` are the FULL EP posterior, i.e. the truncation
    sites t_i ~ exp(-tau_i w_i^2/2 + nu_i w_i) are included. They are equivalent to one
    extra pseudo-observation per active weight (target nu_i/tau_i, noise 1/tau_i, design
    row e_i). In that augmented regression the Tipping-Faul factors are, with
    B = diag(noise_precision), Sigma = cov, mu = mean (as basis_selection computes them,
    and :func:`sparsity_quality`):

    * candidate j not in the model (it has no truncation site yet; its augmented column
      is zero on the pseudo-rows), exactly:
          S_j = phi_j^T B phi_j - phi_j^T B Phi Sigma Phi^T B phi_j
          Q_j = phi_j^T B (t - Phi mu)          (not phi_j^T B t - ... Sigma Phi^T B t)
    * column m in the model (its truncation site counted as data, which is how the EP
      evidence log Z_EP depends on alpha_m at fixed sites):
          s_m = 1/Sigma_mm - alpha_m,   q_m = mu_m / Sigma_mm.
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
    """Tipping-Faul s, q for every candidate column, consistent with EP's truncation sites.

    design_active: (N, M+1) = [1 | Phi_active]; Phi_candidates: (N, C) all candidate
    columns; alpha_active: (M,) alphas of the active weights; active_index: (M,) position
    of each active weight among the candidates (or None if none of them is a candidate).
    Returns (s, q), each (C,): out-of-model factors for inactive candidates, in-model
    factors (truncation site counted as data) for the active ones. See :func:`gaussianize`;
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
        diag = np.diag(Sigma)[1:]
        s[idx] = 1.0 / diag - np.asarray(alpha_active, dtype=float)
        q[idx] = mu[1:] / diag
    return s, q


def loo_score(g: Gaussianized) -> float:
    """The EPCVM_EP model-selection score: EP's leave-one-out error estimate."""
    return float(g.state.loo_error)


def fit_with_selection(
    Phi_all, y, *, config: SelectionConfig | None = None, ep_config: EPConfig | None = None,
) -> tuple[GaussianPosterior, SelectionResult]:
    """EPCVM_EP: sequential basis selection with EP Gaussianization.

    Phi_all: (N, K) candidate columns (e.g. ``pcvm_basis(X, y, width).transform(X)``);
    y: (N,) labels. As in the paper, the returned model is the visited one with the
    smallest leave-one-out error estimate (the latest among ties), not the last iterate.

    Returns (posterior, selection): the EP posterior over [b, w_active] with
    ``posterior.spec = selection.spec``; predict with
    ``posterior.predict_proba(Phi_new[:, selection.active])``.
    """
    config = SelectionConfig() if config is None else config
    ep_config = EPConfig() if ep_config is None else ep_config
    runs: list[EPGaussianizationState] = []

    def gaussianize_and_log(spec_active, Phi_active, y_, warm_start):
        g = gaussianize(spec_active, Phi_active, y_, warm_start, config=ep_config)
        runs.append(g.state)
        return g

    t0 = time.perf_counter()
    selection = select_basis(Phi_all, y, gaussianize_and_log, config=config, score=loo_score)
    elapsed = time.perf_counter() - t0
    compile_s = float(sum(r.compile_seconds for r in runs))
    g = selection.posterior
    state: EPGaussianizationState = g.state
    spec = selection.spec
    converged = bool(selection.converged and g.converged)
    reason = selection.reason if not selection.converged else ("" if g.converged else state.reason)
    info = FitInfo(
        engine="ep",
        converged=converged,
        n_iter=selection.n_iter,
        reason=reason,
        seconds=elapsed - compile_s,
        compile_seconds=compile_s,
        objective="log Z_EP per selection iteration",
        trace=np.asarray(selection.trace),
        extra={
            "active": np.asarray(selection.active),
            "best_iteration": selection.best_iteration,
            "loo_error": state.loo_error,
            "log_evidence": float(g.log_evidence),
            "ep_sweeps": state.n_sweeps,
            "ep_sweeps_total": int(sum(r.n_sweeps for r in runs)),
            "guarded_updates": {
                kind: int(sum(r.guarded[kind] for r in runs)) for kind in ("likelihood", "truncation")
            },
            "n_ep_runs": len(runs),
        },
    )
    M = len(selection.active)
    posterior = GaussianPosterior(spec, spec.sites(M), np.asarray(g.mean), np.asarray(state.chol), info)
    return posterior, selection


def fit_end_to_end(Phi_all, y, *, seed: int = 0, config: SelectionConfig | None = None,
                   ep_config: EPConfig | None = None):
    """Registry form of :func:`fit_with_selection` (deterministic: ``seed`` is unused)."""
    from .registry import EndToEndFit

    posterior, selection = fit_with_selection(Phi_all, y, config=config, ep_config=ep_config)
    return EndToEndFit(posterior=posterior, spec=selection.spec, active=np.asarray(selection.active))
