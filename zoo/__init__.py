"""Sparse Bayesian classifier zoo.

The import package ``zoo`` is assembled from the top-level folders of the repository:
``zoo.models`` <- ``models/``, ``zoo.inference`` <- ``inference/``,
``zoo.validation`` <- ``validation/``, ``zoo.data`` <- ``data/`` (see pyproject.toml).

Importing it switches JAX to float64: every engine and reference in this project is
compared at the 1e-3 level and below, where float32 round-off would be visible.
"""
from __future__ import annotations

import os as _os

import jax as _jax

_jax.config.update("jax_enable_x64", True)

# Running from a source checkout without installing: let ``zoo.models`` etc. resolve to
# the top-level folders. An installed copy already has them inside this package.
_here = _os.path.dirname(_os.path.abspath(__file__))
_repo = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "models")) and _os.path.isdir(
    _os.path.join(_repo, "models")
):
    __path__.append(_repo)  # type: ignore[name-defined]  # noqa: F821

__version__ = "0.1.0"
