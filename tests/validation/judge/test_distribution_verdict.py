"""The distribution verdict (validation/judge/distribution.py): shape, tails, support and modes.

Statistical checks use fixed seeds. False-alarm bounds are the nominal 5% plus three
binomial standard errors of the replicate count (a correct rule exceeds it with probability
about 0.2%); power checks ask for every one of 20 replicates where the defect is many times
the detectable size (z far above the threshold), so a pass is not luck either.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

import zoo  # noqa: F401  (float64)
from zoo.inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior, PointPosterior
from zoo.models.base import Site
from zoo.validation.judge import distribution as D
from zoo.validation.judge import shapes
from zoo.validation.judge import verdict as V

INFO = FitInfo(engine="t", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0,
               objective="", extra={})


def _bound(replicates: int) -> float:
    return V.FALSE_ALARM + 3.0 * math.sqrt(V.FALSE_ALARM * (1 - V.FALSE_ALARM) / replicates)


@pytest.mark.parametrize("case,d,engine,replicates", [
    ("exact, normal", 10, "gaussian", 200),
    ("exact, normal", 50, "draws", 100),
    ("exact, wall", 10, "draws", 150),
    ("exact, bimodal", 5, "draws", 150),
])
@pytest.mark.long
def test_an_exact_engine_is_called_different_at_most_about_five_percent_of_the_time(case, d, engine, replicates):
    rate = D.simulate_verdicts(case, d, replicates, seed=7, engine=engine)["distribution"].mean()
    assert rate <= _bound(replicates), f"{rate:.3f} false alarms > {_bound(replicates):.3f}"


@pytest.mark.parametrize("case", ["reversed skew", "heavy tails", "outside the support", "missing mode",
                                  "reversed skew (one)", "outside the support (one)", "missing mode (one)"])
@pytest.mark.long
def test_shape_defects_with_exact_moments_are_seen_by_the_distribution_verdict_alone(case):
    """Every mean and covariance kept: the moment verdicts flag these about as often as an
    exact engine (at most a few of 20), the distribution verdict every time."""
    flags = D.simulate_verdicts(case, 10, 20, seed=3)
    assert flags["distribution"].all(), case
    assert flags["marginal"].sum() <= 3 and flags["joint"].sum() <= 3, case


def test_a_gaussian_with_the_exact_moments_of_a_truncated_posterior_differs_by_its_mass_below_zero():
    """The issue's case: a Gaussian with every mean, sd and correlation of a posterior pressed
    against w >= 0 puts a large share of its mass below 0; both moment verdicts pass it,
    the distribution verdict names the coordinate, the mass and the resolution."""
    rng = np.random.default_rng(0)
    d = 4
    sites = (Site("w", (d,), "nonnegative"),)
    scale = np.array([1.0, 0.5, 2.0, 1.5])
    ref = DrawsPosterior(None, sites, {"w": shapes.copula_chains(rng, "wall", np.zeros(d), scale)}, INFO)
    m0, s0 = shapes.marginal_moments("wall")
    gauss = GaussianPosterior(None, sites, scale * m0, np.diag(scale * s0), INFO)
    assert not V.verdict(gauss, ref).differs and not V.joint_verdict(gauss, ref).differs
    v = D.distribution_verdict(gauss, ref)
    mass = float(norm.cdf(-m0 / s0))  # the same in every coordinate: the law is scaled only
    assert v.differs and v.scope == V.DISTRIBUTION
    assert v.outside_support["mass"] == pytest.approx(mass) and v.outside_support["mass"] > 0.1
    assert v.outside_support["resolution"] < v.outside_support["mass"]
    assert "below 0" in v.reason and "where the posterior has none" in v.reason


def test_an_exact_engine_states_what_it_could_detect_and_what_it_cannot_see():
    rng = np.random.default_rng(1)
    sites = (Site("w", (3,)),)
    mean, sd = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.5, 2.0])
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, mean, sd)}, INFO)
    v = D.distribution_verdict(GaussianPosterior(None, sites, mean, np.diag(sd), INFO), ref)
    assert v.status == V.INDISTINGUISHABLE
    # a CDF change of a few points of probability: c (about 4) times a proportion's error at ESS ~440
    assert 0.02 < v.detectable_cdf_change < 0.15 and 0 < v.detectable_pooled_cdf_change < v.detectable_cdf_change
    assert v.outside_support is None  # no coordinate has a support bound
    lowest, highest = (f"{100 * p:g}%" for p in (D.LEVELS[0], D.LEVELS[-1]))
    assert "cannot see" in v.reason and f"{lowest} and {highest} quantiles" in v.reason
    # 3 coordinates x K levels, K pooled CDFs, and one pooled tail mass per symmetric pair of levels
    K = len(D.LEVELS)
    assert v.levels == D.LEVELS and v.n_tests == 3 * K + K + K // 2


def test_a_point_in_one_coordinate_is_a_certain_difference_and_a_point_estimate_has_no_verdict():
    rng = np.random.default_rng(2)
    sites = (Site("w", (2,)),)
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, np.zeros(2), np.ones(2))}, INFO)
    pruned = GaussianPosterior(None, sites, np.zeros(2), np.diag([1.0, 0.0]), INFO)
    v = D.distribution_verdict(pruned, ref)
    assert v.differs and v.point_mass == ("w[1]",) and "certain" in v.reason
    point = D.distribution_verdict(PointPosterior(None, sites, np.zeros(2), INFO), ref)
    assert point.status == V.NOT_APPLICABLE and point.scope == V.DISTRIBUTION


def test_a_heavy_tailed_posterior_without_moments_is_still_judged():
    """Quantiles exist where means do not: Cauchy-tailed reference chains (Student t, 1 degree
    of freedom, through the AR(1) copula) against an exact engine and against the Gaussian of
    their median and quartile spread."""
    from scipy import stats

    rng = np.random.default_rng(4)
    sites = (Site("w", (2,)),)
    z = V.ar1_reference_draws(rng, np.zeros(2), np.ones(2))
    ref = DrawsPosterior(None, sites, {"w": stats.t.ppf(stats.norm.cdf(z), 1)}, INFO)
    exact = DrawsPosterior(None, sites, {"w": stats.t.rvs(1, size=(4, 1000, 2), random_state=rng)}, INFO)
    assert D.distribution_verdict(exact, ref).status == V.INDISTINGUISHABLE
    gauss = GaussianPosterior(None, sites, np.zeros(2), np.eye(2) / stats.norm.ppf(0.75), INFO)
    assert D.distribution_verdict(gauss, ref).differs


def test_the_verdict_reads_back_from_json_with_its_scope():
    rng = np.random.default_rng(5)
    sites = (Site("w", (2,), "nonnegative"),)
    ref = DrawsPosterior(None, sites, {"w": shapes.copula_chains(rng, "wall", np.zeros(2), np.ones(2))}, INFO)
    v = D.distribution_verdict(GaussianPosterior(None, sites, np.ones(2), np.eye(2), INFO), ref)
    back = V.Verdict.from_json(json.loads(json.dumps(v.to_json())))
    assert back == v and back.scope == V.DISTRIBUTION and not back.joint
    # a verdict stored before scopes existed: joint when it has a direction
    old = {k: val for k, val in V.joint_verdict(GaussianPosterior(None, sites, np.ones(2), np.eye(2), INFO),
                                                ref).to_json().items() if k != "scope"}
    assert V.Verdict.from_json(old).joint


def test_shape_defects_keep_the_mean_and_covariance():
    rng = np.random.default_rng(6)
    sites = (Site("w", (3,)),)
    skewed = shapes.copula_chains(rng, "skewed", np.zeros(3), np.ones(3), phi=0.0)
    post = DrawsPosterior(None, sites, {"w": skewed}, INFO)
    flat = post.flat_draws()
    for name, (transform, _) in shapes.SHAPE_DEFECTS.items():
        moved = transform(post).flat_draws()
        assert moved.shape == flat.shape
        # reflection keeps them exactly, the Gaussian marginals every mean and sd exactly (their
        # correlations to Monte Carlo error); the random scale mixture and the extra mode to
        # Monte Carlo error of 4000 draws (the scale's sd over sqrt(n), a few percent)
        exact = name in ("reversed skew", "gaussianized")
        tol = 1e-12 if exact else 0.15
        np.testing.assert_allclose(moved.mean(0), flat.mean(0), atol=tol)
        np.testing.assert_allclose(moved.std(0, ddof=1), flat.std(0, ddof=1), atol=tol)
        np.testing.assert_allclose(np.cov(moved, rowvar=False), np.cov(flat, rowvar=False), atol=0.15)
    # a Gaussian is its own mirror image and its own Gaussian
    gauss = GaussianPosterior(None, sites, np.zeros(3), np.eye(3), INFO)
    assert shapes.reflected(gauss) is gauss and shapes.gaussianized(gauss) is gauss
    # the reflection reverses the skew
    from scipy.stats import skew

    assert np.all(skew(flat) > 0.5) and np.all(skew(shapes.reflected(post).flat_draws()) < -0.5)
