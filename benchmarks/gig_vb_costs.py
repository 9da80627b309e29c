"""What Horii's VB costs: against scikit-learn's cross-validated L1 logistic regression on
a1a and w1a, and the two branches of its q(beta) update as the number of coefficients p
grows past the number of points n.

1. a1a, w1a (official training files, binary features, an intercept): warm seconds of
   one VB fit at the paper's k = theta = 1e-6 (compilation excluded, as ``zoo compare``
   times engines) against the seconds of L1-LR with C chosen by 5-fold CV over 13 values
   (65 fits + the refit; ``validation/reproduce/horii.py``), and their test accuracies.
2. Branch cost: synthetic logistic data with n = 100 and p in {50, ..., 1600}; the VB
   iteration forced to the primal branch (p x p Cholesky, O(p^3 + n p^2) per sweep) and to
   the Woodbury branch (n x n, O(n^2 p + n^3)), ``SWEEPS`` sweeps each, warm; seconds per
   sweep and their ratio. The paper switches at p > n; this measures where it pays.

Ratios are taken within one run on one machine; the JSON records both timings.

    python benchmarks/gig_vb_costs.py                 # about 5-10 minutes on 2 cores
    python benchmarks/gig_vb_costs.py --skip-libsvm   # branch costs only (~1 min)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import zoo
from zoo.inference import gig_vb
from zoo.models.gig_logistic import GIGLogistic
from zoo import data as datasets
from zoo.validation.atomic import write_json_atomic
from zoo.validation.reproduce.horii import regularized_lr

SWEEPS = 20
P_GRID = (50, 100, 200, 400, 800, 1600)


def libsvm_case(name: str) -> dict:
    s = datasets.load(name, 0, standardize=False)
    Phi = np.hstack([np.ones((s.X_train.shape[0], 1)), s.X_train])
    Phi_test = np.hstack([np.ones((s.X_test.shape[0], 1)), s.X_test])
    spec = GIGLogistic.paper_prior()
    gig_vb.fit(spec, Phi, s.y_train)  # compiles
    post = gig_vb.fit(spec, Phi, s.y_train)
    vb_acc = float(np.mean((post.predict_proba(Phi_test) > 0.5) == (s.y_test == 1)))
    t0 = time.perf_counter()
    coef, b0, C = regularized_lr(s.X_train, s.y_train, True, True, seed=0)
    lr_seconds = time.perf_counter() - t0
    lr_acc = float(np.mean(((s.X_test @ coef + b0) > 0) == (s.y_test == 1)))
    return {"data": name, "n": int(Phi.shape[0]), "p": int(Phi.shape[1]),
            "vb_seconds_warm": float(post.info.seconds), "vb_sweeps": int(post.info.n_iter),
            "vb_converged": bool(post.info.converged), "vb_accuracy": vb_acc,
            "l1_cv_seconds": lr_seconds, "l1_C": C, "l1_accuracy": lr_acc,
            "vb_over_l1": float(post.info.seconds / lr_seconds)}


def branch_case(p: int, n: int = 100, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:10] = 1.0
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(float)
    out = {"n": n, "p": p}
    for branch in ("primal", "woodbury"):
        cfg = gig_vb.VBConfig(max_iter=SWEEPS, tol=1e-15, beta_tol=1e-15, branch=branch)
        gig_vb.run(GIGLogistic(), X, y, config=cfg)  # compiles
        res = gig_vb.run(GIGLogistic(), X, y, config=cfg)
        out[f"{branch}_seconds_per_sweep"] = res.seconds / res.n_iter
    out["primal_over_woodbury"] = out["primal_seconds_per_sweep"] / out["woodbury_seconds_per_sweep"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/gig_vb_costs.json")
    ap.add_argument("--skip-libsvm", action="store_true")
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    result = {"machine": platform.platform(), "cpu_count": os.cpu_count(), "sweeps": SWEEPS,
              "date": time.strftime("%Y-%m-%d"), "libsvm": [], "branches": []}
    if not args.skip_libsvm:
        for name in ("a1a", "w1a"):
            row = libsvm_case(name)
            result["libsvm"].append(row)
            print(f"{name}: VB {row['vb_seconds_warm']:.2f} s ({row['vb_sweeps']} sweeps, acc {row['vb_accuracy']:.4f}) "
                  f"vs L1-LR CV {row['l1_cv_seconds']:.2f} s (acc {row['l1_accuracy']:.4f}): "
                  f"ratio {row['vb_over_l1']:.2f}", flush=True)
    for p in P_GRID:
        row = branch_case(p)
        result["branches"].append(row)
        print(f"n = 100, p = {p:5d}: primal {1e3 * row['primal_seconds_per_sweep']:8.2f} ms/sweep, "
              f"woodbury {1e3 * row['woodbury_seconds_per_sweep']:8.2f} ms/sweep, "
              f"primal / woodbury {row['primal_over_woodbury']:.2f}", flush=True)
    write_json_atomic(result, args.out)
    print(json.dumps({"written": args.out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
