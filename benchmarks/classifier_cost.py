"""What a `SparseBayesClassifier` fit costs, model by model, at N x 1000 for N = 250 .. 2000,
beside the estimate the classifier gives before the fit (docs/classifier.md, "What a fit
costs").

Data: two Gaussian classes (labels Bernoulli(1/2)), 1000 features N(0, 1) of which the
first ``INFORMATIVE`` are shifted by +-``SHIFT`` with the label, then standardized - a
problem where a linear model does well and an RBF kernel sees the signal through a
thousand noise dimensions. Test accuracy on 1000 fresh points of the same distribution
(standardized with the training means and sds) says whether a fit learned anything.

Each cell (one case at one N) runs in a fresh process (so that JAX compiles its programs
as a user's first fit does, and so that a cell that runs past ``--timeout`` can be
stopped), through the classifier as a user calls it, with the classifier's own plan: the
path the record chose, its estimate, the warning it gave. One JSON per cell under
``<out>/cells/``, written atomically; a rerun skips finished cells (``--redo`` recomputes
them). The report (``table.md``, ``classifier_cost.json``) puts the estimate of the cost
models as they stand now in the records beside each measured time, and ``--fit`` prints
the cost models' constants (fixed, coef) fitted to the cells by least squares, per cost
model, for the records (``validation/records/<model>.py``, ``COSTS``).

The machine is shared: the load average before and after each cell is recorded, and
timings move by tens of percent between runs (more under heavy load); read the ratios
with that in mind.

    python benchmarks/classifier_cost.py                        # every case, 250 .. 2000
    python benchmarks/classifier_cost.py --cases pcvm-laplace --sizes 2000
    python benchmarks/classifier_cost.py --report               # tables from the cells
    python benchmarks/classifier_cost.py --fit                  # fitted cost constants
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "classifier_cost")
SIZES = (250, 500, 1000, 2000)
N_FEATURES = 1000
INFORMATIVE = 10
SHIFT = 1.0
N_TEST = 1000
SEED = 20261127
MACHINE = "2-core machine, shared with another job"
DATE = "2026-11-27"

#: label -> (model, engine, classifier keywords); the model's own default engine and basis
#: (pcvm: its three engines), RBF kernels at the median width (a width of 1 on 1000
#: standardized features makes the kernel the identity: see the width-1 case)
CASES = {
    "pcvm-laplace": ("pcvm", "laplace", {"basis": "rbf", "width": "median"}),
    "pcvm-laplace-full": ("pcvm", "laplace", {"basis": "rbf", "width": "median", "scan": "full"}),
    "pcvm-laplace-ws": ("pcvm", "laplace", {"basis": "rbf", "width": "median", "scan": "working-set"}),
    "pcvm-ep": ("pcvm", "ep", {"basis": "rbf", "width": "median"}),
    "pcvm-ep-ws": ("pcvm", "ep", {"basis": "rbf", "width": "median", "scan": "working-set"}),
    "pcvm-ep-full": ("pcvm", "ep", {"basis": "rbf", "width": "median", "scan": "full"}),
    "pcvm-em": ("pcvm", "em", {"basis": "rbf", "width": "median"}),
    "pcvm-laplace-width1": ("pcvm", "laplace", {"basis": "rbf", "width": 1.0}),
    "ggsm-probit-mm": ("ggsm-probit", "mm", {"basis": "rbf", "width": "median"}),
    "gig-logistic-vb": ("gig-logistic", "vb", {"basis": "linear"}),
    "grid-rvm-vb": ("grid-rvm", "vb", {"basis": "rbf", "width": "median"}),
    "grid-rvm-vb-per-dimension": ("grid-rvm", "vb", {"basis": "per-dimension-rbf"}),
    "bblr-sla-sparse": ("bblr", "sla-sparse", {"basis": "rbf", "width": "median"}),
    "bblr-sla": ("bblr", "sla", {"basis": "linear"}),
}
#: cases left out of the cost constants' fit: the width-1 kernel is the identity on these
#: inputs (every point its own basis function), the user's mistake the plan names, not a
#: fit the cost model is meant to predict
NOT_FITTED = {"pcvm-laplace-width1"}
#: cases run only at some sizes (the comparisons that matter where they matter)
ONLY_SIZES = {"pcvm-laplace-full": (1000, 2000), "pcvm-laplace-ws": (500, 1000), "pcvm-ep-ws": (500, 1000),
              "pcvm-ep-full": (1000,),
              "pcvm-laplace-width1": (2000,), "grid-rvm-vb-per-dimension": (2000,)}


def data(n: int, *, test: bool = False):
    """(X, y) of the benchmark's problem: training rows of size n (seeded by n), or the
    test rows; standardized with the training rows' means and sds."""
    def draw(rng, m):
        y = rng.integers(0, 2, m)
        X = rng.standard_normal((m, N_FEATURES))
        X[:, :INFORMATIVE] += SHIFT * (2.0 * y[:, None] - 1.0)
        return X, y

    X, y = draw(np.random.default_rng([SEED, n]), n)
    mean, sd = X.mean(axis=0), X.std(axis=0)
    if test:
        X, y = draw(np.random.default_rng([SEED, n, 1]), N_TEST)
    return (X - mean) / sd, y


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def run_cell(label: str, n: int) -> dict:
    """One fit, in this process: what the classifier planned and what it took."""
    from zoo.classifier import FitCostWarning, SparseBayesClassifier

    model, engine, kwargs = CASES[label]
    X, y = data(n)
    X_test, y_test = data(n, test=True)
    clf = SparseBayesClassifier(model=model, engine=engine, verbose=1, **kwargs)
    cell = {"label": label, "model": model, "engine": engine, "params": kwargs, "n": n, "d": N_FEATURES,
            "load_before": _load(), "started": _dt.datetime.now().isoformat(timespec="seconds")}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FitCostWarning)
        try:
            clf.fit(X, y)
        except ValueError as err:  # a refusal before the work
            cell |= {"refused": str(err), "wall_seconds": time.perf_counter() - t0}
    cell["warnings"] = [str(w.message) for w in caught if issubclass(w.category, FitCostWarning)]
    cell["load_after"] = _load()
    if "refused" in cell:
        return cell
    info = clf.posterior_.info
    cell |= {"wall_seconds": time.perf_counter() - t0, "plan": clf.fit_plan_, "kept": int(clf.n_basis_),
             "converged": bool(info.converged), "reason": info.reason, "n_iter": int(info.n_iter),
             "compile_seconds": float(info.compile_seconds or 0.0),
             "train_accuracy": float(np.mean(clf.predict(X) == y)),
             "test_accuracy": float(np.mean(clf.predict(X_test) == y_test))}
    return cell


