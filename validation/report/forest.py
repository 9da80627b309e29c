"""The forest plot of a comparison: several posteriors' intervals, coordinate by coordinate.

Drawn by the zoo with matplotlib, not by ArviZ: ``plot_forest`` of ArviZ 0.2x and of
arviz-plots (1.x) differ in every argument and in what they return, and the figure is a
few lines of its own. For each coordinate of each site, one row per posterior: the
median (dot), the quartiles (thick bar) and the highest-density interval (thin line; the
shortest interval holding ``hdi_prob`` of the draws, as ArviZ's). A point estimate is a
single draw: its dot stands alone.

The posteriors come as ArviZ's posterior data (``arviz_adapter.posterior_to_idata``) and
are read through the adapter, so the figure is the same under either ArviZ line.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..base import arviz_adapter as adapter
from ..base.atomic import atomic_write
from ..base.figures import ShownFigure

#: the forest plot's coordinates at most (one row per coordinate and posterior: at 100
#: coordinates and three posteriors the figure was 67 inches tall and took 11 s to draw)
FOREST_MAX_COORDS = 30


def hdi(draws: np.ndarray, prob: float) -> tuple[float, float]:
    """The shortest interval holding ceil(prob * n) of the n draws (the highest-density
    interval of a unimodal sample); a single draw is its own interval."""
    x = np.sort(np.asarray(draws, dtype=float).ravel())
    n = x.size
    keep = max(1, min(n, int(math.ceil(prob * n))))
    widths = x[keep - 1:] - x[: n - keep + 1]
    i = int(np.argmin(widths))
    return float(x[i]), float(x[i + keep - 1])


def _posterior(idata):
    return adapter.group(idata, "posterior")


def forest_coords(idatas: dict, var_names, max_coords: int = FOREST_MAX_COORDS):
    """Which coordinates a forest plot shows: all of them if there are at most
    ``max_coords``; otherwise the ``max_coords`` where some posterior's mean is furthest
    from the first posterior's (the reference), in the first posterior's sds, in index
    order. Scalar sites are always shown and count towards the cap; only sites with one
    dimension are thinned.

    Returns (coords - {dim: [coordinate values]}, or None when all are shown; the number of
    coordinates shown; the number there are).
    """
    first, *others = [_posterior(d) for d in idatas.values()]
    sizes = {v: int(np.prod(first[v].shape[2:], dtype=int)) for v in var_names}
    total = sum(sizes.values())
    if total <= max_coords:
        return None, total, total
    thinned = [v for v in var_names if first[v].ndim == 3]
    room = max_coords - sum(sizes[v] for v in var_names if v not in thinned)
    if not thinned or room < len(thinned):
        return None, total, total
    scores = []  # (distance, var, index)
    for v in thinned:
        draws = first[v].values.reshape(-1, sizes[v])
        centre, sd = draws.mean(0), draws.std(0)
        far = np.zeros(sizes[v])
        for other in others:
            m = other[v].values.reshape(-1, sizes[v]).mean(0)
            far = np.maximum(far, np.abs(m - centre) / np.where(sd > 0, sd, 1.0))
        scores += [(float(d), v, i) for i, d in enumerate(far)]
    scores.sort(key=lambda t: -t[0])
    keep = {v: [] for v in thinned}
    for _, v, i in scores[:room]:
        keep[v].append(i)
    coords = {}
    for v in thinned:
        dim = first[v].dims[2]
        coords[dim] = [first[v].coords[dim].values[i] for i in sorted(keep[v])]
    shown = total - sum(sizes[v] for v in thinned) + room
    return coords, shown, total


def _rows(post, var_names, coords) -> list[tuple[str, np.ndarray]]:
    """(label, flat draws) per coordinate shown, sites in order, coordinates in index order."""
    rows = []
    for v in var_names:
        da = post[v]
        extra = [d for d in da.dims if d not in ("chain", "draw")]
        if not extra:
            rows.append((v, da.values.ravel()))
            continue
        if len(extra) == 1 and coords and extra[0] in coords:
            da = da.sel({extra[0]: coords[extra[0]]})
        flat = da.transpose("chain", "draw", *extra).values.reshape(da.sizes["chain"] * da.sizes["draw"], -1)
        for j, index in enumerate(np.ndindex(*[da.sizes[d] for d in extra])):
            labels = [str(da.coords[d].values[i]) if d in da.coords else str(i) for d, i in zip(extra, index)]
            rows.append((f"{v}[{', '.join(labels)}]", flat[:, j]))
    return rows


def forest_figure(idatas: dict, var_names, *, hdi_prob: float = 0.94, colors=None, coords: dict | None = None):
    """Forest plot of several posteriors side by side, as a matplotlib Figure drawn off
    pyplot (the user's global backend and pyplot's figures are untouched; a notebook
    shows it with ``display``).

    idatas: {label: posterior data}, e.g. {"NUTS": ref.idata, "Laplace": ...}, the first
    on top of each group. coords: the coordinates to show (as from :func:`forest_coords`;
    None: all). colors: one per posterior (default: matplotlib's cycle).
    """
    labels = list(idatas)
    per_posterior = [_rows(_posterior(idatas[k]), var_names, coords) for k in labels]
    names = [name for name, _ in per_posterior[0]]
    palette = list(colors) if colors is not None else [f"C{i}" for i in range(len(labels))]
    fig = ShownFigure(figsize=(7.0, 1.5 + 0.22 * len(names) * max(1, len(labels))))
    ax = fig.add_subplot(1, 1, 1)
    step = 1.0 / (len(labels) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row draws nothing
        for p, (label, rows) in enumerate(zip(labels, per_posterior)):
            for r, (_, draws) in enumerate(rows):
                y = -(r + (p + 1) * step)
                draws = draws[np.isfinite(draws)]
                if draws.size == 0:
                    continue
                low, high = hdi(draws, hdi_prob)
                q1, median, q3 = np.quantile(draws, [0.25, 0.5, 0.75])
                ax.plot([low, high], [y, y], color=palette[p], lw=1.0)
                ax.plot([q1, q3], [y, y], color=palette[p], lw=3.0, solid_capstyle="butt")
                ax.plot([median], [y], "o", color=palette[p], ms=4, label=label if r == 0 else None)
    ax.set_yticks([-(r + 0.5) for r in range(len(names))], names)
    for r in range(1, len(names)):
        ax.axhline(-r, color="0.9", lw=0.5, zorder=0)
    ax.set_ylim(-len(names), 0)
    ax.legend(loc="upper right", fontsize="small", frameon=False, bbox_to_anchor=(1.0, 1.0 + 0.6 / max(len(names), 1)),
              ncol=len(labels))
    ax.set_xlabel(f"parameter value: median (dot), quartiles (thick), {100 * hdi_prob:g}% HDI (thin)")
    ax.set_ylabel("parameter (one row per posterior)")
    fig.tight_layout()
    return fig


def plot_forest(idatas: dict, var_names, path, *, hdi_prob: float = 0.94, colors=None,
                coords: dict | None = None) -> str:
    """:func:`forest_figure`, saved as PNG at ``path`` (atomically); returns the path."""
    fig = forest_figure(idatas, var_names, hdi_prob=hdi_prob, colors=colors, coords=coords)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")


__all__ = ["FOREST_MAX_COORDS", "hdi", "forest_coords", "forest_figure", "plot_forest"]
