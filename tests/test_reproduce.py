"""`zoo reproduce`: the registry, a tiny run of each GGIG entry (tables with our numbers,
the paper's and the markers), resume without refitting, and clear errors."""
from __future__ import annotations

import json
import os
import re

import pytest

from zoo import cli
from zoo.validation import reproduce

ENTRY_NAMES = ("ggig-feature-selection", "ggig-table1", "ggig-table2")

# the smallest sizes that still exercise every code path (CV, selection, test, table)
TINY = {
    "ggig-feature-selection": {"n_train": "50", "n_relevant": "2,50", "n_test": 200, "q_grid": "0.5,2"},
    "ggig-table1": {"data": "cross", "width_grid": "1", "q_grid": "2", "gamma_grid": "1"},
    "ggig-table2": {"data": "thyroid", "select_splits": 1, "width_grid": "2", "q_grid": "2", "gamma_grid": "1",
                    "svm_c_grid": "1"},
}


def test_registry_lists_the_ggig_and_horii_entries(capsys):
    assert set(ENTRY_NAMES) | {"horii-table1", "horii-table2"} <= set(reproduce.ENTRIES)
    for name in ENTRY_NAMES:
        entry = reproduce.ENTRIES[name]
        assert entry.description and entry.default_sizes and entry.default_reps >= 1
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in ENTRY_NAMES)


@pytest.mark.parametrize("name", ENTRY_NAMES)
def test_tiny_run_writes_table_beside_the_paper_and_resumes(name, tmp_path):
    result = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **TINY[name])
    folder = tmp_path / name
    md = (folder / "table.md").read_text()
    table = json.loads((folder / "table.json").read_text())
    assert table["entry"] == name and table["settings"]["reps"] == 1
    assert result["cells_computed"] > 0 and result["cells_reused"] == 0
    # every entry marks its numbers; "reproduced" alone would also match "NOT reproduced"
    verdicts = re.findall(r"NOT reproduced|(?<!NOT )reproduced|not run", md)
    assert verdicts, "the table states no verdict"
    if name == "ggig-table1":
        assert "9.62" in md and "RVM" in md and "not run" in md       # the paper's cross GGIG error
        assert {r["method"] for r in table["rows"]} == {"ggig", "lap", "gj"}
    elif name == "ggig-table2":
        assert "4.00" in md and "4.98" in md                           # paper's GGIG and SVM on Thyroid
        assert {r["method"] for r in table["rows"]} == {"ggig", "lap", "gj", "svm"}
    else:
        assert "0.1" in md and "2.0" in md                             # paper's optimal q at n_f = 2 / 50
        assert {"q_rises/paper/N50", "ggig_lowest/paper", "ggig_lowest/default"} <= set(table["claims"])
        assert len(table["cells"]) == 2 * 2                            # 2 priors x (N = 50) x 2 n_f

    # a rerun over the same folder finds every cell and fits nothing
    cells = sorted((folder / "cells").glob("*.json"))
    stamps = {p: os.stat(p).st_mtime_ns for p in cells}
    again = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **TINY[name])
    assert again["cells_computed"] == 0 and again["cells_reused"] == result["cells_computed"]
    assert {p: os.stat(p).st_mtime_ns for p in sorted((folder / "cells").glob("*.json"))} == stamps


def test_cell_store_runs_missing_cells_in_spawned_workers(tmp_path):
    tasks = [reproduce.CellTask(f"t/{k}", "json:loads", {"s": "{\"k\": %d}" % k})
             for k in range(3)]
    store = reproduce.CellStore(str(tmp_path), jobs=2, log=lambda msg: None)
    assert store.get("t/0") is None
    out = store.run(tasks)
    assert [out[f"t/{k}"]["k"] for k in range(3)] == [0, 1, 2] and store.computed == 3
    again = reproduce.CellStore(str(tmp_path), jobs=2, log=lambda msg: None)
    again.run(tasks)
    assert again.computed == 0 and again.reused == 3


