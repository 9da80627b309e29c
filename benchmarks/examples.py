"""Every shipped model that is not one of the five (validation/records/examples.py), at full size:
its certified reference (sampler, certificate, time) and every generic engine's three verdicts
against it - and for posteriordb's posteriors their reference draws judged as an engine -, then
SBC of each generic engine from the model's own prior predictive (where its prior is proper).
The numbers docs/your-model.md quotes.

    python benchmarks/examples.py                              # all six, SBC at 100 simulations
    python benchmarks/examples.py --examples eight_schools --sims 0

Per example: ``compare`` with the model's reference chain and the generic engines (evidence by
bridge sampling); per engine its marginal, joint and distribution verdicts, its k-hat and warm
seconds, and the reference's warm sampling time over it. SBC: ``run_sbc`` of each engine with
``--sims`` simulations of 99 draws, seed 0. Written: OUT/results.json and OUT/table.md with the
date, command and machine; finished examples are kept in OUT/cells/ and reused by a rerun.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import zoo  # noqa: F401
from zoo.validation.base.atomic import atomic_write, write_json_atomic
from zoo.validation.records import posteriordb, registry
from zoo.validation.records.examples import EXAMPLES
from zoo.validation.records.user_model import DEFAULT_ENGINES
from zoo.validation.runs.compare import CompareConfig, compare
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import SBCSettings

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "examples")


def _verdicts(row) -> dict:
    out = {}
    for kind, v in (("marginal", row.verdict), ("joint", row.joint_verdict), ("distribution", row.distribution_verdict)):
        out[kind] = None if v is None else {
            "status": v.status, "statistic": v.statistic, "threshold": v.threshold, "false_alarm": v.false_alarm,
            # what the comparison resolves: the sizes it detects half the time
            "detectable_mean_shift": v.detectable_mean_shift, "detectable_sd_change": v.detectable_sd_change,
            "detectable_cdf_change": getattr(v, "detectable_cdf_change", None)}
    return out


def measure(name: str, sims: int) -> dict:
    model = EXAMPLES[name]()
    # a posteriordb posterior: its reference draws judged too, as an engine (both exact: each
    # verdict should call them different at no more than its false-alarm rate)
    engines = DEFAULT_ENGINES + ((posteriordb.reference_draws_engine,) if name in posteriordb.POSTERIORS else ())
    t0 = time.perf_counter()
    result = compare(CompareConfig(model=model, engines=engines), progress=False).result
    ref = result.reference
    cell = {"example": name, "judged": [f"{s.name}{list(s.shape) if s.shape else ''}" for s in model.spec.judged],
            "observed": {k: list(v.shape) for k, v in model.spec.observations.items()},
            "reference": {"sampler": ref.sampler_name, "settings": dict(ref.sampler), "certified": ref.certified,
                          "failures": list(ref.failures), "rhat_max": ref.rhat_max, "ess_bulk_min": ref.ess_bulk_min,
                          "ess_tail_min": ref.ess_tail_min, "divergences": ref.divergences,
                          "seconds": ref.seconds, "warm_seconds": ref.warm_seconds},
            "engines": {}, "sbc": {}, "compare_seconds": time.perf_counter() - t0}
    for engine, row in result.engines.items():
        cell["engines"][engine] = {"failure": row.failure, "verdicts": _verdicts(row),
                                   "khat": row.metrics.get("khat") if row.metrics else None,
                                   "seconds": row.seconds, "speedup_vs_reference": row.speedup_vs_reference}
    # the reference's log evidence (bridge sampling from its draws) and each engine's evidence verdict
    evidence = dict(result.evidence or {})
    cell["log_evidence"] = {"references": evidence.get("references"),
                            "engines": {k: {"value": v.get("value"), "kind": v.get("kind"),
                                            "status": (v.get("verdict") or {}).get("status")}
                                        for k, v in (evidence.get("engines") or {}).items()}}
    if sims and not model.spec.improper:
        for engine in DEFAULT_ENGINES:
            t1 = time.perf_counter()
            s = run_sbc(SBCConfig(model=model, engine=engine, settings=SBCSettings(n_sims=sims, n_draws=99)))
            cell["sbc"][engine] = {"status": s.status, "reason": s.reason, "ok": s.counts.ok,
                                   "failed": s.counts.failed, "seconds": time.perf_counter() - t1}
    elif model.spec.improper:
        cell["sbc_not_applicable"] = f"improper (flat) prior on {', '.join(model.spec.improper)}"
    registry.unregister(model.name)
    return cell


def _short(v) -> str:
    if v is None:
        return "-"
    mark = {"indistinguishable": "same", "differs": "DIFFERS", "not applicable": "n/a"}.get(v["status"], v["status"])
    return f"{mark} ({v['statistic']:.2f} / {v['threshold']:.2f})" if v["statistic"] is not None else mark


def table(cells: list[dict], meta: dict) -> str:
    lines = ["# The shipped example models at full size", "",
             f"{meta['date']}, `{meta['command']}`, {meta['machine']['processor']} ({meta['machine']['cores']} cores, "
             f"Python {meta['machine']['python']}), {meta['seconds'] / 60:.0f} min.", "",
             "Verdicts: same = indistinguishable, DIFFERS, n/a = not applicable, each with (statistic / threshold) "
             "at its false-alarm rate (results.json: false_alarm).", "",
             "| example | reference | engine | marginal | joint | distribution | k-hat | x ref |",
             "|---|---|---|---|---|---|---|---|"]
    for c in cells:
        r = c["reference"]
        ref = (f"{r['sampler']} (target accept {r['settings'].get('target_accept')}), "
               + ("certified" if r["certified"] else "NOT certified")
               + f", R-hat {r['rhat_max']:.4f}, ESS {r['ess_bulk_min']:.0f}/{r['ess_tail_min']:.0f}, "
               f"{r['seconds']:.0f} s")
        for i, (engine, e) in enumerate(c["engines"].items()):
            head = f"| {c['example']} | {ref} " if i == 0 else "| | "
            engine = "posteriordb's reference draws" if engine.endswith(":reference_draws_engine") else engine
            if e["failure"]:
                lines.append(head + f"| {engine} | failed: {e['failure']} | | | | |")
                continue
            v = e["verdicts"]
            khat = "-" if e["khat"] is None else f"{e['khat']:.2f}"
            speed = "-" if e["speedup_vs_reference"] is None else f"{e['speedup_vs_reference']:.0f}"
            lines.append(head + f"| {engine} | {_short(v['marginal'])} | {_short(v['joint'])} | "
                                f"{_short(v['distribution'])} | {khat} | {speed} |")
    pdb = [(c["example"], e["verdicts"]) for c in cells for name, e in c["engines"].items()
           if name.endswith(":reference_draws_engine") and not e["failure"]]
    if pdb:
        lines += ["", "## posteriordb's reference draws against the zoo's certified reference", "",
                  "Both are exact samplers of one posterior: each verdict should call them different at most at its "
                  "false-alarm rate. What each comparison resolves (detected half the time): a mean shift in "
                  "reference sds and a relative sd change (marginal), a change of a marginal CDF (distribution).", "",
                  "| posterior | marginal | joint | distribution | resolves: mean shift / sd change / CDF change |",
                  "|---|---|---|---|---|"]
        for name, v in pdb:
            m, d = v["marginal"], v["distribution"]
            sizes = " / ".join("-" if x is None else f"{x:.3f}" for x in (
                m.get("detectable_mean_shift"), m.get("detectable_sd_change"), d.get("detectable_cdf_change")))
            lines.append(f"| {name} | {_short(m)} | {_short(v['joint'])} | {_short(d)} | {sizes} |")
        called = sum(v[k]["status"] == "differs" for _, v in pdb for k in ("marginal", "joint", "distribution"))
        rates = sorted({v[k]["false_alarm"] for _, v in pdb for k in ("marginal", "joint", "distribution")})
        lines += ["", f"Called different: {called} of {3 * len(pdb)} verdicts (each at a false-alarm rate of "
                      f"{', '.join(f'{r:.0%}' for r in rates)})."]
    lines += ["", "## SBC of the generic engines (prior predictive of each model)", "",
              "| example | engine | SBC | ranked / failed | seconds |", "|---|---|---|---|---|"]
    for c in cells:
        if "sbc_not_applicable" in c:
            lines.append(f"| {c['example']} | all | not applicable: {c['sbc_not_applicable']} | | |")
        for engine, s in c["sbc"].items():
            lines.append(f"| {c['example']} | {engine} | {s['status']} | {s['ok']} / {s['failed']} | {s['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", default=",".join(EXAMPLES))
    ap.add_argument("--sims", type=int, default=100, help="SBC simulations per engine (0: no SBC)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    os.makedirs(os.path.join(args.out, "cells"), exist_ok=True)
    cells = []
    for name in args.examples.split(","):
        path = os.path.join(args.out, "cells", f"{name}-sims{args.sims}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                cells.append(json.load(fh))
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        cell = measure(name, args.sims)
        write_json_atomic(cell, path)
        cells.append(cell)
    meta = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "command": "python " + " ".join(sys.argv),
            "machine": {"processor": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "seconds": (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()}
    write_json_atomic({"meta": meta, "cells": cells}, os.path.join(args.out, "results.json"))
    text = table(cells, meta)

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    atomic_write(os.path.join(args.out, "table.md"), write)
    print(table(cells, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
