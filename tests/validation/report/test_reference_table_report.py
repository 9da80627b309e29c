"""The reference tables' cells in words (validation/report/reference_table_report.py), from
the typed parts of a cell validation/runs/reference_table.py returns."""
from __future__ import annotations

from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, markdown_table,
                                                          moments_text, reference_used_text, tried_text)
from zoo.validation.runs.reference_table_result import ReferenceAgreement, ReferenceUsed, TriedReference
from zoo.validation.runs.results import ReferenceSummary

SUMMARY = ReferenceSummary(sampler_name="nuts", certified=True, rhat_max=1.0042, ess_bulk_min=812.4, divergences=0,
                           seconds=20.2, sampler={"num_samples_total": 2000}, failures=("a", "b", "c", "d"))


def test_a_samplers_run_as_a_cell_keeps_it_and_in_words():
    nuts = TriedReference.of(SUMMARY)
    assert nuts == TriedReference(sampler="nuts", certified=True, rhat_max=1.0042, ess_bulk_min=812.4, divergences=0,
                                  seconds=20.2, draws_per_chain=2000, time_limit=None, failures=("a", "b", "c"))
    gibbs = TriedReference.of(ReferenceSummary(sampler_name="gibbs", certified=False, time_limit=60.0))
    tried = [nuts, gibbs]
    assert tried_text(tried, "nuts") == "certified (R-hat 1.004, ESS 812, div 0, 20 s)"
    assert tried_text(tried, "gibbs") == "ran out of time (60 s)"
    assert tried_text(tried, "pg-gibbs") == "not run"
    assert ess_rate_text(tried, "nuts") == f"{812.4 / 20.2:.1f}" and ess_rate_text(tried, "gibbs") == "-"
    uncertified = TriedReference.of(ReferenceSummary(**{**SUMMARY.__dict__, "certified": False}))
    assert tried_text([uncertified], "nuts") == "no (R-hat 1.004, ESS 812, div 0, 20 s)"


def test_the_reference_used_the_agreement_and_the_moments_in_words():
    assert reference_used_text(ReferenceUsed("nuts", True)) == "**nuts**"
    assert reference_used_text(ReferenceUsed("nuts", False)) == "**none certified**"
    agreement = ReferenceAgreement(("nuts", "gibbs"), (True, True), 2.714, 31, 0, 0.001)
    assert agreement_text(agreement) == "2.71 (0 of 31 > 3)" and agreement_text(None) == "-"
    # a cross-check whose second sampler did not certify is no agreement of two references
    assert agreement_text(ReferenceAgreement(("nuts", "gibbs"), (True, False), 2.714, 31, 0, 0.001)) == "-"
    assert fmt(None) == "-" and fmt(0.12345) == "0.123"
    assert [moments_text(m) for m in (None, {"mean_exists": True, "sd_exists": True},
                                      {"mean_exists": True, "sd_exists": False},
                                      {"mean_exists": False, "sd_exists": False}, {"reason": "?", "sd_exists": None})] \
        == ["all", "all", "mean, no sd", "none", "unknown"]


def test_a_table_in_markdown():
    assert markdown_table("T", "What it shows.", ["a", "b"], [["1", "2"], ["3", "4"]]) == (
        "# T\n\nWhat it shows.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n")
