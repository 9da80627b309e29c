"""NUTS as one compiled program over many data sets (validation/references/nuts_program.py)
and SBC of NUTS on it (validation/runs/sbc.py, ``simulate_batch``).

The program's draws are not MCMC's (another random stream, and a vectorized batch rounds
differently), so they are checked for what they must share with it: the same posterior
(means within Monte Carlo error of NumPyro's own MCMC's), the same draws for the same keys
whatever the batch, and SBC's bookkeeping (a resumed run recomputes exactly the missing
simulations, with the ranks they had)."""
from __future__ import annotations

import json
import os
from dataclasses import replace

import jax
import numpy as np
import pytest

import zoo  # noqa: F401  (float64, host devices)
from zoo.validation.records import registry
from zoo.validation.references import ReferenceConfig, run_reference
from zoo.validation.references import nuts_program as P
from zoo.validation.references.nuts import nuts_posteriors
from zoo.validation.runs import sbc as S
from zoo.validation.runs import sbc_simulation

SHORT = ReferenceConfig(num_warmup=150, num_samples=150, seed=0)


@pytest.fixture(scope="module")
def problem():
    record = registry.get_model("pcvm")
    prob = sbc_simulation.problem_for(record)
    ys = []
    for i in range(3):
        _, y, _ = sbc_simulation.draw_from_prior(prob.spec, prob.Phi, jax.random.fold_in(jax.random.PRNGKey(5), i))
        ys.append(y)
    keys = np.stack([P.as_numpy_key(jax.random.PRNGKey(100 + i)) for i in range(3)])
    return prob, np.stack(ys), keys


@pytest.mark.long
def test_the_program_s_posterior_is_numpyro_mcmc_s(problem):
    # one data set, 4 chains x 1000 draws each way: every coordinate's mean from the
    # program (as run_reference runs it) against NumPyro's own MCMC with NUTS - the
    # independent implementation it replaces - within 4.5 Monte Carlo standard errors of
    # the difference (each side's sd / sqrt(its bulk ESS)); 4.5 keeps a family of 7
    # coordinates at a false-alarm rate below 1e-4 under independence
    from numpyro.infer import MCMC, NUTS

    from zoo.validation.base import arviz_adapter as adapter

    prob, ys, keys = problem
    config = ReferenceConfig(num_warmup=1000, num_samples=1000, seed=3, max_doublings=0)
    ours = run_reference(prob.spec, prob.Phi, ys[0], config=config)
    mcmc = MCMC(NUTS(prob.spec.model, target_accept_prob=config.target_accept, max_tree_depth=config.max_tree_depth),
                num_warmup=1000, num_samples=1000, num_chains=4, chain_method="parallel", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(3), prob.Phi, y=ys[0])
    sites = ours.posterior.sites
    theirs = {s.name: np.asarray(v) for s, v in ((s, mcmc.get_samples(group_by_chain=True)[s.name]) for s in sites)}
    assert ours.certified, ours.failures

    def mean_se(draws):
        flat = np.concatenate([v.reshape(v.shape[0] * v.shape[1], -1) for v in draws.values()], axis=1)
        idata = adapter.draws_to_idata(draws, sites)
        ess = np.concatenate([np.ravel(v["ess_bulk"]) for v in
                              adapter.summary_diagnostics(idata, sites=sites)["per_site"].values()])
        return flat.mean(0), flat.std(0) / np.sqrt(ess)

    (m1, se1), (m2, se2) = mean_se(ours.posterior.draws), mean_se(theirs)
    z = np.abs(m1 - m2) / np.hypot(se1, se2)
    assert z.max() < 4.5, z
    # and the batched path of SBC (nuts_posteriors) on the same data set and settings
    batched, = nuts_posteriors(prob.spec, prob.Phi, ys[:1], keys[:1], config=config)
    assert batched.info.converged, batched.info.reason
    m3, se3 = mean_se(batched.draws)
    assert (np.abs(m3 - m2) / np.hypot(se3, se2)).max() < 4.5
    # the program keeps the sites MCMC keeps, with the reference's shapes
    assert {k: v.shape for k, v in batched.draws.items()} == {k: v.shape for k, v in theirs.items()}


# the vectorized layout is the accelerator's; on the CPU its compilation alone takes about a
# minute, so its case is in the slow tier; the parallel layout's (about 15 s) in the long tier
@pytest.mark.parametrize("layout", [pytest.param("parallel", marks=pytest.mark.long),
                                    pytest.param("vectorized", marks=pytest.mark.slow)])
