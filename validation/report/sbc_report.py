"""The reports of SBC and posterior SBC: a summary in one line, the rank and coverage figures,
and the markdown table of ``zoo sbc`` - all read from the summaries the runs return
(:class:`~zoo.validation.runs.sbc_result.SBCResult`, ``validation/runs/sbc_result.py``), which
they do not change.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..base.atomic import atomic_write
from ..base.figures import ShownFigure
from ..judge.rank_power import POWER_PROBABILITY, USELESS
from ..judge.rank_uniformity import eval_points, pit_values, simultaneous_band
from ..judge.sbc_verdict import NOT_APPLICABLE, TOO_FEW
from ..runs.sbc_result import SBCResult


def summary_line(summary: SBCResult) -> str:
    """An SBC or posterior SBC summary in one line: model / engine: the verdict's reason
    (posterior SBC's prefixed with its kind)."""
    head = f"{summary.model} / {summary.engine}"
    kind = f"{summary.kind}: " if summary.kind else ""
    if summary.status == NOT_APPLICABLE:
        return f"{kind}{head}: no SBC: {summary.reason}"
    return f"{kind}{head}: {summary.reason}"




def coverage_line(summary: SBCResult, level: float = 0.9) -> str | None:
    """One line: the median over quantities of the empirical coverage of central intervals
    of nominal ``level``, and the quantity furthest from it with its Wilson interval."""
    view = summary.coverage
    if view is None or level not in view.levels:
        return None
    rows = [(q.name, q.at(level)) for q in view.quantities]
    median = float(np.median([r.coverage for _, r in rows]))
    name, worst = max(rows, key=lambda r: abs(r[1].coverage - level))
    lo, hi = worst.interval
    return (f"{100 * level:g}% central intervals cover the truth in {100 * median:.0f}% of simulations "
            f"(median over quantities); furthest: {name} {100 * worst.coverage:.0f}% "
            f"[{100 * lo:.0f}, {100 * hi:.0f}]")





def sbc_figure(summary: SBCResult, *, max_quantities: int = 8):
    """Rank histograms and PIT-ECDF difference plots of an SBC run (a summary of
    ``run_sbc`` or ``rank_summary``, validation/runs/sbc.py), for the failing quantities first and then the
    others, up to ``max_quantities``; a matplotlib Figure off pyplot that a notebook shows (no
    pyplot state is touched). None when there are no ranks to plot.

    Left: the histogram of the ranks of the truths, with the band where a bar of a uniform
    histogram lies 99% of the time. Right: the empirical CDF of the fractional ranks minus
    the uniform CDF, inside the simultaneous band the test used (its edges drawn); where the
    curve leaves the band it is drawn thick and marked, so a failure is seen where it is.
    """
    if summary.ranks is None:
        return None
    from scipy.stats import binom  # scipy.stats is slow to import: only the figure needs it here

    test = summary.uniformity
    ranks = np.asarray(summary.ranks)
    S, K = ranks.shape
    L = test.n_draws
    shown = _shown_quantities(summary, max_quantities)
    u = pit_values(ranks, L, np.random.default_rng(summary.settings.seed))
    x = eval_points(S)
    lower, upper = simultaneous_band(S, test.band_level)
    bins = min(20, L + 1)
    edges = np.linspace(-0.5, L + 0.5, bins + 1)
    p_bin = np.diff(edges) / (L + 1)
    lo_c, hi_c = binom.ppf(0.005, S, p_bin.mean()), binom.ppf(0.995, S, p_bin.mean())
    fig = ShownFigure(figsize=(9.5, 0.6 + 2.0 * len(shown)))
    axes = fig.subplots(len(shown), 2, squeeze=False, sharex="col")
    for row, k in enumerate(shown):
        q = test.quantities[k]
        colour = "tab:blue" if q.inside else "tab:red"
        ax = axes[row, 0]
        ax.axhspan(lo_c, hi_c, color="0.85")
        ax.hist(ranks[:, k], bins=edges, color=colour)
        ax.set_ylabel(f"{q.name}\nsimulations", fontsize=8)
        ax = axes[row, 1]
        ax.fill_between(x, lower - x, upper - x, color="0.88", step="mid")
        ax.step(x, lower - x, where="mid", color="0.45", lw=0.7)
        ax.step(x, upper - x, where="mid", color="0.45", lw=0.7)
        diff = (u[:, k][:, None] <= x[None, :]).mean(0) - x
        ax.step(x, diff, where="mid", color=colour, lw=1.0)
        out = (diff < lower - x) | (diff > upper - x)
        if out.any():
            ax.plot(x[out], diff[out], "o", color="tab:red", ms=3)
            # in a box, so that a curve running under it does not hide it
            ax.text(0.99, 0.04, f"outside the band at {out.mean():.0%} of u", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="tab:red",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5})
        ax.axhline(0.0, color="0.4", lw=0.5)
        ax.set_ylabel("ECDF(u) - u", fontsize=8)
        if row == 0:
            axes[row, 0].set_title("rank histogram (grey: 99% of a uniform bar)", fontsize=9)
            ax.set_title(f"PIT-ECDF minus uniform, simultaneous {100 * test.band_level:.2f}% band", fontsize=9)
    axes[-1, 0].set_xlabel(f"rank of the true value among L = {L} posterior draws")
    axes[-1, 1].set_xlabel("fractional rank u")
    fig.suptitle(f"SBC {summary.model} / {summary.engine}: {summary.status} "
                 f"({summary.counts.ok} simulations, L = {L}; red: a quantity outside its band)", fontsize=10)
    fig.tight_layout()
    return fig


