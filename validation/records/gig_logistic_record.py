"""GIG-hierarchical logistic regression (Horii): its comparison protocol and record.

Nothing is selected: the hyper-prior is fixed, and every engine and the reference see
every column, with the inputs as they are. NUTS keeps a few divergences on Horii's
separable synthetic design, so the record brings a Polya-Gamma Gibbs sampler of the same
posterior (``validation/references/pg_gibbs.py``); which posterior moments of beta exist depends on
the data and the hyper-prior (:func:`moments`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...inference.contracts import EngineEntry
from ...models.basis import LinearBasis, WithBias
from ...models.gig_logistic import GIGLogistic
from ..judge.defects import Defect, config_defect
from ..judge.moment_existence import (
    likelihood_flat_direction,
    separating_support_bounds,
    tail_index,
)
from ..references.pg_gibbs import PG_GIBBS
from .fit_cost import CostModel, FitPlan, dense_update_plan
from .model_record import ClassifierParam, ModelRecord, finite_number, nonzero, one_of, positive, positive_number
from .protocol import Prepared, auto_laplace_engine, pathfinder_engines, svi_engines, check_basis

#: the form of the GIG-hierarchical model NUTS samples (and the generic Laplace
#: approximates); see the record's references for the measurements behind the choice
GIG_REFERENCE_PARAMETERIZATION = "marginal"


def prepare(split, params: dict[str, float], *, progress=None) -> Prepared:
    """GIG-hierarchical logistic regression on one split: nothing is selected - the
    hyper-prior is fixed, and every engine and the reference see every column.

    params (all optional): ``k``, ``theta`` (the Gamma hyper-prior, default 1, 1; the
    paper's 1e-6, 1e-6 is allowed), ``rho`` (the GIG index, default the paper's 1; a
    negative rho selects the inverse-gamma mixing family), ``bias`` (1: put a bias column
    in front, under the same prior; default 0 for the paper's synthetic design, which has
    no intercept, and 1 for every other data set).
    """
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
    )


def moments(spec: GIGLogistic, Phi: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Which moments of the GIG-logistic posterior of beta exist on these data.

    The marginal prior of each beta_i has the tail ``|beta|^-(1 + alpha)`` (alpha = 2 k for
    gamma mixing, ``2 |rho|`` for inverse-gamma mixing: ``validation/judge/moment_existence.py``). If the
    likelihood decays in every direction all moments exist. If the data are separable, the
    posterior of the scale along a separating direction with m features keeps the tail
    r^-(1 + m alpha), so E|beta|^s is finite iff s < m_min alpha, where m_min is the fewest
    features a separating direction needs; ``moment_existence.separating_support_bounds`` brackets
    it. Horii's synthetic design (100 x 100) is separable: with the default k = 1 both
    moments exist; with the paper's k = 1e-6, m_min alpha <= 100 * 2e-6, so beta has no
    posterior mean.
    """
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


def classifier_design(X, y01, engine: str, options: dict[str, Any]):
    """The classifier's design: linear, as Horii's model is, with a bias column in front
    (under the same prior), which is what :func:`prepare` gives every data set but Horii's
    intercept-free synthetic one - a classifier does not know its data are centred. The VB
    runs at the hyper-prior the options give (k, theta, rho; each None keeps the default
    proper hyper-prior's 1, gamma mixing - the spec :func:`prepare` makes without
    ``--param``) and keeps every column (the hyper-prior is fixed: nothing is selected)."""
    hyper = ("k", "theta", "rho")
    check_basis("gig-logistic (a linear model)", options, ("linear",))
    given = {name: options[name] for name in hyper if options.get(name) is not None}
    return WithBias(LinearBasis.fit(X)), {"spec": GIGLogistic(parameterization=GIG_REFERENCE_PARAMETERIZATION, **given)}


#: sweeps the estimate counts: a fit that settles (a1a and w1a took 444 and 468,
#: benchmarks/results/gig_vb_costs.json); on separable data - the classifier benchmark's,
#: 1000 features and at most 2000 points - the VB creeps to its 5000-sweep cap, which the
#: plan states beside the estimate
TYPICAL_ITERATIONS = 500
#: the engine's cap
MAX_ITERATIONS = 5000
#: cost model: seconds = fixed + coef * (flops of the sweeps' dense Gaussian updates) / 1e9,
#: constants fitted to the classifier's fits of benchmarks/classifier_cost.py at their
#: actual sweep counts (fit_cost.REFERENCE_MACHINE)
COSTS = {"vb": CostModel(fixed=20.0, coef=0.066, factor=4.0, compile=4.0)}


