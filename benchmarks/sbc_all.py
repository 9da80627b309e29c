"""SBC of every engine and every reference sampler of every model (validation/runs/sbc.py).

Each (model, engine) runs ``--sims`` simulations on the model's SBC problem (its proper
prior on 60 points x 6 RBF features); finished simulations are kept under ``--out`` so an
interrupted run resumes. Writes ``benchmarks/results/sbc_all.json`` (every summary,
without the raw ranks) and prints the table of docs/validation.md.

    python benchmarks/sbc_all.py                       # 100 simulations each
    python benchmarks/sbc_all.py --sims 30 --models pcvm
    python benchmarks/sbc_all.py --only engines        # engines only (the samplers take longest)
    python benchmarks/sbc_all.py --only samplers --workers 2   # on a Dask LocalCluster
    python benchmarks/sbc_all.py --models ggsm-probit --names slice-gibbs --seed 1   # another seed
    python benchmarks/sbc_all.py --pool --models ggsm-probit --names slice-gibbs   # seeds pooled

Rows already in the results file for other (model, engine, seed) triples are kept, so the
two halves, and further seeds, can run separately.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.records import registry
from zoo.validation.report.sbc_report import plot_sbc, summary_line
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_result import SBCResult
from zoo.validation.runs.sbc_simulation import SBCSettings, sbc_names


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--models", default=",".join(registry.model_names()))
    parser.add_argument("--only", choices=("engines", "samplers", "all"), default="all")
    parser.add_argument("--names", default="", help="only these engines or samplers (comma-separated)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulations (an independent run)")
    parser.add_argument("--workers", type=int, default=1,
                        help="Dask LocalCluster worker processes for the simulations (1: no cluster)")
    parser.add_argument("--out", default="zoo-sbc-benchmark", help="where simulations and figures are kept")
    parser.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results", "sbc_all.json"))
    parser.add_argument("--pool", action="store_true",
                        help="run nothing: test the stored simulations of every seed of each (model, engine) pooled")
    args = parser.parse_args(argv)
    settings = SBCSettings(n_sims=args.sims, seed=args.seed)
    only = set(filter(None, args.names.split(",")))
    rows = []
    if os.path.exists(args.results):
        with open(args.results) as fh:
            rows = json.load(fh)["rows"]
    if args.pool:
        for model in args.models.split(","):
            for engine in sorted({r["engine"] for r in rows if r["model"] == model}):
                if not only or engine.split(":", 1)[-1] in only:
                    print(pooled([r for r in rows if (r["model"], r["engine"]) == (model, engine)]))
        return
    executor = client = cluster = None
    if args.workers > 1:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
        executor = client.get_executor()
    for model in args.models.split(","):
        record = registry.get_model(model)
        # samplers also on each model variant (grid-rvm: grid-gibbs@s-grid, nuts@rvm, ...)
        names = sbc_names(record, engines=args.only != "samplers", samplers=args.only != "engines")
        for name in (n for n in names if not only or n in only):
            t0 = time.perf_counter()
            folder = os.path.join(args.out, model, name)
            summary = run_sbc(SBCConfig(model, name, settings=settings), out_dir=folder, executor=executor)
            plot_sbc(summary, os.path.join(folder, "sbc.png"))
            # the stored row: the result's JSON without its ranks (they stay in the folder), and
            # the seconds this benchmark waited for it
            row = {**summary.to_json(), "benchmark_seconds": time.perf_counter() - t0}
            row.pop("ranks", None)
            rows = [r for r in rows if (r["model"], r["engine"], _seed(r)) != (model, summary.engine, args.seed)]
            rows.append(row)
            print(summary_line(summary), f"[{row['benchmark_seconds']:.0f} s]", flush=True)
            # the table so far, atomically: a killed run keeps what it finished
            write_json_atomic({"settings": {"n_sims": args.sims, "n_draws": settings.n_draws}, "rows": rows},
                              args.results)
    if client is not None:
        client.close()
        cluster.close()
    print(table(rows))


def pooled(rows) -> str:
    """One (model, engine)'s runs at several seeds pooled into one uniformity test: the
    seeds' simulations are independent draws of the same problem, so together they are a
    run of their summed size (a defect that flags runs of 100 consistently shows here with
    more power; chance flags at single seeds do not add up). Reads each run's stored
    simulations from the folder its row names and judges them with SBC's own ``summarize``."""
    from zoo.validation.runs.sbc import summarize
    from zoo.validation.runs.sbc_simulation import problem_for, quantity_names

    sims, used, missing = [], [], []
    for r in sorted(rows, key=_seed):
        folder = r.get("folder")
        if not folder or not os.path.isdir(folder):
            missing.append(_seed(r))
            continue
        run = []
        for fn in sorted(os.listdir(folder)):
            if fn.endswith(".json"):
                with open(os.path.join(folder, fn)) as fh:
                    run.append(json.load(fh))
        sims += run
        used.append(f"seed {_seed(r)} ({len(run)} simulations, {r['status']})")
    head = f"{rows[0]['model']} / {rows[0]['engine']} pooled over " + (", ".join(used) or "no stored run")
    if missing:
        head += f"; simulations not on this machine for seeds {missing}"
    if not sims:
        return head
    problem = problem_for(registry.get_model(rows[0]["model"]))
    spec = problem.variants.get(rows[0].get("variant"), problem.spec)
    summary = summarize(sims, quantity_names(spec, problem.Phi, problem.Phi_new), SBCSettings(n_sims=len(sims)),
                        model=rows[0]["model"], engine=rows[0]["engine"])
    lines = [f"{head}: {summary.reason}"]
    lines += [f"  {q.name}: {100 * q.share_below_half:.0f}% below the median, "
              f"{100 * q.share_in_outer_tenths:.0f}% in the outer tenths, excess {q.excess:+.2f}"
              for q in (summary.uniformity.quantities if summary.uniformity is not None else ())]
    return "\n".join(lines)


def _seed(row) -> int:
    return int(row.get("settings", {}).get("seed", 0))


def table(rows) -> str:
    """The table of docs/validation.md: one row per (model, engine), the reason as SBC states it."""
    out = ["| model | engine | seed | SBC | fits ok / failed | wall seconds |", "|---|---|---|---|---|---|"]
    for r in rows:
        result = SBCResult.from_json({k: v for k, v in r.items() if k != "benchmark_seconds"})
        c = result.counts
        out.append(f"| {r['model']} | {r['engine']} | {_seed(r)} | {summary_line(result).split(': ', 1)[1]} | "
                   f"{'-' if c is None else c.ok} / {'-' if c is None else c.failed} | {r['benchmark_seconds']:.0f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
