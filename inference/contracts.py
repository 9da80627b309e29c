"""The two contracts every engine keeps, so that comparing engines is a loop over names.

* A **fixed-spec fit** approximates the posterior of the spec it is given, at that spec's
  frozen hyper-parameters::

      fit(spec, Phi, y, *, config=None) -> Posterior

  ``zoo compare`` uses it: every engine is measured on the same posterior as the reference.
* An **end-to-end fit** runs the engine as its paper does, choosing its own
  hyper-parameters and basis functions from all candidate columns::

      fit_end_to_end(Phi_all, y, *, seed=0, config=None, **options) -> EndToEndFit

  The classifier, ``zoo reproduce`` and the benchmarks use it.

A fixed-spec fit may also carry a **batched form** as its attribute ``many``::

      fit.many(spec, Phi, ys, *, config=None) -> list   # one entry per row of ys (D, n)

  the fits of D data sets that share one design, as one compiled program (``jax.vmap`` of
  the engine's loop: :func:`~zoo.inference.compile_cache.run_batched`). Entry i is what
  ``fit(spec, Phi, ys[i], config=config)`` returns, to round-off, or the exception it
  would have raised (one data set's failure is not the batch's). SBC and the defect
  battery use it where it exists (many simulated data sets of one design) and fall back
  to one fit at a time where not; a user's engine may carry one too (:func:`many_of`).

``y`` is a 0/1 vector; ``config`` is the engine's own frozen settings dataclass with the
paper's defaults (None: those defaults), never hyper-parameters, which are in the spec
(CONTRIBUTING.md, "What `config` means", says what every other config of the zoo is). Further keyword-only options are allowed when they have defaults (e.g. the
GGSM MM engine's ``rule``), so that one module can serve several named engines.

The :class:`typing.Protocol` classes say this to a type checker; :func:`contract_problems`
says it at run time by reading a function's signature, which a Protocol with ``__call__``
cannot (``isinstance`` checks only that the object is callable). The registry test walks
every engine of every model through it.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..models.base import problem_sites
from .posterior import DrawsPosterior, GaussianPosterior, PointPosterior


class EndToEndFit(NamedTuple):
    """An engine's own end-to-end fit: its posterior over the kept columns."""

    posterior: Any  # a Posterior over the sites spec.sites(len(active))
    spec: Any  # the frozen spec the engine selected
    active: np.ndarray  # indices of the kept candidate columns


@runtime_checkable
class FixedSpecFit(Protocol):
    """``fit(spec, Phi, y, *, config=None) -> Posterior``."""

    def __call__(self, spec: Any, Phi: Any, y: Any, *, config: Any = None) -> Any: ...


@runtime_checkable
class EndToEndFitter(Protocol):
    """``fit_end_to_end(Phi_all, y, *, seed=0, config=None, **options) -> EndToEndFit``."""

    def __call__(self, Phi_all: Any, y: Any, *, seed: int = 0, config: Any = None) -> EndToEndFit: ...


#: the positional parameters of each contract, in order
_POSITIONAL = {"fixed": ("spec", "Phi", "y"), "end_to_end": ("Phi_all", "y")}
#: the keyword-only parameters each contract requires, with the default each must have
_KEYWORDS = {"fixed": {"config": None}, "end_to_end": {"seed": 0, "config": None}}


def contract_problems(fn, kind: str) -> list[str]:
    """What keeps ``fn`` from the contract ``kind`` ("fixed" or "end_to_end"); [] if none.

    Checked from the signature (``functools.partial`` objects included, with their bound
    keywords): the positional parameters by position (names may differ), each required
    keyword present, keyword-only and with the contract's default, and every other
    parameter optional, so that a caller who knows only the contract can call it.
    """
    if kind not in _POSITIONAL:
        raise ValueError(f"kind must be 'fixed' or 'end_to_end', got {kind!r}")
    if not callable(fn):
        return [f"{fn!r} is not callable"]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as err:
        return [f"its signature cannot be read: {err}"]
    problems = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    wanted = _POSITIONAL[kind]
    if len(positional) < len(wanted) or any(p.default is not p.empty for p in positional[:len(wanted)]):
        problems.append(f"needs the positional parameters ({', '.join(wanted)}) without defaults; has "
                        f"({', '.join(p.name for p in positional)})")
    for extra in positional[len(wanted):]:
        if extra.name in _KEYWORDS[kind]:
            continue  # said below, once
        problems.append(f"parameter {extra.name!r} can be passed by position: make it keyword-only "
                        "(after *), so that positional calls cannot bind it by mistake")
    by_name = {p.name: p for p in params}
    for name, default in _KEYWORDS[kind].items():
        p = by_name.get(name)
        if p is None:
            problems.append(f"has no keyword {name!r}")
        elif p.kind != p.KEYWORD_ONLY:
            problems.append(f"{name!r} must be keyword-only")
        elif p.default is p.empty or p.default != default:
            problems.append(f"{name!r} must default to {default!r}")
    for p in params[len(wanted):]:
        if p.kind == p.KEYWORD_ONLY and p.default is p.empty and p.name not in _KEYWORDS[kind]:
            problems.append(f"keyword {p.name!r} has no default, so a caller of the contract cannot call it")
    return problems


