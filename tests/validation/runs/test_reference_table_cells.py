"""A reference table's cell is a typed unit of run (validation/runs/reference_table.py): a frozen
config in, a frozen :class:`ReferenceTableCell` out, written and read back as the same object,
a stored one of a layout this zoo does not read refused in one line; the untyped cells the four
benchmarks committed before (format 0) read by conversion; a table resumes from its signed cells,
and a cross-check written back into a stored cell is read back as stored - not computed again, as
it was when ggsm_references.py wrote it back unsigned. The cell computation itself is replaced
here (running the samplers is what the benchmarks are for), so these take a second."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil

import pytest

from zoo.validation.base import signing
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.runs import reference_table as R
from zoo.validation.runs.reference_table import ReferenceCellConfig
from zoo.validation.runs.reference_table_result import (REFERENCE_CELL_FORMAT, EngineNumbers, Machine, ModesFound,
                                                        ReferenceAgreement, ReferenceTable, ReferenceTableCell,
                                                        ReferenceUsed, TriedReference)

from repository import REPO

RESULTS = REPO / "benchmarks" / "results"
#: a committed cell of the untyped layout (format 0), with a cross-check
CROSS_CHECKED = json.loads((RESULTS / "ggsm_references" / "cells" / "ggig_linear_weak__paper__q1.5.json").read_text())

NUTS = TriedReference(sampler="nuts", certified=True, rhat_max=1.004, ess_bulk_min=600.0, divergences=0,
                      seconds=60.0, draws_per_chain=2500, time_limit=None, failures=())
GIBBS_OUT = TriedReference(sampler="pg-gibbs", certified=False, time_limit=900.0, failures=("ran out of time",))


def _cell(**changes) -> ReferenceTableCell:
    """A cell with every part filled, as a gig-like compare-protocol cell."""
    cell = ReferenceTableCell(
        model="gig-logistic", data="horii_synthetic", split=0, params={"k": 1.0, "theta": 1.0}, label="k = 1",
        coordinates={"k": 1.0}, tried=(NUTS, GIBBS_OUT),
        reference=ReferenceUsed(sampler="nuts", certified=True, rhat_max=1.004, ess_bulk_min=600.0,
                                ess_tail_min=900.0, seconds=60.0, warm_seconds=41.5, from_cache=False),
        variant=None, spec_changes={}, spec={"model": "gig-logistic", "k": 1.0, "theta": 1.0},
        n_train=100, n_weights=100, moments={"mean_exists": True, "sd_exists": True, "support_bounds": [2, 53]},
        engines=(EngineNumbers(engine="vb", seconds=0.6, converged=True, n_basis=100, speedup_vs_reference=69.2,
                               test_error=0.2, pred_mae=0.066, khat=2.26, sd_ratio_median=0.31,
                               std_mean_err_median=0.4, sd_ratio_groups={"noise": 0.33, "relevant": None},
                               verdict="differs", null_reasons={"kl_gauss": "no reason"}),
                 EngineNumbers(engine="laplace", failure="ApproximationFailed: not positive definite")),
        reference_test_error=0.217,
        agreement=ReferenceAgreement(samplers=("nuts", "pg-gibbs"), certified=(True, False), max_abs_z_median=2.5,
                                     n_coordinates=100, n_abs_z_above_3=0, pred_mae_between=0.003,
                                     second=TriedReference(sampler="pg-gibbs", certified=False, rhat_max=1.02,
                                                           seconds=70.0)),
        modes=ModesFound(sampler="nuts", certified=True, n_modes=1, main_share=1.0, main_share_se=0.0, n_failed=0,
                         n_starts=200, point_engine="vb", point_is_main_mode=True),
        wall_seconds=183.7, machine=Machine(processor="x86_64", python="3.11.7", cpus=2))
    return dataclasses.replace(cell, **changes)


# --------------------------------------------------------------------------------------
# The typed cell and its stored layout
# --------------------------------------------------------------------------------------
def test_a_cell_reads_back_as_itself_through_json():
    cell = _cell()
    stored = json.loads(json.dumps(cell.to_json()))  # what a file holds
    assert stored["format"] == REFERENCE_CELL_FORMAT == 1
    again = ReferenceTableCell.from_json(stored)
    assert again == cell
    assert again.to_json() == stored
    assert again.agreement.second == cell.agreement.second and isinstance(again.modes, ModesFound)
    assert again.engine("vb").sd_ratio_groups == {"noise": 0.33, "relevant": None}
    assert again.engine("laplace").seconds is None and again.engine("sla") is None
    assert again.tried_run("pg-gibbs").time_limit == 900.0 and again.tried_run("grid-gibbs") is None


def test_a_cell_cannot_be_changed_in_place():
    cell = _cell()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.wall_seconds = 0.0
    with pytest.raises(TypeError):
        cell.moments["sd_exists"] = False  # the record's JSON too, all the way down
    with pytest.raises(TypeError):
        cell.engine("vb").null_reasons["khat"] = "edited"
    assert cell.moments["support_bounds"] == (2, 53)


@pytest.mark.parametrize("change, words", [
    (lambda d: {**d, "format": REFERENCE_CELL_FORMAT + 1},
     "a stored reference-table cell of format 2, written by a newer zoo: this one reads formats 0 to 1"),
    (lambda d: {k: v for k, v in d.items() if k != "reference"},
     "not a stored reference-table cell of format 1: it lacks 'reference'"),
    (lambda d: {**d, "verdict_v2": {}}, "not a stored reference-table cell this zoo reads: unknown part(s) 'verdict_v2'"),
    (lambda d: {**d, "tried": [{k: v for k, v in d["tried"][0].items() if k != "certified"}]},
     "not a stored reference-table cell: a tried sampler lacks 'certified'"),
    (lambda d: {**d, "agreement": {**d["agreement"], "second": {"sampler": "pg-gibbs"}}},
     "not a stored reference-table cell: the agreement's second sampler lacks 'certified'"),
    (lambda d: {**d, "engines": [{**d["engines"][0], "wasserstein": 1.0}]},
     "not a stored reference-table cell: an engine has unknown part(s) 'wasserstein'"),
    (lambda d: {**d, "tried": {"nuts": {}}}, "not a stored reference-table cell: its 'tried' is not a list"),
    (lambda d: [d], "not a stored reference-table cell: a list, not a JSON object"),
])
def test_a_stored_cell_this_zoo_cannot_read_is_refused_in_one_line(change, words):
    with pytest.raises(ValueError) as caught:
        ReferenceTableCell.from_json(change(_cell().to_json()))
    assert str(caught.value) == words or str(caught.value).startswith(words)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("old, words", [
    ({"reference": {}, "tried": []}, "without a format and of none of the untyped layouts (no 'design', 'k', "
                                     "'case', 'gamma')"),
    ({"k": 1.0, "theta": 1.0, "reference": {"sampler": "nuts", "certified": True}, "vb": {}, "moments": None,
      "wall_seconds": 1.0, "machine": {}},
     "not a stored reference-table cell of format 0 (gig's layout): it lacks 'tried'"),
    ({**CROSS_CHECKED, "cross_check": {k: v for k, v in CROSS_CHECKED["cross_check"].items() if k != "gibbs_seconds"}},
     "not a stored reference-table cell of format 0 (ggsm's layout): a part lacks 'gibbs_seconds'"),
    ({**CROSS_CHECKED, "tried": [{**CROSS_CHECKED["tried"][0], "chains": 4}]},
     "not a stored reference-table cell: a tried sampler has unknown part(s) 'chains'"),
])
def test_an_unstamped_cell_of_no_known_layout_or_with_a_part_missing_is_refused(old, words):
    with pytest.raises(ValueError, match="reference-table cell") as caught:
        ReferenceTableCell.from_json(old)
    assert str(caught.value).endswith(words)


def test_the_committed_untyped_cells_read_as_format_0_and_keep_every_number():
    """One cell of each benchmark's old layout, every part it held found in the typed cell."""
    ggsm = R.read_stored_cell(RESULTS / "ggsm_references" / "cells" / "ggig_linear_weak__paper__q1.5.json")
    assert (ggsm.model, ggsm.data, ggsm.split, dict(ggsm.params)) == ("ggsm-probit", "ggig_linear_weak", 0,
                                                                       {"q": 1.5, "a": 0.001, "b": 0.001})
    assert dict(ggsm.coordinates) == {"design": "ggig_linear_weak", "prior": "paper", "q": 1.5}
    assert ggsm.reference == ReferenceUsed(sampler="nuts", certified=True, rhat_max=1.0011946128243376,
                                           ess_bulk_min=1811.968244954232, ess_tail_min=3167.302052428498,
                                           seconds=77.79611984199983, warm_seconds=26.09612456268769,
                                           from_cache=False)
    assert ggsm.tried == (TriedReference(sampler="nuts", certified=True, rhat_max=1.0011946128243376,
                                         ess_bulk_min=1811.968244954232, divergences=0, seconds=77.79611984199983,
                                         draws_per_chain=2500, time_limit=None, failures=()),)
    assert ggsm.agreement == ReferenceAgreement(
        samplers=("nuts", "slice-gibbs"), certified=(True, True), max_abs_z_median=1.9836573639106991,
        n_coordinates=52, n_abs_z_above_3=0, pred_mae_between=0.00271705457596159,
        second=TriedReference(sampler="slice-gibbs", certified=True, rhat_max=1.0016851575699102,
                              seconds=69.06414431200028))
    assert ggsm.engine("mm-laplace") == EngineNumbers(
        engine="mm-laplace", failure=None, seconds=0.034560370000690455, speedup_vs_reference=755.0881128346235,
        pred_mae=0.2118934913913588, sd_ratio_median=0.0, std_mean_err_median=0.793162779665465, n_basis=6)
    assert ggsm.machine == Machine(processor="x86_64", python="3.11.7", cpus=2) and ggsm.spec is None

    gig = R.read_stored_cell(RESULTS / "gig_references" / "cells" / "k1.json")
    vb = gig.engine("vb")
    assert (vb.sd_ratio_groups["noise"], vb.sd_ratio_groups["relevant"]) == (0.33031914184918443, 0.1887013897626649)
    assert gig.reference_test_error == 0.217 and vb.test_error == 0.2 and vb.khat == 2.260564449379899
    assert gig.tried[0].failures is None and gig.tried[0].draws_per_chain is None  # gig's did not record them
    assert gig.moments["support_bounds"] == (2, 53) and dict(gig.params) == {"k": 1.0, "theta": 1.0}

    grid = R.read_stored_cell(RESULTS / "grid_references" / "cells" / "digits__proper__s-grid.json")
    assert (grid.variant, dict(grid.coordinates)) == ("s-grid", {"case": "digits", "prior": "proper",
                                                                 "variant": "s-grid"})
    assert grid.agreement.samplers == ("nuts", "grid-gibbs") and grid.agreement.second is None
    assert R.read_stored_cell(RESULTS / "grid_references" / "cells" / "digits__proper__p-grid.json").variant is None

    bblr = R.read_stored_cell(RESULTS / "bblr_references" / "cells" / "pima__g4__c2__gauss-laplace.json")
    assert dict(bblr.spec_changes) == {"prior": "gauss-laplace"} and bblr.spec["prior"] == "gauss-laplace"
    assert dict(bblr.params) == {"gamma": 4.0, "config": 2.0} and bblr.coordinates["config"] == 2
    assert bblr.modes.point_engine == "sla" and bblr.engine("sla").test_error is not None


