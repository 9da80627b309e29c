"""Importance weights of an approximation against the model's own density, and the
importance-corrected draws they give: Pareto-smoothed importance resampling (PSIS).

Any engine whose result has a density q can be used as an importance proposal for the
exact posterior p(theta | y): the draws theta_s ~ q, weighted by w_s = p(theta_s, y) / q(theta_s),
estimate every posterior expectation, and resampling the draws with probabilities
proportional to the weights turns them into (approximately) draws of p. Whether that can
be trusted is decided by the same weights: the Pareto k-hat of their upper tail
(Vehtari, Simpson, Gelman, Yao & Gabry 2024). Below min(1 - 1/log10 S, 0.7), S the
number of draws the weights were fitted from (:func:`khat_threshold`), the smoothed estimate
is reliable; above it the weights' variance is effectively infinite, or too large for S draws
to estimate, and q cannot be repaired - the proposal misses posterior mass that the weights
cannot put back. DERIVATIONS.md §8.4.

Two sources of weights:

* a :class:`~zoo.inference.posterior.GaussianPosterior` over the flat measured sites (Laplace, EP, VB): its draws
  are weighted with the model's density of those sites, ``spec.log_density_sites`` where
  the other latents integrate out in closed form, else the NumPyro model's log joint; a
  model whose sites' density has no closed form (gridRVM) is weighted on the joint with
  the approximation's factors over the other latents (``hyper_factors``). A draw outside
  the target's support (a negative weight of PCVM) has weight 0.
* a :class:`~zoo.inference.posterior.DrawsPosterior` that carries ``log_weights`` (SVI's guides, Pathfinder,
  auto-laplace): the engine computed log p(z, y) - log q(z) on the model's whole latent
  space z when it drew.

The smoothing (:func:`psis`): the largest M = ceil(min(S / 5, 3 sqrt(S))) of S raw weights
are replaced by the expected order statistics of a generalized Pareto distribution fitted
to their excesses over the (M+1)-th largest (the profile-posterior estimate of Zhang &
Stephens 2009, its shape then pulled towards 0.5 by a weak prior worth 10 observations, as
in the PSIS paper), never above the largest raw weight. The fitted shape is k-hat.
``tests/inference/test_importance.py`` checks this against ArviZ's ``psislw``, which the zoo's
metrics use, to round-off.
"""
from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.util import log_density
from scipy.special import logsumexp

from ..models.base import as_jax, is_classifier, problem_shape, problem_sites, unflatten
from .compile_cache import CompiledPrograms, SameObject
from .posterior import ApproximationFailed, DrawsPosterior, FitInfo

__all__ = ["KHAT_GOOD", "KHAT_TRUSTED", "khat_threshold", "khat_reading", "psis", "corrected", "corrected_fit", "weighted_draws", "support_mask",
           "inside_support", "log_joint_fn", "importance_log_weights", "joint_importance_log_weights",
           "joint_weights_problem", "on_joint"]

#: the cap of :func:`khat_threshold`: above 0.7 no number of draws makes the estimate
#: reliable (the PSIS paper's threshold for large S; the metrics' KHAT_OK)
KHAT_TRUSTED = 0.7
#: at or below this k-hat the importance-sampling estimate converges at the Monte Carlo rate:
#: the proposal is close to the target in its tails too (Vehtari et al. 2024)
KHAT_GOOD = 0.5
#: the three readings of :func:`khat_reading`, the one scale every table and lesson uses
KHAT_READINGS = ("good", "usable with care", "unreliable")


def khat_threshold(n_draws: int) -> float:
    """The largest Pareto k-hat at which an importance-sampling estimate from ``n_draws``
    draws is reliable: min(1 - 1 / log10 S, 0.7) (Vehtari et al. 2024, Section 3.2.4: the
    number of draws needed for a given relative error grows like S^(1/(1-k)), so with few
    draws a smaller k is needed). 0.5 at S = 100, 0.67 at 1000, the cap 0.7 from S = 2155
    on. S must exceed 10 (at 10 the threshold is 0: nothing can be trusted)."""
    n = int(n_draws)
    if n <= 10:
        raise ValueError(f"k-hat needs more than 10 draws to judge; got {n}")
    return min(1.0 - 1.0 / math.log10(n), KHAT_TRUSTED)


