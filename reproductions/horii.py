"""Entries for the GIG-hierarchical logistic paper (Horii; PUBLISHED_RESULTS.md section C).

horii-table1   Table 1: synthetic design, MSE of the coefficients and test accuracy
horii-table2   Table 2: test accuracy on a1a and w1a (covtype cannot be had offline)

Methods: the paper's VB (``inference/gig_vb.py``; the paper's k = theta = 1e-6 as the
headline, the zoo's proper k = theta = 1 beside it) and L1- / L2-regularized logistic
regression from scikit-learn with C chosen by 5-fold stratified cross-validation. The
paper does not state its CV (folds, grid, criterion); ours: C over 10^(-3..3) in
half-decade steps, held-out log loss (a proper scoring rule; accuracy on a few dozen
held-out points is too coarse to rank 13 values of C), refit on the whole training set.

Intercepts. The synthetic design has none (beta* has no intercept), so no method fits one
there. a1a and w1a are unbalanced (24 % and 3 % positive): every method gets one - the LRs
an unpenalized intercept (liblinear's, which is penalized weakly through its intercept
scaling), VB a bias column under the same GIG prior as the other coefficients.

MSE. The paper does not say whether its MSE is (1/p) ||b - beta*||^2 or the squared norm;
with p = 100 and values near 0.16 it is the per-coordinate mean, which we report.
"""
from __future__ import annotations

import numpy as np

from zoo import data as datasets
from zoo.inference import gig_vb
from zoo.models.gig_logistic import GIGLogistic

from .baselines import N_FOLDS, regularized_lr
from .cells import CellTask, cell_key
from .entry import Entry, Option, check_classes
from .fitting import agreement, mean_sd

PAPER_TABLE1 = {  # (MSE mean, MSE sd, accuracy mean, accuracy sd) over 1000 experiments
    "vb": (0.1589, 0.1133, 0.8195, 0.0477),
    "l1": (0.3974, 0.2939, 0.7750, 0.0456),
    "l2": (0.4391, 0.2597, 0.7112, 0.0242),
}
PAPER_TABLE2 = {  # test accuracy
    "a1a": {"vb": 0.8400, "l1": 0.8400, "l2": 0.8386},
    "w1a": {"vb": 0.9757, "l1": 0.9702, "l2": 0.9779},
    "covtype": {"vb": 0.7436, "l1": 0.7412, "l2": 0.7398},
}
METHOD_LABEL = {"vb": "VB (proposed)", "vb-proper": "VB, k = theta = 1 (zoo default)",
                "l1": "L1-LR (CV)", "l2": "L2-LR (CV)"}


# ------------------------------------------------------------------------------------
# Fitting (plain functions of arrays, run inside cells)
# ------------------------------------------------------------------------------------
def vb_fit(X, y, k: float, bias: bool):
    """The paper's VB; returns (posterior mean of the coefficients, intercept, fit info)."""

    Phi = np.hstack([np.ones((X.shape[0], 1)), X]) if bias else X
    post = gig_vb.fit(GIGLogistic(k=k, theta=k), Phi, y)
    m = post.mean_flat()
    info = {"n_iter": int(post.info.n_iter), "converged": bool(post.info.converged), "reason": post.info.reason,
            "seconds": float(post.info.seconds)}
    return (m[1:], float(m[0])) if bias else (m, 0.0), post, info


def _accuracy_linear(X, y, coef, intercept) -> float:
    return float(np.mean(((X @ coef + intercept) > 0) == (y == 1)))


