"""The NUTS reference pipeline: a known-answer posterior end to end, the certification
rule on good and deliberately bad chains, and the disk cache."""
from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import replace

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.models.base import Site
from zoo.validation.base import arviz_adapter
from zoo.validation.references import (
    CERTIFICATION,
    NoReference,
    NutsRun,
    PilotRule,
    ReferenceConfig,
    ReferenceTimeout,
    cache,
    cache_key,
    cached_reference,
    certification,
    certify,
    first_certified_reference,
    package_versions,
    pilot_decision,
    run_reference,
)
from zoo.validation.references.sampler import HARNESS_MODULES

from repository import REPO

# 4 chains x 150 draws reach a tail ESS of 286 on this model (seed 0): short of 400,
# so the run must continue once (to 300 draws per chain) and then certify. This
# exercises the doubling rule in the default tier.
CONFIG = ReferenceConfig(num_warmup=300, num_samples=150, seed=0, max_doublings=2)


# entries signed with a key of this module's own, never the user's (conftest.py)
pytestmark = pytest.mark.usefixtures("private_cache_key")


@pytest.fixture(scope="module")
def problem(normal_means_problem):
    return normal_means_problem


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("nuts-cache"))


@pytest.fixture(scope="module")
def reference(problem, cache_dir):
    spec, Phi, y = problem
    return run_reference(spec, Phi, y, config=CONFIG, cache_dir=cache_dir)


def test_known_answer_posterior(problem, reference):
    """Tolerances are 4 Monte Carlo standard errors from the reference's own ESS:
    mean: 4 sd / sqrt(ESS_bulk); sd: 4 sd / sqrt(2 ESS_sq), the delta-method error of
    sqrt(mean (x - m)^2) with ESS_sq the bulk ESS of the squared deviations (for a
    Gaussian, sd((x - m)^2) = sqrt(2) sd^2)."""
    spec, Phi, y = problem
    assert reference.certified, reference.failures
    mean, sd = spec.exact_posterior(Phi)
    draws = reference.posterior.draws["mu"]
    ess_bulk = np.asarray(reference.diagnostics["per_site"]["mu"]["ess_bulk"])
    np.testing.assert_array_less(np.abs(draws.mean((0, 1)) - mean), 4.0 * sd / np.sqrt(ess_bulk))

    sq = (draws - draws.mean((0, 1))) ** 2
    sq_diag = arviz_adapter.summary_diagnostics(
        arviz_adapter.draws_to_idata({"mu": sq}, spec.sites(2)), sites=spec.sites(2)
    )
    ess_sq = sq_diag["per_site"]["mu"]["ess_bulk"]
    np.testing.assert_array_less(np.abs(draws.std((0, 1), ddof=1) - sd), 4.0 * sd / np.sqrt(2.0 * ess_sq))


def test_doubling_rule_recorded(reference):
    attempts = reference.provenance["attempts"]
    assert [a["num_samples"] for a in attempts] == [150, 300]
    assert [a["certified"] for a in attempts] == [False, True]
    assert reference.posterior.draws["mu"].shape == (4, 300, 2)
    assert reference.provenance["sampler"]["doublings"] == 1
    assert reference.provenance["sampler"]["num_samples_total"] == 300


def test_reference_contents(problem, reference):
    spec, Phi, y = problem
    idata = reference.idata
    assert idata.posterior["mu"].dims == ("chain", "draw", "basis")
    np.testing.assert_array_equal(idata.constant_data["Phi"].values, Phi)
    np.testing.assert_array_equal(idata.constant_data["y"].values, y)
    assert idata.sample_stats["diverging"].shape == (4, 300)
    assert idata.sample_stats["diverging"].dtype == bool

    d = reference.diagnostics
    assert d["divergences"] == 0
    assert d["rhat_max"] <= CERTIFICATION.rhat_max
    assert min(d["ess_bulk_min"], d["ess_tail_min"]) >= CERTIFICATION.ess_bulk_min
    assert set(d["per_site"]["mu"]) == {"rhat", "ess_bulk", "ess_tail"}

    p = reference.provenance
    json.dumps(p, allow_nan=False)
    assert p["spec"] == spec.to_dict()
    assert p["package_versions"] == package_versions()
    assert set(p["package_versions"]) == {"jax", "numpyro", "arviz", "numpy"}
    assert p["seed"] == 0 and p["sampler"]["num_chains"] == 4 and p["sampler"]["target_accept"] == 0.9
    assert all(c["passed"] for c in p["checks"]) and len(p["checks"]) == 6  # 4 + E-BFMI, tree depth
    assert len(p["data"]["Phi_sha256"]) == 64 and p["date"]
    assert reference.seconds > 0 and 0 <= reference.compile_seconds <= reference.seconds
    assert reference.from_cache is False
    assert reference.posterior.info.converged and reference.posterior.info.engine == "nuts"


