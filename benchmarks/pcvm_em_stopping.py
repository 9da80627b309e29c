"""Why the paper's top-down PCVM_EM does not stop, and what stops it.

For each fit in question (data set, IDA split, at the kernel width the IDA protocol chose
for EM - read from the stored ``*__em__hyper.json`` cells, never re-selected), the top-down
EM of ``inference/pcvm_em.py`` runs in six variants from the same random start (seed 0,
as the protocol's cells):
* ``paper``: ``TopDownEMConfig()`` = ``.paper()``, the authors' loop and 500-iteration cap
  (the protocol's EM cell, reproduced);
* ``paper_20k``: the same loop with a 20000-iteration cap: how long its stop (max|w -
  w_old| < 1e-3) really takes, and where it ends;
* ``paper_tight``: the same loop with tol 1e-8 and a 100000-iteration cap: the best
  available estimate of the fixed point the paper's loop creeps towards;
* ``fixed_point``: ``TopDownEMConfig.fixed_point()``, the paper's loop plus Newton steps on
  the monitor, stopped on its scaled gradient at a strict local maximum;
* ``nonneg``: the M-step maximized over w >= 0 instead of the ridge step and the prune of
  negative weights, nothing else changed;
* ``fixed_point_nonneg``: ``fixed_point(mstep="nonnegative")``, both changes.

Laplace and EP run at their own recorded widths on the same splits, in the same process,
so that the seconds in the table are comparable (one run, one load); their stored cells'
test errors are kept beside for a check.

Each run is summarized from the engine's own per-iteration traces (FitInfo.extra): the
paper's quantity max|w - w_old| at checkpoints, its geometric rate over the last
iterations (and the iterations that rate needs to reach 1e-3), the active-set size and
when it last changed, the largest jump of f caused by a prune and the most negative margin
(the runaway), ascent violations of the monitor between prunings, Newton steps and the
final scaled gradient. Pruning is permanent in this algorithm, so the iterates cannot
cycle between pruning states; the traces show which of the other mechanisms is at work.

Every finished (data set, split) is written atomically to
``<out>/fits/<data>__<split>.json``; a killed run resumes without redoing them. The table
is rebuilt from the files at the end (``<out>/summary.json``, ``summary.md``).

    python benchmarks/pcvm_em_stopping.py                     # 5 data sets, default splits
    python benchmarks/pcvm_em_stopping.py --data thyroid --splits 3
    python benchmarks/pcvm_em_stopping.py --erfcx-check       # the E-step with JAX's erfcx
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import time
import warnings

import jax
import numpy as np

import zoo
from zoo import data as datasets
from zoo.inference import pcvm_em
from zoo.models.basis import pcvm_basis
from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

#: data set -> (directory of the IDA cells holding its recorded widths, default splits,
#: directory of the EM width if not that one). Diabetis' EM width is pinned to the one the
#: protocol's CV chose before the erfcx fix (3.96; now it chooses 8.0): the study was run at
#: it, and it is where the ridge M-step's runaways happen.
STUDY_IDA = "benchmarks/results/pcvm_em_stopping/ida"
DATA = {
    "thyroid": ("benchmarks/results/ida", 10, None),
    "diabetis": ("benchmarks/results/ida", 10, STUDY_IDA),
    "twonorm": (STUDY_IDA, 5, None),
    "ringnorm": (STUDY_IDA, 5, None),
    "waveform": (STUDY_IDA, 5, None),
}
VARIANTS = {
    "paper": pcvm_em.TopDownEMConfig(),
    "paper_20k": pcvm_em.TopDownEMConfig.paper(max_iter=20_000),
    "paper_tight": pcvm_em.TopDownEMConfig.paper(max_iter=100_000, tol=1e-8),
    "fixed_point": pcvm_em.TopDownEMConfig.fixed_point(),
    "nonneg": pcvm_em.TopDownEMConfig(mstep="nonnegative"),
    "fixed_point_nonneg": pcvm_em.TopDownEMConfig.fixed_point(mstep="nonnegative"),
}
REFERENCE = "paper_tight"  # the paper's fixed point, as closely as its loop gets there
#: fits whose paper run ended "non-finite" in the IDA cells (diabetis 0-3, waveform 3)
ERFCX_CHECK = (("diabetis", 0), ("diabetis", 1), ("diabetis", 2), ("diabetis", 3), ("waveform", 3))
CHECKPOINTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
RATE_WINDOW = 100
SEED = 0


def _cell(cells_dir: str, name: str, method: str, split: int | None = None) -> dict | None:
    tail = "hyper" if split is None else f"{split:03d}"
    path = os.path.join(cells_dir, "cells", f"{name}__{method}__{tail}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _auc(y, score) -> float:
    from sklearn.metrics import roc_auc_score
    return float(roc_auc_score(y, score))


def summarize_run(post, active, Pt, y_test, config, wall: float) -> dict:
    """The traces of one top-down run, boiled down (see the module docstring)."""
    info = post.info
    ex = info.extra
    T = info.n_iter
    delta = np.asarray(ex["delta_trace"], dtype=float)
    n_act = np.asarray(ex["n_active_trace"])
    bias_in = np.asarray(ex["bias_active_trace"])
    trace = np.asarray(info.trace, dtype=float)
    shift = np.asarray(ex["shift_trace"], dtype=float)
    margin = np.asarray(ex["margin_trace"], dtype=float)
    p = np.asarray(post.predict_proba(Pt[:, active]))
    w = post.value[1:]
    changes = np.flatnonzero((np.diff(n_act) != 0) | (np.diff(bias_in) != 0)) + 2  # 1-based
    last_change = int(changes[-1]) if changes.size else 1
    # geometric rate of max|dw| over the last iterations in which the active set held
    start = max(last_change + 1, T - RATE_WINDOW + 1, 2)
    rate = iters_to_tol = dist = None
    seg = delta[start - 1:T]
    if seg.size >= 10 and np.all(seg > 0) and np.all(np.isfinite(seg)):
        slope = np.polyfit(np.arange(seg.size), np.log(seg), 1)[0]
        rate = float(math.exp(slope))
        if rate < 1.0:
            iters_to_tol = float(max(0.0, math.log(config.tol / seg[-1]) / math.log(rate)))
            dist = float(seg[-1] * rate / (1.0 - rate))  # Aitken: remaining distance
    # monitor steps between prunings (EM and Newton steps must not lower it) and at them
    same = (n_act[1:] == n_act[:-1]) & (bias_in[1:] == bias_in[:-1])
    steps = np.diff(trace)
    rel = steps / np.maximum(1.0, np.abs(trace[1:]))
    worst_between = float(rel[same].min()) if same.any() else None
    worst_at_prune = float(steps[~same].min()) if (~same).any() else None
    shift_it = int(np.nanargmax(shift)) + 1 if np.isfinite(shift).any() else None
    margin_it = int(np.nanargmin(margin)) + 1 if np.isfinite(margin).any() else None
    grad = np.asarray(ex["grad_trace"], dtype=float)
    # the smallest weight before each late active-set change: how it reached the threshold
    w_min = np.asarray(ex["w_min_trace"], dtype=float)
    approach = []
    for t in (int(t) for t in changes if t > 100):
        before = {str(k): float(w_min[t - 1 - k]) for k in (400, 200, 100, 50, 20, 10, 5, 1) if t - 1 - k >= 0}
        seg_w = w_min[max(0, t - 51):t - 1]
        q = float(math.exp(np.polyfit(np.arange(seg_w.size), np.log(seg_w), 1)[0])) \
            if seg_w.size >= 10 and np.all(seg_w > 0) and np.all(np.isfinite(seg_w)) else None
        approach.append({"iteration": t, "n_active_after": int(n_act[t - 1]), "w_min_k_before": before,
                         "w_min_factor_per_iteration_last_50": q})
    return {
        "converged": bool(info.converged),
        "reason": info.reason,
        "n_iter": T,
        "seconds": float(info.seconds),
        "compile_seconds": float(info.compile_seconds),
        "wall_seconds": wall,
        "n_active": int(active.size),
        "monitor_final": float(trace[-1]),
        "error": float(np.mean((p > 0.5) != y_test)),
        "auc": _auc(y_test, p),
        "w_max": float(w.max()) if w.size else None,
        "w_min": float(w.min()) if w.size else None,
        "bias": float(post.value[0]),
        "delta_final": float(delta[-1]),
        "delta_final_relative": float(delta[-1] / max(1e-300, float(np.abs(w).max()))) if w.size else None,
        "delta_at": {str(t): float(delta[t - 1]) for t in CHECKPOINTS if t <= T},
        "n_active_at": {str(t): int(n_act[t - 1]) for t in CHECKPOINTS if t <= T},
        "last_active_set_change": last_change,
        "active_set_changes_after_100": [[int(t), int(n_act[t - 1])] for t in changes if t > 100],
        "late_prunes": approach,
        "rate_last_window": rate,
        "rate_window": [int(start), int(T)],
        "iterations_to_tol_at_rate": iters_to_tol,
        "distance_to_fixed_point_estimate": dist,
        "max_prune_shift": float(np.nanmax(shift)) if shift_it else None,
        "max_prune_shift_iteration": shift_it,
        "min_margin": float(np.nanmin(margin)) if margin_it else None,
        "min_margin_iteration": margin_it,
        "worst_monitor_step_between_prunes_relative": worst_between,
        "worst_monitor_step_at_prunes": worst_at_prune,
        "newton_steps": int(np.sum(ex["newton_trace"])),
        "grad_final": float(grad[-1]) if np.isfinite(grad[-1]) else None,
        "test_proba": p,  # removed before writing; used for cross-variant comparisons
        "weights": dict(zip((int(c) for c in active), (float(v) for v in w))),
    }


def run_fit(name: str, split: int, cells_dir: str, em_width_dir: str | None = None) -> dict:
    from zoo.classifier import SparseBayesClassifier

    hyper = _cell(em_width_dir or cells_dir, name, "em")
    if hyper is None:
        raise SystemExit(f"no EM width recorded for {name} in {cells_dir}/cells (run benchmarks/ida_protocol.py "
                         f"--data {name} --out {cells_dir} first)")
    width = float(hyper["width"])
    sp = datasets.load(name, split)
    y01 = sp.y_train.astype(float)
    basis = pcvm_basis(sp.X_train, y01, width)
    Phi, Pt = basis.transform(sp.X_train), basis.transform(sp.X_test)
    out = {"data": name, "split": split, "width": width, "width_factor": hyper.get("width_factor"),
           "n_train": int(Phi.shape[0]), "n_test": int(Pt.shape[0]), "n_features": int(sp.X_train.shape[1]),
           "load_before": os.getloadavg()[0], "runs": {}, "cells": {}}
    for label, config in VARIANTS.items():
        t0 = time.perf_counter()
        post, _, active = pcvm_em.fit_top_down(Phi, y01, key=jax.random.PRNGKey(SEED), config=config)
        out["runs"][label] = summarize_run(post, np.asarray(active), Pt, sp.y_test, config,
                                           time.perf_counter() - t0)
    # how far each variant's test predictions are from the paper's own fixed point
    ref = out["runs"][REFERENCE]
    for label, r in out["runs"].items():
        r["max_abs_proba_diff_vs_reference"] = float(np.max(np.abs(r["test_proba"] - ref["test_proba"])))
        r["test_flips_vs_reference"] = int(np.sum((r["test_proba"] > 0.5) != (ref["test_proba"] > 0.5)))
        same_set = sorted(r["weights"]) == sorted(ref["weights"])
        r["same_active_set_as_reference"] = same_set
        if same_set and r["weights"]:
            a = np.array([r["weights"][k] for k in sorted(r["weights"])])
            b = np.array([ref["weights"][k] for k in sorted(ref["weights"])])
            r["max_relative_weight_diff_vs_reference"] = float(np.max(np.abs(a - b) / np.abs(b)))
    for r in out["runs"].values():
        del r["test_proba"]
    # Laplace and EP at their recorded widths, in this process (times comparable)
    for method in ("laplace", "ep"):
        h = _cell(cells_dir, name, method)
        stored = _cell(cells_dir, name, method, split)
        if h is None:
            continue
        est = SparseBayesClassifier(model="pcvm", engine=method, width=h["width"], seed=SEED)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(sp.X_train, sp.y_train)
        wall = time.perf_counter() - t0
        score = est.predict_proba(sp.X_test)[:, 1]
        info = est.posterior_.info
        out["runs"][method] = {
            "converged": bool(info.converged), "reason": info.reason[:200], "n_iter": int(info.n_iter),
            "seconds": float(info.seconds), "compile_seconds": float(info.compile_seconds),
            "wall_seconds": wall, "n_active": int(est.n_basis_), "width": h["width"],
            "error": float(np.mean(est.predict(sp.X_test) != sp.y_test)), "auc": _auc(sp.y_test, score),
        }
        if stored is not None:
            out["cells"][method] = {k: stored[k] for k in ("error", "auc", "n_basis", "converged", "steps")}
    stored = _cell(cells_dir, name, "em", split)
    if stored is not None and stored["hyper"]["width"] == width:  # a cell at another width says nothing here
        out["cells"]["em"] = {k: stored[k] for k in ("error", "auc", "n_basis", "converged", "steps", "reason")}
    out["load_after"] = os.getloadavg()[0]
    return out


METHODS = ("laplace", "ep", *VARIANTS)


def summarize(fits: list[dict]) -> dict:
    table: dict = {}
    for name in DATA:
        rows = [f for f in fits if f["data"] == name]
        if not rows:
            continue
        table[name] = {"splits": len(rows), "width_em": rows[0]["width"]}
        for m in METHODS:
            rs = [f["runs"][m] for f in rows if m in f["runs"]]
            if not rs:
                continue
            err = np.array([r["error"] for r in rs])
            table[name][m] = {
                "n": len(rs),
                "error_mean": float(err.mean()), "error_sd": float(err.std(ddof=1)) if len(rs) > 1 else None,
                "auc_mean": float(np.mean([r["auc"] for r in rs])),
                "converged": int(sum(r["converged"] for r in rs)),
                "n_iter_median": float(np.median([r["n_iter"] for r in rs])),
                "n_iter_max": int(max(r["n_iter"] for r in rs)),
                "seconds_median": float(np.median([r["seconds"] for r in rs])),
                "wall_seconds_median": float(np.median([r["wall_seconds"] for r in rs])),
                "n_active_mean": float(np.mean([r["n_active"] for r in rs])),
            }
            if m in VARIANTS:
                table[name][m]["non_finite"] = int(sum(r["reason"].startswith("non-finite") for r in rs))
                table[name][m]["test_flips_vs_reference_mean"] = float(
                    np.mean([r["test_flips_vs_reference"] for r in rs]))
                table[name][m]["same_active_set_as_reference"] = int(sum(r["same_active_set_as_reference"] for r in rs))
                diffs = [r["max_relative_weight_diff_vs_reference"] for r in rs
                         if "max_relative_weight_diff_vs_reference" in r]
                table[name][m]["max_relative_weight_diff_vs_reference_median"] = (
                    float(np.median(diffs)) if diffs else None)
            if m != "paper" and all("paper" in f["runs"] for f in rows):
                # paired with the paper's capped loop, split by split
                d = np.array([f["runs"][m]["error"] - f["runs"]["paper"]["error"] for f in rows if m in f["runs"]])
                table[name][m]["error_minus_paper_mean"] = float(d.mean())
                table[name][m]["error_minus_paper_se"] = (
                    float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else None)
    return table


def mechanisms(fits: list[dict]) -> dict:
    """Per data set, what the traces of the paper's loop show (see the module docstring)."""
    out = {}
    for name in DATA:
        rows = [f for f in fits if f["data"] == name and "paper" in f["runs"]]
        if not rows:
            continue
        cap = [f["runs"]["paper"] for f in rows]
        long = [f["runs"]["paper_20k"] for f in rows if "paper_20k" in f["runs"]]
        rates = [r["rate_last_window"] for r in cap if r["rate_last_window"] is not None]
        rates_long = [r["rate_last_window"] for r in long if r["rate_last_window"] is not None]
        dist_long = [r["distance_to_fixed_point_estimate"] for r in long if r["converged"]
                     and r["distance_to_fixed_point_estimate"] is not None]
        late = [q["w_min_factor_per_iteration_last_50"] for r in long for q in r["late_prunes"]
                if q["w_min_factor_per_iteration_last_50"] is not None]
        out[name] = {
            "splits": len(rows),
            "paper_rate_at_cap": [min(rates), float(np.median(rates)), max(rates)] if rates else None,
            "paper_delta_at_cap_relative_median": float(np.median([r["delta_final_relative"] for r in cap])),
            "paper_last_active_set_change_median": float(np.median([r["last_active_set_change"] for r in cap])),
            "paper_20k_converged": int(sum(r["converged"] for r in long)),
            "paper_20k_iterations": [int(min(r["n_iter"] for r in long)), int(max(r["n_iter"] for r in long))] if long else None,
            "paper_20k_rate_at_stop": [min(rates_long), float(np.median(rates_long)), max(rates_long)] if rates_long else None,
            "paper_20k_distance_left_at_its_stop": [min(dist_long), float(np.median(dist_long)), max(dist_long)] if dist_long else None,
            "paper_20k_active_set_changes_after_100": int(sum(len(r["active_set_changes_after_100"]) for r in long)),
            "paper_20k_last_active_set_change_max": int(max(r["last_active_set_change"] for r in long)) if long else None,
            "late_prune_w_min_factor_per_iteration": [min(late), float(np.median(late)), max(late)] if late else None,
            "paper_max_prune_shift": float(max(r["max_prune_shift"] for r in cap)),
            "paper_min_margin": float(min(r["min_margin"] for r in cap)),
            "paper_worst_monitor_step_between_prunes": float(min(r["worst_monitor_step_between_prunes_relative"]
                                                                 for r in cap)),
        }
    return out


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_mechanisms(mech: dict) -> str:
    def rng(v, fmt):
        return "" if v is None else f"{v[0]:{fmt}} / {v[1]:{fmt}} / {v[2]:{fmt}}"

    header = ["data", "rate of max\\|dw\\| at the cap (min / median / max)", "max\\|dw\\|/max w at the cap (median)",
              "paper_20k: stopped, iterations", "its rate at the stop", "distance left at its stop (r/(1-r) 1e-3)",
              "late prunes (after it. 100), last at", "w_min factor/iteration before a late prune",
              "max f jump by a prune", "min margin"]
    rows = []
    for name, m in mech.items():
        it = m["paper_20k_iterations"]
        rows.append([
            name, rng(m["paper_rate_at_cap"], ".5f"), f"{m['paper_delta_at_cap_relative_median']:.1e}",
            f"{m['paper_20k_converged']}/{m['splits']}, {it[0]}-{it[1]}", rng(m["paper_20k_rate_at_stop"], ".5f"),
            rng(m["paper_20k_distance_left_at_its_stop"], ".2g"),
            f"{m['paper_20k_active_set_changes_after_100']}, {m['paper_20k_last_active_set_change_max']}",
            rng(m["late_prune_w_min_factor_per_iteration"], ".3f"), f"{m['paper_max_prune_shift']:.3g}",
            f"{m['paper_min_margin']:.3g}"])
    return _markdown_table(header, rows)


