"""Tests of the data layer (zoo.data: files, parsers, splits, generators, catalog), default tier."""
from __future__ import annotations

import hashlib
import math
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import zoo.data
from zoo import data as ds
from zoo.data import catalog, generators, splits

DESCRIBE = ds.describe()
ROWS = {r["name"]: r for r in DESCRIBE}
IDA = (
    "banana", "breast_cancer", "diabetis", "flare_solar", "german", "heart", "image",
    "ringnorm", "splice", "thyroid", "titanic", "twonorm", "waveform",
)
SPLIT_SETS = [r["name"] for r in DESCRIBE if r["kind"] in ("pool", "fresh")]
IDA_SIZES = {  # (train, test) of the IDA release (PUBLISHED_RESULTS.md, Table II)
    "banana": (400, 4900), "breast_cancer": (200, 77), "diabetis": (468, 300),
    "flare_solar": (666, 400), "german": (700, 300), "heart": (170, 100),
    "image": (1300, 1010), "ringnorm": (400, 7000), "splice": (1000, 2175),
    "thyroid": (140, 75), "titanic": (150, 2051), "twonorm": (400, 7000),
    "waveform": (400, 4600),
}


def digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


# ---------------------------------------------------------------------------- files
def test_shipped_files_match_sha256sums():
    results = zoo.data.verify()
    assert len(results) == 45  # 29 data-set files and posteriordb's licence and three posteriors (5 files each)
    assert all(results.values()), [name for name, ok in results.items() if not ok]


def test_sha256sums_lists_every_data_file():
    root = Path(zoo.data.__file__).parent
    on_disk = {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix != ".py"  # the layer's own modules
        and p.name not in ("PROVENANCE.md", "SHA256SUMS")
    }
    assert on_disk == set(zoo.data.checksums())


def test_files_readable_through_importlib_resources():
    node = resources.files("zoo.data").joinpath("ripley").joinpath("synth.tr")
    assert node.read_text().splitlines()[0].split() == ["xs", "ys", "yc"]
    with pytest.raises(FileNotFoundError, match="PROVENANCE"):
        zoo.data.read_bytes("keel/missing.dat")


# ---------------------------------------------------------------------------- describe
def test_describe_lists_every_name_once_with_the_ida_sizes():
    assert [r["name"] for r in DESCRIBE] == list(ds.names())
    assert len(set(ds.names())) == len(DESCRIBE)
    for r in DESCRIBE:
        for key in ("name", "n_train", "n_test", "dim", "n_splits", "positive", "source"):
            assert r[key] not in (None, ""), (r["name"], key)
    for name, (n_train, n_test) in IDA_SIZES.items():
        r = ROWS[name]
        assert (r["n_train"], r["n_test_nominal"], r["n_splits"]) == (n_train, n_test, 100)
        # the test set is only ever shrunk when the pool is too small, and then says so
        assert r["n_test"] == min(n_test, r["n_pool"] - n_train)
        if r["n_test"] < n_test:
            assert "shrunk" in r["notes"]
    assert ROWS["image"]["n_test"] == 786 and ROWS["image"]["n_pool"] == 2086
    assert ROWS["splice"]["n_pool"] == 3175


@pytest.mark.parametrize("name", ds.names())
def test_split_zero_loads_and_matches_describe(name):
    r = ROWS[name]
    s = ds.load(name)
    assert s.name == name and s.split == 0
    assert s.X_train.shape == (r["n_train"], r["dim"])
    assert s.X_test.shape == (r["n_test"], r["dim"])
    assert s.y_train.shape == (r["n_train"],) and s.y_test.shape == (r["n_test"],)
    for a in (s.X_train, s.X_test, s.y_train, s.y_test):
        assert a.dtype == np.float64 and np.all(np.isfinite(a))
    assert set(np.unique(s.y_train)) == {0.0, 1.0}
    assert set(np.unique(s.y_test)) == {0.0, 1.0}
    if s.feature_names is not None:
        assert len(s.feature_names) == r["dim"]
    assert isinstance(s.source, str) and s.source