def cell_path(out: str, label: str, n: int) -> str:
    return os.path.join(out, "cells", f"{label}--{n}.json")


def run_all(cases, sizes, out: str, timeout: float, redo: bool) -> None:
    os.makedirs(os.path.join(out, "cells"), exist_ok=True)
    for label in cases:
        for n in sizes:
            if n not in ONLY_SIZES.get(label, SIZES):
                continue
            path = cell_path(out, label, n)
            if os.path.exists(path) and not redo:
                continue
            print(f"{label} at {n} x {N_FEATURES} ...", flush=True)
            t0 = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, __file__, "--cell", label, str(n), "--out", out],
                                      timeout=timeout, capture_output=True, text=True)
                if proc.returncode != 0:
                    cell = {"label": label, "n": n, "error": proc.stderr[-2000:]}
                    _write(path, cell)
                print(proc.stderr[-1500:], flush=True)
            except subprocess.TimeoutExpired as err:
                cell = {"label": label, "model": CASES[label][0], "engine": CASES[label][1], "n": n,
                        "timed_out": timeout, "wall_seconds": time.perf_counter() - t0,
                        "stderr": (err.stderr or b"")[-1500:].decode(errors="replace")
                        if isinstance(err.stderr, bytes) else (err.stderr or "")[-1500:]}
                _write(path, cell)
                print(f"  stopped after {timeout:g} s", flush=True)


def _write(path: str, obj) -> None:
    sys.path.insert(0, os.path.dirname(HERE))
    from zoo.validation.base.atomic import write_json_atomic

    write_json_atomic(obj, path)


def _cells(out: str) -> list[dict]:
    folder = os.path.join(out, "cells")
    cells = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name)) as fh:
            cells.append(json.load(fh))
    order = list(CASES)
    return sorted(cells, key=lambda c: (order.index(c["label"]) if c["label"] in order else 99, c["n"]))