def test_unknown_entry_and_bad_arguments_give_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown reproduce entry 'nope'; available: ggig-feature-selection"):
        reproduce.run("nope", out=str(tmp_path))
    with pytest.raises(ValueError, match="--reps must be a positive integer; got 0"):
        reproduce.run("ggig-table1", out=str(tmp_path), reps=0)
    with pytest.raises(ValueError, match="--width-grid must be comma-separated positive numbers"):
        reproduce.run("ggig-table1", out=str(tmp_path), reps=1, width_grid="0,1")
    with pytest.raises(ValueError, match="has no option colour"):
        reproduce.run("ggig-table1", out=str(tmp_path), reps=1, colour="red")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reproduce", "nope"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "ggig-table1", "--reps", "0"])
    assert "--reps: must be a positive integer, got '0'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing is written before the arguments are checked


def test_horii_table1_tiny_run_marks_the_paper_numbers_and_resumes(tmp_path):
    """One repetition of Horii's synthetic design with a small test set: VB (paper and
    proper hyper-prior), L1- and L2-LR, the table beside the paper's Table 1."""
    name = "horii-table1"
    result = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, n_test=100)
    md = (tmp_path / name / "table.md").read_text()
    assert "0.1589" in md and "0.8195" in md and "0.3974" in md  # the paper's VB MSE / accuracy, L1 MSE
    assert result["cells_computed"] == 4
    methods = {r["method"]: r for r in result["rows"]}
    assert set(methods) == {"vb", "vb-proper", "l1", "l2"}
    assert all(0 < r["mse"]["mean"] < 5 and 0.5 < r["accuracy"]["mean"] <= 1 for r in methods.values())
    again = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, n_test=100)
    assert again["cells_computed"] == 0


@pytest.mark.slow
def test_horii_table2_runs_on_a1a(tmp_path):
    """a1a with its official test file (VB at the paper's prior runs ~3000 sweeps: slow tier)."""
    result = reproduce.run("horii-table2", out=str(tmp_path), jobs=1, log=lambda msg: None, data="a1a")
    rows = {r["method"]: r for r in result["rows"]}
    assert set(rows) == {"vb", "vb-proper", "l1", "l2"} and rows["vb"]["n_test"] == 30956
    md = (tmp_path / "horii-table2" / "table.md").read_text()
    assert "0.8400" in md and "covtype" in md and "not run" in md


def test_agreement_is_a_band_of_two_standard_errors_or_the_floor():
    from zoo.validation.reproduce.fitting import agreement

    stats = {"mean": 0.10, "se": 0.01, "sd": 0.05, "n": 25}
    assert agreement(stats, 0.115, floor=0.001)[0] == "reproduced"          # within 2 se = 0.02
    assert agreement(stats, 0.125, floor=0.001)[0] == "NOT reproduced"      # 0.025 > 0.02
    assert agreement(stats, 0.125, floor=0.03)[0] == "reproduced"           # the floor is wider
    verdict, text = agreement(stats, 12.5, floor=0.5, scale=100)            # percent scale
    assert verdict == "NOT reproduced" and text == "abs(10.00 − 12.50) > 2.00"
    assert agreement({"mean": 0.1, "se": None, "sd": None, "n": 1}, 0.35, floor=0.2)[0] == "NOT reproduced"
    assert agreement({"mean": None, "se": None, "sd": None, "n": 0}, 0.1, floor=0.1) == ("not run", "")


# ------------------------------------------------------------------------------------
# gridRVM (Kropotov, Vetrov, Wolf & Hassner): Fig. 3 on the ESL mixture, digits in place of LFW
# ------------------------------------------------------------------------------------
GRIDRVM_TINY = {
    # two noise values (so every claim has a k = 0 and a larger k), all three bases, few sweeps
    "gridrvm-fig3": {"noise": "0,1", "max_sweeps": 100},
    "gridrvm-digits": {"sizes": "30,60", "n_test": 300, "relevance_size": 60, "max_sweeps": 200},
}
GRIDRVM_MARKER = re.compile(r"→ \*\*(NOT reproduced|reproduced)\*\*")