def test_second_call_hits_cache(problem, reference, cache_dir):
    spec, Phi, y = problem
    again = run_reference(spec, Phi, y, config=CONFIG, cache_dir=cache_dir)
    assert again.from_cache is True
    np.testing.assert_array_equal(again.posterior.draws["mu"], reference.posterior.draws["mu"])
    assert again.seconds == reference.seconds
    assert again.certified == reference.certified and again.failures == reference.failures
    assert again.provenance == reference.provenance
    np.testing.assert_array_equal(again.idata.sample_stats["diverging"], reference.idata.sample_stats["diverging"])


def _entry(cache_dir):
    files = sorted(os.listdir(cache_dir))
    nc = [f for f in files if f.endswith(".nc")]
    js = [f for f in files if f.endswith(".json")]
    assert len(nc) == 1 and len(js) == 1 and not [f for f in files if f.startswith(".tmp-")]
    return os.path.join(cache_dir, nc[0]), os.path.join(cache_dir, js[0])


def test_partial_or_mismatched_cache_entries_are_ignored(problem, reference, cache_dir, tmp_path):
    spec, Phi, y = problem
    nc, js = _entry(cache_dir)
    # interrupted write: the netCDF file without its provenance record
    only_nc = tmp_path / "only_nc"
    only_nc.mkdir()
    shutil.copy(nc, only_nc)
    assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(only_nc)) is None
    # a record whose draws digest does not match the netCDF next to it
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    shutil.copy(nc, tampered)
    record = json.load(open(js))
    record["content_sha256"] = "0" * 64
    (tampered / os.path.basename(js)).write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="ignoring untrusted reference cache entry .*signature does not match"):
        assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(tampered)) is None
    # ... and signed with this machine's key (a write gone wrong, not an attack): the digest
    (tampered / os.path.basename(js)).write_text(json.dumps(cache.sign_record(record, cache.machine_key())))
    with pytest.warns(UserWarning, match="ignoring unreadable reference cache entry .*do not match the digest"):
        assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(tampered)) is None
    # other data -> other key -> no entry
    assert cached_reference(spec, Phi + 1.0, y, config=CONFIG, cache_dir=cache_dir) is None


def test_corrupted_cache_file_is_recomputed(problem, reference, cache_dir, tmp_path):
    spec, Phi, y = problem
    nc, js = _entry(cache_dir)
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(js, broken)
    with open(nc, "rb") as fh:
        head = fh.read(2000)
    (broken / os.path.basename(nc)).write_bytes(head)  # a truncated netCDF file
    with pytest.warns(UserWarning, match="ignoring unreadable reference cache entry"):
        redone = run_reference(spec, Phi, y, config=CONFIG, cache_dir=str(broken))
    assert redone.from_cache is False
    # same seed and settings: the recomputation reproduces the original draws
    np.testing.assert_array_equal(redone.posterior.draws["mu"], reference.posterior.draws["mu"])
    # and the repaired entry is now readable
    assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(broken)).from_cache


# --- the certification rule on synthetic draws -------------------------------------
SITES = (Site("b", ()), Site("w", (3,), "nonnegative", ("basis",)))


def _iid_draws(seed=0, chains=4, draws=1000):
    rng = np.random.default_rng(seed)
    return {"b": rng.normal(size=(chains, draws)), "w": rng.normal(size=(chains, draws, 3))}


def test_certify_accepts_good_iid_draws():
    ok, failures, diag = certify(_iid_draws(), SITES, 0)
    assert ok and failures == []
    assert diag["rhat_max"] <= 1.01 and diag["ess_bulk_min"] >= 400 and diag["divergences"] == 0


def test_certify_rejects_chains_with_shifted_means():
    draws = _iid_draws()
    draws["w"][:, :, 1] += np.arange(4)[:, None]  # chain c centred at c: R-hat >> 1.01
    ok, failures, diag = certify(draws, SITES, 0)
    assert not ok
    assert diag["rhat_max"] > 1.5
    assert any(f.startswith("w[1]: R-hat") and "> 1.01" in f for f in failures)
    assert not any(f.startswith("b:") or f.startswith("w[0]") for f in failures)


def test_certify_rejects_divergences():
    diverging = np.zeros((4, 1000), bool)
    diverging[2, [10, 500, 900]] = True
    ok, failures, diag = certify(_iid_draws(), SITES, diverging)
    assert not ok and diag["divergences"] == 3
    assert failures == ["3 divergent transitions after warmup (allowed: 0)"]


def test_certify_rejects_too_few_effective_draws():
    ok, failures, _ = certify(_iid_draws(draws=50), SITES, 0)  # 200 iid draws < 400
    assert not ok
    assert any("bulk ESS" in f for f in failures) and any("tail ESS" in f for f in failures)


def test_certify_rejects_a_stuck_chain():
    draws = _iid_draws()
    draws["b"][3] = 0.7  # one chain never moves
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok, failures, _ = certify(draws, SITES, 0)
    assert not ok and any(f.startswith("b: R-hat") for f in failures)


def test_config_validation():
    with pytest.raises(ValueError, match="chain_method"):
        ReferenceConfig(chain_method="threads")
    with pytest.raises(ValueError, match="target_accept"):
        ReferenceConfig(target_accept=1.0)


