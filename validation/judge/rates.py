"""How sure a measured rate is: a detector that fired k times in n trials.

Every rate the zoo reports about its detectors - a verdict's false-alarm rate, a planted
defect's detection rate, SBC's power - is a count over simulated trials, so it comes with an
interval. The Wilson score interval (Wilson 1927) keeps its coverage near the nominal level
at the rates that matter here, 0 to 10% and 90 to 100%, where the plain normal interval
p +- z sqrt(p(1-p)/n) collapses to a point at k = 0 or k = n.
"""
from __future__ import annotations

import math


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a rate k/n (z = 1.96: 95%); (0, 1) without trials."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"a rate needs 0 <= k <= n: got k = {k}, n = {n}")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


__all__ = ["wilson_interval"]
