"""Correlation matrices: random ones for the verdicts' simulations, and the replacements
the planted correlation defects put into an engine's answer (every marginal kept).

Shared by ``verdict.py`` (which simulates correlated posteriors and the defects against
them) and ``defects.py`` (which plants the same defects in real engines' answers), so the
simulated and the planted defects are one definition.
"""
from __future__ import annotations

import numpy as np

#: seed of the "rotated" defect's rotation (with the posterior's dimension: deterministic)
ROTATION_SEED = 20261127


def random_rotation(rng: np.random.Generator, d: int) -> np.ndarray:
    """A (d, d) orthogonal matrix drawn uniformly (Haar): QR of a Gaussian matrix, with
    the signs of R's diagonal moved into Q (without them QR's sign convention biases Q)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def unit_diagonal(cov: np.ndarray) -> np.ndarray:
    """The correlation matrix of a covariance matrix."""
    s = np.sqrt(np.diag(cov))
    return cov / np.outer(s, s)


def rotated_correlation(corr: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """Q R Q' renormalized to unit diagonal, Q a random rotation (``rng``; None: the fixed
    seed ROTATION_SEED with the dimension): the same spectrum of dependence, pointing
    elsewhere. On a posterior without correlations (R = I) it changes nothing."""
    d = corr.shape[0]
    q = random_rotation(rng if rng is not None else np.random.default_rng([ROTATION_SEED, d]), d)
    return unit_diagonal(q @ corr @ q.T)


def dropped_correlation(corr: np.ndarray) -> np.ndarray:
    """The identity: a mean-field posterior with the same marginals."""
    return np.eye(corr.shape[0])


def random_correlation(rng: np.random.Generator, d: int, spread: float = 1.0) -> np.ndarray:
    """A random (d, d) correlation matrix: a random rotation of eigenvalues whose logs are
    N(0, spread^2) (spread 1: a condition number of about 100 at d = 20, 400 at d = 200,
    like a regression posterior's), renormalized to unit diagonal."""
    q = random_rotation(rng, d)
    return unit_diagonal((q * np.exp(spread * rng.standard_normal(d))) @ q.T)