@pytest.mark.long
def test_time_limited_run_gives_the_same_reference(problem, reference, tmp_path):
    """A limit the run fits in changes nothing: the child process samples the same draws
    (the limit is not part of the cache key) and hands them back through the cache. The
    limit is far beyond any run (11 days), so the test checks the mechanism, never the
    machine's speed."""
    spec, Phi, y = problem
    limited = run_reference(spec, Phi, y, config=replace(CONFIG, time_limit=1e6), cache_dir=str(tmp_path))
    assert not limited.from_cache and limited.certified == reference.certified
    np.testing.assert_array_equal(limited.posterior.draws["mu"], reference.posterior.draws["mu"])


@pytest.mark.long
def test_a_time_budget_is_used_before_giving_up(problem, reference, tmp_path):
    """CONFIG's first 150 draws a chain fall short of certification (tail ESS 286 < 400).
    With max_doublings = 0 and no time limit the run stops there, uncertified, and says
    why; with a time limit that leaves room it continues past the cap exactly as the
    max_doublings = 2 run did - the same chains, the same draws - and certifies."""
    spec, Phi, y = problem
    capped = replace(CONFIG, max_doublings=0)
    stopped = run_reference(spec, Phi, y, config=capped)
    assert not stopped.certified
    assert stopped.provenance["sampler"]["doublings_stopped"] == "max_doublings = 0 reached"
    budget = run_reference(spec, Phi, y, config=replace(capped, time_limit=1e6), cache_dir=str(tmp_path))
    assert budget.certified and budget.provenance["sampler"]["doublings"] == 1
    assert "doublings_stopped" not in budget.provenance["sampler"]
    np.testing.assert_array_equal(budget.posterior.draws["mu"], reference.posterior.draws["mu"])


def test_a_doubling_past_the_cap_starts_only_if_it_fits_the_time_left(monkeypatch):
    from zoo.validation.references import certified_run as R

    monkeypatch.setattr(R.time, "time", lambda: 1000.0)
    assert R._may_double(1, 2, None, 1e9) == (True, "")  # under the cap: always, whatever it costs
    assert R._may_double(2, 2, None, 0.0) == (False, "max_doublings = 2 reached")
    # 100 s left: a doubling predicted at 60 s needs 1.5 * 60 + 5 = 95 s, one at 64 s 101 s
    assert R._may_double(2, 2, 1100.0, 60.0) == (True, "")
    go, why = R._may_double(2, 2, 1100.0, 64.0)
    assert not go and why == "time limit: the next doubling would need about 101 s (with margin), 100 s left"


def test_a_reference_that_runs_out_of_time_is_stopped_and_said_so(problem, tmp_path):
    spec, Phi, y = problem
    slow = replace(CONFIG, num_warmup=100_000, num_samples=100_000, time_limit=3.0)
    with pytest.raises(ReferenceTimeout, match="ran out of time.*3 s"):
        run_reference(spec, Phi, y, config=slow, cache_dir=str(tmp_path))
    # the child was stopped before it finished: it left no result behind
    assert cached_reference(spec, Phi, y, config=slow, cache_dir=str(tmp_path)) is None
    # a chain of samplers that all run out of time has no reference at all
    with pytest.raises(NoReference, match="no reference: nuts ran out of time") as no_reference:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first_certified_reference(spec, Phi, y, configs=(slow,), cache_dir=str(tmp_path))
    assert no_reference.value.timed_out == [("nuts", 3.0)]
    with pytest.raises(ValueError, match="time_limit"):
        ReferenceConfig(time_limit=0.0)


