"""The baselines several reproductions share, written once: L1/L2 logistic regression and the
linear SVM with C chosen by cross-validation over one grid, and McNemar's test of two
classifiers on the same test points.

Horii's entry compares its VB with L1/L2-LR, gridRVM's digits entry with L1-LR and the
linear SVM, and the BBLR entries (UCI, w1a) with L2-LR and the linear SVM; all of them use
:data:`C_GRID` and :data:`N_FOLDS`, so a baseline's number means the same in every table.
"""
from __future__ import annotations

import math

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import LinearSVC

#: scikit-learn's C grid of every linear baseline, 10^(-3..3) in half-decades
C_GRID = tuple(10.0 ** (e / 2) for e in range(-6, 7))
#: folds of the C search (stratified, shuffled with the cell's seed)
N_FOLDS = 5


def regularized_lr(X, y, l1: bool, fit_intercept: bool, seed: int):
    """L1 or L2 logistic regression, C by 5-fold stratified CV on held-out log loss.
    Returns (coef, intercept, C)."""
    def model(C):
        # l1_ratio 1 / 0 is L1 / L2 (scikit-learn >= 1.8 spells the penalty this way).
        # liblinear visits coordinates in a random order: without random_state it draws
        # from numpy's global generator, and two clean runs gave different coefficients
        return LogisticRegression(C=C, l1_ratio=1.0 if l1 else 0.0, solver="liblinear",
                                  fit_intercept=fit_intercept, max_iter=1000, random_state=seed)

    folds = list(StratifiedKFold(N_FOLDS, shuffle=True, random_state=seed).split(X, y))
    losses = []
    for C in C_GRID:
        loss = 0.0
        for tr, va in folds:
            p = np.clip(model(C).fit(X[tr], y[tr]).predict_proba(X[va])[:, 1], 1e-12, 1 - 1e-12)
            loss -= np.sum(y[va] * np.log(p) + (1 - y[va]) * np.log1p(-p))
        losses.append(loss / len(y))
    best = C_GRID[int(np.argmin(losses))]
    m = model(best).fit(X, y)
    return m.coef_.ravel(), float(m.intercept_[0]) if fit_intercept else 0.0, best


def linear_svm(X, y, seed: int):
    """LinearSVC (with intercept), C by 5-fold stratified CV on accuracy over C_GRID (ties:
    the smaller C), refit on all training points. Returns (model, C)."""
    cv = StratifiedKFold(N_FOLDS, shuffle=True, random_state=seed)
    search = GridSearchCV(LinearSVC(max_iter=100_000, random_state=seed), {"C": list(C_GRID)}, cv=cv).fit(X, y)
    return search.best_estimator_, float(search.best_params_["C"])


def mcnemar(b: float, c: float) -> float:
    """``(|b - c| - 1)^2 / (b + c)``, 0 when b + c = 0 or ``|b - c| <= 1``."""
    if b + c <= 0:
        return 0.0
    return max(abs(b - c) - 1.0, 0.0) ** 2 / (b + c)


def mcnemar_p(b: float, c: float) -> float:
    """p-value of the continuity-corrected McNemar statistic (chi^2, one degree of freedom):
    P(chi^2_1 > s) = erfc(sqrt(s / 2))."""
    return math.erfc(math.sqrt(mcnemar(b, c) / 2.0))
