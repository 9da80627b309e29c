"""gridRVM's row and column relevances, and the figures ``zoo compare`` and ``zoo reproduce``
show of them.

A row's relevance is its inverse precision 1/alpha_i (the paper's Fig. 2c plots "the
inverse regularization coefficient"): large for a row whose weights the data need, small
for one the prior shrinks away. Each posterior gives it with its uncertainty:
* the reference (NUTS or a Gibbs sampler): the draws of alpha and beta;
* VB: its q(alpha_i) = Gamma(a_i, b_i), so 1/alpha_i is inverse-Gamma;
* the generic Laplace: no distribution over alpha, beta is returned, so it is left out.

Both are summarized by the median and the 5% and 95% quantiles of 1/alpha.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
from scipy import stats

from ..base.atomic import save_figure
from ..base.figures import ShownFigure

#: quantiles of the relevance shown as the bar and its whiskers
QUANTILES = (0.05, 0.5, 0.95)


def reference_relevance(reference, name: str) -> np.ndarray | None:
    """(3, K) quantiles of 1/name (name "alpha" or "beta") over a reference's draws, or
    None when the reference did not record the site."""
    post = getattr(reference.idata, "posterior", None)
    if post is None or name not in post:
        return None
    draws = np.asarray(post[name]).reshape(-1, *post[name].shape[2:])
    return np.quantile(1.0 / draws, QUANTILES, axis=0)


def vb_relevance(posterior, name: str) -> np.ndarray | None:
    """(3, K) quantiles of 1/name under a mean-field posterior's Gamma factor, or None."""
    factors = getattr(posterior, "hyper_factors", None) or {}
    if name not in factors:
        return None
    shape, rate = (np.asarray(v, float) for v in factors[name])
    # 1/x for x ~ Gamma(shape, rate): its q-quantile is 1 / (the (1 - q)-quantile of x)
    return np.stack([1.0 / stats.gamma.ppf(1.0 - q, shape, scale=1.0 / rate) for q in QUANTILES])


def _bars(ax, values: dict[str, np.ndarray], colors: dict[str, str], horizontal: bool) -> None:
    n = next(iter(values.values())).shape[1]
    positions = np.arange(n)
    width = 0.8 / len(values)
    for k, (label, q) in enumerate(values.items()):
        offset = positions - 0.4 + width * (k + 0.5)
        err = np.vstack([q[1] - q[0], q[2] - q[1]])
        if horizontal:
            ax.barh(offset, q[1], height=width, xerr=err, color=colors[label], label=label, error_kw={"lw": 0.7})
        else:
            ax.bar(offset, q[1], width=width, yerr=err, color=colors[label], label=label, error_kw={"lw": 0.7})
    (ax.set_xscale if horizontal else ax.set_yscale)("log")


