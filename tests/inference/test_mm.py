"""The GGIG MM engine and its special cases (inference/mm.py).

* Each rule's objective never decreases while the active set keeps its size (the
  monotonicity the paper proves, eq. 13; DERIVATIONS.md §2.4 names the pruning exception).
* ggig's objective is the NumPyro model's log density with lambda integrated out.
* lap, gj, stu and ggig reproduce their textbook closed-form updates
  w_new = (Phi^T Phi + diag(p))^{-1} Phi^T zbar, computed here independently in numpy,
  through both the n <= N and the n > N (Woodbury) forms of the engine's M-step.
* The collapse of DERIVATIONS.md §2.5 under the paper's prior is detected and reported.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import zoo  # noqa: F401  (float64)
from zoo.data import ggig_linear
from zoo.inference import mm
from zoo.models.basis import LinearBasis, WithBias
from zoo.models.ggsm_probit import GGSMProbit


def design(n_relevant=8, n_train=200, repetition=0):
    s = ggig_linear(n_relevant, n_train, repetition)
    basis = WithBias(LinearBasis.fit(s.X_train))
    return basis.transform(s.X_train), s.y_train, basis.transform(s.X_test), s.y_test


RULE_CONFIGS = [("ggig", {}), ("lap", {"gamma": 0.4}), ("gj", {}), ("stu", {"stu_c": 0.1, "stu_d": 0.01})]


@pytest.mark.parametrize("rule, kwargs, q", [("ggig", {}, 0.1), ("ggig", {}, 2.0)]
                         + [(rule, kwargs, 1.0) for rule, kwargs in RULE_CONFIGS])
def test_objective_never_decreases_while_the_active_set_keeps_its_size(rule, kwargs, q):
    Phi, y, _, _ = design()
    res = mm.run(GGSMProbit(q=q), Phi, y, config=mm.MMConfig(rule=rule, **kwargs))
    assert res.status == "converged", res.reason
    steps = np.diff(res.trace)
    same = np.diff(res.n_active_trace) == 0
    assert same.sum() > 10
    # round-off allowance: 1e-10 relative to the objective's size
    assert np.all(steps[same] >= -1e-10 * np.abs(res.trace[1:][same]))


def test_ggig_objective_is_the_log_density_with_lambda_integrated_out():
    Phi, y, _, _ = design(n_train=50)
    spec = GGSMProbit(q=0.5, a=2.0, b=0.5)
    w = np.random.default_rng(1).normal(size=Phi.shape[1])
    s = 2 * y - 1
    expected = np.sum(stats.norm.logcdf(s * (Phi @ w))) + float(spec.log_marginal_prior(w))
    assert mm.objective(spec, Phi, y, w) == pytest.approx(expected, rel=1e-12)


def penalties(rule, w, spec, config):
    """Textbook p_i of each rule at the current w (no U-form), all weights active."""
    aw = np.abs(w)
    if rule == "ggig":
        inv_lam = (w.size / spec.q + spec.a) / (np.sum(aw**spec.q) + spec.b)  # eq. 9
        return spec.q * inv_lam * aw ** (spec.q - 2.0)  # eq. 12: q <1/lambda> V
    if rule == "lap":
        return config.gamma / aw  # seed eq. 16
    if rule == "gj":
        return 1.0 / aw**2  # seed eq. 17
    return (2 * config.stu_c + 1) / (aw**2 + 2 * config.stu_d)  # Chen et al. 2009


def textbook_steps(rule, Phi, y, spec, config, n_steps):
    s = 2 * y - 1
    w = np.ones(Phi.shape[1])
    for _ in range(n_steps):
        f = Phi @ w
        zbar = f + s * stats.norm.pdf(f) / stats.norm.cdf(s * f)  # eq. 10
        w = np.linalg.solve(Phi.T @ Phi + np.diag(penalties(rule, w, spec, config)), Phi.T @ zbar)
    return w


@pytest.mark.parametrize("rule, kwargs", RULE_CONFIGS)
@pytest.mark.parametrize("n_train", [200, 30])  # n = 51 <= N, and n > N (Woodbury form)
def test_each_rule_reproduces_its_closed_form_update(rule, kwargs, n_train):
    Phi, y, _, _ = design(n_train=n_train)
    spec = GGSMProbit(q=0.5, a=1.0, b=1.0)
    config = mm.MMConfig(rule=rule, max_iter=3, prune_threshold=1e-12, **kwargs)
    res = mm.run(spec, Phi, y, config=config)
    assert res.n_iter == 3
    np.testing.assert_allclose(res.w, textbook_steps(rule, Phi, y, spec, config, 3), rtol=1e-7, atol=1e-10)


@pytest.mark.long
def test_gj_is_the_small_q_limit_and_lap_the_large_a_limit_of_ggig():
    """DERIVATIONS.md §2.3: q <1/lambda> V -> (n/(n+b)) V_gj as q -> 0; <1/lambda> -> a/b = gamma as
    a -> inf with b = a/gamma. One step from the same start must agree to the limit."""
    Phi, y, _, _ = design()
    one = dict(max_iter=1, prune_threshold=1e-12)
    lap = mm.run(GGSMProbit(q=1.0), Phi, y, config=mm.MMConfig(rule="lap", gamma=0.4, **one)).w
    a = 1e9
    ggig_lap = mm.run(GGSMProbit(q=1.0, a=a, b=a / 0.4), Phi, y, config=mm.MMConfig(**one)).w
    np.testing.assert_allclose(ggig_lap, lap, rtol=1e-6)
    # from w = 1 the GJ penalty is 1 and ggig's is q <1/lambda> = (n + a q)/(n + b) -> n/(n+b)
    n = Phi.shape[1]
    gj = mm.run(GGSMProbit(), Phi, y, config=mm.MMConfig(rule="gj", **one)).w
    ggig_small_q = mm.run(GGSMProbit(q=1e-6, a=1e-3, b=1e-9), Phi, y, config=mm.MMConfig(**one)).w
    np.testing.assert_allclose(ggig_small_q, gj, rtol=1e-5)
    assert n > 1


def test_collapse_under_the_paper_prior_is_detected_and_explained():
    """DERIVATIONS.md §2.5: with a = b = 1e-3, q = 1, n_f = 50, N = 200 every weight is pruned."""
    Phi, y, _, _ = design(n_relevant=50)
    res = mm.run(GGSMProbit.paper_prior(q=1.0), Phi, y)
    assert res.status == "collapsed"
    assert "pruned" in res.reason and "proper prior" in res.reason
    assert np.any(res.w != 0)  # the last iterate with an active weight is returned
    proper = mm.run(GGSMProbit(q=1.0), Phi, y)  # the remedy: a = b = 1
    assert proper.status == "converged" and np.sum(proper.w != 0) > 10


def test_convergence_into_the_spike_at_zero_is_explained():
    """ggig_linear_weak (relevant weights 0.3), a = b = 1e-3, q = 2: MM stops with every
    weight near 0.001 - not pruned, but in the prior's spike - and says so; with the
    proper prior it does not."""
    from zoo.data import load
    from zoo.validation.records.registry import prepare

    split = load("ggig_linear_weak", 0)
    paper = prepare("ggsm-probit", split, {"q": 2.0, "a": 1e-3, "b": 1e-3})
    res = mm.run(paper.spec, paper.Phi_train, paper.y_train)
    assert res.status == "converged" and "spike at w = 0" in res.reason
    proper = prepare("ggsm-probit", split, {"q": 2.0})
    res = mm.run(proper.spec, proper.Phi_train, proper.y_train)
    assert res.status == "converged" and res.reason == ""


def test_fit_returns_a_point_posterior_over_lambda_and_w():
    Phi, y, Phi_test, y_test = design()
    post = mm.fit(GGSMProbit(q=0.1), Phi, y)
    assert post.info.converged and post.info.engine == "mm"
    lam = post.mean_flat()[0]
    w = post.mean_flat()[1:]
    assert lam == pytest.approx(1.0 / post.info.extra["inv_lambda"])
    assert post.info.extra["n_active"] == np.sum(w != 0) < 15  # sparse at q = 0.1, n_f = 8
    error = np.mean((post.predict_proba(Phi_test) > 0.5) != y_test)
    # measured 0.043; at q = 2 (no sparsity) the same engine gets 0.13 on this design
    assert error < 0.08


@pytest.mark.parametrize("bad", [dict(rule="newton"), dict(gamma=0.0), dict(tol=-1.0), dict(max_iter=0),
                                 dict(stu_c=-1.0), dict(init="zeros"), dict(prune_threshold=0.0)])
def test_invalid_configuration_raises(bad):
    with pytest.raises(ValueError):
        mm.MMConfig(**bad)


def test_bad_input_raises():
    Phi, y, _, _ = design(n_train=50)
    with pytest.raises(ValueError):
        mm.run(GGSMProbit(), Phi, y[:-1])
    with pytest.raises(TypeError):
        mm.run(object(), Phi, y)
    bad = Phi.copy()
    bad[0, 0] = math.nan
    with pytest.raises(ValueError):
        mm.run(GGSMProbit(), bad, y)


@pytest.mark.long
def test_registry_binds_each_rule_to_its_engine_name():
    from zoo.validation.records.registry import get_engine

    Phi, y, _, _ = design(n_train=50)
    for name in ("mm", "lap", "gj", "stu"):
        post = get_engine("ggsm-probit", name).fit()(GGSMProbit(), Phi, y)
        assert post.info.extra["rule"] == ("ggig" if name == "mm" else name)


@pytest.mark.parametrize("n_relevant, allowed", [(2, (0.1, 0.5)), (50, (1.5, 2.0))])
@pytest.mark.long
def test_cross_validated_q_follows_the_sparsity_of_the_truth(n_relevant, allowed):
    """The paper's Section 6.1 claim on one seeded repetition (N = 200): few relevant
    features -> a small q wins the CV, all 50 relevant -> a large q. The test-error gaps
    behind it are wide (q = 0.1 vs 2: 7.6% vs 15.2% at n_f = 2, 26.7% vs 10.5% at n_f = 50),
    so the choice is not a coin flip."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from zoo.classifier import SparseBayesClassifier

    s = ggig_linear(n_relevant, 200, 0)
    search = GridSearchCV(SparseBayesClassifier(model="ggsm-probit", engine="mm", basis="linear"),
                          {"q": [0.1, 0.5, 1.0, 1.5, 2.0]}, cv=StratifiedKFold(5, shuffle=True, random_state=0))
    search.fit(s.X_train, s.y_train)
    assert search.best_params_["q"] in allowed
    assert search.score(s.X_test, s.y_test) > 0.85
