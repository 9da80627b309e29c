"""Simulation-based calibration runs (validation/runs/sbc.py, sbc_simulation.py): a run's
verdict from its simulations, the prior simulation (factor terms included), resumable runs,
and `zoo sbc` with a user's own engine. The statistics of the ranks (the uniformity test,
its power) are tested in tests/validation/judge/test_rank_calibration.py.

Statistical checks use fixed seeds; their tolerances come from the binomial Monte Carlo
error of the number of replicates, stated where used.
"""
from __future__ import annotations

import dataclasses
import json
import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.cli import main
from zoo.models.pcvm import PCVM
from zoo.validation.runs.sbc_result import SBCResult
from zoo.validation.records import registry
from zoo.validation.report import sbc_report
from zoo.validation.runs import sbc as S
from zoo.validation.judge import rank_uniformity
from zoo.validation.judge import rank_power
from zoo.validation.judge import sbc_verdict
from zoo.validation.runs import sbc_simulation


def test_too_few_simulations_to_call_is_not_calibrated():
    # the user's report: an engine with covariance x0.8 and every mean +0.3 sd (the
    # defect of examples/biased_ep.py, planted here in all K = 11 quantities as that
    # engine has it) stayed inside its bands at 10 simulations and was called
    # "calibrated". At S = 10 no sd error of one quantity is detectable 80% of the time
    # and only a mean 1.4 sds off is, so the run is too few to call; at S = 100 the same
    # engine is flagged (every quantity 0.3 sd off: caught in nearly every run at this
    # size; the seed fixes which)
    def run(n_sims, seed):
        rng = np.random.default_rng(seed)
        ranks = rank_uniformity.conjugate_normal_ranks(rng, n_sims, 99, 11, sd_factor=0.8 ** 0.5, shift=0.3)
        results = [{"index": i, "status": "ok", "ranks": [int(v) for v in r], "n_draws": 99, "redraws": 0}
                   for i, r in enumerate(ranks)]
        return S.summarize(results, [f"w[{k}]" for k in range(8)] + ["f_new[0]", "f_new[1]", "log_lik"],
                           sbc_simulation.SBCSettings(n_sims=n_sims, seed=seed), model="(planted)", engine="(planted)")

    small = run(10, 0)
    assert small.uniformity.status == rank_uniformity.CALIBRATED  # inside every band ...
    assert small.status == sbc_verdict.TOO_FEW  # ... and still not called calibrated
    assert small.reason.startswith(sbc_verdict.TOO_FEW) and "calibrated:" not in small.reason
    assert not small.power.useful and small.power.sd_factor_narrow is None
    # the reason says how many would do: the smallest S of the grid with useful power
    needed = small.power.simulations_needed
    assert needed == rank_power.simulations_needed(99, 11).n_sims and needed in rank_power.SIMS_GRID and needed > 10
    assert f"{needed} simulations would be enough" in small.reason
    assert small.reason.endswith(small.power.line)
    big = run(100, 0)
    assert big.status == rank_uniformity.MISCALIBRATED and big.power.useful
    assert "posterior shifted up" in big.reason
    # a detection stands at any S: the same defect flagged at S = 10 (at a seed where a
    # band is left) is miscalibrated, not too few
    flagged = next(s for s in (run(10, seed) for seed in range(1, 40)) if s.uniformity.status == rank_uniformity.MISCALIBRATED)
    assert flagged.status == rank_uniformity.MISCALIBRATED


def test_the_glossary_explains_every_ranked_quantity():
    names = ["b", "w[0]", "w[1]", "f_new[0]", "f_new[1]", "log_lik"]
    glossary = S.quantity_glossary(names)
    assert set(glossary) == {"b", "w[i]", "f_new[k]", "log_lik"}
    assert "linear predictor" in glossary["f_new[k]"] and "held-out" in glossary["f_new[k]"]
    assert "log-likelihood of the simulated data (a classifier's labels" in glossary["log_lik"]


def test_factor_terms_are_the_rejection_weights_of_the_prior():
    # PCVM's EPCVM surrogate has a factor term (its smooth indicator); ancestral simulation
    # ignores it, and SBC accepts each draw with probability exp(term) instead
    spec = PCVM(alpha=1.0, alpha_bias=1.0, surrogate=True)
    Phi, _ = sbc_simulation.rbf_design(20, 3, 1)
    w = jnp.array([[0.5, -0.2, 1.0], [-1.0, 0.1, 0.0]])
    draws = {"b": jnp.zeros(2), "w": w, "y": jnp.ones((2, 20))}
    got = sbc_simulation._factor_log_weights(spec, Phi, draws, "y")
    expected = np.asarray(jax.nn.log_sigmoid(spec.indicator_sharpness * w).sum(1))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert np.all(sbc_simulation._factor_log_weights(PCVM(), Phi, {"b": jnp.zeros(2), "w": jnp.abs(w), "y": draws["y"]}, "y") == 0)


