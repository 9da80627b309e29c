"""The distribution verdict (validation/judge/distribution.py, DERIVATIONS.md §10), by simulation:
its false-alarm rate for exact engines at d = 2..200, its power against planted defects beside
the marginal and joint verdicts', and the choice of its test among candidates by power at
equal false alarms.

Every replicate (``distribution.simulated_pairs``) draws a fresh exact posterior - normal
(correlated), skewed (Gamma(4)), bimodal (a fifth of the mass in a second mode) or pressed
against w >= 0 (a truncated normal) - and a reference of 4 AR(1)-copula chains x 1000 draws
of it (ESS about 440, near the certification minimum). The engine is 4 x 1000 independent
draws of the exact law (or its exact Gaussian for the normal case), with a planted defect:
the shape defects keep every mean and sd, and the covariance but for the Gaussian marginals
of "outside the support" and "missing mode" (whose coordinates are independent here), in all
coordinates, or "(one)": in the first only; the moment defects are the battery's.

Candidates (each a rule with a nominal 5% false-alarm rate; its score is > 1 when it calls
the engine different):
* distribution - the zoo's rule: CDFs at the engine's deciles (10, 20, ..., 90%) of every
  coordinate, and averaged over coordinates, Bonferroni over both families;
* coordinates only - the same without the pooled tests;
* quartiles + pooled, 5-95% (7 levels: 5, 10, 25, 50, 75, 90, 95%) + pooled - other sets of
  levels (the second was the first choice, before this benchmark);
* energy distance - the energy statistic of the reference thinned to about independent
  draws (every (1 + phi) / (1 - phi) = 9th draw) against as many engine draws, coordinates
  scaled by the reference's sd, calibrated by 99 permutations (valid for independent draws).
Power "at equal false alarms" puts every candidate's cut-off at the 95% quantile of its own
scores over the exact cases at that d, so that a conservative rule is not penalized for its
caution: what remains is the power of the statistic itself.

    python benchmarks/distribution_verdict.py --workers 2      # ~1 h on 2 cores
    python benchmarks/distribution_verdict.py --quick          # a few minutes: fewer replicates

Cells are stored under results/distribution_verdict/cells (a rerun resumes); the tables go
to results/distribution_verdict/summary.md.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import sys
import time

import numpy as np

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge import verdict as V
from zoo.validation.judge.distribution import SIMULATED, distribution_verdict, simulated_pairs
from zoo.validation.judge.rates import wilson_interval

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "distribution_verdict")
DIMENSIONS = (2, 5, 10, 20, 50, 100, 200)
CANDIDATE_DIMENSIONS = (2, 10, 50)
EXACT = tuple(c for c in SIMULATED if c.startswith("exact"))
DEFECTS = tuple(c for c in SIMULATED if not c.startswith("exact"))
PHI = 0.8
PERMUTATIONS = 99


def energy_score(engine, reference, *, seed: int = 0) -> float:
    """0.05 / p of the energy-distance permutation test (> 1: p < 0.05). The reference is
    thinned to about independent draws; as many engine draws, evenly spaced (a Gaussian is
    drawn); coordinates in reference sds."""
    ref = V.chains_draws_flat(reference)
    step = math.ceil((1 + PHI) / (1 - PHI))
    x = ref[:, ::step].reshape(-1, ref.shape[-1])
    rng = np.random.default_rng(seed)
    if engine.kind == "gaussian":
        y = engine.mean_flat() + rng.standard_normal(x.shape) @ np.asarray(engine.chol).T
    else:
        flat = engine.flat_draws()
        y = flat[np.linspace(0, flat.shape[0] - 1, x.shape[0]).astype(int)]
    scale = ref.reshape(-1, ref.shape[-1]).std(0, ddof=1)
    z = np.concatenate([x, y]) / scale
    sq = (z * z).sum(1)
    dist = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0, None))
    n = x.shape[0]

    def statistic(labels):
        a, b = labels, ~labels
        return 2 * dist[np.ix_(a, b)].mean() - dist[np.ix_(a, a)].mean() - dist[np.ix_(b, b)].mean()

    first = np.zeros(2 * n, bool)
    first[:n] = True
    observed = statistic(first)
    exceed = sum(statistic(rng.permutation(first)) >= observed for _ in range(PERMUTATIONS))
    return 0.05 / ((1 + exceed) / (1 + PERMUTATIONS))


def verdict_score(v) -> float:
    """> 1 exactly when the verdict says "differs": the worst test's |z| over its threshold,
    or (for a mass below 0 beyond the resolution, a point where the reference spreads) more."""
    if not v.applicable:
        return float("nan")
    if v.point_mass:
        return float("inf")
    score = v.statistic / v.threshold if v.statistic is not None else 0.0
    out = getattr(v, "outside_support", None)
    if out and out["resolution"] > 0:
        score = max(score, out["mass"] / out["resolution"])
    return max(score, 1.0 + 1e-9) if v.differs else min(score, 1.0)


#: the zoo's earlier choice of levels, kept as a candidate
SEVEN_LEVELS = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
JUDGES = {
    "marginal": lambda e, r: verdict_score(V.verdict(e, r)),
    "joint": lambda e, r: verdict_score(V.joint_verdict(e, r)),
    "distribution": lambda e, r: verdict_score(distribution_verdict(e, r)),
    "coordinates only": lambda e, r: verdict_score(distribution_verdict(e, r, pooled_share=0.0)),
    "quartiles + pooled": lambda e, r: verdict_score(distribution_verdict(e, r, levels=(0.25, 0.5, 0.75))),
    "5-95% (7 levels) + pooled": lambda e, r: verdict_score(distribution_verdict(e, r, levels=SEVEN_LEVELS)),
    "energy distance": energy_score,
}
VERDICTS = ("marginal", "joint", "distribution")


def cell_key(case: str, d: int, engine: str, replicates: int, judges: tuple[str, ...]) -> str:
    payload = json.dumps([case, d, engine, replicates, judges], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def run_cell(args) -> dict:
    """One cell: every judge's score on each replicate of (case, d, engine); stored atomically."""
    case, d, engine, replicates, judges, path = args
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    import zoo  # noqa: F401  (float64 in a fresh worker)

    t0 = time.perf_counter()
    scores = {name: [] for name in judges}
    seed = int(hashlib.sha256(f"{case}/{engine}".encode()).hexdigest()[:8], 16)
    for post, ref in simulated_pairs(case, d, replicates, seed=seed, phi=PHI, engine=engine):
        for name in judges:
            scores[name].append(float(JUDGES[name](post, ref)))
    cell = {"case": case, "d": d, "engine": engine, "replicates": replicates, "scores": scores,
            "seconds": time.perf_counter() - t0}
    write_json_atomic(cell, path)
    return cell


