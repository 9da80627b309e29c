"""Which sampler certifies the GGSM probit reference, for each (design, prior, q).

Issue 3 asks for a table (q, prior) -> reference used, certified or not. For every cell
this script runs the `zoo compare` protocol for ggsm-probit with the engines ``mm`` and
``mm-laplace`` and the default chain of reference samplers (NUTS 4 x (2000 + 2500) with
one doubling, then slice-within-Gibbs 4 x (1000 + 2500) sweeps with up to two doublings;
``validation/protocols.py``), on split 0 of

* ``ggig_linear``: the paper's Section 6.1 design (d = 50, 8 relevant features with
  w = 3, N = 200): linearly separable, so the posterior of the scale of w has the heavy
  tail r^-(1 + q a) and moments exist only for q a > 1 (mean) and q a > 2 (sd);
* ``ggig_linear_weak``: the same inputs and noise with w = 0.3 (not the paper's): not
  separable, every moment exists - the design where engines are measured against a
  certified reference in the usual way.

Priors: ``proper`` a = b = 1 (the compare default) and ``paper`` a = b = 1e-3.

Per cell it records: each sampler tried (certified or not, worst R-hat, smallest ESS,
divergences, seconds), which one is the reference, which moments exist, and the speed of
``mm`` (warm seconds, one call after compilation, as `zoo compare` times every engine)
against the reference's warm seconds, plus pred_mae of mm and mm-laplace where the
reference is certified. One JSON per cell in ``<out>/cells/``, written atomically; a rerun
with the same ``--out`` skips finished cells. The table goes to ``<out>/table.md``.

    python benchmarks/ggsm_references.py                       # all 20 cells (about 1-2 h)
    python benchmarks/ggsm_references.py --designs ggig_linear --priors proper --q 1
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import zoo
from zoo.models.ggsm_probit import Q_GRID
from zoo.validation.atomic import write_json_atomic, write_text_atomic
from zoo.validation.compare import CompareConfig, compare

PRIORS = {"proper": {"a": 1.0, "b": 1.0}, "paper": {"a": 1e-3, "b": 1e-3}}
DESIGNS = ("ggig_linear", "ggig_linear_weak")


def _cell_path(out, design, prior, q):
    return os.path.join(out, "cells", f"{design}__{prior}__q{q:g}.json")


def run_cell(design: str, prior: str, q: float, cache_dir: str | None) -> dict:
    import warnings

    config = CompareConfig(model="ggsm-probit", data=design, engines=("mm", "mm-laplace"),
                           params={"q": q, **PRIORS[prior]}, cache_dir=cache_dir)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uncertified references are recorded, not warned about
        comp = compare(config)
    res = comp.results
    ref = res["reference"]
    engines = {}
    for name, row in res["engines"].items():
        engines[name] = {
            "failure": row.get("failure"),
            "seconds": row.get("seconds"),
            "speedup_vs_reference": row.get("speedup_vs_reference"),
            "pred_mae": row.get("pred_mae") if ref["certified"] else None,
            "sd_ratio_median": row.get("sd_ratio_median") if ref["certified"] else None,
            "std_mean_err_median": row.get("std_mean_err_median") if ref["certified"] else None,
            "n_basis": row.get("n_basis"),
        }
    return {
        "design": design, "prior": prior, "q": q, **PRIORS[prior],
        "reference": {"sampler": ref["sampler_name"], "certified": ref["certified"],
                      "rhat_max": ref["rhat_max"], "ess_bulk_min": ref["ess_bulk_min"],
                      "ess_tail_min": ref["ess_tail_min"], "seconds": ref["seconds"],
                      "warm_seconds": ref["warm_seconds"], "from_cache": ref["from_cache"]},
        "tried": [{"sampler": t["sampler_name"], "certified": t["certified"], "rhat_max": t["rhat_max"],
                   "ess_bulk_min": t["ess_bulk_min"], "divergences": t["divergences"],
                   "seconds": t["seconds"], "draws_per_chain": t["sampler"].get("num_samples_total"),
                   "failures": t["failures"][:3]} for t in res["references_tried"]],
        "moments": res["moments"],
        "engines": engines,
        "wall_seconds": time.perf_counter() - t0,
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
    }


def _fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def table(cells: list[dict]) -> str:
    lines = [
        "# GGSM probit: which reference sampler certifies",
        "",
        "Split 0; reference chain NUTS -> slice-Gibbs (the first certified one is the reference). "
        "Moments: which posterior moments of w exist on these data (see validation/protocols.ggsm_moments). "
        "mm speed-up = reference warm seconds / mm warm seconds. pred_mae only against a certified reference.",
        "",
        "| design | prior | q | NUTS | slice-Gibbs | reference | moments of w | mm s | mm speed-up | pred_mae mm / mm-laplace |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        tried = {t["sampler"]: t for t in c["tried"]}

        def status(name):
            t = tried.get(name)
            if t is None:
                return "not run"
            word = "certified" if t["certified"] else "no"
            return (f"{word} (R-hat {t['rhat_max']:.3f}, ESS {t['ess_bulk_min']:.0f}, div {t['divergences']}, "
                    f"{t['seconds']:.0f} s)")

        ref = c["reference"]
        used = f"**{ref['sampler']}**" if ref["certified"] else "**none certified**"
        m = c["moments"] or {}
        moments = ("all" if m.get("sd_exists") else "mean, no sd" if m.get("mean_exists") else
                   "none" if m.get("mean_exists") is False else "unknown")
        mm = c["engines"].get("mm", {})
        lap = c["engines"].get("mm-laplace", {})
        lap_mae = "failed" if lap.get("failure") else _fmt(lap.get("pred_mae"), ".4f")
        lines.append(
            f"| {c['design']} | {c['prior']} | {c['q']:g} | {status('nuts')} | {status('slice-gibbs')} | {used} | "
            f"{moments} | {_fmt(mm.get('seconds'), '.3f')} | {_fmt(mm.get('speedup_vs_reference'), '.0f')} | "
            f"{_fmt(mm.get('pred_mae'), '.4f')} / {lap_mae} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--priors", default=",".join(PRIORS))
    ap.add_argument("--q", default=",".join(f"{q:g}" for q in sorted(Q_GRID, reverse=True)))
    ap.add_argument("--out", default="benchmarks/results/ggsm_references")
    ap.add_argument("--cache-dir", default=os.environ.get("ZOO_CACHE_DIR"),
                    help="reference cache (default: none; ZOO_CACHE_DIR if set)")
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    designs = [d for d in args.designs.split(",") if d]
    priors = [p for p in args.priors.split(",") if p]
    unknown = [d for d in designs if d not in DESIGNS] + [p for p in priors if p not in PRIORS]
    if unknown:
        ap.error(f"unknown design or prior: {unknown}")
    qs = [float(v) for v in args.q.split(",") if v]
    cells = []
    for design in designs:
        for prior in priors:
            for q in qs:
                path = _cell_path(args.out, design, prior, q)
                if os.path.exists(path):
                    with open(path) as fh:
                        cells.append(json.load(fh))
                    continue
                print(f"{design} {prior} q={q:g} ...", flush=True)
                cell = run_cell(design, prior, q, args.cache_dir)
                write_json_atomic(cell, path)
                cells.append(cell)
                print(f"  reference {cell['reference']['sampler']} certified={cell['reference']['certified']} "
                      f"({cell['wall_seconds']:.0f} s)", flush=True)
    text = table(cells)
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