# ---------------------------------------------------------------------------- splits
@pytest.mark.parametrize("name", SPLIT_SETS)
def test_every_split_has_both_classes_and_holds_stratification(name):
    r = ROWS[name]
    seen = set()
    for k in range(r["n_splits"]):
        s = ds.load(name, k, standardize=False)
        assert s.y_train.size == r["n_train"] and s.y_test.size == r["n_test"]
        assert set(np.unique(s.y_train)) == {0.0, 1.0}, k
        assert set(np.unique(s.y_test)) <= {0.0, 1.0}
        # Train and test together are the whole pool (no pool here exceeds train + the
        # IDA test size), so the pool proportion is their joint proportion.
        n_pos = s.y_train.sum() + s.y_test.sum()
        pool_fraction = n_pos / (r["n_train"] + r["n_test"])
        if r["kind"] == "pool":
            assert abs(s.y_train.mean() - pool_fraction) <= 1.0 / r["n_train"], k
            assert n_pos == round(r["positive_fraction"] * r["n_pool"])
        else:  # fresh draws are balanced exactly
            assert s.y_train.sum() == r["n_train"] // 2
        seen.add(digest(s.X_train))
    assert len(seen) == r["n_splits"]  # every split has its own training set


@pytest.mark.parametrize("name", ["banana", "image", "splice", "thyroid", "titanic", "spiral"])
def test_train_and_test_partition_the_pool(name):
    # as multisets of rows (titanic and splice contain repeated rows)
    pool = catalog._cached(name)
    s = ds.load(name, 7, standardize=False)
    rows = np.concatenate([s.X_train, s.X_test])
    assert rows.shape == pool.X.shape
    got, got_counts = np.unique(rows, axis=0, return_counts=True)
    want, want_counts = np.unique(pool.X, axis=0, return_counts=True)
    assert np.array_equal(got, want) and np.array_equal(got_counts, want_counts)


def test_stratified_indices_disjoint_and_capped():
    y = np.array([1.0] * 30 + [0.0] * 70)
    bg = splits.bitgen(999, 0)
    train, test = splits.stratified_indices(y, 20, 50, bg)
    assert len(set(train) | set(test)) == 70 and not set(train) & set(test)
    assert y[train].sum() == 6  # floor(20 * 0.3 + 1/2)
    assert test.size == 50 and y[test].sum() == 15  # capped test set is stratified too
    train2, test2 = splits.stratified_indices(y, 20, 50, splits.bitgen(999, 0))
    assert np.array_equal(train, train2) and np.array_equal(test, test2)


@pytest.mark.parametrize("name", ["banana", "german", "waveform", "cross", "spiral"])
def test_repeat_calls_identical_and_splits_differ(name):
    a, b = ds.load(name, 3), ds.load(name, 3)
    for field in ("X_train", "y_train", "X_test", "y_test"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    c = ds.load(name, 4)
    assert not np.array_equal(a.X_train, c.X_train)


def test_splits_pinned_across_machines_and_numpy_versions():
    # Raw PCG64 output for a SeedSequence is stable by NumPy's policy; everything else
    # (permutation, stratification) is computed here, so these digests must never move.
    assert splits.bitgen(1, 2, 3).random_raw(2).tolist() == [
        14547588002505881146, 10353746385066530903,
    ]
    assert splits.permutation(splits.bitgen(1, 2, 3), 10).tolist() == [3, 6, 2, 8, 1, 7, 0, 9, 5, 4]
    pinned = {
        ("banana", 0): ("bff6cdce7693ff01", "40b309a017264666", "758996b31c8c838b"),
        ("banana", 57): ("fa5930c654653d45", "a0b1cbfe036789e7", "72d55297b61d36f6"),
        ("german", 3): ("fc73afb7847ac098", "04385e10de00e59f", "d0fcaeb15d1c419b"),
        ("image", 99): ("4e84aceb2387d106", "262d26d13de5e9cc", "988cac3235e607b8"),
        ("splice", 0): ("dcc15b845fe72343", "46c3ca614a8a6124", "b3ca3f326de539e7"),
    }
    for (name, k), want in pinned.items():
        s = ds.load(name, k, standardize=False)
        assert (digest(s.X_train), digest(s.y_train), digest(s.X_test)) == want, (name, k)
    # generated sets: labels only (features pass through libm log/cos)
    assert digest(ds.load("waveform", 5).y_train) == "c6a62e283a025da7"
    assert digest(ds.load("cross", 5).y_train) == "68e512dd85d27ddb"


# ---------------------------------------------------------------------------- standardization
@pytest.mark.parametrize(
    "name", ["ripley", "banana", "german", "splice", "image", "overlap", "a1a"]
)
def test_standardization_fitted_on_training_split(name):
    raw = ds.load(name, 2 if ROWS[name]["n_splits"] > 2 else 0, standardize=False)
    s = ds.load(name, raw.split)
    assert raw.standardization is None
    means, sds = s.standardization
    assert np.allclose(means, raw.X_train.mean(axis=0), rtol=0, atol=1e-12 * (1 + np.abs(means)))
    constant = np.ptp(raw.X_train, axis=0) == 0
    assert np.all(sds[constant] == 1.0)
    assert np.allclose(s.X_train.mean(axis=0), 0.0, atol=1e-10)
    assert np.allclose(s.X_train[:, ~constant].std(axis=0), 1.0, atol=1e-10)
    assert np.all(s.X_train[:, constant] == 0.0)
    assert np.allclose(s.X_test, (raw.X_test - means) / sds, atol=1e-12)
    assert np.array_equal(s.y_train, raw.y_train)


def test_constant_training_column_gets_unit_sd():
    st = splits.fit_standardization(np.array([[1.0, 5.0], [3.0, 5.0]]))
    assert st.sds.tolist() == [1.0, 1.0] and st.means.tolist() == [2.0, 5.0]


# ---------------------------------------------------------------------------- errors
def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="unknown data set 'bananas'.*valid names.*banana"):
        ds.load("bananas")
    with pytest.raises(ValueError, match="unknown LIBSVM data set"):
        ds.load_libsvm("banana")


