"""What a BBLR comparison adds to the report (``ModelRecord.figures``): the posterior's
modes as the reference's draws find them, and where SLA's answer lies among them
(validation/judge/modes.py)."""
from __future__ import annotations

import os
from typing import Any

import jax.numpy as jnp
import numpy as np

from ...data import flipped_labels
from ...inference.sla import logistic_start
from ...models.basis import WithBias
from ..base.atomic import save_figure, write_json_atomic
from ..base.figures import ShownFigure
from ..judge.modes import basins


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
    """BBLR's figures for a comparison's report (its record's ``figures``): those of
    :func:`modes_figure` and :func:`label_noise_figure`, written under ``out_dir``, as
    ``{name: (png path, caption)}``; empty where neither applies."""
    out = label_noise_figure(comp, out_dir)
    modes = modes_figure(comp, out_dir)
    return {**modes, **out}


def label_noise_figure(comp, out_dir: str) -> dict[str, tuple[str, str]]:
    """With flipped training labels (``--param flip=0.1``): the signed distance of every
    training point to the decision boundary, by its true label, under L2 logistic
    regression (same lam) and under BBLR's SLA - the flipped points' pull on the boundary
    is what a bounded likelihood limits."""

    prep = comp.prepared
    fraction = prep.hyper.get("flip")
    sla = comp.posteriors.get("sla")
    if not fraction or sla is None or not isinstance(prep.basis, WithBias):
        # the figure's distances read the last column as the bias: the linear design only
        # (a kernel design has no bias column, and its boundary is not a hyperplane in x)
        return {}
    Phi, y_obs = np.asarray(prep.Phi_train), np.asarray(prep.y_train, float)
    _, idx = flipped_labels(y_obs, fraction, comp.split.split)  # the same draw as prepare's
    y_true = y_obs.copy()
    y_true[idx] = 1 - y_true[idx]
    w_lr = logistic_start(Phi, y_obs, prep.spec.lam)
    fits = {"L2 logistic regression": w_lr, "BBLR (sla)": sla.mean_flat()}
    fig = ShownFigure(figsize=(7.2, 3.4))
    errors = {}
    for k, (label, w) in enumerate(fits.items()):
        # signed distance to the boundary: the bias column is the last of the design
        margin = (2 * y_true - 1) * (Phi @ w) / max(float(np.linalg.norm(w[:-1])), 1e-12)
        ax = fig.add_subplot(1, 2, k + 1)
        clean = np.setdiff1d(np.arange(len(y_true)), idx)
        bins = np.linspace(min(-4.0, margin.min()), max(4.0, margin.max()), 40)
        ax.hist(margin[clean], bins=bins, color="0.7", label="clean labels")
        ax.hist(margin[idx], bins=bins, color="tab:red", alpha=0.8, label="flipped labels")
        ax.axvline(0, color="k", lw=0.8)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("signed distance to the boundary (true label)")
        if k == 0:
            ax.legend(fontsize=7)
        p_test = (np.asarray(prep.Phi_test) @ w > 0) if label.startswith("L2") else (
            np.asarray(sla.predict_proba(prep.Phi_test)) > 0.5)
        errors[label] = float(np.mean(p_test != (np.asarray(prep.y_test) > 0.5)))
    path = os.path.join(out_dir, "label_noise.png")
    save_figure(fig, path)
    caption = (f"Label noise: {len(idx)} of {len(y_obs)} training labels flipped. Each training point's signed "
               "distance to the decision boundary measured with its true label (right of 0: on its true side), "
               "under L2 logistic regression (the same lam; its loss grows without bound with a point's "
               "distance on the wrong side) and under BBLR's SLA (its loss is bounded). Test error on clean "
               "labels: " + ", ".join(f"{k} {v:.3f}" for k, v in errors.items()) + ".")
    return {"label_noise": (path, caption)}


def modes_figure(comp, out_dir: str) -> dict[str, tuple[str, str]]:
    """The posterior's local modes as the reference's draws reach them (their basin shares)
    and SLA's answer among them: writes ``modes.json`` (:func:`mode_analysis`) and
    ``modes.png`` in ``out_dir`` and returns ``{"modes": (png path, caption)}``, or ``{}``
    without a reference or without a mode found."""
    analysis = mode_analysis(comp)
    if analysis is None or not analysis["modes"]:
        return {}
    write_json_atomic(analysis, os.path.join(out_dir, "modes.json"))
    modes = analysis["modes"]
    fig = ShownFigure(figsize=(6.4, 3.2))
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

