"""Shapes: posteriors that are not Gaussian, and planted defects that change an engine's
shape while keeping its first two moments exactly.

Two uses, one definition (as ``correlations.py`` is for the correlation defects):

* the simulations that measure the verdicts' false-alarm rate and power
  (``distribution.simulate_verdicts``, ``benchmarks/distribution_verdict.py``): reference
  chains whose marginals are skewed, bounded at 0 or bimodal, built as stationary AR(1)
  Gaussian chains pushed through the marginal's quantile function (a Gaussian copula: the
  chains keep an autocorrelation that sets their ESS, the marginals are exact);
* the battery's shape defects (``defects.py``), which transform an engine's answer:
  :func:`reflected` (the skew reversed), :func:`heavy_tailed` (a scale mixture: heavier
  tails, the same covariance), :func:`gaussianized` (Gaussian marginals with the same means
  and sds: mass outside the support, modes lost) and :func:`with_extra_mode` (two modes
  along one direction, the same mean and covariance).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy import stats

from ...inference.posterior import DrawsPosterior, GaussianPosterior
from ...models.base import unflatten
from .verdict import ar1_reference_draws

#: seed of the shape defects' randomness (with the posterior's dimension: deterministic)
SHAPE_SEED = 20261128
#: degrees of freedom of the heavy-tailed defect: a multivariate Student t scaled to the
#: engine's covariance (5: the lightest t whose fourth moment exists, kurtosis 9)
HEAVY_TAIL_DF = 5.0
#: the extra mode: along one whitened direction the engine becomes c z + delta xi, xi = +-1
#: with probability 1/2 and c^2 + delta^2 = 1 (variance kept); delta 0.9 puts the two modes
#: 1.8 apart with sd 0.44 each, a clear dip between them
EXTRA_MODE_DELTA = 0.9
#: draws per chain and chains of a Gaussian turned into draws by a shape defect
DEFECT_CHAINS, DEFECT_DRAWS = 4, 1000


# --------------------------------------------------------------------------------------
# Marginal laws for the simulations
# --------------------------------------------------------------------------------------
def _bimodal_ppf():
    """Quantile function of 0.8 N(0, 1) + 0.2 N(4, 1), standardized (mean 0, sd 1): a
    minor mode holding a fifth of the mass, separated by a dip."""
    w, mu = 0.2, 4.0
    mean = w * mu
    sd = math.sqrt(1.0 + w * (1 - w) * mu * mu)
    grid = np.linspace(-8.0, 12.0, 20001)
    cdf = (1 - w) * stats.norm.cdf(grid) + w * stats.norm.cdf(grid - mu)
    return lambda u: (np.interp(u, cdf, grid) - mean) / sd


def _wall_law(mu0: float = -0.5):
    """N(mu0, 1) truncated to [0, inf): a posterior pressed against a support bound (its
    mode at the wall), the shape of PCVM's weights whose likelihood pulls them below 0."""
    return stats.truncnorm(a=-mu0, b=np.inf, loc=mu0, scale=1.0)


#: marginal laws: name -> (quantile function of the standardized law, bounded at 0)
#: "wall" is not standardized: it is scaled only (its support must stay [0, inf)).
MARGINALS = {
    "normal": (stats.norm.ppf, False),
    # Gamma(4) standardized: skewness 1
    "skewed": (lambda u: (stats.gamma.ppf(u, 4.0) - 4.0) / 2.0, False),
    "bimodal": (_bimodal_ppf(), False),
    "wall": (_wall_law().ppf, True),
}


def marginal_moments(shape: str) -> tuple[float, float]:
    """(mean, sd) of a marginal law of :data:`MARGINALS` before its scaling."""
    if shape == "wall":
        m, v = _wall_law().stats("mv")
        return float(m), float(math.sqrt(v))
    if shape not in MARGINALS:
        raise ValueError(f"unknown marginal {shape!r}; known: {', '.join(MARGINALS)}")
    return 0.0, 1.0


