"""Tests of the top-down PCVM_EM of Chen, Tino & Yao (zoo.inference.pcvm_em) on a seeded
Ripley subset: sparsity and fit, the alpha rule in the selected spec, the monitor between
prunings, compaction, restarts, bad input and the registry's end-to-end form.
"""
from __future__ import annotations

import jax
from jax.scipy.special import ndtr
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.data import open_text
from zoo.inference import em, pcvm_em
from zoo.models.basis import pcvm_basis

from test_em import _bad_inputs


@pytest.fixture(scope="module")
def ripley60():
    """60 Ripley training points (seeded subset), inputs standardized, width 0.5."""
    data = np.loadtxt(open_text("ripley/synth.tr"), skiprows=1)
    idx = np.random.default_rng(0).choice(data.shape[0], 60, replace=False)
    X, y = data[idx, :2], data[idx, 2]
    X = (X - X.mean(0)) / X.std(0)
    return pcvm_basis(X, y, 0.5).transform(X), y


@pytest.fixture(scope="module")
def top_down(ripley60):
    Phi, y = ripley60
    return pcvm_em.fit_top_down(Phi, y, key=jax.random.PRNGKey(0))


def test_top_down_is_sparse_and_fits_ripley(ripley60, top_down):
    Phi, y = ripley60
    post, spec, active = top_down
    assert 0 < active.size < 0.3 * Phi.shape[1]
    assert post.value.shape == (active.size + 1,)
    assert np.all(post.value[1:] > 1e-3)  # pruned weights are gone, kept ones exceed w_min
    p = post.predict_proba(Phi[:, active])
    assert np.mean((p > 0.5) != y) < 0.2
    # the posterior's prediction is the probit of the selected columns
    np.testing.assert_allclose(p, ndtr(Phi[:, active] @ post.value[1:] + post.value[0]), rtol=1e-12)
    info = post.info
    assert info.converged or "iteration cap" in info.reason
    assert info.n_iter <= 500 and np.isfinite(info.seconds)


def test_top_down_selected_spec_uses_the_code_alpha_rule(top_down):
    post, spec, active = top_down
    w, b = post.value[1:], post.value[0]
    np.testing.assert_allclose(spec.alpha, 1.0 / (2.0 * w**2), rtol=1e-12)
    expected_bias = 1e12 if b == 0.0 else 1.0 / (2.0 * b**2)
    assert spec.alpha_bias == pytest.approx(expected_bias, rel=1e-12)
    assert spec.sites(active.size)[1].shape == (active.size,)


def test_top_down_monitor_is_monotone_between_prunings(top_down):
    """The monitor is the objective the alpha re-estimation minorizes; it may jump only
    when a term leaves it (a weight or the bias pruned). Round-off tolerance 1e-9 rel."""
    info = top_down[0].info
    trace = info.trace
    n_active = info.extra["n_active_trace"]
    bias_in = info.extra["bias_active_trace"]
    unchanged = (n_active[1:] == n_active[:-1]) & (bias_in[1:] == bias_in[:-1])
    assert unchanged.sum() > 100
    steps = np.diff(trace)[unchanged]
    assert np.all(steps >= -1e-9 * np.abs(trace[1:][unchanged]))


def test_top_down_compaction_does_not_change_the_result(ripley60, top_down):
    """Host-side compaction to power-of-two widths must give the same run as masking
    all 60 columns (min_bucket=64 never compacts)."""
    Phi, y = ripley60
    post_ref, _, active_ref = pcvm_em.fit_top_down(
        Phi, y, key=jax.random.PRNGKey(0), config=pcvm_em.TopDownEMConfig(min_bucket=64)
    )
    post, _, active = top_down
    assert post.info.extra["restarts"][0]["chunks"] > 1
    assert post_ref.info.extra["restarts"][0]["chunks"] == 1
    np.testing.assert_array_equal(active, active_ref)
    assert post.info.n_iter == post_ref.info.n_iter
    # identical arithmetic up to summation order over zero padding
    np.testing.assert_allclose(post.value, post_ref.value, rtol=1e-8, atol=1e-10)


def test_top_down_restarts_keep_the_best_monitor_value(ripley60):
    Phi, y = ripley60
    config = pcvm_em.TopDownEMConfig(n_restarts=3, alpha_update="derived")
    post, spec, active = pcvm_em.fit_top_down(Phi, y, key=jax.random.PRNGKey(1), config=config)
    runs = post.info.extra["restarts"]
    assert len(runs) == 3
    values = [r["final_objective"] for r in runs]
    assert post.info.extra["best_restart"] == int(np.argmax(values))
    assert post.info.trace[-1] == pytest.approx(max(values))
    # the derived rule: alpha_i = 1 / w_i^2
    np.testing.assert_allclose(spec.alpha, 1.0 / post.value[1:] ** 2, rtol=1e-12)


# --------------------------------------------------------------------------- bad input
def test_fit_top_down_rejects_bad_input(ripley60):
    Phi, y = ripley60
    for bad_Phi, bad_y, message in _bad_inputs(Phi, y):
        with pytest.raises(ValueError, match=message):
            pcvm_em.fit_top_down(bad_Phi, bad_y, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="alpha_update"):
        pcvm_em.TopDownEMConfig(alpha_update="paper")


def test_registry_end_to_end_form(ripley60, top_down):
    from zoo.validation.registry import get_engine

    Phi, y = ripley60
    fit = get_engine("pcvm", "em").fit_end_to_end()(Phi, y, seed=0)
    post, spec, active = top_down  # same seed -> same key -> same run
    np.testing.assert_array_equal(fit.active, active)
    np.testing.assert_allclose(fit.posterior.value, post.value, rtol=1e-12)
    assert get_engine("pcvm", "em").fit() is em.fit
