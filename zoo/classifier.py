"""A scikit-learn compatible classifier over any (model, engine) pair::

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
``tests/front_end/test_sklearn_checks.py`` runs scikit-learn's estimator checks on every
(model, engine) pair.

What a fit costs is said before it runs (docs/classifier.md, "What a fit costs"): the
model's record plans the fit (``ModelRecord.classifier_plan``: the candidate count, the
path the engine takes, its memory and a time estimate from the engine's cost model);
``verbose=1`` prints that plan, progress lines during the fit and a last line to stderr;
an estimate above :data:`WARN_SECONDS` is a :class:`FitCostWarning` whatever ``verbose``
says, and a fit whose arrays exceed the machine's memory is refused before any work.
"""
from __future__ import annotations

import inspect
import numbers
import os
import sys
import time
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
from zoo.models.basis import median_heuristic_width, squared_distances
from zoo.models.checks import check_features
from zoo.validation.records import registry
from zoo.validation.records.fit_cost import FLOAT64, FitPlan, duration, size_text

#: the bases a model's classifier design may offer (each model says which it takes)
BASES = ("rbf", "linear", "table", "per-dimension-rbf")
#: seeds are handed to NumPy and JAX generators; both take any 32-bit unsigned integer
SEED_LIMIT = 2**32
#: a fit estimated to take longer than this (seconds, on the reference machine of the
#: cost models, compilation left out: it is paid once per data shape in a process, and a
#: warning on every small first fit would teach users to ignore it) is announced by a
#: FitCostWarning even with verbose=0: a minute is where a user starts to wonder whether
#: anything is happening
WARN_SECONDS = 60.0
#: verbose=1 prints a progress line at most this often (seconds); verbose >= 2 every one
PROGRESS_EVERY = 10.0
#: rows of X the verbose line's typical-distance figure is taken from (its cost: this
#: many squared distances, negligible beside any fit)
DISTANCE_SAMPLE = 256


class FitCostWarning(UserWarning):
    """A classifier fit is estimated to take long (more than :data:`WARN_SECONDS`).

    Raised as an error with ``warnings.simplefilter("error", FitCostWarning)``: the fit is
    then refused before any work is done."""


