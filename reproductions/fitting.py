"""Fits, test errors and K-fold cross-validation for the GGSM probit engines.

The engines are called directly (not through ``SparseBayesClassifier``) so that one
kernel matrix per (fold, width) serves every q or gamma of the grid: the cross-validation
of the reproduction runs is dominated by fits, not by kernels, but rebuilding a 560 x 560
kernel 50 times per fold would double the German runs.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.special import ndtr

from zoo.models.basis import LinearBasis, RBFBasis, WithBias
from zoo.models.ggsm_probit import GGSMProbit
from zoo.validation.records.registry import get_engine

METHODS = ("ggig", "lap", "gj", "stu")
#: the engine names of the ggsm-probit record (validation/records/ggsm_probit_record.py) for each method
ENGINE_OF = {"ggig": "mm", "lap": "lap", "gj": "gj", "stu": "stu"}
PRIORS = ("paper", "default")


def ggsm_spec(q: float, prior: str):
    """GGSM spec: ``prior`` "paper" = the paper's InvGamma(1e-3, 1e-3) on lambda,
    "default" = the zoo's proper InvGamma(1, 1) (DERIVATIONS.md §2.5: it keeps MM from collapsing)."""

    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
    return GGSMProbit.paper_prior(q) if prior == "paper" else GGSMProbit(q=q)


def designs(X_fit, X_evals, basis: str, width: float | None):
    """[1 | x] (linear) or [1 | k(x, X_fit)] (rbf, centres = the fitting inputs) for the
    fitting inputs and each of ``X_evals``."""

    if basis == "linear":
        b = WithBias(LinearBasis.fit(X_fit))
    elif basis == "rbf":
        b = WithBias(RBFBasis.fit(X_fit, width))
    else:
        raise ValueError(f"basis must be 'linear' or 'rbf', got {basis!r}")
    return b.transform(X_fit), [b.transform(X) for X in X_evals]


def fit_and_score(method: str, Phi, y, evals, *, q: float | None = None, gamma: float | None = None,
                  prior: str = "default") -> dict:
    """Fit one engine on (Phi, y); score it on each (Phi_eval, y_eval) of ``evals``.

    Returns status (the engine's: converged / collapsed / iteration cap / non-finite),
    n_active (nonzero weights, bias included), n_active_basis (without the bias column),
    and per evaluation set the error rate (probit MAP plug-in: class 1 iff Phi w > 0) and
    the Brier score of Phi(Phi w) (a tie-breaker for CV: error rates on small folds tie
    often).
    """

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    kwargs = {"spec": ggsm_spec(1.0 if q is None else q, prior)}
    if method == "lap":
        kwargs["gamma"] = float(gamma)
    fit_fn = get_engine("ggsm-probit", ENGINE_OF[method]).fit_end_to_end()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_fn(np.asarray(Phi, dtype=float), np.asarray(y, dtype=float), seed=0, **kwargs)
    w_active = np.asarray(fit.posterior.mean_flat())[1:]
    active = np.asarray(fit.active, dtype=int)
    info = fit.posterior.info
    scores = []
    for Phi_eval, y_eval in evals:
        f = np.asarray(Phi_eval)[:, active] @ w_active
        scores.append({"error": float(np.mean((f > 0) != (np.asarray(y_eval) > 0.5))),
                       "brier": float(np.mean((ndtr(f) - y_eval) ** 2))})
    return {"status": info.extra.get("status", "converged" if info.converged else "unconverged"),
            "n_iter": int(info.n_iter), "n_active": int(active.size),
            "n_active_basis": int(np.sum(active != 0)), "scores": scores}


def folds(y, n_folds: int, seed: int):
    """Stratified, shuffled K-fold (train index, validation index) pairs."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    n_min = int(min(np.sum(y > 0.5), np.sum(y <= 0.5)))
    if n_min < n_folds:
        raise ValueError(f"{n_folds}-fold CV needs at least {n_folds} points of each class; "
                         f"the smaller class has {n_min}")
    return list(StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(np.zeros(y.size), y))


def cross_validate(method: str, X, y, grid: list[dict], *, basis: str, prior: str = "default",
                   n_folds: int = 5, seed: int = 0) -> list[dict]:
    """Mean K-fold CV error and Brier score of every grid point.

    grid: dicts with keys among width (rbf), q (ggig), gamma (lap). Returns one dict per
    grid point: its parameters, "error", "brier", and "collapsed" (folds whose fit
    collapsed, see inference/mm.py).
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    sums = [{"error": 0.0, "brier": 0.0, "collapsed": 0} for _ in grid]
    widths = sorted({g.get("width") for g in grid}, key=lambda w: -1 if w is None else w)
    for train, valid in folds(y, n_folds, seed):
        for width in widths:
            Phi_tr, (Phi_va,) = designs(X[train], [X[valid]], basis, width)
            for i, g in enumerate(grid):
                if g.get("width") != width:
                    continue
                r = fit_and_score(method, Phi_tr, y[train], [(Phi_va, y[valid])], q=g.get("q"),
                                  gamma=g.get("gamma"), prior=prior)
                sums[i]["error"] += r["scores"][0]["error"] / n_folds
                sums[i]["brier"] += r["scores"][0]["brier"] / n_folds
                sums[i]["collapsed"] += r["status"] == "collapsed"
    return [{**g, **s} for g, s in zip(grid, sums)]


def choose(cv: list[dict]) -> dict:
    """The grid point with the lowest CV error; ties go to the lower Brier score, then to
    the earlier grid point (grids are listed from small to large values)."""
    best = min(range(len(cv)), key=lambda i: (round(cv[i]["error"], 12), round(cv[i]["brier"], 12), i))
    return {k: v for k, v in cv[best].items() if k in ("width", "q", "gamma")}


def grid_product(**axes) -> list[dict]:
    """All combinations of the given axes (None or empty axes are left out)."""
    points = [{}]
    for name, values in axes.items():
        if not values:
            continue
        points = [{**p, name: float(v)} for p in points for v in values]
    return points


def mean_sd(values) -> dict:
    """mean, sd (ddof 1; None for one value), standard error and count of a sample."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"mean": None, "sd": None, "se": None, "n": 0}
    sd = float(v.std(ddof=1)) if v.size > 1 else None
    return {"mean": float(v.mean()), "sd": sd, "se": None if sd is None else sd / math.sqrt(v.size),
            "n": int(v.size)}


def agreement(stats: dict, paper: float, floor: float, scale: float = 1.0, digits: int = 2) -> tuple[str, str]:
    """Is the paper's number within our mean ± max(2 standard errors, floor)? Returns the
    verdict and the comparison as text (written with abs(), not bars, so that it can sit
    in a markdown table cell)."""
    if stats["mean"] is None:
        return "not run", ""
    ours = scale * stats["mean"]
    band = max(2 * scale * stats["se"], floor) if stats["se"] is not None else floor
    ok = abs(ours - paper) <= band
    return ("reproduced" if ok else "NOT reproduced"), \
        f"abs({ours:.{digits}f} − {paper:.{digits}f}) {'≤' if ok else '>'} {band:.{digits}f}"