def draw_relevance(panels: list[dict[str, Any]], *, title: str):
    """The relevance figure as a matplotlib Figure (drawn without pyplot, saved nowhere): one
    block per panel, the weight-mean table as a picture, the row relevances beside it (one
    bar per row, aligned with it) and the column relevances below it; every axis labelled.

    panels: [{"title", "weights": (M1, M2) means, "rows": {label: (3, M1)},
    "columns": {label: (3, M2)}}], the (3, K) arrays the 5%, 50% and 95% quantiles of
    1/alpha_i or 1/beta_j (:func:`reference_relevance`, :func:`vb_relevance`)."""
    colors = {}
    palette = ["0.25", "tab:orange", "tab:blue", "tab:green", "tab:purple"]
    for panel in panels:
        for label in (*panel["rows"], *panel["columns"]):
            colors.setdefault(label, palette[len(colors) % len(palette)])
    fig = ShownFigure(figsize=(6.2 * len(panels), 6.4))
    grid = fig.add_gridspec(2, 2 * len(panels), width_ratios=[3, 1.4] * len(panels), height_ratios=[3, 1.4],
                            wspace=0.35, hspace=0.3)
    limit = max(float(np.max(np.abs(p["weights"]))) for p in panels) or 1.0
    for k, panel in enumerate(panels):
        m1, m2 = panel["weights"].shape
        ax_img = fig.add_subplot(grid[0, 2 * k])
        image = ax_img.imshow(panel["weights"], cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax_img.set_title(panel["title"], fontsize=9)
        ax_img.set_xlabel("column j")
        ax_img.set_ylabel("row i")
        fig.colorbar(image, ax=ax_img, fraction=0.046, pad=0.2, location="left", label="posterior mean of w_ij")
        if panel["rows"]:
            ax_rows = fig.add_subplot(grid[0, 2 * k + 1])
            _bars(ax_rows, panel["rows"], colors, horizontal=True)
            ax_rows.set_ylim(m1 - 0.5, -0.5)  # row 0 on top, as in the picture
            ax_rows.set_xlabel("row relevance 1/alpha_i")
            ax_rows.set_ylabel("row i")
            ax_rows.legend(fontsize=7)
        if panel["columns"]:
            ax_cols = fig.add_subplot(grid[1, 2 * k])
            _bars(ax_cols, panel["columns"], colors, horizontal=False)
            ax_cols.set_xlim(-0.5, m2 - 0.5)
            ax_cols.set_ylabel("column relevance 1/beta_j")
            ax_cols.set_xlabel("column j")
    fig.suptitle(title + "\n(bars: median; whiskers: 5% and 95% quantiles)", fontsize=10)
    return fig


def relevance_figure(panels: list[dict[str, Any]], path: str, *, title: str, save) -> None:
    """:func:`draw_relevance`'s figure, written by save(fig, path)."""
    save(draw_relevance(panels, title=title), path)


def weight_tables_figure(tables: dict[str, np.ndarray], path: str, *, title: str, save) -> None:
    """The weight-mean table of every posterior side by side, on one colour scale."""
    names = list(tables)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig = ShownFigure(figsize=(3.4 * cols, 3.2 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    limit = max(float(np.max(np.abs(t))) for t in tables.values()) or 1.0
    for ax in axes.ravel():
        ax.axis("off")
    for ax, name in zip(axes.ravel(), names):
        ax.axis("on")
        image = ax.imshow(tables[name], cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02, label="posterior mean of w_ij")
    fig.suptitle(title, fontsize=10)
    save(fig, path)


#: the title of the relevance figure of a comparison
RELEVANCE_TITLE = "Row and column relevances: reference against VB"


def relevance_panels(comp) -> list[dict[str, Any]]:
    """The panels of a gridRVM comparison's relevance figure (:func:`draw_relevance`): the
    p-grid reference and, where the comparison ran it, the s-grid variant's, each with the
    quantiles of 1/alpha_i and 1/beta_j from the reference's draws and from its VB's q
    (where that engine ran). Empty without a reference."""
    if comp.reference is None:
        return []
    spec = comp.prepared.spec
    references = {"p-grid": comp.reference, **comp.variant_references}
    vb_of = {"p-grid": "vb", "s-grid": "vb-s-grid", "rvm": "vb-rvm"}
    panels = []
    for prior in ("p-grid", "s-grid"):
        ref = references.get(prior)
        if ref is None:
            continue
        rows, cols = {}, {}
        for label, source in ((f"reference ({ref.sampler})", None), (vb_of[prior], comp.posteriors.get(vb_of[prior]))):
            row = reference_relevance(ref, "alpha") if source is None else vb_relevance(source, "alpha")
            col = reference_relevance(ref, "beta") if source is None else vb_relevance(source, "beta")
            if row is not None:
                rows[label] = row
            if col is not None:
                cols[label] = col
        panels.append({"title": f"{prior}: reference's weight means", "rows": rows, "columns": cols,
                       "weights": spec.as_table(ref.posterior.mean_flat())})
    return panels


def relevance_comparison_figure(comp):
    """The relevance figure of a gridRVM comparison (what ``zoo compare`` saves as
    relevance.png) as a matplotlib Figure, drawn without pyplot; None without a reference.
    In a notebook, ``display(fig)`` shows it."""
    panels = relevance_panels(comp)
    return draw_relevance(panels, title=RELEVANCE_TITLE) if panels else None


def comparison_figures(comp, out_dir: str) -> dict[str, tuple[str, str]]:
    """The figures of a gridRVM comparison (``ModelRecord.figures``): relevances of the
    p-grid and s-grid references beside their VB's, and every weight-mean table."""

    spec = comp.prepared.spec
    if comp.reference is None:
        return {}
    references = {"p-grid": comp.reference, **comp.variant_references}
    panels = relevance_panels(comp)
    out = {}
    if panels:
        path = os.path.join(out_dir, "relevance.png")
        relevance_figure(panels, path, title=RELEVANCE_TITLE, save=save_figure)
        out["relevance"] = (path, "Row and column relevances (1/alpha_i, 1/beta_j) of the p-grid and s-grid "
                                  "posteriors, the reference's draws against VB's q, beside the reference's "
                                  "weight-mean table. In the p-grid only the products alpha_i beta_j are "
                                  "identified by the data: (alpha c, beta / c) fits equally well for every c, "
                                  "so both sets of bars share a scale that only the prior pins down, which "
                                  "widens the reference's whiskers; VB's mean-field q cannot represent that "
                                  "ridge and is narrower.")
    tables = {f"reference ({prior})": spec.as_table(ref.posterior.mean_flat()) for prior, ref in references.items()}
    tables |= {name: spec.as_table(post.mean_flat()) for name, post in comp.posteriors.items()}
    path = os.path.join(out_dir, "weight_tables.png")
    weight_tables_figure(tables, path, title="Weight means as tables: every engine beside the references",
                         save=save_figure)
    out["weight_tables"] = (path, "The weight-mean table of each reference and each engine, on one colour scale.")
    return out