@pytest.mark.long
def test_prior_draws_have_both_classes_and_follow_the_truncation():
    spec = PCVM(alpha=1.0, alpha_bias=1.0)
    Phi, _ = sbc_simulation.rbf_design(30, 4, 1)
    for i in range(5):
        truth, y, _ = sbc_simulation.draw_from_prior(spec, Phi, jax.random.PRNGKey(i))
        assert 0 < y.mean() < 1 and set(np.unique(y)) <= {0.0, 1.0}
        assert np.all(truth["w"] >= 0) and truth["w"].shape == (4,)


def test_point_estimates_and_other_models_get_a_reason_not_ranks():
    em = S.run_sbc(S.SBCConfig("pcvm", "em", settings=sbc_simulation.SBCSettings(n_sims=10)))
    assert em.status == sbc_verdict.NOT_APPLICABLE and "point estimate" in em.reason
    lap = S.run_sbc(S.SBCConfig("ggsm-probit", "lap", settings=sbc_simulation.SBCSettings(n_sims=10)))
    assert lap.status == sbc_verdict.NOT_APPLICABLE and "another model" in lap.reason


def test_bad_engines_and_settings_are_named():
    record = registry.get_model("pcvm")
    with pytest.raises(ValueError, match="no engine or reference sampler 'nope'"):
        sbc_simulation.resolve_engine(record, "nope")
    with pytest.raises(ValueError, match="cannot import"):
        sbc_simulation.resolve_engine(record, "no_such_module_xyz:fit")
    with pytest.raises(ValueError, match="contract"):
        sbc_simulation.resolve_engine(record, "os.path:join")
    with pytest.raises(ValueError, match="at least 10 simulations"):
        sbc_simulation.SBCSettings(n_sims=3)


@pytest.mark.long
def test_a_run_is_stored_per_simulation_and_resumes(tmp_path):
    settings = sbc_simulation.SBCSettings(n_sims=12, n_draws=19, seed=3)
    kwargs = {"n": 30, "n_basis": 3}
    first = S.run_sbc(S.SBCConfig("pcvm", "ep", settings=settings, problem=kwargs), out_dir=tmp_path)
    assert first.counts.ok == 12 and first.reused == 0
    # what a user reads off the summary: one rank in 0..L per simulation and quantity ...
    names = [q.name for q in first.uniformity.quantities]
    ranks = np.asarray(first.ranks)
    assert ranks.shape == (12, len(names)) and ranks.min() >= 0 and ranks.max() <= 19
    # ... a verdict that is the uniformity test's on exactly those ranks ...
    test = rank_uniformity.uniformity(ranks, 19, names=names, seed=3)
    assert test == first.uniformity  # the result keeps the judge's view
    power = rank_power.detectable_defects(12, 19, test.n_quantities)
    expected = (rank_uniformity.MISCALIBRATED if test.status == rank_uniformity.MISCALIBRATED
                else rank_uniformity.CALIBRATED if power.useful else sbc_verdict.TOO_FEW)
    assert first.status == expected
    # ... and the power line of this S, L and K, as a direct computation gives it
    assert first.power == dataclasses.replace(power, simulations_needed=first.power.simulations_needed)
    assert first.reason.endswith(power.line)
    assert set(first.glossary) >= {"f_new[k]", "log_lik"}
    files = sorted(f for f in os.listdir(first.folder) if f.endswith(".json"))
    assert len(files) == 12
    # a killed run leaves some simulations finished: the rerun does only the rest and
    # gives the same ranks (each simulation's keys depend on its index alone)
    for f in files[::3]:
        os.remove(os.path.join(first.folder, f))
    again = S.run_sbc(S.SBCConfig("pcvm", "ep", settings=settings, problem=kwargs), out_dir=tmp_path)
    assert again.reused == 8
    assert again.ranks == first.ranks
    # the plot draws on a canvas of its own: the user's pyplot backend stays what it was
    import matplotlib

    backend = matplotlib.get_backend()
    png = sbc_report.plot_sbc(again, tmp_path / "sbc.png")
    assert os.path.getsize(png) > 1000 and matplotlib.get_backend() == backend


