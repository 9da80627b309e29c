"""The reference-sampler contract: what a sampler is (:class:`ReferenceSampler`) and what
its runner must do (:class:`ReferenceRunner`).

A reference comes from a *sampler*: NUTS on any NumPyro model (``nuts.py``), or a sampler
a model brings in its registry record (GGSM probit's slice-Gibbs, GIG logistic's and
gridRVM's Polya-Gamma Gibbs, parallel tempering for BBLR). Each is a
:class:`ReferenceSampler` (its name, its :class:`ReferenceRunner` class and the modules whose
code defines it). There is no table of samplers: NUTS, the wing's built-in, is known by
its name (:data:`NUTS`), and a model's own sampler is handed over as its object -
``ReferenceConfig(sampler=SLICE_GIBBS)``, or by the model's record, which resolves the
names ``--reference`` and its reference chain use (``ModelRecord.reference_sampler``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..base.code_digest import code_digest

#: the reference harness: these modules run, certify and cache every sampler but do not
#: change any sampler's draws, so they are left out of a sampler's code digest (a change
#: to the cache or the certification code would otherwise recompute every reference)
HARNESS_MODULES = tuple(f"zoo.validation.references{m}" for m in
                        ("", ".sampler", ".certification", ".config", ".cache", ".run"))

#: the name of NUTS, the references wing's built-in sampler (``nuts.NUTS_SAMPLER``): known
#: by this name everywhere, with no registration
NUTS = "nuts"


class ReferenceRunner(ABC):
    """What a reference sampler must do: the contract every runner keeps.

    A runner is built as ``Runner(spec, Phi, y, config, progress)`` (config: the
    :class:`~zoo.validation.references.config.ReferenceConfig`) and then asked for draws:

    * :meth:`first` runs warm-up and the first ``config.num_samples`` draws of every chain;
    * :meth:`more` continues the same Markov chains by ``n_more`` draws each (the reference
      doubles its draws this way while only R-hat or ESS keep it from certifying).

    Both return ``(draws, extra)``: ``draws`` maps every site the sampler moves (the model's
    measured sites and its own latent blocks) to an array ``(chains, draws, *shape)``; ``extra``
    holds per-draw sampler fields (chains, draws, ...) that :meth:`sample_stats` turns into
    ArviZ ``sample_stats``, ``diverging`` among them (all False for a sampler that has no
    divergences). :meth:`sampler_checks` adds the sampler's own certification checks (NUTS:
    E-BFMI and tree depth) to the rule's R-hat, ESS and divergences, and :meth:`layout`
    says how the chains were laid out, for the provenance.
    """

    #: the InferenceData's "sampler" attribute ("numpyro.NUTS", "zoo.slice-gibbs", ...)
    name: str = "zoo.sampler"
    #: True when :meth:`sampler_checks` count events over the recorded draws (tempering's
    #: round trips), so that more draws can meet them; False when a failure is a fault of
    #: the sampler that more draws cannot mend (NUTS's energy, a capped slice update)
    checks_count_events: bool = False

    @abstractmethod
    def first(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Warm-up, then the first draws of every chain: (draws, extra)."""

    @abstractmethod
    def more(self, n_more: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The next ``n_more`` draws of every chain, continuing the same chains."""

    @staticmethod
    @abstractmethod
    def sample_stats(extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The per-draw fields as ArviZ sample statistics, ``diverging`` among them."""

    @staticmethod
    @abstractmethod
    def sampler_checks(stats: dict[str, np.ndarray], settings: dict[str, Any], rule) -> tuple[list[str], dict]:
        """(failures as sentences, numbers for the diagnostics) of the sampler's own checks on
        the stored statistics, under the certification ``rule``."""

    @abstractmethod
    def layout(self) -> dict:
        """How the chains ran (e.g. {"chain_method": "parallel"}), for the provenance."""


@dataclass(frozen=True)
class ReferenceSampler:
    """A sampler a reference can come from.

    name: what ``ReferenceConfig.sampler`` and ``--reference`` call it. runner: the
    :class:`ReferenceRunner` subclass that runs it. code_modules: the modules whose source
    defines the sampler; their digest (with what they import from the zoo, and the runner class's
    own source) is part of the cache key, so changed sampler code never reads stale draws.

    NUTS (``nuts.NUTS_SAMPLER``) works on any model written in NumPyro. A model whose posterior
    NUTS cannot certify may bring its own sampler in its registry record (GGSM probit's
    slice-Gibbs, GIG logistic's Polya-Gamma Gibbs): the record hands it to whoever runs
    it (``ModelRecord.reference_sampler``), and a ``ReferenceConfig`` given it keeps it.
    """

    name: str
    runner: type[ReferenceRunner]
    code_modules: tuple[str, ...] = ()
    #: whether run_reference drops JAX's compiled programs after a run of this sampler:
    #: True where they cannot be reused by the next data set (a sampler built on
    #: ``MCMC.run``, which re-jits its loop on every run), False where they take the data
    #: as arguments (NUTS's program, the Gibbs sweeps)
    clear_compiled_after_run: bool = False
    #: what the sampler is, in a few words, for the report ("Reference: **name** (description)");
    #: not part of the code digest or the sampler settings: it changes no draw
    description: str = ""

    def __post_init__(self):
        if not (isinstance(self.runner, type) and issubclass(self.runner, ReferenceRunner)):
            raise TypeError(f"the runner of reference sampler {self.name!r} must be a ReferenceRunner subclass "
                            f"(zoo.validation.references.sampler); got {self.runner!r}")

    def code_digest(self) -> str:
        """Digest of the code that defines this sampler (the reference harness,
        :data:`~zoo.validation.references.sampler.HARNESS_MODULES`, is left out: it does not
        change the draws)."""
        return code_digest(self.code_modules, exclude=HARNESS_MODULES, objects=(self.runner,))


def sampler_named(name: str, samplers) -> ReferenceSampler:
    """The sampler called ``name`` among ``samplers`` (a sequence of
    :class:`ReferenceSampler`); ValueError naming them otherwise. A pure function of its
    arguments: whoever holds the samplers (a model's record) passes them."""
    samplers = tuple(samplers)
    for sampler in samplers:
        if sampler.name == name:
            return sampler
    raise ValueError(f"unknown reference sampler {name!r}; known: {', '.join(s.name for s in samplers)}")
