"""Generalized Beta-Bernoulli logistic regression (Hasan & Pal): its comparison protocol
and record.

The spec is BBLR2 by default: a, b from the training labels' counts (a = N+ / (2N),
b = 1/2; ``models/bblr.BBLR.from_counts``), a Gaussian prior N(0, I / lam) on the weights
of a linear design with a bias column on standardized inputs. gamma and lam are given
(``--param``); for the linear model the posterior depends on them only through gamma^2 /
lam (DERIVATIONS.md §6.2). ``config=1`` takes a, b from the weak Beta prior instead
(BBLR1: alpha = beta = 1, n = 100), or ``a``, ``b`` give them directly.

The likelihood is bounded, so the posterior need not be log-concave: NUTS runs its chains
from NumPyro's dispersed starts (uniform in [-2, 2] per coordinate, several posterior sds
on standardized inputs), and R-hat is what notices chains that settle in different modes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...data import flipped_labels
from ...inference import sparse_kbblr
from ...inference.contracts import EngineEntry
from ...inference.sla import ETA0_GRID, LAM_GRID, STEP_GRID
from ...models.basis import LinearBasis, RBFBasis, WithBias
from ...models.bblr import BBLR, DEFAULT_GAMMA
from ..judge.defects import Defect, config_defect
from ..references.parallel_tempering import PARALLEL_TEMPERING
from .bblr_figures import comparison_figures
from .fit_cost import FLOAT64, CostModel, FitPlan, estimate
from .model_record import ClassifierParam, ModelRecord, one_of, positive, positive_number, within
from .protocol import Prepared, auto_laplace_engine, pathfinder_engines, svi_engines, check_basis

#: the compare default's prior precision (DERIVATIONS.md §6.2: only gamma^2 / lam matters
#: for the linear model; gamma's default is the model module's)
DEFAULT_LAM = 1.0


def prepare(split, params: dict[str, float], *, progress=None) -> Prepared:
    """BBLR on one split.

    params (all optional): ``gamma`` (default 4), ``lam`` (the Gaussian prior's precision,
    default 1), ``config`` (2: a, b from the class counts, the default; 1: from the weak
    Beta(1, 1) prior with n = 100), ``a`` and ``b`` (both, instead of ``config``), ``flip``
    (a fraction of training labels flipped, the robustness case; default 0).

    Kernel designs (KBBLR, eqs. 36-38): ``rbf`` (the RBF width: f(x) = sum_j w_j
    k(x, x_j) over the training points, no bias column; absent: the linear design) and
    ``sparse=1`` (the Gaussian-Laplace mixture prior of eq. 41 instead of N(0, 1 / lam):
    its (pi, s2, ell) are those the sla-sparse engine's hard EM ends at on this training
    design - Algorithm 3, run once here, so that every engine and the reference see the
    model the EM chose - or as given by ``pi``, ``s2`` and ``ell``, all three).
    """
    check_relations(params)
    flip = float(params.get("flip", 0.0))
    y, flipped = flipped_labels(split.y_train, flip, split.split) if flip else (split.y_train, np.zeros(0, int))
    gamma, lam = float(params.get("gamma", DEFAULT_GAMMA)), float(params.get("lam", DEFAULT_LAM))
    given_ab = {"a", "b"} & set(params)
    config = float(params.get("config", 2.0))
    if given_ab:
        spec = BBLR(a=float(params["a"]), b=float(params["b"]), gamma=gamma, lam=lam)
        how = "as given"
    elif config == 2.0:
        spec = BBLR.from_counts(y, gamma=gamma, lam=lam)
        how = f"BBLR2: alpha = N+ = {int(np.sum(y > 0.5))}, beta = N- = {int(np.sum(y < 0.5))}, n = N"
    elif config == 1.0:
        spec = BBLR.weak_prior(gamma=gamma, lam=lam)
        how = "BBLR1: the weak prior alpha = beta = 1, n = 100"
    else:
        raise ValueError(f"config must be 1 or 2 (BBLR1 or BBLR2; BBLR3 and 4 are end-to-end modes), got {config:g}")
    basis = WithBias(LinearBasis.fit(split.X_train)) if "rbf" not in params else RBFBasis.fit(
        split.X_train, float(params["rbf"]))
    spec, kernel_hyper, kernel_selection = _sparse_prior(spec, basis.transform(split.X_train), y, params)
    hyper = {"a": spec.a, "b": spec.b, "c": spec.c, "gamma": spec.gamma, "n_basis": int(basis.n_basis),
             **({"lam": spec.lam, "gamma2_over_lam": spec.gamma ** 2 / spec.lam} if spec.prior == "gaussian" else {}),
             **kernel_hyper}
    if flip:
        hyper["flip"] = flip
    return Prepared(
        spec=spec,
        Phi_train=basis.transform(split.X_train),
        Phi_test=basis.transform(split.X_test),
        y_train=y,
        y_test=split.y_test,
        hyper=hyper,
        selection={
            "a, b": f"a = {spec.a:.4g}, b = {spec.b:.4g} (c = {spec.c:.4g}): {how}",
            "gamma, lam": _gamma_lam_text(spec, params),
            "basis": "linear with a bias column, standardized inputs" if "rbf" not in params else (
                f"RBF kernel on the {basis.n_basis} training points, width {basis.width:g} (given), "
                "standardized inputs, no bias column (KBBLR, eq. 36)"),
            **kernel_selection,
            **({"label noise": f"{len(flipped)} of {len(y)} training labels flipped (fraction {flip:g}, drawn "
                               f"uniformly with the split's seed, zoo.data.flipped_labels); test labels clean"}
               if flip else {}),
        },
        basis=basis,
    )


#: the values each --param takes (the spec's own checks, models/bblr.py, and the protocol's
#: switches), checked before the data are read or the hard EM runs
PARAM_DOMAINS = {
    "gamma": positive("the sigmoid's sharpness"),
    "lam": positive("the Gaussian prior's precision"),
    "config": one_of(1, 2, why="BBLR1 or BBLR2; BBLR3 and 4 are end-to-end modes"),
    "a": within(0.0, 1.0, high_open=True, why="the likelihood's floor: p(y = 1) >= a"),
    "b": within(0.0, 1.0, low_open=True, why="the sigmoid's range"),
    "flip": within(0.0, 0.5, high_open=True, why="the fraction of training labels flipped"),
    "rbf": positive("the RBF kernel width"),
    "sparse": one_of(0, 1, why="1: the Gaussian-Laplace prior with its hard EM"),
    "pi": within(0.0, 1.0, low_open=True, high_open=True, why="the Gaussian component's weight"),
    "s2": positive("the Gaussian component's variance"),
    "ell": positive("the Laplace component's scale"),
}


def check_relations(params) -> None:
    """ValueError in one line for --param values that are each valid but do not go
    together: a without b, a and b beside config, a + b > 1, pi, s2, ell without all
    three and sparse=1."""
    given_ab = {"a", "b"} & set(params)
    if given_ab and given_ab != {"a", "b"}:
        raise ValueError("give both a and b, or neither (then config chooses them)")
    if given_ab and "config" in params:
        raise ValueError("give either a and b or config, not both")
    if given_ab and float(params["a"]) + float(params["b"]) > 1 + 1e-12:
        raise ValueError(f"bblr parameters a + b must be <= 1 (they bound a probability); got a = "
                         f"{float(params['a']):g}, b = {float(params['b']):g}")
    given = {"pi", "s2", "ell"} & set(params)
    if given and (float(params.get("sparse", 0.0)) != 1.0 or given != {"pi", "s2", "ell"}):
        raise ValueError("pi, s2 and ell set the sparse prior: give all three, and sparse=1")


def _gamma_lam_text(spec: BBLR, params) -> str:
    """How gamma (and, under the Gaussian prior, lam) were set. The gamma^2 / lam invariance
    of DERIVATIONS.md §6.2 holds for the Gaussian prior only; the Gaussian-Laplace mixture has
    no lam (its scales s2, ell are reported with the prior)."""
    given = "(given)" if {"gamma", "lam"} & set(params) else "(defaults)"
    if spec.prior != "gaussian":
        return f"gamma = {spec.gamma:g} {given}; lam is not used by the {spec.prior} prior"
    return (f"gamma = {spec.gamma:g}, lam = {spec.lam:g} {given}; the posterior depends on gamma^2 / lam = "
            f"{spec.gamma ** 2 / spec.lam:g} (DERIVATIONS.md §6.2)")


def _sparse_prior(spec: BBLR, Phi, y, params) -> tuple[BBLR, dict[str, Any], dict[str, str]]:
    """With ``sparse=1``: the spec with the Gaussian-Laplace prior - (pi, s2, ell) as given,
    or where the sla-sparse engine's hard EM ends on (Phi, y) from its own start (its a, b
    and gamma are the spec's). Without: the spec unchanged."""
    sparse, given = float(params.get("sparse", 0.0)), {"pi", "s2", "ell"} & set(params)
    if sparse not in (0.0, 1.0):
        raise ValueError(f"sparse must be 0 or 1 (1: the Gaussian-Laplace prior with its hard EM), got {sparse:g}")
    if given and (sparse != 1.0 or given != {"pi", "s2", "ell"}):
        raise ValueError("pi, s2 and ell set the sparse prior: give all three, and sparse=1")
    if sparse == 0.0:
        return spec, {}, {}
    if given:
        spec = replace(spec, prior="gauss-laplace", pi=float(params["pi"]), s2=float(params["s2"]),
                       ell=float(params["ell"]))
        return spec, {"pi": spec.pi, "s2": spec.s2, "ell": spec.ell}, {"prior": "Gaussian-Laplace mixture (eq. 41), "
                                                                        "pi, s2, ell as given"}

    _, chosen, rec, _ = sparse_kbblr.run_from_own_start(spec, Phi, y)
    hyper = {"pi": chosen.pi, "s2": chosen.s2, "ell": chosen.ell, "em_kept": rec["n_kept"],
             "em_converged": rec["converged"]}
    return chosen, hyper, {"prior": (
        f"Gaussian-Laplace mixture (eq. 41) at the sla-sparse engine's hard-EM end point on the training design "
        f"(Algorithm 3 from its own start, DERIVATIONS.md §6.6): pi = {chosen.pi:.4g}, s2 = {chosen.s2:.4g}, "
        f"ell = {chosen.ell:.4g}; the EM kept {rec['n_kept']} of {Phi.shape[1]} columns"
        + ("" if rec["converged"] else " (not settled: a stage ended on its round cap)"))}


