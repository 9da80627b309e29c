"""Pathfinder from the NumPyro model alone (inference/generic_pathfinder.py), against answers
known exactly.

Why Pathfinder is exact on a Gaussian target N(m, Lambda^-1): log p is quadratic, so every
L-BFGS pair (s, z) (a step and its change of gradient) satisfies z = Lambda s exactly, and
BFGS updates from Lambda-conjugate pairs keep every earlier secant condition Sigma z = s (the
hereditary property): with d = 2 conjugate pairs in the memory the inverse Hessian estimate
Sigma equals Lambda^-1 to round-off, and the Gaussian N(x + Sigma grad log p(x), Sigma) is
the target itself. On this target (checked when the test was written) the first step ends
at the exact minimum along its line, so the second is conjugate to it, and every iterate
whose memory holds those two pairs is exact. (Later iterates, whose memory of 5 pairs holds
only the nearly parallel late steps, fall back to the diagonal estimate across them; the
ELBO passes them over.) Then log p(x, y) - log q(x) is one number at every draw - the log
normalizer of the unnormalized target, known in closed form - and the ELBO estimate equals
it with no Monte Carlo error. The checks:

* the log weights: spread below 1e-6 and mean equal to the closed-form log normalizer to
  1e-6 (round-off in the factors and the potential is ~1e-12);
* the draws: 20,000 of them give a mean to sd / sqrt(20000) = 0.004 (sd 0.56) and a
  variance to a relative sqrt(2 / 20000) = 1%, a correlation (-0.6) to
  (1 - rho^2) / sqrt(20000) = 0.0045; tolerances are 5 Monte Carlo sd: 0.02 on a mean, 5% on
  a variance, 0.025 on the correlation (the Gaussian itself is exact, above);
* the paper's mean: at an iterate that is not the mode (|grad log p| > 0.05) the ELBO still
  equals the log normalizer to 1e-6, which holds only if the Gaussian is centred at
  x + Sigma grad log p (BlackJAX's ``approximate`` centres it at x - Sigma grad log p, off by
  2 Sigma grad log p, which costs 2 grad' Sigma grad nats of ELBO: 0.02 at the second iterate
  here, and the weights' spread fails the first check at the iterate it chooses).

Elsewhere only exact facts are checked (supports, shapes, seeds, finite weights, errors).
Every fit is seeded; programs are cached per spec object, so the tests share one spec per
target and one config where they can. Whole file: ~30 s on two cores.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import generic_pathfinder as gp
from zoo.inference.contracts import contract_problems, returned_problem
from zoo.inference.posterior import ApproximationFailed, DrawsPosterior
from zoo.models.base import Site
from zoo.validation.records import registry
from zoo.validation.runs import sbc_simulation

# the Gaussian target of the ADVI tests: w ~ N(0, I) times exp(-1/2 (w - c)' B (w - c))
from test_generic_svi import B, C, COV, MEAN, PRECISION, GaussianTarget  # noqa: E402

N = 20
# log of the integral of N(w | 0, I) exp(-1/2 (w - c)' B (w - c)) dw, plus the labels' fair
# coins, N log 1/2: completing the square, -1/2 log det(I + B) - 1/2 c'Bc + 1/2 m'(I + B)m
LOG_NORMALIZER = (-0.5 * np.log(np.linalg.det(PRECISION)) - 0.5 * C @ B @ C + 0.5 * MEAN @ PRECISION @ MEAN
                  + N * np.log(0.5))


@dataclass(frozen=True, eq=False)
class ScaledLogistic:
    """Logistic regression with a half-normal scale: a positive site (tau) and a
    deterministic one (the precision 1 / tau^2) among the measured sites."""

    name: str = field(default="scaled-logistic", init=False)

    def model(self, Phi, y=None):
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        numpyro.deterministic("precision", 1.0 / tau**2)
        w = numpyro.sample("w", dist.Normal(0.0, tau).expand([jnp.shape(Phi)[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=Phi @ w).to_event(1), obs=y)

    def sites(self, n_basis):
        return (Site("w", (n_basis,), "real", ("basis",)), Site("tau", (), "nonnegative"),
                Site("precision", (), "nonnegative"))


GAUSSIAN, SCALED = GaussianTarget(), ScaledLogistic()
SMALL = gp.PathfinderConfig(n_draws=400, paths=3)


def _data(n=N, m=2, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, m)), (np.arange(n) % 2).astype(float)


@pytest.mark.long
def test_a_single_path_is_exact_on_a_gaussian_target():
    Phi, y = _data()
    post = gp.fit(GAUSSIAN, Phi, y, config=gp.PathfinderConfig(n_draws=20_000))
    info = post.info
    assert isinstance(post, DrawsPosterior) and post.draws["w"].shape == (1, 20_000, 2)
    assert info.engine == "pathfinder" and info.converged, info.reason
    assert info.n_iter == info.extra["lbfgs_iterations"] == info.trace.size - 1
    best = info.extra["chosen_iterate"]
    assert info.trace[best] == info.extra["elbo"] == np.max(info.trace)
    # q is the target up to its normalizer: every log weight is that normalizer
    lw = post.log_weights
    assert lw.shape == (1, 20_000) and np.std(lw) < 1e-6
    assert np.mean(lw) == pytest.approx(LOG_NORMALIZER, abs=1e-6)
    assert info.extra["log_mean_weight"] == pytest.approx(LOG_NORMALIZER, abs=1e-6)
    draws = post.draws["w"][0]
    np.testing.assert_allclose(draws.mean(0), MEAN, atol=0.02)
    np.testing.assert_allclose(draws.var(0), np.diag(COV), rtol=0.05)
    assert np.corrcoef(draws.T)[0, 1] == pytest.approx(COV[0, 1] / np.sqrt(COV[0, 0] * COV[1, 1]), abs=0.025)
    # the paper's mean: iterates away from the mode whose Gaussian is still exact
    grad = info.extra["grad_norm_path"]
    away = [i for i in range(1, info.n_iter) if grad[i] > 0.05 and abs(info.trace[i] - LOG_NORMALIZER) < 1e-6]
    assert away, (info.trace, grad)


@pytest.mark.long
def test_positive_and_deterministic_sites_and_a_seed_that_repeats():
    Phi, y = _data(40, 3, seed=1)
    a = gp.fit_single(SCALED, Phi, y, config=SMALL)
    assert a.draws["tau"].shape == (1, 400) and a.draws["w"].shape == (1, 400, 3)
    assert np.all(a.draws["tau"] > 0.0)  # through NumPyro's exp transform
    np.testing.assert_allclose(a.draws["precision"], 1.0 / a.draws["tau"] ** 2, rtol=1e-12)
    assert np.all(np.isfinite(a.log_weights))
    assert [name for name, _ in a.info.extra["layout"]] == ["tau", "w"]
    b = gp.fit_single(SCALED, Phi, y, config=SMALL)  # the same spec object: nothing compiles
    assert b.info.compile_seconds == 0.0
    np.testing.assert_array_equal(a.draws["w"], b.draws["w"])
    c = gp.fit_single(SCALED, Phi, y, config=gp.PathfinderConfig(n_draws=400, paths=3, seed=1))
    assert not np.allclose(a.draws["w"], c.draws["w"])


@pytest.mark.long
def test_multi_path_pools_its_paths_and_resamples():
    Phi, y = _data(40, 3, seed=1)
    post = gp.fit_multi(SCALED, Phi, y, config=SMALL)
    info = post.info
    assert info.engine == "pathfinder-multi"
    assert post.draws["w"].shape == (1, 400, 3) and post.log_weights is None
    assert np.all(post.draws["tau"] > 0.0)
    assert [p["path"] for p in info.extra["per_path"]] == [0, 1, 2] and info.extra["failed_paths"] == []
    starts = np.stack([p["start"] for p in info.extra["per_path"]])
    assert np.all(np.abs(starts) <= 2.0) and len({tuple(s) for s in starts}) == 3  # dispersed, in (-2, 2)
    assert info.n_iter == sum(p["lbfgs_iterations"] for p in info.extra["per_path"])
    assert np.isfinite(info.extra["psis_khat"]) and info.extra["proposal"] == "pathfinder-multi"
    again = gp.fit(SCALED, Phi, y, config=SMALL, paths=3)
    np.testing.assert_array_equal(post.draws["w"], again.draws["w"])
    assert again.info.compile_seconds == 0.0


@pytest.mark.long
def test_failed_paths_are_dropped_and_reported(monkeypatch):
    Phi, y = _data(40, 3, seed=1)
    run_path = gp._run_path

    def failing(model, x0, key, Phi_, y_, sites, config, name):
        if name.endswith(("path 1",)) or fail_all:
            raise ApproximationFailed(f"{name}: planted")
        return run_path(model, x0, key, Phi_, y_, sites, config, name)

    monkeypatch.setattr(gp, "_run_path", failing)
    fail_all = False
    post = gp.fit_multi(SCALED, Phi, y, config=SMALL)
    assert post.info.extra["paths_used"] == [0, 2]
    assert [f["path"] for f in post.info.extra["failed_paths"]] == [1]
    assert "planted" in post.info.extra["per_path"][1]["failed"]
    fail_all = True
    with pytest.raises(ApproximationFailed, match="all 3 paths failed"):
        gp.fit_multi(SCALED, Phi, y, config=SMALL)


@pytest.mark.long
def test_the_registered_engine_runs_on_pcvm():
    record = registry.get_model("pcvm")
    problem = sbc_simulation.problem_for(record)
    _, _, y, _ = sbc_simulation._simulation_start(problem.spec, problem.Phi, 0, sbc_simulation.SBCSettings())
    t0 = time.perf_counter()
    post = registry.get_engine("pcvm", "pathfinder").fit()(problem.spec, problem.Phi, y, config=SMALL)
    assert time.perf_counter() - t0 < 30.0  # cold, compiling
    assert returned_problem(post, problem.spec, problem.Phi) is None
    assert np.all(post.draws["w"] >= 0.0)  # PCVM's truncated prior, through NumPyro's transform
    assert post.log_weights.shape == (1, 400) and not np.any(np.isnan(post.log_weights))


def test_the_engines_keep_the_contract_and_bad_settings_are_named():
    for fn in (gp.fit, gp.fit_single, gp.fit_multi):
        assert contract_problems(fn, "fixed") == []
    names = {e.name: e.fixed for e in registry.get_model("ggsm-probit").engines}
    assert names["pathfinder"] == "generic_pathfinder:fit_single"
    assert names["pathfinder-multi"] == "generic_pathfinder:fit_multi"
    for bad, match in (({"maxiter": 0}, "maxiter must be an integer >= 1"),
                       ({"n_draws": 1}, "n_draws must be an integer >= 2"),
                       ({"paths": 1}, "paths must be an integer >= 2"),
                       ({"elbo_draws": 2.5}, "elbo_draws must be an integer"),
                       ({"init_radius": 0.0}, "init_radius must be a finite number > 0"),
                       ({"ftol": -1.0}, "ftol must be a finite number >= 0"),
                       ({"seed": -1}, "seed must be an integer in")):
        with pytest.raises(ValueError, match=match):
            gp.PathfinderConfig(**bad)
    Phi, y = _data()
    with pytest.raises(TypeError, match="config must be a PathfinderConfig"):
        gp.fit(GAUSSIAN, Phi, y, config={"maxiter": 10})
    with pytest.raises(ValueError, match="labels y are required"):
        gp.fit(GAUSSIAN, Phi, None)
    with pytest.raises(ValueError, match="paths must be None or an integer >= 1"):
        gp.fit(GAUSSIAN, Phi, y, paths=0)
