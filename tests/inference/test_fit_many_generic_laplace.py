"""The batched form of the generic Laplace engine (``generic_laplace.fit_many``, also
``fit.many``): entry i is what ``fit`` returns for the i-th label vector, or the exception
it raises, on the SBC problem shapes where SBC calls it."""
from __future__ import annotations

import numpy as np
import pytest

from zoo.inference import generic_laplace as gl
from zoo.inference.contracts import many_of
from zoo.inference.posterior import ApproximationFailed
from zoo.validation.records import registry
from zoo.validation.runs.sbc_simulation import problem_for

# Why round-off tolerances: the batched program runs the same operations as fit's, from
# the same start (NumPyro's initialization, vmapped, picks the same candidate), and the
# draws use the same z; vmap only lets XLA batch the Cholesky factors, solves and
# reductions, which may sum in another order. Newton's method does not amplify such
# differences at a well-conditioned mode (observed: 1e-15 to 1e-10 relative), while any
# real difference - another start, one Newton step more or less, other z - moves the
# draws by 1e-3 or more.
RTOL, ATOL = 1e-8, 1e-10
D = 5


def _labels(n: int, count: int, seed: int) -> np.ndarray:
    """count distinct 0/1 label vectors of length n, each with both classes."""
    rng = np.random.default_rng(seed)
    ys = (rng.random((count, n)) < 0.5).astype(float)
    assert len({tuple(y) for y in ys}) == count and np.all((ys.min(1) == 0) & (ys.max(1) == 1))
    return ys


@pytest.fixture(scope="module", params=["pcvm", "gig-logistic"])
def batch(request):
    """(spec, Phi, ys, fit_many's entries, fit's result or exception per row) on the
    model's SBC problem shape."""
    problem = problem_for(registry.get_model(request.param))
    ys = _labels(problem.Phi.shape[0], D, seed=1)
    many = gl.fit_many(problem.spec, problem.Phi, ys)
    alone = []
    for y in ys:
        try:
            alone.append(gl.fit(problem.spec, problem.Phi, y))
        except ApproximationFailed as err:
            alone.append(err)
    return problem.spec, problem.Phi, ys, many, alone


def _assert_same_fit(batched, single):
    assert batched.info.converged == single.info.converged
    assert batched.info.n_iter == single.info.n_iter
    assert batched.draws.keys() == single.draws.keys()
    for site in single.draws:
        np.testing.assert_allclose(batched.draws[site], single.draws[site], rtol=RTOL, atol=ATOL, err_msg=site)
    np.testing.assert_allclose(batched.info.extra["mode"], single.info.extra["mode"], rtol=RTOL, atol=ATOL)


@pytest.mark.long
def test_each_entry_is_the_fit_of_its_own_data_set(batch):
    spec, Phi, ys, many, alone = batch
    assert len(many) == D
    assert not any(isinstance(a, Exception) for a in alone), "every data set here has a Laplace approximation"
    for batched, single in zip(many, alone):
        _assert_same_fit(batched, single)
    # distinct data sets, distinct posteriors: the entries are not one fit repeated
    modes = np.array([m.info.extra["mode"] for m in many])
    assert np.min(np.ptp(modes, axis=0)) > 1e-3
    # the batch's compilation and run time are shared evenly, the draws are each entry's own
    assert all(m.info.seconds > 0 for m in many)
    assert len({m.info.compile_seconds for m in many}) == 1


# on PCVM only: another model would need its own programs for the smaller max_iter
@pytest.mark.parametrize("batch", ["pcvm"], indirect=True)
@pytest.mark.long
def test_a_failing_data_set_is_its_own_entry_and_the_others_fit(batch):
    """A real failure, no patching: max_iter set to the fewest Newton steps any data set
    needs, so those that need more stop at the cap (ApproximationFailed) while the others
    converge on that very step."""
    spec, Phi, ys, _, alone = batch
    steps = np.array([a.info.n_iter for a in alone])
    assert steps.min() < steps.max(), "these labels should need different numbers of Newton steps"
    config = gl.GenericLaplaceConfig(max_iter=int(steps.min()))
    many = gl.fit_many(spec, Phi, ys, config=config)
    for i, entry in enumerate(many):
        if steps[i] > config.max_iter:
            assert isinstance(entry, ApproximationFailed)
            assert f"did not converge within max_iter = {config.max_iter} steps" in str(entry)
            with pytest.raises(ApproximationFailed, match="did not converge within max_iter"):
                gl.fit(spec, Phi, ys[i], config=config)
        else:
            _assert_same_fit(entry, gl.fit(spec, Phi, ys[i], config=config))


@pytest.mark.long
def test_another_batch_size_in_the_same_bucket_compiles_nothing(batch):
    spec, Phi, ys, _, _ = batch
    more = np.vstack([ys, _labels(Phi.shape[0], 2, seed=2)])  # 7 data sets: the bucket of 5 (8)
    compiled_before = gl._PROGRAMS.stats()[0]
    many = gl.fit_many(spec, Phi, more)
    assert gl._PROGRAMS.stats()[0] == compiled_before
    assert all(m.info.compile_seconds == 0.0 for m in many)
    _assert_same_fit(many[-1], gl.fit(spec, Phi, more[-1]))


@pytest.mark.long
def test_refused_labels_are_their_row_s_entry_and_whole_call_errors_raise(batch):
    spec, Phi, ys, _, alone = batch
    # the five good rows stay in the bucket of the fixture's batch: nothing compiles
    with_one_class = np.insert(ys, 2, np.ones(Phi.shape[0]), axis=0)
    many = gl.fit_many(spec, Phi, with_one_class)
    with pytest.raises(ValueError) as refused:
        gl.fit(spec, Phi, with_one_class[2])
    assert isinstance(many[2], ValueError) and str(many[2]) == str(refused.value)
    for batched, single in zip(many[:2] + many[3:], alone):
        _assert_same_fit(batched, single)
    with pytest.raises(TypeError, match="GenericLaplaceConfig"):
        gl.fit_many(spec, Phi, ys, config={"max_iter": 5})
    with pytest.raises(ValueError, match="ys must be a table"):
        gl.fit_many(spec, Phi, ys[0])


def test_the_registry_entry_carries_the_batched_form():
    fit = registry.get_model("pcvm").engine("auto-laplace").fit()
    assert many_of(fit) is gl.fit_many
    assert gl.fit.many is gl.fit_many


def test_spec_params_give_the_same_spec_object_so_its_programs_serve_the_next_call():
    """with_params makes a new spec each time, and programs are cached per spec object: a
    registry entry with spec_params (gridRVM's prior variants) would compile on every call,
    fit's or fit_many's, without one derived spec kept per (spec, spec_params)."""
    spec = problem_for(registry.get_model("grid-rvm")).spec
    derived, _ = gl._settings(spec, None, (("prior", "rvm"),))
    assert derived.prior == "rvm" and derived is not spec
    assert gl._settings(spec, None, (("prior", "rvm"),))[0] is derived
    assert gl._settings(spec, None, (("prior", "s-grid"),))[0] is not derived
