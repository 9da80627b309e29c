"""NumPyro models from outside the zoo, for the tests of models/general.py and what judges
them: importable by path (a spawned child or a Dask worker imports them by name)."""
from __future__ import annotations

import numpy as np
import numpyro
import numpyro.distributions as dist

from zoo.validation.records.user_model import Model

#: the eight schools of Rubin (1981): estimated coaching effects and their standard errors
EIGHT_SCHOOLS = {"J": 8, "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
                 "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])}


def eight_schools_noncentered(J, sigma, y=None):
    """Eight schools, non-centred: theta = mu + tau * theta_tilde."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", J):
        theta_tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
        theta = numpyro.deterministic("theta", mu + tau * theta_tilde)
        numpyro.sample("obs", dist.Normal(theta, sigma), obs=y)


def with_a_coin(J, sigma, y=None):
    """A discrete latent site: not judged."""
    coin = numpyro.sample("coin", dist.Bernoulli(0.5))
    with numpyro.plate("J", J):
        numpyro.sample("obs", dist.Normal(coin, sigma), obs=y)


def with_a_probability(J, sigma, y=None):
    """A site on (0, 1): not judged so far."""
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    with numpyro.plate("J", J):
        numpyro.sample("obs", dist.Normal(p, sigma), obs=y)


def observing_nothing(J, sigma, y=None):
    numpyro.sample("mu", dist.Normal(0.0, 1.0))


#: eight schools as a Model, for `zoo compare --model user_models:EIGHT_SCHOOLS_MODEL`
EIGHT_SCHOOLS_MODEL = Model(eight_schools_noncentered, EIGHT_SCHOOLS)


# --------------------------------------------------------------------------------------
# A conjugate model whose posterior is known in closed form, and engines for it: SBC of a
# general model must call the exact one calibrated and a planted wrong one miscalibrated
# --------------------------------------------------------------------------------------
def normal_mean(n, y=None):
    """mu ~ N(0, 1), y_i ~ N(mu, 1): the posterior is N(sum y / (n + 1), 1 / (n + 1))."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    with numpyro.plate("n", n):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


NORMAL_MEAN_MODEL = Model(normal_mean, {"n": 5, "y": np.array([0.3, -0.2, 1.1, 0.4, 0.9])})


def _normal_mean_posterior(spec, y, sd_factor: float):
    from zoo.inference.posterior import FitInfo, GaussianPosterior

    obs = np.asarray(y["y"], dtype=float)
    precision = 1.0 + obs.size
    return GaussianPosterior(spec, spec.sites(), np.array([obs.sum() / precision]),
                             np.array([[sd_factor / np.sqrt(precision)]]),
                             FitInfo("closed form", True, 0, "", 0.0))


def exact_normal_mean(spec, Phi, y, *, config=None):
    """The exact posterior of normal_mean."""
    return _normal_mean_posterior(spec, y, 1.0)


def narrow_normal_mean(spec, Phi, y, *, config=None):
    """A planted defect: the exact posterior's mean, half its sd."""
    return _normal_mean_posterior(spec, y, 0.5)


def normal_mean_flat(n, y=None):
    """normal_mean under an improper flat prior: a proper posterior, no prior draws."""
    mu = numpyro.sample("mu", dist.ImproperUniform(dist.constraints.real, (), ()))
    with numpyro.plate("n", n):
        numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


NORMAL_MEAN_FLAT_MODEL = Model(normal_mean_flat, {"n": 5, "y": np.array([0.3, -0.2, 1.1, 0.4, 0.9])})


def two_means(n, y=None):
    """mu, nu ~ N(0, 1), y_i ~ N(mu + nu, 1): judged on mu alone, a draw of mu does not fix the
    likelihood."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
    nu = numpyro.sample("nu", dist.Normal(0.0, 1.0))
    with numpyro.plate("n", n):
        numpyro.sample("y", dist.Normal(mu + nu, 1.0), obs=y)


TWO_MEANS_ON_MU = Model(two_means, {"n": 5, "y": np.array([0.3, -0.2, 1.1, 0.4, 0.9])}, sites=("mu",))


def mu_prior(spec, Phi, y, *, config=None):
    """N(0, 1) over mu whatever the data (the prior: an engine that learns nothing)."""
    from zoo.inference.posterior import FitInfo, GaussianPosterior

    return GaussianPosterior(spec, spec.sites(), np.zeros(1), np.eye(1), FitInfo("prior", True, 0, "", 0.0))


def unidentified(n, y=None):
    """y_i ~ N(a + b, 1) under flat priors on a and b: only a + b is identified, so the posterior
    is improper along a - b (no sampler can certify it)."""
    a = numpyro.sample("a", dist.ImproperUniform(dist.constraints.real, (), ()))
    b = numpyro.sample("b", dist.ImproperUniform(dist.constraints.real, (), ()))
    with numpyro.plate("n", n):
        numpyro.sample("y", dist.Normal(a + b, 1.0), obs=y)


UNIDENTIFIED_MODEL = Model(unidentified, {"n": 5, "y": np.array([0.3, -0.2, 1.1, 0.4, 0.9])})