def test_registry_lists_the_gridrvm_entries(capsys):
    for name in GRIDRVM_TINY:
        entry = reproduce.ENTRIES[name]
        assert entry.description and entry.default_sizes and entry.default_reps >= 1
    with pytest.raises(SystemExit):
        cli.main(["reproduce", "--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in GRIDRVM_TINY)


@pytest.mark.parametrize("name", sorted(GRIDRVM_TINY))
def test_gridrvm_tiny_run_marks_every_claim_and_resumes(name, tmp_path):
    result = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **GRIDRVM_TINY[name])
    folder = tmp_path / name
    md = (folder / "table.md").read_text()
    table = json.loads((folder / "table.json").read_text())
    assert table["entry"] == name and table["settings"]["reps"] == 1
    assert result["cells_computed"] > 0 and result["cells_reused"] == 0
    assert table["stopping_rule"]["max_sweeps"] == GRIDRVM_TINY[name]["max_sweeps"]
    if name == "gridrvm-fig3":
        assert result["cells_computed"] == 3 * 3 * 2                   # bases x methods x noise values
        assert {(r["basis"], r["method"], r["noise"]) for r in table["rows"]} == {
            (b, m, k) for b in ("linear", "rbf", "per-dimension-rbf") for m in ("rvm", "p-grid", "s-grid")
            for k in (0, 1)}
        for r in table["rows"]:
            assert 0 <= r["test_error"]["mean"] <= 1 and r["n"] == 1
            shape = {"linear": [2 + r["noise"], 1], "rbf": [200, 1],
                     "per-dimension-rbf": [2 + r["noise"], 200]}[r["basis"]]
            assert r["table_shape"] == shape and r["weights"] == shape[0] * shape[1]
        assert set(table["claims"]) == {"a", "b", "d", "e"}
        assert all(c["verdict"] in ("reproduced", "NOT reproduced") for c in table["claims"].values())
        assert len(GRIDRVM_MARKER.findall(md)) == 4                    # one marker per claim
        assert "Criterion:" in md and "read off its text" in md and "stopped on the 100-sweep cap" in md
        assert (folder / "fig3.png").stat().st_size > 0
    else:
        assert "LFW: not run" in md and table["lfw"] == "not run"
        assert {(r["method"], r["prior"], r["size"]) for r in table["rows"]} == {
            (m, p, n) for n in (30, 60) for m, p in [(m, p) for p in ("paper", "proper")
                                                   for m in ("rvm", "p-grid", "s-grid")] + [("svm", None), ("l1", None)]}
        assert all(r["test_error"]["mean"] < 0.5 for r in table["rows"])  # better than guessing
        assert {p: c["verdict"] in ("reproduced", "NOT reproduced") for p, c in table["claims"].items()} == {
            "paper": True, "proper": True}
        assert len(GRIDRVM_MARKER.findall(md)) == 2                    # one marker per hyper-prior
        assert "tested in spirit only" in md
        for figure in ("learning_curve.png", "relevance.png"):
            assert (folder / figure).stat().st_size > 0

    # a rerun over the same folder finds every cell and fits nothing
    cells = sorted((folder / "cells").glob("*.json"))
    stamps = {p: os.stat(p).st_mtime_ns for p in cells}
    again = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **GRIDRVM_TINY[name])
    assert again["cells_computed"] == 0 and again["cells_reused"] == result["cells_computed"]
    assert {p: os.stat(p).st_mtime_ns for p in sorted((folder / "cells").glob("*.json"))} == stamps
    assert again["claims"] == table["claims"]


def test_gridrvm_bad_options_are_refused(tmp_path, capsys):
    fig3 = "gridrvm-fig3"
    for bad in ("0,-2", "2.5", "0,51", ""):
        with pytest.raises(ValueError, match="--noise must be comma-separated integers from 0 to 50"):
            reproduce.run(fig3, out=str(tmp_path), reps=1, noise=bad)
    with pytest.raises(ValueError, match="--bases must be comma-separated names from linear, rbf, per-dimension-rbf"):
        reproduce.run(fig3, out=str(tmp_path), reps=1, bases="linear,quadratic")
    with pytest.raises(ValueError, match="--max-sweeps must be a positive integer"):
        reproduce.run(fig3, out=str(tmp_path), reps=1, max_sweeps=0)
    assert not any(tmp_path.iterdir())  # option errors come before anything is written
    assert cli.main(["reproduce", fig3, "--noise", "-1", "--out", str(tmp_path)]) == 2
    assert "--noise must be comma-separated integers from 0 to 50; got '-1'" in capsys.readouterr().err

    digits = "gridrvm-digits"
    with pytest.raises(ValueError, match="--sizes must all be at least 10"):
        reproduce.run(digits, out=str(tmp_path), reps=1, sizes="6,60", relevance_size=60)
    with pytest.raises(ValueError, match="--relevance-size must be one of the --sizes"):
        reproduce.run(digits, out=str(tmp_path), reps=1, sizes="30,60")
    with pytest.raises(ValueError, match="exceeds the 1797 digit images"):
        reproduce.run(digits, out=str(tmp_path), reps=1, sizes="30,1500", relevance_size=30)
    assert not list(tmp_path.glob("*/cells/*.json"))  # no fit ran