def khat_reading(khat: float, n_draws: int) -> str:
    """How to read a Pareto k-hat fitted from ``n_draws`` weights, on the PSIS paper's scale:
    "good" at or below :data:`KHAT_GOOD`, "usable with care" up to :func:`khat_threshold`
    (``n_draws``), "unreliable" above it (or when k-hat is NaN: no tail could be fitted).
    With few draws the threshold is below 0.5 and "usable with care" cannot occur."""
    k = float(khat)
    limit = khat_threshold(n_draws)
    if not math.isfinite(k) or k > limit:
        return KHAT_READINGS[2]
    return KHAT_READINGS[0] if k <= KHAT_GOOD else KHAT_READINGS[1]


#: fewer than this many tail weights: no generalized Pareto fit (k-hat is then undefined)
MIN_TAIL = 5
#: the weak prior on the Pareto shape: 0.5 with the weight of this many tail draws
SHAPE_PRIOR_WEIGHT = 10.0
SHAPE_PRIOR = 0.5


# ----------------------------------------------------------------------------------------
# The weights
# ----------------------------------------------------------------------------------------
def support_mask(spec, Phi) -> np.ndarray:
    """Boolean per flat coordinate of ``spec``'s model on Phi: True where its support is >= 0."""
    return np.concatenate([np.full(s.size, s.support == "nonnegative") for s in problem_sites(spec, Phi)])


def inside_support(mask, theta) -> np.ndarray:
    """Per row of theta (n, d): whether every coordinate flagged by ``mask`` is >= 0."""
    return np.all(theta[:, mask] >= 0.0, axis=1) if mask.any() else np.ones(theta.shape[0], bool)


_PROGRAMS = CompiledPrograms("importance", max_entries=32)


def log_joint_fn(spec, Phi, y):
    """theta (n, d) flat, constrained -> log p(theta, y) (n,), jitted and vmapped.

    Evaluated with numpyro.infer.util.log_density on the spec's own model, so the target
    is exactly the model NUTS samples, including every prior normalizer and factor. A
    model whose latents are not all among its measured sites (GIG logistic: tau and h
    behind beta) provides ``log_density_sites(params, Phi, y)``, the density with the
    other latents integrated out, and that is used instead. The jitted function is kept
    per spec object and design shape (the data are its arguments), so weighing the draws
    of many fits of one spec traces it once per number of draws.
    """
    Phi, y = as_jax(Phi), as_jax(y)
    sites = problem_sites(spec, Phi)
    own = getattr(spec, "log_density_sites", None)

    def build():
        def one(theta, Phi_, y_):
            params = unflatten(theta, sites)
            if own is not None:
                return own(params, Phi_, y_)
            return log_density(spec.model, (Phi_,), {"y": y_}, params)[0]

        return jax.jit(jax.vmap(one, in_axes=(0, None, None)))

    fn, _ = _PROGRAMS.get((SameObject(spec), "log_joint", problem_shape(Phi)), build)
    return lambda theta: fn(theta, Phi, y)


