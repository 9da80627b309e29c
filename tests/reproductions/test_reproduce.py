"""`zoo reproduce`: the registry, a tiny run of each GGIG entry (tables with our numbers,
the paper's and the markers), resume without refitting, and clear errors."""
from __future__ import annotations

import contextlib
import json
import os
import re

import pytest
from processes import driver_text, signal_and_watch, start_driver, wait_until

from zoo import cli
from zoo import reproductions as reproduce
from zoo.validation.report.reproduction_report import write_reproduction_report

from repository import REPO

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
@pytest.mark.long
def test_tiny_run_writes_table_beside_the_paper_and_resumes(name, tmp_path):
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=TINY[name]), out=str(tmp_path), jobs=1, log=lambda msg: None)
    folder = tmp_path / name
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (folder / "table.md").read_text()
    table = json.loads((folder / "table.json").read_text())
    assert table["entry"] == name and table["settings"]["reps"] == 1
    assert reproduce.ReproductionResult.from_json(table) == result  # table.json reads back as the result
    assert result.cells_computed > 0 and result.cells_reused == 0
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
    again = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=TINY[name]), out=str(tmp_path), jobs=1, log=lambda msg: None)
    assert again.cells_computed == 0 and again.cells_reused == result.cells_computed
    assert {p: os.stat(p).st_mtime_ns for p in sorted((folder / "cells").glob("*.json"))} == stamps


@pytest.mark.long
def test_cell_store_runs_missing_cells_on_a_dask_cluster(tmp_path):
    tasks = [reproduce.CellTask(f"t/{k}", "json:loads", {"s": "{\"k\": %d}" % k})
             for k in range(3)]
    with reproduce.CellStore(str(tmp_path), jobs=2, log=lambda msg: None) as store:
        assert store.get("t/0") is None
        out = store.run(tasks)
        # the cluster is started once and kept for the entry's next batch of cells
        cluster = store._client.cluster
        assert len(cluster.workers) == 2
        more = store.run([reproduce.CellTask("u/0", "json:loads", {"s": "{}"}),
                          reproduce.CellTask("u/1", "json:loads", {"s": "{\"u\": 1}"})])
        assert store._client.cluster is cluster
    assert cluster.status.name == "closed"  # leaving the store stops its workers
    assert [out[f"t/{k}"]["k"] for k in range(3)] == [0, 1, 2] and store.computed == 5
    assert set(more) == {"u/0", "u/1"}
    with reproduce.CellStore(str(tmp_path), jobs=2, log=lambda msg: None) as again:
        again.run(tasks)
    assert again.computed == 0 and again.reused == 3 and again._client is None  # no cluster for no work