def classifier_plan(engine: str, n_samples: int, n_features: int, basis, fit_kwargs, options) -> FitPlan:
    """Every column in one dense Gaussian update per sweep, and the M x M posterior
    covariance; a loop compiled whole, so no progress lines."""
    m = int(basis.n_basis)
    return dense_update_plan(
        COSTS, "vb", n_samples, m, typical=TYPICAL_ITERATIONS, cap=MAX_ITERATIONS, covariance=True,
        path=lambda form: (f"Horii's mean-field VB on all {m} columns (nothing is selected): a dense Gaussian "
                           f"update, {form} per sweep, until the ELBO settles (at most {MAX_ITERATIONS} sweeps)"),
        advice=("every column stays in the model and each sweep factorizes a min(N, M)-square matrix: fewer "
                "features or a subsample of the rows"))


def sbc_spec():
    """SBC draws from the default proper hyper-prior (k = theta = 1, rho = 1, gamma
    mixing); the paper's k = theta = 1e-6 is nearly improper (nearly 1/h), so it has no SBC."""
    return GIGLogistic(), {}


RECORD = ModelRecord(
    name="gig-logistic",
    title="gig-logistic",
    summary="GIG-hierarchical logistic regression with a Gamma hyper-prior (Horii)",
    spec_class=GIGLogistic,
    prepare=prepare,
    params=("k", "theta", "rho", "bias"),
    # the spec's own checks (models/gig_logistic.py) and the protocol's bias switch
    param_domains={"k": positive("the Gamma hyper-prior's shape"),
                   "theta": positive("the Gamma hyper-prior's rate"),
                   "rho": nonzero("the GIG index: > 0 Gamma mixing, < 0 inverse-gamma"),
                   "bias": one_of(0, 1, why="1: a bias column in front")},
    selection="k, theta, rho as given",
    default_data="horii_synthetic",
    # Horii's synthetic inputs are already N(0, 1) and its beta* is on their scale, and
    # centring a 100 x 100 design drops its rank to 99 (a direction along which the
    # likelihood is exactly flat); a1a and w1a are binary features
    raw_inputs=True,
    engines=(
        EngineEntry(
            "vb", "gaussian",
            "Horii's mean-field VB (Algorithm 1): Jaakkola-Jordan bound, q(beta) q(tau) q(a), "
            "a-update as a quotient",
            "gig_vb:fit", "gig_vb:fit_end_to_end",
        ),
        auto_laplace_engine(),
        *svi_engines(),
        *pathfinder_engines(),
    ),
    default_engines=("vb", "auto-laplace"),
    classifier_engine="vb",
    # PG-Gibbs first: on Horii's synthetic design at k = 1, NUTS on the marginal form at
    # target acceptance 0.95 keeps 5 divergences in 4 x 1000 (no form tried had none), and
    # its failed run took 50-80 s before PG-Gibbs could start. PG-Gibbs mixes slowly on these
    # separable data along the overall scale of beta, which its scale move (step 4 of
    # validation/references/pg_gibbs.py) moves in one draw: 4 x 4000 sweeps reached R-hat 1.0098 and a
    # bulk ESS of 519 (without the move 4 x 10000 were needed), so it starts with 2000 and
    # doubles from where the chains are (cap 4 x 16000). Its medians and sds (without the
    # move, 4 x 10000) agreed with the uncertified NUTS run (largest |z| 2.2 and 2.8 over 100
    # coefficients). NUTS follows for data where PG-Gibbs does not certify.
    references=(
        {"sampler": "pg-gibbs", "num_warmup": 1000, "num_samples": 2000, "max_doublings": 3},
        {"sampler": "nuts", "target_accept": 0.95},
    ),
    samplers=(PG_GIBBS,),
    moments=moments,
    classifier=classifier_design,
    classifier_plan=classifier_plan,
    classifier_params=(
        ClassifierParam("k", "shape of the Gamma hyper-prior on each a_i (None: 1, the default proper "
                             "hyper-prior; Horii's experiments use 1e-6, nearly improper)", positive_number),
        ClassifierParam("theta", "rate of the Gamma hyper-prior on each a_i (None: 1)", positive_number),
        ClassifierParam("rho", "the GIG index, > 0 with its gamma mixing (None: 1)", finite_number),
    ),
    defects=(
        Defect("printed a-update", "Horii's VB with Algorithm 1's printed product a-update",
               config_defect("zoo.inference.gig_vb:GIGVBConfig", a_update="printed"), engines=("vb",)),
    ),
    sbc_spec=sbc_spec,
)