def current_plan(cell: dict):
    """The plan the records give this cell's fit now (their cost constants as they stand),
    made the classifier's way on the cell's data."""
    from zoo.classifier import SparseBayesClassifier, _plan
    from zoo.models.basis import median_heuristic_width

    model, engine, kwargs = CASES[cell["label"]]
    X, y = data(cell["n"])
    clf = SparseBayesClassifier(model=model, engine=engine, **kwargs)
    record, _, options, _, _ = clf._checked_params()
    if isinstance(options["width"], str):
        options["width"] = median_heuristic_width(X)
    basis, fit_kwargs = record.classifier(X, y.astype(float), engine, options)
    return _plan(record, engine, X, basis, fit_kwargs, options)


def fit_constants(cells: list[dict]) -> dict[str, dict]:
    """Per cost model: least squares (fixed >= 0, coef > 0) of the warm seconds (measured
    minus compilation) = fixed + coef * work / 1e9, with relative residuals (each cell
    weighted by 1 / seconds: a factor matters, not an absolute second), and the median
    compile seconds. The work is the records' as they stand now (a cost model's work
    formula may have changed since the cell ran)."""
    groups: dict[str, list[tuple[float, float, float]]] = {}
    for c in cells:
        if not c.get("plan") or c["label"] in NOT_FITTED:
            continue
        plan = current_plan(c)
        if plan.cost_key and plan.work:
            key = f"{c['model']}:{plan.cost_key}"
            warm = max(c["plan"]["seconds"] - c.get("compile_seconds", 0.0), 0.1)
            # a work that counts iterations is put at the fit's own count: the constants
            # are then seconds per unit of arithmetic, whatever count the estimate assumes
            work = plan.work * (c["n_iter"] / plan.iterations if plan.iterations else 1.0)
            groups.setdefault(key, []).append((work / 1e9, warm, c.get("compile_seconds", 0.0)))
    fitted = {}
    for key, rows in groups.items():
        w = np.array([r[0] for r in rows])
        s = np.array([r[1] for r in rows])
        A = np.column_stack([np.ones_like(w), w]) / s[:, None]
        fixed, coef = np.linalg.lstsq(A, np.ones_like(s), rcond=None)[0]
        if fixed < 0:  # no fixed part: coef alone
            fixed, coef = 0.0, float(np.sum(w / s) / np.sum((w / s) ** 2))
        pred = fixed + coef * w
        ratio = pred / s
        fitted[key] = {"fixed": round(float(fixed), 2), "coef": float(f"{coef:.3g}"), "cells": len(rows),
                       "compile": round(float(np.median([r[2] for r in rows])), 1),
                       "ratio_min": round(float(ratio.min()), 2), "ratio_max": round(float(ratio.max()), 2)}
    return fitted


