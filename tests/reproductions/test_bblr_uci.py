"""`zoo reproduce bblr-uci` (reproductions/bblr_uci.py): a tiny run's table, its
markers and resume; the CV folds; the two noise recipes; the McNemar statistic; bad options."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from zoo import reproductions as reproduce
from zoo.validation.report.reproduction_report import write_reproduction_report
from zoo.reproductions import baselines, bblr_uci

NAME = "bblr-uci"
TINY = {"data": "statlog_heart", "folds": 2, "lam_grid": "1", "noise": "far"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("bblr_uci")
    result = reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options=TINY), out=str(out), jobs=1, log=lambda msg: None)
    return out, result


@pytest.mark.long
def test_tiny_run_writes_every_table_beside_the_paper(tiny):
    out, result = tiny
    folder = out / NAME
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (folder / "table.md").read_text()
    table = json.loads((folder / "table.json").read_text())
    assert result.cells_computed == 1 + 2 * 2  # the training cell; clean and far x 2 folds
    assert table["conditions"] == ["clean", "far"] and table["n"] == {"statlog_heart": 270}
    # the paper's Heart numbers: Table 3 BBLR2, Table 5 BBLR3, Table 7 BBLR4, Table 8 noisy LR
    for number in ("| 26 |", "| 15.9 |", "| 15.2 |", "| 4.33 |"):
        assert number in md, number
    assert "PCS / CSA / BnB | not run" in md
    # the annealing endpoint is the zoo's, and the table says it departs from the paper's
    assert "**Departure: SLA's annealing ends at gamma = 4.**" in md and "`--gamma 200`" in md
    # the experiments without data say so, each with its reason
    assert [r["table"] for r in table["not_run"]] == ["9-10", "11-12", "13"]
    assert md.count("**not run** - ") == 3 and "w1a" in md
    verdicts = re.findall(r"NOT reproduced|(?<!NOT )reproduced", md)
    assert len(verdicts) >= 4 + 2 * 11  # Table 8's four rows, 11 paper numbers per test table
    rows = {(r["method"]): r for r in table["training"]}
    assert list(rows) == list(bblr_uci.TRAIN_METHODS)
    assert rows["bblr2"]["table3"]["paper"] == 26 and rows["sla"]["table1"]["paper"] == 27
    for cond in ("clean", "far"):
        assert [r["method"] for r in table["test"][cond]] == list(bblr_uci.TEST_METHODS)
    for r in table["test"]["clean"]:
        assert r["percent"] < 30  # every method is far better than guessing on clean Heart
        if r["paper_percent"] is None:
            assert r["verdict_percent"] == "not in this table"
            continue
        # the verdict is the one its own numbers give: the paper's percentage within our mean
        # +- 2 binomial standard errors (band_count is 2 sd of the count among n points)
        n = table["n"][r["data"]]
        inside = abs(r["percent"] - r["paper_percent"]) <= 100.0 * r["band_count"] / n
        assert r["verdict_percent"] == ("reproduced" if inside else "NOT reproduced"), r
    # the paper's tables against each other: the two cells that do not match, named
    bad = {(r["data"], r["method"]) for cond in ("clean", "noisy") for r in table["paper_consistency"][cond]
           if not r["consistent"]}
    assert bad == {("breast_wisconsin", "sla"), ("liver", "bblr2")}


@pytest.mark.long
def test_mcnemar_counts_are_the_cells_disagreements(tiny):
    out, _ = tiny
    table = json.loads((out / NAME / "table.json").read_text())
    cells = [json.loads(p.read_text()) for p in (out / NAME / "cells").glob("fold__*.json")]
    assert len(cells) == 4
    for row in table["mcnemar"]:
        cs = [c for c in cells if c["condition"] == row["condition"]]
        other = [set(c["methods"][row["other"]]["wrong"]) for c in cs]
        b3 = [set(c["methods"]["bblr3"]["wrong"]) for c in cs]
        assert row["B"] == sum(len(o - b) for o, b in zip(other, b3))
        assert row["C"] == sum(len(b - o) for o, b in zip(other, b3))
        assert row["chi2"] == pytest.approx(baselines.mcnemar(row["B"], row["C"]))


@pytest.mark.long
def test_noisy_points_are_training_points_and_the_rerun_fits_nothing(tiny):
    out, result = tiny
    y = bblr_uci.pool("statlog_heart")[1]
    folds = bblr_uci.cv_folds(y, 2, "statlog_heart", 0, 0)
    for path in (out / NAME / "cells").glob("fold__*.json"):
        c = json.loads(path.read_text())
        test = set(np.flatnonzero(folds == c["fold"]).tolist())
        assert c["n_test"] == len(test)
        if c["condition"] == "clean":
            assert c["noisy_points"] == []
        else:
            assert len(c["noisy_points"]) == round(0.1 * (270 - len(test)))
            assert not set(c["noisy_points"]) & test
        for m in bblr_uci.TEST_METHODS:
            assert set(c["methods"][m]["wrong"]) <= test
    again = reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options=TINY), out=str(out), jobs=1, log=lambda msg: None)
    assert again.cells_computed == 0 and again.cells_reused == result.cells_computed


def test_cv_folds_are_stratified_seeded_and_balanced():
    y = bblr_uci.pool("liver")[1]
    f = bblr_uci.cv_folds(y, 5, "liver", 3, 0)
    sizes = np.bincount(f, minlength=5)
    assert sizes.sum() == 345 and sizes.max() - sizes.min() <= 1
    for k in range(5):
        assert abs(y[f == k].sum() - y.mean() * sizes[k]) <= 1
    np.testing.assert_array_equal(f, bblr_uci.cv_folds(y, 5, "liver", 3, 0))
    assert not np.array_equal(f, bblr_uci.cv_folds(y, 5, "liver", 4, 0))
    assert not np.array_equal(f, bblr_uci.cv_folds(y, 5, "liver", 3, 1))
    assert [bblr_uci.pool(d)[1].size for d in bblr_uci.DATA] == [683, 270, 345, 768]


@pytest.mark.parametrize("recipe", ["flip", "far"])
def test_noise_recipes_change_exactly_a_tenth_and_copy_their_inputs(recipe):
    X, y = bblr_uci.pool("pima")
    X0, y0 = X.copy(), y.copy()
    Xn, yn, idx = bblr_uci.add_noise(X, y, recipe, seed=5)
    np.testing.assert_array_equal(X, X0)  # the caller's arrays are untouched
    np.testing.assert_array_equal(y, y0)
    assert idx.size == round(0.1 * y.size) == 77 and np.unique(idx).size == 77
    changed = np.flatnonzero(yn != y)
    np.testing.assert_array_equal(changed, idx)
    moved = np.flatnonzero(np.any(Xn != X, axis=1))
    if recipe == "flip":
        assert moved.size == 0
    else:
        # the same points as flip's, each moved to m + 10 (x - m)
        np.testing.assert_array_equal(idx, bblr_uci.add_noise(X, y, "flip", seed=5)[2])
        assert set(moved) <= set(idx) and moved.size >= 76  # a point sitting at the mean would not move
        m = X.mean(axis=0)
        np.testing.assert_allclose(Xn[idx], m + 10 * (X[idx] - m), rtol=1e-12)
        np.testing.assert_allclose(Xn[idx[:3]] - m, 10 * (X[idx[:3]] - m), rtol=1e-12)


def test_mcnemar_formula_and_bad_options():
    assert baselines.mcnemar(10, 2) == pytest.approx(49 / 12)
    assert baselines.mcnemar(0, 0) == 0.0 and baselines.mcnemar(3, 2) == 0.0
    with pytest.raises(ValueError, match="noise recipe must be one of flip, far"):
        bblr_uci.add_noise(np.zeros((4, 2)), np.array([0.0, 1, 0, 1]), "gauss", 0)
    with pytest.raises(ValueError, match="far_scale must be a finite number >= 1"):
        bblr_uci.add_noise(np.zeros((4, 2)), np.array([0.0, 1, 0, 1]), "far", 0, far_scale=0.5)
    with pytest.raises(ValueError, match="data must be one of"):
        bblr_uci.pool("heart")
    with pytest.raises(ValueError, match="--noise must be comma-separated names from flip, far"):
        reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options={"noise": "gauss"}), out="/nonexistent")
    with pytest.raises(ValueError, match="--data must be comma-separated names from breast_wisconsin"):
        reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options={"data": "heart"}), out="/nonexistent")
    for bad in ("0", "-4", "inf", "four"):
        with pytest.raises(ValueError, match="--gamma must be a positive number; got"):
            reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options={"gamma": bad}), out="/nonexistent")
    with pytest.raises(ValueError, match="--folds must lie in 2..20"):
        bblr_uci.cv_folds(np.tile([0.0, 1.0], 10), 1, "liver", 0, 0)


@pytest.mark.long
def test_the_annealing_endpoint_reaches_every_sla_fit_and_keeps_default_keys(tmp_path):
    """--gamma sets where SLA's stages end for SLA, BBLR1, BBLR2 and BBLR3 (each fit's spec
    has it and its last stage runs at it); at the default the cells' settings, and so their
    keys, are those of runs made before the option existed."""
    from zoo.inference import sla

    X, y = bblr_uci.pool("statlog_heart")
    fits = bblr_uci.fit_methods(X[:80], y[:80], [X[:80]], ("sla", "bblr1", "bblr2", "bblr3"), seed=0,
                                lam_grid=[1.0], gamma=200.0)
    assert {m: rec["gamma"] for m, rec in fits.items()} == dict.fromkeys(fits, 200.0)
    spec = bblr_uci.BBLR.from_counts(y[:80], gamma=200.0, lam=bblr_uci.LAM)
    Phi = np.column_stack([np.ones(80), (X[:80] - X[:80].mean(0)) / X[:80].std(0)])
    stages = sla.fit(spec, Phi, y[:80]).info.extra["stages"]
    assert [s["gamma"] for s in stages] == [2.0, 20.0, 200.0]

    seen = []
    entry = reproduce.ENTRIES[NAME]

    class Store:  # records the cells the entry asks for, computes none
        def run(self, tasks, what=""):
            seen.append(tasks)
            raise reproduce.CellsFailed([("stop", "recorded")], len(tasks))

    options = {o.name: o.parse(TINY.get(o.name, o.default)) for o in entry.options}
    for gamma in (bblr_uci.GAMMA, 200.0):
        ctx = reproduce.RunContext(entry=entry, reps=1, seed=0, options={**options, "gamma": gamma}, store=Store(),
                                   out_dir=str(tmp_path), log=lambda msg: None)
        with pytest.raises(reproduce.CellsFailed):
            bblr_uci.run_entry(ctx)
    default, paper = seen
    assert all("gamma" not in t.kwargs for t in default)
    assert all(t.kwargs["gamma"] == 200.0 for t in paper)
    assert not {t.key for t in default} & {t.key for t in paper}
