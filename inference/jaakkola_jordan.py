"""The Gaussian block and the coordinate-ascent driver shared by the variational engines built on the Jaakkola-Jordan bound
(Horii's VB for GIG logistic, ``gig_vb.py``; gridRVM's VB, ``grid_vb.py``;
DERIVATIONS.md §3.2 and §5.2).

With one xi_n per observation the logistic likelihood is bounded by

    log sigma(t) >= log sigma(xi) + (t - xi)/2 - lambda(xi) (t^2 - xi^2),
    lambda(xi) = tanh(xi / 2) / (4 xi),

which is Gaussian in the weights. Under a Gaussian prior with precision diag(1/s) the
optimal q(w) is N(mu, Sigma), Sigma = (diag(1/s) + 2 X^T Lambda X)^-1, mu = Sigma X^T r
with r = y - 1/2, and the optimal xi_n^2 = x_n^T (Sigma + mu mu^T) x_n.

Two exact forms of Sigma (Horii's Algorithm 1 has both; gridRVM's weight tables need the
second when M > N):

* primal (p x p): Sigma = U (I + 2 U X^T Lambda X U)^-1 U, U = diag(sqrt(s));
* Woodbury (n x n): Sigma = S - S X^T (Lambda^-1 / 2 + X S X^T)^-1 X S, S = diag(s).

The iteration needs only mu, diag Sigma, X mu, diag(X Sigma X^T) and log|Sigma|, all
O(n^2 p) in the Woodbury form, which never builds the p x p Sigma; the full Sigma is built
once, for the returned posterior (:func:`full_covariance`).

Both engines also fit many label vectors on one design at once (their ``fit.many``): the
same loop under ``jax.vmap`` (:func:`run_ascent_many`), each data set's labels checked and
its output finished on its own (``compile_cache.fit_rows``, ``compile_cache.finish_each``),
so that one data set's failure is its own entry, not the batch's.
"""
from __future__ import annotations

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.nn import log_sigmoid
from jax.scipy.linalg import cho_solve

from .compile_cache import finish_each, run_batched
from .posterior import FitInfo

BRANCHES = ("auto", "primal", "woodbury")


def jj_lambda(xi):
    """lambda(xi) = tanh(xi/2) / (4 xi), with its limit 1/8 at xi = 0."""
    safe = jnp.where(xi > 1e-8, xi, 1.0)
    return jnp.where(xi > 1e-8, jnp.tanh(0.5 * safe) / (4.0 * safe), 0.125)


def jj_likelihood_bound(xi, r, f_mean, f_var):
    """sum_n E_q[JJ lower bound of log p(y_n | w)] for q(w) with E[x_n^T w] = f_mean and
    Var[x_n^T w] = f_var; r = y - 1/2 (so that r f = t f / 2 with t = +-1)."""
    lam = jj_lambda(xi)
    return jnp.sum(log_sigmoid(xi) + r * f_mean - 0.5 * xi - lam * (f_var + f_mean ** 2 - xi ** 2))


def gaussian_block(X, r, s, lam, woodbury: bool):
    """q(w) for prior variances s (the prior precision is diag(1/s)) and Lambda = diag(lam):
    (mu, diag Sigma, X mu, diag(X Sigma X^T), log|Sigma|)."""
    if woodbury:
        # Sigma = S - S X^T C^-1 X S,  C = Lambda^-1 / 2 + X S X^T  (n x n)
        XS = X * s[None, :]
        K = XS @ X.T
        C = jnp.diag(0.5 / lam) + K
        L = jnp.linalg.cholesky(C)
        g = X.T @ r
        sg = s * g
        mu = sg - s * (X.T @ cho_solve((L, True), X @ sg))
        Cinv_X = cho_solve((L, True), X)
        sigma_diag = s - s * s * jnp.sum(X * Cinv_X, axis=0)
        f_var = jnp.diag(K) - jnp.sum(K * cho_solve((L, True), K), axis=0)
        # |S^-1 + 2 X^T Lambda X| = |S^-1| |2 Lambda| |C|
        logdet = jnp.sum(jnp.log(s)) - jnp.sum(jnp.log(2.0 * lam)) - 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    else:
        # Sigma = U M^-1 U,  M = I + 2 U X^T Lambda X U,  U = diag(sqrt(s))  (p x p)
        u = jnp.sqrt(s)
        XU = X * u[None, :]
        M = jnp.eye(X.shape[1]) + 2.0 * (XU.T * lam[None, :]) @ XU
        L = jnp.linalg.cholesky(M)
        Minv = cho_solve((L, True), jnp.eye(X.shape[1]))
        sigma = u[:, None] * Minv * u[None, :]
        mu = sigma @ (X.T @ r)
        sigma_diag = jnp.diag(sigma)
        f_var = jnp.sum((X @ sigma) * X, axis=1)
        logdet = jnp.sum(jnp.log(s)) - 2.0 * jnp.sum(jnp.log(jnp.diag(L)))
    return mu, sigma_diag, X @ mu, f_var, logdet


