"""Write a comparison to disk: report.md, PNG figures, netCDF InferenceData, results.json.

Every file is written atomically (temporary name, then rename), so a killed run never
leaves a half-written report that looks finished.

Without a reference (every sampler ran out of time) there are no reference draws: no
reference netCDF and no figures (each one compares the engines with those draws), and
report.md says so at its top.
"""
from __future__ import annotations

import os
import re
import warnings
from typing import Any

import jax
import numpy as np

# Figures are drawn on matplotlib Figure objects (Agg canvas at savefig), never through
# pyplot: importing this module must not switch the backend of a user's notebook or script.
from matplotlib.figure import Figure

from ...models.base import is_classifier
from ..base import arviz_adapter
from ..base.atomic import save_figure, write_json_atomic, write_text_atomic
from ..base.figures import ShownFigure
from . import forest
from ..base.signing import OUTPUT_MANIFEST, file_sha256, read_signed_json, write_signed_json
from ..base.tables import Table, format_value as _fmt, markdown_cell as _cell
from ..judge.distribution import LEVELS
from ..judge.evidence import VIOLATES_BOUND
from ..judge.metrics import HELD_OUT_KEYS, NEAR_ZERO, THRESHOLDS
from ..judge import verdict
from ..judge.verdict import DIFFERS
from ..records.registry import get_model, model_names
from ..references import NUTS_SAMPLER
from ..runs.compare import Comparison
from ..runs.results import METRIC_OF_COLUMN, ComparisonResult

ENGINE_COLORS = {"reference": "black", "em": "tab:green", "laplace": "tab:orange", "ep": "tab:blue"}


def _color(name: str) -> str:
    return ENGINE_COLORS.get(name, "tab:purple")


def _constant_data(comp: Comparison) -> dict[str, np.ndarray]:
    """The data stored beside the draws in the report's netCDF files: a classifier's designs
    and labels (and its spec's own constant data), or a general model's data arrays and
    observations by site."""
    p = comp.prepared
    spec = p.spec
    if not is_classifier(spec):
        return {**{k: np.asarray(v) for k, v in p.Phi_train.items()},
                **{k: np.asarray(v) for k, v in p.y_train.items()}}
    return {
        "Phi_train": np.asarray(p.Phi_train),
        "y_train": np.asarray(p.y_train),
        "Phi_test": np.asarray(p.Phi_test),
        "y_test": np.asarray(p.y_test),
        **spec.constant_data(p.Phi_train.shape[1]),
    }


def _verdict_rows(res: ComparisonResult, scope: str) -> list[tuple[str, Any]]:
    """(label, verdict) of every engine's verdict of ``scope`` ("joint", "distribution"),
    against the model's reference and against its variant's."""
    return [(row.engine if row.variant is None else f"{row.engine} vs the {row.variant} variant", getattr(row, scope))
            for row in res.verdicts if getattr(row, scope) is not None]


def _joint_verdict_lines(res: ComparisonResult) -> list[str]:
    """The verdicts on the joint posterior, with the direction in which each engine is off."""
    rows = _verdict_rows(res, "joint")
    if not rows:
        return []
    lines = ["", "## Joint verdicts", "",
             "The same question of the joint posterior: means and sds of d linear combinations of the "
             "parameters instead of the d coordinates, along the directions where the engine's variance is "
             "most off the reference's (chosen on the first half of every chain, tested on the second; "
             "DERIVATIONS.md §7). Wrong correlations with exact marginals are seen here and not above. Each "
             "verdict alone calls an exact engine different about 5% of the time; the two together at most 10%.",
             "", "| engine | joint verdict | max abs z (threshold) | direction most off (reference-sd units) |",
             "|---|---|---|---|"]
    for name, v in rows:
        status = "**differs**" if v.differs else v.status
        stat = (f"{v.statistic:.2f} ({v.threshold:.2f}, {v.n_tests} tests)" if v.statistic is not None else v.reason)
        d = v.direction
        if d and v.applicable:
            size = (f"sd x{d['sd_ratio']:.2f}" if d["test"] == "sd" else f"mean {d['mean_shift']:+.2f} sd")
            where = f"{d['text']}: {size} (z = {d['z']:+.1f})"
        else:
            where = "-"
        lines.append(f"| {name} | {status} | {_cell(stat)} | {_cell(where)} |")
    return lines


def _distribution_verdict_lines(res: ComparisonResult) -> list[str]:
    """The verdicts on the whole marginal distributions: shape, tails, support, modes."""
    rows = _verdict_rows(res, "distribution")
    if not rows:
        return []
    levels = next((v.levels for _, v in rows if v.levels), LEVELS)
    lines = ["", "## Distribution verdicts", "",
             "The whole distribution of every coordinate, not two moments: the reference's probability below "
             f"the engine's {', '.join(f'{100 * p:g}' for p in levels)}% quantiles of each coordinate, and "
             "averaged over the coordinates, against the engine's own, in units of their Monte Carlo errors "
             "(batch means over every chain), with a Bonferroni threshold (validation/judge/distribution.py, "
             "DERIVATIONS.md §10). Mass the engine puts below 0 at a site whose support is w >= 0 (or > 0) "
             "counts as a difference of that size. Skew, heavy tails with the right variance, mass outside the support and "
             "missing modes are seen here and not above; an exact engine is called different at most 5% of the "
             "time (measured: about 2%, docs/validation.md); the three verdicts together at most 15%.",
             "", "| engine | distribution verdict | max abs z (threshold) | worst tests (engine minus reference, "
             "probability) | mass below 0 (resolution) | detectable CDF change: coordinate / average |",
             "|---|---|---|---|---|---|"]
    for name, v in rows:
        status = "**differs**" if v.differs else v.status
        if not v.applicable:
            lines.append(f"| {name} | {status} | {_cell(v.reason)} | - | - | - |")
            continue
        stat = f"{v.statistic:.2f} ({v.threshold:.2f}, {v.n_tests} tests)" if v.statistic is not None else "-"
        worst = "; ".join(f"{w['coordinate']}, {w['test']}: {100 * w['difference']:+.1f} points (z={w['z']:+.1f})"
                          for w in v.worst) or "-"
        if v.point_mass:
            worst = f"a point (sd = 0) at {', '.join(v.point_mass[:3])}; " + worst
        out = v.outside_support
        mass = "-" if out is None else (f"{100 * out['mass']:.1f}% at {out['coordinate']} "
                                        f"({100 * out['resolution']:.1f}%)")
        detect = (f"{_pct(v.detectable_cdf_change)} / {_pct(v.detectable_pooled_cdf_change)}")
        lines.append(f"| {name} | {status} | {stat} | {_cell(worst)} | {mass} | {detect} |")
    return lines


