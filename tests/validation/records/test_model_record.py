"""A record hands its own reference samplers over itself (ModelRecord.reference_sampler,
reference_config, reference_configs): NUTS by name, the model's own from its ``samplers``,
registered nowhere; an unknown name is answered with the model's sampler names."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from zoo.validation.records import ggsm_probit_record, gig_logistic_record, pcvm_record
from zoo.validation.references import NUTS_SAMPLER, ReferenceConfig, ReferenceSampler, cache_key, sampler_of
from zoo.validation.references.pg_gibbs import PG_GIBBS
from zoo.validation.references.slice_gibbs import SLICE_GIBBS, SliceGibbsRun

GGSM = ggsm_probit_record.RECORD


def test_a_record_resolves_nuts_and_its_own_samplers():
    assert GGSM.sampler_names == ("nuts", "slice-gibbs")
    assert GGSM.reference_sampler("nuts") is NUTS_SAMPLER
    assert GGSM.reference_sampler("slice-gibbs") is SLICE_GIBBS
    assert gig_logistic_record.RECORD.reference_sampler("pg-gibbs") is PG_GIBBS
    with pytest.raises(ValueError, match="unknown reference sampler 'pg-gibbs' for ggsm-probit; known: nuts, slice-gibbs"):
        GGSM.reference_sampler("pg-gibbs")  # another model's sampler
    with pytest.raises(ValueError, match="unknown reference sampler 'slice-gibbs' for pcvm; known: nuts$"):
        pcvm_record.RECORD.reference_config({"sampler": "slice-gibbs"})


def test_a_records_chain_becomes_configs_that_carry_their_samplers():
    chain = GGSM.reference_configs()
    assert [c.sampler for c in chain] == [d.get("sampler", "nuts") for d in GGSM.references]
    gibbs = chain[0]
    assert sampler_of(gibbs) is SLICE_GIBBS and (gibbs.num_warmup, gibbs.num_samples) == (1000, 1500)
    # the same settings given directly build the same config and the same cache key
    direct = ReferenceConfig(sampler=SLICE_GIBBS, num_warmup=1000, num_samples=1500, max_doublings=3)
    assert gibbs == direct
    rng = np.random.default_rng(1)
    Phi, y = rng.standard_normal((10, 3)), (rng.uniform(size=10) < 0.5).astype(float)
    spec = GGSM.spec_class(q=1.0)
    assert cache_key(spec, Phi, y, gibbs) == cache_key(spec, Phi, y, direct)
    assert GGSM.reference_config(num_samples=10).sampler == "nuts"  # no sampler named: NUTS
    assert GGSM.reference_config({"sampler": SLICE_GIBBS}).sampler_entry is SLICE_GIBBS  # an object as it is


def test_a_record_refuses_samplers_that_would_be_ambiguous():
    with pytest.raises(ValueError, match="distinct names other than 'nuts'"):
        replace(GGSM, samplers=(SLICE_GIBBS, SLICE_GIBBS))
    with pytest.raises(ValueError, match="distinct names other than 'nuts'"):
        replace(GGSM, samplers=(SLICE_GIBBS, ReferenceSampler("nuts", SliceGibbsRun)))
    with pytest.raises(ValueError, match="must be ReferenceSamplers"):
        replace(GGSM, samplers=("slice-gibbs",))