def rate(scores, cut: float = 1.0) -> dict:
    s = np.asarray(scores, float)
    s = s[np.isfinite(s) | np.isinf(s)]
    k, n = int(np.sum(s > cut)), len(s)
    lo, hi = wilson_interval(k, n)
    return {"flagged": k, "replicates": n, "rate": k / n if n else float("nan"), "ci95": [lo, hi]}


def fmt(r: dict) -> str:
    return f"{r['rate']:.3f} ({r['ci95'][0]:.3f}-{r['ci95'][1]:.3f})"


def plan(quick: bool) -> list[tuple]:
    """(case, d, engine, replicates, judges) of every cell."""
    cells = []
    for d in DIMENSIONS:
        reps = (100 if d <= 20 else 50) if quick else (400 if d <= 20 else 200 if d <= 100 else 100)
        for case in EXACT:
            judges = tuple(JUDGES) if d in CANDIDATE_DIMENSIONS else VERDICTS
            cells.append((case, d, "draws", reps, judges))
        cells.append(("exact, normal", d, "gaussian", reps, VERDICTS))
    for d in CANDIDATE_DIMENSIONS:
        for case in DEFECTS:
            cells.append((case, d, "draws", 30 if quick else 100, tuple(JUDGES)))
    return cells


def summarize(cells: list[dict], command: str, seconds: float) -> str:
    by = {(c["case"], c["d"], c["engine"]): c for c in cells}
    lines = [f"# The distribution verdict: false alarms, power, candidates ({datetime.date.today()}, "
             f"{platform.machine()}, {os.cpu_count()} cores)", "",
             f"Command: `{command}` ({seconds:.0f} s wall for the cells computed in this run). Reference: 4 AR(1)-"
             f"copula chains x 1000 draws, phi {PHI} (ESS ~440). Rates with Wilson 95% intervals; nominal "
             f"false-alarm rate {V.FALSE_ALARM:g} per verdict.", "",
             "## False alarms of exact engines (every 'differs' is false)", "",
             "| d | case | engine | replicates | marginal | joint | distribution |", "|---|---|---|---|---|---|---|"]
    for d in DIMENSIONS:
        for case in (*EXACT,):
            for engine in ("draws", "gaussian"):
                c = by.get((case, d, engine))
                if c is None:
                    continue
                lines.append(f"| {d} | {case} | {engine} | {c['replicates']} | "
                             + " | ".join(fmt(rate(c["scores"][j])) for j in VERDICTS) + " |")
    candidates = [j for j in JUDGES if j not in ("marginal", "joint")]
    lines += ["", "## Candidates at their nominal rule: false alarms (exact cases pooled) and power", "",
              "| d | defect | " + " | ".join(["marginal", "joint", *candidates]) + " |",
              "|---|---|" + "---|" * (len(candidates) + 2)]
    cutoffs = {}
    for d in CANDIDATE_DIMENSIONS:
        null = {j: np.concatenate([by[(c, d, "draws")]["scores"][j] for c in EXACT if (c, d, "draws") in by
                                   and j in by[(c, d, "draws")]["scores"]]) for j in JUDGES}
        lines.append(f"| {d} | *exact (false alarms)* | " + " | ".join(fmt(rate(null[j]))
                                                                      for j in ["marginal", "joint", *candidates]) + " |")
        cutoffs[d] = {j: float(np.quantile(np.nan_to_num(null[j], nan=0.0), 0.95)) for j in JUDGES if len(null[j])}
        for case in DEFECTS:
            c = by.get((case, d, "draws"))
            if c is not None:
                lines.append(f"| {d} | {case} | " + " | ".join(fmt(rate(c["scores"][j]))
                                                          for j in ["marginal", "joint", *candidates]) + " |")
    lines += ["", "## Power at equal false alarms (each rule's cut-off: the 95% quantile of its scores on the "
              "exact cases at that d)", "",
              "| d | defect | " + " | ".join(candidates) + " |", "|---|---|" + "---|" * len(candidates)]
    mean_power = {j: [] for j in candidates}
    for d in CANDIDATE_DIMENSIONS:
        for case in DEFECTS:
            c = by.get((case, d, "draws"))
            if c is None:
                continue
            row = {j: rate(c["scores"][j], cutoffs[d][j]) for j in candidates}
            for j in candidates:
                mean_power[j].append(row[j]["rate"])
            lines.append(f"| {d} | {case} | " + " | ".join(f"{row[j]['rate']:.2f}" for j in candidates) + " |")
    lines += ["", "Mean power over the defect rows at equal false alarms: "
              + ", ".join(f"{j} {np.mean(v):.3f}" for j, v in mean_power.items() if v) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1, help="Dask LocalCluster worker processes (1: here)")
    parser.add_argument("--quick", action="store_true", help="fewer replicates (a check, not the tabled run)")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    folder = os.path.join(args.out, "cells-quick" if args.quick else "cells")
    os.makedirs(folder, exist_ok=True)
    todo = [(*c, os.path.join(folder, f"{cell_key(*c)}.json")) for c in plan(args.quick)]
    # the slowest cells (large d, the energy candidate) first, so the workers end together
    todo.sort(key=lambda t: -(t[1] * t[3] * (5 if "energy distance" in t[4] else 1)))
    t0 = time.perf_counter()
    if args.workers > 1:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            cells = []
            for k, cell in enumerate(client.get_executor().map(run_cell, todo)):
                cells.append(cell)
                print(f"{k + 1}/{len(todo)} {cell['case']} d={cell['d']} {cell['engine']} {cell['seconds']:.0f} s",
                      flush=True)
    else:
        cells = []
        for k, t in enumerate(todo):
            cells.append(run_cell(t))
            print(f"{k + 1}/{len(todo)} {t[0]} d={t[1]} {t[2]} {cells[-1]['seconds']:.0f} s", flush=True)
    command = "python benchmarks/distribution_verdict.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = summarize(cells, command.strip(), time.perf_counter() - t0)
    with open(os.path.join(args.out, "summary-quick.md" if args.quick else "summary.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
