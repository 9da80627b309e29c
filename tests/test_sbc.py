"""Simulation-based calibration (validation/sbc.py): the uniformity test's false-alarm rate
and power, the prior simulation (factor terms included), resumable runs, and `zoo sbc`
with a user's own engine.

Statistical checks use fixed seeds; their tolerances come from the binomial Monte Carlo
error of the number of replicates, stated where used.
"""
from __future__ import annotations

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
from zoo.validation import registry
from zoo.validation import sbc as S


def _exact_and_engine_ranks(rng, n_sims, n_draws, *, sd_factor=1.0, shift=0.0, k=3):
    return S.conjugate_normal_ranks(rng, n_sims, n_draws, k, sd_factor=sd_factor, shift=shift)


def test_uniformity_test_false_alarm_rate_is_the_stated_one():
    # 400 replicates of an exact posterior (K = 10 quantities, S = 100, L = 99): the rate
    # must be within 3 binomial standard errors (3 x 0.011) of the nominal 5% (less the
    # Bonferroni slack: 1 - (1 - 0.005)^10 = 4.9% for independent quantities)
    rng = np.random.default_rng(11)
    flagged = [S.uniformity(_exact_and_engine_ranks(rng, 100, 99, k=10), 99, seed=r)["status"] == S.MISCALIBRATED
               for r in range(400)]
    rate = float(np.mean(flagged))
    se = np.sqrt(0.049 * 0.951 / 400)
    assert abs(rate - 0.049) < 3 * se, rate


def test_conjugate_ranks_plant_the_defect_only_where_asked():
    # defective=1: quantity 0 has its sd halved (ranks pile at 0 and L: outer tenths far
    # above 20%), the other four stay exact (their outer-tenth shares near 20%; with
    # S = 2000 each share has binomial sd 0.009, so 0.2 +- 0.04 is over 4 sds)
    rng = np.random.default_rng(3)
    ranks = S.conjugate_normal_ranks(rng, 2000, 99, 5, sd_factor=0.5, defective=1)
    outer = ((ranks < 10) | (ranks > 89)).mean(0)
    assert outer[0] > 0.4, outer
    assert np.all(np.abs(outer[1:] - 0.2) < 0.04), outer


@pytest.mark.parametrize("defect, words", [({"sd_factor": 0.5}, "too narrow"), ({"sd_factor": 2.0}, "too wide"),
                                           ({"shift": 0.5}, "biased upwards")])
def test_uniformity_test_catches_and_names_a_broken_posterior(defect, words):
    # at S = 100 each of these defects puts the ECDF far outside the band (power ~1 at
    # this size; the fixed seed makes the check deterministic)
    rng = np.random.default_rng(5)
    test = S.uniformity(_exact_and_engine_ranks(rng, 100, 99, **defect), 99)
    assert test["status"] == S.MISCALIBRATED
    assert words in S.describe_failure(test["worst"][0])


def test_a_failure_without_a_clear_shape_names_no_direction():
    # a band exceeded with near-even shares (seen on grid-rvm's vb-s-grid, 23% / 48%):
    # "biased downwards" on 52% above the median would mislead
    words = S.describe_failure({"name": "w[11]", "share_in_outer_tenths": 0.23, "share_below_half": 0.48})
    assert "no simple shape" in words and "biased" not in words


def test_factor_terms_are_the_rejection_weights_of_the_prior():
    # PCVM's EPCVM surrogate has a factor term (its smooth indicator); ancestral simulation
    # ignores it, and SBC accepts each draw with probability exp(term) instead
    spec = PCVM(alpha=1.0, alpha_bias=1.0, surrogate=True)
    Phi, _ = S.rbf_design(20, 3, 1)
    w = jnp.array([[0.5, -0.2, 1.0], [-1.0, 0.1, 0.0]])
    draws = {"b": jnp.zeros(2), "w": w, "y": jnp.ones((2, 20))}
    got = S._factor_log_weights(spec, Phi, draws, "y")
    expected = np.asarray(jax.nn.log_sigmoid(spec.indicator_sharpness * w).sum(1))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert np.all(S._factor_log_weights(PCVM(), Phi, {"b": jnp.zeros(2), "w": jnp.abs(w), "y": draws["y"]}, "y") == 0)