def classifier_design(X, y01, engine: str, options: dict[str, Any]):
    """The classifier's design and the end-to-end fit's options.

    * ``basis="linear"``: linear with a bias column, for every engine (sla, laplace and
      slam: BBLR3, lam by SLAM's validation inside the end-to-end fit; sla-sparse: the
      Gaussian-Laplace prior with its hard EM);
    * ``basis="rbf"``: sparse kernel BBLR (KBBLR with the mixture prior, Algorithm 3): the
      ``sla-sparse`` engine only, an RBF kernel on the training points with the given
      ``width`` (the classifier's ``width="median"`` is the median heuristic, the rule of
      ``zoo reproduce bblr-kernel``), no bias column.

    ``gamma`` as given (None: the default 4); a, b from the class counts (BBLR2)."""
    check_basis("bblr", options, ("linear", "rbf"))
    kwargs = {} if options["gamma"] is None else {"gamma": float(options["gamma"])}
    if options["basis"] == "rbf":
        if engine != "sla-sparse":
            raise ValueError(f"bblr's kernel classifier is sparse KBBLR: use engine 'sla-sparse' with basis 'rbf' "
                             f"(engine {engine!r} takes basis 'linear')")
        return RBFBasis.fit(X, options["width"]), kwargs
    return WithBias(LinearBasis.fit(X)), kwargs


