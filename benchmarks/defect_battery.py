"""The planted-defect battery (validation/runs/battery.py): detection rate of each defect by each
detector (the verdict against a reference run on each simulated data set; SBC), with the
exact engine's and the intact engine's rates beside them.

    python benchmarks/defect_battery.py --model pcvm --engine ep
    python benchmarks/defect_battery.py --model gig-logistic --engine vb --reference-samplers pg-gibbs
    python benchmarks/defect_battery.py --sbc-replicates 0 --results benchmarks/results/defect_battery_joint.json
        # the verdicts alone (marginal, joint, distribution), without the SBC runs
    python benchmarks/defect_battery.py --model bblr --engine laplace --n 200 --n-basis 100 --sbc-replicates 0 \
        --results benchmarks/results/distribution_battery.json
        # another design of the SBC problem (n points, n-basis features): the verdicts at d = 100

Cells are kept under --out, so an interrupted run resumes. Results are appended to
benchmarks/results/defect_battery.json (one entry per model and engine).
"""
from __future__ import annotations

import argparse
import json
import os

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.report.battery_report import battery_table
from zoo.validation.runs.battery import BatteryConfig, BatterySettings, run_battery


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pcvm")
    parser.add_argument("--engine", default="ep")
    parser.add_argument("--datasets", type=int, default=100)
    parser.add_argument("--sbc-replicates", type=int, default=20)
    parser.add_argument("--sbc-sims", type=int, default=100)
    parser.add_argument("--out", default="zoo-defect-battery")
    parser.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results", "defect_battery.json"))
    parser.add_argument("--reference-draws", type=int, default=BatterySettings.reference_draws,
                        help="NUTS draws per chain (4 chains, as many warm-up) of each reference run")
    parser.add_argument("--reference-samplers", default="",
                        help="comma-separated reference samplers tried on each data set, in order (default: the "
                             "model's chain, e.g. nuts,pg-gibbs for gig-logistic)")
    parser.add_argument("--n", type=int, default=None, help="training points of the SBC problem (default 60)")
    parser.add_argument("--n-basis", type=int, default=None,
                        help="features of the SBC problem (default: the model's SBC default, 6 for most)")
    parser.add_argument("--defects", default="",
                        help="comma-separated defect names (default: every defect that applies; 'none': the exact "
                             "engine, its shape defects and the intact engine only)")
    parser.add_argument("--workers", type=int, default=1,
                        help="Dask LocalCluster worker processes for the data sets and SBC runs (1: no cluster)")
    parser.add_argument("--scheduler", default=None, help="address of a running Dask scheduler instead")
    args = parser.parse_args(argv)
    problem = tuple((k, v) for k, v in (("n", args.n), ("n_basis", args.n_basis)) if v is not None)
    settings = BatterySettings(n_datasets=args.datasets, sbc_replicates=args.sbc_replicates, sbc_sims=args.sbc_sims,
                               reference_draws=args.reference_draws, problem=problem,
                               reference_samplers=tuple(s for s in args.reference_samplers.split(",") if s))
    defects = [] if args.defects == "none" else [d for d in args.defects.split(",") if d] or None
    label = f"{args.model}/{args.engine}" + "".join(f" {k}={v}" for k, v in problem)

    def progress(stage, done, total):
        print(f"{stage}: {done}/{total}", flush=True)

    if args.scheduler or args.workers > 1:
        from distributed import Client, LocalCluster

        cluster = None if args.scheduler else LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                                           dashboard_address=None)
        with Client(args.scheduler or cluster) as client:
            result = run_battery(BatteryConfig(args.model, args.engine, defects, settings=settings), out_dir=args.out,
                                 progress=progress, executor=client.get_executor())
        if cluster is not None:
            cluster.close()
    else:
        result = run_battery(BatteryConfig(args.model, args.engine, defects, settings=settings), out_dir=args.out,
                             progress=progress)
    stored = {}
    if os.path.exists(args.results):
        with open(args.results) as fh:
            stored = json.load(fh)
    stored[label] = result.to_json()
    write_json_atomic(stored, args.results)
    print(f"\n{label}: {result.certified_datasets} of {result.datasets} data sets "
          f"with a certified reference\n")
    print(battery_table({label: result}).to_markdown())


if __name__ == "__main__":
    main()
