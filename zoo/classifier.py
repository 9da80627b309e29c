"""A scikit-learn compatible classifier over any (model, engine) pair.

    from zoo.classifier import SparseBayesClassifier
    from sklearn.model_selection import GridSearchCV
    search = GridSearchCV(SparseBayesClassifier(model="pcvm", engine="laplace"),
                          {"width": [0.35, 0.5, 0.7, 1.0]}, cv=5)
    search.fit(X, y)            # any two class labels
    search.predict_proba(X_test)

    # GGSM probit: the shape q by CV, as its paper does (linear basis with bias)
    GridSearchCV(SparseBayesClassifier(model="ggsm-probit", engine="mm", basis="linear"),
                 {"q": [0.1, 0.5, 1.0, 1.5, 2.0]}, cv=5).fit(X, y)

    # gridRVM on 8 x 8 images: row and column relevance (engines vb, vb-s-grid, vb-rvm)
    SparseBayesClassifier(model="grid-rvm", engine="vb", basis="table", table_shape=(8, 8)).fit(X, y)

    # sparse kernel BBLR (Gaussian-Laplace prior, hard EM), width by the median heuristic
    SparseBayesClassifier(model="bblr", engine="sla-sparse", basis="rbf", width="median").fit(X, y)

``fit`` runs the engine end to end (it selects its own hyper-parameters and basis
functions, as its paper does). Inputs are used as given: standardize them first (the
papers do, and `zoo.data.load` does).
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

import zoo  # noqa: F401  (float64 on)
from zoo.models.basis import median_heuristic_width
from zoo.models.checks import check_binary_labels, check_features
from zoo.validation import registry


#: the bases a model's classifier design may offer (each model says which it takes)
BASES = ("rbf", "linear", "table", "per-dimension-rbf")


class SparseBayesClassifier(ClassifierMixin, BaseEstimator):
    """Sparse Bayesian kernel classifier.

    Parameters
    ----------
    model : str, default "pcvm"       a registered model with a classifier design
                                      (:func:`classifier_models`: "pcvm", "ggsm-probit",
                                      "grid-rvm", "bblr")
    engine : str, default "laplace"   an engine of that model with an end-to-end mode
                                      (pcvm: "laplace", "ep", "em"; ggsm-probit: "mm",
                                      "mm-laplace", "lap", "gj", "stu"; grid-rvm: "vb",
                                      "vb-s-grid", "vb-rvm"; bblr: "sla", "laplace", with
                                      lam chosen on a held-out fifth, and "sla-sparse": the
                                      Gaussian-Laplace prior with its hard EM)
    width : float or "median", default 1.0
                                      RBF kernel width (k = exp(-r^2 / (2 width^2))); "median":
                                      the median distance between two training inputs (the
                                      median heuristic, models.basis.median_heuristic_width)
    seed : int, default 0             for engines with random initialization (em)
    basis : str, default "rbf"        "rbf" or "linear" (ggsm-probit, grid-rvm; bblr: "linear"
                                      with a bias column, or "rbf" with engine "sla-sparse":
                                      sparse kernel BBLR; PCVM is a
                                      kernel model); ggsm-probit puts a bias column in
                                      front. grid-rvm also: "table" (X is the table itself,
                                      ``table_shape`` says its rows and columns) and
                                      "per-dimension-rbf" (exp(-delta (x_i - c_j,i)^2): an
                                      input dimension x training point table)
    q : float or None                 ggsm-probit's prior shape, in (0, 2] (None: 1.0)
    gamma : float or None             ggsm-probit's lap engine: its Laplace rate (None: 1.0);
                                      bblr: the sigmoid's sharpness (None: 4)
    table_shape : (int, int) or None  grid-rvm with basis="table": rows and columns of X's
                                      features (row-major; rows x columns = X's width)
    delta : float or None             grid-rvm with basis="per-dimension-rbf" (None: the
                                      paper's 5.55)

    Attributes after fit: ``classes_``, ``posterior_`` (a zoo Posterior), ``spec_``,
    ``active_`` (indices of the design columns kept: training points for a kernel basis;
    for ggsm-probit column 0 is the bias), ``n_basis_``.
    """

    def __init__(self, model: str = "pcvm", engine: str = "laplace", width: float = 1.0, seed: int = 0,
                 basis: str = "rbf", q: float | None = None, gamma: float | None = None,
                 table_shape: tuple[int, int] | None = None, delta: float | None = None):
        self.model = model
        self.engine = engine
        self.width = width
        self.seed = seed
        self.basis = basis
        self.q = q
        self.gamma = gamma
        self.table_shape = table_shape
        self.delta = delta

    def fit(self, X, y):
        X = check_features(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be a vector with one label per row of X ({X.shape[0]}); got shape {y.shape}")
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(
                f"y must hold exactly two classes; found {classes.size}"
                + (" (one class only)" if classes.size == 1 else "")
            )
        if not (isinstance(self.width, str) and self.width == "median") and not (
                isinstance(self.width, (int, float)) and np.isfinite(self.width) and self.width > 0):
            raise ValueError(f"width must be a positive number or 'median', got {self.width!r}")
        self.classes_ = classes
        y01 = check_binary_labels((y == classes[1]).astype(float), n_samples=X.shape[0])
        record = registry.get_model(self.model)
        if record.classifier is None:
            raise ValueError(f"model {self.model!r} has no classifier; available: {', '.join(classifier_models())}")
        entry = record.engine(self.engine)
        basis, kwargs = self._design(record, X, y01)
        fit = entry.fit_end_to_end()(basis.transform(X), y01, seed=self.seed, **kwargs)
        self.posterior_ = fit.posterior
        self.spec_ = fit.spec
        self.active_ = np.asarray(fit.active)
        self.basis_ = basis.subset(self.active_)
        self.n_basis_ = int(self.active_.size)
        self.n_features_in_ = X.shape[1]
        return self

    def _design(self, record, X, y01):
        """(basis, extra keyword arguments of the engine's end-to-end fit): the model's
        record says how (its ``classifier`` design)."""
        if self.basis not in BASES:
            raise ValueError(f"basis must be one of {', '.join(map(repr, BASES))}, got {self.basis!r}")
        width = median_heuristic_width(X) if isinstance(self.width, str) else float(self.width)
        options = {"width": width, "basis": self.basis, "q": self.q, "gamma": self.gamma,
                   "table_shape": self.table_shape, "delta": self.delta}
        return record.classifier(X, y01, self.engine, options)

    def predict_proba(self, X):
        check_is_fitted(self, "posterior_")
        X = check_features(X, n_features=self.n_features_in_)
        p1 = np.clip(self.posterior_.predict_proba(self.basis_.transform(X)), 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        proba = self.predict_proba(X)  # first: raises NotFittedError before classes_ is read
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]

    def decision_function(self, X):
        return self.predict_proba(X)[:, 1] - 0.5


def classifier_models() -> tuple[str, ...]:
    """The registered models the classifier can fit (those whose record has a design)."""
    return tuple(name for name in registry.model_names() if registry.get_model(name).classifier is not None)
