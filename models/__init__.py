"""Model specs: each model of the zoo written once as a NumPyro function.

A spec is a frozen dataclass holding the hyper-parameters and the link, with
``model(Phi, y=None)`` the NumPyro model. Engines read their priors from the spec.
"""
from __future__ import annotations

from .base import Site, ModelSpec
from .pcvm import PCVM

# CLI name -> spec class. Later models register here.
MODEL_REGISTRY: dict[str, type] = {"pcvm": PCVM}

__all__ = ["Site", "ModelSpec", "PCVM", "MODEL_REGISTRY"]
