"""What gridRVM's VB costs: the two branches of its q(w) update as the number of weights M
grows past the number of points N, and its warm seconds on the digits default against the
NUTS reference on the same posterior and against scikit-learn's cross-validated linear
classifiers.

1. Branch cost on the ESL mixture (split 0, its N = 200 training points, raw inputs, the
   protocol's per-dimension RBF table with delta = 5.55 and its default proper hyper-prior
   a0 = b0 = c0 = d0 = 2): M < N by taking c of the 200 training points as centres
   (a 2 x c table, M = 2c = 50, 100, 200, 300; all 200 points stay the data), M > N by
   appending k N(0, 1) noise features as ``validation/records/grid_rvm_record.py`` does
   (a (2 + k) x 200 table, k = 0, 2, 6, 14, 30: M = 400 ... 6400). For the p-grid and
   the s-grid, the iteration forced to the primal branch (M x M Cholesky, O(M^3 + N M^2)
   per sweep) and to the Woodbury branch (N x N, O(N^2 M + N^3)), ``--sweeps`` sweeps
   each with tol = mu_tol = 1e-15 (so it does not stop early), warm: seconds per sweep
   and their ratio, the M where Woodbury becomes cheaper (the paper's rule: M > N), and
   how far the two branches' E[w] and ELBO agree after the same sweeps from the same
   start. Warm-up: the loop is compiled by a first call with tol = mu_tol = 0.99, which
   is the same program (tolerances are arguments, not part of the compilation key) and
   stops after a sweep or two. The primal branch grows like M^3: before each primal run
   its cost is predicted from the last two primal measurements (their log-log slope) and
   the run is skipped, with the prediction and the reason recorded, when it would take
   more than ``--primal-budget`` seconds.
   seconds / sweep = the timed call's seconds / its sweeps (the median of 3 calls when one
   takes under a second); the call also solves q(w) once for the starting q, so with 20
   sweeps it overstates one sweep by at most ~5% in both branches alike.
2. Digits default (``registry.prepare("grid-rvm", split 0, {})``: the 8 x 8 image, 500
   training images, 1297 test, hyper-prior 2): warm VB seconds (median of ``--repeats``
   calls after one compiling call) for the p-grid, the s-grid and the rvm, to convergence
   with the engine's default GridVBConfig, and their test errors, against (a) NUTS on the same
   posterior (``run_reference`` with the default ReferenceConfig, no cache: its sampling
   seconds with and without JAX's compile time, certificate, test error of its posterior
   predictive), (b) scikit-learn: L1 logistic regression with C by 5-fold CV
   (LogisticRegressionCV, liblinear, 13 values of C) and a linear SVM (LinearSVC, C by
   5-fold GridSearchCV over the same 13 values), their seconds including the CV and the
   refit, and test errors. Errors are called equal when they differ by at most one
   binomial standard error sqrt(e (1 - e) / n_test) (the larger of the two); the exact
   McNemar p-value on the shared test set is given beside it.

Ratios are taken within one run on one machine; the JSON records every timing.

    python benchmarks/grid_vb_costs.py                   # about 6 minutes on 2 cores
    python benchmarks/grid_vb_costs.py --skip-digits     # branch costs only
    python benchmarks/grid_vb_costs.py --skip-nuts       # digits without the NUTS references
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import zoo
from zoo import data as datasets
from zoo.inference import grid_vb
from zoo.models.basis import PerDimensionRBFBasis
from zoo.models.grid_rvm import GridRVM
from zoo.validation.base.atomic import write_json_atomic, write_text_atomic
from zoo.validation.records import grid_rvm_record as protocol
from zoo.validation.records import registry

SWEEPS = 20
#: M < N: centres taken from the 200 training points (M = 2 c)
CENTRES = (25, 50, 100, 150)
#: M > N: noise features appended to the 2 inputs (M = 200 (2 + k))
NOISE = (0, 2, 6, 14, 30)
BRANCH_PRIORS = ("p-grid", "s-grid")
DIGITS_PRIORS = ("p-grid", "s-grid", "rvm")
C_GRID = np.logspace(-3, 3, 13)
TINY = 1e-15
#: a timed call shorter than this (seconds) is repeated twice more and the median taken
SHORT_CALL = 1.0


# --------------------------------------------------------------------------------------
# 1. branch costs
# --------------------------------------------------------------------------------------
def esl_designs(split) -> list[dict]:
    """The designs of the branch study, in increasing M (all on the same 200 points)."""
    designs = []
    X, y = split.X_train, split.y_train
    for c in CENTRES:
        # evenly spaced training points as centres (the ESL file lists the classes in blocks)
        idx = np.linspace(0, X.shape[0] - 1, c).round().astype(int)
        basis = PerDimensionRBFBasis.fit(X[idx], protocol.PAPER_DELTA)
        designs.append({"how": f"{c} of the {X.shape[0]} training points as centres", "centres": c, "noise": 0,
                        "shape": basis.table_shape, "Phi": basis.transform(X), "y": y})
    for k in NOISE:
        p = protocol.prepare(split, {"noise": k})
        designs.append({"how": f"all training points as centres, {k} noise features", "centres": X.shape[0],
                        "noise": k, "shape": p.spec.shape, "Phi": p.Phi_train, "y": p.y_train})
    return designs


def _timed_run(spec, Phi, y, branch: str, sweeps: int):
    """(warm-up result, timed result, seconds per sweep): the median of 3 timed calls
    when one takes under a second (the small cases), else the one call."""
    warm = grid_vb.run(spec, Phi, y, config=grid_vb.GridVBConfig(max_iter=sweeps, tol=0.99, mu_tol=0.99, branch=branch))
    config = grid_vb.GridVBConfig(max_iter=sweeps, tol=TINY, mu_tol=TINY, branch=branch)
    res = grid_vb.run(spec, Phi, y, config=config)
    per_sweep = [res.seconds / res.n_iter]
    if res.seconds < SHORT_CALL:
        for _ in range(2):
            again = grid_vb.run(spec, Phi, y, config=config)
            per_sweep.append(again.seconds / again.n_iter)
    return warm, res, per_sweep


def _predict_primal(history: list[tuple[int, float]], m: int) -> tuple[float, float] | None:
    """(predicted seconds per sweep at m, log-log slope used) from the last two primal
    measurements; None with fewer than two."""
    if len(history) < 2:
        return None
    (m1, t1), (m2, t2) = history[-2:]
    slope = float(np.log(t2 / t1) / np.log(m2 / m1))
    return t2 * (m / m2) ** slope, slope


def branch_case(design: dict, prior: str, sweeps: int, primal_budget: float,
                primal_history: list[tuple[int, float]]) -> dict:
    spec = GridRVM(design["shape"], prior)  # the protocol's default hyper-prior (2, 2, 2, 2)
    Phi, y = design["Phi"], design["y"]
    n, m = Phi.shape
    row = {"prior": prior, "N": int(n), "M": int(m), "table": list(design["shape"]), "design": design["how"],
           "auto_branch": "woodbury" if m > n else "primal"}
    results = {}
    for branch in ("primal", "woodbury"):
        if branch == "primal":
            pred = _predict_primal(primal_history, m)
            if pred is not None:
                row["primal_predicted_seconds_per_sweep"], row["primal_growth_exponent_used"] = pred
                predicted_total = pred[0] * (sweeps + 2)
                if predicted_total > primal_budget:
                    row["primal_skipped"] = (
                        f"predicted {predicted_total:.0f} s for the warm-up and {sweeps} timed sweeps "
                        f"({pred[0]:.2f} s/sweep: the last primal measurement scaled by M^{pred[1]:.2f}, the "
                        f"log-log slope of the last two) exceeds --primal-budget {primal_budget:g} s")
                    continue
        warm, res, per_sweep = _timed_run(spec, Phi, y, branch, sweeps)
        results[branch] = res
        row[f"{branch}_seconds_per_sweep"] = float(np.median(per_sweep))
        row[f"{branch}_seconds_per_sweep_calls"] = per_sweep
        row[f"{branch}_sweeps"] = int(res.n_iter)
        row[f"{branch}_status"] = res.status
        row[f"{branch}_compile_seconds"] = float(warm.compile_seconds)
        row[f"{branch}_warmup_sweeps"] = int(warm.n_iter)
        row[f"{branch}_final_elbo"] = float(res.trace[-1])
        by = np.diff(np.concatenate([[res.elbo_initial], res.elbo_by_update.ravel()]))
        row[f"{branch}_largest_elbo_decrease_relative"] = float(
            max(0.0, -by.min()) / max(1.0, np.max(np.abs(res.elbo_by_update))))
        row[f"{branch}_finite"] = bool(np.all(np.isfinite(res.mu)))
    if "primal" in results:
        primal_history.append((m, row["primal_seconds_per_sweep"]))
    if len(results) == 2:
        p, w = results["primal"], results["woodbury"]
        row["primal_over_woodbury"] = row["primal_seconds_per_sweep"] / row["woodbury_seconds_per_sweep"]
        scale = max(1.0, float(np.max(np.abs(p.mu))))
        row["branches_mu_max_abs_diff_relative"] = float(np.max(np.abs(p.mu - w.mu)) / scale)
        row["branches_elbo_trace_max_abs_diff_relative"] = float(
            np.max(np.abs(p.trace - w.trace)) / max(1.0, float(np.max(np.abs(p.trace)))))
        row["branches_same_sweeps"] = p.n_iter == w.n_iter
    return row


def crossover(rows: list[dict]) -> dict:
    """Where the Woodbury branch becomes cheaper, from the measured ratios of one prior."""
    pts = [(r["M"], r["primal_over_woodbury"]) for r in rows if "primal_over_woodbury" in r]
    n = rows[0]["N"]
    out = {"N": n, "paper_rule": f"Woodbury when M > N = {n}", "measured_M": [m for m, _ in pts]}
    cheaper = [m for m, ratio in pts if ratio > 1.0]
    dearer = [m for m, ratio in pts if ratio <= 1.0]
    out["woodbury_cheaper_at_M"], out["primal_cheaper_or_equal_at_M"] = cheaper, dearer
    if not cheaper or not dearer:
        out["bracket"] = None
        out["note"] = "no crossover inside the measured M" if dearer else "Woodbury cheaper at every measured M"
        return out
    below = max(dearer)
    above = min(m for m in cheaper if m > below) if any(m > below for m in cheaper) else None
    out["monotone"] = max(dearer) < min(cheaper)
    if above is None:
        out["bracket"] = None
        out["note"] = "Woodbury cheaper below the last M where the primal is cheaper: no single crossover"
        return out
    r_below = dict(pts)[below]
    r_above = dict(pts)[above]
    # log-log interpolation of primal / woodbury = 1
    t = np.log(r_below) / (np.log(r_below) - np.log(r_above))
    out["bracket"] = [below, above]
    out["interpolated_M"] = float(np.exp(np.log(below) + t * (np.log(above) - np.log(below))))
    return out


# --------------------------------------------------------------------------------------
# 2. digits: VB against NUTS and scikit-learn
# --------------------------------------------------------------------------------------
def _error(p, y) -> float:
    return float(np.mean((np.asarray(p) > 0.5) != (np.asarray(y) == 1)))


def _wrong(p, y) -> np.ndarray:
    return (np.asarray(p) > 0.5) != (np.asarray(y) == 1)


def digits_vb(prepared, repeats: int) -> dict:
    specs = {"p-grid": prepared.spec, **prepared.variants}
    out = {}
    for prior in DIGITS_PRIORS:
        spec = specs[prior]
        first = grid_vb.fit(spec, prepared.Phi_train, prepared.y_train)  # compiles
        times, post = [], first
        for _ in range(repeats):
            post = grid_vb.fit(spec, prepared.Phi_train, prepared.y_train)
            times.append(post.info.seconds)
        p_test = post.predict_proba(prepared.Phi_test)
        out[prior] = {
            "warm_seconds_median": float(np.median(times)), "warm_seconds_min": float(np.min(times)),
            "compile_seconds": float(first.info.compile_seconds), "sweeps": int(post.info.n_iter),
            "converged": bool(post.info.converged), "reason": post.info.reason, "branch": post.info.extra["branch"],
            "largest_relative_decrease": float(post.info.extra["largest_relative_decrease"]),
            "pruning": post.info.extra["pruning"], "mackay_error_train": float(post.info.extra["mackay_error_train"]),
            "test_error": _error(p_test, prepared.y_test), "_p_test": p_test,
        }
    return out


def digits_nuts(prepared) -> dict:
    from zoo.validation.references import ReferenceConfig, run_reference

    specs = {"p-grid": prepared.spec, **prepared.variants}
    out = {}
    for prior in DIGITS_PRIORS:
        t0 = time.perf_counter()
        ref = run_reference(specs[prior], prepared.Phi_train, prepared.y_train, config=ReferenceConfig())
        wall = time.perf_counter() - t0
        p_test = ref.posterior.predict_proba(prepared.Phi_test)
        out[prior] = {
            "sampler": ref.sampler, "certified": bool(ref.certified), "failures": list(ref.failures),
            "seconds_total": float(ref.seconds), "compile_seconds": float(ref.compile_seconds),
            "seconds_warm": float(ref.posterior.info.seconds), "wall_seconds_incl_diagnostics": wall,
            "chains": ref.provenance.get("sampler", {}).get("num_chains"),
            "draws_per_chain": ref.provenance.get("sampler", {}).get("num_samples_total"),
            "doublings": ref.provenance.get("sampler", {}).get("doublings"),
            "rhat_max": ref.diagnostics.get("rhat_max"), "ess_bulk_min": ref.diagnostics.get("ess_bulk_min"),
            "divergences": ref.diagnostics.get("divergences"),
            "test_error": _error(p_test, prepared.y_test), "_p_test": p_test,
        }
        print(f"  NUTS {prior}: {ref.seconds:.1f} s ({ref.posterior.info.seconds:.1f} s warm), "
              f"certified {ref.certified}", flush=True)
    return out


def _l1_kwargs() -> dict:
    """The L1 penalty in the spelling of the installed scikit-learn (1.8 deprecated
    ``penalty`` for ``l1_ratios``)."""
    import sklearn

    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    if (major, minor) >= (1, 8):
        return {"l1_ratios": (1.0,), "use_legacy_attributes": False}
    return {"penalty": "l1"}


def digits_sklearn(prepared, seed: int = 0) -> dict:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import LinearSVC

    X, y, Xt, yt = prepared.Phi_train, prepared.y_train, prepared.Phi_test, prepared.y_test
    cv = StratifiedKFold(5, shuffle=True, random_state=seed)
    out = {}
    t0 = time.perf_counter()
    lr = LogisticRegressionCV(Cs=C_GRID, cv=cv, solver="liblinear", scoring="accuracy", max_iter=10_000,
                              random_state=seed, **_l1_kwargs()).fit(X, y)
    seconds = time.perf_counter() - t0
    out["l1_logistic_cv"] = {"seconds_incl_cv": seconds, "C": float(np.ravel(lr.C_)[0]),
                             "nonzero_coefs": int(np.sum(lr.coef_ != 0)),
                             "test_error": float(np.mean(lr.predict(Xt) != yt)),
                             "_wrong": lr.predict(Xt) != yt}
    t0 = time.perf_counter()
    svm = GridSearchCV(LinearSVC(max_iter=100_000, random_state=seed), {"C": C_GRID}, cv=cv).fit(X, y)
    seconds = time.perf_counter() - t0
    out["linear_svm_cv"] = {"seconds_incl_cv": seconds, "C": float(svm.best_params_["C"]),
                            "test_error": float(np.mean(svm.predict(Xt) != yt)),
                            "_wrong": svm.predict(Xt) != yt}
    return out


def _mcnemar_p(wrong_a: np.ndarray, wrong_b: np.ndarray) -> float:
    from scipy.stats import binomtest

    b = int(np.sum(wrong_a & ~wrong_b))
    c = int(np.sum(~wrong_a & wrong_b))
    return 1.0 if b + c == 0 else float(binomtest(b, b + c, 0.5).pvalue)


def equal_accuracy(methods: dict[str, dict], n_test: int) -> dict:
    """Every method's error with its binomial SE, and each pair: equal within one SE?"""
    se = {k: float(np.sqrt(v["test_error"] * (1 - v["test_error"]) / n_test)) for k, v in methods.items()}
    names = list(methods)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diff = abs(methods[a]["test_error"] - methods[b]["test_error"])
            bound = max(se[a], se[b])
            pairs.append({"a": a, "b": b, "abs_difference": diff, "one_se": bound, "equal_within_se": diff <= bound,
                          "mcnemar_p": _mcnemar_p(methods[a]["_wrong"], methods[b]["_wrong"])})
    return {"se": se, "pairs": pairs}


