"""Models that are not the zoo's five, shipped as a user would bring them: each a
:class:`~zoo.validation.records.user_model.Model` built from a NumPyro function and data in the
package, named on the command line by its path::

    zoo compare --model zoo.validation.records.examples:HEART_HIERARCHICAL
    zoo sbc --model zoo.validation.records.examples:KIDIQ_LINEAR --engine advi-meanfield

* :data:`EIGHT_SCHOOLS` - Rubin's (1981) eight schools, non-centred: a hierarchical normal
  model whose posterior is a funnel in (tau, eta).
* :data:`KIDIQ_LINEAR` - a linear regression of a child's test score on the mother's IQ (Gelman
  & Hill's kidiq data, as posteriordb ships them) under proper, weakly informative priors - the
  proper-prior sibling of posteriordb's ``kidscore_momiq``, whose flat prior leaves SBC nothing
  to draw from.
* :data:`HEART_HIERARCHICAL` - a hierarchical logistic regression: heart disease (UCI Statlog
  heart, 270 patients) on age and maximum heart rate, its intercept varying by the four kinds
  of chest pain and partially pooled (non-centred).

:data:`EXAMPLES` lists them with posteriordb's three shipped posteriors
(``validation/records/posteriordb.py``): every model the zoo ships that is not one of its five.
"""
from __future__ import annotations

import numpy as np
import numpyro
import numpyro.distributions as dist

from ...data.parsers import read_heart
from . import posteriordb
from .user_model import Model


def eight_schools(J, sigma, y=None):
    """mu ~ N(0, 5), tau ~ half-Cauchy(5), eta_j ~ N(0, 1), y_j ~ N(mu + tau eta_j, sigma_j)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("J", J):
        eta = numpyro.sample("eta", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(mu + tau * eta, sigma), obs=y)


def kidiq_linear(mom_iq, kid_score=None):
    """kid_score_i ~ N(alpha + beta (mom_iq_i - 100) / 15, sigma): the mother's IQ in standard
    deviations of the IQ scale. alpha ~ N(80, 20) (a test score's scale), beta ~ N(0, 10),
    sigma ~ half-normal(20)."""
    alpha = numpyro.sample("alpha", dist.Normal(80.0, 20.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(20.0))
    x = (mom_iq - 100.0) / 15.0
    with numpyro.plate("children", mom_iq.shape[0]):
        numpyro.sample("kid_score", dist.Normal(alpha + beta * x, sigma), obs=kid_score)


def heart_hierarchical(n_groups, group, age, max_hr, disease=None):
    """logit p_i = a[group_i] + b_age age_i + b_hr max_hr_i (age and max_hr standardized), the
    group intercepts non-centred: a = mu + tau z, z ~ N(0, 1), mu ~ N(0, 1.5), tau ~
    half-normal(1); b ~ N(0, 1); disease_i ~ Bernoulli(p_i)."""
    mu = numpyro.sample("mu", dist.Normal(0.0, 1.5))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", n_groups):
        z = numpyro.sample("z", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    logits = mu + tau * z[group] + b[0] * age + b[1] * max_hr
    with numpyro.plate("patients", group.shape[0]):
        numpyro.sample("disease", dist.Bernoulli(logits=logits), obs=disease)


def heart_data() -> dict:
    """UCI Statlog heart as the data layer reads it (``data/parsers.py``: ``read_heart``): the
    kind of chest pain (1-4, as group 0-3), age and maximum heart rate standardized, disease
    present (class 2) as 1."""
    pool = read_heart()
    column = {name: pool.X[:, j] for j, name in enumerate(pool.feature_names)}

    def standardized(v):
        return (v - v.mean()) / v.std()

    return {"n_groups": 4, "group": column["chest_pain_type"].astype(np.int64) - 1,
            "age": standardized(column["age"]), "max_hr": standardized(column["max_heart_rate"]),
            "disease": pool.y.astype(np.int64)}


def kidiq_data() -> dict:
    """The kidiq data as posteriordb ships them: the mother's IQ and the child's score."""
    d = posteriordb.posterior_data("kidiq-kidscore_momiq")
    return {"mom_iq": d["mom_iq"], "kid_score": d["kid_score"]}


#: Rubin's eight schools, non-centred (:func:`eight_schools` on the eight schools' effects
#: and standard errors); its reference is NUTS at target acceptance 0.95
EIGHT_SCHOOLS = Model(eight_schools, {"J": 8, "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
                                      "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])},
                      # the funnel: at the default target acceptance NUTS leaves a divergence or two
                      references=({"sampler": "nuts", "target_accept": 0.95},))
#: the kidiq linear regression under proper priors (:func:`kidiq_linear` on :func:`kidiq_data`)
KIDIQ_LINEAR = Model(kidiq_linear, kidiq_data())
#: the hierarchical logistic regression of heart disease (:func:`heart_hierarchical` on
#: :func:`heart_data`)
HEART_HIERARCHICAL = Model(heart_hierarchical, heart_data())

#: every shipped model that is not one of the five: name -> a function that builds it (on
#: demand: posteriordb's are read from their zipped files and traced when made)
EXAMPLES = {
    "eight_schools": lambda: EIGHT_SCHOOLS,
    "kidiq_linear": lambda: KIDIQ_LINEAR,
    "heart_hierarchical": lambda: HEART_HIERARCHICAL,
    **{name: (lambda name=name: posteriordb.model(name)) for name in posteriordb.POSTERIORS},
}


__all__ = ["EIGHT_SCHOOLS", "KIDIQ_LINEAR", "HEART_HIERARCHICAL", "EXAMPLES", "eight_schools", "kidiq_linear",
           "heart_hierarchical", "heart_data", "kidiq_data"]