def render(table: dict) -> str:
    header = ["data (splits)", "method", "error % (mean ± sd)", "minus paper, paired (± se)", "AUC", "converged",
              "iterations (median / max)", "seconds/fit (median, warm)", "basis functions",
              "same active set as paper_tight", "its weights, max rel. diff (median)"]
    rows = []
    for name, by_method in table.items():
        for m in METHODS:
            if m not in by_method:
                continue
            r = by_method[m]
            sd = "" if r["error_sd"] is None else f" ± {100 * r['error_sd']:.2f}"
            nf = f" ({r['non_finite']} non-finite)" if r.get("non_finite") else ""
            paired = ""
            if r.get("error_minus_paper_mean") is not None:
                se = r.get("error_minus_paper_se")
                paired = f"{100 * r['error_minus_paper_mean']:+.2f}" + ("" if se is None else f" ± {100 * se:.2f}")
            same = f"{r['same_active_set_as_reference']}/{r['n']}" if "same_active_set_as_reference" in r else ""
            wd = r.get("max_relative_weight_diff_vs_reference_median")
            rows.append([
                f"{name} ({by_method['splits']})", m, f"{100 * r['error_mean']:.2f}{sd}", paired,
                f"{r['auc_mean']:.4f}", f"{r['converged']}/{r['n']}{nf}",
                f"{r['n_iter_median']:.0f} / {r['n_iter_max']}", f"{r['seconds_median']:.3f}",
                f"{r['n_active_mean']:.1f}", same, "" if wd is None else f"{wd:.1e}"])
    return _markdown_table(header, rows)


