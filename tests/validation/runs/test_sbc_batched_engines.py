"""SBC and the defect battery with an engine's batched form (``fit.many``): the plumbing.

The engines' own ``fit.many`` (one vmapped program) are tested against their ``fit`` in
tests/inference/test_fit_many_*.py; here the batched form is a plain loop over ``fit``, so that what
is tested is what SBC does with it: the same simulations and ranks as one fit at a time,
chunks of :data:`SIMS_PER_ENGINE_BATCH`, a failed entry failing its own simulation only,
the user's return values checked entry by entry, and defects and registry options carried
into the batched form."""
from __future__ import annotations


import numpy as np
import pytest

from zoo.inference import expectation_propagation
from zoo.inference.contracts import EngineEntry, EngineReturnError, checked_fit, many_of
from zoo.validation.judge.defects import config_defect, posterior_defect
from zoo.validation.records import registry
from zoo.validation.runs import sbc as S
from zoo.validation.runs import sbc_simulation

CALLS: list[int] = []


def ep_one(spec, Phi, y, *, config=None):
    return expectation_propagation.fit(spec, Phi, y, config=config)


def _ep_loop(spec, Phi, ys, *, config=None):
    CALLS.append(len(ys))
    return [ep_one(spec, Phi, y, config=config) for y in ys]


def ep_many(spec, Phi, y, *, config=None):
    return ep_one(spec, Phi, y, config=config)


ep_many.many = _ep_loop


def _ranks(summary_folder, n):
    import json
    import os

    out = {}
    for i in range(n):
        with open(os.path.join(summary_folder, f"{i:05d}.json")) as fh:
            r = json.load(fh)
        out[i] = (r["status"], r.get("ranks"))
    return out


@pytest.mark.long
def test_a_batched_form_gives_the_simulations_of_one_fit_at_a_time(tmp_path):
    settings = sbc_simulation.SBCSettings(n_sims=70)
    CALLS.clear()
    one = S.run_sbc(S.SBCConfig("pcvm", ep_one, settings=settings), out_dir=tmp_path / "one")
    batched = S.run_sbc(S.SBCConfig("pcvm", ep_many, settings=settings), out_dir=tmp_path / "many")
    # chunks of 64 and the rest, each one call of fit.many
    assert CALLS == [S.SIMS_PER_ENGINE_BATCH, 70 - S.SIMS_PER_ENGINE_BATCH]
    # the loop inside ep_many is ep_one: every simulation's ranks are the same numbers
    assert _ranks(one.folder, 70) == _ranks(batched.folder, 70)
    assert one.status == batched.status


@pytest.mark.long
def test_a_failed_entry_fails_its_own_simulation_and_a_bad_batch_fails_each(tmp_path):
    def many_with_a_failure(spec, Phi, ys, *, config=None):
        out = _ep_loop(spec, Phi, ys, config=config)
        out[3] = FloatingPointError("EP produced a non-finite posterior")
        return out

    def fit(spec, Phi, y, *, config=None):
        return ep_one(spec, Phi, y, config=config)

    fit.many = many_with_a_failure
    summary = S.run_sbc(S.SBCConfig("pcvm", fit, settings=sbc_simulation.SBCSettings(n_sims=10)),
                        out_dir=tmp_path / "a")
    results = _ranks(summary.folder, 10)
    assert [i for i, (status, _) in results.items() if status == "failed"] == [3]

    def many_too_short(spec, Phi, ys, *, config=None):
        return _ep_loop(spec, Phi, ys[:-1], config=config)

    fit.many = many_too_short
    summary = S.run_sbc(S.SBCConfig("pcvm", fit, settings=sbc_simulation.SBCSettings(n_sims=10)),
                        out_dir=tmp_path / "b")
    assert all(status == "failed" for status, _ in _ranks(summary.folder, 10).values())


def test_a_users_batched_form_is_checked_entry_by_entry():
    record = registry.get_model("pcvm")
    problem = sbc_simulation.problem_for(record)
    ys = np.stack([np.arange(problem.Phi.shape[0]) % 2, np.arange(problem.Phi.shape[0]) % 3 == 0]).astype(float)

    def fit(spec, Phi, y, *, config=None):
        return ep_one(spec, Phi, y)

    fit.many = lambda spec, Phi, ys, *, config=None: [ep_one(spec, Phi, ys[0]), {"w": 0}]
    checked = checked_fit(fit, "mine")
    first, second = checked.many(problem.spec, problem.Phi, ys)
    assert first.kind == "gaussian"
    assert isinstance(second, EngineReturnError) and "mine returned builtins.dict" in str(second)

    def raising(spec, Phi, ys, *, config=None):
        raise RuntimeError("out of\nmemory")

    fit.many = raising
    out = checked_fit(fit, "mine").many(problem.spec, problem.Phi, ys)
    assert len(out) == 2 and all(str(e) == "mine.many raised RuntimeError: out of memory" for e in out)


