"""`zoo study` (validation/study.py): a TOML grid expands into content-keyed cells that run
on a 2-worker Dask LocalCluster, are written atomically, and are not redone on a rerun."""
from __future__ import annotations

import json
import os

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
"""


def test_the_config_expands_into_checked_content_keyed_cells(tmp_path):
    (tmp_path / "s.toml").write_text(TINY)
    cells = St.expand(St.load_config(tmp_path / "s.toml"))
    assert [c.kind for c in cells] == ["compare", "sbc", "sbc"]
    assert len({c.key() for c in cells}) == 3
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
    assert first["ran"] == 3 and first["reused"] == 0
    err = capsys.readouterr().err
    assert "[3/3]" in err and "ETA" in err
    files = sorted(os.listdir(out / "cells"))
    assert len(files) == 3 and not any(f.startswith(".tmp-") for f in files)
    compare_cell = json.loads(next((out / "cells" / f) for f in files if f.startswith("compare")).read_text())
    assert compare_cell["results"]["engines"]["ep"]["verdict"]["status"] in ("indistinguishable", "differs")
    report = (out / "report.md").read_text()
    assert "| pcvm | ripley | 0 |" in report and "## SBC" in report
    # the same command again: nothing is recomputed, the report is rebuilt from the cells
    stamps = {f: os.stat(out / "cells" / f).st_mtime_ns for f in files}
    code = main(["study", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress"])
    assert code == 0 and "0 cells run, 3 already done" in capsys.readouterr().out
    assert {f: os.stat(out / "cells" / f).st_mtime_ns for f in files} == stamps
