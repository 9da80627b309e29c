"""`SparseBayesClassifier`: scikit-learn conventions, label handling, input checks.

Data: 78 Ripley training points (seeded subset, 39 per class, so that every training
fold of a stratified 3-fold CV has the same size, 52, and JAX compiles once for it;
inputs standardized on the full training split) and the 1000 Ripley test points.
Ripley's Bayes error is about 8%; PCVM on these points measured 10.2% (laplace), 13.6% (em) and 13.0% (ep, first 60
points) test error at width 0.7, and GIG logistic (vb, linear with a bias column) 10.9%. The bound used below, 20%, is well above that and far
below what a broken label mapping gives (a swapped mapping errs on 86-90%, a constant
prediction on 50%).
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.model_selection import GridSearchCV

import zoo  # noqa: F401
from problems import ripley_split
from zoo.classifier import SparseBayesClassifier, classifier_engines, classifier_models

MAX_TEST_ERROR = 0.20


@pytest.fixture(scope="module")
def ripley():
    """(X_train (78, 2), y_train labels 'a'/'b', X_test (1000, 2), y_test 'a'/'b')."""
    split = ripley_split()
    rng = np.random.default_rng(0)
    pos = rng.permutation(np.flatnonzero(split.y_train == 1))[:39]
    neg = rng.permutation(np.flatnonzero(split.y_train == 0))[:39]
    idx = rng.permutation(np.concatenate([pos, neg]))
    to_str = lambda y: np.where(y == 1, "b", "a")  # noqa: E731
    return split.X_train[idx], to_str(split.y_train[idx]), split.X_test, to_str(split.y_test)


@pytest.fixture(scope="module", params=["laplace", "em"])
def fitted(request, ripley):
    X, y, _, _ = ripley
    return SparseBayesClassifier(engine=request.param, width=0.7).fit(X, y)


# --------------------------------------------------------------------------------------
# scikit-learn conventions
# --------------------------------------------------------------------------------------
def test_get_set_params_and_clone():
    clf = SparseBayesClassifier(engine="em", width=0.5, seed=3)
    assert clf.get_params() == {"model": "pcvm", "engine": "em", "width": 0.5, "seed": 3,
                                "basis": "rbf", "verbose": 0, "scan": None, "q": None, "gamma": None,
                                "table_shape": None, "delta": None, "k": None, "theta": None, "rho": None}
    assert clf.set_params(width=0.9) is clf and clf.width == 0.9
    twin = clone(clf)
    assert twin is not clf and twin.get_params() == clf.get_params()
    with pytest.raises(ValueError, match="Invalid parameter"):
        clf.set_params(kernel="rbf")


def test_predict_before_fit_raises_not_fitted(ripley):
    with pytest.raises(NotFittedError):
        SparseBayesClassifier().predict(ripley[2])


@pytest.mark.long
def test_clone_of_a_fitted_model_is_unfitted(fitted, ripley):
    twin = clone(fitted)
    assert not hasattr(twin, "posterior_")
    with pytest.raises(NotFittedError):
        twin.predict_proba(ripley[2])


def test_fit_predict_with_string_labels(fitted, ripley):
    X, y, X_test, y_test = ripley
    assert list(fitted.classes_) == ["a", "b"]
    assert fitted.n_features_in_ == 2
    assert 1 <= fitted.n_basis_ <= X.shape[0] and fitted.n_basis_ == len(fitted.active_)
    proba = fitted.predict_proba(X_test)
    assert proba.shape == (X_test.shape[0], 2)
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    pred = fitted.predict(X_test)
    assert set(np.unique(pred)) <= {"a", "b"}
    # column j of predict_proba belongs to classes_[j], and predict is its argmax
    np.testing.assert_array_equal(pred, fitted.classes_[np.argmax(proba, axis=1)])
    assert np.mean(pred != y_test) <= MAX_TEST_ERROR
    # score (ClassifierMixin) is the accuracy of predict
    assert fitted.score(X_test, y_test) == pytest.approx(np.mean(pred == y_test))
    np.testing.assert_allclose(fitted.decision_function(X_test), proba[:, 1] - 0.5)


def test_any_two_labels_map_back(ripley):
    """Integer labels other than 0/1, with the positive class being the larger one."""
    X, y, X_test, y_test = ripley
    y_int = np.where(y == "b", 7, -3)
    clf = SparseBayesClassifier(engine="laplace", width=0.7).fit(X, y_int)
    assert list(clf.classes_) == [-3, 7]
    pred = clf.predict(X_test)
    assert set(np.unique(pred)) <= {-3, 7}
    assert np.mean(pred != np.where(y_test == "b", 7, -3)) <= MAX_TEST_ERROR


def test_grid_search_over_width(ripley):
    X, y, X_test, _ = ripley
    grid = [0.5, 1.0]
    search = GridSearchCV(SparseBayesClassifier(engine="laplace"), {"width": grid}, cv=3).fit(X, y)
    assert search.best_params_["width"] in grid
    assert search.best_estimator_.width == search.best_params_["width"]
    scores = search.cv_results_["mean_test_score"]
    assert scores.shape == (2,) and np.all(np.isfinite(scores)) and np.all(scores > 0.5)
    assert set(np.unique(search.predict(X_test))) <= {"a", "b"}


def test_em_is_deterministic_for_a_seed(ripley):
    X, y, X_test, _ = ripley
    p1 = SparseBayesClassifier(engine="em", width=0.7, seed=1).fit(X, y).predict_proba(X_test)
    p2 = SparseBayesClassifier(engine="em", width=0.7, seed=1).fit(X, y).predict_proba(X_test)
    np.testing.assert_array_equal(p1, p2)


@pytest.mark.long
def test_ep_end_to_end_small(ripley):
    """One EP case (its end-to-end selection is the slowest engine)."""
    X, y, X_test, y_test = ripley
    clf = SparseBayesClassifier(engine="ep", width=0.7).fit(X[:60], y[:60])
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.mean(clf.predict(X_test) != y_test) <= MAX_TEST_ERROR


# --------------------------------------------------------------------------------------
# Bad input: ValueError naming the problem, at fit (before any engine runs)
# --------------------------------------------------------------------------------------
def _with_nan(X, y):
    X = X.copy()
    X[5, 1] = np.nan
    return X, y


def _one_class(X, y):
    return X, np.full(len(y), "a")


def _three_classes(X, y):
    y = y.copy().astype(object)
    y[:10] = "c"
    return X, y


def _length_mismatch(X, y):
    return X, y[:-1]


def _column(X, y):
    return X, y[:, None][:, [0, 0]]


def _continuous(X, y):
    return X, np.linspace(0.05, 0.95, len(y))


def _nan_label(X, y):
    y = np.where(y == "b", 1.0, 0.0)
    y[3] = np.nan
    return X, y


def _none_label(X, y):
    y = y.astype(object)
    y[4] = None
    return X, y


def _mixed_labels(X, y):
    y = y.astype(object)
    y[y == "b"] = 1
    return X, y


def _huge(X, y):
    return X * 1e300, y


BAD_FIT = {
    "NaN in X": (_with_nan, {}, "NaN"),
    "sparse X": (lambda X, y: (sp.csr_matrix(X), y), {}, "sparse input is not supported"),
    "complex X": (lambda X, y: (X + 1j, y), {}, "Complex data not supported"),
    "X without features": (lambda X, y: (X[:, :0], y), {}, r"0 feature\(s\) \(shape=\(78, 0\)\)"),
    "1-D X": (lambda X, y: (X[:, 0], y), {}, "Reshape your data"),
    "X too large for the kernel": (_huge, {}, "X has values too large"),
    "X too large for a linear design": (_huge, {"model": "gig-logistic", "engine": "vb", "basis": "linear"},
                                        "X has values too large"),
    "one class": (_one_class, {}, "one class"),
    "three classes": (_three_classes, {}, "Only binary classification is supported. y must hold exactly two classes"),
    "X/y length mismatch": (_length_mismatch, {}, "one label per row"),
    "y is None": (lambda X, y: (X, None), {}, "requires y to be passed, but the target y is None"),
    "y with two columns": (_column, {}, "1-D vector of labels"),
    "continuous y": (_continuous, {}, "y is continuous"),
    "NaN label": (_nan_label, {}, "NaN or infinite labels"),
    "None label": (_none_label, {}, "missing label"),
    "strings and numbers": (_mixed_labels, {}, "mixes int, str"),
    "negative width": (lambda X, y: (X, y), {"width": -0.5}, "width"),
    "zero width": (lambda X, y: (X, y), {"width": 0.0}, "width"),
    "unknown engine": (lambda X, y: (X, y), {"engine": "gibbs"}, "gibbs"),
    "unknown model": (lambda X, y: (X, y), {"model": "rvm2"}, "rvm2"),
}


@pytest.mark.parametrize("make,params,message", list(BAD_FIT.values()), ids=list(BAD_FIT))
def test_bad_fit_input_raises_value_error(make, params, message, ripley):
    X, y = make(*ripley[:2])
    with pytest.raises(ValueError, match=message):
        SparseBayesClassifier(**params).fit(X, y)


def test_a_dict_in_an_object_X_is_a_type_error(ripley):
    """As NumPy (and scikit-learn) say it: an entry that is no number is a TypeError."""
    X = ripley[0].astype(object)
    X[0, 0] = {"foo": "bar"}
    with pytest.raises(TypeError, match="X must be a numeric array: float.. argument must be a string or a real number"):
        SparseBayesClassifier().fit(X, ripley[1])


@pytest.mark.parametrize("params, message", [
    (dict(width="abc"), "width must be a positive number or 'median', got 'abc'"),
    (dict(width=None), "width must be a positive number or 'median', got None"),
    (dict(width=True), "width must be a positive number or 'median', got True"),
    (dict(width=np.inf), "width must be a positive number or 'median'"),
    (dict(seed="x"), r"seed must be an integer in \[0, 2\*\*32\), got 'x'"),
    (dict(seed=-1), r"seed must be an integer in \[0, 2\*\*32\), got -1"),
    (dict(seed=1.5), r"seed must be an integer in \[0, 2\*\*32\), got 1.5"),
    (dict(seed=2**32), r"seed must be an integer in \[0, 2\*\*32\)"),
    (dict(model="ggsm-probit", engine="mm", basis="linear", q="x"), "q must be a finite number or None, got 'x'"),
    (dict(model="bblr", engine="sla", basis="linear", gamma=-1.0), "gamma must be a positive number or None"),
    (dict(model="grid-rvm", engine="vb", basis="per-dimension-rbf", delta="x"), "delta must be a positive number"),
    (dict(basis=None), "basis must be one of 'rbf', 'linear', 'table', 'per-dimension-rbf', got None"),
    (dict(model=3), "model must be a string, one of pcvm, ggsm-probit, gig-logistic, grid-rvm, bblr; got 3"),
    (dict(engine=3), r"engine must be a string or None \(the model's own default\), for pcvm one of em, laplace, ep; "
                     "got 3"),
])
def test_bad_hyper_parameters_are_named_at_fit(params, message, ripley):
    with pytest.raises(ValueError, match=message) as err:
        SparseBayesClassifier(**params).fit(*ripley[:2])
    assert "\n" not in str(err.value)


def test_numpy_scalars_are_numbers(ripley):
    """Hyper-parameters from a NumPy grid (np.float32 width, np.int64 seed) are accepted."""
    X, y = ripley[:2]
    a = SparseBayesClassifier(engine="laplace", width=np.float32(0.5), seed=np.int64(2)).fit(X, y)
    b = SparseBayesClassifier(engine="laplace", width=float(np.float32(0.5)), seed=2).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(ripley[2]), b.predict_proba(ripley[2]))


@pytest.mark.long
def test_a_column_vector_y_is_raveled_with_a_warning(ripley):
    """scikit-learn's convention: y of shape (n, 1) warns (DataConversionWarning) and is used
    as the vector it holds - the same fit as with y itself."""
    X, y, X_test, _ = ripley
    plain = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y)
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y[:, None])
    assert list(column.classes_) == ["a", "b"]
    np.testing.assert_array_equal(column.predict_proba(X_test), plain.predict_proba(X_test))


def test_labels_from_an_object_column(ripley):
    """Labels as pandas hands them over (an object array of numbers or of strings)."""
    X, y, X_test, _ = ripley
    plain = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y)
    for labels, classes in ((np.where(y == "b", 1, 0).astype(object), [0, 1]), (y.astype(object), ["a", "b"])):
        clf = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, labels)
        assert list(clf.classes_) == classes
        np.testing.assert_array_equal(clf.predict_proba(X_test), plain.predict_proba(X_test))


def test_wrong_number_of_features_at_predict(fitted, ripley):
    X_test = ripley[2]
    with pytest.raises(ValueError, match="X has 3 features, but SparseBayesClassifier is expecting 2 features"):
        fitted.predict(np.column_stack([X_test, X_test[:, :1]]))
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict_proba(np.array([[0.0, np.nan]]))


@pytest.mark.parametrize("params, match", [
    (dict(model="pcvm", q=0.5), "q does not apply to pcvm"),
    (dict(model="pcvm", basis="linear"), "kernel model"),
    (dict(model="pcvm", table_shape=(1, 2)), "table_shape does not apply to pcvm"),
    (dict(model="ggsm-probit", engine="mm", basis="table"), "takes basis 'rbf' or 'linear'"),
    (dict(model="grid-rvm", engine="vb", basis="table"), "table_shape goes with basis='table'"),
    (dict(model="grid-rvm", engine="vb", basis="table", table_shape=(3, 1)), "rows x columns"),
    (dict(model="grid-rvm", engine="vb", basis="table", table_shape=(0, 2)), "no rows"),
    (dict(model="grid-rvm", engine="vb", basis="rbf", delta=2.0), "per-dimension RBF's parameter"),
    (dict(model="grid-rvm", engine="vb", basis="per-dimension-rbf", delta=-1.0), "delta must be a positive"),
    (dict(model="grid-rvm", engine="vb", q=1.0), "q does not apply to grid-rvm"),
    (dict(model="grid-rvm", engine="auto-laplace"), "no end-to-end mode"),
    (dict(model="ggsm-probit", engine="mm", gamma=0.4), "lap engine's rate"),
    (dict(model="ggsm-probit", engine="mm", basis="poly"), "basis must be one of"),
    (dict(model="ggsm-probit", engine="mm", q=3.0), "q must lie in"),
    (dict(model="ggsm-probit", engine="laplace"), "no engine"),
    (dict(model="bblr", engine="sla", basis="rbf"), "takes basis 'linear'"),
    (dict(model="bblr", engine="sla", basis="linear", q=1.0), "q does not apply to bblr"),
    (dict(model="bblr", engine="auto-laplace", basis="linear"), "no end-to-end mode"),
    (dict(model="bblr", engine="laplace", basis="rbf"), "use engine 'sla-sparse'"),
    (dict(model="bblr", engine="sla-sparse", basis="rbf", width="wide"), "positive number or 'median'"),
])
def test_invalid_model_options_raise_clear_errors(params, match):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), np.r_[np.zeros(10), np.ones(10)]
    with pytest.raises(ValueError, match=match):
        SparseBayesClassifier(**params).fit(X, y)


def test_ggsm_probit_classifier_predicts_with_the_columns_it_kept():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 6))
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=80) > 0).astype(int)
    clf = SparseBayesClassifier(model="ggsm-probit", engine="mm", basis="linear", q=0.5).fit(X, y)
    assert 1 <= clf.n_basis_ <= 7  # bias + 6 features at most
    proba = clf.predict_proba(X)
    assert proba.shape == (80, 2) and np.all((proba >= 0) & (proba <= 1))
    assert np.mean(clf.predict(X) == y) > 0.85


@pytest.mark.parametrize("engine, prior", [("vb", "p-grid"), ("vb-s-grid", "s-grid"), ("vb-rvm", "rvm")])
@pytest.mark.long
def test_grid_rvm_classifier_on_a_table(engine, prior):
    """Images as tables: 2 x 3 'pictures' whose class is carried by row 0; the classifier
    fits the engine's prior and reports its relevance summary."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 6))
    y = (X[:, 0] + X[:, 1] + X[:, 2] + 0.5 * rng.normal(size=120) > 0).astype(int)
    clf = SparseBayesClassifier(model="grid-rvm", engine=engine, basis="table", table_shape=(2, 3)).fit(X, y)
    assert clf.posterior_.spec.prior == prior and clf.posterior_.spec.shape == (2, 3)
    assert clf.n_basis_ == 6
    assert np.mean(clf.predict(X) == y) > 0.85
    alpha = clf.posterior_.info.extra["alpha_mean"]
    if prior != "rvm":  # row 0 carries the signal: its precision is the smaller
        assert alpha[0] < alpha[1]
    assert set(clf.posterior_.info.extra["pruning"]) >= {"relevant_weights", "relevant_rows", "relevant_columns"}


