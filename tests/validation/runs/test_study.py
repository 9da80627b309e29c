"""`zoo study` (validation/runs/study.py): a TOML grid expands into content-keyed cells that run
on a 2-worker Dask LocalCluster, are written atomically, and are not redone on a rerun."""
from __future__ import annotations

import contextlib
import json
import os
import re
import warnings

import pytest
from processes import driver_text, signal_and_watch, start_driver, wait_until

import zoo  # noqa: F401
from zoo.cli import main
from zoo.validation.runs import study as St
from zoo.validation.report.study_report import report_study

TINY = """
name = "tiny"

[[compare]]
models = ["pcvm"]
data = ["ripley"]
splits = [0]
engines = ["ep"]
params = { width = 0.7, alpha = 10 }

[[sbc]]
model = "pcvm"
engines = ["ep"]
replicates = 2
sims = 10
draws = 19

[[defects]]
model = "pcvm"
engine = "ep"
defects = ["cov x 2"]
datasets = 2
sbc_replicates = 1
sbc_sims = 10
reference_draws = 300
problem = { n = 30, n_basis = 3 }
"""


def test_the_config_expands_into_checked_content_keyed_cells(tmp_path):
    (tmp_path / "s.toml").write_text(TINY)
    cells = St.expand(St.load_config(tmp_path / "s.toml"))
    assert [c.kind for c in cells] == ["compare", "sbc", "sbc", "defects"]
    assert len({c.key() for c in cells}) == 4
    assert St.expand(St.load_config(tmp_path / "s.toml"))[1].key() == cells[1].key()  # stable
    (tmp_path / "bad.toml").write_text(TINY.replace('engines = ["ep"]\nparams', 'engines = ["nope"]\nparams'))
    with pytest.raises(ValueError, match="no engine 'nope'"):
        St.expand(St.load_config(tmp_path / "bad.toml"))
    (tmp_path / "typo.toml").write_text("name = 'x'\n[[comapre]]\nmodels = ['pcvm']\n")
    with pytest.raises(ValueError, match=r"unknown key 'comapre' \(did you mean 'compare'\?\)"):
        St.load_config(tmp_path / "typo.toml")
    assert St.expand(St.load_config("example"))  # the shipped study is valid
    # data names and splits are checked before any cluster starts, like models and engines
    (tmp_path / "data.toml").write_text(TINY.replace('data = ["ripley"]', 'data = ["ripley", "no_such_data"]'))
    with pytest.raises(ValueError, match="unknown data set 'no_such_data'"):
        St.expand(St.load_config(tmp_path / "data.toml"))
    (tmp_path / "split.toml").write_text(TINY.replace("splits = [0]", "splits = [0, 1]"))
    with pytest.raises(ValueError, match="split 1 is out of range for data set 'ripley'"):
        St.expand(St.load_config(tmp_path / "split.toml"))


