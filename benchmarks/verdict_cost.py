"""What the verdicts add to `zoo compare`: on a model's default comparison (the front page's
for PCVM), the seconds of each verdict per engine - marginal, joint, distribution - beside the
whole comparison's wall seconds and the reference's sampling, measured in the same run; and
each engine's three verdicts as the report states them; and those of a user's engine whose
answer is the Gaussian with every mean, sd and correlation of the reference draws exactly
(both moment verdicts pass it by construction), with its mass outside the support; and the
seconds of the evidence verdicts (the reference log Z by bridge sampling, computed once per
model or variant, and every engine's log evidence judged against it; ``--evidence checked``
adds AIS), as the comparison itself measured them.

    python benchmarks/verdict_cost.py                  # PCVM on Ripley, the front page's run
    python benchmarks/verdict_cost.py --model bblr

Each verdict is timed as the median of 5 calls on the comparison's own posteriors (the
comparison computes each once; the median keeps one slow call on a shared machine out).
Written to results/verdict_cost_<model>.json.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import jax
import numpy as np

import zoo  # noqa: F401  (float64)
from zoo.inference.posterior import FitInfo, GaussianPosterior
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge.distribution import distribution_verdict
from zoo.validation.judge.verdict import joint_verdict, verdict
from zoo.validation.runs.compare import CompareConfig, compare

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
JUDGES = {"marginal": verdict, "joint": joint_verdict, "distribution": distribution_verdict}


def seconds(judge, posterior, reference, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        judge(posterior, reference)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _said(v) -> dict:
    return {"status": v.status, "reason": v.reason}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pcvm")
    parser.add_argument("--cache-dir", default=None, help="reference cache (default: none, the reference is sampled)")
    parser.add_argument("--evidence", default="bridge", help="the comparison's evidence mode (bridge, checked, off)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    comp = compare(CompareConfig(model=args.model, cache_dir=args.cache_dir, evidence=args.evidence))
    wall = time.perf_counter() - t0
    res = comp.result
    reference = comp.reference.posterior
    rows = {}
    for name, posterior in comp.posteriors.items():
        row = res.engines[name]
        rows[name] = {scope: {"seconds": seconds(judge, posterior, reference),
                              "status": getattr(row, field).status, "reason": getattr(row, field).reason}
                      for (scope, judge), field in zip(JUDGES.items(),
                                                       ("verdict", "joint_verdict", "distribution_verdict"))}
    # a user's engine whose answer has every mean, sd and correlation of the posterior exactly:
    # the Gaussian of the reference draws' own moments (its moment tests are 0 by construction)
    flat = reference.flat_draws()
    exact_moments = GaussianPosterior(reference.spec, reference.sites, flat.mean(0),
                                      np.linalg.cholesky(np.cov(flat, rowvar=False)),
                                      FitInfo(engine="exact moments", converged=True, n_iter=0))
    draws = exact_moments.sample_flat(jax.random.PRNGKey(0), 4000)
    bounded = np.concatenate([np.full(s.size, s.support in ("nonnegative", "positive")) for s in reference.sites])
    rows["gaussian of the exact moments"] = {
        scope: {"seconds": seconds(judge, exact_moments, reference), **_said(judge(exact_moments, reference))}
        for scope, judge in JUDGES.items()}
    rows["gaussian of the exact moments"]["outside_support_fraction"] = float(np.mean(np.any(draws[:, bounded] < 0, 1)))
    added = sum(r["distribution"]["seconds"] for r in rows.values())
    out = {"date": str(datetime.date.today()), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "command": "python benchmarks/verdict_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "model": args.model, "data": res.data, "compare_wall_seconds": wall,
           "reference_seconds": res.reference.seconds, "engines": rows,
           "distribution_verdicts_seconds": added, "share_of_compare": added / wall,
           "evidence_mode": args.evidence,
           "evidence_seconds": None if res.evidence is None else res.evidence["seconds"],
           "evidence": None if res.evidence is None else {
               name: {"kind": e["kind"], "value": e["value"],
                      "status": (e["verdict"] or {}).get("status"),
                      "difference": (e["verdict"] or {}).get("difference")}
               for name, e in res.evidence["engines"].items()}}
    write_json_atomic(out, os.path.join(RESULTS, f"verdict_cost_{args.model}.json"))
    print(f"{args.model} on {res.data}: compare {wall:.1f} s wall, reference {res.reference.seconds:.1f} s")
    for name, r in rows.items():
        print(f"  {name:<30}" + "  ".join(f"{s} {r[s]['status']} ({1000 * r[s]['seconds']:.1f} ms)" for s in JUDGES))
    extra = rows["gaussian of the exact moments"]
    print(f"the Gaussian of the exact moments puts {100 * extra['outside_support_fraction']:.1f}% of its draws "
          f"outside the support; its distribution verdict: {extra['distribution']['reason']}")
    print(f"the distribution verdicts add {added:.3f} s, {100 * added / wall:.2f}% of the comparison")
    if res.evidence is not None:
        ev_s = res.evidence["seconds"]
        print(f"the evidence verdicts ({args.evidence}) add {ev_s:.1f} s, {100 * ev_s / wall:.1f}% of the comparison")


if __name__ == "__main__":
    main()
