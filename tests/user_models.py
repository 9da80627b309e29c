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
