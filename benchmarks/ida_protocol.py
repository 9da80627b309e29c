"""IDA benchmark protocol for PCVM engines end to end, beside scikit-learn's SVC.

Protocol (Raetsch et al. 2001, as the EPCVM paper uses it): on each of the first
``--select-splits`` training splits, 5-fold CV picks the kernel width (and C for the
SVC) by error rate; the median of those choices is frozen; every method is then trained
and tested on ``--splits`` splits. Each PCVM engine runs its own end-to-end selection
(Laplace and EP by marginal likelihood, EM top-down with its own alpha updates).

Width grid. The inputs are standardized, so the typical distance between two points
grows like sqrt(2 d) with the dimension d; the grid is ``factor * sqrt(d)`` for the
factors of ``--width-factors`` (default 0.5 0.7 1 1.4 2, steps of sqrt 2), the same for
every method (the SVC's gamma = 1 / (2 width^2)). The paper searched
theta in {0.1, 0.3, ..., 10} for every data set alike; a fixed absolute grid wastes most
of its points here: widths below ~0.35 sqrt(d) were never chosen in a first run and are
where end-to-end selection is slowest (EP on diabetis at width 0.7: ~45 s a fit, 1000
selection steps), widths at 2 sqrt(d) and beyond collapse banana to one basis function.

Every finished (data set, method, split) cell is written atomically to
``<out>/cells/*.json`` (the width choice to ``*__hyper.json`` with the per-split CV
scores); a killed run resumes where it stopped without redoing finished cells. Tasks
(one per data set and method) run on ``--jobs`` Dask worker processes (the LocalCluster of
``zoo study``, :func:`zoo.validation.runs.study.cluster_client`); JAX's compiled programs are
kept in the persistent cache of ``zoo.enable_compilation_cache`` so that each process
does not recompile them. The table is rebuilt from the cells at the end. Ctrl-C, SIGTERM
or ``kill -9`` of the run stops its workers too; finished cells stay.

    python benchmarks/ida_protocol.py                       # default: 5 data sets, 10 splits
    python benchmarks/ida_protocol.py --data heart --splits 3 --engines laplace --jobs 1
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np

DEFAULT_DATA = ("banana", "breast_cancer", "diabetis", "heart", "thyroid")
WIDTH_FACTORS = (0.5, 0.7, 1.0, 1.4, 2.0)
SVC_C = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
# rough relative cost, to start the longest tasks first when they share the workers
_COST = {"ep": 4, "laplace": 2, "em": 1, "svc": 0}


def width_grid(n_features: int, factors=WIDTH_FACTORS) -> list[float]:
    return [round(f * math.sqrt(n_features), 4) for f in factors]


def select_hyper(name: str, method: str, n_select: int, seed: int, factors, max_extensions: int = 2) -> dict:
    """Median over the first n_select training splits of the 5-fold-CV choice (error
    rate; ties go to the smaller width, then the smaller C).

    If the median width sits on an edge of the grid, the grid is extended by one factor
    step (sqrt 2) beyond that edge and only the new points are evaluated, at most
    ``max_extensions`` times: an optimum cut off by the grid would otherwise pass for a
    choice. Returns the frozen hyper-parameters plus, under "cv", each split's choice
    and CV error at every grid point, and "extensions" (how often the grid grew).
    """
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.svm import SVC

    from zoo import data as datasets
    from zoo.classifier import SparseBayesClassifier

    splits = [datasets.load(name, k) for k in range(n_select)]
    root_d = math.sqrt(splits[0].X_train.shape[1])
    if method == "svc":
        base, extra = SVC(kernel="rbf"), [{"C": c} for c in SVC_C]
    else:
        base, extra = SparseBayesClassifier(model="pcvm", engine=method, seed=seed), [{}]
    cv_error: list[dict[tuple, float]] = [{} for _ in splits]  # (factor, C or None) -> error

    def evaluate(new_factors):
        for k, s in enumerate(splits):
            cv = StratifiedKFold(5, shuffle=True, random_state=seed + k)
            for f in new_factors:
                width = round(f * root_d, 4)
                for params in extra:
                    p = {"gamma": 1 / (2 * width**2), **params} if method == "svc" else {"width": width}
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        acc = cross_val_score(clone(base).set_params(**p), s.X_train, s.y_train, cv=cv,
                                              scoring="accuracy", error_score="raise")
                    cv_error[k][(f, params.get("C"))] = float(1 - acc.mean())

    grid = sorted(float(f) for f in factors)
    evaluate(grid)
    extensions = 0
    while True:
        chosen = [min(errs, key=lambda fc: (errs[fc], fc[0], fc[1] or 0)) for errs in cv_error]
        median_factor = float(np.median([c[0] for c in chosen]))
        if extensions >= max_extensions or grid[0] < median_factor < grid[-1]:
            break
        new = grid[0] / math.sqrt(2) if median_factor <= grid[0] else grid[-1] * math.sqrt(2)
        grid = sorted(grid + [new])
        evaluate([new])
        extensions += 1
    hyper = {"width": round(median_factor * root_d, 4), "width_factor": round(median_factor, 4)}
    if method == "svc":
        hyper["gamma"] = 1 / (2 * hyper["width"] ** 2)
        hyper["C"] = float(np.median([c[1] for c in chosen]))
    hyper["grid_factors"] = [round(f, 4) for f in grid]
    hyper["extensions"] = extensions
    hyper["edge_choices"] = int(sum(c[0] in (grid[0], grid[-1]) for c in chosen))
    hyper["cv"] = [
        {"split": k, "chosen_factor": c[0], "chosen_C": c[1],
         "cv_error": [{"factor": f, "C": C, "error": e} for (f, C), e in sorted(errs.items(), key=lambda x: (x[0][0], x[0][1] or 0))]}
        for k, (c, errs) in enumerate(zip(chosen, cv_error))
    ]
    return hyper


def run_cell(name: str, method: str, k: int, hyper: dict, seed: int) -> dict:
    from sklearn.metrics import roc_auc_score
    from sklearn.svm import SVC

    from zoo import data as datasets
    from zoo.classifier import SparseBayesClassifier

    s = datasets.load(name, k)
    t0 = time.perf_counter()
    if method == "svc":
        est = SVC(kernel="rbf", C=hyper["C"], gamma=1 / (2 * hyper["width"] ** 2)).fit(s.X_train, s.y_train)
        score = est.decision_function(s.X_test)
        pred = est.predict(s.X_test)
        n_basis, converged, reason, steps = int(est.n_support_.sum()), True, "", None
    else:
        est = SparseBayesClassifier(model="pcvm", engine=method, width=hyper["width"], seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(s.X_train, s.y_train)
        score = est.predict_proba(s.X_test)[:, 1]
        pred = est.predict(s.X_test)
        info = est.posterior_.info
        n_basis, converged, reason, steps = est.n_basis_, bool(info.converged), info.reason, int(info.n_iter)
    seconds = time.perf_counter() - t0
    return {
        "data": name, "method": method, "split": k,
        "hyper": {key: v for key, v in hyper.items() if key != "cv"},
        "error": float(np.mean(pred != s.y_test)),
        "auc": float(roc_auc_score(s.y_test, score)),
        "n_basis": int(n_basis), "seconds": seconds,
        "converged": converged, "reason": reason[:300], "steps": steps,
    }


def run_task(name: str, method: str, args_dict: dict) -> str:
    """Hyper-parameter selection (unless saved) and the test cells of one (data, method)."""
    import zoo
    from zoo.validation.base.atomic import write_json_atomic

    zoo.enable_compilation_cache(args_dict.get("jax_cache"))
    cells_dir = os.path.join(args_dict["out"], "cells")
    t0 = time.perf_counter()
    hyper_path = os.path.join(cells_dir, f"{name}__{method}__hyper.json")
    if os.path.exists(hyper_path):
        with open(hyper_path) as fh:
            hyper = json.load(fh)
    else:
        hyper = select_hyper(name, method, args_dict["select_splits"], args_dict["seed"],
                             args_dict["width_factors"])
        hyper["seconds"] = time.perf_counter() - t0
        write_json_atomic(hyper, hyper_path)
    t1 = time.perf_counter()
    for k in range(args_dict["splits"]):
        path = os.path.join(cells_dir, f"{name}__{method}__{k:03d}.json")
        if not os.path.exists(path):
            write_json_atomic(run_cell(name, method, k, hyper, args_dict["seed"]), path)
    frozen = {key: round(hyper[key], 4) for key in ("width", "width_factor", "C", "extensions") if key in hyper}
    return (f"{name} {method}: selection {t1 - t0:.0f} s, {args_dict['splits']} splits "
            f"{time.perf_counter() - t1:.0f} s, {frozen}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=",".join(DEFAULT_DATA))
    ap.add_argument("--engines", default="laplace,ep,em", help="PCVM engines (the SVC is always added)")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--select-splits", type=int, default=5)
    ap.add_argument("--width-factors", default=",".join(str(f) for f in WIDTH_FACTORS),
                    help="width grid = factor * sqrt(n_features)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (one task = one data set x method)")
    ap.add_argument("--jax-cache", default=None, help="JAX compilation cache (default: zoo's)")
    ap.add_argument("--out", default="benchmarks/results/ida")
    args = ap.parse_args(argv)
    names = [n for n in args.data.split(",") if n]
    methods = [m for m in args.engines.split(",") if m] + ["svc"]
    factors = [float(f) for f in args.width_factors.split(",") if f]
    if not factors or any(f <= 0 for f in factors):
        ap.error("--width-factors must be positive numbers")
    os.makedirs(os.path.join(args.out, "cells"), exist_ok=True)
    args_dict = {"out": args.out, "splits": args.splits, "select_splits": args.select_splits,
                 "seed": args.seed, "width_factors": factors, "jax_cache": args.jax_cache}
    tasks = sorted(((n, m) for n in names for m in methods), key=lambda t: -_COST.get(t[1], 1))
    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:7.1f} s] {msg}", file=sys.stderr, flush=True)

    if args.jobs <= 1:
        for name, method in tasks:
            log(run_task(name, method, args_dict))
    else:
        # the zoo's one way of running grids: zoo study's Dask LocalCluster, whose workers die
        # with this process (Ctrl-C, SIGTERM and kill -9 alike)
        from distributed import as_completed

        from zoo.validation.runs.study import cluster_client

        with cluster_client(n_workers=args.jobs, jax_cache=args.jax_cache) as client:
            futures = [client.submit(run_task, n, m, args_dict, pure=False, priority=len(tasks) - i)
                       for i, (n, m) in enumerate(tasks)]
            for fut in as_completed(futures):
                log(fut.result())
    wall = time.perf_counter() - t_start
    table = summarize(os.path.join(args.out, "cells"), names, methods, args.splits)
    from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

    meta = {"wall_seconds_this_run": wall, "jobs": args.jobs, "width_factors": factors,
            "splits": args.splits, "select_splits": args.select_splits, "seed": args.seed}
    write_json_atomic({"meta": meta, "table": table}, os.path.join(args.out, "summary.json"))
    text = render(table)
    write_text_atomic(os.path.join(args.out, "summary.md"),
                      "# PCVM's engines on the IDA benchmarks (benchmarks/ida_protocol.py)\n\n"
                      + text + f"\n\nwall time of this run: {wall:.0f} s with {args.jobs} jobs "
                      "(cells found on disk were not redone)\n")
    print(text)
    log("done")
    return 0


def summarize(cells_dir, names, methods, n_splits) -> dict:
    out = {}
    for name in names:
        for method in methods:
            cells = []
            for k in range(n_splits):
                path = os.path.join(cells_dir, f"{name}__{method}__{k:03d}.json")
                if os.path.exists(path):
                    with open(path) as fh:
                        cells.append(json.load(fh))
            if not cells:
                continue
            arr = {m: np.array([c[m] for c in cells], dtype=float) for m in ("error", "auc", "n_basis", "seconds")}
            hyper_path = os.path.join(cells_dir, f"{name}__{method}__hyper.json")
            selection_seconds, edges = None, None
            if os.path.exists(hyper_path):
                with open(hyper_path) as fh:
                    saved = json.load(fh)
                selection_seconds, edges = saved.get("seconds"), saved.get("edge_choices")
            out.setdefault(name, {})[method] = {
                "splits": len(cells), "hyper": cells[0]["hyper"],
                "unconverged": int(sum(not c.get("converged", True) for c in cells)),
                "selection_seconds": selection_seconds, "edge_choices": edges,
                **{f"{m}_mean": float(v.mean()) for m, v in arr.items()},
                **{f"{m}_sd": float(v.std(ddof=1)) if len(v) > 1 else None for m, v in arr.items()},
            }
    return out


def render(table: dict) -> str:
    lines = ["| data | method | splits | error % (mean ± sd) | AUC | basis functions | unconverged "
             "| seconds/fit | width (factor) | edge | C |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in table.items():
        for method, r in rows.items():
            def sd(key, scale=1.0, fmt=".2f"):
                return "" if r[key] is None else f" ± {scale * r[key]:{fmt}}"
            h = r["hyper"]
            width = h.get("width", math.sqrt(1 / (2 * h["gamma"])) if "gamma" in h else float("nan"))
            lines.append(
                f"| {name} | {method} | {r['splits']} | {100 * r['error_mean']:.2f}{sd('error_sd', 100)} | "
                f"{r['auc_mean']:.4f}{sd('auc_sd', 1, '.4f')} | {r['n_basis_mean']:.1f}{sd('n_basis_sd', 1, '.1f')} | "
                f"{r['unconverged']} | {r['seconds_mean']:.2f} | {width:.3g} ({h.get('width_factor', float('nan')):.3g}) | "
                f"{r['edge_choices']} | {h['C']:.3g} |" if "C" in h else
                f"| {name} | {method} | {r['splits']} | {100 * r['error_mean']:.2f}{sd('error_sd', 100)} | "
                f"{r['auc_mean']:.4f}{sd('auc_sd', 1, '.4f')} | {r['n_basis_mean']:.1f}{sd('n_basis_sd', 1, '.1f')} | "
                f"{r['unconverged']} | {r['seconds_mean']:.2f} | {width:.3g} ({h.get('width_factor', float('nan')):.3g}) | "
                f"{r['edge_choices']} | |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