def digits_case(repeats: int, skip_nuts: bool) -> dict:
    split = datasets.load("digits_even_odd", 0, standardize=False)
    prepared = registry.prepare("grid-rvm", split, {})
    n_test = int(prepared.Phi_test.shape[0])
    vb = digits_vb(prepared, repeats)
    for prior, r in vb.items():
        print(f"  VB {prior}: {1e3 * r['warm_seconds_median']:.1f} ms warm, {r['sweeps']} sweeps "
              f"({'converged' if r['converged'] else r['reason']}), test error {r['test_error']:.4f}", flush=True)
    sk = digits_sklearn(prepared)
    for name, r in sk.items():
        print(f"  {name}: {r['seconds_incl_cv']:.2f} s incl. CV (C = {r['C']:g}), test error {r['test_error']:.4f}",
              flush=True)
    nuts = {} if skip_nuts else digits_nuts(prepared)
    methods = {f"vb {p}": {"test_error": r["test_error"], "_wrong": _wrong(r["_p_test"], prepared.y_test)}
               for p, r in vb.items()}
    methods |= {f"nuts {p}": {"test_error": r["test_error"], "_wrong": _wrong(r["_p_test"], prepared.y_test)}
                for p, r in nuts.items()}
    methods |= {k: {"test_error": r["test_error"], "_wrong": r["_wrong"]} for k, r in sk.items()}
    acc = equal_accuracy(methods, n_test)
    for prior, r in vb.items():
        if prior in nuts:
            n = nuts[prior]
            r["nuts_warm_over_vb_warm"] = n["seconds_warm"] / r["warm_seconds_median"]
            r["nuts_total_over_vb_warm"] = n["seconds_total"] / r["warm_seconds_median"]
            r["test_predictive_mean_abs_diff_vs_nuts"] = float(np.mean(np.abs(r["_p_test"] - n["_p_test"])))
            r["test_predictive_max_abs_diff_vs_nuts"] = float(np.max(np.abs(r["_p_test"] - n["_p_test"])))
        for name, s in sk.items():
            r[f"{name}_seconds_over_vb_warm"] = s["seconds_incl_cv"] / r["warm_seconds_median"]
    strip = lambda d: {k: v for k, v in d.items() if not k.startswith("_")}  # noqa: E731
    return {"data": "digits_even_odd", "split": 0, "n_train": int(prepared.Phi_train.shape[0]), "n_test": n_test,
            "table": list(prepared.spec.shape), "hyper_prior": {k: prepared.hyper[k] for k in ("a0", "b0", "c0", "d0")},
            "vb": {k: strip(v) for k, v in vb.items()}, "nuts": {k: strip(v) for k, v in nuts.items()},
            "sklearn": {k: strip(v) for k, v in sk.items()},
            "sklearn_settings": {"C_grid": C_GRID.tolist(), "cv": "StratifiedKFold(5, shuffle, seed 0)",
                                 "l1_logistic": "LogisticRegressionCV(L1 penalty, solver='liblinear', "
                                                "scoring='accuracy'), intercept fitted (the gridRVM has none)",
                                 "linear_svm": "GridSearchCV(LinearSVC()) on C, refit on all training points",
                                 "inputs": "raw pixel intensities in [0, 1], as the VB sees them"},
            "accuracy": acc}


