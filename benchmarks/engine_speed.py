"""Warm seconds of each engine against the reference sampler on the default `zoo compare`
case of a model, as ratios taken in one run (never asserted in tests).

    python benchmarks/engine_speed.py                 # PCVM on Ripley, em,laplace,ep vs NUTS
    python benchmarks/engine_speed.py --model ggsm-probit --engines mm,mm-laplace --param q=1 \
        --out benchmarks/results/engine_speed_ggsm_q1.json

The reference runs fresh (no cache) with the model's default sampler chain (PCVM: NUTS;
GGSM probit: slice-Gibbs, then NUTS if slice-Gibbs does not certify; the sampler used is
recorded); its warm time is its wall time minus JAX's own tracing/compilation time. Each engine is called once to compile, then
``--repeats`` times; the median warm time is used. The paper's Fig. 2 ordering is
Laplace fastest, EP next, HMC slowest.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

import zoo  # noqa: F401
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.records.registry import get_engine
from zoo.validation.runs.compare import CompareConfig, compare


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="pcvm")
    ap.add_argument("--data", default=None, help="default: the model's compare default")
    ap.add_argument("--engines", default=None, help="default: the model's compare engines")
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--out", default="benchmarks/results/engine_speed.json")
    args = ap.parse_args(argv)
    params = {k: float(v) for k, v in (p.split("=", 1) for p in args.param)}
    engines = None if args.engines is None else tuple(args.engines.split(","))
    comp = compare(CompareConfig(model=args.model, data=args.data, engines=engines, params=params), progress=False)
    engines = comp.result.config["engines"]
    ref = comp.reference
    ref_warm = ref.posterior.info.seconds
    prepared = comp.prepared
    rows = {}
    for name in engines:
        if comp.result.engines[name].failure:
            rows[name] = {"failure": comp.result.engines[name].failure}
            continue
        fit = get_engine(args.model, name).fit()
        t0 = time.perf_counter()
        fit(prepared.spec, prepared.Phi_train, prepared.y_train)
        first = time.perf_counter() - t0
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fit(prepared.spec, prepared.Phi_train, prepared.y_train)
            times.append(time.perf_counter() - t0)
        warm = float(np.median(times))
        rows[name] = {
            "warm_seconds_median": warm,
            "warm_seconds_min": float(np.min(times)),
            "first_call_seconds": first,
            "reference_warm_over_engine": ref_warm / warm,
            "reference_total_over_engine": ref.seconds / warm,
        }
    out = {
        "case": {"model": args.model, "data": comp.result.data, **prepared.hyper},
        "reference": {
            "sampler": ref.sampler,
            "total_seconds": ref.seconds, "compile_seconds": ref.compile_seconds,
            "warm_seconds": ref_warm, "certified": ref.certified,
            "chains": ref.provenance.get("sampler", {}).get("num_chains"),
            "draws_per_chain": ref.posterior.n_draws,
        },
        "engines": rows,
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version()},
        "note": "ratios are reference seconds / engine seconds, measured in this one run",
    }
    write_json_atomic(out, args.out)
    print(f"reference ({ref.sampler}): {ref.seconds:.2f} s total, {ref_warm:.2f} s warm (certified: {ref.certified})")
    print(f"{'engine':<12}{'warm s':>10}{'ref warm / engine':>19}{'ref total / engine':>20}")
    for name, r in rows.items():
        if "failure" in r:
            print(f"{name:<12}failed: {r['failure']}")
            continue
        print(f"{name:<12}{r['warm_seconds_median']:>10.4f}{r['reference_warm_over_engine']:>19.0f}"
              f"{r['reference_total_over_engine']:>20.0f}")
    print(json.dumps(out["case"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
