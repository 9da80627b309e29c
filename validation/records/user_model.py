"""A model from outside the zoo, as a user brings it: :class:`Model`, a NumPyro function and its
data, judged like the zoo's own models.

    import zoo
    from zoo.validation.records.user_model import Model
    from zoo.validation.runs.compare import CompareConfig, compare

    schools = Model(eight_schools, {"J": 8, "y": y, "sigma": sigma})
    result = compare(CompareConfig(model=schools)).result

A :class:`Model` is what the user writes; :meth:`Model.record` is the
:class:`~zoo.validation.records.model_record.ModelRecord` the rest of the zoo reads - its
NUTS reference chain, the generic engines (auto-laplace, the ADVI families, Pathfinder, each
with its ``+psis`` form) and the user's own, and a protocol that hands every engine and
sampler the model's own data (``own_data``: there is no data set to load, no split, no
hyper-parameter to select). A general model has no classifier part: the predictive metrics
(test error, AUC, the predictive probabilities' distance) are absent from its results, not
faked. The model and its data are checked when the Model is made (``models/general.py``:
one line for a discrete latent site, a support the verdicts do not know, data that do not
fit, nothing observed).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ...inference.contracts import EngineEntry
from ...models.general import GeneralSpec, general_spec
from .model_record import ModelRecord
from .protocol import Prepared, auto_laplace_engine, pathfinder_engines, svi_engines

#: what ``zoo compare`` runs on a general model when no engines are named: the generic
#: engines that need nothing but the NumPyro function
DEFAULT_ENGINES = ("auto-laplace", "advi-meanfield", "advi-fullrank", "pathfinder")


@dataclass(frozen=True, eq=False)
class Model:
    """A NumPyro function ``fn(**data)`` and its data, as the zoo judges it.

    * fn: the NumPyro model; its observed sites are those with ``obs=`` given by the data.
    * data: a mapping of names to arrays and numbers (plain integers are sizes, never traced), or
      a file (``.npz``, ``.csv``, posteriordb's data JSON). name: how reports and the
      command line name it (default: the function's name). sites: the latent sites judged
      (default: every continuous latent sample site). references: the reference chain, as in
      a model record (default: NUTS with its default settings). engines: the user's own
      engines (EngineEntry), beside the generic ones. default_engines: what a comparison runs
      when none are named.
    """

    fn: Callable
    data: Any
    name: str | None = None
    sites: Sequence[str] | None = None
    references: tuple[dict[str, Any], ...] = ({"sampler": "nuts"},)
    engines: tuple[EngineEntry, ...] = ()
    default_engines: tuple[str, ...] = DEFAULT_ENGINES
    spec: GeneralSpec = field(init=False, repr=False)

    def __post_init__(self):
        spec = general_spec(self.fn, self.data, name=self.name,
                            sites=None if self.sites is None else tuple(self.sites))
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "name", spec.name)
        object.__setattr__(self, "engines", tuple(self.engines))
        object.__setattr__(self, "default_engines", tuple(self.default_engines))

    def prepare(self, split=None, params: Mapping[str, float] | None = None, *, progress=None) -> Prepared:
        """The frozen problem every engine and sampler sees: the model on its own data (no
        split, nothing selected; ``split`` and ``params`` are the classifiers' and must be
        empty)."""
        if params:
            raise ValueError(f"model {self.name} takes no parameters; got {', '.join(sorted(params))}")
        spec = self.spec
        return Prepared(spec=spec, Phi_train=dict(spec.inputs), Phi_test=None, y_train=dict(spec.observations),
                        y_test=None, hyper={}, selection={"how": "none: the model on its own data"})

    def record(self) -> ModelRecord:
        """The model's record: what the rest of the zoo reads."""
        data_words = "its own data" if isinstance(self.data, Mapping) else f"its data file {self.data}"
        return ModelRecord(
            name=self.name, title=self.name,
            summary=f"{self.name}: a NumPyro model from outside the zoo ({self.spec.to_dict()['model']}), "
                    f"judged on {data_words}",
            spec_class=GeneralSpec, prepare=self.prepare, params=(), selection="none (the model on its own data)",
            default_data=OWN_DATA, own_data=True,
            engines=(auto_laplace_engine(), *svi_engines(), *pathfinder_engines(), *self.engines),
            default_engines=self.default_engines, references=tuple(self.references),
            # SBC draws the parameters from the prior and the observations from the prior
            # predictive on the model's own inputs: a flat (improper) prior has no draws
            sbc_spec=None if self.spec.improper else self._sbc_spec,
            no_sbc=(f"model {self.name} has an improper (flat) prior on {', '.join(self.spec.improper)}: SBC draws "
                    "the parameters from the prior, so it needs a proper one" if self.spec.improper else None))

    def _sbc_spec(self):
        """SBC's spec (the model itself: it has no variants)."""
        return self.spec, {}


#: the data name of a model that brings its own data (``zoo compare`` loads no data set)
OWN_DATA = "(its own data)"


__all__ = ["Model", "DEFAULT_ENGINES", "OWN_DATA"]
