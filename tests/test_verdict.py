"""The verdict (validation/verdict.py): its false-alarm rate for an exact engine, its
power against planted defects, and the cases where it declines to judge.

Every rate here is a binomial proportion over seeded replicates; each bound is the
nominal rate plus three binomial standard errors at that many replicates, stated beside
it. The full table (d from 2 to 500, two chain correlations) is
benchmarks/verdict_false_alarm.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

import zoo  # noqa: F401  (float64)
from zoo.inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior, PointPosterior
from zoo.models.base import Site
from zoo.validation import verdict as V

INFO = FitInfo(engine="t", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0,
               objective="", extra={})


def test_threshold_is_the_bonferroni_quantile():
    assert V.threshold(1) == pytest.approx(norm.isf(0.025))
    assert V.threshold(100) == pytest.approx(norm.isf(0.05 / 200))
    assert V.threshold(100, df=19) > V.threshold(100)  # t tails are heavier
    assert V.threshold(10, df=19) < V.threshold(100, df=19)


@pytest.mark.parametrize("d,replicates", [(10, 400), (200, 200)])
def test_false_alarm_rate_of_an_exact_engine(d, replicates):
    """An exact Gaussian engine against AR(1) reference chains at ESS about 440."""
    rate = V.simulate_verdicts(d, replicates, seed=101 + d).mean()
    bound = V.FALSE_ALARM + 3.0 * math.sqrt(V.FALSE_ALARM * (1 - V.FALSE_ALARM) / replicates)
    assert rate <= bound, f"{rate:.3f} false alarms > {bound:.3f}"


@pytest.mark.parametrize("defect", [{"mean_shift": 0.5}, {"sd_factor": 2.0}, {"sd_factor": 0.5}])
def test_planted_defects_in_one_coordinate_are_caught(defect):
    """At ESS ~440 a 0.5-sd shift is z ~ 10 against a threshold ~4.5 at d = 20: power ~1,
    so every one of 20 replicates must flag it."""
    flagged = V.simulate_verdicts(20, 20, seed=5, **defect)
    assert flagged.all()


def test_the_verdict_names_the_worst_coordinate_and_the_detectable_size():
    rng = np.random.default_rng(0)
    sites = (Site("w", (3,)),)
    mean, sd = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.5, 2.0])
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, mean, sd)}, INFO)
    shifted = mean.copy()
    shifted[1] += 0.5 * sd[1]
    v = V.verdict(GaussianPosterior(None, sites, shifted, np.diag(sd), INFO), ref)
    assert v["status"] == V.DIFFERS and v["worst"][0]["coordinate"] == "w[1]"
    assert v["worst"][0]["test"] == "mean" and v["worst"][0]["difference"] == pytest.approx(0.5, abs=0.1)
    exact = V.verdict(GaussianPosterior(None, sites, mean, np.diag(sd), INFO), ref)
    assert exact["status"] == V.INDISTINGUISHABLE and exact["n_tests"] == 6
    assert 0 < exact["detectable_mean_shift"] < 0.5 and 0 < exact["detectable_sd_change"] < 0.5
    assert "indistinguishable from the reference at this precision" in exact["reason"]


def test_where_the_verdict_declines():
    rng = np.random.default_rng(1)
    sites = (Site("w", (2,)),)
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, np.zeros(2), np.ones(2))}, INFO)
    point = V.verdict(PointPosterior(spec=None, sites=sites, value=np.zeros(2), info=INFO), ref)
    assert point["status"] == V.NOT_APPLICABLE and "point estimate" in point["reason"]
    gauss = GaussianPosterior(None, sites, np.zeros(2), np.eye(2), INFO)
    no_mean = V.verdict(gauss, ref, moments={"mean_exists": False, "sd_exists": False})
    assert no_mean["status"] == V.NOT_APPLICABLE
    means_only = V.verdict(gauss, ref, moments={"mean_exists": True, "sd_exists": False})
    assert means_only["n_tests"] == 2 and means_only["detectable_sd_change"] is None
    assert "only means were compared" in means_only["reason"]


def test_an_engine_given_as_draws_adds_its_own_monte_carlo_error():
    rng = np.random.default_rng(2)
    sites = (Site("w", (4,)),)
    mean, sd = np.zeros(4), np.ones(4)
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, mean, sd)}, INFO)
    engine = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, mean, sd)}, INFO)
    v_draws = V.verdict(engine, ref)
    v_exact = V.verdict(GaussianPosterior(None, sites, mean, np.diag(sd), INFO), ref)
    # sqrt(2) in expectation (two equal errors instead of one); each batch-means error
    # has 19 degrees of freedom (about 16% relative noise), so with this seed the ratio
    # lies well above 1.1 - and exactly 1 would mean the engine's own error was dropped
    assert v_draws["detectable_mean_shift"] > 1.1 * v_exact["detectable_mean_shift"]


@pytest.mark.parametrize("as_draws", [False, True])
def test_a_weight_pruned_to_a_point_differs_for_certain_and_the_reference_is_not_blamed(as_draws):
    """MM, EM and mm-laplace's draws put some weights at exactly 0. Their sd there is 0
    against a positive reference sd: "differs", named, outside the z tests (before, the
    0/0 of the sd test made the verdict decline, blaming the reference's Monte Carlo error)."""
    rng = np.random.default_rng(3)
    sites = (Site("w", (3,)),)
    mean, sd = np.array([1.0, 0.2, -0.5]), np.array([0.5, 0.3, 0.4])
    ref = DrawsPosterior(None, sites, {"w": V.ar1_reference_draws(rng, mean, sd)}, INFO)
    pruned_mean, pruned_sd = mean.copy(), sd.copy()
    pruned_mean[1] = pruned_sd[1] = 0.0
    if as_draws:
        draws = V.ar1_reference_draws(rng, pruned_mean, np.where(pruned_sd > 0, pruned_sd, 1.0))
        draws[..., 1] = 0.0
        engine = DrawsPosterior(None, sites, {"w": draws}, INFO)
    else:
        engine = GaussianPosterior(None, sites, pruned_mean, np.diag(pruned_sd), INFO)
    v = V.verdict(engine, ref)
    assert v["status"] == V.DIFFERS and v["point_mass"] == ["w[1]"]
    assert "sd is exactly 0 at 1 coordinate (w[1]" in v["reason"] and "Monte Carlo" not in v["reason"]
    assert v["n_tests"] == 5 and all(w["test"] != "sd" or w["coordinate"] != "w[1]" for w in v["worst"])
    assert np.isfinite(v["statistic"])
    # an engine without point masses has none, and a reference without error still declines
    exact_engine = GaussianPosterior(None, sites, mean, np.diag(sd), INFO)
    assert V.verdict(exact_engine, ref)["point_mass"] == []
    flat = DrawsPosterior(None, sites, {"w": np.ones((4, 100, 3))}, INFO)
    declined = V.verdict(exact_engine, flat)
    assert declined["status"] == V.NOT_APPLICABLE and "of the reference" in declined["reason"]