@pytest.mark.parametrize("table", ["ggsm", "gig", "grid", "bblr"])
def test_every_committed_cell_reads_and_writes_back_as_itself(table):
    paths = sorted((RESULTS / f"{table}_references" / "cells").glob("*.json"))
    assert len(paths) == {"ggsm": 20, "gig": 5, "grid": 12, "bblr": 11}[table]
    for path in paths:
        cell = R.read_stored_cell(path)
        assert ReferenceTableCell.from_json(json.loads(json.dumps(cell.to_json()))) == cell, path.name


def test_a_table_reads_back_as_itself_through_json():
    table = ReferenceTable(names=("a", "b"), cells=(_cell(), _cell(agreement=None)), computed=("a",), reused=("b",))
    stored = json.loads(json.dumps(table.to_json()))
    assert stored["format"] == 1 and [c["format"] for c in stored["cells"]] == [1, 1]
    assert ReferenceTable.from_json(stored) == table
    assert table.cell("b").agreement is None
    with pytest.raises(KeyError, match="no cell 'c' in this table; it has a, b"):
        table.cell("c")


# --------------------------------------------------------------------------------------
# The config
# --------------------------------------------------------------------------------------
def _config(name="k1", **changes) -> ReferenceCellConfig:
    settings = dict(name=name, model="gig-logistic", data="horii_synthetic", params={"k": 1.0, "theta": 1.0},
                    samplers=("nuts", "pg-gibbs"), engines=("vb",), label="k = 1", coordinates={"k": 1.0})
    return ReferenceCellConfig(**{**settings, **changes})


