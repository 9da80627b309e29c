"""GIG-hierarchical logistic regression (Horii; DERIVATIONS.md §3).

    p(y_j = 1 | beta) = sigmoid(x_j^T beta)
    beta_i | tau_i    ~ N(0, tau_i)
    tau_i  | h_i      ~ GIG(rho, a, b)     with one of a, b the hyper-parameter h_i
    h_i               ~ Gamma(k, rate theta)

Two mixing families, both boundary cases of the GIG (``models/distributions.GIG``):

* ``mixing="gamma"`` (the paper's, default): tau_i | a_i ~ GIG(rho, a_i, 0) =
  Gamma(rho, rate a_i / 2), rho > 0, and the hyper-prior sits on a_i. The paper's
  rho = 1 makes tau_i | a_i exponential and beta_i | a_i Laplace with rate sqrt(a_i).
* ``mixing="inverse-gamma"``: tau_i | b_i ~ GIG(rho, 0, b_i) = InvGamma(-rho, scale
  b_i / 2), rho < 0, and the hyper-prior sits on b_i (the Student-t family: beta_i | b_i
  is t with 2|rho| degrees of freedom and scale sqrt(b_i / (2|rho|))).

The NumPyro site of the hyper-parameter is called ``h`` in both cases (its meaning is
set by ``mixing``), so the two cases share one model function.

Hyper-prior. The paper sets k = theta = 1e-6, nearly the improper 1/h. The default here
is k = theta = 1 (a proper prior with mean 1): measured before the issue was filed, NUTS
certifies at k = 1 but not at k = 1e-2 (R-hat 2.5), and the paper's 1e-6 did not finish
in 10 minutes. ``GIGLogistic.paper_prior()`` gives the paper's.

Parameterization (``parameterization``), the same model either way:

* ``"noncentred"`` (default, for NUTS): h ~ Gamma(k, theta); tau = scale(h) * g with a
  standard ``Gamma(|rho|, 1)`` draw g (tau = 2 g / a in the gamma case, tau = b / (2 g) in
  the inverse-gamma case); beta = sqrt(tau) z with z ~ N(0, 1). The sampled sites are
  h, g, z; tau and beta are deterministic. With few data per coordinate the centred
  form is a funnel between tau_i and beta_i.
* ``"centred"``: h ~ Gamma(k, theta), tau ~ GIG(...), beta ~ N(0, tau) - the paper's
  model written literally, with our GIG distribution.
* ``"marginal"``: h integrated out analytically. A ``Gamma(|rho|, rate h/2)`` scale with
  h ~ Gamma(k, rate theta) is 2 theta times a ``BetaPrime(|rho|, k)``, so u = log(tau / (2
  theta)) (gamma mixing; u = -log(2 theta tau) for inverse-gamma mixing, where 1/tau is
  the Gamma-mixed Gamma) has the ``LogBetaPrime(|rho|, k)`` law; beta = sqrt(tau) z. NUTS
  then sees u and z only - no funnel between h and tau. h has no site in this form.
* ``"collapsed"``: tau integrated out as well; beta_i has the marginal prior of
  :meth:`GIGLogistic.log_marginal_prior` (a 1-D quadrature) and NUTS sees beta alone -
  no funnel at all, at the price of a kink of the prior at beta_i = 0.

The weights measured against the reference are ``beta`` (``sites``); tau and h are
integrated out by every engine's comparison.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.nn import sigmoid
from jax.scipy.special import logsumexp

from .checks import check_positive
from .base import Site
from .distributions import GIG, LogBetaPrime

#: the paper's near-improper hyper-prior Gamma(k, theta) on a_i
PAPER_K = PAPER_THETA = 1e-6
MIXINGS = ("gamma", "inverse-gamma")
PARAMETERIZATIONS = ("noncentred", "centred", "marginal", "collapsed")
#: trapezoid nodes of log_marginal_prior's integral over u = log(tau / 2 theta)
_U_STEP = 0.1
_U_NODES = np.arange(-800, 801) * _U_STEP  # numpy: no JAX computation at import (the device is chosen later)


@dataclass(frozen=True, eq=False)
class GIGLogistic:
    """GIG-hierarchical logistic regression spec.

    - rho: GIG index; > 0 for ``mixing="gamma"`` (paper: 1), < 0 for ``"inverse-gamma"``.
    - k, theta: shape and rate of the Gamma hyper-prior on each a_i (or b_i).
    - mixing: "gamma" (tau_i | a_i ~ GIG(rho, a_i, 0)) or "inverse-gamma" (GIG(rho, 0, b_i)).
    - parameterization: "noncentred" or "centred" (module docstring); the posterior of
      beta is the same, only NUTS's geometry differs.
    """

    rho: float = 1.0
    k: float = 1.0
    theta: float = 1.0
    mixing: str = "gamma"
    parameterization: str = "noncentred"
    name: str = field(default="gig-logistic", init=False)
    #: the forms of the same model (one posterior, one evidence): a judge that needs every
    #: latent site of a reference sampled in another form may rewrite the spec in it
    parameterizations: ClassVar[tuple[str, ...]] = PARAMETERIZATIONS

    def __post_init__(self):
        if self.mixing not in MIXINGS:
            raise ValueError(f"mixing must be one of {MIXINGS}, got {self.mixing!r}")
        if self.parameterization not in PARAMETERIZATIONS:
            raise ValueError(f"parameterization must be one of {PARAMETERIZATIONS}, got {self.parameterization!r}")
        rho = float(self.rho)
        if not math.isfinite(rho):
            raise ValueError(f"rho must be finite, got {self.rho!r}")
        if self.mixing == "gamma" and rho <= 0:
            raise ValueError(f"rho must be > 0 with mixing='gamma' (tau | a ~ Gamma(rho, a/2)), got {rho}")
        if self.mixing == "inverse-gamma" and rho >= 0:
            raise ValueError(f"rho must be < 0 with mixing='inverse-gamma' (tau | b ~ InvGamma(-rho, b/2)), got {rho}")
        check_positive(self.k, "k")
        check_positive(self.theta, "theta")
        object.__setattr__(self, "rho", rho)
        object.__setattr__(self, "k", float(self.k))
        object.__setattr__(self, "theta", float(self.theta))

    @classmethod
    def paper_prior(cls, **kwargs) -> "GIGLogistic":
        """The paper's k = theta = 1e-6 (rho = 1, gamma mixing unless given)."""
        return cls(k=PAPER_K, theta=PAPER_THETA, **kwargs)

    @property
    def hyper_name(self) -> str:
        """Which GIG parameter the hyper-prior sits on: "a" or "b"."""
        return "a" if self.mixing == "gamma" else "b"

    # -- the contract -------------------------------------------------------------
    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """One measured site: the weights ``beta``, one per basis column (tau and h, whatever
        their parameterization, are not measured)."""
        return (Site("beta", (n_basis,), "real", ("basis",)),)

    def mixing_distribution(self, h):
        """p(tau | h) as a GIG (h = a_i or b_i, per the mixing family). The zero is a
        concrete numpy array, so the GIG knows its boundary case when it is built."""
        zero = np.zeros(jnp.shape(h))
        return GIG(self.rho, h, zero) if self.mixing == "gamma" else GIG(self.rho, zero, h)

    def tau_from_standard(self, h, g):
        """``tau = scale(h) * g`` for a standard ``Gamma(|rho|, 1)`` draw g (non-centred form)."""
        return 2.0 * g / h if self.mixing == "gamma" else h / (2.0 * g)

    def model(self, Phi, y=None):
        """The NumPyro model in the spec's ``parameterization`` (module docstring): every form
        has a ``beta`` site (sampled or deterministic) and the logistic likelihood of
        ``f = Phi @ beta``."""
        Phi = jnp.asarray(Phi)
        d = Phi.shape[1]
        if self.parameterization == "collapsed":
            beta = numpyro.sample("beta", _MarginalBeta(self).expand([d]).to_event(1))
            numpyro.sample("y", dist.Bernoulli(logits=Phi @ beta), obs=y)
            return
        if self.parameterization == "marginal":
            u = numpyro.sample("u", LogBetaPrime(abs(self.rho), self.k).expand([d]).to_event(1))
            log_tau = u + jnp.log(2.0 * self.theta) if self.mixing == "gamma" else -u - jnp.log(2.0 * self.theta)
            tau = numpyro.deterministic("tau", jnp.exp(log_tau))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
            beta = numpyro.deterministic("beta", jnp.exp(0.5 * log_tau) * z)
            numpyro.sample("y", dist.Bernoulli(logits=Phi @ beta), obs=y)
            return
        h = numpyro.sample("h", dist.Gamma(self.k, self.theta).expand([d]).to_event(1))
        if self.parameterization == "centred":
            tau = numpyro.sample("tau", self.mixing_distribution(h).to_event(1))
            beta = numpyro.sample("beta", dist.Normal(0.0, jnp.sqrt(tau)).to_event(1))
        else:
            g = numpyro.sample("g", dist.Gamma(abs(self.rho), 1.0).expand([d]).to_event(1))
            tau = numpyro.deterministic("tau", self.tau_from_standard(h, g))
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
            beta = numpyro.deterministic("beta", jnp.sqrt(tau) * z)
        numpyro.sample("y", dist.Bernoulli(logits=Phi @ beta), obs=y)

    def linear_predictor(self, params, Phi):
        """``f = Phi @ beta``, shape (..., n), for site values with any batch dims in front."""
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["beta"]))

    def prob(self, f):
        """``p(y = 1 | f) = sigmoid(f)``."""
        return sigmoid(f)

    def gaussian_prob(self, mean_f, var_f):
        """E[sigmoid(f)] for f ~ N(mean_f, var_f) by MacKay's approximation, the paper's
        predictive (14): sigmoid(mean / sqrt(1 + pi var / 8)) (exact as var -> 0)."""
        return sigmoid(mean_f / jnp.sqrt(1.0 + jnp.pi * var_f / 8.0))

    # -- the density of the measured sites alone -----------------------------------
    def log_marginal_prior(self, beta):
        """log p(beta_i) with tau_i and h_i integrated out, elementwise.

        tau has the closed-form marginal tau = 2 theta e^u (gamma mixing; 1 / tau = 2 theta
        e^u for inverse-gamma mixing) with ``u ~ LogBetaPrime(|rho|, k)`` (the "marginal"
        parameterization), so p(beta) = int N(beta | 0, tau(u)) p(u) du, a 1-D integral of
        a smooth function of u: the trapezoid rule on u in [-80, 80] at spacing 0.1
        (``_U_NODES``). Left of the data it is cut off doubly exponentially, right of it
        by N's e^(-u/2) times p(u)'s e^(-k u); the test checks it against scipy's quad.
        """
        beta = jnp.asarray(beta, dtype=float)
        u = _U_NODES
        log_pu = LogBetaPrime(abs(self.rho), self.k).log_prob(u)
        log_tau = u + jnp.log(2.0 * self.theta) if self.mixing == "gamma" else -u - jnp.log(2.0 * self.theta)
        b = beta[..., None]
        log_normal = -0.5 * (jnp.log(2.0 * jnp.pi) + log_tau) - 0.5 * b * b * jnp.exp(-log_tau)
        return logsumexp(log_normal + log_pu, axis=-1) + jnp.log(_U_STEP)

    def log_density_sites(self, params, Phi, y):
        """log p(beta, y): the target of the metrics (k-hat), which see only ``beta``:
        the model's other latents (tau, h, or their reparameterizations) integrated out."""
        beta = jnp.asarray(params["beta"])
        f = jnp.asarray(Phi) @ beta
        y = jnp.asarray(y)
        loglik = jnp.sum(y * jax.nn.log_sigmoid(f) + (1.0 - y) * jax.nn.log_sigmoid(-f))
        return loglik + jnp.sum(self.log_marginal_prior(beta))

    # -- helpers ------------------------------------------------------------------
    def flat_design(self, Phi):
        """f = Phi @ beta: the design of the flat parameter (beta only)."""
        return jnp.asarray(Phi)

    def with_params(self, **overrides) -> "GIGLogistic":
        """A copy with the given hyper-parameters replaced (checked as in the constructor)."""
        return replace(self, **overrides)

    def constant_data(self, n_basis: int) -> dict[str, Any]:
        """Hyper-parameters as arrays, for the constant_data group of InferenceData."""
        return {"rho": np.asarray(self.rho), "k": np.asarray(self.k), "theta": np.asarray(self.theta)}

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict, for hashes and reports."""
        # the parameterization changes how NUTS walks, so it is part of the reference's
        # identity (cache key), though not of the posterior
        return {"model": self.name, "rho": self.rho, "k": self.k, "theta": self.theta,
                "mixing": self.mixing, "parameterization": self.parameterization}


class _MarginalBeta(dist.Distribution):
    """beta_i of a GIGLogistic spec with tau_i and h_i integrated out (the collapsed form):
    log density by the spec's quadrature, draws through u ~ LogBetaPrime and z ~ N(0, 1)."""

    support = dist.constraints.real

    def __init__(self, spec: GIGLogistic, *, validate_args=None):
        self.spec = spec
        super().__init__(batch_shape=(), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        k1, k2 = jax.random.split(key)
        u = LogBetaPrime(abs(self.spec.rho), self.spec.k).sample(k1, shape)
        log_two_theta = jnp.log(2.0 * self.spec.theta)
        log_tau = u + log_two_theta if self.spec.mixing == "gamma" else -u - log_two_theta
        return jnp.exp(0.5 * log_tau) * jax.random.normal(k2, shape)

    def log_prob(self, value):
        return self.spec.log_marginal_prior(value)
