"""The registry of models: one :class:`~zoo.validation.records.model_record.ModelRecord` per model.

Everything model-specific is read from here - ``zoo compare`` and its command line, the
classifier, ``zoo reproduce`` and the benchmarks.

**One way in.** Every model enters as one object named by a ``"module:attr"`` path: a
:class:`~zoo.validation.records.user_model.Model` (a NumPyro function and its data) or a
full :class:`~zoo.validation.records.model_record.ModelRecord` (a model with the classifier
parts: a design, hyper-parameters, the scikit-learn classifier). The zoo's five are such
paths (:data:`BUILT_IN`); an installed package declares its own in the entry-point group
``zoo.models`` (:data:`ENTRY_POINT_GROUP`: ``name = "package.module:attr"``), loaded the
first time the table is listed or a name is not found in it; a user names one on the command
line (``--model module:attr``) or hands one to the Python API. :func:`add_model` is the one
function all of them go through.

    from zoo.validation.records import registry
    registry.model_names()                       # ('pcvm', 'ggsm-probit', 'gig-logistic', 'grid-rvm', 'bblr')
    record = registry.get_model("pcvm")
    registry.get_engine("pcvm", "ep").fit()      # the fixed-spec fit of PCVM's EP engine
    prepared = registry.prepare("pcvm", split, {"width": 0.7})

A record carries its own reference samplers and hands them over itself
(``record.reference_sampler("slice-gibbs")``, ``record.reference_configs()``); registering
it registers nothing anywhere else. The table of models is this module's own content:
importing this module builds it from the built-in records (the bottom of the file); no
other module's import fills it, or any other table.
"""
from __future__ import annotations

import importlib
import warnings
from dataclasses import replace
from importlib import metadata

from ..judge.defects import GENERIC
from .model_record import ModelRecord
from .user_model import Model

#: the zoo's own models, in the order listings show them, named as an installed package's
#: entry point names one
BUILT_IN = ("zoo.validation.records.pcvm_record:RECORD", "zoo.validation.records.ggsm_probit_record:RECORD",
            "zoo.validation.records.gig_logistic_record:RECORD", "zoo.validation.records.grid_rvm_record:RECORD",
            "zoo.validation.records.bblr_record:RECORD")
#: the entry-point group in which installed packages declare their models
ENTRY_POINT_GROUP = "zoo.models"

_MODELS: dict[str, ModelRecord] = {}


def register(record: ModelRecord, *, replace_existing: bool = False) -> ModelRecord:
    """Add ``record`` to the zoo; returns it. (Its reference samplers stay in the record:
    :meth:`~zoo.validation.records.model_record.ModelRecord.reference_sampler`.)

    A name already taken is an error unless ``replace_existing``.
    """
    if not isinstance(record, ModelRecord):
        raise TypeError(f"register takes a ModelRecord, got {type(record).__name__}")
    if record.name in _MODELS and not replace_existing and _MODELS[record.name] is not record:
        raise ValueError(f"a model named {record.name!r} is already registered")
    # the defect battery knows defects by name: one name, one defect
    taken = {d.name: "a generic defect" for d in GENERIC}
    taken |= {d.name: f"a defect of model {r.name!r}" for r in _MODELS.values() if r.name != record.name
              for d in r.defects}
    clash = [f"{d.name!r} ({taken[d.name]})" for d in record.defects if d.name in taken]
    if clash:
        raise ValueError(f"model {record.name!r}: defect names already taken: {', '.join(clash)}")
    _MODELS[record.name] = record
    return record


#: the names of users' models (user_model.py) this process added: such a name may be added
#: again (the user's model, changed); a built-in model's may not
_USER_MODELS: set[str] = set()


def record_of(model, *, name: str | None = None) -> ModelRecord:
    """The record of a model object: a Model's
    :meth:`~zoo.validation.records.user_model.Model.record`, or a ModelRecord as it is;
    ``name``: the name it takes in the zoo (an entry point's), if not its own. TypeError, one
    line, for anything else."""
    if isinstance(model, Model):
        if name is not None and name != model.name:
            model = replace(model, name=name)
        return model.record()
    if isinstance(model, ModelRecord):
        return model if name is None or name == model.name else replace(model, name=name)
    raise TypeError(f"a model is a Model (zoo.validation.records.user_model) or a ModelRecord, got "
                    f"{type(model).__name__}" + (": a NumPyro function alone has no data - wrap it with its data, "
                                                 "Model(fn, data)" if callable(model) else ""))


