"""Any NumPyro model and its data as a model spec: what lets the zoo judge inference on a model
that is not one of its five classifiers.

The five models of the zoo are classifiers: their NumPyro function takes a design matrix and a
label vector (``model(Phi, y)``), and their latent sites depend on the design's width
(``sites(n_basis)``). A :class:`GeneralSpec` wraps a user's NumPyro function ``fn(**data)``
instead, with the same contract where it matters to references, engines and verdicts:

* ``model(inputs, y=None)``: ``inputs`` are the data's arrays (a dict; they may be traced by
  JAX), ``y`` the observed sites' values by site name (a dict), substituted for the values the
  data give them - so SBC can hand the model simulated observations -, or None: the observed
  sites are drawn (the prior predictive). The data's plain integers and strings (a group
  count, a plate size) are ``static``: closed over, never traced.
* ``sites()``: the latent sites judged, found by tracing the model once (:func:`general_spec`):
  every continuous latent sample site by default, each with its support; deterministic sites
  (quantities the model computes) may be named too.
* no ``linear_predictor`` / ``prob``: a general model has no classifier part; what needs one
  (predictive probabilities, test error) is absent for it, not faked.

:func:`general_spec` refuses in one line what the zoo cannot judge: a discrete latent site
(NUTS and the Gaussian engines need continuous ones), a support other than the real line,
(0, inf) or [0, inf) (the support and distribution verdicts know those three so far), data
that do not fit the model (a missing or unknown argument, shapes that do not broadcast), a
model with nothing observed, a name given as a site that is not a latent one.

Data may be a mapping of arrays and numbers, or a file: ``.npz``, ``.csv`` (one column per
name, header first) or posteriordb's data JSON (names to numbers and nested lists)
(:func:`load_data`).
"""
from __future__ import annotations

import csv
import hashlib
import inspect
import json
import numbers
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np
from numpyro import handlers
from numpyro.distributions import ImproperUniform, constraints
from numpyro.infer import init_to_uniform
from numpyro.primitives import Messenger

from .base import Site

#: the supports a judged site may have, as the zoo's verdicts name them
SUPPORTS = ("real", "positive", "nonnegative")


class GeneralModelError(ValueError):
    """A model or its data the zoo cannot judge; the message is one line naming why."""


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
def load_data(source) -> dict[str, Any]:
    """A model's data from a mapping (copied) or a file: ``.npz`` (its arrays), ``.csv`` (a
    header of names, then one row per observation: one float array per column) or ``.json``
    (posteriordb's data layout: each name to a number or a nested list). Whole numbers in a
    JSON file stay Python ints (counts and plate sizes); GeneralModelError naming the file
    and the problem otherwise."""
    if isinstance(source, Mapping):
        return dict(source)
    path = os.fspath(source)
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as f:
                return {k: f[k] for k in f.files}
        if ext == ".csv":
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
            if len(rows) < 2:
                raise GeneralModelError(f"data file {path}: a header and at least one row are needed")
            header, body = rows[0], rows[1:]
            if any(len(r) != len(header) for r in body):
                raise GeneralModelError(f"data file {path}: every row must have {len(header)} values, as the header")
            return {name: np.array([float(r[j]) for r in body]) for j, name in enumerate(header)}
        if ext == ".json":
            with open(path, encoding="utf-8") as fh:
                d = json.load(fh)
            if not isinstance(d, dict):
                raise GeneralModelError(f"data file {path}: a JSON object of names to values is needed")
            return {k: (v if isinstance(v, (int, str)) and not isinstance(v, bool) else np.asarray(v, dtype=float))
                    for k, v in d.items()}
    except GeneralModelError:
        raise
    except (OSError, ValueError) as err:
        raise GeneralModelError(f"data file {path}: {err}") from None
    raise GeneralModelError(f"data file {path}: .npz, .csv or .json (posteriordb's layout) are read; got {ext or 'no extension'}")


