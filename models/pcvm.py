"""PCVM: the probabilistic classification vector machine (Chen, Tino & Yao 2009, 2014;
DERIVATIONS.md §1.1).

    p(y_n = 1 | w, b) = Phi( sum_i w_i phi_i(x_n) + b ),   phi_i(x) = y_i k(x, x_i)
    w_i ~ N(0, 1/alpha_i) truncated to w_i >= 0            (density 2 N(w_i | 0, 1/alpha_i))
    b   ~ N(0, 1/alpha_bias)

Each basis column is multiplied by the label of its own training point
(:func:`zoo.models.basis.pcvm_basis`), so a positive weight always pulls towards that
point's class: this is what the truncated prior encodes.

``surrogate=True`` is the model the EPCVM paper's Laplace derivation actually works on:
the probit link replaced by the scaled logistic sigma(sqrt(8/pi) f) (equal slope at 0)
and the indicator 1[w_i >= 0] by the smooth sigma(3 w_i). NUTS can run on both, so the
Laplace engine's error can be split into "approximation" and "model change".

NUTS parameterization: the truncated weights live on (0, inf) and NumPyro samples them
through a log transform; the prior scales are fixed hyper-parameters (alpha is frozen by
the selection step), so there is no funnel to un-centre.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid, sigmoid
from jax.scipy.special import ndtr

from .checks import check_positive
from .base import Site
from .distributions import ProbitBernoulli

#: slope-matching constant of the EPCVM Laplace surrogate: sigma(lambda f) ~ Phi(f)
SURROGATE_SLOPE = math.sqrt(8.0 / math.pi)
#: sharpness of the smooth indicator sigma(beta w) that replaces 1[w >= 0] (EPCVM Fig. 1)
INDICATOR_SHARPNESS = 3.0


@dataclass(frozen=True, eq=False)
class PCVM:
    """PCVM spec with frozen hyper-parameters.

    alpha: prior precision of each weight; a scalar (shared) or one value per basis column.
    alpha_bias: prior precision of the bias.
    surrogate: use the EPCVM Laplace surrogate (scaled logistic, smooth indicator).
    """

    alpha: Any = 1.0
    alpha_bias: float = 1e-2
    surrogate: bool = False
    surrogate_slope: float = SURROGATE_SLOPE
    indicator_sharpness: float = INDICATOR_SHARPNESS
    name: str = field(default="pcvm", init=False)

    def __post_init__(self):
        alpha = np.asarray(self.alpha, dtype=float)
        check_positive(alpha, "alpha")
        check_positive(self.alpha_bias, "alpha_bias")
        check_positive(self.surrogate_slope, "surrogate_slope")
        check_positive(self.indicator_sharpness, "indicator_sharpness")
        object.__setattr__(self, "alpha", alpha)

    # -- the contract -------------------------------------------------------------
    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """The bias ``b`` and the weights ``w`` (one per basis column): ``w`` is "nonnegative"
        under the truncated prior, "real" under the surrogate."""
        support = "real" if self.surrogate else "nonnegative"
        return (Site("b", ()), Site("w", (n_basis,), support, ("basis",)))

    def alpha_vector(self, n_basis: int) -> jnp.ndarray:
        """The weights' prior precisions as a vector of length ``n_basis`` (a scalar ``alpha``
        is repeated); ValueError if a vector ``alpha`` has another length."""
        if self.alpha.ndim == 0:
            return jnp.full((n_basis,), float(self.alpha))
        if self.alpha.shape != (n_basis,):
            raise ValueError(
                f"alpha has {self.alpha.shape[0]} entries but the design matrix has "
                f"{n_basis} basis columns"
            )
        return jnp.asarray(self.alpha)

    def model(self, Phi, y=None):
        """The NumPyro model: truncated-normal weights and a probit likelihood, or with
        ``surrogate`` the normal weights, smooth indicator and scaled logistic link."""
        Phi = jnp.asarray(Phi)
        n_basis = Phi.shape[1]
        w_scale = 1.0 / jnp.sqrt(self.alpha_vector(n_basis))
        b = numpyro.sample("b", dist.Normal(0.0, 1.0 / math.sqrt(float(self.alpha_bias))))
        if self.surrogate:
            w = numpyro.sample("w", dist.Normal(0.0, w_scale).to_event(1))
            # smooth stand-in for 1[w >= 0]; its normalizer is constant in w
            numpyro.factor("w_indicator", jnp.sum(log_sigmoid(self.indicator_sharpness * w)))
            f = Phi @ w + b
            numpyro.sample("y", dist.Bernoulli(logits=self.surrogate_slope * f), obs=y)
        else:
            w = numpyro.sample(
                "w", dist.TruncatedNormal(0.0, w_scale, low=0.0).to_event(1)
            )
            f = Phi @ w + b
            numpyro.sample("y", ProbitBernoulli(f), obs=y)

    def linear_predictor(self, params, Phi):
        """``f = Phi @ w + b``, shape (..., n), for site values with any batch dims in front."""
        w = jnp.asarray(params["w"])
        b = jnp.asarray(params["b"])
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), w) + b[..., None]

    def prob(self, f):
        """``p(y = 1 | f)``: ``Phi(f)``, or ``sigma(surrogate_slope * f)`` under the surrogate."""
        if self.surrogate:
            return sigmoid(self.surrogate_slope * f)
        return ndtr(f)

    def gaussian_prob(self, mean_f, var_f):
        """E[p(y=1|f)] for f ~ N(mean_f, var_f): exact for the probit link, MacKay's
        approximation for the scaled logistic (exact as var_f -> 0)."""
        if self.surrogate:
            lam = self.surrogate_slope
            return sigmoid(lam * mean_f / jnp.sqrt(1.0 + math.pi * lam**2 * var_f / 8.0))
        return ndtr(mean_f / jnp.sqrt(1.0 + var_f))

    # -- helpers ------------------------------------------------------------------
    def flat_design(self, Phi):
        """A with f = A @ theta for the flat parameter theta = [b, w]."""
        Phi = jnp.asarray(Phi)
        return jnp.concatenate([jnp.ones((Phi.shape[0], 1)), Phi], axis=1)

    def with_params(self, **overrides) -> "PCVM":
        """A copy with the given hyper-parameters replaced (checked as in the constructor)."""
        return replace(self, **overrides)

    def constant_data(self, n_basis: int) -> dict[str, np.ndarray]:
        """Hyper-parameters as arrays, for the constant_data group of InferenceData."""
        return {"alpha": np.asarray(self.alpha_vector(n_basis)), "alpha_bias": np.asarray(self.alpha_bias)}

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict, for hashes and reports."""
        return {
            "model": self.name,
            "alpha": self.alpha.tolist(),
            "alpha_bias": float(self.alpha_bias),
            "surrogate": bool(self.surrogate),
            "surrogate_slope": float(self.surrogate_slope),
            "indicator_sharpness": float(self.indicator_sharpness),
        }