@dataclass(frozen=True)
class EngineEntry:
    """One named engine of a model: how to call it under each contract, and what it fits.

    ``fixed`` / ``end_to_end`` are the functions, either as callables or as
    ``"module:function"`` strings imported on first use (a bare module name means a module
    of ``zoo.inference``; a dotted one is imported as written), so that reading the
    registry does not import every engine.
    """

    name: str
    # "gaussian" | "point" | "draws": the Posterior type it returns; "user": a user's
    # engine, whose type is known only from what it returns
    kind: str
    description: str
    fixed: str | Callable
    end_to_end: str | Callable | None = None
    # keyword arguments bound into both functions: one engine module can serve several
    # named engines (GGSM's mm module runs the ggig, lap, gj and stu rules)
    options: tuple[tuple[str, Any], ...] = ()
    # None: the engine approximates the posterior of the spec it is given. Otherwise it
    # fits a different model (another prior) and this says which; `zoo compare` then
    # reports its distance to the spec's reference as that, not as approximation error.
    other_model: str | None = None
    # None, or the name of the model variant (a key of ``Prepared.variants``) whose
    # posterior this engine approximates instead of the model's own (PCVM's Laplace
    # engine fits the EPCVM surrogate); `zoo compare` measures it against both references
    variant: str | None = None
    # True for a black-box method that needs only the NumPyro model (auto-laplace, ADVI,
    # Pathfinder, and their +psis forms): what a practitioner runs without deriving
    # anything, against which the papers' engines are weighed
    generic: bool = False

    def __post_init__(self):
        if self.kind not in (*POSTERIOR_KINDS, "user"):
            raise ValueError(f"engine {self.name!r}: kind must be 'gaussian', 'point', 'draws' or 'user', "
                             f"got {self.kind!r}")

    def _resolve(self, target: str | Callable) -> Callable:
        fn = _import_target(target) if isinstance(target, str) else target
        if not self.options:
            return fn
        bound = functools.partial(fn, **dict(self.options))
        if many_of(fn) is not None:  # the options bind into the batched form as well
            bound.many = functools.partial(fn.many, **dict(self.options))
        return bound

    def fit(self) -> Callable:
        """The fixed-spec fit (:class:`FixedSpecFit`)."""
        return self._resolve(self.fixed)

    def fit_end_to_end(self) -> Callable:
        """The end-to-end fit (:class:`EndToEndFitter`); ValueError if the engine has none."""
        if self.end_to_end is None:
            raise ValueError(f"engine {self.name!r} has no end-to-end mode")
        return self._resolve(self.end_to_end)


#: an engine's name with this appended names its importance-corrected form (any engine
#: whose posterior has a density: ``ep+psis``, ``advi-meanfield+psis``, ``my.module:fit+psis``)
PSIS_SUFFIX = "+psis"


def importance_corrected(entry: EngineEntry) -> EngineEntry:
    """The entry ``<entry.name>+psis``: ``entry``'s fixed-spec fit, then Pareto-smoothed
    importance resampling of its draws against the posterior of the spec it was given
    (:func:`zoo.inference.importance.corrected_fit`). Whatever ``entry`` approximates (its
    own model, a variant, another prior), the weights are the spec's own posterior over
    the engine's density, so the corrected form targets the spec's posterior: no
    ``variant`` and no ``other_model``. ValueError for a point estimate, which has no
    density to weight."""
    from .importance import corrected_fit  # the weights need the models' densities: imported on use

    if entry.kind == "point":
        raise ValueError(f"engine {entry.name!r} returns a point estimate, which has no density: it cannot be "
                         f"importance-corrected ({entry.name}{PSIS_SUFFIX})")
    name = f"{entry.name}{PSIS_SUFFIX}"
    return EngineEntry(
        name, "draws" if entry.kind != "user" else "user",
        f"{entry.description}; its draws then importance-resampled (PSIS) against the model's density, "
        "trusted where Pareto k-hat <= min(1 - 1/log10 S, 0.7), S the weighted draws",
        corrected_fit(entry.fit(), label=name), generic=entry.generic)


def _import_target(target: str) -> Callable:
    module, _, name = target.partition(":")
    if not name:
        raise ValueError(f"an engine function is named 'module:function', got {target!r}")
    path = module if "." in module else f"zoo.inference.{module}"
    return getattr(importlib.import_module(path), name)


