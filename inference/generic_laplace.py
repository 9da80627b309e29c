"""``auto-laplace``: a Laplace approximation built from the NumPyro model alone.

Every other Laplace engine of the zoo is derived by hand for one model. This one needs
nothing but ``spec.model(Phi, y)`` and ``spec.sites(n_basis)``:

1. :func:`numpyro.infer.util.initialize_model` turns the model into its potential
   U(x) = -log p(y, T(x)) - log|det J_T(x)| over NumPyro's *unconstrained* coordinates x
   (T maps them to the sites' supports: exp for a positive site, a shifted exp for a
   truncated one, the identity for a real one). ``log p(y, T(x)) + log|J|`` is the
   density of x itself, so a Gaussian in x is a proper approximation whose pushforward
   through T never leaves the support - the right space for positive or bounded sites.
2. The mode of -U is found by damped Newton's method (gradient and Hessian by JAX
   autodiff, one jit-compiled ``lax.while_loop``). Each step is the Newton step when the
   negative Hessian -H is positive definite. An iterate far from the mode may sit where
   the log density is not concave (PCVM's weights in log space below their mode, from a
   random start); there the step solves (-H + mu I) d = g, ``mu = 2 |lambda_min(-H)|``
   (modified Newton), and where even that is not finite the unit-length gradient step.
   Every step is halved until the Armijo condition f(x + t d) >= f(x) + 1e-4 t g.d holds
   (non-finite values never count). The shift only steers the iterate: the Hessian of the
   approximation is never modified, and convergence is declared only where -H itself is
   positive definite.
3. Converged means: -H positive definite and the Newton decrement
   sqrt(g^T (-H)^-1 g) <= ``grad_tol`` (see :class:`GenericLaplaceConfig` for why this
   scaling). Otherwise - iteration cap, no ascent step left, a non-finite value, or -H
   not positive definite at the reached point - :class:`~zoo.inference.posterior.ApproximationFailed` is raised
   with the numbers (iterations, ``max |gradient|``, decrement, smallest eigenvalue of -H).
   A regularized Hessian would hand out a Gaussian that approximates nothing.
4. n_draws draws x = mode + L^-T z (-H = L L^T, z ~ N(0, I), seeded) are pushed through
   the model's postprocess function (T, plus the model's deterministic sites) and
   returned as a :class:`~zoo.inference.posterior.DrawsPosterior` with one chain.

The draws cover the sites ``spec.sites`` lists; every one must be a latent site of the
model (else ValueError). Latent sites the spec does not list (hierarchical
hyper-parameters) are part of the Gaussian, but only their mode is reported
(``info.extra["other_sites_mode"]``).

What the result is, exactly: a Gaussian in x, not in the constrained values. For a
positive site the draws are log-normal, centred (in log space) at the mode of the density
of log(site) *including* the Jacobian - e.g. for lam | data ~ InvGamma(A, B) the centre is
log(B / A), while the mode of lam's own density is B / (A + 1). ``mode_constrained`` is
T(mode), not the mode of the constrained posterior. For PCVM (probit, truncated weights)
the weights are therefore Gaussian in log w, which is legitimate: the draws are all
positive and ``zoo compare`` measures how far that is from NUTS.

Flat order: ``extra["mode"]`` and ``extra["precision"]`` (= -H) are over x in the order
of ``spec.sites`` and then the other latent sites by name; ``extra["layout"]`` lists
(name, unconstrained shape) in that order.

Timing (FitInfo, as the other engines): ``compile_seconds`` is the XLA compilation of the
Newton program and of the batched transform (both cached per spec object, data shape and
max_iter / n_draws, so a second fit of the same spec compiles nothing) plus, on a call
that compiles, NumPyro's eager initialization (on a cold process that is mostly JAX
compiling its operations one by one); ``seconds`` is the rest: initialization, Newton,
the checks and the draws.

Many data sets on one design (:func:`fit_many`, also ``fit.many``): NumPyro's
initialization and the Newton loop run as one ``jax.vmap`` program over the label
vectors, then each data set gets the same checks, draws and FitInfo as from ``fit``,
whose result (or exception) each entry is, to round-off. Each entry's ``seconds`` and
``compile_seconds`` are its even share of the batch's, plus its own checks and draws.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve
from numpyro.infer.initialization import (
    init_to_feasible,
    init_to_mean,
    init_to_median,
    init_to_sample,
    init_to_uniform,
)
from numpyro.infer.util import initialize_model
from scipy.linalg import solve_triangular

from ..models.base import as_jax, checked_problem, problem_sites, problem_shape
from ..models.checks import check_features, is_integer
from .posterior import ApproximationFailed, DrawsPosterior, FitInfo
from .compile_cache import CompiledPrograms, SameObject, fit_rows, run_batched

__all__ = ["ENGINE_NAME", "GenericLaplaceConfig", "INIT_STRATEGIES", "OBJECTIVE_NAME", "fit", "fit_many"]

ENGINE_NAME = "auto-laplace"
OBJECTIVE_NAME = "log joint in NumPyro's unconstrained space (incl. log-Jacobian)"

#: NumPyro's initialization strategies, by the names the config accepts. All act per
#: site on the prior (the data do not enter), seeded by ``GenericLaplaceConfig.seed``.
INIT_STRATEGIES: dict[str, Callable] = {
    "uniform": init_to_uniform,  # Uniform(-2, 2) in unconstrained space (default, as in NumPyro)
    "median": init_to_median,  # median of 15 prior draws
    "mean": init_to_mean,  # prior mean (the median where the mean does not exist)
    "prior draw": init_to_sample,  # one draw from the prior
    "feasible": init_to_feasible,  # 0 in unconstrained space
}

#: Armijo constant of the backtracking line search (the usual textbook value)
ARMIJO = 1e-4
#: at most this many halvings per step (2^-50 ~ 1e-15: below that x + t d == x in float64
#: for any x of order 1, so further halving cannot find anything)
MAX_HALVINGS = 50

# Newton status codes
RUNNING, CONVERGED, ITERATION_CAP, STALLED, NONFINITE = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class GenericLaplaceConfig:
    """Settings of the generic Laplace engine.

    - max_iter: cap on Newton steps (on the concave problems of the zoo Newton needs 5-15
      from a random start; 100 leaves room for a modified-Newton phase where the start
      is not in a concave region).
    - grad_tol: convergence tolerance on the Newton decrement sqrt(g^T (-H)^-1 g), the
      gradient measured in the posterior's own scale. Why not ``max |g|``: the unconstrained
      coordinates mix scales (log lambda next to weights; a gradient grows with N), so
      one absolute threshold is too loose for a tight coordinate and too strict for a
      wide one. The decrement is invariant under any affine change of coordinates: it
      is the length of the Newton step in the Mahalanobis metric of the Laplace
      covariance, i.e. (to second order) the distance from the iterate to the exact
      mode in posterior standard deviations, and its square is twice the log density
      still to gain. 1e-6 puts the mode within 1e-6 sd of the exact one, far
      below the Monte Carlo error of the draws (1/sqrt(4000) ~ 0.016 sd); Newton's
      quadratic convergence usually lands orders of magnitude below it.
    - n_draws: number of Gaussian draws returned (one chain).
    - seed: seeds both the initialization strategy and the draws.
    - init: NumPyro initialization strategy, one of :data:`INIT_STRATEGIES`: "uniform"
      (default: Uniform(-2, 2) per coordinate in unconstrained space, NumPyro's own
      default for HMC), "median" (of 15 prior draws), "mean", "prior draw", "feasible"
      (0 in unconstrained space). Where the log density is concave the start does not
      matter; where it is not, the mode found (or the failure) may depend on it. Why
      "uniform" by default: it needs no prior sampling - "median" draws 15 samples per
      site, and for a Gamma-based prior (InvGamma, the generalized normal) compiling
      JAX's gamma sampler costs several seconds per model on a cold start - and it never
      starts exactly at a symmetric point such as w = 0, where a prior with a kink
      (``|w|^q``, q <= 1) has no gradient ("feasible" does).
    """

    max_iter: int = 100
    grad_tol: float = 1e-6
    n_draws: int = 4000
    seed: int = 0
    init: str = "uniform"

    def __post_init__(self):
        name = type(self).__name__
        if not (is_integer(self.max_iter) and self.max_iter >= 1):
            raise ValueError(f"{name}.max_iter must be an integer >= 1, got {self.max_iter!r}")
        number = isinstance(self.grad_tol, (int, float, np.floating, np.integer)) and not isinstance(
            self.grad_tol, (bool, np.bool_))
        if not (number and math.isfinite(self.grad_tol) and self.grad_tol > 0):
            raise ValueError(f"{name}.grad_tol must be a finite number > 0, got {self.grad_tol!r}")
        if not (is_integer(self.n_draws) and self.n_draws >= 2):
            raise ValueError(f"{name}.n_draws must be an integer >= 2, got {self.n_draws!r}")
        if not (is_integer(self.seed) and 0 <= self.seed < 2**32):
            raise ValueError(f"{name}.seed must be an integer in [0, 2**32), got {self.seed!r}")
        if not isinstance(self.init, str) or self.init not in INIT_STRATEGIES:
            raise ValueError(f"{name}.init must be one of {tuple(INIT_STRATEGIES)}, got {self.init!r}")


# ---------------------------------------------------------------------------------
# The flat unconstrained vector
# ---------------------------------------------------------------------------------
class _Layout(NamedTuple):
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(np.prod(s, dtype=int)) for s in self.shapes)

    def ravel(self, params: dict[str, Any]):
        return jnp.concatenate([jnp.reshape(params[n], (-1,)) for n in self.names])

    def flat_names(self) -> list[str]:
        """Names of the flat coordinates, e.g. ['lam', 'w[0]', 'w[1]', ...] (unconstrained)."""
        out = []
        for n, shape in zip(self.names, self.shapes):
            out.extend([n] if shape == () else [f"{n}[{','.join(map(str, i))}]" for i in np.ndindex(*shape)])
        return out

    def unravel(self, x) -> dict[str, Any]:
        out, start = {}, 0
        for n, shape, size in zip(self.names, self.shapes, self.sizes):
            out[n] = jnp.reshape(x[start : start + size], shape)
            start += size
        return out


def _layout(spec_sites, z: dict[str, Any]) -> _Layout:
    # spec sites that are sample sites first; a spec site the model computes as a
    # deterministic function of its latents (GIG logistic's beta = sqrt(tau) z) is not a
    # coordinate of the Gaussian - its draws come from the transform of the others
    names = [s.name for s in spec_sites if s.name in z] + sorted(set(z) - {s.name for s in spec_sites})
    return _Layout(tuple(names), tuple(tuple(np.shape(z[n])) for n in names))


# ---------------------------------------------------------------------------------
# Damped Newton on f(x) = -U(x), one compiled while_loop
# ---------------------------------------------------------------------------------
class _State(NamedTuple):
    """State of the damped Newton loop. value, grad and hess are evaluated at the top of
    each step, at the x the step starts from; when the loop stops x has not moved since,
    so they describe the returned point (NaN before the first step)."""

    x: jnp.ndarray  # (d,) current iterate
    value: jnp.ndarray  # () f(x)
    grad: jnp.ndarray  # (d,)
    hess: jnp.ndarray  # (d, d) Hessian of f (negative definite at a proper mode)
    n_iter: jnp.ndarray  # () steps taken
    n_modified_steps: jnp.ndarray  # () of which taken where -H was not PD (modified Newton)
    status: jnp.ndarray  # ()
    trace: jnp.ndarray  # (max_iter + 1,) f at the start and after each step (NaN beyond)


def newton_program(objective: Callable, max_iter: int) -> Callable:
    """run(x0, tol, Phi, y) -> _State: damped Newton to the mode of objective(x, Phi, y).

    The model appears twice in the compiled program (Hessian with value and gradient,
    and the line search's value): compilation, not the iteration, is most of the cost of
    a small fit.
    """
    value_and_grad = jax.value_and_grad(objective)

    def grad_with_aux(x, Phi, y):
        v, g = value_and_grad(x, Phi, y)
        return g, (v, g)

    # forward-over-reverse Hessian that returns the value and gradient of the same pass
    hessian_and_aux = jax.jacfwd(grad_with_aux, has_aux=True)

    def run(x0, tol, Phi, y):
        def step(s: _State) -> _State:
            H, (v, g) = hessian_and_aux(s.x, Phi, y)
            H = 0.5 * (H + H.T)
            trace = s.trace.at[s.n_iter].set(v)
            L = jnp.linalg.cholesky(-H)
            pd = jnp.all(jnp.isfinite(L))
            newton = cho_solve((L, True), g)
            decrement = jnp.where(pd, g @ newton, jnp.inf)
            # where -H is not positive definite, the *step* solves (-H + mu I) d = g with
            # mu = 2 |lambda_min(-H)| (+ a round-off floor), whose matrix has smallest
            # eigenvalue |lambda_min| > 0: an ascent direction that still uses the
            # curvature (modified Newton, Nocedal & Wright 3.4). Only the step: the fit
            # converges only where -H itself is positive definite.
            lam_min = jnp.linalg.eigvalsh(jnp.where(pd, jnp.eye(H.shape[0], dtype=H.dtype), -H))[0]
            floor = 1e-8 * jnp.maximum(1.0, jnp.max(jnp.abs(jnp.diag(H))))
            L_shift = jnp.linalg.cholesky(-H + (2.0 * jnp.abs(lam_min) + floor) * jnp.eye(H.shape[0], dtype=H.dtype))
            shifted = cho_solve((L_shift, True), g)
            finite = jnp.isfinite(v) & jnp.all(jnp.isfinite(g))
            converged = pd & (jnp.sqrt(jnp.maximum(decrement, 0.0)) <= tol)
            status = jnp.where(
                ~finite, NONFINITE,
                jnp.where(converged, CONVERGED, jnp.where(s.n_iter >= max_iter, ITERATION_CAP, RUNNING)),
            )
            # where even that is not finite (a Hessian with an infinite entry, e.g. |w|^q,
            # 1 < q < 2, at w = 0 exactly), the unit-length steepest-ascent step
            gnorm = jnp.linalg.norm(g)
            steepest = g / jnp.where(gnorm > 0, gnorm, 1.0)
            direction = jnp.where(pd, newton, jnp.where(jnp.all(jnp.isfinite(shifted)), shifted, steepest))
            slope = g @ direction  # > 0 unless g = 0

            def ls_cond(c):
                _, accepted, k = c
                return (~accepted) & (k <= MAX_HALVINGS) & (status == RUNNING)

            def ls_body(c):
                t, _, k = c
                v_new = objective(s.x + t * direction, Phi, y)
                ok = jnp.isfinite(v_new) & (v_new >= v + ARMIJO * t * slope)
                return jnp.where(ok, t, 0.5 * t), ok, k + 1

            t, accepted, _ = lax.while_loop(ls_cond, ls_body, (jnp.asarray(1.0, s.x.dtype), jnp.asarray(False), 0))
            status = jnp.where((status == RUNNING) & ~accepted, STALLED, status)
            move = (status == RUNNING) & accepted
            return _State(
                x=jnp.where(move, s.x + t * direction, s.x),
                value=v, grad=g, hess=H,
                n_iter=s.n_iter + move.astype(s.n_iter.dtype),
                n_modified_steps=s.n_modified_steps + (move & ~pd).astype(s.n_iter.dtype),
                status=status,
                trace=trace,
            )

        d = x0.shape[0]
        nan = jnp.asarray(jnp.nan, x0.dtype)
        init = _State(
            x0, nan, jnp.full((d,), nan), jnp.full((d, d), nan), jnp.asarray(0), jnp.asarray(0),
            jnp.asarray(RUNNING), jnp.full((max_iter + 1,), nan),
        )
        return lax.while_loop(lambda s: s.status == RUNNING, step, init)

    return run


# ---------------------------------------------------------------------------------
# Compiled programs, cached per (spec object, data shapes, settings)
# ---------------------------------------------------------------------------------
_PROGRAMS = CompiledPrograms("generic_laplace", max_entries=32)


def _newton_program(spec, model: "_Model", Phi, y, config) -> tuple[Any, float]:
    """The compiled run(x0, tol, Phi, y) of one data set, and the seconds compiling it took."""

    def build():
        run = newton_program(model.objective, config.max_iter)
        return jax.jit(run).lower(model.x0, jnp.asarray(float(config.grad_tol)), Phi, y).compile()

    return _PROGRAMS.get((SameObject(spec), "newton", model.layout, problem_shape(Phi), config.max_iter), build)


def _draw_program(spec, model: "_Model", n_draws: int, Phi, y) -> tuple[Any, float]:
    """The compiled constrain of n_draws flat points (n_draws, d) at once, with the log
    joint (Jacobian included) at each, and the seconds compiling it took (0 when cached:
    ``fit`` and ``fit_many`` share it)."""

    def both(x, Phi_, y_):
        return model.constrain(x, Phi_, y_), model.objective(x, Phi_, y_)

    def build():
        d = sum(model.layout.sizes)
        fn = jax.jit(jax.vmap(both, in_axes=(0, None, None)))
        return fn.lower(jnp.zeros((n_draws, d), model.x0.dtype), Phi, y).compile()

    return _PROGRAMS.get((SameObject(spec), "draws", model.layout, problem_shape(Phi), n_draws), build)


# ---------------------------------------------------------------------------------
# The model in unconstrained coordinates, from NumPyro's initialization
# ---------------------------------------------------------------------------------
def _check_sites(spec_sites, model_trace, unconstrained: dict[str, Any], engine: str) -> None:
    """Every spec site must be a continuous latent sample site of the model, or a
    deterministic site computed from them, of its shape."""
    latent = {
        name: site for name, site in model_trace.items()
        if (site["type"] == "sample" and not site["is_observed"]) or site["type"] == "deterministic"
    }
    missing = [s.name for s in spec_sites if s.name not in latent]
    if missing:
        raise ValueError(
            f"{engine}: spec.sites lists {missing} but the model has no such latent sample or "
            f"deterministic site (its latent sites: {sorted(latent)}); the spec and its model disagree"
        )
    discrete = [s.name for s in spec_sites if s.name not in unconstrained and latent[s.name]["type"] == "sample"]
    if discrete:
        raise ValueError(f"{engine}: sites {discrete} are discrete; a Laplace approximation needs continuous sites")
    for s in spec_sites:
        shape = tuple(np.shape(latent[s.name]["value"]))
        if shape != tuple(s.shape):
            raise ValueError(
                f"{engine}: site {s.name!r} has shape {shape} in the model but {tuple(s.shape)} in spec.sites"
            )


class _Model(NamedTuple):
    """What NumPyro's initialization gives for one spec on one design and data set."""

    layout: _Layout
    objective: Callable  # f(x, Phi, y): log joint of the flat unconstrained x, incl. log|J|
    constrain: Callable  # (x, Phi, y) -> {name: value} for the layout's and the spec's sites
    x0: jnp.ndarray  # the starting point the init strategy chose for this data set
    seconds: float  # wall time of the initialization


def _init_key(config: GenericLaplaceConfig):
    # seeds the initialization strategy (the first key of the seed's split); the draws
    # use numpy's generator, seeded by config.seed
    return jax.random.split(jax.random.PRNGKey(config.seed))[0]


def _initialize(spec, spec_sites, Phi_j, y_j, config: GenericLaplaceConfig, name: str) -> _Model:
    """NumPyro's initialization on one data set: potential, transform and start. Raises
    ApproximationFailed where NumPyro finds no valid start, ValueError where spec.sites and
    the model's latent sites disagree."""
    t0 = time.perf_counter()
    try:
        info0 = initialize_model(
            _init_key(config), spec.model, init_strategy=INIT_STRATEGIES[config.init],
            dynamic_args=True, model_args=(Phi_j, y_j),
            # the Newton loop checks finiteness itself; skipping the eager gradient here
            # halves the (cold) initialization time
            validate_grad=False,
        )
    except RuntimeError as err:  # "Cannot find valid initial parameters"
        raise ApproximationFailed(f"{name}: NumPyro found no valid starting point ({err})") from err
    _check_sites(spec_sites, info0.model_trace, info0.param_info.z, name)
    layout = _layout(spec_sites, info0.param_info.z)
    potential_gen, postprocess_gen = info0.potential_fn, info0.postprocess_fn

    def objective(x, Phi_, y_):
        return -potential_gen(Phi_, y_)(layout.unravel(x))

    wanted = tuple(layout.names) + tuple(s.name for s in spec_sites if s.name not in layout.names)

    def constrain(x, Phi_, y_):
        values = postprocess_gen(Phi_, y_)(layout.unravel(x))
        return {n: values[n] for n in wanted}

    return _Model(layout, objective, constrain, layout.ravel(info0.param_info.z), time.perf_counter() - t0)


#: (spec object, spec_params) -> spec.with_params(...); beyond 16 the least recently used is dropped
_DERIVED_SPECS: OrderedDict = OrderedDict()


def _with_params(spec, spec_params):
    """``spec.with_params(**spec_params)``, the same object for the same spec object and
    params. Why: with_params builds a new spec on every call, and the compiled programs
    are keyed by the spec object, so a registry entry with spec_params (gridRVM's prior
    variants) compiled everything anew on every fit; a few kept derived specs let the next
    call find its programs. Params that cannot be a key are applied afresh."""
    key = (SameObject(spec), tuple(spec_params))
    try:
        derived = _DERIVED_SPECS.get(key)
    except TypeError:  # an unhashable value among the params
        return spec.with_params(**dict(spec_params))
    if derived is None:
        derived = _DERIVED_SPECS[key] = spec.with_params(**dict(spec_params))
        while len(_DERIVED_SPECS) > 16:
            _DERIVED_SPECS.popitem(last=False)
    _DERIVED_SPECS.move_to_end(key)
    return derived


def _settings(spec, config, spec_params):
    """(spec with spec_params applied, config or the default, checked): what concerns a
    whole call, fit's or fit_many's."""
    if spec_params:
        spec = _with_params(spec, spec_params)
    config = GenericLaplaceConfig() if config is None else config
    if not isinstance(config, GenericLaplaceConfig):
        raise TypeError(f"config must be a GenericLaplaceConfig, got {type(config).__name__}")
    return spec, config


# ---------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------
def _failure_message(engine, status, n_iter, max_iter, grad_max, decrement, min_eig, n_modified_steps, tol,
                     where: str = "") -> str:
    what = []
    if status == ITERATION_CAP:
        what.append(f"Newton's method did not converge within max_iter = {max_iter} steps")
    elif status == STALLED:
        what.append(f"the line search found no ascent step (halving {MAX_HALVINGS} times) after {n_iter} steps")
    elif status == NONFINITE:
        what.append(f"the log density or its gradient is not finite at the iterate after {n_iter} steps")
    if not (min_eig > 0):
        what.append("the negative Hessian of the log density is not positive definite there"
                    if np.isfinite(min_eig) else "the Hessian there is not finite")
    numbers = (f"iterations = {n_iter} ({n_modified_steps} of them taken where -H was not positive definite), "
               f"max |gradient| = {grad_max:.4g}, Newton decrement "
               f"sqrt(g^T (-H)^-1 g) = {decrement:.4g} (tolerance {tol:g}), smallest eigenvalue of -H = {min_eig:.4g}")
    return f"{engine}: " + " and ".join(what) + f" ({numbers}{where}); a Laplace approximation does not exist there"


def _finish(spec, spec_sites, model: _Model, s: _State, Phi_j, y_j, config: GenericLaplaceConfig, name: str, *,
            seconds: float, compile_seconds: float, init_seconds: float) -> DrawsPosterior:
    """The posterior of one data set from the state s where its Newton loop stopped: the
    checks at the mode (ApproximationFailed where there is no proper one), the draws and
    the FitInfo. ``fit`` and ``fit_many`` both end here, one data set at a time.

    seconds / compile_seconds: what the fit spent before (run time / compilation); the
    time taken here is added to them."""
    t0 = time.perf_counter()
    layout = model.layout
    status, n_iter = int(s.status), int(s.n_iter)
    x_mode = np.asarray(s.x)
    grad = np.asarray(s.grad)
    neg_hess = -np.asarray(s.hess)
    grad_max = float(np.max(np.abs(grad))) if grad.size else 0.0
    if np.all(np.isfinite(neg_hess)):
        min_eig = float(np.linalg.eigvalsh(neg_hess)[0])
    else:
        min_eig = float("nan")
    L = None
    if min_eig > 0:
        try:
            L = np.linalg.cholesky(neg_hess)
        except np.linalg.LinAlgError:
            L = None
    if L is not None:
        u = solve_triangular(L, grad, lower=True)
        decrement = float(np.sqrt(u @ u))
    else:
        decrement = float("inf")
    if status != CONVERGED or L is None or not decrement <= config.grad_tol:
        where = ""
        if np.isfinite(min_eig) and min_eig <= 0:
            # the coordinate that dominates the failing direction, in unconstrained space
            j = int(np.argmax(np.abs(np.linalg.eigh(neg_hess)[1][:, 0])))
            where = f"; its eigenvector is mostly along {layout.flat_names()[j]} (unconstrained value {x_mode[j]:.4g})"
        raise ApproximationFailed(_failure_message(
            name, status, n_iter, config.max_iter, grad_max, decrement, min_eig,
            int(s.n_modified_steps), config.grad_tol, where))

    # draws: x = mode + L^-T z has covariance (L L^T)^-1 = (-H)^-1. Row 0 of the batch
    # pushed through T is the mode itself (T(mode) for the report), rows 1.. the draws.
    # The generator is seeded by config.seed alone, so every data set (and fit_many's
    # entry for it) gets the same z.
    draw_fn, compile_draws = _draw_program(spec, model, config.n_draws + 1, Phi_j, y_j)
    rng = np.random.default_rng(config.seed)
    z = rng.standard_normal((config.n_draws, x_mode.size))
    x_draws = x_mode[None, :] + solve_triangular(L.T, z.T, lower=False).T
    values, log_p = jax.block_until_ready(draw_fn(jnp.asarray(np.vstack([x_mode, x_draws])), Phi_j, y_j))
    values = {k: np.asarray(v) for k, v in values.items()}
    # importance log weights log p(x, y) - log q(x) of the draws (in x, where both densities
    # carry the same Jacobian): L^T (x - mode) = z, so log q = -|z|^2 / 2 + log det L - d log(2 pi) / 2
    log_q = -0.5 * np.sum(z**2, axis=1) + float(np.sum(np.log(np.diag(L)))) - 0.5 * x_mode.size * math.log(2 * math.pi)
    log_w = np.asarray(log_p, dtype=float)[1:] - log_q
    # a log joint that is not a number at a far draw (overflow) gives it weight 0, counted in extra
    unusable = np.isnan(log_w) | (log_w == np.inf)
    log_w = np.where(unusable, -np.inf, log_w)
    draws = {site.name: values[site.name][None, 1:] for site in spec_sites}
    bad = [n for n, v in draws.items() if not np.all(np.isfinite(v))]
    if bad:
        raise FloatingPointError(f"{name}: draws of {bad} are not finite after the transform to the support")

    mode_values = {k: v[0] for k, v in values.items()}
    spec_names = {site.name for site in spec_sites}
    value = float(s.value)
    log_det = 2.0 * float(np.sum(np.log(np.diag(L))))
    d = x_mode.size
    trace = np.asarray(s.trace)[: n_iter + 1]
    info = FitInfo(
        engine=name,
        converged=True,
        n_iter=n_iter,
        reason="",
        seconds=seconds + (time.perf_counter() - t0 - compile_draws),
        compile_seconds=compile_seconds + compile_draws,
        objective=OBJECTIVE_NAME,
        trace=trace,
        extra={
            "mode": x_mode,
            "mode_constrained": {k: v for k, v in mode_values.items() if k in spec_names},
            "other_sites_mode": {k: v for k, v in mode_values.items() if k not in spec_names},
            "layout": [(n, shp) for n, shp in zip(layout.names, layout.shapes)],
            "precision": neg_hess,
            "log_joint_at_mode": value,
            "grad_max_abs": grad_max,
            "newton_decrement": decrement,
            "hessian_min_eig": min_eig,
            "log_evidence_laplace": value + 0.5 * d * math.log(2.0 * math.pi) - 0.5 * log_det,
            # Newton steps taken where -H was not positive definite (modified Newton)
            "modified_steps": int(s.n_modified_steps),
            "init": config.init,
            "init_seconds": init_seconds,
            "n_draws": config.n_draws,
            "seed": config.seed,
            "unusable_log_weights": int(unusable.sum()),
        },
    )
    return DrawsPosterior(spec, spec_sites, draws, info, log_weights=log_w[None])


def fit(spec, Phi, y, *, config: GenericLaplaceConfig | None = None, name: str = ENGINE_NAME,
        spec_params: tuple[tuple[str, Any], ...] = ()) -> DrawsPosterior:
    """Laplace approximation of p(sites | y) in NumPyro's unconstrained space, as draws.

    spec: any model spec (``spec.model(Phi, y)`` and ``spec.sites(n_basis)``).
    Phi: (N, M) design matrix; y: (N,) labels, 0/1 or -1/+1.
    config: :class:`GenericLaplaceConfig`. name: the engine name written into FitInfo
    (the same function serves several registry entries). spec_params: (name, value)
    pairs applied with ``spec.with_params`` first, for an entry that approximates a
    variant of the model (gridRVM's s-grid and rvm priors).

    Returns a DrawsPosterior with draws ``{site: (1, n_draws, *shape)}`` over ``spec.sites``.
    Raises ApproximationFailed where no mode with a positive definite -H was reached, and
    ValueError where spec.sites and the model's latent sites disagree.

    info.extra: ``mode`` (flat, unconstrained, order in ``layout``), ``mode_constrained``
    ({site: T(mode)} for the spec's sites), ``other_sites_mode`` (the same for latent
    sites the spec does not list), ``precision`` (-H at the mode), ``grad_max_abs``,
    ``newton_decrement``, ``hessian_min_eig``, ``log_evidence_laplace`` and timings.
    ``log_evidence_laplace`` = f(mode) + d/2 log 2 pi - 1/2 log det(-H), f the log joint in
    unconstrained coordinates: the Laplace estimate of the integral of p(y, x) dx. Since
    f includes log|J|, that integral equals the evidence p(y) of the model in its own
    coordinates (a change of variables does not change an integral) - though the
    *estimate* differs from a Laplace estimate made in other coordinates. It is the
    evidence of the model as written: a ``factor`` with an unnormalized density (the PCVM
    surrogate's smooth indicator) is counted as it stands.

    The batched form, the fits of many label vectors on one design as one compiled
    program, is :func:`fit_many` (also ``fit.many``).
    """
    spec, config = _settings(spec, config, spec_params)
    Phi_np, y_np = checked_problem(spec, Phi, y)
    if y_np is None:
        raise ValueError(f"{name}: labels y are required")
    spec_sites = problem_sites(spec, Phi_np)
    Phi_j, y_j = as_jax(Phi_np), as_jax(y_np)

    t_start = time.perf_counter()
    model = _initialize(spec, spec_sites, Phi_j, y_j, config, name)
    newton, compile_newton = _newton_program(spec, model, Phi_j, y_j, config)
    s = jax.block_until_ready(newton(model.x0, jnp.asarray(float(config.grad_tol)), Phi_j, y_j))
    compile_seconds = compile_newton
    if compile_newton > 0:
        # a cold call: NumPyro's initialization runs its operations eagerly, and the first
        # time in a process that is mostly JAX compiling them (~0.05 s warm, seconds cold),
        # so on the call that compiles the Newton program it is counted as compile time
        compile_seconds += model.seconds
    return _finish(spec, spec_sites, model, s, Phi_j, y_j, config, name,
                   seconds=time.perf_counter() - t_start - compile_seconds, compile_seconds=compile_seconds,
                   init_seconds=model.seconds)


# ---------------------------------------------------------------------------------
# fit.many: many label vectors on one design, one compiled program
# ---------------------------------------------------------------------------------
def _init_one(spec, config: GenericLaplaceConfig) -> Callable:
    """init(y, key, Phi) -> ({site: unconstrained start}, potential energy there): NumPyro's
    initialization of one data set, as a function JAX can trace, so that vmap runs it for
    every data set at once. It is the same function ``fit`` calls eagerly: the strategy's
    candidates come from the same key, NumPyro's search for a valid one is a
    ``lax.while_loop`` that under vmap stops for each data set at its own first valid
    candidate, so each start is the one ``fit`` gets. Where the model's prior does not
    see y (every model of the zoo) the start is the same for every data set, but a model
    may let it depend on y, so it is computed per data set. A data set with no valid start
    ends with a non-finite potential energy (traced, NumPyro cannot raise)."""
    strategy = INIT_STRATEGIES[config.init]

    def init(y, key, Phi):
        info = initialize_model(key, spec.model, init_strategy=strategy, dynamic_args=True,
                                model_args=(Phi, y), validate_grad=False)
        return info.param_info.z, info.param_info.potential_energy

    return init


def fit_many(spec, Phi, ys, *, config: GenericLaplaceConfig | None = None, name: str = ENGINE_NAME,
             spec_params: tuple[tuple[str, Any], ...] = ()) -> list:
    """:func:`fit` of every row of ``ys`` (D, N) on the one design Phi, as one compiled
    program: entry i is what ``fit(spec, Phi, ys[i], config=config, name=name,
    spec_params=spec_params)`` returns, to round-off, or the exception it would raise,
    returned in its place (one data set's ApproximationFailed, or its refused labels'
    ValueError, is that entry, not the batch's).

    How: NumPyro's initialization (see ``_init_one``) and the damped Newton loop run
    as ``jax.vmap`` programs over the data sets (``compile_cache.run_batched``: padded
    to a few batch sizes, cached per spec object, design shape and settings, so another
    batch size in the same bucket compiles nothing); then each data set goes through the
    same checks, draws (same seed, same z) and FitInfo as ``fit``'s, one at a time. Where
    the batched initialization finds no valid start for a data set, that data set is fit
    alone by ``fit`` (which raises NumPyro's refusal, as it would have).

    Raised, not returned (they concern the whole call): a config that is not a
    GenericLaplaceConfig, a bad design, ``ys`` that is not a (D, N) table, and spec sites
    that disagree with the model.

    Timing: each entry's ``info.seconds`` is its share of the batch's run time (the
    batched initialization and Newton loop, the one eager initialization that builds the
    programs, the label checks: divided evenly among the data sets that went through the
    batch, D less any whose labels were refused) plus its own checks and draws;
    ``info.compile_seconds`` is the batch's compilation divided the same way (the eager
    initialization counts as compilation on a call that compiles, as in ``fit``).
    ``extra["init_seconds"]`` is its share of the initialization.
    """
    t_start = time.perf_counter()
    spec, config = _settings(spec, config, spec_params)
    Phi_np = check_features(Phi, name="Phi")
    n, n_basis = Phi_np.shape
    spec_sites = tuple(spec.sites(n_basis))
    Phi_j = jnp.asarray(Phi_np)

    def run_rows(accepted):
        # the rows whose labels fit would accept (compile_cache.fit_rows checked them), by position
        entries: list = [None] * len(accepted)
        labels: dict[int, np.ndarray] = dict(enumerate(accepted))

        # one eager initialization builds the potential, the transform and the layout (and
        # checks the sites); it is the first data set's, or the next one's where NumPyro
        # finds no start for that one (that data set's fit would raise the same)
        model = None
        for i in list(labels):
            try:
                model = _initialize(spec, spec_sites, Phi_j, jnp.asarray(labels[i]), config, name)
                break
            except ApproximationFailed as err:
                entries[i] = err
                del labels[i]
        if model is None:
            return entries
        rows = list(labels)
        ys_ok = np.stack([labels[i] for i in rows])
        layout = model.layout
        spec_key = SameObject(spec)

        (z, energy), init_seconds, compile_init = run_batched(
            _PROGRAMS, (spec_key, "init", config.init), _init_one(spec, config), (ys_ok,), (_init_key(config), Phi_j))
        init_seconds += model.seconds
        x0s = np.concatenate([np.reshape(z[k], (len(rows), -1)) for k in layout.names], axis=1)
        valid = np.isfinite(energy)
        alone = time.perf_counter()
        for j in np.flatnonzero(~valid):
            try:
                entries[rows[j]] = fit(spec, Phi_np, labels[rows[j]], config=config, name=name)
            except Exception as err:  # noqa: BLE001 - whatever fit raises is this data set's entry
                entries[rows[j]] = err
        alone = time.perf_counter() - alone  # those fits timed themselves: not the batch's time
        rows = [r for r, ok in zip(rows, valid) if ok]
        if not rows:
            return entries
        x0s, ys_ok = x0s[valid], ys_ok[valid]

        run = newton_program(model.objective, config.max_iter)
        states, _, compile_newton = run_batched(
            _PROGRAMS, (spec_key, "newton", layout, config.max_iter),
            lambda x0, y, tol, Phi_: run(x0, tol, Phi_, y),
            (x0s, ys_ok), (jnp.asarray(float(config.grad_tol)), Phi_j))
        compile_draws = 0.0
        if np.any(states.status == CONVERGED):
            # compiled here, not by the first data set's draws, so that its compilation is
            # shared like the rest of the batch's
            _, compile_draws = _draw_program(spec, model, config.n_draws + 1, Phi_j, jnp.asarray(ys_ok[0]))
        compile_seconds = compile_init + compile_newton + compile_draws
        if compile_seconds > 0:
            compile_seconds += model.seconds  # as in fit: a cold initialization is mostly compiling
            init_seconds -= model.seconds
        shared = time.perf_counter() - t_start - compile_seconds - alone
        k = len(rows)
        for j, i in enumerate(rows):
            s = _State(*(np.asarray(field)[j] for field in states))
            y_j = jnp.asarray(ys_ok[j])
            try:
                entries[i] = _finish(spec, spec_sites, model, s, Phi_j, y_j, config, name, seconds=shared / k,
                                     compile_seconds=compile_seconds / k, init_seconds=init_seconds / k)
            except Exception as err:  # noqa: BLE001 - whatever fit raises is this data set's entry
                entries[i] = err
        return entries

    return fit_rows(ys, n, run_rows)


fit.many = fit_many
