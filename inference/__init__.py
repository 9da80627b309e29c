"""Inference engines. Every engine has one signature::

    fit(spec, Phi, y, *, config=None) -> Posterior

with ``y`` a 0/1 vector and ``config`` a frozen dataclass holding the paper's defaults.
The registry maps (model name, engine name) to the fit function, so comparing engines
is a loop over names.
"""
from __future__ import annotations

from .posterior import ApproximationFailed, FitInfo, GaussianPosterior, PointPosterior, DrawsPosterior, Posterior

__all__ = ["ApproximationFailed", "FitInfo", "GaussianPosterior", "PointPosterior", "DrawsPosterior", "Posterior"]
