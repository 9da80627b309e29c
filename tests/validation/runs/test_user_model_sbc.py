"""SBC of a user's NumPyro model (validation/runs/sbc_simulation.py's general path): the
parameters from the model's prior, its observed sites from its prior predictive on its own
inputs, the truth ranked among the engine's draws. An exact engine is called calibrated, a
planted too-narrow one miscalibrated; a flat prior and a model judged on part of its sites
say in one line what SBC cannot do or see.

Tolerances: the verdicts are the judge's (rank_uniformity.py), at their 5% family-wise
false-alarm rate; the seeds are fixed, so each test is one deterministic run of a test
whose false-alarm rate and power (stated in each result) are known."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import user_models as um
from zoo.validation.judge.sbc_verdict import NOT_APPLICABLE
from zoo.validation.records import registry
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import SBCSettings, problem_for, quantity_names

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# every test leaves the registry as it found it (conftest.py)
pytestmark = pytest.mark.usefixtures("registry_as_it_was")


def test_the_problem_is_the_models_own_inputs_and_the_quantities_its_sites_and_likelihood():
    name = registry.add_user_model(um.EIGHT_SCHOOLS_MODEL)
    problem = problem_for(registry.get_model(name))
    # the model's data as it takes them (its observed y among them: replaced by each simulation's)
    assert problem.Phi_new is None and set(problem.Phi) == {"sigma", "y"}
    np.testing.assert_array_equal(problem.Phi["sigma"], um.EIGHT_SCHOOLS["sigma"])
    names = quantity_names(problem.spec, problem.Phi, problem.Phi_new)
    assert names == ["mu", "tau"] + [f"theta_tilde[{j}]" for j in range(8)] + ["log_lik"]
    assert problem.design() == {"data": problem.spec.data, "observed": {"obs": [8]}}
    with pytest.raises(ValueError, match="takes no problem keywords"):
        run_sbc(SBCConfig(model=um.EIGHT_SCHOOLS_MODEL, engine="advi-meanfield",
                          settings=SBCSettings(n_sims=10, n_draws=9), problem={"n": 30}))


def test_an_exact_engine_is_calibrated_and_a_planted_narrow_one_is_not():
    settings = SBCSettings(n_sims=100, n_draws=39, seed=3)
    exact = run_sbc(SBCConfig(model=um.NORMAL_MEAN_MODEL, engine=um.exact_normal_mean, settings=settings))
    narrow = run_sbc(SBCConfig(model=um.NORMAL_MEAN_MODEL, engine=um.narrow_normal_mean, settings=settings))
    assert exact.counts.ok == narrow.counts.ok == 100
    assert exact.status == "calibrated", exact.reason
    assert narrow.status == "miscalibrated", narrow.reason
    # every simulated data set came from the prior predictive: finite, five observations
    assert dict(exact.design["observed"]) == {"y": (5,)} and exact.counts.redraws == 0
    # the power the judge states is that of this run's size
    assert exact.power is not None and "100 simulations" in exact.reason


def test_truths_and_data_come_from_the_prior_predictive(tmp_path):
    """The simulated truths of mu follow its N(0, 1) prior (mean within 4 standard errors
    of 0, variance within 4 of 1), and each simulation's observations are drawn given its
    own truth: y_i - mu ~ N(0, 1) (the same 4-standard-error bounds)."""
    seen = {}

    def recording(spec, Phi, y, *, config=None):
        obs = np.asarray(y["y"], dtype=float)
        seen[obs.tobytes()] = obs
        return um.exact_normal_mean(spec, Phi, y)

    result = run_sbc(SBCConfig(model=um.NORMAL_MEAN_MODEL, engine=recording,
                               settings=SBCSettings(n_sims=200, n_draws=9, seed=5)), out_dir=tmp_path)
    stored = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("sims-*/*.json"))]
    assert result.counts.ok == len(stored) == len(seen) == 200
    truths = np.array([s["truth"][0] for s in stored])
    assert abs(truths.mean()) < 4 / np.sqrt(200)
    assert abs(truths.var(ddof=1) - 1.0) < 4 * np.sqrt(2 / 199)
    # the log-likelihood's truth is that of the simulation's own observations: find them by it
    resid = []
    for s in stored:
        mu, log_lik = s["truth"][0], s["truth"][-1]
        match = [y for y in seen.values() if np.isclose(-0.5 * ((y - mu) ** 2).sum() - 2.5 * np.log(2 * np.pi),
                                                        log_lik)]
        assert len(match) == 1
        resid.append(match[0] - mu)
    resid = np.concatenate(resid)
    assert abs(resid.mean()) < 4 / np.sqrt(resid.size) and abs(resid.var() - 1) < 4 * np.sqrt(2 / resid.size)


def test_a_flat_prior_says_sbc_needs_a_proper_one():
    result = run_sbc(SBCConfig(model=um.NORMAL_MEAN_FLAT_MODEL, engine="advi-meanfield",
                               settings=SBCSettings(n_sims=10, n_draws=9)))
    assert result.status == NOT_APPLICABLE
    assert result.reason == ("model normal_mean_flat has an improper (flat) prior on mu: SBC draws the parameters "
                             "from the prior, so it needs a proper one")


def test_a_model_judged_on_some_sites_says_the_likelihood_is_not_ranked():
    result = run_sbc(SBCConfig(model=um.TWO_MEANS_ON_MU, engine=um.mu_prior, settings=SBCSettings(n_sims=10, n_draws=9)))
    assert list(result.glossary) == ["mu"]
    assert ("the log-likelihood of the simulated data is not ranked (the model is judged on mu, not on every "
            "latent site: a draw of those does not fix the likelihood)") in result.reason


def test_zoo_sbc_takes_a_model_by_path(tmp_path):
    env = dict(os.environ, PYTHONPATH=TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, "-m", "zoo.cli", "sbc", "--model", "user_models:NORMAL_MEAN_MODEL",
                          "--engine", "user_models:exact_normal_mean", "--sims", "20", "--draws", "9",
                          "--out", str(tmp_path), "--no-progress"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "normal_mean / user_models:exact_normal_mean: " in run.stdout
    stored = json.loads((tmp_path / "normal_mean" / "user_models_exact_normal_mean" / "sbc.json").read_text())
    assert stored["model"] == "normal_mean" and stored["counts"]["ok"] == 20
    assert "the model's own data, its observed sites (y (5,))" in (tmp_path / "normal_mean" / "sbc.md").read_text()

def test_zoo_sbc_refuses_the_designs_options_for_a_model_of_its_own_data(tmp_path, capsys):
    from zoo.cli import main

    code = main(["sbc", "--model", "user_models:NORMAL_MEAN_MODEL", "--n", "30", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "zoo sbc: error: model normal_mean is simulated on its own data: --n, --n-basis and --conditional are "
        "for the zoo's classifiers")


USER_STUDY = """
name = "user model"

