"""SBC of NUTS, before and after issue 37's compiled program: wall seconds, the share of JAX's
compilation, and the verdict, per model, in one run on one machine.

* before: every simulation's fit is a fresh ``run_reference`` (NumPyro's ``MCMC.run``,
  which compiles its sampling loop anew on each call) - SBC as it ran until 2026-11-27,
  driven here through ``sbc_simulation.simulate_one`` with the engine's per-simulation fit, in the
  zoo at ``--before-rev`` (default e67ca18: since then ``run_reference`` runs the compiled
  program too), imported from an exported copy (``revision_tree.py``);
* after: ``zoo``'s SBC as it runs now (``sbc.run_sbc``): the simulations of a batch share
  one compiled NUTS program (validation/references/nuts_program.py).

Both use the same prior draws and labels (the simulation's key) and the SBC settings'
NUTS (4 chains, 500 warm-up + 500 draws, the record's target acceptance); their chains
have different random streams, so their ranks differ and their verdicts are compared, not
their numbers. Each cell (model x path) runs in a fresh process, as a user's command does,
so that compilation is counted the way a user pays it; cells are kept under
``<out>/cells/`` and a rerun skips finished ones (``--redo`` recomputes).

    python benchmarks/sbc_speed.py                                   # ggsm-probit, grid-rvm
    python benchmarks/sbc_speed.py --models pcvm,gig-logistic,bblr --sims 100
    python benchmarks/sbc_speed.py --report
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
OUT = os.path.join(HERE, "results", "sbc_speed")
PATHS = ("before", "after")


def run_cell(model: str, path: str, sims: int) -> dict:
    """One model's SBC of NUTS by one path, in this process."""
    import zoo  # noqa: F401  (float64, host devices)
    import jax

    from zoo.validation.base.compile_timer import CompileTimer
    from zoo.validation.records import registry
    from zoo.validation.runs import sbc as S
    from zoo.validation.runs import sbc_simulation

    settings = sbc_simulation.SBCSettings(n_sims=sims)
    load = os.getloadavg()[0]
    with CompileTimer() as compiling, tempfile.TemporaryDirectory() as tmp:
        # as `zoo sbc` runs: JAX's persistent compilation cache on, empty at the start (the
        # before path's MCMC programs of one shape then load from it after the first)
        zoo.enable_compilation_cache(os.path.join(tmp, "jax"))
        t0 = time.perf_counter()
        if path == "after":
            # the current zoo (the after path's): a config in, an SBCResult out, read here as JSON
            summary = S.run_sbc(S.SBCConfig(model, "nuts", settings=settings), out_dir=tmp).to_json()
            results = [json.load(open(os.path.join(summary["folder"], f))) for f in sorted(os.listdir(summary["folder"]))]
        else:
            record = registry.get_model(model)
            problem = sbc_simulation.problem_for(record)
            resolved = sbc_simulation.resolve_engine(record, "nuts", settings)
            results = [sbc_simulation.simulate_one(problem.spec, problem.Phi, problem.Phi_new, resolved.fit, i, settings)
                       for i in range(sims)]
            summary = S.summarize(results, sbc_simulation.quantity_names(problem.spec, problem.Phi, problem.Phi_new), settings)
        wall = time.perf_counter() - t0
    return {"model": model, "path": path, "sims": sims, "wall_seconds": wall,
            "compile_seconds": compiling.seconds, "status": summary["status"], "reason": summary["reason"],
            "counts": summary.get("counts"), "layouts": sorted({r.get("layout", "mcmc") for r in results}),
            "load_before": load, "load_after": os.getloadavg()[0], "devices": jax.local_device_count(),
            "backend": jax.default_backend()}


def report(out: str) -> str:
    cells = {}
    folder = os.path.join(out, "cells")
    for f in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        c = json.load(open(os.path.join(folder, f)))
        cells[(c["model"], c["path"])] = c
    models = sorted({m for m, _ in cells})
    lines = [
        "# SBC of NUTS: before and after the compiled program (benchmarks/sbc_speed.py)", "",
        f"Date {DATE}; command `python benchmarks/sbc_speed.py{_command_args()}`; machine: {MACHINE} "
        f"({platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}). "
        "Each cell in a fresh process, with JAX's persistent compilation cache on and empty at its start "
        "(as `zoo sbc` runs); seconds are wall time of the whole SBC run (prior draws, NUTS, "
        "certification, ranks), compile = JAX's own tracing and compilation time within it. "
        "before: a fresh MCMC.run per simulation (compiles each time); after: one compiled NUTS program per "
        "batch shape. Verdicts compared, not ranks (different random streams).", "",
        "| model | sims | before s (compile) | after s (compile) | speed-up | verdict before | verdict after | "
        "not certified before / after | layout after | load 1-min |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for m in models:
        b, a = cells.get((m, "before")), cells.get((m, "after"))
        if not (a and b):
            continue
        ratio = (b["wall_seconds"] / b["sims"]) / (a["wall_seconds"] / a["sims"])
        nc = f"{b['counts']['not_converged']} / {a['counts']['not_converged']}"
        lines.append(
            f"| {m} | {b['sims']} / {a['sims']} | {b['wall_seconds']:.0f} ({b['compile_seconds']:.0f}) | "
            f"{a['wall_seconds']:.0f} ({a['compile_seconds']:.0f}) | {ratio:.1f}x | {b['status']} | {a['status']} | "
            f"{nc} | {', '.join(a['layouts'])} | {b['load_before']:.1f} / {a['load_before']:.1f} |")
    lines += ["", "speed-up: seconds per simulation before / after (the runs' simulation counts may differ)."]
    return "\n".join(lines) + "\n"


def _command_args() -> str:
    """The arguments that chose the cells (a --report run rewrites the table only)."""
    shown = [a for a in ARGS.split() if a != "--report"]
    return (" " + " ".join(shown)) if shown else ""


DATE = _dt.date.today().isoformat()
MACHINE = os.environ.get("ZOO_BENCH_MACHINE", "2-core development machine")
ARGS = ""


def main(argv=None):
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="ggsm-probit,grid-rvm")
    parser.add_argument("--sims", type=int, default=100)
    parser.add_argument("--before-sims", type=int, default=None, help="simulations of the before path (default --sims)")
    parser.add_argument("--paths", default="before,after")
    parser.add_argument("--before-rev", default="e67ca18", help="the revision the before cells import")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--redo", action="store_true")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    ARGS = " ".join(a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--cell"))
    if args.cell:
        model, path, sims, dest = args.cell.split("|")
        cell = run_cell(model, path, int(sims))
        tmp = dest + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(cell, fh, indent=1)
        os.replace(tmp, dest)
        return 0
    os.makedirs(os.path.join(args.out, "cells"), exist_ok=True)
    if not args.report:
        for model in args.models.split(","):
            for path in args.paths.split(","):
                sims = args.sims if path == "after" or args.before_sims is None else args.before_sims
                dest = os.path.join(args.out, "cells", f"{model}--{path}.json")
                if os.path.exists(dest) and not args.redo:
                    continue
                env = dict(os.environ)
                if path == "before":
                    sys.path.insert(0, HERE)
                    import revision_tree

                    env["PYTHONPATH"] = revision_tree.tree_at(args.before_rev)
                t0 = time.perf_counter()
                subprocess.run([sys.executable, os.path.abspath(__file__), "--cell", f"{model}|{path}|{sims}|{dest}"],
                               check=True, env=env)
                print(f"{model} {path}: {time.perf_counter() - t0:.0f} s", flush=True)
    text = report(args.out)
    with open(os.path.join(args.out, "table.md"), "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
