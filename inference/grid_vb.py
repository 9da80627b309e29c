"""Mean-field variational Bayes for gridRVM (Kropotov et al.; DERIVATIONS.md §5), for the
three priors of ``models/grid_rvm.py``: the p-grid, the s-grid and the plain RVM (Bishop &
Tipping's VRVM), all through the same loop.

q(w, alpha, beta) = q(w) prod_i q(alpha_i) prod_j q(beta_j), the likelihood bounded by
Jaakkola & Jordan (``jaakkola_jordan.py``). One sweep updates, in the paper's order, each
block to the exact maximizer of the ELBO given the others:

1. q(w) = N(mu, Sigma), Sigma = (diag E[prec] + 2 Phi^T Lambda Phi)^-1, mu = Sigma Phi^T (y - 1/2),
   with E[prec_ij] = E[alpha_i] E[beta_j] (p-grid), E[alpha_i] + E[beta_j] (s-grid) or
   E[alpha_k] (rvm);
2. q(alpha_i) = Gamma(a_i, b_i):
   p-grid a_i = a0 + M2/2,              b_i = b0 + 1/2 sum_j E[beta_j] E[w_ij^2];
   s-grid a_i = a0 + 1/2 sum_j pi_ij,   b_i = b0 + 1/2 sum_j E[w_ij^2];
   rvm    a_k = a0 + 1/2,               b_k = b0 + 1/2 E[w_k^2];
3. q(beta_j) = Gamma(c_j, d_j), the same with rows and columns exchanged (s-grid: the
   weights 1 - pi_ij); the rvm has no beta;
4. (s-grid) pi_ij = sigmoid(E[log alpha_i] - E[log beta_j]), the optimum of the paper's
   log-sum bound (7) in its eta_ij, zeta_ij (DERIVATIONS.md §5.3: the bound depends on
   (eta, zeta) only through pi = eta / (eta + zeta), and eta = exp E log alpha_i,
   zeta = exp E log beta_j is the paper's choice of that optimum);
5. xi_n = sqrt(phi_n^T (Sigma + mu mu^T) phi_n).

The ELBO is computed after each of the five updates (``elbo_by_update``; a step a prior
does not have leaves it unchanged) and none may lower it (tested), and each update is
checked against a brute-force maximization of the ELBO in its block (tested).

q(w) has the two exact forms of ``jaakkola_jordan.gaussian_block``: the M x M primal and
the N x N Woodbury form, which the iteration uses when M > N ("auto") and which never
builds the M x M Sigma; the full Sigma is built once, for the returned posterior.
Many label vectors on one design (SBC's simulations) run as one vmapped program:
:func:`fit_many` (``fit.many``).

Initialization: every q(alpha_i), q(beta_j) = Gamma(1, 1) (unit expected precisions
whatever the hyper-prior, so that the paper's 1e-6 constants do not start from
E[log alpha] = -1e6), pi = 1/2, xi = 1, and q(w) optimal for those.

Predictive: the paper's MacKay approximation sigmoid(m / sqrt(1 + pi s^2 / 8))
(``GridRVM.gaussian_prob``); ``GridRVM.gaussian_prob_exact`` is the integral itself by
quadrature, and ``FitInfo.extra["mackay_error_train"]`` the largest difference between the
two over the training inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.nn import sigmoid
from jax.scipy.special import digamma, gammaln, xlogy

from ..models.checks import check_design, check_spec
from ..models.grid_rvm import GridRVM
from .compile_cache import CompiledPrograms, fit_rows
from .contracts import EndToEndFit
from .jaakkola_jordan import (BRANCHES, ascent_fit_info, check_iteration_settings, compiled_loop,
                              coordinate_ascent, gaussian_block, jj_lambda, jj_likelihood_bound,
                              run_ascent, run_ascent_many, scaled_cholesky, uses_woodbury)
from .posterior import GaussianPosterior

__all__ = ["GridVBConfig", "VBResult", "UPDATES", "run", "fit", "fit_many", "fit_end_to_end", "elbo", "relevance"]

#: the FitInfo engine label of each prior: its engine's name in the grid-rvm record
ENGINE_NAMES = {"p-grid": "vb", "s-grid": "vb-s-grid", "rvm": "vb-rvm"}
#: the blocks of one sweep, in order (columns of ``elbo_by_update``)
UPDATES = ("w", "alpha", "beta", "pi", "xi")
#: a weight counts as relevant when the data, not the prior, determine it: its
#: well-determinedness gamma = 1 - E[prec] Var_q(w) (MacKay 1992) is at least this. An
#: absolute threshold on E[prec] (RVM practice: prune above ~1e6) does not work for VB: the
#: precision of an irrelevant weight grows only by a factor (1 + 2 a0) per sweep, so it
#: never gets there; gamma splits the digits' weights cleanly into ~0 and ~0.6-1 instead
RELEVANCE_GAMMA = 0.5
_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class GridVBConfig:
    """Settings of the VB iteration.

    - max_iter: sweeps (each updates q(w), q(alpha), q(beta), pi, xi once).
    - tol: stop when a sweep raises the ELBO by less than ``tol * max(1, |ELBO|)``;
    - mu_tol: or when no coordinate of E[w] moves by more than ``mu_tol * (1 + max |E[w]|)``
      (needed under the paper's vague hyper-prior, where the ELBO keeps rising by a
      constant per sweep for every pruned weight as its precision grows).
    - branch: "auto" (Woodbury when M > N), "primal" or "woodbury".
    - second_moment: "full" (E[w_ij^2] = mu_ij^2 + Sigma_ij,ij, eq. 6) or "mean-only"
      (mu_ij^2: the variance forgotten, a planted defect for ``validation/runs/battery.py``;
      its ELBO can fall, and it is never the engine's answer).
    """

    max_iter: int = 5000
    tol: float = 1e-9
    mu_tol: float = 1e-9
    branch: str = "auto"
    second_moment: str = "full"

    def __post_init__(self):
        check_iteration_settings(self.max_iter, tol=self.tol, mu_tol=self.mu_tol)
        if self.branch not in BRANCHES:
            raise ValueError(f"branch must be one of {BRANCHES}, got {self.branch!r}")
        if self.second_moment not in ("full", "mean-only"):
            raise ValueError(f"second_moment must be 'full' or 'mean-only', got {self.second_moment!r}")


class _Q(NamedTuple):
    """The variational parameters, plus the pieces of q(w) the ELBO needs."""

    mu: jnp.ndarray  # (M,) E[w]
    sigma_diag: jnp.ndarray  # (M,) Sigma_kk
    f_mean: jnp.ndarray  # (N,) Phi mu
    f_var: jnp.ndarray  # (N,) phi_n^T Sigma phi_n
    logdet_sigma: jnp.ndarray  # ()
    a: jnp.ndarray  # (R,) shape of q(alpha) (R = M1, or M for the rvm)
    b: jnp.ndarray  # (R,) rate of q(alpha)
    c: jnp.ndarray  # (C,) shape of q(beta) (C = M2; unused by the rvm)
    d: jnp.ndarray  # (C,) rate of q(beta)
    pi: jnp.ndarray  # (M1, M2) weights of the s-grid's log-sum bound (unused otherwise)
    xi: jnp.ndarray  # (N,)


class VBResult(NamedTuple):
    """What :func:`run` returns: the final q(w) = N(mu, cov), the final variational
    parameters ``q``, and the run's record - the ELBO after every sweep (``trace``) and after
    each of its five updates (``elbo_by_update``), the stop ``status``, the branch used, and
    timings. Per-sweep arrays have ``n_iter`` rows."""

    mu: np.ndarray
    cov: np.ndarray
    q: dict  # final variational parameters (numpy)
    trace: np.ndarray  # (n_iter,) ELBO after each sweep
    elbo_by_update: np.ndarray  # (n_iter, 5) ELBO after each block of UPDATES
    elbo_initial: float
    n_iter: int
    status: str
    branch: str
    seconds: float
    compile_seconds: float


class _Family(NamedTuple):
    """Static facts of the iteration (part of the compilation key)."""

    prior: str
    shape: tuple[int, int]
    woodbury: bool
    mean_only: bool  # the planted defect of GridVBConfig.second_moment


def _gamma_stats(shape, rate):
    """(E[x], E[log x]) of Gamma(shape, rate)."""
    return shape / rate, digamma(shape) - jnp.log(rate)


def _gamma_entropy(shape, rate):
    return shape - jnp.log(rate) + gammaln(shape) + (1.0 - shape) * digamma(shape)


def _gamma_cross(shape0, rate0, e_x, e_log_x):
    """E_q[log Gamma(x | shape0, rate0)]."""
    return shape0 * jnp.log(rate0) - gammaln(shape0) + (shape0 - 1.0) * e_log_x - rate0 * e_x


def _expected_precision(q: _Q, fam: _Family):
    """E[prec] of every weight, flat (M,)."""
    e_alpha, _ = _gamma_stats(q.a, q.b)
    if fam.prior == "rvm":
        return e_alpha
    e_beta, _ = _gamma_stats(q.c, q.d)
    table = e_alpha[:, None] * e_beta[None, :] if fam.prior == "p-grid" else e_alpha[:, None] + e_beta[None, :]
    return table.ravel()


def _second_moment(q: _Q, fam: _Family):
    """E[w^2] per weight, flat (M,) (the planted defect drops the variance)."""
    return q.mu ** 2 if fam.mean_only else q.mu ** 2 + q.sigma_diag


def _elbo(q: _Q, r, hyper, fam: _Family):
    """The evidence lower bound of the current q (DERIVATIONS.md §5.4)."""
    a0, b0, c0, d0 = hyper[0], hyper[1], hyper[2], hyper[3]
    M = q.mu.shape[0]
    lik = jj_likelihood_bound(q.xi, r, q.f_mean, q.f_var)
    ew2 = q.mu ** 2 + q.sigma_diag  # the ELBO itself always uses the true moment
    e_alpha, e_log_alpha = _gamma_stats(q.a, q.b)
    hyper_terms = jnp.sum(_gamma_cross(a0, b0, e_alpha, e_log_alpha) + _gamma_entropy(q.a, q.b))
    if fam.prior == "rvm":
        prior_w = jnp.sum(0.5 * e_log_alpha - 0.5 * e_alpha * ew2)
    else:
        e_beta, e_log_beta = _gamma_stats(q.c, q.d)
        hyper_terms = hyper_terms + jnp.sum(_gamma_cross(c0, d0, e_beta, e_log_beta) + _gamma_entropy(q.c, q.d))
        ew2 = ew2.reshape(fam.shape)
        if fam.prior == "p-grid":
            prior_w = jnp.sum(0.5 * (e_log_alpha[:, None] + e_log_beta[None, :])
                              - 0.5 * e_alpha[:, None] * e_beta[None, :] * ew2)
        else:  # the log-sum bound (7) at weights pi: pi E log a + (1 - pi) E log b + H(pi)
            pi = q.pi
            binary_entropy = -xlogy(pi, pi) - xlogy(1.0 - pi, 1.0 - pi)
            prior_w = 0.5 * jnp.sum(pi * e_log_alpha[:, None] + (1.0 - pi) * e_log_beta[None, :] + binary_entropy
                                    - (e_alpha[:, None] + e_beta[None, :]) * ew2)
    prior_w = prior_w - 0.5 * M * _LOG_2PI
    entropy_w = 0.5 * q.logdet_sigma + 0.5 * M * (1.0 + _LOG_2PI)
    return lik + prior_w + entropy_w + hyper_terms


def _update_w(q: _Q, X, r, fam: _Family):
    mu, sd, fm, fv, logdet = gaussian_block(X, r, 1.0 / _expected_precision(q, fam), jj_lambda(q.xi), fam.woodbury)
    return q._replace(mu=mu, sigma_diag=sd, f_mean=fm, f_var=fv, logdet_sigma=logdet)


def _update_alpha(q: _Q, hyper, fam: _Family):
    a0, b0 = hyper[0], hyper[1]
    ew2 = _second_moment(q, fam)
    if fam.prior == "rvm":
        return q._replace(a=jnp.full_like(q.a, a0 + 0.5), b=b0 + 0.5 * ew2)
    ew2 = ew2.reshape(fam.shape)
    if fam.prior == "p-grid":
        e_beta, _ = _gamma_stats(q.c, q.d)
        return q._replace(a=jnp.full_like(q.a, a0 + 0.5 * fam.shape[1]), b=b0 + 0.5 * ew2 @ e_beta)
    return q._replace(a=a0 + 0.5 * jnp.sum(q.pi, axis=1), b=b0 + 0.5 * jnp.sum(ew2, axis=1))


def _update_beta(q: _Q, hyper, fam: _Family):
    c0, d0 = hyper[2], hyper[3]
    if fam.prior == "rvm":
        return q
    ew2 = _second_moment(q, fam).reshape(fam.shape)
    if fam.prior == "p-grid":
        e_alpha, _ = _gamma_stats(q.a, q.b)
        return q._replace(c=jnp.full_like(q.c, c0 + 0.5 * fam.shape[0]), d=d0 + 0.5 * e_alpha @ ew2)
    return q._replace(c=c0 + 0.5 * jnp.sum(1.0 - q.pi, axis=0), d=d0 + 0.5 * jnp.sum(ew2, axis=0))


def _update_pi(q: _Q, fam: _Family):
    if fam.prior != "s-grid":
        return q
    _, e_log_alpha = _gamma_stats(q.a, q.b)
    _, e_log_beta = _gamma_stats(q.c, q.d)
    return q._replace(pi=sigmoid(e_log_alpha[:, None] - e_log_beta[None, :]))


def _update_xi(q: _Q):
    return q._replace(xi=jnp.sqrt(q.f_var + q.f_mean ** 2))


def _hyper_sizes(fam: _Family) -> tuple[int, int]:
    m1, m2 = fam.shape
    return (m1 * m2, 1) if fam.prior == "rvm" else (m1, m2)


def _initial_q(X, r, fam: _Family) -> _Q:
    n, m = X.shape
    rows, cols = _hyper_sizes(fam)
    q = _Q(jnp.zeros(m), jnp.ones(m), jnp.zeros(n), jnp.zeros(n), jnp.zeros(()),
           jnp.ones(rows), jnp.ones(rows), jnp.ones(cols), jnp.ones(cols),
           jnp.full(fam.shape, 0.5), jnp.ones(n))
    # q(w) consistent with the initial q(alpha), q(beta) and xi, so that the first ELBO is defined
    return _update_w(q, X, r, fam)


def _run_loop(X, y, hyper, *, fam: _Family, max_iter: int):
    r = y - 0.5
    q0 = _initial_q(X, r, fam)
    updates = (lambda q: _update_w(q, X, r, fam), lambda q: _update_alpha(q, hyper, fam),
               lambda q: _update_beta(q, hyper, fam), lambda q: _update_pi(q, fam), _update_xi)

    def sweep(q):
        values = []
        for update in updates:
            q = update(q)
            values.append(_elbo(q, r, hyper, fam))
        return q, jnp.stack(values)

    elbo0 = _elbo(q0, r, hyper, fam)
    out = coordinate_ascent(q0, elbo0, sweep, lambda q: q.mu, n_updates=len(UPDATES), max_iter=max_iter,
                            tol=hyper[4], mean_tol=hyper[5])
    return out, elbo0


#: the hyper vector of the compiled loop: a0, b0, c0, d0, tol, mu_tol
N_HYPER = 6
_PROGRAMS = CompiledPrograms("grid_vb")


def _loop(fam: _Family, max_iter: int):
    """The VB loop ``(X, y, hyper) -> (final state, first ELBO)`` with its static settings bound."""
    return lambda X, y, hyper: _run_loop(X, y, hyper, fam=fam, max_iter=max_iter)


def _compiled(shape, fam: _Family, max_iter: int):
    """(executable, compile seconds spent in this call) of the VB loop for these shapes."""
    return compiled_loop(_PROGRAMS, _loop(fam, max_iter), shape, N_HYPER, (fam, max_iter))


def _check(spec, Phi, y):
    check_spec(spec, GridRVM, "vb")
    X, y01 = check_design(Phi, y)
    spec.check_design_width(X.shape[1])
    return X, y01


def _hyper(spec: GridRVM, config: GridVBConfig):
    return jnp.asarray([spec.a0, spec.b0, spec.c0, spec.d0, config.tol, config.mu_tol])


def _family(spec: GridRVM, woodbury: bool, config: GridVBConfig) -> _Family:
    return _Family(spec.prior, spec.shape, bool(woodbury), config.second_moment == "mean-only")


class _Setup(NamedTuple):
    """What a run needs apart from the labels (shared by :func:`run` and :func:`fit_many`)."""

    fam: _Family
    max_iter: int
    hyper: jnp.ndarray
    woodbury: bool

    def prior_variance(self, q):
        """The Gaussian block's prior variances s at the final q."""
        return 1.0 / _expected_precision(q, self.fam)


def _setup(spec: GridRVM, X, config: GridVBConfig) -> _Setup:
    n, m = X.shape
    woodbury = uses_woodbury(n, m, config.branch)
    return _Setup(_family(spec, woodbury, config), int(config.max_iter), _hyper(spec, config), woodbury)


def _vb_result(res: dict) -> VBResult:
    """A VBResult from :func:`~zoo.inference.jaakkola_jordan.run_ascent`'s dict."""
    res = dict(res)
    return VBResult(mu=res.pop("mean"), **res)


def run(spec: GridRVM, Phi, y, *, config: GridVBConfig | None = None) -> VBResult:
    """Run the VB iteration to its stop. Phi: (N, M1 M2) design; y: (N,) labels."""
    config = config or GridVBConfig()
    X, y01 = _check(spec, Phi, y)
    setup = _setup(spec, X, config)
    compiled, compile_seconds = _compiled(X.shape, setup.fam, setup.max_iter)
    return _vb_result(run_ascent(compiled, compile_seconds, X, y01, setup.hyper, setup.prior_variance,
                                 setup.woodbury))


def elbo(spec: GridRVM, Phi, y, q: dict) -> float:
    """The ELBO of given variational parameters (the fields of ``VBResult.q``; the q(w)
    fields must belong together: mu, sigma_diag, f_mean, f_var, logdet_sigma of one
    Gaussian)."""
    X, y01 = _check(spec, Phi, y)
    fam = _family(spec, False, GridVBConfig())
    state = _Q(**{k: jnp.asarray(v) for k, v in q.items()})
    return float(_elbo(state, jnp.asarray(y01 - 0.5), _hyper(spec, GridVBConfig()), fam))


def relevance(spec: GridRVM, q: dict) -> dict[str, np.ndarray]:
    """E[alpha] (per row; per weight for the rvm), E[beta] (per column; None for the rvm)
    and the expected precision of every weight as a table (M1, M2)."""
    fam = _Family(spec.prior, spec.shape, False, False)
    state = _Q(**{k: jnp.asarray(v) for k, v in q.items()})
    e_alpha = np.asarray(q["a"] / q["b"])
    e_beta = None if spec.prior == "rvm" else np.asarray(q["c"] / q["d"])
    return {"alpha": e_alpha, "beta": e_beta, "precision": spec.as_table(np.asarray(_expected_precision(state, fam)))}


def pruning_summary(spec: GridRVM, gamma_table: np.ndarray, threshold: float = RELEVANCE_GAMMA) -> dict:
    """Which weights, rows and columns are relevant: a weight when its well-determinedness
    gamma_ij = 1 - E[prec_ij] Var_q(w_ij) is >= ``threshold`` (``RELEVANCE_GAMMA``); a row
    (column) when any of its weights is."""
    kept = np.asarray(gamma_table) >= threshold
    return {"rule": f"gamma = 1 - E[prec] Var(w) >= {threshold:g}", "relevant_weights": int(kept.sum()),
            # MacKay's effective number of parameters: where many correlated columns share
            # what the data say (RBF tables with M > N), no single weight may reach 1/2
            "effective_weights": float(np.sum(gamma_table)),
            "relevant_rows": int(kept.any(axis=1).sum()), "relevant_columns": int(kept.any(axis=0).sum()),
            "weights": int(kept.size), "kept": kept}


def _fitted_spec(spec: GridRVM, prior: str | None) -> GridRVM:
    """The spec a fit with the ``prior`` option fits: the spec's own prior when None."""
    if prior is None:
        return spec
    check_spec(spec, GridRVM, "vb")
    return spec.with_params(prior=prior)


def _posterior(spec: GridRVM, X: np.ndarray, res: VBResult) -> GaussianPosterior:
    """The Gaussian posterior of a finished run, with the relevances, the final q(alpha),
    q(beta), the pruning summary and the MacKay approximation's error in ``info.extra``."""
    rel = relevance(spec, res.q)
    f_mean = X @ res.mu
    f_var = np.sum((X @ res.cov) * X, axis=1)
    mackay_error = float(np.max(np.abs(np.asarray(spec.gaussian_prob(f_mean, f_var))
                                       - np.asarray(spec.gaussian_prob_exact(f_mean, f_var)))))
    gamma = 1.0 - rel["precision"] * spec.as_table(np.diag(res.cov))
    summary = pruning_summary(spec, gamma)
    info = ascent_fit_info(
        ENGINE_NAMES[spec.prior], res,
        f"evidence lower bound ({spec.prior}; Jaakkola-Jordan bound, mean field q(w) q(alpha) q(beta)) per sweep",
        {"prior": spec.prior, "alpha_mean": rel["alpha"], "beta_mean": rel["beta"], "precision_mean": rel["precision"],
         "q_alpha": (res.q["a"], res.q["b"]), "q_beta": None if spec.prior == "rvm" else (res.q["c"], res.q["d"]),
         "pruning": {k: v for k, v in summary.items() if k != "kept"},
         "relevant": summary["kept"].ravel(), "well_determinedness": gamma.ravel(),
         "mackay_error_train": mackay_error})
    factors = {"alpha": (res.q["a"], res.q["b"])}
    if spec.prior != "rvm":
        factors["beta"] = (res.q["c"], res.q["d"])
    return GaussianPosterior(spec, spec.sites(res.mu.size), res.mu, scaled_cholesky(res.cov), info,
                             hyper_factors=factors)


def fit(spec: GridRVM, Phi, y, *, config: GridVBConfig | None = None, prior: str | None = None) -> GaussianPosterior:
    """q(w) = N(mu, Sigma) of the VB iteration as a Gaussian posterior over ``w``; the
    relevances (E[alpha], E[beta]) and the final q(alpha), q(beta) in ``info.extra``.
    prior: fit this prior ("p-grid", "s-grid", "rvm") instead of the spec's, with its
    hyper-prior (the registry's entries for the model's variants)."""
    spec = _fitted_spec(spec, prior)
    res = run(spec, Phi, y, config=config)
    return _posterior(spec, np.asarray(Phi, dtype=float), res)


def fit_many(spec: GridRVM, Phi, ys, *, config: GridVBConfig | None = None, prior: str | None = None) -> list:
    """The batched form of :func:`fit` (``fit.many``): the fits of the label vectors ``ys``
    (D, N), one a row, on the one design Phi, run as one compiled program (the VB loop
    under ``jax.vmap``). Entry i is what ``fit(spec, Phi, ys[i], config=config,
    prior=prior)`` returns, to round-off, or the exception it would have raised (returned,
    not raised: labels it refuses, a failure of its post-processing). A wrong spec, design
    or config, or a ``ys`` that is not a table of N columns, is raised, as for every fit.

    Timing: every entry's ``info.seconds`` is the batch's warm run time divided by the
    number of data sets in the program (those whose labels were accepted), and its
    ``info.compile_seconds`` the compile time of this call divided the same way - 0 when a
    program for this design shape and batch size (padded to a few sizes) was already compiled."""
    spec = _fitted_spec(spec, prior)
    config = config or GridVBConfig()
    X, _ = _check(spec, Phi, None)
    setup = _setup(spec, X, config)
    X_post = np.asarray(Phi, dtype=float)

    def run_rows(ys01):
        return run_ascent_many(_PROGRAMS, (setup.fam, setup.max_iter), _loop(setup.fam, setup.max_iter), X,
                               ys01, setup.hyper, setup.prior_variance, setup.woodbury,
                               lambda res: _posterior(spec, X_post, _vb_result(res)))

    return fit_rows(ys, X.shape[0], run_rows)


fit.many = fit_many


def fit_end_to_end(Phi_all, y, *, seed: int = 0, spec: GridRVM | None = None, config: GridVBConfig | None = None,
                   prior: str | None = None):
    """The engine as the paper runs it: VB under the given prior (a spec is required: it
    carries the table shape), every weight kept in the posterior; which weights, rows and
    columns are relevant (``RELEVANCE_GAMMA``) is in ``posterior.info.extra["pruning"]``.
    seed: unused (the iteration is deterministic). prior: as in :func:`fit`."""
    if spec is None:
        raise ValueError("gridRVM's VB needs a spec: the table shape (rows, columns) is not in the design matrix")
    post = fit(spec, Phi_all, y, config=config, prior=prior)
    return EndToEndFit(post, post.spec, np.arange(np.asarray(Phi_all).shape[1]))
