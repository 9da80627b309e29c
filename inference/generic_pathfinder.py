"""Pathfinder (Zhang, Carpenter, Gelman & Vehtari 2022) from the NumPyro model alone, on
BlackJAX's L-BFGS and Pathfinder pieces. The math: DERIVATIONS.md §9.

Like ``auto-laplace`` (``generic_laplace.py``) and the ADVI engines (``generic_svi.py``) it
needs only ``spec.model(Phi, y)`` and ``spec.sites(n_basis)``.

The method. NumPyro's :func:`~numpyro.infer.util.initialize_model` gives the log density
log p(y, T(x)) + log|det J_T(x)| of the model's latents in its *unconstrained* coordinates
x (every sample site; T maps x to the supports). L-BFGS climbs it from a starting point,
x_0, x_1, ..., x_L. At every iterate x_l the L-BFGS memory (the last ``maxcor`` position and
gradient differences, and a diagonal estimate built along the way) defines an inverse
Hessian estimate Sigma_l = diag(alpha_l) + beta_l gamma_l beta_l^T, diagonal plus low rank,
and with it a Gaussian q_l = N(x_l + Sigma_l grad log p(x_l), Sigma_l): the Gaussian a
quasi-Newton step from x_l would centre at the mode. The ELBO of every q_l is estimated by
``elbo_draws`` draws, E_q[log p(x, y) - log q(x)], and the q_l with the largest estimate is
the approximation. ``n_draws`` draws of it are returned, pushed through T and the model's
deterministic sites (NumPyro's postprocess function), each with its importance log
weight log p(x, y) - log q(x).

Multi-path (``paths`` = K > 1): K single paths from dispersed starting points, each with its
own draws and its own weights against its own path's Gaussian; the K sets are pooled (one
chain a path) and resampled by Pareto-smoothed importance resampling
(:func:`zoo.inference.importance.corrected`), which gives weight to the paths that found
posterior mass and drops the ones stuck elsewhere - a mixture of Gaussians, corrected
towards the posterior. Paths that fail (a non-finite ELBO everywhere, non-finite draws or
weights) are dropped and listed; when all do, :class:`~zoo.inference.posterior.ApproximationFailed`.

What is taken from BlackJAX and what is not. BlackJAX 1.7.1 provides the L-BFGS run with
its history (``blackjax.optimizers.lbfgs.minimize_lbfgs``, optax's L-BFGS with a zoom line
search), the inverse Hessian factors (``lbfgs_inverse_hessian_factors``) and the Gaussian's
draws with their log density (``bfgs_sample``). Its ``blackjax.vi.pathfinder.approximate``,
which strings them together, is not used, for three reasons found when checking it on a
Gaussian target (DERIVATIONS.md §9.3): it hands ``bfgs_sample`` the gradient of -log p, so
its Gaussians are centred at x_l - Sigma_l grad log p(x_l), a step *away* from the mode (the
paper's Algorithm 1 uses + grad log p); it gives the final L-BFGS iterate no ELBO (only
iterates with index < the iteration count are candidates); and it estimates the ELBO at all
``maxiter`` + 1 slots of the history however early L-BFGS stopped. Here the same pieces are
strung together with the paper's sign, every iterate reached (the start and the last
included) is a candidate, and the ELBO is estimated only at those (a ``lax.cond`` inside a
``lax.map``, so the work follows the iterations taken, not ``maxiter``).

Starting points. A single path starts at NumPyro's ``init_to_median`` point (per site the
median of 15 prior draws, in unconstrained space), as the ADVI engines initialize their
guides: a central, seeded and data-independent point. A multi-path run starts path k at
Uniform(-``init_radius``, ``init_radius``) per unconstrained coordinate (Stan's dispersed
inits, radius 2 by default; NumPyro's ``init_to_uniform`` draws the same), each path from its
own key.

Seeds (:class:`PathfinderConfig.seed`): the key PRNGKey(seed) is split into the key of the
median start, the keys of the ELBO draws and the key of the returned draws; path k of a
multi-path run uses fold_in(PRNGKey(seed), k + 1) for its start and its draws; the PSIS
resampling uses numpy's generator seeded by ``seed``. The same seed repeats the draws.

Returned: single path, a :class:`~zoo.inference.posterior.DrawsPosterior` with one chain of ``n_draws`` draws over
``spec.sites`` and ``log_weights`` (1, n_draws). Multi-path, the PSIS-resampled
DrawsPosterior (one chain of ``n_draws`` unweighted draws, no ``log_weights``), whose
``info.extra`` has ``psis_khat`` and the rest of :func:`~zoo.inference.importance.corrected`'s, plus
``per_path`` and ``failed_paths``.

Convergence (FitInfo): BlackJAX's Pathfinder reports no L-BFGS status; its
``minimize_lbfgs`` reports the iteration count (and the last gradient norm). L-BFGS stops
on its own when the relative decrease of -log p falls to ``ftol`` or the gradient norm to
``gtol``; ``converged`` is False, with the reason, where it ran to ``maxiter`` without
either (the rule is re-evaluated here on the last step, which may have met it). The
approximation is still the best-ELBO iterate of the path then; the flag says the path did
not reach the mode. ``trace`` is the ELBO estimate at each iterate (index 0 = the start,
-inf where the estimate was not finite).

Timing (FitInfo, as the other engines): ``compile_seconds`` is the compilation of the one
program (L-BFGS, the ELBO along the path and the draws), cached per spec object, design
shape and the settings baked into it, so a second fit compiles nothing - multi-path runs
the same program once a path - plus NumPyro's eager initialization on a call that compiles
or the first time its strategy (median, uniform) runs on that spec and design shape (then
mostly JAX compiling its operations one by one); ``seconds`` is the rest. On the default
PCVM problem (250 x 9, two cores) a single path takes ~0.09 s warm after ~11 s of
compilation, four paths with the resampling ~0.3 s.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.optimizers.lbfgs import bfgs_sample, lbfgs_inverse_hessian_factors, minimize_lbfgs
from jax import lax
from jax.flatten_util import ravel_pytree
from numpyro.infer.initialization import init_to_median, init_to_uniform
from numpyro.infer.util import initialize_model
from scipy.special import logsumexp

from ..models.base import as_jax, checked_problem, problem_sites, problem_shape
from ..models.checks import is_integer
from .compile_cache import CompiledPrograms, SameObject
from .importance import corrected
from .posterior import ApproximationFailed, DrawsPosterior, FitInfo

__all__ = ["ENGINE_NAME", "MULTI_ENGINE_NAME", "OBJECTIVE_NAME", "PathfinderConfig", "fit", "fit_single",
           "fit_multi"]

ENGINE_NAME = "pathfinder"
MULTI_ENGINE_NAME = "pathfinder-multi"
OBJECTIVE_NAME = ("ELBO estimate of the Pathfinder Gaussian at each L-BFGS iterate (index 0: the start), in "
                  "NumPyro's unconstrained space incl. log-Jacobian; -inf where not finite")


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class PathfinderConfig:
    """How Pathfinder runs. Defaults follow Stan's ``pathfinder`` where BlackJAX's differ for
    a reason that matters here, else BlackJAX's.

    - maxiter: L-BFGS iterations at most (Stan 1000; BlackJAX's 30 stops many paths short of
      the mode, and here an unused iteration costs next to nothing - the ELBO is estimated
      only at the iterates reached; 100 and 1000 time the same on PCVM).
    - maxcor: L-BFGS history size; the low-rank part of the covariance has rank 2 * maxcor
      (Stan 5, BlackJAX 10).
    - elbo_draws: draws per iterate for its ELBO estimate (Stan 25; BlackJAX 200, which costs
      8 times as much along the path for a choice that needs only to rank the iterates).
    - n_draws: draws returned (the zoo's 4000, as the other engines; Stan 1000). In a
      multi-path run each path draws n_draws and n_draws are resampled from the pool.
    - paths: multi-path's number of paths (Stan's 4); used by :func:`fit_multi`.
    - init_radius: multi-path starts are Uniform(-init_radius, init_radius) per unconstrained
      coordinate (Stan's and NumPyro's 2).
    - ftol, gtol, maxls: L-BFGS's own stopping rule (relative decrease of -log p at most
      ftol, or gradient norm at most gtol) and its line-search step cap (BlackJAX's
      1e-5, 1e-8, 1000).
    - seed: of the median start's prior draws, the dispersed starts, the ELBO draws, the
      returned draws and the PSIS resampling.
    """

    maxiter: int = 1000
    maxcor: int = 5
    elbo_draws: int = 25
    n_draws: int = 4000
    paths: int = 4
    init_radius: float = 2.0
    ftol: float = 1e-5
    gtol: float = 1e-8
    maxls: int = 1000
    seed: int = 0

    def __post_init__(self):
        name = type(self).__name__
        for field_name, low in (("maxiter", 1), ("maxcor", 1), ("elbo_draws", 1), ("n_draws", 2), ("paths", 2),
                                ("maxls", 1)):
            value = getattr(self, field_name)
            if not (is_integer(value) and value >= low):
                raise ValueError(f"{name}.{field_name} must be an integer >= {low}, got {value!r}")
        r = self.init_radius
        if not (_is_number(r) and math.isfinite(r) and r > 0):
            raise ValueError(f"{name}.init_radius must be a finite number > 0, got {r!r}")
        for field_name in ("ftol", "gtol"):
            value = getattr(self, field_name)
            if not (_is_number(value) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}.{field_name} must be a finite number >= 0, got {value!r}")
        if not (is_integer(self.seed) and 0 <= self.seed < 2**32):
            raise ValueError(f"{name}.seed must be an integer in [0, 2**32), got {self.seed!r}")


# ---------------------------------------------------------------------------------
# One path, one compiled program
# ---------------------------------------------------------------------------------
class _PathOut(NamedTuple):
    elbo: jnp.ndarray  # (maxiter + 1,) ELBO estimate per history slot, -inf beyond the iterates reached
    best: jnp.ndarray  # () index of the chosen iterate
    n_iter: jnp.ndarray  # () L-BFGS iterations taken
    f: jnp.ndarray  # (maxiter + 1,) -log p along the history
    grad_norm: jnp.ndarray  # (maxiter + 1,) |grad log p| along the history
    position: jnp.ndarray  # (d,) the chosen iterate
    values: dict  # {site: (n_draws, *shape)} the draws pushed to the supports
    log_p: jnp.ndarray  # (n_draws,) log p(x, y) at the unconstrained draws (incl. log-Jacobian)
    log_q: jnp.ndarray  # (n_draws,) log q(x) of the chosen Gaussian


def path_program(potential_gen: Callable, postprocess_gen: Callable, unravel: Callable,
                 site_names: tuple[str, ...], config: PathfinderConfig) -> Callable:
    """run(x0, key, Phi, y) -> _PathOut: one Pathfinder path from the flat unconstrained
    start x0. ``potential_gen(Phi, y)`` is NumPyro's potential (-log density incl.
    log-Jacobian) over the dict of unconstrained sites, ``postprocess_gen(Phi, y)`` its map
    to the constrained and deterministic sites, ``unravel`` the flat vector's dict."""
    maxiter, maxcor = int(config.maxiter), int(config.maxcor)
    elbo_draws, n_draws = int(config.elbo_draws), int(config.n_draws)

    def run(x0, key, Phi, y):
        potential = potential_gen(Phi, y)

        def neg_log_p(x):
            return potential(unravel(x))

        (_, status), history = minimize_lbfgs(
            neg_log_p, x0, maxiter=maxiter, maxcor=maxcor, gtol=float(config.gtol), ftol=float(config.ftol),
            maxls=int(config.maxls))
        n_iter = status.iter_num
        # the curvature pairs (s, z) of each step, zero where L-BFGS left a pair out of its
        # memory (curvature condition failed), with maxcor zero pairs in front so that
        # iterate i's window is the slice [i, i + maxcor)
        keep = history.update_mask[1:]
        s = jnp.where(keep, jnp.diff(history.x, axis=0), 0.0)
        z = jnp.where(keep, jnp.diff(history.g, axis=0), 0.0)
        s = jnp.pad(s, ((maxcor, 0), (0, 0)))
        z = jnp.pad(z, ((maxcor, 0), (0, 0)))

        def gaussian_draws(i, k, n):
            S = lax.dynamic_slice_in_dim(s, i, maxcor)
            Z = lax.dynamic_slice_in_dim(z, i, maxcor)
            beta, gamma = lbfgs_inverse_hessian_factors(S.T, Z.T, history.alpha[i])
            # history.g is the gradient of -log p: its negative is grad log p, which puts
            # the mean at x + Sigma grad log p (the paper's; BlackJAX's approximate passes
            # history.g itself)
            return bfgs_sample(k, n, history.x[i], -history.g[i], history.alpha[i], beta, gamma)

        def elbo_at(i, k):
            phi, log_q = gaussian_draws(i, k, elbo_draws)
            log_p = -jax.vmap(neg_log_p)(phi)
            e = jnp.mean(log_p - log_q)
            return jnp.where(jnp.isfinite(e), e, -jnp.inf)

        key_elbo, key_draws = jax.random.split(key)
        slots = jnp.arange(maxiter + 1)
        elbo = lax.map(
            lambda a: lax.cond(a[0] <= n_iter, elbo_at, lambda i, k: jnp.asarray(-jnp.inf, x0.dtype), *a),
            (slots, jax.random.split(key_elbo, maxiter + 1)))
        best = jnp.argmax(elbo)
        phi, log_q = gaussian_draws(best, key_draws, n_draws)
        log_p = -jax.vmap(neg_log_p)(phi)
        post = postprocess_gen(Phi, y)
        values = jax.vmap(lambda x: post(unravel(x)))(phi)
        return _PathOut(elbo, best, n_iter, history.f, jnp.linalg.norm(history.g, axis=1), history.x[best],
                        {n: values[n] for n in site_names if n in values}, log_p, log_q)

    return run


