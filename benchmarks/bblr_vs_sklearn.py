"""Seconds to fit a linear BBLR (``sla``, ``slam``, the end-to-end BBLR3) against scikit-learn's
LogisticRegression and LinearSVC on the four UCI sets of Hasan & Pal, with the test errors
beside the times so that "seconds at equal accuracy" can be read. Never asserted in tests.

    python benchmarks/bblr_vs_sklearn.py                      # all four sets, 7 warm repeats
    python benchmarks/bblr_vs_sklearn.py --data pima --repeats 3

One split per data set: split 0 of the catalog entry (80 / 20 stratified; inputs
standardized on the training part), a bias column for BBLR. Methods:
* ``sla``: SLA on BBLR2's spec (a, b from the class counts, gamma = 4, lam = 1) - one fit;
* ``slam``: the same spec, SLA's learning rate and probe spacing chosen on a held-out fifth
  (3 x 3 grid: 10 SLA runs);
* ``bblr3``: ``sla.fit_slam_end_to_end`` - lam over 11 values, then the 3 x 3 grid, then
  the fit: 21 SLA runs;
* ``lr-C1`` / ``svm-C1``: LogisticRegression (lbfgs) / LinearSVC at C = 1 - one fit each, the
  counterparts of ``sla``;
* ``lr-cv`` / ``svm-cv``: C over 13 values 10^-3..10^3 by 5-fold CV and a refit (the
  ``zoo reproduce bblr-uci`` baselines), the counterparts of ``bblr3``.

Each method is called once (for the JAX engines this compiles their programs for the data's
shape; that first call's seconds are recorded too), then ``--repeats`` times; the median of
the repeats is the warm time. All in one process, one run: the ratios are what to read.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

import zoo  # noqa: F401  (float64, one BLAS thread)
from zoo import data as datasets
from zoo.inference import sla
from zoo.models.basis import LinearBasis, WithBias
from zoo.models.bblr import BBLR
from zoo.reproductions.baselines import linear_svm, regularized_lr
from zoo.validation.base.atomic import write_json_atomic

DATA = ("breast_wisconsin", "statlog_heart", "liver", "pima")
GAMMA, LAM = 4.0, 1.0


def methods(X, y):
    """{name: fit()} where fit() returns a predict(X_std) -> 0/1 function."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    basis = WithBias(LinearBasis.fit(X))
    Phi = basis.transform(X)
    spec = BBLR.from_counts(y, gamma=GAMMA, lam=LAM)

    def bblr(spec_, post):
        w = post.mean_flat()
        return lambda Xt: (np.asarray(spec_.prob(basis.transform(Xt) @ w)) > 0.5).astype(int)

    def fit_sla():
        return bblr(spec, sla.fit(spec, Phi, y))

    def fit_slam():
        return bblr(spec, sla.fit_slam(spec, Phi, y, seed=0))

    def fit_bblr3():
        e2e = sla.fit_slam_end_to_end(Phi, y, seed=0)
        return bblr(e2e.spec, e2e.posterior)

    def fit_lr1():
        m = LogisticRegression(C=1.0).fit(X, y)
        return lambda Xt: m.predict(Xt).astype(int)

    def fit_svm1():
        m = LinearSVC(C=1.0, random_state=0).fit(X, y)
        return lambda Xt: m.predict(Xt).astype(int)

    def fit_lr_cv():
        coef, b0, _ = regularized_lr(X, y, False, True, 0)
        return lambda Xt: (Xt @ coef + b0 > 0).astype(int)

    def fit_svm_cv():
        m, _ = linear_svm(X, y, 0)
        return lambda Xt: m.predict(Xt).astype(int)

    return {"sla": fit_sla, "slam": fit_slam, "bblr3": fit_bblr3, "lr-C1": fit_lr1, "svm-C1": fit_svm1,
            "lr-cv": fit_lr_cv, "svm-cv": fit_svm_cv}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=",".join(DATA), help="comma-separated data sets")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results/bblr_vs_sklearn.json")
    args = ap.parse_args(argv)
    names = [d.strip() for d in args.data.split(",") if d.strip()]
    bad = [d for d in names if d not in DATA]
    if bad or not names:
        ap.error(f"--data must be comma-separated names from {', '.join(DATA)}; got {args.data!r}")
    if args.repeats < 1:
        ap.error("--repeats must be a positive integer")
    load_start = os.getloadavg()[0]
    rows = {}
    for d in names:
        s = datasets.load(d, 0)
        y_tr, y_te = (s.y_train > 0.5).astype(int), (s.y_test > 0.5).astype(int)
        rows[d] = {"n_train": int(y_tr.size), "n_test": int(y_te.size), "methods": {}}
        for name, fit in methods(s.X_train, s.y_train).items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # liblinear's iteration-cap warnings inside the CV
                t0 = time.perf_counter()
                predict = fit()
                first = time.perf_counter() - t0
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    predict = fit()
                    times.append(time.perf_counter() - t0)
            errors = int(np.sum(predict(s.X_test) != y_te))
            rows[d]["methods"][name] = {"warm_seconds_median": float(np.median(times)),
                                        "warm_seconds_min": float(np.min(times)), "first_call_seconds": first,
                                        "test_errors": errors, "test_error": errors / y_te.size}
            print(f"{d:17s} {name:7s} warm {np.median(times):8.4f} s  first {first:7.3f} s  "
                  f"test errors {errors}/{y_te.size}", flush=True)
        m = rows[d]["methods"]
        rows[d]["ratios"] = {"sla_over_lr_C1": m["sla"]["warm_seconds_median"] / m["lr-C1"]["warm_seconds_median"],
                             "bblr3_over_lr_cv": m["bblr3"]["warm_seconds_median"] / m["lr-cv"]["warm_seconds_median"],
                             "bblr3_over_svm_cv": m["bblr3"]["warm_seconds_median"]
                             / m["svm-cv"]["warm_seconds_median"]}
    out = {"split": "catalog split 0 (80 / 20 stratified), inputs standardized on the training part",
           "bblr": {"gamma": GAMMA, "lam_fixed": LAM, "spec": "BBLR2 (a, b from the class counts)"},
           "repeats": args.repeats, "data": rows,
           "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version(),
                       "cpus": os.cpu_count(), "load_average_at_start": load_start,
                       "load_average_at_end": os.getloadavg()[0]},
           "note": "warm = median of the repeats after one call; ratios measured in this one run"}
    write_json_atomic(out, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
