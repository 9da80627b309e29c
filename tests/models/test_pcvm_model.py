"""PCVM's NumPyro model (models/pcvm.py): its density against hand-written formulas - the
truncated prior 2 N(w | 0, 1/alpha) on w >= 0 with the probit likelihood, and the EPCVM
surrogate (scaled logistic, smooth indicator) - its sites, its predictive integral, and bad
hyper-parameters. The engines are tested against this model in their own files
(test_em.py, test_pcvm_laplace.py, test_expectation_propagation.py, test_pcvm_em.py)."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density
from scipy import integrate, stats
from scipy.special import expit, log_expit

import zoo  # noqa: F401  (float64)
from zoo.models.pcvm import INDICATOR_SHARPNESS, PCVM, SURROGATE_SLOPE


def _problem(seed=0, n=12, m=4):
    rng = np.random.default_rng(seed)
    Phi = rng.normal(size=(n, m))
    y = (rng.uniform(size=n) < 0.5).astype(float)
    return Phi, y


def _by_hand(spec, Phi, y, b, w):
    """log p(b, w, y) written out with scipy."""
    alpha = np.broadcast_to(spec.alpha, w.shape)
    sd = 1.0 / np.sqrt(alpha)
    total = stats.norm.logpdf(b, 0.0, 1.0 / math.sqrt(spec.alpha_bias))
    f = Phi @ w + b
    if spec.surrogate:
        total += stats.norm.logpdf(w, 0.0, sd).sum() + log_expit(spec.indicator_sharpness * w).sum()
        s = spec.surrogate_slope * f
        return total + np.sum(y * log_expit(s) + (1 - y) * log_expit(-s))
    total += np.sum(math.log(2.0) + stats.norm.logpdf(w, 0.0, sd))
    return total + np.sum(y * stats.norm.logcdf(f) + (1 - y) * stats.norm.logcdf(-f))


@pytest.mark.parametrize("surrogate", [False, True], ids=["probit", "surrogate"])
def test_numpyro_density_is_the_hand_written_joint(surrogate):
    Phi, y = _problem()
    spec = PCVM(alpha=np.array([0.5, 1.0, 2.0, 4.0]), alpha_bias=0.3, surrogate=surrogate)
    rng = np.random.default_rng(1)
    for _ in range(3):
        b, w = rng.normal(), rng.exponential(0.8, 4)
        got = log_density(spec.model, (Phi,), {"y": y}, {"b": jnp.asarray(b), "w": jnp.asarray(w)})[0]
        assert float(got) == pytest.approx(_by_hand(spec, Phi, y, b, w), rel=1e-12)


def test_the_truncated_prior_has_no_mass_below_zero_and_the_surrogate_does():
    Phi, y = _problem()
    w = np.array([0.3, -0.2, 1.0, 0.5])
    params = {"b": jnp.asarray(0.1), "w": jnp.asarray(w)}
    with pytest.warns(UserWarning, match="Out-of-support"):  # NumPyro's own warning, expected here
        assert float(log_density(PCVM().model, (Phi,), {"y": y}, params)[0]) == -np.inf
    assert np.isfinite(float(log_density(PCVM(surrogate=True).model, (Phi,), {"y": y}, params)[0]))
    assert PCVM().sites(4)[1].support == "nonnegative" and PCVM(surrogate=True).sites(4)[1].support == "real"
    assert PCVM.__dataclass_fields__["surrogate_slope"].default == SURROGATE_SLOPE == math.sqrt(8 / math.pi)
    assert PCVM.__dataclass_fields__["indicator_sharpness"].default == INDICATOR_SHARPNESS == 3.0


@pytest.mark.parametrize("surrogate", [False, True], ids=["probit", "surrogate"])
def test_gaussian_prob_is_the_predictive_integral(surrogate):
    """Exact for the probit link; MacKay's approximation for the scaled logistic (within
    0.02 here, and exact as the variance goes to 0)."""
    spec = PCVM(surrogate=surrogate)
    for mean, var in [(0.4, 0.5), (-1.2, 2.0), (2.0, 1e-10)]:
        got = float(spec.gaussian_prob(jnp.asarray(mean), jnp.asarray(var)))
        link = (lambda f: expit(SURROGATE_SLOPE * f)) if surrogate else stats.norm.cdf
        sd = math.sqrt(var)
        expected = integrate.quad(lambda f: link(f) * stats.norm.pdf(f, mean, sd), mean - 12 * sd, mean + 12 * sd,
                                  points=[mean])[0] if var > 1e-8 else link(mean)
        assert got == pytest.approx(expected, abs=1e-9 if not surrogate or var < 1e-8 else 0.02)


def test_alpha_is_a_scalar_or_one_per_column():
    assert np.asarray(PCVM(alpha=2.0).alpha_vector(3)).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="alpha has 2 entries but the design matrix has 3 basis columns"):
        PCVM(alpha=[1.0, 2.0]).alpha_vector(3)


@pytest.mark.parametrize("name, value", [("alpha", 0.0), ("alpha", [1.0, -1.0]), ("alpha_bias", np.inf),
                                         ("surrogate_slope", -1.0), ("indicator_sharpness", np.nan)])
def test_bad_hyper_parameters_are_named(name, value):
    with pytest.raises(ValueError, match=f"hyper-parameter {name} must be positive and finite"):
        PCVM(**{name: value})