_PROGRAMS = CompiledPrograms("generic_pathfinder", max_entries=32)
#: (spec, design shape, init strategy) whose NumPyro initialization has run in this process
#: (a least-recently-used set: the values are only markers)
_INITIALIZED = CompiledPrograms("generic_pathfinder initializations", max_entries=32)


class _Model(NamedTuple):
    run: Any  # the compiled path program
    layout: tuple  # ((name, unconstrained shape), ...) in the flat order
    x0: np.ndarray  # the start NumPyro's initialization gave
    compile_seconds: float  # compilation in this call (0 when cached), incl. the eager init then
    init_seconds: float


def _model(spec, site_names, Phi_j, y_j, config: PathfinderConfig, init_key, strategy, init_name: str,
           name: str) -> _Model:
    t0 = time.perf_counter()
    try:
        info0 = initialize_model(init_key, spec.model, init_strategy=strategy, dynamic_args=True,
                                 model_args=(Phi_j, y_j), validate_grad=False)
    except RuntimeError as err:  # "Cannot find valid initial parameters"
        raise ApproximationFailed(f"{name}: NumPyro found no valid starting point ({err})") from err
    init_seconds = time.perf_counter() - t0
    z0 = info0.param_info.z
    x0, unravel = ravel_pytree(z0)
    layout = tuple((k, tuple(np.shape(z0[k]))) for k in sorted(z0))  # ravel_pytree's (sorted) order
    key = (SameObject(spec), "path", layout, problem_shape(Phi_j), site_names, config.maxiter, config.maxcor,
           config.elbo_draws, config.n_draws, config.ftol, config.gtol, config.maxls)

    def build():
        run = path_program(info0.potential_fn, info0.postprocess_fn, unravel, site_names, config)
        return jax.jit(run).lower(x0, jax.random.PRNGKey(0), Phi_j, y_j).compile()

    program, seconds = _PROGRAMS.get(key, build)
    # NumPyro's eager initialization, the first time a strategy runs on a spec and design
    # shape in this process (or on a call that compiles), is mostly JAX compiling its
    # operations one by one (seconds cold, ~0.02 s warm): counted with the compilation
    seen = (SameObject(spec), problem_shape(Phi_j), init_name)
    if seconds > 0 or seen not in _INITIALIZED:
        seconds += init_seconds
    _INITIALIZED.get(seen, lambda: True)
    return _Model(program, layout, np.asarray(x0), seconds, init_seconds)