def split_data(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(static, inputs): plain integers and strings (sizes, counts, labels of a plate) stay
    Python values, closed over by the model; everything else becomes a numpy array, which JAX
    may trace. A value that is neither (an object, a NaN) is refused in one line."""
    static, inputs = {}, {}
    for name, value in data.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise GeneralModelError(f"data name {name!r} is not a Python identifier (the model takes the data as "
                                    "keyword arguments)")
        if isinstance(value, (str, bool)) or (isinstance(value, numbers.Integral) and not isinstance(value, np.ndarray)):
            static[name] = int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
            continue
        try:
            arr = np.asarray(value)
        except Exception as err:  # noqa: BLE001 - anything numpy cannot make an array of
            raise GeneralModelError(f"data {name!r}: not an array or a number ({err})") from None
        if arr.dtype.kind not in "biuf":
            raise GeneralModelError(f"data {name!r}: numbers are needed, got an array of {arr.dtype}")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise GeneralModelError(f"data {name!r} holds NaN or infinite values")
        inputs[name] = arr if arr.dtype.kind in "iub" else arr.astype(float)
    return static, inputs


def _digest(static: Mapping[str, Any], inputs: Mapping[str, np.ndarray]) -> str:
    """A digest of the data: names, shapes, dtypes and bytes (what makes two data sets the same)."""
    h = hashlib.sha256()
    h.update(json.dumps(sorted(static.items()), default=str).encode())
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _code_digest(fn: Callable) -> str | None:
    """A digest of the model function's source (None where Python cannot show it: a lambda typed
    at a prompt); with the data's digest it keys the reference cache."""
    try:
        return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return None