def test_a_sampler_that_ran_out_of_time_stays_in_the_record(problem, reference, cache_dir):
    """A chain whose first sampler runs out of time and whose second one runs: the
    reference is the second, and ``tried`` still names the first (a report says so)."""
    spec, Phi, y = problem
    hopeless = replace(CONFIG, num_warmup=100_000, num_samples=100_000, time_limit=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, tried = first_certified_reference(spec, Phi, y, configs=(hopeless, CONFIG), cache_dir=cache_dir)
    assert ref.from_cache and ref.certified == reference.certified
    assert isinstance(tried[0], ReferenceTimeout) and tried[0].time_limit == 3.0
    assert tried[1] is ref


# --- the pilot: a short NUTS run decides whether the full one is worth running --------
def _pilot_numbers(**changes):
    """A pilot's diagnostics (4 chains x 200 draws) with nothing wrong, then ``changes``."""
    numbers = {"rhat_max": 1.004, "ess_bulk_min": 300.0, "ess_tail_min": 250.0, "divergences": 0,
               "n_chains": 4, "n_draws": 200, "ebfmi_min": 0.8, "treedepth_fraction": 0.0}
    return {**numbers, **changes}


FULL = ReferenceConfig(num_samples=1000, max_doublings=2)  # a cap of 4 x 1000 x 2^2 = 16000 draws


def test_the_pilot_rule_goes_ahead_when_nothing_predicts_failure():
    decision = pilot_decision(_pilot_numbers(), FULL)
    assert decision["go"] and decision["reasons"] == []
    assert decision["cap_draws"] == 16000
    assert decision["projected_ess_tail"] == pytest.approx(250 / 800 * 16000)  # ESS per draw x the cap


@pytest.mark.parametrize("changes, words", [
    ({"divergences": 1}, "1 divergent transitions"),
    ({"ebfmi_min": 0.2}, "E-BFMI 0.200 < 0.3"),
    ({"treedepth_fraction": 0.05}, "5.0% of transitions at the maximum tree depth"),
    ({"rhat_max": 1.3}, "R-hat 1.300 > 1.2"),
    ({"rhat_max": float("nan")}, "R-hat nan"),
    ({"ess_tail_min": 9.0}, "tail ESS projected to 180 at the cap of 16000 draws"),
    ({"ess_bulk_min": float("nan")}, "bulk ESS projected to 0"),
])
def test_the_pilot_rule_stops_on_each_sign_of_failure(changes, words):
    decision = pilot_decision(_pilot_numbers(**changes), FULL)
    assert not decision["go"] and len(decision["reasons"]) == 1, decision["reasons"]
    assert words in decision["reasons"][0]


def test_the_pilot_projection_allows_its_margin_and_follows_the_cap():
    # tail ESS 12.5 of 800 draws: 250 at a cap of 16000, within the margin 2 of 400; 125
    # at a cap of 8000, beyond it
    assert pilot_decision(_pilot_numbers(ess_tail_min=12.5), FULL)["go"]
    assert not pilot_decision(_pilot_numbers(ess_tail_min=12.5), replace(FULL, max_doublings=1))["go"]
    assert not pilot_decision(_pilot_numbers(ess_tail_min=12.5), FULL, PilotRule(ess_margin=1.0))["go"]


def test_the_pilot_is_a_nuts_setting_outside_the_cache_key(problem):
    from zoo.validation.references.slice_gibbs import SLICE_GIBBS

    with pytest.raises(ValueError, match="pilot is a NUTS setting"):
        ReferenceConfig(sampler=SLICE_GIBBS, pilot=True)
    spec, Phi, y = problem
    # the full run's draws do not depend on whether a pilot ran before it
    assert cache_key(spec, Phi, y, CONFIG) == cache_key(spec, Phi, y, replace(CONFIG, pilot=True))


@pytest.mark.long
def test_a_pilot_that_predicts_failure_skips_to_the_next_sampler(problem, reference, cache_dir, tmp_path,
                                                                 monkeypatch):
    """A NUTS config whose cap (4 chains x 20 draws) cannot reach an ESS of 400: its pilot
    says so, the full run is skipped, and the next config (the module's reference, read
    from a copy of its cache) is the reference. As the last of a chain, the same config
    runs in full."""
    monkeypatch.setattr(certification, "PILOT", PilotRule(num_warmup=100, num_samples=20))
    spec, Phi, y = problem
    folder = tmp_path / "cache"
    _copy_entry(cache_dir, folder)
    hopeless = replace(CONFIG, num_samples=20, max_doublings=0, pilot=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ref, tried = first_certified_reference(spec, Phi, y, configs=(hopeless, CONFIG), cache_dir=str(folder))
    assert ref is tried[1] and ref.from_cache and ref.certified == reference.certified
    stopped = tried[0]
    assert stopped.sampler == "nuts" and not stopped.certified and stopped.posterior.n_draws == 20
    assert stopped.failures[0].startswith(
        "the pilot (100 warm-up + 20 draws a chain) predicts the full run cannot certify: ")
    assert "projected" in stopped.failures[0]
    assert stopped.provenance["pilot"]["go"] is False and stopped.provenance["sampler"]["num_warmup"] == 100
    assert any("the pilot" in str(w.message) for w in caught)
    # the pilot is a cached run like any other
    _, again = first_certified_reference(spec, Phi, y, configs=(hopeless, CONFIG), cache_dir=str(folder))
    assert again[0].from_cache and again[0].failures == stopped.failures
    # the last sampler of a chain always runs in full
    _, alone = first_certified_reference(spec, Phi, y, configs=(hopeless,))
    assert alone[0].provenance.get("pilot") is None and alone[0].provenance["sampler"]["num_warmup"] == 300


def test_a_pilot_that_meets_the_rule_is_the_reference(problem, tmp_path, monkeypatch):
    """4 chains x 400 pilot draws of this two-coordinate Gaussian certify by themselves
    (the module's config needs 300 draws a chain): the pilot is the reference."""
    monkeypatch.setattr(certification, "PILOT", PilotRule(num_warmup=300, num_samples=400))
    spec, Phi, y = problem
    ref, tried = first_certified_reference(spec, Phi, y, configs=(replace(CONFIG, pilot=True), CONFIG),
                                           cache_dir=str(tmp_path))
    assert tried == [ref] and ref.certified, ref.failures
    assert ref.provenance["pilot"]["certified"] is True and ref.provenance["sampler"]["num_samples"] == 400


@pytest.mark.long
def test_nuts_continuations_in_pieces_are_one_long_run(problem):
    """NUTS continues its chains with one compiled program that draws pieces of the first
    run's length; however the draws are asked for (40 at once, or 30 then 10, the last
    piece's surplus kept for the next call), they are those of one long continuation."""
    from zoo.validation.references import NutsRun

    spec, Phi, y = problem
    config = ReferenceConfig(num_chains=2, num_warmup=50, num_samples=20, seed=4)
    whole, split = NutsRun(spec, Phi, y, config, False), NutsRun(spec, Phi, y, config, False)
    first_whole, first_split = whole.first(), split.first()
    np.testing.assert_array_equal(first_whole[0]["mu"], first_split[0]["mu"])
    a, a_stats = whole.more(40)
    (b1, s1), (b2, s2) = split.more(30), split.more(10)
    assert a["mu"].shape == (2, 40, 2) and b1["mu"].shape == (2, 30, 2) and b2["mu"].shape == (2, 10, 2)
    np.testing.assert_array_equal(a["mu"], np.concatenate([b1["mu"], b2["mu"]], axis=1))
    np.testing.assert_array_equal(a_stats["diverging"], np.concatenate([s1["diverging"], s2["diverging"]], axis=1))
    # and the continuation moved on: not the first run's draws again
    assert not np.array_equal(a["mu"][:, :20], first_whole[0]["mu"])


@pytest.mark.long
def test_a_model_with_latents_beyond_its_sites_reads_back_from_the_cache(tmp_path):
    """GIG logistic's NUTS run also samples u and z (and records tau); only beta is a
    measured site. The cache entry must read back (regression: a digest over every
    latent made it unreadable, so each run sampled again)."""
    from zoo.models.gig_logistic import GIGLogistic

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    y = (X[:, 0] + rng.standard_normal(30) > 0).astype(float)
    spec = GIGLogistic(parameterization="marginal")
    cfg = ReferenceConfig(num_chains=2, num_warmup=100, num_samples=100, max_doublings=0)
    first = run_reference(spec, X, y, config=cfg, cache_dir=str(tmp_path))
    assert set(first.posterior.draws) == {"beta"}
    # the latent sites NUTS moves are stored and diagnosed; beta is computed from them
    assert first.diagnostics["diagnosed_sites"] == ["beta", "u", "z"]
    assert {"u", "z"} <= set(first.idata.posterior.data_vars)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unreadable entry warns
        again = run_reference(spec, X, y, config=cfg, cache_dir=str(tmp_path))
    assert again.from_cache
    np.testing.assert_array_equal(again.posterior.draws["beta"], first.posterior.draws["beta"])


# --- a cache entry is evidence, not a verdict: tamper with each part of it ----------
def _copy_entry(cache_dir, dest):
    nc, js = _entry(cache_dir)
    dest.mkdir()
    shutil.copy(nc, dest)
    shutil.copy(js, dest)
    return dest / os.path.basename(nc), dest / os.path.basename(js)


@pytest.fixture(scope="module")
def uncertified(problem, tmp_path_factory):
    """An honest but uncertified run: 4 x 60 draws and no doublings (tail ESS < 400)."""
    spec, Phi, y = problem
    folder = tmp_path_factory.mktemp("uncertified")
    cfg = replace(CONFIG, num_samples=60, max_doublings=0)
    ref = run_reference(spec, Phi, y, config=cfg, cache_dir=str(folder))
    assert not ref.certified and any("ESS" in f for f in ref.failures)
    return cfg, folder, ref


def test_an_edited_certificate_is_not_believed(problem, uncertified, tmp_path):
    """The regression of issue 14: a record edited to say "certified" came back certified."""
    spec, Phi, y = problem
    cfg, folder, ref = uncertified
    _, js = _copy_entry(str(folder), tmp_path / "edited")
    record = json.loads(js.read_text())
    record["certified"] = True
    record["failures"] = []
    record["provenance"]["certified"] = True
    record["provenance"]["checks"] = [dict(c, passed=True) for c in record["provenance"]["checks"]]
    record["provenance"]["diagnostics"]["ess_tail_min"] = 10_000.0
    js.write_text(json.dumps(record))
    # edited without the key: the signature no longer matches, so nothing of it is used
    with pytest.warns(UserWarning, match="signature does not match"):
        assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "edited")) is None
    # signed anyway (an old run's certificate under this key): still recomputed from the draws
    js.write_text(json.dumps(cache.sign_record(record, cache.machine_key())))
    again = cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "edited"))
    assert again is not None and again.from_cache
    assert not again.certified and again.failures == ref.failures
    assert again.provenance["certified"] is False
    with pytest.raises(RuntimeError, match="not certified"):
        again.require_certified()