def test_prior_draws_have_both_classes_and_follow_the_truncation():
    spec = PCVM(alpha=1.0, alpha_bias=1.0)
    Phi, _ = S.rbf_design(30, 4, 1)
    for i in range(5):
        truth, y, _ = S.draw_from_prior(spec, Phi, jax.random.PRNGKey(i))
        assert 0 < y.mean() < 1 and set(np.unique(y)) <= {0.0, 1.0}
        assert np.all(truth["w"] >= 0) and truth["w"].shape == (4,)


def test_point_estimates_and_other_models_get_a_reason_not_ranks():
    em = S.run_sbc("pcvm", "em", settings=S.SBCSettings(n_sims=10))
    assert em["status"] == S.NOT_APPLICABLE and "point estimate" in em["reason"]
    lap = S.run_sbc("ggsm-probit", "lap", settings=S.SBCSettings(n_sims=10))
    assert lap["status"] == S.NOT_APPLICABLE and "another model" in lap["reason"]


def test_bad_engines_and_settings_are_named():
    record = registry.get_model("pcvm")
    with pytest.raises(ValueError, match="no engine or reference sampler 'nope'"):
        S.resolve_engine(record, "nope")
    with pytest.raises(ValueError, match="cannot import"):
        S.resolve_engine(record, "no_such_module_xyz:fit")
    with pytest.raises(ValueError, match="contract"):
        S.resolve_engine(record, "os.path:join")
    with pytest.raises(ValueError, match="at least 10 simulations"):
        S.SBCSettings(n_sims=3)


def test_a_run_is_stored_per_simulation_and_resumes(tmp_path):
    settings = S.SBCSettings(n_sims=12, n_draws=19, seed=3)
    kwargs = {"n": 30, "n_basis": 3}
    first = S.run_sbc("pcvm", "ep", settings=settings, out_dir=tmp_path, problem_kwargs=kwargs)
    assert first["status"] in (S.CALIBRATED, S.MISCALIBRATED) and first["counts"]["ok"] == 12
    assert first["reused"] == 0
    files = sorted(f for f in os.listdir(first["folder"]) if f.endswith(".json"))
    assert len(files) == 12
    # a killed run leaves some simulations finished: the rerun does only the rest and
    # gives the same ranks (each simulation's keys depend on its index alone)
    for f in files[::3]:
        os.remove(os.path.join(first["folder"], f))
    again = S.run_sbc("pcvm", "ep", settings=settings, out_dir=tmp_path, problem_kwargs=kwargs)
    assert again["reused"] == 8
    assert again["ranks"] == first["ranks"]
    # the plot draws on a canvas of its own: the user's pyplot backend stays what it was
    import matplotlib

    backend = matplotlib.get_backend()
    png = S.plot_sbc(again, tmp_path / "sbc.png")
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
    folder = out / "pcvm" / "my_engines_overconfident"
    summary = json.loads((folder / "sbc.json").read_text())
    assert summary["status"] == S.MISCALIBRATED and summary["counts"]["ok"] == 40
    assert (folder / "sbc.png").stat().st_size > 1000
    assert "my_engines:overconfident" in (out / "pcvm" / "sbc.md").read_text()
    code = main(["sbc", "--model", "pcvm", "--engine", "my_engines:not_an_engine", "--sims", "10",
                 "--out", str(out), "--no-progress"])
    assert code == 2 and "does not keep the engine contract" in capsys.readouterr().err


def _every_engine_and_sampler():
    # samplers on the model and on each of its variants (grid-rvm's grid-gibbs@s-grid)
    return [(m, e) for m in registry.model_names() for e in S.sbc_names(registry.get_model(m))]


