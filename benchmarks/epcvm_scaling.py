"""EPCVM end to end at large N (issue 18, part 3): EPCVM_Lap and EPCVM_EP with incremental
basis selection on subsets of LIBSVM's a1a.t (UCI adult, 123 binary features) from
N = 1,000 to all 30,956 points, beside scikit-learn's SVC (the EPCVM paper's Fig. 4 scales
EPCVM_Lap on adult from 1,000 to 10,000).

Data: a1a.t shuffled once (``SEED``); the training set of size N is its first N points
(nested subsets). Test set: the a1a training file (1,605 points), the same for every N.
Inputs raw (binary), as LIBSVM ships them.

Hyper-parameters, chosen once (cell ``hyper``): the RBF width by 5-fold CV of EPCVM_Lap's
error on the first ``CV_POINTS`` training points over ``WIDTHS``; the SVC's C by 5-fold CV
at that width over ``SVC_C``. Both are then fixed for every N.

Fits (cell ``<engine>--<scan>--<N>``, at most ``MAX_ITER`` steps), each in a fresh subprocess so that its peak memory
(VmHWM: XLA's buffers included, which tracemalloc cannot see) is its own. The candidate
columns are ``basis_selection.KernelCandidates``: never an N x N array. ``scan``:
* ``full`` - the paper's rule: every candidate scored at every step, kernel tiles
  recomputed each step (B and t_hat change at every point after each re-fit);
* ``working-set`` - NOT the paper's: full scans only every ``refresh_every`` steps and
  to certify convergence, in between only the working set (SelectionConfig).

Recorded per fit: wall and CPU seconds, compile seconds, M, selection steps, full scans,
log evidence, test error, peak memory, the time by part (Gaussianization, full scans,
working set), and the dgemm floor: the machine's float64 GEMM rate (numpy, one thread, best
of several (1024 x 1024) @ (1024 x 64) products, measured before and after the fit in the
same process, in CPU seconds) against the flops the paper's algorithm minimally needs on
this path - at every step the products Phi^T B [1 | Phi_M | r], 2 N K (M_t + 2) flops
(``floor_paper``) - and against the products of the scans actually run (``floor_own``:
the working set scores fewer candidates). Ratio = CPU seconds without compilation / floor
seconds. Cells ``audit--<engine>--<N>`` run the working set with
``SelectionConfig(audit=True)``: at every working-set step a full scan says whether the
paper would have taken the same action.

SVC (cell ``svc--<N>``): RBF at the same width (gamma = 1 / (2 width^2)), C from the CV;
seconds, test error, support vectors; skipped beyond ``--svc-timeout``.

XLA runs single-threaded in the children (``--xla_cpu_multi_thread_eigen=false``), as
BLAS does under ``import zoo``: on this shared 2-core machine a multi-threaded tile took
4 s of wall for 1.1 s of CPU. One JSON per cell under ``<out>/cells/``, written
atomically; a rerun skips finished cells (``--redo`` recomputes them). The table goes to
``<out>/table.md``, the plot to ``<out>/seconds_vs_n.png``, everything to
``<out>/epcvm_scaling.json``.

    python benchmarks/epcvm_scaling.py                                  # everything (hours)
    python benchmarks/epcvm_scaling.py --sizes 1000,2000 --engines laplace --scans full
    python benchmarks/epcvm_scaling.py --report                         # tables from the cells
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "epcvm_scaling")
SIZES = (1000, 2000, 4000, 8000, 16000, 30956)
ENGINES = ("laplace", "ep")
SCANS = ("full", "working-set")
#: SelectionConfig.reestimate: the paper's single re-estimates, or batches of them
REESTIMATES = ("single", "batch")
SEED = 20260518
CV_POINTS = 1000
#: sqrt(2) steps around the median distance of a1a's inputs (about 3.6)
WIDTHS = (1.41, 2.0, 2.83, 4.0, 5.66, 8.0)
SVC_C = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
#: working-set settings of the benchmark (SelectionConfig's defaults)
WORKING_SET = {"working_set_size": 512, "refresh_every": 25}
BLOCK_SIZE = 1024
#: the selection's step cap (SelectionConfig's default is 1000; at N = 30,956 the working
#: set was still adding basis functions at step 1000 with M = 140)
MAX_ITER = 4000
CHILD_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "ZOO_HOST_DEVICES": "1",
             "ZOO_BLAS_THREADS": "1"}


# --------------------------------------------------------------------------------------
# data and measurements (child side)
# --------------------------------------------------------------------------------------
def load_data():
    """(X_pool (30956, 123), y_pool, X_test (1605, 123), y_test): a1a.t shuffled, a1a."""
    from zoo import data as datasets

    s = datasets.load("a1a", 0, standardize=False)
    order = np.random.default_rng(SEED).permutation(len(s.y_test))
    return s.X_test[order], s.y_test[order], s.X_train, s.y_train


def _status() -> dict:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmHWM", "VmRSS")):
                key, val = line.split(":")
                out[key] = float(val.split()[0]) / 1024.0  # kB -> MB
    return out


def dgemm_rate(repeats: int = 5) -> dict:
    """Float64 GEMM rate of this process: numpy (one BLAS thread), (1024 x 1024) @ (1024 x 64),
    the shape of one product of a kernel tile; best of ``repeats`` in CPU and wall time."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1024, 1024))
    B = rng.standard_normal((1024, 64))
    flops = 2.0 * 1024 * 1024 * 64 * 10
    A @ B
    best_cpu, best_wall = math.inf, math.inf
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(10):
            A @ B
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - t0)
    return {"gflops_per_cpu_second": flops / best_cpu / 1e9, "gflops_per_wall_second": flops / best_wall / 1e9}


