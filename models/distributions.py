"""Distributions the zoo needs that NumPyro does not ship."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, log_ndtr, ndtr
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.util import promote_shapes, validate_sample


class ProbitBernoulli(dist.Distribution):
    """Bernoulli with success probability Phi(f), the standard normal CDF of ``f``.

    ``log_prob`` uses ``log_ndtr`` on both sides, so a confident wrong prediction
    (f = -40 for a label 1) costs -804 nats instead of -inf, and NUTS never sees a NaN
    gradient. ``Bernoulli(probs=ndtr(f))`` loses this below f of about -8.
    """

    arg_constraints = {"f": constraints.real}
    support = constraints.boolean
    has_enumerate_support = False

    def __init__(self, f, *, validate_args=None):
        (self.f,) = promote_shapes(f)
        super().__init__(batch_shape=jnp.shape(f), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        return (jax.random.uniform(key, shape) < ndtr(self.f)).astype(jnp.result_type(float))

    @validate_sample
    def log_prob(self, value):
        return value * log_ndtr(self.f) + (1.0 - value) * log_ndtr(-self.f)

    @property
    def mean(self):
        return ndtr(self.f)

    @property
    def variance(self):
        p = ndtr(self.f)
        return p * (1.0 - p)


class GeneralizedNormal(dist.Distribution):
    """Generalized normal (exponential power) distribution with shape q and scale lambda:

        p(w) = q / (2 lambda^(1/q) Gamma(1/q)) exp(-|w - loc|^q / lambda),   q > 0, lambda > 0.

    q = 2 is N(loc, lambda / 2), q = 1 the Laplace distribution with scale lambda; q < 1 is
    spikier at loc with heavier tails. This is the parametrization of the GGIG paper (the
    prior of ``models/ggsm_probit.py``); scipy's ``gennorm(beta=q, loc, scale=lambda^(1/q))``
    is the same law.

    Sampling is exact: |w - loc|^q / lambda ~ Gamma(1/q, 1), with an independent random sign.
    """

    arg_constraints = {
        "loc": constraints.real,
        "lam": constraints.positive,
        "q": constraints.positive,
    }
    support = constraints.real
    reparametrized_params = ["loc", "lam"]

    def __init__(self, lam=1.0, q=2.0, loc=0.0, *, validate_args=None):
        self.loc, self.lam, self.q = promote_shapes(loc, lam, q)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(loc), jnp.shape(lam), jnp.shape(q))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        key_gamma, key_sign = jax.random.split(key)
        g = jax.random.gamma(key_gamma, jnp.broadcast_to(1.0 / self.q, shape), shape)
        magnitude = (self.lam * g) ** (1.0 / self.q)
        sign = jnp.where(jax.random.bernoulli(key_sign, 0.5, shape), 1.0, -1.0)
        return self.loc + sign * magnitude

    @validate_sample
    def log_prob(self, value):
        q = self.q
        log_norm = jnp.log(q) - jnp.log(2.0) - jnp.log(self.lam) / q - gammaln(1.0 / q)
        return log_norm - jnp.abs(value - self.loc) ** q / self.lam

    @property
    def mean(self):
        return jnp.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        q = self.q
        return jnp.broadcast_to(
            self.lam ** (2.0 / q) * jnp.exp(gammaln(3.0 / q) - gammaln(1.0 / q)), self.batch_shape
        )