@pytest.mark.parametrize("changes, words", [
    ({"name": "../k1"}, "a reference cell's name is a file name without a folder"),
    ({"samplers": ("nuts", "hmc")}, "unknown reference sampler(s) ['hmc'] for gig-logistic"),
    ({"engines": ("em",)}, "model 'gig-logistic' has no engine 'em'"),
    ({"time_limit": 0.0}, "time_limit must be positive seconds or None; got 0.0"),
    ({"cross_check": True, "samplers": ("nuts",)}, "cross_check compares the chain's first two samplers"),
    ({"cross_check": True, "every_sampler": True}, "cross_check compares the chain's first two samplers"),
    ({"spec_changes": {"rho": 2.0}}, "variant, spec_changes and modes are every-sampler options"),
    ({"modes": "laplace", "every_sampler": True}, "modes names the engine whose answer is placed among the modes"),
])
def test_a_config_that_cannot_run_is_refused_before_any_work(changes, words):
    with pytest.raises(ValueError) as caught:
        _config(**changes)
    assert str(caught.value).startswith(words)


# --------------------------------------------------------------------------------------
# The resumable table and the cross-check
# --------------------------------------------------------------------------------------
@pytest.fixture
def computed(monkeypatch):
    """The cell computation and the cross-check replaced by stand-ins that record each call."""
    calls = []

    def run_cell(config, *, cache_dir=None):
        calls.append(("cell", config.name))
        return _cell(label=config.label, coordinates=config.coordinates, params=config.params, agreement=None,
                     wall_seconds=float(len(calls)))

    def add_cross_check(config, cell, *, cache_dir=None):
        calls.append(("cross-check", config.name))
        return dataclasses.replace(cell, agreement=_cell().agreement)

    monkeypatch.setattr(R, "run_reference_cell", run_cell)
    monkeypatch.setattr(R, "add_cross_check", add_cross_check)
    return calls


