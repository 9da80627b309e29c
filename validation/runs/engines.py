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

A name is a model engine's name, or ``"package.module:function"``, or a callable. The
module of a path is found on ``sys.path`` (PYTHONPATH included) or in the current folder,
which is searched last, after every installed package, and only once a user's module is
found there (:func:`import_user_module`): no file of the folder a command runs in can
stand in for a module the zoo or its dependencies import, and a user's module named like
an importable one (a ``json.py``, a ``numpy.py``) is refused in one line naming both.
Example, an engine of your own beside EP::

    from zoo.validation.runs.compare import CompareConfig, compare
    comparison = compare(CompareConfig(model="pcvm", engines=("ep", my_fit)))
    comparison.result.engines["my_fit"].verdict.reason
"""
from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from typing import Callable

from ...inference.contracts import PSIS_SUFFIX, EngineEntry, checked_fit, contract_problems, importance_corrected
from ..records import registry
from ..records.user_model import Model
from ..records.model_record import ModelRecord

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
    fn = import_path(target, "engine", "function")
    _check_contract(fn, target)
    return fn


def import_path(target: str, what: str, kind: str):
    """The object a user's ``"package.module:attr"`` path names (a ``what``: "engine", "model";
    ``kind`` says what the attribute is, for the message), its module imported by
    :func:`import_user_module`. ValueError, one line, when the path is malformed, the module
    cannot be imported or has no such attribute."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        article = "an" if what[0] in "aeiou" else "a"
        raise ValueError(f"{article} {what} given as a path is 'module:{kind}'; got {target!r}")
    try:
        found = import_user_module(module_name, f"{what} {target!r}")
    except ImportError as err:
        raise ValueError(f"cannot import {module_name!r} for {what} {target!r}: {err}") from err
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ValueError(f"module {module_name!r} has no {attr!r} ({what} {target!r})")
        found = getattr(found, part)
    return found


def model_name(model) -> str:
    """The registered name of ``model``: a model's name as it is (an installed package's too,
    ``registry.installed_models``), a user's model object - a
    :class:`~zoo.validation.records.user_model.Model` or a ModelRecord - added to this process's
    registry, or a ``"package.module:attr"`` path to one, imported as a user's engine is
    (:func:`import_user_module`: installed packages first, the current folder last) and added.
    ValueError, one line, for a path that cannot be imported or names something that is not a
    model (a bare NumPyro function: wrap it with its data, ``Model(fn, data)``)."""
    if isinstance(model, (Model, ModelRecord)):
        return registry.add_user_model(model)
    if not isinstance(model, str) or ":" not in model:
        return model
    found = import_path(model, "model", "attribute")
    try:
        return registry.add_user_model(found)
    except TypeError as err:
        raise ValueError(f"model {model!r}: {err}") from None


def import_user_module(module_name: str, what: str):
    """Import the module of a user's ``module:function`` (an engine, a study's defect):
    from ``sys.path`` as any module, or else from the current folder - searched after
    every installed package, so that it can provide the user's module and shadow nothing.
    ValueError (one line, starting with ``what``) when the current folder holds a module or
    package of the same top-level name as an importable one other than it; ImportError as
    ``importlib.import_module`` raises it."""
    top = module_name.partition(".")[0]
    folder = os.getcwd()
    here = _spec_or_none(importlib.machinery.PathFinder.find_spec, top, [folder])
    if here is not None:
        there = _spec_elsewhere(top, folder, here)
        if there is not None:
            raise ValueError(f"{what}: {_where(here)} in the current folder has the name of the module {top!r} "
                             f"({_where(there)}); rename it: a file of the current folder never shadows an "
                             "importable module")
        # The folder goes at the END of sys.path, rather than a finder of this one module
        # on sys.meta_path: processes started from this one (a study's Dask workers, spawned
        # by multiprocessing) inherit sys.path and so still find the module when they
        # unpickle a task naming it, and every installed package still comes first. Its
        # files are thus importable only where nothing of the same name is installed.
        if not any(_is_folder(entry, folder) for entry in sys.path):
            sys.path.append(folder)
    return importlib.import_module(module_name)


def _spec_or_none(find, *args):
    try:
        return find(*args)
    except (ImportError, ValueError):  # a broken parent, a module without a spec
        return None


def _is_folder(entry, folder: str) -> bool:
    """Whether the sys.path entry ``entry`` is ``folder`` ("" is the current folder)."""
    if not isinstance(entry, str):
        return False
    return os.path.realpath(entry or os.curdir) == os.path.realpath(folder)


def _location(spec) -> str | None:
    """The file or folder of a spec, as a real path; None for a built-in or frozen module."""
    if spec.origin and spec.has_location:
        return os.path.realpath(spec.origin)
    locations = list(spec.submodule_search_locations or ())
    return os.path.realpath(locations[0]) if locations else None


def _where(spec) -> str:
    if spec.origin and spec.has_location:
        return spec.origin
    locations = list(spec.submodule_search_locations or ())
    return locations[0] if locations else spec.origin or "built-in"


def _spec_elsewhere(top: str, folder: str, here):
    """The spec of ``top`` that Python would import were the current folder not searched:
    an imported module of that name, or what the import system finds without the folder.
    None if there is none, or if it is the current folder's own (the module already
    imported from there; an editable install of the folder's package), or if both are
    namespace packages (their portions merge: nothing is shadowed)."""
    mine = _location(here)

    def other(spec) -> bool:
        if spec is None or (_location(spec) is not None and _location(spec) == mine):
            return False
        return not (spec.origin is None and here.origin is None)  # two namespace packages merge

    imported = getattr(sys.modules.get(top), "__spec__", None)
    if imported is not None:
        return imported if other(imported) else None
    path = [entry for entry in sys.path if not _is_folder(entry, folder)]
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder:
            spec = _spec_or_none(finder.find_spec, top, path)
        else:  # built-in, frozen, editable installs' finders
            find = getattr(finder, "find_spec", None)
            spec = _spec_or_none(find, top, None) if find is not None else None
        if other(spec):
            return spec
    return None


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
    """The :class:`~zoo.inference.contracts.EngineEntry` of ``engine`` for the model of ``record``: one of its own
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


__all__ = ["import_engine", "import_path", "import_user_module", "model_name", "engine_label", "user_entry", "resolve_entry", "is_user_engine",
           "user_modules", "USER_KIND"]
