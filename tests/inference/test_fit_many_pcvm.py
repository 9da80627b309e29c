"""The batched forms (``fit.many``) of PCVM's EP engine (``expectation_propagation``) and
Laplace engine (``pcvm_laplace``) against their one-at-a-time ``fit``.

On the SBC problem of PCVM (60 points, 6 RBF columns: the design SBC simulates its data
sets on), entry i of ``fit_many(spec, Phi, ys)`` must be ``fit(spec, Phi, ys[i])``: the
same mean and covariance to round-off, the same iteration count, convergence, sites and
extras (EP: also the same site parameters, through ``run_many`` against ``run``). Also:
one data set alone; failing data sets among others that succeed (each exception in its
own slot); the planted EP defect (``truncation_sites=False``) honoured by the batched form
as by ``fit``; and a second batch of another size in the same padded bucket compiling
nothing.

Why the tolerances are round-off level: the batched program runs each data set's loop
with the same operations in the same order; only ``jax.vmap`` turns some matrix-vector
products into matrix-matrix products (and Laplace's Cholesky factorizations into batched
ones), which may sum in another order, so every number may differ by a few units in the
last place. Both iterations contract near their fixed point (EP's sites, Newton's mode),
so such differences do not grow: we see ~1e-15 on means and Cholesky factors. rtol 1e-8 /
atol 1e-10 is far above that and far below what one sweep or Newton step more or less
would change - which the equal iteration counts test apart anyway.
"""
from __future__ import annotations

import numpy as np
import pytest

from zoo.inference import expectation_propagation as ep
from zoo.inference import pcvm_laplace as lap
from zoo.inference.contracts import many_of
from zoo.validation.records import registry
from zoo.validation.runs.sbc_simulation import problem_for

RTOL, ATOL = 1e-8, 1e-10
D = 7  # padded to a batch of 8: a second batch of 5 shares its program


@pytest.fixture(scope="module")
def problem():
    return problem_for(registry.get_model("pcvm"))


@pytest.fixture(scope="module")
def ys(problem):
    """D distinct label vectors with both classes: five drawn from the probit model at
    random nonnegative weights (data sets like SBC's), and two with few positives (2 and 4),
    which need more iterations than the others: the batch runs until its slowest member
    stops, and each member must still end where it would alone."""
    Phi = problem.Phi
    N = Phi.shape[0]
    rng = np.random.default_rng(3)
    rows = []
    while len(rows) < D - 2:
        w = np.abs(rng.normal(size=Phi.shape[1]))
        f = rng.normal() + Phi @ w
        y = (rng.standard_normal(N) < f).astype(float)
        if 0 < y.sum() < N and not any(np.array_equal(y, r) for r in rows):
            rows.append(y)
    for n_positive in (2, 4):
        y = np.zeros(N)
        y[rng.choice(N, n_positive, replace=False)] = 1.0
        rows.append(y)
    return np.stack(rows)


def _same_number(a, b, where: str):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, where
    if a.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=where)


def _same_extra(a: dict, b: dict, where: str):
    # "compiled" says whether this call compiled a program: timing, not a result
    assert a.keys() == b.keys(), where
    for k in a.keys() - {"compiled"}:
        x, y = a[k], b[k]
        if isinstance(x, dict):
            assert x == y, f"{where}.{k}"
        elif isinstance(x, str):
            assert x == y, f"{where}.{k}"
        elif k == "surrogate_spec":  # PCVM compares by identity; compare what it holds
            assert (float(x.alpha), x.alpha_bias, x.surrogate) == (float(y.alpha), y.alpha_bias, y.surrogate), where
        else:
            _same_number(x, y, f"{where}.{k}")


def _assert_same_fit(batched, single, where: str):
    assert type(batched) is type(single), where
    assert [(s.name, s.shape, s.support) for s in batched.sites] == \
        [(s.name, s.shape, s.support) for s in single.sites], where
    np.testing.assert_allclose(batched.mean_flat(), single.mean_flat(), rtol=RTOL, atol=ATOL, err_msg=where)
    np.testing.assert_allclose(batched.chol, single.chol, rtol=RTOL, atol=ATOL, err_msg=where)
    np.testing.assert_allclose(batched.cov, single.cov, rtol=RTOL, atol=ATOL, err_msg=where)
    a, b = batched.info, single.info
    assert (a.engine, a.n_iter, a.converged, a.reason, a.objective) == \
        (b.engine, b.n_iter, b.converged, b.reason, b.objective), where
    _same_number(a.trace, b.trace, f"{where} trace")
    _same_extra(a.extra, b.extra, f"{where} extra")