# The whole study (a compare cell with its NUTS reference, SBC, a defect battery) on its own
# LocalCluster is the costliest test of the suite: slow tier. The default tier keeps Dask in
# test_reproduce's cell store, the kill tests below and the defect battery's own smoke test.
@pytest.mark.slow
def test_a_study_runs_on_a_two_worker_local_cluster_and_resumes(tmp_path, capsys):
    from distributed import Client, LocalCluster

    # a user's engine (tests/user_engines.py, EP with its covariance halved) in the compare
    # cell: the Dask workers import it by its module:function name as the zoo's own
    (tmp_path / "s.toml").write_text(TINY.replace('engines = ["ep"]\nparams', 'engines = ["ep", "user_engines:shrunk"]\nparams'))
    out = tmp_path / "out"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        first = St.run_study(St.load_config(tmp_path / "s.toml"), out, client=client, progress=True)
        assert first.ran == 4 and first.reused == 0
        err = capsys.readouterr().err
        assert "[4/4]" in err and "ETA" in err
        files = sorted(os.listdir(out / "cells"))
        # a cell file cut off mid-write (invalid JSON) is named in a warning with the parser's
        # reason (the signed reader, base/signing.py) and computed again; its SBC simulations
        # are kept in OUT/work, so the recomputation reuses every one of them
        sbc_file = out / "cells" / next(f for f in files if f.startswith("sbc"))
        cut = next(i for i, c in enumerate(first.cells) if f"{c.kind}-{c.key}.json" == sbc_file.name)
        whole = sbc_file.read_text()
        sbc_file.write_text(whole[:len(whole) // 2])
        with pytest.raises(json.JSONDecodeError) as parse:
            json.loads(whole[:len(whole) // 2])
        with pytest.warns(UserWarning) as caught:
            second = St.run_study(St.load_config(tmp_path / "s.toml"), out, client=client, progress=False)
        # the one warning that names a file of the study, and nothing judged damaged besides
        assert [str(w.message) for w in caught if str(out) in str(w.message)] == [
            f"ignoring stored cell {sbc_file}: {parse.value}; computing it again"]
        assert second.ran == 1 and second.reused == 3 and second.failed == []
        assert [c.key for c in second.cells] == [c.key for c in first.cells]
        # the cell computed again is the cell first computed: the same simulations and verdict
        # (only how many were reused and the wall time differ), and its file reads back whole
        redone, before = second.cells[cut], first.cells[cut]
        assert before.result.reused == 0 and redone.result.reused == 10
        assert ({**redone.result.to_json(), "reused": 0, "wall_seconds": None}
                == {**before.result.to_json(), "reused": 0, "wall_seconds": None})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert St.read_cell(out, redone.cell).to_json() == redone.to_json()
        report_study(second)  # the runner returns the cells; the report wing writes report.md
    assert len(files) == 4 and not any(f.startswith(".tmp-") for f in files)
    compare_cell = json.loads(next((out / "cells" / f) for f in files if f.startswith("compare")).read_text())
    engines = compare_cell["results"]["engines"]
    # both engines fitted in the worker (a row that failed has no verdict: its reason instead)
    assert {name: row["failure"] for name, row in engines.items()} == {"ep": None, "user_engines:shrunk": None}
    ep, mine = engines["ep"]["verdict"], engines["user_engines:shrunk"]["verdict"]
    # the verdict the report shows is the one its statistic gives; the user's engine has
    # every sd 29% low (covariance x 0.5), which the verdict must call a difference
    assert ep["status"] == ("differs" if ep["statistic"] > ep["threshold"] else "indistinguishable")
    assert mine["status"] == "differs" and "sd off by -" in mine["reason"], mine
    report = (out / "report.md").read_text()
    assert re.search(r"\| pcvm \| ripley \| 0 \| nuts (NOT )?certified \| ep \|", report) and "## SBC" in report
    # the user's engine's row of the comparisons table, read by its header: its verdict column
    lines = report.splitlines()
    header = next(line for line in lines if line.startswith("| model | data | split | reference | engine |"))
    row = next(line for line in lines if line.startswith("| pcvm | ripley | 0 |") and "| user_engines:" in line)
    columns = dict(zip(*([cell.strip() for cell in line.strip("|").split("|")] for line in (header, row))))
    assert columns["engine"] == "user_engines:shrunk" and columns["verdict"] == "differs", columns
    assert "calibrated: calibrated" not in report and "miscalibrated: miscalibrated" not in report
    # each SBC cell with its coverage line and its coverage-and-contraction figure
    assert "central intervals cover the truth" in report and "figures/sbc-views-" in report
    # the battery cell fanned its 2 data sets and 2 SBC runs out over the cluster
    battery = json.loads(next((out / "cells" / f) for f in files if f.startswith("defects")).read_text())["battery"]
    assert battery["datasets"] == 2 and {(r["detector"], r["defect"]) for r in battery["rows"]} >= {
        ("verdict", "cov x 2"), ("sbc", "cov x 2")}
    assert "## Planted defects: pcvm / ep" in report
    # the same command again: nothing is recomputed, the report is rebuilt from the cells
    stamps = {f: os.stat(out / "cells" / f).st_mtime_ns for f in files}
    code = main(["study", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"])
    assert code == 0 and "0 cells run, 4 already done" in capsys.readouterr().out
    assert {f: os.stat(out / "cells" / f).st_mtime_ns for f in files} == stamps


def test_a_damaged_study_cell_is_named_and_treated_as_missing(tmp_path):
    """What a rerun does with each kind of damage (the rerun itself: the test above): a file
    that is not JSON, or not signed with this user's key as this cell (a hand edit, a cell
    from elsewhere), and a signed one whose content is not this cell's."""
    from zoo.validation.base.signing import STUDY_CELL, write_signed_json

    (tmp_path / "s.toml").write_text(TINY)
    cell = St.expand(St.load_config(tmp_path / "s.toml"))[1]
    path = tmp_path / "cell.json"
    check = St._study_cell_problem(cell)
    from zoo.validation.runs.sbc_result import SBCResult
    from zoo.validation.runs.sbc_simulation import SBCSettings

    summary = SBCResult(model="pcvm", engine="ep", settings=SBCSettings(n_sims=10, n_draws=19),
                        status="calibrated", reason="test-only").to_json()
    good = {"kind": "sbc", "cell": cell.params, "key": cell.key(), "seconds": 1.0, "summary": summary}
    # this test session's key made first (signing anything makes it): the unsigned files below
    # then meet a key they lack a signature of, whichever test ran before
    write_signed_json({}, tmp_path / "first.json", STUDY_CELL)
    for text, words in [("", "Expecting value"), ("{}", "the record has no signature"),
                        (json.dumps(good), "the record has no signature")]:
        path.write_text(text)
        with pytest.warns(UserWarning, match="ignoring stored cell") as caught:
            assert St.read_cell_file(str(path), check) is None
        assert str(path) in str(caught[0].message) and words in str(caught[0].message), (text, caught[0].message)
    for record, words in [({}, "not the cell of this key"), ({**good, "key": "0" * 16}, "not the cell of this key"),
                          ({k: v for k, v in good.items() if k != "summary"}, "no 'summary'"),
                          # a result its kind's reader refuses: not read half, computed again
                          ({**good, "summary": {}}, "not a stored SBC result"),
                          ({**good, "summary": {**summary, "format": 99}}, "written by a newer zoo")]:
        write_signed_json(record, path, STUDY_CELL)
        with pytest.warns(UserWarning, match="damaged cell file") as caught:
            assert St.read_cell_file(str(path), check) is None
        assert str(path) in str(caught[0].message) and words in str(caught[0].message), (record, caught[0].message)
    write_signed_json(good, path, STUDY_CELL)
    assert St.read_cell_file(str(path), check) == good
    assert St.read_cell_file(str(tmp_path / "missing.json"), check) is None


KILLABLE = """
name = "killable"

[[sbc]]
model = "pcvm"
engines = ["ep", "laplace"]
replicates = 3
sims = 40
draws = 19
"""


@contextlib.contextmanager
def separate_cluster(tmp_path, n_workers: int = 2):
    """A real cluster started apart from the study, as a user would: `dask scheduler` and
    ``n_workers`` `dask worker` processes (one thread each). Yields (scheduler address,
    the processes: scheduler first); every process group is killed on the way out."""
    import signal
    import subprocess
    import sys

    bindir = os.path.dirname(sys.executable)
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [subprocess.Popen([os.path.join(bindir, "dask"), "scheduler", "--scheduler-file", str(sched_file),
                               "--port", "0", "--dashboard-address", ":0"], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_until(sched_file.exists, 60, "the scheduler")
        for _ in range(n_workers):
            procs.append(subprocess.Popen([os.path.join(bindir, "dask"), "worker", "--scheduler-file", str(sched_file),
                                           "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0"], env=env,
                                          start_new_session=True, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        yield json.loads(sched_file.read_text())["address"], procs
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_a_study_survives_a_killed_worker_and_a_killed_driver_on_a_separate_cluster(tmp_path):
    """A real cluster: `dask scheduler` and two `dask worker` processes. One worker (with its
    nanny) is killed with SIGKILL while cells run: the scheduler reruns its cell on the other
    worker and the study completes. Then the driver itself is killed mid-study: the rerun
    redoes no finished cell."""
    import signal
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    with separate_cluster(tmp_path) as (address, procs):
        (tmp_path / "s.toml").write_text(KILLABLE)
        out = tmp_path / "out"
        cells_dir = out / "cells"
        n_cells = len(St.expand(St.load_config(tmp_path / "s.toml")))

        def done():
            return sorted(f for f in os.listdir(cells_dir) if not f.startswith(".tmp-")) if cells_dir.exists() else []

        study = [sys.executable, "-m", "zoo.cli", "study", str(tmp_path / "s.toml"), "--out", str(out),
                 "--scheduler", address, "--no-progress"]
        # 1. a worker dies mid-study
        driver = subprocess.Popen(study, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: len(done()) >= 1, 600, "the first finished cell")
        os.killpg(procs[1].pid, signal.SIGKILL)  # nanny and worker: this worker is gone for good
        stdout, stderr = driver.communicate(timeout=1200)
        assert driver.returncode == 0, stderr[-2000:]
        assert len(done()) == n_cells and f"{n_cells} cells run, 0 already done" in stdout
        report = (out / "report.md").read_text()
        assert report.count("| pcvm | ") == n_cells

        # 2. the driver dies mid-study (a changed cell count so new cells exist); the rerun
        #    keeps every finished cell, untouched
        (tmp_path / "s.toml").write_text(KILLABLE.replace("replicates = 3", "replicates = 5"))
        driver = subprocess.Popen(study, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: len(done()) >= n_cells + 1, 600, "a new finished cell")
        driver.kill()
        driver.wait()
        kept = {f: os.stat(cells_dir / f).st_mtime_ns for f in done()}
        rerun = subprocess.run(study, env=env, capture_output=True, text=True, timeout=1200)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        n_all = len(St.expand(St.load_config(tmp_path / "s.toml")))
        # a task the killed driver left running may still finish before the rerun starts,
        # so "already done" is at least what was kept
        ran, reused = (int(x) for x in re.search(r"(\d+) cells run, (\d+) already done", rerun.stdout).groups())
        assert ran + reused == n_all and reused >= len(kept) and ran >= 1
        assert all(os.stat(cells_dir / f).st_mtime_ns == t for f, t in kept.items())
        assert len(done()) == n_all


FIVE_CELLS_ONE_BAD = """
name = "five cells, one bad"

[[compare]]
models = ["grid-rvm"]
data = ["digits_even_odd"]
engines = ["vb"]
params = { delta = 5.55 }

[[sbc]]
model = "pcvm"
engines = ["ep"]
replicates = 4
sims = 10
draws = 19
"""

#: the bad cell: every value passes expand's checks (delta is a positive number, the data set
#: and the engine exist), but the digits are a table already, which gridRVM's protocol
#: finds only when it runs: a deterministic ValueError in the worker (a width of -1 served
#: here until expand learnt to refuse it before any cluster starts)
BAD_CELL = "compare grid-rvm digits_even_odd split 0"
BAD_REASON = ("ValueError: digits_even_odd is a table already: delta apply to the per-dimension RBF table of "
              "other data sets")


# slow: each runs the real CLI with its own cluster of worker processes (73 s in the
# default tier's CI run at load ~10); the in-process test above checks the same logic fast
@pytest.mark.slow
@pytest.mark.parametrize("where", [pytest.param("local", id="local-cluster"),
                                   pytest.param("scheduler", id="separate-scheduler")])
def test_a_five_cell_study_with_one_bad_cell_reports_four_results_and_the_reason(where, tmp_path):
    """The study as a user runs it (`zoo study` in its own process) on a LocalCluster of two
    worker processes, and on a scheduler and two workers started apart from it: the
    comparison with a setting its protocol refuses at run time (BAD_CELL) fails (a
    deterministic error: stored as failed, once), the four SBC cells finish, the report holds
    their results and the failed cell's reason, and the command exits 1 only at the end."""
    import subprocess
    import sys

    (tmp_path / "s.toml").write_text(FIVE_CELLS_ONE_BAD)
    out = tmp_path / "out"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    study = [sys.executable, "-m", "zoo.cli", "study", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"]
    with contextlib.ExitStack() as stack:
        if where == "scheduler":
            address, _ = stack.enter_context(separate_cluster(tmp_path))
            study += ["--scheduler", address]
        else:
            study += ["--workers", "2"]
        run = subprocess.run(study, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 1, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    failed = [line for line in run.stderr.splitlines() if "cell failed" in line]
    assert failed == [f"zoo study: cell failed: {BAD_CELL}: {BAD_REASON}"], run.stderr[-2000:]
    assert "5 cells run, 0 already done" in run.stdout
    report = (out / "report.md").read_text()
    assert "## Failed cells (1 of 5)" in report and f"| {BAD_CELL} | {BAD_REASON} |" in report
    # what the study stored, read back as a rerun trusts it (signed, each by its kind's reader):
    # the failed cell with its one-line reason, and the four SBC cells whole
    stored = St.read_study(out)
    assert len(os.listdir(out / "cells")) == 5 and stored.reused == 5
    assert [c.kind for c in stored.cells] == ["compare", "sbc", "sbc", "sbc", "sbc"]
    assert stored.failed == [(BAD_CELL, BAD_REASON)]
    sbc = stored.cells[1:]
    assert [c.params["replicate"] for c in sbc] == [0, 1, 2, 3]
    assert all(c.failed is None and c.result.counts.n_sims == 10 for c in sbc)
    # each SBC cell's row in the report's SBC section, with its verdict
    section = report[report.index("## SBC"):]
    assert all(f"| pcvm | ep | {c.params['replicate']} | {c.result.status}: " in section for c in sbc), section


# --------------------------------------------------------------------------------------
# A killed or interrupted study stops its LocalCluster's workers (real processes)
# --------------------------------------------------------------------------------------
KILL_STUDY = """
name = "kill"

[[sbc]]
model = "pcvm"
engines = ["ep"]
replicates = 3
sims = 10
"""

KILL_DRIVER = """
import sys


def tiny_run_cell(cell, out_dir, *engine_time_limit):
    # test-only stand-in for study.run_cell: replicate 0 finishes at once, the others
    # compute for minutes in one C call that holds the GIL (no Python thread of the worker
    # runs meanwhile, Dask's own watch of its driver included)
    import os

    from zoo.validation.base.atomic import write_json_atomic
    from zoo.validation.runs.sbc_result import SBCResult
    from zoo.validation.runs.sbc_simulation import SBCSettings
    from zoo.validation.runs.study import CellResult, cell_path

    p = cell.params
    markers = os.path.join(out_dir, "markers")
    os.makedirs(markers, exist_ok=True)
    open(os.path.join(markers, f"{p['replicate']}-{os.getpid()}"), "w").close()
    if p["replicate"] > 0:
        3 ** (10 ** 9)
    out = CellResult(cell, cell.key(), 0.0, result=SBCResult(model=p["model"], engine=p["engine"],
                                                             settings=SBCSettings(n_sims=p["sims"]),
                                                             status="calibrated", reason="test-only"))
    write_json_atomic(out.to_json(), cell_path(out_dir, cell))
    return out


if __name__ == "__main__":  # the cluster's workers are spawned: they must not rerun this
    # AS FROM A TERMINAL
    from zoo.validation.runs import study

    study.run_cell = tiny_run_cell  # pickled by value (defined in __main__)
    from zoo.cli import main

    sys.exit(main(["study", sys.argv[1], "--out", sys.argv[2], "--workers", "2", "--no-progress"]))
"""


@pytest.mark.parametrize("signame", [pytest.param("SIGKILL", id="kill-9"),
                                     pytest.param("SIGTERM", id="sigterm", marks=pytest.mark.slow),
                                     pytest.param("SIGINT", id="ctrl-c", marks=pytest.mark.slow)])
def test_a_killed_or_interrupted_study_leaves_no_worker_running(signame, tmp_path):
    """`zoo study --workers 2` with a test-only cell function: one cell finishes, two run in
    the two workers (stuck in C code); then the driver gets kill -9, SIGTERM or Ctrl-C
    (SIGINT to its process group, as a terminal sends it). Every worker must be gone within
    15 s; on Ctrl-C the driver says so in one line and exits 130, the finished cell kept."""
    import contextlib
    import signal
    import sys

    (tmp_path / "s.toml").write_text(KILL_STUDY)
    (tmp_path / "driver.py").write_text(driver_text(KILL_DRIVER))
    out = tmp_path / "out"
    markers = out / "markers"
    driver = start_driver([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "s.toml"), str(out)],
                          tmp_path, {**os.environ, "JAX_PLATFORMS": "cpu"})
    pids: set[int] = set()

    def both_busy():
        names = os.listdir(markers) if markers.exists() else []
        slow = {n for n in names if not n.startswith("0-")}
        pids.update(int(n.split("-")[1]) for n in names)
        return len(slow) >= 2

    try:
        wait_until(both_busy, 240, "two cells running")
        seconds, survivors, stuck = signal_and_watch(driver, pids, signame)
        print(f"{signame}: workers {'gone' if survivors == 'none' else 'STILL RUNNING'} {seconds:.2f} s after")
    finally:
        for pid in pids | {driver.pid}:  # only what this test started, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    stderr = (tmp_path / "stderr").read_text()
    assert len(pids) == 2 and survivors == "none", (
        f"workers {sorted(pids)} outlived the driver's {signame} by 15 s: {survivors}; the driver's status "
        f"{driver.returncode} ({stuck}), its stderr:\n{stderr[-6000:]}")
    assert driver.returncode == {"SIGINT": 130, "SIGKILL": -9, "SIGTERM": -15}[signame], stderr[-2000:]
    # the workers' scratch was in the study's own folder (the next run clears it), not in /tmp
    assert any((out / "work" / "dask").iterdir())
    if signame == "SIGINT":
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert lines == [f"zoo study: interrupted; finished cells are kept in {out / 'cells'}; "
                         "the same command resumes from them"], stderr[-2000:]
        assert len(os.listdir(out / "cells")) == 1  # replicate 0


# --------------------------------------------------------------------------------------
# A bad cell does not end the study; a typo does not run another study
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, says", [
    ('name = "x"\n[[compare]]\nmodels = ["pcvm"]\nsplit = [3]\n', r"unknown key 'split' \(did you mean 'splits'\?\)"),
    ('[[compare]]\nmodels = ["pcvm"]\nengine = ["ep"]\n', r"unknown key 'engine' \(did you mean 'engines'\?\)"),
    ('foo = 1\n[[compare]]\nmodels = ["pcvm"]\n', r"unknown key 'foo'; known: name, compare, sbc, defects"),
    ('[[compare]]\nmodels = "pcvm"\n', r"\[\[compare\]\] block 1: models must be a list of strings, got 'pcvm'"),
    ('[[sbc]]\nmodel = "pcvm"\nreplicates = "two"\n', r"\[\[sbc\]\] block 1: replicates must be a positive integer"),
    ('[[sbc]]\nmodel = "pcvm"\nsims = 0\n', r"sims must be a positive integer, got 0"),
    ('[[defects]]\nmodel = "pcvm"\n', r"\[\[defects\]\] block 1 lacks 'engine'"),
], ids=["split", "engine", "foo", "string-for-list", "replicates", "sims-0", "missing"])
def test_a_study_file_is_checked_key_by_key_before_anything_runs(tmp_path, text, says):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=says):
        St.expand(St.load_config(path))
    with pytest.raises(ValueError, match="is a folder; give a .toml file"):
        St.load_config(tmp_path)


@pytest.mark.long
def test_a_bad_cell_is_reported_with_its_reason_and_the_other_cells_finish(tmp_path, monkeypatch):
    """Three cells: a comparison whose protocol raises ValueError (a deterministic error:
    stored as failed, not retried; a bad --param value no longer gets this far, expand
    refuses it), an SBC run that works, and a defect battery whose cell keeps raising an error
    that is not deterministic (stands for a lost worker: retried by Dask, then reported as
    failed but not stored, so the next run tries it again). The study writes its report
    with both reasons and the SBC result, and the command's status says not all finished."""
    from distributed import Client, LocalCluster

    config = {"name": "one bad cell",
              "compare": [{"models": ["pcvm"], "data": ["ripley"], "engines": ["laplace"], "params": {"width": 0.7}}],
              "sbc": [{"model": "pcvm", "engines": ["laplace"], "sims": 10, "draws": 19}],
              "defects": [{"model": "pcvm", "engine": "ep", "defects": ["cov x 2"], "datasets": 1}]}
    compute, tries = St._compute_cell, []

    def flaky(cell, out_dir, *limit):
        if cell.kind == "defects":
            tries.append(1)
            raise RuntimeError("the worker's disk vanished")
        if cell.kind == "compare":
            raise ValueError("kernel width must be a positive finite number, got -1")
        return compute(cell, out_dir, *limit)

    monkeypatch.setattr(St, "_compute_cell", flaky)
    # threads, not processes: the patched function runs in this process
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        out = St.run_study(config, tmp_path / "out", client=client, progress=False)
    labels = dict(out.failed)
    assert set(labels) == {"compare pcvm ripley split 0", "defects pcvm ep"}
    assert labels["compare pcvm ripley split 0"].startswith("ValueError: ") and "width" in labels[
        "compare pcvm ripley split 0"]
    assert labels["defects pcvm ep"].startswith("RuntimeError: the worker's disk vanished (after Dask's retries")
    assert len(tries) == 3  # Dask's two retries of the non-deterministic error; the ValueError ran once
    sbc = next(c for c in out.cells if c.kind == "sbc")
    # the SBC cell ran whole beside the failed ones: every one of its 10 fits ranked
    assert sbc.failed is None and sbc.result.counts.ok == 10 and sbc.result.counts.failed == 0
    text = open(report_study(out)).read()
    assert "## Failed cells (2 of 3)" in text and "## SBC" in text
    assert "| compare pcvm ripley split 0 | ValueError: " in text
    stored = os.listdir(tmp_path / "out" / "cells")
    assert len(stored) == 2 and not any(name.startswith("defects-") for name in stored)


def test_zoo_study_says_which_cells_failed_and_exits_1(tmp_path, monkeypatch, capsys):
    failed = St.CellResult(St.Cell("compare", St.frozen_params({"model": "pcvm", "data": "ripley", "split": 0})),
                           "key", None, failed="ValueError: bad")
    monkeypatch.setattr("zoo.cli.run_study", lambda *a, **k: St.StudyResult(
        config=St.StudyConfig(None, {}), cells=(failed,), ran=3, reused=0, out_dir=str(tmp_path / "out")))
    monkeypatch.setattr("zoo.cli.report_study", lambda out: "r.md")
    monkeypatch.setattr("zoo.cli._start_compiling", lambda folders: None)
    (tmp_path / "s.toml").write_text(TINY)
    assert main(["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "zoo study: cell failed: compare pcvm ripley split 0: ValueError: bad" in err


def test_every_kind_of_study_cell_has_its_report_section_and_a_missing_one_is_named(tmp_path, monkeypatch):
    """The study runs what validation/runs/study_kinds.STUDY_KINDS lists and reports it through
    validation/report/study_report.SECTIONS: the two tables name the same kinds, in the same
    order, and a kind without a section (planted: one removed) stops the report with its name
    instead of leaving its cells out unsaid."""
    from zoo.validation.report import study_report
    from zoo.validation.runs.study import StudyConfig
    from zoo.validation.runs.study_kinds import STUDY_KINDS

    assert list(study_report.SECTIONS) == list(STUDY_KINDS)
    for kind in STUDY_KINDS.values():
        assert set(kind.schema) and kind.payload and kind.code_modules
    monkeypatch.delitem(study_report.SECTIONS, "sbc")
    with pytest.raises(ValueError, match="no section for cells of kind 'sbc'"):
        study_report.write_study_report(StudyConfig("s", {}), [], str(tmp_path))
