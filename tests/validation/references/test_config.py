"""ReferenceConfig's sampler: NUTS by name, a model's own sampler as its object.

No table of samplers is consulted: ``sampler="nuts"`` is the wing's built-in, a
ReferenceSampler given as ``sampler`` is held as its name (what the cache key hashes and
results files write) with the object beside it, and :func:`sampler_of` is what runs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from zoo.models.ggsm_probit import GGSMProbit
from zoo.validation.references import NUTS_SAMPLER, ReferenceConfig, ReferenceSampler, cache_key, sampler_of
from zoo.validation.references.slice_gibbs import SLICE_GIBBS, SliceGibbsRun

#: every setting of a config, in the order results files have always written them
#: (``dataclasses.asdict`` before the sampler's object joined the config)
STORED = {"num_chains": 4, "num_warmup": 1000, "num_samples": 1500, "target_accept": 0.9, "max_tree_depth": 10,
          "seed": 0, "chain_method": "parallel", "max_doublings": 3, "sampler": "slice-gibbs", "time_limit": None,
          "pilot": False}


def test_a_given_sampler_is_held_by_name_with_its_object_beside_it():
    config = ReferenceConfig(sampler=SLICE_GIBBS, num_samples=1500, max_doublings=3)
    assert config.sampler == "slice-gibbs" and config.sampler_entry is SLICE_GIBBS
    assert sampler_of(config) is SLICE_GIBBS
    assert "sampler_entry" not in repr(config) and "slice-gibbs" in repr(config)
    # what results files write and the cache key hashes: the name, the same keys as ever
    assert config.to_dict() == STORED and list(config.to_dict()) == list(STORED)
    assert config.sampler_settings() == {"num_chains": 4, "num_warmup": 1000, "num_samples": 1500, "seed": 0,
                                         "max_doublings": 3, "sampler": "zoo.slice-gibbs"}
    # replace keeps the object (a time-limited run's child, a pilot, a battery's twin)
    again = replace(config, seed=7, time_limit=30.0)
    assert again.sampler_entry is SLICE_GIBBS and sampler_of(again) is SLICE_GIBBS


def test_nuts_is_known_by_name_and_as_its_object():
    by_name, given = ReferenceConfig(), ReferenceConfig(sampler=NUTS_SAMPLER)
    assert sampler_of(by_name) is NUTS_SAMPLER and sampler_of(given) is NUTS_SAMPLER
    assert by_name == given and hash(by_name) == hash(given)  # the object is not compared
    rng = np.random.default_rng(0)
    Phi, y = rng.standard_normal((8, 2)), np.r_[0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    assert cache_key(GGSMProbit(), Phi, y, by_name) == cache_key(GGSMProbit(), Phi, y, given)


def test_unknown_names_and_mismatched_objects_are_refused():
    with pytest.raises(ValueError, match="unknown reference sampler 'slice-gibbs'; known: nuts"):
        ReferenceConfig(sampler="slice-gibbs")  # a model's own sampler comes as its object
    with pytest.raises(ValueError, match="sampler_entry must be the ReferenceSampler called 'pg-gibbs'"):
        ReferenceConfig(sampler="pg-gibbs", sampler_entry=SLICE_GIBBS)
    with pytest.raises(TypeError, match="a sampler's name or a ReferenceSampler"):
        ReferenceConfig(sampler=SliceGibbsRun)
    # "nuts" is the built-in's name: another sampler under it is refused where it would run
    impostor = ReferenceConfig(sampler=ReferenceSampler("nuts", SliceGibbsRun))
    with pytest.raises(ValueError, match="built-in NUTS"):
        sampler_of(impostor)
