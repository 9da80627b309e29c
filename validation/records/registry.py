"""The registry of models: one :class:`~zoo.validation.records.model_record.ModelRecord` per model.

Everything model-specific is read from here - ``zoo compare`` and its command line, the
classifier, ``zoo reproduce`` and the benchmarks - so a model enters the zoo by its own
files plus one :func:`register` call (the built-in ones are at the bottom of this file).

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

from dataclasses import replace

from ..judge.defects import GENERIC
from . import bblr_record, ggsm_probit_record, gig_logistic_record, grid_rvm_record, pcvm_record
from .model_record import ModelRecord
from .user_model import Model

_MODELS: dict[str, ModelRecord] = {}


def register(record: ModelRecord, *, replace_existing: bool = False) -> ModelRecord:
    """Add ``record`` to the zoo; returns it. (Its reference samplers stay in the record:
    :meth:`ModelRecord.reference_sampler`.)

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


def add_user_model(model) -> str:
    """Add a user's :class:`~zoo.validation.records.user_model.Model` to this process's table
    under its name, replacing a user's model of that name (a built-in model's name is refused:
    ValueError); returns the name. How a Model given to ``CompareConfig`` or named on the
    command line (``--model module:attr``) becomes a model name like the five."""
    if not isinstance(model, Model):
        raise TypeError(f"add_user_model takes a Model (zoo.validation.records.user_model), got {type(model).__name__}")
    register(model.record(), replace_existing=model.name in _USER_MODELS)
    _USER_MODELS.add(model.name)
    return model.name


def unregister(name: str) -> None:
    """Remove a model (its reference samplers go with its record)."""
    _MODELS.pop(name, None)
    _USER_MODELS.discard(name)


def model_names() -> tuple[str, ...]:
    return tuple(_MODELS)


def get_model(name: str) -> ModelRecord:
    """The record of model ``name``; ValueError listing the registered names otherwise."""
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


#: the model a command or API runs when none is named (``zoo compare``, ``CompareConfig``,
#: the classifier): PCVM, the first built-in model
DEFAULT_MODEL = pcvm_record.RECORD.name

# The built-in models, in the order listings show them.
for _record in (pcvm_record.RECORD, ggsm_probit_record.RECORD, gig_logistic_record.RECORD, grid_rvm_record.RECORD,
                bblr_record.RECORD):
    register(_record)