def test_damaged_cell_files_are_named_and_recomputed(tmp_path):
    """Invalid JSON (a cell cut off by a full disk, an editor), a JSON not signed with this
    user's key (a hand edit) and a signed JSON that is no finished cell ({}) are each named
    in a warning and computed again, not fatal."""
    from zoo.validation.base.signing import REPRODUCTION_CELL, write_signed_json

    tasks = [reproduce.CellTask(f"t/{k}", "json:loads", {"s": "{\"k\": %d}" % k}) for k in range(4)]
    with reproduce.CellStore(str(tmp_path), jobs=1, log=lambda msg: None) as store:
        store.run(tasks)
    cut, edited, empty = store.path("t/0"), store.path("t/1"), store.path("t/2")
    with open(cut, "w") as fh:
        fh.write("")
    record = json.loads(open(edited).read())
    record["k"] = 99
    with open(edited, "w") as fh:
        json.dump(record, fh)
    write_signed_json({}, empty, REPRODUCTION_CELL)
    with pytest.warns(UserWarning) as caught:
        with reproduce.CellStore(str(tmp_path), jobs=1, log=lambda msg: None) as again:
            out = again.run(tasks)
    messages = [str(w.message) for w in caught]
    assert any(cut in m and "Expecting value" in m for m in messages), messages
    assert any(edited in m and "signature does not match" in m for m in messages), messages
    assert any(empty in m and "cell_seconds" in m for m in messages), messages
    assert again.computed == 3 and again.reused == 1
    assert [out[f"t/{k}"]["k"] for k in range(4)] == [0, 1, 2, 3]
    assert json.loads(open(empty).read())["k"] == 2  # the damaged file is replaced


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.long
def test_a_failing_cell_is_named_and_the_others_are_kept(jobs, tmp_path):
    """One cell whose function raises (bad JSON: a ValueError) among three: the other two
    run and are stored, the error names the cell and its reason in one line, and the next
    run computes only the cell that failed."""
    tasks = [reproduce.CellTask("t/0", "json:loads", {"s": "{\"k\": 0}"}),
             reproduce.CellTask("t/bad", "json:loads", {"s": "{not json"}),
             reproduce.CellTask("t/2", "json:loads", {"s": "{\"k\": 2}"})]
    lines = []
    with reproduce.CellStore(str(tmp_path), jobs=jobs, log=lines.append) as store:
        with pytest.raises(reproduce.CellsFailed) as failed:
            store.run(tasks)
    assert failed.value.failed == [("t/bad", "JSONDecodeError: Expecting property name enclosed in double quotes: "
                                             "line 1 column 2 (char 1)")]
    assert failed.value.total == 3 and store.failed == failed.value.failed
    assert "  cell t/bad failed: JSONDecodeError: Expecting property name" in "\n".join(lines)
    assert store.computed == 2 and store.get("t/0")["k"] == 0 and store.get("t/2")["k"] == 2
    assert store.get("t/bad") is None  # not stored: the next run tries it again
    fixed = [t if t.key != "t/bad" else t._replace(kwargs={"s": "{\"k\": 1}"}) for t in tasks]
    with reproduce.CellStore(str(tmp_path), jobs=1, log=lambda msg: None) as again:
        out = again.run(fixed)
    assert again.computed == 1 and again.reused == 2 and [out[t.key]["k"] for t in fixed] == [0, 1, 2]


@pytest.mark.long
def test_a_reproduce_run_with_a_failing_cell_writes_why_and_exits_1(tmp_path, monkeypatch, capsys):
    """ggig-table1 at its tiny sizes has three cells (ggig, lap, gj on one split); the gj
    fit is made to raise. The run finishes the other two (kept on disk), writes table.md
    and table.json saying which cell failed and why, and `zoo reproduce` exits 1 at the
    end; once the cell works, the same command completes from the kept cells."""
    from zoo.reproductions import ggig

    kernel_cell = ggig.kernel_cell

    def gj_breaks(**kw):
        if kw["method"] == "gj":
            raise FloatingPointError("a planted failure of the gj fit")
        return kernel_cell(**kw)

    monkeypatch.setattr(ggig, "kernel_cell", gj_breaks)
    argv = ["reproduce", "ggig-table1", "--out", str(tmp_path), "--reps", "1", "--jobs", "1", "--no-progress"] + [
        f"--{k.replace('_', '-')}={v}" for k, v in TINY["ggig-table1"].items()]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert re.search(r"zoo reproduce ggig-table1: cell failed: t1/cross/split000/gj/\w+: FloatingPointError: a "
                     r"planted failure of the gj fit", captured.err), captured.err
    folder = tmp_path / "ggig-table1"
    table = json.loads((folder / "table.json").read_text())
    assert table["complete"] is False and len(table["failed"]) == 1
    assert table["failed"][0]["reason"] == "FloatingPointError: a planted failure of the gj fit"
    assert "NOT COMPLETE: 1 of 3 cells of a step failed" in (folder / "table.md").read_text()
    assert table["cells_computed"] == 2 and len(list((folder / "cells").glob("*.json"))) == 2

    monkeypatch.setattr(ggig, "kernel_cell", kernel_cell)
    assert cli.main(argv) == 0
    table = json.loads((folder / "table.json").read_text())
    assert "complete" not in table and table["cells_computed"] == 1 and table["cells_reused"] == 2
    # the table says where it was computed (the CLI's --device, auto: the CPU here)
    assert table["device"].startswith("cpu") and "Computed on: cpu" in (folder / "table.md").read_text()


