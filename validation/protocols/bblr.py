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

from typing import Any

import numpy as np

from ...data import flipped_labels
from ...inference.contracts import EngineEntry
from ...models.basis import LinearBasis, WithBias
from ...models.bblr import BBLR, DEFAULT_GAMMA
from ..bblr_report import comparison_figures
from ..model_record import ModelRecord
from ..parallel_tempering import PARALLEL_TEMPERING
from . import Prepared, auto_laplace_engine, reject_options

#: the compare default's prior precision (DERIVATIONS.md §6.2: only gamma^2 / lam matters
#: for the linear model; gamma's default is the model module's)
DEFAULT_LAM = 1.0


def prepare(split, params: dict[str, float], *, progress=None) -> Prepared:
    """BBLR on one split.

    params (all optional): ``gamma`` (default 4), ``lam`` (the Gaussian prior's precision,
    default 1), ``config`` (2: a, b from the class counts, the default; 1: from the weak
    Beta(1, 1) prior with n = 100), ``a`` and ``b`` (both, instead of ``config``), ``flip``
    (a fraction of training labels flipped, the robustness case; default 0).
    """
    flip = float(params.get("flip", 0.0))
    y, flipped = flipped_labels(split.y_train, flip, split.split) if flip else (split.y_train, np.zeros(0, int))
    gamma, lam = float(params.get("gamma", DEFAULT_GAMMA)), float(params.get("lam", DEFAULT_LAM))
    given_ab = {"a", "b"} & set(params)
    if given_ab and given_ab != {"a", "b"}:
        raise ValueError("give both a and b, or neither (then config chooses them)")
    if given_ab and "config" in params:
        raise ValueError("give either a and b or config, not both")
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
    basis = WithBias(LinearBasis.fit(split.X_train))
    hyper = {"a": spec.a, "b": spec.b, "c": spec.c, "gamma": spec.gamma, "lam": spec.lam,
             "gamma2_over_lam": spec.gamma ** 2 / spec.lam, "n_basis": int(basis.n_basis)}
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
            "gamma, lam": f"gamma = {spec.gamma:g}, lam = {spec.lam:g} "
                          + ("(given)" if {"gamma", "lam"} & set(params) else "(defaults)")
                          + f"; the posterior depends on gamma^2 / lam = {spec.gamma ** 2 / spec.lam:g} "
                            "(DERIVATIONS.md §6.2)",
            "basis": "linear with a bias column, standardized inputs",
            **({"label noise": f"{len(flipped)} of {len(y)} training labels flipped (fraction {flip:g}, drawn "
                               f"uniformly with the split's seed, zoo.data.flipped_labels); test labels clean"}
               if flip else {}),
        },
        basis=basis,
    )


def classifier_design(X, y01, engine: str, options: dict[str, Any]):
    """The classifier's design: linear with a bias column (the kernel version is not yet
    in the zoo); ``gamma`` as given (None: the default 4); lam by SLAM's validation inside
    the end-to-end fit."""
    reject_options("bblr", options, ("gamma",), ("linear",))
    return WithBias(LinearBasis.fit(X)), ({} if options["gamma"] is None else {"gamma": float(options["gamma"])})


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
    params=("gamma", "lam", "config", "a", "b", "flip"),
    selection="a, b from the class counts (BBLR2); gamma, lam as given",
    default_data="pima",
    engines=(
        EngineEntry("sla", "point",
                    "Nguyen & Sanner's smoothed loss approximation as Hasan & Pal run it: gamma annealed "
                    "(x10 from 2), gradient descent and coordinate probes, from the L2-LR solution",
                    "sla:fit", "sla:fit_end_to_end"),
        EngineEntry("laplace", "gaussian", "Gaussian at SLA's mode (Newton-polished), Hessian by autodiff",
                    "sla:fit_laplace", "sla:fit_laplace_end_to_end"),
        auto_laplace_engine("auto-laplace"),
    ),
    default_engines=("sla", "laplace", "auto-laplace"),
    # NUTS first; where its chains settle in different modes (R-hat) or diverge, parallel
    # tempering, whose hottest copy samples the prior and carries states across (DERIVATIONS.md §6.7)
    references=({"sampler": "nuts"}, {"sampler": "parallel-tempering"}),
    samplers=(PARALLEL_TEMPERING,),
    classifier=classifier_design,
    sbc_spec=sbc_spec,
    figures=comparison_figures,
)
