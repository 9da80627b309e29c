"""Design matrices (the basis Phi) shared by every model.

Data flows one way: dataset -> basis -> model spec -> engine. A basis is fitted on the
training inputs (centres, and for the linear basis nothing) and then evaluated on any
input, so test design matrices are built with the same centres and width.

Kernel convention: ``k(x, x') = exp(-||x - x'||^2 / (2 width^2))``. The PCVM papers
write ``exp(-theta^2 ||x - x'||^2)``; the two agree for ``theta = 1 / (sqrt(2) width)``
(see :func:`theta_to_width`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import check_features


def theta_to_width(theta: float) -> float:
    """Convert the papers' kernel parameter theta (exp(-theta^2 r^2)) to our width."""
    if theta <= 0:
        raise ValueError(f"kernel parameter theta must be positive, got {theta}")
    return 1.0 / (np.sqrt(2.0) * theta)


def squared_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Pairwise squared Euclidean distances, shape (len(A), len(B)), clipped at 0."""
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.maximum(d2, 0.0)


#: the median heuristic looks at no more than this many points (a seeded subsample beyond)
MEDIAN_HEURISTIC_POINTS = 2000


def median_heuristic_width(X: np.ndarray) -> float:
    """The median heuristic for the RBF width: the median Euclidean distance between two
    distinct training inputs (over a seeded subsample of MEDIAN_HEURISTIC_POINTS when there
    are more). ValueError when it is not positive (fewer than two distinct inputs)."""
    X = check_features(X)
    if X.shape[0] > MEDIAN_HEURISTIC_POINTS:
        rows = np.random.default_rng(0).choice(X.shape[0], MEDIAN_HEURISTIC_POINTS, replace=False)
        X = X[np.sort(rows)]
    d2 = squared_distances(X, X)[np.triu_indices(X.shape[0], 1)]
    width = float(np.sqrt(np.median(d2))) if d2.size else 0.0
    if not width > 0:
        raise ValueError("the median heuristic needs at least two distinct inputs (the median distance is 0)")
    return width


def rbf_kernel(A: np.ndarray, B: np.ndarray, width: float) -> np.ndarray:
    """Gaussian kernel matrix k(a_i, b_j) = exp(-||a_i - b_j||^2 / (2 width^2))."""
    if not np.isfinite(width) or width <= 0:
        raise ValueError(f"kernel width must be a positive finite number, got {width}")
    return np.exp(-squared_distances(A, B) / (2.0 * width**2))


@dataclass(frozen=True)
class LinearBasis:
    """Phi(x) = x. Models with a bias site (PCVM) use it as is; models whose bias is a
    weight (GGSM probit) wrap it: ``WithBias(LinearBasis.fit(X))`` gives [1 | x]."""

    n_features: int

    @classmethod
    def fit(cls, X: np.ndarray) -> "LinearBasis":
        """The linear basis of the training inputs ``X`` (n, d): it only records ``d``."""
        X = check_features(X)
        return cls(n_features=X.shape[1])

    def transform(self, X: np.ndarray) -> np.ndarray:
        """A copy of ``X`` as the design matrix, shape (n, n_features); ValueError
        (:func:`~zoo.models.checks.check_features`) for another width or bad entries."""
        X = check_features(X, n_features=self.n_features)
        return X.copy()

    def subset(self, columns: np.ndarray) -> "ColumnSubset":
        """The basis restricted to some features (the weights an engine kept)."""
        return ColumnSubset(self, np.asarray(columns, dtype=int))

    @property
    def n_basis(self) -> int:
        """The number of design columns: the number of input features."""
        return self.n_features


@dataclass(frozen=True, eq=False)
class RBFBasis:
    """Phi(x)_j = s_j k(x, c_j) for centres c_j (by default the training inputs).

    ``signs`` multiplies each column; PCVM uses the label (+1/-1) of the centre's own
    training point, so that every weight of its model is non-negative. ``signs=None``
    gives the plain kernel basis (RVM, GGSM, BBLR kernels).
    """

    centres: np.ndarray
    width: float
    signs: np.ndarray | None = None

    @classmethod
    def fit(cls, X: np.ndarray, width: float, signs: np.ndarray | None = None) -> "RBFBasis":
        """The RBF basis centred on the training inputs ``X`` (n, d); ValueError unless
        ``width`` is positive and finite and ``signs`` (if given) is +1/-1, one per row."""
        X = check_features(X)
        if not np.isfinite(width) or width <= 0:
            raise ValueError(f"kernel width must be a positive finite number, got {width}")
        if signs is not None:
            signs = np.asarray(signs, dtype=float)
            if signs.shape != (X.shape[0],) or not np.all(np.isin(signs, (-1.0, 1.0))):
                raise ValueError("signs must be a vector of +1/-1, one per centre")
        return cls(centres=X.copy(), width=float(width), signs=signs)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The design matrix of inputs ``X``: kernel values against the centres, each
        column multiplied by its sign; shape (n, n_centres)."""
        X = check_features(X, n_features=self.centres.shape[1])
        K = rbf_kernel(X, self.centres, self.width)
        return K if self.signs is None else K * self.signs[None, :]

    def subset(self, columns: np.ndarray) -> "RBFBasis":
        """The basis restricted to some centres (an active set chosen by an engine)."""
        columns = np.asarray(columns, dtype=int)
        return RBFBasis(
            centres=self.centres[columns],
            width=self.width,
            signs=None if self.signs is None else self.signs[columns],
        )

    @property
    def n_basis(self) -> int:
        """The number of design columns: one per centre."""
        return self.centres.shape[0]