def paper_floor_flops(N: int, K: int, selection) -> float:
    """2 N K (M_t + 2) at every scan the paper's rule makes along this path (one per step
    plus the final one that finds nothing to do)."""
    sizes = [1] + [h["n_active"] for h in selection.history]
    return float(sum(2.0 * N * K * (m + 2) for m in sizes))


def own_floor_flops(N: int, selection) -> float:
    return float(sum(2.0 * N * n_scored * (m + 2) for _, m, n_scored in selection.scans))


def _log_progress(module, label: str, every: int = 20) -> None:
    """Wrap the engine module's ``gaussianize`` (one call per selection step) so that the
    child appends a line to $EPCVM_PROGRESS every ``every`` steps: a long cell can be
    watched. The numbers are not changed."""
    path = os.environ.get("EPCVM_PROGRESS")
    if not path:
        return
    inner = module.gaussianize
    state = {"calls": 0, "t0": time.perf_counter()}

    def gaussianize(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] % every == 0:
            with open(path, "a") as fh:
                fh.write(f"{label}: step {state['calls']}, M = {args[1].shape[1]}, "
                         f"{time.perf_counter() - state['t0']:.0f} s, VmRSS {_status()['VmRSS']:.0f} MB\n")
        return inner(*args, **kwargs)

    module.gaussianize = gaussianize


def _count_compile_cpu() -> dict:
    """Wrap CompiledPrograms.get in this process so that the CPU seconds spent building
    (compiling) programs are counted: the engines time compilation in wall seconds,
    which on a loaded machine says little about the work."""
    from zoo.inference.compile_cache import CompiledPrograms

    counter = {"cpu": 0.0, "depth": 0}
    inner = CompiledPrograms.get

    def get(self, key, build, **kwargs):
        # only the outermost build is timed: a build that asks another cache for a
        # program would otherwise count that compilation twice (the earlier version of
        # this wrapper did, and its warm CPU seconds came out negative)
        def timed_build():
            counter["depth"] += 1
            c0 = time.process_time()
            try:
                return build()
            finally:
                counter["depth"] -= 1
                if counter["depth"] == 0:
                    counter["cpu"] += time.process_time() - c0

        return inner(self, key, timed_build, **kwargs)

    CompiledPrograms.get = get
    return counter


