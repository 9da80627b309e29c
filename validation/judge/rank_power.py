"""The power of an SBC run: the smallest defects a run of S simulations, L draws and K
quantities detects with probability 80% (an array layer: numbers in, numbers out).

The uniformity test (``rank_uniformity.py``) keeps its false-alarm rate at any S, but a
small run that stays inside its bands has not shown much: every verdict of "calibrated"
therefore says what it could have seen, and a run too small to see a gross defect
(:data:`USELESS`) is "too few simulations to call" (``sbc_verdict.py``). Tabled by
``benchmarks/sbc_power.py``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy.special import betaincinv, ndtr, ndtri

from ..base.result_format import record_from_json, record_json
from .rank_uniformity import FALSE_ALARM, eval_points, simultaneous_band


# --------------------------------------------------------------------------------------
# Power: what a run of S simulations could have seen
# --------------------------------------------------------------------------------------
#: the detection probability the power line states
POWER_PROBABILITY = 0.8
#: replicates of the power simulation: the 80% is estimated with a binomial Monte Carlo
#: sd of sqrt(0.8 x 0.2 / 1000) = 1.3%
POWER_REPLICATES = 1000
#: of the power simulation's uniforms: a fixed seed makes every power line deterministic
POWER_SEED = 20261127
#: the largest defects searched: a shift of 8 posterior sds, an sd x 1/100 and x 100
MAX_SHIFT_SD = 8.0
MAX_SD_FACTOR = 100.0
#: when a run that stays inside its bands is "too few simulations to call": when the
#: smallest defects it detects with 80% probability are a mean off by more than one
#: posterior sd, or an sd narrower than half the true one (or none at all). Both are
#: gross errors: a posterior one sd off covers the truth with its central 95% interval 83%
#: of the time, one half as wide 67% of the time (its "95%" interval is a 67% one). A
#: test blind to either says nothing a user would call calibrated. A posterior too wide
#: errs on the safe side (its intervals over-cover), so widening is reported, not used.
#: With L = 99 and K = 10 to 30 quantities this makes 10 and 20 simulations too few and
#: 50 enough (benchmarks/results/sbc_power.md)
USELESS = {"mean_shift_sd": 1.0, "sd_factor_narrow": 0.5}
#: simulation counts tried for the number a useful run needs
SIMS_GRID = (10, 20, 50, 100, 200, 500, 1000)

_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(64)


@functools.lru_cache(maxsize=16)
def _order_statistic_probits(n_draws: int) -> np.ndarray:
    """(L, 64): probit of the (r + 1)-th smallest of L uniforms at the Gauss-Legendre
    nodes of its quantile, r = 0..L-1 (the rank cdf of :func:`pit_cdf` integrates over it)."""
    nodes = (_GAUSS_LEGENDRE[0] + 1.0) / 2.0
    r = np.arange(n_draws, dtype=float)[:, None]
    return ndtri(betaincinv(r + 1.0, n_draws - r, nodes[None, :]))


def pit_cdf(x: np.ndarray, n_draws: int, shift: float = 0.0, sd_factor: float = 1.0) -> np.ndarray:
    """P(u <= x) for the randomized PIT u of one quantity whose L posterior draws are off
    by ``shift`` posterior sds and an sd scaled by ``sd_factor`` (the defect
    :func:`~zoo.validation.judge.rank_uniformity.conjugate_normal_ranks` plants), exactly up
    to quadrature.

    With z the truth's standardized place in the exact posterior (N(0, 1)), each draw
    falls below the truth with probability p = Phi((z - shift) / sd_factor), so the rank R
    is Binomial(L, p) and R <= r exactly when the (r + 1)-th smallest of L uniforms, a
    Beta(r + 1, L - r) variable B, exceeds p: P(R <= r) = E[Phi(shift + sd_factor
    probit(B))], a smooth integral over B's quantile (64-node Gauss-Legendre). u = (R +
    V) / (L + 1) then has a piecewise linear cdf between those values."""
    L = int(n_draws)
    weights = _GAUSS_LEGENDRE[1] / 2.0
    cdf = np.concatenate([[0.0], ndtr(shift + sd_factor * _order_statistic_probits(L)) @ weights, [1.0]])
    t = np.asarray(x, dtype=float) * (L + 1)
    r = np.clip(np.floor(t).astype(int), 0, L)
    # cdf[r] is P(R <= r - 1): the randomized PIT spreads P(R = r) evenly over [r, r + 1)
    return cdf[r] + (t - r) * (cdf[r + 1] - cdf[r])


@functools.lru_cache(maxsize=4)
def _sorted_uniforms(n_sims: int, replicates: int, seed: int) -> np.ndarray:
    """``replicates`` sorted samples of ``n_sims`` uniforms, row i shifted by i and
    flattened, so one ``searchsorted`` counts every row's values below its thresholds.
    The same uniforms serve every defect size (common random numbers: the estimated
    detection rate then moves smoothly with the size, and bisection finds one crossing)."""
    u = np.sort(np.random.default_rng(seed).uniform(size=(replicates, n_sims)), axis=1)
    return (u + np.arange(replicates)[:, None]).ravel()


def detection_rate(n_sims: int, n_draws: int, n_quantities: int, *, shift: float = 0.0, sd_factor: float = 1.0,
                   false_alarm: float = FALSE_ALARM, replicates: int = POWER_REPLICATES,
                   seed: int = POWER_SEED) -> float:
    """How often the uniformity test flags a quantity off by ``shift`` posterior sds and
    an sd x ``sd_factor``, in a run of S = ``n_sims`` simulations, L = ``n_draws`` draws
    and K = ``n_quantities`` quantities (the defective quantity's ECDF against its band of
    level 1 - false_alarm / K).

    Only the defective quantity is simulated: its PIT values are exact draws from
    :func:`pit_cdf` (inverse cdf of sorted uniforms), so their ECDF at the test's points is
    the count of uniforms below the cdf there. The other K - 1 quantities are taken as
    exact and their own chance alarms (up to the false-alarm rate) not counted, and real
    defects touch several quantities at once: so this is the conservative, hardest case,
    and a run's real power is at least this."""
    S, K = int(n_sims), int(n_quantities)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, 1.0 - false_alarm / K)
    G = pit_cdf(x, n_draws, shift, sd_factor)
    flat = _sorted_uniforms(S, int(replicates), int(seed))
    offset = np.arange(int(replicates))[:, None]
    ecdf = (np.searchsorted(flat, G[None, :] + offset, side="right") - offset * S) / S
    return float(np.mean(((ecdf > upper) | (ecdf < lower)).any(1)))