# --------------------------------------------------------------------------------------
def markdown(result: dict) -> str:
    lines = [f"# gridRVM VB costs ({result['date']}, {result['machine']}, {result['cpu_count']} CPUs, shared)", ""]
    if result["branches"]:
        lines += [f"## Seconds per VB sweep, ESL mixture, N = 200, {result['sweeps']} sweeps, warm", "",
                  "| prior | M | table | primal ms/sweep | Woodbury ms/sweep | primal / Woodbury "
                  "| max rel. diff E[w] |",
                  "|---|---|---|---|---|---|---|"]
        for r in result["branches"]:
            primal = (f"{1e3 * r['primal_seconds_per_sweep']:.2f}" if "primal_seconds_per_sweep" in r else
                      f"skipped (predicted {1e3 * r['primal_predicted_seconds_per_sweep']:.0f})")
            ratio = f"{r['primal_over_woodbury']:.2f}" if "primal_over_woodbury" in r else "-"
            diff = f"{r['branches_mu_max_abs_diff_relative']:.1e}" if "branches_mu_max_abs_diff_relative" in r else "-"
            lines.append(f"| {r['prior']} | {r['M']} | {r['table'][0]} x {r['table'][1]} | {primal} | "
                         f"{1e3 * r['woodbury_seconds_per_sweep']:.2f} | {ratio} | {diff} |")
        lines.append("")
        for prior, c in result["crossover"].items():
            if c.get("bracket"):
                lines.append(f"- {prior}: Woodbury cheaper from M = {c['bracket'][1]} on (primal cheaper at "
                             f"M = {c['bracket'][0]}; log-log interpolation M ~ {c['interpolated_M']:.0f}); "
                             f"the paper's rule switches at M > N = {c['N']}.")
            else:
                lines.append(f"- {prior}: {c.get('note')}")
        lines.append("")
    d = result.get("digits")
    if d:
        lines += [f"## Digits (even/odd), {d['n_train']} training images, {d['n_test']} test, table "
                  f"{d['table'][0]} x {d['table'][1]}, hyper-prior 2", "",
                  "| method | seconds | test error | binomial SE | NUTS warm / this |",
                  "|---|---|---|---|---|"]
        se = d["accuracy"]["se"]
        for prior, r in d["vb"].items():
            ratio = f"{r['nuts_warm_over_vb_warm']:.0f}" if "nuts_warm_over_vb_warm" in r else "-"
            lines.append(f"| VB {prior} ({r['sweeps']} sweeps) | {r['warm_seconds_median']:.4f} (warm) | "
                         f"{r['test_error']:.4f} | {se['vb ' + prior]:.4f} | {ratio} |")
        for prior, r in d["nuts"].items():
            lines.append(f"| NUTS {prior} ({'certified' if r['certified'] else 'NOT certified'}) | "
                         f"{r['seconds_warm']:.1f} warm ({r['seconds_total']:.1f} total) | {r['test_error']:.4f} | "
                         f"{se['nuts ' + prior]:.4f} | 1 |")
        for name, r in d["sklearn"].items():
            lines.append(f"| {name} (C = {r['C']:g}) | {r['seconds_incl_cv']:.3f} (incl. 5-fold CV) | "
                         f"{r['test_error']:.4f} | {se[name]:.4f} | - |")
        lines += ["", "Pairs whose errors differ by more than one binomial SE:", ""]
        unequal = [p for p in d["accuracy"]["pairs"] if not p["equal_within_se"]]
        lines += [f"- {p['a']} vs {p['b']}: {p['abs_difference']:.4f} > {p['one_se']:.4f} "
                  f"(McNemar p = {p['mcnemar_p']:.3g})" for p in unequal] or ["- none"]
        lines.append("")
    lines.append(f"Total wall time: {result['total_wall_seconds']:.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/grid_vb_costs.json")
    ap.add_argument("--sweeps", type=int, default=SWEEPS)
    ap.add_argument("--primal-budget", type=float, default=90.0,
                    help="skip a primal run predicted to take longer than this (seconds; default 90)")
    ap.add_argument("--repeats", type=int, default=5, help="warm VB calls on the digits (median)")
    ap.add_argument("--skip-branches", action="store_true")
    ap.add_argument("--skip-digits", action="store_true")
    ap.add_argument("--skip-nuts", action="store_true")
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    start = time.perf_counter()
    result = {"machine": platform.platform(), "processor": platform.processor() or platform.machine(),
              "cpu_count": os.cpu_count(), "python": platform.python_version(),
              "load_average_at_start": list(os.getloadavg()), "date": time.strftime("%Y-%m-%d"),
              "sweeps": args.sweeps, "primal_budget_seconds": args.primal_budget,
              "branches": [], "crossover": {}, "digits": None,
              "note": "ratios are taken within this one run; the machine is shared (2 cores), so absolute seconds "
                      "move between runs"}
    if not args.skip_branches:
        split = datasets.load("esl_mixture", 0, standardize=False)
        designs = esl_designs(split)
        print(f"{'prior':<8}{'M':>6}{'table':>10}{'primal ms/sweep':>17}{'woodbury ms/sweep':>19}{'primal/wood':>13}"
              f"{'E[w] rel diff':>15}", flush=True)
        for prior in BRANCH_PRIORS:
            history: list[tuple[int, float]] = []
            rows = []
            for design in designs:
                row = branch_case(design, prior, args.sweeps, args.primal_budget, history)
                rows.append(row)
                result["branches"].append(row)
                primal = (f"{1e3 * row['primal_seconds_per_sweep']:.2f}" if "primal_seconds_per_sweep" in row
                          else f"skip(~{1e3 * row['primal_predicted_seconds_per_sweep']:.0f})")
                ratio = f"{row['primal_over_woodbury']:.2f}" if "primal_over_woodbury" in row else "-"
                diff = (f"{row['branches_mu_max_abs_diff_relative']:.1e}"
                        if "branches_mu_max_abs_diff_relative" in row else "-")
                print(f"{prior:<8}{row['M']:>6}{row['table'][0]:>5} x{row['table'][1]:>4}{primal:>17}"
                      f"{1e3 * row['woodbury_seconds_per_sweep']:>19.2f}{ratio:>13}{diff:>15}", flush=True)
                if "primal_skipped" in row:
                    print(f"    primal skipped: {row['primal_skipped']}", flush=True)
            result["crossover"][prior] = crossover(rows)
            print(f"  crossover ({prior}): {json.dumps(result['crossover'][prior])}", flush=True)
    if not args.skip_digits:
        print("digits_even_odd (8 x 8 table, 500 training images):", flush=True)
        result["digits"] = digits_case(args.repeats, args.skip_nuts)
        for p in result["digits"]["accuracy"]["pairs"]:
            print(f"  {p['a']:>16} vs {p['b']:<16}: |diff| {p['abs_difference']:.4f} "
                  f"{'<=' if p['equal_within_se'] else '> '} SE {p['one_se']:.4f}  (McNemar p = {p['mcnemar_p']:.3g})")
    result["total_wall_seconds"] = time.perf_counter() - start
    write_json_atomic(result, args.out)
    md = os.path.splitext(args.out)[0] + ".md"
    write_text_atomic(md, markdown(result))
    print(json.dumps({"written": [args.out, md], "total_wall_seconds": round(result["total_wall_seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
