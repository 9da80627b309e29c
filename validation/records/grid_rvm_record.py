"""gridRVM (Kropotov, Vetrov, Wolf & Hassner): its comparison protocol and record.

The model is the p-grid; the s-grid and the plain RVM are its variants (same data, same
hyper-prior constants, another prior on the weights), each with its own reference, so
that every prior's VB and Laplace are judged against their own posterior.

The design is a table:

* ``digits_even_odd`` (the default): the 8 x 8 image itself, pixel rows x pixel columns
  (raw intensities in [0, 1]; the paper's model has no bias term and none is added);
* any other data set: per-dimension RBFs exp(-delta (x_i - c_j,i)^2) on the training
  points as centres, an (input dimension x centre) table (``models/basis.py``), on the
  raw inputs, optionally with ``noise`` N(0, 1) features appended (the paper's ESL
  experiment).

Nothing is selected: the hyper-prior is fixed.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...data import noise_features
from ...inference.contracts import EngineEntry
from ...models.basis import LinearBasis, PerDimensionRBFBasis, RBFBasis
from ...models.grid_rvm import GridRVM, check_table_shape
from ..judge.defects import Defect, config_defect
from ..judge.moment_existence import flat_support
from ..references.grid_gibbs import GRID_GIBBS
from .fit_cost import FLOAT64, CostModel, FitPlan, estimate, gaussian_block_flops, size_text
from .grid_relevance import comparison_figures
from .model_record import ClassifierParam, ModelRecord, positive, positive_number, whole
from .protocol import Prepared, auto_laplace_engine, pathfinder_engines, svi_engines, check_basis

#: data sets whose inputs are already a table: name -> (rows, columns)
TABLE_DATA = {"digits_even_odd": (8, 8)}
#: the paper's RBF parameter exp(-delta r^2)
PAPER_DELTA = 5.55
#: the prior variants every engine family is also run on
VARIANTS = ("s-grid", "rvm")
#: the most noise features --param noise appends: the per-dimension table grows a row of
#: n_train weights per feature, and at 1000 rows (200k weights on the ESL mixture) no
#: reference sampler certifies it in any sane time; the paper goes to 30
MAX_NOISE = 1000


def _nonnegative_int(params, name, default=0) -> int:
    value = float(params.get(name, default))
    if value < 0 or value != int(value):
        raise ValueError(f"{name} must be a non-negative integer, got {value:g}")
    return int(value)


def prepare(split, params: dict[str, float], *, progress=None) -> Prepared:
    """gridRVM on one split.

    params (all optional): ``a0``, ``b0`` (Gamma shape and rate of each row precision),
    ``c0``, ``d0`` (of each column precision); default 2 each (proper; the paper's
    1e-6 constants with --param). For data that are not a table: ``delta`` (the per-
    dimension RBF parameter, default the paper's 5.55) and ``noise`` (N(0, 1) features
    appended to the inputs, default 0).
    """
    hyper_prior = {k: float(params.get(k, 2.0)) for k in ("a0", "b0", "c0", "d0")}
    X, X_test = split.X_train, split.X_test
    if split.name in TABLE_DATA:
        extra = sorted({"delta", "noise"} & set(params))
        if extra:
            raise ValueError(f"{split.name} is a table already: {', '.join(extra)} apply to the per-dimension "
                             "RBF table of other data sets")
        shape = TABLE_DATA[split.name]
        basis = LinearBasis.fit(X)
        basis_text = f"the {shape[0]} x {shape[1]} image itself: pixel rows x pixel columns, intensities in [0, 1]"
        hyper = {"table_rows": shape[0], "table_columns": shape[1]}
    else:
        delta = float(params.get("delta", PAPER_DELTA))
        noise = _nonnegative_int(params, "noise")
        if noise:
            # noise belongs to the data: train and test rows from the same columns
            # (zoo.data.noise_features, seeded by the split)
            Z = noise_features(split.split, noise, X.shape[0] + X_test.shape[0])
            X, X_test = np.hstack([X, Z[:X.shape[0]]]), np.hstack([X_test, Z[X.shape[0]:]])
        basis = PerDimensionRBFBasis.fit(X, delta)
        shape = basis.table_shape
        basis_text = (f"per-dimension RBFs exp(-{delta:g} (x_i - c_j,i)^2) on the {shape[1]} training points: a "
                      f"{shape[0]} (input dimension) x {shape[1]} (centre) table"
                      + (f"; {noise} N(0, 1) noise features appended" if noise else ""))
        hyper = {"delta": delta, "noise": noise, "table_rows": shape[0], "table_columns": shape[1]}
    spec = GridRVM(shape, "p-grid", **hyper_prior)
    given = bool({"a0", "b0", "c0", "d0"} & set(params))
    hyper |= hyper_prior | {"n_basis": int(basis.n_basis)}
    return Prepared(
        spec=spec,
        Phi_train=basis.transform(X),
        Phi_test=basis.transform(X_test),
        y_train=split.y_train,
        y_test=split.y_test,
        hyper=hyper,
        selection={
            "prior": f"p-grid: w_ij ~ N(0, 1 / (alpha_i beta_j)), alpha_i ~ Gamma({spec.a0:g}, rate {spec.b0:g}), "
                     f"beta_j ~ Gamma({spec.c0:g}, rate {spec.d0:g})"
                     + ("" if given else " (default: proper; the paper's vague 1e-6 constants with --param)"),
            "variants": "s-grid (precision alpha_i + beta_j) and rvm (one Gamma precision per weight), same constants",
            "basis": basis_text + "; no bias term (the paper's model has none)",
            "parameterization": "NUTS and the generic Laplace run on the non-centred form w = z / sqrt(precision) "
                                "(models/grid_rvm.py)",
        },
        variants={v: spec.with_params(prior=v) for v in VARIANTS},
        # the report draws decision boundaries over the split's own inputs; with noise
        # features the basis needs inputs the plane does not have, so there is none to draw
        basis=basis if not ("noise" in hyper and hyper["noise"]) else None,
    )


def tail_exponents(spec: GridRVM, flat: np.ndarray) -> np.ndarray:
    """e per weight with ``P(|w| > r) ~ r^-e`` in the posterior, for the weights in the flat
    support ``flat`` (a boolean vector, ``moment_existence.flat_support``); inf elsewhere.

    The argument (DERIVATIONS.md §5.6; a sketch, as for GGSM and GIG): a weight grows
    without bound only when its precision goes to 0; near 0 the posterior of a row
    precision alpha_i behaves like alpha^(a0 - 1 + (M2 - m_i)/2), where m_i of the row's
    M2 weights lie in the flat support (each other weight, held by the likelihood,
    brings its factor alpha^(1/2); a flat one can grow with the scale and brings none).
    A weight of scale alpha^(-1/2) then has the tail r^-(2 a0 + M2 - m_i). The p-grid's
    precision alpha_i beta_j is small when either factor is (the smaller exponent of the
    row's and the column's); the s-grid's alpha_i + beta_j only when both are (their
    sum); the rvm's alpha_k is the weight's own (2 a0).
    """
    flat = np.asarray(flat, bool)
    m1, m2 = spec.shape
    table = flat.reshape(spec.shape)
    row = 2.0 * spec.a0 + m2 - table.sum(axis=1)[:, None]
    col = 2.0 * spec.c0 + m1 - table.sum(axis=0)[None, :]
    if spec.prior == "rvm":
        e = np.full(spec.shape, 2.0 * spec.a0)
    elif spec.prior == "p-grid":
        e = np.minimum(row, col) * np.ones(spec.shape)
    else:
        e = (row + col) * np.ones(spec.shape)
    return np.where(table, e, np.inf).ravel()


def moments(spec: GridRVM, Phi: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    """Which posterior moments of w exist on these data: None (all do) when the likelihood
    decays in every direction; otherwise E|w|^s is finite iff s < e for the smallest tail
    exponent e of a weight in the flat support (:func:`tail_exponents`)."""

    flat = flat_support(Phi, y)
    if not flat.any():
        return None
    e = tail_exponents(spec, flat)
    worst = float(np.min(e))
    k = int(np.argmin(e))
    mean, sd = 1.0 < worst, 2.0 < worst
    word = {True: "exists", False: "does not exist"}
    return {"mean_exists": mean, "sd_exists": sd, "tail_exponent": worst, "flat_weights": int(flat.sum()),
            "reason": f"{int(flat.sum())} of {flat.size} weights lie in directions the likelihood does not penalize "
                      f"(all-zero or single-class columns, separation or a null space); the heaviest posterior tail "
                      f"among them is |w|^-(1 + {worst:g}) (weight row {k // spec.shape[1]}, column "
                      f"{k % spec.shape[1]}, {spec.prior} prior), so the posterior mean {word[mean]} and the sd "
                      f"{word[sd]}"}


def classifier_design(X, y01, engine: str, options: dict[str, Any]):
    """The classifier's table and the spec its VB starts from (the default proper prior;
    the engine's name picks the prior: vb p-grid, vb-s-grid, vb-rvm):

    * basis="table": X is the table itself, ``table_shape`` = (rows, columns);
    * basis="per-dimension-rbf": the (input dimension x training point) table of
      exp(-delta (x_i - c_j,i)^2), delta default the paper's 5.55;
    * basis="rbf" / "linear": an RBF on the training points (``width``) or the raw inputs,
      a one-column table: the grids reduce to (nearly) the RVM there, as in the paper's
      first two experiments.
    """
    check_basis("grid-rvm", options, ("table", "per-dimension-rbf", "rbf", "linear"))
    basis_name = options["basis"]
    if (options["table_shape"] is not None) != (basis_name == "table"):
        raise ValueError("grid-rvm: table_shape goes with basis='table' (the features are the table), and only there")
    if options["delta"] is not None and basis_name != "per-dimension-rbf":
        raise ValueError("grid-rvm: delta is the per-dimension RBF's parameter; use basis='per-dimension-rbf'")
    if basis_name == "table":
        shape = check_table_shape(options["table_shape"])
        if shape[0] * shape[1] != X.shape[1]:
            raise ValueError(f"table_shape {shape} has {shape[0] * shape[1]} cells but X has {X.shape[1]} features: "
                             "the column count must be rows x columns")
        basis = LinearBasis.fit(X)
    elif basis_name == "per-dimension-rbf":
        delta = PAPER_DELTA if options["delta"] is None else float(options["delta"])
        basis = PerDimensionRBFBasis.fit(X, delta)
        shape = basis.table_shape
    elif basis_name == "rbf":
        basis = RBFBasis.fit(X, options["width"])
        shape = (basis.n_basis, 1)
    else:
        basis = LinearBasis.fit(X)
        shape = (basis.n_basis, 1)
    return basis, {"spec": GridRVM(shape, "p-grid")}


#: sweeps a VB fit of the classifier typically takes (the benchmark's RBF tables took
#: about 100-150; a linear table on more features than rows took thousands, which the
#: factor does not cover: the plan says the cap's time beside the estimate)
TYPICAL_SWEEPS = 150
#: the VB's sweep cap (GridVBConfig.max_iter)
MAX_SWEEPS = 5000
#: cost model: seconds = fixed + coef * (flops of the sweeps) / 1e9, constants fitted to the
#: classifier's fits of benchmarks/classifier_cost.py at their actual sweep counts
#: (fit_cost.REFERENCE_MACHINE)
COSTS = {"vb": CostModel(fixed=0.9, coef=0.145, factor=4.0, compile=5.2)}


def classifier_plan(engine: str, n_samples: int, n_features: int, basis, fit_kwargs, options) -> FitPlan:
    """Every weight of the table stays in the model: each sweep is one dense Gaussian
    update of all M = rows x columns weights (the M x M primal, or the N x N Woodbury form
    when M > N), and the returned posterior holds the full M x M covariance."""
    rows, cols = fit_kwargs["spec"].shape
    n, m = int(n_samples), rows * cols
    woodbury = m > n
    sweep = gaussian_block_flops(n, m)
    # the design, the iteration's square matrices (Sigma or its Woodbury core, a factor
    # and a product) and the posterior's M x M covariance built once at the end
    memory = n * m * FLOAT64 + 3 * min(n, m) ** 2 * FLOAT64 + m * m * FLOAT64
    form = (f"the N x N Woodbury form (M = {m} > N), O(N^2 M + N^3) per sweep" if woodbury
            else "the M x M primal form, O(N M^2 + M^3) per sweep")
    plan = estimate(
        COSTS, "vb", TYPICAL_SWEEPS * sweep, candidates=m,
        path=(f"mean-field VB on the {rows} x {cols} table: all {m} weights kept (nothing is selected), q(w) by "
              f"{form}, until the ELBO settles (typically ~{TYPICAL_SWEEPS} sweeps, at most {MAX_SWEEPS}); the "
              f"{m} x {m} posterior covariance ({size_text(m * m * FLOAT64)}) once at the end"),
        memory_bytes=memory,
        advice=("every weight stays in the model, so the cost grows with the table's cells M as N M^2 (basis='rbf' "
                "has M = N: N^3): subsample the rows, or choose a smaller table (basis='linear': M = features; a "
                "per-dimension RBF table has features x N cells)"))
    return replace(plan, cap_seconds=COSTS["vb"].seconds(MAX_SWEEPS * sweep), iterations=TYPICAL_SWEEPS)


def sbc_spec():
    """SBC draws from the default proper hyper-prior (a0 = b0 = c0 = d0 = 2) on a small
    4 x 3 table; the paper's 1e-6 constants are nearly improper, so they have no SBC."""
    spec = GridRVM((4, 3), "p-grid")
    return spec, {v: spec.with_params(prior=v) for v in VARIANTS}


