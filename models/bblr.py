"""Generalized Beta-Bernoulli logistic regression (BBLR; Hasan & Pal; DERIVATIONS.md §6).

    p(y = 1 | w, x) = a + b * sigmoid(gamma * f),   f = phi(x)^T w
    w ~ N(0, I / lam)                                        (prior="gaussian", eq. 39)
    w_j ~ pi N(0, s2) + (1 - pi) Laplace(0, ell)             (prior="gauss-laplace", eq. 41)

a, b come from a Beta(alpha, beta) prior on the Bernoulli mean after n pseudo-observations
(a = alpha / (alpha + beta + n), b = n / (alpha + beta + n)), so p(y = 1) is bounded in
[a, a + b] and p(y = 0) in [c, c + b] with c = 1 - a - b: a point far on the wrong side
of the boundary costs at most -log a (or -log c) nats, not a cost growing with its score
as under the logistic likelihood (a = 0, b = 1, gamma = 1 is logistic regression). That
bounded loss is the point of the model - and also why its posterior need not be log-concave,
unlike the other four models of the zoo: NUTS's reference must be checked for modes.

The likelihood is :class:`BetaBernoulliLogistic`, whose log-probability is computed as a
log-sum-exp of log c_y and log b + log sigmoid(+-gamma f), finite at any score.

The spec is the posterior of w for fixed (a, b, gamma) and prior constants; the
configurations BBLR1-4 of the paper differ in how those are set (``validation/records/
/bblr.py``; :meth:`BBLR.weak_prior`, :meth:`BBLR.from_counts`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import log_sigmoid, sigmoid
from numpyro.distributions import constraints
from numpyro.distributions.util import promote_shapes, validate_sample

from .base import Site
from .checks import check_positive
from .special import expected_sigmoid

PRIORS = ("gaussian", "gauss-laplace")
#: the sharpness the zoo uses unless told otherwise (compare default, end-to-end fits):
#: NUTS certifies the Pima posterior there (DERIVATIONS.md §6.2 for why gamma and lam trade)
DEFAULT_GAMMA = 4.0


def _log(x):
    """log x with log 0 = -inf and no warning (a = 0 or c = 0 are legal: logistic
    regression is a = 0, b = 1)."""
    x = jnp.asarray(x, dtype=float)
    return jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1.0)), -jnp.inf)


def bb_log_prob(y, f, a, b, gamma):
    """log p(y | f) of the generalized Beta-Bernoulli logistic likelihood, y in {0, 1}:
    log(a + b sigmoid(gamma f)) for y = 1 and log(c + b sigmoid(-gamma f)) for y = 0,
    c = 1 - a - b, each as logaddexp(log c_y, log b + log_sigmoid(+-gamma f)) - finite and
    accurate at any score (at gamma f = -1e3 the y = 1 term is log a, not log 0)."""
    f = jnp.asarray(f)
    c = 1.0 - a - b
    pos = jnp.logaddexp(_log(a), _log(b) + log_sigmoid(gamma * f))
    neg = jnp.logaddexp(_log(c), _log(b) + log_sigmoid(-gamma * f))
    return jnp.where(jnp.asarray(y) > 0.5, pos, neg)


class BetaBernoulliLogistic(dist.Distribution):
    """Bernoulli with success probability a + b sigmoid(gamma f) (module docstring)."""

    arg_constraints = {"f": constraints.real}
    support = constraints.boolean
    has_enumerate_support = False

    def __init__(self, f, a, b, gamma, *, validate_args=None):
        (self.f,) = promote_shapes(f)
        self.a, self.b, self.gamma = a, b, gamma
        super().__init__(batch_shape=jnp.shape(f), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        return (jax.random.uniform(key, shape) < self.mean).astype(jnp.result_type(float))

    @validate_sample
    def log_prob(self, value):
        """The log-probability of ``value`` (a 0/1 label, or an array of them broadcasting
        against ``f``), elementwise; -inf outside {0, 1} when arguments are validated."""
        return bb_log_prob(value, self.f, self.a, self.b, self.gamma)

    @property
    def mean(self):
        return self.a + self.b * sigmoid(self.gamma * self.f)

    @property
    def variance(self):
        p = self.mean
        return p * (1.0 - p)


def gauss_laplace_log_prob(w, pi, s2, ell):
    """log[pi N(w; 0, s2) + (1 - pi) Laplace(w; 0, ell)] elementwise (eq. 41), for traced
    or concrete constants 0 < pi < 1."""
    w = jnp.asarray(w)
    gauss = jnp.log(pi) - 0.5 * jnp.log(2 * jnp.pi * s2) - 0.5 * w * w / s2
    lap = jnp.log1p(-pi) - jnp.log(2 * ell) - jnp.abs(w) / ell
    return jnp.logaddexp(gauss, lap)


def gauss_laplace_responsibility(w, pi, s2, ell):
    """r = pi N / (pi N + (1 - pi) Lap): the Gaussian component's share of each weight
    (DERIVATIONS.md §6.2; the hard EM assigns w_j to the Gaussian where r >= 1/2)."""
    w = jnp.asarray(w)
    gauss = jnp.log(pi) - 0.5 * jnp.log(2 * jnp.pi * s2) - 0.5 * w * w / s2
    lap = jnp.log1p(-pi) - jnp.log(2 * ell) - jnp.abs(w) / ell
    return sigmoid(gauss - lap)


class GaussLaplaceMixture(dist.Distribution):
    """pi N(0, s2) + (1 - pi) Laplace(0, ell): the sparse kernel BBLR's prior per weight
    (eq. 41; ``Laplace(w; 0, ell) = exp(-|w| / ell) / (2 ell)``)."""

    arg_constraints = {}
    support = constraints.real
    reparametrized_params = []

    def __init__(self, pi, s2, ell, *, validate_args=None):
        self.pi, self.s2, self.ell = float(pi), float(s2), float(ell)
        super().__init__(batch_shape=(), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        k_pick, k_n, k_l = jax.random.split(key, 3)
        gauss = jnp.sqrt(self.s2) * jax.random.normal(k_n, sample_shape)
        lap = self.ell * jax.random.laplace(k_l, sample_shape)
        return jnp.where(jax.random.uniform(k_pick, sample_shape) < self.pi, gauss, lap)

    def log_prob(self, value):
        """The mixture's log density at ``value``, elementwise
        (:func:`gauss_laplace_log_prob`)."""
        return gauss_laplace_log_prob(value, self.pi, self.s2, self.ell)

    def responsibility(self, value):
        """The Gaussian component's share of the density at ``value``, elementwise
        (:func:`gauss_laplace_responsibility`)."""
        return gauss_laplace_responsibility(value, self.pi, self.s2, self.ell)


def log_prior(w, prior: str, lam, pi, s2, ell):
    """log p(w) summed over the last axis, for traced or concrete constants."""
    w = jnp.asarray(w)
    if prior == "gaussian":
        d = w.shape[-1]
        return 0.5 * d * jnp.log(lam / (2 * jnp.pi)) - 0.5 * lam * jnp.sum(w * w, axis=-1)
    return jnp.sum(gauss_laplace_log_prob(w, pi, s2, ell), axis=-1)


@dataclass(frozen=True, eq=False)
class BBLR:
    """Generalized Beta-Bernoulli logistic regression spec.

    a, b: the likelihood's floor and range, a >= 0, b > 0, a + b <= 1 (c = 1 - a - b >= 0).
    gamma: the sharpness of the sigmoid, > 0.
    prior: "gaussian" (w ~ N(0, 1 / lam), the paper's L2 term lam / 2 ||w||^2) or
    "gauss-laplace" (each w_j ~ pi N(0, s2) + (1 - pi) Laplace(0, ell)).
    """

    a: float = 0.0
    b: float = 1.0
    gamma: float = 1.0
    prior: str = "gaussian"
    lam: float = 1.0
    pi: float = 0.5
    s2: float = 1.0
    ell: float = 0.1
    name: str = field(default="bblr", init=False)

    def __post_init__(self):
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS}, got {self.prior!r}")
        for key in ("a", "b", "gamma", "lam", "pi", "s2", "ell"):
            v = float(getattr(self, key))
            if not math.isfinite(v):
                raise ValueError(f"hyper-parameter {key} must be finite, got {getattr(self, key)!r}")
            object.__setattr__(self, key, v)
        if self.a < 0:
            raise ValueError(f"hyper-parameter a must be >= 0 (p(y = 1) >= a), got {self.a:g}")
        if self.b <= 0:
            raise ValueError(f"hyper-parameter b must be positive (the sigmoid's range), got {self.b:g}")
        if self.a + self.b > 1 + 1e-12:
            raise ValueError(f"hyper-parameters a + b must be <= 1 (they bound a probability), "
                             f"got a = {self.a:g}, b = {self.b:g}")
        check_positive(self.gamma, "gamma")
        check_positive(self.lam, "lam")
        check_positive(self.s2, "s2")
        check_positive(self.ell, "ell")
        if not 0 < self.pi < 1:
            raise ValueError(f"hyper-parameter pi must lie in (0, 1), got {self.pi:g}")

    # -- the paper's configurations of (a, b) ----------------------------------------
    @staticmethod
    def ab_from_beta_prior(alpha: float, beta: float, n: float) -> tuple[float, float]:
        """(a, b) = (alpha, n) / (alpha + beta + n) (eqs. 16-19; DERIVATIONS.md §6.1)."""
        for name, v in (("alpha", alpha), ("beta", beta), ("n", n)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        total = alpha + beta + n
        if n <= 0:
            raise ValueError(f"n must be positive (b = n / (alpha + beta + n)), got {n!r}")
        return alpha / total, n / total

    @classmethod
    def weak_prior(cls, alpha: float = 1.0, beta: float = 1.0, n: float = 100.0, **kwargs) -> "BBLR":
        """BBLR1: a, b from a weak Beta prior (the paper's constants were lost; these are
        our choice, stated in DERIVATIONS.md §6.1)."""
        a, b = cls.ab_from_beta_prior(alpha, beta, n)
        return cls(a=a, b=b, **kwargs)

    @classmethod
    def from_counts(cls, y, **kwargs) -> "BBLR":
        """BBLR2: alpha = N+, beta = N-, n = N, so a = N+ / (2N), b = 1/2, c = N- / (2N)."""
        y = np.asarray(y)
        n_pos, n = float(np.sum(y > 0.5)), float(y.size)
        a, b = cls.ab_from_beta_prior(n_pos, n - n_pos, n)
        return cls(a=a, b=b, **kwargs)

    @property
    def c(self) -> float:
        """The floor of p(y = 0): ``c = 1 - a - b`` (>= 0)."""
        return 1.0 - self.a - self.b

    def with_params(self, **overrides) -> "BBLR":
        """A copy with the given hyper-parameters replaced (checked as in the constructor)."""
        return replace(self, **overrides)

    # -- the contract -------------------------------------------------------------
    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """One site: the weights ``w``, one per basis column (there is no separate bias)."""
        return (Site("w", (n_basis,), "real", ("basis",)),)

    def prior_distribution(self):
        """The prior of one weight as a NumPyro distribution: ``Normal(0, 1 / sqrt(lam))`` or
        a :class:`GaussLaplaceMixture`."""
        if self.prior == "gaussian":
            return dist.Normal(0.0, 1.0 / math.sqrt(self.lam))
        return GaussLaplaceMixture(self.pi, self.s2, self.ell)

    def log_prior(self, w):
        """log p(w), summed over the last axis."""
        return log_prior(w, self.prior, self.lam, self.pi, self.s2, self.ell)

    def log_likelihood(self, w, Phi, y):
        """sum_n log p(y_n | w), y in {0, 1}; w may carry batch axes in front."""
        f = jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(w))
        return jnp.sum(bb_log_prob(jnp.asarray(y), f, self.a, self.b, self.gamma), axis=-1)

    def log_joint(self, w, Phi, y):
        """log p(w, y) = :meth:`log_prior` + :meth:`log_likelihood`; ``w`` may carry batch
        axes in front."""
        return self.log_prior(w) + self.log_likelihood(w, Phi, y)

    def log_density_sites(self, params, Phi, y):
        """log p(w, y) from {"w": ...}: w is the model's only latent, so this is the
        density the metrics' importance weights need (validation/judge/metrics.py)."""
        return self.log_joint(params["w"], Phi, y)

    def model(self, Phi, y=None):
        """The NumPyro model: i.i.d. weights from :meth:`prior_distribution` and the
        :class:`BetaBernoulliLogistic` likelihood of ``f = Phi @ w``."""
        Phi = jnp.asarray(Phi)
        w = numpyro.sample("w", self.prior_distribution().expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("y", BetaBernoulliLogistic(Phi @ w, self.a, self.b, self.gamma), obs=y)

    def linear_predictor(self, params, Phi):
        """``f = Phi @ w``, shape (..., n), for site values with any batch dims in front."""
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        """``p(y = 1 | f) = a + b sigmoid(gamma f)``."""
        return self.a + self.b * sigmoid(self.gamma * jnp.asarray(f))

    def gaussian_prob(self, mean_f, var_f):
        """E[p(y = 1 | f)] for f ~ N(mean_f, var_f): a + b E[sigmoid(gamma f)], the last by
        quadrature to float precision (``special.expected_sigmoid``)."""
        sd = self.gamma * jnp.sqrt(jnp.asarray(var_f, float))
        return self.a + self.b * expected_sigmoid(self.gamma * jnp.asarray(mean_f, float), sd)

    def flat_design(self, Phi):
        """A with ``f = A @ theta`` for the flat parameter ``theta = w``: ``Phi`` itself."""
        return jnp.asarray(Phi)

    def constant_data(self, n_basis: int) -> dict[str, Any]:
        """The numeric hyper-parameters of :meth:`to_dict` as arrays, for the constant_data
        group of InferenceData (``n_basis`` is unused: no constant depends on it)."""
        return {k: np.asarray(v) for k, v in self.to_dict().items() if isinstance(v, float)}

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict (only the active prior's constants)."""
        out = {"model": self.name, "a": self.a, "b": self.b, "gamma": self.gamma, "prior": self.prior}
        if self.prior == "gaussian":
            out["lam"] = self.lam
        else:
            out.update(pi=self.pi, s2=self.s2, ell=self.ell)
        return out
