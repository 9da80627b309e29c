"""Posterior SBC (validation/runs/posterior_sbc.py) of engines on a model's default case,
beside the seconds it took.

    python benchmarks/posterior_sbc.py --model pcvm --engines ep advi-meanfield nuts --sims 100

For each engine: the verdict of posterior SBC conditioned on the default comparison case
(``zoo compare --model M``'s training labels and its certified reference), its coverage of
central intervals at 50/80/90/95% (median over quantities and the furthest quantity, with
Wilson intervals), its contraction view (median z sd, share of |z| > 2, median contraction
per quantity) and the wall seconds. NUTS run as an engine is the control: our ground truth
must itself pass. Written to results/posterior_sbc/<model>.json with each engine's coverage
and contraction figure beside it. Simulations are kept under --sims-dir, so a rerun resumes.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time

import numpy as np

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.runs import posterior_sbc as ps
from zoo.validation.report import sbc_report
from zoo.validation.runs import sbc_simulation
from zoo.validation.base.result_format import thawed
from zoo.validation.runs.sbc_result import SBCResult

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "posterior_sbc")


def machine() -> dict:
    return {"date": datetime.date.today().isoformat(), "machine": platform.platform(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "command": " ".join(sys.argv)}


def row(summary: SBCResult) -> dict:
    """What the table shows of one engine's run."""
    out = {"status": summary.status, "reason": summary.reason, "wall_seconds": summary.wall_seconds,
           "fit_seconds_median": None if summary.counts is None else summary.counts.fit_seconds_median,
           "coverage_line": sbc_report.coverage_line(summary)}
    contraction = summary.contraction
    if contraction:
        qs = contraction.quantities
        out["z_sd_median"] = float(np.median([q.z_sd for q in qs if q.z_sd is not None]))
        out["share_abs_z_above_2_median"] = float(np.median([q.share_abs_z_above_2 for q in qs
                                                             if q.share_abs_z_above_2 is not None]))
        out["contraction_median"] = float(np.median([q.contraction_median for q in qs
                                                     if q.contraction_median is not None]))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pcvm")
    parser.add_argument("--engines", nargs="+", default=["ep", "advi-meanfield", "nuts"])
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--cache-dir", default=None, help="where the default case's reference is kept")
    parser.add_argument("--sims-dir", default=os.path.join(tempfile.gettempdir(), "zoo-posterior-sbc"),
                        help="where the simulations are kept (default: a folder in the system's temporary folder)")
    args = parser.parse_args(argv)
    os.makedirs(RESULTS, exist_ok=True)
    t0 = time.perf_counter()
    case = ps.default_case(args.model, cache_dir=args.cache_dir)
    case_seconds = time.perf_counter() - t0
    result = {**machine(), "model": args.model, "case": case.label, "case_seconds": case_seconds,
              "reference_seconds": float(case.reference.seconds), "engines": {}}
    for engine in args.engines:
        summary = ps.run_posterior_sbc(ps.PosteriorSBCConfig(args.model, engine, case=case,
                                                             settings=sbc_simulation.SBCSettings(n_sims=args.sims)),
                                       out_dir=args.sims_dir)
        print(sbc_report.summary_line(summary), flush=True)
        figure = sbc_report.plot_sbc_views(summary, os.path.join(RESULTS, f"{args.model}_{engine}_views.png"))
        ranks = sbc_report.plot_sbc(summary, os.path.join(RESULTS, f"{args.model}_{engine}_ranks.png"))
        result["engines"][engine] = {**row(summary), "figure": os.path.basename(figure) if figure else None,
                                     "ranks_figure": os.path.basename(ranks) if ranks else None,
                                     "conditioning": thawed(summary.conditioning),
                                     "coverage": thawed(summary.coverage)}
        print(f"  {result['engines'][engine]['coverage_line']}; {summary.wall_seconds or 0:.0f} s", flush=True)
        write_json_atomic(result, os.path.join(RESULTS, f"{args.model}.json"))


if __name__ == "__main__":
    main()