def full_covariance(X, s, lam, woodbury: bool) -> np.ndarray:
    """Sigma = (diag(1/s) + 2 X^T Lambda X)^-1 in the branch's own form (symmetrized)."""
    X, s, lam = (np.asarray(a) for a in (X, s, lam))
    if woodbury:
        XS = X * s[None, :]
        C = np.diag(0.5 / lam) + XS @ X.T
        cov = np.diag(s) - XS.T @ np.linalg.solve(C, XS)
    else:
        u = np.sqrt(s)
        XU = X * u[None, :]
        M = np.eye(X.shape[1]) + 2.0 * (XU.T * lam[None, :]) @ XU
        cov = u[:, None] * np.linalg.inv(M) * u[None, :]
    return 0.5 * (cov + cov.T)


def uses_woodbury(n: int, p: int, branch: str = "auto") -> bool:
    """The paper's choice: the Woodbury (n x n) branch exactly when p > n."""
    if branch not in BRANCHES:
        raise ValueError(f"branch must be one of {BRANCHES}, got {branch!r}")
    return p > n if branch == "auto" else branch == "woodbury"


def scaled_cholesky(cov: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of cov, computed on the correlation matrix (the variances of
    pruned coordinates can be ~1e-12 of the others)."""
    d = np.sqrt(np.diag(cov))
    return d[:, None] * np.linalg.cholesky(cov / d[:, None] / d[None, :])


# --------------------------------------------------------------------------------------
# The coordinate-ascent driver both engines run: sweeps of block updates with the ELBO
# recorded after each, two stopping rules, a status, and one compiled program per shape
# --------------------------------------------------------------------------------------
RUNNING, CONVERGED, ITERATION_CAP, NON_FINITE = 0, 1, 2, 3
STATUS = {CONVERGED: "converged", ITERATION_CAP: "iteration cap", NON_FINITE: "non-finite"}


def check_iteration_settings(max_iter, **tolerances) -> None:
    """ValueError unless max_iter is a positive integer and every tolerance lies in (0, 1)."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    for name, value in tolerances.items():
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 < value < 1):
            raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


class AscentState(NamedTuple):
    """The loop state of :func:`coordinate_ascent`: the variational parameters ``q``, the
    sweeps done (``it``), the stop status (running, converged, iteration cap or non-finite;
    ``STATUS`` names them), the last sweep's ELBO and every sweep's ELBO after each of
    its block updates (rows beyond ``it`` are NaN)."""

    q: Any
    it: jnp.ndarray
    status: jnp.ndarray
    last: jnp.ndarray  # the ELBO after the last sweep
    by_update: jnp.ndarray  # (max_iter, updates per sweep)


def coordinate_ascent(q0, elbo0, sweep, mean_of, *, n_updates: int, max_iter: int, tol, mean_tol) -> AscentState:
    """Run ``sweep(q) -> (q, ELBO after each of its block updates)`` under ``lax.while_loop``
    until one of two rules stops it: a sweep raised the ELBO by at most ``tol * max(1, |ELBO|)``,
    or no coordinate of the Gaussian's mean (``mean_of(q)``) moved by more than
    ``mean_tol * (1 + max |mean|)``. The mean is updated first in a sweep, from the previous
    sweep's other blocks, and the starting q already holds that first update, so the
    mean's change counts from the second sweep on. A non-finite ELBO or mean stops it too.
    """
    def body(state: AscentState):
        q, values = sweep(state.q)
        new = values[-1]
        it = state.it + 1
        finite = jnp.all(jnp.isfinite(values)) & jnp.all(jnp.isfinite(mean_of(q)))
        moved = jnp.max(jnp.abs(mean_of(q) - mean_of(state.q)))
        small = ((jnp.abs(new - state.last) <= tol * jnp.maximum(1.0, jnp.abs(new)))
                 | ((state.it >= 1) & (moved <= mean_tol * (1.0 + jnp.max(jnp.abs(mean_of(q)))))))
        status = jnp.where(~finite, NON_FINITE,
                           jnp.where(small, CONVERGED, jnp.where(it >= max_iter, ITERATION_CAP, RUNNING)))
        return AscentState(q, it, status, new, state.by_update.at[state.it].set(values))

    init = AscentState(q0, jnp.asarray(0), jnp.asarray(RUNNING), elbo0, jnp.full((max_iter, n_updates), jnp.nan))
    return lax.while_loop(lambda s: s.status == RUNNING, body, init)


