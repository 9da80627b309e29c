"""Where a posterior's modes are, and how much of its mass each one holds.

For a model whose posterior need not be log-concave (BBLR's bounded likelihood), a point
engine's answer is one local mode and a Laplace Gaussian sits on it; whether that is the
posterior's main mode, and how much mass lies elsewhere, is what a reader must know before
trusting either. This module answers it from the reference's own draws:

1. **basins**: from each of ``n_starts`` reference draws (spread over the chains), run a
   local maximization of log p(theta, y) (the damped modified Newton of the generic
   Laplace engine; an end point counts only where -H is positive definite and the Newton
   decrement is below 1e-6 posterior sds). The draw belongs
   to the basin of attraction of the mode it reaches: the share of draws per mode
   estimates each basin's posterior mass (a Monte Carlo proportion, its standard error
   sqrt(p (1 - p) / n_starts) for independent draws - the draws are thinned evenly, and
   a proportion with se below 0.05 needs about 100 of them);
2. **distinct modes**: two end points are the same mode when they lie within ``merge_sd``
   posterior sds of each other in every coordinate (sds from the reference draws);
3. **an engine's point**: a point estimate (SLA's) is matched to the modes the same way,
   after its own local maximization; it is the main mode when it matches the mode of the
   largest basin.

What this cannot see: a mode no reference draw falls into (a mode the reference never
visited is also one its certificate knows nothing about), and a basin's mass is the mass
of the draws that flow to it, not of a neighbourhood of the mode.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ...inference.generic_laplace import CONVERGED, newton_program

#: the Newton decrement (distance to the mode in posterior sds) at which an end point
#: counts as a mode: the generic Laplace engine's tolerance (a line search on the log
#: density cannot resolve much less: the gain of a step of 1e-8 sd is 1e-16 nats)
DECREMENT_TOL = 1e-6


def _ascend(log_density: Callable, starts: np.ndarray, max_iter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(end points, log densities, converged) of the zoo's damped modified Newton
    (``inference.generic_laplace.newton_program``: Newton where -H is positive definite,
    a shifted Hessian elsewhere, Armijo backtracking) from every start. Converged means a
    proper mode: -H positive definite and the Newton decrement below DECREMENT_TOL."""
    run = newton_program(lambda x, Phi, y: log_density(x), max_iter)
    dummy = jnp.zeros(())
    states = jax.jit(jax.vmap(lambda x0: run(x0, DECREMENT_TOL, dummy, dummy)))(jnp.asarray(starts))
    ends = np.asarray(states.x)
    values = np.asarray(jax.vmap(log_density)(states.x))
    return ends, values, np.asarray(states.status) == CONVERGED


def _cluster(points: np.ndarray, scale: np.ndarray, merge_sd: float) -> np.ndarray:
    """Greedy labels: a point joins the first cluster centre within merge_sd * scale in
    every coordinate, else starts a new one."""
    centres, labels = [], np.empty(len(points), dtype=int)
    for i, p in enumerate(points):
        for k, c in enumerate(centres):
            if np.all(np.abs(p - c) <= merge_sd * scale):
                labels[i] = k
                break
        else:
            centres.append(p)
            labels[i] = len(centres) - 1
    return labels


def basins(log_density: Callable, draws: np.ndarray, *, n_starts: int = 200, merge_sd: float = 0.05,
           max_iter: int = 200, point: np.ndarray | None = None) -> dict[str, Any]:
    """The modes the reference's draws flow to, their basins' shares, and where ``point``
    (an engine's estimate) lies among them (module docstring).

    log_density: theta (d,) -> log p(theta, y) (JAX-traceable).
    draws: (n, d) reference draws, chains one after another; ``n_starts`` of them are
    taken at even spacing.
    """
    draws = np.asarray(draws, float)
    idx = np.unique(np.linspace(0, len(draws) - 1, min(n_starts, len(draws))).astype(int))
    starts = draws[idx]
    scale = np.maximum(draws.std(axis=0), 1e-12)
    extra = [] if point is None else [np.asarray(point, float)]
    ends, values, ok = _ascend(log_density, np.vstack([starts, *extra]), max_iter)
    ok &= np.isfinite(values)
    labels = _cluster(ends, scale, merge_sd)
    n = len(idx)
    modes = []
    for k in np.unique(labels[:n][ok[:n]]):
        members = (labels[:n] == k) & ok[:n]
        best = np.flatnonzero(members)[np.argmax(values[:n][members])]
        share = members.sum() / n
        modes.append({"mode": ends[best].tolist(), "log_density": float(values[best]), "share": float(share),
                      "share_se": float(np.sqrt(share * (1 - share) / n)), "n_draws": int(members.sum())})
    modes.sort(key=lambda m: -m["share"])
    out = {"n_starts": n, "n_failed": int(n - ok[:n].sum()), "merge_sd": merge_sd, "modes": modes,
           "main_share": modes[0]["share"] if modes else None}
    if point is not None:
        ok_point = bool(ok[-1])
        # the listed mode its own ascent ends at (within merge_sd sds), if it reached a mode
        match = next((i for i, m in enumerate(modes)
                      if np.all(np.abs(np.asarray(m["mode"]) - ends[-1]) <= merge_sd * scale)), None) \
            if ok_point else None
        out["point"] = {"stationary": ok_point, "log_density": float(values[-1]), "mode_index": match,
                        "is_main_mode": match == 0}
    return out