def test_edited_draws_or_sampler_statistics_are_detected(problem, reference, cache_dir, tmp_path):
    spec, Phi, y = problem
    for part, edit in (("draws", lambda idata: idata.posterior["mu"].values.__setitem__((0, 0, 0), 99.0)),
                       ("diverging", lambda idata: idata.sample_stats["diverging"].values.__setitem__((0, 0), True)),
                       ("energy", lambda idata: idata.sample_stats["energy"].values.__setitem__((1, 5), 0.0))):
        nc, _ = _copy_entry(cache_dir, tmp_path / part)
        idata = arviz_adapter.from_netcdf(str(nc))
        idata.load() if hasattr(idata, "load") else None
        edit(idata)
        os.remove(nc)
        arviz_adapter.to_netcdf(idata, str(nc))
        with pytest.warns(UserWarning, match="do not match the digest"):
            assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(tmp_path / part)) is None, part


def test_a_record_of_another_key_is_refused(problem, reference, cache_dir, tmp_path):
    spec, Phi, y = problem
    _, js = _copy_entry(cache_dir, tmp_path / "rekeyed")
    record = json.loads(js.read_text())
    record["cache_key"] = "f" * 64
    js.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="another key"):
        assert cached_reference(spec, Phi, y, config=CONFIG, cache_dir=str(tmp_path / "rekeyed")) is None


