"""The hostile tester's cases (issue 50), rerun as a user would: each one a `zoo` command in
a fresh folder, with what the tester handed the zoo (a broken engine, a file in the current
folder, a hand-edited stored result, a bad value, the C locale), and one line of what came
of it: the exit status, the seconds to the end (or to the first error), whether a report
was written and what it or the last error line says.

    python benchmarks/hostile_cases.py --label after
    # the same cases against an older tree of the package (a `zoo` folder or a link to one,
    # found first on PYTHONPATH; its venv's packages the same):
    python benchmarks/hostile_cases.py --label before --pythonpath /tmp/old-zoo-parent
    python benchmarks/hostile_cases.py --table           # before and after, side by side

Each case runs the package's command line with ``python -P`` (no current folder on the path
unless the zoo puts it there), a fresh config folder (the signing key) and a reference cache
per label (the short NUTS settings below; the first case samples it, the others read it).
Results: results/hostile_cases_<label>.json; the table compares the labels found there.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: short reference settings, as the tests use: every case's comparison reads one cache entry
NUTS = ["--chains", "2", "--warmup", "300", "--samples", "300", "--param", "width=0.7", "--no-progress"]

HOSTILE_MODULE = textwrap.dedent('''
    """Engines a hostile tester wrote."""
    import sys
    import time

    import numpy as np

    from zoo.inference import expectation_propagation
    from zoo.inference.posterior import FitInfo, GaussianPosterior


    def _gaussian(spec, Phi, mean, chol):
        return GaussianPosterior(spec, spec.sites(Phi.shape[1]), mean, chol,
                                 FitInfo("hostile", True, 0, "", 0.0, 0.0, "", {}))


    def zero_chol(spec, Phi, y, *, config=None):
        d = Phi.shape[1] + 1
        return _gaussian(spec, Phi, np.zeros(d), np.zeros((d, d)))


    def huge_chol(spec, Phi, y, *, config=None):
        d = Phi.shape[1] + 1
        return _gaussian(spec, Phi, np.zeros(d), 1e200 * np.eye(d))


    def exits(spec, Phi, y, *, config=None):
        sys.exit(0)


    def hangs(spec, Phi, y, *, config=None):
        while True:
            time.sleep(3600)


    def nan_mean(spec, Phi, y, *, config=None):
        post = expectation_propagation.fit(spec, Phi, y)
        post.mean_vec[1] = np.nan
        return post
''')

RAISES_ON_IMPORT = 'raise ImportError("a file of the current folder was imported: {name}")\n'


def _write(folder, name, text):
    with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
        fh.write(text)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith(" ")]
    return lines[-1][:300] if lines else ""


def _report_outcome(folder: str) -> str:
    """What results.json says of each engine (its failure, or its marginal verdict)."""
    path = os.path.join(folder, "out", "results.json")
    if not os.path.exists(path):
        return "no report"
    with open(path, encoding="utf-8") as fh:
        res = json.load(fh)
    rows = []
    for name, row in res["engines"].items():
        rows.append(f"{name}: " + (f"failed: {row['failure']}" if row.get("failure")
                                   else (row.get("verdict") or {}).get("status", "measured")))
    return "report; " + "; ".join(rows)


# --------------------------------------------------------------------------------------
# The cases: (name, what the tester found, setup(folder), args, options)
# --------------------------------------------------------------------------------------
def _hostile(folder):
    _write(folder, "hostile.py", HOSTILE_MODULE)


def _shadows(folder):
    for name in ("yaml", "h5py", "dask", "netCDF4"):
        _write(folder, f"{name}.py", RAISES_ON_IMPORT.format(name=name))


def _json_engine(folder):
    _write(folder, "json.py", "def fit(spec, Phi, y, *, config=None):\n    return None\n")


def _foreign_cache_files(folder):
    os.makedirs(os.path.join(folder, "cache"), exist_ok=True)
    for name in ("notes-0123456789abcdef0123456789abcdef.json", "data-0123456789abcdef0123456789abcdef.nc",
                 ".tmp-my-draft.txt"):
        _write(os.path.join(folder, "cache"), name, "a user's file\n")


def _count_left(folder):
    return f"{len(os.listdir(os.path.join(folder, 'cache')))} of 3 user files left"


def _stale_outputs(folder):
    os.makedirs(os.path.join(folder, "out"), exist_ok=True)
    for name in ("em.nc", "laplace.nc", "reference_surrogate.nc"):
        _write(os.path.join(folder, "out"), name, "an earlier run's output\n")


def _stale_left(folder):
    left = sorted(f for f in os.listdir(os.path.join(folder, "out")) if f in ("em.nc", "laplace.nc",
                                                                               "reference_surrogate.nc"))
    return f"earlier outputs beside the new report: {', '.join(left) or 'none'}"


def _earlier_left(folder):
    left = sorted(f for f in os.listdir(os.path.join(folder, "out")) if f.endswith(".nc"))
    return f"netCDF files beside the new report: {', '.join(left)}"


CASES = [
    {"name": "engine with an all-zero Cholesky factor", "setup": _hostile,
     "args": ["compare", "--engines", "ep,hostile:zero_chol", *NUTS]},
    {"name": "engine with a x1e200 Cholesky factor", "setup": _hostile,
     "args": ["compare", "--engines", "ep,hostile:huge_chol", *NUTS]},
    {"name": "engine that calls sys.exit(0)", "setup": _hostile,
     "args": ["compare", "--engines", "ep,hostile:exits", *NUTS]},
    {"name": "engine that puts NaN in its posterior after construction", "setup": _hostile,
     "args": ["compare", "--engines", "ep,hostile:nan_mean", *NUTS]},
    {"name": "engine that never returns (after: --engine-time-limit 20)", "setup": _hostile,
     "args": ["compare", "--engines", "ep,hostile:hangs", *NUTS], "after_args": ["--engine-time-limit", "20"],
     "timeout": 180},
    {"name": "yaml.py, h5py.py, dask.py, netCDF4.py in the current folder", "setup": _shadows,
     "args": ["compare", "--engines", "ep", *NUTS]},
    {"name": "a user module json.py named as the engine's module", "setup": _json_engine,
     "args": ["compare", "--engines", "json:fit", *NUTS]},
    {"name": "zoo cache --clear beside the user's files", "setup": _foreign_cache_files,
     "args": ["cache", "--clear", "--cache-dir", "{folder}/cache"], "after": _count_left, "own_cache": True},
    {"name": "a new report in an old output folder", "setup": _stale_outputs,
     "args": ["compare", "--engines", "ep", *NUTS], "after": _stale_left},
    {"name": "a new report where an earlier zoo report (ep, laplace) was",
     "before_args": ["compare", "--engines", "ep,laplace", *NUTS], "args": ["compare", "--engines", "ep", *NUTS],
     "after": _earlier_left},
    {"name": "zoo datasets in the C locale", "args": ["datasets"],
     "env": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}, "drop_env": ["PYTHONIOENCODING"]},
    {"name": "zoo reproduce --help in the C locale", "args": ["reproduce", "--help"],
     "env": {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}, "drop_env": ["PYTHONIOENCODING"]},
    {"name": "--param alpha=0", "args": ["compare", "--param", "alpha=0", "--no-progress"]},
    {"name": "--seed -1", "args": ["compare", "--seed", "-1", *NUTS]},
    {"name": "reproduce horii-table1 --n-train 1", "args": ["reproduce", "horii-table1", "--n-train", "1",
                                                           "--jobs", "1", "--no-progress"], "timeout": 300},
]


def run_case(case, *, python: str, pythonpath: str | None, label: str, cache: str, config: str) -> dict:
    folder = tempfile.mkdtemp(prefix="zoo-hostile-")
    try:
        if case.get("setup"):
            case["setup"](folder)
        args = [a.replace("{folder}", folder) for a in case["args"]]
        if label != "before":
            args += case.get("after_args", [])
        if args[0] in ("compare", "sbc", "study") and "--out" not in args:
            args += ["--out", os.path.join(folder, "out")]
        if args[0] == "compare" and not case.get("own_cache"):
            args += ["--cache-dir", cache]
        env = {k: v for k, v in os.environ.items() if k not in case.get("drop_env", ())}
        env.update({"ZOO_CONFIG_DIR": config, "JAX_PLATFORMS": "cpu", **case.get("env", {})})
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        cmd = [python, "-P", "-c", "import sys; from zoo.cli import main; sys.exit(main())", *args]
        if case.get("before_args"):  # an earlier run in the same folder, as the user made it
            first = [a.replace("{folder}", folder) for a in case["before_args"]]
            first += ["--out", os.path.join(folder, "out"), "--cache-dir", cache]
            subprocess.run(cmd[:4] + first, cwd=folder, env=env, capture_output=True, timeout=600)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=case.get("timeout", 600), encoding="utf-8", errors="replace")
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as err:
            rc = "killed at the time limit"
            stdout = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            stderr = err.stderr.decode() if isinstance(err.stderr, bytes) else (err.stderr or "")
        seconds = time.perf_counter() - t0
        outcome = case["after"](folder) if case.get("after") else (
            _report_outcome(folder) if args[0] == "compare" else "")
        traceback = "Traceback (most recent call last)" in stderr
        return {"name": case["name"], "command": "zoo " + " ".join(a.replace(folder, ".") for a in args),
                "rc": rc, "seconds": round(seconds, 1), "traceback": traceback, "outcome": outcome,
                "last_error_line": _last_line(stderr), "last_output_line": _last_line(stdout)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", default="after")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--pythonpath", default=None, help="put this first on PYTHONPATH (an older `zoo` package)")
    p.add_argument("--only", default=None, help="run only cases whose name contains this")
    p.add_argument("--table", action="store_true", help="print the stored labels side by side and stop")
    args = p.parse_args(argv)
    if args.table:
        return print_table()
    work = tempfile.mkdtemp(prefix=f"zoo-hostile-{args.label}-")
    cache, config = os.path.join(work, "cache"), os.path.join(work, "config")
    out = {"label": args.label, "date": datetime.date.today().isoformat(), "machine": platform.platform(),
           "cpus": os.cpu_count(), "python": platform.python_version(), "pythonpath": args.pythonpath,
           "command": " ".join(["python", "benchmarks/hostile_cases.py", *(argv or sys.argv[1:])]), "cases": []}
    path = os.path.join(RESULTS, f"hostile_cases_{args.label}.json")
    for case in CASES:
        if args.only and args.only not in case["name"]:
            continue
        r = run_case(case, python=args.python, pythonpath=args.pythonpath, label=args.label, cache=cache,
                     config=config)
        out["cases"].append(r)
        print(f"{r['name']}: {_what(r)}", flush=True)
        from_json = json.dumps(out, indent=1)
        os.makedirs(RESULTS, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(from_json)
        os.replace(tmp, path)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def print_table() -> int:
    runs = {}
    for label in ("before", "after"):
        path = os.path.join(RESULTS, f"hostile_cases_{label}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                runs[label] = {c["name"]: c for c in json.load(fh)["cases"]}
    names = list(dict.fromkeys(n for r in runs.values() for n in r))
    print("| case | " + " | ".join(runs) + " |")
    print("|---|" + "---|" * len(runs))

    for n in names:
        print(f"| {n} | " + " | ".join("-" if r.get(n) is None else _what(r[n]).replace("|", "/")
                                       for r in runs.values()) + " |")
    return 0


def _what(c: dict) -> str:
    """One line of a case's result: status, seconds, traceback or not, what the report or the
    folder holds, and the last line of the error stream (or of the output)."""
    said = c["last_error_line"] or ("" if c["outcome"] else c["last_output_line"])
    parts = [p for p in (c["outcome"], said) if p]
    return (f"rc {c['rc']}, {c['seconds']} s{', traceback' if c['traceback'] else ''}: "
            + " / ".join(parts))


if __name__ == "__main__":
    raise SystemExit(main())
