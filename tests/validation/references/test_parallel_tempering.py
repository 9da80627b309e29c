"""Parallel tempering (validation/references/parallel_tempering.py): its tempered target is the model's,
its exchange bookkeeping counts round trips as defined, its ladder update equalizes the
rejections, and its cold chain finds the right weights of two separated modes where NUTS
does not."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from numpyro.infer.util import initialize_model, log_likelihood, potential_energy

import zoo  # noqa: F401  (float64)
from zoo.models.bblr import BBLR
from zoo.models.gig_logistic import GIGLogistic
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.references import CERTIFICATION, ReferenceConfig, run_reference
from zoo.validation.references.parallel_tempering import (
    PARALLEL_TEMPERING,
    _build_programs,
    _exchange,
    place_ladder,
)


def _design(n=12, m=3, seed=0):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, m))
    return Phi, (rng.uniform(size=n) < 0.5).astype(float)


# BBLR (whose sampler this is) in the default tier, GIG logistic's potential in the long tier
@pytest.mark.parametrize("spec", [BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5),
                                  pytest.param(GIGLogistic(rho=1.0, k=2.0, theta=1.5), marks=pytest.mark.long)],
                         ids=["bblr", "gig-logistic"])
def test_tempered_parts_add_up_to_the_models_potential(spec):
    # -log prior (with the Jacobians of constrained sites: GIG logistic has positive ones)
    # minus the log-likelihood is NumPyro's potential energy of the whole model, and the
    # log-likelihood is the observed sites' own
    Phi, y = _design()
    prog = _build_programs(spec, *Phi.shape)
    info = initialize_model(jax.random.PRNGKey(0), spec.model, model_args=(Phi,), model_kwargs={"y": y})
    unravel = ravel_pytree(info.param_info.z)[1]
    for seed in range(3):
        z = jax.random.uniform(jax.random.PRNGKey(seed), (prog.size,), minval=-1.5, maxval=1.5)
        full = potential_energy(spec.model, (Phi,), {"y": y}, unravel(z))
        nlp, ll = prog.neg_log_prior(z, Phi, y), prog.log_lik(z, Phi, y)
        assert float(nlp - ll) == pytest.approx(float(full), rel=1e-12, abs=1e-10)
        direct = log_likelihood(spec.model, prog.constrain(z, Phi, y), Phi, y=y, batch_ndims=0)["y"]
        assert float(ll) == pytest.approx(float(jnp.sum(direct)), rel=1e-12)
    if isinstance(spec, BBLR):  # and, for BBLR, the spec's own formulas
        w = np.array([0.3, -1.1, 0.7])
        assert float(prog.log_lik(w, Phi, y)) == pytest.approx(float(spec.log_likelihood(w, Phi, y)), rel=1e-12)
        assert float(-prog.neg_log_prior(w, Phi, y)) == pytest.approx(float(spec.log_prior(w)), rel=1e-12)


def test_exchange_counts_round_trips_by_hand():
    # two copies with equal log-likelihoods: every proposed exchange is accepted. Pair (0, 1)
    # is proposed at even iterations only. Replica identities at (cold, hot) after each
    # iteration: 0:(1,0) 1:(1,0) 2:(0,1) 3:(0,1) 4:(1,0) 5:(1,0) 6:(0,1) ... Replica 1
    # reaches the cold end at 0, the hot end at 2, the cold end again at 4 (a round trip);
    # replica 0: hot at 0 (before any cold visit: not a half trip), cold at 2, hot at 4,
    # cold at 6 (a round trip); then one every two iterations.
    z = jnp.zeros((2, 1))
    state = (z, jnp.zeros(2), jnp.zeros(2), z, z, jnp.arange(2), jnp.zeros(2, jnp.int32))
    beta = jnp.array([1.0, 0.0])
    trips = []
    for it in range(10):
        state, prob, proposed, trip = _exchange(jax.random.PRNGKey(it), state, beta, it % 2)
        assert bool(proposed[0]) == (it % 2 == 0)
        trips.append(int(trip))
    assert trips == [0, 0, 0, 0, 1, 0, 1, 0, 1, 0]


def test_ladder_update_equalizes_the_rejections():
    beta = np.array([1.0, 0.75, 0.5, 0.25, 0.0])
    reject = np.array([0.1, 0.1, 0.2, 0.6])  # pairs (0,1), (1,2), (2,3), (3,4): most of the barrier near the prior
    new, barrier = place_ladder(beta, reject)
    assert barrier == pytest.approx(1.0)
    assert new[0] == 1.0 and new[-1] == 0.0 and np.all(np.diff(new) < 0)
    # the piecewise linear barrier, read at the new temperatures, steps by barrier / 4
    up, cum = beta[::-1], np.concatenate([[0.0], np.cumsum(reject[::-1])])
    assert np.allclose(np.diff(np.interp(new[::-1], up, cum)), 0.25)
    # equal rejections leave the ladder alone
    assert np.allclose(place_ladder(beta, np.full(4, 0.3))[0], beta)


def _two_modes():
    """A linear BBLR with a bias whose posterior has two modes on either side of w = 0 (a
    band of positives between two groups of negatives: each mode puts the boundary at one
    group's edge), divided by a valley about 8 x log 3 nats deep; the groups' sizes make the
    modes unequal."""
    x = np.concatenate([np.linspace(-0.5, 0.5, 16), np.linspace(-2.3, -1.7, 8), np.linspace(1.7, 2.3, 10)])
    y = np.concatenate([np.ones(16), np.zeros(18)])
    return BBLR(a=0.25, b=0.5, gamma=4.0, lam=0.25), np.stack([x, np.ones_like(x)], 1), y


def _quadrature(spec, Phi, y):
    """P(w > 0) and E[bias] on a 1201 x 1201 grid over [-15, 15]^2 (the mass at its edge is
    below 1e-15)."""
    g = np.linspace(-15.0, 15.0, 1201)
    W, B = np.meshgrid(g, g, indexing="ij")
    lj = np.asarray(jax.vmap(lambda w: spec.log_joint(w, Phi, y))(np.stack([W.ravel(), B.ravel()], 1)))
    p = np.exp(lj - lj.max()).reshape(W.shape)
    p /= p.sum()
    return float(p[W > 0].sum()), float((p * B).sum())


def _within_monte_carlo_error(draws, exact, name):
    # the mean of the chains' draws against the exact value, within 4 Monte Carlo standard
    # errors (sd / sqrt(bulk ESS), ESS by ArviZ over the 4 chains): a false alarm below 1e-4
    # under the CLT
    ess = float(adapter.ess_bulk(draws))
    se = float(np.std(draws)) / np.sqrt(ess)
    assert abs(float(np.mean(draws)) - exact) < 4 * se, (name, float(np.mean(draws)), exact, se, ess)


# a certified tempering run against quadrature (among the costliest): slow tier
@pytest.mark.slow
def test_tempering_finds_the_weights_of_two_separated_modes():
    spec, Phi, y = _two_modes()
    p_positive, mean_bias = _quadrature(spec, Phi, y)
    assert 0.05 < p_positive < 0.2  # two modes, neither negligible
    ref = run_reference(spec, Phi, y, config=ReferenceConfig(sampler=PARALLEL_TEMPERING, num_samples=2000))
    assert ref.certified, ref.failures
    assert ref.diagnostics["round_trips_min"] >= CERTIFICATION.min_round_trips
    w = np.asarray(ref.posterior.draws["w"])
    _within_monte_carlo_error((w[..., 0] > 0).astype(float), p_positive, "P(w > 0)")
    _within_monte_carlo_error(w[..., 1], mean_bias, "E[bias]")


@pytest.mark.slow
def test_nuts_cannot_be_trusted_on_the_two_modes():
    # the case above is one where tempering is needed. NUTS's answer is wrong in one of two
    # ways, and which one depends on its seed and on the JAX build: its chains keep different
    # shares of the minor mode and R-hat fails (measured when this test was written: 0.03 to 0.22 of draws
    # with w > 0 per chain, R-hat 1.026), or no chain ever visits the minor mode and the run is
    # *certified* with a share of w > 0 far from the exact one (measured 2026-11-28, jax 0.10.2, seed 0:
    # 0 draws against 0.103) - R-hat compares chains with each other and cannot see a mode
    # that none of them visits. Either way its P(w > 0) is not to be trusted.
    spec, Phi, y = _two_modes()
    p_positive, _ = _quadrature(spec, Phi, y)
    ref = run_reference(spec, Phi, y, config=ReferenceConfig())
    w0 = np.asarray(ref.posterior.draws["w"])[..., 0]
    if ref.certified:
        # a certified answer that misses the exact share by many Monte Carlo errors of a
        # share near the exact one (sd sqrt(p(1-p)) over the draws' count: a lower bound on
        # the error of correlated draws, so the test is conservative in NUTS's favour)
        se = np.sqrt(p_positive * (1 - p_positive) / w0.size)
        assert abs(float(np.mean(w0 > 0)) - p_positive) > 10 * se, (float(np.mean(w0 > 0)), p_positive)
    else:
        assert any("R-hat" in f for f in ref.failures)


def test_too_few_round_trips_is_a_failure_more_draws_can_mend():
    # independent N(0, 1) draws pass R-hat and ESS; no round trips fails tempering's own
    # check, as a kind the doubling loop may continue (unlike a sampler fault)
    from zoo.models.base import Site
    from zoo.validation.references.certification import _certify_run
    from zoo.validation.references.parallel_tempering import TemperingRun

    rng = np.random.default_rng(0)
    draws = {"w": rng.normal(size=(4, 1000, 2))}
    stats = {"diverging": np.zeros((4, 1000), bool), "round_trips": np.zeros((4, 1000), int),
             "swap_accept": np.full((4, 1000), 0.5), "acceptance_rate": np.full((4, 1000), 0.8)}
    stats["round_trips"][:, ::50] = 1  # 20 per chain ...
    stats["round_trips"][3] = 0  # ... but none in chain 3
    certified, failures, diagnostics, kinds = _certify_run(draws, stats, (Site("w", (2,)),), TemperingRun, {})
    assert not certified and kinds == {"sampler_count"}
    assert failures == [failures[0]] and failures[0].startswith("chain 3: 0 round trips")
    assert diagnostics["round_trips_min"] == 0


def test_equal_specs_share_one_compiled_program():
    # specs compare by identity; SBC builds a new one per simulation, and a cache keyed by
    # identity recompiled the sampler in every simulation until LLVM ran out of memory
    from zoo.validation.references.parallel_tempering import _programs

    a, b = BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5), BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5)
    assert a != b  # identity semantics, as the models have them
    assert _programs(a, 12, 3) is _programs(b, 12, 3)
    assert _programs(a, 12, 3) is not _programs(BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.7), 12, 3)
