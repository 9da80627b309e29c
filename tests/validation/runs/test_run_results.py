"""The typed results of SBC, the defect battery and a study's cells: frozen, written and read
back as the same object, and a stored one of a layout this zoo does not read refused with
one line naming why (never read in half)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.validation.judge.rank_power import RankPower
from zoo.validation.judge.rank_uniformity import CoverageView, UniformityTest, conjugate_normal_ranks
from zoo.validation.runs.battery_result import BatteryResult, BatteryRow, load_batteries
from zoo.validation.runs.sbc import rank_summary
from zoo.validation.runs.sbc_result import SBC_RESULT_FORMAT, SBCCounts, SBCResult
from zoo.validation.runs.sbc_simulation import SBCSettings
from zoo.validation.runs.study import Cell, CellResult, StudyConfig, StudyResult, expand, frozen_params

from repository import REPO as REPOSITORY


@pytest.fixture(scope="module")
def sbc_result() -> SBCResult:
    ranks = conjugate_normal_ranks(np.random.default_rng(3), 60, 19, 2, sd_factor=0.5, defective=1)
    return rank_summary(ranks, ["a", "b"], 19, model="conjugate normal", engine="half the sd in b")


def test_an_sbc_result_reads_back_as_itself_through_json(sbc_result):
    stored = json.loads(json.dumps(sbc_result.to_json()))  # what a file holds
    assert stored["format"] == SBC_RESULT_FORMAT
    again = SBCResult.from_json(stored)
    assert again == sbc_result
    assert again.to_json() == stored
    assert isinstance(again.counts, SBCCounts) and isinstance(again.settings, SBCSettings)
    assert [q.name for q in again.uniformity.quantities] == ["a", "b"] and again.status == "miscalibrated"
    # the judge's views come back as the judge's own types, not as JSON
    assert (type(again.uniformity), type(again.power), type(again.coverage)) == (
        UniformityTest, RankPower, CoverageView)


def test_an_sbc_result_cannot_be_changed_in_place(sbc_result):
    with pytest.raises(dataclasses.FrozenInstanceError):
        sbc_result.status = "calibrated"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sbc_result.uniformity.status = "calibrated"  # the judge's view too, all the way down
    with pytest.raises(dataclasses.FrozenInstanceError):
        sbc_result.uniformity.quantities[0].inside = True
    with pytest.raises(TypeError):
        sbc_result.coverage.quantities[0].levels[0] = None  # tuples, not lists
    assert isinstance(sbc_result.ranks, tuple)


@pytest.mark.parametrize("change, words", [
    (lambda d: {**d, "format": SBC_RESULT_FORMAT + 1}, "written by a newer zoo"),
    (lambda d: {**d, "format": "1"}, "its format is '1', not an integer"),
    (lambda d: {**d, "verdict_v2": {}}, "unknown part(s) 'verdict_v2'"),
    (lambda d: {k: v for k, v in d.items() if k != "status"}, "lacks 'status'"),
    (lambda d: {**d, "counts": {**d["counts"], "extra": 1}}, "not a stored SBC result"),
    (lambda d: [d], "not a JSON object"),
    # the judge's views are read part by part: a line or a part missing or unknown is named
    (lambda d: {**d, "uniformity": {**d["uniformity"], "quantities": [
        {k: v for k, v in q.items() if k != "excess"} for q in d["uniformity"]["quantities"]]}},
     "its uniformity: not a stored quantity of a uniformity test: it lacks 'excess'"),
    (lambda d: {**d, "power": {**d["power"], "sd_factor_tiny": 0.1}}, "its power: not a stored SBC power this zoo "
                                                                       "reads: unknown part(s) 'sd_factor_tiny'"),
    (lambda d: {**d, "coverage": {**d["coverage"], "quantities": [{"name": "a"}]}},
     "its coverage: not a stored quantity of a coverage view: it lacks 'levels'"),
])
def test_a_stored_sbc_result_this_zoo_cannot_read_is_refused_with_the_reason(sbc_result, change, words):
    with pytest.raises(ValueError, match="SBC result") as caught:
        SBCResult.from_json(change(sbc_result.to_json()))
    assert words in str(caught.value)


def test_an_sbc_summary_stored_before_results_were_typed_reads_as_format_1(sbc_result):
    """A study cell or sbc.json written before the stamp: the same keys, no "format"."""
    old = {k: v for k, v in sbc_result.to_json().items() if k != "format"}
    assert SBCResult.from_json(old) == sbc_result


def test_an_sbc_result_stored_before_the_shape_of_a_failure_was_read_reads_with_those_parts_none(sbc_result):
    """The layout of benchmarks/results/sbc_all.json: each quantity of the uniformity test with
    only its name, inside, excess and the outer-tenths and below-half shares. Read back, what
    was not recorded is None (not zero), and what was is kept."""
    newer = ("share_in_lower_tenth", "share_in_upper_tenth", "shift_score", "spread_score", "shape")
    stored = sbc_result.to_json()
    old = {**stored, "uniformity": {**stored["uniformity"], **{part: [
        {k: v for k, v in q.items() if k not in newer} for q in stored["uniformity"][part]]
        for part in ("quantities", "worst")}}}
    again = SBCResult.from_json(old)
    assert again.uniformity.quantities == tuple(dataclasses.replace(q, **dict.fromkeys(newer))
                                                for q in sbc_result.uniformity.quantities)
    assert again.uniformity.quantities[0].inside is False  # the planted defect's line, kept
    assert again.status == sbc_result.status and again.power == sbc_result.power


@pytest.mark.parametrize("name", ["defect_battery.json", "distribution_battery.json"])
def test_the_stored_batteries_read_whole_and_write_back_the_same(name):
    path = REPOSITORY / "benchmarks" / "results" / name
    stored = json.loads(path.read_text())
    batteries = load_batteries(path)
    assert set(batteries) == set(stored)
    for label, battery in batteries.items():
        assert battery.to_json() == {"format": 1, **stored[label]}, label
        assert BatteryResult.from_json(battery.to_json()) == battery
        assert all(isinstance(r, BatteryRow) for r in battery.rows)
    # the note one battery carries is kept, not dropped
    assert any(b.note for b in batteries.values()) == any("note" in b for b in stored.values())


def test_a_battery_with_a_part_this_zoo_does_not_know_is_refused(tmp_path):
    battery = next(iter(load_batteries(REPOSITORY / "benchmarks" / "results" / "defect_battery.json").values()))
    d = battery.to_json()
    with pytest.raises(ValueError, match="a row .*unexpected keyword argument 'flagged'"):
        BatteryResult.from_json({**d, "rows": [{**d["rows"][0], "flagged": 1}]})
    with pytest.raises(ValueError, match="unknown part"):
        BatteryResult.from_json({**d, "rates": []})
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"mine": {**d, "format": 7}}))
    with pytest.raises(ValueError, match=r"b\.json: mine: a stored defect battery of format 7"):
        load_batteries(path)


def test_a_study_cell_reads_back_as_the_result_its_kind_returns(sbc_result):
    cell = expand({"sbc": [{"model": "pcvm", "engines": ["ep"], "sims": 10, "draws": 9}]})[0]
    done = CellResult(cell, cell.key(), 1.5, result=sbc_result)
    stored = json.loads(json.dumps(done.to_json()))
    assert set(stored) == {"kind", "cell", "key", "seconds", "summary"}  # the cell file's layout
    again = CellResult.from_json(stored)
    assert again == done and isinstance(again.result, SBCResult)
    failed = CellResult(cell, cell.key(), None, failed="ValueError: bad")
    assert CellResult.from_json(failed.to_json()) == failed
    with pytest.raises(ValueError, match="either a result or the reason"):
        CellResult(cell, cell.key(), 1.0)
    with pytest.raises(ValueError, match="kind 'poll', which this zoo does not run"):
        CellResult.from_json({**stored, "kind": "poll"})
    with pytest.raises(ValueError, match="written by a newer zoo"):
        CellResult.from_json({**stored, "summary": {**stored["summary"], "format": 2}})


def test_a_study_result_names_its_failed_cells():
    cell = Cell("compare", frozen_params({"model": "pcvm", "data": "ripley", "split": 1}))
    result = StudyResult(config=StudyConfig(None, {}), cells=(CellResult(cell, "k", None, failed="ValueError: bad"),), ran=1,
                         reused=0, out_dir="out")
    assert result.failed == [("compare pcvm ripley split 1", "ValueError: bad")]


def _reproduction(**table):
    from zoo.validation.runs.reproduction_result import ReproductionResult

    return ReproductionResult(entry="ggig-table1", description="GGIG against its rivals", settings={
        "reps": 1, "seed": 0, "jobs": 1, "sizes": [30, 60]}, defaults="reps 10", cells_computed=3, cells_reused=0,
        wall_seconds_this_run=2.5, markdown="| method | error |\n", table=table or {"rows": [{"method": "ggig"}]},
        folder="out/ggig-table1")


def test_a_reproduction_reads_back_as_itself_and_its_report_is_rebuilt_from_it(tmp_path):
    from zoo.validation.report.reproduction_report import reproduction_markdown, write_reproduction_report
    from zoo.validation.runs.reproduction_result import REPRODUCTION_FORMAT, ReproductionResult

    result = _reproduction()
    stored = json.loads(json.dumps(result.to_json()))
    assert stored["format"] == REPRODUCTION_FORMAT and stored["rows"] == [{"method": "ggig"}]  # table.json's layout
    again = ReproductionResult.from_json(stored)
    assert again == result and again.folder is None and again.failed == []
    text = reproduction_markdown(again)
    assert text.startswith("# ggig-table1: our numbers beside the paper's") and "sizes = 30,60" in text
    assert open(write_reproduction_report(again, tmp_path)).read() == text
    failed = _reproduction(complete=False, failed=[{"cell": "t1/gj", "reason": "FloatingPointError: x"}])
    assert failed.table["complete"] is False and failed.failed == [("t1/gj", "FloatingPointError: x")]


def test_a_stored_reproduction_this_zoo_cannot_rebuild_is_refused():
    from zoo.validation.runs.reproduction_result import ReproductionResult

    stored = _reproduction().to_json()
    # a table.json written before results were typed: no stamp, no markdown to rebuild table.md from
    old = {k: v for k, v in stored.items() if k not in ("format", "markdown", "description")}
    with pytest.raises(ValueError, match="format 1, too old to read"):
        ReproductionResult.from_json(old)
    with pytest.raises(ValueError, match="written by a newer zoo"):
        ReproductionResult.from_json({**stored, "format": 3})
    with pytest.raises(ValueError, match="lacks 'markdown'"):
        ReproductionResult.from_json({k: v for k, v in stored.items() if k != "markdown"})
    with pytest.raises(ValueError, match="table uses the run's own key"):
        _reproduction(settings={"mine": 1})


def test_a_study_config_is_checked_when_made_frozen_and_written_in_the_files_layout():
    from zoo.validation.runs.study import load_config

    shipped = load_config("example")
    assert isinstance(shipped, StudyConfig) and shipped.name == "example"
    again = StudyConfig.from_dict(json.loads(json.dumps(shipped.to_json())))
    assert again == shipped and expand(again) == expand(shipped)
    with pytest.raises(TypeError):
        shipped.blocks["sbc"][0]["sims"] = 10 ** 9  # read-only, all the way down
    with pytest.raises(ValueError, match=r"unknown key 'smis' \(did you mean 'sims'\?\)"):
        StudyConfig.from_dict({"sbc": [{"model": "pcvm", "smis": 10}]})
    with pytest.raises(ValueError, match="a study is a table"):
        StudyConfig.from_dict(["sbc"])


def test_a_stored_study_is_read_back_and_reported_again_without_running(tmp_path, sbc_result):
    """study.json and one finished cell file, as run_study leaves them: read_study gives the
    StudyResult back (the cell not yet run named as such), and the report is written from it."""
    from zoo.validation.base.atomic import write_json_atomic
    from zoo.validation.base.signing import STUDY_CELL, write_signed_json
    from zoo.validation.report.study_report import report_study
    from zoo.validation.runs.study import cell_path, read_study

    config = StudyConfig.from_dict({"name": "stored", "sbc": [{"model": "pcvm", "engines": ["ep", "laplace"],
                                                               "sims": 10, "draws": 9}]})
    done, missing = expand(config)
    listed = [c.params | {"kind": c.kind, "key": c.key()} for c in (done, missing)]  # as run_study lists them
    write_json_atomic({"config": config.to_json(), "cells": listed, "device": "cpu (chosen)"}, tmp_path / "study.json")
    write_signed_json(CellResult(done, done.key(), 2.0, result=sbc_result).to_json(), cell_path(tmp_path, done),
                      STUDY_CELL)
    study = read_study(tmp_path)
    assert study.config == config and study.device == "cpu (chosen)" and (study.ran, study.reused) == (0, 1)
    assert study.cells[0].result == sbc_result and study.cells[0].seconds == 2.0
    assert study.failed == [(missing.label(), "no finished cell file (not run yet, or damaged): run the study")]
    text = open(report_study(study)).read()
    assert "# Study: stored" in text and "Device: cpu (chosen)" in text and "## Failed cells (1 of 2)" in text
    assert "| pcvm | ep | 0 | miscalibrated" in text
    (tmp_path / "study.json").write_text("{}")
    with pytest.raises(ValueError, match=r"study\.json: not a stored study \(KeyError"):
        read_study(tmp_path)