def test_the_key_covers_the_rule_and_the_code(problem, monkeypatch):
    R = cache  # the module that builds the key

    spec, Phi, y = problem
    key = R.cache_key(spec, Phi, y, CONFIG)
    monkeypatch.setattr(R, "CERTIFICATION", replace(R.CERTIFICATION, ess_tail_min=500.0))
    stricter = R.cache_key(spec, Phi, y, CONFIG)
    monkeypatch.undo()
    monkeypatch.setattr(R, "model_code_digest", lambda s: "another model source")
    changed_model = R.cache_key(spec, Phi, y, CONFIG)
    monkeypatch.undo()
    assert len({key, stricter, changed_model}) == 3
    assert R.cache_key(spec, Phi, y, CONFIG) == key  # and nothing else moves it


def test_code_digest_follows_the_source_and_its_imports(tmp_path, monkeypatch):
    from zoo.validation.base.code_digest import code_digest, module_closure

    assert {"zoo.models.distributions", "zoo.models.special", "zoo.models.gig_logistic"} <= set(
        module_closure("zoo.models.gig_logistic"))
    # a sampler's digest covers its own code, not the harness that runs and caches it
    assert "zoo.validation.references.sampler" in module_closure("zoo.validation.references.pg_gibbs")
    assert not set(HARNESS_MODULES) & set(module_closure("zoo.validation.references.pg_gibbs",
                                                           exclude=HARNESS_MODULES))
    module = tmp_path / "user_model_for_digest.py"
    module.write_text("from zoo.models import special\nSCALE = 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = code_digest(["user_model_for_digest"])
    assert "zoo.models.special" in module_closure("user_model_for_digest")
    module.write_text("from zoo.models import special\nSCALE = 2.0\n")
    assert code_digest(["user_model_for_digest"]) != first


def test_import_statements_are_read_without_ast_and_agree_with_it():
    """code_digest reads imports with the tokenizer (ast.parse can fail in a threaded Dask
    worker under CPython 3.11); on every module of the project it finds what ast finds."""
    import ast

    from zoo.validation.base.code_digest import import_statements

    src = "from ... import a, b as c\nfrom .x.y import (\n    z,  # note\n)\nimport p.q as r, s\n" \
          "def f():\n    import t\n"
    assert import_statements(src) == [(3, "", ["a", "b"]), (1, "x.y", ["z"]), (0, "p.q", []), (0, "s", []),
                                      (0, "t", [])]
    root = REPO
    files = [f for d in ("models", "inference", "validation", "reproductions", "zoo", "data", "benchmarks",
                                   "tests")
             for f in (root / d).rglob("*.py")]
    assert len(files) > 100
    for f in files:
        source = f.read_text(encoding="utf-8")
        expected = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                expected += [(0, a.name, []) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                expected.append((node.level, node.module or "", [a.name for a in node.names]))
        assert sorted(map(repr, import_statements(source))) == sorted(map(repr, expected)), f


def test_every_sampled_site_is_diagnosed(problem, reference):
    """NUTS moves exactly the measured site here; the latent case is the GIG test below.
    A latent block that does not mix must fail certification like a measured one."""
    assert reference.diagnostics["diagnosed_sites"] == ["mu"]
    draws = {k: v.copy() for k, v in reference.posterior.draws.items()}
    stuck = np.random.default_rng(0).standard_normal((4, 300))
    stuck[0] += 5.0  # one chain elsewhere
    draws["latent"] = stuck
    stats = {k: np.asarray(v.values) for k, v in reference.idata.sample_stats.items()}
    sites = certification._diagnosed_sites(reference.sites, draws)
    certified, failures, diagnostics, _ = certification._certify_run(draws, stats, sites, NutsRun,
                                                                     CONFIG.sampler_settings())
    assert not certified and any(f.startswith("latent: R-hat") for f in failures)
    assert diagnostics["diagnosed_sites"] == ["mu", "latent"]


def test_nuts_energy_and_tree_depth_checks():
    from zoo.validation.references import nuts_energy_checks

    rng = np.random.default_rng(3)
    iid = rng.standard_normal((4, 1000))  # E-BFMI near 2
    walk = np.cumsum(0.1 * rng.standard_normal((4, 1000)), axis=1)  # energy barely moves
    steps = np.full((4, 1000), 7)
    ok, numbers = nuts_energy_checks({"energy": iid, "n_steps": steps}, 10, CERTIFICATION)
    assert ok == [] and numbers["ebfmi_min"] > 1.5 and numbers["treedepth_fraction"] == 0.0
    bad, numbers = nuts_energy_checks({"energy": walk, "n_steps": steps}, 10, CERTIFICATION)
    assert len(bad) == 4 and all("E-BFMI" in f for f in bad) and numbers["ebfmi_min"] < 0.3
    deep = steps.copy()
    deep[:, :50] = 2**10 - 1  # 5% of transitions at the depth limit
    bad, numbers = nuts_energy_checks({"energy": iid, "n_steps": deep}, 10, CERTIFICATION)
    assert bad == ["5.0% of transitions reached the maximum tree depth 10 (allowed: 1%)"]
    deep[:, 10:50] = 7  # 1%: allowed
    assert nuts_energy_checks({"energy": iid, "n_steps": deep}, 10, CERTIFICATION)[0] == []


# --- a cache entry is signed: a digest alone is no defence against whoever writes the folder
def _shift_draws_and_redigest(nc, js, shift=1.0):
    """The attack: move every draw, recompute the content digest the way the cache does,
    and write it into the record."""
    idata = arviz_adapter.from_netcdf(str(nc))
    for name in idata.posterior.data_vars:
        idata.posterior[name].values[...] += shift
    os.remove(nc)
    arviz_adapter.to_netcdf(idata, str(nc))
    record = json.loads(js.read_text())
    record["content_sha256"] = cache._content_digest(*cache._stored_draws_and_stats(arviz_adapter.from_netcdf(str(nc))))
    js.write_text(json.dumps(record))


def test_shifted_draws_with_a_recomputed_digest_are_refused_and_resampled(problem, uncertified, tmp_path):
    spec, Phi, y = problem
    cfg, folder, ref = uncertified
    nc, js = _copy_entry(str(folder), tmp_path / "forged")
    _shift_draws_and_redigest(nc, js)
    with pytest.warns(UserWarning, match=f"untrusted reference cache entry {js}: signature does not match"):
        again = run_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "forged"))
    assert not again.from_cache
    np.testing.assert_array_equal(again.posterior.draws["mu"], ref.posterior.draws["mu"])
    # the entry is rewritten, signed, and reads back as the original
    back = cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "forged"))
    assert back.from_cache
    np.testing.assert_array_equal(back.posterior.draws["mu"], ref.posterior.draws["mu"])


