"""How each model turns a data split into the one frozen spec that `zoo compare` measures.

The comparison protocol of the PCVM issue: selection happens once - the kernel width by
cross-validation and alpha with the active basis by the Laplace engine's marginal
likelihood maximization - and that frozen spec is the posterior p(w | y, alpha) on which
NUTS and every engine are run. Each engine's own end-to-end selection is judged in
``benchmarks/``, not here.

A protocol returns a :class:`Prepared` problem; ``compare`` never needs to know which
model it is looking at beyond this.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.model_selection import RepeatedStratifiedKFold

from ..inference.registry import get_engine
from ..models.basis import LinearBasis, RBFBasis, WithBias, pcvm_basis
from ..models.ggsm_probit import GGSMProbit
from ..models.gig_logistic import GIGLogistic
from ..models.pcvm import PCVM

#: kernel widths searched by cross-validation (inputs have unit variance). The PCVM
#: papers search theta in {0.1, 0.3, ..., 10} for exp(-theta^2 r^2); widths 0.25..4
#: cover theta 0.18..2.8, the part of that grid that is not degenerate for
#: standardized inputs, at half-octave steps.
PCVM_WIDTH_GRID = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)


@dataclass(frozen=True, eq=False)
class Prepared:
    """A frozen problem: spec + train/test design matrices + how they were chosen."""

    spec: Any
    Phi_train: np.ndarray
    Phi_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    hyper: dict[str, Any]  # chosen scalars (width, ...), JSON-able
    selection: dict[str, Any] = field(default_factory=dict)  # how they were chosen
    # specs of the model variants some engines approximate instead of the true model
    variants: dict[str, Any] = field(default_factory=dict)
    basis: Any = None
    # which posterior moments exist ({"mean_exists", "sd_exists", "reason"}); None: all do
    # (or the model has no reason to doubt it). Metrics built on a moment that does not
    # exist are reported as null with this reason.
    moments: dict[str, Any] | None = None


#: The CV criterion. The papers select by CV error rate; on Ripley's 250 points the
#: 5-fold error is flat within one standard error for widths 0.35..1.0 (0.135..0.143,
#: se ~0.01 over 4 x 5 folds), so the choice among them is noise. The CV log loss (the
#: predictive log-likelihood of held-out points, a proper scoring rule) uses the
#: probabilities these Bayesian classifiers are built to give and is far less noisy;
#: the error rate is still computed and reported.
CV_CRITERION = "cv_log_loss"


def cross_validated_width(
    X: np.ndarray, y: np.ndarray, fit_and_predict: Callable, grid=PCVM_WIDTH_GRID,
    *, folds: int = 5, repeats: int = 2, seed: int = 0, progress=None,
) -> tuple[float, dict[float, dict[str, float]]]:
    """Pick the width with the smallest repeated-stratified-CV log loss (ties: CV error).

    ``fit_and_predict(X_tr, y_tr, X_va, width) -> p_va``.
    """
    cv = RepeatedStratifiedKFold(n_splits=folds, n_repeats=repeats, random_state=seed)
    scores: dict[float, dict[str, float]] = {}
    for width in grid:
        errs, losses = [], []
        for tr, va in cv.split(X, y):
            p = np.clip(fit_and_predict(X[tr], y[tr], X[va], width), 1e-12, 1 - 1e-12)
            errs.append(np.mean((p > 0.5) != (y[va] == 1)))
            losses.append(-np.mean(y[va] * np.log(p) + (1 - y[va]) * np.log1p(-p)))
        scores[float(width)] = {"cv_error": float(np.mean(errs)), "cv_log_loss": float(np.mean(losses))}
        if progress is not None:
            progress.update(1)
    best = min(scores, key=lambda w: (scores[w][CV_CRITERION], scores[w]["cv_error"]))
    return best, scores


def _pcvm_laplace_predict(X_tr, y_tr, X_va, width):
    basis = pcvm_basis(X_tr, y_tr, width)
    fit = get_engine("pcvm", "laplace").fit_end_to_end()(basis.transform(X_tr), y_tr)
    return fit.posterior.predict_proba(basis.subset(fit.active).transform(X_va))


def prepare_pcvm(split, params: dict[str, float], *, progress=None) -> Prepared:
    """PCVM on one split.

    params (all optional): ``width`` (skip cross-validation), ``alpha`` (a shared weight
    precision: then every training point is a basis function and no selection runs -
    the setting of the issue's calibration run), ``alpha_bias``.
    """
    unknown = set(params) - {"width", "alpha", "alpha_bias"}
    if unknown:
        raise ValueError(
            f"unknown PCVM parameter(s) {sorted(unknown)}; use width, alpha or alpha_bias"
        )
    X, y = split.X_train, split.y_train
    selection: dict[str, Any] = {}
    if "width" in params:
        width = float(params["width"])
        selection["width"] = "given with --param"
    else:
        width, scores = cross_validated_width(X, y, _pcvm_laplace_predict, progress=progress)
        selection["width"] = (
            "smallest log loss in 2 x 5-fold stratified CV of the laplace engine (end to end)"
        )
        selection["cv_scores"] = {str(k): v for k, v in scores.items()}
    basis = pcvm_basis(X, y, width)
    Phi_all = basis.transform(X)
    if "alpha" in params:
        spec = PCVM(alpha=float(params["alpha"]), alpha_bias=float(params.get("alpha_bias", 1e-2)))
        active = np.arange(Phi_all.shape[1])
        selection["alpha"] = "given with --param (all training points are basis functions)"
    else:
        fit = get_engine("pcvm", "laplace").fit_end_to_end()(Phi_all, y)
        spec, active = fit.spec, np.asarray(fit.active)
        if "alpha_bias" in params:
            spec = spec.with_params(alpha_bias=float(params["alpha_bias"]))
        selection["alpha"] = (
            "laplace engine: sequential marginal-likelihood maximization "
            "(Tipping & Faul 2003) on the EPCVM surrogate"
        )
    kept = basis.subset(active)
    return Prepared(
        spec=spec,
        Phi_train=kept.transform(X),
        Phi_test=kept.transform(split.X_test),
        y_train=y,
        y_test=split.y_test,
        hyper={"width": width, "n_basis": int(len(active)), "alpha_bias": float(spec.alpha_bias)},
        selection=selection,
        variants={"surrogate": spec.with_params(surrogate=True)},
        basis=kept,
    )


def prepare_ggsm_probit(split, params: dict[str, float], *, progress=None) -> Prepared:
    """GGSM probit on one split: nothing is selected - the model is compared at the
    given shape q and prior, on every column (MM prunes by itself; NUTS sees all weights).

    params (all optional): ``q`` (default 1.0; the paper cross-validates it over
    {0.1, 0.5, 1, 1.5, 2}, which the classifier's GridSearchCV does), ``a``, ``b`` (the
    InvGamma prior on lambda, default 1, 1; the paper's 1e-3, 1e-3 is allowed and is
    where the MAP collapses and NUTS fails), ``width`` (an RBF basis on the training
    points instead of the linear one). A bias column comes first either way.
    """
    unknown = set(params) - {"q", "a", "b", "width"}
    if unknown:
        raise ValueError(f"unknown GGSM probit parameter(s) {sorted(unknown)}; use q, a, b or width")
    spec = GGSMProbit(q=float(params.get("q", 1.0)), a=float(params.get("a", 1.0)), b=float(params.get("b", 1.0)))
    X, y = split.X_train, split.y_train
    if "width" in params:
        basis = WithBias(RBFBasis.fit(X, float(params["width"])))
        basis_text = f"RBF kernel on the {X.shape[0]} training points, width {float(params['width']):g}, plus a bias column"
    else:
        basis = WithBias(LinearBasis.fit(X))
        basis_text = f"linear: a bias column and the {X.shape[1]} inputs"
    hyper = {"q": spec.q, "a": spec.a, "b": spec.b, "n_basis": int(basis.n_basis)}
    if "width" in params:
        hyper["width"] = float(params["width"])
    Phi_train = basis.transform(X)
    return Prepared(
        spec=spec,
        Phi_train=Phi_train,
        Phi_test=basis.transform(split.X_test),
        y_train=y,
        y_test=split.y_test,
        hyper=hyper,
        moments=ggsm_moments(spec, Phi_train, y),
        selection={
            "q": "given with --param" if "q" in params else "default 1.0 (the paper chooses q by CV; "
                 "see the classifier)",
            "prior": "InvGamma(a, b) on lambda" + ("" if {"a", "b"} & set(params) else
                                                   ", default a = b = 1 (proper; the paper's 1e-3 collapses)"),
            "basis": basis_text,
        },
        basis=basis,
    )


def ggsm_moments(spec: GGSMProbit, Phi: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """Which moments of the GGSM probit posterior exist on these data.

    If the likelihood is flat along some direction (separable data; see
    ``moment_existence.likelihood_flat_direction``), the posterior of the scale r = ||w|| keeps
    the prior's tail r^-(1 + q a): the mean exists only for q a > 1, the sd only for
    q a > 2. The Section 6.1 design at N = 200 is separable on every split, so with a = 1
    no q of the paper's grid has a posterior sd there.
    """
    from .moment_existence import likelihood_flat_direction, scale_moments

    flat = likelihood_flat_direction(Phi, y)
    if flat["flat"] is None:
        return {"mean_exists": None, "sd_exists": None, "tail_exponent": None,
                "reason": f"could not tell whether the posterior moments exist ({flat['status']})"}
    if not flat["flat"]:
        return {"mean_exists": True, "sd_exists": True, "tail_exponent": None,
                "reason": "the likelihood decays in every direction (" + flat["status"] + "): all moments exist"}
    m = scale_moments(spec.q, spec.a)
    missing = "no mean and no sd" if not m["mean_exists"] else ("a mean but no sd" if not m["sd_exists"] else None)
    text = (f"the training data are {flat['kind']} ({flat['status']}), so the posterior of ||w|| has the "
            f"prior's tail r^-{m['tail_exponent']:g} (1 + q a)")
    text += f": w has {missing}" if missing else ": mean and sd exist (q a > 2)"
    return {**m, "reason": text}


def gig_moments(spec: GIGLogistic, Phi: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Which moments of the GIG-logistic posterior of beta exist on these data.

    The marginal prior of each beta_i has the tail |beta|^-(1 + alpha) (alpha = 2 k for
    gamma mixing, 2 |rho| for inverse-gamma mixing: ``moment_existence.tail_index``). If the
    likelihood decays in every direction all moments exist. If the data are separable, the
    posterior of the scale along a separating direction with m features keeps the tail
    r^-(1 + m alpha), so E|beta|^s is finite iff s < m_min alpha, where m_min is the fewest
    features a separating direction needs; ``moment_existence.separating_support_bounds`` brackets
    it. Horii's synthetic design (100 x 100) is separable: with the default k = 1 both
    moments exist; with the paper's k = 1e-6, m_min alpha <= 100 * 2e-6, so beta has no
    posterior mean.
    """
    from .moment_existence import likelihood_flat_direction, separating_support_bounds, tail_index

    alpha = tail_index(spec)
    flat = likelihood_flat_direction(Phi, y)
    if flat["flat"] is None:
        return {"mean_exists": None, "sd_exists": None,
                "reason": f"could not tell whether the posterior moments exist ({flat['status']})"}
    if not flat["flat"]:
        return {"mean_exists": True, "sd_exists": True,
                "reason": "the likelihood decays in every direction (" + flat["status"] + "): all moments exist"}
    if flat["kind"] == "separable":
        bounds = separating_support_bounds(Phi, y)
        lower, upper = bounds["lower"], bounds["upper"] or Phi.shape[1]
    else:  # quasi-separation or a null space: no cheap bound beyond the trivial ones
        lower, upper = 1, Phi.shape[1]

    def exists(order):
        # E|beta|^order < inf iff order < m_min alpha, with lower <= m_min <= upper
        return True if order < lower * alpha else (False if order >= upper * alpha else None)

    mean, sd = exists(1.0), exists(2.0)
    word = {True: "exists", False: "does not exist", None: "may or may not exist"}
    text = (f"the training data are {flat['kind']} ({flat['status']}): along a separating direction with m "
            f"features the posterior keeps the tail r^-(1 + m alpha), alpha = {alpha:g} "
            f"({'2 k' if spec.mixing == 'gamma' else '2 |rho|'}), and {lower} <= m <= {upper} here; "
            f"so the posterior mean of beta {word[mean]} and its sd {word[sd]}")
    return {"mean_exists": mean, "sd_exists": sd, "tail_index": alpha, "support_bounds": [lower, upper],
            "reason": text}


def prepare_gig_logistic(split, params: dict[str, float], *, progress=None) -> Prepared:
    """GIG-hierarchical logistic regression on one split: nothing is selected - the
    hyper-prior is fixed, and every engine and the reference see every column.

    params (all optional): ``k``, ``theta`` (the Gamma hyper-prior, default 1, 1; the
    paper's 1e-6, 1e-6 is allowed), ``rho`` (the GIG index, default the paper's 1; a
    negative rho selects the inverse-gamma mixing family), ``bias`` (1: put a bias column
    in front, under the same prior; default 0 for the paper's synthetic design, which has
    no intercept, and 1 for every other data set).
    """
    unknown = set(params) - {"k", "theta", "rho", "bias"}
    if unknown:
        raise ValueError(f"unknown gig-logistic parameter(s) {sorted(unknown)}; use k, theta, rho or bias")
    rho = float(params.get("rho", 1.0))
    spec = GIGLogistic(rho=rho, k=float(params.get("k", 1.0)), theta=float(params.get("theta", 1.0)),
                       mixing="gamma" if rho > 0 else "inverse-gamma",
                       parameterization=GIG_REFERENCE_PARAMETERIZATION)
    bias_default = 0.0 if split.name == "horii_synthetic" else 1.0
    bias = float(params.get("bias", bias_default))
    if bias not in (0.0, 1.0):
        raise ValueError(f"bias must be 0 or 1, got {bias:g}")
    X, y = split.X_train, split.y_train
    basis = WithBias(LinearBasis.fit(X)) if bias else LinearBasis.fit(X)
    hyper = {"rho": spec.rho, "k": spec.k, "theta": spec.theta, "mixing": spec.mixing,
             "bias": bool(bias), "n_basis": int(basis.n_basis)}
    return Prepared(
        spec=spec,
        Phi_train=basis.transform(X),
        Phi_test=basis.transform(split.X_test),
        y_train=y,
        y_test=split.y_test,
        hyper=hyper,
        selection={
            "prior": f"Gamma(k = {spec.k:g}, rate theta = {spec.theta:g}) on each "
                     f"{spec.hyper_name}_i" + ("" if {"k", "theta"} & set(params) else
                                              " (default: proper; the paper's k = theta = 1e-6 with --param)"),
            "mixing": f"tau_i | {spec.hyper_name}_i ~ " + (
                f"GIG({spec.rho:g}, a_i, 0) = Gamma({spec.rho:g}, rate a_i / 2)" if spec.mixing == "gamma"
                else f"GIG({spec.rho:g}, 0, b_i) = InvGamma({-spec.rho:g}, scale b_i / 2)"),
            "basis": ("linear with a bias column" if bias else "linear, no bias column")
                     + f" ({'given' if 'bias' in params else 'default for this data set'}); inputs as they "
                       "are, not standardized",
            "parameterization": f"NUTS and the generic Laplace run on the {spec.parameterization} form "
                                "(models/gig_logistic.py)",
        },
        basis=basis,
        moments=gig_moments(spec, basis.transform(X), y),
    )


#: the form of the GIG-hierarchical model NUTS samples (and the generic Laplace
#: approximates); see DEFAULT_REFERENCES for the measurements behind the choice
GIG_REFERENCE_PARAMETERIZATION = "marginal"


#: model name -> (prepare function, number of CV fits it reports to a progress bar)
PROTOCOLS: dict[str, tuple[Callable, int]] = {
    "pcvm": (prepare_pcvm, len(PCVM_WIDTH_GRID)),
    "ggsm-probit": (prepare_ggsm_probit, 0),
    "gig-logistic": (prepare_gig_logistic, 0),
}

#: models whose protocol takes the inputs as they are, not standardized on the training
#: split. GIG logistic: Horii's synthetic inputs are already N(0, 1) and its beta* is on
#: their scale, and centring a 100 x 100 design drops its rank to 99 (a direction along
#: which the likelihood is exactly flat); a1a and w1a are binary features.
RAW_INPUTS: frozenset[str] = frozenset({"gig-logistic"})

#: what `zoo compare --model M` runs when --data / --engines are not given
DEFAULT_DATA: dict[str, str] = {"pcvm": "ripley", "ggsm-probit": "ggig_linear", "gig-logistic": "horii_synthetic"}
#: The reference samplers `zoo compare` tries for a model, in order, each with the settings
#: that differ from ReferenceConfig's defaults; the first certified one is the reference.
#: GGSM probit on its default design: NUTS 4 x (1000 + 1000) with two doublings missed
#: certification at q = 2 (R-hat 1.011, tail ESS 266); 4 x (2000 + 2500) certified it
#: (R-hat 1.004, ESS bulk/tail 707/562, no divergences, 40 s). NUTS certifies no q <= 1
#: there (issue 3: the data are separable and |w|^q has a kink), so the slice-within-Gibbs
#: sampler of validation/ggsm_gibbs.py is tried next; NUTS gets one doubling only, because
#: where it fails on this design more draws have not helped (q = 1: R-hat 1.24 after 4 x
#: 12000) and the second sampler is waiting.
#: GIG logistic on Horii's synthetic design, k = 1: NUTS on the marginal form at target
#: acceptance 0.95 keeps 5 divergences in 4 x 1000 (no form tried had none), so the
#: Polya-Gamma Gibbs sampler of validation/gig_gibbs.py follows. It mixes slowly on these
#: separable data (bulk ESS 45 of 4 x 1000 sweeps) but a sweep is cheap: 4 x 10000 sweeps
#: certified (R-hat 1.006, ESS 640) in about 90 s, and its medians and sds agree with
#: the uncertified NUTS run (largest |z| 2.2 and 2.8 over 100 coefficients).
DEFAULT_REFERENCES: dict[str, tuple[dict[str, Any], ...]] = {
    "pcvm": ({"sampler": "nuts"},),
    "ggsm-probit": (
        {"sampler": "nuts", "num_warmup": 2000, "num_samples": 2500, "max_doublings": 1},
        {"sampler": "slice-gibbs", "num_warmup": 1000, "num_samples": 2500, "max_doublings": 2},
    ),
    "gig-logistic": (
        {"sampler": "nuts", "target_accept": 0.95},
        {"sampler": "pg-gibbs", "num_warmup": 1000, "num_samples": 10000, "max_doublings": 1},
    ),
}
DEFAULT_ENGINES: dict[str, tuple[str, ...]] = {
    "pcvm": ("em", "laplace", "ep"),
    "ggsm-probit": ("mm", "lap", "gj", "stu"),
    "gig-logistic": ("vb", "laplace"),
}

#: which engines approximate a model variant rather than the model itself
ENGINE_VARIANTS: dict[tuple[str, str], str] = {("pcvm", "laplace"): "surrogate"}
