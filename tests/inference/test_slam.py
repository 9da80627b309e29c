"""SLAM (inference/sla.py): SLA with its initial learning rate and probe spacing chosen on a
held-out fifth, the end-to-end BBLR3 / BBLR4 built on it, and Nguyen & Sanner's sigmoid
loss as an SLA objective."""
import jax
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import sla
from zoo.models.bblr import BBLR


# every test uses 100 points and 3 columns, so that SLA's programs compile for one shape
def _data(n=100, d=2, seed=0, flip=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ np.linspace(1.0, -0.5, d) + 0.3 * rng.standard_normal(n) > 0).astype(float)
    flipped = rng.random(n) < flip
    y[flipped] = 1 - y[flipped]
    return np.column_stack([X, np.ones(n)]), y


def _errors(spec, w, Phi, y):
    return int(np.sum((np.asarray(spec.prob(Phi @ w)) > 0.5) != (y > 0.5)))


def test_the_held_out_fifth_is_stratified_seeded_and_shared_with_select_lam():
    _, y = _data()
    held = sla.held_out_fifth(y, 3)
    for label in (0.0, 1.0):
        assert held[y == label].sum() == round(0.2 * np.sum(y == label))
    np.testing.assert_array_equal(held, sla.held_out_fifth(y, 3))
    assert not np.array_equal(held, sla.held_out_fifth(y, 4))
    with pytest.raises(ValueError, match="too few points of one class"):
        sla.held_out_fifth(np.array([1.0] + [0.0] * 20), 0)


