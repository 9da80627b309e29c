"""A verdict on an engine against a reference, with a known false-alarm rate.

The question a user asks is "is this engine's posterior the reference's, as far as the
reference can tell?". The reference is itself a Monte Carlo estimate, so the answer
depends on its precision. Per coordinate i of the measured parameters::

    t_mean_i = (m_e,i - m_r,i) / se_mean_i,        se_mean_i^2 = MCSE(m_r,i)^2 + MCSE(m_e,i)^2
    t_sd_i   = (s_e,i - s_r,i) / (s_e,i rel_i),    rel_i^2     = RSE(s_r,i)^2 + RSE(s_e,i)^2

with m, s the mean and standard deviation of the engine (e) and the reference (r); MCSE
the Monte Carlo standard error of a mean and RSE the relative one of an sd, both by batch
means (:func:`moments_and_mcse`). An engine with closed-form moments (a Gaussian) has no
Monte Carlo error of its own. For an exact engine each statistic is approximately
Student's t with b - chains degrees of freedom (b batches; see
:func:`moments_and_mcse` for why not b - 1). Across the K = 2d tests (d
coordinates; fewer where a moment does not exist) the rule is Bonferroni's: the engine
**differs** when ::

    max_i |t_i| > c_K = the (1 - alpha / (2K)) quantile of t_{b-1},

so an exact engine is flagged with probability at most about alpha (5%) whatever d is and
however the coordinates are correlated (the union bound needs no independence). The rate
actually reached is measured by simulation in ``benchmarks/verdict_false_alarm.py`` and
tabled in docs/validation.md, because the t approximation is only approximate.

Why the sd's error is relative and taken at the engine's sd: the reference's sd and its
estimated error come from the same draws and move together (a low sample sd comes with a
low estimated error), which skewed the statistic and added false alarms; a relative
error is scale-free and much less tied to the sample sd.

What the reference could have detected: a mean shift of ``detectable_mean_shift`` sds
in its least precise coordinate, c_K se_mean_i / s_r,i, is flagged with probability
about 1/2 (the power is 1/2 when the shift equals the threshold); likewise a relative
error of the sd of ``detectable_sd_change``. A verdict "indistinguishable" says no more
than that: smaller differences may exist.

Not applicable: a point estimate (no distribution to compare), and the moments a
heavy-tailed posterior lacks (``validation/judge/moment_existence.py``): those tests are left
out, or the whole verdict when no moment exists.

The joint verdict (:func:`joint_verdict`, DERIVATIONS.md §7): the same tests on the means
and sds of d linear functions v_j' theta - the directions where the engine's variance
is most off the reference's - so that exact marginals with wrong correlations are seen
too, at the same false-alarm rate. The directions come from the first half of every
chain, the tests from the second halves; measured in
``benchmarks/joint_verdict_false_alarm.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np
from scipy.linalg import eigh
from scipy.stats import norm
from scipy.stats import t as student_t

from ...inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior
from ...models.base import Site
from .correlations import dropped_correlation, random_correlation, rotated_correlation

#: the false-alarm rate of the verdict for an exact engine (at most; Bonferroni)
FALSE_ALARM = 0.05
#: worst coordinates named in a verdict
N_WORST = 3
#: what a verdict compares: coordinates' means and sds, means and sds along directions, or
#: the coordinates' whole distributions (validation/judge/distribution.py)
MARGINAL, JOINT, DISTRIBUTION = "marginal", "joint", "distribution"
SCOPES = (MARGINAL, JOINT, DISTRIBUTION)
#: a verdict's status where no test exceeds its threshold
INDISTINGUISHABLE = "indistinguishable"
#: a verdict's status where a test exceeds its threshold, or the engine is certainly different
DIFFERS = "differs"
#: a verdict's status where there is nothing to compare (the reason says why)
NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class Verdict:
    """The judgement of one engine against one reference: ``scope`` says of what - the
    coordinates' means and sds (:data:`MARGINAL`), means and sds along directions
    (:data:`JOINT`), or the coordinates' whole distributions (:data:`DISTRIBUTION`,
    ``validation/judge/distribution.py``).

    status: :data:`INDISTINGUISHABLE`, :data:`DIFFERS` or :data:`NOT_APPLICABLE`; reason: one
    sentence saying why (for "not applicable", why there is no verdict). statistic: ``max |z|``
    over the tests; threshold: c_K; n_tests: K. worst: up to ``N_WORST`` tests, worst
    first, each {"coordinate", "test", "z", "difference"} (the joint verdict names its
    directions in "coordinate"). point_mass: coordinates where the engine's sd is exactly 0
    (a certain difference, outside the z tests). detectable_mean_shift (in reference sds)
    and detectable_sd_change (relative): what the reference could detect with probability
    1/2. The joint verdict also has direction (the worst test's direction: text, loadings,
    share, test, z, sd_ratio, mean_shift), directions (d) and draws_per_half. The
    distribution verdict has detectable_cdf_change and detectable_pooled_cdf_change (in
    probability, a coordinate's and the average over coordinates), outside_support (the
    coordinate where the engine puts most mass below 0 where the model's support is w >= 0:
    coordinate, mass, resolution) and levels (the engine quantiles compared); its statistic
    and threshold are the worst test's, whose family has its own threshold.
    """

    status: str
    reason: str
    false_alarm: float = FALSE_ALARM
    n_tests: int = 0
    statistic: float | None = None
    threshold: float | None = None
    worst: tuple[Mapping[str, Any], ...] = ()
    point_mass: tuple[str, ...] = ()
    detectable_mean_shift: float | None = None
    detectable_sd_change: float | None = None
    scope: str = MARGINAL
    direction: Mapping[str, Any] | None = None
    directions: int | None = None
    draws_per_half: int | None = None
    detectable_cdf_change: float | None = None
    detectable_pooled_cdf_change: float | None = None
    outside_support: Mapping[str, Any] | None = None
    levels: tuple[float, ...] = ()

    def __post_init__(self):
        if self.status not in (INDISTINGUISHABLE, DIFFERS, NOT_APPLICABLE):
            raise ValueError(f"unknown verdict status {self.status!r}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown verdict scope {self.scope!r}; known: {', '.join(SCOPES)}")
        object.__setattr__(self, "worst", tuple(self.worst))
        object.__setattr__(self, "point_mass", tuple(self.point_mass))
        object.__setattr__(self, "levels", tuple(self.levels))

    @property
    def joint(self) -> bool:
        """Whether this is a joint verdict (scope :data:`JOINT`: means and sds along directions)."""
        return self.scope == JOINT

    @property
    def differs(self) -> bool:
        """Whether the engine differs from the reference (status :data:`DIFFERS`)."""
        return self.status == DIFFERS

    @property
    def applicable(self) -> bool:
        """Whether there is a verdict at all: False for status :data:`NOT_APPLICABLE`, whose
        reason says why."""
        return self.status != NOT_APPLICABLE

    def to_json(self) -> dict[str, Any]:
        """The verdict as results.json stores it (the joint keys only for a joint verdict)."""
        out = {"status": self.status, "reason": self.reason, "false_alarm": self.false_alarm,
               "n_tests": self.n_tests, "statistic": self.statistic, "threshold": self.threshold,
               "worst": [dict(w) for w in self.worst], "point_mass": list(self.point_mass),
               "detectable_mean_shift": self.detectable_mean_shift,
               "detectable_sd_change": self.detectable_sd_change}
        if self.scope != MARGINAL:
            out["scope"] = self.scope
        if self.joint:
            out.update(direction=None if self.direction is None else dict(self.direction),
                       directions=self.directions, draws_per_half=self.draws_per_half)
        if self.scope == DISTRIBUTION:
            out.update(detectable_cdf_change=self.detectable_cdf_change,
                       detectable_pooled_cdf_change=self.detectable_pooled_cdf_change,
                       outside_support=None if self.outside_support is None else dict(self.outside_support),
                       levels=list(self.levels))
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Verdict":
        """The inverse of :meth:`to_json` (a stored results.json read back; one stored before
        verdicts had a scope is joint when it has a direction)."""
        scope = d.get("scope", JOINT if "direction" in d else MARGINAL)
        return cls(**{k: d[k] for k in ("status", "reason", "false_alarm", "n_tests", "statistic", "threshold",
                                        "detectable_mean_shift", "detectable_sd_change")},
                   worst=tuple(d.get("worst") or ()), point_mass=tuple(d.get("point_mass") or ()), scope=scope,
                   direction=d.get("direction"), directions=d.get("directions"),
                   draws_per_half=d.get("draws_per_half"), detectable_cdf_change=d.get("detectable_cdf_change"),
                   detectable_pooled_cdf_change=d.get("detectable_pooled_cdf_change"),
                   outside_support=d.get("outside_support"), levels=tuple(d.get("levels") or ()))


def threshold(n_tests: int, false_alarm: float = FALSE_ALARM, df: float | None = None) -> float:
    """c_K: two-sided Bonferroni critical value of K = ``n_tests`` tests, each standard
    normal (df None) or Student's t with ``df`` degrees of freedom."""
    if n_tests < 1:
        raise ValueError("a verdict needs at least one test")
    p = false_alarm / (2.0 * n_tests)
    return float(norm.isf(p) if df is None else student_t.isf(p, df))