def compiled_loop(programs, run_loop, shape, n_hyper: int, key):
    """(executable, compile seconds spent in this call) of ``run_loop(X, y, hyper)`` for a
    design of this shape, from the engine's bounded cache ``programs``."""
    def build():
        fn = jax.jit(run_loop)
        args = (jax.ShapeDtypeStruct(shape, jnp.float64), jax.ShapeDtypeStruct(shape[:1], jnp.float64),
                jax.ShapeDtypeStruct((n_hyper,), jnp.float64))
        return fn.lower(*args).compile()

    return programs.get((shape, *key), build)


def ascent_result(out, elbo0, X, y01, prior_variance, woodbury: bool, seconds: float,
                  compile_seconds: float) -> dict[str, Any]:
    """What :func:`run_ascent` returns, from one finished loop: its final state ``out`` and
    first ELBO ``elbo0`` (jax or numpy arrays), for the labels ``y01`` it ran on.
    ``prior_variance(q)``: the Gaussian block's prior variances s at the final q. The
    returned q(w) is the one for the final other blocks and xi (a last Gaussian update),
    so that the posterior and the reported parameters belong together."""
    n_iter = int(out.it)
    cov = full_covariance(X, np.asarray(prior_variance(out.q)), np.asarray(jj_lambda(out.q.xi)), woodbury)
    by_update = np.asarray(out.by_update)[:n_iter]
    return {"mean": cov @ (X.T @ (y01 - 0.5)), "cov": cov, "q": {k: np.asarray(v) for k, v in out.q._asdict().items()},
            "trace": by_update[:, -1].copy(), "elbo_by_update": by_update, "elbo_initial": float(elbo0),
            "n_iter": n_iter, "status": STATUS.get(int(out.status), "running"),
            "branch": "woodbury" if woodbury else "primal", "seconds": seconds, "compile_seconds": compile_seconds}


def run_ascent(compiled, compile_seconds: float, X, y01, hyper, prior_variance, woodbury: bool) -> dict[str, Any]:
    """Run a compiled loop of :func:`compiled_loop` and collect what both engines return:
    {mean, cov, q, trace, elbo_by_update, elbo_initial, n_iter, status, branch, seconds,
    compile_seconds} (:func:`ascent_result`)."""
    t0 = time.perf_counter()
    out, elbo0 = jax.block_until_ready(compiled(jnp.asarray(X), jnp.asarray(y01), hyper))
    seconds = time.perf_counter() - t0
    return ascent_result(out, elbo0, X, y01, prior_variance, woodbury, seconds, compile_seconds)


def run_ascent_many(programs, key, run_loop, X, ys01, hyper, prior_variance, woodbury: bool, finish) -> list:
    """:func:`run_ascent` for every row of ``ys01`` (K, n) that shares the design X, as one
    compiled ``jax.vmap`` of ``run_loop(X, y, hyper)`` (cached in ``programs`` under ``key``,
    which must name everything static in ``run_loop``), then ``finish(result dict)`` of each
    row: entry i is what finish returns or the exception it raised. Each row's seconds and
    compile seconds are the batch's divided by K."""
    (out, elbo0), seconds, compile_seconds = run_batched(
        programs, key, lambda y, X_, hyper_: run_loop(X_, y, hyper_), (ys01,), (jnp.asarray(X), hyper))
    n = len(ys01)
    return finish_each((out, elbo0), n, lambda i, item: finish(ascent_result(
        *item, X, ys01[i], prior_variance, woodbury, seconds / n, compile_seconds / n)))


def ascent_fit_info(engine: str, res, objective: str, extra: dict[str, Any]):
    """FitInfo of a finished ascent (an engine's VBResult): convergence, timings, the ELBO
    trace, and the largest fall of the ELBO in any block update relative to its size (above
    rounding, ~1e-12, an update would not be its block's optimum), beside ``extra``."""

    increases = np.diff(np.concatenate([[res.elbo_initial], res.elbo_by_update.ravel()]))
    scale = max(1.0, float(np.max(np.abs(res.elbo_by_update))) if res.n_iter else 1.0)
    return FitInfo(
        engine=engine,
        converged=res.status == "converged",
        n_iter=res.n_iter,
        reason="" if res.status == "converged" else f"stopped: {res.status} after {res.n_iter} sweeps",
        seconds=res.seconds,
        compile_seconds=res.compile_seconds,
        objective=objective,
        trace=res.trace,
        extra={"branch": res.branch, "elbo_by_update": res.elbo_by_update, "elbo_initial": res.elbo_initial,
               "largest_relative_decrease": float(max(0.0, -np.min(increases)) / scale) if increases.size else 0.0,
               **extra},
    )
