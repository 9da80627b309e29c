"""Another engine of your own: EP made mean-field (every correlation dropped).

A factorized approximation is a common shortcut: keep each weight's mean and variance,
forget how the weights move together. Its marginals are EP's exactly, so a verdict on means
and sds alone cannot tell it from EP; the joint verdict can, and names the direction:

    zoo compare --engines ep,examples.mean_field_ep:fit
"""
from __future__ import annotations

import dataclasses

import numpy as np

from zoo.inference import expectation_propagation


def fit(spec, Phi, y, *, config=None):
    """PCVM's EP with its covariance replaced by the diagonal of it."""
    full = expectation_propagation.fit(spec, Phi, y, config=config)
    sd = np.sqrt(np.sum(np.asarray(full.chol) ** 2, axis=1))
    return dataclasses.replace(full, chol=np.diag(sd))
