"""The evidence judged (validation/judge/evidence.py): is the reference log Z's stated error
calibrated, and how far is each engine's log evidence from it?

    python benchmarks/evidence.py calibration --repeats 10
    python benchmarks/evidence.py models --models pcvm ggsm-probit bblr

calibration: on the two-dimensional cases of tests/test_evidence.py (PCVM with one basis
function; BBLR with two weights), ``repeats`` certified NUTS references with different
seeds; for each, z = (estimate - quadrature) / se for bridge sampling and for AIS. A
calibrated se gives z ~ N(0, 1): the share with |z| > 1.96 is tabled with its Wilson
interval. Written to results/evidence_calibration.json.

models: each model's default comparison (``zoo compare --model M``); the reference log Z of
the frozen model and of every variant an engine fits (bridge sampling, checked by AIS),
and every engine's reported log evidence or bound with its evidence verdict. Written to
results/evidence_models.json and printed as a table.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

import zoo  # noqa: F401  (float64)
from zoo.models.bblr import BBLR
from zoo.models.pcvm import PCVM
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge import evidence as ev
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.records import registry
from zoo.validation.references import ReferenceConfig, run_reference
from zoo.validation.runs.compare import CompareConfig, compare

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: the cases of tests/test_evidence.py: (spec, columns), two latent dimensions each
CASES = {"pcvm, w >= 0 and b": (PCVM(alpha=1.0, alpha_bias=1.0), 1),
         "bblr, two weights": (BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5), 2)}


def machine() -> dict:
    return {"date": datetime.date.today().isoformat(), "machine": platform.platform(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "command": " ".join(sys.argv)}


def calibration(repeats: int) -> dict:
    out = {"cases": {}, **machine()}
    for name, (spec, n_basis) in CASES.items():
        Phi, y = ev.small_problem(n_basis)
        density = ev.unconstrained_density(spec, Phi, y)
        rows, quad = [], None
        for seed in range(repeats):
            ref = run_reference(spec, Phi, y, config=ReferenceConfig(num_samples=2000, seed=100 + seed))
            chains = ev.reference_chains(density, ref.idata)
            if quad is None:
                quad = ev.quadrature_log_evidence(density, chains)
            bridge = ev.bridge_sampling(density, chains, seed=seed)
            ais = ev.annealed_importance_sampling(density, chains, seed=seed)
            rows.append({"certified": ref.certified,
                         "bridge": bridge.to_json(), "ais": ais.to_json(),
                         "z_bridge": (bridge.log_z - quad.log_z) / bridge.se,
                         "z_ais": None if ais.log_z is None else (ais.log_z - quad.log_z) / ais.se})
            print(f"{name} seed {seed}: z bridge {rows[-1]['z_bridge']:+.2f}, z AIS {rows[-1]['z_ais']:+.2f}",
                  flush=True)
        summary = {}
        for method in ("bridge", "ais"):
            z = np.array([r[f"z_{method}"] for r in rows if r[f"z_{method}"] is not None])
            hits = int(np.sum(np.abs(z) > 1.96))
            low, high = wilson_interval(hits, z.size)
            summary[method] = {"n": int(z.size), "outside_1_96": hits, "wilson_95": [low, high],
                               "mean_z": float(z.mean()), "sd_z": float(z.std(ddof=1)),
                               "median_se": float(np.median([r[method]["se"] for r in rows if r[method]["se"]])),
                               "median_seconds": float(np.median([r[method]["seconds"] for r in rows]))}
        out["cases"][name] = {"quadrature": quad.to_json(), "runs": rows, "summary": summary}
    return out


def models(names, cache_dir) -> dict:
    out = {"models": {}, **machine()}
    for model in names:
        t0 = time.perf_counter()
        comp = compare(CompareConfig(model=model, cache_dir=cache_dir))
        compare_seconds = time.perf_counter() - t0
        prepared = comp.prepared
        Phi, y = prepared.Phi_train, prepared.y_train
        specs = {None: (prepared.spec, comp.reference)}
        specs |= {v: (prepared.variants[v], r) for v, r in comp.variant_references.items()}
        references = {}
        for variant, (spec, ref) in specs.items():
            if ref is None:
                continue
            t1 = time.perf_counter()
            references[variant] = ev.reference_evidence(spec, Phi, y, ref.idata)
            print(f"{model} {variant or 'model'}: reference log Z {references[variant].log_z} "
                  f"+- {references[variant].se} (certified {references[variant].certified}: "
                  f"{references[variant].reason}) in {time.perf_counter() - t1:.1f} s", flush=True)
        engines = {}
        for name, posterior in comp.posteriors.items():
            claim = ev.engine_evidence(posterior)
            # a +psis engine's draws are the base engine's re-weighted: its evidence is the base's
            if claim is None or name.endswith("+psis"):
                continue
            value, kind, source = claim
            record = registry.get_model(model)
            variant = record.engine(name).variant if record.has_engine(name) else None
            reference = references.get(variant)
            verdict = None if reference is None else ev.evidence_verdict(value, kind, reference)
            engines[name] = {"value": value, "kind": kind, "source": source, "variant": variant,
                             "verdict": None if verdict is None else verdict.to_json()}
        out["models"][model] = {
            "compare_seconds": compare_seconds,
            "references": {str(k or "model"): r.to_json() for k, r in references.items()},
            "engines": engines}
    return out


def table(result: dict) -> str:
    lines = ["| model | engine | kind | engine value | reference log Z (+- se) | verdict | difference |",
             "|---|---|---|---|---|---|---|"]
    for model, m in result["models"].items():
        for name, e in m["engines"].items():
            v = e["verdict"] or {}
            ref = m["references"].get(e["variant"] or "model", {})
            ref_text = "-" if ref.get("log_z") is None else f"{ref['log_z']:.3f} +- {ref['se']:.3f}"
            diff = "-" if v.get("difference") is None else f"{v['difference']:+.3f}"
            lines.append(f"| {model} | {name} | {e['kind']} | {e['value']:.3f} | {ref_text} | "
                         f"{v.get('status', 'no reference')} | {diff} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="job", required=True)
    cal = sub.add_parser("calibration")
    cal.add_argument("--repeats", type=int, default=10)
    mod = sub.add_parser("models")
    mod.add_argument("--models", nargs="+", default=list(registry.model_names()))
    mod.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    os.makedirs(RESULTS, exist_ok=True)
    if args.job == "calibration":
        result = calibration(args.repeats)
        write_json_atomic(result, os.path.join(RESULTS, "evidence_calibration.json"))
        for name, case in result["cases"].items():
            for method, s in case["summary"].items():
                print(f"{name} {method}: |z| > 1.96 in {s['outside_1_96']}/{s['n']} "
                      f"(Wilson {s['wilson_95'][0]:.2f}-{s['wilson_95'][1]:.2f}); mean z {s['mean_z']:+.2f}, "
                      f"sd z {s['sd_z']:.2f}; median se {s['median_se']:.4f}, {s['median_seconds']:.1f} s")
    else:
        result = models(args.models, args.cache_dir)
        write_json_atomic(result, os.path.join(RESULTS, "evidence_models.json"))
        print(table(result))


if __name__ == "__main__":
    main()
