"""Time to a certified reference on every model's default case, against NUTS on the easiest
posterior of the same size (issue 18: "a certified reference in the time of an easy one").

Cases: each model's ``zoo compare --model M`` default (its record's default data, split 0,
no ``--param``; GGSM probit's default is q = 1), plus GGSM probit at q = 0.5. Every
measurement runs in a fresh subprocess (so its peak memory, ``ru_maxrss``, is its own),
without the disk cache of references and with JAX's persistent compilation cache on, as
``zoo compare`` has it, in a fresh empty folder per cell: every program is compiled once,
as on a first run (a program compiled again within the cell - a NUTS continuation of the
same length - is read back). Tasks per case:
* ``reference``: the record's reference chain through ``first_certified_reference`` - what
  ``zoo compare`` waits for - on the model's posterior: wall seconds to the reference, the
  sampler that gave it, every sampler tried before it (with its pilot's decision), then the
  same for each model variant that the default engines need (PCVM's surrogate, gridRVM's
  s-grid and rvm priors), so "all references" is everything ``zoo compare`` waits for.
* ``baseline``: NUTS with the default ``ReferenceConfig`` (4 chains x (1000 + 1000), the
  same certification) on a logistic regression with a N(0, I) prior, N(0, 1) inputs and
  labels drawn from it (true weights N(0, 1/P): the linear predictor has unit variance),
  with the case's N training points and P = the number of coordinates the model's NUTS
  samples - the easiest posterior of that size. Goal: reference seconds <= 5 x baseline.
* ``sampler:NAME``: every sampler of the model's chain alone on the model's posterior, with
  its record's settings but no doublings: minimum ESS (the smaller of bulk and tail over
  every diagnosed coordinate) per second, wall and without compilation, and peak memory.
* ``pilot``: the NUTS pilot of ``validation/references/`` (``PILOT``) on the case and on
  its baseline, and what ``pilot_decision`` concludes for the record's NUTS settings - on
  every case, whether or not its record asks for a pilot.

One JSON per (case, task) in ``<out>/cells/``, written atomically; a rerun skips finished
cells (``--redo`` recomputes). The tables go to ``<out>/table.md`` and everything to
``<out>/reference_time.json``.

    python benchmarks/reference_time.py                        # every case and task
    python benchmarks/reference_time.py --cases pcvm,bblr --tasks reference,baseline
"""
from __future__ import annotations

import argparse
import functools
import datetime as _dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace

import numpy as np

#: case -> (model, --param values)
CASES = {
    "pcvm": ("pcvm", {}),
    "ggsm-probit": ("ggsm-probit", {}),
    "ggsm-probit-q0.5": ("ggsm-probit", {"q": 0.5}),
    "gig-logistic": ("gig-logistic", {}),
    "grid-rvm": ("grid-rvm", {}),
    "bblr": ("bblr", {}),
}
TASKS = ("reference", "baseline", "samplers", "pilot")
GOAL = 5.0
HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------------------
# The baseline: a Gaussian-prior logistic regression of a given size
# --------------------------------------------------------------------------------------
class GaussianLogistic:
    """y ~ Bernoulli(sigmoid(X w)), w ~ N(0, I): the easiest posterior of its size."""

    name = "gaussian-logistic"

    def model(self, Phi, y=None):
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        Phi = jnp.asarray(Phi)
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=Phi @ w), obs=y)

    def sites(self, n_basis):
        from zoo.models.base import Site

        return (Site("w", (n_basis,), "real", ("basis",)),)

    def linear_predictor(self, params, Phi):
        import jax.numpy as jnp

        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        import jax

        return jax.nn.sigmoid(f)

    def to_dict(self):
        return {"model": self.name}


def baseline_data(n: int, p: int):
    rng = np.random.default_rng(1000 * n + p)
    X = rng.standard_normal((n, p))
    w = rng.standard_normal(p) / np.sqrt(p)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ w))).astype(float)
    return X, y


