"""The calibration of ranks: is a set of SBC ranks uniform, and if not, how does it fail?

An array layer (numpy in, numpy out), under the runners that produce the ranks
(``validation/runs/sbc.py``, ``runs/posterior_sbc.py``) and the reports that draw them.

If the truth is drawn from the prior and the posterior draws are exact, the rank of the
truth among L draws is uniform on {0, ..., L} (Talts et al. 2018). Ranks piled at low
values mean the posterior sits too high (truths below most draws); at high values, too low;
in both tails, too narrow; in the middle, too wide (:func:`failure_shape`).

The test: each quantity's ranks become PIT values u = (rank + V) / (L + 1), V uniform on
(0, 1) (exactly uniform when the ranks are), and their empirical CDF is checked against a
simultaneous confidence band (``ecdf_band.py``: the central band whose exact coverage, by the
recursion of Sailynoja, Burkner & Vehtari 2022, is the smallest reaching 1 - a), which
holds the whole ECDF of S uniform values with probability at least 1 - a. With K quantities, a = false_alarm / K (Bonferroni), so calibrated ranks
are called miscalibrated with probability at most ``false_alarm`` (5%); the rate reached is
measured by simulation in ``benchmarks/sbc_false_alarm.py``.

Two views of the same simulations, not second verdicts: the coverage of central intervals
(:func:`coverage_view`) and posterior contraction against z-score (:func:`contraction_view`).
What a run of S simulations could have seen is ``rank_power.py``; the verdict that joins
the test and its power is ``sbc_verdict.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from ..base.result_format import record_from_json, record_json
from .ecdf_band import ecdf_band
from .rates import wilson_interval

#: family-wise false-alarm rate of the uniformity test for calibrated ranks
FALSE_ALARM = 0.05
#: the uniformity test's status where every quantity's ranks stay inside their band
CALIBRATED = "calibrated"
#: the uniformity test's status where some quantity's ranks leave their band
MISCALIBRATED = "miscalibrated"


# --------------------------------------------------------------------------------------
# The uniformity test
# --------------------------------------------------------------------------------------
def eval_points(n_sims: int) -> np.ndarray:
    """Where the PIT ECDF is compared with its band: fixed (not data dependent, as the
    band's calibration requires), at most 100 points, inside (0, 1)."""
    k = min(n_sims, 100)
    return np.arange(1, k) / k


def simultaneous_band(n_sims: int, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The simultaneous ECDF band (``ecdf_band.ecdf_band``) for ``n_sims`` uniform values at
    :func:`eval_points`: their ECDF stays inside, bounds included, with probability >= prob."""
    return ecdf_band(n_sims, eval_points(n_sims), prob)


def pit_values(ranks: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT: (rank + V) / (L + 1), V ~ U(0, 1): uniform on (0, 1) exactly when
    the ranks are uniform on 0..L."""
    ranks = np.asarray(ranks, dtype=float)
    return (ranks + rng.uniform(size=ranks.shape)) / (n_draws + 1)


@dataclass(frozen=True, kw_only=True)
class QuantityUniformity:
    """One quantity's line of the uniformity test: ``inside`` its band or not, ``excess`` (how
    far its ECDF went past the band at worst, in units of the band's half-width; <= 0 inside),
    the shares of its PIT values in the lowest and highest tenths, both, and below one half,
    the two shape scores of :func:`failure_shape`, and ``shape`` in words where it failed
    (None inside: a lean inside the band is chance).

    Results stored before the shape was read (the layout of benchmarks/results/sbc_all.json)
    hold only the name, inside, excess and the outer-tenths and below-half shares: read back,
    the one-tenth shares, the scores and the shape are None - not recorded, not zero."""

    name: str
    inside: bool
    excess: float
    share_in_lower_tenth: float | None = None
    share_in_upper_tenth: float | None = None
    share_in_outer_tenths: float
    share_below_half: float
    shift_score: float | None = None
    spread_score: float | None = None
    shape: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The line as plain JSON, its fields in their declared order: the form a stored
        :class:`UniformityTest` holds for each quantity."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "QuantityUniformity":
        """The line a stored JSON object ``d`` holds (the inverse of :meth:`to_json`; the older
        layout without the shape reads with those fields None); ValueError naming the problem
        where ``d`` is not one (a required field missing, an unknown one)."""
        return record_from_json(cls, d, "quantity of a uniformity test")


@dataclass(frozen=True)
class UniformityTest:
    """The uniformity test of (S, K) ranks (:func:`uniformity`): ``status`` (:data:`CALIBRATED`
    or :data:`MISCALIBRATED`), the run's sizes, the family-wise ``false_alarm`` rate and the
    ``band_level`` each quantity's band has (1 - false_alarm / K), one
    :class:`QuantityUniformity` per quantity, and the ``worst`` three that failed, worst first."""

    status: str
    n_sims: int
    n_draws: int
    n_quantities: int
    false_alarm: float
    band_level: float
    quantities: tuple[QuantityUniformity, ...]
    worst: tuple[QuantityUniformity, ...]

    def to_json(self) -> dict[str, Any]:
        """The test as plain JSON, its fields in their declared order and each quantity's line
        nested as an object: the form an SBC result stores."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "UniformityTest":
        """The test a stored JSON object ``d`` holds, its lines read back by
        :meth:`QuantityUniformity.from_json` (the inverse of :meth:`to_json`); ValueError naming
        the problem where ``d`` or one of its lines is malformed."""
        def lines(v):
            return tuple(QuantityUniformity.from_json(q) for q in v)
        return record_from_json(cls, d, "uniformity test", quantities=lines, worst=lines)


def uniformity(ranks: np.ndarray, n_draws: int, *, names: list[str] | None = None,
               false_alarm: float = FALSE_ALARM, seed: int = 0) -> UniformityTest:
    """The uniformity test of (S, K) ranks in 0..``n_draws``: per quantity, does the PIT
    ECDF stay inside the simultaneous band of level 1 - false_alarm / K?

    Per quantity also the shares of its PIT values in the lowest tenth, the highest
    tenth, both (``share_in_outer_tenths``) and below one half, the two shape scores of
    :func:`failure_shape` and, for a quantity outside its band, its shape in words."""
    ranks = np.asarray(ranks)
    S, K = ranks.shape
    names = names or [f"q[{k}]" for k in range(K)]
    rng = np.random.default_rng(seed)
    u = pit_values(ranks, n_draws, rng)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, 1.0 - false_alarm / K)
    ecdf = (u[:, None, :] <= x[None, :, None]).mean(0)  # (points, K)
    # how far outside the band, in units of the band's half-width at that point
    # (a band of zero width - both bounds one count - measures in counts instead)
    half = np.where(upper > lower, (upper - lower) / 2.0, 1.0 / S)[:, None]
    excess = np.maximum(ecdf - upper[:, None], lower[:, None] - ecdf) / half
    worst = excess.max(0)
    per = []
    for k in range(K):
        low, high = float(np.mean(u[:, k] < 0.1)), float(np.mean(u[:, k] > 0.9))
        below = float(np.mean(u[:, k] < 0.5))
        inside = bool(worst[k] <= 0.0)
        shape = failure_shape(low, high, below, S)
        per.append(QuantityUniformity(
            name=names[k], inside=inside, excess=float(worst[k]), share_in_lower_tenth=low,
            share_in_upper_tenth=high, share_in_outer_tenths=low + high, share_below_half=below,
            shift_score=shape.shift_score, spread_score=shape.spread_score,
            # words only where the test failed: a lean inside the band is chance
            shape=None if inside else shape.shape))
    failed = [p for p in per if not p.inside]
    status = MISCALIBRATED if failed else CALIBRATED
    return UniformityTest(status=status, n_sims=S, n_draws=n_draws, n_quantities=K, false_alarm=false_alarm,
                          band_level=1.0 - false_alarm / K, quantities=tuple(per),
                          worst=tuple(sorted(failed, key=lambda p: -p.excess)[:3]))


def conjugate_normal_ranks(rng: np.random.Generator, n_sims: int, n_draws: int, n_quantities: int, *,
                           sd_factor: float = 1.0, shift: float = 0.0, defective: int | None = None) -> np.ndarray:
    """(n_sims, K) ranks of SBC on a problem with a known answer: theta ~ N(0, 1) and
    x ~ N(theta, 1) per quantity, so theta | x ~ N(x / 2, 1 / 2). The engine's draws are
    exact (``sd_factor = 1``, ``shift = 0``: the ranks are uniform) or have a planted
    defect: sd scaled by ``sd_factor``, mean moved by ``shift`` posterior sds, in the
    first ``defective`` quantities (None: all; the rest stay exact). Used to measure the
    uniformity test's false-alarm rate and power. A positive ``shift`` moves the draws
    up, so the truths fall at low ranks: a posterior shifted up."""
    theta = rng.standard_normal((n_sims, n_quantities))
    x = theta + rng.standard_normal((n_sims, n_quantities))
    k = n_quantities if defective is None else int(defective)
    scale = np.where(np.arange(n_quantities) < k, sd_factor, 1.0)
    offset = np.where(np.arange(n_quantities) < k, shift, 0.0)
    draws = x[:, None, :] / 2.0 + np.sqrt(0.5) * (offset + scale * rng.standard_normal(
        (n_sims, n_draws, n_quantities)))
    return (draws < theta[:, None, :]).sum(1)


# --------------------------------------------------------------------------------------
# The shape of a failure
# --------------------------------------------------------------------------------------
#: standard errors a shape score must reach before its word is used. The quantity has
#: already failed the band test, so these scores only choose the words; two standard
#: errors keep a wrong word rare (about 2% one-sided per score) without leaving most
#: flagged shifts at "no simple shape"
SHAPE_SCORE = 2.0
SHIFTED_UP = "posterior shifted up"
SHIFTED_DOWN = "posterior shifted down"
TOO_NARROW = "too narrow"
TOO_WIDE = "too wide"
NO_SIMPLE_SHAPE = "no simple shape"


@dataclass(frozen=True)
class FailureShape:
    """A quantity's rank distribution in words (``shape``) and the two scores they were chosen
    by (:func:`failure_shape`)."""

    shape: str
    shift_score: float
    spread_score: float


def failure_shape(lower: float, upper: float, below: float, n_sims: int) -> FailureShape:
    """A quantity's rank distribution in words, from the shares of its PIT values in the
    lowest tenth (``lower``), the highest tenth (``upper``) and below one half
    (``below``) over ``n_sims`` simulations.

    Two scores, each in binomial standard errors at this S (not fixed cut-offs: the same
    share is strong evidence at S = 1000 and none at S = 20):

    * shift: (below - 1/2) / sqrt(1/4 / S). Truths piled at LOW ranks (most of them below
      the posterior median) mean the posterior sits too high: "posterior shifted up";
      piled at high ranks, "shifted down".
    * spread: probit(lower) + probit(upper) - 2 probit(0.1), over its delta-method
      standard error. For draws off by a shift d and an sd factor s (N(mu + d sd, (s sd)^2)
      against the truth's N(mu, sd^2)), probit(lower) = d + s probit(0.1) and
      probit(upper) = -d + s probit(0.1): the shift cancels in the sum, which reads
      2 s probit(0.1). So the score sees the spread whatever the shift: positive when the
      tails are fuller than any pure shift makes them ("too narrow"; a pure narrowing
      over-fills both tails), negative when emptier ("too wide"). A pure shift, which
      piles truths in ONE tail and empties the other, scores about 0 - reading the two
      outer tenths together, as this module once did, called a shift "too narrow".

    Both scores past ``SHAPE_SCORE``: both words ("posterior shifted up and too
    narrow"); neither: "no simple shape". Returns the scores and ``shape``."""
    S = int(n_sims)
    shift = (below - 0.5) / np.sqrt(0.25 / S)
    # continuity-corrected shares (half a count added to each of the three cells: lowest
    # tenth, middle, highest tenth): an empty tenth has a finite probit, and the middle
    # cell keeps a share, so the variance below stays positive
    pl, pu = (lower * S + 0.5) / (S + 1.5), (upper * S + 0.5) / (S + 1.5)
    zl, zu = ndtri(pl), ndtri(pu)
    dl, du = np.exp(-0.5 * zl * zl) / np.sqrt(2 * np.pi), np.exp(-0.5 * zu * zu) / np.sqrt(2 * np.pi)
    # multinomial (co)variances of the two shares, through the probit's slope
    var = (pl * (1 - pl) / dl ** 2 + pu * (1 - pu) / du ** 2 - 2 * pl * pu / (dl * du)) / S
    spread = (zl + zu - 2 * ndtri(0.1)) / np.sqrt(var)
    words = []
    if abs(shift) >= SHAPE_SCORE:
        words.append(SHIFTED_UP if shift > 0 else SHIFTED_DOWN)
    if abs(spread) >= SHAPE_SCORE:
        words.append(TOO_NARROW if spread > 0 else TOO_WIDE)
    return FailureShape(shape=" and ".join(words) if words else NO_SIMPLE_SHAPE,
                        shift_score=float(shift), spread_score=float(spread))


def describe_failure(q: QuantityUniformity) -> str:
    """A failing quantity of :func:`uniformity` in words: its shape (:func:`failure_shape`)
    and the shares it was read from."""
    shape = q.shape or NO_SIMPLE_SHAPE
    return (f"{q.name} ({shape}: {100 * q.share_below_half:.0f}% of truths below the posterior median, "
            f"{100 * q.share_in_lower_tenth:.0f}% / {100 * q.share_in_upper_tenth:.0f}% in the lowest / "
            "highest tenth of ranks; 50%, 10% / 10% if calibrated)")


# --------------------------------------------------------------------------------------
# Two more views of the same simulations: coverage and contraction
# --------------------------------------------------------------------------------------
#: the nominal levels of central intervals the coverage view states numbers for
COVERAGE_LEVELS = (0.5, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class CoverageLevel:
    """The share of simulations whose truth lies in the central interval of level ``nominal``,
    with its pointwise 95% Wilson ``interval`` (lower, upper)."""

    nominal: float
    coverage: float
    interval: tuple[float, float]


@dataclass(frozen=True)
class QuantityCoverage:
    """One quantity's coverage at each level of :data:`COVERAGE_LEVELS`."""

    name: str
    levels: tuple[CoverageLevel, ...]

    def at(self, nominal: float) -> CoverageLevel | None:
        """The coverage at level ``nominal``; None where the view has no such level."""
        return next((c for c in self.levels if c.nominal == nominal), None)


@dataclass(frozen=True)
class CoverageView:
    """The coverage of central intervals (:func:`coverage_view`): the nominal ``levels``, the
    run's size, the interval's kind in words, the ``band_level`` of the uniformity test's band
    that holds the whole curve, and one :class:`QuantityCoverage` per quantity."""

    levels: tuple[float, ...]
    n_sims: int
    interval: str
    band_level: float
    quantities: tuple[QuantityCoverage, ...]

    def to_json(self) -> dict[str, Any]:
        """The view as plain JSON, its fields in their declared order with the quantities and
        their levels nested as objects: the form an SBC result stores."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "CoverageView":
        """The view a stored JSON object ``d`` holds, quantities and levels read back as
        :class:`QuantityCoverage` and :class:`CoverageLevel` (the inverse of :meth:`to_json`);
        ValueError naming the problem where any part of it is malformed."""
        def quantity(q):
            return record_from_json(QuantityCoverage, q, "quantity of a coverage view", levels=lambda v: tuple(
                record_from_json(CoverageLevel, c, "level of a coverage view") for c in v))
        return record_from_json(cls, d, "coverage view", quantities=lambda v: tuple(quantity(q) for q in v))


def coverage_view(ranks: np.ndarray, n_draws: int, names: list[str], *, false_alarm: float = FALSE_ALARM,
                  seed: int = 0) -> CoverageView:
    """Empirical coverage of central posterior intervals against their nominal level.

    The truth lies in the central interval of level p exactly when its PIT value u does,
    i.e. when ``w = |2u - 1| <= p``; so the coverage curve is the ECDF of w, and w is uniform
    when the ranks are. The same simultaneous band as the uniformity test's (level
    1 - false_alarm / K) therefore holds the whole curve of a calibrated engine; it is a view
    of the simulations, not a second verdict (the verdict stays the uniformity test's,
    whose false-alarm rate is measured). Numbers at :data:`COVERAGE_LEVELS` come with
    pointwise 95% Wilson intervals. The PIT values are those the test used (the same ``seed``)."""
    ranks = np.asarray(ranks)
    S, K = ranks.shape
    u = pit_values(ranks, n_draws, np.random.default_rng(seed))
    w = np.abs(2.0 * u - 1.0)
    per = []
    for k in range(K):
        levels = []
        for p in COVERAGE_LEVELS:
            hits = int(np.sum(w[:, k] <= p))
            lo, hi = wilson_interval(hits, S)
            levels.append(CoverageLevel(nominal=p, coverage=hits / S, interval=(lo, hi)))
        per.append(QuantityCoverage(name=names[k], levels=tuple(levels)))
    return CoverageView(levels=COVERAGE_LEVELS, n_sims=S, interval="pointwise 95% Wilson",
                        band_level=1.0 - false_alarm / K, quantities=tuple(per))


@dataclass(frozen=True)
class QuantityContraction:
    """One quantity's z-scores and contraction summarized over the simulations (None where
    no simulation had a finite value)."""

    name: str
    z_mean: float | None
    z_sd: float | None
    share_abs_z_above_2: float | None
    contraction_median: float | None


@dataclass(frozen=True)
class ContractionView:
    """Posterior contraction against z-score (:func:`contraction_view`): ``z`` and
    ``contraction`` as (simulations, quantities) rows (NaN where undefined), one
    :class:`QuantityContraction` per quantity, and what the truths' spread is in words."""

    z: tuple[tuple[float, ...], ...]
    contraction: tuple[tuple[float, ...], ...]
    quantities: tuple[QuantityContraction, ...]
    truth_spread: str

    def to_json(self) -> dict[str, Any]:
        """The view as plain JSON, its fields in their declared order (the ``z`` and
        ``contraction`` rows as lists, each quantity as an object): the form an SBC result stores."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "ContractionView":
        """The view a stored JSON object ``d`` holds, its quantities read back as
        :class:`QuantityContraction` (the inverse of :meth:`to_json`); ValueError naming the
        problem where any part of it is malformed."""
        return record_from_json(cls, d, "contraction view", quantities=lambda v: tuple(
            record_from_json(QuantityContraction, q, "quantity of a contraction view") for q in v))


def contraction_view(truth, post_mean, post_sd, names: list[str]) -> ContractionView | None:
    """Posterior contraction against z-score, per simulation and quantity (Betancourt's
    view of what the fits learn): z = (posterior mean - truth) / posterior sd, and
    contraction = 1 - posterior variance / variance of the truths over the simulations (the
    prior's variance in SBC; the variance under the conditioning posterior in posterior
    SBC). A calibrated engine's z have mean 0 and sd near 1 (exactly 1 for Gaussian
    posteriors; ``P(|z| > 2)`` is then 4.6%); contraction near 0 means the data taught the fit
    nothing about a quantity, near 1 that they pinned it down. ``truth``, ``post_mean``,
    ``post_sd``: (simulations, quantities) arrays; None when there are no simulations."""
    truth, mean, sd = (np.asarray(a, dtype=float) for a in (truth, post_mean, post_sd))
    if truth.size == 0:
        return None
    spread = truth.var(0, ddof=1) if len(truth) > 1 else np.full(truth.shape[1], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, (mean - truth) / sd, np.nan)
        contraction = np.where(spread > 0, 1.0 - sd ** 2 / spread, np.nan)
    per = []
    for k, name in enumerate(names):
        zk = z[:, k][np.isfinite(z[:, k])]
        per.append(QuantityContraction(
            name=name, z_mean=float(zk.mean()) if zk.size else None,
            z_sd=float(zk.std(ddof=1)) if zk.size > 1 else None,
            share_abs_z_above_2=float(np.mean(np.abs(zk) > 2.0)) if zk.size else None,
            contraction_median=float(np.nanmedian(contraction[:, k])) if np.isfinite(contraction[:, k]).any()
            else None))

    def rows(a):
        return tuple(tuple(row) for row in np.round(a, 5).tolist())
    return ContractionView(z=rows(z), contraction=rows(contraction), quantities=tuple(per),
                           truth_spread="variance of the truths over the simulations")



__all__ = ["FALSE_ALARM", "CALIBRATED", "MISCALIBRATED", "eval_points", "simultaneous_band", "pit_values",
           "uniformity", "UniformityTest", "QuantityUniformity", "conjugate_normal_ranks", "failure_shape",
           "FailureShape", "describe_failure", "SHIFTED_UP", "SHIFTED_DOWN", "TOO_NARROW", "TOO_WIDE",
           "NO_SIMPLE_SHAPE", "COVERAGE_LEVELS", "coverage_view", "CoverageView", "QuantityCoverage",
           "CoverageLevel", "contraction_view", "ContractionView", "QuantityContraction"]
