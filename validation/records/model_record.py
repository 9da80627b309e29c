"""What the zoo knows about one model, in one frozen record.

Every reader of model-specific facts - ``zoo compare``, the command line's help and
errors, the scikit-learn classifier, ``zoo reproduce`` and the benchmarks - asks the
registry (``validation/records/registry.py``) for the model's :class:`ModelRecord` and reads it;
nothing else keys anything by model name. Adding a model is therefore its own files (the
spec in ``models/``, engines in ``inference/``, a protocol module in
``validation/records/`` ending in its record, any sampler of its own) plus one line that
registers the record (CONTRIBUTING.md lists them).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ...inference.contracts import PSIS_SUFFIX, EngineEntry, importance_corrected
from ..judge.defects import Defect
from ..references import NUTS, NUTS_SAMPLER, ReferenceConfig, ReferenceSampler, sampler_named

#: the classifier's own parameters, which no model may declare again
CLASSIFIER_BASE_PARAMS = ("model", "engine", "width", "seed", "basis", "verbose")


def _is_real(value) -> bool:
    """A real number that is not a boolean (True is an int to Python, not a rate)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def finite_number(name: str, value) -> float:
    """A classifier hyper-parameter check: a finite real number (as a float)."""
    if not (_is_real(value) and np.isfinite(value)):
        raise ValueError(f"{name} must be a finite number or None, got {value!r}")
    return float(value)


