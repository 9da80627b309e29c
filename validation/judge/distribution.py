"""The distribution verdict: does the engine's posterior differ from the reference's in
shape, tails, support or modes, as far as the reference can tell (DERIVATIONS.md §10)?

The marginal and joint verdicts (``verdict.py``) compare means and sds. An engine can have
every mean, sd and correlation exactly and still be the wrong distribution: a Gaussian fitted
to a posterior truncated at 0 (a third of its mass where the posterior has none), a
moment-matched Gaussian of a skewed posterior, heavy tails with the right covariance, a mode
missing. This verdict compares cumulative probabilities instead of moments.

The tests. For every coordinate i and level p_k in :data:`LEVELS`, t_ik is the engine's
p_k-quantile of coordinate i (closed form for a Gaussian; from the first half of every chain
for draws, so that the thresholds are fixed given the draws tested). Then::

    F_e,ik = the engine's probability of theta_i <= t_ik      (p_k exactly for a Gaussian;
                                                                the second halves for draws)
    F_r,ik = the mean of the indicators 1(theta_i <= t_ik) over the reference's draws

and z_ik = (F_e,ik - F_r,ik) / se_ik, with se_ik^2 the squared Monte Carlo errors of both
means, by batch means over every chain (the indicators' autocorrelation is what the batch
means see; ``verdict.moments_and_mcse``), taken at the probability p0 the test assumes (a
score test's error: the batch-means inflation kept, the binomial part evaluated at p0 =
F_e, or the pooled estimate for draws; ``_null_error`` says why) and floored at the error
of independent draws, sqrt(p0 (1 - p0) / N): the smallest the error can honestly be, which
keeps z finite where the reference never goes below the threshold (the engine's mass outside
the posterior's support). A Gaussian's quantiles have no Monte Carlo error, so its F_e has none.

Pooled tests aggregate a defect that every coordinate shares (heavy tails, a Gaussian
fitted to skewed weights all leaning one way), which one coordinate's test is too weak to
see: per draw the indicators are averaged over the d coordinates, at each level, and for
each pair of symmetric levels (p, 1 - p) the mass outside the central interval; each such
average is one scalar per draw, so its batch-means error holds the coordinates' correlations
without estimating them.

The rule is Bonferroni's, as the other verdicts': half the false-alarm rate for the d K
coordinate tests, half for the pooled ones (with d = 1 the coordinate tests alone), each
test's threshold the (1 - alpha_f / (2 K_f)) quantile of Student's t with the batch means'
degrees of freedom. Any ``|z|`` above its threshold: "differs". The rate reached for exact
engines is measured (``benchmarks/distribution_verdict.py``; docs/validation.md).

Support: mass the engine puts where the model's density is zero (below 0 in a coordinate
whose support is w >= 0 or w > 0) is a difference of that size that no Monte Carlo error blurs - the
reference has none there by construction. It is judged at the same resolution as the tests:
the verdict differs when the engine's mass below 0 in a coordinate exceeds the CDF change the
reference would detect (with probability 1/2) at the engine's lowest quantile level in that
coordinate, the test nearest the bound. A coordinate where the engine is a
point (sd exactly 0) while the reference's sd is positive is a certain difference too.

What it cannot see, and says so: a CDF difference smaller than its detectable size (stated);
differences beyond the engine's outermost quantiles, the tails (with a reference's ESS of a
few hundred a tail probability is barely resolvable); and dependence beyond the marginals - the
joint verdict tests second moments along directions, nothing tests the shape of the joint
distribution along directions other than the coordinates.
"""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable, Mapping

import numpy as np
from scipy.stats import norm

from ...inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior
from ...models.base import Site
from . import shapes
from .correlations import random_correlation
from .defects import transform_posterior
from .verdict import (
    DIFFERS,
    DISTRIBUTION,
    FALSE_ALARM,
    INDISTINGUISHABLE,
    MIN_HALF_DRAWS,
    N_WORST,
    Verdict,
    chains_draws_flat,
    joint_verdict,
    moments_and_mcse,
    not_applicable,
    resampling_corrected,
    split_halves,
    threshold,
    untrusted_resampling,
    verdict,
)