def _outliers(n=100, seed=5):
    """A 2-D problem whose first tenth are far-out points on the wrong side: with a sharp
    gamma and a loose prior, the basin SLA ends in depends on its learning parameters."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (X[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(float)
    k = n // 10
    X[:k] *= 8.0
    y[:k] = 1.0 - (X[:k, 0] > 0)
    return np.column_stack([X, np.ones(n)]), y


@pytest.mark.long
def test_slam_picks_from_its_grid_the_pair_with_the_fewest_held_out_errors():
    Phi, y = _outliers()
    spec = BBLR.from_counts(y, gamma=50.0, lam=0.05)
    eta0_grid, step_grid = (0.1, 10.0), (0.05, 2.0)
    post = sla.fit_slam(spec, Phi, y, seed=0, eta0_grid=eta0_grid, step_grid=step_grid)
    rec = post.info.extra["slam"]
    assert post.info.engine == "slam"
    assert rec["eta0"] in eta0_grid and rec["step"] in step_grid
    assert {(r["eta0"], r["step"]) for r in rec["grid"]} == {(e, s) for e in eta0_grid for s in step_grid}
    # recompute every pair's held-out errors independently of the engine's bookkeeping
    held = sla.held_out_fifth(y, 0)
    errors = {}
    for e in eta0_grid:
        for s in step_grid:
            w, _ = sla.run_sla(spec, Phi[~held], y[~held], sla.SLAConfig(eta0=e, step=s))
            errors[e, s] = _errors(spec, w, Phi[held], y[held])
    assert errors == {(r["eta0"], r["step"]): r["validation_errors"] for r in rec["grid"]}
    assert len(set(errors.values())) > 1  # the settings matter here, so the rule is exercised
    best = [pair for pair, e in errors.items() if e == min(errors.values())]
    assert len(best) == 1 and (rec["eta0"], rec["step"]) == best[0]
    # the refit on all points is SLA with the chosen pair
    w_all, _ = sla.run_sla(spec, Phi, y, sla.SLAConfig(eta0=rec["eta0"], step=rec["step"]))
    np.testing.assert_array_equal(post.mean_flat(), w_all)


# long: two full SLA fits compared (more than the default tier's few seconds per test)
@pytest.mark.long
def test_slam_with_only_the_default_pair_is_sla():
    Phi, y = _data(seed=2)
    spec = BBLR.from_counts(y, gamma=4.0, lam=1.0)
    post = sla.fit_slam(spec, Phi, y, eta0_grid=(1.0,), step_grid=(0.2,))
    np.testing.assert_array_equal(post.mean_flat(), sla.fit(spec, Phi, y).mean_flat())


def test_on_a_convex_objective_every_pair_ties_and_the_defaults_are_kept():
    # a = 0, b = 1, gamma = 1 is L2 logistic regression: one mode, which every pair reaches
    Phi, y = _data(seed=3)
    spec = BBLR(a=0.0, b=1.0, gamma=1.0, lam=1.0)
    rec = sla.fit_slam(spec, Phi, y).info.extra["slam"]
    assert len({r["validation_errors"] for r in rec["grid"]}) == 1
    lls = [r["validation_loglik"] for r in rec["grid"]]
    assert max(lls) - min(lls) < sla.LOGLIK_TIE * rec["n_validation"]
    assert (rec["eta0"], rec["step"]) == (1.0, 0.2)


def test_slams_answer_is_a_local_minimum_of_the_specs_objective():
    Phi, y = _data(seed=4)
    spec = BBLR.from_counts(y, gamma=20.0, lam=0.5)
    post = sla.fit_slam(spec, Phi, y, seed=1)
    w = post.mean_flat()
    f = -float(spec.log_joint(w, Phi, y))
    assert post.info.trace[-1] == pytest.approx(f, rel=1e-10)
    for d in range(w.size):
        for step in (1e-3, -1e-3, 0.05, -0.05):
            v = w.copy()
            v[d] += step
            assert -float(spec.log_joint(v, Phi, y)) > f - 1e-8 * len(y)


def test_bblr3_end_to_end_chooses_lam_then_the_pair_on_the_same_fifth():
    Phi, y = _data(seed=5)
    lam_grid = (0.01, 1.0, 30.0)
    fit = sla.fit_slam_end_to_end(Phi, y, seed=7, lam_grid=lam_grid, eta0_grid=(0.3, 1.0), step_grid=(0.2,))
    lam, selection = sla.select_lam(Phi, y, gamma=4.0, seed=7, lam_grid=lam_grid)
    assert fit.spec.lam == lam and fit.posterior.info.extra["selection"] == selection
    assert fit.spec.a == pytest.approx(np.mean(y) / 2) and fit.spec.b == 0.5  # BBLR2's a, b from all points
    rec = fit.posterior.info.extra["slam"]
    assert rec["eta0"] in (0.3, 1.0) and rec["n_validation"] == selection["n_validation"]
    # BBLR4 starts from that answer and keeps both records
    fit4 = sla.fit_slam_end_to_end(Phi, y, seed=7, lam_grid=lam_grid, eta0_grid=(0.3, 1.0), step_grid=(0.2,),
                                   learn_likelihood=True)
    assert fit4.spec.lam == lam and fit4.posterior.info.extra["slam"] == rec
    assert fit4.posterior.info.extra["learned"]["rounds"] >= 1 and fit4.posterior.info.engine == "slam"


@pytest.mark.long
def test_the_shared_end_to_end_helper_records_the_selection_for_every_fit():
    Phi, y = _data(seed=6)
    lam, selection = sla.select_lam(Phi, y, gamma=4.0, seed=0)
    for fit in (sla.fit_end_to_end(Phi, y), sla.fit_laplace_end_to_end(Phi, y)):
        assert fit.spec.lam == lam and fit.posterior.info.extra["selection"] == selection


def test_the_sigmoid_loss_is_nguyen_and_sanners_with_the_l2_term():
    Phi, y = _data(seed=7)
    spec = BBLR(a=0.0, b=1.0, gamma=8.0, lam=0.5)
    post = sla.fit(spec, Phi, y, config=sla.SLAConfig(loss="sigmoid"))
    w = post.mean_flat()
    t = 2 * y - 1
    # minus the log density of N(0, I / lam): lam / 2 ||w||^2 and its normalizing constant
    const = -0.5 * w.size * np.log(0.5 / (2 * np.pi))
    by_hand = np.sum(1.0 / (1.0 + np.exp(8.0 * t * (Phi @ w)))) + 0.25 * w @ w + const
    assert post.info.trace[-1] == pytest.approx(by_hand, rel=1e-10)
    assert "sigmoid" in post.info.objective
    # within a stage the loss never rises, and the answer is a local minimum of it
    trace, stage = post.info.trace, post.info.extra["stage_of"]
    for k in np.unique(stage):
        assert np.all(np.diff(trace[stage == k]) <= 1e-9 * abs(trace[stage == k][0]))
    for d in range(w.size):
        for step in (1e-3, -1e-3):
            v = w.copy()
            v[d] += step
            assert np.sum(1.0 / (1.0 + np.exp(8.0 * t * (Phi @ v)))) + 0.25 * v @ v + const > by_hand - 1e-8 * len(y)
    # it is another objective than the model's: the modes differ
    assert not np.allclose(w, sla.fit(spec, Phi, y).mean_flat(), atol=1e-3)


def test_bad_input_is_named():
    Phi, y = _data()
    spec = BBLR.from_counts(y)
    with pytest.raises(ValueError, match="eta0_grid must be a non-empty sequence"):
        sla.fit_slam(spec, Phi, y, eta0_grid=())
    with pytest.raises(ValueError, match="step_grid must be a non-empty sequence of distinct positive"):
        sla.fit_slam(spec, Phi, y, step_grid=(0.2, -1.0))
    with pytest.raises(ValueError, match="S0 = 9 is not a valid SLA setting.*must not exceed radius"):
        sla.fit_slam(spec, Phi, y, step_grid=(9.0,))
    with pytest.raises(ValueError, match="lam_grid must be a non-empty sequence of distinct positive numbers"):
        sla.fit_slam_end_to_end(Phi, y, lam_grid=(1.0, 0.0))
    with pytest.raises(ValueError, match="loss must be one of"):
        sla.SLAConfig(loss="hinge")
    with pytest.raises(ValueError, match="'sigmoid' needs a spec with a = 0 and b = 1"):
        sla.fit_slam(spec, Phi, y, config=sla.SLAConfig(loss="sigmoid"))
    with pytest.raises(ValueError, match="laplace approximates the model's posterior"):
        sla.fit_laplace(BBLR(a=0.0, b=1.0), Phi, y, config=sla.SLAConfig(loss="sigmoid"))
    with pytest.raises(TypeError, match="the slam engine fits BBLR specs"):
        sla.fit_slam(object(), Phi, y)
