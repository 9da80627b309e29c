"""The statistics of SBC ranks (validation/judge/rank_uniformity.py, rank_power.py,
sbc_verdict.py), on ranks with a known answer (``conjugate_normal_ranks``: theta ~ N(0, 1),
x ~ N(theta, 1), exact or planted-defect posterior draws): the uniformity test's false-alarm
rate and power, the words of a failure, the power line, the verdict, and the contraction view.

Statistical checks use fixed seeds; their tolerances come from the binomial Monte Carlo
error of the number of replicates, stated where used.
"""
from __future__ import annotations

import numpy as np
import pytest

from zoo.validation.judge import rank_power, rank_uniformity, sbc_verdict


def _exact_and_engine_ranks(rng, n_sims, n_draws, *, sd_factor=1.0, shift=0.0, k=3):
    return rank_uniformity.conjugate_normal_ranks(rng, n_sims, n_draws, k, sd_factor=sd_factor, shift=shift)


def test_uniformity_test_false_alarm_rate_is_the_stated_one():
    # 400 replicates of an exact posterior (K = 10 quantities, S = 100, L = 99): the rate
    # must be within 3 binomial standard errors (3 x 0.011) of the nominal 5% (less the
    # Bonferroni slack: 1 - (1 - 0.005)^10 = 4.9% for independent quantities)
    rng = np.random.default_rng(11)
    flagged = [rank_uniformity.uniformity(_exact_and_engine_ranks(rng, 100, 99, k=10), 99, seed=r).status == rank_uniformity.MISCALIBRATED
               for r in range(400)]
    rate = float(np.mean(flagged))
    se = np.sqrt(0.049 * 0.951 / 400)
    assert abs(rate - 0.049) < 3 * se, rate


def test_conjugate_ranks_plant_the_defect_only_where_asked():
    # defective=1: quantity 0 has its sd halved (ranks pile at 0 and L: outer tenths far
    # above 20%), the other four stay exact (their outer-tenth shares near 20%; with
    # S = 2000 each share has binomial sd 0.009, so 0.2 +- 0.04 is over 4 sds)
    rng = np.random.default_rng(3)
    ranks = rank_uniformity.conjugate_normal_ranks(rng, 2000, 99, 5, sd_factor=0.5, defective=1)
    outer = ((ranks < 10) | (ranks > 89)).mean(0)
    assert outer[0] > 0.4, outer
    assert np.all(np.abs(outer[1:] - 0.2) < 0.04), outer


@pytest.mark.parametrize("defect, words", [
    ({"shift": 0.3}, rank_uniformity.SHIFTED_UP), ({"shift": -0.3}, rank_uniformity.SHIFTED_DOWN), ({"sd_factor": 0.6}, rank_uniformity.TOO_NARROW),
    ({"sd_factor": 1.6}, rank_uniformity.TOO_WIDE), ({"shift": 0.3, "sd_factor": 0.6}, "posterior shifted up and too narrow")])
def test_uniformity_test_catches_and_names_a_broken_posterior(defect, words):
    # S = 300, the defect in quantity 0 of 3: each is detected at this size nearly always
    # (the power line: a 0.3-sd shift needs about S = 200 at 80%; sd x0.6 or x1.6 far
    # fewer), and its shape scores are far past 2 standard errors (shift 0.3: about
    # +4 sd of the median share). A positive shift moves the draws UP, so truths fall at
    # low ranks: "posterior shifted up", whose lowest tenth fills and highest empties -
    # the old reading of both outer tenths together called that "too narrow". The fixed
    # seed makes each check deterministic; over seeds, a pure defect gets an extra word
    # in about 3% of flagged runs (each score's two-sided 2-sd tail)
    rng = np.random.default_rng(5)
    test = rank_uniformity.uniformity(rank_uniformity.conjugate_normal_ranks(rng, 300, 99, 3, defective=1, **defect), 99)
    assert test.status == rank_uniformity.MISCALIBRATED
    flagged = test.worst[0]
    assert flagged.name == "q[0]" and flagged.shape == words
    assert rank_uniformity.describe_failure(flagged).startswith(f"q[0] ({words}:")
    if "shift" in defect and "sd_factor" not in defect:
        # one tail over-full, the other under-full: the direction the shift says
        low, high = flagged.share_in_lower_tenth, flagged.share_in_upper_tenth
        assert (low > 0.1 > high) if defect["shift"] > 0 else (high > 0.1 > low)
        assert "too narrow" not in flagged.shape and "too wide" not in flagged.shape


