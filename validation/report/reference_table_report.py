"""The reference tables in words (benchmarks/ggsm_references.py, gig_references.py,
grid_references.py, bblr_references.py), from the typed cells ``validation/runs/reference_table.py``
returns and stores (:class:`~zoo.validation.runs.reference_table_result.ReferenceTableCell`): how each
sampler of a model's reference chain fared, the reference ``zoo compare`` would use, two
references' agreement, which moments exist, and the markdown layout every table shares. A
column only one table has stays in its benchmark."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..runs.reference_table_result import ReferenceAgreement, ReferenceUsed, TriedReference


def _run_of(tried: Sequence[TriedReference], sampler: str) -> TriedReference | None:
    return next((t for t in tried if t.sampler == sampler), None)


def tried_text(tried: Sequence[TriedReference], sampler: str) -> str:
    """One table cell: how ``sampler`` fared among a cell's tried samplers."""
    t = _run_of(tried, sampler)
    if t is None:
        return "not run"
    if t.time_limit is not None:
        return f"ran out of time ({t.time_limit:g} s)"
    word = "certified" if t.certified else "no"
    return f"{word} (R-hat {t.rhat_max:.3f}, ESS {t.ess_bulk_min:.0f}, div {t.divergences}, {t.seconds:.0f} s)"


def fmt(value, spec: str = ".3f") -> str:
    """A number for a table cell, "-" for None."""
    return "-" if value is None else format(value, spec)


def ess_rate_text(tried: Sequence[TriedReference], sampler: str) -> str:
    """The smallest bulk ESS per wall second of ``sampler`` among a cell's tried samplers ("-"
    where it did not run or ran out of time)."""
    t = _run_of(tried, sampler)
    if t is None or t.time_limit is not None or not t.seconds:
        return "-"
    return f"{t.ess_bulk_min / t.seconds:.1f}"


def reference_used_text(reference: ReferenceUsed) -> str:
    """A cell's reference column: the certified sampler ``zoo compare`` would use, or none."""
    return f"**{reference.sampler}**" if reference.certified else "**none certified**"


def agreement_text(agreement: ReferenceAgreement | None) -> str:
    """Two certified samplers' agreement (``median_agreement``): "-" unless both certified."""
    if agreement is None or not all(agreement.certified):
        return "-"
    return f"{agreement.max_abs_z_median:.2f} ({agreement.n_abs_z_above_3} of {agreement.n_coordinates} > 3)"


def moments_text(moments: Mapping[str, Any] | None) -> str:
    """Which posterior moments of the weights exist, from the record's moments analysis (None or
    empty: the model has no reason to doubt any, so all)."""
    if not moments or moments.get("sd_exists"):
        return "all"
    return ("mean, no sd" if moments.get("mean_exists") else "none" if moments.get("mean_exists") is False
            else "unknown")


def markdown_table(title: str, intro: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A reference table's ``table.md``: its title, what it shows, and one row per cell."""
    lines = [f"# {title}", "", intro, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


__all__ = ["tried_text", "fmt", "ess_rate_text", "reference_used_text", "agreement_text", "moments_text",
           "markdown_table"]