def chains_draws_flat(posterior) -> np.ndarray:
    """(chains, draws, D) draws of a DrawsPosterior, in the order of its flat names."""
    parts = []
    for s in posterior.sites:
        d = np.asarray(posterior.draws[s.name], dtype=float)
        parts.append(d.reshape(d.shape[0], d.shape[1], -1))
    return np.concatenate(parts, axis=2)


#: batches per chain of the batch-means standard errors (see :func:`moments_and_mcse`)
BATCHES_PER_CHAIN = 5


def moments_and_mcse(draws: np.ndarray) -> dict[str, Any]:
    """Mean, sd (ddof 1) and their Monte Carlo standard errors of every coordinate of
    (chains, draws, D) draws, by batch means, with the degrees of freedom of each error.

    Each chain is cut into ``BATCHES_PER_CHAIN`` consecutive batches; the error of the
    mean is sd(batch means) / sqrt(b) and that of the sd is sd(batch sds) / sqrt(b), b the
    number of batches. When the batches are long against the chain's autocorrelation
    time, their statistics are nearly independent and normal, so (estimate - truth) / error
    follows Student's t with about b - 1 degrees of freedom (but see below). Five batches per chain: a certified
    reference has an ESS of at least 100 per chain (400 over 4 chains), so its
    autocorrelation time is at most 1/100 of a chain and each batch spans at least 20 of
    them. Ten batches per chain (10 autocorrelation times each) measured 5.5-9.5% false
    alarms on AR(1) chains at ESS 440; five measured 4-5.7% (300 replicates each).

    The degrees of freedom: b - 1 would be exact for independent normal batch statistics;
    at the certification boundary they are neither. Batch means of a chain with
    autocorrelation time tau underestimate the error by about tau / batch length (2-4% at
    ESS 440), and the batch statistics of squares are skewed, so that a low sample sd comes
    with a low estimated error. Matching the empirical two-sided tail quantiles of both
    statistics on AR(1) chains at ESS 440 (200,000 coordinates) gave an effective 15-18
    degrees of freedom for the nominal 19. We use b - chains (16 for 4 chains; the count
    one would have if each chain's mean were estimated separately), which the simulation
    in ``benchmarks/verdict_false_alarm.py`` shows keeps the false-alarm rate at or below
    5% for d from 2 to 500, where b - 1 gave 5.6-5.8% pooled.

    Why not ArviZ's ESS-based MCSE: the ESS estimate is itself noisy, and treating the
    resulting z as normal gave heavy tails (kurtosis 3.2) that raised the false alarms of
    a 100-test Bonferroni rule in our simulation (8% for a nominal 5% at d = 50).
    """
    chains, n, d = draws.shape
    per_chain = max(2, min(BATCHES_PER_CHAIN, n // 2))
    size = n // per_chain
    batches = draws[:, : per_chain * size].reshape(chains * per_chain, size, d)
    b = batches.shape[0]
    flat = draws.reshape(-1, d)
    mean, sd = flat.mean(0), flat.std(0, ddof=1)
    # the sd's error through the variance: batch means of (x - overall mean)^2, then the
    # delta method se(s) = se(s^2) / (2 s) (batch sds would miss the part of s^2 that
    # the spread of the batch means contributes)
    squares = ((batches - mean) ** 2).mean(1)
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant coordinate: 0 / 0, NaN
        rel_mcse_sd = squares.std(0, ddof=1) / squares.mean(0) / np.sqrt(b) / 2.0
    return {"mean": mean, "sd": sd,
            "mcse_mean": batches.mean(1).std(0, ddof=1) / np.sqrt(b),
            # relative: se(s) / s, scale-free (see the module docstring)
            "rel_mcse_sd": rel_mcse_sd,
            # one degree of freedom per chain spent, not one in all (see the docstring)
            "df": b - chains}


def own_moments(approx, draws: np.ndarray) -> dict[str, Any]:
    """:func:`moments_and_mcse` of an engine's own (chains, n, D) draws of the quantities
    under test. Importance-resampled draws (``psis_ess`` in the engine's FitInfo,
    inference/importance.py) are n draws with replacement from one weighted pool worth
    ESS independent draws: their batch means see only the resampling error sigma^2 / n,
    not the pool's own importance-sampling error sigma^2 / ESS, which all batches share.
    Their errors are therefore scaled by sqrt(1 + n / ESS), the ratio of the two totals."""
    return resampling_corrected(approx, moments_and_mcse(draws), draws.shape[0] * draws.shape[1])


def resampling_corrected(approx, own: dict[str, Any], n: int) -> dict[str, Any]:
    """:func:`moments_and_mcse` ``own`` of n of an engine's draws, with the errors scaled by
    sqrt(1 + n / ESS) when they were resampled by importance weights (``own_moments``);
    unchanged otherwise."""
    ess = (getattr(approx.info, "extra", None) or {}).get("psis_ess")
    if not ess:
        return own
    factor = float(np.sqrt(1.0 + n / float(ess)))
    return {**own, "mcse_mean": own["mcse_mean"] * factor, "rel_mcse_sd": own["rel_mcse_sd"] * factor}


def untrusted_resampling(approx) -> str | None:
    """Why draws resampled by importance weights whose Pareto k-hat exceeds its threshold
    min(1 - 1/log10 S, 0.7) get no verdict (None for any other posterior): above it the
    importance-sampling ESS that ``own_moments`` takes their Monte Carlo error from is
    itself unreliable (Vehtari et al. 2024), so no test on them has a known false-alarm rate."""
    extra = getattr(getattr(approx, "info", None), "extra", None) or {}
    if extra.get("psis_trusted") is False:
        limit, fitted = extra.get("psis_khat_threshold"), extra.get("psis_draws")
        bound = (f"{limit:.2f} (min(1 - 1/log10 S, 0.7) at S = {fitted})" if limit is not None and fitted
                 else "its threshold")
        return (f"importance-resampled draws with Pareto k-hat {extra.get('psis_khat', float('nan')):.2f} > {bound}: "
                "their effective sample size, and so their Monte Carlo error, cannot be estimated reliably, "
                "so no test on them has a known false-alarm rate")
    return None


def not_applicable(reason: str, *, joint: bool = False, scope: str | None = None) -> Verdict:
    """No verdict, and why (a point estimate, a reference that is not certified, ...);
    ``scope`` (or ``joint``) says which verdict is missing."""
    return Verdict(NOT_APPLICABLE, reason, scope=scope or (JOINT if joint else MARGINAL))


def reference_errors_usable(ref: dict[str, Any], sd_exists: bool = True) -> bool:
    """Every Monte Carlo error the tests divide by is finite and positive."""
    errors = np.r_[ref["mcse_mean"], ref["rel_mcse_sd"] if sd_exists else []]
    return bool(np.all(np.isfinite(errors)) and np.all(errors > 0) and np.all(ref["sd"] > 0))


def compare_moments(m_e: np.ndarray, s_e: np.ndarray, ref: dict[str, Any], *, own: dict[str, Any] | None = None,
                    sd_exists: bool = True, false_alarm: float = FALSE_ALARM) -> dict[str, Any]:
    """The t tests of the module docstring on K given quantities: the engine's means
    ``m_e`` and sds ``s_e`` against the reference's :func:`moments_and_mcse` ``ref`` of the
    same quantities (coordinates for :func:`verdict`, fixed directions for
    :func:`joint_verdict`). ``own``: :func:`moments_and_mcse` of the engine's own draws
    of them (None: closed-form moments, no Monte Carlo error).

    Returns tests (tuples test, index, z, difference: the mean's in reference sds, the
    sd's relative), point_mass (engine sd exactly 0), threshold, statistic (``max |z|``; NaN
    when some z is not finite), order (of the tests, worst first), se_mean and rel_sd (the
    combined errors), df.
    """
    mcse_m_e = rel_s_e = 0.0
    df = ref["df"]
    if own is not None:  # the engine's own Monte Carlo error adds to the reference's
        mcse_m_e, rel_s_e = own["mcse_mean"], own["rel_mcse_sd"]
        df = min(df, own["df"])  # the smaller of the two: conservative
    n = len(m_e)
    se_mean = np.sqrt(ref["mcse_mean"] ** 2 + np.square(mcse_m_e))
    tests = [("mean", i, (m_e[i] - ref["mean"][i]) / se_mean[i], (m_e[i] - ref["mean"][i]) / ref["sd"][i])
             for i in range(n)]
    # a coordinate where the engine's sd is exactly 0 (a weight pruned to a point: MM, EM,
    # mm-laplace's draws) cannot match a reference whose sd is positive: that difference
    # is certain, not a test with a false-alarm rate, so it is reported apart from the z's
    point_mass = (s_e == 0.0) if sd_exists else np.zeros(n, dtype=bool)
    rel_sd = None
    if sd_exists:
        # relative error of the sd, taken at the engine's sd (the value under test); a
        # constant coordinate of draws has no Monte Carlo error in its sd (it is 0 exactly)
        rel_sd = np.sqrt(ref["rel_mcse_sd"] ** 2 + np.square(np.where(point_mass, 0.0, rel_s_e)))
        tests += [("sd", i, (s_e[i] - ref["sd"][i]) / (s_e[i] * rel_sd[i]), s_e[i] / ref["sd"][i] - 1.0)
                  for i in range(n) if not point_mass[i]]
    c = threshold(len(tests) + int(point_mass.sum()), false_alarm, df)
    z_abs = np.array([abs(t[2]) for t in tests])
    finite = bool(np.all(np.isfinite(z_abs)))
    return {"tests": tests, "point_mass": point_mass, "threshold": c, "df": df,
            "statistic": float(z_abs.max()) if finite else float("nan"),
            "order": np.argsort(-z_abs)[:N_WORST] if finite else np.zeros(0, dtype=int),
            "se_mean": se_mean, "rel_sd": rel_sd}


def verdict(approx, ref_post, *, moments: dict[str, Any] | None = None,
            false_alarm: float = FALSE_ALARM, reference_moments: dict[str, np.ndarray] | None = None) -> Verdict:
    """The verdict on ``approx`` (any Posterior) against the reference draws ``ref_post``
    (a DrawsPosterior over the same sites). ``moments``: which posterior moments exist
    (None: all). ``reference_moments``: :func:`moments_and_mcse` of the reference, if
    already computed (it is the same for every engine of a comparison).

    Returns a :class:`Verdict`: status, reason, statistic (``max |z|``), threshold (c_K),
    n_tests, worst (up to three coordinates, each with its test, z and the difference in
    reference sds), detectable_mean_shift and detectable_sd_change (what the reference
    could detect), false_alarm, point_mass (the coordinates where the engine's sd is
    exactly 0: "differs" for certain, outside the z tests).
    """
    if approx.kind == "point":
        return not_applicable("a point estimate has no distribution to compare (its distance to the "
                              "reference is in the metrics)")
    untrusted = untrusted_resampling(approx)
    if untrusted:
        return not_applicable(untrusted)
    mean_exists = moments is None or moments.get("mean_exists") is True
    sd_exists = moments is None or moments.get("sd_exists") is True
    if not mean_exists:
        return not_applicable("the posterior mean does not exist on these data: nothing to compare")
    ref = reference_moments if reference_moments is not None else moments_and_mcse(chains_draws_flat(ref_post))
    if not reference_errors_usable(ref, sd_exists):
        return not_applicable("a Monte Carlo standard error of the reference is zero or not finite")
    m_e = np.asarray(approx.mean_flat(), dtype=float)
    s_e = np.asarray(approx.sd_flat(), dtype=float)
    own = own_moments(approx, chains_draws_flat(approx)) if approx.kind == "draws" else None
    cmp = compare_moments(m_e, s_e, ref, own=own, sd_exists=sd_exists, false_alarm=false_alarm)
    if not np.isfinite(cmp["statistic"]):
        return not_applicable("the engine's own Monte Carlo standard error is not finite")
    names = approx.flat_names()
    tests, c, point_mass, statistic = cmp["tests"], cmp["threshold"], cmp["point_mass"], cmp["statistic"]
    worst = [{"coordinate": names[tests[k][1]], "test": tests[k][0], "z": float(tests[k][2]),
              "difference": float(tests[k][3])} for k in cmp["order"]]
    status = DIFFERS if statistic > c or point_mass.any() else INDISTINGUISHABLE
    detect_mean = float(c * np.max(cmp["se_mean"] / ref["sd"]))
    detect_sd = float(c * np.max(cmp["rel_sd"])) if cmp["rel_sd"] is not None else None
    collapsed = [names[i] for i in np.flatnonzero(point_mass)]
    if collapsed:
        shown = ", ".join(collapsed[:N_WORST]) + (", ..." if len(collapsed) > N_WORST else "")
        reason = (f"differs from the reference: the engine's sd is exactly 0 at {len(collapsed)} coordinate"
                  f"{'s' if len(collapsed) > 1 else ''} ({shown}; pruned to a point) where the reference's is "
                  f"{ref['sd'][point_mass].min():.3g} or more - certain, not a test; the other tests: "
                  f"max |z| = {statistic:.2f} against {c:.2f}")
    elif status == DIFFERS:
        top = worst[0]
        size = (f"mean off by {top['difference']:+.2f} reference sd" if top["test"] == "mean"
                else f"sd off by {100 * top['difference']:+.0f}%")
        reason = (f"differs from the reference: {top['coordinate']} {size} (z = {top['z']:+.1f}; "
                  f"threshold {c:.2f} for {len(tests)} tests at a {100 * false_alarm:g}% false-alarm rate)")
    else:
        reason = (f"indistinguishable from the reference at this precision: max |z| = {statistic:.2f} <= {c:.2f} "
                  f"({len(tests)} tests, {100 * false_alarm:g}% false-alarm rate); the reference would detect a mean "
                  f"shift of {detect_mean:.3f} sd" + (f" or an sd off by {100 * detect_sd:.1f}%" if detect_sd else "")
                  + " (with probability 1/2)")
    if not sd_exists:
        reason += "; the posterior sd does not exist on these data, so only means were compared"
    return Verdict(status, reason, false_alarm=false_alarm, n_tests=len(tests), statistic=statistic, threshold=c,
                   worst=tuple(worst), point_mass=tuple(collapsed), detectable_mean_shift=detect_mean,
                   detectable_sd_change=detect_sd)


# --------------------------------------------------------------------------------------
# The joint verdict (DERIVATIONS.md §7)
# --------------------------------------------------------------------------------------
#: draws per chain each half of a chain must have for the joint verdict (5 batches of 4)
MIN_HALF_DRAWS = 20
#: ridge added to the reference's half-sample covariance, relative to its diagonal
RIDGE = 1e-10
#: a correlation matrix whose smallest eigenvalue is below this is taken as singular
SINGULAR = 1e-12


def split_halves(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first half, second half) of every chain of (chains, draws, D) draws."""
    h = draws.shape[1] // 2
    return draws[:, :h], draws[:, h:]


def pooled_covariance(draws: np.ndarray) -> np.ndarray:
    """(D, D) sample covariance (ddof 1) of (chains, draws, D) draws, chains pooled."""
    return np.atleast_2d(np.cov(draws.reshape(-1, draws.shape[-1]), rowvar=False))


def joint_directions(engine_cov: np.ndarray, ref_cov: np.ndarray) -> np.ndarray:
    """(D, D) generalized eigenvectors v_j of engine_cov v = lambda ref_cov v, as columns,
    normalized v' ref_cov v = 1, ordered by lambda (the engine's variance along v_j over
    the reference's). ``ref_cov`` gets a ridge of RIDGE times its diagonal, so that
    exactly collinear reference draws (fewer draws than coordinates, a deterministic
    relation) still give a positive definite matrix; the directions need only be fixed
    given the test draws, so the ridge cannot move the false-alarm rate."""
    ridged = ref_cov + RIDGE * np.diag(np.diag(ref_cov))
    return eigh(engine_cov, ridged)[1]


def oriented(directions: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """The directions with signs flipped so that each one's largest standardized loading
    (``sd`` v_j) is positive: a reported mean shift then has the sign of that loading."""
    u = directions * sd[:, None]
    lead = u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])]
    return directions * np.where(lead < 0, -1.0, 1.0)


def describe_direction(v: np.ndarray, sd: np.ndarray, names: list[str]) -> dict[str, Any]:
    """v in the reference's standardized coordinates (sd v, unit length): its up to
    N_WORST largest loadings by name, as a dict and as text ("0.71 w[2] - 0.70 w[3]"),
    and the share of its squared length they hold."""
    u = sd * v
    u = u / np.linalg.norm(u)
    top = np.argsort(-np.abs(u))[:N_WORST]
    top = top[np.abs(u[top]) >= 0.005]  # a loading that rounds to 0.00 names nothing
    terms = [f"{u[i]:.2f} {names[i]}" if k == 0 else f"{'-' if u[i] < 0 else '+'} {abs(u[i]):.2f} {names[i]}"
             for k, i in enumerate(top)]
    held = float(np.sum(u[top] ** 2))
    text = " ".join(terms) + (" + ..." if held < 0.995 else "")
    return {"text": text, "loadings": {names[i]: float(u[i]) for i in top}, "share": held}


def _engine_covariance_problem(cov: np.ndarray, names: list[str]) -> str | None:
    """Why the engine's covariance cannot define directions, or None."""
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    if np.any(sd == 0.0):
        pruned = [names[i] for i in np.flatnonzero(sd == 0.0)]
        shown = ", ".join(pruned[:N_WORST]) + (", ..." if len(pruned) > N_WORST else "")
        return (f"the engine's covariance is singular: its sd is exactly 0 at {shown} (pruned to a point), "
                "which the marginal verdict reports as a certain difference")
    smallest = float(np.linalg.eigvalsh(cov / np.outer(sd, sd))[0])
    if not smallest > SINGULAR:
        return (f"the engine's covariance is singular (its correlation matrix's smallest eigenvalue is "
                f"{smallest:.1e}): no directions to compare along")
    return None


def joint_verdict(approx, ref_post, *, moments: dict[str, Any] | None = None,
                  false_alarm: float = FALSE_ALARM) -> Verdict:
    """The verdict on the joint posterior: the marginal verdict's tests, on the means and
    sds of d linear functions v_j' theta instead of the d coordinates, with the same
    false-alarm rate (DERIVATIONS.md §7). The v_j are the generalized eigenvectors of the
    engine's covariance against the reference's, the directions along which the engine's
    variance is most off, so a posterior with exact marginals and wrong correlations is
    caught. They come from the first half of every reference chain (and of every engine
    chain, for draws) and the tests use the second halves only: directions chosen on the
    draws they are tested on are biased towards the reference's own noise, and an exact
    engine would be flagged nearly always.

    Returns a joint :class:`Verdict` (worst: up to three directions, each named in
    "coordinate" by its text) with ``direction``: the worst test's direction in the
    reference's standardized coordinates (text, loadings, share of its squared length
    they hold), its test, z, and the engine's sd ratio and mean shift (in reference sds)
    along it. Also ``directions`` (d) and ``draws_per_half`` (the reference's, per chain).
    """
    if approx.kind == "point":
        return _joint_not_applicable("a point estimate has no distribution to compare (its distance to the "
                                     "reference is in the metrics)")
    untrusted = untrusted_resampling(approx)
    if untrusted:
        return _joint_not_applicable(untrusted)
    if not (moments is None or moments.get("mean_exists") is True):
        return _joint_not_applicable("the posterior mean does not exist on these data: nothing to compare")
    if not (moments is None or moments.get("sd_exists") is True):
        return _joint_not_applicable("the posterior sd does not exist on these data, so neither does its "
                                     "covariance: the marginal verdict compares the means")
    names = approx.flat_names()
    if len(names) == 1:
        return _one_coordinate(approx, ref_post, names[0], false_alarm)
    return _joint_tests(approx, chains_draws_flat(ref_post), names, false_alarm, split=True)


def _joint_not_applicable(reason: str) -> Verdict:
    return not_applicable(reason, joint=True)


def _one_coordinate(approx, ref_post, name: str, false_alarm: float) -> Verdict:
    """d = 1: the only direction is the coordinate, and the joint verdict the marginal one."""
    v = verdict(approx, ref_post, false_alarm=false_alarm)
    if not v.applicable:
        return replace(v, scope=JOINT, point_mass=())
    top = v.worst[0]
    ref_sd = float(np.asarray(ref_post.sd_flat())[0])
    engine_sd = float(np.asarray(approx.sd_flat())[0])
    shift = float((np.asarray(approx.mean_flat())[0] - np.asarray(ref_post.mean_flat())[0]) / ref_sd)
    direction = {"text": name, "loadings": {name: 1.0}, "share": 1.0, "test": top["test"], "z": top["z"],
                 "sd_ratio": engine_sd / ref_sd, "mean_shift": shift}
    return replace(v, scope=JOINT, direction=direction, directions=1,
                   reason=v.reason + " (one coordinate: the joint verdict is the marginal one)")


def _engine_sources(approx, split: bool):
    """(covariance, test draws) of the engine: a Gaussian's closed form (no test draws),
    or the first half of every engine chain for the covariance and the second half for
    the tests (its directions, like the reference's, must not be chosen on the draws
    they test)."""
    if approx.kind != "draws":
        return np.asarray(approx.cov, dtype=float), None
    draws = chains_draws_flat(approx)
    a, b = split_halves(draws) if split else (draws, draws)
    return pooled_covariance(a), b


def _joint_tests(approx, ref_draws: np.ndarray, names: list[str], false_alarm: float, *,
                 split: bool) -> Verdict:
    """The joint verdict on (chains, draws, d) reference draws. ``split`` False takes the
    directions and the tests from the same (whole) draws - wrong, kept only to measure the
    bias the split removes (benchmarks/joint_verdict_false_alarm.py)."""
    half = ref_draws.shape[1] // 2
    if half < MIN_HALF_DRAWS or (approx.kind == "draws" and approx.n_draws // 2 < MIN_HALF_DRAWS):
        return _joint_not_applicable(f"fewer than {MIN_HALF_DRAWS} draws per chain in a half chain: the joint "
                                     "verdict splits every chain in two")
    ref_a, ref_b = split_halves(ref_draws) if split else (ref_draws, ref_draws)
    engine_cov, engine_b = _engine_sources(approx, split)
    problem = _engine_covariance_problem(engine_cov, names)
    if problem:
        return _joint_not_applicable(problem)
    ref_cov = pooled_covariance(ref_a)
    ref_sd = np.sqrt(np.diag(ref_cov))
    if not np.all(ref_sd > 0):  # a constant reference coordinate: no ridge relative to 0 helps
        return _joint_not_applicable("a coordinate of the reference is constant: its Monte Carlo standard error "
                                     "is zero")
    V = oriented(joint_directions(engine_cov, ref_cov), ref_sd)
    ref = moments_and_mcse(ref_b @ V)
    if not reference_errors_usable(ref):
        return _joint_not_applicable("a Monte Carlo standard error of the reference is zero or not finite")
    if engine_b is None:
        m_e = np.asarray(approx.mean_flat(), dtype=float) @ V
        s_e = np.sqrt(np.sum((V.T @ np.asarray(approx.chol, dtype=float)) ** 2, axis=1))
        own = None
    else:
        own = own_moments(approx, engine_b @ V)
        m_e, s_e = own["mean"], own["sd"]
    cmp = compare_moments(m_e, s_e, ref, own=own, false_alarm=false_alarm)
    if not np.isfinite(cmp["statistic"]):
        return _joint_not_applicable("the engine's own Monte Carlo standard error is not finite")
    return _joint_result(cmp, V, ref, m_e, s_e, ref_sd, names, false_alarm, half)


def _joint_result(cmp, V, ref, m_e, s_e, ref_sd, names, false_alarm, half) -> Verdict:
    tests, c, statistic = cmp["tests"], cmp["threshold"], cmp["statistic"]
    worst = []
    for k in cmp["order"]:
        test, j, z, difference = tests[k]
        worst.append({"coordinate": describe_direction(V[:, j], ref_sd, names)["text"], "test": test,
                      "z": float(z), "difference": float(difference)})
    test, j, z, _ = tests[cmp["order"][0]]
    direction = {**describe_direction(V[:, j], ref_sd, names), "test": test, "z": float(z),
                 "sd_ratio": float(s_e[j] / ref["sd"][j]),
                 "mean_shift": float((m_e[j] - ref["mean"][j]) / ref["sd"][j])}
    status = DIFFERS if statistic > c else INDISTINGUISHABLE
    detect_mean = float(c * np.max(cmp["se_mean"] / ref["sd"]))
    detect_sd = float(c * np.max(cmp["rel_sd"]))
    rule = f"threshold {c:.2f} for {len(tests)} tests at a {100 * false_alarm:g}% false-alarm rate"
    if status == DIFFERS:
        size = (f"the engine's sd is x{direction['sd_ratio']:.2f} the reference's" if test == "sd" else
                f"the engine's mean is off by {direction['mean_shift']:+.2f} of the reference's sd")
        reason = f"differs jointly: along {direction['text']} (reference-sd units) {size} (z = {z:+.1f}; {rule})"
    else:
        reason = (f"jointly indistinguishable from the reference at this precision: max |z| = {statistic:.2f} <= "
                  f"{c:.2f} (means and sds along {len(names)} directions, {100 * false_alarm:g}% false-alarm "
                  f"rate); along any of them the reference would detect a mean shift of {detect_mean:.3f} sd or "
                  f"an sd off by {100 * detect_sd:.1f}% (with probability 1/2)")
    return Verdict(status, reason, false_alarm=false_alarm, n_tests=len(tests), statistic=statistic, threshold=c,
                   worst=tuple(worst), detectable_mean_shift=detect_mean, detectable_sd_change=detect_sd, scope=JOINT,
                   direction=direction, directions=len(names), draws_per_half=int(half))


def ar1_reference_draws(rng: np.random.Generator, mean: np.ndarray, sd: np.ndarray, *, chains: int = 4,
                        draws: int = 1000, phi: float = 0.8, corr: np.ndarray | None = None) -> np.ndarray:
    """(chains, draws, d) stationary AR(1) chains with N(mean_i, sd_i^2) marginals: a
    stand-in for MCMC output whose ESS is known, chains * draws * (1 - phi) / (1 + phi)
    (phi = 0.8: about 440 for 4 x 1000, near the certification minimum of 400).
    ``corr``: the correlation matrix R of the stationary law (None: independent
    coordinates); x_t = phi x_(t-1) + sqrt(1 - phi^2) L z_t with L L' = R keeps
    Cov(x_t) = R at every t and every coordinate's autocorrelation phi^k."""
    d = len(mean)
    colour = (lambda z: z) if corr is None else (lambda z, L=np.linalg.cholesky(corr): z @ L.T)
    x = np.empty((chains, draws, d))
    x[:, 0] = colour(rng.standard_normal((chains, d)))
    noise = math.sqrt(1.0 - phi * phi) * colour(rng.standard_normal((chains, draws, d)))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return mean + sd * x


def simulate_verdicts(d: int, n_replicates: int, *, seed: int = 0, phi: float = 0.8, chains: int = 4,
                      draws: int = 1000, mean_shift: float = 0.0, sd_factor: float = 1.0) -> np.ndarray:
    """Statuses of :func:`verdict` for an engine whose Gaussian posterior is the exact one
    (``mean_shift = 0``, ``sd_factor = 1``: every "differs" is a false alarm) or one with a
    planted defect in coordinate 0 (mean moved by ``mean_shift`` sds, sd scaled by
    ``sd_factor``), against simulated reference draws of the exact posterior, one fresh
    reference per replicate. Returns a boolean array: flagged or not."""

    rng = np.random.default_rng(seed)
    sites = (Site("theta", (d,)),)
    info = FitInfo(engine="simulated", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0,
                   objective="", extra={})
    flagged = np.zeros(n_replicates, dtype=bool)
    for r in range(n_replicates):
        mean = rng.normal(0.0, 2.0, d)
        sd = np.exp(rng.normal(0.0, 0.5, d))
        ref = DrawsPosterior(None, sites, {"theta": ar1_reference_draws(rng, mean, sd, chains=chains, draws=draws,
                                                                         phi=phi)}, info)
        m_e, s_e = mean.copy(), sd.copy()
        m_e[0] += mean_shift * sd[0]
        s_e[0] *= sd_factor
        engine = GaussianPosterior(None, sites, m_e, np.diag(s_e), info)
        flagged[r] = verdict(engine, ref).differs
    return flagged


#: defects of :func:`simulate_joint_verdicts` that change the correlations only
JOINT_DEFECTS = ("rotated", "correlations dropped")


def simulate_joint_verdicts(d: int, n_replicates: int, *, seed: int = 0, phi: float = 0.8, chains: int = 4,
                            draws: int = 1000, defect: str | None = None, mean_shift: float = 0.0,
                            sd_factor: float = 1.0, engine_draws: bool = False, split: bool = True,
                            with_marginal: bool = False):
    """Statuses of :func:`joint_verdict` for an engine whose posterior is the exact one, a
    correlated Gaussian (:func:`random_correlation`, means and sds as in
    :func:`simulate_verdicts`), against correlated AR(1) reference chains of it, one fresh
    posterior and reference per replicate. Defects: ``defect`` "rotated" (the correlation
    matrix turned by a fresh random rotation and renormalized) or "correlations dropped"
    (mean field), every marginal exact; ``mean_shift`` (sds) and ``sd_factor`` in
    coordinate 0. ``engine_draws``: the engine is a second, independent AR(1) run of its
    Gaussian (an exact engine with Monte Carlo error) instead of the Gaussian itself.
    ``split`` False: directions and tests from the same draws (the biased rule the split
    replaces; for the benchmark only). Returns flagged per replicate (a boolean array),
    with ``with_marginal`` also :func:`verdict`'s on the same replicates: (joint, marginal).
    """

    if defect not in (None, *JOINT_DEFECTS):
        raise ValueError(f"unknown defect {defect!r}; known: {', '.join(JOINT_DEFECTS)}")
    rng = np.random.default_rng(seed)
    sites = (Site("theta", (d,)),)
    info = FitInfo(engine="simulated", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0,
                   objective="", extra={})
    joint = np.zeros(n_replicates, dtype=bool)
    marginal = np.zeros(n_replicates, dtype=bool)
    names = [f"theta[{i}]" for i in range(d)]
    for r in range(n_replicates):
        mean, sd, corr = rng.normal(0.0, 2.0, d), np.exp(rng.normal(0.0, 0.5, d)), random_correlation(rng, d)
        ref_draws = ar1_reference_draws(rng, mean, sd, chains=chains, draws=draws, phi=phi, corr=corr)
        ref = DrawsPosterior(None, sites, {"theta": ref_draws}, info)
        m_e, s_e = mean.copy(), sd.copy()
        m_e[0] += mean_shift * sd[0]
        s_e[0] *= sd_factor
        c_e = {None: corr, "rotated": rotated_correlation(corr, rng) if defect == "rotated" else None,
               "correlations dropped": dropped_correlation(corr)}[defect]
        if engine_draws:
            engine = DrawsPosterior(None, sites, {"theta": ar1_reference_draws(
                rng, m_e, s_e, chains=chains, draws=draws, phi=phi, corr=c_e)}, info)
        else:
            engine = GaussianPosterior(None, sites, m_e, s_e[:, None] * np.linalg.cholesky(c_e), info)
        joint[r] = _joint_tests(engine, ref_draws, names, FALSE_ALARM, split=split).differs
        if with_marginal:
            marginal[r] = verdict(engine, ref).differs
    return (joint, marginal) if with_marginal else joint


def summary_line(name: str, v: Verdict) -> str:
    """One line for the command line: engine, status and the reason."""
    if not v.applicable:
        return f"{name:<10} no verdict: {v.reason}"
    return f"{name:<10} {v.reason}"


__all__ = ["Verdict", "FALSE_ALARM", "MARGINAL", "JOINT", "DISTRIBUTION", "SCOPES", "resampling_corrected",
           "threshold", "verdict", "joint_verdict", "compare_moments", "moments_and_mcse",
           "not_applicable", "summary_line", "ar1_reference_draws", "simulate_verdicts", "simulate_joint_verdicts",
           "random_correlation", "joint_directions", "describe_direction", "JOINT_DEFECTS",
           "INDISTINGUISHABLE", "DIFFERS", "NOT_APPLICABLE"]