#: SLA runs of each end-to-end engine on a linear design: one per lam of SLAM's grid on
#: four fifths of the points, then the fit on all of them (slam: also its 3 x 3 grid of
#: learning parameters)
SLA_RUNS = {"sla": len(LAM_GRID) + 1, "laplace": len(LAM_GRID) + 1,
            "slam": len(LAM_GRID) + len(ETA0_GRID) * len(STEP_GRID) + 1}
#: cost models (seconds = fixed + coef * work / 1e9), constants fitted to the classifier's
#: fits of benchmarks/classifier_cost.py (fit_cost.REFERENCE_MACHINE). Work:
#:
#: * "sla" (linear engines): SLA runs x N^1.5 M^2 - SLA's coordinate probe evaluates the
#:   whole objective, O(N M), for each of ~80 steps of each of the M coordinates per pass,
#:   and on the benchmark's (separable) data the passes and descent steps grew with N too
#:   (its seconds grew as N^1.5 at M = 1001, not as N);
#: * "sla-sparse": (N M)^1.5 - its probe moves f = Phi w by one column per candidate, O(N)
#:   each, and its descent steps are O(N M), but the descents also took more steps as N
#:   grew (the benchmark's seconds grew as (N M)^1.5 for the kernel's M = N, not as N M);
#:   how many passes and steps depends on the data.
COSTS = {"sla": CostModel(fixed=1.1, coef=107.0, factor=4.0),
         "sla-sparse": CostModel(fixed=6.1, coef=53.0, factor=4.0)}


