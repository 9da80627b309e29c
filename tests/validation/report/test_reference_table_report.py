"""The reference tables' cells in words (validation/report/reference_table_report.py), from
the records validation/runs/reference_table.py keeps."""
from __future__ import annotations

from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, reference_used_text,
                                                          tried_text)
from zoo.validation.runs.reference_table import tried_record

SUMMARY = {"sampler_name": "nuts", "certified": True, "rhat_max": 1.0042, "ess_bulk_min": 812.4, "divergences": 0,
           "seconds": 20.2, "sampler": {"num_samples_total": 2000}, "failures": []}


def test_a_samplers_run_in_words():
    tried = [tried_record(SUMMARY), tried_record({**SUMMARY, "sampler_name": "gibbs", "time_limit": 60.0})]
    assert tried_text(tried, "nuts") == "certified (R-hat 1.004, ESS 812, div 0, 20 s)"
    assert tried_text(tried, "gibbs") == "ran out of time (60 s)"
    assert tried_text(tried, "pg-gibbs") == "not run"
    assert ess_rate_text(tried, "nuts") == f"{812.4 / 20.2:.1f}" and ess_rate_text(tried, "gibbs") == "-"
    assert tried_text([tried_record({**SUMMARY, "certified": False})], "nuts").startswith("no (R-hat")


def test_the_reference_used_and_the_agreement_in_words():
    assert reference_used_text({"sampler": "nuts", "certified": True}) == "**nuts**"
    assert reference_used_text({"sampler": "nuts", "certified": False}) == "**none certified**"
    agreement = {"max_abs_z_median": 2.714, "n_coordinates": 31, "n_abs_z_above_3": 0, "pred_mae_between": 0.001}
    assert agreement_text(agreement) == "2.71 (0 of 31 > 3)" and agreement_text(None) == "-"
    assert fmt(None) == "-" and fmt(0.12345) == "0.123"
