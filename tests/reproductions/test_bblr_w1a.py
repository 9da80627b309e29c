"""`zoo reproduce bblr-w1a` (reproductions/bblr_w1a.py): the McNemar p-value, the
tables rendered from hand-made cells (claim marks, no verdict against web8's numbers), one
real cell on the shipped data and its resume, and the options it refuses."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy import stats

from zoo import reproductions as reproduce
from zoo.reproductions import baselines, bblr_w1a

NAME = "bblr-w1a"


@pytest.mark.parametrize("b, c", [(27, 0), (10, 12), (40, 18), (3, 3), (0, 5)])
def test_mcnemar_p_is_the_chi_square_tail_of_the_statistic(b, c):
    assert baselines.mcnemar_p(b, c) == pytest.approx(stats.chi2.sf(baselines.mcnemar(b, c), df=1), rel=1e-12)


def _cell(method, wrong, n_test=100, **rec):
    base = {"lr": {"C": 1.0}, "svm": {"C": 0.1}, "bblr2": {"lam": 1.0, "converged": True},
            "bblr3": {"lam": 10.0, "eta0": 1.0, "step": 0.2, "converged": True}}[method]
    return {"method": method, "n_train": 50, "n_test": n_test, "wrong": sorted(wrong), "seconds": 0.5,
            **base, **rec}


def test_tables_mark_the_papers_claim_per_comparison_and_give_web8_no_verdict():
    y_test = np.r_[np.ones(10), np.zeros(90)]
    cells = {"lr": _cell("lr", range(1, 31)),             # 30 wrong, 27 of them BBLR3 gets right
             "svm": _cell("svm", []),                     # none wrong: better than BBLR3
             "bblr2": _cell("bblr2", range(5), converged=False),
             "bblr3": _cell("bblr3", {1, 2, 3})}
    out = bblr_w1a.render(cells, list(bblr_w1a.METHODS), [1.0, 10.0], y_test)
    md, js = out["markdown"], out["json"]
    # web8's numbers are shown for orientation: no "reproduced" verdict is given on other data
    assert "not comparable, no verdict" in md and re.findall(r"(?<!NOT )reproduced", md) == []
    assert "| LR | 30 | 30.00 (± 4.58) | 1.11 |" in md  # sqrt(0.3 * 0.7 / 100) = 4.58 %
    assert "SLA unconverged" in md and "lam = 10, eta0 = 1, S0 = 0.2" in md
    assert js["majority_error_percent"] == pytest.approx(10.0)
    tests = {t["against"]: t for t in js["mcnemar"]}
    assert (tests["lr"]["B"], tests["lr"]["C"]) == (27, 0) and tests["lr"]["claim_holds"]
    assert tests["lr"]["p"] == pytest.approx(stats.chi2.sf((27 - 1) ** 2 / 27, df=1))
    assert (tests["svm"]["B"], tests["svm"]["C"]) == (0, 3) and not tests["svm"]["claim_holds"]
    assert "NOT reproduced: the other method is better" in md
    assert [r["what"] for r in js["not_run"]] == ["webspam-unigrams"] and "**not run**" in md
    # without BBLR3 there is nothing to test against
    out = bblr_w1a.render({"lr": cells["lr"]}, ["lr"], [1.0], y_test)
    assert out["json"]["mcnemar"] == [] and "McNemar" not in out["markdown"]


def test_one_real_cell_on_the_shipped_split_and_its_resume(tmp_path):
    """LR alone (a few seconds): the predefined split's sizes, its test errors recomputed
    from the stored wrong points, and a rerun that fits nothing."""
    config = reproduce.ReproductionConfig(NAME, reps=1, options={"methods": "lr"})
    run = dict(out=str(tmp_path), jobs=1, log=lambda msg: None)
    first = reproduce.run(config, **run)
    assert first.cells_computed == 1
    table = json.loads((tmp_path / NAME / "table.json").read_text())
    assert (table["n_train"], table["n_test"]) == (2477, 47272)
    (row,) = table["test"]
    cell = json.loads(next((tmp_path / NAME / "cells").glob("*.json")).read_text())
    assert row["errors"] == len(cell["wrong"]) and row["percent"] == pytest.approx(100 * len(cell["wrong"]) / 47272)
    # better than predicting the majority class everywhere (w1a.t: 2.98 % positives)
    assert row["percent"] < table["majority_error_percent"]
    again = reproduce.run(config, **run)
    assert again.cells_computed == 0


def test_bad_options_are_named(tmp_path):
    with pytest.raises(ValueError, match="--reps must be 1"):
        reproduce.run(reproduce.ReproductionConfig(NAME, reps=2, options={"methods": "lr"}), out=str(tmp_path), jobs=1, log=lambda msg: None)
    with pytest.raises(ValueError, match="methods"):
        reproduce.run(reproduce.ReproductionConfig(NAME, reps=1, options={"methods": "nb"}), out=str(tmp_path), jobs=1, log=lambda msg: None)
