"""PCVM (probabilistic classification vector machine): its comparison protocol and record.

The protocol of the PCVM comparison: the kernel width by cross-validation of the Laplace
engine run end to end, then alpha and the active basis functions by that engine's
sequential marginal-likelihood maximization (Tipping & Faul 2003, as in EPCVM); the
frozen p(w | y, alpha) is what NUTS and every engine approximate.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...inference.basis_selection import KernelCandidates, SelectionConfig
from ...inference.contracts import EngineEntry
from ...models.basis import pcvm_basis
from ...models.pcvm import PCVM
from ..judge.defects import Defect, config_defect
from .fit_cost import FLOAT64, CostModel, FitPlan, estimate, power_work
from .model_record import ClassifierParam, ModelRecord, positive
from .protocol import (
    Prepared,
    auto_laplace_engine,
    svi_engines,
    pathfinder_engines,
    cross_validated_width,
    check_basis,
)

#: kernel widths searched by cross-validation (inputs have unit variance). The PCVM
#: papers search theta in {0.1, 0.3, ..., 10} for exp(-theta^2 r^2); widths 0.25..4
#: cover theta 0.18..2.8, the part of that grid that is not degenerate for
#: standardized inputs, at half-octave steps.
WIDTH_GRID = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0)


def _selecting_engine():
    """The end-to-end fit that selects alpha and the basis: this model's laplace engine."""
    return RECORD.engine("laplace").fit_end_to_end()


def _laplace_predict(X_tr, y_tr, X_va, width):
    basis = pcvm_basis(X_tr, y_tr, width)
    fit = _selecting_engine()(basis.transform(X_tr), y_tr)
    return fit.posterior.predict_proba(basis.subset(fit.active).transform(X_va))


def prepare(split, params: dict[str, float], *, progress=None) -> Prepared:
    """PCVM on one split.

    params (all optional): ``width`` (skip cross-validation), ``alpha`` (a shared weight
    precision: then every training point is a basis function and no selection runs),
    ``alpha_bias``.
    """
    X, y = split.X_train, split.y_train
    selection: dict[str, Any] = {}
    if "width" in params:
        width = float(params["width"])
        selection["width"] = "given with --param"
    else:
        width, scores = cross_validated_width(X, y, _laplace_predict, WIDTH_GRID, progress=progress)
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
        fit = _selecting_engine()(Phi_all, y)
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


def classifier_design(X, y01, engine: str, options: dict[str, Any]):
    """The classifier's basis: an RBF kernel on the training points (PCVM is a kernel model).
    The selection's path (``scan``) is :func:`classifier_plan`'s."""
    check_basis("pcvm (a kernel model)", options, ("rbf",))
    if options.get("scan") is not None and engine not in SELECTING_ENGINES:
        raise ValueError(f"scan is the sequential selection's ({' and '.join(SELECTING_ENGINES)} engines); "
                         f"engine {engine!r} prunes top-down from all columns")
    return pcvm_basis(X, y01, options["width"]), {}


# ----------------------------------------------------------------------------------------
# What a classifier fit costs (ModelRecord.classifier_plan; validation/records/fit_cost.py)
# ----------------------------------------------------------------------------------------
#: the engines that grow the model by sequential selection (basis_selection.select_basis)
SELECTING_ENGINES = ("laplace", "ep")
#: the selection's candidate scans the classifier offers (``scan``; None: by the size)
SCANS = ("full", "working-set")
#: with more training points than this the classifier's selection scores a working set
#: with batch re-estimates (SelectionConfig(scan="working-set", reestimate="batch"): not
#: the paper's rule, which scores every candidate at every step; scan="full" keeps it).
#: The working set pays from about here: on the benchmark's problems at 500 points it took
#: EP a third of the full scan's time and laplace about as long, from 1000 points it was
#: faster for both and converged where the full scan ran into its 1000-step cap
#: (benchmarks/results/classifier_cost/); smaller problems - every existing test - keep
#: the paper's rule and its numbers.
WORKING_SET_ABOVE = 500
#: the dense N x K candidate matrix is formed up to this size; above it the candidates are
#: KernelCandidates (kernel tiles recomputed at each full scan, memory O(N M))
DENSE_CANDIDATES_BYTES = 2e9
#: the working set's size and refresh (SelectionConfig's defaults, measured in
#: benchmarks/epcvm_scaling.py)
_WORKING_SET = SelectionConfig(scan="working-set", reestimate="batch")

