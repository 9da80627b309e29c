"""What a figure needs before a reader can read it: labelled axes.

The zoo's figures (reports, SBC plots, the defect battery, the lessons in notebooks/) are
read by people who did not draw them, so every axis that shows tick labels says what it
measures. :func:`axis_label_problems` checks one figure; the tests run it on the figures
the package draws, and the notebook runner (notebooks/refresh.py) on every figure a lesson
draws.
"""
from __future__ import annotations

import io

# matplotlib is loaded with ArviZ wherever the zoo's validation is imported
from matplotlib.figure import Figure


def axis_label_problems(fig) -> list[str]:
    """One sentence per axis of ``fig`` that shows tick labels but has no label (nor a
    figure-wide ``supxlabel``/``supylabel`` standing for it). Hidden axes, axes switched off
    (``ax.axis("off")``) and colour bars are not checked; axes that share an axis and hide
    its tick labels (``sharex``/``sharey``) need no label of their own. The figure is laid
    out first (without rendering), so that tick labels have their text."""
    fig.draw_without_rendering()
    problems = []
    sup = {"x": getattr(fig, "get_supxlabel", lambda: "")() or "",
           "y": getattr(fig, "get_supylabel", lambda: "")() or ""}
    for k, ax in enumerate(fig.axes):
        # a colour bar's axes is labelled through its colour bar, not checked here
        if not ax.get_visible() or not ax.axison or getattr(ax, "_colorbar", None) is not None:
            continue
        name = ax.get_title() or ax.get_title(loc="left") or f"axes {k}"
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            shows_ticks = axis.get_visible() and any(t.get_visible() and t.get_text() for t in axis.get_ticklabels())
            if shows_ticks and not axis.get_label_text().strip() and not sup[which].strip():
                problems.append(f"{name!r}: the {which} axis has no label")
    return problems


class ShownFigure(Figure):
    """A matplotlib Figure that shows itself in a notebook (as PNG) without pyplot or a
    notebook backend. The zoo draws its figures off pyplot, so that a user's backend and open
    figures are never touched; this is what still lets ``display(fig)``, or a figure left as
    a cell's last expression, show it."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        return buf.getvalue()


__all__ = ["axis_label_problems", "ShownFigure"]