def importance_log_weights(approx, spec, Phi, y, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log p(theta, y) - log q(theta) for draws theta (n, d) of the approximation q.

    Returns (log_weights (n,), inside (n,) bool). Draws outside the target's support
    (a negative weight of a "nonnegative" site) have weight zero: log w = -inf there.
    """
    inside = inside_support(support_mask(spec, Phi), theta)
    log_w = np.full(theta.shape[0], -np.inf)
    if inside.any():
        # evaluated at every draw (one traced shape per number of draws, not per number
        # inside), the outside ones then set to weight 0
        log_p = np.asarray(log_joint_fn(spec, Phi, y)(jnp.asarray(theta)))[inside]
        log_q = np.asarray(approx.log_density_flat(theta[inside]))
        log_w[inside] = log_p - log_q
    return log_w, inside


def joint_importance_log_weights(approx, spec, Phi, y, theta: np.ndarray, key) -> tuple[np.ndarray, np.ndarray]:
    """log p(theta, h, y) - log q(theta) q(h) on the joint of the measured sites theta and
    the approximation's other latents h (``GaussianPosterior.hyper_factors``), drawn
    here: for a model whose density of its sites alone has no closed form
    (``spec.log_joint`` instead of ``log_density_sites``; gridRVM). Also, per draw, whether
    a drawn h is not a positive finite number: a Gamma factor of extreme shape (the vague
    prior's 1e-6) puts most of its draws below the smallest float, where they underflow to
    0 and neither density can be evaluated."""
    hyper = approx.sample_hyper(key, theta.shape[0])
    log_q = np.asarray(approx.log_density_flat(theta)) + hyper.pop("log_q")
    degenerate = np.zeros(theta.shape[0], bool)
    for v in hyper.values():
        v = np.asarray(v).reshape(theta.shape[0], -1)
        degenerate |= np.any(~(np.isfinite(v) & (v > 0)), axis=1)
    params = {k: jnp.asarray(v) for k, v in unflatten(jnp.asarray(theta), approx.sites).items()}
    params |= {k: jnp.asarray(v) for k, v in hyper.items()}
    return np.asarray(spec.log_joint(params, jnp.asarray(Phi), jnp.asarray(y))) - log_q, degenerate


def density_problem(spec) -> str | None:
    """Why draws over ``spec``'s judged sites have no importance weights, or None: a general
    model (``models/general.py``) judged on some of its latent sites, or on quantities it
    computes, has a density over its latent sites, which such draws do not give. (An engine
    that weighs its draws on the model's whole latent space itself - ADVI, Pathfinder,
    auto-laplace - carries its own weights and is not asked.)"""
    if is_classifier(spec):
        return None
    judged = [s.name for s in spec.sites()]
    missing = [k for k in spec.latent if k not in judged]
    computed = [k for k in judged if k not in spec.latent]
    if not missing and not computed:
        return None
    how = ([f"not on every latent site ({', '.join(missing)})"] if missing else []) + (
        [f"on quantities it computes ({', '.join(computed)})"] if computed else [])
    return (f"model {spec.name} is judged on {', '.join(judged)}, {' and '.join(how)}: the model's density is over "
            "its latent sites, so draws over the judged sites have no importance weights")


def on_joint(spec) -> bool:
    """Whether ``spec``'s importance weights need the joint with its other latents (its
    sites' own density has no closed form)."""
    return getattr(spec, "log_density_sites", None) is None and hasattr(spec, "log_joint")


def joint_weights_problem(approx, spec) -> str | None:
    """Why ``approx`` has no importance weights on ``spec``'s joint (None where it has): a
    model whose sites' density has no closed form (:func:`on_joint`) is weighted on the
    joint with the approximation's own factors over the other latents, which must exist
    and be this model's."""
    factors = getattr(approx, "hyper_factors", None)
    if not factors:
        return ("the density of the weights alone needs the hyper-parameters integrated out (no closed form), and "
                "this approximation gives no distribution over them")
    wanted = {k: tuple(v) for k, v in getattr(spec, "hyper_shapes", {}).items()}
    if wanted != {k: np.shape(v[0]) for k, v in factors.items()}:
        return ("the approximation's hyper-parameters are another model's (its joint is not this model's), so it "
                "has no importance weights here")
    return None


def weighted_draws(approx, spec, Phi, y, *, n_draws: int, key) -> DrawsPosterior:
    """``approx`` (a posterior with a density) as ``n_draws`` of its draws over its sites,
    each with its importance log weight against ``spec``'s posterior on (Phi, y).

    A :class:`~zoo.inference.posterior.DrawsPosterior` that already carries ``log_weights`` is returned as it is.
    ApproximationFailed (one line) where no weights exist: a point estimate, draws without
    a density, or a model that needs latents the approximation does not cover.
    """
    if getattr(approx, "kind", None) == "draws" and getattr(approx, "log_weights", None) is not None:
        return approx
    engine = approx.info.engine
    if not hasattr(approx, "log_density_flat"):
        raise ApproximationFailed(f"{engine}: a {approx.kind} posterior has no density, so its draws cannot be "
                                  "importance-weighted")
    problem = density_problem(spec)
    if problem:
        raise ApproximationFailed(f"{engine}: {problem}")
    theta = np.asarray(approx.sample_flat(key, int(n_draws)), dtype=float)
    if on_joint(spec):
        problem = joint_weights_problem(approx, spec)
        if problem:
            raise ApproximationFailed(f"{engine}: {problem}")
        log_w, degenerate = joint_importance_log_weights(approx, spec, Phi, y, theta, jax.random.fold_in(key, 1))
        log_w = np.where(degenerate, -np.inf, log_w)
    else:
        log_w, _ = importance_log_weights(approx, spec, Phi, y, theta)
    bad = np.isnan(log_w) | (log_w == np.inf)
    if bad.any():
        raise ApproximationFailed(f"{engine}: log p - log q is not a number at {int(bad.sum())} of its draws")
    draws = {k: np.asarray(v)[None] for k, v in unflatten(theta, approx.sites).items()}
    return DrawsPosterior(approx.spec, approx.sites, draws, approx.info, log_weights=log_w[None])


# ----------------------------------------------------------------------------------------
# Pareto smoothing and resampling
# ----------------------------------------------------------------------------------------
def _generalized_pareto_fit(excess: np.ndarray) -> tuple[float, float]:
    """(shape k, scale sigma) of a generalized Pareto fitted to sorted positive excesses.

    Zhang & Stephens (2009), in the parameterization b = -k / sigma: for a given b the
    likelihood is maximal at k(b) = mean(log1p(-b x)), which leaves a profile likelihood in
    b alone; b is its posterior mean over a grid of m = 30 + floor(sqrt(n)) candidates
    placed by the quantiles of a prior anchored at the lower quartile and the maximum of
    the data (candidates of negligible weight dropped). The shape is then shrunk towards
    SHAPE_PRIOR with the weight of SHAPE_PRIOR_WEIGHT draws.
    """
    x = np.asarray(excess, dtype=float)
    n = x.size
    m = 30 + int(math.floor(math.sqrt(n)))
    grid = 1.0 - np.sqrt(m / (np.arange(1, m + 1) - 0.5))
    grid = grid / (3.0 * x[int(n / 4.0 + 0.5) - 1]) + 1.0 / x[-1]
    k_of_b = np.mean(np.log1p(-grid[:, None] * x[None, :]), axis=1)
    profile = n * (np.log(-grid / k_of_b) - k_of_b - 1.0)
    # each candidate's posterior weight 1 / sum_j exp(profile_j - profile_i); a far worse
    # candidate's sum overflows to inf, which is its weight 0, as it should be
    with np.errstate(over="ignore"):
        weights = 1.0 / np.sum(np.exp(profile[None, :] - profile[:, None]), axis=1)
    keep = weights >= 10.0 * np.finfo(float).eps
    grid, weights = grid[keep], weights[keep] / weights[keep].sum()
    b = float(np.sum(grid * weights))
    k = float(np.mean(np.log1p(-b * x)))
    sigma = -k / b
    k = (n * k + SHAPE_PRIOR_WEIGHT * SHAPE_PRIOR) / (n + SHAPE_PRIOR_WEIGHT)
    return k, sigma


def psis(log_weights, *, tail_draws: int | None = None) -> tuple[np.ndarray, float]:
    """(smoothed log weights normalized to sum 1 on the exp scale, k-hat).

    log_weights: (S,) raw log importance weights, -inf for weight 0 (those stay 0 and take
    no part in the tail fit). tail_draws: how many of the largest weights are fitted;
    default the paper's ceil(min(S / 5, 3 sqrt(S))) (given only to reproduce another
    implementation's choice: arviz-stats 1.x rounds down). k-hat is inf where fewer than MIN_TAIL draws form the tail
    (nothing to fit; the raw weights are then returned, normalized), and 0 where every
    finite weight is the same (no tail at all).
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    if np.any(np.isnan(lw)) or np.any(lw == np.inf):
        raise ValueError("log weights must be finite or -inf")
    finite = np.isfinite(lw)
    if not finite.any():
        raise ValueError("every importance weight is zero")
    out = np.full(lw.shape, -np.inf)
    vals = lw[finite] - lw[finite].max()
    S = vals.size
    k = math.inf
    if np.ptp(vals) == 0.0:
        k = 0.0
    else:
        tail_len = int(math.ceil(min(0.2 * S, 3.0 * math.sqrt(S)))) if tail_draws is None else int(tail_draws)
        order = np.argsort(vals)
        cutoff = max(vals[order[-tail_len - 1]], np.log(np.finfo(float).tiny)) if tail_len < S else -np.inf
        tail = np.flatnonzero(vals > cutoff)
        if tail.size >= MIN_TAIL:
            tail = tail[np.argsort(vals[tail])]
            excess = np.exp(vals[tail]) - np.exp(cutoff)
            k, sigma = _generalized_pareto_fit(excess)
            if np.isfinite(k):
                p = (np.arange(tail.size) + 0.5) / tail.size
                # the generalized Pareto quantile function at p, for shape k and scale sigma
                q = sigma * np.expm1(-k * np.log1p(-p)) / k if k != 0.0 else -sigma * np.log1p(-p)
                vals[tail] = np.minimum(np.log(q + np.exp(cutoff)), 0.0)
    out[finite] = vals - logsumexp(vals)
    return out, float(k)


def corrected(posterior: DrawsPosterior, *, n_draws: int | None = None, seed: int = 0,
              name: str | None = None) -> DrawsPosterior:
    """The draws of ``posterior`` (which carries ``log_weights``) resampled with their
    Pareto-smoothed importance weights: ``n_draws`` (default: as many as it has) draws with
    replacement, as one chain.

    ``info.extra``: psis_khat (of the raw weights), psis_draws (S: the draws with non-zero
    weight the Pareto shape was fitted from), psis_khat_threshold (:func:`khat_threshold` of
    S), psis_trusted (k-hat <= that threshold), psis_ess (1 / sum of squared normalized
    smoothed weights: how many independent draws the weighted set is worth), psis_distinct
    (distinct draws among those returned), proposal (the proposal's engine).
    ``info.converged`` is False where k-hat exceeds the threshold, with the reason: the
    corrected draws are then not to be trusted.
    """
    if getattr(posterior, "log_weights", None) is None:
        raise ValueError("corrected() needs a DrawsPosterior with log_weights (see weighted_draws)")
    t0 = time.perf_counter()
    lw = np.asarray(posterior.log_weights, dtype=float).ravel()
    smoothed, khat = psis(lw)
    w = np.exp(smoothed)
    w = w / w.sum()
    n = posterior.n_chains * posterior.n_draws if n_draws is None else int(n_draws)
    if n < 2:
        raise ValueError(f"n_draws must be at least 2, got {n}")
    rng = np.random.default_rng(int(seed))
    idx = rng.choice(w.size, size=n, replace=True, p=w)
    pooled = {k: v.reshape((-1,) + v.shape[2:]) for k, v in posterior.draws.items()}
    draws = {k: v[idx][None] for k, v in pooled.items()}
    proposal = posterior.info
    fitted = int(np.sum(np.isfinite(lw)))
    limit = khat_threshold(fitted) if fitted > 10 else 0.0
    trusted = bool(np.isfinite(khat) and khat <= limit)
    reason = "" if trusted else (
        f"Pareto k-hat {khat:.2f} of the importance weights exceeds {limit:.2f} (min(1 - 1/log10 S, 0.7) at "
        f"S = {fitted} weighted draws): the proposal {proposal.engine} misses posterior mass that resampling "
        "cannot put back; the corrected draws are not to be trusted")
    extra = {"psis_khat": khat, "psis_draws": fitted, "psis_khat_threshold": limit, "psis_trusted": trusted,
             "psis_ess": float(1.0 / np.sum(w**2)),
             "psis_distinct": int(np.unique(idx).size), "psis_zero_weights": int(np.sum(~np.isfinite(lw))),
             "proposal": proposal.engine, "proposal_converged": proposal.converged}
    info = FitInfo(
        engine=name or f"{proposal.engine}+psis", converged=trusted and proposal.converged,
        n_iter=proposal.n_iter, reason=reason or proposal.reason,
        seconds=proposal.seconds + time.perf_counter() - t0, compile_seconds=proposal.compile_seconds,
        objective=proposal.objective, trace=proposal.trace, extra={**proposal.extra, **extra})
    return DrawsPosterior(posterior.spec, posterior.sites, draws, info)


def corrected_fit(fit, *, label: str, n_draws: int = 4000, seed: int = 0):
    """The engine ``<label>``: ``fit`` (the fixed-spec contract) followed by PSIS
    resampling of its draws against the posterior of the spec it was given. The proposal's
    own config passes through; the proposal's density decides how its draws are weighted
    (:func:`weighted_draws`)."""
    def fit_corrected(spec, Phi, y, *, config=None):
        t0 = time.perf_counter()
        proposal = fit(spec, Phi, y, config=config)
        weighted = weighted_draws(proposal, spec, np.asarray(Phi), np.asarray(y), n_draws=n_draws,
                                  key=jax.random.PRNGKey(int(seed)))
        out = corrected(weighted, n_draws=n_draws, seed=seed, name=label)
        # timing: the proposal's fit plus the weighting and resampling done here (on the first
        # call for a spec and design, the tracing of the model's log density too)
        seconds = time.perf_counter() - t0 - proposal.info.compile_seconds
        return DrawsPosterior(out.spec, out.sites, out.draws,
                              out.info.with_timing(seconds, proposal.info.compile_seconds))

    fit_corrected.__name__ = f"{getattr(fit, '__name__', 'fit')}_psis"
    return fit_corrected

