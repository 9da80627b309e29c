"""What a BBLR comparison adds to the report (``ModelRecord.figures``): the posterior's
modes as the reference's draws find them, and where SLA's answer lies among them
(validation/modes.py)."""
from __future__ import annotations

import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from .atomic import write_json_atomic
from .modes import basins


def mode_analysis(comp) -> dict[str, Any] | None:
    """Basins of the reference's posterior and SLA's point among them; None without a
    reference or without an SLA row."""
    if comp.reference is None:
        return None
    spec, Phi, y = comp.prepared.spec, jnp.asarray(comp.prepared.Phi_train), jnp.asarray(comp.prepared.y_train, float)
    sla = comp.posteriors.get("sla")
    out = basins(lambda w: spec.log_joint(w, Phi, y), comp.reference.posterior.flat_draws(),
                 point=None if sla is None else sla.mean_flat())
    out["reference_certified"] = bool(comp.reference.certified)
    return out


def comparison_figures(comp, out_dir: str) -> dict[str, tuple[str, str]]:
    from matplotlib.figure import Figure

    from .report import save_figure

    analysis = mode_analysis(comp)
    if analysis is None or not analysis["modes"]:
        return {}
    write_json_atomic(analysis, os.path.join(out_dir, "modes.json"))
    modes = analysis["modes"]
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot(1, 1, 1)
    shares = [m["share"] for m in modes]
    ax.bar(range(len(modes)), shares, yerr=[2 * m["share_se"] for m in modes], color="0.6", capsize=3)
    for k, m in enumerate(modes):
        ax.annotate(f"log p = {m['log_density']:.1f}", (k, m["share"]), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 6), textcoords="offset points")
    point = analysis.get("point")
    if point is not None and point["mode_index"] is not None:
        ax.bar([point["mode_index"]], [shares[point["mode_index"]]], color="tab:orange", label="SLA's mode")
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(modes)))
    ax.set_xlabel("local mode (by basin share)")
    ax.set_ylabel("share of reference draws")
    ax.set_ylim(0, 1.15)
    path = os.path.join(out_dir, "modes.png")
    save_figure(fig, path)
    n, failed = analysis["n_starts"], analysis["n_failed"]
    if point is None:
        where = "there is no SLA row to place"
    elif point["mode_index"] is None:
        where = ("SLA's answer, ascended to its local mode, is **none of the modes the reference's draws reach**: "
                 "a mode of negligible posterior mass" if point["stationary"] else
                 "SLA's answer does not ascend to a proper mode (no positive definite Hessian there)")
    elif point["is_main_mode"]:
        where = f"SLA's answer is the **main mode** (its basin holds {shares[0]:.0%} of the draws)"
    else:
        where = (f"SLA's answer is **not the main mode**: its basin holds {shares[point['mode_index']]:.0%} of "
                 f"the draws, the main one {shares[0]:.0%}")
    caption = (f"Modes of the posterior: from {n} reference draws, the zoo's damped Newton ascent reaches "
               f"{len(modes)} distinct local mode(s)" + (f" ({failed} ascents ended elsewhere)" if failed else "")
               + f"; bars: the share of draws in each basin (whiskers 2 se). {where}. "
               + (f"A Gaussian on one mode (Laplace) cannot hold the {1 - shares[0]:.0%} of draws outside the "
                  "main basin." if len(modes) > 1 else
                  "As far as the draws show the posterior has one mode: what a Gaussian on it (Laplace) misses "
                  "is its shape, not another mode (compare its sd ratio and k-hat above).")
               + ("" if analysis["reference_certified"] else " The reference is NOT certified: these shares "
                  "are those of its draws, not known to be the posterior's."))
    return {"modes": (path, caption)}