def _shown_quantities(summary: SBCResult, max_quantities: int) -> list[int]:
    """The quantities a figure shows: those outside their bands first (worst first), then
    the others in order, up to ``max_quantities``."""
    qs = summary.uniformity.quantities
    return sorted(range(len(qs)), key=lambda k: (qs[k].inside, -qs[k].excess))[:max_quantities]


def sbc_views_figure(summary: SBCResult, *, max_quantities: int = 8):
    """The coverage and contraction views of an SBC run (``coverage_view``,
    ``contraction_view`` of validation/judge/rank_uniformity.py) for the quantities
    :func:`sbc_figure` shows; None without ranks.

    Left: empirical coverage of central intervals minus their nominal level, against the
    nominal level, inside the simultaneous band of the run's uniformity test (a calibrated
    engine's curves stay inside it with the test's probability); below zero is too narrow
    (under-coverage), above zero too wide. Right: each simulation's posterior contraction
    against its z-score; a calibrated engine's points spread around z = 0 with ``|z| > 2``
    rare; a cloud off-centre is a bias, one beyond +-2 with high contraction an
    overconfident fit."""
    if summary.ranks is None:
        return None
    test = summary.uniformity
    ranks = np.asarray(summary.ranks)
    S, K = ranks.shape
    shown = _shown_quantities(summary, max_quantities)
    u = pit_values(ranks, test.n_draws, np.random.default_rng(summary.settings.seed))
    w = np.abs(2.0 * u - 1.0)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, test.band_level)
    fig = ShownFigure(figsize=(10.0, 4.2))
    ax_cov, ax_con = fig.subplots(1, 2)
    ax_cov.fill_between(x, lower - x, upper - x, color="0.88", step="mid",
                        label=f"simultaneous {100 * test.band_level:.2f}% band")
    colours = [f"C{i % 10}" for i in range(len(shown))]
    for colour, k in zip(colours, shown):
        q = test.quantities[k]
        cover = (w[:, k][:, None] <= x[None, :]).mean(0)
        ax_cov.step(x, cover - x, where="mid", color=colour, lw=1.6 if not q.inside else 0.9,
                    label=q.name + ("" if q.inside else " (outside its band)"))
    ax_cov.axhline(0.0, color="0.4", lw=0.5)
    ax_cov.set_xlabel("nominal level of the central interval")
    ax_cov.set_ylabel("empirical coverage - nominal")
    ax_cov.set_title("coverage (below 0: intervals too narrow)", fontsize=9)
    ax_cov.legend(fontsize=6, loc="best", framealpha=0.6)
    view = summary.contraction
    if view is None:
        ax_con.text(0.5, 0.5, "no posterior means and sds with these ranks\n(ranks given alone, or simulations of an older format)",
                    ha="center", va="center", transform=ax_con.transAxes, fontsize=8)
    else:
        z, contraction = np.asarray(view.z, dtype=float), np.asarray(view.contraction, dtype=float)
        for colour, k in zip(colours, shown):
            ax_con.plot(contraction[:, k], z[:, k], "o", ms=2.5, alpha=0.6, color=colour,
                        label=test.quantities[k].name)
        for level in (-2.0, 2.0):
            ax_con.axhline(level, color="0.5", lw=0.6, ls="--")
        ax_con.axhline(0.0, color="0.4", lw=0.5)
        ax_con.set_xlabel("posterior contraction 1 - var(post) / var(truths)")
        ax_con.set_ylabel("z = (posterior mean - truth) / posterior sd")
        ax_con.set_title("contraction against z-score (dashed: |z| = 2)", fontsize=9)
    fig.suptitle(f"{summary.kind or 'SBC'} {summary.model} / {summary.engine}: coverage and "
                 f"contraction over {S} simulations", fontsize=10)
    fig.tight_layout()
    return fig


def plot_sbc_views(summary: SBCResult, path, *, max_quantities: int = 8) -> str | None:
    """:func:`sbc_views_figure`, written atomically to ``path`` (PNG); the path, or None."""
    fig = sbc_views_figure(summary, max_quantities=max_quantities)
    if fig is None:
        return None
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90), suffix=".png")
    return os.fspath(path)