def report(out: str, command: str, note: str = "") -> None:
    from zoo.classifier import WARN_SECONDS  # after main() has put the repository on the path

    cells = _cells(out)
    rows = []
    for c in cells:
        row = {k: c.get(k) for k in ("label", "model", "engine", "n", "d", "load_before", "load_after")}
        row["params"] = c.get("params", CASES.get(c["label"], (None, None, {}))[2])
        if "error" in c:
            row |= {"outcome": "error", "note": c["error"].strip().splitlines()[-1] if c["error"].strip() else ""}
        elif "refused" in c:
            row |= {"outcome": "refused", "note": c["refused"]}
        elif "timed_out" in c:
            row |= {"outcome": f"stopped at {c['timed_out']:g} s (still running)"}
        else:
            row |= {"outcome": "fitted", "seconds": c["plan"]["seconds"], "wall_seconds": c["wall_seconds"],
                    "compile_seconds": c.get("compile_seconds", 0.0),
                    "path": c["plan"]["path"], "candidates": c["plan"]["candidates"], "kept": c["kept"],
                    "converged": c["converged"], "n_iter": c["n_iter"], "test_accuracy": c["test_accuracy"],
                    "estimate_at_run": c["plan"]["estimate_seconds"], "warned_at_run": bool(c["warnings"])}
        try:
            plan = current_plan(c)
            row |= {"estimate": None if plan.seconds is None else plan.seconds + plan.compile_seconds,
                    "estimate_warm": plan.seconds, "compile_estimate": plan.compile_seconds,
                    "warns": plan.seconds is not None and plan.seconds > WARN_SECONDS,
                    "factor": plan.factor, "path_now": plan.path, "candidates": plan.candidates}
        except ValueError as err:
            row |= {"estimate": None, "path_now": f"refused: {err}"}
        if row.get("estimate") is not None and row.get("seconds"):
            row["ratio"] = row["estimate"] / row["seconds"]
        rows.append(row)
    fitted = fit_constants(cells)
    meta = {"date": DATE, "command": command, "note": note, "machine": MACHINE,
            "platform": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
                        f"{platform.python_version()}",
            "data": f"N x {N_FEATURES}, two Gaussian classes, {INFORMATIVE} informative features shifted by "
                    f"+-{SHIFT:g}, standardized; test accuracy on {N_TEST} fresh points",
            "fitted_constants": fitted}
    _write(os.path.join(out, "classifier_cost.json"), {"meta": meta, "rows": rows})

    def fmt(x, f="{:.0f}"):
        return "" if x is None else f.format(x)

    def factor(r):
        return "" if r.get("factor") is None else " (x{:g})".format(r["factor"])

    lines = ["# What a classifier fit costs (benchmarks/classifier_cost.py)", "",
             f"Date {DATE}; command `{command}`; machine: {MACHINE} ({meta['platform']}); 1-minute load average "
             f"{_load_range(cells)} during the cells. {note + ' ' if note else ''}{meta['data']}. One fresh "
             "process per cell: the seconds "
             "include JAX's compilation (in brackets), as a user's first fit does. Estimate: the cost model in the "
             "model's record as it stands now (`validation/records/<model>.py`) plus its compile time, good to the "
             "factor beside it (the warm part); ratio = estimate / measured. "
             + ("The records' constants were fitted with `--fit` to these cells: the ratios are in-sample."
                if os.path.abspath(out) == os.path.abspath(OUT) else
                "The records' constants were fitted to the cells of results/classifier_cost/, not to these: the "
                "ratios are out of sample (same data and machine, another run)."), "",
             "| case | N | measured s (compiling) | estimate s (factor) | ratio | path | candidates -> kept | "
             "converged (steps) | test acc | warns |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["outcome"] != "fitted":
            lines.append(f"| {r['label']} | {r['n']} | {r['outcome']} | {fmt(r.get('estimate'))}{factor(r)} "
                         f"| | {(r.get('note') or r.get('path_now') or '')[:400]} | | | | "
                         f"{'yes' if r.get('warns') else ''} |")
            continue
        lines.append(
            f"| {r['label']} | {r['n']} | {fmt(r['seconds'])} ({fmt(r['compile_seconds'])}) | "
            f"{fmt(r.get('estimate'))}{factor(r)} | "
            f"{fmt(r.get('ratio'), '{:.2f}')} | "
            f"{r['path']} | {r['candidates']} -> {r['kept']} | {'yes' if r['converged'] else 'no'} ({r['n_iter']}) "
            f"| {r['test_accuracy']:.3f} | {'yes' if r.get('warns') else 'no'} |")
    lines += ["", "Cost constants fitted to these cells (warm seconds = fixed + coef x work / 1e9; compile: the "
              "cells' median; ratio = fitted / measured warm seconds over the cells of each model):", "",
              "| cost model | fixed s | coef s | compile s | cells | ratio min .. max |", "|---|---|---|---|---|---|"]
    for key, f in fitted.items():
        lines.append(f"| {key} | {f['fixed']} | {f['coef']} | {f['compile']} | {f['cells']} | "
                     f"{f['ratio_min']} .. {f['ratio_max']} |")
    with open(os.path.join(out, "table.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def _load_range(cells) -> str:
    loads = [c[k] for c in cells for k in ("load_before", "load_after") if isinstance(c.get(k), (int, float))]
    return f"{min(loads):.1f} .. {max(loads):.1f}" if loads else "unknown"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case labels")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds a cell may run (default 30 min)")
    ap.add_argument("--redo", action="store_true")
    ap.add_argument("--report", action="store_true", help="only write the tables from the cells")
    ap.add_argument("--fit", action="store_true", help="print the cost constants fitted to the cells")
    ap.add_argument("--note", default="", help="a sentence for the table's header (how the cells were run)")
    ap.add_argument("--cell", nargs=2, metavar=("LABEL", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cell:
        label, n = args.cell[0], int(args.cell[1])
        _write(cell_path(args.out, label, n), run_cell(label, n))
        return
    if args.fit:
        print(json.dumps(fit_constants(_cells(args.out)), indent=1))
        return
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    if not args.report:
        run_all(cases, [int(s) for s in args.sizes.split(",")], args.out, args.timeout, args.redo)
    shown = [a for a in (argv or sys.argv[1:]) if a != "--report"]
    if "--note" in shown:  # the note is printed as itself, not as part of the command
        i = shown.index("--note")
        del shown[i:i + 2]
    report(args.out, " ".join(["python benchmarks/classifier_cost.py", *shown]), args.note)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    main()
