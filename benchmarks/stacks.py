"""The same runs on the two stacks the zoo supports, side by side (issue 53, item 4).

Python 3.11 installs JAX 0.10 and ArviZ 0.2x; Python 3.12+ today's JAX and ArviZ 1.x
(pyproject.toml). One environment holds one stack, so each runs the jobs in its own
environment and a last step puts the two side by side:

    python benchmarks/stacks.py run            # once in each environment (each with its own tag)
    python benchmarks/stacks.py side-by-side   # any environment: results/stacks/table.md

The jobs (each from an empty reference cache and an empty JAX cache, timed as a user waits):
``zoo compare`` as the README runs it (PCVM on Ripley, em / laplace / ep), ``zoo compare
--model ggsm-probit`` and ``--model bblr`` (their defaults), and ``zoo study example`` (two
more comparisons, SBC of PCVM's EP and Laplace engines, and PCVM EP's defect battery).
Kept per stack under ``results/stacks/<tag>/``: each comparison's results.json, the study's
summary, and ``stack.json`` (versions, machine, date, seconds per job).

What must agree (the side-by-side step checks and says): every verdict's status; the
reference's certificate; what an engine computes without the reference (test error, AUC,
iterations, its objective), which does not depend on Monte Carlo, to 1e-6 relative; and what
is measured against the reference (standardized mean errors, sd ratios) within the
reference's Monte Carlo error: two independent references' means differ by about
sqrt(2 / ESS) posterior sds, so a difference over 4 sqrt(2 / ESS_bulk,min) is flagged.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from scipy.stats import fisher_exact

from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "stacks")
JOBS = (
    ("compare-default", ["compare"]),
    ("compare-ggsm-probit", ["compare", "--model", "ggsm-probit"]),
    ("compare-bblr", ["compare", "--model", "bblr"]),
    ("study-example", ["study", "example"]),
)
#: quantities an engine computes without the reference: equal across stacks but for round-off
ENGINE_ONLY = ("test_error", "auc", "test_log_lik", "n_iter")
ROUND_OFF = 1e-6
#: a reference-relative difference beyond this many sqrt(2 / ESS) is flagged
MC_WIDTH = 4.0


def _versions() -> dict[str, str]:
    import arviz
    import jax
    import numpy
    import numpyro
    import scipy

    return {"python": platform.python_version(), "jax": jax.__version__, "numpyro": numpyro.__version__,
            "arviz": arviz.__version__, "numpy": numpy.__version__, "scipy": scipy.__version__}


def tag_of(versions: dict[str, str]) -> str:
    return f"py{''.join(versions['python'].split('.')[:2])}-arviz{versions['arviz'].split('.')[0]}"


def run(out: str, jobs) -> str:
    versions = _versions()
    folder = os.path.join(out, tag_of(versions))
    os.makedirs(folder, exist_ok=True)
    zoo = os.path.join(os.path.dirname(sys.executable), "zoo")
    record = {"versions": versions, "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
              "machine": f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)",
              "command": "python " + " ".join(sys.argv), "jobs": {}}
    for name, args in jobs:
        with tempfile.TemporaryDirectory(prefix="zoo-stacks-") as scratch:
            env = {**os.environ, "ZOO_CACHE_DIR": os.path.join(scratch, "cache")}
            env.pop("ZOO_JAX_CACHE", None)
            where = os.path.join(scratch, "out")
            t0 = time.perf_counter()
            done = subprocess.run([zoo, *args, "--out", where, "--no-progress"], env=env, cwd=scratch,
                                  capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            kept = _keep(where, os.path.join(folder, name))
        record["jobs"][name] = {"args": args, "seconds": seconds, "rc": done.returncode, "kept": kept,
                                "stderr_tail": done.stderr[-2000:]}
        print(f"{tag_of(versions)} {name}: rc {done.returncode}, {seconds:.0f} s", flush=True)
    write_json_atomic(record, os.path.join(folder, "stack.json"))
    return folder


def _keep(src: str, dst: str) -> list[str]:
    """The JSON summaries of a job's output (results.json, a study's JSON files), not its figures or draws."""
    kept = []
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "work"]  # a study's per-simulation files: thousands
        for f in files:
            if f.endswith(".json"):
                rel = os.path.relpath(os.path.join(root, f), src)
                os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
                shutil.copyfile(os.path.join(root, f), os.path.join(dst, rel))
                kept.append(rel)
    return sorted(kept)


# --------------------------------------------------------------------------------------
# Side by side
# --------------------------------------------------------------------------------------
def _load(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _verdicts(engine: dict) -> dict[str, str]:
    return {k: (engine.get(k) or {}).get("status", "-") for k in ("verdict", "joint_verdict", "distribution_verdict")}


def compare_rows(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """Table rows and the list of disagreements of two results.json files of one comparison."""
    rows, problems = [], []
    ref_a, ref_b = a.get("reference") or {}, b.get("reference") or {}
    ess = min(float(ref_a.get("ess_bulk_min") or math.nan), float(ref_b.get("ess_bulk_min") or math.nan))
    mc = math.sqrt(2.0 / ess) if ess > 0 else math.nan
    cert = (ref_a.get("certified"), ref_b.get("certified"))
    same_draws = all(ref_a.get(k) == ref_b.get(k) for k in ("rhat_max", "ess_bulk_min", "ess_tail_min"))
    rows.append(f"| reference ({ref_a.get('sampler_name')}) | certified {cert[0]} / {cert[1]}; ESS_bulk,min {ess:.0f}: "
                f"MC scale sqrt(2/ESS) = {mc:.3f} sd; R-hat and ESS {'identical' if same_draws else 'differ'} | | | |")
    if cert[0] != cert[1]:
        problems.append(f"reference certified {cert[0]} vs {cert[1]}")
    for name in sorted(set(a.get("engines", {})) | set(b.get("engines", {}))):
        ea, eb = a["engines"].get(name), b["engines"].get(name)
        if ea is None or eb is None:
            problems.append(f"{name}: run on one stack only")
            continue
        va, vb = _verdicts(ea), _verdicts(eb)
        same_verdicts = va == vb
        if not same_verdicts:
            problems.append(f"{name}: verdicts {va} vs {vb}")
        own = []
        for key in ENGINE_ONLY:
            x, y = ea.get(key), eb.get(key)
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                rel = abs(x - y) / max(abs(x), abs(y), 1e-300)
                own.append(rel)
                if rel > ROUND_OFF:
                    problems.append(f"{name}: {key} {x} vs {y}")
        against = []
        for key in ("std_mean_err", "sd_ratio"):
            x, y = ea.get(key), eb.get(key)
            if isinstance(x, list) and isinstance(y, list) and len(x) == len(y) and x:
                worst = max(abs(p - q) for p, q in zip(x, y) if p is not None and q is not None)
                against.append((key, worst / mc if mc == mc else math.nan))
        over = [f"{k} {r:.1f}" for k, r in against if r > MC_WIDTH]
        if over:
            problems.append(f"{name}: beyond {MC_WIDTH:g} MC scales: {', '.join(over)}")
        rows.append(
            f"| {name} | {' / '.join(va.values())}{'' if same_verdicts else ' vs ' + ' / '.join(vb.values())} | "
            f"{max(own) if own else math.nan:.1e} | "
            + "; ".join(f"{k}: {r:.2f}" for k, r in against) + f" | {'yes' if same_verdicts else '**no**'} |")
    return rows, problems


def side_by_side(out: str) -> str:
    tags = sorted(t for t in os.listdir(out) if os.path.isfile(os.path.join(out, t, "stack.json")))
    if len(tags) != 2:
        raise SystemExit(f"side-by-side needs two stacks' runs in {out}, found {tags}")
    stacks = {t: _load(os.path.join(out, t, "stack.json")) for t in tags}
    lines = ["# The same runs on both stacks", ""]
    for t in tags:
        s = stacks[t]
        v = s["versions"]
        lines.append(f"- **{t}**: Python {v['python']}, jax {v['jax']}, numpyro {v['numpyro']}, arviz {v['arviz']}, "
                     f"numpy {v['numpy']}; {s['date']}, `{s['command']}`, {s['machine']}.")
    lines += ["", "Seconds a user waits (empty caches):", "", f"| job | {' | '.join(tags)} | ratio |", "|---|---|---|---|"]
    for job, _ in JOBS:
        secs = [stacks[t]["jobs"].get(job, {}).get("seconds", math.nan) for t in tags]
        rcs = [stacks[t]["jobs"].get(job, {}).get("rc") for t in tags]
        lines.append(f"| {job} | " + " | ".join(f"{s:.0f}" + ("" if rc == 0 else f" (rc {rc})") for s, rc in zip(secs, rcs))
                     + f" | {secs[1] / secs[0]:.2f} |")
    problems_all = []
    for job, args in JOBS:
        if args[0] != "compare":
            continue
        paths = [os.path.join(out, t, job, "results.json") for t in tags]
        if not all(os.path.exists(p) for p in paths):
            problems_all.append(f"{job}: results.json missing on a stack")
            continue
        rows, problems = compare_rows(*(_load(p) for p in paths))
        problems_all += [f"{job}: {p}" for p in problems]
        lines += ["", f"## {job}", "",
                  "| engine | verdicts (marginal / joint / distribution) | engine-only, largest relative difference "
                  "| against the reference, largest difference in MC scales | verdicts equal |",
                  "|---|---|---|---|---|", *rows]
    lines += ["", "## study-example", ""] + study_lines(out, tags, problems_all)
    lines += ["", "## Disagreements", ""] + ([f"- {p}" for p in problems_all] or ["None."])
    text = "\n".join(lines) + "\n"
    write_text_atomic(os.path.join(out, "table.md"), text)
    return text


def study_lines(out: str, tags, problems: list[str]) -> list[str]:
    """Every status a study recorded (its cells' JSON: SBC verdicts, battery detection counts), side by side."""
    found = []
    for t in tags:
        statuses = {}
        root = os.path.join(out, t, "study-example")
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "work"]
            for f in files:
                if not f.endswith(".json"):
                    continue
                try:
                    data = _load(os.path.join(dirpath, f))
                except (OSError, ValueError):
                    continue
                for path, status in _statuses(data, os.path.relpath(os.path.join(dirpath, f), root)):
                    statuses[path] = status
        found.append(statuses)
    keys = sorted(set(found[0]) | set(found[1]))
    counts = [k for k in keys if _count(found[0].get(k)) and _count(found[1].get(k))]
    lines = [f"| what | {' | '.join(tags)} | agree |", "|---|---|---|---|"]
    for k in keys:
        x, y = found[0].get(k, "-"), found[1].get(k, "-")
        if k in counts:
            # detections over independent references are binomial counts: equal rates, not equal
            # counts, are what must hold - Fisher's exact test, Bonferroni over the rows
            (dx, nx), (dy, ny) = _count(x), _count(y)
            p = fisher_exact([[dx, nx - dx], [dy, ny - dy]])[1]
            agree = p >= 0.05 / len(counts)
            verdict = "yes" if x == y else f"yes (Fisher p = {p:.2f})" if agree else f"**no** (Fisher p = {p:.2g})"
        else:
            agree = x == y
            verdict = "yes" if agree else "**no**"
        lines.append(f"| {k} | {x} | {y} | {verdict} |")
        if not agree:
            problems.append(f"study-example: {k}: {x} vs {y}")
    lines += ["", f"Detection counts compared by Fisher's exact test at 0.05 / {len(counts)} (Bonferroni over "
                  "the count rows): each stack's battery draws its own references, so the counts are independent "
                  "binomial draws of the same rates."]
    return lines


def _count(text):
    """(detected, trials) of an 'x / n detected' cell, else None."""
    if not isinstance(text, str) or not text.endswith(" detected"):
        return None
    x, n = text[: -len(" detected")].split(" / ")
    return int(x), int(n)


def _statuses(data, where: str, path: str = ""):
    """(path, status) of every 'status' field, and every 'detections'/'trials' pair, in a JSON value."""
    if isinstance(data, dict):
        if "status" in data and isinstance(data["status"], str):
            yield f"{where}:{path or '/'}", data["status"]
        if "detected" in data and "trials" in data:
            yield (f"{where}: {data.get('detector')} x {data.get('defect')}",
                   f"{data['detected']} / {data['trials']} detected")
        for k, v in data.items():
            if k in ("quantities", "worst"):
                continue
            yield from _statuses(v, where, f"{path}/{k}")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _statuses(v, where, f"{path}[{i}]")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "side-by-side"))
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--only", default=None, help="comma-separated job names (run): a subset, to try the script")
    args = parser.parse_args(argv)
    if args.what == "run":
        jobs = [j for j in JOBS if args.only is None or j[0] in args.only.split(",")]
        print(run(args.out, jobs))
    else:
        print(side_by_side(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