#: the engine's quantile levels at which the two CDFs are compared: the deciles. Chosen by
#: measured power at equal false alarms (benchmarks/distribution_verdict.py,
#: docs/validation.md) over 5/10/25/50/75/90/95%, the quartiles alone and an energy-distance
#: test: nine levels see a mode or a dip between the quartiles that seven miss, and levels
#: beyond 10% / 90% resolve little at a reference's few hundred effective draws (a tail
#: probability's relative error is large there) while raising the Bonferroni threshold of
#: every test. Mass outside a support bound is judged apart (see the module docstring).
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: the share of the false-alarm rate given to the pooled tests (the rest to the coordinates')
POOLED_SHARE = 0.5


def _scope(status: str, reason: str, **fields) -> Verdict:
    return Verdict(status, reason, scope=DISTRIBUTION, **fields)


def distribution_not_applicable(reason: str) -> Verdict:
    """No distribution verdict, and why."""
    return not_applicable(reason, scope=DISTRIBUTION)


def _level_text(p: float) -> str:
    return f"{100 * p:g}%"


def _engine_side(approx, levels: np.ndarray):
    """The engine's thresholds t (d, K), its probabilities below them F_e (d, K), the
    second-half draws for its own Monte Carlo error (None for a Gaussian), its sds and its
    mass below 0 per coordinate."""
    if approx.kind == "gaussian":
        m = np.asarray(approx.mean_flat(), dtype=float)
        s = np.asarray(approx.sd_flat(), dtype=float)
        t = m[:, None] + s[:, None] * norm.ppf(levels)[None, :]
        # a point (s = 0): every threshold is the point and all the mass is at or below it
        F_e = np.where(s[:, None] > 0, levels[None, :], 1.0)
        with np.errstate(divide="ignore"):
            below_zero = np.where(s > 0, norm.cdf(-m / np.where(s > 0, s, 1.0)), (m < 0).astype(float))
        return t, F_e, None, s, below_zero
    draws = chains_draws_flat(approx)
    first, second = split_halves(draws)
    t = np.quantile(first.reshape(-1, draws.shape[-1]), levels, axis=0).T
    flat = draws.reshape(-1, draws.shape[-1])
    return t, None, second, flat.std(0, ddof=1), (flat < 0).mean(0)


def _indicator_means(draws: np.ndarray, t: np.ndarray, pairs: list[tuple[int, int]]):
    """Batch-means moments of the coordinate indicators 1(theta_i <= t_ik) (flattened i, k),
    of their averages over coordinates per level, and of the averaged mass outside each
    central interval (pairs of levels): three :func:`moments_and_mcse` dicts."""
    below = (draws[..., None] <= t).astype(float)  # (chains, n, d, K)
    c, n, d, K = below.shape
    pooled = below.mean(axis=2)  # (chains, n, K)
    tails = np.stack([pooled[..., lo] + 1.0 - pooled[..., hi] for lo, hi in pairs], axis=-1) if pairs else \
        np.zeros((c, n, 0))
    return (moments_and_mcse(below.reshape(c, n, d * K)), moments_and_mcse(pooled),
            moments_and_mcse(tails) if pairs else None)


def _null_error(mcse: np.ndarray, p_hat: np.ndarray, p0: np.ndarray, n: int, scale: float = 1.0) -> np.ndarray:
    """The Monte Carlo error of a probability estimate ``p_hat`` (batch-means error ``mcse``)
    taken at the probability ``p0`` the test assumes, as a score test does: the batch-means
    variance is the binomial p_hat (1 - p_hat) / n times the chains' inflation, and the
    inflation is kept while the binomial part is evaluated at p0. A batch-means error taken
    at p_hat itself shrinks when p_hat lands on the rare side of p0 (few hits below an
    engine's 5% quantile), which inflates |z| exactly there: at d = 100 that raised an exact
    Gaussian engine's false alarms to 8% (docs/validation.md). Floored at the error of n
    independent draws at p0 (``scale`` divides that variance: d for an average over d
    coordinates), which also stands in where p_hat is 0 or 1 and no inflation can be read."""
    binomial_hat = p_hat * (1.0 - p_hat)
    binomial_0 = np.clip(p0 * (1.0 - p0), 0.0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        rescaled = np.where(binomial_hat > 0, np.nan_to_num(mcse, nan=0.0) * np.sqrt(binomial_0 / binomial_hat), 0.0)
    return np.maximum(rescaled, np.sqrt(binomial_0 / (n * scale)))


def _test_families(approx, ref: np.ndarray, t: np.ndarray, F_e: np.ndarray | None, engine_second: np.ndarray | None,
                   pairs: list[tuple[int, int]], pooled_share: float):
    """The tests on the live coordinates: a list of (family, z, difference, se) with family
    "coordinate" (d K tests, coordinate-major), "pooled" (K) and "tails" (one per pair of
    levels), difference = the engine's probability minus the reference's; and the degrees
    of freedom of the batch means. ``F_e``: a Gaussian's probabilities (no Monte Carlo error);
    ``engine_second``: otherwise, the second halves of the engine's chains."""
    chains, n_ref, d = ref.shape
    ref_c, ref_p, ref_t = _indicator_means(ref, t, pairs)
    df = ref_c["df"]
    if engine_second is None:
        Fe_c, Fe_p = F_e.ravel(), F_e.mean(0)
        Fe_t = np.array([Fe_p[lo] + 1.0 - Fe_p[hi] for lo, hi in pairs])
        eng_c = eng_p = eng_t = None
        n_eng = 0
    else:
        n_eng = engine_second.shape[0] * engine_second.shape[1]
        # importance-resampled draws: their batch means miss the pool's own error (verdict.own_moments)
        eng_c, eng_p, eng_t = (None if m is None else resampling_corrected(approx, m, n_eng)
                               for m in _indicator_means(engine_second, t, pairs))
        Fe_c, Fe_p = eng_c["mean"], eng_p["mean"]
        Fe_t = eng_t["mean"] if eng_t is not None else np.zeros(0)
        df = min(df, eng_c["df"])
    families = []
    if d == 0:
        return families, df
    for family, ref_m, Fe, eng_m, scale in (("coordinate", ref_c, Fe_c, eng_c, 1.0), ("pooled", ref_p, Fe_p, eng_p, d),
                                            ("tails", ref_t, Fe_t, eng_t, d)):
        if family != "coordinate" and not (d > 1 and pooled_share > 0 and (family == "pooled" or pairs)):
            continue
        # the probability both estimate if the engine is exact: the Gaussian's own, or the
        # draws' pooled estimate (each side weighted by its number of draws)
        p0 = Fe if eng_m is None else (n_ref * chains * ref_m["mean"] + n_eng * Fe) / (n_ref * chains + n_eng)
        se = _null_error(ref_m["mcse_mean"], ref_m["mean"], p0, chains * n_ref, scale)
        if eng_m is not None:
            se = np.sqrt(se ** 2 + _null_error(eng_m["mcse_mean"], Fe, p0, n_eng, scale) ** 2)
        families.append((family, (Fe - ref_m["mean"]) / se, Fe - ref_m["mean"], se))
    return families, df


def distribution_verdict(approx, ref_post, *, false_alarm: float = FALSE_ALARM,
                         levels: tuple[float, ...] = LEVELS, pooled_share: float = POOLED_SHARE) -> Verdict:
    """The distribution verdict on ``approx`` (any Posterior) against the reference draws
    ``ref_post`` (a DrawsPosterior over the same sites), as the module docstring defines it.

    Returns a :class:`~zoo.validation.judge.verdict.Verdict` of scope "distribution":
    statistic and threshold of the worst test (largest ``|z|`` over its threshold), n_tests,
    worst (up to three tests: coordinate or "pooled", test, z, difference = the engine's
    probability minus the reference's), point_mass, detectable_cdf_change (the CDF change
    the reference detects with probability 1/2 in its least precise coordinate test),
    detectable_pooled_cdf_change (the same for the average over coordinates), outside_support
    (the coordinate where the engine puts most mass below 0: name, mass, and the resolution
    there - the CDF change its lowest-level test detects with probability 1/2; None when no
    coordinate has a support bound) and levels.
    """
    if approx.kind == "point":
        return distribution_not_applicable("a point estimate has no distribution to compare (its distance to "
                                           "the reference is in the metrics)")
    if approx.kind not in ("gaussian", "draws"):
        return distribution_not_applicable(f"a {approx.kind} posterior has no CDF the verdict can evaluate")
    untrusted = untrusted_resampling(approx)
    if untrusted:
        return distribution_not_applicable(untrusted)
    if approx.kind == "draws" and approx.n_draws // 2 < MIN_HALF_DRAWS:
        return distribution_not_applicable(f"fewer than {MIN_HALF_DRAWS} engine draws per chain in a half chain: "
                                           "the engine's quantiles come from the first halves, its probabilities "
                                           "from the second")
    levels_arr = np.asarray(levels, dtype=float)
    if not (np.all(np.diff(levels_arr) > 0) and levels_arr[0] > 0 and levels_arr[-1] < 1):
        raise ValueError(f"levels must increase strictly inside (0, 1); got {levels}")
    names = approx.flat_names()
    ref = chains_draws_flat(ref_post)
    chains, n_ref, d = ref.shape
    K = len(levels_arr)
    t, F_e, engine_second, engine_sd, below_zero = _engine_side(approx, levels_arr)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(ref))):
        return distribution_not_applicable("the engine's quantiles or the reference's draws are not finite")
    ref_sd = ref.reshape(-1, d).std(0, ddof=1)
    point = (engine_sd == 0.0) & (ref_sd > 0)
    live = ~point
    pairs = [(k, K - 1 - k) for k in range(K // 2) if np.isclose(levels_arr[k], 1.0 - levels_arr[K - 1 - k])]

    families, df = _test_families(approx, ref[..., live], t[live], F_e if F_e is None else F_e[live],
                                  None if engine_second is None else engine_second[..., live], pairs, pooled_share)
    d_live = int(live.sum())
    n_coord = d_live * K
    n_pool = sum(len(f[1]) for f in families if f[0] != "coordinate")
    alpha_coord = false_alarm * (1.0 - pooled_share) if n_pool else false_alarm
    alpha_pool = false_alarm * pooled_share
    c_coord = threshold(n_coord, alpha_coord, df) if n_coord else None
    c_pool = threshold(n_pool, alpha_pool, df) if n_pool else None

    live_names = [names[i] for i in np.flatnonzero(live)]
    tests = []  # (ratio |z| / c, entry)
    for kind, z, diff, se in families:
        c = c_coord if kind == "coordinate" else c_pool
        for j in range(len(z)):
            if kind == "coordinate":
                where, what = live_names[j // K], f"CDF at the engine's {_level_text(levels_arr[j % K])} quantile"
            elif kind == "pooled":
                where, what = (f"average over {d_live} coordinates",
                               f"CDF at the engine's {_level_text(levels_arr[j])} quantiles")
            else:
                lo, hi = pairs[j]
                where, what = (f"average over {d_live} coordinates",
                               f"mass outside the engine's central {_level_text(levels_arr[hi] - levels_arr[lo])}")
            tests.append((abs(z[j]) / c, {"coordinate": where, "test": what, "z": float(z[j]),
                                          "difference": float(diff[j]), "threshold": float(c)}))
    if any(not np.isfinite(r) for r, _ in tests):
        return distribution_not_applicable("a Monte Carlo standard error of the reference or the engine is not "
                                           "finite")
    tests.sort(key=lambda rt: -rt[0])
    worst = tuple(entry for _, entry in tests[:N_WORST])

    # the resolution: the CDF change detected with probability 1/2 (at |z| = threshold); at a
    # support bound, the one at the engine's lowest quantile level, the test nearest the bound
    resolution = np.zeros(d)
    detect_coord = detect_pool = None
    for kind, _, _, se in families:
        if kind == "coordinate":
            per = c_coord * se.reshape(d_live, K)
            resolution[live] = per[:, 0]
            detect_coord = float(per.max())
        else:
            detect_pool = max(detect_pool or 0.0, float(c_pool * np.max(se)))
    support_mask = _bounded_at_zero(approx)
    outside = None
    violations = []
    if support_mask.any():
        masses = np.where(support_mask & live, below_zero, -1.0)  # -1: no bound, or a point, here
        i = int(np.argmax(masses))
        masses = np.maximum(masses, 0.0)
        outside = {"coordinate": names[i], "mass": float(masses[i]), "resolution": float(resolution[i])}
        violations = [names[j] for j in np.flatnonzero(support_mask & live & (below_zero > resolution))]
    collapsed = [names[i] for i in np.flatnonzero(point)]

    flagged_test = bool(tests) and tests[0][0] > 1.0
    status = DIFFERS if (flagged_test or violations or collapsed) else INDISTINGUISHABLE
    statistic = float(abs(worst[0]["z"])) if worst else None
    thr = float(worst[0]["threshold"]) if worst else None
    rule = (f"thresholds {c_coord:.2f} for {n_coord} coordinate tests" if n_coord else "")
    if n_pool:
        rule += f" and {c_pool:.2f} for {n_pool} pooled tests"
    rule += f", {100 * false_alarm:g}% false-alarm rate in all"
    reason = _reason(status, worst, violations, collapsed, outside, rule, detect_coord, detect_pool, levels_arr,
                     d_live)
    return _scope(status, reason, false_alarm=false_alarm, n_tests=len(tests), statistic=statistic, threshold=thr,
                  worst=worst, point_mass=tuple(collapsed), detectable_cdf_change=detect_coord,
                  detectable_pooled_cdf_change=detect_pool, outside_support=outside, levels=tuple(levels))


#: supports with no mass below 0 (models.base.Site.support)
BOUNDED_AT_ZERO = ("nonnegative", "positive")


def _bounded_at_zero(approx) -> np.ndarray:
    """Per flat coordinate: whether the model's support lies in [0, inf)."""
    return np.concatenate([np.full(s.size, s.support in BOUNDED_AT_ZERO) for s in approx.sites])


def _reason(status, worst, violations, collapsed, outside, rule, detect_coord, detect_pool, levels, d_live) -> str:
    if collapsed:
        shown = ", ".join(collapsed[:N_WORST]) + (", ..." if len(collapsed) > N_WORST else "")
        return (f"differs in distribution: the engine is a point (sd exactly 0) at {shown} where the reference "
                "spreads - certain, not a test")
    if violations:
        return (f"differs in distribution: the engine puts {100 * outside['mass']:.1f}% of {outside['coordinate']}'s "
                f"mass below 0, where the posterior has none (the reference resolves a CDF change of "
                f"{100 * outside['resolution']:.1f} points at the engine's {_level_text(levels[0])} quantile there)"
                + (f"; {len(violations)} coordinates in all" if len(violations) > 1 else ""))
    if status == DIFFERS:
        top = worst[0]
        return (f"differs in distribution: {top['coordinate']}, {top['test']}: the engine has "
                f"{100 * (top['difference']):+.1f} points of probability against the reference (z = {top['z']:+.1f}; "
                f"{rule})")
    seen = "/".join(f"{100 * p:g}" for p in levels)
    detect = f"a CDF off by {100 * detect_coord:.1f} points in a coordinate"
    if detect_pool is not None:
        detect += f" or by {100 * detect_pool:.1f} on average over the {d_live} coordinates"
    beyond = f"beyond the engine's {_level_text(levels[0])} and {_level_text(levels[-1])} quantiles"
    return (f"indistinguishable in distribution at this precision: max |z| = {abs(worst[0]['z']):.2f} against "
            f"{worst[0]['threshold']:.2f} (CDFs at the engine's {seen}% quantiles; {rule}); the reference would "
            f"detect {detect}, or that much mass outside the support (with probability 1/2); it cannot see "
            f"differences {beyond}, nor how the coordinates depend on each other beyond the joint verdict's "
            "second moments")


# --------------------------------------------------------------------------------------
# Simulations: the three verdicts on exact engines and on planted defects
# --------------------------------------------------------------------------------------
def _scaled_first_sd(posterior, factor: float):
    """The posterior with coordinate 0's deviations from its mean scaled by ``factor`` (its
    sd times ``factor``, its correlations kept)."""
    if isinstance(posterior, GaussianPosterior):
        chol = np.array(posterior.chol, dtype=float)
        chol[0] *= factor
        return replace(posterior, chol=chol)
    flat = posterior.flat_draws()
    mean = flat.mean(0)
    scale = np.ones(flat.shape[1])
    scale[0] = factor
    return shapes.as_draws(posterior, mean + (flat - mean) * scale, posterior.n_chains, posterior.n_draws)


def _in_first_coordinate(posterior, transform: Callable):
    """The draws posterior with coordinate 0 taken from ``transform(posterior)`` and every
    other coordinate kept: a shape defect in one coordinate among d (a Gaussian answer is
    drawn, 4 x 1000 draws)."""
    flat = posterior.flat_draws()
    changed = transform(posterior)
    if isinstance(changed, GaussianPosterior):
        rng = np.random.default_rng([shapes.SHAPE_SEED, 3, posterior.dim])
        moved = np.asarray(changed.mean_flat()) + rng.standard_normal(flat.shape) @ np.asarray(changed.chol).T
    else:
        moved = changed.flat_draws()
    out = flat.copy()
    out[:, 0] = moved[:, 0]
    return shapes.as_draws(posterior, out, posterior.n_chains, posterior.n_draws)


#: planted defects of the simulations: name -> transform of an exact engine's answer. The
#: shape defects keep every mean and sd, and the covariance (in every coordinate, or
#: "(one)": in the first only; the Gaussian marginals act on independent coordinates here);
#: the moment defects are the battery's.
SIMULATED_DEFECTS: dict[str, Callable] = {
    **{name: transform for name, (transform, _) in shapes.SHAPE_DEFECTS.items()},
    **{f"{name} (one)": functools.partial(_in_first_coordinate, transform=transform)
       for name, (transform, _) in shapes.SHAPE_DEFECTS.items() if name != "extra mode"},
    "mean + 0.5 sd (one)": functools.partial(transform_posterior, shift_sd=0.5, coordinate=0),
    "sd x 0.5 (one)": functools.partial(_scaled_first_sd, factor=0.5),
    "cov x 0.5": functools.partial(transform_posterior, cov_factor=0.5),
    "correlations dropped": functools.partial(transform_posterior, correlations="dropped"),
}

#: simulated cases: name -> (the exact posterior's marginal law (shapes.MARGINALS), the
#: defect applied to an exact engine's answer (None: the exact engine), correlated coordinates)
SIMULATED = {
    "exact, normal": ("normal", None, True),
    "exact, skewed": ("skewed", None, False),
    "exact, bimodal": ("bimodal", None, False),
    "exact, wall": ("wall", None, False),
    "reversed skew": ("skewed", "reversed skew", False),
    "heavy tails": ("normal", "heavy tails", True),
    "outside the support": ("wall", "gaussianized", False),
    "missing mode": ("bimodal", "gaussianized", False),
    "extra mode": ("normal", "extra mode", True),
    "reversed skew (one)": ("skewed", "reversed skew (one)", False),
    "heavy tails (one)": ("normal", "heavy tails (one)", False),
    "outside the support (one)": ("wall", "gaussianized (one)", False),
    "missing mode (one)": ("bimodal", "gaussianized (one)", False),
    "mean + 0.5 sd (one)": ("normal", "mean + 0.5 sd (one)", True),
    "sd x 0.5 (one)": ("normal", "sd x 0.5 (one)", True),
    "cov x 0.5": ("normal", "cov x 0.5", True),
    "correlations dropped": ("normal", "correlations dropped", True),
}


def _simulated_info() -> FitInfo:
    return FitInfo(engine="simulated", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0,
                   objective="", extra={})


def simulated_pairs(case: str, d: int, n_replicates: int, *, seed: int = 0, phi: float = 0.8, chains: int = 4,
                    draws: int = 1000, engine: str = "draws"):
    """(engine's answer, reference) for each replicate of a :data:`SIMULATED` case at
    dimension d, as a generator. The reference is ``chains`` x ``draws`` AR(1) copula chains
    of the exact posterior (``shapes.copula_chains``, phi 0.8: ESS about 440 for 4 x 1000,
    near the certification minimum), fresh per replicate with random locations and scales,
    correlated (``correlations.random_correlation``) where the case says so. The engine is
    ``engine`` "draws" (4 x 1000 independent draws of the exact law) or "gaussian" (the
    Gaussian with the exact law's mean and covariance: exact only for a normal marginal), with
    the case's defect applied."""
    marginal, defect, correlated = SIMULATED[case]
    if engine not in ("draws", "gaussian"):
        raise ValueError(f"engine must be 'draws' or 'gaussian'; got {engine!r}")
    rng = np.random.default_rng([seed, d])
    bounded = shapes.MARGINALS[marginal][1]
    sites = (Site("theta", (d,), "nonnegative" if bounded else "real"),)
    for _ in range(n_replicates):
        loc, scale = rng.normal(0.0, 2.0, d), np.exp(rng.normal(0.0, 0.5, d))
        corr = random_correlation(rng, d) if correlated and d > 1 else None
        ref = shapes.copula_chains(rng, marginal, loc, scale, chains=chains, draws=draws, phi=phi, corr=corr)
        ref_post = DrawsPosterior(None, sites, {"theta": ref}, _simulated_info())
        if engine == "gaussian":
            m0, s0 = shapes.marginal_moments(marginal)
            mean = scale * m0 if bounded else loc + scale * m0
            L = (scale * s0)[:, None] * (np.linalg.cholesky(corr) if corr is not None else np.eye(d))
            post = GaussianPosterior(None, sites, mean, L, _simulated_info())
        else:
            eng = shapes.copula_chains(rng, marginal, loc, scale, chains=shapes.DEFECT_CHAINS,
                                       draws=shapes.DEFECT_DRAWS, phi=0.0, corr=corr)
            post = DrawsPosterior(None, sites, {"theta": eng}, _simulated_info())
        yield (post if defect is None else SIMULATED_DEFECTS[defect](post)), ref_post


def simulate_verdicts(case: str, d: int, n_replicates: int, *, judges: Mapping[str, Callable] | None = None,
                      **how) -> dict[str, np.ndarray]:
    """Flags of the verdicts on the same replicates of a :data:`SIMULATED` case at dimension
    d (:func:`simulated_pairs`; ``how``: its keywords). ``judges``: name -> judge(engine,
    reference) returning a Verdict or a bool (None: the marginal, joint and distribution
    verdicts). Returns {name: flagged per replicate}."""
    judges = judges or {"marginal": verdict, "joint": joint_verdict, "distribution": distribution_verdict}
    flags = {name: np.zeros(n_replicates, bool) for name in judges}
    for r, (post, ref_post) in enumerate(simulated_pairs(case, d, n_replicates, **how)):
        for name, judge in judges.items():
            out = judge(post, ref_post)
            flags[name][r] = out.differs if isinstance(out, Verdict) else bool(out)
    return flags

__all__ = ["distribution_verdict", "distribution_not_applicable", "LEVELS", "POOLED_SHARE", "SIMULATED",
           "SIMULATED_DEFECTS", "simulated_pairs", "simulate_verdicts"]
