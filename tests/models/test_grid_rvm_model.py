"""gridRVM's NumPyro model: its densities against hand-written formulas and against each
other, the reduction to the RVM at M2 = 1, the predictive integral, and bad input."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import log_density
from problems import grid_table_problem
from scipy import integrate, stats
from scipy.special import expit, gammaln

from zoo.models.basis import PerDimensionRBFBasis
from zoo.models.grid_rvm import GridRVM

SHAPE = (3, 4)


def _problem(seed=0, n=15, shape=SHAPE):
    """A table problem with coin-flip labels (tests/problems.py)."""
    return grid_table_problem(shape, n, seed, signal="none")


def _point(spec, seed=1):
    rng = np.random.default_rng(seed)
    shapes = spec.hyper_shapes
    params = {name: rng.gamma(2.0, 0.5, size=s) for name, s in shapes.items()}
    params["w"] = rng.normal(size=spec.n_weights)
    return params


def _by_hand(spec, params, X, y):
    """log p(w, alpha, beta, y) written out with scipy."""
    alpha = params["alpha"]
    if spec.prior == "rvm":
        prec, total = alpha, 0.0
    else:
        beta = params["beta"]
        table = np.outer(alpha, beta) if spec.prior == "p-grid" else alpha[:, None] + beta[None, :]
        prec = table.ravel()
        total = stats.gamma.logpdf(beta, spec.c0, scale=1.0 / spec.d0).sum()
    total += stats.gamma.logpdf(alpha, spec.a0, scale=1.0 / spec.b0).sum()
    total += stats.norm.logpdf(params["w"], 0.0, 1.0 / np.sqrt(prec)).sum()
    p = expit(X @ params["w"])
    return total + np.sum(y * np.log(p) + (1 - y) * np.log1p(-p))


@pytest.mark.parametrize("prior", ["p-grid", "s-grid", "rvm"])
@pytest.mark.long
def test_log_joint_and_the_centred_model_match_a_hand_written_density(prior):
    X, y = _problem()
    spec = GridRVM(SHAPE, prior, a0=1.5, b0=0.7, c0=2.5, d0=1.3, parameterization="centred")
    params = _point(spec)
    expected = _by_hand(spec, params, X, y)
    assert float(spec.log_joint(params, X, y)) == pytest.approx(expected, rel=1e-12)
    numpyro_value = log_density(spec.model, (X,), {"y": y}, {k: jnp.asarray(v) for k, v in params.items()})[0]
    assert float(numpyro_value) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("prior", ["p-grid", "s-grid", "rvm"])
def test_the_noncentred_form_is_the_same_posterior(prior):
    """log p_centred(w) = log p_noncentred(z) + 1/2 sum log prec for w = z / sqrt(prec):
    the change of variables, so NUTS on either form targets the same posterior of w."""
    X, y = _problem(2)
    spec = GridRVM(SHAPE, prior)
    params = _point(spec, 3)
    prec = np.asarray(spec.precision(params["alpha"], params.get("beta")))
    z = params["w"] * np.sqrt(prec)
    nc = {k: jnp.asarray(v) for k, v in params.items() if k != "w"} | {"z": jnp.asarray(z)}
    value_nc = float(log_density(spec.model, (X,), {"y": y}, nc)[0])
    assert float(spec.log_joint(params, X, y)) == pytest.approx(value_nc + 0.5 * np.sum(np.log(prec)), rel=1e-12)
    # and the deterministic site is w itself
    trace_w = Predictive(spec.model, posterior_samples={k: v[None] for k, v in nc.items()},
                         return_sites=["w"])(jax.random.PRNGKey(0), X)["w"][0]
    np.testing.assert_allclose(np.asarray(trace_w), params["w"], rtol=1e-12)


def test_with_one_column_the_grids_reduce_to_the_rvm():
    """M2 = 1: the p-grid with beta = 1 and the s-grid with beta -> 0 have the RVM's
    precisions, and the p-grid's joint density is the RVM's plus beta's prior alone."""
    m = 5
    X, y = _problem(4, shape=(m, 1))
    rvm = GridRVM((m, 1), "rvm")
    pgrid = GridRVM((m, 1), "p-grid")
    sgrid = GridRVM((m, 1), "s-grid")
    rng = np.random.default_rng(5)
    alpha, w = rng.gamma(2.0, 1.0, size=m), rng.normal(size=m)
    np.testing.assert_allclose(pgrid.precision(alpha, np.ones(1)), rvm.precision(alpha), rtol=0)
    np.testing.assert_allclose(sgrid.precision(alpha, np.zeros(1)), rvm.precision(alpha), rtol=0)
    beta_prior = stats.gamma.logpdf(1.0, pgrid.c0, scale=1.0 / pgrid.d0)
    assert float(pgrid.log_joint({"w": w, "alpha": alpha, "beta": np.ones(1)}, X, y)) == pytest.approx(
        float(rvm.log_joint({"w": w, "alpha": alpha}, X, y)) + beta_prior, rel=1e-12)


