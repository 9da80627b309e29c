"""Posterior SBC (validation/runs/posterior_sbc.py) and SBC's coverage and contraction views.

The conditioning case is small (PCVM's SBC design, 60 points and 6 RBF features, labels
from one seeded prior draw) with a short NUTS reference, so the tests take seconds. Every
statistical assertion is at a fixed seed; its tolerance is stated where it is made.
"""
from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import expectation_propagation
from zoo.validation.judge.defects import posterior_defect
from zoo.validation.records import registry
from zoo.validation.references import ReferenceConfig, run_reference
from zoo.validation.runs import posterior_sbc as ps
from zoo.validation.report import sbc_report
from zoo.validation.runs import sbc
from zoo.validation.judge import rank_uniformity
from zoo.validation.judge import sbc_verdict
from zoo.validation.runs import sbc_simulation


@pytest.fixture(scope="module")
def case():
    record = registry.get_model("pcvm")
    problem = sbc_simulation.problem_for(record, n=60)
    _, y, _ = sbc_simulation.draw_from_prior(problem.spec, problem.Phi, jax.random.PRNGKey(3))
    reference = run_reference(problem.spec, problem.Phi, y,
                              config=ReferenceConfig(num_warmup=500, num_samples=500, max_doublings=0))
    assert reference.certified, reference.failures
    return ps.ConditioningCase(problem.spec, problem.Phi, y, problem.Phi_new, reference, label="test case")


@pytest.mark.long
def test_new_labels_are_the_models_own_at_the_truth(case):
    """Labels drawn at one truth, 400 times: each row's share of ones matches the model's
    P(y = 1 | truth) within 4 binomial standard errors (60 rows: a chance failure has
    probability about 0.4%); labels drawn from the wrong probability (e.g. 1 - p, or the
    prior's) miss by tens of standard errors."""
    truth = {k: v[0] for k, v in ps.truths(case, 10).items()}
    program = ps._label_program(case.spec, case.Phi)
    keys = jax.random.split(jax.random.PRNGKey(0), 400)
    labels = np.stack([np.asarray(program(truth, k)) for k in keys])
    p = np.asarray(case.spec.prob(case.spec.linear_predictor(truth, case.Phi)))
    se = np.sqrt(np.maximum(p * (1 - p), 1e-12) / len(keys))
    z = (labels.mean(0) - p) / se
    assert np.max(np.abs(z)) < 4.0, np.max(np.abs(z))


@pytest.mark.long
def test_truths_are_reference_draws_and_too_many_are_refused(case):
    draws = ps.truths(case, 20)
    flat = case.reference.posterior.flat_draws()
    assert draws["w"].shape == (20, 6)
    # every truth is one of the reference's draws
    assert all(np.any(np.all(np.isclose(flat[:, 1:], w), axis=1)) for w in draws["w"])
    with pytest.raises(ValueError, match="reference draws"):
        ps.truths(case, flat.shape[0] + 1)


@pytest.mark.long
def test_an_engine_that_ignores_the_new_data_is_caught_by_the_log_likelihood(case, tmp_path):
    """An engine that returns the observed data's posterior whatever new labels it gets:
    its parameters' ranks are those of draws from the truths' own distribution, so only the
    data-dependent quantity can see it - the truth generated the new labels, so its
    log-likelihood of the stacked labels tops the draws'. Planted before it was trusted."""
    def ignores_new_data(spec, Phi, y, *, config=None):
        return case.reference.posterior

    summary = ps.run_posterior_sbc(ps.PosteriorSBCConfig("pcvm", ignores_new_data, case=case, settings=sbc_simulation.SBCSettings(n_sims=40)),
                                   out_dir=tmp_path)
    assert summary.status == rank_uniformity.MISCALIBRATED, summary.reason
    worst = summary.uniformity.worst[0]
    assert worst.name == "log_lik"
    # the truth's log-likelihood lies above the draws' median in most simulations (half of
    # them if calibrated; 0.3 is 2.5 standard errors below a half at 40 simulations)
    assert worst.share_below_half < 0.3


