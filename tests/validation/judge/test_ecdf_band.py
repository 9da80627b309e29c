"""The SBC band computed in the zoo: its exact coverage is the coverage, and it is the smallest that covers."""
import numpy as np
import pytest

from zoo.validation.judge.ecdf_band import central_counts, count_band, ecdf_band, exact_coverage, smallest_covering_level
from zoo.validation.judge.rank_uniformity import eval_points, simultaneous_band


def _simulated_coverage(n, z, lower, upper, reps, seed):
    rng = np.random.default_rng(seed)
    counts = (rng.uniform(size=(reps, n))[:, :, None] <= z[None, None, :]).sum(1)
    return float(np.mean(((counts >= lower) & (counts <= upper)).all(1)))


@pytest.mark.parametrize("n, level", [(10, 0.9), (20, 0.99), (50, 0.995)])
def test_the_recursion_is_the_probability_the_simulation_measures(n, level):
    # Any band will do; the central pointwise one at `level`. 100,000 replicates at a fixed
    # seed: the simulated coverage's binomial sd is at most 0.0016, and 4 sds apart fails.
    z = eval_points(n)
    lower, upper = central_counts(n, z, level)
    exact = exact_coverage(n, z, lower, upper)
    reps = 100_000
    simulated = _simulated_coverage(n, z, lower, upper, reps, seed=n)
    sd = np.sqrt(exact * (1 - exact) / reps)
    assert abs(simulated - exact) < 4 * sd, (simulated, exact, sd)


@pytest.mark.parametrize("n", [10, 20, 50, 100, 400])
@pytest.mark.parametrize("prob", [0.95, 0.9875, 0.9995])
def test_the_band_covers_the_level_and_no_narrower_central_band_does(n, prob):
    z = eval_points(n)
    lower, upper, coverage = count_band(n, tuple(z), prob)
    assert coverage >= prob
    assert exact_coverage(n, z, lower, upper) == coverage
    level = smallest_covering_level(n, z, prob)
    if level > prob:  # the band just below the level found misses more than 1 - prob
        assert exact_coverage(n, z, *central_counts(n, z, level - 2e-10)) < prob
    lo, hi = simultaneous_band(n, prob)
    np.testing.assert_array_equal(np.rint(lo * n), lower)
    np.testing.assert_array_equal(np.rint(hi * n), upper)


def test_a_pointwise_band_called_simultaneous_is_caught():
    # the planted defect: each point's own 95% band, used as if it held the whole ECDF
    n, prob = 100, 0.95
    z = eval_points(n)
    assert exact_coverage(n, z, *central_counts(n, z, prob)) < 0.8
    assert smallest_covering_level(n, z, prob) > 0.99


def test_bad_points_and_levels_are_refused():
    with pytest.raises(ValueError, match="increasing"):
        exact_coverage(10, np.array([0.5, 0.2]), np.array([0, 0]), np.array([10, 10]))
    with pytest.raises(ValueError, match="level"):
        smallest_covering_level(10, eval_points(10), 1.0)


def test_the_cached_band_cannot_be_changed_by_a_caller():
    lower, _, _ = count_band(20, tuple(eval_points(20)), 0.95)
    with pytest.raises(ValueError):
        lower[0] = 5
    lo, _ = ecdf_band(20, eval_points(20), 0.95)
    lo[0] = 1.0  # a copy: the next caller still gets the band
    assert ecdf_band(20, eval_points(20), 0.95)[0][0] != 1.0