def _smallest_detected(rate: Callable[[float], float], top: float, tol: float) -> float | None:
    """The smallest size in [0, top] whose detection rate reaches POWER_PROBABILITY
    (bisection to ``tol``; the rate grows with the size), None if even ``top`` does not."""
    if rate(top) < POWER_PROBABILITY:
        return None
    lo, hi = 0.0, top
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if rate(mid) >= POWER_PROBABILITY else (mid, hi)
    return hi


@functools.lru_cache(maxsize=256)
def _detectable(n_sims: int, n_draws: int, n_quantities: int, false_alarm: float) -> tuple:
    def rate(**defect):
        return detection_rate(n_sims, n_draws, n_quantities, false_alarm=false_alarm, **defect)

    shift = _smallest_detected(lambda d: rate(shift=d), MAX_SHIFT_SD, 1e-3)
    # the sd factors on a log scale: x 0.5 and x 2 are defects of the same size
    narrow = _smallest_detected(lambda a: rate(sd_factor=float(np.exp(-a))), np.log(MAX_SD_FACTOR), 1e-3)
    wide = _smallest_detected(lambda a: rate(sd_factor=float(np.exp(a))), np.log(MAX_SD_FACTOR), 1e-3)
    return (shift, None if narrow is None else float(np.exp(-narrow)), None if wide is None else float(np.exp(wide)))


@dataclass(frozen=True)
class RankPower:
    """What a run of ``n_sims`` simulations, ``n_draws`` draws and ``n_quantities`` quantities
    could have seen (:func:`detectable_defects`): the smallest mean shift (in posterior sds)
    and sd factors (narrow, below 1; wide, above 1) of one quantity that the uniformity test
    detects with ``probability`` (None: not even the largest searched), that probability's
    Monte Carlo sd, how it was computed (``replicates``, ``seed``, ``method`` in words),
    whether a run this size may call an engine calibrated (``useful``), the power in one
    ``line``, and - set by the verdict where the run was too small - the simulations a useful
    run of this L and K needs (``simulations_needed``; None otherwise)."""

    probability: float
    probability_mc_sd: float
    mean_shift_sd: float | None
    sd_factor_narrow: float | None
    sd_factor_wide: float | None
    n_sims: int
    n_draws: int
    n_quantities: int
    false_alarm: float
    replicates: int
    seed: int
    method: str
    useful: bool
    line: str
    simulations_needed: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The power as plain JSON, its fields in their declared order: the form an SBC result
        and a rank verdict store."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "RankPower":
        """The power a stored JSON object ``d`` holds (the inverse of :meth:`to_json`);
        ValueError naming the problem where ``d`` is not one (a field missing, an unknown one)."""
        return record_from_json(cls, d, "SBC power")

    def detected_sizes(self) -> tuple[list[str], list[str]]:
        """The defects in words: (those detected, those not detected even at the largest size)."""
        return _detected_sizes(self.mean_shift_sd, self.sd_factor_narrow, self.sd_factor_wide)


