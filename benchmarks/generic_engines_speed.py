"""Warm seconds of the generic methods (auto-laplace, ADVI, Pathfinder, and +psis forms)
against the papers' engines and the reference sampler, on each model's default `zoo compare`
case, as ratios taken in one run (never asserted in tests).

    python benchmarks/generic_engines_speed.py                       # every model, 5 repeats
    python benchmarks/generic_engines_speed.py --models pcvm --repeats 3

Per model: one `zoo compare` of its default case with the model's default (paper) engines
and the generic ones (the reference from the cache where there is one: its warm seconds
are those it was measured with). Then every engine is called once more to be sure it is
compiled, and ``--repeats`` rounds time each engine once a round, the engines interleaved
so that a change of load on a shared machine touches all of them alike; the median warm
time is used. Written: OUT/results.json and OUT/table.md with the date, command and machine.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

import zoo  # noqa: F401
from zoo.validation.base.atomic import atomic_write, write_json_atomic
from zoo.validation.records import registry
from zoo.validation.runs.compare import CompareConfig, compare

#: the generic engines measured on every model
GENERIC = ("auto-laplace", "advi-meanfield", "advi-fullrank", "advi-lowrank", "advi-iaf", "pathfinder",
           "pathfinder-multi", "advi-meanfield+psis", "pathfinder+psis")


def measure(model: str, repeats: int) -> dict:
    record = registry.get_model(model)
    paper = [e for e in record.default_engines if not record.engine(e).generic]
    engines = tuple(dict.fromkeys([*paper, *(f"{e}+psis" for e in paper if record.has_engine(f"{e}+psis")),
                                   *(g for g in GENERIC if record.has_engine(g))]))
    comp = compare(CompareConfig(model=model, engines=engines), progress=False)
    prepared, ref = comp.prepared, comp.reference
    fits = {}
    for name in engines:
        row = comp.result.engines[name]
        if row.failure:
            continue
        fit = record.engine(name).fit()
        # compare fits every engine on the model's spec (a variant engine fits its variant itself)
        fit(prepared.spec, prepared.Phi_train, prepared.y_train)  # compiled (again, if compare's cache was dropped)
        fits[name] = (fit, prepared.spec)
    times = {name: [] for name in fits}
    for _ in range(repeats):
        for name, (fit, spec) in fits.items():
            t0 = time.perf_counter()
            fit(spec, prepared.Phi_train, prepared.y_train)
            times[name].append(time.perf_counter() - t0)
    fastest_paper = min((float(np.median(times[p])) for p in paper if p in times), default=None)
    rows = {}
    for name in engines:
        row = comp.result.engines[name]
        if name not in times:
            rows[name] = {"failure": row.failure}
            continue
        warm = float(np.median(times[name]))
        rows[name] = {
            "type": "generic" if record.engine(name).generic else "paper",
            "warm_seconds_median": warm, "warm_seconds_min": float(np.min(times[name])),
            "over_fastest_paper_engine": None if fastest_paper is None else warm / fastest_paper,
            "reference_warm_over_engine": ref.posterior.info.seconds / warm,
            "pred_mae": row.metrics.get("pred_mae"), "khat": row.metrics.get("khat"),
            "verdict": row.verdict.status if row.verdict else None,
            "joint_verdict": row.joint_verdict.status if row.joint_verdict else None,
        }
    return {"model": model, "data": comp.result.data, "reference": {
        "sampler": ref.sampler, "warm_seconds": ref.posterior.info.seconds, "certified": ref.certified,
        "from_cache": bool(getattr(ref, "from_cache", False))}, "fastest_paper_seconds": fastest_paper,
        "engines": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(registry.model_names()))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/generic_engines_speed")
    args = ap.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = [measure(m, args.repeats) for m in args.models.split(",")]
    meta = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "command": "python " + " ".join(sys.argv),
            "machine": {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "seconds": (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds(),
            "note": "warm seconds: median of the repeats, engines interleaved a round at a time; ratios are "
                    "taken within this one run"}
    write_json_atomic({"meta": meta, "models": results}, os.path.join(args.out, "results.json"))
    lines = ["# Generic methods against the papers' engines: warm seconds", "",
             f"{meta['date']}, `{meta['command']}`, {meta['machine']['processor']} "
             f"({meta['machine']['cores']} cores), {meta['seconds'] / 60:.0f} min. {meta['note']}.", ""]
    for r in results:
        ref = r["reference"]
        lines += [f"## {r['model']} on {r['data']}", "",
                  f"reference {ref['sampler']} ({'certified' if ref['certified'] else 'NOT certified'}), warm "
                  f"{ref['warm_seconds']:.1f} s{' (from the cache)' if ref['from_cache'] else ''}", "",
                  "| engine | type | warm s | x fastest paper engine | reference warm / engine | pred_mae | k-hat | "
                  "verdict | joint |", "|---|---|---|---|---|---|---|---|---|"]
        for name, e in r["engines"].items():
            if "failure" in e:
                lines.append(f"| {name} | | failed: {e['failure']} | | | | | | |")
                continue
            f = lambda v, s: "-" if v is None else format(v, s)  # noqa: E731
            lines.append(f"| {name} | {e['type']} | {e['warm_seconds_median']:.3g} | "
                         f"{f(e['over_fastest_paper_engine'], '.3g')} | {e['reference_warm_over_engine']:.3g} | "
                         f"{f(e['pred_mae'], '.4f')} | {f(e['khat'], '.2f')} | {e['verdict']} | {e['joint_verdict']} |")
        lines.append("")
    atomic_write(os.path.join(args.out, "table.md"), lambda tmp: open(tmp, "w").write("\n".join(lines)))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