@pytest.mark.long
def test_too_narrow_ep_is_flagged_and_its_coverage_falls_short(case, tmp_path):
    """EP with its covariance quartered (sds halved): posterior SBC flags it 'too narrow',
    and the 90% intervals cover the truth in fewer than 90% of simulations by more than the
    Wilson interval (the defect takes the coverage to about 60%)."""
    narrow = posterior_defect(cov_factor=0.25)(expectation_propagation.fit)
    summary = ps.run_posterior_sbc(ps.PosteriorSBCConfig("pcvm", narrow, case=case, settings=sbc_simulation.SBCSettings(n_sims=60)),
                                   out_dir=tmp_path)
    assert summary.status == rank_uniformity.MISCALIBRATED, summary.reason
    assert "too narrow" in summary.reason
    at_90 = [q.at(0.9) for q in summary.coverage.quantities]
    assert np.median([c.coverage for c in at_90]) < 0.9
    assert min(c.interval[1] for c in at_90) < 0.9
    # contraction view: z-scores spread wider than a calibrated fit's (sd about 2)
    z_sd = [q.z_sd for q in summary.contraction.quantities if q.name.startswith("w[")]
    assert np.median(z_sd) > 1.3


@pytest.mark.long
def test_ep_in_posterior_sbc_stays_inside_its_bands_and_the_run_resumes(case, tmp_path):
    """EP is close to exact on this case (it is calibrated in posterior SBC on PCVM's default
    case, docs/validation.md): 30 simulations stay inside their bands (a 5% false alarm at
    a fixed seed), and 30 are too few to call it calibrated (SBC's power rule wants 50 at
    these L and K); a longer run reuses the stored ones and extends them."""
    short = ps.run_posterior_sbc(ps.PosteriorSBCConfig("pcvm", "ep", case=case, settings=sbc_simulation.SBCSettings(n_sims=30)),
                                 out_dir=tmp_path)
    assert short.status == sbc_verdict.TOO_FEW, short.reason
    assert short.conditioning["n_new_data"] == 60 and short.kind == ps.KIND
    longer = ps.run_posterior_sbc(ps.PosteriorSBCConfig("pcvm", "ep", case=case, settings=sbc_simulation.SBCSettings(n_sims=34)),
                                  out_dir=tmp_path)
    assert longer.reused == 30
    assert longer.ranks[:30] == short.ranks
    stored = json.load(open(os.path.join(longer.folder, "00000.json")))
    assert {"truth", "post_mean", "post_sd"} <= set(stored)
    assert "reference posterior of the observed data" in longer.glossary["w[i]"]


def test_coverage_view_of_exact_and_narrow_ranks():
    """Conjugate normal ranks (rank_uniformity.conjugate_normal_ranks), 400 simulations: exact draws
    cover at every level within the Wilson interval; draws with sds halved cover 90%
    intervals about 60% of the time, far outside it."""
    rng = np.random.default_rng(5)
    exact = sbc.rank_summary(rank_uniformity.conjugate_normal_ranks(rng, 400, 99, 2), ["a", "b"], 99)
    narrow = sbc.rank_summary(rank_uniformity.conjugate_normal_ranks(rng, 400, 99, 2, sd_factor=0.5, defective=1), ["a", "b"], 99)
    for q in exact.coverage.quantities:
        for level in q.levels:
            assert level.interval[0] <= level.nominal <= level.interval[1], (q.name, level)
    a90 = narrow.coverage.quantities[0].at(0.9)
    assert a90.interval[1] < 0.75
    assert "furthest: a" in sbc_report.coverage_line(narrow)
    # ranks alone carry no posterior means: the contraction view says it has nothing
    assert narrow.contraction is None and sbc_report.sbc_views_figure(narrow) is not None


@pytest.mark.long
def test_zoo_sbc_conditional_writes_the_posterior_sbc_report(case, tmp_path, monkeypatch, capsys):
    """``zoo sbc --conditional``: the posterior-SBC report with its verdict, coverage line and
    both figures (the default case replaced by the small one, to keep the test short)."""
    from zoo import cli

    monkeypatch.setattr(ps, "default_case", lambda model, **kw: case)
    code = cli.main(["sbc", "--model", "pcvm", "--engine", "ep", "--conditional", "--sims", "12",
                     "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    report = open(tmp_path / "pcvm" / "sbc.md").read()
    assert report.startswith("# Posterior SBC: pcvm")
    assert "central intervals cover the truth" in report
    assert (tmp_path / "pcvm" / "ep" / "sbc-views.png").exists()
    assert "posterior SBC: pcvm / ep" in capsys.readouterr().out