def _useful(mean_shift_sd: float | None, sd_factor_narrow: float | None) -> bool:
    """Whether a run that detects these smallest defects may call an engine calibrated
    (:data:`USELESS`)."""
    shift, narrow = mean_shift_sd, sd_factor_narrow
    return (shift is not None and shift <= USELESS["mean_shift_sd"]
            and narrow is not None and narrow >= USELESS["sd_factor_narrow"])


def _detected_sizes(shift: float | None, narrow: float | None, wide: float | None) -> tuple[list[str], list[str]]:
    """The smallest defects detected (a mean shift in posterior sds, the narrow and wide sd
    factors; None: not detected) in words: (those detected, those not even at the largest
    size)."""
    seen, missed = [], []
    if shift is not None:
        seen.append(f"a mean off by {shift:.2f} posterior sd")
    else:
        missed.append(f"mean shift up to {MAX_SHIFT_SD:g} posterior sd")
    if narrow is not None and wide is not None:
        seen.append(f"an sd off by x{narrow:.2f} / x{wide:.2f}")
    elif narrow is not None:
        seen.append(f"an sd off by x{narrow:.2f}")
        missed.append(f"widening up to x{MAX_SD_FACTOR:g}")
    elif wide is not None:
        seen.append(f"an sd off by x{wide:.2f}")
        missed.append(f"narrowing down to x{1 / MAX_SD_FACTOR:g}")
    else:
        missed.append(f"sd off by x{1 / MAX_SD_FACTOR:g} to x{MAX_SD_FACTOR:g}")
    return seen, missed


def _power_line(n_sims: int, shift: float | None, narrow: float | None, wide: float | None) -> str:
    """The power of a run of ``n_sims`` simulations in one line (the sizes as
    :func:`_detected_sizes` takes them)."""
    seen, missed = _detected_sizes(shift, narrow, wide)
    head = f"with {n_sims} simulations this test detects ({100 * POWER_PROBABILITY:.0f}% of the time)"
    if not seen:
        return f"{head} no {' and no '.join(missed)} in one quantity"
    return f"{head} {' or '.join(seen)} in any one quantity" + (f", but no {' and no '.join(missed)}" if missed else "")


def detectable_defects(n_sims: int, n_draws: int, n_quantities: int,
                       false_alarm: float = FALSE_ALARM) -> RankPower:
    """The power of a run of S = ``n_sims`` simulations, L = ``n_draws`` draws and K =
    ``n_quantities`` quantities: the smallest mean shift (in posterior sds) and sd factors
    (narrow, below 1; wide, above 1) of ONE quantity that the uniformity test detects with
    probability :data:`POWER_PROBABILITY` (None: not even the largest searched). Computed
    by :func:`detection_rate` with bisection on the size; cached, so a summary pays for it
    once per (S, L, K, false_alarm)."""
    shift, narrow, wide = _detectable(int(n_sims), int(n_draws), int(n_quantities), float(false_alarm))
    return RankPower(
        probability=POWER_PROBABILITY,
        probability_mc_sd=float(np.sqrt(POWER_PROBABILITY * (1 - POWER_PROBABILITY) / POWER_REPLICATES)),
        mean_shift_sd=shift, sd_factor_narrow=narrow, sd_factor_wide=wide,
        n_sims=int(n_sims), n_draws=int(n_draws), n_quantities=int(n_quantities),
        false_alarm=float(false_alarm), replicates=POWER_REPLICATES, seed=POWER_SEED,
        method=("one quantity's ranks off by a normal mean shift or sd factor (as conjugate_normal_ranks "
                        "plants them), their exact PIT distribution against the same simultaneous band of level "
                        "1 - false_alarm / K; the other K - 1 quantities exact and their chance alarms not "
                        f"counted (the conservative, hardest case); {POWER_REPLICATES} replicates with common "
                f"random numbers (seed {POWER_SEED}), bisection on the size"),
        useful=_useful(shift, narrow), line=_power_line(int(n_sims), shift, narrow, wide))


def simulations_needed(n_draws: int, n_quantities: int, false_alarm: float = FALSE_ALARM) -> RankPower | None:
    """The power at the smallest S of :data:`SIMS_GRID` whose power is useful
    (``useful``), None if none is."""
    for s in SIMS_GRID:
        power = detectable_defects(s, n_draws, n_quantities, false_alarm)
        if power.useful:
            return power
    return None



__all__ = ["RankPower", "POWER_PROBABILITY", "POWER_REPLICATES", "POWER_SEED", "MAX_SHIFT_SD", "MAX_SD_FACTOR", "USELESS",
           "SIMS_GRID", "pit_cdf", "detection_rate", "detectable_defects", "simulations_needed"]