def positive_number(name: str, value) -> float:
    """A classifier hyper-parameter check: a finite real number > 0 (as a float)."""
    if not (_is_real(value) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ParamDomain:
    """The values one ``--param`` takes: always a finite real number (NaN and the
    infinities never), and within these bounds.

    * low, high: the smallest and largest value (None: unbounded); low_open / high_open:
      the bound itself is excluded. integer: a whole number. choices: one of these values
      (then the bounds are not used). nonzero: any value but 0 (its sign chooses
      something). why: what the parameter is, in a few words, for the message.

    Build them with :func:`positive`, :func:`within`, :func:`one_of`, :func:`whole`,
    :func:`nonzero`.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    choices: tuple[float, ...] = ()
    nonzero: bool = False
    why: str = ""

    def rule(self) -> str:
        """What a value must be, in words ("positive", "in (0, 1)", "0 or 1", ...)."""
        if self.choices:
            shown = [f"{c:g}" for c in self.choices]
            return (", ".join(shown[:-1]) + " or " + shown[-1]) if len(shown) > 1 else shown[0]
        if self.nonzero:
            return "a nonzero number"
        kind = "an integer" if self.integer else ""
        if self.low == 0 and self.low_open and self.high is None:
            return "a positive integer" if self.integer else "positive"
        if self.low is not None and self.high is not None:
            if self.integer:
                return f"an integer from {self.low:g} to {self.high:g}"
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return (kind + " " if kind else "") + f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return (kind + " " if kind else "") + f"{'<' if self.high_open else '<='} {self.high:g}"
        return kind or "a finite number"

    def admits(self, value: float) -> bool:
        """Whether a finite real ``value`` lies in the domain."""
        if self.choices:
            return value in self.choices
        if self.nonzero and value == 0:
            return False
        if self.integer and value != int(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True


def positive(why: str = "") -> ParamDomain:
    """A finite number > 0 (a precision, a rate, a scale, a width)."""
    return ParamDomain(low=0.0, low_open=True, why=why)


def within(low: float, high: float, *, low_open: bool = False, high_open: bool = False,
           why: str = "") -> ParamDomain:
    """A finite number between ``low`` and ``high`` (each bound excluded where ``*_open``)."""
    return ParamDomain(low=low, high=high, low_open=low_open, high_open=high_open, why=why)


def one_of(*choices: float, why: str = "") -> ParamDomain:
    """One of a few values (a switch: 0 or 1)."""
    return ParamDomain(choices=tuple(float(c) for c in choices), why=why)


def whole(low: int = 0, high: int | None = None, *, why: str = "") -> ParamDomain:
    """An integer from ``low`` (to ``high``, if given)."""
    return ParamDomain(low=float(low), high=None if high is None else float(high), integer=True, why=why)


def nonzero(why: str = "") -> ParamDomain:
    """Any finite number but 0 (its sign chooses between two forms)."""
    return ParamDomain(nonzero=True, why=why)


def _shown(value) -> str:
    """A value as the user wrote it: 0 rather than 0.0, nan, inf."""
    if _is_real(value):
        return f"{float(value):g}"
    return repr(value)


@dataclass(frozen=True)
class ClassifierParam:
    """A hyper-parameter the model's scikit-learn classifier takes (``SparseBayesClassifier``'s
    keyword of that name; None, its default, leaves the model's own default).

    * name: the keyword. doc: what it is, in one line (the classifier's docstring shows it).
    * check: ``check(name, value) -> value`` for a value that is not None: the value the
      design receives, or ValueError in one line naming the parameter
      (:func:`finite_number`, :func:`positive_number`); None: passed as given (the design
      checks it).
    """

    name: str
    doc: str
    check: Callable[[str, Any], Any] | None = None


@dataclass(frozen=True)
class ModelRecord:
    """One model of the zoo.

    * name: the command-line name (``--model``). title: how messages name it.
    * summary: one line for listings. spec_class: the model's spec (``models/``).
    * prepare: ``prepare(split, params, *, progress=None) -> Prepared``: the comparison
      protocol that turns a data split and ``--param`` values into the frozen spec and
      design matrices every engine and the reference see (``validation/records/``).
    * params: the ``--param`` names ``prepare`` accepts (checked before it is called).
    * param_domains: name -> :class:`ParamDomain`, the values each of ``params`` takes
      (positive, in (0, 1), 0 or 1, ...); a name without one takes any finite number.
      :meth:`check_params` refuses any other value in one line before any work (data
      loading, cross-validation, a reference), as ``prepare`` would only after them.
    * param_relations: ``relations(params) -> None``: ValueError in one line for values
      that are each in their domain but do not go together (BBLR's a + b <= 1), called by
      :meth:`check_params` after the domains; None: no relations.
    * selection: how ``prepare`` fixes the hyper-parameters, in a few words (CLI help).
    * cv_fits: how many cross-validation fits ``prepare`` reports to a progress bar.
    * default_data: the data set ``zoo compare --model NAME`` uses without ``--data``.
    * raw_inputs: True if the protocol takes the inputs as they are; False: standardized on
      the training split.
    * engines: every engine of the model (their :class:`~zoo.inference.contracts.EngineEntry`, each naming the
      model variant it approximates, if any). default_engines: those ``zoo compare`` runs.
    * classifier_engine: the engine the scikit-learn classifier runs when none is named (one
      with an end-to-end mode); None: the first such engine.
    * references: the reference samplers tried in order, each as a dict of the
      ``ReferenceConfig`` settings that differ from its defaults (``"sampler"`` included);
      the first that certifies is the reference.
    * samplers: reference samplers of this model's own (beyond NUTS, which every model has),
      each a distinct name other than "nuts". The record hands them to whoever runs a
      reference (:meth:`reference_sampler`, :meth:`reference_config`): they are registered
      nowhere.
    * moments: ``moments(spec, Phi, y) -> dict | None``: which posterior moments exist on
      these data (None: all of them, nothing to doubt). Metrics built on a moment that
      does not exist are reported as null with its reason.
    * classifier: ``design(X, y01, engine, options) -> (basis, fit_kwargs)`` for the
      scikit-learn classifier (``options``: its width and basis, and each of
      ``classifier_params`` checked, None where not given), or None when the model has no
      classifier.
    * classifier_params: the classifier's hyper-parameters of this model
      (:class:`ClassifierParam`: q, gamma, ...); ``SparseBayesClassifier`` takes, checks
      and hands them to ``classifier``, and refuses them for any other model.
    * classifier_plan: ``plan(engine, n_samples, n_features, basis, fit_kwargs, options) ->
      FitPlan`` (``validation/records/fit_cost.py``): what a classifier fit of this size
      will do and cost - the candidate count, the path it takes (and any options that
      path needs), its memory and a time estimate from the engine's cost model - said
      before the fit runs; None: the classifier says only the design's size.
    * defects: planted defects of this model's own engines
      (:class:`~zoo.validation.judge.defects.Defect`, ``engines`` naming this record's
      engines), run by the defect battery beside the generic ones
      (``validation/runs/battery.py``).
    * sbc_spec: ``() -> (spec, variants)``: the spec simulation-based calibration draws
      from (its prior must be proper: SBC draws the parameters from it) and the specs of
      the variants engines approximate (``validation/runs/sbc_simulation.py``, ``problem_for``);
      None: the model has no proper prior to simulate from, and SBC says so
      (``no_sbc``: why, in the model's own words; a general default otherwise). A model
      that brings its own data (``own_data``) is simulated on its own data's inputs, its
      observed sites drawn from its prior predictive.
    * own_data: True for a model that brings its own data (a user's NumPyro model,
      ``validation/records/user_model.py``): no data set is loaded and ``prepare`` gets no
      split; False: ``prepare`` gets a split of a data set of the zoo's catalog.
    * figures: ``figures(comparison, out_dir) -> {name: (path, caption)}``: figures only this
      model has (gridRVM's row and column relevances), written beside the report's own
      and shown in it; None: none.
    """

    name: str
    title: str
    summary: str
    spec_class: type
    prepare: Callable[..., Any]
    params: tuple[str, ...]
    selection: str
    default_data: str
    engines: tuple[EngineEntry, ...]
    default_engines: tuple[str, ...]
    references: tuple[dict[str, Any], ...] = ({"sampler": "nuts"},)
    samplers: tuple[ReferenceSampler, ...] = ()
    raw_inputs: bool = False
    cv_fits: int = 0
    moments: Callable[..., dict[str, Any] | None] | None = None
    classifier: Callable[..., tuple[Any, dict[str, Any]]] | None = None
    classifier_params: tuple[ClassifierParam, ...] = ()
    classifier_plan: Callable[..., Any] | None = None
    classifier_engine: str | None = None
    defects: tuple[Defect, ...] = ()
    sbc_spec: Callable[[], tuple[Any, dict[str, Any]]] | None = None
    figures: Callable[[Any, str], dict[str, tuple[str, str]]] | None = None
    param_domains: Mapping[str, ParamDomain] = field(default_factory=dict)
    param_relations: Callable[[dict[str, float]], None] | None = None
    own_data: bool = False
    no_sbc: str | None = None
    # engine name -> entry, filled in __post_init__ (not part of equality)
    _by_name: dict[str, EngineEntry] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        names = [e.name for e in self.engines]
        if len(set(names)) != len(names):
            raise ValueError(f"model {self.name!r}: engine names repeat: {names}")
        object.__setattr__(self, "_by_name", {e.name: e for e in self.engines})
        missing = [e for e in self.default_engines if e not in self._by_name]
        if missing or not self.default_engines:
            raise ValueError(f"model {self.name!r}: default engines {missing or '()'} are not among its engines {names}")
        own = [s.name if isinstance(s, ReferenceSampler) else s for s in self.samplers]
        if not all(isinstance(s, ReferenceSampler) for s in self.samplers) or NUTS in own \
                or len(set(own)) != len(own):
            raise ValueError(f"model {self.name!r}: samplers must be ReferenceSamplers "
                             f"(zoo.validation.references) of distinct names other than {NUTS!r} (the built-in "
                             f"NUTS); got {own}")
        known = {NUTS, *own}
        chain = [r.get("sampler", "nuts") for r in self.references]
        if not chain or any(s not in known for s in chain) or len(set(chain)) != len(chain):
            raise ValueError(f"model {self.name!r}: reference chain {chain} must name each of {sorted(known)} "
                             "at most once, and at least one")
        if self.classifier_engine is not None and (self.classifier is None or self.classifier_engine not in self._by_name
                                                   or self._by_name[self.classifier_engine].end_to_end is None):
            raise ValueError(f"model {self.name!r}: classifier_engine {self.classifier_engine!r} must be one of its "
                             "engines with an end-to-end mode, in a record with a classifier design")
        hyper = [p.name for p in self.classifier_params]
        if hyper and self.classifier is None:
            raise ValueError(f"model {self.name!r}: classifier parameters {hyper} without a classifier design")
        if self.classifier_plan is not None and self.classifier is None:
            raise ValueError(f"model {self.name!r}: a classifier plan without a classifier design")
        bad = [n for n in hyper if not n.isidentifier() or n.startswith("_") or n in CLASSIFIER_BASE_PARAMS]
        if bad or len(set(hyper)) != len(hyper):
            raise ValueError(f"model {self.name!r}: classifier parameters {hyper} must be distinct public names, "
                             f"none of {', '.join(CLASSIFIER_BASE_PARAMS)}")
        stray = sorted(set(self.param_domains) - set(self.params))
        if stray or not all(isinstance(d, ParamDomain) for d in self.param_domains.values()):
            raise ValueError(f"model {self.name!r}: param_domains must map names among its params "
                             f"{list(self.params)} to ParamDomains; got {stray or dict(self.param_domains)}")
        for d in self.defects:
            if not isinstance(d, Defect):
                raise ValueError(f"model {self.name!r}: defects must be Defects "
                                 f"(zoo.validation.judge.defects), got {d!r}")
            if d.model not in (None, self.name):
                raise ValueError(f"model {self.name!r}: defect {d.name!r} is another model's ({d.model!r})")
            unknown = [e for e in d.engines if not isinstance(e, str) or e not in self._by_name]
            if unknown:
                raise ValueError(f"model {self.name!r}: defect {d.name!r} names engines {unknown} not among its "
                                 f"engines {names}")
        if len({d.name for d in self.defects}) != len(self.defects):
            raise ValueError(f"model {self.name!r}: defect names repeat: {[d.name for d in self.defects]}")

    def engine(self, name: str) -> EngineEntry:
        """The engine called ``name`` - one of the model's, or ``<one of them>+psis``, its
        importance-corrected form; ValueError listing the model's engines otherwise."""
        base = name[: -len(PSIS_SUFFIX)] if name.endswith(PSIS_SUFFIX) else None
        if base is not None and base in self._by_name:
            return importance_corrected(self._by_name[base])
        if name not in self._by_name:
            raise ValueError(f"model {self.name!r} has no engine {name!r}; available: {', '.join(self._by_name)}")
        return self._by_name[name]

    @property
    def engine_names(self) -> tuple[str, ...]:
        """The model's own engines (each also has an importance-corrected ``+psis`` form,
        :meth:`has_engine`, unless it returns a point estimate)."""
        return tuple(self._by_name)

    def has_engine(self, name: str) -> bool:
        """Whether :meth:`engine` knows ``name``: an engine of the model or its ``+psis`` form."""
        if name in self._by_name:
            return True
        return name.endswith(PSIS_SUFFIX) and self._by_name.get(name[: -len(PSIS_SUFFIX)], None) is not None \
            and self._by_name[name[: -len(PSIS_SUFFIX)]].kind != "point"

    @property
    def sampler_names(self) -> tuple[str, ...]:
        """Every reference sampler this model can use: NUTS first, then its own."""
        return (NUTS, *(s.name for s in self.samplers))

    def reference_sampler(self, name: str) -> ReferenceSampler:
        """The reference sampler called ``name`` that this model can use: NUTS (the
        references wing's built-in) or one of its own :attr:`samplers`; ValueError naming
        :attr:`sampler_names` otherwise."""
        try:
            return sampler_named(name, (NUTS_SAMPLER, *self.samplers))
        except ValueError:
            raise ValueError(f"unknown reference sampler {name!r} for {self.name}; "
                             f"known: {', '.join(self.sampler_names)}") from None

    def reference_config(self, settings: Mapping[str, Any] | None = None, **more) -> ReferenceConfig:
        """A :class:`~zoo.validation.references.config.ReferenceConfig` of ``settings`` and
        ``more`` (as in :attr:`references`: the settings that differ from the defaults), its
        ``"sampler"`` (default NUTS) given by name and handed over as this model's
        :meth:`reference_sampler`."""
        settings = {**(settings or {}), **more}
        sampler = settings.pop("sampler", NUTS)
        if not isinstance(sampler, ReferenceSampler):
            sampler = self.reference_sampler(sampler)
        return ReferenceConfig(**settings, sampler=sampler)

    def reference_configs(self) -> tuple[ReferenceConfig, ...]:
        """The model's reference chain (:attr:`references`) as ReferenceConfigs, in order."""
        return tuple(self.reference_config(settings) for settings in self.references)

    def check_params(self, params) -> None:
        """ValueError, in one line, naming the first ``--param`` the protocol does not take:
        an unknown name, a value that is not a finite number, one outside its
        :attr:`param_domains` (``pcvm parameter alpha must be positive ...; got 0``), or
        values that do not go together (:attr:`param_relations`). Cheap: called before any
        data are loaded or any fit runs."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            if not self.params:
                raise ValueError(f"unknown {self.title} parameter(s) {unknown}; it takes none")
            allowed = ", ".join(self.params[:-1]) + (" or " if len(self.params) > 1 else "") + self.params[-1]
            raise ValueError(f"unknown {self.title} parameter(s) {unknown}; use {allowed}")
        for name in self.params:
            if name not in params:
                continue
            value = params[name]
            domain = self.param_domains.get(name, ParamDomain())
            why = f" ({domain.why})" if domain.why else ""
            if not _is_real(value):
                raise ValueError(f"{self.name} parameter {name} must be a number; got {_shown(value)}")
            if not math.isfinite(float(value)):
                raise ValueError(f"{self.name} parameter {name} must be a finite number{why}; got {_shown(value)}")
            if not domain.admits(float(value)):
                raise ValueError(f"{self.name} parameter {name} must be {domain.rule()}{why}; got {_shown(value)}")
        if self.param_relations is not None:
            self.param_relations(dict(params))