def copula_chains(rng: np.random.Generator, shape: str, loc: np.ndarray, scale: np.ndarray, *, chains: int = 4,
                  draws: int = 1000, phi: float = 0.8, corr: np.ndarray | None = None) -> np.ndarray:
    """(chains, draws, d) stationary chains whose marginals are ``shape`` (loc + scale x the
    standardized law; "wall": scale x the law, loc ignored) and whose Gaussian copula is an
    AR(1) with coefficient ``phi`` and correlation ``corr`` (None: independent coordinates).
    phi = 0 gives independent draws."""
    ppf, bounded = MARGINALS[shape]
    d = len(scale)
    z = ar1_reference_draws(rng, np.zeros(d), np.ones(d), chains=chains, draws=draws, phi=phi, corr=corr) \
        if phi > 0 else _iid_normals(rng, chains, draws, corr, d)
    u = np.clip(stats.norm.cdf(z), 1e-12, 1 - 1e-12)
    x = ppf(u)
    return scale * x if bounded else loc + scale * x


def _iid_normals(rng, chains, draws, corr, d):
    z = rng.standard_normal((chains, draws, d))
    return z if corr is None else z @ np.linalg.cholesky(corr).T


# --------------------------------------------------------------------------------------
# Shape defects on an engine's answer: every mean and sd kept (and the covariance, but by
# gaussianized: its normal scores keep the ranks' dependence, not the correlations exactly)
# --------------------------------------------------------------------------------------
def _flat_and_moments(posterior):
    if isinstance(posterior, GaussianPosterior):
        return None, np.asarray(posterior.mean_flat(), float), np.asarray(posterior.cov, float)
    if isinstance(posterior, DrawsPosterior):
        flat = posterior.flat_draws()
        return flat, flat.mean(0), np.atleast_2d(np.cov(flat, rowvar=False))
    raise ValueError(f"a {posterior.kind} posterior has no distribution to break")


def _rng(posterior, salt: int) -> np.random.Generator:
    return np.random.default_rng([SHAPE_SEED, salt, posterior.dim])


def as_draws(posterior, flat: np.ndarray, chains: int, draws: int):
    """A DrawsPosterior of ``posterior``'s sites holding the (chains * draws, dim) ``flat``
    draws (a draws posterior's importance log weights do not survive a transform)."""
    per_site = unflatten(flat, posterior.sites)
    arrays = {k: np.asarray(v).reshape((chains, draws) + np.shape(v)[1:]) for k, v in per_site.items()}
    if isinstance(posterior, DrawsPosterior):
        return replace(posterior, draws=arrays, log_weights=None)
    return DrawsPosterior(posterior.spec, posterior.sites, arrays, posterior.info)


def _gaussian_draws(posterior, rng):
    """A Gaussian posterior's DEFECT_CHAINS x DEFECT_DRAWS independent draws (flat)."""
    z = rng.standard_normal((DEFECT_CHAINS * DEFECT_DRAWS, posterior.dim))
    return np.asarray(posterior.mean_flat()) + z @ np.asarray(posterior.chol).T


def _shape_of(posterior):
    if isinstance(posterior, DrawsPosterior):
        return posterior.n_chains, posterior.n_draws
    return DEFECT_CHAINS, DEFECT_DRAWS


def reflected(posterior):
    """The posterior mirrored through its mean, x -> 2 m - x: every mean and covariance
    kept, every odd central moment (the skew) reversed. A Gaussian is its own mirror image
    and is returned as it is."""
    flat, mean, _ = _flat_and_moments(posterior)
    if flat is None:
        return posterior
    return as_draws(posterior, 2.0 * mean - flat, *_shape_of(posterior))