[[compare]]
models = ["user_models:NORMAL_MEAN_MODEL"]
engines = ["advi-meanfield"]

[[sbc]]
model = "user_models:NORMAL_MEAN_MODEL"
engines = ["user_models:exact_normal_mean"]
sims = 10
draws = 9

[[defects]]
model = "user_models:NORMAL_MEAN_MODEL"
engine = "advi-meanfield"
defects = ["cov x 0.5"]
datasets = 2
sbc_replicates = 1
sbc_sims = 10
reference_draws = 200
"""


def test_a_study_file_names_a_users_model_by_path(tmp_path):
    from zoo.validation.runs import study as St

    (tmp_path / "s.toml").write_text(USER_STUDY)
    cells = St.expand(St.load_config(tmp_path / "s.toml"))
    assert [(c.kind, c.params["model"]) for c in cells] == [
        ("compare", "user_models:NORMAL_MEAN_MODEL"), ("sbc", "user_models:NORMAL_MEAN_MODEL"),
        ("defects", "user_models:NORMAL_MEAN_MODEL")]
    assert cells[0].params["data"] == "(its own data)" and cells[0].params["split"] == 0
    # the model's module is digested into every cell's key (a changed model is not reused)
    assert "user_models" in St.user_modules([cells[0].params["model"]])
    (tmp_path / "data.toml").write_text(USER_STUDY.replace('engines = ["advi-meanfield"]\n',
                                                           'engines = ["advi-meanfield"]\ndata = ["ripley"]\n', 1))
    with pytest.raises(ValueError, match="model user_models:NORMAL_MEAN_MODEL brings its own data: no data or splits"):
        St.expand(St.load_config(tmp_path / "data.toml"))


# slow: a two-worker cluster whose workers import the user's model by its path (~2 min)
@pytest.mark.slow
def test_a_study_of_a_users_model_runs_on_a_two_worker_cluster(tmp_path):
    from distributed import Client, LocalCluster

    from zoo.validation.runs import study as St

    (tmp_path / "s.toml").write_text(USER_STUDY)
    out = tmp_path / "out"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        result = St.run_study(St.load_config(tmp_path / "s.toml"), out, client=client, progress=False)
    assert result.failed == [] and result.ran == 3
    compare_cell, sbc_cell, defects_cell = (c.result for c in result.cells)
    assert compare_cell.reference.certified and compare_cell.classifier is False
    assert sbc_cell.counts.ok == 10
    battery = {(r.detector, r.defect): r for r in defects_cell.rows}
    # ADVI's mean-field Gaussian on this one-dimensional Gaussian posterior is exact up to its
    # optimizer; the planted covariance x 0.5 is an sd 29% low, which the verdict sees
    assert battery[("verdict", "cov x 0.5")].detected == battery[("verdict", "cov x 0.5")].trials == 2
    from zoo.validation.report.study_report import report_study

    report = open(report_study(result)).read()
    assert "## Planted defects: normal_mean / advi-meanfield" in report
