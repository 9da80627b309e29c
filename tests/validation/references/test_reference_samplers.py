"""Choosing the reference sampler: NUTS first, the GGSM slice-within-Gibbs sampler where
NUTS does not certify, and the report never presenting an uncertified posterior as truth.

The sampler's correctness is tested in test_slice_gibbs.py; here: the dispatch, the cache,
the continuation of its chains, the fallback order, and the moment-existence rule that
decides which metrics mean anything.
"""
from __future__ import annotations

import numpy as np
import pytest

from zoo.models.ggsm_probit import GGSMProbit
from zoo.models.pcvm import PCVM
from zoo.validation.judge import moment_existence as ME
from zoo.validation.judge.metrics import null_undefined_moments
from zoo.validation.records.ggsm_probit_record import moments as ggsm_moments
from zoo.validation.references import (
    ReferenceConfig,
    first_certified_reference,
    run_reference,
)
from zoo.validation.references import slice_gibbs as G


def _weak_probit(n_obs=60, n=3, seed=0):
    """A small problem whose likelihood decays in every direction (labels are noisy)."""
    rng = np.random.default_rng(seed)
    Phi = np.hstack([np.ones((n_obs, 1)), rng.standard_normal((n_obs, n - 1))])
    y = (Phi @ np.r_[0.0, 0.5 * np.ones(n - 1)] + rng.standard_normal(n_obs) > 0).astype(float)
    return Phi, y


SPEC = GGSMProbit(q=1.0, a=2.0, b=1.0)
GIBBS = ReferenceConfig(sampler=G.SLICE_GIBBS, num_warmup=200, num_samples=600, seed=3)
# far too few draws to certify anything: the first sampler of the chain must fail
HOPELESS_NUTS = ReferenceConfig(num_chains=2, num_warmup=20, num_samples=20, max_doublings=0)


@pytest.mark.long
def test_slice_gibbs_reference_is_cached_under_its_own_name(tmp_path):
    Phi, y = _weak_probit()
    ref = run_reference(SPEC, Phi, y, config=GIBBS, cache_dir=str(tmp_path))
    assert ref.sampler == "slice-gibbs" and ref.certified, ref.failures
    assert ref.provenance["sampler"]["sampler"].startswith("zoo.slice-gibbs")
    assert "target_accept" not in ref.provenance["sampler"]  # not a setting of this sampler
    assert ref.cache_path.split("/")[-1].startswith("slice-gibbs-")
    assert set(ref.idata.sample_stats.data_vars) >= {"diverging", "evaluations", "shrink_caps"}
    again = run_reference(SPEC, Phi, y, config=GIBBS, cache_dir=str(tmp_path))
    assert again.from_cache and again.sampler == "slice-gibbs"
    np.testing.assert_array_equal(again.posterior.draws["w"], ref.posterior.draws["w"])
    # the NUTS entry of the same inputs is another entry
    nuts_key_cfg = ReferenceConfig(num_warmup=200, num_samples=600, seed=3)
    from zoo.validation.references import cached_reference

    assert cached_reference(SPEC, Phi, y, config=nuts_key_cfg, cache_dir=str(tmp_path)) is None


def test_slice_gibbs_doubling_extends_the_same_chains():
    """With too few draws to certify, the chains are continued (not restarted): the first
    draws of the doubled run are the draws of the short run."""
    Phi, y = _weak_probit()
    short = ReferenceConfig(sampler=G.SLICE_GIBBS, num_warmup=100, num_samples=100, seed=5, max_doublings=0)
    doubled = ReferenceConfig(sampler=G.SLICE_GIBBS, num_warmup=100, num_samples=100, seed=5, max_doublings=1)
    a = run_reference(SPEC, Phi, y, config=short)
    b = run_reference(SPEC, Phi, y, config=doubled)
    assert not a.certified  # 4 x 100 draws cannot reach ESS 400 in every coordinate
    assert b.posterior.n_draws == 200 and b.provenance["sampler"]["doublings"] == 1
    np.testing.assert_array_equal(b.posterior.draws["w"][:, :100], a.posterior.draws["w"])


def test_slice_gibbs_refuses_other_models():
    Phi, y = _weak_probit()
    with pytest.raises(ValueError, match="ggsm-probit only"):
        run_reference(PCVM(alpha=1.0), Phi, y, config=GIBBS)
    with pytest.raises(ValueError, match="unknown reference sampler"):
        ReferenceConfig(sampler="hmc")