def fit_cell(engine: str, scan: str, N: int, width: float, audit: bool = False,
             reestimate: str = "single") -> dict:
    import zoo  # noqa: F401
    from zoo.inference import basis_selection as bs
    from zoo.inference import expectation_propagation as ep
    from zoo.inference import pcvm_laplace
    from zoo.models.basis import pcvm_basis

    X_pool, y_pool, X_test, y_test = load_data()
    X, y = X_pool[:N], y_pool[:N]
    basis = pcvm_basis(X, y, width)
    cands = bs.KernelCandidates.from_basis(basis, X, block_size=BLOCK_SIZE)
    config = bs.SelectionConfig(scan=scan, audit=audit, max_iter=MAX_ITER, reestimate=reestimate,
                                **(WORKING_SET if scan == "working-set" else {}))
    _log_progress(pcvm_laplace if engine == "laplace" else ep, f"{engine} {scan} {reestimate} N={N}")
    compile_cpu = _count_compile_cpu()
    rate_before = dgemm_rate()
    compile_cpu_before = compile_cpu["cpu"]
    memory_before = _status()
    load_start = os.getloadavg()
    c0, t0 = time.process_time(), time.perf_counter()
    if engine == "laplace":
        posterior, selection = pcvm_laplace.fit_with_selection(cands, y, config=config)
    else:
        posterior, selection = ep.fit_with_selection(cands, y, config=config)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    # read now: the prediction below compiles programs of its own, outside the fit
    fit_compile_cpu = compile_cpu["cpu"] - compile_cpu_before
    load_end = os.getloadavg()
    memory_after = _status()
    rate_after = dgemm_rate()
    p = np.asarray(posterior.predict_proba(basis.subset(selection.active).transform(X_test)))
    rate = max(rate_before["gflops_per_cpu_second"], rate_after["gflops_per_cpu_second"])
    compile_s = float(posterior.info.compile_seconds)
    floor_paper = paper_floor_flops(N, N, selection)
    floor_own = own_floor_flops(N, selection)
    cell = {
        "engine": engine, "scan": scan, "reestimate": reestimate, "n": N, "width": width, "audit": audit,
        "working_set": WORKING_SET if scan == "working-set" else None, "block_size": BLOCK_SIZE,
        "max_iter": MAX_ITER,
        "distinct_inputs": cands.n_distinct, "integer_path": cands.integer,
        "wall_seconds": wall, "cpu_seconds": cpu, "compile_seconds": compile_s,
        "compile_cpu_seconds": fit_compile_cpu,
        "warm_wall_seconds": wall - compile_s,
        "warm_cpu_seconds": cpu - fit_compile_cpu,
        "m": int(len(selection.active)), "steps": int(selection.n_iter),
        "converged": bool(posterior.info.converged), "reason": posterior.info.reason,
        "selection_converged": bool(selection.converged),
        "full_scans": selection.n_full_scans, "scans": len(selection.scans),
        "log_evidence": float(posterior.info.extra["log_evidence"]),
        "test_error": float(np.mean((p > 0.5) != (y_test == 1))),
        "active": [int(k) for k in selection.active],
        "actions": {a: sum(h["action"] == a for h in selection.history) for a in ("add", "reestimate", "delete", "bias", "batch")},
        # re-estimates applied: the single ones plus every member of a kept batch
        "alphas_reestimated": sum(1 if h["action"] in ("reestimate", "bias") else len(h.get("indices", ()))
                                  for h in selection.history),
        "batches_tried": sum("batch_size" in h for h in selection.history),
        "timings": {k: float(v) for k, v in selection.timings.items()},
        "kernel_entries": int(cands.kernel_entries),
        "largest_tile": list(cands.largest_tile),
        "peak_mb": memory_after["VmHWM"], "peak_mb_before_fit": memory_before["VmHWM"],
        "dense_candidates_mb": N * N * 8 / 2**20,
        "dgemm": {"before": rate_before, "after": rate_after, "used_gflops_per_cpu_second": rate},
        "floor_paper_flops": floor_paper, "floor_own_flops": floor_own,
        "floor_paper_seconds": floor_paper / (rate * 1e9), "floor_own_seconds": floor_own / (rate * 1e9),
        "load_start": load_start, "load_end": load_end,
    }
    cell["ratio_paper_floor"] = cell["warm_cpu_seconds"] / cell["floor_paper_seconds"]
    cell["ratio_own_floor"] = cell["warm_cpu_seconds"] / cell["floor_own_seconds"]
    wall_rate = max(rate_before["gflops_per_wall_second"], rate_after["gflops_per_wall_second"])
    cell["ratio_paper_floor_wall"] = cell["warm_wall_seconds"] / (floor_paper / (wall_rate * 1e9))
    if engine == "ep":
        cell["ep_sweeps_total"] = int(posterior.info.extra["ep_sweeps_total"])
        cell["best_iteration"] = selection.best_iteration
        cell["loo_error"] = float(posterior.info.extra["loo_error"])
    if audit:
        audited = [h["audit_same_action"] for h in selection.history if "audit_same_action" in h]
        cell["audited_steps"] = len(audited)
        cell["audit_same_action"] = int(sum(audited))
        # index of the first working-set step that differs from the paper's choice
        first = next((h["iteration"] for h in selection.history if h.get("audit_same_action") is False), None)
        cell["first_departure"] = first
    return cell


