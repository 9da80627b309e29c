"""gridRVM: logistic regression on tabular features with row and column relevance
(Kropotov, Vetrov, Wolf & Hassner; DERIVATIONS.md §5).

Each object is described by a table of M1 x M2 features phi_ij(x); the weights form the
same table, flattened row by row into the design's columns (column k = i M2 + j). With
labels y in {0, 1}:

    p(y_n = 1 | w) = sigmoid(phi(x_n)^T w)
    w_ij | alpha, beta ~ N(0, 1 / prec_ij)
    alpha_i ~ Gamma(a0, rate b0)    (one per row)
    beta_j  ~ Gamma(c0, rate d0)    (one per column)

and three priors, ``prior``:

* ``"p-grid"``: prec_ij = alpha_i beta_j (the paper's eq. 1);
* ``"s-grid"``: prec_ij = alpha_i + beta_j;
* ``"rvm"``: one precision per weight, alpha_k ~ Gamma(a0, b0), k = 1..M (Bishop &
  Tipping's variational RVM, the paper's baseline); the table shape only labels the
  weights, and there is no beta.

With M2 = 1 (a plain vector of features) the p-grid is the RVM with one extra common
scale beta_1 on every precision, and the s-grid the RVM with a common offset; pinning
beta at 1 (p-grid) or at 0 (s-grid) gives the RVM exactly (tested, here and in the VB).

Hyper-prior. The paper does not print a0, b0, c0, d0; the VRVM convention it builds on
is 1e-6 (nearly the improper 1/alpha), and :meth:`GridRVM.paper_prior` gives that. The
default here is a0 = b0 = c0 = d0 = 2 (each precision has mean 1 and sd 0.7), for the
reasons the GGSM and GIG models met and one of gridRVM's own: SBC needs a proper prior,
and a weight the likelihood does not bound (an all-zero pixel, a pixel lit in images of
one class only) keeps a prior tail ``|w|^-(1 + e)`` whose exponent e is set by the shapes
(DERIVATIONS.md §5.6): on the digits, shape 1 gives e = 2, so those weights would have a
posterior mean but no sd; shape 2 gives e = 4 and both.

The p-grid has a scale ridge: (alpha c, beta / c) gives the same precisions for every
c > 0, so only the Gamma priors pin c down (its conditional is a GIG: DERIVATIONS.md §5.5).

Parameterization (``parameterization``), the same posterior either way:

* ``"noncentred"`` (default, for NUTS): w = z / sqrt(prec) with z ~ N(0, 1); the sampled
  sites are alpha, beta, z. A weight the data say little about (an all-zero pixel) then
  does not form a funnel with its precision.
* ``"centred"``: w ~ N(0, 1 / sqrt(prec)) literally.

The measured sites are the weights w (``sites``); alpha and beta are reported beside them
(the relevances) but every engine's distance to the reference is measured on w.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import sigmoid
from jax.scipy.special import gammaln
from scipy.special import expit

from .base import Site
from .checks import check_positive

PRIORS = ("p-grid", "s-grid", "rvm")
PARAMETERIZATIONS = ("noncentred", "centred")
#: the VRVM convention for the constants the paper leaves unstated
PAPER_CONSTANT = 1e-6


def check_table_shape(shape) -> tuple[int, int]:
    """(M1, M2) as positive ints; ValueError naming the problem otherwise."""
    try:
        values = [float(v) for v in shape]
    except (TypeError, ValueError):
        values = []
    if len(values) != 2 or not all(np.isfinite(v) and v == int(v) for v in values):
        raise ValueError(f"table shape must be two integers (rows, columns), got {shape!r}")
    m1, m2 = int(values[0]), int(values[1])
    if m1 < 1 or m2 < 1:
        raise ValueError(f"table shape {tuple(shape)!r} has no {'rows' if m1 < 1 else 'columns'}: "
                         "a table needs at least one row and one column")
    return m1, m2


@dataclass(frozen=True, eq=False)
class GridRVM:
    """gridRVM spec.

    - shape: (M1, M2), the table's rows and columns; the design must have M1 * M2 columns
      in row-major order.
    - prior: "p-grid", "s-grid" or "rvm" (module docstring).
    - a0, b0: shape and rate of the Gamma prior on each row precision alpha_i (for "rvm",
      on each weight's precision).
    - c0, d0: shape and rate of the Gamma prior on each column precision beta_j (unused by
      "rvm").
    - parameterization: "noncentred" or "centred": how NUTS sees the weights.
    """

    shape: tuple[int, int]
    prior: str = "p-grid"
    a0: float = 2.0
    b0: float = 2.0
    c0: float = 2.0
    d0: float = 2.0
    parameterization: str = "noncentred"
    name: str = field(default="grid-rvm", init=False)

    def __post_init__(self):
        object.__setattr__(self, "shape", check_table_shape(self.shape))
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        if self.parameterization not in PARAMETERIZATIONS:
            raise ValueError(f"parameterization must be one of {PARAMETERIZATIONS}, got {self.parameterization!r}")
        for name in ("a0", "b0", "c0", "d0"):
            check_positive(getattr(self, name), name)
            object.__setattr__(self, name, float(getattr(self, name)))

    @classmethod
    def paper_prior(cls, shape, prior: str = "p-grid", **kwargs) -> "GridRVM":
        """a0 = b0 = c0 = d0 = 1e-6 (the VRVM convention; the paper prints none)."""
        c = PAPER_CONSTANT
        return cls(shape=shape, prior=prior, a0=c, b0=c, c0=c, d0=c, **kwargs)

    # -- shapes -------------------------------------------------------------------
    @property
    def n_weights(self) -> int:
        """The number of weights: the table's cells, M1 * M2."""
        return self.shape[0] * self.shape[1]

    @property
    def hyper_shapes(self) -> dict[str, tuple[int, ...]]:
        """The precision sites and their shapes: alpha per row and beta per column, or
        (rvm) alpha per weight."""
        if self.prior == "rvm":
            return {"alpha": (self.n_weights,)}
        return {"alpha": (self.shape[0],), "beta": (self.shape[1],)}

    def check_design_width(self, n_columns: int) -> None:
        """ValueError, naming both counts, unless a design of ``n_columns`` columns has one
        column per cell of the table."""
        if n_columns != self.n_weights:
            raise ValueError(
                f"the design has {n_columns} columns but the table is {self.shape[0]} rows x {self.shape[1]} "
                f"columns = {self.n_weights} features: the column count must be rows x columns")

    # -- the prior ----------------------------------------------------------------
    def precision(self, alpha, beta=None):
        """prec of every weight, flattened row by row: (..., M)."""
        alpha = jnp.asarray(alpha)
        if self.prior == "rvm":
            return alpha
        beta = jnp.asarray(beta)
        table = (alpha[..., :, None] * beta[..., None, :] if self.prior == "p-grid"
                 else alpha[..., :, None] + beta[..., None, :])
        return table.reshape(table.shape[:-2] + (self.n_weights,))

    def _hyper_sites(self):
        alpha = numpyro.sample("alpha", dist.Gamma(self.a0, self.b0).expand(list(self.hyper_shapes["alpha"]))
                               .to_event(1))
        if self.prior == "rvm":
            return alpha, None
        beta = numpyro.sample("beta", dist.Gamma(self.c0, self.d0).expand([self.shape[1]]).to_event(1))
        return alpha, beta

    # -- the contract -------------------------------------------------------------
    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """One measured site: the weights ``w``, one per cell of the table; ValueError
        (:meth:`check_design_width`) when ``n_basis`` is not M1 * M2."""
        self.check_design_width(n_basis)
        return (Site("w", (n_basis,), "real", ("basis",)),)

    def model(self, Phi, y=None):
        """The NumPyro model: Gamma precisions (per the ``prior``), weights in the spec's
        ``parameterization`` (a ``w`` site either way) and the logistic likelihood of
        ``f = Phi @ w``."""
        Phi = jnp.asarray(Phi)
        self.check_design_width(Phi.shape[1])
        alpha, beta = self._hyper_sites()
        # a Gamma(1e-6, .) draw underflows to exactly 0 in float64 (the paper's constants put
        # almost all prior mass there); the smallest normal float keeps w finite for such a
        # draw (NumPyro traces the model with one prior draw before NUTS starts) and changes
        # nothing anywhere a sampler moves (log alpha > -708)
        prec = jnp.maximum(self.precision(alpha, beta), jnp.finfo(jnp.float64).tiny)
        if self.parameterization == "centred":
            w = numpyro.sample("w", dist.Normal(0.0, jax.lax.rsqrt(prec)).to_event(1))
        else:
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([self.n_weights]).to_event(1))
            w = numpyro.deterministic("w", z * jax.lax.rsqrt(prec))
        numpyro.sample("y", dist.Bernoulli(logits=Phi @ w), obs=y)

    def linear_predictor(self, params, Phi):
        """``f = Phi @ w``, shape (..., n), for site values with any batch dims in front."""
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        """``p(y = 1 | f) = sigmoid(f)``."""
        return sigmoid(f)

    def gaussian_prob(self, mean_f, var_f):
        """E[sigmoid(f)] for f ~ N(mean_f, var_f) by MacKay's approximation, the paper's
        predictive: sigmoid(mean / sqrt(1 + pi var / 8)) (exact as var -> 0)."""
        return sigmoid(mean_f / jnp.sqrt(1.0 + jnp.pi * var_f / 8.0))

    @staticmethod
    def gaussian_prob_exact(mean_f, var_f):
        """E[sigmoid(f)] for f ~ N(mean_f, var_f), the paper's integral (3) itself: to
        measure what MacKay's approximation costs.

        The trapezoid rule in z = (f - mean) / sd on [-12, 12]: for an integrand analytic
        in a strip it converges geometrically, with an error near exp(-2 pi d / h) for a
        strip of half-width d (sigmoid's poles at f = +-i pi give d = pi / sd). The step
        h = min(0.1, 0.5 / sd) keeps that below 1e-15, and the Gaussian mass beyond 12 sd
        is 4e-33 (Gauss-Hermite, exact for polynomials, was 5e-6 off at var 25)."""
        mean_f, var_f = np.broadcast_arrays(np.asarray(mean_f, float), np.asarray(var_f, float))
        sd = np.sqrt(var_f)
        h = min(0.1, 0.5 / max(float(np.max(sd, initial=0.0)), 1e-12))
        z = np.arange(-12.0, 12.0 + h / 2, h)
        weights = h * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
        f = mean_f[..., None] + sd[..., None] * z
        return np.sum(expit(f) * weights, axis=-1)

    # -- densities ----------------------------------------------------------------
    def log_joint(self, params, Phi, y):
        """log p(w, alpha, beta, y) in the centred form (alpha, beta on their own scale,
        not log): the target of a mean-field approximation's importance weights.
        Batch dimensions in front of every site are allowed."""
        w, alpha = jnp.asarray(params["w"]), jnp.asarray(params["alpha"])
        beta = None if self.prior == "rvm" else jnp.asarray(params["beta"])
        prec = self.precision(alpha, beta)
        log_prior_w = jnp.sum(0.5 * jnp.log(prec) - 0.5 * prec * w * w, axis=-1) - 0.5 * self.n_weights * np.log(
            2.0 * np.pi)
        total = log_prior_w + jnp.sum(_log_gamma_pdf(alpha, self.a0, self.b0), axis=-1)
        if beta is not None:
            total = total + jnp.sum(_log_gamma_pdf(beta, self.c0, self.d0), axis=-1)
        f = jnp.einsum("nm,...m->...n", jnp.asarray(Phi), w)
        y = jnp.asarray(y)
        return total + jnp.sum(y * jax.nn.log_sigmoid(f) + (1.0 - y) * jax.nn.log_sigmoid(-f), axis=-1)

    # -- helpers ------------------------------------------------------------------
    def flat_design(self, Phi):
        """f = Phi @ w: the design of the flat parameter (w only)."""
        return jnp.asarray(Phi)

    def as_table(self, values) -> np.ndarray:
        """A flat per-weight vector (..., M) as the table (..., M1, M2)."""
        values = np.asarray(values)
        return values.reshape(values.shape[:-1] + self.shape)

    def with_params(self, **overrides) -> "GridRVM":
        """A copy with the given hyper-parameters replaced (checked as in the constructor)."""
        return replace(self, **overrides)

    def constant_data(self, n_basis: int) -> dict[str, Any]:
        """The table shape and the Gamma constants as arrays, for the constant_data group of
        InferenceData."""
        return {"table_shape": np.asarray(self.shape), "a0": np.asarray(self.a0), "b0": np.asarray(self.b0),
                "c0": np.asarray(self.c0), "d0": np.asarray(self.d0)}

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict, for hashes and reports."""
        # the parameterization changes how NUTS walks, so it is part of the reference's
        # identity (cache key), though not of the posterior
        return {"model": self.name, "prior": self.prior, "shape": list(self.shape), "a0": self.a0, "b0": self.b0,
                "c0": self.c0, "d0": self.d0, "parameterization": self.parameterization}


def _log_gamma_pdf(x, shape, rate):
    return shape * jnp.log(rate) - gammaln(shape) + (shape - 1.0) * jnp.log(x) - rate * x
