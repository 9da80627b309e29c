"""Split generation: seeded, version-stable random streams, stratified train/test
splits, the standardization of inputs, and the :class:`Split` every loader returns.

Splits
------
The original IDA split files (Rätsch et al. 2001) could not be obtained, so the 13 IDA
problems are rebuilt from the underlying raw data and re-split:

* Every split ``k`` of data set ``name`` uses its own PCG64 stream, seeded by
  ``numpy.random.SeedSequence([PROJECT_SEED, seed id of name, k])``. Only the raw 64-bit
  output of the bit generator is used (``PCG64.random_raw``), and the permutation, the
  uniforms and the normals are written here. NumPy promises a stable stream for a given
  bit generator and seed, but not for ``Generator`` methods such as ``permutation`` or
  ``normal``, so this keeps the splits identical across machines and NumPy versions.
  (The normals go through ``log``/``cos`` of the C library, so generated *features* may
  differ in the last bit between platforms; split indices cannot.)
* A permutation is ``argsort`` (stable) of one raw 64-bit key per item.
* Stratified split: with ``n`` pool rows, ``n1`` positives and ``m`` training rows, the
  training set takes ``floor(m * n1 / n + 1/2)`` positives (at least one of each class)
  from a random permutation of the positives, and the rest from a permutation of the
  negatives; its rows are then put in a random order (some files are sorted by class).
  Everything left over is the test set, in pool order. If more is left over than the
  IDA test size, the test set is cut to that size, again stratified. If less is left
  over (image), the test set is smaller than IDA's; :func:`~zoo.data.describe` says so.
* 100 splits for every IDA problem (EPCVM used 100 for all 13, also for image and
  splice, which have 20 in the IDA release).

Standardization
---------------
With ``standardize=True`` (the default) every input column is shifted and scaled to zero
mean and unit standard deviation (``ddof=0``) on the *training* split; the test split
gets the same affine map. A column that is constant on the training split gets sd 1
(it becomes all zeros in training; test values keep their offset from the training
value). The fitted means and sds are in ``Split.standardization``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

#: First word of every SeedSequence used for splits and synthetic data. Never change it:
#: it would change every split.
PROJECT_SEED = 20140601

# Second word of the SeedSequence: a fixed id per data set. Ids are never reused or
# renumbered, so that adding a data set leaves the splits of the others unchanged.
SEED_IDS = {
    "ripley": 1,
    "banana": 2,
    "breast_cancer": 3,
    "diabetis": 4,
    "flare_solar": 5,
    "german": 6,
    "heart": 7,
    "image": 8,
    "ringnorm": 9,
    "splice": 10,
    "thyroid": 11,
    "titanic": 12,
    "twonorm": 13,
    "waveform": 14,
    "spiral": 15,
    "cross": 16,
    "overlap": 17,
    "esl_mixture": 18,
    "a1a": 19,
    "w1a": 20,
    "ggig_linear": 21,
    # reserved: ggig_linear_weak deliberately reuses ggig_linear's streams (same inputs
    # and noise, only a weaker signal), so this id is never drawn from
    "ggig_linear_weak": 22,
    "horii_synthetic": 23,
    "digits_even_odd": 24,
    "pima": 25,
    "liver": 26,
    "breast_wisconsin": 27,
    "statlog_heart": 28,
}
# Third word for the stream that generates a fixed pool (split streams use 0..99).
POOL_STREAM = 2**31 - 1



class Standardization(NamedTuple):
    """Per-column affine map fitted on a training split: ``x_std = (x - means) / sds``.

    means, sds: shape (d,). Columns constant on the training split have sd 1.
    """

    means: np.ndarray
    sds: np.ndarray

    def apply(self, X) -> np.ndarray:
        """Standardize X (n, d) with the fitted means and sds."""
        return (np.asarray(X, dtype=float) - self.means) / self.sds


@dataclass(frozen=True, eq=False)
class Split:
    """One train/test split of a data set.

    Attributes:

    * name: data set name (as passed to :func:`~zoo.data.load`).
    * split: split index k.
    * X_train: (n_train, d) float64 inputs (standardized unless ``standardize=False``).
    * y_train: (n_train,) float64 labels in {0, 1}.
    * X_test: (n_test, d) float64 inputs, same map as the training inputs.
    * y_test: (n_test,) float64 labels in {0, 1}.
    * feature_names: tuple of d column names, or None.
    * standardization: the fitted :class:`Standardization` (means, sds over the
      training split), or None when the inputs were returned raw.
    * source: where the rows came from and how the split was drawn.
    """

    name: str
    split: int
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...] | None
    standardization: Standardization | None
    source: str

    @property
    def n_features(self) -> int:
        """d, the number of input columns (of the training and the test inputs alike)."""
        return self.X_train.shape[1]


def bitgen(*key: int) -> np.random.PCG64:
    """The PCG64 bit generator of the stream ``key``, seeded by
    ``SeedSequence([PROJECT_SEED, *key])`` (for a split: the data set's seed id, then k). Only its
    raw output is used (:func:`permutation`, :func:`uniform`, :func:`standard_normal`)."""
    return np.random.PCG64(np.random.SeedSequence([PROJECT_SEED, *key]))


def permutation(bg: np.random.PCG64, n: int) -> np.ndarray:
    """A random permutation of range(n): stable argsort of n raw 64-bit keys."""
    return np.argsort(bg.random_raw(n), kind="stable")


def uniform(bg: np.random.PCG64, n: int) -> np.ndarray:
    """n draws from U[0, 1): the top 53 bits of each raw output."""
    return (bg.random_raw(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def standard_normal(bg: np.random.PCG64, n: int) -> np.ndarray:
    """n standard normals by the Box–Muller transform of raw uniforms."""
    m = (n + 1) // 2
    u1 = uniform(bg, m)
    u2 = uniform(bg, m)
    radius = np.sqrt(-2.0 * np.log1p(-u1))  # 1 - u1 lies in (0, 1]: log is finite
    angle = 2.0 * np.pi * u2
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]


def _half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def stratified_indices(
    y: np.ndarray, n_train: int, n_test: int, bg: np.random.PCG64
) -> tuple[np.ndarray, np.ndarray]:
    """Stratified train/test indices into a pool with labels y (see module docstring)."""
    n = y.shape[0]
    pos = np.flatnonzero(y == 1)
    neg = np.flatnonzero(y == 0)
    frac = pos.size / n
    n_pos_train = min(max(_half_up(n_train * frac), 1), pos.size - 1, n_train - 1)
    n_neg_train = n_train - n_pos_train
    pos = pos[permutation(bg, pos.size)]
    neg = neg[permutation(bg, neg.size)]
    train = np.concatenate([pos[:n_pos_train], neg[:n_neg_train]])
    train = train[permutation(bg, n_train)]
    rest_pos, rest_neg = pos[n_pos_train:], neg[n_neg_train:]
    if rest_pos.size + rest_neg.size <= n_test:
        test = np.concatenate([rest_pos, rest_neg])
    else:
        n_pos_test = min(_half_up(n_test * frac), rest_pos.size)
        test = np.concatenate([rest_pos[:n_pos_test], rest_neg[: n_test - n_pos_test]])
    return train, np.sort(test)


def fit_standardization(X: np.ndarray) -> Standardization:
    """The :class:`Standardization` fitted on training inputs ``X`` (n, d): column means and
    sds (``ddof=0``), with sd 1 for a column that is constant up to round-off."""
    means = X.mean(axis=0)
    sds = X.std(axis=0)
    # A column is constant when its spread is round-off relative to its magnitude.
    constant = sds <= 1e-12 * np.maximum(1.0, np.abs(means))
    sds = np.where(constant, 1.0, sds)
    return Standardization(means, sds)