class _Path(NamedTuple):
    """One path's outcome, checked: the draws of the spec's sites and their weights."""

    draws: dict[str, np.ndarray]  # {site: (n_draws, *shape)}
    log_weights: np.ndarray  # (n_draws,)
    elbo: np.ndarray  # (n_iter + 1,)
    report: dict[str, Any]
    converged: bool
    reason: str


def _run_path(model: _Model, x0, key, Phi_j, y_j, sites, config: PathfinderConfig, name: str) -> _Path:
    """Run one path and check it; ApproximationFailed where it gives nothing usable."""
    out = jax.block_until_ready(model.run(jnp.asarray(x0), key, Phi_j, y_j))
    n_iter = int(out.n_iter)
    elbo = np.asarray(out.elbo)[: n_iter + 1]
    best = int(out.best)
    if not np.any(np.isfinite(elbo)):
        raise ApproximationFailed(f"{name}: the ELBO estimate is not finite at any of the {n_iter + 1} iterates of "
                                  "the L-BFGS path (the log density overflows or is -inf at the Gaussians' draws)")
    missing = [s.name for s in sites if s.name not in out.values]
    if missing:
        raise ValueError(f"{name}: spec.sites lists {missing}, which the model's draws lack; the spec and its model "
                         "disagree")
    draws = {}
    for s in sites:
        v = np.asarray(out.values[s.name], dtype=float)
        if v.shape[1:] != tuple(s.shape):
            raise ValueError(f"{name}: site {s.name!r} has shape {v.shape[1:]} in the model but {tuple(s.shape)} in "
                             "spec.sites")
        if not np.all(np.isfinite(v)):
            raise ApproximationFailed(f"{name}: draws of {s.name!r} are not finite (iterate {best} of the path)")
        draws[s.name] = v
    log_w = np.asarray(out.log_p, dtype=float) - np.asarray(out.log_q, dtype=float)
    bad = np.isnan(log_w) | (log_w == np.inf)
    if np.any(bad):
        raise ApproximationFailed(f"{name}: log p - log q is not a number at {int(bad.sum())} of its draws")

    # L-BFGS's own stopping rule, re-evaluated on the last step (BlackJAX reports only the
    # iteration count): it stopped early, or its last step met the rule at maxiter
    f, g = np.asarray(out.f), np.asarray(out.grad_norm)
    converged, reason = True, ""
    if n_iter >= config.maxiter:
        prev, last = f[n_iter - 1], f[n_iter]
        rel = abs(prev - last) / max(abs(prev), abs(last), 1.0)
        converged = bool(rel <= config.ftol or g[n_iter - 1] <= config.gtol)
        if not converged:
            reason = (f"L-BFGS reached maxiter={config.maxiter} before its stopping rule (relative decrease of "
                      f"-log p <= ftol={config.ftol:g}, or |gradient| <= gtol={config.gtol:g}; last relative "
                      f"decrease {rel:.3g}, |gradient| {g[n_iter]:.3g}); the draws are the best-ELBO Gaussian "
                      "of a path that did not reach the mode")
    finite = log_w[np.isfinite(log_w)]
    report = {
        "chosen_iterate": best,
        "elbo": float(elbo[best]),
        "lbfgs_iterations": n_iter,
        "lbfgs_converged": converged,
        "grad_norm_final": float(g[n_iter]),
        "grad_norm_path": g[: n_iter + 1],
        "log_density_path": -f[: n_iter + 1],
        "position": np.asarray(out.position),
        "start": np.asarray(x0),
        # the importance estimate of log p(y) (the model's own normalizer) from the draws,
        # and how uneven the weights are (0 for an exact Gaussian target)
        "log_mean_weight": float(logsumexp(log_w) - math.log(log_w.size)),
        "log_weight_sd": float(np.std(finite)) if finite.size > 1 else float("nan"),
        "zero_weights": int(np.sum(log_w == -np.inf)),
    }
    return _Path(draws, log_w, elbo, report, converged, reason)


