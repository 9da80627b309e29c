"""The IDA benchmark driver (benchmarks/ida_protocol.py): resumable cells, the grid
extension at an edge, the summary. Runs only the SVC baseline, so it takes seconds; the
PCVM engines it drives are tested in their own files."""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

from repository import REPO

SCRIPT = REPO / "benchmarks" / "ida_protocol.py"


@pytest.fixture(scope="module")
def ida():
    spec = importlib.util.spec_from_file_location("ida_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_resumes_and_extends_a_grid_whose_edge_is_chosen(ida, tmp_path, capsys):
    out = tmp_path / "ida"
    # widths 4 sqrt(d) and 8 sqrt(d) are far too wide for thyroid: the CV choice sits on
    # the lower edge, so the grid must grow downwards (at most twice)
    argv = ["--data", "thyroid", "--engines", "", "--splits", "2", "--select-splits", "1",
            "--width-factors", "4,8", "--jobs", "1", "--out", str(out)]
    assert ida.main(argv) == 0
    hyper = json.loads((out / "cells" / "thyroid__svc__hyper.json").read_text())
    assert hyper["extensions"] >= 1
    assert min(hyper["grid_factors"]) < 4
    assert hyper["width_factor"] < 4 or hyper["extensions"] == 2
    cells = sorted((out / "cells").glob("thyroid__svc__0*.json"))
    assert len(cells) == 2
    summary = json.loads((out / "summary.json").read_text())
    row = summary["table"]["thyroid"]["svc"]
    assert row["splits"] == 2 and 0 <= row["error_mean"] <= 1 and row["unconverged"] == 0
    assert "| thyroid | svc | 2 |" in capsys.readouterr().out

    # a second run finds every cell on disk and redoes none of them
    stamps = {p: os.stat(p).st_mtime_ns for p in cells}
    assert ida.main(argv) == 0
    assert {p: os.stat(p).st_mtime_ns for p in cells} == stamps


def test_width_grid_scales_with_the_square_root_of_the_dimension(ida):
    assert ida.width_grid(4, (0.5, 1.0)) == [1.0, 2.0]
    assert ida.width_grid(9, (1.0,)) == [3.0]
