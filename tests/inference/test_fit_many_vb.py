"""The batched forms (``fit.many``) of the two Jaakkola-Jordan VB engines - GIG logistic
(``gig_vb``) and gridRVM (``grid_vb``) - against their one-at-a-time ``fit``.

On the SBC problem of each model (the design SBC simulates its data sets on), entry i of
``fit_many(spec, Phi, ys)`` must be ``fit(spec, Phi, ys[i])``: the same mean and covariance
to round-off, the same sweeps, the same convergence, the same sites and the same extras.
Also: one data set alone, a data set whose fit fails among others that succeed (its
exception in its slot), a planted defect's config honoured by the batched form as by
``fit``, the registry's bound options carried into ``fit.many``, and a second batch of
another size in the same padded bucket compiling nothing.

Why the tolerances are round-off level: the batched program runs each data set's loop
with the same operations in the same order; only ``jax.vmap`` turns some matrix-vector
products into matrix-matrix products, which XLA may sum in another order, so every
number may differ by a few units in the last place. The VB iteration is a contraction
near its fixed point, so such differences do not grow (we see ~1e-15 on means and
covariances). rtol 1e-8 / atol 1e-10 is far above that and far below what one sweep more
or less would change - which the equal sweep counts test apart anyway.
"""
from __future__ import annotations

import numpy as np
import pytest

from zoo.inference import gig_vb, grid_vb
from zoo.inference.posterior import GaussianPosterior
from zoo.validation.records import registry
from zoo.validation.runs.sbc_simulation import problem_for

RTOL, ATOL = 1e-8, 1e-10
D = 7  # padded to a batch of 8: a second batch of 5 shares its program


def _problem(model: str):
    return problem_for(registry.get_model(model))


def _label_rows(Phi, n_rows: int, seed: int) -> np.ndarray:
    """Distinct label vectors with both classes, drawn from the logistic model at random
    weights (data sets like SBC's)."""
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < n_rows:
        w = rng.normal(size=Phi.shape[1])
        y = (rng.random(Phi.shape[0]) < 1.0 / (1.0 + np.exp(-Phi @ w))).astype(float)
        if 0 < y.sum() < y.size and not any(np.array_equal(y, r) for r in rows):
            rows.append(y)
    return np.stack(rows)


