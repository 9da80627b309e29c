"""What every model spec provides, so that engines, references and metrics can treat
all models of the zoo alike.

Parameters are named NumPyro sites. Engines that work on a flat vector use the order of
``spec.sites(n_basis)``; :func:`flatten` and :func:`unflatten` convert between the two.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import jax
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
        """The number of scalars in the site: the product of ``shape`` (1 for a scalar site)."""
        return int(np.prod(self.shape, dtype=int))


@runtime_checkable
class ModelSpec(Protocol):
    """The contract of a model spec (a frozen dataclass in ``models/<name>.py``)."""

    name: str

    def model(self, Phi, y=None) -> None:
        """The NumPyro model on the design ``Phi``, shape (n, n_basis); ``y`` (0/1 labels) is
        observed when given and sampled from the prior predictive when None."""
        ...

    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """The latent sites for a design of ``n_basis`` columns, in the order that flat
        vectors use (:func:`~zoo.models.base.flatten`, :func:`~zoo.models.base.unflatten`)."""
        ...

    def linear_predictor(self, params: dict[str, Any], Phi):
        """The linear predictor ``f`` from site values ``params`` (batch dims in front are
        kept): shape (..., n)."""
        ...

    def prob(self, f):
        """``p(y = 1 | f)``: the model's link applied to the linear predictor ``f``."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict, for hashes and reports."""
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


# --------------------------------------------------------------------------------------
# A model's problem: a classifier's (design, labels) or a general model's (data, observations)
# --------------------------------------------------------------------------------------
def is_classifier(spec) -> bool:
    """Whether ``spec`` is a classifier: its model takes a design matrix and labels, its sites
    depend on the design's width, and it predicts probabilities. The five models of the zoo
    are; a general NumPyro model (``models/general.py``) is not (``classifier = False``)."""
    return bool(getattr(spec, "classifier", True))


def checked_problem(spec, Phi, y=None, *, name: str = "Phi"):
    """(Phi, y) checked as ``spec``'s model takes them, as NumPy: a classifier's design matrix
    and 0/1 labels (``checks.check_design``), or a general model's data arrays and observed
    values by site (:meth:`zoo.models.general.GeneralSpec.checked`). ValueError in one line naming the problem."""
    if is_classifier(spec):
        from .checks import check_design  # checks imports scipy.sparse: only a classifier needs it

        return check_design(Phi, y, name=name)
    return spec.checked(Phi, y)


def problem_sites(spec, Phi) -> tuple[Site, ...]:
    """The latent sites of ``spec`` on ``Phi``: a classifier's depend on the design's width, a
    general model's on nothing but itself."""
    if is_classifier(spec):
        return tuple(spec.sites(int(np.shape(Phi)[1])))
    return tuple(spec.sites())


def problem_shape(Phi) -> tuple:
    """What compiled programs of one problem are keyed by: a design's shape, or each data
    array's name, shape and dtype."""
    if isinstance(Phi, dict):
        return tuple((k, tuple(np.shape(v)), str(np.asarray(v).dtype)) for k, v in sorted(Phi.items()))
    return tuple(np.shape(Phi))


def as_jax(tree):
    """A problem's arrays as JAX arrays, their dtypes kept (a general model's integer indices
    stay integers): a design or labels, or a dict of them."""
    return jax.tree_util.tree_map(jnp.asarray, tree)


def total_size(sites: tuple[Site, ...]) -> int:
    """The length of the flat vector of ``sites``: the sum of their sizes."""
    return sum(s.size for s in sites)