@pytest.mark.parametrize(
    "name, split, pattern",
    [
        ("banana", 100, r"split 100 is out of range .*'banana'.*100 splits \(valid: 0\.\.99\)"),
        ("banana", -1, r"split -1 is out of range"),
        ("ripley", 1, r"split 1 is out of range .*'ripley'.*1 split \(valid: 0\)"),
        ("heart", 1.0, r"split must be an integer"),
        ("heart", True, r"split must be an integer"),
    ],
)
def test_bad_split_raises(name, split, pattern):
    with pytest.raises(ValueError, match=pattern):
        ds.load(name, split)


# ---------------------------------------------------------------------------- contents
def test_ida_pools_have_the_stated_labels_and_encodings():
    counts = {n: int(catalog._cached(n).y.sum()) for n in IDA}
    assert counts["breast_cancer"] == 81 and counts["diabetis"] == 268
    assert counts["flare_solar"] == 201 and counts["german"] == 300
    assert counts["heart"] == 120 and counts["thyroid"] == 65 and counts["titanic"] == 711
    assert counts["image"] == 899 and counts["splice"] == 1527
    splice = catalog._cached("splice").X.reshape(-1, 60, 4)
    assert np.all(splice.sum(axis=2) == 1.0)  # one base per position
    image = catalog._cached("image")
    assert "region_pixel_count" not in image.feature_names
    assert np.unique(image.X, axis=0).shape[0] == image.X.shape[0] == 2086
    bc = catalog._cached("breast_cancer")
    assert set(np.unique(bc.X[:, bc.feature_names.index("age")])) <= {
        24.5, 34.5, 44.5, 54.5, 64.5, 74.5
    }


def test_waveform_pool_follows_breiman():
    X, cls = ds.waveform_pool(5000)
    h = generators._waveform_base()
    assert h[0].argmax() == 6 and h[2].argmax() == 10 and h[1].argmax() == 14
    pairs = [(0, 1), (0, 2), (1, 2)]
    for c, (i, j) in enumerate(pairs):
        rows = X[cls == c]
        # E[x] = (h_i + h_j) / 2 since E[u] = 1/2; Var(x_m) <= 36/12 + 1 = 4, so the sd
        # of a class mean is <= 2 / sqrt(n_c) ~ 0.05; 5 sd tolerance.
        tol = 5 * 2 / math.sqrt(rows.shape[0])
        assert np.all(np.abs(rows.mean(axis=0) - (h[i] + h[j]) / 2) < tol)
    # classes equiprobable: 5000 / 3 with binomial sd 33; 4 sd tolerance
    assert np.all(np.abs(np.bincount(cls.astype(int)) - 5000 / 3) < 4 * 33.4)


def test_spiral_is_lang_witbrock():
    X, y = ds.spiral_points(1)
    assert X.shape == (194, 2) and y.sum() == 97
    assert np.allclose(X[0], [0.0, 6.5])  # i = 0: phi = 0, r = 6.5
    assert np.allclose(X[97], [0.0, -6.5])  # the other arm is the point reflection
    r = np.hypot(X[:97, 0], X[:97, 1])
    assert np.all(np.diff(r) < 0) and np.isclose(r[-1], 6.5 * 8 / 104)
    dense, _ = ds.spiral_points(4)
    assert {tuple(np.round(p, 12)) for p in X} <= {tuple(np.round(p, 12)) for p in dense}