def _vb_entry(prior: str | None) -> EngineEntry:
    label = prior or "p-grid"
    return EngineEntry(
        "vb" if prior is None else f"vb-{prior}", "gaussian",
        f"Kropotov et al.'s mean-field VB on the {label} prior: Jaakkola-Jordan bound, q(w) q(alpha) q(beta)"
        + (", the s-grid's log-sum bound (7)" if prior == "s-grid" else "")
        + ("; Bishop & Tipping's VRVM" if prior == "rvm" else ""),
        "grid_vb:fit", "grid_vb:fit_end_to_end",
        options=() if prior is None else (("prior", prior),), variant=prior,
        other_model=None if prior is None else f"the {prior} prior",
    )


def _laplace_entry(prior: str | None) -> EngineEntry:
    if prior is None:
        return auto_laplace_engine()
    base = auto_laplace_engine(f"auto-laplace-{prior}")
    return EngineEntry(base.name, base.kind, base.description + f" (on the {prior} prior)", base.fixed,
                       options=base.options + (("spec_params", (("prior", prior),)),), variant=prior,
                       other_model=f"the {prior} prior", generic=True)


RECORD = ModelRecord(
    name="grid-rvm",
    title="grid-rvm",
    summary="gridRVM: logistic regression on tables with row and column relevance (Kropotov et al.)",
    spec_class=GridRVM,
    prepare=prepare,
    params=("a0", "b0", "c0", "d0", "delta", "noise"),
    # the spec's own checks (models/grid_rvm.py) and the protocol's; the noise cap keeps the
    # per-dimension table (inputs + noise rows x training-point columns) one that engines
    # and the reference can fit (the paper goes to 30)
    param_domains={**{k: positive("a Gamma hyper-prior constant") for k in ("a0", "b0", "c0", "d0")},
                   "delta": positive("the per-dimension RBF parameter exp(-delta r^2)"),
                   "noise": whole(0, MAX_NOISE, why="N(0, 1) noise features appended")},
    selection="a0, b0, c0, d0 as given",
    default_data="digits_even_odd",
    # the digits are a picture (intensities in [0, 1]) and the paper's RBF parameter is
    # for the ESL mixture's raw coordinates
    raw_inputs=True,
    engines=tuple(_vb_entry(p) for p in (None, *VARIANTS)) + tuple(_laplace_entry(p) for p in (None, *VARIANTS))
    + svi_engines() + pathfinder_engines(),
    default_engines=("vb", "vb-s-grid", "vb-rvm", "auto-laplace", "auto-laplace-s-grid", "auto-laplace-rvm"),
    classifier_engine="vb",
    # On the digits default (500 training images), NUTS on the non-centred form certifies
    # each prior in 8-25 s (R-hat <= 1.004, bulk ESS >= 2600 of 4 x 1000 draws; a run can
    # keep a rare divergence, 1 in 4000, and then the Gibbs sampler takes over); the centred
    # form keeps divergences. With that ESS per draw 4 x 500 draws are enough, so NUTS
    # starts there and doubles from where the chains are (cap 4 x 4000, as before).
    # Polya-Gamma Gibbs (with an exact move along the p-grid's scale ridge) follows it for
    # where NUTS cannot certify (vague hyper-priors): bulk ESS 865 of 4 x 2500 sweeps on the
    # default, so it starts with 1250 (cap 4 x 10000, as before).
    references=({"sampler": "nuts", "num_samples": 500, "max_doublings": 3},
                {"sampler": "grid-gibbs", "num_warmup": 1000, "num_samples": 1250, "max_doublings": 3}),
    samplers=(GRID_GIBBS,),
    moments=moments,
    classifier=classifier_design,
    classifier_plan=classifier_plan,
    classifier_params=(
        ClassifierParam("table_shape", "with basis='table': rows and columns of X's features (row-major; "
                                       "rows x columns = X's width)"),
        ClassifierParam("delta", "with basis='per-dimension-rbf': the RBF's rate (None: the paper's 5.55)",
                        positive_number),
    ),
    defects=(
        # the classic slip of a hand-derived VB: E[w_ij^2] taken as mu_ij^2 in the precision
        # updates (eq. 6 forgotten), which shrinks the precisions' rates and over-prunes
        Defect("variance forgotten", "gridRVM's VB with E[w^2] = mu^2 in the q(alpha), q(beta) updates",
               config_defect("zoo.inference.grid_vb:GridVBConfig", second_moment="mean-only"),
               engines=("vb", "vb-s-grid", "vb-rvm")),
    ),
    sbc_spec=sbc_spec,
    figures=comparison_figures,
)