@pytest.mark.long
def test_grid_rvm_classifier_per_dimension_rbf_table(ripley):
    X, y = ripley[0], ripley[1]
    clf = SparseBayesClassifier(model="grid-rvm", engine="vb", basis="per-dimension-rbf").fit(X, y)
    assert clf.posterior_.spec.shape == (2, 78)  # (input dimension, training point)
    assert list(clf.classes_) == ["a", "b"]
    assert clf.predict_proba(ripley[2][:5]).shape == (5, 2)


@pytest.mark.parametrize("engine", ["sla", "laplace"])
@pytest.mark.long
def test_bblr_classifier_chooses_lam_by_validation_and_keeps_string_labels(engine):
    """BBLR3 as the classifier runs it: a, b from the class counts, lam by SLAM's
    held-out fifth (fewest errors, ties to the larger lam), gamma as given."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 3))
    y = np.where(X[:, 0] - 0.5 * X[:, 2] + 0.4 * rng.normal(size=150) > 0, "pos", "neg")
    clf = SparseBayesClassifier(model="bblr", engine=engine, basis="linear", gamma=2.0).fit(X, y)
    sel = clf.posterior_.info.extra["selection"]
    errors = np.asarray(sel["validation_errors"])
    assert clf.spec_.gamma == 2.0 and clf.spec_.lam == sel["lam"]
    assert sel["lam"] == max(l for l, e in zip(sel["lam_grid"], errors) if e == errors.min())
    assert clf.spec_.b == 0.5 and clf.spec_.a == pytest.approx(np.mean(y == "pos") / 2)
    assert clf.n_basis_ == 4 and list(clf.classes_) == ["neg", "pos"]
    assert np.mean(clf.predict(X) == y) > 0.85


@pytest.mark.long
def test_sparse_kernel_bblr_classifier_keeps_the_em_columns_with_the_median_width():
    """Sparse KBBLR through the classifier: the median-heuristic width, BBLR2's a, b, the
    Gaussian-Laplace prior at the EM's end point, and predictions from the kept columns
    only. Two blobs 3 apart (seeded): here the EM keeps a few kernel functions (on other
    draws of so few points it can keep none, tests/inference/test_sparse_kbblr.py)."""
    from zoo.models.basis import median_heuristic_width

    rng = np.random.default_rng(1)
    y = np.repeat(["neg", "pos"], 50)
    X = rng.normal(size=(100, 2)) + np.where(y == "pos", 1.5, -1.5)[:, None] * np.array([1.0, 0.0])
    clf = SparseBayesClassifier(model="bblr", engine="sla-sparse", basis="rbf", width="median").fit(X, y)
    extra = clf.posterior_.info.extra
    assert clf.basis_.width == median_heuristic_width(X) and clf.basis_.n_basis == clf.n_basis_
    assert clf.spec_.prior == "gauss-laplace" and clf.spec_.b == 0.5 and clf.spec_.pi == extra["pi"]
    assert 0 < clf.n_basis_ < 20 and list(clf.active_) == list(extra["kept"])
    np.testing.assert_allclose(clf.basis_.centres, X[clf.active_])
    assert np.mean(clf.predict(X) == y) > 0.9 and list(clf.classes_) == ["neg", "pos"]


# --------------------------------------------------------------------------------------
# GIG-hierarchical logistic regression (Horii): linear with a bias column, VB end to end
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gig_fitted(ripley):
    X, y, _, _ = ripley
    return SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y)


def test_every_model_has_a_classifier_and_every_engine_listed_runs_end_to_end():
    from zoo.validation.records import registry

    assert classifier_models() == registry.model_names()
    assert classifier_engines("gig-logistic") == ("vb",)
    for model in classifier_models():
        for name in classifier_engines(model):
            registry.get_engine(model, name).fit_end_to_end()  # importable, keeps the contract's name


def test_gig_logistic_classifier_is_horii_vb_on_the_linear_design_with_a_bias(gig_fitted, ripley):
    """The classifier's answer is the VB engine's on [1 | X] at the default hyper-prior: the
    same numbers as running the engine by hand on that design."""
    from zoo.inference import gig_vb
    from zoo.models.gig_logistic import GIGLogistic

    X, y, X_test, y_test = ripley
    assert list(gig_fitted.classes_) == ["a", "b"] and gig_fitted.n_features_in_ == 2
    assert gig_fitted.n_basis_ == 3 and list(gig_fitted.active_) == [0, 1, 2]  # VB keeps every column
    assert isinstance(gig_fitted.spec_, GIGLogistic)
    assert (gig_fitted.spec_.k, gig_fitted.spec_.theta, gig_fitted.spec_.rho) == (1.0, 1.0, 1.0)
    assert gig_fitted.posterior_.info.converged
    by_hand = gig_vb.fit(GIGLogistic(), np.column_stack([np.ones(len(X)), X]), (y == "b").astype(float))
    p1 = by_hand.predict_proba(np.column_stack([np.ones(len(X_test)), X_test]))
    proba = gig_fitted.predict_proba(X_test)
    np.testing.assert_allclose(proba[:, 1], p1, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    pred = gig_fitted.predict(X_test)
    np.testing.assert_array_equal(pred, gig_fitted.classes_[np.argmax(proba, axis=1)])
    assert np.mean(pred != y_test) <= MAX_TEST_ERROR


@pytest.mark.long
def test_gig_logistic_classifier_takes_its_hyper_prior(ripley):
    """k, theta, rho reach the spec the VB fits (Horii's nearly improper k = theta = 1e-6
    here), and are scikit-learn parameters (get_params / set_params, so a grid can
    search them)."""
    from zoo.inference import gig_vb
    from zoo.models.gig_logistic import GIGLogistic

    X, y = ripley[:2]
    clf = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear", k=1e-6, theta=1e-6, rho=0.5)
    assert {"k", "theta", "rho"} <= set(clf.get_params())
    clf.fit(X, y)
    assert (clf.spec_.k, clf.spec_.theta, clf.spec_.rho) == (1e-6, 1e-6, 0.5)
    by_hand = gig_vb.fit(GIGLogistic(k=1e-6, theta=1e-6, rho=0.5), np.column_stack([np.ones(len(X)), X]),
                         (y == "b").astype(float))
    np.testing.assert_allclose(clf.posterior_.mean_flat(), by_hand.mean_flat(), rtol=1e-8)


def test_gig_logistic_classifier_maps_any_two_labels_back(ripley):
    X, y, X_test, y_test = ripley
    y_int = np.where(y == "b", 7, -3)
    clf = SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y_int)
    assert list(clf.classes_) == [-3, 7]
    assert np.mean(clf.predict(X_test) != np.where(y_test == "b", 7, -3)) <= MAX_TEST_ERROR


@pytest.mark.parametrize("params, match", [
    (dict(model="gig-logistic", engine="vb"), "takes basis 'linear', not 'rbf'"),
    (dict(model="gig-logistic", engine="vb", basis="linear", q=0.5), "q does not apply to gig-logistic"),
    (dict(model="gig-logistic", engine="vb", basis="linear", gamma=2.0), "gamma does not apply to gig-logistic"),
    (dict(model="gig-logistic", engine="auto-laplace", basis="linear"), "no end-to-end mode.*the classifier runs vb"),
    (dict(model="gig-logistic", engine="vb", basis="linear", k=0.0), "k must be a positive number or None, got 0.0"),
    (dict(model="gig-logistic", engine="vb", basis="linear", rho=-1.0), "rho"),
    (dict(engine="laplace", theta=2.0), "theta does not apply to pcvm"),
])
def test_gig_logistic_classifier_refuses_what_does_not_apply(params, match, ripley):
    with pytest.raises(ValueError, match=match):
        SparseBayesClassifier(**params).fit(*ripley[:2])


def test_huge_values_at_predict_are_named_as_X(gig_fitted, ripley):
    """A linear design of 1e300 is finite, but its square (x^T Sigma x in the predictive)
    is not: the error names X, not an engine's variable. (Far from the centres an RBF
    design is just 0, which is its right value, and needs no error.)"""
    with pytest.raises(ValueError, match="X has values too large to predict with"):
        gig_fitted.predict(ripley[2][:5] * 1e300)


def test_pickled_gig_logistic_classifier_predicts_the_same(gig_fitted, ripley):
    """A fitted classifier survives pickling with its posterior, basis and labels (every
    (model, engine) pair is pickled by scikit-learn's checks, tests/front_end/test_sklearn_checks.py)."""
    X_test = ripley[2]
    twin = pickle.loads(pickle.dumps(gig_fitted))
    assert list(twin.classes_) == ["a", "b"] and twin.get_params() == gig_fitted.get_params()
    np.testing.assert_array_equal(twin.predict_proba(X_test), gig_fitted.predict_proba(X_test))
    np.testing.assert_array_equal(twin.predict(X_test), gig_fitted.predict(X_test))


def test_each_model_runs_its_own_default_engine_when_none_is_named():
    """engine=None is the model's own default, from its record (``classifier_engine``): once
    every model got "laplace", which three of the five do not have."""
    from zoo.classifier import classifier_engines, classifier_models, default_classifier_engine
    from zoo.validation.records import registry

    defaults = {m: default_classifier_engine(m) for m in classifier_models()}
    assert defaults == {"pcvm": "laplace", "ggsm-probit": "mm", "gig-logistic": "vb", "grid-rvm": "vb", "bblr": "sla"}
    assert all(defaults[m] in classifier_engines(m) for m in defaults)
    assert SparseBayesClassifier().model == registry.DEFAULT_MODEL and SparseBayesClassifier().engine is None
    doc = SparseBayesClassifier.__doc__ or ""
    assert all(f"{m}: " in doc and f"{e} (default)" in doc for m, e in defaults.items())


def test_a_record_whose_classifier_engine_cannot_run_end_to_end_is_refused():
    from dataclasses import replace

    from zoo.validation.records import registry

    pcvm = registry.get_model("pcvm")
    with pytest.raises(ValueError, match="classifier_engine 'nope' must be one of its engines with an end-to-end mode"):
        replace(pcvm, classifier_engine="nope")
    with pytest.raises(ValueError, match="classifier_engine 'laplace' must be one of its engines"):
        replace(pcvm, classifier=None, classifier_params=(), classifier_engine="laplace")


def test_the_engine_a_fit_ran_is_kept_and_a_non_string_engine_is_named(ripley):
    X, y = ripley[0][:60], ripley[1][:60]
    fitted = SparseBayesClassifier(model="pcvm", width=0.7).fit(X, y)
    assert fitted.engine_ == "laplace" and fitted.engine is None
    ggsm = SparseBayesClassifier(model="ggsm-probit", basis="linear").fit(X, y)
    assert ggsm.engine_ == "mm"  # "laplace", the old default for every model, is not ggsm-probit's