def _assert_same_value(a, b, where: str):
    """Equal extras: numbers to round-off, everything else exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_same_value(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_value(x, y, f"{where}[{i}]")
    elif a is None or isinstance(a, str):
        assert a == b, where
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, where
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=where)


def _assert_same_fit(batched, single, where: str):
    assert type(batched) is type(single), where
    assert [(s.name, s.shape) for s in batched.sites] == [(s.name, s.shape) for s in single.sites], where
    np.testing.assert_allclose(batched.mean_flat(), single.mean_flat(), rtol=RTOL, atol=ATOL, err_msg=where)
    np.testing.assert_allclose(batched.cov, single.cov, rtol=RTOL, atol=ATOL, err_msg=where)
    a, b = batched.info, single.info
    assert (a.engine, a.n_iter, a.converged, a.reason, a.objective) == (b.engine, b.n_iter, b.converged, b.reason,
                                                                        b.objective), where
    np.testing.assert_allclose(a.trace, b.trace, rtol=RTOL, atol=ATOL, err_msg=where)
    _assert_same_value(a.extra, b.extra, f"{where} extra")
    _assert_same_value(batched.hyper_factors, single.hyper_factors, f"{where} hyper_factors")


def _assert_batch_is_the_single_fits(fit, spec, Phi, ys, **options):
    batched = fit.many(spec, Phi, ys, **options)
    assert len(batched) == len(ys)
    for i, y in enumerate(ys):
        _assert_same_fit(batched[i], fit(spec, Phi, y, **options), f"data set {i}")
    return batched


# --------------------------------------------------------------------------------------
# GIG logistic
# --------------------------------------------------------------------------------------
@pytest.mark.long
def test_gig_batch_gives_each_data_set_its_own_fit_and_reuses_its_program():
    problem = _problem("gig-logistic")
    ys = _label_rows(problem.Phi, D, seed=1)
    batched = _assert_batch_is_the_single_fits(gig_vb.fit, problem.spec, problem.Phi, ys)
    assert gig_vb.fit.many is gig_vb.fit_many
    assert batched[0].info.extra["design"] == "dense"
    # every entry carries its share of the batch's run and compile time
    assert len({p.info.seconds for p in batched}) == 1 and batched[0].info.seconds > 0
    # the planted defect (the printed a-update) switches the batched form as it does fit
    # (it is a value of the program's input, so this compiles nothing new either)
    printed = gig_vb.GIGVBConfig(a_update="printed")
    broken = _assert_batch_is_the_single_fits(gig_vb.fit, problem.spec, problem.Phi, ys, config=printed)
    assert not np.allclose(broken[0].cov, batched[0].cov)
    # 5 data sets pad to the same batch of 8 as 7: the program is reused
    again = gig_vb.fit_many(problem.spec, problem.Phi, ys[2:])
    assert [p.info.compile_seconds for p in again] == [0.0] * 5
    _assert_same_fit(again[0], batched[2], "data set 2 in a second batch")


@pytest.mark.long
def test_gig_batch_of_one_data_set_on_the_pair_design():
    problem = _problem("gig-logistic")
    ys = _label_rows(problem.Phi, 1, seed=2)
    # the pair form of the design shares its pairs across the data sets (only X^T r
    # varies); one data set, a batch of one, in the form that the SBC design does not pick
    sparse = gig_vb.GIGVBConfig(design="sparse")
    (alone,) = _assert_batch_is_the_single_fits(gig_vb.fit, problem.spec, problem.Phi, ys, config=sparse)
    assert alone.info.extra["design"] == "pairs"


@pytest.mark.long
def test_gig_a_failed_data_set_keeps_its_exception_in_its_slot(monkeypatch):
    problem = _problem("gig-logistic")
    ys = _label_rows(problem.Phi, D, seed=1)
    # a real failure: labels of one class only, which fit refuses with a ValueError
    ys_bad = ys.copy()
    ys_bad[4] = 1.0
    with pytest.raises(ValueError) as refused:
        gig_vb.fit(problem.spec, problem.Phi, ys_bad[4])
    entries = gig_vb.fit_many(problem.spec, problem.Phi, ys_bad)
    assert isinstance(entries[4], ValueError) and str(entries[4]) == str(refused.value)
    for i in (0, 3, 5, 6):
        _assert_same_fit(entries[i], gig_vb.fit(problem.spec, problem.Phi, ys[i]), f"data set {i}")
    # a failure inside the batch: the post-processing (monkeypatched) raises for the third
    # data set only; the others are still returned
    finish, calls = gig_vb._posterior, []

    def failing_third(spec, res):
        calls.append(1)
        if len(calls) == 3:
            raise FloatingPointError("vb: posterior mean or covariance is not finite")
        return finish(spec, res)

    monkeypatch.setattr(gig_vb, "_posterior", failing_third)
    entries = gig_vb.fit_many(problem.spec, problem.Phi, ys)
    assert isinstance(entries[2], FloatingPointError)
    assert all(isinstance(e, GaussianPosterior) for i, e in enumerate(entries) if i != 2)


def test_whole_call_errors_are_raised():
    problem = _problem("gig-logistic")
    ys = _label_rows(problem.Phi, 2, seed=1)
    with pytest.raises(ValueError, match="table"):
        gig_vb.fit_many(problem.spec, problem.Phi, ys[:, :-1])
    with pytest.raises(ValueError, match="table"):
        gig_vb.fit_many(problem.spec, problem.Phi, ys[0])
    with pytest.raises(TypeError):
        gig_vb.fit_many(_problem("grid-rvm").spec, problem.Phi, ys)
    assert gig_vb.fit_many(problem.spec, problem.Phi, ys[:0]) == []


# --------------------------------------------------------------------------------------
# gridRVM
# --------------------------------------------------------------------------------------
@pytest.mark.long
def test_grid_batch_gives_each_data_set_its_own_fit_and_reuses_its_program():
    problem = _problem("grid-rvm")
    ys = _label_rows(problem.Phi, D, seed=3)
    batched = _assert_batch_is_the_single_fits(grid_vb.fit, problem.spec, problem.Phi, ys)
    assert grid_vb.fit.many is grid_vb.fit_many
    again = grid_vb.fit_many(problem.spec, problem.Phi, ys[:5])
    assert [p.info.compile_seconds for p in again] == [0.0] * 5
    _assert_same_fit(again[4], batched[4], "data set 4 in a second batch")


@pytest.mark.parametrize("prior", ["rvm"])
@pytest.mark.long
def test_grid_batch_under_another_prior_and_through_the_registry(prior):
    problem = _problem("grid-rvm")
    # prior= on the model's spec fits the spec of SBC's variant
    assert problem.variants[prior].to_dict() == problem.spec.with_params(prior=prior).to_dict()
    ys = _label_rows(problem.Phi, D, seed=4)
    batched = _assert_batch_is_the_single_fits(grid_vb.fit, problem.spec, problem.Phi, ys, prior=prior)
    assert batched[0].info.extra["prior"] == prior
    # the registry binds the prior into fit.many as into fit (same program: no compile)
    entry_fit = registry.get_model("grid-rvm").engine(grid_vb.ENGINE_NAMES[prior]).fit()
    for a, b in zip(entry_fit.many(problem.spec, problem.Phi, ys[:5]), batched):
        _assert_same_fit(a, b, "registry entry")
        assert a.info.compile_seconds == 0.0


@pytest.mark.long
def test_grid_planted_defect_and_a_failed_data_set(monkeypatch):
    problem = _problem("grid-rvm")
    ys = _label_rows(problem.Phi, 4, seed=5)
    # the planted defect (E[w^2] = mu^2) is a static setting of the program: the batched
    # form must compile and run it, not the engine's own updates
    defect = grid_vb.GridVBConfig(second_moment="mean-only")
    batched = _assert_batch_is_the_single_fits(grid_vb.fit, problem.spec, problem.Phi, ys, config=defect)
    right = grid_vb.fit(problem.spec, problem.Phi, ys[0])
    assert not np.allclose(batched[0].cov, right.cov)
    # one class only among good rows (the other three pad to the same batch of 4), and a
    # post-processing failure (monkeypatched) of the second data set that reaches it
    ys_bad = ys.copy()
    ys_bad[0] = 0.0
    finish, calls = grid_vb._posterior, []

    def failing_second(spec, X, res):
        calls.append(1)
        if len(calls) == 2:
            raise np.linalg.LinAlgError("Matrix is not positive definite")
        return finish(spec, X, res)

    monkeypatch.setattr(grid_vb, "_posterior", failing_second)
    entries = grid_vb.fit_many(problem.spec, problem.Phi, ys_bad, config=defect)
    assert isinstance(entries[0], ValueError) and "one class" in str(entries[0])
    assert isinstance(entries[1], GaussianPosterior)
    assert isinstance(entries[2], np.linalg.LinAlgError)
    assert isinstance(entries[3], GaussianPosterior) and entries[3].info.compile_seconds == 0.0
