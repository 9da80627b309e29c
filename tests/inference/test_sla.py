"""SLA and the Laplace approximation at its mode (inference/sla.py) on BBLR."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import sla
from zoo.inference.posterior import ApproximationFailed
from zoo.models.bblr import BBLR


def _data(n=120, d=3, seed=0, flip=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ np.linspace(1.0, -0.5, d) + 0.3 * rng.standard_normal(n) > 0).astype(float)
    flipped = rng.random(n) < flip  # label noise: the bounded likelihood's business
    y[flipped] = 1 - y[flipped]
    return np.column_stack([X, np.ones(n)]), y


def test_the_gamma_schedule_ends_at_the_models_gamma():
    cfg = sla.SLAConfig()
    assert sla.gamma_schedule(200.0, cfg) == [2.0, 20.0, 200.0]
    assert sla.gamma_schedule(50.0, cfg) == [2.0, 20.0, 50.0]
    assert sla.gamma_schedule(1.0, cfg) == [1.0]  # below gamma_min: one stage at the target
    assert list(sla.probe_steps(0.2, 0.6)) == pytest.approx([0.2, -0.2, 0.4, -0.4, 0.6, -0.6])


@pytest.mark.parametrize("gamma", [1.0, 30.0])
def test_the_objective_never_rises_within_a_stage_and_the_answer_is_a_local_minimum(gamma):
    Phi, y = _data()
    spec = BBLR.from_counts(y, gamma=gamma, lam=0.5)
    post = sla.fit(spec, Phi, y)
    trace, stage = post.info.trace, post.info.extra["stage_of"]
    for k in np.unique(stage):
        assert np.all(np.diff(trace[stage == k]) <= 1e-9 * abs(trace[stage == k][0])), k
    assert post.info.converged
    # the last stage's value is the negative log joint at the model's gamma
    w = post.mean_flat()
    assert trace[-1] == pytest.approx(-float(spec.log_joint(w, Phi, y)), rel=1e-10)
    # no coordinate probe step and no small gradient step lowers it any further
    f = -float(spec.log_joint(w, Phi, y))
    for d in range(w.size):
        for step in (1e-3, -1e-3, 0.05, -0.05):
            v = w.copy()
            v[d] += step
            assert -float(spec.log_joint(v, Phi, y)) > f - 1e-8 * len(y)


def test_the_logistic_start_is_the_l2_logistic_regression_solution():
    Phi, y = _data(seed=1)
    w = sla.logistic_start(Phi, y, 2.0)
    f = Phi @ w
    grad = Phi.T @ (y - 1 / (1 + np.exp(-f))) - 2.0 * w
    assert np.max(np.abs(grad)) < 1e-8


@pytest.mark.long
def test_laplace_sits_at_a_stationary_point_with_the_inverse_hessian():
    Phi, y = _data(seed=2)
    spec = BBLR.from_counts(y, gamma=3.0, lam=1.0)
    post = sla.fit_laplace(spec, Phi, y)
    w = jnp.asarray(post.mean_flat())
    g = jax.grad(lambda v: spec.log_joint(v, Phi, y))(w)
    assert float(jnp.max(jnp.abs(g))) < 1e-6
    H = -jax.hessian(lambda v: spec.log_joint(v, Phi, y))(w)
    np.testing.assert_allclose(post.cov @ np.asarray(H), np.eye(w.size), atol=1e-8)


@pytest.mark.long
def test_laplace_refuses_where_the_curvature_is_not_positive():
    # a duplicated feature under a prior of precision 1e-300: along w_1 - w_2 neither the
    # likelihood nor (to float precision) the prior curves, so there is no Gaussian to
    # give, and the engine says so instead of inverting rounding noise
    Phi, y = _data(n=60, seed=3)
    Phi = np.column_stack([Phi[:, :1], Phi])
    spec = BBLR.from_counts(y, gamma=2.0, lam=1e-300)
    with pytest.raises(ApproximationFailed, match="not positive definite"):
        sla.fit_laplace(spec, Phi, y)


@pytest.mark.parametrize("kwargs, message", [
    ({"r_gamma": 1.0}, "r_gamma must be > 1"), ({"r_radius": 0.0}, "r_radius must lie in"),
    ({"step": 10.0}, "step .* must not exceed radius"), ({"eta0": -1.0}, "eta0 must be a positive"),
    ({"max_rounds": 0}, "max_rounds must be an integer"), ({"start": "svm"}, "start must be one of"),
])
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sla.SLAConfig(**kwargs)


def test_sla_refuses_another_models_spec_and_bad_labels():
    from zoo.models.pcvm import PCVM

    Phi, y = _data(n=30)
    with pytest.raises(TypeError, match="PCVM"):
        sla.fit(PCVM(), Phi, y)
    with pytest.raises(ValueError, match="exactly two classes"):
        sla.fit(BBLR(), Phi, np.arange(30.0))


def test_asymptotic_a_b_are_one_minus_tnr_and_tpr_plus_tnr_minus_one():
    # 4 positives, 3 predicted positive (TPR 3/4); 4 negatives, 3 predicted negative (TNR 3/4)
    Phi = np.array([[1.0], [1.0], [1.0], [-1.0], [-1.0], [-1.0], [-1.0], [1.0]])
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0.0])
    a, b = sla.asymptotic_ab(np.array([1.0]), Phi, y)
    assert (a, b) == pytest.approx((0.25, 0.5))


@pytest.mark.long
def test_bblr4_learns_a_b_gamma_and_records_how_they_moved():
    Phi, y = _data(n=150, seed=4)
    fit = sla.fit_end_to_end(Phi, y, learn_likelihood=True)
    spec, learned = fit.spec, fit.posterior.info.extra["learned"]
    assert 0 < spec.a and spec.c >= 0 and spec.gamma > 0
    history = learned["history_a_b_gamma"]
    assert 2 <= len(history) <= 6 and history[-1] == pytest.approx((spec.a, spec.b, spec.gamma))
    assert learned["rounds"] == len(history) - 1 and isinstance(learned["settled"], bool)
    assert fit.posterior.info.extra["selection"]["lam"] == spec.lam


# long: SLA fitted twice, with and without the defect (more than the default tier's few seconds)
@pytest.mark.long
def test_the_planted_logistic_curvature_defect_is_lr_s_hessian_at_the_same_mode():
    # defects.py's "logistic curvature": same mean, covariance = inverse of the Hessian of
    # plain L2 logistic regression (a = 0, b = 1) there - narrower than the model's own
    # Gaussian, because the bounded likelihood (a = 0.25, b = 0.5) curves less
    Phi, y = _data(seed=2)
    spec = BBLR(a=0.25, b=0.5, gamma=3.0, lam=1.0)
    good = sla.fit_laplace(spec, Phi, y)
    bad = sla.fit_laplace(spec, Phi, y, config=sla.SLAConfig(laplace_hessian="logistic"))
    np.testing.assert_allclose(bad.mean_flat(), good.mean_flat(), atol=1e-12)
    lr = BBLR(a=0.0, b=1.0, gamma=3.0, lam=1.0)
    w = jnp.asarray(good.mean_flat())
    H = -jax.hessian(lambda v: lr.log_joint(v, Phi, y))(w)
    np.testing.assert_allclose(bad.cov @ np.asarray(H), np.eye(w.size), atol=1e-8)
    assert np.all(bad.sd_flat() < good.sd_flat())
    with pytest.raises(ValueError, match="laplace_hessian"):
        sla.SLAConfig(laplace_hessian="lr")
