"""What every model spec provides, so that engines, references and metrics can treat
all models of the zoo alike.

Parameters are named NumPyro sites. Engines that work on a flat vector use the order of
``spec.sites(n_basis)``; :func:`flatten` and :func:`unflatten` convert between the two.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Site:
    """A latent NumPyro site: its name, event shape and support.

    support is "real", "nonnegative" (PCVM's truncated weights, where a Gaussian
    approximation puts mass outside the support and metrics must say how much) or
    "positive" (a scale such as GGSM's lambda); the distribution verdict counts an engine's
    mass below 0 in the latter two as a difference.
    ``dims`` names the axes for ArviZ (e.g. ("basis",)).
    """

    name: str
    shape: tuple[int, ...]
    support: str = "real"
    dims: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))


@runtime_checkable
class ModelSpec(Protocol):
    """The contract of a model spec (a frozen dataclass in ``models/<name>.py``)."""

    name: str

    def model(self, Phi, y=None) -> None:  # the NumPyro model
        ...

    def sites(self, n_basis: int) -> tuple[Site, ...]:  # latent sites, in flat order
        ...

    def linear_predictor(self, params: dict[str, Any], Phi):  # f, shape (..., n)
        ...

    def prob(self, f):  # p(y = 1 | f): the link applied to the linear predictor
        ...

    def to_dict(self) -> dict[str, Any]:  # JSON-able hyper-parameters (for hashes, reports)
        ...


def flatten(params: dict[str, Any], sites: tuple[Site, ...]):
    """Concatenate site values into one vector (batch dims in front are kept)."""
    parts = []
    for s in sites:
        v = jnp.asarray(params[s.name])
        batch = v.shape[: v.ndim - len(s.shape)]
        parts.append(v.reshape(batch + (s.size,)))
    return jnp.concatenate(parts, axis=-1)


def unflatten(theta, sites: tuple[Site, ...]) -> dict[str, Any]:
    """Split a vector (or a batch of vectors) into site values."""
    theta = jnp.asarray(theta)
    batch = theta.shape[:-1]
    out, start = {}, 0
    for s in sites:
        out[s.name] = theta[..., start : start + s.size].reshape(batch + s.shape)
        start += s.size
    if start != theta.shape[-1]:
        raise ValueError(f"vector of length {theta.shape[-1]} does not match sites of total size {start}")
    return out


def total_size(sites: tuple[Site, ...]) -> int:
    return sum(s.size for s in sites)
