"""What the zoo reads back is authenticated before it is used, and it deletes only what it
can prove it wrote (validation/base/signing.py).

Each case is one a hostile tester found: a hand-edited verdict in a shared study folder
or a stored SBC simulation was reported as computed; an earlier run's ``laplace.nc`` sat
beside a new report of other engines and read as part of it.
"""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

import zoo  # noqa: F401  (float64)
from zoo.validation.base import signing
from zoo.validation.report.compare_report import MANIFEST, write_report
from zoo.validation.runs import study as study_module
from zoo.validation.runs.compare import CompareConfig, compare
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import SBCSettings


def test_a_signed_record_is_bound_to_its_key_its_kind_and_its_place(tmp_path):
    path = tmp_path / "run-a" / "00001.json"
    signing.write_signed_json({"index": 1, "status": "ok", "ranks": [3, 5]}, path, signing.SBC_SIMULATION)
    assert signing.read_signed_json(path, signing.SBC_SIMULATION, "sim") == {"index": 1, "status": "ok",
                                                                             "ranks": [3, 5]}
    # the same bytes read as another kind of record, or copied to another run's folder
    with pytest.warns(UserWarning, match="signature does not match"):
        assert signing.read_signed_json(path, signing.STUDY_CELL, "cell") is None
    other = tmp_path / "run-b" / "00001.json"
    other.parent.mkdir()
    other.write_bytes(path.read_bytes())
    with pytest.warns(UserWarning, match="signature does not match"):
        assert signing.read_signed_json(other, signing.SBC_SIMULATION, "sim") is None
    # a hand edit, and a file with no signature at all
    record = json.loads(path.read_text())
    record["ranks"] = [50, 50]
    path.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match=r"ignoring sim .*00001\.json: signature does not match"):
        assert signing.read_signed_json(path, signing.SBC_SIMULATION, "sim") is None
    path.write_text(json.dumps({"index": 1, "status": "ok", "ranks": [3, 5]}))
    with pytest.warns(UserWarning, match="the record has no signature"):
        assert signing.read_signed_json(path, signing.SBC_SIMULATION, "sim") is None


@pytest.mark.long
def test_a_hand_edited_sbc_simulation_is_simulated_again(tmp_path):
    settings = SBCSettings(n_sims=10, n_draws=9)
    config = SBCConfig("pcvm", "ep", settings=settings, problem={"n": 30, "n_basis": 3})
    first = run_sbc(config, out_dir=tmp_path)
    sim = os.path.join(first.folder, "00003.json")
    record = json.loads(open(sim).read())
    record["ranks"] = [0] * len(record["ranks"])  # every truth below every draw
    with open(sim, "w") as fh:
        json.dump(record, fh)
    with pytest.warns(UserWarning, match="ignoring stored SBC simulation .*00003.json"):
        again = run_sbc(config, out_dir=tmp_path)
    assert again.reused == 9
    assert again.uniformity == first.uniformity  # the edit did not reach the verdict
    assert json.loads(open(sim).read())["ranks"] != record["ranks"]


def test_a_hand_edited_study_cell_is_computed_again(tmp_path):
    config = {"sbc": [{"model": "pcvm", "engines": ["ep"], "sims": 10, "draws": 9}]}
    cell = study_module.expand(config)[0]
    study_module.run_cell(cell, str(tmp_path))
    path = study_module.cell_path(str(tmp_path), cell)
    check = study_module._study_cell_problem(cell)
    assert study_module.read_cell_file(path, check)["summary"]["status"] is not None
    record = json.loads(open(path).read())
    record["summary"]["status"] = "calibrated"
    record["summary"]["reason"] = "calibrated: edited by hand"
    with open(path, "w") as fh:
        json.dump(record, fh)
    with pytest.warns(UserWarning, match="ignoring stored cell .*signature does not match"):
        assert study_module.read_cell_file(path, check) is None


@pytest.fixture(scope="module")
def comparison(nuts_cache_dir, fast_nuts):
    return compare(CompareConfig(model="pcvm", data="ripley", params={"width": 0.7}, engines=("ep", "laplace"),
                                 reference=fast_nuts, cache_dir=str(nuts_cache_dir), metric_draws=1000,
                                 evidence="off"))


@pytest.mark.long
def test_a_new_report_removes_the_earlier_outputs_it_replaces_and_nothing_else(tmp_path, comparison):
    out = str(tmp_path)
    files = write_report(comparison, out)
    assert os.path.isfile(files["laplace"]) and os.path.isfile(os.path.join(out, MANIFEST))
    with open(os.path.join(out, "notes.nc"), "w") as fh:  # the user's own file, named like an output
        fh.write("mine")
    only_ep = dataclasses.replace(comparison, posteriors={"ep": comparison.posteriors["ep"]})
    write_report(only_ep, out)
    assert not os.path.exists(files["laplace"]) and os.path.isfile(files["ep"])
    assert open(os.path.join(out, "notes.nc")).read() == "mine"

    # an output changed since the zoo wrote it is kept, with a warning naming it
    write_report(comparison, out)
    with open(files["laplace"], "ab") as fh:
        fh.write(b"\0")
    with pytest.warns(UserWarning, match=r"kept laplace\.nc from an earlier report: changed since"):
        write_report(only_ep, out)
    assert os.path.isfile(files["laplace"])


@pytest.mark.long
def test_a_forged_manifest_deletes_nothing(tmp_path, comparison):
    out = str(tmp_path)
    os.makedirs(out, exist_ok=True)
    victim = os.path.join(out, "thesis.png")
    with open(victim, "w") as fh:
        fh.write("a user's figure")
    forged = {"files": {"thesis.png": signing.file_sha256(victim)}}
    with open(os.path.join(out, MANIFEST), "w") as fh:
        json.dump(forged, fh)
    with pytest.warns(UserWarning) as caught:
        write_report(comparison, out)
    messages = " ".join(str(w.message) for w in caught)
    assert "ignoring output manifest" in messages and "thesis.png" in messages
    assert open(victim).read() == "a user's figure"
