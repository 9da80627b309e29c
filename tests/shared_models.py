"""Test helpers shared by several test files (imported as a plain module: pytest puts
tests/ on sys.path).

* :class:`NormalMeans` - a conjugate known-answer model, complete enough to pass through
  the reference pipeline and the metrics;
* :func:`ripley_subset` - a fixed random subset of Ripley's training points.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import ndtr

import zoo  # noqa: F401  (float64)
from zoo.data import open_text
from zoo.models.base import Site


class NormalMeans:
    """mu_j ~ N(0, tau^2); the columns of Phi are observations x_ij ~ N(mu_j, sigma^2).

    The posterior is Gaussian: mu_j | x ~ N(sum_i x_ij / sigma^2 / P, 1/P) with
    P = 1/tau^2 + n/sigma^2. ``y`` (0/1 labels, required by the input checks) does not
    enter the likelihood; the link (probit of f = Phi mu) only serves the predictive
    metrics, so the spec is a complete ModelSpec.
    """

    name = "normal_means"

    def __init__(self, tau=2.0, sigma=1.0):
        self.tau, self.sigma = tau, sigma

    def sites(self, M):
        return (Site("mu", (M,), "real", ("basis",)),)

    def model(self, Phi, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, self.tau).expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("x", dist.Normal(mu, self.sigma).to_event(1), obs=Phi)

    def linear_predictor(self, params, Phi):
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["mu"]))

    def prob(self, f):
        return ndtr(f)

    def gaussian_prob(self, mean_f, var_f):
        return ndtr(mean_f / jnp.sqrt(1.0 + var_f))

    def flat_design(self, Phi):
        return jnp.asarray(Phi)

    def to_dict(self):
        return {"model": self.name, "tau": self.tau, "sigma": self.sigma}

    def exact_posterior(self, Phi):
        """Closed-form posterior mean (shape (M,)) and sd (a scalar, equal for all j)."""
        precision = 1.0 / self.tau**2 + Phi.shape[0] / self.sigma**2
        return Phi.sum(0) / self.sigma**2 / precision, 1.0 / np.sqrt(precision)


def ripley_subset(n: int, seed: int):
    """n Ripley training points (inputs standardized on all 250), a fixed random subset."""
    d = np.loadtxt(open_text("ripley/synth.tr"), skiprows=1)
    X, y = d[:, :2], d[:, 2]
    X = (X - X.mean(0)) / X.std(0)
    idx = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
    return X[idx], y[idx]
