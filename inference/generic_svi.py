"""Black-box variational inference from the NumPyro model alone: NumPyro's autoguides,
fitted by stochastic variational inference (SVI). The math: DERIVATIONS.md §8.

What a practitioner runs on a NumPyro model without deriving anything, so that the zoo can
say when a paper's hand-derived engine is worth its derivation. Like ``auto-laplace``
(``generic_laplace.py``) it needs only ``spec.model(Phi, y)`` and ``spec.sites(n_basis)``.

Families (:data:`FAMILIES`), each a density in NumPyro's *unconstrained* coordinates x
(T(x) maps them to the sites' supports, so every draw lies in its support: PCVM's weights
are positive, GIG's and gridRVM's scales positive):

* ``meanfield``: ``AutoNormal``, independent Gaussians, one per coordinate;
* ``fullrank``: ``AutoMultivariateNormal``, a Gaussian with a full covariance;
* ``lowrank``: ``AutoLowRankMultivariateNormal``, diagonal plus rank-r covariance;
* ``iaf``: ``AutoIAFNormal``, a normalizing flow of inverse autoregressive layers
  (DERIVATIONS.md §8.3).

Objective: the evidence lower bound ELBO(q) = E_q[log p(y, T(x)) + log|det J_T(x)| - log q(x)]
(``Trace_ELBO``), estimated with ``num_particles`` draws a step and maximized by Adam at a
fixed step size. What the optimum is, for a Gaussian target N(m, Lambda^-1) (a check with a
known answer, tests/inference/test_generic_svi.py): the full-rank family recovers m and Lambda^-1
exactly; the mean-field family recovers m and the variances 1 / Lambda_ii - smaller than
the marginal variances (Lambda^-1)_ii whenever coordinates are correlated. That is the
under-dispersion of mean-field VB, from minimizing KL(q || p).

Stopping rule (:class:`SVIConfig`): the steps run in blocks of ``block`` inside one
compiled ``lax.scan``; the mean loss (-ELBO estimate) of a block is the smoothed trace. The
fit stops when ``patience`` blocks in a row fail to lower the best smoothed loss so far by
more than ``tol`` (in nats), i.e. on a plateau of the ELBO judged at the resolution of
the block means (whose noise at the default settings is about 0.05-0.2 nats on the zoo's
problems); or at ``max_steps``, where the result says so (``converged`` False, the reason
naming the cap). Near the optimum the ELBO is flat (a location 0.2 posterior sd off costs
0.02 nats), so the rule stops where the remaining gain is below the estimate's noise, and
Adam at a fixed step size keeps the iterates jittering around the optimum; the fit is
therefore the average of the iterates of ``average_blocks`` further blocks (Polyak-Ruppert
averaging in the unconstrained guide parameters), which cancels most of that jitter.

Draws: ``n_draws`` from the fitted guide, each with the model replayed on it, as a
:class:`~zoo.inference.posterior.DrawsPosterior` with one chain over ``spec.sites`` and ``log_weights`` = log p(y, z) -
log q(z) over the model's whole latent space z (DERIVATIONS.md §8.4): the zoo's k-hat of the
guide, and what ``advi-<family>+psis`` resamples by. Everything is seeded by
``SVIConfig.seed``.

Timing (FitInfo, as the other engines): ``compile_seconds`` is the compilation of the block
program and of the draw program (cached per spec object, design shape, family and
settings, so a second fit compiles nothing); ``seconds`` is the rest.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import (
    AutoIAFNormal, AutoLowRankMultivariateNormal, AutoMultivariateNormal, AutoNormal,
)
from numpyro.infer.util import log_density
from numpyro.infer.initialization import init_to_median
from numpyro.optim import Adam

from ..models.base import as_jax, checked_problem, problem_sites, problem_shape
from .compile_cache import CompiledPrograms, SameObject
from .posterior import ApproximationFailed, DrawsPosterior, FitInfo

__all__ = ["FAMILIES", "SVIConfig", "fit", "fit_meanfield", "fit_fullrank", "fit_lowrank"]

#: the guide families, by the names the engines use
FAMILIES = {
    "meanfield": AutoNormal,
    "fullrank": AutoMultivariateNormal,
    "lowrank": AutoLowRankMultivariateNormal,
    "iaf": AutoIAFNormal,
}
OBJECTIVE_NAME = "ELBO (Trace_ELBO, in NumPyro's unconstrained space incl. log-Jacobian), block means"


@dataclass(frozen=True)
class SVIConfig:
    """How SVI runs (not hyper-parameters of the model, which are the spec's).

    step_size: Adam's step size. num_particles: draws of q per ELBO estimate.
    block: steps between two looks at the smoothed trace (one compiled scan).
    max_steps: the step cap of the optimization (the result reports when it is hit). tol,
    patience: the plateau rule (module docstring). average_blocks: blocks run after the
    stop whose iterates are averaged into the fit (0: the last iterate). rank: the
    low-rank family's rank (None: NumPyro's default, the square root of the number of
    coordinates, rounded). flow_layers: the flow family's number of autoregressive layers
    (NumPyro's default, 3).
    init_scale: the guides' initial scale. n_draws: draws returned. seed: of the
    initialization, the ELBO estimates and the draws.
    """

    step_size: float = 0.01
    num_particles: int = 4
    block: int = 250
    max_steps: int = 30_000
    tol: float = 0.02
    patience: int = 4
    average_blocks: int = 4
    rank: int | None = None
    flow_layers: int = 3
    init_scale: float = 0.1
    n_draws: int = 4000
    seed: int = 0

    def __post_init__(self):
        if int(self.average_blocks) < 0:
            raise ValueError(f"SVIConfig.average_blocks must be >= 0, got {self.average_blocks!r}")
        for name in ("num_particles", "block", "max_steps", "patience", "n_draws", "flow_layers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SVIConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("step_size", "init_scale"):
            if not float(getattr(self, name)) > 0.0:
                raise ValueError(f"SVIConfig.{name} must be positive, got {getattr(self, name)!r}")
        if not float(self.tol) >= 0.0:
            raise ValueError(f"SVIConfig.tol must be >= 0, got {self.tol!r}")
        if self.rank is not None and int(self.rank) < 1:
            raise ValueError(f"SVIConfig.rank must be None or a positive integer, got {self.rank!r}")


_PROGRAMS = CompiledPrograms("generic_svi", max_entries=32)


def _guide(spec, family: str, config: SVIConfig):
    if family == "iaf":
        # the flow keeps NumPyro's own initialization (random autoregressive networks on a
        # standard normal base); init_scale does not apply
        return AutoIAFNormal(spec.model, init_loc_fn=init_to_median, num_flows=int(config.flow_layers))
    kwargs = {"init_loc_fn": init_to_median, "init_scale": float(config.init_scale)}
    if family == "lowrank":
        kwargs["rank"] = None if config.rank is None else int(config.rank)
    return FAMILIES[family](spec.model, **kwargs)


def fit(spec, Phi, y, *, config: SVIConfig | None = None, family: str = "meanfield",
        name: str | None = None) -> DrawsPosterior:
    """SVI with NumPyro's ``family`` autoguide on ``spec.model``; draws over ``spec.sites``.

    Phi: (N, M) design; y: (N,) labels 0/1 or -1/+1. config: :class:`SVIConfig`. name:
    the engine name in FitInfo (default ``advi-<family>``).

    Returns a DrawsPosterior ``{site: (1, n_draws, *shape)}``; ``info.trace`` is the smoothed
    loss (-ELBO, block means), ``info.n_iter`` the steps run, ``info.converged`` False with
    the reason where the step cap ended the fit. Raises ApproximationFailed where the loss
    is not finite (the guide's draws left the model's support or overflowed).
    """
    config = SVIConfig() if config is None else config
    if not isinstance(config, SVIConfig):
        raise TypeError(f"config must be an SVIConfig, got {type(config).__name__}")
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}")
    name = name or f"advi-{family}"
    Phi_np, y_np = checked_problem(spec, Phi, y)
    if y_np is None:
        raise ValueError(f"{name}: labels y are required")
    sites = problem_sites(spec, Phi_np)
    Phi_j, y_j = as_jax(Phi_np), as_jax(y_np)
    t_start = time.perf_counter()
    compile_seconds = 0.0

    guide = _guide(spec, family, config)
    svi = SVI(spec.model, guide, Adam(float(config.step_size)), Trace_ELBO(num_particles=int(config.num_particles)))
    key_init, key_draws = jax.random.split(jax.random.PRNGKey(int(config.seed)))
    state = svi.init(key_init, Phi_j, y_j)

    def run_block(state, Phi_, y_):
        # the block's losses, and the sum of its iterates' unconstrained guide parameters
        # (for the averaging phase)
        def step(carry, _):
            s, total = carry
            s, loss = svi.update(s, Phi_, y_)
            u = svi.optim.get_params(s.optim_state)
            return (s, jax.tree_util.tree_map(jnp.add, total, u)), loss

        zeros = jax.tree_util.tree_map(jnp.zeros_like, svi.optim.get_params(state.optim_state))
        (state, total), losses = jax.lax.scan(step, (state, zeros), None, length=int(config.block))
        return state, losses, total

    key = (SameObject(spec), "block", family, problem_shape(Phi_np), config.step_size, config.num_particles, config.block,
           config.rank, config.init_scale, config.flow_layers)
    program, seconds = _PROGRAMS.get(key, lambda: jax.jit(run_block).lower(state, Phi_j, y_j).compile())
    compile_seconds += seconds

    smoothed: list[float] = []
    best, stale, steps = np.inf, 0, 0
    converged, reason = False, ""
    while steps < config.max_steps:
        state, losses, _ = program(state, Phi_j, y_j)
        steps += int(config.block)
        mean = float(np.mean(np.asarray(losses)))
        if not np.isfinite(mean):
            raise ApproximationFailed(
                f"{name}: the ELBO estimate is not finite after {steps} steps (the guide's draws left the "
                "model's support or overflowed); try a smaller step_size or init_scale")
        smoothed.append(mean)
        if mean < best - float(config.tol):
            best, stale = mean, 0
        else:
            stale += 1
            best = min(best, mean)
        if stale >= config.patience:
            converged = True
            break
    if not converged:
        reason = (f"reached max_steps={config.max_steps} before the ELBO's block means stopped improving by "
                  f"more than tol={config.tol:g} nats for {config.patience} blocks")

    # Polyak-Ruppert averaging: the mean of the iterates of ``average_blocks`` more blocks
    # (in the unconstrained parameters the optimizer moves), which cancels most of the
    # jitter a fixed step size leaves in the last iterate
    total, averaged = None, 0
    for _ in range(int(config.average_blocks)):
        state, losses, block_total = program(state, Phi_j, y_j)
        steps += int(config.block)
        averaged += int(config.block)
        smoothed.append(float(np.mean(np.asarray(losses))))
        total = block_total if total is None else jax.tree_util.tree_map(jnp.add, total, block_total)
    if total is None:
        params = svi.get_params(state)
    else:
        params = svi.constrain_fn(jax.tree_util.tree_map(lambda t: t / averaged, total))
    draw_key = (SameObject(spec), "draws", family, problem_shape(Phi_np), config.n_draws, config.rank, config.flow_layers)
    site_names = [s.name for s in sites]

    def one_draw(p, k, Phi_, y_):
        # one draw z of the guide and its importance log weight log p(z, y) - log q(z): the
        # guide's trace holds each site in its support with its density there (Jacobian
        # included), the model replayed on that trace gives the log joint at the same z
        log_q, guide_trace = log_density(handlers.seed(guide, k), (Phi_, y_), {}, p)
        log_p, model_trace = log_density(handlers.replay(spec.model, guide_trace), (Phi_, y_), {}, {})
        return log_p - log_q, {n: model_trace[n]["value"] for n in site_names if n in model_trace}

    def build_draws():
        keys = jax.random.split(key_draws, int(config.n_draws))
        fn = jax.jit(lambda p, ks, Phi_, y_: jax.vmap(one_draw, in_axes=(None, 0, None, None))(p, ks, Phi_, y_))
        return fn.lower(params, keys, Phi_j, y_j).compile()

    draw_program, seconds = _PROGRAMS.get(draw_key, build_draws)
    compile_seconds += seconds
    log_w, draws = draw_program(params, jax.random.split(key_draws, int(config.n_draws)), Phi_j, y_j)
    missing = [s.name for s in sites if s.name not in draws]
    if missing:
        raise ValueError(f"{name}: spec.sites lists {missing}, which the model's draws lack; the spec and its model "
                         "disagree")
    out = {s.name: np.asarray(draws[s.name], dtype=float).reshape((1, int(config.n_draws)) + tuple(s.shape))
           for s in sites}
    for s in sites:
        if not np.all(np.isfinite(out[s.name])):
            raise ApproximationFailed(f"{name}: draws of {s.name!r} are not finite")
    log_w = np.asarray(log_w, dtype=float)
    # a weight that is not a number (the model's density overflowed at a draw) is not one
    # the k-hat or the correction could use; -inf (a draw the model rules out) is
    if np.any(np.isnan(log_w) | (log_w == np.inf)):
        raise ApproximationFailed(f"{name}: log p - log q is not a number at "
                                  f"{int(np.sum(np.isnan(log_w) | (log_w == np.inf)))} of its draws")
    info = FitInfo(
        engine=name, converged=converged, n_iter=steps, reason=reason,
        seconds=time.perf_counter() - t_start - compile_seconds, compile_seconds=compile_seconds,
        objective=OBJECTIVE_NAME + " (the loss -ELBO per block of steps)", trace=np.asarray(smoothed),
        extra={"family": family, "final_loss": smoothed[-1], "best_loss": float(best), "steps": steps,
               "step_size": float(config.step_size), "num_particles": int(config.num_particles),
               # the low-rank factor's columns (NumPyro chose them where config.rank is None)
               "rank": None if family != "lowrank" else int(np.shape(params["auto_cov_factor"])[-1]),
               "averaged_steps": averaged},
    )
    return DrawsPosterior(spec, sites, out, info, log_weights=log_w[None])


def fit_meanfield(spec, Phi, y, *, config: SVIConfig | None = None) -> DrawsPosterior:
    """:func:`fit` with the mean-field family (``AutoNormal``)."""
    return fit(spec, Phi, y, config=config, family="meanfield")


def fit_fullrank(spec, Phi, y, *, config: SVIConfig | None = None) -> DrawsPosterior:
    """:func:`fit` with the full-rank family (``AutoMultivariateNormal``)."""
    return fit(spec, Phi, y, config=config, family="fullrank")


def fit_lowrank(spec, Phi, y, *, config: SVIConfig | None = None) -> DrawsPosterior:
    """:func:`fit` with the low-rank family (``AutoLowRankMultivariateNormal``)."""
    return fit(spec, Phi, y, config=config, family="lowrank")