def _evidence_lines(res: ComparisonResult) -> list[str]:
    """Every engine's log evidence (or lower bound) against the reference log Z."""
    ev = res.evidence
    if not ev:
        return []
    checked = ev["mode"] == "checked"
    lines = ["", "## Evidence", "",
             "The log marginal likelihood an engine reports (an estimate: EP's log Z, a Laplace evidence) or a lower "
             "bound on it (an ELBO), against the reference log Z of the model it fits, computed from the "
             "reference's draws by bridge sampling (validation/judge/evidence.py, DERIVATIONS.md §11)"
             + (", certified where annealed importance sampling agrees with it. "
                if checked else
                " alone: not cross-checked by annealed importance sampling (`--evidence checked` does; the "
                "bridge's error is calibrated against quadrature on two-dimensional cases, docs/validation.md). ")
             + "An estimate differs when it is further from log Z than the reference resolves at 5% (two-sided); "
             "a bound is violated when it lies above log Z by more than that (one-sided); a bound's distance "
             "below log Z is its gap (for an exact ELBO, the KL divergence of the fit from the posterior). The "
             "stochastic ELBOs' own noise is not counted. "
             f"Computed in {ev['seconds']:.1f} s.", "",
             "| model | reference log Z (+- se) | how |", "|---|---|---|"]
    for label, ref in ev["references"].items():
        if ref is None:
            lines.append(f"| {label} | - | no certified reference |")
            continue
        value = "-" if ref["log_z"] is None else f"{ref['log_z']:.3f} +- {ref['se']:.3f}"
        how = ("certified (bridge sampling and AIS agree)" if ref["certified"] else
               ref["reason"] if ref.get("checked", True) else "bridge sampling alone")
        lines.append(f"| {label} | {value} | {_cell(how)} |")
    lines += ["", "| engine | kind | value | evidence verdict | value - log Z | resolves | from |",
              "|---|---|---|---|---|---|---|"]
    for name, e in ev["engines"].items():
        v = e.get("verdict") or {}
        status = v.get("status") or "-"
        if status in (DIFFERS, VIOLATES_BOUND):
            status = f"**{status}**"
        if not v:
            status = e.get("reason") or "-"
        elif v.get("reason"):
            status = f"{status} ({v['reason']})"
        diff = "-" if v.get("difference") is None else f"{v['difference']:+.3f}"
        detect = "-" if v.get("detectable") is None else f"{v['detectable']:.3f}"
        lines.append(f"| {name} | {e['kind']} | {e['value']:.3f} | {_cell(status)} | {diff} | {detect} | "
                     f"{_cell(e['source'])} |")
    return lines


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} points"