def test_reproduce_progress_has_an_eta(tmp_path, capsys):
    tasks = [reproduce.CellTask(f"t/{k}", "json:loads", {"s": "{}"}) for k in range(3)]
    lines = []
    with reproduce.CellStore(str(tmp_path / "a"), jobs=1, log=lines.append) as store:
        store.run(tasks, "tiny cells")
    assert lines[0] == "tiny cells: 3 to compute, 0 found on disk"
    assert re.fullmatch(r"  tiny cells: 3/3 done \(elapsed \d+ s, ETA 0 s\)", lines[-1])
    with reproduce.CellStore(str(tmp_path / "b"), jobs=1, log=lines.append, progress=True) as store:
        store.run(tasks, "tiny cells")
    bar = capsys.readouterr().err
    # tqdm's bar: count, elapsed<remaining
    assert "tiny cells" in bar and "3/3" in bar and re.search(r"\[\d\d:\d\d<\d\d:\d\d", bar), bar


def test_unknown_entry_and_bad_arguments_give_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown reproduce entry 'nope'; available: ggig-feature-selection"):
        reproduce.run(reproduce.ReproductionConfig("nope"), out=str(tmp_path))
    with pytest.raises(ValueError, match="--reps must be a positive integer; got 0"):
        reproduce.run(reproduce.ReproductionConfig("ggig-table1", reps=0), out=str(tmp_path))
    with pytest.raises(ValueError, match="--width-grid must be comma-separated positive numbers"):
        reproduce.run(reproduce.ReproductionConfig("ggig-table1", reps=1, options={"width_grid": "0,1"}), out=str(tmp_path))
    with pytest.raises(ValueError, match="has no option colour"):
        reproduce.run(reproduce.ReproductionConfig("ggig-table1", reps=1, options={"colour": "red"}), out=str(tmp_path))
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
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options={"n_test": 100}), out=str(tmp_path), jobs=1, log=lambda msg: None)
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (tmp_path / name / "table.md").read_text()
    assert "0.1589" in md and "0.8195" in md and "0.3974" in md  # the paper's VB MSE / accuracy, L1 MSE
    assert result.cells_computed == 4
    methods = {r["method"]: r for r in result.table["rows"]}
    assert set(methods) == {"vb", "vb-proper", "l1", "l2"}
    assert all(0 < r["mse"]["mean"] < 5 and 0.5 < r["accuracy"]["mean"] <= 1 for r in methods.values())
    again = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options={"n_test": 100}), out=str(tmp_path), jobs=1, log=lambda msg: None)
    assert again.cells_computed == 0


@pytest.mark.slow
def test_horii_table2_runs_on_a1a(tmp_path):
    """a1a with its official test file (slow tier: L1- and L2-LR by cross-validation and VB
    at two priors on 1605 x 123, scored on 30956 test points)."""
    result = reproduce.run(reproduce.ReproductionConfig("horii-table2", options={"data": "a1a"}), out=str(tmp_path), jobs=1, log=lambda msg: None)
    rows = {r["method"]: r for r in result.table["rows"]}
    assert set(rows) == {"vb", "vb-proper", "l1", "l2"} and rows["vb"]["n_test"] == 30956
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (tmp_path / "horii-table2" / "table.md").read_text()
    assert "0.8400" in md and "covtype" in md and "not run" in md


def test_agreement_is_a_band_of_two_standard_errors_or_the_floor():
    from zoo.reproductions.fitting import agreement

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


# Fig. 3's tiny run fits 18 cells (3 bases x 3 priors x 2 noise values), each its own
# compilation: slow tier; the digits entry's tiny run (about 25 s) keeps the gridRVM
# reproduce path (cell store, claims, markers, resume) in the long tier
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow if n == "gridrvm-fig3" else pytest.mark.long)
                                  for n in sorted(GRIDRVM_TINY)])
