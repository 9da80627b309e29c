"""The reference-table benchmarks (benchmarks/ggsm_references.py, gig_references.py,
grid_references.py, bblr_references.py): their tables must render every kind of cell -
certified, not certified, a sampler that ran out of time, no reference at all - without
inventing numbers. The typed cells are built by hand here (running the samplers is what the
benchmarks themselves are for)."""
from __future__ import annotations

import importlib.util

import pytest

from zoo.validation.runs.reference_table_result import (EngineNumbers, ModesFound, ReferenceAgreement,
                                                        ReferenceTableCell, ReferenceUsed, TriedReference)

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


@pytest.fixture(scope="module")
def grid():
    return _load("grid_references")


@pytest.fixture(scope="module")
def bblr():
    return _load("bblr_references")


def _tried(sampler, certified, time_limit=None):
    if time_limit is not None:
        return TriedReference(sampler=sampler, certified=False, time_limit=time_limit, failures=("ran out of time",))
    return TriedReference(sampler=sampler, certified=certified, rhat_max=1.004 if certified else 2.5,
                          ess_bulk_min=600.0 if certified else 5.0, divergences=0, seconds=60.0, failures=())


def _cell(model, coordinates, tried, reference, **parts):
    return ReferenceTableCell(model=model, data="d", split=0, params={}, label="cell", coordinates=coordinates,
                              tried=tuple(tried), reference=ReferenceUsed(*reference), **parts)


def test_gig_table_shows_certified_uncertified_and_timed_out_cells(gig):
    certified = _cell("gig-logistic", {"k": 1.0}, [_tried("nuts", False), _tried("pg-gibbs", True)],
                      ("pg-gibbs", True), moments={"mean_exists": True, "sd_exists": True}, reference_test_error=0.217,
                      engines=(EngineNumbers("vb", test_error=0.2, seconds=0.3, pred_mae=0.066, khat=2.26,
                                             sd_ratio_groups={"noise": 0.33, "relevant": 0.19}),))
    none = _cell("gig-logistic", {"k": 1e-6},
                 [_tried("nuts", False, time_limit=600.0), _tried("pg-gibbs", False, time_limit=600.0)],
                 (None, False), moments={"mean_exists": False, "sd_exists": False, "reason": "..."},
                 engines=(EngineNumbers("vb", test_error=0.127, seconds=1.3,
                                        sd_ratio_groups={"noise": None, "relevant": None}),))
    rows = gig.table([certified, none]).splitlines()[-2:]
    assert rows[0] == ("| 1 | no (R-hat 2.500, ESS 5, div 0, 60 s) | certified (R-hat 1.004, ESS 600, div 0, 60 s) | "
                       "**pg-gibbs** | exists / exists | 0.33 / 0.19 | 2.26 | 0.066 | 0.200 (0.217) |")
    assert rows[1] == ("| 1e-06 | ran out of time (600 s) | ran out of time (600 s) | **none certified** | "
                       "does not exist / does not exist | - / - | - | - | 0.127 (-) |")


def test_ggsm_table_shows_a_sampler_that_ran_out_of_time_and_a_cross_check(ggsm):
    cell = _cell("ggsm-probit", {"design": "ggig_linear", "prior": "paper", "q": 0.1},
                 [_tried("nuts", False, time_limit=1800.0), _tried("slice-gibbs", False)], ("slice-gibbs", False),
                 moments={"mean_exists": False, "sd_exists": False},
                 engines=(EngineNumbers("mm", seconds=0.01), EngineNumbers("mm-laplace", failure="ApproximationFailed: ...")))
    assert ggsm.table([cell]).splitlines()[-1] == (
        "| ggig_linear | paper | 0.1 | ran out of time (1800 s) | no (R-hat 2.500, ESS 5, div 0, 60 s) | "
        "**none certified** | none | 0.010 | - | - / failed | - |")
    checked = _cell("ggsm-probit", {"design": "ggig_linear_weak", "prior": "proper", "q": 2.0}, [_tried("nuts", True)],
                    ("nuts", True), moments={"mean_exists": True, "sd_exists": True},
                    engines=(EngineNumbers("mm", seconds=0.024, speedup_vs_reference=448.2, pred_mae=0.0172),
                             EngineNumbers("mm-laplace", pred_mae=0.0481)),
                    agreement=ReferenceAgreement(("nuts", "slice-gibbs"), (True, False), 2.971, 52, 0, 0.003))
    assert ggsm.table([checked]).splitlines()[-1] == (
        "| ggig_linear_weak | proper | 2 | certified (R-hat 1.004, ESS 600, div 0, 60 s) | not run | **nuts** | all | "
        "0.024 | 448 | 0.0172 / 0.0481 | Gibbs NOT certified; max abs z of medians 2.97 over 52 (0 above 3); "
        "mean abs dp 0.0030 |")