class SparseBayesClassifier(ClassifierMixin, BaseEstimator):
    """Sparse Bayesian binary classifier (kernel or linear, by model).

    Parameters
    ----------
    model : str, default "pcvm"       a registered model with a classifier design
                                      (:func:`classifier_models`; the default is the
                                      registry's ``DEFAULT_MODEL``)
    engine : str or None, default None
                                      an engine of that model with an end-to-end mode
                                      (:func:`classifier_engines`); None: the model's own
                                      default (:func:`default_classifier_engine`, its
                                      record's ``classifier_engine``). Each model's engines
                                      and default are listed at the end of this docstring.
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
    verbose : int, default 0          0: silent (but a fit estimated to take more than a
                                      minute still warns, FitCostWarning); 1: before the fit
                                      one line with the design's size, the candidate count,
                                      the path the engine takes and the time estimate, during
                                      it a progress line every 10 s (engines whose loop runs
                                      in Python: pcvm's three, bblr's sla-sparse), after it
                                      the time taken; 2: a progress line at every step.
                                      Lines go to stderr.
    ``**hyper-parameters``            each model's own, declared in its registry record
                                      (``ModelRecord.classifier_params``; listed below for
                                      the models registered when this module was imported),
                                      each None by default (the model's own default). Every
                                      registered model's are keyword arguments and
                                      scikit-learn parameters (get_params / set_params); one
                                      that does not apply to the chosen model is refused at
                                      ``fit``, and so is a bad value, in one line naming it.

    Attributes after fit: ``classes_``, ``posterior_`` (a zoo Posterior), ``spec_``,
    ``fit_plan_`` (a dict: the candidate count, the path taken, the estimate and the
    seconds the fit took),
    ``active_`` (indices of the design columns kept: training points for a kernel basis;
    with a bias column, column 0 is the bias), ``n_basis_``, ``n_features_in_`` (and
    ``feature_names_in_`` when X has string column names).

    Only binary problems: y must hold exactly two classes (any two labels: numbers,
    strings or booleans). Sparse X is refused (every engine works on dense designs).
    """

    def __init__(self, model: str = registry.DEFAULT_MODEL, engine: str | None = None, width: float = 1.0, seed: int = 0,
                 basis: str = "rbf", verbose: int = 0, **hyper):
        self.model = model
        self.engine = engine
        self.width = width
        self.seed = seed
        self.basis = basis
        self.verbose = verbose
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
        """Fit the model's posterior to ``X`` (n, d) and the two-class labels ``y`` with the chosen engine,
        end to end: the engine selects its own hyper-parameters and basis functions, as its paper does.

        Parameters are checked first (ValueError naming the first bad one), and the fit's cost is planned
        before any work (see the module docstring). Sets ``posterior_``, ``active_``, ``classes_``,
        ``fit_plan_`` and the other fitted attributes, and returns ``self``."""
        record, entry, options, seed, verbose = self._checked_params()
        X_arr = check_features(X, min_features=1)
        # feature names and n_features_in_ the scikit-learn way (X is known to be clean
        # here, so this can no longer fail; it only records what X looked like)
        validate_data(self, X, reset=True, dtype=np.float64)
        y = _checked_targets(y, X_arr.shape[0], type(self).__name__)
        classes = np.unique(y)
        y01 = (y == classes[1]).astype(float)  # 1 = the larger label, classes_[1]
        if isinstance(options["width"], str):
            options["width"] = median_heuristic_width(X_arr)
        engine = entry.name  # the one named, or the model's own default
        basis, kwargs = record.classifier(X_arr, y01, engine, options)
        plan = _plan(record, engine, X_arr, basis, kwargs, options)
        say = _Lines(verbose, f"{self.model}/{engine}")
        say.unit = plan.unit or say.unit
        _announce(plan, say, X_arr, basis, self.model, engine)
        kwargs = {**kwargs, **plan.fit_kwargs}
        Phi_all = plan.design(basis, X_arr) if plan.design is not None else _checked_design(basis, X_arr, "fit")
        fit_end_to_end = entry.fit_end_to_end()
        if verbose and _takes_progress(fit_end_to_end):
            kwargs["progress"] = say.progress
        t0 = time.perf_counter()
        fit = fit_end_to_end(Phi_all, y01, seed=seed, **kwargs)
        seconds = time.perf_counter() - t0
        info = getattr(fit.posterior, "info", None)
        compiled = float(getattr(info, "compile_seconds", 0.0) or 0.0)
        # the estimate of what was done: with compilation where this fit compiled
        expected = None if plan.seconds is None else plan.seconds + (plan.compile_seconds if compiled > 0 else 0.0)
        say.line(f"done in {duration(seconds)}"
                 + (f" (estimate ~{duration(expected)})" if expected is not None else "")
                 + f": {np.asarray(fit.active).size} of {plan.candidates} basis functions kept"
                 + ("" if info is None or info.converged else f"; not converged: {info.reason}"))
        self.fit_plan_ = {"n_samples": int(X_arr.shape[0]), "n_features": int(X_arr.shape[1]),
                          "candidates": plan.candidates, "path": plan.path, "estimate_seconds": plan.seconds,
                          "factor": plan.factor, "compile_estimate_seconds": plan.compile_seconds,
                          "cost_key": plan.cost_key, "work": plan.work, "seconds": seconds,
                          "compile_seconds": compiled}
        self.classes_ = classes
        self.engine_ = engine
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
        engine = default_classifier_engine(self.model) if self.engine is None else self.engine
        if not isinstance(engine, str):
            raise ValueError(f"engine must be a string or None (the model's own default), for {self.model} one of "
                             f"{', '.join(classifier_engines(self.model))}; got {engine!r}")
        entry = record.engine(engine)
        if entry.end_to_end is None:
            raise ValueError(f"{self.model} engine {engine!r} has no end-to-end mode (it fits a given "
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
        verbose = self.verbose
        # True / False are the 1 / 0 scikit-learn users pass; anything else must be a count
        if not (isinstance(verbose, (numbers.Integral, np.bool_)) and verbose >= 0):
            raise ValueError(f"verbose must be a non-negative integer (0: silent, 1: plan and progress, 2: every "
                             f"step), got {verbose!r}")
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
        return record, entry, options, int(seed), int(verbose)

    def predict_proba(self, X):
        """Class probabilities of each row of ``X``, shape (n, 2), columns in the order of ``classes_``: the
        fitted posterior's predictive probability of ``classes_[1]`` on the kept basis functions (averaged
        over the posterior where the engine gives a distribution, at its point estimate where it gives one),
        and one minus it. NotFittedError before :meth:`fit`."""
        check_is_fitted(self, "posterior_")
        X_arr = check_features(X)
        validate_data(self, X, reset=False, dtype=np.float64)  # feature count and names as in fit
        Phi = _checked_design(self.basis_, X_arr, "predict")
        p1 = np.clip(self.posterior_.predict_proba(Phi), 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        """The predicted label of each row of ``X``: ``classes_[1]`` where its predictive probability
        (:meth:`predict_proba`) is above 1/2, else ``classes_[0]``."""
        proba = self.predict_proba(X)  # first: raises NotFittedError before classes_ is read
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]

    def decision_function(self, X):
        """A score per row of ``X``, positive for ``classes_[1]``: its predictive probability minus 1/2, so
        that scikit-learn's threshold 0 gives :meth:`predict` and the scores rank rows as the probabilities do
        (ROC AUC)."""
        return self.predict_proba(X)[:, 1] - 0.5


class _Lines:
    """The verbose lines of one fit, to stderr: scikit-learn's estimators print their
    verbose output rather than log it, and a user who asks for ``verbose=1`` must see the
    lines without configuring ``logging`` first (stderr: stdout stays the user's). Warnings
    go through ``warnings`` instead, where they can be filtered or made errors."""

    def __init__(self, verbose: int, name: str):
        self.verbose = verbose
        self.name = name
        self.unit = "step"
        self.t0 = time.perf_counter()
        self.last = -np.inf

    def line(self, text: str) -> None:
        if self.verbose:
            print(f"[SparseBayesClassifier] {self.name}: {text}", file=sys.stderr, flush=True)

    def progress(self, count: int, state: dict) -> None:
        """The engines' progress callback: ``progress(step, {name: value})``."""
        now = time.perf_counter()
        if self.verbose >= 2 or now - self.last >= PROGRESS_EVERY:
            self.last = now
            shown = ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in state.items())
            self.line(f"{self.unit} {count}: {shown} ({duration(now - self.t0)})")