def heavy_tailed(posterior, df: float = HEAVY_TAIL_DF):
    """Each draw's deviation from the mean scaled by w = sqrt((df - 2) / chi2_df), one w per
    draw for all coordinates (E w^2 = 1): a multivariate Student t with ``df`` degrees of
    freedom for a Gaussian, a scale mixture of the draws otherwise - the mean and covariance
    kept (the scaling is independent of the draws), the tails heavier, the centre sharper."""
    if not df > 2:
        raise ValueError(f"a heavy-tailed defect needs df > 2 (a finite covariance); got {df}")
    rng = _rng(posterior, 1)
    flat, mean, _ = _flat_and_moments(posterior)
    if flat is None:
        flat = _gaussian_draws(posterior, rng)
    w = np.sqrt((df - 2.0) / rng.chisquare(df, size=flat.shape[0]))
    return as_draws(posterior, mean + (flat - mean) * w[:, None], *_shape_of(posterior))


def gaussianized(posterior):
    """Every marginal made the Gaussian of its mean and sd: what a moment-matching engine
    returns - mass outside a bounded support, no skew, one mode. Draws are replaced by the
    normal scores of their ranks, coordinate by coordinate, standardized and put back at the
    draws' own mean and sd: the chains keep their order, so their autocorrelation and Monte
    Carlo error stay the source's (a Gaussian in closed form would hand the source's sampling
    noise to the verdicts as an exact answer), and the dependence between coordinates keeps
    its ranks - the Pearson correlations move a little, for a skewed or peaked posterior
    enough for the joint verdict to see. A Gaussian is returned as it is; a constant
    coordinate stays constant."""
    flat, mean, cov = _flat_and_moments(posterior)
    if flat is None:
        return posterior
    sd = flat.std(0, ddof=1)
    ranks = stats.rankdata(flat, axis=0)
    scores = stats.norm.ppf(ranks / (flat.shape[0] + 1.0))
    scores = (scores - scores.mean(0)) / np.where(scores.std(0, ddof=1) > 0, scores.std(0, ddof=1), 1.0)
    moved = np.where(sd > 0, mean + sd * scores, flat)
    return as_draws(posterior, moved, *_shape_of(posterior))


def with_extra_mode(posterior, delta: float = EXTRA_MODE_DELTA):
    """Two modes where there was one, the mean and covariance kept: the draws are whitened
    (z = L^-1 (x - m), L L' the covariance), their first whitened coordinate becomes
    c z_1 + delta xi (xi = +-1 with probability 1/2, c^2 + delta^2 = 1), and they are
    coloured back. The modes lie along the direction of the first coordinate, L e_1."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta}")
    rng = _rng(posterior, 2)
    flat, mean, cov = _flat_and_moments(posterior)
    L = np.asarray(posterior.chol, float) if flat is None else np.linalg.cholesky(cov)
    if flat is None:
        flat = _gaussian_draws(posterior, rng)
    white = np.linalg.solve(L, (flat - mean).T)  # (d, n)
    xi = rng.choice([-1.0, 1.0], size=white.shape[1])
    white[0] = math.sqrt(1.0 - delta * delta) * white[0] + delta * xi
    return as_draws(posterior, mean + (L @ white).T, *_shape_of(posterior))


#: the shape defects by name: (transform, what it does)
SHAPE_DEFECTS = {
    "reversed skew": (reflected, "mirrored through its mean: every mean and covariance kept, the skew reversed"),
    "heavy tails": (heavy_tailed, f"a scale mixture (multivariate t with {HEAVY_TAIL_DF:g} degrees of freedom): "
                                  "the mean and covariance kept, the tails heavier"),
    "gaussianized": (gaussianized, "every marginal the Gaussian of its mean and sd (normal scores of the ranks, "
                                   "the chains' order kept): mass outside a bounded support, no skew, one mode"),
    "extra mode": (with_extra_mode, "two modes along the first coordinate's direction, the mean and covariance "
                                    "kept"),
}


__all__ = ["MARGINALS", "SHAPE_DEFECTS", "copula_chains", "marginal_moments", "reflected", "heavy_tailed",
           "gaussianized", "with_extra_mode"]
