"""The reference-table benchmarks (benchmarks/ggsm_references.py, gig_references.py):
their tables must render every kind of cell - certified, not certified, a sampler that
ran out of time, no reference at all - without inventing numbers. The cells are built
by hand here (running the samplers is what the benchmarks themselves are for)."""
from __future__ import annotations

import importlib.util

import pytest

from repository import REPO

BENCHMARKS = REPO / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gig():
    return _load("gig_references")


@pytest.fixture(scope="module")
def ggsm():
    return _load("ggsm_references")


def _tried(sampler, certified, time_limit=None):
    if time_limit is not None:
        return {"sampler": sampler, "certified": False, "rhat_max": None, "ess_bulk_min": None,
                "divergences": None, "seconds": None, "time_limit": time_limit, "failures": ["ran out of time"]}
    return {"sampler": sampler, "certified": certified, "rhat_max": 1.004 if certified else 2.5,
            "ess_bulk_min": 600.0 if certified else 5.0, "divergences": 0, "seconds": 60.0, "time_limit": None,
            "failures": []}


def test_gig_table_shows_certified_uncertified_and_timed_out_cells(gig):
    moments = {"mean_exists": False, "sd_exists": False, "reason": "..."}
    certified = {"k": 1.0, "reference": {"sampler": "pg-gibbs", "certified": True},
                 "tried": [_tried("nuts", False), _tried("pg-gibbs", True)],
                 "moments": {"mean_exists": True, "sd_exists": True},
                 "vb": {"test_error": 0.2, "reference_test_error": 0.217, "seconds": 0.3, "pred_mae": 0.066,
                        "khat": 2.26, "sd_ratio_noise": 0.33, "sd_ratio_relevant": 0.19}}
    none = {"k": 1e-6, "reference": {"sampler": None, "certified": False},
            "tried": [_tried("nuts", False, time_limit=600.0), _tried("pg-gibbs", False, time_limit=600.0)],
            "moments": moments,
            "vb": {"test_error": 0.127, "reference_test_error": None, "seconds": 1.3, "pred_mae": None,
                   "khat": None, "sd_ratio_noise": None, "sd_ratio_relevant": None}}
    rows = gig.table([certified, none]).splitlines()[-2:]
    assert "**pg-gibbs**" in rows[0] and "0.33 / 0.19" in rows[0] and "exists / exists" in rows[0]
    assert "ran out of time (600 s)" in rows[1] and "**none certified**" in rows[1]
    assert "does not exist / does not exist" in rows[1] and "0.127 (-)" in rows[1]


def test_ggsm_table_shows_a_sampler_that_ran_out_of_time(ggsm):
    cell = {"design": "ggig_linear", "prior": "paper", "q": 0.1,
            "reference": {"sampler": "slice-gibbs", "certified": False},
            "tried": [_tried("nuts", False, time_limit=1800.0), _tried("slice-gibbs", False)],
            "moments": {"mean_exists": False, "sd_exists": False},
            "engines": {"mm": {"seconds": 0.01, "speedup_vs_reference": None, "pred_mae": None},
                        "mm-laplace": {"failure": "ApproximationFailed: ..."}}}
    row = ggsm.table([cell]).splitlines()[-1]
    assert "ran out of time (1800 s)" in row and "**none certified**" in row and "failed" in row


@pytest.fixture(scope="module")
def grid():
    return _load("grid_references")