# ------------------------------------------------------------------------------------
# Cells
# ------------------------------------------------------------------------------------
def table1_cell(method: str, repetition: int, n_train: int, n_test: int, cv_seed: int) -> dict:
    """One method on one repetition of the synthetic design (raw inputs, no intercept)."""

    s = datasets.horii_synthetic(repetition, n_train=n_train, n_test=n_test)
    beta_star = datasets.horii_beta_star()
    out = {"method": method, "repetition": repetition}
    if method in ("vb", "vb-proper"):
        (coef, _), post, info = vb_fit(s.X_train, s.y_train, 1e-6 if method == "vb" else 1.0, bias=False)
        # the paper's predictive (14) thresholded at 1/2 is the sign of x^T bbar
        acc = float(np.mean((post.predict_proba(s.X_test) > 0.5) == (s.y_test == 1)))
        out.update(info)
    else:
        coef, _, C = regularized_lr(s.X_train, s.y_train, method == "l1", False, cv_seed)
        acc = _accuracy_linear(s.X_test, s.y_test, coef, 0.0)
        out["C"] = C
    out.update(mse=float(np.mean((coef - beta_star) ** 2)), accuracy=acc,
               n_large=int(np.sum(np.abs(coef) > 0.1)))
    return out


def table2_cell(data: str, method: str, cv_seed: int) -> dict:
    """One method on a1a or w1a: the official training file, the .t file as test set."""

    s = datasets.load(data, 0, standardize=False)  # binary features, used as they are
    out = {"data": data, "method": method, "n_train": int(s.X_train.shape[0]), "n_test": int(s.X_test.shape[0]),
           "p": int(s.X_train.shape[1])}
    if method in ("vb", "vb-proper"):
        (coef, b0), post, info = vb_fit(s.X_train, s.y_train, 1e-6 if method == "vb" else 1.0, bias=True)
        Phi_test = np.hstack([np.ones((s.X_test.shape[0], 1)), s.X_test])
        acc = float(np.mean((post.predict_proba(Phi_test) > 0.5) == (s.y_test == 1)))
        out.update(info)
    else:
        coef, b0, C = regularized_lr(s.X_train, s.y_train, method == "l1", True, cv_seed)
        acc = _accuracy_linear(s.X_test, s.y_test, coef, b0)
        out["C"] = C
    out.update(accuracy=acc, fraction_large=float(np.mean(np.abs(coef) > 0.1)))
    return out


# ------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------
T1_METHODS = ("vb", "vb-proper", "l1", "l2")


#: the most training or test points of a repetition: the design is n x 100 floats per
#: repetition (the paper's sizes are 100 and 1000)
MAX_POINTS = 100_000


def check_table1(options: dict, reps: int) -> None:
    """Before any cell: every repetition's training set holds N_FOLDS points of each class,
    which the L1/L2-LR's stratified CV needs (the labels are drawn, so a small --n-train
    can leave one class short; they are drawn here as each cell would, without the test
    points or any fit)."""
    n = options["n_train"]
    for r in range(reps):
        check_classes(datasets.horii_synthetic(r, n_train=n, n_test=1).y_train, N_FOLDS,
                      f"--n-train {n}: repetition {r}", "the L1/L2-LR's", "--n-train")


