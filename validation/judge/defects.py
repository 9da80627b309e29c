"""Planted defects, the type and the generic ones: ways of breaking an engine's fit on purpose.

A :class:`Defect` wraps an engine's fixed-spec fit and returns a fit with the same contract
whose answer is wrong in a known, controlled way. The generic defects (:data:`GENERIC`) act
on the returned posterior (:func:`transform_posterior`) and so apply to any engine with a
distribution; a model's own defects (a documented slip of one of its engines, switched on
by its config: :func:`config_defect`) live in its registry record (``ModelRecord.defects``).
The battery that runs them through the detectors is ``validation/runs/battery.py``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ...inference.contracts import many_of
from ...inference.posterior import DrawsPosterior, GaussianPosterior
from ...models.base import unflatten
from .correlations import dropped_correlation, rotated_correlation, unit_diagonal
from .shapes import SHAPE_DEFECTS


@dataclass(frozen=True)
class Defect:
    """A named way of breaking a fit: ``wrap(fit) -> fit``. ``engines``: the names of the
    engines it applies to (empty: any engine with a distribution). ``model``: the model
    whose engines those are (None: any model). A model's own defects live in its registry
    record (``ModelRecord.defects``, engines named, model left None: the record is the
    model); ``validation/runs/battery.py`` binds each to its record's name."""

    name: str
    description: str
    wrap: Callable[[Callable], Callable]
    engines: tuple[str, ...] = ()
    model: str | None = None

    def applies_to(self, model: str, engine: str) -> bool:
        """Whether this defect is one to apply to ``engine`` of ``model``: its model is None or
        ``model``, and its ``engines`` are empty or name ``engine``."""
        return (self.model is None or model == self.model) and (not self.engines or engine in self.engines)

    def __call__(self, fit: Callable) -> Callable:
        broken = self.wrap(fit)
        functools.update_wrapper(broken, fit, assigned=("__doc__",), updated=())
        broken.__name__ = f"{getattr(fit, '__name__', 'fit')}+{self.name}"
        return broken


#: the correlation replacements ``transform_posterior`` knows by name
CORRELATIONS = {"dropped": dropped_correlation, "rotated": rotated_correlation}