@pytest.mark.parametrize("field, value", [("seconds", 0.001), ("compile_seconds", 0.0)])
def test_edited_timings_are_refused(problem, uncertified, tmp_path, field, value):
    spec, Phi, y = problem
    cfg, folder, _ = uncertified
    _, js = _copy_entry(str(folder), tmp_path / field)
    record = json.loads(js.read_text())
    record[field] = value
    js.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="signature does not match"):
        assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / field)) is None


def test_an_entry_signed_with_another_key_is_resampled(problem, uncertified, tmp_path, monkeypatch):
    spec, Phi, y = problem
    cfg, folder, ref = uncertified
    _copy_entry(str(folder), tmp_path / "shared")
    monkeypatch.setenv("ZOO_CONFIG_DIR", str(tmp_path / "other-user"))
    # no key yet: nothing is trusted, and reading makes no key
    with pytest.warns(UserWarning, match="not signed by this user's key"):
        assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "shared")) is None
    assert not (tmp_path / "other-user").exists()
    cache.machine_key(create=True)
    with pytest.warns(UserWarning, match="not signed by this user's key"):
        again = run_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "shared"))
    assert not again.from_cache
    np.testing.assert_array_equal(again.posterior.draws["mu"], ref.posterior.draws["mu"])
    assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "shared")).from_cache
    # and the first user's key no longer trusts the rewritten entry: a shared folder needs a shared key
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="not signed by this user's key"):
        assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "shared")) is None


def test_the_key_file_is_private_and_an_open_one_is_refused(problem, uncertified, tmp_path, monkeypatch):
    import threading

    spec, Phi, y = problem
    cfg, folder, _ = uncertified
    monkeypatch.setenv("ZOO_CONFIG_DIR", str(tmp_path / "cfg"))
    keys = []
    threads = [threading.Thread(target=lambda: keys.append(cache.machine_key(create=True))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 4 and len(set(keys)) == 1 and len(keys[0]) == 32  # racing makers agree on one key
    path = tmp_path / "cfg" / "cache-key"
    assert cache.key_path() == str(path) and path.read_bytes() == keys[0]
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(tmp_path / "cfg").st_mode & 0o777 == 0o700
    assert sorted(os.listdir(tmp_path / "cfg")) == ["cache-key"]  # no temporary file left
    # an entry signed with it reads back; with the key opened to others it is not trusted
    _, js = _copy_entry(str(folder), tmp_path / "entry")
    record = json.loads(js.read_text())
    js.write_text(json.dumps(cache.sign_record(record, keys[0])))
    assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "entry")).from_cache
    os.chmod(path, 0o644)
    with pytest.warns(UserWarning, match="can be read or written by others"):
        assert cache.machine_key(create=True) is None
    with pytest.warns(UserWarning, match="not signed by this user's key"):
        assert cached_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "entry")) is None
    assert path.read_bytes() == keys[0]  # refused, not replaced


