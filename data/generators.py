"""Synthetic data: the generators of the benchmark pools and fresh draws, and the
simulation designs of the papers (GGIG Section 6.1, Horii Section 4.1). Every draw comes
from the version-stable streams of ``splits.py``.

Synthetic sets (formulas in the generator docstrings): ``waveform`` (Breiman et al.
1984; fixed pool of 5000, IDA-style splits), ``spiral`` (Lang & Witbrock 1988; fixed
deterministic pool, IDA-style splits), ``cross`` and ``overlap`` (fresh balanced draws
per split). Fixed single splits: ``ripley``, ``esl_mixture``, ``a1a``, ``w1a``.
"""
from __future__ import annotations

import math

import numpy as np

from .parsers import EslMixture
from .splits import POOL_STREAM, PROJECT_SEED, SEED_IDS, Split, bitgen, standard_normal, uniform

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

    With attributes m = 1..21 and base waves::

        h1(m) = max(6 - |m - 7|, 0),  h2(m) = h1(m - 8),  h3(m) = h1(m - 4),

    a class c is drawn uniformly from {0, 1, 2}, u ~ U(0, 1), eps_m ~ N(0, 1) i.i.d., and::

        class 0: x_m = u h1(m) + (1 - u) h2(m) + eps_m
        class 1: x_m = u h1(m) + (1 - u) h3(m) + eps_m
        class 2: x_m = u h2(m) + (1 - u) h3(m) + eps_m.

    Returns X (n, 21) and the three-class label c (n,) as float.
    ``key`` seeds the stream (default: the project's fixed waveform pool).
    """
    bg = bitgen(*(key if key is not None else (SEED_IDS["waveform"], POOL_STREAM)))
    cls = np.minimum(np.floor(3.0 * uniform(bg, n)), 2).astype(int)
    u = uniform(bg, n)
    eps = standard_normal(bg, n * 21).reshape(n, 21)
    h = _waveform_base()
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    first, second = h[pairs[cls, 0]], h[pairs[cls, 1]]
    X = u[:, None] * first + (1.0 - u[:, None]) * second + eps
    return X, cls.astype(float)


def spiral_points(density: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Two intertwined spirals (Lang & Witbrock 1988, CMU benchmark).

    For i = 0, 1, ..., 96 * density::

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
    """Two equal Gaussians, one rotated by 90 degrees: an overlapping "+" cross::

        class 0: x ~ N(0, diag(s_long^2, s_short^2))   (horizontal arm)
        class 1: x ~ N(0, diag(s_short^2, s_long^2))   (vertical arm, = class 0 rotated 90°)

    with (s_long, s_short) = CROSS_SD = (1, 0.15). The Bayes rule is ``|x1| > |x2|`` -> class 0
    and the Bayes error is (2 / pi) * arctan(s_short / s_long) = 0.0948. Returns n0 rows
    of class 0 then n1 of class 1.
    """
    s_long, s_short = CROSS_SD
    z = standard_normal(bg, 2 * (n0 + n1)).reshape(n0 + n1, 2)
    scale = np.concatenate(
        [np.tile([s_long, s_short], (n0, 1)), np.tile([s_short, s_long], (n1, 1))]
    )
    return z * scale, np.concatenate([np.zeros(n0), np.ones(n1)])


def overlap_sample(bg: np.random.PCG64, n0: int, n1: int) -> tuple[np.ndarray, np.ndarray]:
    """Two overlapping isotropic Gaussians::

        class 0: x ~ N((-1, 0), I),   class 1: x ~ N((+1, 0), I)   (OVERLAP_MEANS)

    The Bayes rule is x1 > 0 -> class 1 and the Bayes error is Phi(-1) = 0.1587.
    Returns n0 rows of class 0 then n1 of class 1.
    """
    z = standard_normal(bg, 2 * (n0 + n1)).reshape(n0 + n1, 2)
    means = np.concatenate([np.tile(OVERLAP_MEANS[0], (n0, 1)), np.tile(OVERLAP_MEANS[1], (n1, 1))])
    return z + means, np.concatenate([np.zeros(n0), np.ones(n1)])


def esl_test_sample(m: EslMixture, n_per_class: int) -> tuple[np.ndarray, np.ndarray]:
    """Fresh draws from the ESL mixture: a centre uniformly among the class's 10, then
    x ~ N(centre, I / 5); n_per_class rows of class 0, then of class 1."""
    bg = bitgen(SEED_IDS["esl_mixture"], POOL_STREAM)
    rows, labels = [], []
    for c in (0, 1):
        centres = m.means[m.means_class == c]
        k = centres.shape[0]
        pick = np.minimum(np.floor(k * uniform(bg, n_per_class)), k - 1)
        z = standard_normal(bg, 2 * n_per_class).reshape(n_per_class, 2)
        rows.append(centres[pick.astype(int)] + math.sqrt(m.component_var) * z)
        labels.append(np.full(n_per_class, float(c)))
    return np.concatenate(rows), np.concatenate(labels)


_GGIG_LINEAR_SEED_ID = SEED_IDS["ggig_linear"]
#: relevant weight of the ggig_linear_weak variant (the paper's design has 3)
GGIG_WEAK_WEIGHT = 0.3


def ggig_linear_arrays(n_relevant: int, n_train: int, repetition: int = 0, *, n_test: int = 3000,
                        n_features: int = 50, weight: float = 3.0):
    """The arrays of one repetition of :func:`ggig_linear`'s design, (X_train, y_train, X_test,
    y_test), without the Split around them; ``weight`` is the value of the relevant weights (the
    paper's 3; ``GGIG_WEAK_WEIGHT`` for ggig_linear_weak). ValueError for a size that is not a
    positive integer, ``n_relevant`` above ``n_features`` or a negative repetition."""
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
        bg = bitgen(_GGIG_LINEAR_SEED_ID, n_features, n_relevant, int(repetition), stream, n)
        X = standard_normal(bg, n * n_features).reshape(n, n_features)
        y = (X @ w + standard_normal(bg, n) > 0).astype(np.float64)
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
    X_train, y_train, X_test, y_test = ggig_linear_arrays(
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


_HORII_SEED_ID = SEED_IDS["horii_synthetic"]


def horii_beta_star() -> np.ndarray:
    """The true coefficients of Horii's synthetic design: 90 zeros, then 10 twos."""
    return np.concatenate([np.zeros(90), np.full(10, 2.0)])


def horii_synthetic_arrays(repetition: int = 0, *, n_train: int = 100, n_test: int = 1000):
    """The arrays of one repetition of :func:`horii_synthetic`'s design, (X_train, y_train,
    X_test, y_test), without the Split around them. ValueError for a size that is not a positive
    integer or a negative repetition."""
    for value, what in ((n_train, "n_train"), (n_test, "n_test")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}")
    if isinstance(repetition, bool) or not isinstance(repetition, (int, np.integer)) or repetition < 0:
        raise ValueError(f"repetition must be a non-negative integer, got {repetition!r}")
    beta = horii_beta_star()

    def draw(stream: int, n: int):
        bg = bitgen(_HORII_SEED_ID, int(repetition), stream, n)
        X = standard_normal(bg, n * beta.size).reshape(n, beta.size)
        p = 1.0 / (1.0 + np.exp(-(X @ beta)))
        y = (uniform(bg, n) < p).astype(np.float64)
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
    X_train, y_train, X_test, y_test = horii_synthetic_arrays(repetition, n_train=n_train, n_test=n_test)
    return Split(
        name="horii_synthetic", split=int(repetition), X_train=X_train, y_train=y_train,
        X_test=X_test, y_test=y_test, feature_names=tuple(f"x{i + 1}" for i in range(X_train.shape[1])),
        standardization=None,
        source=(f"generated: Horii Section 4.1 design, repetition {repetition}, "
                f"SeedSequence[{PROJECT_SEED}, {_HORII_SEED_ID}, {repetition}, stream, n]"),
    )


#: the stream of noise_features (a fixed word, never used by another generator)
NOISE_FEATURE_STREAM = 310_001


def noise_features(seed: int, k: int, n_rows: int) -> np.ndarray:
    """(n_rows, k) N(0, 1) noise features, appended to a data set's inputs to see how a
    model copes with irrelevant inputs (the gridRVM paper's ESL experiment). Column j comes
    from its own numpy Generator seeded by [NOISE_FEATURE_STREAM, seed, j], so the first k
    columns are the same whatever the largest k of a grid (the noise of k = 5 is part of the
    noise of k = 30: nested, as adding features to one data set). Draw the training and
    test rows in one call and split them, so that both get noise from the same columns."""
    if k == 0:
        return np.zeros((n_rows, 0))
    return np.stack([np.random.default_rng([NOISE_FEATURE_STREAM, int(seed), j]).standard_normal(n_rows)
                     for j in range(k)], axis=1)


#: the stream of :func:`flipped_labels`. It was meant to be distinct from every other
#: seeded draw but shares its number with the gridRVM digits entry's subsample stream
#: (reproductions/gridrvm.py); the two never feed one experiment, and changing
#: either would change published numbers, so both stay and no new stream may take it
LABEL_FLIP_STREAM = 310_002


def flipped_labels(y, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(y with round(fraction * n) labels flipped, the flipped indices, sorted): label noise
    for the robustness experiments of BBLR (the noise Nguyen & Sanner add to the UCI sets,
    whose exact recipe the BBLR paper does not restate; ours: labels of training points
    drawn uniformly without replacement, inputs unchanged, test labels left clean). The
    indices come from a Generator seeded by [LABEL_FLIP_STREAM, seed], so the same
    (n, fraction, seed) always flips the same points."""
    y = np.asarray(y, dtype=float)
    if not 0.0 <= float(fraction) < 0.5:
        raise ValueError(f"the fraction of flipped labels must lie in [0, 0.5), got {fraction!r}")
    k = int(round(float(fraction) * y.size))
    idx = np.sort(np.random.default_rng([LABEL_FLIP_STREAM, int(seed)]).choice(y.size, size=k, replace=False))
    out = y.copy()
    out[idx] = 1.0 - out[idx]
    return out, idx