#: cost models, warm seconds = fixed + coef * (N / 1000)^exponent, plus compile on a first
#: fit; constants fitted to the classifier's fits on the synthetic problems of
#: benchmarks/classifier_cost.py (RBF at the median width, 250 .. 2000 points, 1000
#: features; fit_cost.REFERENCE_MACHINE). The selection's step count and kept functions
#: depend on the data (nearly separable data keep more) and the machine's load moved the
#: benchmark's seconds by up to 4x between runs, hence the factor.
COSTS = {
    "laplace/full": CostModel(fixed=5.4, coef=27.6, factor=4.0, compile=31.0),
    "laplace/working-set": CostModel(fixed=4.6, coef=18.0, factor=4.0, compile=23.0),
    "ep/full": CostModel(fixed=12.4, coef=185.0, factor=4.0, compile=53.0),
    "ep/working-set": CostModel(fixed=0.0, coef=28.3, factor=4.0, compile=32.0),
    # the EM's warm seconds were 2-5 at every size (its active set collapses within the
    # first iterations): compilation is most of its first fit
    "em/top-down": CostModel(fixed=2.1, coef=0.29, factor=4.0, compile=14.0),
}
#: growth of each path's seconds with N, from how its work scales: the full scan pays
#: O(N K M) per step (K = N) for a number of steps that grows with N; the working set scores
#: all K only every 25 steps; the EM's first iterations are O(N^3). How well the fitted
#: constants then follow the benchmark's seconds is in its table (ratio column).
EXPONENTS = {"full": 3.0, "working-set": 2.0, "top-down": 3.0}


def selection_config(n_samples: int, scan: str | None) -> SelectionConfig | None:
    """The SelectionConfig of the classifier's selection at this size (None: the paper's
    defaults)."""
    scan = scan or ("working-set" if n_samples > WORKING_SET_ABOVE else "full")
    return _WORKING_SET if scan == "working-set" else None


def classifier_plan(engine: str, n_samples: int, n_features: int, basis, fit_kwargs, options) -> FitPlan:
    """The classifier's path: the selecting engines' sequential selection (the paper's full
    scan up to :data:`WORKING_SET_ABOVE` points, the working set above; ``scan`` chooses),
    or the EM's top-down pruning from every column."""
    K = int(basis.n_basis)
    n = int(n_samples)
    dense = n * K * FLOAT64
    kernel = dense > DENSE_CANDIDATES_BYTES
    design = (lambda basis_, X: KernelCandidates.from_basis(basis_, X)) if kernel else None
    where = (f"kernel columns computed in tiles, never stored ({n} x {K} would be {dense / 1e9:.0f} GB)"
             if kernel else f"the {n} x {K} kernel matrix in memory")
    if engine not in SELECTING_ENGINES:
        # M^2 floats for K^T K and the Cholesky factor at the start (every column active)
        memory = dense + 3 * K * K * FLOAT64
        return estimate(
            COSTS, f"{engine}/top-down", power_work(n, EXPONENTS["top-down"]), candidates=K, unit="iteration",
            path=(f"top-down EM (the paper's): all {K} columns active at the start, a dense ridge M-step "
                  f"O(N M^2 + M^3) per iteration while pruning shrinks M, at most 500 iterations"),
            memory_bytes=memory,
            advice=("the EM starts from every training point, so its first iterations grow as N^3: subsample the "
                    "rows, or use engine='laplace' (sequential selection grows the model from one function)"))
    scan = options.get("scan") or ("working-set" if n > WORKING_SET_ABOVE else "full")
    config = selection_config(n, scan)
    if scan == "working-set":
        path = (f"sequential selection (Tipping & Faul) over {K} candidates: a working set of the "
                f"{_WORKING_SET.working_set_size} best scored at each step, all {K} every "
                f"{_WORKING_SET.refresh_every} steps and before stopping, batch re-estimates "
                f"(not the paper's rule; scan='full' runs it); {where}")
    else:
        path = (f"sequential selection (Tipping & Faul, the paper's rule) over {K} candidates: all scored at "
                f"every step, O(N K M) per step; {where}")
    return estimate(
        COSTS, f"{engine}/{scan}", power_work(n, EXPONENTS[scan]), candidates=K, unit="selection step", path=path,
        # the candidates (or tiles), N x M active columns and the working set's columns
        memory_bytes=(0 if kernel else dense) + n * _WORKING_SET.working_set_size * FLOAT64,
        fit_kwargs={} if config is None else {"config": config}, design=design,
        advice=("subsample the rows, or a wider kernel (nearly separable data keep more basis functions and take "
                "more steps)" + ("" if scan == "working-set" else "; scan='working-set' scores fewer candidates "
                                 "per step")))