def _settings(config, paths):
    config = PathfinderConfig() if config is None else config
    if not isinstance(config, PathfinderConfig):
        raise TypeError(f"config must be a PathfinderConfig, got {type(config).__name__}")
    paths = 1 if paths is None else paths
    if not (is_integer(paths) and paths >= 1):
        raise ValueError(f"paths must be None or an integer >= 1, got {paths!r}")
    return config, int(paths)


def fit(spec, Phi, y, *, config: PathfinderConfig | None = None, paths: int | None = None,
        name: str | None = None) -> DrawsPosterior:
    """Pathfinder on ``spec.model``; draws over ``spec.sites``.

    Phi: (N, M) design; y: (N,) labels 0/1 or -1/+1. config: :class:`PathfinderConfig`.
    paths: None or 1, a single path from the ``init_to_median`` point; K > 1, K paths from
    dispersed starts, pooled and PSIS-resampled. name: the engine name in FitInfo (default
    ``pathfinder`` / ``pathfinder-multi``).

    Single path: a DrawsPosterior ``{site: (1, n_draws, *shape)}`` with ``log_weights`` (1,
    n_draws); ``info.trace`` the ELBO along the path, ``info.extra`` the chosen iterate, its
    ELBO, the L-BFGS iterations and more (``_run_path``). Multi-path: the resampled
    DrawsPosterior of :func:`~zoo.inference.importance.corrected`, ``info.extra["per_path"]`` each path's
    report, ``info.extra["failed_paths"]`` the dropped ones with their reasons.

    Raises ValueError for missing labels or bad ``paths``, TypeError for a config of another
    type, ApproximationFailed where no path gives finite draws and weights.
    """
    config, paths = _settings(config, paths)
    name = name or (ENGINE_NAME if paths == 1 else MULTI_ENGINE_NAME)
    Phi_np, y_np = checked_problem(spec, Phi, y)
    if y_np is None:
        raise ValueError(f"{name}: labels y are required")
    sites = problem_sites(spec, Phi_np)
    site_names = tuple(s.name for s in sites)
    Phi_j, y_j = as_jax(Phi_np), as_jax(y_np)
    t_start = time.perf_counter()
    if paths == 1:
        return _fit_single(spec, sites, site_names, Phi_j, y_j, config, name, t_start)
    return _fit_multi(spec, sites, site_names, Phi_j, y_j, config, paths, name, t_start)


