"""Input validation with messages that name the problem.

Every public entry point (engines, references, the classifier, the CLI) checks its
inputs here, so that a bad array fails at the door with a sentence a user can act on
instead of as a NaN deep inside a jitted loop.

It sits in the bottom layer (``models``) because models, engines and the validation code
all use it, and imports point one way: models <- inference <- validation <- zoo.

Label convention inside the project: ``y`` is a float vector of 0/1 (1 = the positive
class). Engines that need +1/-1 convert with ``2 * y - 1``.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse


def is_integer(v) -> bool:
    """Whether ``v`` is a Python or NumPy integer and not a bool (for validating configs)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


#: the largest seed: what numpy's legacy and scikit-learn's generators take (32-bit
#: unsigned), so that a seed the zoo accepts is one every library it hands it to takes
MAX_SEED = 2**32 - 1


def check_seed(value, name: str = "seed") -> int:
    """``value`` as an int; ValueError in one line unless it is an integer (not a bool)
    from 0 to :data:`MAX_SEED`. Refused before any work: a negative seed passed every
    check and failed in numpy after the work it seeds (minutes into ``zoo compare``)."""
    if not is_integer(value) or not 0 <= int(value) <= MAX_SEED:
        raise ValueError(f"{name} must be an integer from 0 to {MAX_SEED} (2**32 - 1); got {value!r}")
    return int(value)


def check_features(X, *, n_features: int | None = None, name: str = "X", min_features: int = 0) -> np.ndarray:
    """Return X as a finite float64 matrix of shape (n, d); raise ValueError (TypeError for
    entries that are not numbers) otherwise.

    Refused with a sentence that names the problem: a sparse matrix (every consumer
    builds dense designs), complex values (casting would drop the imaginary part
    silently), entries that are not numbers (TypeError for objects such as a dict, as
    NumPy raises it; ValueError for text; None becomes NaN), a 1-D array, no rows, fewer than
    ``min_features`` columns, NaN or infinity, and a column count other than
    ``n_features``. ``min_features`` is 0 by default because an engine may be handed a
    design whose columns were all pruned; the classifier asks for 1.
    """
    if sparse.issparse(X):
        raise ValueError(
            f"{name} is a sparse matrix ({type(X).__name__}); sparse input is not supported: "
            f"pass a dense array ({name}.toarray())"
        )
    try:
        raw = np.asarray(X)
    except ValueError as err:  # ragged rows
        raise ValueError(f"{name} must be a numeric array: {err}") from None
    if raw.dtype.kind == "c":
        raise ValueError(
            f"Complex data not supported: {name} has complex values (casting would drop the "
            "imaginary part); give real and imaginary parts as separate real columns"
        )
    try:
        X = np.asarray(raw, dtype=float)  # no copy when X is float64 already
    except TypeError as err:  # an entry that is no number (a dict): NumPy's own error type
        raise TypeError(f"{name} must be a numeric array: {err}") from None
    except ValueError as err:  # text that is no number
        raise ValueError(f"{name} must be a numeric array: {err}") from None
    if X.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features); got a 1-D array of length "
            f"{X.shape[0]}. Reshape your data: {name}.reshape(-1, 1) for a single feature, "
            f"{name}.reshape(1, -1) for a single sample."
        )
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if X.shape[1] < min_features:
        # the wording scikit-learn's check_array uses, so that callers matching it still do
        raise ValueError(
            f"{name} has {X.shape[1]} feature(s) (shape={X.shape}) while a minimum of "
            f"{min_features} is required."
        )
    if not np.all(np.isfinite(X)):
        bad = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(
            f"{name} contains NaN or infinite values (first at row {bad[0]}, column {bad[1]})"
        )
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features but {n_features} were expected "
            "(the number the basis was fitted with)"
        )
    return X


def check_binary_labels(y, *, n_samples: int | None = None, name: str = "y") -> np.ndarray:
    """Return labels as a float 0/1 vector.

    Accepts {0, 1}, {-1, +1} or booleans. Raises ValueError for NaN, for more than two
    distinct values, for a single class, and for a length that does not match X.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        y = np.squeeze(y)
        if y.ndim != 1:
            raise ValueError(f"{name} must be a 1-D vector of labels; got shape {np.shape(y)}")
    if n_samples is not None and y.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {y.shape[0]} labels but X has {n_samples} rows (shape mismatch)"
        )
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinite labels")
    values = np.unique(y)
    if values.size == 1:
        raise ValueError(
            f"{name} holds one class only (all labels are {values[0]!r}); a binary "
            "classifier needs examples of both classes"
        )
    if values.size > 2:
        shown = ", ".join(repr(v) for v in values[:5])
        raise ValueError(
            f"{name} must hold exactly two classes; found {values.size} distinct values "
            f"({shown}{', ...' if values.size > 5 else ''})"
        )
    allowed = ({0, 1}, {-1, 1}, {False, True})
    as_set = {v.item() if hasattr(v, "item") else v for v in values}
    if not any(as_set == a for a in allowed):
        raise ValueError(
            f"{name} must be coded 0/1 or -1/+1; found {sorted(as_set)!r}. "
            "(The scikit-learn classifier accepts any two class labels.)"
        )
    return (y == values[1]).astype(float)


def check_design(Phi, y=None, *, name: str = "Phi") -> tuple[np.ndarray, np.ndarray | None]:
    """Validate a design matrix and (optionally) its labels together."""
    Phi = check_features(Phi, name=name)
    if y is None:
        return Phi, None
    return Phi, check_binary_labels(y, n_samples=Phi.shape[0])


def check_positive(value, name: str, *, allow_inf: bool = False) -> np.ndarray:
    """Raise ValueError unless every entry of value is > 0 (and finite unless allowed)."""
    arr = np.asarray(value, dtype=float)
    ok = arr > 0
    if not allow_inf:
        ok &= np.isfinite(arr)
    if not np.all(ok):
        # the value as the user wrote it: -1, not array(-1.)
        shown = f"{float(arr):g}" if arr.ndim == 0 else str(arr.tolist())
        raise ValueError(f"hyper-parameter {name} must be positive{'' if allow_inf else ' and finite'}; got {shown}")
    return arr


def check_spec(spec, expected: type, engine: str) -> None:
    """Raise TypeError unless ``spec`` is an instance of ``expected``: an engine derived
    for one model must not run silently on another model's spec (every engine raises the
    same error type for this, so callers can catch one thing)."""
    if not isinstance(spec, expected):
        raise TypeError(
            f"the {engine} engine fits {expected.__name__} specs, got {type(spec).__name__}"
        )
