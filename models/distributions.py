"""Distributions the zoo needs that NumPyro does not ship."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr, ndtr
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