def test_defects_and_registry_options_reach_the_batched_form():
    record = registry.get_model("pcvm")
    problem = sbc_simulation.problem_for(record)
    ys = np.stack([np.arange(problem.Phi.shape[0]) % 2] * 2).astype(float)
    shrunk = posterior_defect(cov_factor=0.5)(ep_many)
    broken_one = shrunk(problem.spec, problem.Phi, ys[0])
    broken_many = many_of(shrunk)(problem.spec, problem.Phi, ys)
    np.testing.assert_allclose(broken_many[1].cov, broken_one.cov, rtol=1e-12)
    np.testing.assert_allclose(broken_one.cov, 0.5 * ep_one(problem.spec, problem.Phi, ys[0]).cov, rtol=1e-12)

    seen = []

    def fit(spec, Phi, y, *, config=None, rule="a"):
        seen.append(("fit", rule, config))

    def many(spec, Phi, ys, *, config=None, rule="a"):
        seen.append(("many", rule, config))
        return []

    fit.many = many
    entry = EngineEntry("x", "gaussian", "a test engine", fit, options=(("rule", "b"),))
    many_of(entry.fit())(None, None, [])
    assert seen == [("many", "b", None)]
    undamped = config_defect("zoo.inference.expectation_propagation:EPConfig", damping=1.0)(entry.fit())
    many_of(undamped)(None, None, [])
    assert seen[-1][0] == "many" and seen[-1][2].damping == 1.0


def test_registry_engines_with_a_loop_have_a_batched_form_and_auto_keeps_them_on_the_cpu():
    record = registry.get_model("pcvm")
    ep = sbc_simulation.resolve_engine(record, "ep")
    nuts = sbc_simulation.resolve_engine(record, "nuts")
    assert ep.batched is not None and not ep.accelerator_pays
    assert nuts.batched is not None and nuts.accelerator_pays
    assert S.sims_per_batch(ep) == S.SIMS_PER_ENGINE_BATCH
    # an engine without one (EM is a point estimate; SLA's loop is Python) runs one at a time
    bblr = registry.get_model("bblr")
    assert sbc_simulation.resolve_engine(bblr, "laplace").batched is None


# Laplace's vmapped loop in the default tier, EP's in the long tier; the others' batched forms
# run the same check in the slow tier, which keeps the default tier inside its budget
@pytest.mark.parametrize("model, engine", [
    pytest.param("pcvm", "ep", marks=pytest.mark.long), ("pcvm", "laplace"),
    pytest.param("gig-logistic", "vb", marks=pytest.mark.slow),
    pytest.param("grid-rvm", "vb", marks=pytest.mark.slow),
    pytest.param("grid-rvm", "auto-laplace-s-grid", marks=pytest.mark.slow)])
def test_an_engines_vmapped_form_gives_its_simulations(model, engine, tmp_path):
    """SBC with the engine's own vmapped fit.many against one fit a time: the same status and
    the same ranks for every simulation (the posteriors agree to round-off, far inside the
    spacing of the ranked draws)."""
    record = registry.get_model(model)
    fit = record.engine(engine).fit()
    assert many_of(fit) is not None

    def one_at_a_time(spec, Phi, y, *, config=None):
        return fit(spec, Phi, y, config=config)

    settings = sbc_simulation.SBCSettings(n_sims=12)
    variant = record.engine(engine).variant
    a = S.run_sbc(S.SBCConfig(model, one_at_a_time, settings=settings, variant=variant), out_dir=tmp_path / "one")
    b = S.run_sbc(S.SBCConfig(model, engine, settings=settings), out_dir=tmp_path / "many")
    assert _ranks(a.folder, 12) == _ranks(b.folder, 12)


@pytest.mark.parametrize("model", ["pcvm", "ggsm-probit"])
@pytest.mark.long
def test_many_simulations_start_as_each_would_alone(model, monkeypatch):
    """The batched prior draws (one program for the first round of every simulation) give
    each simulation the truth, labels, redraws and key it gets alone; one whose first round
    has no usable draw (forced here) is drawn alone from its prior key, with the same result."""
    record = registry.get_model(model)
    problem = sbc_simulation.problem_for(record)
    settings = sbc_simulation.SBCSettings(n_sims=10, seed=7)
    indices = [0, 3, 4, 11, 12]
    first = sbc_simulation._first_accepted
    calls = []

    def refuse_the_third(*args):
        calls.append(1)
        return None if len(calls) == 3 else first(*args)

    monkeypatch.setattr(sbc_simulation, "_first_accepted", refuse_the_third)
    starts = sbc_simulation._simulation_starts(problem.spec, problem.Phi, indices, settings)
    monkeypatch.setattr(sbc_simulation, "_first_accepted", first)
    assert len(calls) == len(indices) + 1  # the refused one went through draw_from_prior
    for index in indices:
        key, truth, y, redraws = sbc_simulation._simulation_start(problem.spec, problem.Phi, index, settings)
        b_key, b_truth, b_y, b_redraws = starts[index]
        np.testing.assert_array_equal(np.asarray(b_key), np.asarray(key))
        np.testing.assert_array_equal(b_y, y)
        assert b_redraws == redraws and sorted(b_truth) == sorted(truth)
        for site in truth:
            np.testing.assert_allclose(b_truth[site], truth[site], rtol=1e-14, atol=0)