def test_gridrvm_tiny_run_marks_every_claim_and_resumes(name, tmp_path):
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=GRIDRVM_TINY[name]), out=str(tmp_path), jobs=1, log=lambda msg: None)
    folder = tmp_path / name
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (folder / "table.md").read_text()
    table = json.loads((folder / "table.json").read_text())
    assert table["entry"] == name and table["settings"]["reps"] == 1
    assert result.cells_computed > 0 and result.cells_reused == 0
    assert table["stopping_rule"]["max_sweeps"] == GRIDRVM_TINY[name]["max_sweeps"]
    if name == "gridrvm-fig3":
        assert result.cells_computed == 3 * 3 * 2                   # bases x methods x noise values
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
    again = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=GRIDRVM_TINY[name]), out=str(tmp_path), jobs=1, log=lambda msg: None)
    assert again.cells_computed == 0 and again.cells_reused == result.cells_computed
    assert {p: os.stat(p).st_mtime_ns for p in sorted((folder / "cells").glob("*.json"))} == stamps
    assert again.to_json()["claims"] == table["claims"]  # table: the JSON stored by the first run


def test_gridrvm_bad_options_are_refused(tmp_path, capsys):
    fig3 = "gridrvm-fig3"
    for bad in ("0,-2", "2.5", "0,51", ""):
        with pytest.raises(ValueError, match="--noise must be comma-separated integers from 0 to 50"):
            reproduce.run(reproduce.ReproductionConfig(fig3, reps=1, options={"noise": bad}), out=str(tmp_path))
    with pytest.raises(ValueError, match="--bases must be comma-separated names from linear, rbf, per-dimension-rbf"):
        reproduce.run(reproduce.ReproductionConfig(fig3, reps=1, options={"bases": "linear,quadratic"}), out=str(tmp_path))
    with pytest.raises(ValueError, match="--max-sweeps must be a positive integer"):
        reproduce.run(reproduce.ReproductionConfig(fig3, reps=1, options={"max_sweeps": 0}), out=str(tmp_path))
    assert not any(tmp_path.iterdir())  # option errors come before anything is written
    assert cli.main(["reproduce", fig3, "--noise", "-1", "--out", str(tmp_path)]) == 2
    assert "--noise must be comma-separated integers from 0 to 50; got '-1'" in capsys.readouterr().err

    digits = "gridrvm-digits"
    with pytest.raises(ValueError, match="--sizes must all be at least 10"):
        reproduce.run(reproduce.ReproductionConfig(digits, reps=1, options={"sizes": "6,60", "relevance_size": 60}), out=str(tmp_path))
    with pytest.raises(ValueError, match="--relevance-size must be one of the --sizes"):
        reproduce.run(reproduce.ReproductionConfig(digits, reps=1, options={"sizes": "30,60"}), out=str(tmp_path))
    with pytest.raises(ValueError, match="exceeds the 1797 digit images"):
        reproduce.run(reproduce.ReproductionConfig(digits, reps=1, options={"sizes": "30,1500", "relevance_size": 30}), out=str(tmp_path))
    assert not list(tmp_path.glob("*/cells/*.json"))  # no fit ran


def test_gridrvm_noise_is_nested_and_digits_splits_are_nested_stratified_and_disjoint():
    import numpy as np

    from zoo.data import noise_features as datasets_noise
    from zoo.reproductions import gridrvm

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
@pytest.mark.long
def test_bblr_kernel_tiny_run_marks_the_paper_counts_and_resumes(tmp_path):
    """Heart and Liver with 60 training points, one split, one SVC grid point: every count
    gets a marker beside the paper's (85 / 148 on Heart), the claim a verdict per data set
    and a, b rule, and a rerun computes nothing."""
    name = "bblr-kernel"
    tiny = {"data": "statlog_heart,liver", "max_train": 60, "svm_c_grid": "1", "svm_width_grid": "2"}
    result = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=tiny), out=str(tmp_path), jobs=1, log=lambda msg: None)
    write_reproduction_report(result)  # the report wing writes table.md from the result
    md = (tmp_path / name / "table.md").read_text()
    assert result.cells_computed == 2 * 3  # data x (svm, kbblr counts, kbblr weak)
    rows = {(r["data"], r["method"]): r for r in result.table["rows"]}
    assert set(rows) == {(d, m) for d in ("statlog_heart", "liver") for m in ("svm", "kbblr-counts", "kbblr-weak")}
    assert rows[("statlog_heart", "svm")]["paper_count"] == 148 and rows[("liver", "kbblr-weak")]["paper_count"] == 111
    for r in rows.values():
        assert r["n_train"] == 60 and 0 <= r["error"]["mean"] <= 1
        assert r["verdict_count"] in ("reproduced", "NOT reproduced")
    svm = [c for c in result.table["cells"] if c["method"] == "svm"]
    assert all(c["C"] == 1.0 and c["width"] == pytest.approx(2.0) and 0 < c["n_kernel"] <= 60 for c in svm)
    assert set(result.table["claims"]) == {f"kbblr-{ab}/{d}" for ab in ("counts", "weak") for d in ("statlog_heart", "liver")}
    # a count verdict per row, a ratio verdict per KBBLR row, a claim per KBBLR row, one overall per a, b rule
    assert len(re.findall(r"\*\*(?:NOT reproduced|reproduced)\*\*", md)) == 6 + 4 + 4 + 2
    assert "148" in md and "85" in md and "lost" in md
    again = reproduce.run(reproduce.ReproductionConfig(name, reps=1, options=tiny), out=str(tmp_path), jobs=1, log=lambda msg: None)
    assert again.cells_computed == 0 and again.table["claims"] == result.table["claims"]


