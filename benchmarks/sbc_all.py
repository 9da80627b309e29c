"""SBC of every engine and every reference sampler of every model (validation/sbc.py).

Each (model, engine) runs ``--sims`` simulations on the model's SBC problem (its proper
prior on 60 points x 6 RBF features); finished simulations are kept under ``--out`` so an
interrupted run resumes. Writes ``benchmarks/results/sbc_all.json`` (every summary,
without the raw ranks) and prints the README's table.

    python benchmarks/sbc_all.py                       # 100 simulations each
    python benchmarks/sbc_all.py --sims 30 --models pcvm
    python benchmarks/sbc_all.py --skip-samplers       # engines only (the samplers take longest)
"""
from __future__ import annotations

import argparse
import os
import time

import zoo  # noqa: F401  (float64)
from zoo.validation import registry
from zoo.validation.atomic import write_json_atomic
from zoo.validation.sbc import SBCSettings, plot_sbc, run_sbc, summary_line


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--models", default=",".join(registry.model_names()))
    parser.add_argument("--skip-samplers", action="store_true")
    parser.add_argument("--out", default="zoo-sbc-benchmark", help="where simulations and figures are kept")
    parser.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results", "sbc_all.json"))
    args = parser.parse_args(argv)
    settings = SBCSettings(n_sims=args.sims)
    rows = []
    for model in args.models.split(","):
        record = registry.get_model(model)
        names = list(record.engine_names) + ([] if args.skip_samplers else list(record.sampler_names))
        for name in names:
            t0 = time.perf_counter()
            folder = os.path.join(args.out, model, name)
            summary = run_sbc(model, name, settings=settings, out_dir=folder)
            plot_sbc(summary, os.path.join(folder, "sbc.png"))
            summary.pop("ranks", None)
            summary["benchmark_seconds"] = time.perf_counter() - t0
            rows.append(summary)
            print(summary_line(summary), f"[{summary['benchmark_seconds']:.0f} s]", flush=True)
            # the table so far, atomically: a killed run keeps what it finished
            write_json_atomic({"settings": {"n_sims": args.sims, "n_draws": settings.n_draws}, "rows": rows},
                              args.results)
    print("\n| model | engine | SBC verdict | fits ok / failed | wall seconds |\n|---|---|---|---|---|")
    for r in rows:
        c = r.get("counts", {})
        print(f"| {r['model']} | {r['engine']} | {r['status']}: {r['reason']} | {c.get('ok', '-')} / "
              f"{c.get('failed', '-')} | {r['benchmark_seconds']:.0f} |")


if __name__ == "__main__":
    main()