def test_gridrvm_noise_is_nested_and_digits_splits_are_nested_stratified_and_disjoint():
    import numpy as np

    from zoo.data import noise_features as datasets_noise
    from zoo.validation.reproduce import gridrvm

    five, thirty = datasets_noise(7, 5, 40), datasets_noise(7, 30, 40)
    assert five.shape == (40, 5) and np.array_equal(five, thirty[:, :5])          # k = 5 is part of k = 30
    assert not np.allclose(datasets_noise(8, 5, 40), five)                 # a new repetition, new noise
    assert datasets_noise(7, 0, 40).shape == (40, 0)

    _, y = gridrvm.digits_pool()
    assert y.size == 1797
    small_train, small_test = gridrvm.digits_indices(y, 60, 797, 3)
    large_train, large_test = gridrvm.digits_indices(y, 1000, 797, 3)
    assert np.array_equal(small_test, large_test) and small_test.size == 797       # one test set per repetition
    assert set(small_train) <= set(large_train) and large_train.size == 1000       # nested training sets
    assert not set(large_train) & set(large_test)
    assert abs(y[small_train].mean() - y.mean()) < 1 / 60                          # stratified
    other_train, _ = gridrvm.digits_indices(y, 60, 797, 4)
    assert not np.array_equal(other_train, small_train)


# ------------------------------------------------------------------------------------
# Sparse kernel BBLR (Hasan & Pal, Table 15)
# ------------------------------------------------------------------------------------
def test_bblr_kernel_tiny_run_marks_the_paper_counts_and_resumes(tmp_path):
    """Heart and Liver with 60 training points, one split, one SVC grid point: every count
    gets a marker beside the paper's (85 / 148 on Heart), the claim a verdict per data set
    and a, b rule, and a rerun computes nothing."""
    name = "bblr-kernel"
    tiny = {"data": "statlog_heart,liver", "max_train": 60, "svm_c_grid": "1", "svm_width_grid": "2"}
    result = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **tiny)
    md = (tmp_path / name / "table.md").read_text()
    assert result["cells_computed"] == 2 * 3  # data x (svm, kbblr counts, kbblr weak)
    rows = {(r["data"], r["method"]): r for r in result["rows"]}
    assert set(rows) == {(d, m) for d in ("statlog_heart", "liver") for m in ("svm", "kbblr-counts", "kbblr-weak")}
    assert rows[("statlog_heart", "svm")]["paper_count"] == 148 and rows[("liver", "kbblr-weak")]["paper_count"] == 111
    for r in rows.values():
        assert r["n_train"] == 60 and 0 <= r["error"]["mean"] <= 1
        assert r["verdict_count"] in ("reproduced", "NOT reproduced")
    svm = [c for c in result["cells"] if c["method"] == "svm"]
    assert all(c["C"] == 1.0 and c["width"] == pytest.approx(2.0) and 0 < c["n_kernel"] <= 60 for c in svm)
    assert set(result["claims"]) == {f"kbblr-{ab}/{d}" for ab in ("counts", "weak") for d in ("statlog_heart", "liver")}
    # a count verdict per row, a ratio verdict per KBBLR row, a claim per KBBLR row, one overall per a, b rule
    assert len(re.findall(r"\*\*(?:NOT reproduced|reproduced)\*\*", md)) == 6 + 4 + 4 + 2
    assert "148" in md and "85" in md and "lost" in md
    again = reproduce.run(name, out=str(tmp_path), reps=1, jobs=1, log=lambda msg: None, **tiny)
    assert again["cells_computed"] == 0 and again["claims"] == result["claims"]