def test_a_table_computes_only_the_cells_not_stored(tmp_path, computed, capsys):
    first = R.run_reference_table([_config("k1")], tmp_path)
    assert computed == [("cell", "k1")] and first.computed == ("k1",) and first.reused == ()
    signed = signing.read_signed_json(tmp_path / "cells" / "k1.json", signing.REFERENCE_TABLE_CELL, "cell")
    assert ReferenceTableCell.from_json(signed) == first.cell("k1")  # stored signed, read back as itself

    k05 = _config("k0.5", params={"k": 0.5, "theta": 0.5}, label="k = 0.5", coordinates={"k": 0.5})
    again = R.run_reference_table([_config("k1"), k05], tmp_path)
    assert computed == [("cell", "k1"), ("cell", "k0.5")]
    assert again.reused == ("k1",) and again.computed == ("k0.5",) and again.names == ("k1", "k0.5")
    assert again.cell("k1") == first.cell("k1") and again.cell("k0.5").coordinates["k"] == 0.5
    assert "k = 0.5 ..." in capsys.readouterr().out


def test_a_stored_cell_of_another_setting_or_not_signed_is_computed_again(tmp_path, computed):
    R.run_reference_table([_config("k1")], tmp_path)
    with pytest.warns(UserWarning, match=r"k1\.json: it is of another setting \(k = 1\); computing it again"):
        R.run_reference_table([_config("k1", params={"k": 2.0, "theta": 2.0})], tmp_path)
    path = tmp_path / "cells" / "k1.json"
    # written back unsigned, as ggsm_references.py once wrote a cell with its cross-check
    write_json_atomic({k: v for k, v in json.loads(path.read_text()).items() if k not in ("mac", "key_id")}, path)
    with pytest.warns(UserWarning, match="the record has no signature"):
        R.run_reference_table([_config("k1")], tmp_path)
    assert computed == [("cell", "k1")] * 3


def test_a_cross_check_written_back_is_read_back_as_stored(tmp_path, computed):
    """ggsm_references.py wrote the cross-check back unsigned (write_json_atomic) while the
    next run read cells signed: every cross-checked cell was computed again, its cross-check
    too. Now the cross-check is part of the cell and stored the same signed way."""
    R.run_reference_table([_config("k1")], tmp_path)  # stored without a cross-check
    checking = _config("k1", cross_check=True)
    first = R.run_reference_table([checking], tmp_path)
    assert computed == [("cell", "k1"), ("cross-check", "k1")] and first.cross_checked == ("k1",)
    again = R.run_reference_table([checking], tmp_path)
    assert computed == [("cell", "k1"), ("cross-check", "k1")]  # nothing run the second time
    assert again.reused == ("k1",) and again.cell("k1").agreement == _cell().agreement
    assert again.cell("k1").wall_seconds == 1.0  # the cell first computed, with its cross-check added


