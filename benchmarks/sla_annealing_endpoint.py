"""Where SLA's annealing ends: the zoo's gamma = 4 against the paper's large gamma, on the
UCI experiment of Hasan & Pal (``zoo reproduce bblr-uci``).

SLA raises gamma stage by stage (2, then x10) and stops at the model's gamma. The zoo's
runs end at 4; the paper follows Nguyen & Sanner's schedule to a large gamma (recalled as
200). This script reads two finished ``bblr-uci`` runs that differ only in ``--gamma`` and
sets their errors side by side, paired cell by cell:

* training errors on the whole data set (Tables 1 and 3): one count per data set and
  method, so the difference of the two counts;
* test errors (Tables 5 and 7): per (data set, condition, method), the mean over CV folds
  of the paired difference in wrong test points, with its standard error over folds
  (folds of one repetition share no test point; folds of different repetitions are not
  independent, so the se is a guide, not a test).

    zoo reproduce bblr-uci --reps 2 --gamma 4   --out runs/gamma4
    zoo reproduce bblr-uci --reps 2 --gamma 200 --out runs/gamma200
    python benchmarks/sla_annealing_endpoint.py runs/gamma4/bblr-uci runs/gamma200/bblr-uci \\
        --out benchmarks/results/sla_annealing_endpoint

Writes ``table.md`` and ``table.json`` in ``--out``. Methods whose fits do not use the
endpoint (LR, SVM) are shown as the check that both runs saw the same folds: their
differences must be exactly 0.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import platform
import sys
from collections import defaultdict

from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

HERE = os.path.dirname(os.path.abspath(__file__))

TRAIN_METHODS = ("lr", "svm", "bblr1", "sla", "bblr2", "bblr3")
TEST_METHODS = ("lr", "svm", "sla", "bblr2", "bblr3", "bblr4")
LABEL = {"lr": "LR", "svm": "SVM", "sla": "SLA (sigmoid loss)", "bblr1": "BBLR1", "bblr2": "BBLR2",
         "bblr3": "BBLR3", "bblr4": "BBLR4"}
DATA_LABEL = {"breast_wisconsin": "Breast", "statlog_heart": "Heart", "liver": "Liver", "pima": "Pima"}


def _cells(run: str) -> tuple[dict, dict, float]:
    """(training cells by data set, fold cells by (data, condition, repetition, fold), the
    run's annealing endpoint) of a finished bblr-uci run folder."""
    table = json.load(open(os.path.join(run, "table.json")))
    gamma = float(table["settings"]["gamma"])
    train, folds = {}, {}
    for path in glob.glob(os.path.join(run, "cells", "*.json")):
        cell = json.load(open(path))
        if "condition" in cell:
            folds[(cell["data"], cell["condition"], cell["repetition"], cell["fold"])] = cell
        else:
            train[cell["data"]] = cell
    return train, folds, gamma


def _mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def compare(run_a: str, run_b: str) -> dict:
    train_a, folds_a, gamma_a = _cells(run_a)
    train_b, folds_b, gamma_b = _cells(run_b)
    if gamma_a == gamma_b:
        raise SystemExit(f"both runs end their annealing at gamma = {gamma_a:g}: nothing to compare")
    out = {"gamma": [gamma_a, gamma_b], "training": [], "test": []}
    for d in [d for d in DATA_LABEL if d in train_a and d in train_b]:
        for m in TRAIN_METHODS:
            a, b = train_a[d]["methods"][m]["errors"], train_b[d]["methods"][m]["errors"]
            out["training"].append({"data": d, "method": m, "n": train_a[d]["n"], "a": a, "b": b, "diff": b - a})
    common = sorted(set(folds_a) & set(folds_b))
    groups = defaultdict(list)
    for key in common:
        d, cond = key[0], key[1]
        ca, cb = folds_a[key], folds_b[key]
        for m in TEST_METHODS:
            groups[(d, cond, m)].append((len(ca["methods"][m]["wrong"]), len(cb["methods"][m]["wrong"]),
                                         ca["n_test"]))
    for (d, cond, m), rows in sorted(groups.items(), key=lambda kv: (list(DATA_LABEL).index(kv[0][0]), kv[0][1],
                                                                       TEST_METHODS.index(kv[0][2]))):
        n_test = sum(r[2] for r in rows)
        pct_a = 100.0 * sum(r[0] for r in rows) / n_test
        pct_b = 100.0 * sum(r[1] for r in rows) / n_test
        # per fold, the difference in percent of that fold's test points
        mean, se = _mean_se([100.0 * (r[1] - r[0]) / r[2] for r in rows])
        out["test"].append({"data": d, "condition": cond, "method": m, "folds": len(rows), "a_percent": pct_a,
                            "b_percent": pct_b, "diff_mean": mean, "diff_se": se})
    out["folds_compared"] = len(common)
    return out


def markdown(result: dict, command: str) -> str:
    ga, gb = result["gamma"]
    lines = [
        "# Where SLA's annealing ends: gamma = %g against %g (bblr-uci)" % (ga, gb), "",
        f"Command: `{command}` (module docstring of `benchmarks/sla_annealing_endpoint.py` for the two runs); "
        f"written {datetime.date.today().isoformat()} on {platform.system()} {platform.machine()} "
        f"({os.cpu_count()} CPUs). The two runs' own tables (settings, timings) are in `gamma4/` and `gamma200/` beside this file.", "",
        "## Training errors on the whole data set (count of N; the runs differ only in the endpoint)", "",
        f"| data (N) | method | gamma = {ga:g} | gamma = {gb:g} | difference |", "|---|---|---|---|---|"]
    for r in result["training"]:
        lines.append(f"| {DATA_LABEL[r['data']]} ({r['n']}) | {LABEL[r['method']]} | {r['a']} | {r['b']} | "
                     f"{r['diff']:+d} |")
    lines += ["", f"## Test errors (% of the pooled test points; {result['folds_compared']} folds compared, "
              "paired by fold)", "",
              "Difference: mean over folds of (errors at the second endpoint − at the first) in % of the fold's "
              "test points, ± its se over folds.", "",
              f"| data | condition | method | gamma = {ga:g} | gamma = {gb:g} | difference (points) |",
              "|---|---|---|---|---|---|"]
    for r in result["test"]:
        lines.append(f"| {DATA_LABEL[r['data']]} | {r['condition']} | {LABEL[r['method']]} | {r['a_percent']:.2f} | "
                     f"{r['b_percent']:.2f} | {r['diff_mean']:+.2f} ± {r['diff_se']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_a", help="a finished bblr-uci run folder (OUT/bblr-uci)")
    p.add_argument("run_b", help="the same run at another --gamma")
    p.add_argument("--out", default=os.path.join(HERE, "results", "sla_annealing_endpoint"))
    args = p.parse_args(argv)
    result = compare(args.run_a, args.run_b)
    command = "python benchmarks/sla_annealing_endpoint.py " + " ".join(argv if argv is not None else sys.argv[1:])
    os.makedirs(args.out, exist_ok=True)
    write_json_atomic(result, os.path.join(args.out, "table.json"))
    text = markdown(result, command)
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
