"""What Horii's VB costs: against scikit-learn's cross-validated L1 logistic regression on
a1a and w1a, what each speed lever of ``inference/gig_vb.py`` contributes, how close its
default stop comes to the converged fit, where the pair form of a sparse design pays, and
the two branches of its q(beta) update as the number of coefficients p grows past n.

1. a1a, w1a (official training files, binary features, an intercept column), the paper's
   k = theta = 1e-6. Warm seconds (compilation excluded, as ``zoo compare`` times engines;
   the best of ``--repeats`` runs) of
   - ``default``: the engine as shipped (SQUAREM, ELBO rule tol = 1e-10, pair form where
     the design is sparse);
   - ``dense design``: the same iteration on the dense design (the sparse lever off);
   - ``plain, earlier rule``: plain sweeps stopped by the earlier rule (ELBO rise per sweep
     <= 1e-9 |ELBO| or E[beta] steps <= 1e-9), on the pair form: the iteration and stop
     levers off. (The earlier engine also ran the dense design; ``--earlier`` adds that row,
     which takes minutes on w1a);
   - ``converged``: the default iteration without a stopping rule, to the 5000-sweep cap -
     the reference the others are measured against: ELBO difference, mean and max
     |p - p*| of the training predictive, and test accuracy;
   against L1-LR with C chosen by 5-fold CV over 13 values (65 fits + the refit;
   ``reproductions/horii.py``), timed the same way, and the ratio of the seconds of
   ``default`` to it.
2. Design: synthetic 0/1 designs (n = 2000, p = 200, a bias column) of several densities;
   plain sweeps on the dense design and on its pairs, seconds per sweep - where the pair
   form pays (``gig_vb.PAIR_COST``).
3. Branch cost: synthetic logistic data with n = 100 and p in {50, ..., 1600}; plain sweeps
   forced to the primal branch (p x p Cholesky, O(p^3 + n p^2) per sweep) and to the
   Woodbury branch (n x n, O(n^2 p + n^3)), ``SWEEPS`` sweeps each, warm; seconds per
   sweep and their ratio. The paper switches at p > n; this measures where it pays.

Ratios are taken within one run on one machine; the JSON records every timing and the load
average before and after.

    python benchmarks/gig_vb_costs.py                 # about 10 minutes on 2 cores
    python benchmarks/gig_vb_costs.py --skip-libsvm   # design and branch costs only
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
from zoo.inference import gig_vb
from zoo.models.gig_logistic import GIGLogistic
from zoo.reproductions.baselines import regularized_lr
from zoo.validation.base.atomic import write_json_atomic

SWEEPS = 20
P_GRID = (50, 100, 200, 400, 800, 1600)
DENSITIES = (0.01, 0.03, 0.1, 0.15, 0.2, 0.3)
VARIANTS = {
    "default": gig_vb.GIGVBConfig(),
    "dense design": gig_vb.GIGVBConfig(design="dense"),
    "plain, earlier rule": gig_vb.GIGVBConfig(accelerate="none", tol=1e-9, beta_tol=1e-9),
    "converged": gig_vb.GIGVBConfig(tol=None),
}
EARLIER = gig_vb.GIGVBConfig(accelerate="none", tol=1e-9, beta_tol=1e-9, design="dense")


def _best_of(repeats: int, fn):
    """(result of the fastest call, its seconds, all seconds); fn() -> (result, seconds)."""
    runs = [fn() for _ in range(repeats)]
    best = min(range(repeats), key=lambda i: runs[i][1])
    return runs[best][0], runs[best][1], [r[1] for r in runs]


def libsvm_case(name: str, repeats: int, earlier: bool) -> dict:
    s = datasets.load(name, 0, standardize=False)
    Phi = np.hstack([np.ones((s.X_train.shape[0], 1)), s.X_train])
    Phi_test = np.hstack([np.ones((s.X_test.shape[0], 1)), s.X_test])
    spec = GIGLogistic.paper_prior()
    variants = dict(VARIANTS, **({"earlier engine": EARLIER} if earlier else {}))
    fits = {}
    for label, cfg in variants.items():
        gig_vb.fit(spec, Phi, s.y_train, config=cfg)  # compiles
        n_rep = repeats if label == "default" else 1

        def one():
            post = gig_vb.fit(spec, Phi, s.y_train, config=cfg)
            return post, post.info.seconds

        post, seconds, all_seconds = _best_of(n_rep, one)
        fits[label] = (post, seconds, all_seconds)
        print(f"  {name} {label}: {seconds:.2f} s, {post.info.n_iter} sweeps", flush=True)

    def lr():
        t0 = time.perf_counter()
        out = regularized_lr(s.X_train, s.y_train, True, True, seed=0)
        return out, time.perf_counter() - t0

    (coef, b0, C), lr_seconds, lr_all = _best_of(repeats, lr)
    lr_acc = float(np.mean(((s.X_test @ coef + b0) > 0) == (s.y_test == 1)))
    ref = fits["converged"][0]
    p_ref = ref.predict_proba(Phi)
    rows = {}
    for label, (post, seconds, all_seconds) in fits.items():
        dp = np.abs(post.predict_proba(Phi) - p_ref)
        kinds = np.bincount(post.info.extra["sweep_kind"], minlength=3)
        rows[label] = {
            "seconds_warm": float(seconds), "seconds_all": [float(x) for x in all_seconds],
            "sweeps": int(post.info.n_iter), "converged": bool(post.info.converged),
            "status": post.info.reason or "converged", "design": post.info.extra["design"],
            "seconds_per_sweep": float(seconds / post.info.n_iter),
            "extrapolations_kept": int(kinds[gig_vb.EXTRAPOLATED]),
            "extrapolations_rejected": int(kinds[gig_vb.REJECTED]),
            "elbo": float(post.info.trace[-1]), "elbo_below_converged": float(ref.info.trace[-1] - post.info.trace[-1]),
            "train_mean_abs_dp": float(np.mean(dp)), "train_max_abs_dp": float(np.max(dp)),
            "accuracy": float(np.mean((post.predict_proba(Phi_test) > 0.5) == (s.y_test == 1))),
            "largest_relative_decrease": float(post.info.extra["largest_relative_decrease"]),
        }
    d = rows["default"]
    return {"data": name, "n": int(Phi.shape[0]), "p": int(Phi.shape[1]), "n_test": int(Phi_test.shape[0]),
            "pairs": gig_vb.count_pairs(Phi), "vb": rows,
            "vb_seconds_warm": d["seconds_warm"], "vb_sweeps": d["sweeps"], "vb_converged": d["converged"],
            "vb_accuracy": d["accuracy"], "l1_cv_seconds": float(lr_seconds),
            "l1_cv_seconds_all": [float(x) for x in lr_all],
            "l1_C": C, "l1_accuracy": lr_acc, "vb_over_l1": float(d["seconds_warm"] / lr_seconds)}


def design_case(density: float, n: int = 2000, p: int = 200, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = np.hstack([np.ones((n, 1)), (rng.random((n, p - 1)) < density).astype(float)])
    beta = np.zeros(p)
    beta[:5] = [-1.0, 1.0, -1.0, 1.0, -1.0]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(float)
    out = {"n": n, "p": p, "density": density, "pairs": gig_vb.count_pairs(X), "n_p2": n * p * p,
           "auto_uses_pairs": gig_vb.uses_pairs(X, False)}
    for design in ("dense", "sparse"):
        cfg = gig_vb.GIGVBConfig(max_iter=SWEEPS, tol=None, accelerate="none", design=design)
        gig_vb.run(GIGLogistic(), X, y, config=cfg)  # compiles
        res = gig_vb.run(GIGLogistic(), X, y, config=cfg)
        out[f"{design}_seconds_per_sweep"] = res.seconds / res.n_iter
    out["dense_over_pairs"] = out["dense_seconds_per_sweep"] / out["sparse_seconds_per_sweep"]
    return out


def branch_case(p: int, n: int = 100, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:10] = 1.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(float)
    out = {"n": n, "p": p}
    for branch in ("primal", "woodbury"):
        cfg = gig_vb.GIGVBConfig(max_iter=SWEEPS, tol=None, accelerate="none", design="dense", branch=branch)
        gig_vb.run(GIGLogistic(), X, y, config=cfg)  # compiles
        res = gig_vb.run(GIGLogistic(), X, y, config=cfg)
        out[f"{branch}_seconds_per_sweep"] = res.seconds / res.n_iter
    out["primal_over_woodbury"] = out["primal_seconds_per_sweep"] / out["woodbury_seconds_per_sweep"]
    return out


def _table_rows(values, case, rows: list, describe) -> None:
    """Measure case(v) for each v, keep the rows and print each as it is done."""
    for v in values:
        row = case(v)
        rows.append(row)
        print(describe(v, row), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/gig_vb_costs.json")
    ap.add_argument("--skip-libsvm", action="store_true")
    ap.add_argument("--skip-design", action="store_true")
    ap.add_argument("--skip-branches", action="store_true")
    ap.add_argument("--earlier", action="store_true", help="add the earlier engine (plain, dense; minutes on w1a)")
    ap.add_argument("--repeats", type=int, default=2, help="timings of the default VB and of L1-LR: best of this many")
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    result = {"machine": platform.platform(), "cpu_count": os.cpu_count(), "sweeps": SWEEPS,
              "date": time.strftime("%Y-%m-%d %H:%M"), "loadavg_start": list(os.getloadavg()),
              "repeats": args.repeats, "libsvm": [], "design": [], "branches": []}
    if not args.skip_libsvm:
        for name in ("a1a", "w1a"):
            row = libsvm_case(name, args.repeats, args.earlier)
            result["libsvm"].append(row)
            for label, v in row["vb"].items():
                print(f"{name} VB {label:20s} {v['seconds_warm']:7.2f} s {v['sweeps']:5d} sweeps "
                      f"({v['design']}, {v['status']}), acc {v['accuracy']:.5f}, ELBO {v['elbo_below_converged']:.1e} "
                      f"below converged, mean|dp| {v['train_mean_abs_dp']:.1e}", flush=True)
            print(f"{name}: L1-LR CV {row['l1_cv_seconds']:.2f} s (acc {row['l1_accuracy']:.5f}); "
                  f"VB / L1-LR = {row['vb_over_l1']:.2f}", flush=True)
    if not args.skip_design:
        _table_rows(DENSITIES, design_case, result["design"], lambda density, row: (
            f"density {density:4.2f}: pairs / (n p^2) = {row['pairs'] / row['n_p2']:.4f}, dense "
            f"{1e3 * row['dense_seconds_per_sweep']:7.2f} ms/sweep, "
            f"pairs {1e3 * row['sparse_seconds_per_sweep']:7.2f} ms/sweep, "
            f"dense / pairs {row['dense_over_pairs']:.2f} "
            f"(auto: {'pairs' if row['auto_uses_pairs'] else 'dense'})"))
    if not args.skip_branches:
        _table_rows(P_GRID, branch_case, result["branches"], lambda p, row: (
            f"n = 100, p = {p:5d}: primal {1e3 * row['primal_seconds_per_sweep']:8.2f} ms/sweep, "
            f"woodbury {1e3 * row['woodbury_seconds_per_sweep']:8.2f} ms/sweep, "
            f"primal / woodbury {row['primal_over_woodbury']:.2f}"))
    result["loadavg_end"] = list(os.getloadavg())
    write_json_atomic(result, args.out)
    print(json.dumps({"written": args.out, "loadavg_start": result["loadavg_start"],
                      "loadavg_end": result["loadavg_end"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