def svc_cell(N: int, width: float, C: float) -> dict:
    from sklearn.svm import SVC

    X_pool, y_pool, X_test, y_test = load_data()
    clf = SVC(kernel="rbf", gamma=1.0 / (2.0 * width**2), C=C, cache_size=500)
    load_start = os.getloadavg()
    c0, t0 = time.process_time(), time.perf_counter()
    clf.fit(X_pool[:N], y_pool[:N])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    err = float(np.mean(clf.predict(X_test) != y_test))
    return {"engine": "svc", "n": N, "width": width, "C": C, "wall_seconds": wall, "cpu_seconds": cpu,
            "test_error": err, "support_vectors": int(clf.n_support_.sum()), "peak_mb": _status()["VmHWM"],
            "load_start": load_start, "load_end": os.getloadavg()}


def hyper_cell() -> dict:
    """5-fold CV on the first CV_POINTS points: EPCVM_Lap's width, then the SVC's C."""
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    import zoo  # noqa: F401
    from zoo.inference import pcvm_laplace
    from zoo.models.basis import median_heuristic_width, pcvm_basis

    X_pool, y_pool, _, _ = load_data()
    X, y = X_pool[:CV_POINTS], y_pool[:CV_POINTS]
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    t0 = time.perf_counter()
    cv = {}
    for width in WIDTHS:
        wrong = 0
        for train, val in folds:
            basis = pcvm_basis(X[train], y[train], width)
            post, sel = pcvm_laplace.fit_with_selection(basis.transform(X[train]), y[train])
            p = np.asarray(post.predict_proba(basis.subset(sel.active).transform(X[val])))
            wrong += int(np.sum((p > 0.5) != (y[val] == 1)))
        cv[str(width)] = wrong / len(y)
        print(f"  width {width}: CV error {cv[str(width)]:.4f}", flush=True)
    width = min(WIDTHS, key=lambda w: (cv[str(w)], w))  # ties: the smaller width
    svc_cv = {}
    for C in SVC_C:
        wrong = 0
        for train, val in folds:
            clf = SVC(kernel="rbf", gamma=1.0 / (2.0 * width**2), C=C).fit(X[train], y[train])
            wrong += int(np.sum(clf.predict(X[val]) != y[val]))
        svc_cv[str(C)] = wrong / len(y)
    C = min(SVC_C, key=lambda c: (svc_cv[str(c)], c))
    return {"width": width, "cv_error": cv, "edge": width in (WIDTHS[0], WIDTHS[-1]),
            "median_distance": median_heuristic_width(X), "svc_C": C, "svc_cv_error": svc_cv,
            "seconds": time.perf_counter() - t0, "cv_points": CV_POINTS}


