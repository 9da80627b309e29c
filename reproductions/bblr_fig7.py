"""Entry for Hasan & Pal's Fig. 7: ``bblr-fig7`` - how the number of kernel functions grows
with the training set, the RBF SVM against the sparse kernel BBLR.

The paper: "Figure 7 shows trends in the sparsity curves for an increase in the number of
training instances comparing KBBLR with SVMs for one of the product review databases ...
Support vectors for SVMs increase almost linearly for an increase in the database size ... In
comparison we can see that KBBLR with a Gaussian-Laplacian mixture prior produces a logarithmic
curve". KBBLR here is the sparse KBBLR of Table 15 (``bblr-kernel``).

Departure: data. The product-review corpora (Blitzer / Dredze) are not shipped and cannot be
fetched offline. The stand-in is LIBSVM's ``a1a`` (UCI Adult, income > 50K, 123 binary
features; ``zoo.data``): its training and test files pooled (1,605 + 30,956 = 32,561 points,
24.1 % positive), so that training sets larger than the 1,605-point training file can be
drawn. Another task, another input space: the curves' shapes are what is compared, not numbers.

Protocol. For each of ``--reps`` repetitions (default 5), seeded by the run seed and the
repetition (``zoo.data.splits.bitgen`` with this entry's stream ``FIG7_STREAM``): each class of
the pool in a random order; the test set is the last ``--n-test`` points (default 5,000,
stratified), the training set of size n the first round(n x 24.1 %) positives and the rest
negatives from the front - so the training sets of one repetition are nested (each larger one
contains the smaller) and never meet the test set. Inputs are the raw binary features, not
standardized (``bblr-w1a`` says why for binary LIBSVM data: a rare feature would become a
column of huge values, here dominating every kernel distance). On each training set:

* SVM: scikit-learn's RBF ``SVC``, C and width over ``bblr-kernel``'s grids by 5-fold
  stratified CV (accuracy), refitted on the whole training set; its kernel functions are its
  support vectors;
* sparse KBBLR: ``sparse_kbblr.fit_end_to_end`` on the RBF design with the median-heuristic
  width, a, b from the class counts (BBLR2; ``--ab weak`` for BBLR1); its kernel functions are
  the members of the mixture prior's broader component at the end - ``bblr-kernel``'s counting
  rule.

Both are tested on the repetition's test set.

Sizes. Default 125, 250, 500, 1000 (the paper's sizes are not in our copy): the sparse
KBBLR's cost grows about as n^2 (its probe moves every one of n weights and tracks the n
fitted values), so one fit at n = 2000 would cost about four times one at 1000 - more than
the four default sizes together - and five repetitions of it would take the default run far
past the half hour it is sized for on two shared cores (docs/reproductions.md has the measured
time). 125 to 1000 spans three doublings, enough to tell a slope near 1 from a logarithm
(whose log-log slope 1 / ln(count) is below 0.5 at these counts). ``--sizes`` takes any
increasing list; the cells of one size do not depend on the others, so adding a size reuses
them.

Criteria (each with its statistical basis; reps >= 2). The growth rate is read on a log scale,
as the log-log slope: count ~ n^s grows linearly for s = 1, and a logarithm's local slope
1 / ln(count) is well below 1. The sparse KBBLR keeps nothing at all on the smallest a1a sets
(the hard EM finds no weight worth its prior, ``bblr-kernel``'s Liver case), and 0 has no
logarithm, so every slope here is that of log(1 + count) on log n, for both methods alike. On
the SVM's counts (dozens and more) the 1 changes the slope by a few per cent at most; on small
counts it lowers the slope (by the factor count / (1 + count)), which favours the paper's claim
(b): a "NOT reproduced" under this rule is one in spite of it.

(a) "Support vectors for SVMs increase almost linearly": per repetition the least-squares slope
    over the sizes, then the mean slope and its standard error over repetitions. Linear growth
    is slope 1 (Steinwart 2003: the share of support vectors tends to at least twice the Bayes
    risk, a constant). **reproduced** when mean - 2 se >= 0.8 (``LINEAR_BOUND``): growth
    significantly faster than n^0.8, a doubling of the data multiplying #SV by at least 1.74.
    Whether the slope is also consistent with exactly 1 (within 2 se) is stated beside it.
(b) "KBBLR ... produces a logarithmic curve", i.e. its count grows markedly slower than the
    SVM's: per repetition the paired difference of the two slopes (SVM - KBBLR); **reproduced**
    when its mean exceeds 2 standard errors (a one-sample test of the paired difference,
    two-sided 5 %, normal approximation).
(c) The shape itself: the KBBLR counts of every (repetition, size) fitted by least squares
    with count = a + b ln n and with count = a + b n. Both have two parameters, so the smaller
    residual sum of squares is also the smaller AIC (Gaussian errors); **reproduced** when the
    logarithm fits better with b > 0 (a logarithm is concave: most of its growth comes early).
    Descriptive at four sizes - it names the better of two shapes, it does not prove either -
    so it is reported apart from (b). Needs three sizes.

The figure ``fig7.png`` (beside the table): the counts against n on linear axes (the shape
of (c), with both fits), the same on log-log axes (1 + count, with the mean slopes of (a) and
(b)), and the test errors against n.
"""
from __future__ import annotations

