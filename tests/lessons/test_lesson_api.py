"""The public pieces the lessons (notebooks/) are built from: tables as values, figures
returned without side effects and with labelled axes, SBC of ranks computed elsewhere,
rates with their intervals. A lesson uses these instead of parsing a report or reaching
into private names (tests/lessons/test_notebooks.py checks that)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.validation.base.figures import axis_label_problems
from zoo.validation.base.tables import Table
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.report.battery_report import battery_figure, battery_table
from zoo.validation.runs.battery_result import load_batteries
from zoo.validation.judge.rank_uniformity import MISCALIBRATED, conjugate_normal_ranks
from zoo.validation.report.sbc_report import sbc_figure
from zoo.validation.runs.sbc import rank_summary
from zoo.validation.runs.sbc_simulation import SBCSettings

from repository import REPO

REPOSITORY = REPO


def test_axis_label_problems_finds_unlabelled_axes_only():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1], [1, 2])
    assert axis_label_problems(fig) == ["'axes 0': the x axis has no label", "'axes 0': the y axis has no label"]
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    assert axis_label_problems(fig) == []
    # shared axes: the inner one hides its tick labels and needs no label of its own
    fig = Figure()
    top, bottom = fig.subplots(2, 1, sharex=True)
    for a in (top, bottom):
        a.plot([0, 1], [1, 2])
        a.set_ylabel("y")
    bottom.set_xlabel("t")
    assert axis_label_problems(fig) == []
    # an axes switched off is not read; a figure-wide label stands for every axes
    fig = Figure()
    left, right = fig.subplots(1, 2)
    right.axis("off")
    left.plot([0, 1])
    left.set_title("curve")
    fig.supxlabel("x")
    assert axis_label_problems(fig) == ["'curve': the y axis has no label"]


def test_zoo_figures_show_themselves_without_pyplot():
    """A figure the zoo returns is shown by a notebook as PNG whatever backend is active."""
    from zoo.validation.base.figures import ShownFigure

    fig = ShownFigure(figsize=(2, 2))
    fig.subplots().plot([0, 1])
    assert fig._repr_png_().startswith(b"\x89PNG")


def test_table_shows_its_values_and_refuses_ragged_rows():
    t = Table(("engine", "pred_mae", "k-hat"), (("ep", 0.00123456, 0.4), ("em", 0.0058, None)), {"k-hat": 2},
              ("em: k-hat is null: a point estimate",))
    assert t.column("pred_mae") == [0.00123456, 0.0058]
    assert t.records()[1] == {"engine": "em", "pred_mae": 0.0058, "k-hat": None}
    md = t.to_markdown()
    assert "| ep | 0.0012 | 0.40 |" in md and "| em | 0.0058 | null |" in md and md.endswith("a point estimate")
    assert t.select(["k-hat", "engine"]).columns == ("k-hat", "engine")
    assert "0.40" in str(t) and t._repr_markdown_() == md
    with pytest.raises(ValueError, match="row 0 has 2 cells for 3 columns"):
        Table(("a", "b", "c"), ((1, 2),))
    with pytest.raises(KeyError, match="no column 'x'"):
        t.column("x")


def test_rank_summary_and_its_figure():
    """Ranks from a problem with a known answer: the exact posterior is calibrated, one too
    narrow by half is not; the figure marks where the failing curve leaves its band."""
    settings = SBCSettings(n_sims=100, n_draws=99)
    rng = np.random.default_rng(0)
    ranks = np.column_stack([conjugate_normal_ranks(rng, 100, 99, 1, **how)[:, 0]
                             for how in ({}, {"sd_factor": 0.5})])
    summary = rank_summary(ranks, ["exact", "sd x 0.5"], 99, settings=settings, model="conjugate normal",
                           engine="two engines")
    inside = {q.name: q.inside for q in summary.uniformity.quantities}
    assert summary.status == MISCALIBRATED and inside == {"exact": True, "sd x 0.5": False}
    fig = sbc_figure(summary)
    assert axis_label_problems(fig) == []
    failing_row = fig.axes[1]  # failing quantities come first: row 0, the PIT-ECDF panel
    assert any("outside the band" in t.get_text() for t in failing_row.texts)
    with pytest.raises(ValueError, match="integers from 0 to n_draws"):
        rank_summary(ranks + 0.5, ["a", "b"], 99)
    with pytest.raises(ValueError, match="one name per quantity"):
        rank_summary(ranks, ["a"], 99)


def test_battery_table_and_figure_from_the_stored_battery():
    path = REPOSITORY / "benchmarks" / "results" / "defect_battery.json"
    batteries = load_batteries(path)  # stored before batteries were stamped with a format: read as format 1
    stored = json.loads(path.read_text())
    assert {label: b.to_json() for label, b in batteries.items()} == {
        label: {"format": 1, **b} for label, b in stored.items()}  # read whole, nothing dropped
    table = battery_table(batteries)
    rows = table.records()
    first = batteries[next(iter(batteries))].rows[0]
    lo, hi = wilson_interval(first.detected, first.trials)
    assert rows[0]["verdict: flagged / trials (95% interval)"] == f"{first.detected}/{first.trials} ({lo:.2f}-{hi:.2f})"
    assert axis_label_problems(battery_figure(batteries)) == []


def test_wilson_interval():
    lo, hi = wilson_interval(0, 100)
    assert lo == 0.0 and 0.03 < hi < 0.04  # the rule of three's neighbourhood
    lo, hi = wilson_interval(50, 100)
    assert lo < 0.5 < hi and abs((lo + hi) / 2 - 0.5) < 1e-12
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


@pytest.mark.long
def test_engines_fitted_without_a_reference():
    """prepare_problem + fit_engines: the frozen posterior of a comparison and the engines'
    answers on it, with no reference sampled (what a practitioner without a gold standard
    has); the same posteriors compare() would fit."""
    from zoo.validation.runs.compare import CompareConfig, fit_engines, prepare_problem

    config = CompareConfig(model="pcvm", data="ripley", engines=("em", "ep"), params={"width": 0.7, "alpha": 10.0})
    problem = prepare_problem(config)
    assert problem.Phi_train.shape[0] == 250 and problem.Phi_test.shape[0] == 1000
    posteriors = fit_engines(config, problem)
    assert list(posteriors) == ["em", "ep"]
    assert posteriors["ep"].kind == "gaussian" and np.all(posteriors["ep"].sd_flat() > 0)
    p = np.asarray(posteriors["ep"].predict_proba(problem.Phi_test))
    assert np.mean((p > 0.5) != np.asarray(problem.y_test)) < 0.2  # Ripley's Bayes error is about 8%
    with pytest.raises(ValueError, match="has no engine 'vb'"):
        fit_engines(CompareConfig(model="pcvm", engines=("vb",), params={"width": 0.7, "alpha": 10.0}), problem)
