"""Small dense linear algebra written as JAX loops instead of LAPACK calls.

Why: the engines factor small matrices (tens of rows) inside compiled loops. On CPU,
``jax.scipy.linalg.solve_triangular(L, I)`` is a LAPACK trsm call whose multi-threaded
BLAS start-up cost dominates at these sizes (benchmarks/README.md, "Measurements behind
design choices"), while a ``fori_loop`` of
row updates compiles into the surrounding program and costs a few microseconds.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def lower_triangular_inverse(L):
    """L^-1 for lower-triangular L (n, n) by forward substitution, one row per step.

    Row i of X = L^-1 is (e_i - L[i, :i] X[:i]) / L[i, i]. Rows >= i of X are still zero
    when row i is computed, so the full product L[i] @ X only sees the rows already done.
    """
    eye = jnp.eye(L.shape[0], dtype=L.dtype)

    def body(i, X):
        return X.at[i].set((eye[i] - L[i] @ X) / L[i, i])

    return lax.fori_loop(0, L.shape[0], body, jnp.zeros_like(L))