# ------------------------------------------------------------------------------------
# Seeds: two clean runs give the same numbers
# ------------------------------------------------------------------------------------
def test_regularized_lr_takes_the_run_seed_not_numpys_global_state():
    """liblinear's L1 solver visits coordinates in a random order; unseeded it drew from
    numpy's global generator, so two clean runs differed (~1e-4 here)."""
    import numpy as np

    from zoo.reproductions.baselines import regularized_lr

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 6))
    y = (X[:, 0] + 0.5 * rng.normal(size=80) > 0).astype(float)
    fits = []
    for global_seed in (1, 2):
        np.random.seed(global_seed)  # what differs between two fresh processes
        fits.append(regularized_lr(X, y, True, True, seed=3))
    assert np.array_equal(fits[0][0], fits[1][0]) and fits[0][1:] == fits[1][1:]


UNSEEDED = [
    # numpy's legacy global generator: its state differs between processes
    re.compile(r"np\.random\.(rand|randn|randint|random|choice|permutation|shuffle|normal|uniform|seed)\("),
    re.compile(r"default_rng\(\s*\)"),
    # scikit-learn estimators that draw random numbers, built without random_state
    re.compile(r"\b(LogisticRegression|LogisticRegressionCV|LinearSVC|SGDClassifier|RandomForestClassifier)\("
               r"(?![^)]*random_state)[^)]*solver=\"(liblinear|saga|sag)\""),
    re.compile(r"\b(LinearSVC|SGDClassifier|RandomForestClassifier|KFold|StratifiedKFold)\((?![^)]*random_state)"
               r"[^)]*(shuffle=True|max_iter|n_estimators|C=)"),
    re.compile(r"train_test_split\((?![^)]*random_state)[^)]*\)"),
]


def test_no_unseeded_random_draws_in_reproductions_and_benchmarks():
    """Every stochastic piece of reproductions/ and benchmarks/ takes a seed (the
    patterns: numpy's global generator, scikit-learn solvers and splitters that shuffle)."""
    root = str(REPO)
    offenders = []
    for folder in ("reproductions/", "benchmarks"):
        for name in sorted(os.listdir(os.path.join(root, folder))):
            if not name.endswith(".py"):
                continue
            text = open(os.path.join(root, folder, name)).read()
            # calls spread over lines are joined, so a random_state on the next line counts
            flat = re.sub(r"\s*\n\s*", " ", text)
            offenders += [f"{folder}/{name}: {m.group(0)}" for pattern in UNSEEDED for m in pattern.finditer(flat)]
    assert not offenders, offenders