def _fit_single(spec, sites, site_names, Phi_j, y_j, config, name, t_start) -> DrawsPosterior:
    key_init, key_path = jax.random.split(jax.random.PRNGKey(int(config.seed)))
    model = _model(spec, site_names, Phi_j, y_j, config, key_init, init_to_median, "median", name)
    path = _run_path(model, model.x0, key_path, Phi_j, y_j, sites, config, name)
    draws = {k: v[None] for k, v in path.draws.items()}
    info = FitInfo(
        engine=name, converged=path.converged, n_iter=path.report["lbfgs_iterations"], reason=path.reason,
        seconds=time.perf_counter() - t_start - model.compile_seconds, compile_seconds=model.compile_seconds,
        objective=OBJECTIVE_NAME, trace=path.elbo,
        extra={**path.report, "init": "median", "layout": list(model.layout), "init_seconds": model.init_seconds,
               "maxiter": config.maxiter, "maxcor": config.maxcor, "elbo_draws": config.elbo_draws,
               "n_draws": config.n_draws, "seed": config.seed})
    return DrawsPosterior(spec, sites, draws, info, log_weights=path.log_weights[None])


def _fit_multi(spec, sites, site_names, Phi_j, y_j, config, paths, name, t_start) -> DrawsPosterior:
    base = jax.random.PRNGKey(int(config.seed))
    # the initialization only builds the potential and the transform here (its start is not used)
    model = _model(spec, site_names, Phi_j, y_j, config, jax.random.split(base)[0],
                   init_to_uniform(radius=float(config.init_radius)), "uniform", name)
    d = model.x0.size
    done: list[tuple[int, _Path]] = []
    per_path, failed = [], []
    for k in range(paths):
        key_start, key_path = jax.random.split(jax.random.fold_in(base, k + 1))
        x0 = jax.random.uniform(key_start, (d,), dtype=Phi_j.dtype, minval=-float(config.init_radius),
                                maxval=float(config.init_radius))
        try:
            path = _run_path(model, x0, key_path, Phi_j, y_j, sites, config, f"{name} path {k}")
        except ApproximationFailed as err:
            failed.append({"path": k, "start": np.asarray(x0), "reason": str(err)})
            per_path.append({"path": k, "failed": str(err)})
            continue
        done.append((k, path))
        per_path.append({"path": k, "converged": path.converged, "reason": path.reason, **path.report})
    if not done:
        raise ApproximationFailed(f"{name}: all {paths} paths failed: " + "; ".join(f["reason"] for f in failed))
    pooled_draws = {s: np.stack([p.draws[s] for _, p in done]) for s in site_names}
    log_w = np.stack([p.log_weights for _, p in done])
    best_k, best_path = max(done, key=lambda kp: kp[1].report["elbo"])
    unconverged = [k for k, p in done if not p.converged]
    reason = "" if not unconverged else (
        f"L-BFGS reached maxiter={config.maxiter} before its stopping rule on path(s) {unconverged} (per_path "
        "gives each reason)")
    info = FitInfo(
        engine=name, converged=not unconverged, n_iter=sum(p.report["lbfgs_iterations"] for _, p in done),
        reason=reason, seconds=time.perf_counter() - t_start - model.compile_seconds,
        compile_seconds=model.compile_seconds,
        objective=OBJECTIVE_NAME + f" (of path {best_k}, the one with the largest chosen ELBO)",
        trace=best_path.elbo,
        extra={"paths": paths, "paths_used": [k for k, _ in done], "failed_paths": failed, "per_path": per_path,
               "best_path": best_k, "elbo": best_path.report["elbo"], "init": "uniform",
               "init_radius": float(config.init_radius), "layout": list(model.layout),
               "init_seconds": model.init_seconds, "maxiter": config.maxiter, "maxcor": config.maxcor,
               "elbo_draws": config.elbo_draws, "n_draws_per_path": config.n_draws, "seed": config.seed})
    pooled = DrawsPosterior(spec, sites, pooled_draws, info, log_weights=log_w)
    return corrected(pooled, n_draws=int(config.n_draws), seed=int(config.seed), name=name)


def fit_single(spec, Phi, y, *, config: PathfinderConfig | None = None) -> DrawsPosterior:
    """:func:`fit` with one path (the ``pathfinder`` engine)."""
    return fit(spec, Phi, y, config=config, paths=1, name=ENGINE_NAME)


def fit_multi(spec, Phi, y, *, config: PathfinderConfig | None = None) -> DrawsPosterior:
    """:func:`fit` with ``config.paths`` paths, PSIS-resampled (the ``pathfinder-multi`` engine)."""
    config, _ = _settings(config, None)
    return fit(spec, Phi, y, config=config, paths=config.paths, name=MULTI_ENGINE_NAME)