def test_prior_draws_have_the_mean_absolute_weight_of_the_formula():
    """E|w| = sqrt(2 / pi) E[alpha^-1/2] E[beta^-1/2] under the p-grid prior, with
    E[x^-1/2] = sqrt(b) Gamma(a - 1/2) / Gamma(a) for Gamma(a, rate b). 40,000 draws; the
    tolerance is 4 Monte Carlo standard errors (|w| has a finite variance at shape 2)."""
    spec = GridRVM((2, 2), "p-grid", a0=2.0, b0=1.5, c0=3.0, d0=0.5)
    X = np.zeros((1, 4))
    draws = Predictive(spec.model, num_samples=40_000, return_sites=["w"])(jax.random.PRNGKey(7), X)["w"]
    absw = np.abs(np.asarray(draws)).ravel()

    def inv_sqrt_mean(a, b):
        return np.sqrt(b) * np.exp(gammaln(a - 0.5) - gammaln(a))

    expected = np.sqrt(2 / np.pi) * inv_sqrt_mean(spec.a0, spec.b0) * inv_sqrt_mean(spec.c0, spec.d0)
    # the 4 weights of one draw share their precisions: the standard error counts draws
    per_draw = np.abs(np.asarray(draws)).mean(axis=1)
    se = per_draw.std(ddof=1) / np.sqrt(per_draw.size)
    assert abs(absw.mean() - expected) < 4 * se


def test_the_exact_predictive_is_the_integral_and_mackay_is_close_but_not_exact():
    spec = GridRVM(SHAPE)
    for m, v in [(0.3, 0.2), (-1.5, 4.0), (2.0, 25.0)]:
        exact, _ = integrate.quad(lambda f: expit(f) * stats.norm.pdf(f, m, np.sqrt(v)), -np.inf, np.inf,
                                  epsabs=1e-13)
        assert float(spec.gaussian_prob_exact(m, v)) == pytest.approx(exact, abs=1e-10)
    # MacKay's approximation is off by ~1e-2 at large variance: a cost the report can show
    gap = abs(float(spec.gaussian_prob(2.0, 25.0)) - float(spec.gaussian_prob_exact(2.0, 25.0)))
    assert 1e-4 < gap < 5e-2


def test_per_dimension_rbf_table_is_dimension_by_centre():
    rng = np.random.default_rng(0)
    C = rng.normal(size=(4, 3))
    basis = PerDimensionRBFBasis.fit(C, 5.55)
    X = rng.normal(size=(2, 3))
    Phi = basis.transform(X)
    assert basis.table_shape == (3, 4) and Phi.shape == (2, 12)
    i, j = 2, 1  # dimension 2 of object 0 against dimension 2 of centre 1
    assert Phi[0, i * 4 + j] == pytest.approx(np.exp(-5.55 * (X[0, i] - C[j, i]) ** 2), rel=1e-14)


@pytest.mark.parametrize("shape, message", [((0, 3), "no rows"), ((3, 0), "no columns"),
                                            ((2.5, 3), "two integers"), ((3,), "two integers"),
                                            ("ab", "two integers")])
def test_bad_table_shapes_are_named(shape, message):
    with pytest.raises(ValueError, match=message):
        GridRVM(shape)


def test_a_design_whose_width_is_not_rows_times_columns_is_refused():
    spec = GridRVM((3, 4))
    with pytest.raises(ValueError, match="3 rows x 4 columns = 12 features"):
        spec.sites(11)
    with pytest.raises(ValueError, match="rows x columns"):
        log_density(spec.model, (np.zeros((2, 10)),), {"y": np.zeros(2)},
                    {"alpha": jnp.ones(3), "beta": jnp.ones(4), "z": jnp.zeros(10)})


@pytest.mark.parametrize("name", ["a0", "b0", "c0", "d0"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_hyper_parameters_are_refused(name, value):
    with pytest.raises(ValueError, match=f"hyper-parameter {name} must be positive"):
        GridRVM(SHAPE, **{name: value})


def test_unknown_prior_and_parameterization_are_refused():
    with pytest.raises(ValueError, match="prior must be one of"):
        GridRVM(SHAPE, "q-grid")
    with pytest.raises(ValueError, match="parameterization must be one of"):
        GridRVM(SHAPE, parameterization="marginal")