class EngineReturnError(RuntimeError):
    """A fit function (typically a user's ``module:function``) raised, or returned
    something that is not a usable posterior of the spec it was given. The message is one
    line naming what was wrong; callers such as ``zoo compare`` put it in the engine's own
    row and go on with the other engines."""


#: the Posterior classes a fixed-spec fit may return
POSTERIOR_KINDS = ("gaussian", "draws", "point")


def returned_problem(result, spec, Phi) -> str | None:
    """What is wrong with ``result`` as the return value of ``fit(spec, Phi, y)``, in one
    line, or None when it is a usable posterior: a zoo Posterior (Gaussian, draws or point)
    over exactly the model's sites on Phi (``models.base.problem_sites``: names and shapes), with
    finite numbers.

    The posterior constructors already refuse inconsistent shapes and non-finite Gaussian
    or point values; this check adds what a constructor cannot know (the spec's sites) and
    the finiteness of draws, and names the problem for someone who wrote the engine."""
    if not isinstance(result, (GaussianPosterior, DrawsPosterior, PointPosterior)):
        return (f"returned {type(result).__module__}.{type(result).__qualname__}, not a zoo Posterior "
                "(GaussianPosterior, DrawsPosterior or PointPosterior from zoo.inference.posterior)")
    expected = problem_sites(spec, Phi)
    got = tuple(result.sites)
    describe = lambda sites: ", ".join(f"{s.name}{tuple(s.shape)}" for s in sites) or "none"  # noqa: E731
    if [(s.name, tuple(s.shape)) for s in got] != [(s.name, tuple(s.shape)) for s in expected]:
        return (f"returned a posterior over the sites ({describe(got)}) but the model on this design has "
                f"({describe(expected)})")
    if isinstance(result, DrawsPosterior):
        for s in got:
            values = np.asarray(result.draws[s.name], dtype=float)
            bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
            if bad:
                return f"returned draws of {s.name!r} with {bad} non-finite value(s) (NaN or inf)"
        if result.n_draws < 2:
            return f"returned {result.n_draws} draw(s) a chain; at least 2 are needed for a mean and an sd"
    return None


def checked_fit(fit: Callable, label: str) -> Callable:
    """``fit`` under the fixed-spec contract, with every failure turned into one line: an
    exception it raises and a return value that :func:`returned_problem` refuses both
    become :class:`EngineReturnError` naming ``label``. For engines the zoo did not write,
    whose bugs are theirs to see in their own row, not ours to propagate."""

    def fit_checked(spec, Phi, y, *, config=None):
        try:
            result = fit(spec, Phi, y, config=config)
        except (Exception, SystemExit) as err:  # noqa: BLE001 - any failure of a user's engine, an
            # exit() included, is its row's result, never the end of the run
            raise _raised(label, err) from err
        problem = returned_problem(result, spec, Phi)
        if problem:
            raise EngineReturnError(f"{label} {problem}")
        return result

    fit_checked.__name__ = getattr(fit, "__name__", "fit")
    fit_checked.__wrapped_engine__ = fit  # the user's function, for code digests of caches
    many = many_of(fit)
    if many is not None:
        def many_checked(spec, Phi, ys, *, config=None):
            try:
                results = list(many(spec, Phi, ys, config=config))
            except (Exception, SystemExit) as err:  # noqa: BLE001 - the whole batch failed: each of its fits did
                return [_raised(f"{label}.many", err)] * len(ys)
            if len(results) != len(ys):
                failed = EngineReturnError(f"{label}.many returned {len(results)} results for {len(ys)} data sets")
                return [failed] * len(ys)
            checked = []
            for result in results:
                if isinstance(result, BaseException):
                    checked.append(result if isinstance(result, EngineReturnError) else _raised(label, result))
                    continue
                problem = returned_problem(result, spec, Phi)
                checked.append(EngineReturnError(f"{label} {problem}") if problem else result)
            return checked

        fit_checked.many = many_checked
    return fit_checked


def _raised(label: str, err: BaseException) -> EngineReturnError:
    """One line: ``label`` raised ``err`` (its message on one line)."""
    if isinstance(err, SystemExit):
        return EngineReturnError(f"{label} called exit({err.code!r}): an engine may not end the run")
    text = " ".join(str(err).split())
    return EngineReturnError(f"{label} raised {type(err).__name__}" + (f": {text}" if text else ""))


def many_of(fit: Callable) -> Callable | None:
    """The batched form of a fixed-spec fit (its attribute ``many``, see the module
    docstring), or None where it has none."""
    many = getattr(fit, "many", None)
    return many if callable(many) else None
