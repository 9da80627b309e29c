"""Engines by name: a model's own, or a user's ``module:function`` or Python function.

Every place that runs engines - ``compare``, a study's cells, the defect battery and SBC -
turns what the user named into an :class:`~zoo.inference.contracts.EngineEntry` here, so a
user's engine goes wherever a registered one goes and is treated alike: the same metrics,
verdicts, report rows, figures and results.json entry. What differs is only what the zoo
can promise about code it did not write:
* its signature is checked against the fixed-spec contract
  ``fit(spec, Phi, y, *, config=None) -> Posterior`` before any work starts;
* every call is checked (:func:`~zoo.inference.contracts.checked_fit`): an exception it
  raises, a return value that is not a zoo Posterior, a posterior over other sites or
  shapes than the model's, or non-finite numbers become one line in that engine's own
  row, and the other engines and the report still come out;
* its kind (Gaussian, draws or point) is read from what it returns.

A name is a model engine's name, or ``"package.module:function"`` (imported as
``python -m`` would, from the current folder first when the command line adds it), or a
callable. Example, an engine of your own beside EP::
    from zoo.validation.runs.compare import CompareConfig, compare
    comparison = compare(CompareConfig(model="pcvm", engines=("ep", my_fit)))
    comparison.result.engines["my_fit"].verdict.reason
"""
from __future__ import annotations

import importlib
from typing import Callable

from ...inference.contracts import PSIS_SUFFIX, EngineEntry, checked_fit, contract_problems, importance_corrected

#: what a user's engine is called in messages before it has returned a posterior
USER_KIND = "user"


def is_user_engine(name) -> bool:
    """Whether ``name`` names a user's engine (a callable or a ``module:function`` path)
    rather than a model's own engine."""
    return callable(name) or (isinstance(name, str) and ":" in name)


def import_engine(target: str) -> Callable:
    """``"package.module:function"`` -> the function, checked against the fixed-spec
    contract ``fit(spec, Phi, y, *, config=None) -> Posterior``. ValueError, one line,
    when it cannot be imported or does not keep the contract."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"an engine given as a path is 'module:function'; got {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"cannot import {module_name!r} for engine {target!r}: {err}") from err
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise ValueError(f"module {module_name!r} has no {attr!r} (engine {target!r})")
        fn = getattr(fn, part)
    _check_contract(fn, target)
    return fn


def _check_contract(fn, label: str) -> None:
    problems = contract_problems(fn, "fixed")
    if problems:
        raise ValueError(f"{label} does not keep the engine contract fit(spec, Phi, y, *, config=None): "
                         + "; ".join(problems))


def engine_label(engine) -> str:
    """The name a user's engine is shown and stored under: the path as given, or a
    callable's ``module:qualname`` (its ``__name__`` alone where it has no module)."""
    if isinstance(engine, str):
        return engine
    name = getattr(engine, "__qualname__", None) or getattr(engine, "__name__", None) or type(engine).__name__
    module = getattr(engine, "__module__", None)
    return name if module in (None, "__main__") else f"{module}:{name}"


def user_entry(engine, *, label: str | None = None) -> EngineEntry:
    """The entry of a user's engine (a ``module:function`` path or a callable), its fit
    wrapped so that every failure is one line (see the module docstring). A path ending in
    ``+psis`` is that engine's importance-corrected form."""
    if isinstance(engine, str) and engine.endswith(PSIS_SUFFIX):
        return importance_corrected(user_entry(engine[: -len(PSIS_SUFFIX)]))
    if isinstance(engine, str):
        fn = import_engine(engine)
    elif callable(engine):
        fn = engine
        _check_contract(fn, engine_label(engine))
    else:
        raise ValueError(f"an engine is a name, 'module:function' or a callable; got {engine!r}")
    label = label or engine_label(engine)
    return EngineEntry(name=label, kind=USER_KIND, description=f"user engine {engine_label(engine)}",
                       fixed=checked_fit(fn, label))


def resolve_entry(record, engine) -> EngineEntry:
    """The :class:`EngineEntry` of ``engine`` for the model of ``record``: one of its own
    engines by name, or a user's engine. ValueError (one line listing the model's
    engines) for anything else."""
    if isinstance(engine, str) and record.has_engine(engine):
        return record.engine(engine)
    if is_user_engine(engine):
        return user_entry(engine)
    raise ValueError(f"model {record.name!r} has no engine {engine!r}; available: {', '.join(record.engine_names)}; "
                     "or your own as 'module:function' (fit(spec, Phi, y, *, config=None) -> Posterior)")


def user_modules(engines) -> tuple[str, ...]:
    """The modules of the user's engines among ``engines`` (names or callables), for the
    code digests that key stored results: a stored result of a user's engine whose code
    has since changed is not reused."""
    out = []
    for e in engines:
        if isinstance(e, str) and ":" in e:
            out.append(e.partition(":")[0])
        elif callable(e) and getattr(e, "__module__", None) not in (None, "__main__"):
            out.append(e.__module__)
    return tuple(dict.fromkeys(out))


__all__ = ["import_engine", "engine_label", "user_entry", "resolve_entry", "is_user_engine", "user_modules",
           "USER_KIND"]