def file_stem(name: str) -> str:
    """A file name for an engine's output: a user's ``pkg.mod:fit`` becomes ``pkg.mod--fit``
    (a ':' is not allowed in file names everywhere), other characters outside letters,
    digits, '.', '-' and '_' become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name.replace(":", "--"))


def write_report(comp: Comparison, out_dir: str) -> dict[str, str]:
    """Write every artefact of a comparison under ``out_dir``; return name -> path."""
    os.makedirs(out_dir, exist_ok=True)
    res = comp.result
    files: dict[str, str] = {}
    const = _constant_data(comp)

    # netCDF: the reference and each approximation, with the data they were fitted on
    if comp.reference is not None:
        path = os.path.join(out_dir, "reference.nc")
        arviz_adapter.to_netcdf(arviz_adapter.with_constant_data(comp.reference.idata, const), path)
        files["reference"] = path
    for name, ref in comp.variant_references.items():
        path = os.path.join(out_dir, f"reference_{name}.nc")
        arviz_adapter.to_netcdf(arviz_adapter.with_constant_data(ref.idata, const), path)
        files[f"reference_{name}"] = path
    idatas = _idatas(comp, const)
    for name in comp.posteriors:
        files[name] = os.path.join(out_dir, f"{file_stem(name)}.nc")
        arviz_adapter.to_netcdf(idatas[name], files[name])

    # figures: each one shows the reference's draws
    figures, forest_note = _figures(comp, idatas)
    for name, fig in figures.items():
        files[name] = os.path.join(out_dir, FIGURE_FILES[name])
        save_figure(fig, files[name])
    captions = {}
    model_figures = getattr(get_model(res.model), "figures", None) if res.model in model_names() else None
    if model_figures is not None:
        for name, (path, caption) in model_figures(comp, out_dir).items():
            files[f"figure_{name}"] = path
            captions[f"figure_{name}"] = caption

    files["results"] = os.path.join(out_dir, "results.json")
    write_json_atomic(res.to_json(), files["results"])
    files["report"] = os.path.join(out_dir, "report.md")
    write_text_atomic(files["report"], render_markdown(res, files, out_dir, captions, forest_note))
    _replace_earlier_outputs(out_dir, files)
    return files


#: the signed list of what the last report in a folder wrote (base/signing.py)
MANIFEST = ".zoo-outputs.json"
#: what a report folder holds that a zoo report may have written (an earlier run's, when
#: the folder has no manifest)
_OUTPUT_LIKE = re.compile(r"\.(nc|png)$|^(report\.md|results\.json)$")


def _replace_earlier_outputs(out_dir: str, files: dict[str, str]) -> list[str]:
    """Remove what the previous report in ``out_dir`` wrote and this one did not (an
    earlier run's ``em.nc`` must not sit beside a report of other engines and read as part
    of it), then record what this one wrote; returns the files removed.

    Only files the zoo can prove it wrote go: those listed in the folder's manifest -
    signed with this user's key - whose bytes are still the ones recorded. A file changed
    since, a manifest that is not this user's zoo's, and anything not listed stay (a
    warning names earlier outputs left in a folder without a trusted manifest)."""
    written = {os.path.relpath(p, out_dir): p for p in files.values()}
    manifest_path = os.path.join(out_dir, MANIFEST)
    had_manifest = os.path.exists(manifest_path)
    earlier = read_signed_json(manifest_path, OUTPUT_MANIFEST, "output manifest", tail=1) if had_manifest else None
    removed, kept = [], []
    for name, digest in ((earlier or {}).get("files") or {}).items():
        path = os.path.join(out_dir, name)
        if (not isinstance(name, str) or name in written or os.path.isabs(name)
                or os.path.normpath(name).startswith(os.pardir) or not os.path.isfile(path)):
            continue
        try:
            if file_sha256(path) == digest:
                os.remove(path)
                removed.append(name)
            else:
                kept.append(name)
        except OSError:
            kept.append(name)
    if kept:
        warnings.warn(f"{out_dir}: kept {', '.join(sorted(kept))} from an earlier report: changed since the zoo "
                      "wrote them", stacklevel=3)
    if earlier is None:
        leftovers = sorted(f for f in os.listdir(out_dir) if _OUTPUT_LIKE.search(f) and f not in written)
        if leftovers:
            warnings.warn(f"{out_dir} holds files this report did not write ({', '.join(leftovers)}), left by an "
                          "earlier run without a manifest the zoo can trust: they are not part of this report; "
                          "delete them, or use a new --out folder", stacklevel=3)
    write_signed_json({"files": {name: file_sha256(p) for name, p in sorted(written.items())}}, manifest_path,
                      OUTPUT_MANIFEST, tail=1)
    return removed


#: the file each figure of :func:`comparison_figures` is written to by :func:`write_report`
FIGURE_FILES = {"forest": "forest.png", "probabilities": "probabilities.png", "weights": "weight_metrics.png",
                "boundary": "decision_boundary.png"}


def comparison_figures(comp: Comparison) -> dict[str, Figure]:
    """The report's figures of a comparison as matplotlib Figures, drawn without pyplot (no
    global state changes; ``display(fig)`` shows one in a notebook): ``forest`` (every
    posterior's intervals per coordinate), ``weights`` (standardized mean error and sd ratio
    per coordinate), ``probabilities`` (test-set predictive probabilities against the
    reference's) and, for 2-d inputs with a basis, ``boundary`` (decision boundaries). Empty
    without a reference: each figure compares the engines with its draws."""
    return _figures(comp, _idatas(comp))[0] if comp.reference is not None else {}


def _idatas(comp: Comparison, constant_data=None) -> dict:
    """InferenceData of the reference (when there is one) and of every engine's posterior,
    the engines' draws in the reference's shape (without one, the adapter's default), drawn
    with one fixed key: the draws the report's files and figures show."""
    idatas = {}
    draw_shape = {}
    if comp.reference is not None:
        idatas["reference"] = comp.reference.idata
        draw_shape = {"chains": comp.reference.posterior.n_chains, "draws": comp.reference.posterior.n_draws}
    key = jax.random.PRNGKey(1)
    for name, post in comp.posteriors.items():
        key, sub = jax.random.split(key)
        idatas[name] = arviz_adapter.posterior_to_idata(post, sub, **draw_shape, constant_data=constant_data)
    return idatas


def _figures(comp: Comparison, idatas) -> tuple[dict[str, Figure], str | None]:
    """(the figures, the forest plot's note on the coordinates it leaves out, or None)."""
    if comp.reference is None:
        return {}, None
    sites = [s.name for s in comp.reference.posterior.sites]
    coords, shown, total = forest.forest_coords(idatas, sites)
    figures = {"forest": forest.forest_figure(idatas, sites, colors=[_color(k) for k in idatas],
                                                     coords=coords),
               "weights": _weight_metrics_figure(comp)}
    if not is_classifier(comp.prepared.spec):  # no predictive probabilities, no decision boundary
        return figures, _forest_note(coords, shown, total)
    figures["probabilities"] = _probabilities_figure(comp)
    if comp.split.X_train.shape[1] == 2 and comp.prepared.basis is not None:
        figures["boundary"] = _boundary_figure(comp)
    return figures, _forest_note(coords, shown, total)


def _forest_note(coords, shown: int, total: int) -> str | None:
    """What the forest plot leaves out, or None where it shows every coordinate."""
    return (None if coords is None else
            f"The forest plot shows {shown} of the {total} coordinates: those where an engine's "
            "mean is furthest from the reference's, in reference sds (every coordinate is in "
            "the tables and the netCDF files).")


def _probabilities_figure(comp: Comparison) -> Figure:
    p_ref = comp.reference.posterior.predict_proba(comp.prepared.Phi_test)
    names = list(comp.posteriors)
    fig = ShownFigure(figsize=(4 * len(names), 4))
    axes = fig.subplots(1, len(names), squeeze=False)
    for ax, name in zip(axes[0], names):
        p = comp.posteriors[name].predict_proba(comp.prepared.Phi_test)
        ax.scatter(p_ref, p - p_ref, s=4, alpha=0.5, color=_color(name))
        ax.axhline(0, color="k", lw=0.8)
        mae = comp.result.engines[name].metrics["pred_mae"]
        ax.set_title(f"{name}: mean |p - p_ref| = {mae:.4f}")
        ax.set_xlabel(f"p(y=1|x), reference ({comp.reference.sampler})")
        ax.set_ylabel("engine minus reference")
    fig.suptitle(f"Test-set predictive probabilities against the reference ({comp.reference.sampler})")
    return fig


def _weight_metrics_figure(comp: Comparison) -> Figure:
    names = comp.reference.posterior.flat_names()
    x = np.arange(len(names))
    fig = ShownFigure(figsize=(max(6, 0.35 * len(names) + 2), 7))
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    for name, row in comp.result.engines.items():
        if row.failure:  # a failed engine has no numbers to plot
            continue
        if row.metrics["std_mean_err"] is not None:  # null where the posterior has no mean/sd
            ax1.plot(x, row.metrics["std_mean_err"], "o", ms=4, label=name, color=_color(name))
        if row.metrics["sd_ratio"] is not None:
            ax2.plot(x, row.metrics["sd_ratio"], "o", ms=4, label=name, color=_color(name))
    ax1.axhline(THRESHOLDS["std_mean_err_ok"], color="0.5", ls=":", lw=1)
    ax1.set_ylabel("|m - m_ref| / sd_ref")
    ax1.set_yscale("symlog", linthresh=0.05)
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend()
    else:
        ax1.text(0.5, 0.5, "no moment metrics: " + ((comp.result.moments or {}).get("reason") or "none"),
                 transform=ax1.transAxes, ha="center", va="center", fontsize=7, wrap=True)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.axhspan(*THRESHOLDS["sd_ratio_band"], color="0.9", zorder=0)
    ax2.set_ylabel("sd / sd_ref")
    ax2.set_xticks(x)
    ax2.set_xticklabels(names, rotation=90, fontsize=7)
    ax2.set_xlabel("parameter")
    ax1.set_title(
        f"Per-parameter accuracy against the reference ({comp.reference.sampler}) (dotted / grey band: thresholds of\n"
        "validation.metrics, about 2-3 Monte Carlo errors of a 400-ESS reference; points have no sd)"
    )
    return fig


def _boundary_figure(comp: Comparison) -> Figure:
    X, y = comp.split.X_train, comp.split.y_train
    lo, hi = X.min(0) - 0.5, X.max(0) + 0.5
    g1, g2 = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
    grid = np.column_stack([g1.ravel(), g2.ravel()])
    Phi_grid = comp.prepared.basis.transform(grid)
    fig = ShownFigure(figsize=(6.5, 5.5))
    ax = fig.subplots()
    ax.scatter(X[y == 0, 0], X[y == 0, 1], s=10, marker="o", color="0.6", label="class 0")
    ax.scatter(X[y == 1, 0], X[y == 1, 1], s=10, marker="^", color="0.3", label="class 1")
    # a kernel basis has centres to mark; a linear one (or one wrapped with a bias column)
    # has none here
    centres = getattr(comp.prepared.basis, "centres", None)
    if centres is not None:
        ax.scatter(centres[:, 0], centres[:, 1], s=70, facecolors="none", edgecolors="red", label="basis centres")
    p = comp.reference.posterior.predict_proba(Phi_grid).reshape(g1.shape)
    ax.contour(g1, g2, p, levels=[0.5], colors="k", linewidths=2.5)
    ax.plot([], [], "k", lw=2.5, label=f"reference ({comp.reference.sampler})")
    for name, post in comp.posteriors.items():
        p = post.predict_proba(Phi_grid).reshape(g1.shape)
        ax.contour(g1, g2, p, levels=[0.5], colors=_color(name), linewidths=1.2, linestyles="--")
        ax.plot([], [], "--", color=_color(name), label=name)
    ax.set_xlabel("x1 (standardized)")
    ax.set_ylabel("x2 (standardized)")
    ax.legend(fontsize=8, loc="best")
    ax.set_title("Decision boundaries p(y=1|x) = 0.5")
    return fig


#: rows of a pruned-weights table before "... and k more"
PRUNED_ROWS_SHOWN = 20


def _pruned_table(name: str, rows: list[dict[str, Any]]) -> list[str]:
    """Markdown for the weights ``name`` pruned, beside the reference's marginals (rows
    come sorted by the reference's P(|w| < 0.1), smallest first)."""

    out = [
        "",
        f"### Weights `{name}` pruned, beside the reference",
        "",
        f"{len(rows)} weight(s) set to exactly 0 by the engine. The reference's marginal of each; "
        f"P(|w| < {NEAR_ZERO:g}) is the reference's probability that the weight is negligible. "
        "Smallest probability first: the prunings the reference doubts most lead.",
        "",
        f"| weight | {name} | ref mean | ref sd | ref 5% | ref 95% | ref P(\\|w\\| < {NEAR_ZERO:g}) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows[:PRUNED_ROWS_SHOWN]:
        out.append(
            f"| w[{r['index']}] | {_fmt(r['engine'])} | {_fmt(r['ref_mean'])} | {_fmt(r['ref_sd'])} | "
            f"{_fmt(r['ref_q05'])} | {_fmt(r['ref_q95'])} | {_fmt(r['ref_p_near_zero'], 3)} |"
        )
    if len(rows) > PRUNED_ROWS_SHOWN:
        out.append(f"\n... and {len(rows) - PRUNED_ROWS_SHOWN} more (all in results.json).")
    return out


def _sampler_text(model: str, name: str) -> str:
    """The sampler's own description (its ReferenceSampler's: NUTS, the built-in, or one
    the model's record holds), or its name."""
    if name == NUTS_SAMPLER.name:
        return NUTS_SAMPLER.description or name
    try:
        return get_model(model).reference_sampler(name).description or name
    except ValueError:  # a results file of a model or sampler not registered in this session
        return name


def _no_reference_lines(res: ComparisonResult) -> list[str]:
    """The head of a report without a reference: which samplers ran out of time, and what
    the engines' rows can still say."""
    return [
        "**No reference: not certified - every reference sampler ran out of time.**",
        "",
        *[f"- {t.sampler_name}: stopped at its time limit of {t.time_limit:g} s, no draws"
          for t in res.references_tried],
        "",
        "The engines' rows below carry only timing and test-set figures (test error, test "
        "log-likelihood, AUC): there is no posterior to measure their accuracy against.",
        "",
    ]


def _reference_lines(res: ComparisonResult) -> list[str]:
    """Which sampler is the reference, whether it is certified, what else was tried, and
    which posterior moments exist."""
    ref = res.reference
    if ref.ran_out_of_time:
        return ["None: every sampler ran out of time (see the top of this report)."] + _variant_reference_lines(res)
    name = ref.sampler_name
    lines = []
    for tried in res.references_tried:
        if tried.sampler_name == name:
            continue
        if tried.time_limit is not None:
            lines.append(f"Tried first: **{tried.sampler_name}** - ran out of time (stopped at its limit of "
                         f"{tried.time_limit:g} s, no draws; not certified).")
            continue
        lines.append(
            f"Tried first: **{tried.sampler_name}** - not certified ({_cell('; '.join(tried.failures[:4]))}"
            + ("; ..." if len(tried.failures) > 4 else "")
            + f"; {_fmt(tried.seconds, 1)} s)."
        )
    if lines:
        lines.append("")
    if ref.certified:
        lines.append(
            f"Reference: **{name}** ({_sampler_text(res.model, name)}), **certified**: R-hat max "
            f"{_fmt(ref.rhat_max)} (<= 1.01), bulk ESS min {_fmt(ref.ess_bulk_min, 1)}, tail ESS min "
            f"{_fmt(ref.ess_tail_min, 1)} (>= 400), {ref.divergences} divergences"
            + (f", E-BFMI min {_fmt(ref.ebfmi_min)} (>= 0.3), "
               f"{_fmt(100 * ref.treedepth_fraction, 1)}% of transitions at the maximum tree depth (<= 1%)"
               if ref.ebfmi_min is not None else "")
            + f"; {_fmt(ref.seconds, 1)} s" + (" (from cache)" if ref.from_cache else "") + "."
            + (f" Diagnosed sites: {', '.join(ref.diagnosed_sites)} (every site the sampler moves)."
               if ref.diagnosed_sites else "")
        )
    else:
        several = len(res.references_tried) > 1
        lines.append(
            ("**No reference sampler certified.** Shown: " if several else "**Reference NOT certified.** ")
            + f"**{name}** ({_sampler_text(res.model, name)})"
            + (", the closest to certification" if several else "")
            + ". The numbers below compare against an uncertified posterior and must not be read "
            "as accuracy. Failed checks: " + "; ".join(ref.failures)
        )
    lines += _variant_reference_lines(res)
    moments = res.moments
    if moments:
        lines.append("\nPosterior moments: " + moments["reason"] + ". "
                     + ("" if moments.get("sd_exists") is True else
                        "Metrics built on a moment that does not exist are null (std mean err, sd ratio, "
                        "KL, Wasserstein as applicable); the predictive metrics, k-hat and quantiles are "
                        "unaffected."))
    return lines


def _variant_reference_lines(res: ComparisonResult) -> list[str]:
    lines = []
    for vname, vref in res.variant_references.items():
        if vref.ran_out_of_time:
            lines.append(f"\nNo reference for the `{vname}` variant of the model: " + "; ".join(vref.failures) + ".")
            continue
        status = "certified" if vref.certified else "NOT certified (" + "; ".join(vref.failures) + ")"
        lines.append(
            f"\n{vref.sampler_name} on the `{vname}` variant of the model: {status}; R-hat max "
            f"{_fmt(vref.rhat_max)}, ESS bulk/tail min {_fmt(vref.ess_bulk_min, 1)}/"
            f"{_fmt(vref.ess_tail_min, 1)}, {vref.divergences} divergences."
        )
    return lines


def render_markdown(res: ComparisonResult, files: dict[str, str], out_dir: str,
                    captions: dict[str, str] | None = None, forest_note: str | None = None) -> str:
    """The text of ``report.md`` for a comparison's result: the problem and how its
    hyper-parameters were chosen, the reference, the engines' table and notes, the verdicts,
    the evidence, and the figures and files of ``files`` (linked relative to ``out_dir``,
    with the model's own figures' ``captions`` and the forest plot's ``forest_note``)."""
    rel = {k: os.path.relpath(v, out_dir) for k, v in files.items()}
    no_reference = res.reference.ran_out_of_time
    lines = [
        (f"# {res.model.upper()} on `{res.data}` (split {res.split}): " if res.classifier else
         f"# {res.model} on its own data: ")
        + ("engines, no reference" if no_reference else "engines against the reference"),
        "",
        *(_no_reference_lines(res) if no_reference else []),
        (f"Training points: {res.n_train}; test points: {res.n_test}. "
         f"Frozen hyper-parameters: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in res.hyper.items()) + "."
         if res.classifier else
         f"Observed values: {res.n_train}; no test set and no classifier part, so no predictive metrics. "
         f"Judged sites: {', '.join(res.spec.get('sites', []))}."),
        "",
        "How they were chosen: " + "; ".join(f"{k}: {v}" for k, v in res.selection.items() if k != "cv_scores") + ".",
        "Every engine below approximates the same posterior, that of the model at these frozen values.",
        *([f"Computed on: {res.config['device']}."] if res.config.get("device") else []),
        "",
        "## Reference",
        "",
    ]
    lines += _reference_lines(res)
    if not no_reference and res.classifier:
        lines.append(f"\nReference test error: {_fmt(res.reference_test_error)}.")
    lines += _engine_table_lines(res, no_reference)
    lines += _engine_notes_lines(res, no_reference)
    lines += _verdict_lines(res)
    lines += _joint_verdict_lines(res)
    lines += _distribution_verdict_lines(res)
    lines += _evidence_lines(res)
    lines += _figure_and_file_lines(rel, no_reference, captions, forest_note, res.classifier)
    lines += _khat_threshold_lines(res)
    return "\n".join(lines) + "\n"


def _engine_table_lines(res: ComparisonResult, no_reference: bool) -> list[str]:
    """One row per engine (:meth:`ComparisonResult.table`): its kind, weights kept, metrics
    against the reference, verdicts, timings."""
    table = res.table()
    if no_reference:
        # the columns measured against the reference are empty, not null: nothing was measured
        against = {c for c in table.columns if c in METRIC_OF_COLUMN and METRIC_OF_COLUMN[c] not in HELD_OUT_KEYS}
        against |= {"verdict", "joint verdict", "distribution verdict", "speed-up vs reference"}
        rows = tuple(tuple("-" if c in against and not (isinstance(v, str) and v.startswith("failed"))
                           else v for c, v in zip(table.columns, row)) for row in table.rows)
        table = Table(table.columns, rows, table.digits)
    return ["", "## Engines", "", table.to_markdown(notes=False)]


def _engine_notes_lines(res: ComparisonResult, no_reference: bool) -> list[str]:
    """What the table cannot say: engines of another model, failures, null entries and why, each
    engine against the variant it fits, non-convergence, pruned weights."""
    lines: list[str] = []
    others = {name: r.other_model for name, r in res.engines.items() if r.other_model}
    if others:
        lines += ["", "Engines that fit **another model** than the reference's (their rows measure how far "
                  "that model's answer lies from this posterior, not an approximation error): "
                  + "; ".join(f"`{n}`: {m}" for n, m in others.items()) + "."]
    failed = {name: r.failure for name, r in res.engines.items() if r.failure}
    if failed:
        lines += [""] + [f"**{name} failed** (no metrics): {reason}" for name, reason in failed.items()]
    nulls = {
        (name, k): v for name, r in res.engines.items() if not r.failure
        for k, v in (r.metrics.get("null_reasons") or {}).items()
        # without a reference, the reason of every other empty column heads the report
        if not no_reference or k in HELD_OUT_KEYS
    }
    if nulls:
        lines += ["", "Null entries: " + "; ".join(f"{n}.{k}: {v}" for (n, k), v in nulls.items()) + "."]
    for name, r in res.engines.items():
        sub = r.against_variant
        if sub is not None:
            vref = res.variant_references.get(sub.variant)
            if vref is not None and vref.ran_out_of_time:
                lines += ["", f"`{name}` could not be measured against the reference of the model it actually "
                          f"approximates ({sub.variant}): every sampler of that reference ran out of time."]
            else:
                m = sub.metrics
                lines += [
                    "",
                    f"`{name}` measured against the reference of the model it actually approximates "
                    f"({sub.variant}; reference {'certified' if sub.reference_certified else 'NOT certified'}): "
                    f"pred_mae {_fmt(m['pred_mae'])}, std mean err median {_fmt(m['std_mean_err_median'], 3)}, "
                    f"sd ratio median {_fmt(m['sd_ratio_median'], 3)}, k-hat {_fmt(m['khat'], 3)}. "
                    "This line alone is the error of the approximation on its own model; the table row adds "
                    "the change of model. The two need not add up: per coordinate they can point opposite "
                    "ways and partly cancel, so the row can be closer to the reference than this line.",
                ]
        if not r.converged and not r.failure:
            lines += ["", f"**{name} did not converge**: {r.reason}"]
    for name, r in res.engines.items():
        if r.pruned_vs_reference:
            lines += _pruned_table(name, r.pruned_vs_reference)
    return lines


def _verdict_lines(res: ComparisonResult) -> list[str]:
    """The marginal verdicts: each engine (and each against its variant) coordinate by coordinate."""
    lines: list[str] = []
    verdicts = [(name, r) for name, r in res.engines.items() if r.verdict is not None]
    if verdicts:
        lines += ["", "## Verdicts", "",
                  "Each engine against the reference, coordinate by coordinate: its mean and sd against the "
                  "reference's, in units of their Monte Carlo standard errors, with a Bonferroni threshold "
                  "over all tests, so that an exact engine is called different about 5% of the time "
                  "whatever the dimension (validation/judge/verdict.py; the measured rates are tabled in docs/validation.md). *Indistinguishable* means only that the "
                  "reference could not see a difference; the detectable sizes say how large one it would see.",
                  "", "| engine | verdict | max abs z (threshold) | worst coordinates | detectable mean shift / sd change |",
                  "|---|---|---|---|---|"]
        for name, r in verdicts:
            v = r.verdict
            worst = "; ".join(f"{w['coordinate']} {w['test']} z={w['z']:+.1f} ({w['difference']:+.2f})"
                              for w in v.worst) or "-"
            if v.point_mass:  # sd exactly 0 there: differs for certain, outside the z's
                worst = (f"sd = 0 (pruned) at {len(v.point_mass)}: " + ", ".join(v.point_mass[:3])
                         + (", ..." if len(v.point_mass) > 3 else "") + "; " + worst)
            status = "**differs**" if v.differs else v.status
            detect = (f"{_fmt(v.detectable_mean_shift, 3)} sd / "
                      + (f"{100 * v.detectable_sd_change:.1f}%" if v.detectable_sd_change else "-")
                      if v.applicable else "-")
            stat = f"{v.statistic:.2f} ({v.threshold:.2f}, {v.n_tests} tests)" if v.statistic is not None else v.reason
            lines.append(f"| {name} | {status} | {_cell(stat)} | {_cell(worst)} | {detect} |")
            sub = r.against_variant
            if sub is not None and sub.verdict is not None:
                sv = sub.verdict
                sv_stat = (f"{sv.statistic:.2f} ({sv.threshold:.2f}, {sv.n_tests} tests)"
                           if sv.statistic is not None else sv.reason)
                sv_worst = "; ".join(f"{w['coordinate']} {w['test']} z={w['z']:+.1f}" for w in sv.worst) or "-"
                lines.append(f"| {name} vs the {sub.variant} variant | {sv.status} | {_cell(sv_stat)} | "
                             f"{_cell(sv_worst)} | - |")
    return lines


def _figure_and_file_lines(rel: dict[str, str], no_reference: bool, captions: dict[str, str] | None,
                           forest_note: str | None, classifier: bool = True) -> list[str]:
    """The figures (none without a reference), the files written and the metrics' definitions."""
    lines: list[str] = []
    lines += ["", "## Figures", ""]
    if no_reference:
        lines.append("None: every figure shows the engines beside the reference's draws.")
    else:
        lines += [
            *([forest_note, ""] if forest_note else []),
            f"![forest plot]({rel['forest']})",
            "",
            f"![per-weight metrics]({rel['weights']})",
            *(["", f"![predictive probabilities]({rel['probabilities']})"] if "probabilities" in rel else []),
        ]
    if "boundary" in rel:
        lines += ["", f"![decision boundaries]({rel['boundary']})"]
    for key, caption in (captions or {}).items():
        lines += ["", caption, "", f"![{key[len('figure_'):]}]({rel[key]})"]
    lines += [
        "",
        "## Files",
        "",
        ("InferenceData (netCDF, with `Phi_train`, `y_train`, `Phi_test`, `y_test` and the model's "
         "hyper-parameters in `constant_data`): " if classifier else
         "InferenceData (netCDF, with the model's data arrays and its observations in `constant_data`): ")
        + ", ".join(f"`{v}`" for k, v in rel.items() if v.endswith(".nc")) + ". "
        "Numbers: `results.json`.",
        "",
        "Metric definitions: pred_mae = mean |p - p_ref| over the test set; std mean err = |m - m_ref| / sd_ref "
        "per parameter; sd ratio = sd / sd_ref; k-hat = Pareto shape of the importance weights "
        "p(theta, y) / q(theta) (Yao et al. 2018; < 0.5 good; up to min(1 - 1/log10 S, 0.7) usable, S the "
        "draws it was fitted from (Vehtari et al. 2024; 0.7 from S = 2155 on); above it the approximation "
        "cannot be corrected by importance sampling); draws outside the support (w < 0) get zero weight and "
        "their fraction is reported. seconds are warm (compilation apart).",
    ]
    return lines


def _khat_threshold_lines(res: ComparisonResult) -> list[str]:
    """Each engine's k-hat beside the threshold its sample size sets."""
    judged = [(name, r.metrics) for name, r in res.engines.items()
              if not r.failure and r.metrics.get("khat") is not None and r.metrics.get("khat_threshold") is not None]
    if not judged:
        return []
    return ["", "k-hat against its threshold: " + "; ".join(
        f"{name} {m['khat']:.2f} {'<=' if m['khat'] <= m['khat_threshold'] else '>'} {m['khat_threshold']:.2f} "
        f"(S = {m['khat_draws']})" for name, m in judged) + "."]


# --------------------------------------------------------------------------------------
# The terminal's summary of a comparison (zoo compare prints it)
# --------------------------------------------------------------------------------------
def summary_table(res: ComparisonResult) -> str:
    """The comparison in a few lines for the terminal: reference, one row per engine, verdicts."""
    # engine names such as mm-laplace are longer than the 8 characters the column had
    name_width = max([9] + [len(name) + 2 for name in res.engines])
    # (header, metric, format) of the metric columns; a general model has no predictive ones
    columns = [("pred_mae", "pred_mae", "10.5f"), ("smerr_med", "std_mean_err_median", "11.3f"),
               ("sd_ratio", "sd_ratio_median", "10.3f"), ("khat", "khat", "8.2f"), ("test_err", "test_error", "10.4f")]
    if not res.classifier:
        columns = [c for c in columns if c[1] not in ("pred_mae", "test_error")]
    head = (f"{res.model} on {res.data} (split {res.split}), n_train={res.n_train}, "
            f"n_basis={res.hyper.get('n_basis')}, "
            + ", ".join(f"{k}={v:g}" for k, v in res.hyper.items() if k != "n_basis" and isinstance(v, (int, float)))
            if res.classifier else f"{res.model} on its own data, {res.n_train} observed values")
    lines = [
        head,
        *_reference_summary_lines(res),
        "",
        f"{'engine':<{name_width}}" + "".join(f"{h:>{int(spec.split('.')[0])}}" for h, _, spec in columns)
        + f"{'seconds':>10}{'x ref':>9}",
    ]

    def f(v, spec):
        width = int(spec.split(".")[0])
        return format(v, spec) if v is not None else format("null", f">{width}")

    for name, r in res.engines.items():
        label = name + ("*" if r.other_model else "")
        if r.failure:
            lines.append(f"{label:<{name_width}}failed: {r.failure}")
            continue
        m = r.metrics
        lines.append(f"{label:<{name_width}}" + "".join(f(m[k], spec) for _, k, spec in columns)
                     + f"{f(r.seconds, '10.4f')}{f(r.speedup_vs_reference, '9.0f')}")
        if r.against_variant is not None:
            # the engine against the reference of the model it fits: its approximation error
            v = r.against_variant.metrics
            vs_label = f"  vs {r.against_variant.variant}"
            lines.append(f"{vs_label:<{name_width}}" + "".join(f(v.get(k), spec) for _, k, spec in columns))
    if any(r.other_model for r in res.engines.values()):
        lines.append("* fits another model (prior) than the reference's: its row is a distance, not an approximation error")
    if any(r.against_variant is not None for r in res.engines.values()):
        lines.append("  vs X: the same engine against the reference of the model variant X it fits")
    rows = [(row.engine if row.variant is None else f"{row.engine} vs {row.variant}", row) for row in res.verdicts]
    for title, scope in (("verdicts (an exact engine is called different about 5% of the time, in any dimension):",
                          "marginal"),
                         ("joint verdicts (the joint posterior, correlations included; also about 5% each):", "joint"),
                         ("distribution verdicts (shape, tails, support, modes of every coordinate; at most 5% "
                          "each):", "distribution")):
        shown = [(name, getattr(row, scope)) for name, row in rows if getattr(row, scope) is not None]
        if shown:
            lines += ["", title]
            lines += ["  " + verdict.summary_line(name, v) for name, v in shown]
    lines += _evidence_summary_lines(res)
    return "\n".join(lines)


def _evidence_summary_lines(res: ComparisonResult) -> list[str]:
    """One line per engine that reports a log evidence: its value against the reference log Z."""
    ev = res.evidence
    if not ev or not ev["engines"]:
        return []
    how = ("certified by AIS" if ev["mode"] == "checked" else "bridge sampling alone; --evidence checked adds AIS")
    lines = ["", f"evidence (the engines' log Z or ELBO against the reference log Z, {how}; "
                 f"{ev['seconds']:.1f} s):"]
    for name, e in ev["engines"].items():
        v = e.get("verdict")
        if not v:
            lines.append(f"  {name}: {e['kind']} {e['value']:.3f}: no verdict ({e.get('reason') or '-'})")
        elif v["difference"] is None:
            lines.append(f"  {name}: {e['kind']} {e['value']:.3f}: {v['status']} ({v['reason']})")
        else:
            lines.append(f"  {name}: {e['kind']} {e['value']:.3f} vs log Z {v['reference_log_z']:.3f} "
                         f"+- {v['reference_se']:.3f}: {v['status']} ({v['difference']:+.3f} nats)")
    return lines


def _reference_summary_lines(res: ComparisonResult) -> list[str]:
    """Which sampler is the reference and whether it is certified (or that there is none)."""
    ref = res.reference
    if ref.ran_out_of_time:
        return ["reference: none, NOT CERTIFIED: " + "; ".join(ref.failures),
                "  (the rows below hold only test-set figures and timings: nothing to measure them against)"]
    status = "certified" if ref.certified else "NOT CERTIFIED: " + "; ".join(ref.failures)
    others = [t for t in res.references_tried if t.sampler_name != ref.sampler_name]

    def num(v, spec):
        # a diagnostic can be null (R-hat of a single chain): say so instead of crashing
        return "n/a" if v is None else format(v, spec)

    return [
        f"reference ({ref.sampler_name}): {status} (R-hat max {num(ref.rhat_max, '.4f')}, ESS bulk/tail min "
        f"{num(ref.ess_bulk_min, '.0f')}/{num(ref.ess_tail_min, '.0f')}, divergences {ref.divergences}, "
        f"{num(ref.seconds, '.1f')} s{' (from cache)' if ref.from_cache else ''})"
        + (f"; reference test error {num(res.reference_test_error, '.4f')}" if res.classifier else ""),
        *[f"  tried first: {t.sampler_name}, ran out of time (limit {t.time_limit:g} s, no draws)"
          if t.time_limit is not None else
          f"  tried first: {t.sampler_name}, not certified (R-hat max {num(t.rhat_max, '.3f')}, "
          f"ESS bulk min {num(t.ess_bulk_min, '.0f')}, divergences {t.divergences}, "
          f"{num(t.seconds, '.0f')} s{' (from cache)' if t.from_cache else ''})"
          for t in others],
    ]
