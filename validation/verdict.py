"""A verdict on an engine against a reference, with a known false-alarm rate.

The question a user asks is "is this engine's posterior the reference's, as far as the
reference can tell?". The reference is itself a Monte Carlo estimate, so the answer
depends on its precision. Per coordinate i of the measured parameters:

    t_mean_i = (m_e,i - m_r,i) / se_mean_i,        se_mean_i^2 = MCSE(m_r,i)^2 + MCSE(m_e,i)^2
    t_sd_i   = (s_e,i - s_r,i) / (s_e,i rel_i),    rel_i^2     = RSE(s_r,i)^2 + RSE(s_e,i)^2

with m, s the mean and standard deviation of the engine (e) and the reference (r); MCSE
the Monte Carlo standard error of a mean and RSE the relative one of an sd, both by batch
means (:func:`moments_and_mcse`). An engine with closed-form moments (a Gaussian) has no
Monte Carlo error of its own. For an exact engine each statistic is approximately
Student's t with b - chains degrees of freedom (b batches; see
:func:`moments_and_mcse` for why not b - 1). Across the K = 2d tests (d
coordinates; fewer where a moment does not exist) the rule is Bonferroni's: the engine
**differs** when

    max_i |t_i| > c_K = the (1 - alpha / (2K)) quantile of t_{b-1},

so an exact engine is flagged with probability at most about alpha (5%) whatever d is and
however the coordinates are correlated (the union bound needs no independence). The rate
actually reached is measured by simulation in ``benchmarks/verdict_false_alarm.py`` and
tabled in the README, because the t approximation is only approximate.

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
heavy-tailed posterior lacks (``validation/moment_existence.py``): those tests are left
out, or the whole verdict when no moment exists.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t


#: the false-alarm rate of the verdict for an exact engine (at most; Bonferroni)
FALSE_ALARM = 0.05
#: worst coordinates named in a verdict
N_WORST = 3
INDISTINGUISHABLE = "indistinguishable"
DIFFERS = "differs"
NOT_APPLICABLE = "not applicable"


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


def not_applicable(reason: str) -> dict[str, Any]:
    return {"status": NOT_APPLICABLE, "reason": reason, "false_alarm": FALSE_ALARM, "n_tests": 0,
            "statistic": None, "threshold": None, "worst": [], "detectable_mean_shift": None,
            "detectable_sd_change": None}


def verdict(approx, ref_post, *, moments: dict[str, Any] | None = None,
            false_alarm: float = FALSE_ALARM, reference_moments: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The verdict on ``approx`` (any Posterior) against the reference draws ``ref_post``
    (a DrawsPosterior over the same sites). ``moments``: which posterior moments exist
    (None: all). ``reference_moments``: :func:`moments_and_mcse` of the reference, if
    already computed (it is the same for every engine of a comparison).

    Returns a JSON-able dict: status ("indistinguishable", "differs", "not applicable"),
    reason (a sentence), statistic (max |z|), threshold (c_K), n_tests, worst (up to three
    coordinates, each with its test, z and the difference in reference sds),
    detectable_mean_shift and detectable_sd_change (what the reference could detect),
    false_alarm, point_mass (the coordinates where the engine's sd is exactly 0: "differs"
    for certain, outside the z tests).
    """
    if approx.kind == "point":
        return not_applicable("a point estimate has no distribution to compare (its distance to the "
                              "reference is in the metrics)")
    mean_exists = moments is None or moments.get("mean_exists") is True
    sd_exists = moments is None or moments.get("sd_exists") is True
    if not mean_exists:
        return not_applicable("the posterior mean does not exist on these data: nothing to compare")
    ref = reference_moments if reference_moments is not None else moments_and_mcse(chains_draws_flat(ref_post))
    ref_errors = np.r_[ref["mcse_mean"], ref["rel_mcse_sd"] if sd_exists else []]
    if not (np.all(np.isfinite(ref_errors)) and np.all(ref_errors > 0) and np.all(ref["sd"] > 0)):
        return not_applicable("a Monte Carlo standard error of the reference is zero or not finite")
    m_e = np.asarray(approx.mean_flat(), dtype=float)
    s_e = np.asarray(approx.sd_flat(), dtype=float)
    mcse_m_e = rel_s_e = 0.0
    df = ref["df"]
    if approx.kind == "draws":  # the engine's own Monte Carlo error adds to the reference's
        own = moments_and_mcse(chains_draws_flat(approx))
        mcse_m_e, rel_s_e = own["mcse_mean"], own["rel_mcse_sd"]
        df = min(df, own["df"])  # the smaller of the two: conservative
    names = approx.flat_names()
    se_mean = np.sqrt(ref["mcse_mean"] ** 2 + np.square(mcse_m_e))
    tests = [("mean", i, (m_e[i] - ref["mean"][i]) / se_mean[i], (m_e[i] - ref["mean"][i]) / ref["sd"][i])
             for i in range(len(names))]
    # a coordinate where the engine's sd is exactly 0 (a weight pruned to a point: MM, EM,
    # mm-laplace's draws) cannot match a reference whose sd is positive: that difference
    # is certain, not a test with a false-alarm rate, so it is reported apart from the z's
    point_mass = (s_e == 0.0) if sd_exists else np.zeros(len(names), dtype=bool)
    rel_sd = None
    if sd_exists:
        # relative error of the sd, taken at the engine's sd (the value under test); a
        # constant coordinate of draws has no Monte Carlo error in its sd (it is 0 exactly)
        rel_sd = np.sqrt(ref["rel_mcse_sd"] ** 2 + np.square(np.where(point_mass, 0.0, rel_s_e)))
        tests += [("sd", i, (s_e[i] - ref["sd"][i]) / (s_e[i] * rel_sd[i]), s_e[i] / ref["sd"][i] - 1.0)
                  for i in range(len(names)) if not point_mass[i]]
    c = threshold(len(tests) + int(point_mass.sum()), false_alarm, df)
    z_abs = np.array([abs(t[2]) for t in tests])
    if not np.all(np.isfinite(z_abs)):
        return not_applicable("the engine's own Monte Carlo standard error is not finite")
    order = np.argsort(-z_abs)[:N_WORST]
    worst = [{"coordinate": names[tests[k][1]], "test": tests[k][0], "z": float(tests[k][2]),
              "difference": float(tests[k][3])} for k in order]
    statistic = float(z_abs.max())
    status = DIFFERS if statistic > c or point_mass.any() else INDISTINGUISHABLE
    detect_mean = float(c * np.max(se_mean / ref["sd"]))
    detect_sd = float(c * np.max(rel_sd)) if rel_sd is not None else None
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
    return {"status": status, "reason": reason, "false_alarm": false_alarm, "n_tests": len(tests),
            "statistic": statistic, "threshold": c, "worst": worst, "point_mass": collapsed,
            "detectable_mean_shift": detect_mean, "detectable_sd_change": detect_sd}


