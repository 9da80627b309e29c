"""SBC of an engine: its simulations one fit at a time against its batched form
(``fit.many``: one vmapped program over the simulated data sets), in one run on one machine.

For each model/engine the two cells run the same SBC (same settings, same prior draws):

* one: the registry engine's fit wrapped in a plain function (no ``many``), so SBC runs
  the simulations one at a time (prior draw, fit, ranks), as it did before the batched forms;
* many: the registry engine by name, so SBC takes its ``fit.many`` in chunks of
  ``SIMS_PER_ENGINE_BATCH``, with each chunk's prior draws and ranks batched as well
  (``simulate_batch``).

Each cell runs in a fresh process with JAX's persistent compilation cache on and empty at
its start (as ``zoo sbc`` runs), in that process (no workers). Seconds are the SBC run's
wall time (prior draws, fits, ranks, the uniformity test); compile = JAX's tracing and
compilation time within it; warm = the same SBC at another seed run next in the process,
its programs compiled (what a defect battery's later replicates cost). The ranks of the two cells are compared simulation by
simulation: the batched fits agree with the single ones to round-off, so the ranks should
be the same numbers.

    python benchmarks/engine_batch_speed.py                    # the default pairs, 1,000 simulations
    python benchmarks/engine_batch_speed.py --pairs pcvm/ep --sims 100
    python benchmarks/engine_batch_speed.py --report
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "engine_batch_speed")
PAIRS = "pcvm/ep,pcvm/laplace,gig-logistic/vb,grid-rvm/vb,pcvm/auto-laplace"


def run_cell(pair: str, path: str, sims: int) -> dict:
    import zoo  # noqa: F401  (float64, host devices)
    import jax

    from zoo.inference.contracts import many_of
    from zoo.validation.base.compile_timer import CompileTimer
    from zoo.validation.records import registry
    from zoo.validation.runs.sbc import SBCConfig, run_sbc
    from zoo.validation.runs.sbc_simulation import SBCSettings

    model, engine = pair.split("/")
    entry = registry.get_model(model).engine(engine)
    fit = entry.fit()
    if many_of(fit) is None:
        raise SystemExit(f"{pair} has no batched form (fit.many)")

    def one_at_a_time(spec, Phi, y, *, config=None):
        return fit(spec, Phi, y, config=config)

    one_at_a_time.__name__ = engine
    load = os.getloadavg()[0]
    def run(seed):
        if path == "one":
            return run_sbc(SBCConfig(model, one_at_a_time, settings=SBCSettings(n_sims=sims, seed=seed),
                                     variant=entry.variant), out_dir=tmp)
        return run_sbc(SBCConfig(model, engine, settings=SBCSettings(n_sims=sims, seed=seed)), out_dir=tmp)

    with tempfile.TemporaryDirectory() as tmp:
        zoo.enable_compilation_cache(os.path.join(tmp, "jax"))
        with CompileTimer() as compiling:
            t0 = time.perf_counter()
            summary = run(0)
            wall = time.perf_counter() - t0
        # the same run again at another seed in this process: what a battery's later
        # replicates cost (its programs compiled, its prior draws new)
        with CompileTimer() as compiling_warm:
            t1 = time.perf_counter()
            run(1)
            warm = time.perf_counter() - t1
        ranks = {}
        for name in sorted(os.listdir(summary.folder)):
            with open(os.path.join(summary.folder, name)) as fh:
                r = json.load(fh)
            ranks[r["index"]] = [r["status"], r.get("ranks")]
    return {"pair": pair, "path": path, "sims": sims, "wall_seconds": wall, "compile_seconds": compiling.seconds,
            "warm_seconds": warm, "warm_compile_seconds": compiling_warm.seconds,
            "status": summary.status, "ranks": ranks, "load_before": load, "load_after": os.getloadavg()[0],
            "backend": jax.default_backend()}


def report(out: str) -> str:
    folder = os.path.join(out, "cells")
    cells = [json.load(open(os.path.join(folder, f))) for f in sorted(os.listdir(folder))] if os.path.isdir(folder) else []
    meta = json.load(open(os.path.join(out, "meta.json"))) if os.path.exists(os.path.join(out, "meta.json")) else {}
    lines = ["# SBC of an engine: one fit at a time against its batched form (benchmarks/engine_batch_speed.py)", "",
             f"Date {meta.get('date', '?')}; commands: {'; '.join(f'`{c}`' for c in meta.get('commands', []))}; "
             f"machine: {meta.get('machine', '?')}; zoo at {meta.get('revision', '?')}. Each cell in a fresh process "
             "with JAX's persistent compilation cache on and empty at its start; seconds are the SBC run's wall time "
             "(prior draws, fits, ranks, verdict), compile = JAX's tracing and compilation time within it; warm = the "
             "same SBC at another seed, run next in that process (its programs compiled, as a battery's later "
             "replicates find them). one: "
             "the engine's fit wrapped in a plain function, one simulation at a time (prior draw, fit, ranks); many: "
             "the engine's fit.many, 64 simulations per vmapped program, their prior draws and ranks batched too.", "",
             "| model / engine | sims | one s (compile) | many s (compile) | speed-up | warm one s | warm many s | "
             "warm speed-up | verdict one / many | same ranks | load 1-min |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(c["pair"], c["path"], c["sims"]): c for c in cells}
    for (pair, path, sims), a in sorted(by.items()):
        if path != "many":
            continue
        b = by.get((pair, "one", sims))
        same = "-"
        if b:
            same = f"{sum(b['ranks'].get(k) == v for k, v in a['ranks'].items())} / {len(a['ranks'])}"
        lines.append(" | ".join([
            f"| {pair}", str(sims),
            f"{b['wall_seconds']:.1f} ({b['compile_seconds']:.1f})" if b else "-",
            f"{a['wall_seconds']:.1f} ({a['compile_seconds']:.1f})",
            f"{b['wall_seconds'] / a['wall_seconds']:.1f}x" if b else "-",
            f"{b['warm_seconds']:.1f}" if b and "warm_seconds" in b else "-",
            f"{a['warm_seconds']:.1f}" if "warm_seconds" in a else "-",
            f"{b['warm_seconds'] / a['warm_seconds']:.1f}x" if b and "warm_seconds" in b and "warm_seconds" in a else "-",
            f"{b['status'] if b else '-'} / {a['status']}", same,
            f"{b['load_before']:.1f} / {a['load_before']:.1f} |" if b else f"- / {a['load_before']:.1f} |"]))
    lines += ["", "same ranks: simulations whose status and every rank are equal in the two cells."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default=PAIRS)
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--redo", action="store_true")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        pair, path, sims, dest = args.cell.split("|")
        cell = run_cell(pair, path, int(sims))
        with open(dest + ".tmp", "w") as fh:
            json.dump(cell, fh)
        os.replace(dest + ".tmp", dest)
        return 0
    os.makedirs(os.path.join(args.out, "cells"), exist_ok=True)
    meta_path = os.path.join(args.out, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {"commands": []}
    if not args.report:
        for pair in (p for p in args.pairs.split(",") if p):
            for path in ("one", "many"):
                dest = os.path.join(args.out, "cells", f"{pair.replace('/', '--')}--{path}--{args.sims}.json")
                if os.path.exists(dest) and not args.redo:
                    continue
                t0 = time.perf_counter()
                subprocess.run([sys.executable, os.path.abspath(__file__), "--cell", f"{pair}|{path}|{args.sims}|{dest}"],
                               check=True)
                print(f"{pair} {path} {args.sims}: {time.perf_counter() - t0:.0f} s", flush=True)
        repo = os.path.dirname(HERE)
        head = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        meta.update({"date": _dt.date.today().isoformat(), "revision": head[:12] + (" + uncommitted changes" if dirty else ""),
                     "machine": os.environ.get("ZOO_BENCH_MACHINE", "2-core development machine") +
                     f" ({platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
                     f"{platform.python_version()})"})
        command = "python benchmarks/engine_batch_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
        meta["commands"] = list(dict.fromkeys(meta.get("commands", []) + [command.strip()]))
        with open(meta_path, "w") as fh:
            json.dump(meta, fh, indent=1)
    from zoo.validation.base.atomic import write_text_atomic

    write_text_atomic(os.path.join(args.out, "table.md"), report(args.out))
    print(open(os.path.join(args.out, "table.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