def test_the_config_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("ZOO_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert cache.key_path() == str(tmp_path / "xdg" / "sparse-bayes-zoo" / "cache-key")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.config_dir() == str(tmp_path / "home" / ".config" / "sparse-bayes-zoo")


# Two references in two threads of one process: one samples, the other waits for its draws.
# Under CPython 3.11 this failed now and then with "SystemError: AST constructor recursion
# depth mismatch": both computed their cache keys at once, and inspect.getsource (the sampler's
# runner class, in the key) parses the class's module with ast.parse, which 3.11 does not make
# thread-safe; base/code_digest.object_source now reads sources one thread at a time
# (tests/validation/base/test_code_digest.py races it directly).
def test_two_runs_of_one_key_sample_once(problem, uncertified, tmp_path, monkeypatch):
    import threading

    from zoo.validation.references import certified_run as run_module

    spec, Phi, y = problem
    cfg, _, ref = uncertified
    calls = []
    first = NutsRun.first

    def counting_first(self):
        calls.append(threading.get_ident())
        return first(self)

    monkeypatch.setattr(NutsRun, "first", counting_first)
    results, errors = [], []

    def one_run():
        try:
            results.append(run_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "race")))
        except BaseException as err:  # noqa: BLE001  (reported below)
            errors.append(err)

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(calls) == 1, "two runs of one cache key sampled twice"
    assert sorted(r.from_cache for r in results) == [False, True]
    for r in results:
        np.testing.assert_array_equal(r.posterior.draws["mu"], ref.posterior.draws["mu"])
    assert run_module.fcntl is not None
    assert any(f.endswith(".lock") for f in os.listdir(tmp_path / "race"))


def test_a_read_only_cache_is_read_and_a_miss_is_sampled_unwritten(problem, uncertified, tmp_path, monkeypatch):
    """chmod 0555 folders: an entry is read; with none the run samples and says it cannot
    write. As root permissions do not bind, so there the folder is only declared unwritable."""
    from zoo.validation.references import certified_run as run_module

    spec, Phi, y = problem
    cfg, folder, ref = uncertified
    _copy_entry(str(folder), tmp_path / "ro")
    (tmp_path / "ro-empty").mkdir()
    for d in ("ro", "ro-empty"):
        os.chmod(tmp_path / d, 0o555)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        monkeypatch.setattr(run_module, "_writable", lambda folder: False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            hit = run_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "ro"))
        assert hit.from_cache
        np.testing.assert_array_equal(hit.posterior.draws["mu"], ref.posterior.draws["mu"])
        with pytest.warns(UserWarning, match="cannot write to the reference cache folder .*not cached"):
            miss = run_reference(spec, Phi, y, config=cfg, cache_dir=str(tmp_path / "ro-empty"))
        assert not miss.from_cache and miss.cache_path is None
        np.testing.assert_array_equal(miss.posterior.draws["mu"], ref.posterior.draws["mu"])
        assert os.listdir(tmp_path / "ro-empty") == []
    finally:
        for d in ("ro", "ro-empty"):
            os.chmod(tmp_path / d, 0o755)


def test_a_held_lock_is_announced_and_counts_against_the_time_limit(problem, tmp_path):
    """Before: a run waited silently for another run's lock, past its --time-limit. Now it
    names the lock and its holder at once, and the wait is the sampler's time: another run
    holding the entry for longer than the limit makes this one run out of time."""
    import fcntl
    import time

    from zoo.validation.references import ReferenceTimeout
    from zoo.validation.references.cache import cache_key

    spec, Phi, y = problem
    cfg = replace(CONFIG, time_limit=1.5)
    folder = tmp_path / "held"
    folder.mkdir()
    lock = folder / f"nuts-{cache_key(spec, Phi, y, cfg)[:32]}.lock"
    with open(lock, "w") as fh:
        fh.write("pid 4242 on another-host since 2026-11-29T01:00:00")
        fh.flush()
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # another run holds the entry
        t0 = time.perf_counter()
        with pytest.warns(UserWarning, match=r"waiting for another zoo run .* is held by pid 4242 on another-host "
                                             r"since 2026-11-29T01:00:00 \(counted against the time limit of 1.5 s\)"):
            with pytest.raises(ReferenceTimeout, match="time limit of 1.5 s"):
                run_reference(spec, Phi, y, config=cfg, cache_dir=str(folder))
        assert time.perf_counter() - t0 < 10