# --------------------------------------------------------------------------------------
# Helpers run in the child
# --------------------------------------------------------------------------------------
def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu_seconds() -> float:
    """CPU seconds of this process so far, every thread (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _sampled_size(spec, Phi, y) -> int:
    """How many coordinates NUTS samples: the sizes of the model's latent sample sites."""
    import jax
    from numpyro import handlers

    trace = handlers.trace(handlers.seed(spec.model, jax.random.PRNGKey(0))).get_trace(Phi, y=y)
    return int(sum(np.size(s["value"]) for s in trace.values() if s["type"] == "sample" and not s["is_observed"]))


@functools.lru_cache(maxsize=None)
def _problem(out: str, case: str):
    """(spec, Phi, y, variants needed by the default engines), prepared in the cell's own
    process. Never read back from the output folder: a pickle there would run whatever code
    someone put in it, so each cell's subprocess selects the hyper-parameters again (seconds
    to a minute per case, outside the timed sampling)."""
    from zoo import data as datasets
    from zoo.validation.records import registry

    model, params = CASES[case]
    record = registry.get_model(model)
    split = datasets.load(record.default_data, 0, standardize=not record.raw_inputs)
    prepared = registry.prepare(model, split, params)
    needed = sorted({record.engine(e).variant for e in record.default_engines} - {None})
    return (prepared.spec, np.asarray(prepared.Phi_train), np.asarray(prepared.y_train),
            {v: prepared.variants[v] for v in needed})


def _tried_entry(t) -> dict:
    from zoo.validation.references import Reference

    if not isinstance(t, Reference):  # ran out of time
        return {"sampler": t.sampler, "certified": False, "time_limit": t.time_limit}
    d = t.diagnostics
    return {"sampler": t.sampler, "certified": bool(t.certified), "seconds": float(t.seconds),
            "compile_seconds": float(t.compile_seconds), "rhat_max": d["rhat_max"],
            "ess_bulk_min": d["ess_bulk_min"], "ess_tail_min": d["ess_tail_min"],
            "divergences": d["divergences"], "draws_per_chain": d["n_draws"],
            "warmup": t.provenance["sampler"].get("num_warmup"),
            "pilot": t.provenance.get("pilot"), "failures": list(t.failures[:3])}


def _chain_run(spec, Phi, y, configs) -> dict:
    from zoo.validation.references import first_certified_reference

    t0, c0 = time.perf_counter(), _cpu_seconds()
    ref, tried = first_certified_reference(spec, Phi, y, configs=configs)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    return {"wall_seconds": wall, "cpu_seconds": cpu, "sampler": ref.sampler, "certified": bool(ref.certified),
            "tried": [_tried_entry(t) for t in tried]}


def run_task(out: str, case: str, task: str) -> dict:
    """One cell, in this (fresh) process."""
    import zoo  # float64, host devices

    model = CASES[case][0]
    jax_cache = tempfile.mkdtemp(prefix="zoo-reference-time-jax-")
    zoo.enable_compilation_cache(jax_cache)
    try:
        return _run_task(out, case, task, model)
    finally:
        shutil.rmtree(jax_cache, ignore_errors=True)