def _lower_factor(sd: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Lower-triangular L with L L' = diag(sd) corr diag(sd), rows and columns of zero
    sd left zero (a weight pruned to a point stays at its point)."""
    live = np.flatnonzero(sd > 0)
    L = np.zeros((len(sd), len(sd)))
    sub = sd[live, None] * corr[np.ix_(live, live)] * sd[None, live]
    L[np.ix_(live, live)] = np.linalg.cholesky(sub)  # live is sorted: L stays lower triangular
    return L


def replace_correlations(posterior, correlation: Callable[[np.ndarray], np.ndarray] | np.ndarray):
    """The posterior with its correlation matrix R replaced by ``correlation(R)`` (or by a
    given matrix) and every marginal mean and sd kept exactly. Gaussian: a new Cholesky
    factor. Draws: whitened by their own sample covariance and re-coloured with the new
    one, so the draws' own means and sds (ddof 1) are unchanged to rounding; their
    chains' autocorrelation goes with them. Coordinates of zero sd stay constant."""
    if isinstance(posterior, GaussianPosterior):
        sd = posterior.sd_flat()
        live = sd > 0
        corr = np.eye(len(sd))
        corr[np.ix_(live, live)] = unit_diagonal(posterior.cov[np.ix_(live, live)])
        new = correlation(corr) if callable(correlation) else np.asarray(correlation, dtype=float)
        return replace(posterior, chol=_lower_factor(sd, new))
    if isinstance(posterior, DrawsPosterior):
        flat = posterior.flat_draws()
        mean, sd = flat.mean(0), flat.std(0, ddof=1)
        live = np.flatnonzero(sd > 0)
        centred = flat[:, live] - mean[live]
        cov = np.atleast_2d(np.cov(centred, rowvar=False))
        try:
            own = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError as err:
            raise ValueError(f"the draws' covariance is singular ({flat.shape[0]} draws of {len(live)} varying "
                             "coordinates): their correlations cannot be replaced") from err
        corr = np.eye(len(sd))
        corr[np.ix_(live, live)] = unit_diagonal(cov)
        new = correlation(corr) if callable(correlation) else np.asarray(correlation, dtype=float)
        white = np.linalg.solve(own, centred.T)  # sample covariance exactly I
        moved = flat.copy()
        moved[:, live] = mean[live] + (_lower_factor(sd[live], new[np.ix_(live, live)]) @ white).T
        return _with_flat_draws(posterior, moved)
    raise ValueError(f"a {posterior.kind} posterior has no distribution to break")


def _with_flat_draws(posterior, flat: np.ndarray):
    chains, draws = posterior.n_chains, posterior.n_draws
    per_site = unflatten(flat, posterior.sites)
    return replace(posterior, draws={k: np.asarray(v).reshape((chains, draws) + np.shape(v)[1:])
                                     for k, v in per_site.items()})


def transform_posterior(posterior, *, cov_factor: float = 1.0, shift_sd: float = 0.0, coordinate: int | None = None,
                        correlations: str | None = None):
    """The posterior with its covariance scaled by ``cov_factor`` (sds by its square root)
    and its mean moved by ``shift_sd`` of its own sds, in one ``coordinate`` or in all
    (None). Gaussian: exactly; draws: each draw moved and spread about the draws' mean.
    ``correlations``: "dropped" (mean field) or "rotated"
    (:func:`~zoo.validation.judge.correlations.rotated_correlation`) replaces the correlation
    matrix first, keeping every marginal (:func:`replace_correlations`)."""
    if correlations is not None:
        if correlations not in CORRELATIONS:
            raise ValueError(f"unknown correlations {correlations!r}; known: {', '.join(CORRELATIONS)}")
        posterior = replace_correlations(posterior, CORRELATIONS[correlations])
    sd = np.asarray(posterior.sd_flat(), dtype=float)
    shift = shift_sd * sd
    if coordinate is not None:
        mask = np.zeros_like(sd)
        mask[coordinate] = 1.0
        shift = shift * mask
    if isinstance(posterior, GaussianPosterior):
        return replace(posterior, mean_vec=np.asarray(posterior.mean_vec) + shift,
                       chol=np.asarray(posterior.chol) * np.sqrt(cov_factor))
    if isinstance(posterior, DrawsPosterior):
        flat = posterior.flat_draws()
        mean = flat.mean(0)
        return _with_flat_draws(posterior, mean + np.sqrt(cov_factor) * (flat - mean) + shift)
    raise ValueError(f"a {posterior.kind} posterior has no distribution to break")


def answer_defect(transform: Callable) -> Callable[[Callable], Callable]:
    """Break every posterior the engine returns with ``transform(posterior) -> posterior``;
    the engine's batched form (``fit.many``), where it has one, is broken alike."""
    def wrap(fit):
        def broken(spec, Phi, y, *, config=None):
            return transform(fit(spec, Phi, y, config=config))

        many = many_of(fit)
        if many is not None:
            def broken_many(spec, Phi, ys, *, config=None):
                return [p if isinstance(p, BaseException) else transform(p) for p in many(spec, Phi, ys, config=config)]

            broken.many = broken_many
        return broken
    return wrap


def posterior_defect(**how) -> Callable[[Callable], Callable]:
    """Break every posterior the engine returns with :func:`transform_posterior`."""
    return answer_defect(functools.partial(transform_posterior, **how))


def shape_defect(name: str) -> Callable[[Callable], Callable]:
    """Break every posterior the engine returns with the shape defect ``name`` of
    ``shapes.SHAPE_DEFECTS`` (its means and sds kept)."""
    return answer_defect(SHAPE_DEFECTS[name][0])


def config_defect(config_class_path: str, **fields) -> Callable[[Callable], Callable]:
    """Call the engine with a config whose ``fields`` switch on its documented defect (its
    batched form too, where it has one)."""
    def broken_config(config):
        import importlib

        module, _, name = config_class_path.partition(":")
        cls = getattr(importlib.import_module(module), name)
        return replace(config if config is not None else cls(), **fields)

    def wrap(fit):
        def broken(spec, Phi, y, *, config=None):
            return fit(spec, Phi, y, config=broken_config(config))

        many = many_of(fit)
        if many is not None:
            def broken_many(spec, Phi, ys, *, config=None):
                return many(spec, Phi, ys, config=broken_config(config))

            broken.many = broken_many
        return broken
    return wrap


#: the generic defects: any engine with a distribution
GENERIC = (
    Defect("cov x 0.5", "covariance scaled by 0.5 (every sd x 0.71)", posterior_defect(cov_factor=0.5)),
    Defect("cov x 2", "covariance scaled by 2 (every sd x 1.41)", posterior_defect(cov_factor=2.0)),
    Defect("mean + 0.5 sd (one)", "the first coordinate's mean moved by 0.5 of its sd",
           posterior_defect(shift_sd=0.5, coordinate=0)),
    Defect("mean + 0.5 sd (all)", "every coordinate's mean moved by 0.5 of its sd", posterior_defect(shift_sd=0.5)),
    # the next two keep every marginal mean and sd: only a joint verdict can see them
    Defect("correlations dropped", "mean field: the correlations set to 0, every marginal kept",
           posterior_defect(correlations="dropped")),
    Defect("rotated", "the correlation matrix turned by a fixed random rotation and renormalized, every marginal "
           "kept", posterior_defect(correlations="rotated")),
    # the next two keep every mean and covariance: only the distribution verdict (and SBC) can see
    # them; the other two shape defects leave a Gaussian as it is, so the battery plants them in the
    # exact engine's answer instead (validation/runs/battery.py)
    *(Defect(name, SHAPE_DEFECTS[name][1], shape_defect(name)) for name in ("heavy tails", "extra mode")),
)


__all__ = ["Defect", "GENERIC", "CORRELATIONS", "transform_posterior", "replace_correlations", "posterior_defect",
           "shape_defect", "answer_defect", "config_defect"]
