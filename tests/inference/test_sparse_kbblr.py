"""Sparse kernel BBLR (inference/sparse_kbblr.py): the hand-derived gradient and objective
against the NumPyro model, the fast probe against a plain one, the hard EM on a hand-made
w, the objective's monotonicity within a segment, the frozen final spec, bad input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

import zoo  # noqa: F401  (float64)
from zoo.inference import sla
from zoo.inference import sparse_kbblr as sk
from zoo.models.basis import RBFBasis, median_heuristic_width
from zoo.models.bblr import BBLR


def _kernel_data(n=40, seed=0, width=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(float)
    return RBFBasis.fit(X, width).transform(X), y


def _curved_data(n=60, seed=1):
    """A curved boundary with some label noise: under the weak-prior a, b the EM keeps a
    few kernel functions here (under BBLR2's b = 1/2 it prices out every one)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.5 + 0.3 * rng.standard_normal(n) > 0).astype(float)
    return RBFBasis.fit(X, 1.0).transform(X), y


def _hyper(spec, gamma=None):
    return jnp.asarray([spec.a, spec.b, spec.gamma if gamma is None else gamma, spec.lam, spec.pi, spec.s2, spec.ell])


SPEC = BBLR(a=0.2, b=0.5, gamma=3.0, prior="gauss-laplace", pi=0.3, s2=0.5, ell=0.05)


def test_the_kernel_objective_is_minus_the_numpyro_log_joint():
    Phi, y = _kernel_data()
    w = np.random.default_rng(1).normal(scale=0.3, size=Phi.shape[1])
    lp, _ = log_density(SPEC.model, (jnp.asarray(Phi),), {"y": jnp.asarray(y)}, {"w": jnp.asarray(w)})
    e = Phi.shape[0] * float(sla.mean_objective(jnp.asarray(w), jnp.asarray(Phi), jnp.asarray(y), _hyper(SPEC),
                                                "gauss-laplace"))
    assert e == pytest.approx(-float(lp), rel=1e-12)


def test_the_hand_derived_gradient_is_the_gradient_of_minus_the_log_joint():
    """eq. 38 (delta_n b gamma sigma (1 - sigma) k_n) and eqs. 42-44 (-r w / s2 - (1 - r)
    sign(w) / ell) against autodiff of the NumPyro log density, at a point with no w_j = 0;
    and the likelihood's part for logistic regression (a = 0, b = gamma = 1)."""
    Phi, y = _kernel_data(seed=2)
    w = np.random.default_rng(3).normal(scale=0.3, size=Phi.shape[1])
    n = Phi.shape[0]

    def neg_log_joint(v):
        return -log_density(SPEC.model, (jnp.asarray(Phi),), {"y": jnp.asarray(y)}, {"w": v})[0]

    auto = np.asarray(jax.grad(neg_log_joint)(jnp.asarray(w))) / n
    hand = np.asarray(sk.mean_gradient(jnp.asarray(w), jnp.asarray(Phi), jnp.asarray(y), _hyper(SPEC)))
    np.testing.assert_allclose(hand, auto, rtol=1e-10, atol=1e-13)
    f = Phi @ w
    score = np.asarray(sk.likelihood_score(jnp.asarray(f), jnp.asarray(y), 0.0, 1.0, 1.0))
    np.testing.assert_allclose(score, y - 1 / (1 + np.exp(-f)), rtol=1e-12)


def _plain_probe(w, spec, Phi, y, steps, eps_loss):
    """sla's probe written out: every candidate's objective from scratch."""
    w = np.array(w, float)
    n = Phi.shape[0]

    def e(v):
        return -float(spec.log_joint(jnp.asarray(v), Phi, y)) / n

    current, moves = e(w), 0
    for d in range(w.size):
        for s in steps:
            v = w.copy()
            v[d] += s
            value = e(v)
            if current - value > eps_loss:
                w, current, moves = v, value, moves + 1
                break
    return w, moves


def test_the_fast_probe_makes_the_moves_of_a_plain_one():
    Phi, y = _kernel_data(n=25, seed=4)
    w0 = np.random.default_rng(5).normal(scale=0.2, size=Phi.shape[1])
    steps = sla.probe_steps(0.05, 0.4)
    w_fast, e_fast, moves = sk._probe_jit(jnp.asarray(w0), jnp.asarray(Phi), jnp.asarray(y), _hyper(SPEC),
                                          jnp.asarray(steps), 1e-10)
    w_plain, moves_plain = _plain_probe(w0, SPEC, Phi, y, steps, 1e-10)
    assert int(moves) == moves_plain > 0
    np.testing.assert_allclose(np.asarray(w_fast), w_plain, atol=1e-14)
    assert Phi.shape[0] * float(e_fast) == pytest.approx(-float(SPEC.log_joint(w_plain, Phi, y)), rel=1e-12)


def test_the_hard_em_step_on_a_hand_made_w():
    # pi = 0.5, s2 = 1, ell = 0.1: the Laplace wins near 0, the Gaussian beyond
    # |w| ~ 0.25 (log N - log Lap = log(0.2 / sqrt(2 pi)) - w^2 / 2 + 10 |w|)
    w = np.array([0.0, 0.01, -0.05, 1.0, -2.0, 0.5])
    step = sk.hard_em_step(w, 0.5, 1.0, 0.1, s2_floor=1e-8, ell_floor=1e-8)
    np.testing.assert_array_equal(step.gaussian, [False, False, False, True, True, True])
    assert step.pi == pytest.approx(3 / 6)
    assert step.s2 == pytest.approx((1.0 + 4.0 + 0.25) / 3)
    assert step.ell == pytest.approx((0.0 + 0.01 + 0.05) / 3)
    assert step.floors == ()
    # the assignment is the rule pi N >= (1 - pi) Lap, computed by hand for w = 0.5
    log_g = np.log(0.5) - 0.5 * np.log(2 * np.pi) - 0.125
    log_l = np.log(0.5) - np.log(0.2) - 5.0
    assert log_g >= log_l


def test_the_hard_em_floors_hold_the_degenerate_cases():
    m = 4
    # every weight 0: G is empty (keeps its s2), pi at 1 / (2M), ell = mean |w| = 0 -> floor
    step = sk.hard_em_step(np.zeros(m), 0.5, 1.0, 0.1, s2_floor=1e-6, ell_floor=1e-3)
    assert not step.gaussian.any() and step.pi == pytest.approx(1 / (2 * m))
    assert step.s2 == 1.0 and step.ell == 1e-3 and set(step.floors) == {"pi", "empty G", "ell"}
    # every weight large: L is empty (keeps its ell), pi at 1 - 1 / (2M)
    step = sk.hard_em_step(np.full(m, 2.0), 0.5, 1.0, 0.1, s2_floor=1e-6, ell_floor=1e-3)
    assert step.gaussian.all() and step.pi == pytest.approx(1 - 1 / (2 * m)) and step.ell == 0.1
    assert step.s2 == pytest.approx(4.0) and set(step.floors) == {"pi", "empty L"}
    # the Gaussian's members all tiny: s2 stops at its floor
    step = sk.hard_em_step(np.array([1e-5, -1e-5, 0.0, 0.0]), 0.9, 1e-8, 10.0, s2_floor=1e-6, ell_floor=1e-3)
    assert step.gaussian.all() and step.s2 == 1e-6 and "s2" in step.floors
    with pytest.raises(ValueError, match="finite weights"):
        sk.hard_em_step(np.array([np.nan]), 0.5, 1.0, 0.1, s2_floor=1e-6, ell_floor=1e-3)
    with pytest.raises(ValueError, match="0 < pi < 1"):
        sk.hard_em_step(np.ones(3), 1.0, 1.0, 0.1, s2_floor=1e-6, ell_floor=1e-3)


@pytest.fixture(scope="module")
def small_run():
    Phi, y = _curved_data()
    spec = BBLR.weak_prior(gamma=4.0, prior="gauss-laplace", pi=0.5, s2=0.5, ell=0.05)
    return spec, Phi, y, sk.fit(spec, Phi, y)


def test_the_objective_never_rises_within_a_segment_and_the_spec_is_the_ems(small_run):
    spec, Phi, y, post = small_run
    info = post.info
    trace, segment = info.trace, info.extra["segment_of"]
    assert len(np.unique(segment)) > 2  # the EM moved the constants several times
    for k in np.unique(segment):
        t = trace[segment == k]
        assert np.all(np.diff(t) <= 1e-9 * max(1.0, abs(t[0]))), k
    assert info.converged
    final = post.spec
    assert final is not spec and (final.a, final.b, final.gamma, final.prior) == (spec.a, spec.b, spec.gamma,
                                                                                   spec.prior)
    assert (final.pi, final.s2, final.ell) == (info.extra["pi"], info.extra["s2"], info.extra["ell"])
    last = info.extra["em"][-1]
    assert last["probe_moves"] == 0 and last["change"] < sk.SparseConfig().em_tol
    # the last trace value is the final spec's -log joint at the answer
    w = post.mean_flat()
    assert trace[-1] == pytest.approx(-float(final.log_joint(w, Phi, y)), rel=1e-10)
    # the kept columns are the Gaussian component's members under the final constants
    kept = info.extra["kept"]
    np.testing.assert_array_equal(kept, np.flatnonzero(info.extra["gaussian"]))
    assert 0 < kept.size < w.size and info.extra["n_kept"] == kept.size
    # compare's "weights kept" column reads n_active, the key every pruning engine sets
    assert info.extra["n_active"] == kept.size
    # the weights outside the kept set are those the descent stopped at the kink
    assert np.all(w[np.setdiff1d(np.arange(w.size), kept)] == 0)


def test_the_answer_is_stationary_for_its_own_spec(small_run):
    """No coordinate step lowers the final spec's objective (the kept weights are at a
    zero of the gradient, the dropped ones held at 0 by the Laplace kink)."""
    _, Phi, y, post = small_run
    spec, w = post.spec, post.mean_flat()
    f = -float(spec.log_joint(w, Phi, y))
    for d in range(w.size):
        for step in (1e-4, -1e-4):
            v = w.copy()
            v[d] += step
            assert -float(spec.log_joint(v, Phi, y)) > f - 1e-6


def test_end_to_end_keeps_the_em_columns_and_predicts_with_them():
    Phi, y = _curved_data()
    fit = sk.fit_end_to_end(Phi, y, ab="weak")
    extra = fit.posterior.info.extra
    assert fit.spec.prior == "gauss-laplace" and fit.spec.b == pytest.approx(100 / 102)
    np.testing.assert_array_equal(fit.active, extra["kept"])
    assert fit.active.size > 0 and fit.posterior.dim == fit.active.size
    np.testing.assert_allclose(fit.posterior.mean_flat(), extra["w_all"][fit.active])
    assert extra["initial"]["s2"] == pytest.approx(extra["unit"] ** 2)
    p = fit.posterior.predict_proba(Phi[:, fit.active])
    np.testing.assert_allclose(p, fit.spec.prob(Phi @ extra["w_all"]), atol=1e-12)  # dropped weights are 0
    # BBLR2's a, b (b = 1/2) here: the EM keeps nothing, and the answer is the constant a + b / 2
    counts = sk.fit_end_to_end(Phi, y)
    assert counts.spec.b == 0.5 and counts.active.size == 0
    np.testing.assert_allclose(counts.posterior.predict_proba(Phi[:, :0]), counts.spec.a + 0.25)


def test_bad_input_is_named():
    Phi, y = _kernel_data(n=20)
    with pytest.raises(ValueError, match="prior='gauss-laplace'"):
        sk.fit(BBLR(), Phi, y)
    with pytest.raises(ValueError, match="ab must be one of"):
        sk.fit_end_to_end(Phi, y, ab="flat")
    with pytest.raises(ValueError, match="em_tol must be a positive"):
        sk.SparseConfig(em_tol=0.0)
    with pytest.raises(ValueError, match="pi_floor must lie in"):
        sk.SparseConfig(pi_floor=0.7)
    with pytest.raises(ValueError, match="one class only"):
        sk.fit(SPEC, Phi, np.zeros(20))
    with pytest.raises(ValueError, match="two distinct inputs"):
        median_heuristic_width(np.ones((5, 2)))


def _small_split(n=50):
    from dataclasses import replace

    from zoo import data as datasets

    s = datasets.load("statlog_heart", 0)
    return replace(s, X_train=s.X_train[:n], y_train=s.y_train[:n])


@pytest.mark.long
def test_the_protocol_builds_the_kernel_design_and_freezes_the_ems_prior():
    from zoo.validation.records import registry

    record, split = registry.get_model("bblr"), _small_split()
    given = record.prepare(split, {"rbf": 3.0, "sparse": 1.0, "pi": 0.2, "s2": 0.5, "ell": 0.01})
    assert given.Phi_train.shape == (50, 50) and given.Phi_test.shape == (split.X_test.shape[0], 50)
    np.testing.assert_allclose(given.Phi_train, RBFBasis.fit(split.X_train, 3.0).transform(split.X_train))
    spec = given.spec
    assert (spec.prior, spec.pi, spec.s2, spec.ell, spec.b) == ("gauss-laplace", 0.2, 0.5, 0.01, 0.5)
    # without pi, s2, ell: the EM's end point from the engine's own start, a, b, gamma the spec's
    chosen = record.prepare(split, {"rbf": 3.0, "sparse": 1.0, "config": 1.0})
    _, final, rec, _ = sk.run_from_own_start(BBLR.weak_prior(gamma=4.0), chosen.Phi_train, chosen.y_train)
    assert (chosen.spec.pi, chosen.spec.s2, chosen.spec.ell) == (final.pi, final.s2, final.ell)
    assert chosen.spec.b == pytest.approx(100 / 102) and chosen.hyper["em_kept"] == rec["n_kept"]
    assert "hard-EM end point" in chosen.selection["prior"]
    # the mixture has no lam: the gamma^2 / lam invariance (Gaussian prior only) is not claimed
    assert "lam is not used" in chosen.selection["gamma, lam"] and "gamma2_over_lam" not in chosen.hyper
    assert "gamma^2 / lam" in record.prepare(split, {"rbf": 3.0}).selection["gamma, lam"]
    # the Gaussian-prior kernel model and the linear default are untouched by the new params
    assert record.prepare(split, {"rbf": 3.0}).spec.prior == "gaussian"
    assert record.prepare(split, {}).Phi_train.shape == (50, split.X_train.shape[1] + 1)
    for params, message in [({"rbf": 3.0, "sparse": 2.0}, "sparse must be 0 or 1"),
                            ({"rbf": 3.0, "sparse": 1.0, "pi": 0.2}, "give all three"),
                            ({"rbf": 3.0, "pi": 0.2, "s2": 0.5, "ell": 0.01}, "and sparse=1"),
                            ({"rbf": -1.0}, "kernel width must be a positive")]:
        with pytest.raises(ValueError, match=message):
            record.prepare(split, params)
