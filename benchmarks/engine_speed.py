"""Warm seconds of each engine against NUTS on the default `zoo compare` case, as ratios
taken in one run (never asserted in tests).

    python benchmarks/engine_speed.py                 # PCVM on Ripley, em,laplace,ep
    python benchmarks/engine_speed.py --repeats 20 --out benchmarks/results/engine_speed.json

NUTS runs fresh (no cache) with the reference settings; its warm time is its wall time
minus JAX's own tracing/compilation time. Each engine is called once to compile, then
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
from zoo.inference.registry import get_engine
from zoo.validation.atomic import write_json_atomic
from zoo.validation.compare import CompareConfig, compare
from zoo.validation.reference import ReferenceConfig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="ripley")
    ap.add_argument("--engines", default="em,laplace,ep")
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--out", default="benchmarks/results/engine_speed.json")
    args = ap.parse_args(argv)
    params = {k: float(v) for k, v in (p.split("=", 1) for p in args.param)}
    engines = tuple(args.engines.split(","))
    comp = compare(
        CompareConfig(data=args.data, engines=engines, params=params, reference=ReferenceConfig()),
        progress=False,
    )
    ref = comp.reference
    nuts_warm = ref.posterior.info.seconds
    prepared = comp.prepared
    rows = {}
    for name in engines:
        fit = get_engine("pcvm", name).fit()
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
            "nuts_warm_over_engine": nuts_warm / warm,
            "nuts_total_over_engine": ref.seconds / warm,
        }
    out = {
        "case": {"model": "pcvm", "data": args.data, **prepared.hyper},
        "nuts": {
            "total_seconds": ref.seconds, "compile_seconds": ref.compile_seconds,
            "warm_seconds": nuts_warm, "certified": ref.certified,
            "chains": ref.provenance.get("sampler", {}).get("num_chains"),
            "draws_per_chain": ref.posterior.n_draws,
        },
        "engines": rows,
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version()},
        "note": "ratios are NUTS seconds / engine seconds, measured in this one run",
    }
    write_json_atomic(out, args.out)
    print(f"NUTS: {ref.seconds:.2f} s total, {nuts_warm:.2f} s warm (certified: {ref.certified})")
    print(f"{'engine':<9}{'warm s':>10}{'NUTS warm / engine':>20}{'NUTS total / engine':>21}")
    for name, r in sorted(rows.items(), key=lambda kv: kv[1]["warm_seconds_median"]):
        print(f"{name:<9}{r['warm_seconds_median']:>10.4f}{r['nuts_warm_over_engine']:>20.0f}{r['nuts_total_over_engine']:>21.0f}")
    print(json.dumps(out["case"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
