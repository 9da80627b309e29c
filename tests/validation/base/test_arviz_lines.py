"""The two ArviZ lines, seen through the adapter: what one writes the other reads, and both
compute the same diagnostics of the same draws.

The files and numbers of the line that is not installed were written under it by
``tests/arviz_lines.py`` (its docstring says how to remake them). CI runs this file under
ArviZ 0.2x (Python 3.11) and 1.x (Python 3.13), so each direction is read by the other line.
"""
from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.references import cache

from arviz_lines import ATTRS, DIAGNOSTICS, FOLDER, diagnostics_of, fixture_draws, sites

WRITTEN = sorted(glob.glob(os.path.join(FOLDER, "written_by_arviz_*.nc")))


def test_a_file_of_each_line_is_kept_for_the_other():
    assert [os.path.basename(p) for p in WRITTEN] == ["written_by_arviz_0.nc", "written_by_arviz_1.nc"]


@pytest.mark.parametrize("path", WRITTEN, ids=os.path.basename)
def test_what_either_line_wrote_reads_here(path):
    fixture = fixture_draws()
    idata = adapter.from_netcdf(path)
    assert set(adapter.GROUPS[:2]) | {"constant_data"} <= set(adapter.groups(idata))
    draws = adapter.idata_to_draws(idata, sites())
    for name, want in fixture["draws"].items():
        np.testing.assert_array_equal(draws[name], want)  # bit for bit: netCDF stores doubles
    assert list(adapter.group(idata, "posterior")["w"].dims) == ["chain", "draw", "basis"]
    stored, stats = cache._stored_draws_and_stats(idata)  # what a cache entry's digest is taken of
    np.testing.assert_array_equal(stats["diverging"], fixture["diverging"])
    assert stats["diverging"].dtype == bool
    np.testing.assert_array_equal(adapter.group(idata, "constant_data")["Phi"].values,
                                  fixture["constant_data"]["Phi"])
    attrs = adapter.posterior_attrs(idata)
    assert attrs["engine"] == ATTRS["engine"] and attrs["posterior_kind"] == "draws"
    assert attrs["converged"] == 1 and json.loads(attrs["settings"]) == ATTRS["settings"]


def test_what_this_line_writes_reads_back_with_its_groups(tmp_path):
    fixture = fixture_draws()
    idata = adapter.draws_to_idata(fixture["draws"], sites(), constant_data=fixture["constant_data"],
                                   observed={"y": fixture["constant_data"]["y"]},
                                   sample_stats={"diverging": fixture["diverging"]}, attrs=ATTRS)
    idata = adapter.with_constant_data(idata, {"y_test": np.ones(3)})
    back = adapter.from_netcdf(adapter.to_netcdf(idata, str(tmp_path / "x.nc")))
    assert adapter.groups(back) == ("posterior", "sample_stats", "observed_data", "constant_data")
    assert set(adapter.group(back, "constant_data").data_vars) == {"Phi", "y", "y_test"}
    assert adapter.group(back, "constant_data")["y_test"].dims == ("obs_test",)
    for name, want in fixture["draws"].items():
        np.testing.assert_array_equal(adapter.idata_to_draws(back, sites())[name], want)


def test_a_missing_group_is_named():
    idata = adapter.draws_to_idata(fixture_draws()["draws"], sites())
    with pytest.raises(KeyError, match="no 'sample_stats' group"):
        adapter.group(idata, "sample_stats")


def test_both_lines_compute_the_same_diagnostics_of_the_same_draws():
    # R-hat, bulk and tail ESS and both MCSEs: the same definitions (Vehtari et al. 2021), so
    # equal to round-off. k-hat: see the next test.
    with open(DIAGNOSTICS, encoding="utf-8") as fh:
        stored = json.load(fh)
    assert {v.split(".")[0] for v in stored} == {"0", "1"}, "one entry written under each line"
    here = diagnostics_of(fixture_draws())
    for version, theirs in stored.items():
        for coordinate, values in theirs["coordinates"].items():
            for key, value in values.items():
                assert here["coordinates"][coordinate][key] == pytest.approx(value, rel=1e-10), \
                    (version, coordinate, key)


def test_each_line_s_khat_is_the_zoo_s_psis_with_that_line_s_tail():
    # ArviZ's psislw fits the largest min(S/5, 3 sqrt(S)) weights, rounded up by 0.2x (as in
    # the PSIS paper and the zoo's own psis, which the judge uses) and down by arviz-stats
    # 1.x: for the fixture's 2000 weights 135 against 134 draws. With that one choice
    # reproduced, each line's k-hat and smoothed weights are the zoo's to round-off.
    from zoo.inference.importance import psis

    with open(DIAGNOSTICS, encoding="utf-8") as fh:
        stored = json.load(fh)
    lw = fixture_draws()["log_weights"]
    tail = min(0.2 * lw.size, 3 * np.sqrt(lw.size))
    for version, theirs in stored.items():
        rounded = int(np.ceil(tail)) if version.startswith("0.") else int(np.floor(tail))
        smoothed, khat = psis(lw, tail_draws=rounded)
        assert khat == pytest.approx(theirs["khat"], abs=1e-12), version
        np.testing.assert_allclose(smoothed[:10], theirs["smoothed_log_weights_head"], atol=1e-10)
    assert psis(lw)[1] == psis(lw, tail_draws=int(np.ceil(tail)))[1]


def test_a_zarr_store_reads_back_with_its_groups(tmp_path):
    pytest.importorskip("zarr")
    fixture = fixture_draws()
    idata = adapter.draws_to_idata(fixture["draws"], sites(), constant_data=fixture["constant_data"],
                                   sample_stats={"diverging": fixture["diverging"]}, attrs=ATTRS)
    path = str(tmp_path / "posterior.zarr")
    adapter.to_zarr(idata, path)
    adapter.to_zarr(idata, path)  # a second write replaces the first
    back = adapter.from_zarr(path)
    assert set(adapter.groups(back)) == {"posterior", "sample_stats", "constant_data"}
    for name, want in fixture["draws"].items():
        np.testing.assert_array_equal(adapter.idata_to_draws(back, sites())[name], want)
    assert adapter.posterior_attrs(back)["engine"] == ATTRS["engine"]
    assert sorted(os.listdir(tmp_path)) == ["posterior.zarr"]  # no temporary folder left behind
