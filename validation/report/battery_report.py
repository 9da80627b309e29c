"""The report of planted-defect batteries: their detections as a table and a figure, read from
:class:`~zoo.validation.runs.battery_result.BatteryResult`
(``validation/runs/battery_result.py``: what ``run_battery`` returns, or a stored one read by
``BatteryResult.from_json`` / ``load_batteries``).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..base.figures import ShownFigure
from ..base.tables import Table
from ..judge.rates import wilson_interval
from ..judge.verdict import FALSE_ALARM
from ..runs.battery import DETECTORS
from ..runs.battery_result import BatteryResult


def battery_table(batteries: Mapping[str, BatteryResult]) -> Table:
    """Results of ``run_battery`` (label -> result) as one table: per engine and defect,
    each detector's detections over its trials and the 95% Wilson interval of that rate, and
    the fits that failed (no trial); a detector that no battery ran has no column."""
    rows = []
    for label, run in batteries.items():
        by_defect: dict[str, dict[str, object]] = {}
        for r in run.rows:
            by_defect.setdefault(r.defect, {})[r.detector] = r
        for defect, found in by_defect.items():
            cells = []
            for detector in DETECTORS:
                r = found.get(detector)
                if r is None or r.trials + r.failed_fits == 0:  # not run (e.g. no SBC replicates)
                    cells.append("-")
                    continue
                lo, hi = wilson_interval(r.detected, r.trials)
                failed = r.failed_fits
                cells.append(f"{r.detected}/{r.trials} ({lo:.2f}-{hi:.2f})" + (f", {failed} failed" if failed else ""))
            rows.append((label, defect, *cells))
    columns = ("engine", "defect", *(f"{d}: flagged / trials (95% interval)" for d in DETECTORS))
    table = Table(columns, tuple(rows))
    # a detector no battery ran (the joint verdict in batteries stored before it existed) has no column
    return table.select([c for k, c in enumerate(columns) if k < 2 or any(row[k] != "-" for row in rows)])


def battery_figure(batteries: Mapping[str, BatteryResult], *, detectors=("verdict", "sbc")):
    """Detection rates with their 95% Wilson intervals, one panel per battery (label ->
    result of ``run_battery``), one row per defect, one colour per detector; a dotted
    line at the 5% a control should stay near. A matplotlib Figure (no pyplot state)."""
    colours = {"verdict": "tab:blue", "joint verdict": "tab:green", "distribution verdict": "tab:purple",
               "sbc": "tab:orange"}
    n = len(batteries)
    cols = min(2, n)
    fig = ShownFigure(figsize=(6 * cols, 3.5 * ((n + cols - 1) // cols)))
    axes = fig.subplots((n + cols - 1) // cols, cols, squeeze=False).ravel()
    offsets = dict(zip(detectors, np.linspace(-0.2, 0.2, len(detectors))))
    for ax, (label, run) in zip(axes, batteries.items()):
        defects = list(dict.fromkeys(r.defect for r in run.rows))
        for r in run.rows:
            if r.detector not in offsets or r.trials == 0:
                continue
            i = defects.index(r.defect) + offsets[r.detector]
            lo, hi = wilson_interval(r.detected, r.trials)
            ax.plot([lo, hi], [i, i], color=colours[r.detector], lw=2)
            ax.plot(r.rate, i, "o", color=colours[r.detector], ms=4)
        ax.axvline(FALSE_ALARM, color="0.5", ls=":", lw=1)  # the rate an exact engine is flagged at
        ax.set_yticks(range(len(defects)), defects, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("detection rate (dot) and its 95% Wilson interval")
        ax.set_ylabel("engine as planted")
    for ax in axes[n:]:
        ax.set_visible(False)
    for d in detectors:
        axes[0].plot([], [], "o-", color=colours[d], label=d)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


__all__ = ["battery_table", "battery_figure"]