def _assert_batch_is_the_single_fits(fit, spec, Phi, ys, **options):
    batched = fit.many(spec, Phi, ys, **options)
    assert len(batched) == len(ys)
    for i, y in enumerate(ys):
        _assert_same_fit(batched[i], fit(spec, Phi, y, **options), f"data set {i}")
    return batched


def _fails_on_call(monkeypatch, module, name: str, call: int, spoil):
    """Replace ``module.name`` (an engine's post-processing) by itself with its arguments
    spoiled by ``spoil`` on the ``call``-th call only, so that that data set alone fails
    through the engine's own failure path."""
    original = getattr(module, name)
    calls = []

    def patched(*args):
        calls.append(1)
        return original(*(spoil(args) if len(calls) == call else args))

    monkeypatch.setattr(module, name, patched)


def _assert_failures_in_their_slots(fit, spec, Phi, ys, failing: dict):
    """``failing``: slot -> exception type expected there; every other slot is its fit."""
    out = fit.many(spec, Phi, ys)
    assert len(out) == len(ys)
    for i, y in enumerate(ys):
        if i in failing:
            assert isinstance(out[i], failing[i]), (i, out[i])
            assert out[i].__traceback__ is not None  # raised where it happened, then returned
        else:
            _assert_same_fit(out[i], fit(spec, Phi, y), f"data set {i}")
    return out


# --------------------------------------------------------------------------------------
# EP
# --------------------------------------------------------------------------------------
def test_ep_batch_gives_each_data_set_its_own_fit_and_reuses_its_program(problem, ys):
    spec, Phi = problem.spec, problem.Phi
    assert ep.fit.many is ep.fit_many
    assert many_of(registry.get_model("pcvm").engine("ep").fit()) is not None
    batched = _assert_batch_is_the_single_fits(ep.fit, spec, Phi, ys)
    # the few-positives rows really take more sweeps than some others
    assert len({p.info.n_iter for p in batched}) > 1
    # every entry carries its share of the batch's run and compile time
    assert len({(p.info.seconds, p.info.compile_seconds) for p in batched}) == 1
    assert batched[0].info.seconds > 0
    # the sites themselves, which the posterior does not carry
    for i, (result, y) in enumerate(zip(ep.run_many(spec, Phi, ys), ys)):
        single = ep.run(spec, Phi, y)
        for part in ("likelihood_sites", "truncation_sites"):
            for a, b in zip(getattr(result, part), getattr(single, part)):
                _same_number(a, b, f"data set {i} {part}")
        _same_number(result.cavity_mean, single.cavity_mean, f"data set {i} cavity mean")
        assert result.guarded == single.guarded and result.schedule == single.schedule
    # 5 data sets pad to the same batch of 8 as 7: the program is reused
    n_compiled = ep.compile_stats()[0]
    again = ep.fit_many(spec, Phi, ys[2:])
    assert [p.info.compile_seconds for p in again] == [0.0] * 5
    assert ep.compile_stats()[0] == n_compiled
    _assert_same_fit(again[0], batched[2], "data set 2 in a second batch")


def test_ep_batch_honours_the_planted_truncation_defect(problem, ys):
    # a value of the program's inputs (inactive truncation sites), so no new program either
    no_truncation = ep.EPConfig(truncation_sites=False)
    batched = _assert_batch_is_the_single_fits(ep.fit, problem.spec, problem.Phi, ys[:5], config=no_truncation)
    honest = ep.fit_many(problem.spec, problem.Phi, ys[:5])
    assert not np.allclose(batched[0].mean_flat(), honest[0].mean_flat(), atol=1e-3)