def test_a_cross_check_is_asked_only_where_the_chains_first_sampler_certified():
    checking = _config(cross_check=True)
    assert R.needs_cross_check(checking, _cell(agreement=None))
    assert not R.needs_cross_check(checking, _cell())  # has one
    assert not R.needs_cross_check(_config(), _cell(agreement=None))  # not asked
    assert not R.needs_cross_check(checking, _cell(agreement=None, reference=ReferenceUsed("pg-gibbs", True)))
    assert not R.needs_cross_check(checking, _cell(agreement=None, reference=ReferenceUsed("nuts", False)))


def test_a_table_is_read_back_without_computing_or_names_what_it_lacks(tmp_path, computed):
    R.run_reference_table([_config("k1")], tmp_path)
    k05 = _config("k0.5", params={"k": 0.5, "theta": 0.5})
    with pytest.raises(ValueError, match=r"1 of 2 cells cannot be read without computing them: k0\.5: not stored"):
        R.read_reference_table([_config("k1"), k05], tmp_path)
    unsigned = tmp_path / "cells" / "k1.json"
    record = json.loads(unsigned.read_text())
    unsigned.write_text(json.dumps({k: v for k, v in record.items() if k not in ("mac", "key_id")}))
    table = R.read_reference_table([_config("k1")], tmp_path)  # as stored: signed or not
    assert table.reused == ("k1",) and table.cell("k1").wall_seconds == 1.0
    assert computed == [("cell", "k1")]


@pytest.mark.parametrize("benchmark", ["ggsm", "gig", "grid", "bblr"])
def test_each_benchmark_rebuilds_its_committed_table_from_its_committed_cells(benchmark, tmp_path, monkeypatch):
    """``--table-only`` on a copy of the committed folder: the committed table.md again, and
    nothing computed."""
    def refuse(*args, **kwargs):
        raise AssertionError("a cell was computed")

    monkeypatch.setattr(R, "run_reference_cell", refuse)
    committed = RESULTS / f"{benchmark}_references"
    shutil.copytree(committed / "cells", tmp_path / "cells")
    spec = importlib.util.spec_from_file_location(benchmark, REPO / "benchmarks" / f"{benchmark}_references.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--table-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "table.md").read_text() == (committed / "table.md").read_text()
    # a missing cell is named, and no table is written
    os.remove(sorted((tmp_path / "cells").glob("*.json"))[0])
    os.remove(tmp_path / "table.md")
    assert module.main(["--table-only", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "table.md").exists()


def test_median_agreement_of_two_exact_runs_and_of_a_shifted_one():
    # Two runs of exact iid draws (4 x 1000) of the same 12 independent N(0, 1) coordinates:
    # each z = (median_a - median_b) / sqrt(mcse_a^2 + mcse_b^2) is about N(0, 1), so the largest
    # |z| of 12 exceeds 4 with probability about 12 * 6.3e-5 (the seed is fixed). A second run
    # moved by 0.2 sd in one coordinate: a median's variance is pi / (2 n) for n iid normal draws,
    # so its z is about 0.2 / sqrt(2 * 1.571 / 4000) ~ 7.1.
    import numpy as np
    from types import SimpleNamespace

    rng = np.random.default_rng(53)

    def run(shift):
        draws = rng.standard_normal((4, 1000, 12)) + shift
        post = SimpleNamespace(n_chains=4, n_draws=1000, flat_draws=lambda: draws.reshape(4000, 12),
                               predict_proba=lambda Phi: np.full(len(Phi), 0.5))
        return SimpleNamespace(posterior=post, sampler="nuts", certified=True)

    same = R.median_agreement(run(0.0), run(0.0), np.zeros((3, 12)))
    assert same.n_coordinates == 12 and same.max_abs_z_median < 4.0 and same.pred_mae_between == 0.0
    moved = np.zeros(12)
    moved[5] = 0.2
    apart = R.median_agreement(run(0.0), run(moved), np.zeros((3, 12)))
    assert apart.max_abs_z_median > 4.0 and apart.n_abs_z_above_3 >= 1
