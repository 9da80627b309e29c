"""Model specs: each model of the zoo written once as a NumPyro function.

A spec is a frozen dataclass holding the hyper-parameters and the link, with
``model(Phi, y=None)`` the NumPyro model. Engines read their priors from the spec.
Which models the zoo offers, under which names, is the registry's business
(``validation/records/registry.py``), not this package's.
"""
from __future__ import annotations

from .base import Site, ModelSpec
from .pcvm import PCVM

__all__ = ["Site", "ModelSpec", "PCVM"]