def test_grid_table_shows_agreement_ess_rates_and_cells_without_a_reference(grid):
    both = _cell("grid-rvm", {"case": "digits", "prior": "proper", "variant": "s-grid"},
                 [_tried("nuts", True), _tried("grid-gibbs", True)], ("nuts", True), n_train=500, n_weights=64,
                 agreement=ReferenceAgreement(("nuts", "grid-gibbs"), (True, True), 2.68, 64, 0, 0.001),
                 moments={"mean_exists": True, "sd_exists": True}, reference_test_error=0.099,
                 engines=(EngineNumbers("vb-s-grid", test_error=0.099, sd_ratio_median=0.74, khat=1.24,
                                        pred_mae=0.0071, verdict="differs"),))
    none = _cell("grid-rvm", {"case": "esl", "prior": "paper", "variant": "rvm"},
                 [_tried("nuts", False), _tried("grid-gibbs", False, time_limit=300.0)], (None, False),
                 n_train=200, n_weights=400, moments={"mean_exists": False, "sd_exists": False},
                 engines=(EngineNumbers("vb-rvm", test_error=0.25),))
    rows = grid.table([both, none]).splitlines()[-2:]
    # 600 ESS in 60 s: 10 per second; both samplers certified and their agreement shown
    assert rows[0] == ("| digits (500, 64) | proper | s-grid | certified (R-hat 1.004, ESS 600, div 0, 60 s) | 10.0 | "
                       "certified (R-hat 1.004, ESS 600, div 0, 60 s) | 10.0 | **nuts** | 2.68 (0 of 64 > 3) | all | "
                       "0.74 | 1.24 | 0.0071 | differs | 0.099 (0.099) |")
    assert rows[1] == ("| esl (200, 400) | paper | rvm | no (R-hat 2.500, ESS 5, div 0, 60 s) | 0.1 | "
                       "ran out of time (300 s) | - | **none certified** | - | none | - | - | - | - | 0.250 (-) |")


def test_grid_table_refuses_unknown_cases(grid, capsys):
    with pytest.raises(SystemExit):
        grid.main(["--cases", "mnist"])
    assert "unknown case" in capsys.readouterr().err


def _bblr(coordinates, tried, reference, **parts):
    spec = {"gamma": coordinates["gamma"], "lam": 1.0}
    return _cell("bblr", coordinates, tried, reference, spec=spec, n_train=614, n_weights=9, **parts)


def test_bblr_table_shows_modes_laplace_refusals_and_uncertified_mode_counts(bblr):
    where = {"data": "pima", "gamma": 4.0, "config": 2, "prior": "gaussian"}
    certified = _bblr(where, [_tried("nuts", True), _tried("parallel-tempering", True)], ("nuts", True),
                      agreement=ReferenceAgreement(("nuts", "parallel-tempering"), (True, True), 1.7, 9, 0, 0.001),
                      modes=ModesFound("nuts", True, 1, 1.0, 0.0, 0, 200, "sla", True), reference_test_error=0.255,
                      engines=(EngineNumbers("sla", test_error=0.26),
                               EngineNumbers("laplace", test_error=0.234, sd_ratio_median=0.45, khat=0.92,
                                             pred_mae=0.019, verdict="differs")))
    rough = _bblr({**where, "gamma": 63.0}, [_tried("nuts", False), _tried("parallel-tempering", False, 600.0)],
                  (None, False), modes=ModesFound("nuts", False, 7, 0.4, 0.035, 0, 200, "sla", False),
                  engines=(EngineNumbers("sla", test_error=0.27),
                           EngineNumbers("laplace", failure="ApproximationFailed: the Hessian is not positive definite")))
    rows = bblr.table([certified, rough]).splitlines()[-2:]
    # 600 ESS in 60 s; both certified and their agreement shown; Laplace measured
    assert rows[0] == ("| pima (614, 9) | 4 (16) | BBLR2 | gaussian | certified (R-hat 1.004, ESS 600, div 0, 60 s) | 10.0 | "
                       "certified (R-hat 1.004, ESS 600, div 0, 60 s) | 10.0 | **nuts** | 1.70 (0 of 9 > 3) | "
                       "1 / 1.00 ± 0.00 / yes | 0.260 / 0.234 / 0.255 | 0.45 | 0.92 | 0.0190 | differs |")
    # no reference: the mode count says where it came from, Laplace's refusal is shown, no metrics
    assert rows[1] == ("| pima (614, 9) | 63 (3969) | BBLR2 | gaussian | no (R-hat 2.500, ESS 5, div 0, 60 s) | 0.1 | "
                       "ran out of time (600 s) | - | **none certified** | - | "
                       "7 / 0.40 ± 0.04 / **no** (from uncertified nuts) | 0.270 / failed: ApproximationFailed / - | "
                       "- | - | - | - |")
    # no ascent converged (a prior with a cusp): said so, not "0 modes, SLA not the main one"
    cusp = ModesFound("nuts", False, 0, None, None, 200, 200, "sla", False)
    row = bblr.table([_bblr(where, [], (None, False), modes=cusp)]).splitlines()[-1]
    assert "| none found (200 of 200 ascents reached no proper mode) |" in row
