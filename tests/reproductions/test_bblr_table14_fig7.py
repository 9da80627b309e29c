"""`zoo reproduce bblr-table14` and `bblr-fig7` (Hasan & Pal, Table 14 and Fig. 7): tiny runs
end to end whose verdicts are recomputed here from the cells in table.json, the statistics of
Fig. 7 on curves whose answer is known, the nested subsets of a1a, and clear errors for bad
options."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from zoo import cli
from zoo import reproductions as reproduce
from zoo.validation.report.reproduction_report import write_reproduction_report
from zoo.reproductions import bblr_fig7, bblr_table14

QUIET = {"jobs": 1, "log": lambda msg: None}


def test_registry_and_help_list_both_entries(capsys):
    for name in ("bblr-table14", "bblr-fig7"):
        entry = reproduce.ENTRIES[name]
        assert entry.description and entry.default_sizes and entry.default_reps >= 2
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--help"])
    text = capsys.readouterr().out
    assert "bblr-table14" in text and "bblr-fig7" in text


def _paired(a: dict, b: dict) -> tuple[float, float]:
    """mean and standard error (ddof 1) of a[split] - b[split]."""
    d = np.array([a[s] - b[s] for s in sorted(a)])
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))


# ------------------------------------------------------------------------------------
# Table 14
# ------------------------------------------------------------------------------------
@pytest.mark.long
def test_table14_tiny_run_judges_the_claims_from_its_own_numbers_and_resumes(tmp_path):
    """Heart, 40 training points, two splits, one SVC grid point, KBBLR's lam chosen from two
    values: the table shows our errors beside "lost", every verdict is the paired test (or the
    sparsity share) recomputed here from the stored cells, and a rerun computes nothing."""
    name = "bblr-table14"
    tiny = {"data": "statlog_heart", "max_train": 40, "svm_c_grid": "1", "svm_width_grid": "2",
            "kbblr_lam_grid": "1,10"}
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=2, options=tiny), out=str(tmp_path), **QUIET)
    assert result.cells_computed == 2 * 3  # splits x (BBLR2, SVM, KBBLR)
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (tmp_path / name / "table.md").read_text()
    stored = json.loads((tmp_path / name / "table.json").read_text())
    assert stored["paper"] == "lost" and md.count("(lost)") == 3

    cells = stored["cells"]
    err = {m: {c["split"]: c["error"] for c in cells if c["method"] == m} for m in ("bblr2", "svm", "kbblr")}
    assert all(set(e) == {0, 1} for e in err.values())
    kb = [c for c in cells if c["method"] == "kbblr"]
    assert all(c["lam"] in (1.0, 10.0) and len(c["validation_errors"]) == 2 and c["n_train"] == 40 for c in kb)
    # our numbers are in the table: each method's mean error in percent, as printed
    row = stored["rows"][0]
    for m in ("bblr2", "svm", "kbblr"):
        assert f"{100 * np.mean(list(err[m].values())):.1f}" in md
        assert row["error"][m]["mean"] == pytest.approx(np.mean(list(err[m].values())))

    for m in ("kbblr", "bblr2"):
        mean, se = _paired(err[m], err["svm"])
        claim = stored["claims"][f"{m}/statlog_heart"]
        assert claim["difference"]["mean"] == pytest.approx(mean) and claim["difference"]["se"] == pytest.approx(se)
        assert claim["verdict"] == ("reproduced" if mean <= 2 * se else "NOT reproduced")
        assert claim["below"] == (mean < -2 * se)
        # Nadeau & Bengio's correction: sd sqrt(1 / J + n_test / n_train), J = 2 splits, 54 test / 40 training
        assert claim["corrected_se"] == pytest.approx(se * math.sqrt(2) * math.sqrt(1 / 2 + 54 / 40))
        assert f"**{claim['verdict']}**" in md
    share = np.mean([c["n_large"] for c in kb]) / 40
    assert stored["sparsity"]["verdict"] == ("reproduced" if share >= 0.5 else "NOT reproduced")
    # a Gaussian prior's mode: nonzero weights (the count the sparse prior's would be far below)
    assert all(c["n_nonzero"] >= c["n_large"] > 0 for c in kb)

    again = reproduce.run(reproduce.ReproductionConfig(name, reps=2, options=tiny), out=str(tmp_path), **QUIET)
    assert again.cells_computed == 0 and again.table["claims"] == result.table["claims"]


def test_table14_paired_rule_on_known_differences():
    """d = +1 point on every split is significantly above (se 0): NOT reproduced; d
    alternating around a small mean is not."""
    above = bblr_table14.favorable({"mean": 0.01, "se": 0.0})
    assert above["verdict"] == "NOT reproduced" and not above["below"]
    within = bblr_table14.favorable({"mean": 0.01, "se": 0.006})
    assert within["verdict"] == "reproduced" and not within["below"]
    below = bblr_table14.favorable({"mean": -0.03, "se": 0.01})
    assert below["verdict"] == "reproduced" and below["below"]


# ------------------------------------------------------------------------------------
# Fig. 7
# ------------------------------------------------------------------------------------
@pytest.mark.long
def test_fig7_tiny_run_judges_the_curves_from_its_own_counts(tmp_path):
    """a1a, sizes 30, 60, 120, a test set of 200, two repetitions, one SVC grid point: the
    verdicts are the slopes and fits recomputed here from the cells, and fig7.png is written."""
    name = "bblr-fig7"
    sizes = [30, 60, 120]
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=2, options={"sizes": "30,60,120", "n_test": 200, "svm_c_grid": "1", "svm_width_grid": "4"}), out=str(tmp_path), **QUIET)
    assert result.cells_computed == 2 * 3 * 2
    stored = json.loads((tmp_path / name / "table.json").read_text())
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (tmp_path / name / "table.md").read_text()
    png = (tmp_path / name / "fig7.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"

    cells = stored["cells"]
    count = {(c["method"], c["rep"], c["size"]): c["n_kernel"] for c in cells}
    assert all(0 < count[("svm", r, n)] <= n for r in (0, 1) for n in sizes)
    assert all(c["n_test"] == 200 for c in cells)
    slope = {m: [np.polyfit(np.log(sizes), np.log1p([count[(m, r, n)] for n in sizes]), 1)[0] for r in (0, 1)]
             for m in ("svm", "kbblr")}
    claims = stored["claims"]
    svm = np.array(slope["svm"])
    lower = svm.mean() - 2 * svm.std(ddof=1) / math.sqrt(2)
    assert claims["a"]["lower"] == pytest.approx(lower)
    assert claims["a"]["verdict"] == ("reproduced" if lower >= 0.8 else "NOT reproduced")
    d = svm - np.array(slope["kbblr"])
    assert claims["b"]["verdict"] == ("reproduced" if d.mean() > 2 * d.std(ddof=1) / math.sqrt(2)
                                      else "NOT reproduced")
    k = np.array([[count[("kbblr", r, n)] for n in sizes] for r in (0, 1)], float).ravel()
    x = np.tile(np.asarray(sizes, float), 2)
    rss = {name_: float(np.sum((k - np.polyval(np.polyfit(t, k, 1), t)) ** 2))
           for name_, t in (("log", np.log(x)), ("linear", x))}
    assert claims["c"]["fits"]["log"]["rss"] == pytest.approx(rss["log"], abs=1e-9)
    assert claims["c"]["fits"]["linear"]["rss"] == pytest.approx(rss["linear"], abs=1e-9)
    for c in ("a", "b", "c"):
        assert f"**{claims[c]['verdict']}**" in md
    # our counts are in the table
    for n in sizes:
        assert f"| {n} | {np.mean([count[('svm', r, n)] for r in (0, 1)]):.1f} (" in md


def test_fig7_statistics_on_curves_with_a_known_answer():
    """SVM counts n / 2 (slope 1) against KBBLR counts 3 ln n - 10 (a logarithm): (a), (b)
    and (c) reproduced. KBBLR counts equal to the SVM's (no slower): (b) and (c) not. KBBLR
    counts n / 20 (ten times sparser, but a line): (c) not. SVM counts 40 sqrt(n): (a) not."""
    sizes = [125, 250, 500, 1000]
    rng = np.random.default_rng(0)

    def noisy(f):  # three repetitions of the curve with +-1 jitter, so that standard errors exist
        return {r: [max(0, round(f(n) + rng.integers(-1, 2))) for n in sizes] for r in range(3)}

    svm = noisy(lambda n: n / 2)
    out = bblr_fig7.judge(sizes, {"svm": svm, "kbblr": noisy(lambda n: 3 * math.log(n) - 10)})
    assert abs(out["a"]["slope"]["mean"] - 1) < 0.02  # log1p shifts counts of 62..500 by < 2 %
    assert [out[c]["verdict"] for c in "abc"] == ["reproduced"] * 3
    out = bblr_fig7.judge(sizes, {"svm": svm, "kbblr": svm})
    assert out["b"]["difference"]["mean"] == 0
    assert [out[c]["verdict"] for c in "abc"] == ["reproduced", "NOT reproduced", "NOT reproduced"]
    assert bblr_fig7.judge(sizes, {"svm": svm, "kbblr": noisy(lambda n: n / 20)})["c"]["verdict"] == "NOT reproduced"
    # a slope well below 1 fails (a) however tight it is
    out = bblr_fig7.judge(sizes, {"svm": noisy(lambda n: 40 * n ** 0.5), "kbblr": noisy(lambda n: 5.0)})
    assert out["a"]["verdict"] == "NOT reproduced" and out["a"]["slope"]["mean"] < 0.6


def test_fig7_subsets_are_nested_stratified_and_disjoint_from_the_test_set():
    _, y = bblr_fig7.pool()
    sizes = [50, 100, 400]
    train, test = bblr_fig7.subsets(y, sizes, 1000, seed=0, rep=3)
    frac = np.mean(y)
    assert len(test) == 1000 and abs(np.mean(y[test]) - frac) < 1e-3 + 0.5 / 1000
    for small, big in zip(sizes, sizes[1:]):
        assert set(train[small]) < set(train[big])
    for n in sizes:
        assert len(set(train[n])) == n and not set(train[n]) & set(test)
        assert abs(np.sum(y[train[n]]) - n * frac) <= 0.5
    # a cell sees its own size alone: the same training set and test set
    alone, test_alone = bblr_fig7.subsets(y, [100], 1000, seed=0, rep=3)
    assert np.array_equal(alone[100], train[100]) and np.array_equal(test_alone, test)
    other, _ = bblr_fig7.subsets(y, sizes, 1000, seed=0, rep=4)
    assert not np.array_equal(other[50], train[50])


# ------------------------------------------------------------------------------------
# Bad options
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, reps, options, message", [
    ("bblr-table14", 1, {}, "--reps must be at least 2"),
    ("bblr-table14", 2, {"data": "heart"}, "--data must be comma-separated names"),
    ("bblr-table14", 2, {"kbblr_lam_grid": "1,-1"}, "--kbblr-lam-grid must be comma-separated positive"),
    ("bblr-fig7", 1, {}, "--reps must be at least 2"),
    ("bblr-fig7", 2, {"sizes": "200,100"}, "--sizes must be at least two increasing"),
    ("bblr-fig7", 2, {"sizes": "10,100"}, "each >= 25"),
    ("bblr-fig7", 2, {"sizes": "100"}, "at least two"),
    ("bblr-fig7", 2, {"n_test": 10}, "--n-test must be at least 50"),
    ("bblr-fig7", 2, {"sizes": "100,20000", "n_test": 20000}, "do not fit in the 32561 points"),
    ("bblr-fig7", 2, {"ab": "flat"}, "--ab must be one of counts, weak"),
])
def test_bad_options_are_refused_before_any_fit(tmp_path, name, reps, options, message):
    with pytest.raises(ValueError, match=message):
        reproduce.run(reproduce.ReproductionConfig(name, reps=reps, options=options), out=str(tmp_path), **QUIET)
    cells = tmp_path / name / "cells"
    assert not cells.exists() or not any(cells.iterdir())