# --------------------------------------------------------------------------------------
# the parent: cells in fresh subprocesses
# --------------------------------------------------------------------------------------
def fit_cell_name(engine: str, scan: str, N: int, reestimate: str = "single") -> str:
    """The single-re-estimate cells keep the names they had before batches existed."""
    rule = "" if reestimate == "single" else f"{reestimate}--"
    return f"{engine}--{scan}--{rule}{N}"


def cell_path(out: str, name: str) -> str:
    return os.path.join(out, "cells", f"{name}.json")


def run_child(out: str, name: str, args: list[str], timeout: float | None, redo: bool) -> dict | None:
    path = cell_path(out, name)
    if os.path.exists(path) and not redo:
        with open(path) as fh:
            return json.load(fh)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, *args, "--out", out]
    env = dict(os.environ, **CHILD_ENV, EPCVM_PROGRESS=os.path.join(out, ".progress.log"))
    print(f"{name} ... (load {os.getloadavg()[0]:.1f})", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True, env=env)
    except subprocess.TimeoutExpired:
        print(f"  ran out of time ({timeout:g} s)", flush=True)
        return None
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        raise RuntimeError(f"{name} failed (exit code {proc.returncode})")
    with open(path) as fh:
        cell = json.load(fh)
    print(f"  done in {time.perf_counter() - t0:.0f} s", flush=True)
    return cell