def _takes_progress(fn) -> bool:
    """Whether an end-to-end fit takes a ``progress`` callback (engines whose loop runs in
    Python do; a loop compiled whole cannot report from inside)."""
    try:
        return "progress" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _plan(record, engine: str, X: np.ndarray, basis, kwargs: dict, options: dict) -> FitPlan:
    """The record's plan for this fit, or what the classifier can say without one."""
    n, d = X.shape
    if record.classifier_plan is not None:
        return record.classifier_plan(engine, n, d, basis, kwargs, options)
    m = int(basis.n_basis)
    return FitPlan(candidates=m, path=f"the engine's end-to-end fit on all {m} columns",
                   memory_bytes=n * m * FLOAT64)


def _announce(plan: FitPlan, say: _Lines, X: np.ndarray, basis, model: str, engine: str) -> None:
    """Say the plan (verbose), warn when it is long (always), refuse when it cannot fit in
    memory (always) - all before any work."""
    n, d = X.shape
    head = f"{model}/{engine} on {n} x {d}"
    memory = max(plan.memory_bytes, 0.0)
    available = physical_memory()
    if available is not None and memory > available:
        advice = _sentence(plan.advice or "use fewer rows or a smaller basis")
        raise ValueError(f"{head}: {plan.path}; it needs about {size_text(memory)} of memory, more than this "
                         f"machine's {size_text(available)}. {advice}")
    long = plan.seconds is not None and plan.seconds > WARN_SECONDS
    width, narrow = _width_note(basis, X) if (say.verbose or long) else ("", "")
    if say.verbose:
        say.line(f"design {n} x {d} -> {plan.candidates} candidate basis functions{width}")
        if narrow:
            say.line(f"note: {narrow}")
        say.line(f"path: {plan.path}")
        say.line(f"estimate: {plan.estimate_text()}; memory ~{size_text(memory)}"
                 + (f"; a progress line every {PROGRESS_EVERY:g} s" if plan.unit and say.verbose == 1 else "")
                 + ("" if plan.unit else "; no progress lines (this engine does not report from inside its loops)"))
    if long:
        warnings.warn(FitCostWarning(
            f"{head}: estimated {plan.estimate_text()} - {plan.path}. {_sentence(narrow) + '. ' if narrow else ''}"
            f"{_sentence(plan.advice) + '. ' if plan.advice else ''}verbose=1 shows "
            f"{'progress' if plan.unit else 'the plan and the time taken'}"), stacklevel=3)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _width_note(basis, X: np.ndarray) -> tuple[str, str]:
    """For an RBF basis: (its width beside the typical distance between inputs, for the
    verbose line; a warning's sentence when the width is far below that distance). Such a
    kernel is nearly the identity: every training point is then a basis function of its
    own, which the kernel engines keep many of and take long over (and which predicts
    nothing away from the training points). ("", "") for other bases."""
    inner = getattr(basis, "inner", basis)
    width = getattr(inner, "width", None)
    if width is None:
        return "", ""
    sample = X[:DISTANCE_SAMPLE]
    d2 = squared_distances(sample, sample)[np.triu_indices(len(sample), 1)]
    if not d2.size:
        return f" (RBF, width {width:.3g})", ""
    typical = float(np.sqrt(np.median(d2)))
    narrow = ""
    if typical > 0 and width < typical / 5:
        narrow = (f"the kernel is nearly the identity: width {width:.3g} against a median distance of "
                  f"{typical:.3g} between inputs (k = {np.exp(-typical ** 2 / (2 * width ** 2)):.1g} there); "
                  "width='median' takes the median")
    return f" (RBF, width {width:.3g}; median distance between inputs {typical:.3g})", narrow


def physical_memory() -> float | None:
    """Bytes of physical memory of this machine, None where the system does not say."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


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


def default_classifier_engine(model: str) -> str:
    """The engine the classifier runs for ``model`` when none is named: its record's
    ``classifier_engine``, else its first engine with an end-to-end mode."""
    record = registry.get_model(model)
    engines = classifier_engines(model)
    if record.classifier is None or not engines:
        raise ValueError(f"model {model!r} has no classifier; available: {', '.join(classifier_models())}")
    return record.classifier_engine or engines[0]


def _engine_doc() -> str:
    lines = []
    for name in classifier_models():
        default = default_classifier_engine(name)
        lines.append(f"    {name}: " + ", ".join(f"{e} (default)" if e == default else e
                                                 for e in classifier_engines(name)))
    return ("\n\n    Engines of the models registered at import (:func:`classifier_engines`):\n\n"
            + "\n".join(lines))


_refresh_signature(SparseBayesClassifier)
if SparseBayesClassifier.__doc__:  # None under python -OO
    SparseBayesClassifier.__doc__ = SparseBayesClassifier.__doc__.rstrip() + _engine_doc() + _hyper_param_doc()