@pytest.mark.parametrize(
    "sampler, rule, bayes",
    [
        (ds.cross_sample, lambda X: np.abs(X[:, 1]) > np.abs(X[:, 0]), 2 / np.pi * np.arctan(0.15)),
        (ds.overlap_sample, lambda X: X[:, 0] > 0, 0.5 * math.erfc(1 / math.sqrt(2))),
    ],
)
def test_gaussian_toys_have_the_stated_bayes_error(sampler, rule, bayes):
    n = 20000
    X, y = sampler(splits.bitgen(4242, 0), n // 2, n // 2)
    err = np.mean(rule(X) != (y == 1))
    # binomial sd sqrt(p(1-p)/n) ~ 0.0021-0.0026; 4 sd tolerance
    assert abs(err - bayes) < 4 * math.sqrt(bayes * (1 - bayes) / n)


def test_esl_mixture_grid_is_the_bayes_posterior_of_the_centres():
    m = ds.load_esl_mixture()
    assert m.X_train.shape == (200, 2) and m.y_train.sum() == 100
    assert m.grid_X.shape == (6831, 2) and m.px1.size == 69 and m.px2.size == 99
    assert np.allclose(m.posterior(m.grid_X), m.grid_prob, atol=1e-12)
    assert abs(m.bayes_error - 0.2101) < 5e-5
    s = ds.load("esl_mixture", standardize=False)
    err = np.mean((m.posterior(s.X_test) > 0.5) != (s.y_test == 1))
    # 5000 test draws: binomial sd sqrt(.21 * .79 / 5000) = 0.0058; 4 sd tolerance
    assert abs(err - m.bayes_error) < 4 * 0.0058


def test_libsvm_sets():
    a = ds.load_libsvm("a1a")
    assert a.X_train.shape == (1605, 123) and a.X_test.shape == (30956, 123)
    assert a.y_train.sum() == 395 and a.y_test.sum() == 7446
    assert set(np.unique(a.X_train)) == {0.0, 1.0} and a.standardization is None
    assert np.all(a.X_train[:, 119:] == 0)  # the training file never uses 120..123
    w = ds.load_libsvm("w1a")
    assert w.X_train.shape == (2477, 300) and w.X_test.shape == (47272, 300)
    assert w.y_train.sum() == 72 and w.y_test.sum() == 1407


def test_ripley_is_the_original_files():
    s = ds.load("ripley", standardize=False)
    assert s.y_train.sum() == 125 and s.y_test.sum() == 500
    assert np.allclose(s.X_train[0], [0.05100797, 0.16086164])


def test_digits_are_the_8_by_8_images_with_even_digits_positive():
    split = zoo.data.load("digits_even_odd", 0, standardize=False)
    assert split.X_train.shape == (500, 64) and split.X_test.shape == (1297, 64)
    X = np.vstack([split.X_train, split.X_test])
    assert X.min() == 0.0 and X.max() == 1.0
    # the three pixels that are blank in every image, in row-major order: (0,0), (4,0), (4,7)
    assert list(np.where(X.max(axis=0) == 0.0)[0]) == [0, 32, 39]
    y = np.concatenate([split.y_train, split.y_test])
    assert int(y.sum()) == 891  # 0, 2, 4, 6, 8: 178 + 177 + 181 + 181 + 174


def test_statlog_heart_is_the_whole_heart_pool_split_80_20():
    """The BBLR paper's Heart: heart's 270 Statlog records (same file and parser), split
    216 / 54 with its own seed id, so the IDA-style heart splits are unchanged."""
    r = ROWS["statlog_heart"]
    assert (r["n_pool"], r["n_train"], r["n_test"], r["dim"]) == (270, 216, 54, 13)
    pool = catalog._cached("heart")
    assert np.array_equal(catalog._cached("statlog_heart").X, pool.X)
    assert splits.SEED_IDS["statlog_heart"] not in {v for k, v in splits.SEED_IDS.items() if k != "statlog_heart"}
    s = ds.load("statlog_heart", 4, standardize=False)
    rows = np.concatenate([s.X_train, s.X_test])
    assert np.array_equal(np.unique(rows, axis=0), np.unique(pool.X, axis=0)) and rows.shape == pool.X.shape
    assert s.y_train.sum() + s.y_test.sum() == 120 and s.y_train.sum() == round(216 * 120 / 270)
    assert not np.array_equal(s.X_train[:170], ds.load("heart", 4, standardize=False).X_train)