def test_the_same_keys_give_the_same_draws_in_any_batch(problem, layout):
    prob, ys, keys = problem
    if layout == "parallel" and jax.local_device_count() < SHORT.num_chains:
        pytest.skip("the parallel layout needs a CPU device per chain; this process has fewer (JAX started before `import zoo` could ask for them, or ZOO_HOST_DEVICES=1), so the zoo runs the sequential layout")
    alone = P.sample_many(prob.spec, prob.Phi, ys[2:], keys[2:], SHORT, layout=layout)
    together = P.sample_many(prob.spec, prob.Phi, ys, keys, SHORT, batch=3, layout=layout)
    for site in alone[0][0]:
        np.testing.assert_array_equal(alone[0][0][site], together[2][0][site])
    # and different keys give different chains
    assert not np.array_equal(together[0][0]["w"], together[1][0]["w"])


def test_the_layout_follows_the_device(monkeypatch):
    monkeypatch.setattr(P.jax, "default_backend", lambda: "gpu")
    assert P.default_layout(4) == "vectorized"
    monkeypatch.setattr(P.jax, "default_backend", lambda: "cpu")
    monkeypatch.setattr(P.jax, "local_device_count", lambda: 4)
    assert P.default_layout(4) == "parallel"
    monkeypatch.setattr(P.jax, "local_device_count", lambda: 1)
    assert P.default_layout(4) == "sequential"


def test_bad_shapes_are_named(problem):
    prob, ys, keys = problem
    with pytest.raises(ValueError, match="ys \\(D, n\\) and keys \\(D, 2\\)"):
        P.sample_many(prob.spec, prob.Phi, ys[:, :10], keys, SHORT)


@pytest.mark.long
def test_sbc_of_nuts_runs_batched_and_resumes_exactly(tmp_path):
    settings = sbc_simulation.SBCSettings(n_sims=12, n_draws=19, reference_draws=100)
    first = S.run_sbc(S.SBCConfig("pcvm", "nuts", settings=settings), out_dir=tmp_path)
    assert first.counts.ok == 12, first
    folder = first.folder
    stored = {f: json.load(open(os.path.join(folder, f))) for f in sorted(os.listdir(folder))}
    assert {r["layout"] for r in stored.values()} == {P.default_layout(4)}
    # three simulations lost: the rerun computes exactly those, and their ranks are the
    # ones they had (each simulation's chains are keyed by its own key, not its batch)
    lost = sorted(stored)[3:6]
    for f in lost:
        os.remove(os.path.join(folder, f))
    again = S.run_sbc(S.SBCConfig("pcvm", "nuts", settings=settings), out_dir=tmp_path)
    assert again.reused == 9
    for f in lost:
        redone = json.load(open(os.path.join(folder, f)))
        assert redone["ranks"] == stored[f]["ranks"]
    assert again.ranks == first.ranks


def test_a_failing_batch_fails_each_of_its_simulations_with_the_reason():
    record = registry.get_model("pcvm")
    prob = sbc_simulation.problem_for(record)

    def broken(spec, Phi, ys, keys):
        raise FloatingPointError("the program overflowed")

    out = sbc_simulation.simulate_batch(prob.spec, prob.Phi, prob.Phi_new, broken, [0, 1, 2], sbc_simulation.SBCSettings(n_sims=10))
    assert [r["index"] for r in out] == [0, 1, 2]
    assert all(r["status"] == "failed" and "FloatingPointError: the program overflowed" in r["message"] for r in out)


def test_the_batched_path_is_nuts_only():
    record = registry.get_model("ggsm-probit")
    settings = sbc_simulation.SBCSettings()
    assert sbc_simulation.resolve_engine(record, "nuts", settings).batched is not None
    assert sbc_simulation.resolve_engine(record, "slice-gibbs", settings).batched is None
    assert sbc_simulation.resolve_engine(record, "mm-laplace", settings).batched is None


def test_the_batched_nuts_keeps_the_sbc_reference_settings():
    record = registry.get_model("gig-logistic")
    resolved = sbc_simulation.resolve_engine(record, "nuts", sbc_simulation.SBCSettings(reference_draws=200))
    config = resolved.batched.keywords["config"]
    assert config == resolved.fit.keywords["reference"]
    assert (config.target_accept, config.num_warmup, config.num_samples) == (0.95, 200, 200)
    assert replace(config, max_doublings=0) == config
