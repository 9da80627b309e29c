"""The exact simultaneous coverage of the ECDF band SBC's uniformity test uses, against its
nominal level - an audit of the judge's stated false-alarm rate (issue 53, item 3: the band
is today ArviZ's ``ecdf_confidence_band(method="optimized")``, an ArviZ internal).

    python benchmarks/ecdf_band_coverage.py

For S uniform values and the test's evaluation points z_1 < ... < z_K, the counts
N_i = #{u <= z_i} form a Markov chain: given N_{i-1} = j, N_i - j ~ Binomial(S - j,
(z_i - z_{i-1}) / (1 - z_{i-1})). A band is a pair of count bounds [l_i, u_i] at every
point; its simultaneous coverage P(l_i <= N_i <= u_i for all i) is computed exactly by the
forward recursion of that chain, the mass outside the band dropped at each step (Sailynoja,
Burkner & Vehtari 2022 compute the "optimized" band's level this way). The script evaluates

* ArviZ's band, as the zoo calls it (``rank_uniformity.simultaneous_band``), and
* the band of the smallest pointwise level whose exact coverage reaches the nominal one
  (bisection on the level; central binomial quantiles at each point), which is never below it,

at the sample sizes and levels SBC uses (S simulations; level 1 - 0.05 / K for K ranked
quantities), and writes results/ecdf_band_coverage.md with the date, command and machine.
"""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time

import numpy as np
from scipy.stats import binom

import zoo  # noqa: F401
from zoo.validation.judge.rank_uniformity import eval_points, simultaneous_band

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "ecdf_band_coverage.md")
#: SBC's sizes: simulations S, and the per-quantity levels 1 - 0.05 / K of K ranked quantities
SIZES = (10, 20, 50, 100, 200, 400, 1000)
QUANTITIES = (1, 4, 11, 20, 100)


def central_counts(n: int, z: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Count bounds [l_i, u_i] holding N_i ~ Binomial(n, z_i) with probability >= level, central."""
    return binom.ppf((1 - level) / 2, n, z).astype(int), binom.ppf((1 + level) / 2, n, z).astype(int)


def exact_coverage(n: int, z: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """P(lower_i <= N_i <= upper_i for every i) for the counts of n uniforms below z (module docstring)."""
    counts, mass, below = np.array([0]), np.array([1.0]), 0.0
    for zi, lo, hi in zip(z, lower, upper):
        step = (zi - below) / (1.0 - below)
        reach = np.arange(int(lo), int(hi) + 1)
        jumps = reach[None, :] - counts[:, None]
        mass = mass @ binom.pmf(jumps, n - counts[:, None], step)
        counts, below = reach, zi
    return float(mass.sum())


def smallest_covering_level(n: int, z: np.ndarray, prob: float, tol: float = 1e-10) -> float:
    """The smallest pointwise level whose central band covers the whole ECDF with probability >= prob."""
    low, high = prob, 1.0 - 1e-15
    if exact_coverage(n, z, *central_counts(n, z, low)) >= prob:
        return low
    while high - low > tol:
        mid = 0.5 * (low + high)
        if exact_coverage(n, z, *central_counts(n, z, mid)) >= prob:
            high = mid
        else:
            low = mid
    return high


def main() -> int:
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for n in SIZES:
        z = eval_points(n)
        for k in QUANTITIES:
            prob = 1.0 - 0.05 / k
            lower, upper = simultaneous_band(n, prob)
            arviz = exact_coverage(n, z, np.rint(lower * n), np.rint(upper * n))
            t0 = time.perf_counter()
            level = smallest_covering_level(n, z, prob)
            exact = exact_coverage(n, z, *central_counts(n, z, level))
            seconds = time.perf_counter() - t0
            rows.append((n, k, prob, arviz, exact, seconds))
    meta = (f"{started:%Y-%m-%d %H:%M} UTC, `python {' '.join(sys.argv)}`, "
            f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores), Python {platform.python_version()}")
    lines = ["# Exact simultaneous coverage of SBC's ECDF band", "", meta + ".", "",
             "Miss = 1 - coverage: the probability that calibrated ranks of one quantity leave the band; the "
             "uniformity test's family-wise false-alarm rate is at most K times it (Bonferroni).", "",
             "| S | K | nominal miss | ArviZ band's miss | over nominal | smallest covering band's miss | seconds |",
             "|---|---|---|---|---|---|---|"]
    for n, k, prob, arviz, exact, seconds in rows:
        over = (1 - arviz) / (1 - prob)
        lines.append(f"| {n} | {k} | {1 - prob:.5f} | {1 - arviz:.5f} | {'x%.3f' % over if over > 1 else '-'} | "
                     f"{1 - exact:.5f} | {seconds:.2f} |")
    worst = max(rows, key=lambda r: (1 - r[3]) / (1 - r[2]))
    lines += ["", f"ArviZ's band misses more than nominal in {sum((1 - r[3]) > (1 - r[2]) for r in rows)} of "
                  f"{len(rows)} cases; worst: S = {worst[0]}, K = {worst[1]}, miss {1 - worst[3]:.5f} against "
                  f"{1 - worst[2]:.5f} (x{(1 - worst[3]) / (1 - worst[2]):.3f}). The smallest covering band "
                  f"never misses more than nominal (by construction; largest miss / nominal "
                  f"{max((1 - r[4]) / (1 - r[2]) for r in rows):.3f})."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