# ------------------------------------------------------------------------------------
# A killed or interrupted run stops its workers (real processes, a test-only entry)
# ------------------------------------------------------------------------------------
TINY_CELLS = '''
import os, time

from zoo.reproductions import CellTask


def cell(i, slow, marker_dir):
    # the worker's pid, so the test can watch it; a slow cell then computes for minutes
    # in one C call that holds the GIL, where no Python thread of the worker can run
    # (Dask's own watch of its driver is such a thread)
    open(os.path.join(marker_dir, f"{'slow' if slow else 'fast'}-{i}-{os.getpid()}"), "w").close()
    if slow:
        3 ** (10 ** 9)
    return {"i": i}


def run_entry(ctx):
    markers = os.path.join(ctx.out_dir, "markers")
    os.makedirs(markers, exist_ok=True)
    ctx.store.run([CellTask(f"fast/{i}", "tinycells:cell", {"i": i, "slow": False, "marker_dir": markers})
                   for i in range(2)], "fast cells")
    ctx.store.run([CellTask(f"slow/{i}", "tinycells:cell", {"i": i, "slow": True, "marker_dir": markers})
                   for i in range(2)], "slow cells")
    return {"markdown": "", "json": {}}
'''

TINY_DRIVER = '''
import sys

if __name__ == "__main__":  # the cluster's workers are spawned: they must not rerun this
    # AS FROM A TERMINAL
    from zoo import reproductions as reproduce

    reproduce.ENTRIES["tiny-kill"] = reproduce.Entry("tiny-kill", "test-only", 1, "-", (), "tinycells:run_entry")
    from zoo.cli import main

    sys.exit(main(["reproduce", "tiny-kill", "--out", sys.argv[1], "--jobs", "2", "--no-progress"]))
'''


KILLS = [pytest.param("SIGINT", id="ctrl-c", marks=pytest.mark.long),
         pytest.param("SIGKILL", id="kill-9", marks=pytest.mark.slow),
         pytest.param("SIGTERM", id="sigterm", marks=pytest.mark.slow)]


@pytest.mark.parametrize("signame", KILLS)
def test_a_killed_or_interrupted_reproduce_leaves_no_worker_running(signame, tmp_path):
    """`zoo reproduce --jobs 2` on a test-only entry: two fast cells finish, two slow ones
    run in the two Dask workers (stuck in C code); then the driver gets Ctrl-C (SIGINT to its whole process
    group, as a terminal sends it), SIGTERM or kill -9. Every worker must be gone within
    15 s; on Ctrl-C the driver says so in one line, exits 130, and the finished cells stay."""
    import signal
    import sys

    (tmp_path / "tinycells.py").write_text(TINY_CELLS)
    (tmp_path / "driver.py").write_text(driver_text(TINY_DRIVER))
    out = tmp_path / "out"
    markers = out / "tiny-kill" / "markers"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "JAX_PLATFORMS": "cpu"}
    driver = start_driver([sys.executable, str(tmp_path / "driver.py"), str(out)], tmp_path, env)
    pids: set[int] = set()

    def both_workers_busy():
        names = os.listdir(markers) if markers.exists() else []
        pids.update(int(n.rsplit("-", 1)[1]) for n in names)
        return len(pids) >= 2 and any(n.startswith("slow-") for n in names)

    try:
        wait_until(both_workers_busy, 240, "both workers and a slow cell")
        seconds, survivors, stuck = signal_and_watch(driver, pids, signame)
    finally:
        for pid in pids | {driver.pid}:  # only what this test started, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    stderr = (tmp_path / "stderr").read_text()
    print(f"{signame}: workers {'gone' if survivors == 'none' else 'STILL RUNNING'} {seconds:.2f} s after the signal")
    assert survivors == "none", (f"workers still running 15 s after the driver's {signame}: {survivors}; "
                                 f"the driver's status {driver.returncode} ({stuck}), its stderr:\n{stderr[-6000:]}")
    assert driver.returncode == {"SIGINT": 130, "SIGKILL": -9, "SIGTERM": -15}[signame], stderr[-2000:]
    if signame == "SIGINT":
        assert "Traceback" not in stderr and "WARNING" not in stderr, stderr[-2000:]
        lines = [line for line in stderr.splitlines() if line.strip()]
        cells = out / "tiny-kill" / "cells"
        assert lines[-1] == f"zoo reproduce: interrupted; finished cells are kept in {cells}; " \
                            "the same command resumes from them", stderr[-2000:]
        # before it, only the store's own progress lines
        assert all(re.match(r"\s*(fast|slow) cells: ", line) for line in lines[:-1]), lines
        assert sorted(os.listdir(cells)) == ["fast__0.json", "fast__1.json"]