USER_ENGINE = textwrap.dedent('''
    """A user's engines for `zoo sbc`: PCVM's EP, and EP with its covariance shrunk tenfold."""
    from dataclasses import replace

    from zoo.inference import expectation_propagation as ep


    def fit(spec, Phi, y, *, config=None):
        return ep.fit(spec, Phi, y, config=config)


    def overconfident(spec, Phi, y, *, config=None):
        post = ep.fit(spec, Phi, y, config=config)
        return replace(post, chol=post.chol / 10 ** 0.5)


    def not_an_engine(spec, Phi):
        return None
''')


@pytest.mark.long
def test_zoo_sbc_runs_a_users_engine_from_module_and_function(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_engines.py").write_text(USER_ENGINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "sbc"
    code = main(["sbc", "--model", "pcvm", "--engine", "my_engines:overconfident", "--sims", "40", "--draws", "39",
                 "--n", "40", "--n-basis", "3", "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0
    assert "pcvm / my_engines:overconfident: miscalibrated" in text and "too narrow" in text
    # the run's power closes its line, and the ranked quantities are explained once
    assert "with 40 simulations this test detects (80% of the time)" in text
    assert text.count("f_new[k]: the linear predictor") == 1 and "log_lik: the log-likelihood" in text
    folder = out / "pcvm" / "my_engines_overconfident"
    # the stored sbc.json reads back as the result the run returned
    summary = SBCResult.from_json(json.loads((folder / "sbc.json").read_text()))
    assert summary.status == rank_uniformity.MISCALIBRATED and summary.counts.ok == 40
    assert (folder / "sbc.png").stat().st_size > 1000
    assert "my_engines:overconfident" in (out / "pcvm" / "sbc.md").read_text()
    code = main(["sbc", "--model", "pcvm", "--engine", "my_engines:not_an_engine", "--sims", "10",
                 "--out", str(out), "--no-progress"])
    assert code == 2 and "does not keep the engine contract" in capsys.readouterr().err


def _every_engine_and_sampler():
    # samplers on the model and on each of its variants (grid-rvm's grid-gibbs@s-grid)
    return [(m, e) for m in registry.model_names() for e in sbc_simulation.sbc_names(registry.get_model(m))]


#: (model, engine) whose seed-0 run of 100 simulations left a band by more than its half-width
#: (benchmarks/results/sbc_all.json: excess 1.4-10.3; gig-logistic's and grid-rvm's auto-laplace were
#: named laplace when measured)
CLEARLY_MISCALIBRATED = {("pcvm", "auto-laplace"), ("ggsm-probit", "mm-laplace"), ("gig-logistic", "vb"),
                         ("gig-logistic", "auto-laplace"), ("grid-rvm", "vb"), ("grid-rvm", "vb-rvm"),
                         ("grid-rvm", "auto-laplace"), ("bblr", "laplace"), ("bblr", "auto-laplace")}


@pytest.mark.slow
@pytest.mark.parametrize("model, engine", _every_engine_and_sampler())
def test_every_engine_gets_an_sbc_verdict_and_every_reference_sampler_is_calibrated(model, engine, tmp_path):
    # 100 simulations each (benchmarks/sbc_all.py tables the same runs). An engine may be
    # miscalibrated - that is a finding, reported in docs/validation.md - but it must get a verdict
    # or a stated reason. The reference samplers are our ground truth: they must pass. One
    # run calls a calibrated sampler miscalibrated at the stated 5% rate, and five samplers
    # at seed 0 would fail this test about one time in four (GGSM's NUTS and slice-Gibbs
    # share seed 0's simulated truths and both flag w[5] there); so a sampler fails only
    # when a second, independent run (seed 1) flags it too: false alarms 0.25% a sampler,
    # while every planted defect of the battery is caught at S = 100 in >= 96% of runs.
    summary = S.run_sbc(S.SBCConfig(model, engine, settings=sbc_simulation.SBCSettings(n_sims=100)), out_dir=tmp_path)
    # 100 simulations have useful power for every model's K (10-16 quantities; at K = 10
    # and 30 a mean 0.44 and 0.48 sd off, an sd x0.67 and x0.65, are detected 80% of the
    # time: benchmarks/results/sbc_power.md), so a run inside its bands is a verdict here,
    # never "too few to call"
    assert summary.status != sbc_verdict.TOO_FEW, summary.reason
    assert summary.reason
    if summary.status != sbc_verdict.NOT_APPLICABLE:
        assert summary.power.useful and summary.reason.endswith(summary.power.line)
    # the engines' own results, as benchmarks/results/sbc_all.json recorded them at this seed
    # and S: those whose ECDF left its band by more than one band half-width there are far
    # outside (not a boundary case a change of CPU could flip) and must stay miscalibrated;
    # PCVM's EP stayed inside every band and must stay calibrated
    if (model, engine) in CLEARLY_MISCALIBRATED:
        assert summary.status == rank_uniformity.MISCALIBRATED, summary.reason
    if (model, engine) == ("pcvm", "ep"):
        assert summary.status == rank_uniformity.CALIBRATED, summary.reason
    if engine.split("@")[0] in registry.get_model(model).sampler_names and summary.status != rank_uniformity.CALIBRATED:
        again = S.run_sbc(S.SBCConfig(model, engine, settings=sbc_simulation.SBCSettings(n_sims=100, seed=1)),
                          out_dir=tmp_path)
        assert again.status == rank_uniformity.CALIBRATED, (summary.reason, again.reason)


@pytest.mark.long
def test_sbc_in_python_takes_a_function_and_a_model_without_proper_prior_gets_a_reason():
    from dataclasses import replace

    from zoo.inference import expectation_propagation as ep

    def my_fit(spec, Phi, y, *, config=None):
        return ep.fit(spec, Phi, y, config=config)

    out = S.run_sbc(S.SBCConfig("pcvm", my_fit,
                                settings=sbc_simulation.SBCSettings(n_sims=10, n_draws=19), problem={"n": 30, "n_basis": 3}))
    # one label for a user's engine everywhere: module:qualname, as zoo compare shows it
    # (SBC once called it by its __name__ alone, "my_fit", so one engine had two names)
    from zoo.validation.runs.engines import engine_label
    assert out.engine == engine_label(my_fit) == f"{__name__}:{my_fit.__qualname__}"
    assert out.counts.ok == 10 and len(out.ranks) == 10
    # a copy keeps no defects: their names are pcvm's (one name, one defect)
    registry.register(replace(registry.get_model("pcvm"), name="pcvm-improper", sbc_spec=None, defects=()))
    try:
        none = S.run_sbc(S.SBCConfig("pcvm-improper", "ep", settings=sbc_simulation.SBCSettings(n_sims=10)))
        assert none.status == sbc_verdict.NOT_APPLICABLE and "no proper prior" in none.reason
    finally:
        registry.unregister("pcvm-improper")


def test_a_reference_sampler_runs_in_sbc_as_its_models_chain_sets_it():
    # GIG's chain: PG-Gibbs 1,000 + 2,000 sweeps a chain with up to three doublings, then
    # NUTS at target_accept 0.95. In SBC NUTS takes the settings' draws and no doubling; a
    # Gibbs sampler keeps its record's length and doublings, so it stops at the certificate
    # (its draws are too autocorrelated for 99 thinned ranks from a short run)
    record = registry.get_model("gig-logistic")
    settings = sbc_simulation.SBCSettings(reference_draws=200)
    pg = sbc_simulation.resolve_engine(record, "pg-gibbs", settings).fit.keywords["reference"]
    chain = {r["sampler"]: r for r in record.references}
    assert (pg.sampler, pg.num_warmup, pg.num_samples, pg.max_doublings) == (
        "pg-gibbs", chain["pg-gibbs"]["num_warmup"], chain["pg-gibbs"]["num_samples"],
        chain["pg-gibbs"]["max_doublings"])
    assert pg.max_doublings > 0
    nuts = sbc_simulation.resolve_engine(record, "nuts", settings).fit.keywords["reference"]
    assert (nuts.target_accept, nuts.num_warmup, nuts.num_samples, nuts.max_doublings) == (0.95, 200, 200, 0)


def test_a_reference_sampler_is_checked_on_each_model_variant(monkeypatch, tmp_path):
    # grid-gibbs has its own code path per prior (slice updates on the s-grid), so SBC
    # runs it on every variant: "sampler@variant" ranks against that variant's prior
    names = sbc_simulation.sbc_names(registry.get_model("grid-rvm"))
    assert {"grid-gibbs@s-grid", "grid-gibbs@rvm", "nuts@s-grid"} <= set(names)
    with pytest.raises(ValueError, match="no variant 's-grid'"):
        S.run_sbc(S.SBCConfig("pcvm", "nuts@s-grid", settings=sbc_simulation.SBCSettings(n_sims=10)), out_dir=tmp_path)
    seen = []

    class Stop(Exception):
        pass

    def spy(spec, *args, **kwargs):
        seen.append(spec.prior)
        raise Stop
    monkeypatch.setattr(S, "simulate_one", spy)
    with pytest.raises(Stop):
        S.run_sbc(S.SBCConfig("grid-rvm", "grid-gibbs@s-grid", settings=sbc_simulation.SBCSettings(n_sims=10)),
                  out_dir=tmp_path)
    assert seen == ["s-grid"]