def run_table1(ctx) -> dict:
    """Run ``horii-table1``: VB (the paper's and the proper prior), L1-LR and L2-LR on every
    repetition of the synthetic design, then the MSE of the coefficients and the test accuracy
    beside Table 1's, and the claim that VB has the lowest MSE and the highest accuracy.
    Returns {"markdown": the table's text, "json": its data}."""
    o = ctx.options
    tasks = []
    for m in T1_METHODS:
        for r in range(ctx.reps):
            kw = {"method": m, "repetition": r, "n_train": o["n_train"], "n_test": o["n_test"],
                  "cv_seed": ctx.seed * 100_003 + r}
            tasks.append(CellTask(cell_key(f"t1/{m}/rep{r:04d}", kw), f"{__name__}:table1_cell", kw,
                                  cost={"vb": 3.0, "vb-proper": 1.0}.get(m, 2.0)))
    cells = list(ctx.store.run(tasks, "horii table 1").values())
    md = [
        f"Design: x ~ N(0, I_100), beta* = (0 x 90, 2 x 10), y ~ Bernoulli(sigmoid(x^T beta*)), {o['n_train']} "
        f"training and {o['n_test']} test points per repetition (the paper: 100 and 1000, 1000 repetitions); "
        "no intercept anywhere. MSE = (1/p) ||b - beta*||^2 of the posterior mean (VB) or the estimate (LR). "
        f"L1/L2-LR: scikit-learn, C over 10^(-3..3) by {N_FOLDS}-fold CV on held-out log loss.",
        "",
        "Criterion: **reproduced** if the paper's mean lies within our mean ± max(2 standard errors, floor) "
        "with floor 0.02 (MSE) and 0.01 (accuracy): our repetitions are fresh draws of the same design, so the "
        "means should agree up to Monte Carlo error; the sds are shown beside the paper's.",
        "",
        "| method | MSE (mean ± sd) | paper MSE | verdict | accuracy (mean ± sd) | paper accuracy | verdict | "
        "coefficients with abs > 0.1 | VB sweeps (unconverged) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    table = {"rows": [], "claims": {}}
    means = {}
    for m in T1_METHODS:
        cs = [c for c in cells if c["method"] == m]
        mse, acc = mean_sd([c["mse"] for c in cs]), mean_sd([c["accuracy"] for c in cs])
        nl = mean_sd([c["n_large"] for c in cs])
        means[m] = (mse["mean"], acc["mean"])
        paper = PAPER_TABLE1.get(m)
        if paper:
            v_mse, d_mse = agreement(mse, paper[0], 0.02, digits=4)
            v_acc, d_acc = agreement(acc, paper[2], 0.01, digits=4)
            paper_mse, paper_acc = f"{paper[0]:.4f} ± {paper[1]:.4f}", f"{paper[2]:.4f} ± {paper[3]:.4f}"
        else:
            v_mse = v_acc = "not in the paper"
            d_mse = d_acc = ""
            paper_mse = paper_acc = "—"
        sweeps = ""
        if m.startswith("vb"):
            unconv = sum(not c["converged"] for c in cs)
            sweeps = f"{np.median([c['n_iter'] for c in cs]):.0f} median ({unconv}/{len(cs)})"
        sd = lambda s: "" if s["sd"] is None else f" ± {s['sd']:.4f}"  # noqa: E731
        md.append(f"| {METHOD_LABEL[m]} | {mse['mean']:.4f}{sd(mse)} | {paper_mse} | {v_mse}{f' ({d_mse})' if d_mse else ''} | "
                  f"{acc['mean']:.4f}{sd(acc)} | {paper_acc} | {v_acc}{f' ({d_acc})' if d_acc else ''} | {nl['mean']:.1f} | {sweeps} |")
        table["rows"].append({"method": m, "mse": mse, "accuracy": acc, "n_large": nl,
                              "paper": paper, "verdict_mse": v_mse, "verdict_accuracy": v_acc})
    best_mse = min(("vb", "l1", "l2"), key=lambda m: means[m][0])
    best_acc = max(("vb", "l1", "l2"), key=lambda m: means[m][1])
    table["claims"] = {"lowest_mse": best_mse, "highest_accuracy": best_acc}
    md += ["", "The paper's claim: the proposed method has the lowest MSE and the highest accuracy of the three. "
           f"Here: lowest MSE {METHOD_LABEL[best_mse]}, highest accuracy {METHOD_LABEL[best_acc]} → "
           f"**{'reproduced' if best_mse == best_acc == 'vb' else 'NOT reproduced'}**."]
    return {"markdown": "\n".join(md), "json": table}


T2_METHODS = ("vb", "vb-proper", "l1", "l2")


def run_table2(ctx) -> dict:
    """Run ``horii-table2``: VB (both priors), L1-LR and L2-LR fitted once on the official training
    file of each data set (a1a, w1a), then the test accuracy on its ``.t`` file beside Table 2's
    (covtype: not run). Returns {"markdown": the table's text, "json": its data}."""
    o = ctx.options
    tasks = [CellTask(cell_key(f"t2/{d}/{m}", {"data": d, "method": m, "cv_seed": ctx.seed}), f"{__name__}:table2_cell",
                      {"data": d, "method": m, "cv_seed": ctx.seed}, cost=4.0 if d == "w1a" else 1.0)
             for d in o["data"] for m in T2_METHODS]
    cells = ctx.store.run(tasks, "horii table 2")
    md = [
        "Data: LIBSVM a1a and w1a, the official training files, their .t files as test sets (the paper does not "
        "state its splits; these are the standard ones), binary features as given. Every method fits an "
        "intercept (VB: a bias column under the same prior). One fit per method and data set (no repetitions: "
        "the split is fixed; `--reps` does not apply).",
        "",
        "Criterion: **reproduced** if our accuracy is within 0.005 of the paper's (one fixed test set of "
        "30956 / 47272 points: the binomial sd of an accuracy near 0.84 / 0.97 is 0.002 / 0.0008, so the band "
        "mostly allows for the unstated CV and preprocessing).",
        "",
        "| data | method | accuracy | paper | verdict | fraction of coefficients with abs > 0.1 | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    table = {"rows": []}
    for d in o["data"]:
        for m in T2_METHODS:
            c = next(v for v in cells.values() if v["data"] == d and v["method"] == m)
            paper = PAPER_TABLE2[d].get(m)
            if paper is None:
                verdict = "not in the paper"
            else:
                ok = abs(c["accuracy"] - paper) <= 0.005
                verdict = f"{'reproduced' if ok else 'NOT reproduced'} (abs({c['accuracy']:.4f} − {paper:.4f}) " \
                          f"{'≤' if ok else '>'} 0.005)"
            note = f"C = {c['C']:g}" if "C" in c else (f"{c['n_iter']} sweeps" + ("" if c["converged"] else
                                                                                 f", {c['reason']}"))
            md.append(f"| {d} | {METHOD_LABEL[m]} | {c['accuracy']:.4f} | {'—' if paper is None else f'{paper:.4f}'} "
                      f"| {verdict} | {c['fraction_large']:.3f} | {note} |")
            table["rows"].append({**c, "paper": paper, "verdict": verdict})
    md.append(f"| covtype | all | not run | {PAPER_TABLE2['covtype']['vb']:.4f} / {PAPER_TABLE2['covtype']['l1']:.4f} / "
              f"{PAPER_TABLE2['covtype']['l2']:.4f} | not run: covtype.binary cannot be obtained offline here, and "
              "the paper's split of it is unknown | — | — |")
    md += ["", "The paper also reports, for a1a, the fraction of coefficients with |b| > 0.1: 0.276 (L1-LR) and "
           "0.228 (proposed); ours are in the table's column."]
    return {"markdown": "\n".join(md), "json": table}


ENTRIES = (
    Entry(
        name="horii-table1",
        description="Horii (GIG-hierarchical logistic VB) Table 1: synthetic sparse design, MSE of the "
                    "coefficients and test accuracy of VB, L1-LR and L2-LR.",
        default_reps=20,
        default_sizes="reps 20 (the paper: 1000), n_train 100, n_test 1000 (the paper's sizes)",
        options=(
            Option("n_train", "int", 100, "training points per repetition (the paper: 100)",
                   minimum=2 * N_FOLDS, maximum=MAX_POINTS,
                   why=f"the L1/L2-LR's {N_FOLDS}-fold stratified CV needs {N_FOLDS} points of each class"),
            Option("n_test", "int", 1000, "test points per repetition (the paper: 1000)", maximum=MAX_POINTS,
                   why="the test design is n_test x 100 floats"),
        ),
        run=f"{__name__}:run_table1",
        check=check_table1,
    ),
    Entry(
        name="horii-table2",
        description="Horii Table 2: test accuracy on a1a and w1a (covtype not available offline).",
        default_reps=1,
        default_sizes="data a1a,w1a with their official .t test files; one fit per method",
        options=(
            Option("data", "str_list", "a1a,w1a", "LIBSVM data sets", choices=("a1a", "w1a")),
        ),
        run=f"{__name__}:run_table2",
    ),
)