import math
import os
import time

import numpy as np

from zoo import data as datasets
from zoo.data.splits import SEED_IDS, bitgen, permutation
from zoo.inference import sparse_kbblr
from zoo.models.basis import RBFBasis, median_heuristic_width

from ..validation.base.atomic import save_figure
from . import bblr_kernel
from .cells import CellTask, cell_key
from .entry import Entry, Option
from .fitting import mean_sd

DATA = "a1a"
METHODS = ("svm", "kbblr")
METHOD_LABEL = {"svm": "SVM (RBF SVC, C and width by CV)", "kbblr": "sparse KBBLR"}
AB = ("counts", "weak")
DEFAULT_SIZES = (125, 250, 500, 1000)
DEFAULT_N_TEST = 5000
DEFAULT_REPS = 5
#: the stream of this entry's subsets (a label of zoo.data.splits.bitgen, used nowhere else)
FIG7_STREAM = 310_018
#: (a): the SVM's log-log slope must be significantly above this
LINEAR_BOUND = 0.8
#: significance: more than this many standard errors (two-sided 5 %, normal approximation)
Z = 2.0
#: the smallest training set: 5-fold stratified CV needs 5 points of the minority class (24 %)
MIN_SIZE = 25
MIN_TEST = 50


def _half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def pool() -> tuple[np.ndarray, np.ndarray]:
    """a1a's training and test files together: raw binary inputs, 0/1 labels."""
    s = datasets.load(DATA, 0, standardize=False)
    return np.vstack([s.X_train, s.X_test]), np.concatenate([s.y_train, s.y_test])


def subsets(y, sizes, n_test: int, seed: int, rep: int) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """The nested stratified training sets {n: indices} and the test set of one repetition
    (module docstring). ValueError when the sizes and the test set do not fit in the pool."""
    y = np.asarray(y)
    pos, neg = np.flatnonzero(y > 0.5), np.flatnonzero(y <= 0.5)
    frac = pos.size / y.size
    bg = bitgen(FIG7_STREAM, SEED_IDS[DATA], int(seed), int(rep))
    pos, neg = pos[permutation(bg, pos.size)], neg[permutation(bg, neg.size)]
    k_test = _half_up(n_test * frac)

    def k_of(n):  # positives of a training set of n; nondecreasing in n, and so is n - k
        return min(max(_half_up(n * frac), 1), n - 1)

    big = max(sizes)
    if k_of(big) + k_test > pos.size or (big - k_of(big)) + (n_test - k_test) > neg.size:
        raise ValueError(f"the largest training set ({big}) and the test set ({n_test}) do not fit in the "
                         f"{y.size} points of {DATA} (by class: {pos.size} positive, {neg.size} negative)")
    train = {int(n): np.concatenate([pos[:k_of(n)], neg[:n - k_of(n)]]) for n in sizes}
    test = np.sort(np.concatenate([pos[pos.size - k_test:], neg[neg.size - (n_test - k_test):]]))
    return train, test