@pytest.mark.long
def test_the_first_certified_sampler_is_the_reference():
    Phi, y = _weak_probit()
    ref, tried = first_certified_reference(SPEC, Phi, y, configs=(HOPELESS_NUTS, GIBBS))
    assert [r.sampler for r in tried] == ["nuts", "slice-gibbs"]
    assert not tried[0].certified and ref is tried[1] and ref.certified
    # a certified first sampler stops the chain
    ref2, tried2 = first_certified_reference(SPEC, Phi, y, configs=(GIBBS, HOPELESS_NUTS))
    assert len(tried2) == 1 and ref2.sampler == "slice-gibbs"


@pytest.mark.long
def test_when_no_sampler_certifies_the_closest_is_returned_uncertified():
    Phi, y = _weak_probit()
    hopeless_gibbs = ReferenceConfig(sampler=G.SLICE_GIBBS, num_chains=2, num_warmup=100, num_samples=30,
                                     max_doublings=0)
    ref, tried = first_certified_reference(SPEC, Phi, y, configs=(HOPELESS_NUTS, hopeless_gibbs))
    assert len(tried) == 2 and not any(r.certified for r in tried)
    assert not ref.certified
    assert ref.diagnostics["rhat_max"] == min(r.diagnostics["rhat_max"] for r in tried)


def test_flat_likelihood_directions_are_found():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 2))
    Phi = np.hstack([np.ones((40, 1)), X])
    y = (X[:, 0] > 0).astype(float)
    assert ME.likelihood_flat_direction(Phi, y)["kind"] == "separable"
    # quasi-complete: two copies of a point with opposite labels on the line x1 = 0, the
    # rest separated by x1: w = (0, 1, 0) has s_i (Phi w)_i >= 0 everywhere, not all > 0
    Xq = np.vstack([X, [[0.0, 1.0], [0.0, 1.0]]])
    yq = np.append(y, [1.0, 0.0])
    Phiq = np.hstack([np.ones((42, 1)), Xq])
    assert ME.likelihood_flat_direction(Phiq, yq)["kind"] == "quasi-separable"
    # more columns than independent rows
    wide = rng.standard_normal((5, 8))
    assert ME.likelihood_flat_direction(wide, np.array([0, 1, 0, 1, 1.0]))["kind"] == "null space"
    Phi_w, y_w = _weak_probit(200)
    assert ME.likelihood_flat_direction(Phi_w, y_w)["flat"] is False


def test_moment_rule_nulls_the_metrics_that_need_a_missing_moment():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 2))
    Phi = np.hstack([np.ones((40, 1)), X])
    y = (X[:, 0] > 0).astype(float)  # separable
    no_sd = ggsm_moments(GGSMProbit(q=2.0, a=1.0, b=1.0), Phi, y)
    assert (no_sd["mean_exists"], no_sd["sd_exists"]) == (True, False)
    assert ggsm_moments(GGSMProbit(q=0.5, a=1.0, b=1.0), Phi, y)["mean_exists"] is False
    assert ggsm_moments(GGSMProbit(q=2.0, a=1.5, b=1.0), Phi, y)["sd_exists"] is True
    Phi_w, y_w = _weak_probit(200)
    assert ggsm_moments(GGSMProbit(q=0.1, a=1.0, b=1.0), Phi_w, y_w)["sd_exists"] is True

    metrics = {"pred_mae": 0.01, "std_mean_err_median": 0.3, "sd_ratio_median": 0.9, "kl_gauss": 0.2,
               "wasserstein": [0.1], "null_reasons": {}}
    out = null_undefined_moments(metrics, no_sd)
    assert out["pred_mae"] == 0.01 and out["wasserstein"] == [0.1]  # the mean exists
    assert out["std_mean_err_median"] is None and out["sd_ratio_median"] is None and out["kl_gauss"] is None
    assert "sd does not exist" in out["null_reasons"]["sd_ratio_median"]
    no_mean = ggsm_moments(GGSMProbit(q=0.5, a=1.0, b=1.0), Phi, y)
    assert null_undefined_moments(metrics, no_mean)["wasserstein"] is None
    assert null_undefined_moments(metrics, None) == metrics