def test_grid_table_shows_agreement_ess_rates_and_cells_without_a_reference(grid):
    both = {"case": "digits", "prior": "proper", "variant": "s-grid", "n_train": 500, "n_weights": 64,
            "reference": {"sampler": "nuts", "certified": True},
            "tried": [_tried("nuts", True), _tried("grid-gibbs", True)],
            "agreement": {"max_abs_z_median": 2.68, "n_abs_z_above_3": 0, "n_coordinates": 64,
                          "pred_mae_between": 0.001},
            "moments": {"mean_exists": True, "sd_exists": True},
            "vb": {"test_error": 0.099, "reference_test_error": 0.099, "sd_ratio_median": 0.74, "khat": 1.24,
                   "pred_mae": 0.0071, "verdict": "differs"}}
    none = {"case": "esl", "prior": "paper", "variant": "rvm", "n_train": 200, "n_weights": 400,
            "reference": {"sampler": None, "certified": False},
            "tried": [_tried("nuts", False), _tried("grid-gibbs", False, time_limit=300.0)],
            "agreement": None, "moments": {"mean_exists": False, "sd_exists": False},
            "vb": {"test_error": 0.25}}
    rows = grid.table([both, none]).splitlines()[-2:]
    # 600 ESS in 60 s: 10 per second; both samplers certified and their agreement shown
    assert "| 10.0 |" in rows[0] and "2.68 (0 of 64 > 3)" in rows[0] and "**nuts**" in rows[0]
    assert "| 0.74 | 1.24 | 0.0071 | differs |" in rows[0]
    assert "ran out of time (300 s)" in rows[1] and "**none certified**" in rows[1]
    assert "| none | - | - | - | - | 0.250 (-) |" in rows[1]


def test_grid_table_refuses_unknown_cases(grid, capsys):
    with pytest.raises(SystemExit):
        grid.main(["--cases", "mnist"])
    assert "unknown case" in capsys.readouterr().err


@pytest.fixture(scope="module")
def bblr():
    return _load("bblr_references")


def test_bblr_table_shows_modes_laplace_refusals_and_uncertified_mode_counts(bblr):
    certified = {"data": "pima", "n_train": 614, "n_weights": 9, "gamma": 4.0, "gamma2_over_lam": 16.0, "config": 2,
                 "prior": "gaussian", "reference": {"sampler": "nuts", "certified": True},
                 "tried": [_tried("nuts", True), _tried("parallel-tempering", True)],
                 "agreement": {"max_abs_z_median": 1.7, "n_abs_z_above_3": 0, "n_coordinates": 9},
                 "modes": {"from": "nuts", "certified": True, "n_modes": 1, "main_share": 1.0, "main_share_se": 0.0,
                           "sla_is_main_mode": True},
                 "engines": {"sla": {"test_error": 0.26}, "reference": {"test_error": 0.255},
                             "laplace": {"test_error": 0.234, "sd_ratio_median": 0.45, "khat": 0.92,
                                         "pred_mae": 0.019, "verdict": "differs"}}}
    rough = {"data": "pima", "n_train": 614, "n_weights": 9, "gamma": 63.0, "gamma2_over_lam": 3969.0, "config": 2,
             "prior": "gaussian", "reference": {"sampler": None, "certified": False},
             "tried": [_tried("nuts", False), _tried("parallel-tempering", False, time_limit=600.0)],
             "agreement": None,
             "modes": {"from": "nuts", "certified": False, "n_modes": 7, "main_share": 0.4, "main_share_se": 0.035,
                       "sla_is_main_mode": False},
             "engines": {"sla": {"test_error": 0.27},
                         "laplace": {"failure": "ApproximationFailed: the Hessian is not positive definite"}}}
    rows = bblr.table([certified, rough]).splitlines()[-2:]
    # 600 ESS in 60 s; both certified and their agreement shown; Laplace measured
    assert "| 10.0 |" in rows[0] and "1.70 (0 of 9 > 3)" in rows[0] and "**nuts**" in rows[0]
    assert "1 / 1.00 ± 0.00 / yes |" in rows[0] and "0.260 / 0.234 / 0.255" in rows[0]
    assert "| 0.45 | 0.92 | 0.0190 | differs |" in rows[0]
    # no reference: the mode count says where it came from, Laplace's refusal is shown, no metrics
    assert "**none certified**" in rows[1] and "ran out of time (600 s)" in rows[1]
    assert "7 / 0.40 ± 0.04 / **no** (from uncertified nuts)" in rows[1]
    assert "0.270 / failed: ApproximationFailed / -" in rows[1] and rows[1].endswith("| - | - | - | - |")
    # no ascent converged (a prior with a cusp): said so, not "0 modes, SLA not the main one"
    rough["modes"].update(n_modes=0, main_share=None, n_failed=200, n_starts=200, sla_is_main_mode=False)
    assert "none found (200 of 200 ascents reached no proper mode)" in bblr.table([rough]).splitlines()[-1]
