"""IDA benchmark protocol for PCVM engines end to end, beside scikit-learn's SVC.

Protocol (Raetsch et al. 2001, as the EPCVM paper uses it): for each of the first
``--select-splits`` training splits, 5-fold CV picks the kernel width (and C for the
SVC); the median of those choices is frozen; every method is then trained and tested on
``--splits`` splits. Each method runs its own end-to-end selection (Laplace and EP by
marginal likelihood, EM top-down with its own alpha updates).

Every finished (data set, method, split) cell is written atomically to
``<out>/cells/*.json``; a killed run resumes where it stopped without redoing finished
cells. The table is rebuilt from the cells at the end.

    python benchmarks/ida_protocol.py                       # default: 5 data sets, 10 splits
    python benchmarks/ida_protocol.py --data heart --splits 3 --engines laplace
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

import zoo  # noqa: F401
from zoo.classifier import SparseBayesClassifier
from zoo.validation import datasets
from zoo.validation.atomic import write_json_atomic

WIDTHS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6)
SVC_C = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
DEFAULT_DATA = ("banana", "breast_cancer", "diabetis", "heart", "thyroid")


def select_hyper(name: str, method: str, n_select: int, seed: int) -> dict:
    """Median over the first n_select training splits of the 5-fold-CV choice."""
    chosen = []
    for k in range(n_select):
        s = datasets.load(name, k)
        cv = StratifiedKFold(5, shuffle=True, random_state=seed + k)
        if method == "svc":
            grid = {"gamma": [1 / (2 * w**2) for w in WIDTHS], "C": list(SVC_C)}
            est = SVC(kernel="rbf")
        else:
            grid = {"width": list(WIDTHS)}
            est = SparseBayesClassifier(model="pcvm", engine=method, seed=seed)
        search = GridSearchCV(est, grid, cv=cv, scoring="accuracy", n_jobs=1, error_score="raise")
        search.fit(s.X_train, s.y_train)
        chosen.append(search.best_params_)
    return {k: float(np.median([c[k] for c in chosen])) for k in chosen[0]}


def run_cell(name: str, method: str, k: int, hyper: dict, seed: int) -> dict:
    s = datasets.load(name, k)
    t0 = time.perf_counter()
    if method == "svc":
        est = SVC(kernel="rbf", **hyper).fit(s.X_train, s.y_train)
        score = est.decision_function(s.X_test)
        pred = est.predict(s.X_test)
        n_basis = int(est.n_support_.sum())
    else:
        est = SparseBayesClassifier(model="pcvm", engine=method, width=hyper["width"], seed=seed).fit(
            s.X_train, s.y_train
        )
        score = est.predict_proba(s.X_test)[:, 1]
        pred = est.predict(s.X_test)
        n_basis = est.n_basis_
    seconds = time.perf_counter() - t0
    return {
        "data": name, "method": method, "split": k, "hyper": hyper,
        "error": float(np.mean(pred != s.y_test)),
        "auc": float(roc_auc_score(s.y_test, score)),
        "n_basis": int(n_basis), "seconds": seconds,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=",".join(DEFAULT_DATA))
    ap.add_argument("--engines", default="laplace,ep,em")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--select-splits", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/ida")
    args = ap.parse_args(argv)
    methods = [m for m in args.engines.split(",") if m] + ["svc"]
    cells_dir = os.path.join(args.out, "cells")
    os.makedirs(cells_dir, exist_ok=True)
    t_start = time.perf_counter()
    for name in args.data.split(","):
        for method in methods:
            hyper_path = os.path.join(cells_dir, f"{name}__{method}__hyper.json")
            if os.path.exists(hyper_path):
                hyper = json.load(open(hyper_path))
            else:
                hyper = select_hyper(name, method, args.select_splits, args.seed)
                write_json_atomic(hyper, hyper_path)
            for k in range(args.splits):
                path = os.path.join(cells_dir, f"{name}__{method}__{k:03d}.json")
                if os.path.exists(path):
                    continue
                write_json_atomic(run_cell(name, method, k, hyper, args.seed), path)
            print(f"[{time.perf_counter() - t_start:7.1f} s] {name} {method} done {hyper}", file=sys.stderr)
    table = summarize(cells_dir, args.data.split(","), methods, args.splits)
    write_json_atomic(table, os.path.join(args.out, "summary.json"))
    print(render(table))
    return 0


def summarize(cells_dir, names, methods, n_splits) -> dict:
    out = {}
    for name in names:
        for method in methods:
            cells = []
            for k in range(n_splits):
                path = os.path.join(cells_dir, f"{name}__{method}__{k:03d}.json")
                if os.path.exists(path):
                    cells.append(json.load(open(path)))
            if not cells:
                continue
            arr = {m: np.array([c[m] for c in cells]) for m in ("error", "auc", "n_basis", "seconds")}
            out.setdefault(name, {})[method] = {
                "splits": len(cells), "hyper": cells[0]["hyper"],
                **{f"{m}_mean": float(v.mean()) for m, v in arr.items()},
                **{f"{m}_sd": float(v.std(ddof=1)) if len(v) > 1 else None for m, v in arr.items()},
            }
    return out


def render(table: dict) -> str:
    lines = ["| data | method | splits | error % (mean ± sd) | AUC | basis functions | seconds/fit | hyper |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in table.items():
        for method, r in rows.items():
            sd = lambda k: f" ± {r[k]:.2f}" if r[k] is not None else ""  # noqa: E731
            err_sd = "" if r["error_sd"] is None else f" ± {100 * r['error_sd']:.2f}"
            lines.append(
                f"| {name} | {method} | {r['splits']} | {100 * r['error_mean']:.2f}{err_sd} | "
                f"{r['auc_mean']:.4f} | {r['n_basis_mean']:.1f}{sd('n_basis_sd')} | "
                f"{r['seconds_mean']:.2f} | {r['hyper']} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