def erfcx_check(out_dir: str) -> int:
    """Re-run the paper's loop on the fits whose IDA cells ended "non-finite", with JAX's
    own erfcx in the E-step instead of models/special.py's guarded one (in a process of
    its own: compiled programs are cached per process)."""
    from jax.scipy.special import erfcx

    from zoo.models import special

    special._erfcx_jax = erfcx  # the E-step of JAX 0.10, zero band included
    pcvm_em._PROGRAMS.clear()
    rows = []
    for name, k in ERFCX_CHECK:
        cells_dir, _, em_width_dir = DATA[name]
        width = float(_cell(em_width_dir or cells_dir, name, "em")["width"])
        sp = datasets.load(name, k)
        y01 = sp.y_train.astype(float)
        Phi = pcvm_basis(sp.X_train, y01, width).transform(sp.X_train)
        post, _, _ = pcvm_em.fit_top_down(Phi, y01, key=jax.random.PRNGKey(SEED), config=pcvm_em.TopDownEMConfig())
        margin = np.asarray(post.info.extra["margin_trace"])
        stored = _cell(cells_dir, name, "em", k)
        rows.append({"data": name, "split": k, "width": width, "reason": post.info.reason, "n_iter": post.info.n_iter,
                     "min_margin": float(np.nanmin(margin)),
                     "cell_reason": stored["reason"] if stored else None, "cell_steps": stored["steps"] if stored else None})
        print(f"{name} {k}: {post.info.reason} (cell: {rows[-1]['cell_reason']})", flush=True)
    write_json_atomic({"date": datetime.datetime.now().isoformat(timespec="seconds"), "jax": jax.__version__,
                       "rows": rows}, os.path.join(out_dir, "erfcx_check.json"))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=",".join(DATA))
    ap.add_argument("--splits", type=int, default=None, help="splits per data set (default: 10 for thyroid "
                    "and diabetis, 5 for the others)")
    ap.add_argument("--out", default="benchmarks/results/pcvm_em_stopping")
    ap.add_argument("--jax-cache", default=None, help="JAX compilation cache (default: zoo's)")
    ap.add_argument("--erfcx-check", action="store_true",
                    help="only re-run the paper's loop on the fits whose cells ended non-finite, with JAX's "
                         "own erfcx in the E-step (writes <out>/erfcx_check.json)")
    args = ap.parse_args(argv)
    names = [n for n in args.data.split(",") if n]
    unknown = [n for n in names if n not in DATA]
    if unknown:
        ap.error(f"unknown data set(s) {unknown}; choose from {list(DATA)}")
    zoo.enable_compilation_cache(args.jax_cache)
    if args.erfcx_check:
        os.makedirs(args.out, exist_ok=True)
        return erfcx_check(args.out)
    fits_dir = os.path.join(args.out, "fits")
    os.makedirs(fits_dir, exist_ok=True)
    t_start = time.perf_counter()
    for name in names:
        cells_dir, default_splits, em_width_dir = DATA[name]
        for k in range(args.splits or default_splits):
            path = os.path.join(fits_dir, f"{name}__{k:03d}.json")
            if os.path.exists(path):
                continue
            t0 = time.perf_counter()
            write_json_atomic(run_fit(name, k, cells_dir, em_width_dir), path)
            print(f"[{time.perf_counter() - t_start:7.1f} s] {name} split {k}: {time.perf_counter() - t0:.1f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    fits = []
    for fname in sorted(os.listdir(fits_dir)):
        if fname.endswith(".json"):
            with open(os.path.join(fits_dir, fname)) as fh:
                fits.append(json.load(fh))
    table = summarize(fits)
    mech = mechanisms(fits)
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "load_at_end": os.getloadavg(), "seed": SEED,
            "variants": {k: repr(v) for k, v in VARIANTS.items()},
            "wall_seconds_this_run": time.perf_counter() - t_start,
            "loads_per_fit": {f"{f['data']}__{f['split']}": [f["load_before"], f["load_after"]] for f in fits}}
    write_json_atomic({"meta": meta, "table": table, "mechanisms": mech}, os.path.join(args.out, "summary.json"))
    text = render(table) + "\n\nThe paper's loop, from its traces:\n\n" + render_mechanisms(mech)
    write_text_atomic(os.path.join(args.out, "summary.md"),
                      "# PCVM EM's stopping rule against the paper's (benchmarks/pcvm_em_stopping.py)\n\n"
                      + text + f"\n\n{meta['date']}, {meta['machine']}, {meta['cpus']} CPUs, load at end "
                      f"{meta['load_at_end'][0]:.1f}; seconds are warm FitInfo.seconds (compilation excluded)\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