def test_shape_scores_are_in_standard_errors_of_the_run():
    # the same shares are a clear shape at S = 1000 and none at S = 20: the cut-off is
    # SHAPE_SCORE binomial standard errors, not a fixed share. 60% below the median is
    # (0.6 - 0.5) / sqrt(0.25 / S) = 6.3 sds at S = 1000, 0.9 at S = 20
    assert rank_uniformity.failure_shape(0.14, 0.07, 0.6, 1000).shape == rank_uniformity.SHIFTED_UP
    assert rank_uniformity.failure_shape(0.14, 0.07, 0.6, 20).shape == rank_uniformity.NO_SIMPLE_SHAPE
    # both tenths over-full and an even median: narrow; both under-full: wide
    assert rank_uniformity.failure_shape(0.2, 0.2, 0.5, 300).shape == rank_uniformity.TOO_NARROW
    assert rank_uniformity.failure_shape(0.03, 0.03, 0.5, 300).shape == rank_uniformity.TOO_WIDE
    # a pure shift's one-sided pile (the lowest tenth 16%, the highest 6%: what a 0.3-sd
    # shift gives) is not a spread defect, though the outer tenths hold 22%
    score = rank_uniformity.failure_shape(0.16, 0.06, 0.62, 300)
    assert score.shape == rank_uniformity.SHIFTED_UP and abs(score.spread_score) < 1.0
    # grid-rvm's vb-s-grid w[11] (23% in the outer tenths, 48% below the median at S =
    # 100; split here 12% / 11%): a band exceeded with no clear shape names no direction
    assert rank_uniformity.failure_shape(0.12, 0.11, 0.48, 100).shape == rank_uniformity.NO_SIMPLE_SHAPE
    # an empty tenth (every truth in the middle) still gives a finite score
    assert np.isfinite(rank_uniformity.failure_shape(0.0, 0.0, 0.5, 10).spread_score)


def test_power_is_the_detection_rate_the_uniformity_test_reaches():
    # the power line's sizes, checked by running the test itself: ranks from
    # conjugate_normal_ranks with the defect in quantity 0 only, against the band of
    # level 1 - 0.05 / K (K = 11, as PCVM's SBC problem; uniformity on the one column
    # with false_alarm / K is that band). 400 replicates here (binomial sd 2%) and the
    # power line's own 1000 (1.3%): at the 80%-sizes the rate must lie within 3 pooled
    # sds (3 x 2.4% = 7.2%) of 0.8
    S_, L, K = 100, 99, 11
    power = rank_power.detectable_defects(S_, L, K)
    assert power.probability == 0.8 and power.replicates == rank_power.POWER_REPLICATES
    rng = np.random.default_rng(17)
    for defect in ({"shift": power.mean_shift_sd}, {"sd_factor": power.sd_factor_narrow},
                   {"sd_factor": power.sd_factor_wide}):
        hits = [rank_uniformity.uniformity(rank_uniformity.conjugate_normal_ranks(rng, S_, L, 1, **defect), L, false_alarm=0.05 / K,
                             seed=r).status == rank_uniformity.MISCALIBRATED for r in range(400)]
        assert abs(np.mean(hits) - 0.8) < 0.072, (defect, np.mean(hits))
    # the exact PIT cdf that the power simulation draws from, against the empirical one
    # of 200,000 ranks (shift and narrowing together): the largest gap over the test's 99
    # points must stay within 4 binomial sds (at most sqrt(0.25 / 200000) = 0.0011 each)
    ranks = rank_uniformity.conjugate_normal_ranks(rng, 200_000, L, 1, shift=0.3, sd_factor=0.6)[:, 0]
    u = rank_uniformity.pit_values(ranks, L, rng)
    x = rank_uniformity.eval_points(100)
    empirical = (u[:, None] <= x[None, :]).mean(0)
    assert np.abs(empirical - rank_power.pit_cdf(x, L, 0.3, 0.6)).max() < 4 * 0.0011
    # power grows with S; the line is deterministic and cached
    assert rank_power.detectable_defects(20, L, K).mean_shift_sd > power.mean_shift_sd
    assert rank_power.detectable_defects(S_, L, K) == power