def _data(size: int, n_test: int, seed: int, rep: int):
    X, y = pool()
    train, test = subsets(y, [size], n_test, seed, rep)
    idx = train[size]
    return X[idx], y[idx], X[test], y[test]


def svm_cell(size: int, rep: int, n_test: int, seed: int, c_grid: list, width_grid: list) -> dict:
    """RBF SVC with C and width by 5-fold stratified CV (``bblr-kernel``'s search)."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    X, y, X_test, y_test = _data(size, n_test, seed, rep)
    cv_seed = seed * 1000 + rep
    grid = {"C": list(c_grid), "gamma": [1.0 / (2.0 * w * w) for w in width_grid]}
    cv = StratifiedKFold(bblr_kernel.N_FOLDS, shuffle=True, random_state=cv_seed)
    t0 = time.perf_counter()
    search = GridSearchCV(SVC(kernel="rbf", random_state=cv_seed), grid, cv=cv).fit(X, y)
    best = search.best_estimator_
    return {"method": "svm", "size": size, "rep": rep, "n_test": int(len(y_test)),
            "error": float(np.mean(best.predict(X_test) != y_test)), "n_kernel": int(best.n_support_.sum()),
            "C": float(search.best_params_["C"]), "width": float(math.sqrt(0.5 / search.best_params_["gamma"])),
            "fit_seconds": time.perf_counter() - t0}


def kbblr_cell(size: int, rep: int, n_test: int, seed: int, ab: str) -> dict:
    """Sparse KBBLR end to end with the median-heuristic width (``bblr-kernel``'s kbblr_cell
    on this entry's subsets)."""
    X, y, X_test, y_test = _data(size, n_test, seed, rep)
    width = median_heuristic_width(X)
    basis = RBFBasis.fit(X, width)
    fit = sparse_kbblr.fit_end_to_end(basis.transform(X), y, ab=ab)
    post, extra = fit.posterior, fit.posterior.info.extra
    p = np.asarray(post.predict_proba(basis.transform(X_test)[:, fit.active])) if fit.active.size else \
        np.full(len(y_test), fit.spec.a + fit.spec.b / 2)  # nothing kept: f = 0 everywhere
    return {"method": "kbblr", "size": size, "rep": rep, "n_test": int(len(y_test)), "width": width,
            "error": float(np.mean((p > 0.5) != (y_test > 0.5))), "n_kernel": int(fit.active.size),
            "n_large": int(extra["n_large"]), "n_nonzero": int(extra["n_nonzero"]), "a": fit.spec.a,
            "b": fit.spec.b, "pi": fit.spec.pi, "s2": fit.spec.s2, "ell": fit.spec.ell,
            "converged": bool(post.info.converged), "fit_seconds": float(post.info.seconds)}


# ------------------------------------------------------------------------------------
# The curves' statistics (plain functions of numbers)
# ------------------------------------------------------------------------------------
def loglog_slope(sizes, counts) -> float:
    """Least-squares slope of log(1 + count) on log n (module docstring: why 1 +)."""
    return float(np.polyfit(np.log(np.asarray(sizes, float)), np.log1p(np.asarray(counts, float)), 1)[0])


def shape_fits(sizes, counts_by_rep) -> dict:
    """count = a + b ln n and count = a + b n fitted by least squares to every (repetition,
    size) point; their coefficients and residual sums of squares."""
    n = np.tile(np.asarray(sizes, float), len(counts_by_rep))
    c = np.concatenate([np.asarray(r, float) for r in counts_by_rep])
    out = {}
    for name, x in (("log", np.log(n)), ("linear", n)):
        b, a = np.polyfit(x, c, 1)
        out[name] = {"a": float(a), "b": float(b), "rss": float(np.sum((c - (a + b * x)) ** 2))}
    return out


def judge(sizes: list, counts: dict) -> dict:
    """The three criteria of the module docstring from counts[method][rep] = [count per size]."""
    slopes = {m: {r: loglog_slope(sizes, cs) for r, cs in counts[m].items()} for m in METHODS}
    stats = {m: mean_sd(list(slopes[m].values())) for m in METHODS}
    svm = stats["svm"]
    lower = svm["mean"] - Z * svm["se"]
    claim_a = {"slope": svm, "bound": LINEAR_BOUND, "lower": lower,
               "consistent_with_1": bool(abs(svm["mean"] - 1.0) <= Z * svm["se"]),
               "verdict": "reproduced" if lower >= LINEAR_BOUND else "NOT reproduced"}
    d = mean_sd([slopes["svm"][r] - slopes["kbblr"][r] for r in counts["svm"]])
    claim_b = {"difference": d, "kbblr_slope": stats["kbblr"],
               "verdict": "reproduced" if d["mean"] > Z * d["se"] else "NOT reproduced"}
    if len(sizes) >= 3:
        fits = shape_fits(sizes, list(counts["kbblr"].values()))
        c_ok = fits["log"]["rss"] < fits["linear"]["rss"] and fits["log"]["b"] > 0
        claim_c = {"fits": fits, "verdict": "reproduced" if c_ok else "NOT reproduced"}
    else:
        claim_c = {"fits": None, "verdict": "not judged (needs three sizes)"}
    return {"slopes": {m: {str(r): s for r, s in slopes[m].items()} for m in METHODS}, "slope_stats": stats,
            "a": claim_a, "b": claim_b, "c": claim_c}


def local_slopes(sizes, counts_by_rep) -> list:
    """Mean over repetitions of the slope of log(1 + count) between consecutive sizes."""
    return [float(np.mean([loglog_slope(sizes[i:i + 2], cs[i:i + 2]) for cs in counts_by_rep]))
            for i in range(len(sizes) - 1)]


# ------------------------------------------------------------------------------------
# The entry
# ------------------------------------------------------------------------------------
def _check(ctx) -> tuple[list, int]:
    o = ctx.options
    if ctx.reps < 2:
        raise ValueError(f"--reps must be at least 2 for {ctx.entry.name} (a slope's standard error needs two "
                         f"repetitions); got {ctx.reps}")
    check_options(o, ctx.reps)
    return list(o["sizes"]), o["n_test"]


def check_options(options: dict, reps: int) -> None:
    """Before any cell (Entry.check): at least two increasing sizes, each one the CV can
    take, a test set of MIN_TEST points or more, and the largest training set and the test
    set fitting in a1a's pool."""
    sizes = list(options["sizes"])
    if len(sizes) < 2 or any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < MIN_SIZE:
        raise ValueError(f"--sizes must be at least two increasing training sizes, each >= {MIN_SIZE} (5-fold "
                         f"stratified CV needs 5 points of the minority class); got {_grid(sizes)}")
    if options["n_test"] < MIN_TEST:
        raise ValueError(f"--n-test must be at least {MIN_TEST} (below it one test point moves the error by more "
                         f"than 2 points in 100); got {options['n_test']}")
    subsets(pool()[1], sizes, options["n_test"], 0, 0)


def run(ctx) -> dict:
    """Run ``bblr-fig7``: an SVM cell and a sparse KBBLR cell for every repetition and training
    size, then the table of kernel functions kept and test errors, the verdicts on claims (a) to
    (c) and the figure ``fig7.png`` in the entry's folder (module docstring).
    Returns {"markdown": the table's text, "json": its data}."""
    o = ctx.options
    sizes, n_test = _check(ctx)
    subsets(pool()[1], sizes, n_test, ctx.seed, 0)  # a ValueError before any fit if they do not fit
    tasks = []
    for rep in range(ctx.reps):
        for n in sizes:
            base = {"size": n, "rep": rep, "n_test": n_test, "seed": ctx.seed}
            kw = {**base, "c_grid": o["svm_c_grid"], "width_grid": o["svm_width_grid"]}
            tasks.append(CellTask(cell_key(f"svm/n{n:05d}/rep{rep:03d}", kw), f"{__name__}:svm_cell", kw,
                                  cost=float(n)))
            kw = {**base, "ab": o["ab"]}
            # the sparse engine's probe and descent cost about n^2 per round
            tasks.append(CellTask(cell_key(f"kbblr-{o['ab']}/n{n:05d}/rep{rep:03d}", kw), f"{__name__}:kbblr_cell",
                                  kw, cost=float(n) ** 2 / 100.0))
    cells = list(ctx.store.run(tasks, "bblr-fig7").values())

    def cell(m, n, rep):
        return next(c for c in cells if c["method"] == m and c["size"] == n and c["rep"] == rep)

    counts = {m: {rep: [cell(m, n, rep)["n_kernel"] for n in sizes] for rep in range(ctx.reps)} for m in METHODS}
    verdicts = judge(sizes, counts)
    rows = []
    for m in METHODS:
        for n in sizes:
            cs = [cell(m, n, rep) for rep in range(ctx.reps)]
            rows.append({"method": m, "size": n, "n_kernel": mean_sd([c["n_kernel"] for c in cs]),
                         "n_kernel_min": min(c["n_kernel"] for c in cs), "n_kernel_max": max(c["n_kernel"] for c in cs),
                         "error": mean_sd([c["error"] for c in cs]),
                         "fit_seconds": float(np.mean([c["fit_seconds"] for c in cs])),
                         **({"unconverged": sum(not c["converged"] for c in cs)} if m == "kbblr" else
                            {"C_median": float(np.median([c["C"] for c in cs])),
                             "width_median": float(np.median([c["width"] for c in cs]))})})
    local = {m: local_slopes(sizes, list(counts[m].values())) for m in METHODS}
    zeros = {m: sum(v == 0 for cs in counts[m].values() for v in cs) for m in METHODS}
    figure = os.path.join(ctx.out_dir, "fig7.png")
    fig7_figure(rows, sizes, verdicts, figure, reps=ctx.reps, ab=o["ab"])

    def row(m, n):
        return next(r for r in rows if r["method"] == m and r["size"] == n)

    a, b, c = verdicts["a"], verdicts["b"], verdicts["c"]
    md = [
        f"Data (a departure: the paper's product reviews are not available offline): LIBSVM's a1a, training and "
        f"test files pooled; {ctx.reps} repetition(s) of nested stratified training sets of {_grid(sizes)} points "
        f"and a disjoint stratified test set of {n_test}; raw binary inputs. SVM: RBF SVC, C over "
        f"{{{_grid(o['svm_c_grid'])}}} and width over {{{_grid(o['svm_width_grid'])}}} by 5-fold stratified CV; "
        f"sparse KBBLR: `sla-sparse` end to end, width by the median heuristic, a, b "
        f"{'from the class counts (BBLR2)' if o['ab'] == 'counts' else 'from the weak Beta prior (BBLR1)'}, "
        "kept = the broader mixture component's members (module docstring of `reproductions/bblr_fig7.py`). "
        "The paper's figure has no numbers in our copy; its claims are judged on the shapes of our curves.",
        "",
        "| n train | SVM #SV (min-max) | SVM #SV / n | SVM test error % | KBBLR kept (min-max) | KBBLR kept / n | "
        "KBBLR test error % | SVM C / width (median) | KBBLR EM unsettled | mean fit s: SVM CV, KBBLR |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in sizes:
        s, k = row("svm", n), row("kbblr", n)
        md.append(f"| {n} | {s['n_kernel']['mean']:.1f} ({s['n_kernel_min']}-{s['n_kernel_max']}) | "
                  f"{s['n_kernel']['mean'] / n:.3f} | {_pct(s['error'])} | {k['n_kernel']['mean']:.1f} "
                  f"({k['n_kernel_min']}-{k['n_kernel_max']}) | {k['n_kernel']['mean'] / n:.3f} | {_pct(k['error'])} | "
                  f"{s['C_median']:g} / {s['width_median']:g} | {k['unconverged']} / {ctx.reps} | "
                  f"{s['fit_seconds']:.1f}, {k['fit_seconds']:.1f} |")
    md += [
        "",
        "Counts: mean over repetitions; errors mean ± se. Local log-log slopes between consecutive sizes (mean over "
        "repetitions): SVM " + ", ".join(_num(v) for v in local["svm"]) + "; KBBLR "
        + ", ".join(_num(v) for v in local["kbblr"]) + ".",
        "",
        "| claim | statistic (mean ± se over repetitions) | criterion | verdict |",
        "|---|---|---|---|",
        f"| (a) SVM's support vectors grow almost linearly | log-log slope {_ms(a['slope'])}; consistent with 1 "
        f"(within {Z:g} se): {'yes' if a['consistent_with_1'] else 'no'} | mean − {Z:g} se ≥ {LINEAR_BOUND:g} "
        f"({a['lower']:.3f}) | **{a['verdict']}** |",
        f"| (b) sparse KBBLR's count grows markedly slower | KBBLR slope {_ms(b['kbblr_slope'])}; SVM − KBBLR "
        f"{_ms(b['difference'])} | difference > {Z:g} se | **{b['verdict']}** |",
        "| (c) KBBLR's curve is logarithmic | " + (
            f"a + b ln n: b = {c['fits']['log']['b']:.2f}, RSS {c['fits']['log']['rss']:.1f}; a + b n: RSS "
            f"{c['fits']['linear']['rss']:.1f}" if c["fits"] else "—")
        + f" | the logarithm's RSS smaller (= smaller AIC), b > 0 | **{c['verdict']}** |",
        "",
        f"Slopes are those of log(1 + count) on log n (module docstring). Fits that kept no kernel function: "
        f"KBBLR {zeros['kbblr']}, SVM {zeros['svm']} of {ctx.reps * len(sizes)}.",
        "",
        "Figure: `fig7.png`, beside this table — left, kernel functions against n (mean, and the range over "
        "repetitions) with KBBLR's two shape fits of (c); middle, 1 + count on log-log axes with the mean "
        "slopes of (a) and (b); right, test error against n.",
    ]
    return {"markdown": "\n".join(md),
            "json": {"rows": rows, "claims": {"a": a, "b": b, "c": c}, "slopes": verdicts["slopes"],
                     "zero_counts": zeros, "local_slopes": local, "counts": {
                         m: {str(r): v for r, v in counts[m].items()} for m in METHODS},
                     "linear_bound": LINEAR_BOUND, "z": Z, "figure": os.path.basename(figure), "cells": cells}}


def fig7_figure(rows: list, sizes: list, verdicts: dict, path: str, *, reps: int, ab: str) -> None:
    """Draw ``fig7.png`` at ``path``, the SVM beside the sparse KBBLR: kernel functions kept against
    n on linear axes (with claim (c)'s two fits), 1 + that count on log-log axes (with the mean
    slopes of (a) and (b)), and the test error (± 2 se)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15.0, 4.2), layout="constrained")
    ax_lin, ax_log, ax_err = fig.subplots(1, 3)
    n = np.asarray(sizes, float)
    fine = np.linspace(n[0], n[-1], 100)
    colors = {"svm": "tab:blue", "kbblr": "tab:red"}
    for m in METHODS:
        rs = [next(r for r in rows if r["method"] == m and r["size"] == s) for s in sizes]
        mean = np.array([r["n_kernel"]["mean"] for r in rs])
        lo = np.array([r["n_kernel_min"] for r in rs], float)
        hi = np.array([r["n_kernel_max"] for r in rs], float)
        for ax, shift in ((ax_lin, 0.0), (ax_log, 1.0)):
            ax.plot(n, mean + shift, "o-", color=colors[m], label=METHOD_LABEL[m])
            ax.fill_between(n, lo + shift, hi + shift, color=colors[m], alpha=0.2)
        err = np.array([r["error"]["mean"] for r in rs])
        se = np.array([r["error"]["se"] or 0.0 for r in rs])
        ax_err.errorbar(n, 100 * err, yerr=200 * se, fmt="o-", color=colors[m], capsize=3, label=METHOD_LABEL[m])
        # the mean slope of (a) / (b) through the geometric means of n and of 1 + the mean count
        slope = verdicts["slope_stats"][m]["mean"]
        centre = np.exp(np.mean(np.log1p(mean)))
        ax_log.plot(fine, centre * (fine / np.exp(np.mean(np.log(n)))) ** slope, ":", color=colors[m],
                    label=f"mean slope {slope:.2f}")
    fits = verdicts["c"]["fits"]
    if fits:
        for name, x, style in (("log", np.log(fine), "--"), ("linear", fine, ":")):
            f = fits[name]
            ax_lin.plot(fine, f["a"] + f["b"] * x, style, color=colors["kbblr"],
                        label=f"KBBLR fit a + b {'ln n' if name == 'log' else 'n'} (RSS {f['rss']:.0f})")
    ax_lin.set_xlabel("training points n")
    ax_lin.set_ylabel("kernel functions kept (SVM: support vectors)")
    ax_lin.set_title("counts: mean and range over repetitions", fontsize=9)
    ax_log.set_xscale("log")
    ax_log.set_yscale("log")
    ax_log.set_xlabel("training points n")
    ax_log.set_ylabel("1 + kernel functions kept")
    ax_log.set_title("log-log: the slopes of claims (a) and (b)", fontsize=9)
    ax_err.set_xscale("log")
    ax_err.set_xlabel("training points n")
    ax_err.set_ylabel("test error % (± 2 se)")
    ax_err.set_title("test error", fontsize=9)
    for ax in (ax_log, ax_err):
        # the sizes themselves as ticks: a log axis would label only powers of ten
        ax.set_xticks(n, [str(v) for v in sizes])
        ax.minorticks_off()
    for ax in (ax_lin, ax_log, ax_err):
        ax.legend(fontsize=7)
    fig.suptitle(f"Hasan & Pal Fig. 7 on a1a (stand-in for the product reviews): {reps} repetitions, KBBLR a, b "
                 f"{'from the class counts' if ab == 'counts' else 'from the weak prior'}", fontsize=10)
    save_figure(fig, path)


def _grid(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _num(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _ms(stats: dict) -> str:
    if stats["mean"] is None:
        return "—"
    return f"{stats['mean']:.2f}" + ("" if stats["se"] is None else f" ± {stats['se']:.2f}")


def _pct(stats: dict) -> str:
    return f"{100 * stats['mean']:.1f}" + ("" if stats["se"] is None else f" ± {100 * stats['se']:.1f}")


ENTRIES = (
    Entry(
        name="bblr-fig7",
        description="Hasan & Pal Fig. 7: support vectors of an RBF SVM and kernel functions kept by sparse KBBLR "
                    "against the training set size, on a1a (stand-in for the product reviews) - SVM about linear, "
                    "KBBLR logarithmic?",
        default_reps=DEFAULT_REPS,
        default_sizes="reps 5, sizes 125,250,500,1000 (nested, stratified, from a1a's pooled files), n-test 5000, "
                      "SVC grids C 0.1-1000 x width 0.5-8, ab counts",
        options=(
            Option("sizes", "int_list", ",".join(map(str, DEFAULT_SIZES)), "training set sizes, increasing"),
            Option("n_test", "int", DEFAULT_N_TEST, "test points (stratified, disjoint from every training set)"),
            Option("ab", "choice", "counts", "KBBLR's a, b: counts (BBLR2), weak (BBLR1)", choices=AB),
            Option("svm_c_grid", "float_list", ",".join(f"{v:g}" for v in bblr_kernel.DEFAULT_C_GRID),
                   "SVC's C grid"),
            Option("svm_width_grid", "float_list", ",".join(f"{v:g}" for v in bblr_kernel.DEFAULT_WIDTH_GRID),
                   "SVC's width grid"),
        ),
        run=f"{__name__}:run",
        min_reps=2,
        reps_why="a slope's standard error needs two repetitions",
        check=check_options,
    ),
)