def plot_sbc(summary: SBCResult, path, *, max_quantities: int = 8) -> str | None:
    """:func:`sbc_figure`, written atomically to ``path`` (PNG); the path, or None when there
    are no ranks to plot."""
    fig = sbc_figure(summary, max_quantities=max_quantities)
    if fig is None:
        return None
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90), suffix=".png")
    return os.fspath(path)


def write_sbc_report(rows, out_dir, model: str, *, n_sims: int, n_draws: int, design: str,
                     device_line: str, conditional: bool = False) -> str:
    """``OUT/<model>/sbc.md``: one row per engine - its verdict, coverage, fit counts and
    seconds, and its two figures - then what the ranked quantities are. ``rows``: (engine
    name, summary, rank figure path or None, views figure path or None) each; ``design``:
    where the truths and the design came from, in words (ends with "; "). Written
    atomically; returns its path."""
    glossary = sbc_glossary(summary for _, summary, _, _ in rows)
    lines = [f"# {'Posterior SBC' if conditional else 'SBC'}: {model}", "",
             f"{n_sims} simulations, {n_draws} posterior draws ranked in each, " + design +
             "each engine is called miscalibrated when a "
             "quantity's PIT ECDF leaves its simultaneous band, with a 5% family-wise false-alarm rate, and "
             f"'{TOO_FEW}' (not calibrated) when every ECDF stays inside but the run is too small to detect, "
             f"{100 * POWER_PROBABILITY:.0f}% of the time, a mean off by {USELESS['mean_shift_sd']:g} posterior sd "
             f"or an sd x{USELESS['sd_factor_narrow']:g} in one quantity. Each verdict ends with what its run could "
             "detect.", "",
             f"Computed on: {device_line}.", "",
             "| engine | verdict | coverage | fits ok / failed | median fit seconds | ranks | coverage and "
             "contraction |", "|---|---|---|---|---|---|---|"]
    for name, summary, figure, views in rows:
        counts = summary.counts
        secs = None if counts is None else counts.fit_seconds_median
        lines.append(f"| {name} | {summary.reason} | {coverage_line(summary) or '-'} | "
                     f"{'-' if counts is None else counts.ok} / {'-' if counts is None else counts.failed} | "
                     f"{'-' if secs is None else f'{secs:.3g}'} | "
                     f"{os.path.relpath(figure, out_dir) if figure else '-'} | "
                     f"{os.path.relpath(views, out_dir) if views else '-'} |")
    if glossary:
        lines += ["", "Ranked quantities:", ""] + [f"- `{pattern}`: {meaning}" for pattern, meaning in glossary.items()]
    report = os.path.join(out_dir, model, "sbc.md")
    atomic_write(report, lambda tmp: open(tmp, "w", encoding="utf-8").write("\n".join(lines) + "\n"))
    return report


def sbc_glossary(summaries) -> dict[str, str]:
    """What the ranked quantities of these summaries are, once for all (the same names, or a
    variant's): pattern -> meaning."""
    glossary: dict[str, str] = {}
    for summary in summaries:
        glossary.update(summary.glossary)
    return glossary


def sbc_design_words(summaries: Sequence[SBCResult], *, conditional: bool, n: int, n_basis: int | None) -> str:
    """Where the truths and the design of ``zoo sbc``'s runs came from, in words (ending with
    "; "), for :func:`write_sbc_report`: the conditioning case of posterior SBC, or the
    simulated design's size (``n`` points; ``n_basis`` features, None: the runs' own), or a
    general model's own data."""
    if conditional:
        cond = next((s.conditioning for s in summaries if s.conditioning is not None), None)
        return ("conditioned on " + (f"{cond['case']}: truths drawn from its certified {cond['reference_sampler']} "
                                     f"reference, {cond['n_new_data']} new labels simulated at the training "
                                     f"design, each engine fitted to the {cond['n_observed']} observed and the new "
                                     "labels together (validation/runs/posterior_sbc.py)" if cond else
                                     "the model's default case") + "; ")
    first = summaries[0] if summaries else None
    if first is not None and first.design is not None and "data" in first.design:
        observed = ", ".join(f"{k} {tuple(v)}" for k, v in first.design["observed"].items())
        return ("the model's own data, its observed sites (" + observed + ") drawn from its prior predictive, "
                "truths from the prior (validation/runs/sbc.py); ")
    features = first.design["n_basis"] if first is not None and first.design is not None else n_basis
    return f"design of {n} points and {features} RBF features, truths from the prior (validation/runs/sbc.py); "


__all__ = ["summary_line", "coverage_line", "sbc_figure", "plot_sbc", "sbc_views_figure", "plot_sbc_views",
           "write_sbc_report", "sbc_glossary", "sbc_design_words"]