def ar1_reference_draws(rng: np.random.Generator, mean: np.ndarray, sd: np.ndarray, *, chains: int = 4,
                        draws: int = 1000, phi: float = 0.8) -> np.ndarray:
    """(chains, draws, d) stationary AR(1) chains with N(mean_i, sd_i^2) marginals: a
    stand-in for MCMC output whose ESS is known, chains * draws * (1 - phi) / (1 + phi)
    (phi = 0.8: about 440 for 4 x 1000, near the certification minimum of 400)."""
    d = len(mean)
    x = np.empty((chains, draws, d))
    x[:, 0] = rng.standard_normal((chains, d))
    noise = math.sqrt(1.0 - phi * phi) * rng.standard_normal((chains, draws, d))
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
    from ..inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior
    from ..models.base import Site

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
        flagged[r] = verdict(engine, ref)["status"] == DIFFERS
    return flagged


def summary_line(name: str, v: dict[str, Any]) -> str:
    """One line for the command line: engine, status and the reason."""
    if v["status"] == NOT_APPLICABLE:
        return f"{name:<10} no verdict: {v['reason']}"
    return f"{name:<10} {v['reason']}"


__all__ = ["FALSE_ALARM", "threshold", "verdict", "moments_and_mcse", "not_applicable", "summary_line",
           "ar1_reference_draws", "simulate_verdicts",
           "INDISTINGUISHABLE", "DIFFERS", "NOT_APPLICABLE"]
