"""Planted defects (validation/runs/battery.py): each breaks an engine exactly as it says, the
engine-specific ones change the engine's answer, a user's wrapper is accepted, and a small
battery runs both detectors and resumes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import expectation_propagation as ep
from zoo.inference import gig_vb
from zoo.inference.posterior import DrawsPosterior, FitInfo, GaussianPosterior
from zoo.models.base import Site
from zoo.models.gig_logistic import GIGLogistic
from zoo.models.pcvm import PCVM
from zoo.validation.runs import battery as D
from zoo.validation.runs.sbc_simulation import rbf_design

INFO = FitInfo(engine="t", converged=True, n_iter=0, reason="", seconds=0.0, compile_seconds=0.0, objective="", extra={})
SITES = (Site("b", ()), Site("w", (2,)))


def test_generic_defects_move_a_gaussian_exactly():
    L = np.array([[1.0, 0, 0], [0.5, 2.0, 0], [0.1, 0.2, 0.5]])
    post = GaussianPosterior(None, SITES, np.array([1.0, -1.0, 0.0]), L, INFO)
    sd = post.sd_flat()
    half = D.transform_posterior(post, cov_factor=0.5)
    np.testing.assert_allclose(half.cov, 0.5 * post.cov)
    one = D.transform_posterior(post, shift_sd=0.5, coordinate=0)
    np.testing.assert_allclose(one.mean_flat(), post.mean_flat() + [0.5 * sd[0], 0, 0])
    every = D.transform_posterior(post, shift_sd=0.5)
    np.testing.assert_allclose(every.mean_flat(), post.mean_flat() + 0.5 * sd)


def test_generic_defects_move_draws_exactly_and_keep_their_layout():
    rng = np.random.default_rng(0)
    draws = {"b": rng.normal(size=(2, 50)), "w": rng.normal(size=(2, 50, 2)) * [1.0, 3.0]}
    post = DrawsPosterior(None, SITES, draws, INFO)
    doubled = D.transform_posterior(post, cov_factor=2.0)
    np.testing.assert_allclose(doubled.sd_flat(), np.sqrt(2.0) * post.sd_flat())
    np.testing.assert_allclose(doubled.mean_flat(), post.mean_flat())
    assert doubled.draws["w"].shape == (2, 50, 2)
    moved = D.transform_posterior(post, shift_sd=0.5)
    np.testing.assert_allclose(moved.mean_flat(), post.mean_flat() + 0.5 * post.sd_flat())


def test_engine_specific_defects_change_the_engines_answer():
    Phi, _ = rbf_design(40, 4, 1, seed=2)
    y = (Phi @ np.array([1.0, 0.5, 0.0, 2.0]) - 0.9 + np.random.default_rng(1).normal(0, 0.3, 40) > 0).astype(float)
    spec = PCVM(alpha=1.0, alpha_bias=1.0)
    intact = ep.fit(spec, Phi, y)
    broken = D.get_defect("truncation ignored")(ep.fit)(spec, Phi, y)
    # the truncation sites keep the weights near zero non-negative; without them the
    # Gaussian puts much more of its mass below zero
    below = lambda p: (p.mean_flat()[1:] / p.sd_flat()[1:]).min()  # noqa: E731
    assert below(broken) < below(intact) - 0.5
    X = Phi
    intact_vb = gig_vb.run(GIGLogistic(), X, y)
    printed = gig_vb.run(GIGLogistic(), X, y, config=gig_vb.GIGVBConfig(a_update="printed"))
    assert not np.allclose(intact_vb.bbar, printed.bbar, atol=1e-3)
    with pytest.raises(ValueError, match="a_update"):
        gig_vb.GIGVBConfig(a_update="product")


def test_a_users_wrapper_is_a_defect():
    def flip_sign(fit):
        def broken(spec, Phi, y, *, config=None):
            return D.transform_posterior(fit(spec, Phi, y, config=config), shift_sd=-1.0)
        return broken

    d = D.get_defect(flip_sign)
    assert d.name == "flip_sign" and d.applies_to("any", "engine")
    with pytest.raises(ValueError, match="unknown defect"):
        D.get_defect("no such defect")
    assert D.get_defect("cov x 2") is D.get_defect("cov x 2")
    assert not D.get_defect("truncation ignored").applies_to("gig-logistic", "vb")
    # a defect a study file names by path is checked before any work (it was imported and
    # taken as it came): not a function, or not one of one argument, is one line
    with pytest.raises(ValueError, match=r"^defect 'math:pi' is a float, not a function defect\(fit\) -> fit$"):
        D.get_defect("math:pi")
    with pytest.raises(ValueError, match=r"^defect 'os:getcwd' does not keep the contract defect\(fit\) -> fit"):
        D.get_defect("os:getcwd")


@pytest.mark.long
def test_a_small_battery_runs_both_detectors_and_resumes(tmp_path, monkeypatch):
    # 1 data set, 1 SBC replicate of 10 simulations: enough to exercise every path (the
    # rates of docs/validation.md come from benchmarks/defect_battery.py at 100 data sets; a second
    # data set only repeated the first's path, for 50 s of the default tier)
    settings = D.BatterySettings(n_datasets=1, sbc_replicates=1, sbc_sims=10, reference_draws=500,
                                 problem=(("n", 30), ("n_basis", 3)))
    def double_shift(fit):  # a user's own wrapper, given as a function
        def broken(spec, Phi, y, *, config=None):
            return D.transform_posterior(fit(spec, Phi, y, config=config), shift_sd=2.0)
        return broken

    chosen = ["cov x 0.5", "truncation ignored", double_shift, "rotated"]
    out = D.run_battery(D.BatteryConfig("pcvm", "ep", chosen, settings=settings), out_dir=tmp_path)
    rows = {(r.detector, r.defect): r for r in out.rows}
    named = (D.INTACT, "cov x 0.5", "truncation ignored", "double_shift", "rotated")
    verdicts = ("verdict", "joint verdict", "distribution verdict")
    assert set(rows) == {(det, d) for det in verdicts for d in (D.EXACT, *D.EXACT_SHAPES, *named)} | {
        ("sbc", d) for d in named}
    assert all(r.failed_fits == 0 for r in out.rows)
    assert out.certified_datasets == 1  # so the verdict rows below judged something
    for det in verdicts:
        assert all(rows[(det, d)].trials == 1 for d in (D.EXACT, *D.EXACT_SHAPES, *named)), det
        # the second NUTS run is exact: no verdict calls it different (each would with
        # probability <= 5%; this seed's pair is the first tried, not one picked among passes)
        assert rows[(det, D.EXACT)].detected == 0, det
        # covariance halved, a mean moved by 2 sd: every verdict sees them
        assert rows[(det, "cov x 0.5")].detected == 1 and rows[(det, "double_shift")].detected == 1, det
    # correlations rotated with every marginal kept: the joint verdict sees it, the marginal cannot
    assert rows[("joint verdict", "rotated")].detected == 1
    # the exact answer with its shape broken and every mean and covariance kept: the moment
    # verdicts cannot see it (each would flag it with probability <= 5%, as the exact answer),
    # the distribution verdict does
    for name in D.EXACT_SHAPES:
        assert rows[("distribution verdict", name)].detected == 1, name
        assert rows[("verdict", name)].detected == 0 and rows[("joint verdict", name)].detected == 0, name
    # SBC at 10 simulations: one run each, none failed; a run that stays inside its bands
    # says it had too few simulations to call, never "calibrated"
    for d in named:
        r = rows[("sbc", d)]
        assert r.trials == 1 and r.detected + r.too_few == 1, r
    folder = next(p for p in tmp_path.iterdir() if p.name.startswith("battery-"))
    stored = sorted(os.listdir(folder / "verdict"))
    assert len(stored) == 1
    before = json.loads((folder / "verdict" / stored[0]).read_text())
    # the rerun recomputes nothing: no data set's verdict cell, no SBC simulation
    from zoo.validation.runs import sbc as S

    def recomputed(*args, **kwargs):
        raise AssertionError("a finished part of the battery was recomputed")

    monkeypatch.setattr(D, "_verdict_cell", recomputed)
    monkeypatch.setattr(S, "simulate_one", recomputed)
    again = D.run_battery(D.BatteryConfig("pcvm", "ep", chosen, settings=settings), out_dir=tmp_path)
    assert again.rows == out.rows
    assert json.loads((folder / "verdict" / stored[0]).read_text()) == before


def test_battery_tries_the_models_reference_chain():
    from zoo.validation.references import ReferenceConfig

    settings = D.BatterySettings(reference_draws=300)
    # PCVM's chain is NUTS alone: the battery's runs are NUTS with the battery's draws (and
    # the record's doublings)
    assert D.battery_references("pcvm", settings, 3) == (
        ReferenceConfig(num_warmup=300, num_samples=300, seed=6, max_doublings=3),)
    # GIG's chain is PG-Gibbs then NUTS; the Gibbs sampler keeps its record's settings
    pg, nuts = D.battery_references("gig-logistic", settings, 0)
    assert (nuts.sampler, nuts.num_samples, nuts.target_accept) == ("nuts", 300, 0.95)
    assert (pg.sampler, pg.num_samples, pg.seed) == ("pg-gibbs", 2000, 0)
    only = D.battery_references("gig-logistic", D.BatterySettings(reference_samplers=["pg-gibbs"]), 0)
    assert [c.sampler for c in only] == ["pg-gibbs"]


def test_battery_refuses_an_unknown_reference_sampler_before_any_work(tmp_path):
    settings = D.BatterySettings(n_datasets=1, reference_samplers=("slice-gibbs",))
    with pytest.raises(ValueError, match="slice-gibbs"):
        D.run_battery(D.BatteryConfig("pcvm", "ep", ["cov x 2"], settings=settings), out_dir=tmp_path)
    assert not any(tmp_path.iterdir())