def classifier_plan(engine: str, n_samples: int, n_features: int, basis, fit_kwargs, options) -> FitPlan:
    """The linear engines' SLA runs (lam by SLAM's validation) or sparse KBBLR's one
    annealed run with its hard EM, each on every column of the design."""
    n, m = int(n_samples), int(basis.n_basis)
    memory = n * m * FLOAT64
    if engine == "sla-sparse":
        return estimate(
            COSTS, "sla-sparse", 1e9 * (n * m / 1e6) ** 1.5, candidates=m, unit="round", memory_bytes=memory,
            path=(f"sparse kernel BBLR (Algorithm 3) on all {m} columns: SLA's gamma annealed (2 stages), rounds "
                  "of gradient descent (O(N M) a step), a coordinate probe (O(N) a candidate) and a hard-EM step of "
                  "the mixture prior, at most 100 rounds a stage"),
            advice="the descents grow as N M a step, with more steps as N grows (M = N for the kernel): subsample "
                   "the rows")
    runs = SLA_RUNS[engine]
    return estimate(
        COSTS, "sla", runs * n * (n / 1000) ** 0.5 * m * m, candidates=m, memory_bytes=memory,
        path=(f"{runs} SLA runs on all {m} columns (lam by validation on a held-out fifth: one run per lam of "
              f"{len(LAM_GRID)}{', then the 3 x 3 learning-parameter grid' if engine == 'slam' else ''}, then all "
              "points): gamma annealed, gradient descent and a coordinate probe that evaluates the objective, "
              "O(N M), for each of ~80 steps of each coordinate"),
        advice=("the probe grows as N M^2 per pass: fewer features (a selection or projection first) or a "
                "subsample of the rows"))


def sbc_spec():
    """SBC draws w from the Gaussian prior (lam = 1) with BBLR2-like constants
    a = 0.25, b = 0.5 and the compare default gamma."""
    return BBLR(a=0.25, b=0.5, gamma=DEFAULT_GAMMA, lam=DEFAULT_LAM), {}


RECORD = ModelRecord(
    name="bblr",
    title="bblr",
    summary="generalized Beta-Bernoulli logistic regression: a bounded likelihood (Hasan & Pal)",
    spec_class=BBLR,
    prepare=prepare,
    params=("gamma", "lam", "config", "a", "b", "flip", "rbf", "sparse", "pi", "s2", "ell"),
    param_domains=PARAM_DOMAINS,
    param_relations=check_relations,
    selection="a, b from the class counts (BBLR2); gamma, lam as given",
    default_data="pima",
    engines=(
        EngineEntry("sla", "point",
                    "Nguyen & Sanner's smoothed loss approximation as Hasan & Pal run it: gamma annealed "
                    "(x10 from 2), gradient descent and coordinate probes, from the L2-LR solution",
                    "sla:fit", "sla:fit_end_to_end"),
        EngineEntry("laplace", "gaussian", "Gaussian at SLA's mode (Newton-polished), Hessian by autodiff",
                    "sla:fit_laplace", "sla:fit_laplace_end_to_end"),
        EngineEntry("slam", "point",
                    "SLA with its initial learning rate and probe spacing chosen on a held-out fifth of the "
                    "training points (Hasan & Pal's SLAM; end to end also lam: BBLR3)",
                    "sla:fit_slam", "sla:fit_slam_end_to_end"),
        EngineEntry("sla-sparse", "point",
                    "sparse kernel BBLR (Algorithm 3): SLA on the Gaussian-Laplace mixture prior with a hard-EM "
                    "update of (pi, s2, ell) after every probe phase; ends at its own (pi, s2, ell)",
                    "sparse_kbblr:fit", "sparse_kbblr:fit_end_to_end",
                    other_model="bblr with the (pi, s2, ell) its hard EM ends at (a new spec; the given one is "
                                "the EM's start)"),
        auto_laplace_engine(),
        *svi_engines(),
        *pathfinder_engines(),
    ),
    default_engines=("sla", "laplace", "slam", "auto-laplace"),
    classifier_engine="sla",
    # NUTS first; where its chains settle in different modes (R-hat) or diverge, parallel
    # tempering, whose hottest copy samples the prior and carries states across (DERIVATIONS.md §6.7)
    references=({"sampler": "nuts"}, {"sampler": "parallel-tempering"}),
    samplers=(PARALLEL_TEMPERING,),
    classifier=classifier_design,
    classifier_plan=classifier_plan,
    classifier_params=(
        ClassifierParam("gamma", "the sigmoid's sharpness (None: 4)", positive_number),
    ),
    defects=(
        # reusing LR's Laplace for the bounded likelihood: the Hessian with a = 0, b = 1 at
        # BBLR's mode, steeper than the model's own wherever a > 0 or a + b < 1
        Defect("logistic curvature", "BBLR's Laplace with L2 logistic regression's Hessian (a = 0, b = 1) at its "
               "mode", config_defect("zoo.inference.sla:SLAConfig", laplace_hessian="logistic"),
               engines=("laplace",)),
    ),
    sbc_spec=sbc_spec,
    figures=comparison_figures,
)