def add_model(model, *, user: bool = True, name: str | None = None) -> str:
    """Add a model object (a Model or a ModelRecord, :func:`record_of`) to this process's table;
    returns its name. ``user``: a user's model (from the command line, the Python API or an
    installed package), which replaces a user's model of the same name; a built-in model's
    name is refused (ValueError). The one way every model enters the zoo (module docstring)."""
    record = record_of(model, name=name)
    if user and record.name in _MODELS and record.name not in _USER_MODELS:
        raise ValueError(f"model name {record.name!r} is the zoo's own model's: give yours another name")
    register(record, replace_existing=user and record.name in _USER_MODELS)
    if user:
        _USER_MODELS.add(record.name)
    return record.name


def add_user_model(model) -> str:
    """Add a user's Model (or ModelRecord) to this process's table under its name, replacing a
    user's model of that name (a built-in model's name is refused: ValueError); returns the
    name. How a model given to ``CompareConfig`` or named on the command line (``--model
    module:attr``) becomes a model name like the five."""
    return add_model(model, user=True)


def _load_built_in(path: str) -> ModelRecord:
    """A built-in model's object by its path (a module of this package: a plain import)."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


#: whether the installed packages' models were looked for (once per process)
_ENTRY_POINTS_READ = False


def installed_models() -> tuple[str, ...]:
    """Load the models installed packages declare in the entry-point group ``zoo.models``
    (once per process); returns the names added. An entry point that cannot be loaded, is
    not a model, or takes a name already used is skipped with one warning naming it and why:
    a broken package never stops the zoo."""
    global _ENTRY_POINTS_READ
    if _ENTRY_POINTS_READ:
        return ()
    _ENTRY_POINTS_READ = True
    added = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"installed model {entry.name!r} ({entry.value}" + (
            f", package {entry.dist.name}" if getattr(entry, "dist", None) is not None else "") + ")"
        if entry.name in _MODELS:
            warnings.warn(f"{where} not loaded: the name {entry.name!r} is taken by another model", stacklevel=2)
            continue
        try:
            added.append(add_model(entry.load(), name=entry.name))
        except Exception as err:  # noqa: BLE001 - any failure of a package's code: named, skipped
            warnings.warn(f"{where} not loaded: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                          stacklevel=2)
    return tuple(added)


def unregister(name: str) -> None:
    """Remove a model (its reference samplers go with its record)."""
    _MODELS.pop(name, None)
    _USER_MODELS.discard(name)


def model_names() -> tuple[str, ...]:
    """Every model's name: the built-in ones, then installed packages' and users'."""
    installed_models()
    return tuple(_MODELS)


def get_model(name: str) -> ModelRecord:
    """The record of model ``name``; ValueError listing the registered names otherwise."""
    if name not in _MODELS:
        installed_models()
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(_MODELS)}")
    return _MODELS[name]


def get_engine(model: str, engine: str):
    """The :class:`~zoo.inference.contracts.EngineEntry` of ``engine`` for ``model``."""
    return get_model(model).engine(engine)


def prepare(model: str, split, params: dict | None = None, *, progress=None):
    """The model's protocol on one split: its ``--param`` names checked, then its
    ``prepare``, then its moments analysis on the training design (for the model and each
    of its variants)."""
    record = get_model(model)
    params = dict(params or {})
    record.check_params(params)
    prepared = record.prepare(split, params, progress=progress)
    if record.moments is not None:
        prepared = replace(
            prepared, moments=record.moments(prepared.spec, prepared.Phi_train, prepared.y_train),
            variant_moments={name: record.moments(spec, prepared.Phi_train, prepared.y_train)
                             for name, spec in prepared.variants.items()})
    return prepared


# The built-in models, in the order listings show them: through add_model, as any other.
for _path in BUILT_IN:
    add_model(_load_built_in(_path), user=False)

#: the model a command or API runs when none is named (``zoo compare``, ``CompareConfig``,
#: the classifier): PCVM, the first built-in model
DEFAULT_MODEL = next(iter(_MODELS))