@pytest.mark.slow
@pytest.mark.parametrize("model, engine", _every_engine_and_sampler())
def test_every_engine_gets_an_sbc_verdict_and_every_reference_sampler_is_calibrated(model, engine, tmp_path):
    # 100 simulations each (benchmarks/sbc_all.py tables the same runs). An engine may be
    # miscalibrated - that is a finding, reported in the README - but it must get a verdict
    # or a stated reason. The reference samplers are our ground truth: they must pass. One
    # run calls a calibrated sampler miscalibrated at the stated 5% rate, and five samplers
    # at seed 0 would fail this test about one time in four (GGSM's NUTS and slice-Gibbs
    # share seed 0's simulated truths and both flag w[5] there); so a sampler fails only
    # when a second, independent run (seed 1) flags it too: false alarms 0.25% a sampler,
    # while every planted defect of the battery is caught at S = 100 in >= 96% of runs.
    summary = S.run_sbc(model, engine, settings=S.SBCSettings(n_sims=100), out_dir=tmp_path)
    assert summary["status"] in (S.CALIBRATED, S.MISCALIBRATED, S.NOT_APPLICABLE)
    assert summary["reason"]
    if engine.split("@")[0] in registry.get_model(model).sampler_names and summary["status"] != S.CALIBRATED:
        again = S.run_sbc(model, engine, settings=S.SBCSettings(n_sims=100, seed=1), out_dir=tmp_path)
        assert again["status"] == S.CALIBRATED, (summary["reason"], again["reason"])


def test_sbc_in_python_takes_a_function_and_a_model_without_proper_prior_gets_a_reason():
    from dataclasses import replace

    from zoo.inference import expectation_propagation as ep

    def my_fit(spec, Phi, y, *, config=None):
        return ep.fit(spec, Phi, y, config=config)

    out = S.run_sbc("pcvm", my_fit, settings=S.SBCSettings(n_sims=10, n_draws=19), problem_kwargs={"n": 30, "n_basis": 3})
    assert out["engine"] == "my_fit" and out["counts"]["ok"] == 10 and len(out["ranks"]) == 10
    registry.register(replace(registry.get_model("pcvm"), name="pcvm-improper", sbc_spec=None))
    try:
        none = S.run_sbc("pcvm-improper", "ep", settings=S.SBCSettings(n_sims=10))
        assert none["status"] == S.NOT_APPLICABLE and "no proper prior" in none["reason"]
    finally:
        registry.unregister("pcvm-improper")


def test_a_reference_sampler_runs_in_sbc_as_its_models_chain_sets_it():
    # GIG's chain: PG-Gibbs 1,000 + 2,000 sweeps a chain with up to three doublings, then
    # NUTS at target_accept 0.95. In SBC NUTS takes the settings' draws and no doubling; a
    # Gibbs sampler keeps its record's length and doublings, so it stops at the certificate
    # (its draws are too autocorrelated for 99 thinned ranks from a short run)
    record = registry.get_model("gig-logistic")
    settings = S.SBCSettings(reference_draws=200)
    pg = S.resolve_engine(record, "pg-gibbs", settings).fit.keywords["reference"]
    chain = {r["sampler"]: r for r in record.references}
    assert (pg.sampler, pg.num_warmup, pg.num_samples, pg.max_doublings) == (
        "pg-gibbs", chain["pg-gibbs"]["num_warmup"], chain["pg-gibbs"]["num_samples"],
        chain["pg-gibbs"]["max_doublings"])
    assert pg.max_doublings > 0
    nuts = S.resolve_engine(record, "nuts", settings).fit.keywords["reference"]
    assert (nuts.target_accept, nuts.num_warmup, nuts.num_samples, nuts.max_doublings) == (0.95, 200, 200, 0)


def test_a_reference_sampler_is_checked_on_each_model_variant(monkeypatch, tmp_path):
    # grid-gibbs has its own code path per prior (slice updates on the s-grid), so SBC
    # runs it on every variant: "sampler@variant" ranks against that variant's prior
    names = S.sbc_names(registry.get_model("grid-rvm"))
    assert {"grid-gibbs@s-grid", "grid-gibbs@rvm", "nuts@s-grid"} <= set(names)
    with pytest.raises(ValueError, match="no variant 's-grid'"):
        S.run_sbc("pcvm", "nuts@s-grid", settings=S.SBCSettings(n_sims=10), out_dir=tmp_path)
    seen = []

    class Stop(Exception):
        pass

    def spy(spec, *args, **kwargs):
        seen.append(spec.prior)
        raise Stop
    monkeypatch.setattr(S, "simulate_one", spy)
    with pytest.raises(Stop):
        S.run_sbc("grid-rvm", "grid-gibbs@s-grid", settings=S.SBCSettings(n_sims=10), out_dir=tmp_path)
    assert seen == ["s-grid"]
