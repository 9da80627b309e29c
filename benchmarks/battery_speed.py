"""The defect battery, before and after issue 37 (NUTS references as compiled programs,
SBC's per-simulation host work compiled or cached): wall seconds and JAX's compilation
share, per model and engine, in one run on one machine.

* before: the zoo at ``--before-rev`` (default e67ca18, the last revision whose NUTS
  references ran ``MCMC.run``, compiling on every call), imported from an exported copy
  (``revision_tree.py``);
* after: the zoo of this checkout.

Each cell runs ``run_battery`` in a fresh process, in that process (no Dask workers, so
that JAX's compile time is measured where it is spent), with JAX's persistent compilation
cache on and empty at the start, as ``zoo`` commands run. The before and after cells of a
model use the same settings and simulated data sets; the references' random streams
differ (NUTS moved from MCMC's stream to the program's), so detection counts are compared
as rates, not equal numbers. ``--full`` adds the whole battery of the issue's goal (100
data sets, 20 SBC replicates of 100 simulations) on ``--workers`` Dask workers, after only.

    python benchmarks/battery_speed.py                      # pcvm/ep, gig-logistic/vb: 10 data sets, 2 replicates
    python benchmarks/battery_speed.py --full pcvm/ep --workers 2
    python benchmarks/battery_speed.py --report
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
OUT = os.path.join(HERE, "results", "battery_speed")
#: the model's reference samplers in its battery (as benchmarks/defect_battery.py is run)
REFERENCE_SAMPLERS = {"gig-logistic": "pg-gibbs"}


def run_cell(pair: str, path: str, datasets: int, replicates: int, workers: int) -> dict:
    """One battery in this process (or on ``workers`` Dask workers): its seconds, compile
    seconds (this process only) and rows."""
    import zoo  # noqa: F401  (float64, host devices)
    import jax

    from zoo.validation.base.compile_timer import CompileTimer
    from zoo.validation.runs import battery as B
    from zoo.validation.runs.battery import BatterySettings

    def run_battery(**where) -> dict:
        # the battery as JSON, from the zoo this process imports: the current one takes a
        # BatteryConfig and returns a BatteryResult, a before revision's took names
        if hasattr(B, "BatteryConfig"):
            return B.run_battery(B.BatteryConfig(model, engine, settings=settings), **where).to_json()
        return B.run_battery(model, engine, settings=settings, **where)

    model, engine = pair.split("/")
    samplers = tuple(s for s in REFERENCE_SAMPLERS.get(model, "").split(",") if s)
    settings = BatterySettings(n_datasets=datasets, sbc_replicates=replicates, sbc_sims=100, reference_draws=500,
                               reference_samplers=samplers)
    load = os.getloadavg()[0]
    with CompileTimer() as compiling, tempfile.TemporaryDirectory() as tmp:
        zoo.enable_compilation_cache(os.path.join(tmp, "jax"))
        t0 = time.perf_counter()
        if workers > 1:
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                result = run_battery(out_dir=tmp, executor=client.get_executor())
        else:
            result = run_battery(out_dir=tmp)
        wall = time.perf_counter() - t0
    return {"pair": pair, "path": path, "datasets": datasets, "replicates": replicates, "workers": workers,
            "wall_seconds": wall, "compile_seconds": compiling.seconds if workers <= 1 else None,
            "certified": result["certified_datasets"], "rows": result["rows"], "load_before": load,
            "load_after": os.getloadavg()[0], "zoo": os.path.dirname(zoo.__file__), "backend": jax.default_backend()}


def _rates(cell: dict) -> str:
    """Detections of the generic defects by the marginal verdict and by SBC, for a glance."""
    parts = []
    for det in ("verdict", "sbc"):
        rows = [r for r in cell["rows"] if r["detector"] == det]
        hit = sum(r["detected"] for r in rows if r["defect"] not in ("intact engine", "exact (2nd reference run)"))
        n = sum(r["trials"] for r in rows if r["defect"] not in ("intact engine", "exact (2nd reference run)"))
        parts.append(f"{det} {hit}/{n}")
    return ", ".join(parts)


def _seconds(cell) -> str:
    if cell is None:
        return "-"
    compile_ = cell["compile_seconds"]
    return f"{cell['wall_seconds']:.0f}" + ("" if compile_ is None else f" ({compile_:.0f})")


def report(out: str) -> str:
    folder = os.path.join(out, "cells")
    cells = [json.load(open(os.path.join(folder, f))) for f in sorted(os.listdir(folder))] if os.path.isdir(folder) else []
    meta = json.load(open(os.path.join(out, "meta.json"))) if os.path.exists(os.path.join(out, "meta.json")) else {}
    lines = ["# The defect battery: before and after issue 37 (benchmarks/battery_speed.py)", "",
             f"Date {meta.get('date', '?')}; commands: {'; '.join(f'`{c}`' for c in meta.get('commands', []))}; "
             f"machine: {meta.get('machine', '?')}. before = the zoo at {meta.get('before', '?')} "
             f"({meta.get('before_what', 'NUTS references by MCMC.run')}), after = this checkout at " + meta.get("after", "?") + ". Each cell in a fresh process "
             "with JAX's persistent compilation cache on and empty at its start; seconds are the whole battery's "
             "wall time (references, fits, verdicts, SBC replicates); compile = JAX's tracing and compilation "
             "time in that process (not measured on Dask workers).", "",
             "| model / engine | data sets x SBC replicates | workers | before s (compile) | after s (compile) | "
             "speed-up | certified before / after | generic defects caught before | after | load 1-min |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(c["pair"], c["path"], c["datasets"], c["replicates"], c["workers"]): c for c in cells}
    for (pair, path, d, r, w), a in sorted(by.items()):
        if path != "after":
            continue
        b = by.get((pair, "before", d, r, w))
        lines.append(" | ".join([
            f"| {pair}", f"{d} x {r}", str(w), _seconds(b), _seconds(a),
            f"{b['wall_seconds'] / a['wall_seconds']:.1f}x" if b else "-",
            f"{b['certified'] if b else '-'} / {a['certified']}", _rates(b) if b else "-", _rates(a),
            f"{b['load_before']:.1f} / {a['load_before']:.1f} |" if b else f"- / {a['load_before']:.1f} |"]))
    lines += ["", "generic defects caught: detections / trials of the generic defects (covariance x0.5, x2, "
              "mean + 0.5 sd in one or all coordinates) summed, by the marginal verdict and by SBC."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="pcvm/ep,gig-logistic/vb")
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--before-rev", default="e67ca18")
    parser.add_argument("--before-what", default="NUTS references by MCMC.run",
                        help="what the before revision lacks, for the table's header")
    parser.add_argument("--paths", default="before,after")
    parser.add_argument("--full", default="", help="model/engine pairs to run as the whole battery (after only)")
    parser.add_argument("--workers", type=int, default=2, help="Dask workers of the --full runs")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--redo", action="store_true")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        pair, path, d, r, w, dest = args.cell.split("|")
        cell = run_cell(pair, path, int(d), int(r), int(w))
        with open(dest + ".tmp", "w") as fh:
            json.dump(cell, fh, indent=1)
        os.replace(dest + ".tmp", dest)
        return 0
    sys.path.insert(0, HERE)
    import revision_tree

    os.makedirs(os.path.join(args.out, "cells"), exist_ok=True)
    meta_path = os.path.join(args.out, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {"commands": []}
    if not args.report:
        jobs = [(p, path, args.datasets, args.replicates, 1) for p in args.pairs.split(",") if p
                for path in args.paths.split(",")]
        jobs += [(p, "after", 100, 20, args.workers) for p in args.full.split(",") if p]
        for pair, path, d, r, w in jobs:
            dest = os.path.join(args.out, "cells", f"{pair.replace('/', '--')}--{path}--{d}x{r}--w{w}.json")
            if os.path.exists(dest) and not args.redo:
                continue
            env = dict(os.environ)
            if path == "before":
                env["PYTHONPATH"] = revision_tree.tree_at(args.before_rev)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, os.path.abspath(__file__), "--cell", f"{pair}|{path}|{d}|{r}|{w}|{dest}"],
                           check=True, env=env)
            print(f"{pair} {path} {d}x{r} w{w}: {time.perf_counter() - t0:.0f} s", flush=True)
        dirty = subprocess.run(["git", "-C", revision_tree.REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        meta.update({"date": _dt.date.today().isoformat(), "before": revision_tree.commit_of(args.before_rev)[:12],
                     "before_what": args.before_what,
                     "after": revision_tree.commit_of("HEAD")[:12] + (" + uncommitted changes" if dirty else ""),
                     "machine": os.environ.get("ZOO_BENCH_MACHINE", "2-core development machine") +
                     f" ({platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python "
                     f"{platform.python_version()})"})
        command = "python benchmarks/battery_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])
        meta["commands"] = list(dict.fromkeys(meta.get("commands", []) + [command.strip()]))
        with open(meta_path, "w") as fh:
            json.dump(meta, fh, indent=1)
    from zoo.validation.base.atomic import write_text_atomic

    # the table is rebuilt from every stored cell, so an interrupted run leaves the old one whole
    write_text_atomic(os.path.join(args.out, "table.md"), report(args.out))
    print(open(os.path.join(args.out, "table.md")).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
