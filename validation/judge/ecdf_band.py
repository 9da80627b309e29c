"""The simultaneous ECDF band of SBC's uniformity test, computed here with its exact coverage.

An array layer (numpy in, numpy out) under ``rank_uniformity.py``. It replaces ArviZ's
``ecdf_confidence_band(method="optimized")``, an ArviZ internal that arviz-stats (ArviZ 1.x)
does not have, and whose level we measured to fall short of nominal in 10 of the 35 (S, K)
cases SBC meets (``benchmarks/ecdf_band_coverage.py``; worst x1.64 the nominal miss).

The construction. S values u_1..u_S, uniform on (0, 1) when the ranks are calibrated, and
fixed evaluation points 0 < z_1 < ... < z_m < 1. The counts N_i = #{u <= z_i} form a
Markov chain: given N_{i-1} = j, the increment N_i - j is Binomial(S - j, (z_i - z_{i-1}) /
(1 - z_{i-1})), because the S - j values above z_{i-1} are uniform on (z_{i-1}, 1). A band
is a pair of count bounds [l_i, u_i] per point, and its simultaneous coverage

    P(l_i <= N_i <= u_i for every i)

is computed exactly by carrying the distribution of N_i forward point by point and
dropping, at each step, the mass outside the band (the recursion Sailynoja, Burkner &
Vehtari 2022 use to calibrate their "optimized" band). The band itself is the central
pointwise band, l_i and u_i the (1 - g)/2 and (1 + g)/2 quantiles of Binomial(S, z_i), at
the smallest pointwise level g whose exact simultaneous coverage reaches the requested
level. Coverage grows with g (the bands are nested), so bisection finds g; the band then
covers at least the requested level by construction, not by approximation, and no
smaller central band does. Discreteness means the coverage reached is usually a little
above the requested level: the test's false-alarm rate is at most its nominal rate.
"""
from __future__ import annotations

import functools

import numpy as np
from scipy.stats import binom

#: how close the bisection brings the pointwise level to the smallest covering one. The
#: counts are integers, so the band only changes at finitely many levels; this tolerance
#: is far below the gap between two of them at the sizes SBC uses (S <= 10^4).
LEVEL_TOLERANCE = 1e-10


def central_counts(n: int, z: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Count bounds [l_i, u_i] that hold N_i ~ Binomial(n, z_i) with probability >= ``level``
    at each point alone: the central (1 -/+ level) / 2 quantiles."""
    z = np.asarray(z, dtype=float)
    lower = binom.ppf((1.0 - level) / 2.0, n, z).astype(int)
    upper = binom.ppf((1.0 + level) / 2.0, n, z).astype(int)
    return lower, upper


def exact_coverage(n: int, z: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """P(lower_i <= N_i <= upper_i for every i), N_i the number of n uniform values at or
    below z_i (increasing points in (0, 1)), by the forward recursion of the module docstring."""
    z = np.asarray(z, dtype=float)
    if z.ndim != 1 or np.any(np.diff(z) <= 0) or (z.size and (z[0] <= 0 or z[-1] >= 1)):
        raise ValueError("exact_coverage needs increasing evaluation points inside (0, 1)")
    counts, mass, below = np.array([0]), np.array([1.0]), 0.0
    for zi, lo, hi in zip(z, lower, upper):
        step = (zi - below) / (1.0 - below)
        reach = np.arange(max(int(lo), 0), min(int(hi), n) + 1)
        if reach.size == 0:
            return 0.0
        jumps = reach[None, :] - counts[:, None]  # negative jumps have pmf 0: counts never fall
        mass = mass @ binom.pmf(jumps, n - counts[:, None], step)
        counts, below = reach, zi
    return float(mass.sum())


def smallest_covering_level(n: int, z: np.ndarray, prob: float, tol: float = LEVEL_TOLERANCE) -> float:
    """The smallest pointwise level whose central band (:func:`central_counts`) holds the
    whole ECDF of n uniform values at ``z`` with probability >= ``prob`` (bisection)."""
    if not 0.0 < prob < 1.0:
        raise ValueError(f"the band's level must lie in (0, 1), got {prob}")
    low, high = prob, 1.0 - 1e-15
    if exact_coverage(n, z, *central_counts(n, z, low)) >= prob:
        return low  # one evaluation point (or none): the pointwise band is already simultaneous
    while high - low > tol:
        mid = 0.5 * (low + high)
        if exact_coverage(n, z, *central_counts(n, z, mid)) >= prob:
            high = mid
        else:
            low = mid
    return high


@functools.lru_cache(maxsize=64)
def count_band(n: int, z: tuple[float, ...], prob: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The band of the module docstring for n values at points ``z``: count bounds (lower,
    upper) and the band's exact simultaneous coverage (>= ``prob``)."""
    points = np.asarray(z, dtype=float)
    level = smallest_covering_level(n, points, prob)
    lower, upper = central_counts(n, points, level)
    lower.flags.writeable = upper.flags.writeable = False  # cached: shared by every caller
    return lower, upper, exact_coverage(n, points, lower, upper)


def ecdf_band(n: int, z: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The band as ECDF values (count bounds / n) at ``z``: an ECDF of n values calibrated
    ranks produce stays inside (bounds included) with probability >= ``prob``."""
    lower, upper, _ = count_band(int(n), tuple(float(v) for v in np.asarray(z, dtype=float)), float(prob))
    return lower / n, upper / n


__all__ = ["LEVEL_TOLERANCE", "central_counts", "exact_coverage", "smallest_covering_level", "count_band", "ecdf_band"]
