"""Engines a user might write, good and broken, for tests/validation/runs/test_user_engines.py; imported
as ``user_engines:NAME`` (tests/ is on sys.path under pytest), as a user's module is."""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from zoo.inference import expectation_propagation
from zoo.inference.posterior import DrawsPosterior, GaussianPosterior


def raises(spec, Phi, y, *, config=None):
    raise RuntimeError("my engine\nbroke on line 2")  # a message over two lines ends up on one


def returns_dict(spec, Phi, y, *, config=None):
    return {"w": np.zeros(Phi.shape[1])}


def wrong_sites(spec, Phi, y, *, config=None):
    """A Gaussian over one weight fewer than the design has (the last basis column lost)."""
    ep = expectation_propagation.fit(spec, Phi, y, config=config)
    return GaussianPosterior(spec, spec.sites(Phi.shape[1] - 1), np.asarray(ep.mean_vec)[:-1],
                             np.asarray(ep.chol)[:-1, :-1], ep.info)


def nan_draws(spec, Phi, y, *, config=None):
    """Draws with one NaN: the constructor accepts them, the zoo's check does not."""
    ep = expectation_propagation.fit(spec, Phi, y, config=config)
    draws = {k: v.reshape((2, 50) + v.shape[1:]).copy() for k, v in ep.sample(jax.random.PRNGKey(0), 100).items()}
    draws["w"].flat[3] = np.nan
    return DrawsPosterior(spec, ep.sites, draws, ep.info)


def no_contract(spec, Phi, y, config=None):  # config can be passed by position
    return expectation_propagation.fit(spec, Phi, y)


def exact_draws(spec, Phi, y, *, config=None):
    """EP as 4 x 500 independent draws: a draws engine as close to EP as its Monte Carlo allows."""
    ep = expectation_propagation.fit(spec, Phi, y, config=config)
    draws = ep.sample(jax.random.PRNGKey(1), 2000)
    return DrawsPosterior(spec, ep.sites, {k: v.reshape((4, 500) + v.shape[1:]) for k, v in draws.items()}, ep.info)


def shrunk(spec, Phi, y, *, config=None):
    """EP with its covariance x 0.5: wrong in a way every verdict must see."""
    ep = expectation_propagation.fit(spec, Phi, y, config=config)
    assert isinstance(ep, GaussianPosterior)
    return dataclasses.replace(ep, chol=np.asarray(ep.chol) * np.sqrt(0.5))
