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

    # GIG-hierarchical logistic regression (Horii's VB): linear, a bias column in front
    SparseBayesClassifier(model="gig-logistic", engine="vb", basis="linear").fit(X, y)

    # gridRVM on 8 x 8 images: row and column relevance (engines vb, vb-s-grid, vb-rvm)
    SparseBayesClassifier(model="grid-rvm", engine="vb", basis="table", table_shape=(8, 8)).fit(X, y)

    # sparse kernel BBLR (Gaussian-Laplace prior, hard EM), width by the median heuristic
    SparseBayesClassifier(model="bblr", engine="sla-sparse", basis="rbf", width="median").fit(X, y)

``fit`` runs the engine end to end (it selects its own hyper-parameters and basis
functions, as its paper does). Inputs are used as given: standardize them first (the
papers do, and `zoo.data.load` does).

scikit-learn conventions: the estimator declares itself a binary-only classifier (tags for
scikit-learn >= 1.6 and the older ``_more_tags``), checks its parameters at ``fit`` (one
line naming the parameter), validates X with ``models.checks.check_features`` (the
zoo's shared messages: sparse, complex, non-numeric, NaN with its position, no features)
and y like scikit-learn (a column vector is raveled with a DataConversionWarning;
continuous, multiclass, missing or mixed labels are refused), and keeps
``n_features_in_`` / ``feature_names_in_`` through scikit-learn's own ``validate_data``.
``tests/test_sklearn_checks.py`` runs scikit-learn's estimator checks on every
(model, engine) pair.
"""
from __future__ import annotations

import inspect
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6 has it as a method of BaseEstimator
    def validate_data(estimator, X, **check_params):
        return estimator._validate_data(X, **check_params)

import zoo  # noqa: F401  (float64 on)
from zoo.models.basis import median_heuristic_width
from zoo.models.checks import check_features
from zoo.validation.records import registry

#: the bases a model's classifier design may offer (each model says which it takes)
BASES = ("rbf", "linear", "table", "per-dimension-rbf")
#: seeds are handed to NumPy and JAX generators; both take any 32-bit unsigned integer
SEED_LIMIT = 2**32


class SparseBayesClassifier(ClassifierMixin, BaseEstimator):
    """Sparse Bayesian binary classifier (kernel or linear, by model).

    Parameters
    ----------
    model : str, default "pcvm"       a registered model with a classifier design
                                      (:func:`classifier_models`: "pcvm", "ggsm-probit",
                                      "gig-logistic", "grid-rvm", "bblr")
    engine : str, default "laplace"   an engine of that model with an end-to-end mode
                                      (:func:`classifier_engines`; pcvm: "laplace", "ep",
                                      "em"; ggsm-probit: "mm", "mm-laplace", "lap", "gj",
                                      "stu"; gig-logistic: "vb" (Horii's Algorithm 1; its
                                      generic "auto-laplace" fits a given spec only); grid-rvm:
                                      "vb", "vb-s-grid", "vb-rvm"; bblr: "sla", "laplace",
                                      "slam", with lam chosen on a held-out fifth, and
                                      "sla-sparse": the Gaussian-Laplace prior with its
                                      hard EM)
    width : float or "median", default 1.0
                                      RBF kernel width (k = exp(-r^2 / (2 width^2))); "median":
                                      the median distance between two training inputs (the
                                      median heuristic, models.basis.median_heuristic_width)
    seed : int, default 0             for engines with random initialization (em) or seeded
                                      draws (mm-laplace) and held-out fifths (bblr); an
                                      integer in [0, 2**32)
    basis : str, default "rbf"        which design each model takes:
                                      pcvm: "rbf" only (a kernel model);
                                      ggsm-probit: "rbf" or "linear", a bias column in front;
                                      gig-logistic: "linear" only, a bias column in front
                                      (Horii's model is linear; the protocol adds the bias
                                      for every data set but his intercept-free synthetic
                                      one);
                                      grid-rvm: "table" (X is the table itself,
                                      ``table_shape`` says its rows and columns),
                                      "per-dimension-rbf" (exp(-delta (x_i - c_j,i)^2): an
                                      input dimension x training point table), "rbf" or
                                      "linear" (a one-column table);
                                      bblr: "linear" with a bias column, or "rbf" with
                                      engine "sla-sparse" (sparse kernel BBLR)
    **hyper-parameters                each model's own, declared in its registry record
                                      (``ModelRecord.classifier_params``; listed below for
                                      the models registered when this module was imported),
                                      each None by default (the model's own default). Every
                                      registered model's are keyword arguments and
                                      scikit-learn parameters (get_params / set_params); one
                                      that does not apply to the chosen model is refused at
                                      ``fit``, and so is a bad value, in one line naming it.

    Attributes after fit: ``classes_``, ``posterior_`` (a zoo Posterior), ``spec_``,
    ``active_`` (indices of the design columns kept: training points for a kernel basis;
    with a bias column, column 0 is the bias), ``n_basis_``, ``n_features_in_`` (and
    ``feature_names_in_`` when X has string column names).

    Only binary problems: y must hold exactly two classes (any two labels: numbers,
    strings or booleans). Sparse X is refused (every engine works on dense designs).
    """

    def __init__(self, model: str = "pcvm", engine: str = "laplace", width: float = 1.0, seed: int = 0,
                 basis: str = "rbf", **hyper):
        self.model = model
        self.engine = engine
        self.width = width
        self.seed = seed
        self.basis = basis
        known = hyper_param_names()
        for name, value in hyper.items():
            if name not in known:  # what Python says of a keyword the signature lacks
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {name!r}")
            setattr(self, name, value)

    # ----------------------------------------------------------------------------------
    # the models' hyper-parameters as scikit-learn parameters
    # ----------------------------------------------------------------------------------
    # The hyper-parameters are the registered records' (``classifier_params``), so the
    # constructor takes them as keywords and its signature - which scikit-learn reads for
    # the parameter names (get_params, clone, repr, its estimator checks) - is rebuilt from
    # the registry whenever the names are read: a model registered later brings its own.
    @classmethod
    def _get_param_names(cls):
        _refresh_signature(cls)
        return sorted((*super()._get_param_names(), *hyper_param_names()))

    def __getattr__(self, name: str):
        # a registered hyper-parameter not given to the constructor is None (its default)
        if not name.startswith("_") and name in hyper_param_names():
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ----------------------------------------------------------------------------------
    # scikit-learn tags
    # ----------------------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # every model of the zoo has one Bernoulli likelihood: two classes, no more
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags

    def _more_tags(self):  # the same for scikit-learn < 1.6, which reads this instead
        return {"binary_only": True}

    # ----------------------------------------------------------------------------------
    # fit / predict
    # ----------------------------------------------------------------------------------
    def fit(self, X, y):
        record, entry, options, seed = self._checked_params()
        X_arr = check_features(X, min_features=1)
        # feature names and n_features_in_ the scikit-learn way (X is known to be clean
        # here, so this can no longer fail; it only records what X looked like)
        validate_data(self, X, reset=True, dtype=np.float64)
        y = _checked_targets(y, X_arr.shape[0], type(self).__name__)
        classes = np.unique(y)
        y01 = (y == classes[1]).astype(float)  # 1 = the larger label, classes_[1]
        if isinstance(options["width"], str):
            options["width"] = median_heuristic_width(X_arr)
        basis, kwargs = record.classifier(X_arr, y01, self.engine, options)
        Phi_all = _checked_design(basis, X_arr, "fit")
        fit = entry.fit_end_to_end()(Phi_all, y01, seed=seed, **kwargs)
        self.classes_ = classes
        self.posterior_ = fit.posterior
        self.spec_ = fit.spec
        self.active_ = np.asarray(fit.active)
        self.basis_ = basis.subset(self.active_)
        self.n_basis_ = int(self.active_.size)
        return self

    def _checked_params(self):
        """(record, engine entry, the design's options, seed) - or ValueError naming the first
        parameter that is wrong, in one line, before any data is looked at."""
        if not isinstance(self.model, str):
            raise ValueError(f"model must be a string, one of {', '.join(classifier_models())}; "
                             f"got {self.model!r}")
        record = registry.get_model(self.model)
        if record.classifier is None:
            raise ValueError(f"model {self.model!r} has no classifier; available: {', '.join(classifier_models())}")
        if not isinstance(self.engine, str):
            raise ValueError(f"engine must be a string, for {self.model} one of "
                             f"{', '.join(classifier_engines(self.model))}; got {self.engine!r}")
        entry = record.engine(self.engine)
        if entry.end_to_end is None:
            raise ValueError(f"{self.model} engine {self.engine!r} has no end-to-end mode (it fits a given "
                             f"spec only); the classifier runs {', '.join(classifier_engines(self.model))}")
        if not isinstance(self.basis, str) or self.basis not in BASES:
            raise ValueError(f"basis must be one of {', '.join(map(repr, BASES))}, got {self.basis!r}")
        width = self.width
        if not (isinstance(width, str) and width == "median"):
            if not (_is_real(width) and np.isfinite(width) and width > 0):
                raise ValueError(f"width must be a positive number or 'median', got {width!r}")
            width = float(width)
        seed = self.seed
        if not (isinstance(seed, numbers.Integral) and not isinstance(seed, (bool, np.bool_))
                and 0 <= seed < SEED_LIMIT):
            raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
        own = {p.name: p for p in record.classifier_params}
        extra = [name for name in hyper_param_names() if name not in own and getattr(self, name) is not None]
        if extra:
            takes = f"it takes {', '.join(own)}" if own else "it takes none"
            raise ValueError(f"{', '.join(extra)} do{'es' if len(extra) == 1 else ''} not apply to {self.model} "
                             f"({takes})")
        options = {"width": width, "basis": self.basis}
        for name, param in own.items():
            value = getattr(self, name)
            options[name] = value if value is None or param.check is None else param.check(name, value)
        return record, entry, options, int(seed)

    def predict_proba(self, X):
        check_is_fitted(self, "posterior_")
        X_arr = check_features(X)
        validate_data(self, X, reset=False, dtype=np.float64)  # feature count and names as in fit
        Phi = _checked_design(self.basis_, X_arr, "predict")
        p1 = np.clip(self.posterior_.predict_proba(Phi), 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        proba = self.predict_proba(X)  # first: raises NotFittedError before classes_ is read
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]

    def decision_function(self, X):
        return self.predict_proba(X)[:, 1] - 0.5


def _is_real(value) -> bool:
    """A real number that is not a boolean (True is an int to Python, not a width)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _checked_targets(y, n_samples: int, estimator: str) -> np.ndarray:
    """y as a 1-D array of exactly two class labels, the way scikit-learn classifiers take
    it: a column vector is raveled with a DataConversionWarning; None, a length other than
    X's, missing labels (NaN, None), mixed strings and numbers, continuous values and more
    than two classes are refused with one line saying which."""
    if y is None:
        raise ValueError(f"{estimator} requires y to be passed, but the target y is None")
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(f"A column-vector y was passed when a 1d array was expected; y was raveled to shape "
                      f"({y.shape[0]},)", DataConversionWarning, stacklevel=3)
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D vector of labels (one output; multi-output is not supported), "
                         f"got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"y must be a vector with one label per row of X ({n_samples}); got {y.shape[0]} labels")
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported: y has complex values; it must hold two class labels")
    if y.dtype.kind == "O":
        y = _object_labels(y)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        i = int(np.flatnonzero(~np.isfinite(y))[0])
        raise ValueError(f"y contains NaN or infinite labels (first at position {i}); missing labels are not allowed")
    kind = type_of_target(y)
    if kind == "continuous":
        shown = ", ".join(f"{v:g}" for v in y[y != np.round(y)][:3])
        raise ValueError(f"Unknown label type: y is continuous (values such as {shown}); a classifier needs two "
                         "class labels (only binary classification is supported)")
    classes = np.unique(y)
    if classes.size > 2:
        shown = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in classes[:5])
        raise ValueError(f"Only binary classification is supported. y must hold exactly two classes; found "
                         f"{classes.size} ({shown}{', ...' if classes.size > 5 else ''})")
    if classes.size == 1:
        raise ValueError(f"y holds one class only (all labels are {classes[0]!r}); a binary classifier needs "
                         "examples of both classes")
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"Unknown label type: {kind}")
    return y


def _object_labels(y: np.ndarray) -> np.ndarray:
    """Labels of an object array (pandas columns come this way): all strings or all real
    numbers, converted to a typed array; refused for missing values and mixtures."""
    for i, v in enumerate(y):
        if v is None or (isinstance(v, float) and v != v):
            raise ValueError(f"y contains a missing label ({v!r} at position {i}); every row needs a class label")
    if all(isinstance(v, str) for v in y):
        return y.astype(str)
    if all(_is_real(v) or isinstance(v, (bool, np.bool_)) for v in y):
        return np.array(y.tolist())
    kinds = sorted({type(v).__name__ for v in y})
    raise ValueError(f"Unknown label type: y mixes {', '.join(kinds)} values; labels must be all strings or all "
                     "numbers")


def _checked_design(basis, X: np.ndarray, step: str) -> np.ndarray:
    """The design of X, if float64 can hold it and the Gram matrix the engines form
    (Phi^T Phi); otherwise say that X's values are too large (they are finite: X passed
    its own check, but the squared distances of 1e300 or the square of 1e160 are not).
    NumPy's overflow warnings are silenced here because this error says it instead."""
    with np.errstate(over="ignore", invalid="ignore"):
        Phi = basis.transform(X)
        ok = np.all(np.isfinite(Phi)) and np.isfinite(np.einsum("ij,ij->", Phi, Phi))
    if not ok:
        raise ValueError(f"X has values too large to {step} with (largest |x| = {np.max(np.abs(X)):.3g}): the "
                         "design built from them overflows float64; rescale X (standardize it, as the papers do)")
    return Phi


def hyper_param_names() -> tuple[str, ...]:
    """Every registered model's classifier hyper-parameters (``ModelRecord.classifier_params``),
    each name once, in registry order."""
    return tuple(dict.fromkeys(p.name for name in registry.model_names()
                               for p in registry.get_model(name).classifier_params))


def _refresh_signature(cls) -> None:
    """``cls.__init__``'s signature: its own parameters, then every registered model's
    hyper-parameters as keywords defaulting to None (what scikit-learn introspects)."""
    own = [p for p in inspect.signature(cls.__init__, follow_wrapped=False).parameters.values()
           if p.kind is not p.VAR_KEYWORD and p.kind is not p.KEYWORD_ONLY]
    hyper = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in hyper_param_names()]
    cls.__init__.__signature__ = inspect.Signature(own + hyper)


def _hyper_param_doc() -> str:
    lines = []
    for name in registry.model_names():
        for p in registry.get_model(name).classifier_params:
            lines.append(f"    {p.name} ({name}): {p.doc}")
    return ("\n\n    Hyper-parameters of the models registered at import (``ModelRecord.classifier_params``):\n\n"
            + "\n".join(lines) + "\n    ")


def classifier_models() -> tuple[str, ...]:
    """The registered models the classifier can fit (those whose record has a design)."""
    return tuple(name for name in registry.model_names() if registry.get_model(name).classifier is not None)


def classifier_engines(model: str) -> tuple[str, ...]:
    """The engines of ``model`` the classifier can run: those with an end-to-end mode."""
    return tuple(e.name for e in registry.get_model(model).engines if e.end_to_end is not None)


_refresh_signature(SparseBayesClassifier)
if SparseBayesClassifier.__doc__:  # None under python -OO
    SparseBayesClassifier.__doc__ = SparseBayesClassifier.__doc__.rstrip() + _hyper_param_doc()
