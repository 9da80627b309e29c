"""`zoo study` (validation/study.py): a TOML grid expands into content-keyed cells that run
on a 2-worker Dask LocalCluster, are written atomically, and are not redone on a rerun."""
from __future__ import annotations

import json
import os
import re

import pytest

import zoo  # noqa: F401
from zoo.cli import main
from zoo.validation import study as St

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
    with pytest.raises(ValueError, match="unknown section"):
        St.load_config(tmp_path / "typo.toml")
    assert St.expand(St.load_config("example"))  # the shipped study is valid


def test_a_study_runs_on_a_two_worker_local_cluster_and_resumes(tmp_path, capsys):
    from distributed import Client, LocalCluster

    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "out"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        first = St.run_study(St.load_config(tmp_path / "s.toml"), out, client=client, progress=True)
    assert first["ran"] == 4 and first["reused"] == 0
    err = capsys.readouterr().err
    assert "[4/4]" in err and "ETA" in err
    files = sorted(os.listdir(out / "cells"))
    assert len(files) == 4 and not any(f.startswith(".tmp-") for f in files)
    compare_cell = json.loads(next((out / "cells" / f) for f in files if f.startswith("compare")).read_text())
    assert compare_cell["results"]["engines"]["ep"]["verdict"]["status"] in ("indistinguishable", "differs")
    report = (out / "report.md").read_text()
    assert re.search(r"\| pcvm \| ripley \| 0 \| nuts (NOT )?certified \| ep \|", report) and "## SBC" in report
    assert "calibrated: calibrated" not in report and "miscalibrated: miscalibrated" not in report
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


KILLABLE = """
name = "killable"

[[sbc]]
model = "pcvm"
engines = ["ep", "laplace"]
replicates = 3
sims = 40
draws = 19
"""


def _wait_for(predicate, timeout, what):
    import time

    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


@pytest.mark.slow
def test_a_study_survives_a_killed_worker_and_a_killed_driver_on_a_separate_cluster(tmp_path):
    """A real cluster: `dask scheduler` and two `dask worker` processes. One worker (with its
    nanny) is killed with SIGKILL while cells run: the scheduler reruns its cell on the other
    worker and the study completes. Then the driver itself is killed mid-study: the rerun
    redoes no finished cell."""
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
        _wait_for(sched_file.exists, 60, "the scheduler")
        for _ in range(2):
            procs.append(subprocess.Popen([os.path.join(bindir, "dask"), "worker", "--scheduler-file", str(sched_file),
                                           "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0"], env=env,
                                          start_new_session=True, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        address = json.loads(sched_file.read_text())["address"]
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
        _wait_for(lambda: len(done()) >= 1, 600, "the first finished cell")
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
        _wait_for(lambda: len(done()) >= n_cells + 1, 600, "a new finished cell")
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
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