@dataclass(frozen=True, eq=False)
class WithBias:
    """[1 | inner(x)]: a constant first column, for models whose bias is one of the
    weights under the common prior (GGSM probit, as in its paper)."""

    inner: Any

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The inner basis's design matrix of ``X`` with a column of ones in front."""
        Phi = self.inner.transform(X)
        return np.concatenate([np.ones((Phi.shape[0], 1)), Phi], axis=1)

    def subset(self, columns: np.ndarray) -> "ColumnSubset":
        """Some columns of this basis (column 0 is the bias column)."""
        return ColumnSubset(self, np.asarray(columns, dtype=int))

    @property
    def n_basis(self) -> int:
        """The number of design columns: the inner basis's plus the bias column."""
        return 1 + self.inner.n_basis


@dataclass(frozen=True, eq=False)
class ColumnSubset:
    """Some columns of another basis (the weights an engine kept)."""

    base: Any
    columns: np.ndarray

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The base basis's design matrix of ``X``, restricted to ``columns``."""
        return self.base.transform(X)[:, self.columns]

    @property
    def n_basis(self) -> int:
        """The number of columns kept."""
        return int(self.columns.size)


def pcvm_basis(X: np.ndarray, y01: np.ndarray, width: float) -> RBFBasis:
    """The PCVM basis: RBF columns on the training points, signed by their labels."""
    y01 = np.asarray(y01)
    return RBFBasis.fit(X, width, signs=np.where(y01 == 1, 1.0, -1.0))


@dataclass(frozen=True, eq=False)
class PerDimensionRBFBasis:
    """Per-dimension RBFs as a table (gridRVM's third basis): for centres c_j and input
    dimensions i, phi_ij(x) = exp(-delta (x_i - c_j,i)^2), a (dimension x centre) table
    flattened row by row (column i * n_centres + j of the design). A row of the table is
    one input dimension (its relevance: is the feature noise?), a column one centre (its
    relevance: is it a relevance vector?).

    delta is the papers' exp(-delta r^2) parameter directly (gridRVM uses 5.55).
    """

    centres: np.ndarray
    delta: float

    @classmethod
    def fit(cls, X: np.ndarray, delta: float) -> "PerDimensionRBFBasis":
        """The basis centred on the training inputs ``X`` (n, d); ValueError unless ``delta``
        is positive and finite."""
        X = check_features(X)
        if not np.isfinite(delta) or delta <= 0:
            raise ValueError(f"RBF parameter delta must be a positive finite number, got {delta}")
        return cls(centres=X.copy(), delta=float(delta))

    @property
    def table_shape(self) -> tuple[int, int]:
        """The shape of the relevance table: (input dimensions, centres)."""
        return self.centres.shape[1], self.centres.shape[0]

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The design matrix of inputs ``X``: the (dimension x centre) table of each row
        flattened row by row, shape (n, d * n_centres)."""
        X = check_features(X, n_features=self.centres.shape[1])
        # (n, d, n_centres): dimension i of object n against dimension i of centre j
        diff = X[:, :, None] - self.centres.T[None, :, :]
        return np.exp(-self.delta * diff * diff).reshape(X.shape[0], -1)

    def subset(self, columns: np.ndarray) -> "ColumnSubset":
        """Some columns of the flattened table (the weights an engine kept)."""
        return ColumnSubset(self, np.asarray(columns, dtype=int))

    @property
    def n_basis(self) -> int:
        """The number of design columns: input dimensions times centres."""
        return self.centres.shape[0] * self.centres.shape[1]