def _check_scan(name: str, value):
    if value not in SCANS:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, SCANS))} or None, got {value!r}")
    return value


def sbc_spec():
    """SBC draws from PCVM with unit precisions (weights and bias on the scale of the RBF
    features), and from its EPCVM surrogate for the laplace engine."""
    spec = PCVM(alpha=1.0, alpha_bias=1.0)
    return spec, {"surrogate": spec.with_params(surrogate=True)}


RECORD = ModelRecord(
    name="pcvm",
    title="PCVM",
    summary="PCVM: probit kernel classifier with truncated Gaussian priors (Chen, Tino & Yao 2009, 2014)",
    spec_class=PCVM,
    prepare=prepare,
    params=("width", "alpha", "alpha_bias"),
    # the spec's own checks (models/pcvm.py, models/basis.py), before the CV instead of after it
    param_domains={"width": positive("the RBF kernel width"),
                   "alpha": positive("the weights' prior precision"),
                   "alpha_bias": positive("the bias's prior precision")},
    selection="kernel width by CV, alpha and the active basis by the laplace engine",
    cv_fits=len(WIDTH_GRID),
    default_data="ripley",
    engines=(
        EngineEntry(
            "em", "point",
            "PCVM EM (Chen, Tino & Yao 2009): MAP of the truncated-prior probit model",
            "em:fit", "pcvm_em:fit_end_to_end",
        ),
        EngineEntry(
            "laplace", "gaussian",
            "EPCVM Laplace (Chen, Tino & Yao 2014): Gaussian at the mode of the surrogate model",
            "pcvm_laplace:fit", "pcvm_laplace:fit_end_to_end", variant="surrogate",
        ),
        EngineEntry(
            "ep", "gaussian",
            "EPCVM EP (Chen, Tino & Yao 2014): likelihood and truncation sites",
            "expectation_propagation:fit", "expectation_propagation:fit_end_to_end",
        ),
        auto_laplace_engine(),
        *svi_engines(),
        *pathfinder_engines(),
    ),
    default_engines=("em", "laplace", "ep"),
    classifier_engine="laplace",
    # NUTS reaches a bulk/tail ESS of ~1760/1190 in 4 x 1000 draws on the default (Ripley,
    # 9 basis functions), so it starts with 500 draws a chain and doubles from where the
    # chains are (cap 4 x 4000, as before)
    references=({"sampler": "nuts", "num_samples": 500, "max_doublings": 3},),
    classifier=classifier_design,
    classifier_params=(
        ClassifierParam("scan", "laplace and ep: the selection's candidate scan, 'full' (the paper's: every "
                                "candidate at every step) or 'working-set' (a working set with batch "
                                f"re-estimates); None: 'full' up to {WORKING_SET_ABOVE} training points, "
                                "'working-set' above", _check_scan),
    ),
    classifier_plan=classifier_plan,
    defects=(
        Defect("truncation ignored", "PCVM's EP without its truncation sites: the untruncated Gaussian prior",
               config_defect("zoo.inference.expectation_propagation:EPConfig", truncation_sites=False),
               engines=("ep",)),
        # EP's answer is its fixed point, which damping does not move; only convergence can
        # suffer. Detectors should therefore flag it at their false-alarm rate (a control of
        # specificity) unless the naive iteration fails to converge.
        Defect("EP without damping", "PCVM's EP as naive parallel EP: full steps, no halving, no hand-over",
               config_defect("zoo.inference.expectation_propagation:EPConfig", schedule="parallel",
                             step_control=False),
               engines=("ep",)),
    ),
    sbc_spec=sbc_spec,
)