def child_main(name: str, rest: list[str], out: str) -> None:
    from zoo.validation.base.atomic import write_json_atomic

    if name == "hyper":
        cell = hyper_cell()
    elif name.startswith("svc--"):
        cell = svc_cell(int(rest[0]), float(rest[1]), float(rest[2]))
    else:
        engine, scan, N, width, audit = rest[0], rest[1], int(rest[2]), float(rest[3]), rest[4] == "1"
        cell = fit_cell(engine, scan, N, width, audit, rest[5] if len(rest) > 5 else "single")
    cell["date"] = _dt.datetime.now().isoformat(timespec="seconds")
    cell["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "node": platform.node()}
    write_json_atomic(cell, cell_path(out, name))


def _slope(ns, secs) -> float | None:
    if len(ns) < 2:
        return None
    return float(np.polyfit(np.log(ns), np.log(secs), 1)[0])


def _f(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def _rule(cell: dict) -> str:
    """A cell's re-estimation rule (cells from before the rule existed are 'single')."""
    return cell.get("reestimate", "single")


def report(out: str) -> None:
    from zoo.validation.base.atomic import write_json_atomic, write_text_atomic

    cells = {}
    folder = os.path.join(out, "cells")
    for fn in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if fn.endswith(".json"):
            with open(os.path.join(folder, fn)) as fh:
                cells[fn[:-5]] = json.load(fh)
    hyper = cells.get("hyper")
    fits = [c for k, c in cells.items() if k.split("--")[0] in ENGINES]
    audits = [c for k, c in cells.items() if k.startswith("audit--")]
    svcs = sorted((c for k, c in cells.items() if k.startswith("svc--")), key=lambda c: c["n"])
    lines = ["# EPCVM end to end on a1a.t subsets (benchmarks/epcvm_scaling.py)", ""]
    all_cells = fits + audits + svcs
    if all_cells:
        dates = sorted(c["date"] for c in all_cells)
        loads = [c["load_start"][0] for c in all_cells] + [c["load_end"][0] for c in all_cells]
        lines += [f"Cells measured {dates[0]} .. {dates[-1]}; 1-minute load average {min(loads):.1f} .. "
                  f"{max(loads):.1f} on {all_cells[0]['machine']['cpus']} cores (shared). One fresh process "
                  "per cell, XLA and BLAS single-threaded; compilation counted in wall, not in warm CPU.", ""]
    if hyper:
        lines += [f"Width {hyper['width']} (5-fold CV error of EPCVM_Lap on {hyper['cv_points']} points: "
                  + ", ".join(f"{w}: {e:.3f}" for w, e in hyper["cv_error"].items())
                  + f"; median distance {hyper['median_distance']:.2f}); SVC C = {hyper['svc_C']} (CV: "
                  + ", ".join(f"{c}: {e:.3f}" for c, e in hyper["svc_cv_error"].items()) + ").", ""]
    lines += ["| engine | scan | re-estimates | N | wall s | CPU s (warm) | compile s | M | steps (batches) | "
              "full scans | conv | log ev | test err | peak MB (before fit) | Gauss. s | full-scan s | "
              "working-set s | floor (paper) s | ratio | floor (own) s | ratio (own) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in sorted(fits, key=lambda c: (c["engine"], c["scan"], _rule(c), c["n"])):
        t = c["timings"]
        batches = c["actions"].get("batch", 0)
        lines.append(
            f"| {c['engine']} | {c['scan']} | {_rule(c)} | {c['n']} | {c['wall_seconds']:.0f} | "
            f"{c['warm_cpu_seconds']:.0f} | {c['compile_seconds']:.0f} | {c['m']} | {c['steps']}"
            f"{f' ({batches})' if _rule(c) == 'batch' else ''} | {c['full_scans']} | "
            f"{'yes' if c['converged'] else 'no'} | {c['log_evidence']:.1f} | {c['test_error']:.4f} | "
            f"{c['peak_mb']:.0f} ({c['peak_mb_before_fit']:.0f}) | {t.get('gaussianize', 0):.0f} | "
            f"{t.get('full_scan', 0):.0f} | {t.get('working_set', 0):.0f} | {c['floor_paper_seconds']:.1f} | "
            f"{c['ratio_paper_floor']:.2f} | {c['floor_own_seconds']:.1f} | {c['ratio_own_floor']:.2f} |")
    lines += ["", "Re-estimates: 'single' is the paper's rule (one alpha per step); 'batch' "
              "(SelectionConfig.reestimate, not the paper's) re-estimates every alpha the rules allow "
              "in one step when a re-estimate is the best action; steps (batches) counts the kept batches. "
              "Part times (Gauss., full-scan, working-set) are wall seconds. Floors: flops / the float64 "
              "GEMM rate measured in the same process (CPU seconds); ratio = warm CPU s / floor s. "
              "'paper': 2 N K (M_t + 2) at every step of this path (what scoring every candidate needs); "
              "'own': the products of the scans actually run. Warm CPU s = CPU s - CPU s spent compiling; "
              "compile s is wall.", ""]
    if audits:
        lines += ["## Working set against the paper's full scan (audit: a full scan beside every working-set step)", "",
                  "| engine | N | steps | working-set steps | same action as the full scan | first departure | M | "
                  "log ev | test err |", "|---|---|---|---|---|---|---|---|---|"]
        for c in sorted(audits, key=lambda c: (c["engine"], c["n"])):
            lines.append(f"| {c['engine']} | {c['n']} | {c['steps']} | {c['audited_steps']} | "
                         f"{c['audit_same_action']} ({c['audit_same_action'] / max(c['audited_steps'], 1):.1%}) | "
                         f"{_f(c['first_departure'], 'd')} | {c['m']} | {c['log_evidence']:.1f} | {c['test_error']:.4f} |")
        lines.append("")
    if svcs:
        lines += ["## scikit-learn SVC (RBF, same width)", "", "| N | wall s | CPU s | support vectors | test err | "
                  "peak MB |", "|---|---|---|---|---|---|"]
        for c in svcs:
            lines.append(f"| {c['n']} | {c['wall_seconds']:.2f} | {c['cpu_seconds']:.2f} | {c['support_vectors']} | "
                         f"{c['test_error']:.4f} | {c['peak_mb']:.0f} |")
        lines.append("")
    slopes = {}
    series = {}
    for c in fits:
        name = f"{c['engine']} {c['scan']}" + ("" if _rule(c) == "single" else f" {_rule(c)}")
        series.setdefault(name, []).append((c["n"], c["warm_cpu_seconds"]))
    if svcs:
        series["SVC"] = [(c["n"], c["cpu_seconds"]) for c in svcs]
    for name, pts in series.items():
        pts.sort()
        slopes[name] = _slope([n for n, _ in pts], [s for _, s in pts])
    if slopes:
        lines += ["Fitted log-log slopes of CPU seconds against N: "
                  + "; ".join(f"{k} {_f(v, '.2f')}" for k, v in slopes.items()), ""]
    write_text_atomic(os.path.join(out, "table.md"), "\n".join(lines) + "\n")
    write_json_atomic({"cells": cells, "slopes": slopes}, os.path.join(out, "epcvm_scaling.json"))
    if series:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 5))
        for name, pts in sorted(series.items()):
            ns, secs = zip(*pts)
            label = f"{name} (slope {_f(slopes[name], '.2f')})"
            ax.loglog(ns, secs, "o-", label=label)
        ax.set_xlabel("training points N (a1a.t subset)")
        ax.set_ylabel("CPU seconds (EPCVM: warm, compilation excluded)")
        ax.set_title("EPCVM end to end on a1a.t: seconds against N")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        from zoo.validation.base.atomic import atomic_write

        atomic_write(os.path.join(out, "seconds_vs_n.png"), lambda tmp: fig.savefig(tmp, dpi=120, format="png"),
                     suffix=".png")
        plt.close(fig)
    print("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--scans", default=",".join(SCANS))
    ap.add_argument("--reestimate", default="single",
                    help="comma list of SelectionConfig.reestimate rules (single: the paper's; batch)")
    ap.add_argument("--max-full-n", type=int, default=30956, help="largest N fitted with scan=full")
    ap.add_argument("--audit-sizes", default="2000", help="N of the audit cells (empty: none)")
    ap.add_argument("--svc", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per fit cell (default: none)")
    ap.add_argument("--svc-timeout", type=float, default=1800.0)
    ap.add_argument("--redo", action="store_true", help="recompute finished cells")
    ap.add_argument("--report", action="store_true", help="only rebuild the table and plot from the cells")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child[0], args.child[1:], args.out)
        return
    if not args.report:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        engines = [e for e in args.engines.split(",") if e]
        scans = [s for s in args.scans.split(",") if s]
        rules = [r for r in args.reestimate.split(",") if r]
        bad = ([e for e in engines if e not in ENGINES] + [s for s in scans if s not in SCANS]
               + [r for r in rules if r not in REESTIMATES])
        if bad or any(not 1 <= n <= 30956 for n in sizes):
            raise SystemExit(f"unknown engines/scans {bad} or sizes outside 1..30956: {sizes}")
        hyper = run_child(args.out, "hyper", [], None, args.redo)
        width = hyper["width"]
        for n in sizes:
            for engine in engines:
                for scan in scans:
                    if scan == "full" and n > args.max_full_n:
                        continue
                    for rule in rules:
                        run_child(args.out, fit_cell_name(engine, scan, n, rule),
                                  [engine, scan, str(n), str(width), "0", rule], args.timeout, args.redo)
            if args.svc:
                run_child(args.out, f"svc--{n}", [str(n), str(width), str(hyper["svc_C"])], args.svc_timeout, args.redo)
            if str(n) in args.audit_sizes.split(","):
                for engine in engines:
                    run_child(args.out, f"audit--{engine}--{n}", [engine, "working-set", str(n), str(width), "1"],
                              args.timeout, args.redo)
    report(args.out)


if __name__ == "__main__":
    main()
