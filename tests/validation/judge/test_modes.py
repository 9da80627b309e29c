"""validation/judge/modes.py: the modes a posterior's draws flow to and their basins' shares."""
import jax.numpy as jnp
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.models.bblr import BBLR
from zoo.validation.judge.modes import basins


def _bimodal():
    # 1-D BBLR without bias: inner points (x = +-1) favour w > 0, outer ones (x = +-3,
    # labels the other way round) w < 0; the bounded likelihood keeps both as local modes
    # (near w = -0.15, log joint -52, and w = +1.0, -74.9, with a minimum between)
    x = np.repeat([1.0, -1.0, 3.0, -3.0], 20)[:, None]
    y = np.repeat([1.0, 0.0, 0.0, 1.0], 20)
    spec = BBLR(a=0.2, b=0.6, gamma=5.0, lam=1.0)
    return spec, (lambda w: spec.log_joint(w, jnp.asarray(x), jnp.asarray(y)))


def test_two_modes_are_found_with_the_shares_of_the_draws_that_flow_to_them():
    spec, log_density = _bimodal()
    rng = np.random.default_rng(0)
    # 120 draws near the left mode, 60 near the right one (each well inside its basin)
    draws = np.concatenate([-0.15 + 0.03 * rng.standard_normal(120), 1.0 + 0.1 * rng.standard_normal(60)])[:, None]
    out = basins(log_density, draws, n_starts=180, point=np.array([0.9]))
    assert out["n_failed"] == 0 and len(out["modes"]) == 2
    left, right = out["modes"]
    assert left["share"] == pytest.approx(2 / 3) and right["share"] == pytest.approx(1 / 3)
    assert left["mode"][0] < 0 < right["mode"][0]
    assert left["log_density"] > right["log_density"]
    # the point (say SLA's answer) ascends to the right mode: not the main one
    assert out["point"]["stationary"] and out["point"]["mode_index"] == 1 and not out["point"]["is_main_mode"]


def test_a_log_concave_posterior_has_one_mode_holding_every_draw():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.standard_normal((80, 2)), np.ones(80)])
    y = (X[:, 0] > 0).astype(float)
    spec = BBLR(a=0.0, b=1.0, gamma=1.0, lam=1.0)  # logistic regression: log-concave
    draws = rng.standard_normal((50, 3))
    out = basins(lambda w: spec.log_joint(w, jnp.asarray(X), jnp.asarray(y)), draws)
    assert len(out["modes"]) == 1 and out["main_share"] == 1.0 and out["n_failed"] == 0
