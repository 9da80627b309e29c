"""The reference tables' cells in words (benchmarks/ggsm_references.py, gig_references.py,
grid_references.py, bblr_references.py): how each sampler of a model's reference chain fared,
the reference ``zoo compare`` would use, and two certified references' agreement - read from
the records ``validation/runs/reference_table.py`` keeps (``tried_record``,
``median_agreement``)."""
from __future__ import annotations

from typing import Any


def tried_text(tried: list[dict[str, Any]], sampler: str) -> str:
    """One table cell: how ``sampler`` fared in a cell's ``tried`` records."""
    t = next((t for t in tried if t["sampler"] == sampler), None)
    if t is None:
        return "not run"
    if t.get("time_limit") is not None:
        return f"ran out of time ({t['time_limit']:g} s)"
    word = "certified" if t["certified"] else "no"
    return (f"{word} (R-hat {t['rhat_max']:.3f}, ESS {t['ess_bulk_min']:.0f}, div {t['divergences']}, "
            f"{t['seconds']:.0f} s)")


def fmt(value, spec: str = ".3f") -> str:
    """A number for a table cell, "-" for None."""
    return "-" if value is None else format(value, spec)


def ess_rate_text(tried: list[dict[str, Any]], sampler: str) -> str:
    """The smallest bulk ESS per wall second of ``sampler`` in a cell's tried records ("-"
    where it did not run or ran out of time)."""
    t = next((t for t in tried if t["sampler"] == sampler), None)
    if t is None or t.get("time_limit") is not None or not t.get("seconds"):
        return "-"
    return f"{t['ess_bulk_min'] / t['seconds']:.1f}"


def reference_used_text(reference: dict[str, Any]) -> str:
    """A cell's reference column: the certified sampler `zoo compare` would use, or none."""
    return f"**{reference['sampler']}**" if reference["certified"] else "**none certified**"


def agreement_text(agreement: dict[str, Any] | None) -> str:
    """The two samplers' agreement (:func:`median_agreement`), "-" unless both certified."""
    if agreement is None:
        return "-"
    return (f"{agreement['max_abs_z_median']:.2f} ({agreement['n_abs_z_above_3']} of "
            f"{agreement['n_coordinates']} > 3)")


__all__ = ["tried_text", "fmt", "ess_rate_text", "reference_used_text", "agreement_text"]