def function_path(fn: Callable) -> str:
    """``module:qualname`` of a function (how the zoo names it in its records)."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"


# --------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------
class _Unobserved(Messenger):
    """The observed sites of ``names`` drawn instead of observed: the prior predictive."""

    def __init__(self, fn, names):
        self.names = frozenset(names)
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["name"] in self.names and msg["is_observed"]:
            msg["is_observed"] = False
            msg["value"] = None


@dataclass(frozen=True, eq=False)
class GeneralSpec:
    """A NumPyro function and its data as a model spec (module docstring). Build it with
    :func:`general_spec`, which finds and checks the sites.

    name: how the zoo names the model. fn: the NumPyro function, called as ``fn(**static,
    **inputs)``. static, inputs: the data (:func:`split_data`). observed: the observed sites'
    names, in order; observations: their values in the data. judged: the latent sites judged,
    in flat order; latent: every latent sample site's name. code, data: digests of the
    function's source (None: not available) and of the data."""

    name: str
    fn: Callable
    static: Mapping[str, Any]
    inputs: Mapping[str, np.ndarray]
    observed: tuple[str, ...]
    observations: Mapping[str, np.ndarray]
    judged: tuple[Site, ...]
    latent: tuple[str, ...]
    code: str | None
    data: str
    #: latent sites whose prior is improper (an ImproperUniform, NumPyro's flat prior): the
    #: posterior may still be proper, but nothing can be drawn from the prior (no SBC)
    improper: tuple[str, ...] = ()
    #: a general model has no classifier part (models/base.py: is_classifier)
    classifier: bool = field(default=False, init=False)

    def model(self, Phi, y=None):
        """The NumPyro model: ``Phi`` the data's arrays (``inputs``), ``y`` the observed sites'
        values by name (None: drawn, the prior predictive)."""
        fn = self.fn
        if y is None:
            fn = _Unobserved(fn, self.observed)
        else:
            fn = handlers.substitute(fn, data=dict(y))
        return fn(**self.static, **Phi)

    def checked(self, Phi, y=None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        """(data arrays, observations) checked against this model's: the same names, shapes and
        kinds of numbers as the data it was built on (a fit or a reference of other data of
        another shape is refused, as a classifier refuses another design), finite values.
        ValueError in one line naming the problem."""
        if not isinstance(Phi, Mapping) or set(Phi) != set(self.inputs):
            raise ValueError(f"model {self.name} takes its data as a dict of {', '.join(sorted(self.inputs))}; got "
                             + (', '.join(sorted(map(str, Phi))) if isinstance(Phi, Mapping) else type(Phi).__name__))
        inputs = {}
        for k, v in Phi.items():
            a = np.asarray(v, dtype=self.inputs[k].dtype)
            if a.shape != self.inputs[k].shape or (a.dtype.kind == "f" and not np.all(np.isfinite(a))):
                raise ValueError(f"model {self.name}: data {k!r} must be finite, of shape {self.inputs[k].shape}; "
                                 f"got shape {a.shape}")
            inputs[k] = a
        if y is None:
            return inputs, None
        if not isinstance(y, Mapping) or set(y) != set(self.observed):
            raise ValueError(f"model {self.name} observes {', '.join(self.observed)}: its observations are a dict "
                             "of those sites' values")
        obs = {}
        for k, v in y.items():
            a = np.asarray(v, dtype=np.asarray(self.observations[k]).dtype)
            if a.shape != np.shape(self.observations[k]) or (a.dtype.kind == "f" and not np.all(np.isfinite(a))):
                raise ValueError(f"model {self.name}: observed site {k!r} must be finite, of shape "
                                 f"{np.shape(self.observations[k])}; got shape {a.shape}")
            obs[k] = a
        return inputs, obs

    def sites(self, n_basis: int | None = None) -> tuple[Site, ...]:
        """The judged sites (``n_basis`` is the classifiers' design width: not used here)."""
        return self.judged

    def linear_predictor(self, params, Phi):
        """Always raises TypeError: a general model has no classifier part, so no linear
        predictor (the contract's method, for the engines that ask)."""
        raise TypeError(f"model {self.name} has no classifier part: no linear predictor")

    def prob(self, f):
        """Always raises TypeError: a general model has no link, so no predictive
        probabilities."""
        raise TypeError(f"model {self.name} has no classifier part: no predictive probabilities")

    def to_dict(self) -> dict[str, Any]:
        """What makes two general specs the same: the function (its path and source digest),
        the data's digest, the observed and judged sites."""
        return {"model": function_path(self.fn), "code": self.code, "data": self.data,
                "observed": list(self.observed), "sites": [s.name for s in self.judged]}

    # equality and hashing by content, not by the arrays' identity
    def __eq__(self, other):
        return isinstance(other, GeneralSpec) and (self.name, self.to_dict()) == (other.name, other.to_dict())

    def __hash__(self):
        return hash((self.name, json.dumps(self.to_dict(), sort_keys=True)))


def _support_word(site_name: str, support) -> str:
    """The zoo's word for a continuous site's support; GeneralModelError for one it cannot judge."""
    base = support
    while hasattr(base, "base_constraint"):  # constraints.independent(...) of a vector site
        base = base.base_constraint
    if isinstance(base, type(constraints.real)):
        return "real"
    lower = getattr(base, "lower_bound", None)
    upper = getattr(base, "upper_bound", None)
    # numpyro's [0, inf) constraints are a kind of its (0, inf) ones: ask for the closed one first
    at_zero = lower is not None and np.ndim(lower) == 0 and float(lower) == 0.0
    if at_zero and isinstance(base, type(constraints.greater_than_eq(0.0))):
        return "nonnegative"
    if at_zero and isinstance(base, type(constraints.greater_than(0.0))):
        return "positive"
    raise GeneralModelError(
        f"site {site_name!r} has support {type(base).__name__.lstrip('_')}"
        + (f" [{lower}, {upper}]" if lower is not None or upper is not None else "")
        + ": the zoo judges sites on the real line, (0, inf) or [0, inf) so far - write the model with an "
          "unbounded parameter and a transform (a deterministic site), or leave the site out with sites=")


def general_spec(fn: Callable, data, *, name: str | None = None, sites: Sequence[str] | None = None) -> GeneralSpec:
    """The :class:`GeneralSpec` of NumPyro function ``fn`` on ``data`` (a mapping or a file,
    :func:`load_data`), judging ``sites`` (None: every continuous latent sample site). The
    model is traced once, with its latent sites at points drawn as NumPyro's initialization
    draws them (so an improper flat prior traces too). GeneralModelError, in one line, for what
    the zoo cannot judge (module docstring)."""
    if not callable(fn):
        raise GeneralModelError(f"the model must be a NumPyro function, got {type(fn).__name__}")
    static, inputs = split_data(load_data(data))
    label = name or getattr(fn, "__name__", "model")
    try:
        trace = handlers.trace(handlers.substitute(handlers.seed(fn, jax.random.PRNGKey(0)),
                                                   substitute_fn=init_to_uniform)).get_trace(**static, **inputs)
    except TypeError as err:  # an argument missing or unknown
        raise GeneralModelError(f"the data do not fit model {label}: {err}") from None
    except ValueError as err:  # shapes that do not broadcast, a value outside a support
        raise GeneralModelError(f"the data do not fit model {label}: {str(err).splitlines()[0]}") from None
    samples = {k: s for k, s in trace.items() if s["type"] == "sample"}
    observed = tuple(k for k, s in samples.items() if s["is_observed"])
    if not observed:
        raise GeneralModelError(f"model {label} observes nothing on these data (no sample site with obs=): "
                                "there is no posterior to judge")
    latent = {k: s for k, s in samples.items() if not s["is_observed"]}
    discrete = [k for k, s in latent.items() if s["fn"].support.is_discrete]
    if discrete:
        raise GeneralModelError(f"model {label} has discrete latent site(s) {', '.join(discrete)}: the reference "
                                "(NUTS) and the engines need continuous ones - marginalize them out "
                                "(numpyro.contrib.funsor's enumeration is not used here)")
    computed = {k: s for k, s in trace.items() if s["type"] == "deterministic"}
    wanted = list(latent) if sites is None else list(sites)
    unknown = [k for k in wanted if k not in latent and k not in computed]
    if unknown:
        raise GeneralModelError(f"site(s) {', '.join(map(repr, unknown))} of model {label} are neither latent sample "
                                f"sites nor deterministic ones; its latent sites: {', '.join(latent) or 'none'}"
                                + (f"; deterministic: {', '.join(computed)}" if computed else ""))
    if not wanted:
        raise GeneralModelError(f"model {label} has no latent site to judge")
    judged = []
    for k in wanted:
        if k in computed:
            # a quantity the model computes from its latent sites (posteriordb's reference draws
            # are often of these): judged on the real line, its support not known to the zoo
            judged.append(Site(k, tuple(int(d) for d in np.shape(computed[k]["value"])), "real"))
            continue
        s = latent[k]
        if s["fn"].support.event_dim > 0 and _support_word(k, s["fn"].support) != "real":
            raise GeneralModelError(f"site {k!r} has a constrained support over a vector (event dim "
                                    f"{s['fn'].support.event_dim}): not judged so far")
        shape = tuple(int(d) for d in np.shape(s["value"]))
        judged.append(Site(k, shape, _support_word(k, s["fn"].support)))
    return GeneralSpec(name=label, fn=fn, static=static, inputs=inputs, observed=observed,
                       observations={k: np.asarray(samples[k]["value"]) for k in observed},
                       judged=tuple(judged), latent=tuple(latent), code=_code_digest(fn),
                       data=_digest(static, inputs),
                       improper=tuple(k for k, s in latent.items() if _is_improper(s["fn"])))


def _is_improper(distribution) -> bool:
    """Whether a site's prior is NumPyro's improper flat one, through the wrappers that expand,
    reshape or mask a distribution (each keeps the one it wraps as ``base_dist``)."""
    while distribution is not None:
        if isinstance(distribution, ImproperUniform):
            return True
        distribution = getattr(distribution, "base_dist", None)
    return False


__all__ = ["GeneralSpec", "GeneralModelError", "general_spec", "load_data", "split_data", "function_path",
           "SUPPORTS"]