def test_the_verdict_of_ranks_calibrated_too_few_or_miscalibrated():
    # exact ranks (K = 5, L = 99) at S = 20 stay inside their bands at this seed and the run
    # is too small to call; at S = 200 the same kind of ranks is called calibrated; the
    # verdict's power line and the S it needs are the power module's own
    rng = np.random.default_rng(3)
    small = sbc_verdict.rank_verdict(rank_uniformity.conjugate_normal_ranks(rng, 20, 99, 5), 99,
                                     [f"q{k}" for k in range(5)])
    assert small.uniformity.status == rank_uniformity.CALIBRATED
    assert small.status == sbc_verdict.TOO_FEW
    assert small.power.simulations_needed == rank_power.simulations_needed(99, 5).n_sims
    assert small.power.line == rank_power.detectable_defects(20, 99, 5).line
    big = sbc_verdict.rank_verdict(rank_uniformity.conjugate_normal_ranks(rng, 200, 99, 5), 99,
                                   [f"q{k}" for k in range(5)])
    assert big.status == sbc_verdict.CALIBRATED and big.power.simulations_needed is None
    assert big.reason.startswith("calibrated: the ranks of all 5 quantities")
    # a posterior half as wide in every quantity is miscalibrated, with its shape in words
    bad = sbc_verdict.rank_verdict(rank_uniformity.conjugate_normal_ranks(rng, 200, 99, 5, sd_factor=0.5), 99,
                                   [f"q{k}" for k in range(5)])
    assert bad.status == sbc_verdict.MISCALIBRATED and "too narrow" in bad.reason


def test_the_verdict_refuses_too_few_ranked_simulations():
    ranks = rank_uniformity.conjugate_normal_ranks(np.random.default_rng(0), sbc_verdict.MIN_RANKED - 1, 99, 2)
    with pytest.raises(ValueError, match="at least 10 ranked simulations; got 9"):
        sbc_verdict.rank_verdict(ranks, 99, ["a", "b"])


def test_contraction_view_of_an_exact_normal_posterior():
    """theta ~ N(0, 1), x ~ N(theta, 1): the posterior N(x / 2, 1 / 2) has z-scores of mean 0
    and sd 1, and contraction 1 - (1/2) / 1 = 1/2 (500 simulations: z's mean within 4 of
    its standard errors 0.045, its sd within 0.15 of 1, the median contraction within 0.1)."""
    rng = np.random.default_rng(2)
    theta = rng.standard_normal(500)
    x = theta + rng.standard_normal(500)
    truth, mean = theta[:, None], (x / 2)[:, None]
    view = rank_uniformity.contraction_view(truth, mean, np.full_like(mean, np.sqrt(0.5)), ["theta"]).quantities[0]
    assert abs(view.z_mean) < 4 * 1 / np.sqrt(500)
    assert abs(view.z_sd - 1.0) < 0.15
    assert abs(view.contraction_median - 0.5) < 0.1
    # a posterior twice too narrow: z's sd about 2, contraction overstated
    narrow = rank_uniformity.contraction_view(truth, mean, np.full_like(mean, np.sqrt(0.5) / 2),
                                              ["theta"]).quantities[0]
    assert narrow.z_sd > 1.7 and narrow.contraction_median > 0.8