def _run_task(out, case, task, model) -> dict:
    from zoo.validation.references import (
        PILOT,
        ReferenceConfig,
        pilot_config,
        pilot_decision,
        run_reference,
    )
    from zoo.validation.runs.compare import default_references

    spec, Phi, y, variants = _problem(out, case)
    n, p = int(Phi.shape[0]), _sampled_size(spec, Phi, y)
    cell = {"case": case, "model": model, "params": CASES[case][1], "task": task, "n": n, "p": p,
            "spec": spec.to_dict(), "load_start": list(os.getloadavg()),
            "peak_mb_before": _peak_mb()}
    configs = default_references(model)
    warnings.simplefilter("ignore")  # uncertified runs are recorded, not warned about
    if task == "reference":
        cell["chain"] = [c.sampler + (" (pilot)" if c.pilot else "") for c in configs]
        cell["main"] = _chain_run(spec, Phi, y, configs)
        cell["variants"] = {}
        for name, vspec in variants.items():
            cell["variants"][name] = dict(_chain_run(vspec, Phi, y, configs), p=_sampled_size(vspec, Phi, y))
        cell["all_wall_seconds"] = cell["main"]["wall_seconds"] + sum(
            v["wall_seconds"] for v in cell["variants"].values())
    elif task == "baseline":
        sizes = {p} | {_sampled_size(v, Phi, y) for v in variants.values()}
        cell["baselines"] = {}
        for size in sorted(sizes):
            X, yb = baseline_data(n, size)
            t0, c0 = time.perf_counter(), _cpu_seconds()
            ref = run_reference(GaussianLogistic(), X, yb, config=ReferenceConfig())
            cell["baselines"][str(size)] = dict(_tried_entry(ref), wall_seconds=time.perf_counter() - t0,
                                                cpu_seconds=_cpu_seconds() - c0)
    elif task.startswith("sampler:"):
        name = task.split(":", 1)[1]
        config = next(c for c in configs if c.sampler == name)
        config = replace(config, max_doublings=0, pilot=False)
        t0, c0 = time.perf_counter(), _cpu_seconds()
        ref = run_reference(spec, Phi, y, config=config)
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        entry = _tried_entry(ref)
        ess = min(entry["ess_bulk_min"], entry["ess_tail_min"])
        warm = max(entry["seconds"] - entry["compile_seconds"], 1e-9)
        cell["run"] = dict(entry, wall_seconds=wall, cpu_seconds=cpu, min_ess=ess, min_ess_per_second=ess / entry["seconds"],
                           min_ess_per_warm_second=ess / warm,
                           settings={k: v for k, v in config.sampler_settings().items()})
    elif task == "pilot":
        nuts = next((c for c in configs if c.sampler == "nuts"), ReferenceConfig())
        cell["pilot_rule"] = {"num_warmup": PILOT.num_warmup, "num_samples": PILOT.num_samples,
                              "rhat_max": PILOT.rhat_max, "ess_margin": PILOT.ess_margin}
        cell["runs"] = {}
        X, yb = baseline_data(n, p)
        for label, (s, A, b, cfg) in {"model": (spec, Phi, y, nuts),
                                      "baseline": (GaussianLogistic(), X, yb, ReferenceConfig())}.items():
            t0 = time.perf_counter()
            ref = run_reference(s, A, b, config=pilot_config(cfg))
            wall = time.perf_counter() - t0
            decision = pilot_decision(ref.diagnostics, cfg)
            cell["runs"][label] = {"wall_seconds": wall, "certified": bool(ref.certified),
                                   "nuts_settings": {"num_warmup": cfg.num_warmup, "num_samples": cfg.num_samples,
                                                     "max_doublings": cfg.max_doublings,
                                                     "target_accept": cfg.target_accept},
                                   "decision": decision}
    else:
        raise ValueError(f"unknown task {task!r}")
    cell["peak_mb"] = _peak_mb()
    cell["load_end"] = list(os.getloadavg())
    cell["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    cell["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    return cell


# --------------------------------------------------------------------------------------
# The parent: cells in fresh subprocesses, then the tables
# --------------------------------------------------------------------------------------
def _cell_path(out, case, task):
    return os.path.join(out, "cells", f"{case}--{task.replace(':', '-')}.json")


def _tasks_of(case: str, tasks) -> list[str]:
    from zoo.validation.runs.compare import default_references

    out = []
    for task in tasks:
        if task == "samplers":
            out += [f"sampler:{c.sampler}" for c in default_references(CASES[case][0])]
        else:
            out.append(task)
    return out


def run_cell_in_child(out: str, case: str, task: str, timeout: float | None) -> dict | None:
    path = _cell_path(out, case, task)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", case, task, "--out", out]
    print(f"{case} {task} ...", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        print(f"  ran out of time ({timeout:g} s)", flush=True)
        return None
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        raise RuntimeError(f"{case} {task} failed (exit code {proc.returncode})")
    with open(path) as fh:
        cell = json.load(fh)
    print(f"  done in {time.perf_counter() - t0:.0f} s, peak {cell['peak_mb']:.0f} MB", flush=True)
    return cell


def _f(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def _tried_text(t: dict) -> str:
    if t.get("time_limit") is not None:
        return f"{t['sampler']}: ran out of time"
    pilot = t.get("pilot") or {}
    word = "certified" if t["certified"] else ("stopped by its pilot" if pilot and not pilot.get("go") else "no")
    return (f"{t['sampler']} {word} ({_f(t['seconds'])} s, {t['warmup']} + {t['draws_per_chain']} a chain, "
            f"R-hat {t['rhat_max']:.3f}, ESS {t['ess_bulk_min']:.0f}/{t['ess_tail_min']:.0f})")


def tables(cells: dict) -> str:
    lines = ["# Time to a certified reference (benchmarks/reference_time.py)", ""]
    dates = sorted(c["date"] for c in cells.values())
    loads = [c["load_start"][0] for c in cells.values()] + [c["load_end"][0] for c in cells.values()]
    if dates:
        lines += [f"Cells measured {dates[0]} .. {dates[-1]}; 1-minute load average {min(loads):.1f} .. "
                  f"{max(loads):.1f} on {next(iter(cells.values()))['machine']['cpus']} cores. Fresh process per "
                  "cell, no reference cache, JAX's persistent compilation cache in a fresh folder per cell "
                  "(every program compiled once, as on a first run of zoo compare).", ""]
    lines += ["## Seconds to the reference against NUTS on a Gaussian-prior logistic regression of the same size", "",
              f"ratio = seconds to the model's reference / baseline seconds (goal <= {GOAL:g}), in wall time and in "
              "CPU time (every thread of the process: less sensitive to the load other jobs put on the machine, "
              "which moves the wall seconds, compilation above all, by up to 2x between cells); all references = "
              "the model's and its variants' (everything the default zoo compare waits for), against the sum of "
              "their baselines (wall).", "",
              "| case | N | P | reference | seconds (CPU) | baseline s (CPU) | ratio wall | ratio CPU | "
              "all references s | ratio (all) | peak MB (baseline's) | tried |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        ref = cells.get(f"{case}/reference")
        base = cells.get(f"{case}/baseline")
        if ref is None:
            continue
        main = ref["main"]
        b = base["baselines"] if base else {}
        b_main = b.get(str(ref["p"]), {}).get("wall_seconds")
        b_cpu = b.get(str(ref["p"]), {}).get("cpu_seconds")
        ratio = main["wall_seconds"] / b_main if b_main else None
        ratio_cpu = main["cpu_seconds"] / b_cpu if b_cpu and main.get("cpu_seconds") else None
        b_all = None
        if b and all(str(v["p"]) in b for v in ref["variants"].values()):
            b_all = b_main + sum(b[str(v["p"])]["wall_seconds"] for v in ref["variants"].values())
        ratio_all = ref["all_wall_seconds"] / b_all if b_all else None
        word = main["sampler"] + ("" if main["certified"] else " (NOT certified)")
        tried = "; ".join(_tried_text(t) for t in main["tried"])
        for vname, v in ref["variants"].items():
            tried += f"; variant {vname} (P = {v['p']}): " + "; ".join(_tried_text(t) for t in v["tried"])
        lines.append(f"| {case} | {ref['n']} | {ref['p']} | {word} | {main['wall_seconds']:.1f} "
                     f"({_f(main.get('cpu_seconds'))}) | {_f(b_main)} ({_f(b_cpu)}) | {_f(ratio, '.2f')} | "
                     f"{_f(ratio_cpu, '.2f')} | {ref['all_wall_seconds']:.1f} | {_f(ratio_all, '.2f')} | "
                     f"{ref['peak_mb']:.0f} ({_f(base['peak_mb'] if base else None, '.0f')}) | {tried} |")
    lines += ["", "## Minimum ESS per second of each sampler alone (record settings, no doublings)", "",
              "min ESS = the smaller of bulk and tail ESS over every diagnosed coordinate; per second of the whole "
              "run (warm-up and compilation included) and per second without compilation.", "",
              "| case | sampler | warm-up + draws a chain | certified | R-hat | min ESS | seconds (compile) | "
              "min ESS / s | min ESS / s without compile | peak MB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, c in cells.items():
        if not c["task"].startswith("sampler:"):
            continue
        r = c["run"]
        lines.append(f"| {c['case']} | {r['sampler']} | {r['warmup']} + {r['draws_per_chain']} | "
                     f"{'yes' if r['certified'] else 'no'} | {r['rhat_max']:.3f} | {r['min_ess']:.0f} | "
                     f"{r['seconds']:.1f} ({r['compile_seconds']:.1f}) | {r['min_ess_per_second']:.1f} | "
                     f"{r['min_ess_per_warm_second']:.1f} | {c['peak_mb']:.0f} |")
    lines += ["", "## The NUTS pilot on each case and on its baseline", "",
              "The pilot (`validation/references/`, `PILOT`) judged against the record's NUTS settings "
              "(the baseline against the default ReferenceConfig); `go` = the full run may certify.", "",
              "| case | run | pilot s | R-hat | ESS bulk/tail | divergences | E-BFMI | at max depth | "
              "projected ESS bulk/tail (cap) | decision |", "|---|---|---|---|---|---|---|---|---|---|"]
    for case in CASES:
        c = cells.get(f"{case}/pilot")
        if c is None:
            continue
        for label, r in c["runs"].items():
            d = r["decision"]
            verdict = ("certified by itself" if r["certified"] else
                       "go" if d["go"] else "stop: " + "; ".join(d["reasons"]))
            lines.append(f"| {case} | {label} | {r['wall_seconds']:.1f} | {d['rhat_max']:.3f} | "
                         f"{d['ess_bulk_min']:.0f}/{d['ess_tail_min']:.0f} | {d['divergences']} | "
                         f"{_f(d['ebfmi_min'], '.2f')} | {_f(100 * d['treedepth_fraction'], '.1f')}% | "
                         f"{d['projected_ess_bulk']:.0f}/{d['projected_ess_tail']:.0f} ({d['cap_draws']}) | "
                         f"{verdict} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"any of {', '.join(TASKS)}")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "reference_time"))
    ap.add_argument("--redo", action="store_true", help="recompute cells that exist")
    ap.add_argument("--cell-timeout", type=float, default=1800.0, help="seconds per cell (default 1800)")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "TASK"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    if args.child:
        case, task = args.child
        cell = run_task(out, case, task)
        from zoo.validation.base.atomic import write_json_atomic

        write_json_atomic(cell, _cell_path(out, case, task))
        return 0
    cases = [c for c in args.cases.split(",") if c]
    tasks = [t for t in args.tasks.split(",") if t]
    bad = [c for c in cases if c not in CASES] + [t for t in tasks if t not in TASKS]
    if bad:
        ap.error(f"unknown case or task: {bad}; cases: {', '.join(CASES)}; tasks: {', '.join(TASKS)}")
    for case in cases:
        for task in _tasks_of(case, tasks):
            if args.redo or not os.path.exists(_cell_path(out, case, task)):
                run_cell_in_child(out, case, task, args.cell_timeout)
    cells = {}
    folder = os.path.join(out, "cells")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as fh:
                c = json.load(fh)
            cells[f"{c['case']}/{c['task']}"] = c
    from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

    text = tables(cells)
    write_text_atomic(os.path.join(out, "table.md"), text)
    write_json_atomic({"goal_ratio": GOAL, "cells": cells}, os.path.join(out, "reference_time.json"))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
