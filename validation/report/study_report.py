"""The report of a study: ``OUT/report.md`` from its cells (``validation/runs/study.py``
runs them and returns them; this module only reads them). The failed cells with their
reasons; the comparisons as engine x data set rows (their metrics and verdicts, the SBC
status of the engine in the same study, and the generic engines that do at least as well
as a paper's); each SBC cell with its figures; each defect battery as its detection table.
A stored study is reported again from its cell files alone.
"""
from __future__ import annotations

import os

import numpy as np

from ..base.atomic import write_text_atomic
from ..records import registry
from ..runs.battery import DETECTORS
from ..runs.study import CellResult, StudyConfig, StudyResult
from ..runs.study_kinds import STUDY_KINDS
from .sbc_report import coverage_line, plot_sbc, plot_sbc_views


def _fmt(v, spec=".4f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def _engine_type(model: str, engine: str) -> str:
    """paper, generic (needs only the NumPyro model) or user, from the model's registry."""
    record = registry.get_model(model)
    if not record.has_engine(engine):
        return "user"
    return "generic" if record.engine(engine).generic else "paper"


def _sd_ratios(metrics) -> str:
    """'median / worst' of the sd ratios; worst is the one farthest from 1 on the log scale."""
    ratios = metrics.get("sd_ratio")
    if not ratios:
        return "-"
    r = np.asarray(ratios, dtype=float)
    worst = r[int(np.argmax(np.abs(np.log(r))))] if np.all(r > 0) else float(np.min(r))
    return f"{np.median(r):.2f} / {worst:.2f}"


def _sbc_status_by_engine(sbcs) -> dict[tuple[str, str], str]:
    """(model, engine) -> 'calibrated replicates / all' of the study's SBC cells (a failed
    or not-applicable replicate is counted as not calibrated and named)."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in sbcs:
        if c.failed is not None:
            continue
        out.setdefault((c.params["model"], c.params["engine"]), []).append(c.result.status)
    said = {}
    for key, statuses in out.items():
        ok = sum(s == "calibrated" for s in statuses)
        others = sorted({s for s in statuses if s != "calibrated"})
        said[key] = f"{ok}/{len(statuses)} calibrated" + (f" ({', '.join(others)})" if others else "")
    return said


#: verdict statuses from best to worst, for "at least as good"
_VERDICT_RANK = {"indistinguishable": 0, "differs": 1}


def _generic_against_paper(r) -> list[str]:
    """Sentences naming each generic engine of a comparison that does at least as well as
    every paper engine of it: a verdict at least as good and a smaller pred_mae."""
    paper, generic = [], []
    for name, e in r.engines.items():
        if e.failure is not None or e.metrics.get("pred_mae") is None or e.verdict is None:
            continue
        rank = _VERDICT_RANK.get(e.verdict.status)
        if rank is None:
            continue
        (generic if _engine_type(r.model, name) == "generic" else paper if _engine_type(r.model, name) == "paper"
         else []).append((name, rank, float(e.metrics["pred_mae"]), e.verdict.status))
    if not paper:
        return []
    best = min(paper, key=lambda t: (t[1], t[2]))
    out = []
    for name, rank, mae, status in generic:
        if all(rank <= p[1] and mae < p[2] for p in paper):
            out.append(f"{r.model} / {r.data} split {r.split}: **{name}** ({status}, pred_mae {mae:.4f}) does at "
                       f"least as well as the best paper engine {best[0]} ({best[3]}, pred_mae {best[2]:.4f})")
    return out


def write_study_report(config: StudyConfig, cells: list[CellResult], out_dir: str,
                       device: str | None = None) -> str:
    """OUT/report.md: the failed cells with their reasons, the compare cells as engine x
    data tables (pred_mae, verdicts), the SBC cells as a table with their figures, the
    defect batteries as detection tables."""

    lines = [f"# Study: {config.name or 'unnamed'}", "",
             f"{len(cells)} cells (`zoo study`; each stored under cells/ by its content key)", "",
             *([f"Device: {device} (each comparison's own report names the device its worker used).", ""]
               if device else [])]
    failed = [c for c in cells if c.failed is not None]
    if failed:
        lines += [f"## Failed cells ({len(failed)} of {len(cells)})", "",
                  "Each failed with the reason below; the other cells' results are in the sections that follow.", "",
                  "| cell | reason |", "|---|---|"]
        lines += [f"| {c.label()} | {' '.join(c.failed.split()).replace('|', '/')} |" for c in failed]
        lines.append("")
    done = [c for c in cells if c.failed is None]
    for kind in STUDY_KINDS:
        if kind not in SECTIONS:
            raise ValueError(f"the study report has no section for cells of kind {kind!r} (study_report.SECTIONS)")
        mine = [c for c in done if c.kind == kind]
        if mine:
            lines += SECTIONS[kind](mine, done, out_dir)
    path = os.path.join(out_dir, "report.md")
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------
# One section per kind of cell (validation/runs/study_kinds.py): each gets the finished
# cells of its kind, every finished cell (a comparison shows the engine's SBC status) and
# the study's folder (for figures); returns its lines
# --------------------------------------------------------------------------------------
def _compare_section(mine: list[CellResult], everything: list[CellResult], out_dir: str) -> list[str]:
    """The comparisons as engine x data rows: metrics, verdicts, the engine's SBC status in
    this study, and the generic engines that do at least as well as a paper's."""
    compares = sorted(mine, key=lambda c: (c.params["model"], c.params["data"], c.params["split"]))
    sbc_status = _sbc_status_by_engine([c for c in everything if c.kind == "sbc"])
    lines = []
    if compares:
        lines += ["## Comparisons", "",
                  "Per engine and data set / split: pred_mae (mean |p - p_ref| on the test set), the sd ratio "
                  "sd / sd_ref (median over the parameters, and the worst: farthest from 1), Pareto k-hat of the "
                  "engine as an importance proposal (at most min(1 - 1/log10 S, 0.7), S its draws: its "
                  "importance-corrected draws are trusted), the "
                  "marginal, the joint and the distribution verdict (each an exact engine calls 'differs' 5% of "
                  "the time; the distribution verdict sees shape, tails and support), the SBC "
                  "status of the engine in this study (calibrated replicates / all), the warm seconds of the fit "
                  "and the reference's warm seconds over them. Engine type: paper (a paper's hand-derived "
                  "engine), generic (needs only the NumPyro model), user.", "",
                  "| model | data | split | reference | engine | type | pred_mae | sd ratio med / worst | k-hat | "
                  "verdict | joint | distribution | SBC | warm s | x ref |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        plainly = []
        for c in compares:
            r = c.result
            cert = "certified" if r.reference.certified else "NOT certified"
            sampler = r.reference.sampler_name or "-"
            for name, e in r.engines.items():
                v = e.verdict.status if e.verdict is not None else "-"
                j = e.joint_verdict.status if e.joint_verdict is not None else "-"
                dv = e.distribution_verdict.status if e.distribution_verdict is not None else "-"
                lines.append(
                    f"| {r.model} | {r.data} | {r.split} | {sampler} {cert} | {name} | {_engine_type(r.model, name)} | "
                    f"{_fmt(e.metrics.get('pred_mae'))} | {_sd_ratios(e.metrics)} | {_fmt(e.metrics.get('khat'), '.2f')} | "
                    f"{v if e.failure is None else 'failed'} | {j} | {dv} | {sbc_status.get((r.model, name), '-')} | "
                    f"{_fmt(e.seconds, '.3g')} | {_fmt(e.speedup_vs_reference, '.3g')} |")
            plainly += _generic_against_paper(r)
        lines.append("")
        if plainly:
            lines += ["Where a generic method does as well as or better than every paper engine of its model "
                      "(a verdict at least as good, and a smaller pred_mae):", "", *[f"- {x}" for x in plainly], ""]
    return lines


def _sbc_section(mine: list[CellResult], everything: list[CellResult], out_dir: str) -> list[str]:
    """Each SBC cell: its verdict, coverage, fit counts and its two figures (written here)."""
    sbcs = sorted(mine, key=lambda c: (c.params["model"], c.params["engine"], c.params["replicate"]))
    lines = []
    if sbcs:
        lines += ["## SBC", "", "| model | engine | replicate | verdict | coverage | fits ok / failed | ranks | "
                  "coverage and contraction |", "|---|---|---|---|---|---|---|---|"]
        for c in sbcs:
            s, p = c.result, c.params
            fig = plot_sbc(s, os.path.join(out_dir, "figures", f"sbc-{c.key}.png"))
            views = plot_sbc_views(s, os.path.join(out_dir, "figures", f"sbc-views-{c.key}.png"))
            counts = s.counts
            # the reason begins with the status ("miscalibrated: w[1] ...") where it names one
            said = s.reason if s.reason.startswith(s.status) else f"{s.status}: {s.reason}"
            lines.append(f"| {p['model']} | {p['engine']} | {p['replicate']} | {said} | {coverage_line(s) or '-'} | "
                         f"{'-' if counts is None else counts.ok} / {'-' if counts is None else counts.failed} | "
                         f"{'-' if fig is None else f'![](figures/{os.path.basename(fig)})'} | "
                         f"{'-' if views is None else f'![](figures/{os.path.basename(views)})'} |")
        lines.append("")
    return lines


def _defects_section(mine: list[CellResult], everything: list[CellResult], out_dir: str) -> list[str]:
    """Each defect battery as its table of detections per detector."""
    lines = []
    for c in mine:
        b = c.result
        lines += [f"## Planted defects: {b.model} / {b.engine}", "",
                  f"{b.certified_datasets} of {b.datasets} data sets with a certified reference.", "",
                  "| defect | " + " | ".join(f"{d} detections" for d in DETECTORS) + " |",
                  "|---|" + "---|" * len(DETECTORS)]
        by = {(r.detector, r.defect): r for r in b.rows}
        for name in dict.fromkeys(r.defect for r in b.rows):
            cells_ = [f"{by[(d, name)].detected}/{by[(d, name)].trials}" if (d, name) in by else "-"
                      for d in DETECTORS]
            lines.append(f"| {name} | " + " | ".join(cells_) + " |")
        lines.append("")
    return lines


#: kind of study cell -> the writer of its section, in the order of STUDY_KINDS
SECTIONS = {"compare": _compare_section, "sbc": _sbc_section, "defects": _defects_section}


def report_study(result: StudyResult) -> str:
    """The report of what ``run_study`` returned; its path."""
    return write_study_report(result.config, list(result.cells), result.out_dir, device=result.device)


__all__ = ["write_study_report", "report_study", "SECTIONS"]