def test_ep_batch_of_one_and_failures_in_their_slots(problem, ys, monkeypatch):
    spec, Phi = problem.spec, problem.Phi
    (alone,) = ep.fit_many(spec, Phi, ys[:1])
    _assert_same_fit(alone, ep.fit(spec, Phi, ys[0]), "one data set")
    # a real failure before the program: a data set of one class, which fit refuses (SBC
    # can draw one); the other six still run as one batch
    one_class = ys.copy()
    one_class[1] = 1.0
    out = _assert_failures_in_their_slots(ep.fit, spec, Phi, one_class, {1: ValueError})
    assert "one class" in str(out[1])
    # a failure inside the batch: EP has not been seen to overflow on any label vector of
    # this design (nor of harder ones tried), so the post-processing is told that the 4th
    # data set's state is not finite - the flag a site update that overflowed sets - and
    # must raise the engine's own FloatingPointError for that data set alone
    _fails_on_call(monkeypatch, ep, "_result", 4, lambda a: (a[0]._replace(finite=np.asarray(False)), *a[1:]))
    out = ep.fit_many(spec, Phi, ys)
    monkeypatch.undo()
    assert isinstance(out[3], FloatingPointError) and "non-finite posterior" in str(out[3])
    for i in (0, 1, 2, 4, 5, 6):
        _assert_same_fit(out[i], ep.fit(spec, Phi, ys[i]), f"data set {i}")


def test_ep_batch_raises_what_concerns_the_whole_call(problem, ys):
    with pytest.raises(ValueError, match="surrogate"):
        ep.fit_many(problem.variants["surrogate"], problem.Phi, ys)
    with pytest.raises(TypeError):
        ep.fit_many(object(), problem.Phi, ys)
    assert ep.fit_many(problem.spec, problem.Phi, ys[:0]) == []


# --------------------------------------------------------------------------------------
# Laplace (on the EPCVM surrogate, the spec SBC gives this engine)
# --------------------------------------------------------------------------------------
@pytest.mark.long
def test_laplace_batch_gives_each_data_set_its_own_fit_and_reuses_its_program(problem, ys):
    spec, Phi = problem.variants["surrogate"], problem.Phi
    assert lap.fit.many is lap.fit_many
    assert many_of(registry.get_model("pcvm").engine("laplace").fit()) is not None
    batched = _assert_batch_is_the_single_fits(lap.fit, spec, Phi, ys)
    assert len({p.info.n_iter for p in batched}) > 1
    assert len({(p.info.seconds, p.info.compile_seconds) for p in batched}) == 1
    assert batched[0].info.seconds > 0
    # the probit spec too: the approximation is of the surrogate either way, the sites differ
    _assert_batch_is_the_single_fits(lap.fit, problem.spec, Phi, ys[:3])
    n_compiled = lap.compile_stats()[0]
    again = lap.fit_many(spec, Phi, ys[2:])
    assert [p.info.compile_seconds for p in again] == [0.0] * 5
    assert lap.compile_stats()[0] == n_compiled
    _assert_same_fit(again[0], batched[2], "data set 2 in a second batch")


def test_laplace_batch_of_one_and_failures_in_their_slots(problem, ys, monkeypatch):
    spec, Phi = problem.variants["surrogate"], problem.Phi
    (alone,) = lap.fit_many(spec, Phi, ys[:1])
    _assert_same_fit(alone, lap.fit(spec, Phi, ys[0]), "one data set")
    one_class = ys.copy()
    one_class[5] = 0.0
    _assert_failures_in_their_slots(lap.fit, spec, Phi, one_class, {5: ValueError})
    # a failure inside the batch: as for EP, none found on real label vectors (a design
    # that makes Newton's Cholesky fail makes it fail for every data set), so the 2nd data
    # set's solve is reported as a failed factorization and must raise alone
    def failed_factorization(args):
        res, *rest = args
        return (res._replace(state=res.state._replace(status=np.asarray(lap.CHOLESKY_FAILED))), *rest)

    _fails_on_call(monkeypatch, lap, "_mode_output", 2, failed_factorization)
    out = lap.fit_many(spec, Phi, ys)
    monkeypatch.undo()
    assert isinstance(out[1], FloatingPointError) and "Cholesky" in str(out[1])
    for i in (0, 2, 3, 4, 5, 6):
        _assert_same_fit(out[i], lap.fit(spec, Phi, ys[i]), f"data set {i}")


def test_laplace_batch_raises_what_concerns_the_whole_call(problem, ys):
    with pytest.raises(TypeError):
        lap.fit_many(object(), problem.Phi, ys)
    with pytest.raises(ValueError):  # one alpha per column, and the design has 6
        lap.fit_many(problem.spec.with_params(alpha=np.ones(4)), problem.Phi, ys)
