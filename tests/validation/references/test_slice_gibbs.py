"""The second GGSM reference sampler (slice-within-Gibbs with a scale move).

What would make it wrong, and the test that would see it:
* a log density that is not the model's -> compared with NumPyro's log density of
  ``GGSMProbit.model`` at random points;
* a wrong lambda | w conditional -> log p(lambda, w) - log InvGamma(lambda | shape, scale)
  must not depend on lambda;
* a move that does not leave the posterior invariant (a wrong Jacobian in the scale move,
  a non-reversible slice) -> draws against the exact posterior computed by quadrature on
  one- and two-weight problems, at q = 2 and at the kinked q = 0.5, and against NUTS on a
  small problem where NUTS certifies.

Tolerances are Monte Carlo errors: a mean is compared within 4.5 standard errors
(sd / sqrt(ESS), ESS by ArviZ's bulk ESS over the 4 chains); a CDF value F within
4.5 sqrt(F (1 - F) / ESS). With about 20 such comparisons at fixed seeds the chance of a
false alarm from a correct sampler is below 1e-3.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from zoo.models.ggsm_probit import GGSMProbit
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.judge import moment_existence as ME
from zoo.validation.references import slice_gibbs as G

Z = 4.5  # standard errors allowed (see the module docstring)


def _ess(draws_2d: np.ndarray) -> float:
    """Bulk ESS of one scalar quantity, draws (chains, draws)."""
    return float(adapter.ess_bulk(np.asarray(draws_2d)))


def _probit_data(n_obs, n, seed, signal=1.0):
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n_obs, n))
    w = signal * rng.standard_normal(n)
    y = (Phi @ w + rng.standard_normal(n_obs) > 0).astype(float)
    return Phi, y


def test_log_joint_is_the_model_log_density():
    Phi, y = _probit_data(30, 4, 0)
    for q in (0.5, 1.0, 2.0):
        spec = GGSMProbit(q=q, a=1.5, b=0.7)
        rng = np.random.default_rng(1)
        for _ in range(3):
            w, lam = rng.standard_normal(4), float(rng.gamma(2.0))
            ours = float(G.log_joint(jnp.asarray(w), lam, jnp.asarray(Phi), jnp.asarray(y), q, 1.5, 0.7))
            theirs, _ = log_density(spec.model, (jnp.asarray(Phi),), {"y": jnp.asarray(y)},
                                    {"lam": lam, "w": jnp.asarray(w)})
            assert ours == pytest.approx(float(theirs), rel=1e-12, abs=1e-9)


def test_log_ndtr_is_jax_s_and_as_close_to_scipy_s():
    """The sweeps' log Phi (one erfc, no branch evaluated in vain) against jax's log_ndtr,
    the model's, from deep in the left tail (the asymptotic series below -20) to x = 40 and
    at the seams: equal to a few units of round-off (relative where |log Phi| > 1, absolute
    below), so no farther from scipy's than jax's own."""
    from jax.scipy.special import log_ndtr as jax_log_ndtr
    from scipy.special import log_ndtr as scipy_log_ndtr

    x = np.concatenate([np.linspace(-60.0, 40.0, 200_001), [-20.0, np.nextafter(-20.0, 0.0), -0.0, 1e-300, -1e-300]])
    ours, theirs = np.asarray(G.log_ndtr(jnp.asarray(x))), np.asarray(jax_log_ndtr(jnp.asarray(x)))

    def err(a, b):
        return np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0))

    assert err(ours, theirs) < 1e-15
    assert err(ours, scipy_log_ndtr(x)) <= err(theirs, scipy_log_ndtr(x)) + 1e-15


def test_lambda_conditional_is_the_joint_normalized_in_lambda():
    """log p(y, w, lam) - log InvGamma(lam | a + n/q, b + sum|w|^q) is constant in lam."""
    from scipy.stats import invgamma

    Phi, y = _probit_data(20, 5, 2)
    w = np.random.default_rng(3).standard_normal(5)
    for q in (0.1, 0.5, 2.0):
        shape, scale = G.lam_conditional(jnp.asarray(w), q, 2.0, 0.5)
        diffs = [
            float(G.log_joint(jnp.asarray(w), lam, jnp.asarray(Phi), jnp.asarray(y), q, 2.0, 0.5))
            - invgamma.logpdf(lam, float(shape), scale=float(scale))
            for lam in (0.05, 0.3, 1.0, 4.0, 20.0)
        ]
        assert np.ptp(diffs) < 1e-9 * max(1.0, abs(diffs[0]))


@pytest.mark.long
def test_the_scale_move_targets_the_model_with_lambda_integrated_out():
    """The density the scale move samples is log p(y, e^t w) + n t, where p(y, w) is the
    model's joint with lambda integrated out - checked by integrating lambda numerically."""
    from scipy.integrate import quad

    Phi, y = _probit_data(20, 4, 4)
    s = 2 * y - 1
    q, a, b = 0.5, 1.5, 0.7
    w = np.random.default_rng(5).standard_normal(4)
    eta, sum_q = Phi @ w, np.sum(np.abs(w) ** q)

    def log_p_w(v):
        """log of the model's joint integrated over lambda, by quadrature in u = log lambda
        (integrand p(y, v, e^u) e^u), scaled by its value at the conditional mode."""
        def g(u):
            return float(G.log_joint(jnp.asarray(v), np.exp(u), jnp.asarray(Phi), jnp.asarray(y), q, a, b)) + u

        shape, scale = G.lam_conditional(jnp.asarray(v), q, a, b)
        u0 = float(np.log(scale / shape))  # the mode of the integrand in u
        val, _ = quad(lambda u: np.exp(g(u) - g(u0)), u0 - 30, u0 + 30, limit=200)
        return g(u0) + np.log(val)

    ts = (-1.0, -0.3, 0.0, 0.4, 1.2)
    ours = [float(G.log_rescaling_density(t, jnp.asarray(eta), sum_q, jnp.asarray(s), q, a, b, 4)) for t in ts]
    exact = [log_p_w(np.exp(t) * w) + 4 * t for t in ts]
    diffs = np.array(ours) - np.array(exact)
    assert np.ptp(diffs) < 1e-7, diffs  # equal up to one constant in t


def test_the_scale_move_excludes_scales_where_w_overflows():
    """With a nearly improper prior the slice can reach t where e^t w is not representable;
    those points must have log density -inf (outside every slice), never NaN or +inf."""
    Phi, _ = _probit_data(20, 4, 4)
    w = np.random.default_rng(5).standard_normal(4)
    y = (Phi @ w > 0).astype(float)  # w separates the data: the likelihood tends to 1 as t grows
    s = jnp.asarray(2 * y - 1)
    eta, sum_q = jnp.asarray(Phi @ w), float(np.sum(np.abs(w) ** 0.1))
    # at t = 800 and q = 0.1 the prior term and the Jacobian n t nearly cancel, so without the
    # guard the density there is finite although e^800 w is not
    inside = G.log_rescaling_density(0.0, eta, sum_q, s, 0.1, 1e-3, 1e-3, 4)
    far = G.log_rescaling_density(800.0, eta, sum_q, s, 0.1, 1e-3, 1e-3, 4)  # e^800 overflows
    assert np.isfinite(float(inside))
    assert float(far) == -np.inf


def _grid_posterior_1d(Phi, y, q, a, b, lo, hi, m=400_001):
    """Exact posterior of a single weight (lambda integrated out) on a fine grid."""
    from scipy.special import log_ndtr

    grid = np.linspace(lo, hi, m)
    s = 2 * y - 1
    logp = log_ndtr(s[None, :] * grid[:, None] * Phi[None, :, 0]).sum(1) - (a + 1 / q) * np.log(b + np.abs(grid) ** q)
    p = np.exp(logp - logp.max())
    p /= np.trapezoid(p, grid)
    cdf = np.concatenate([[0.0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(grid))])
    return grid, p, cdf


@pytest.mark.parametrize("q", [2.0, 0.5])
@pytest.mark.long
def test_one_weight_matches_quadrature(q):
    """One weight, lambda integrated numerically: mean, CDF at three points and E[lambda | y]."""
    Phi, y = _probit_data(25, 1, 4, signal=0.8)
    a, b = 2.0, 1.0
    spec = GGSMProbit(q=q, a=a, b=b)
    draws, stats = G.sample(spec, Phi, y, G.SliceGibbsConfig(num_chains=4, num_warmup=300, num_samples=2000, seed=5))
    assert stats["shrink_caps"].sum() == 0
    w = draws["w"][..., 0]
    grid, p, cdf = _grid_posterior_1d(Phi, y, q, a, b, -30.0, 30.0)
    mean = np.trapezoid(grid * p, grid)
    sd = np.sqrt(np.trapezoid((grid - mean) ** 2 * p, grid))
    ess = _ess(w)
    assert abs(w.mean() - mean) < Z * sd / np.sqrt(ess)
    for x in np.interp([0.1, 0.5, 0.9], cdf, grid):
        F = np.interp(x, grid, cdf)
        assert abs(np.mean(w <= x) - F) < Z * np.sqrt(F * (1 - F) / ess)
    # E[lambda | y] = E[ scale / (shape - 1) ] over w | y
    shape = a + 1.0 / q
    lam_mean = np.trapezoid((b + np.abs(grid) ** q) / (shape - 1.0) * p, grid)
    lam = draws["lam"]
    lam_sd = np.std(lam)
    assert abs(lam.mean() - lam_mean) < Z * lam_sd / np.sqrt(_ess(lam))


@pytest.mark.long
def test_two_weights_match_quadrature_at_q_half():
    """Two weights at q = 0.5: the scale move and the coordinate slices together."""
    from scipy.special import log_ndtr

    Phi, y = _probit_data(30, 2, 6, signal=1.0)
    q, a, b = 0.5, 1.5, 1.0
    spec = GGSMProbit(q=q, a=a, b=b)
    draws, _ = G.sample(spec, Phi, y, G.SliceGibbsConfig(num_chains=4, num_warmup=300, num_samples=2500, seed=7))
    # The marginal density of each weight has a cusp at 0 (|w|^0.5), so a uniform grid
    # misplaces the mass next to the kink (step 0.02 gave P(w2 <= 0) = 0.243 against the
    # true 0.2097). Nodes g = c sinh(u) on a uniform u grid are dense at 0 and reach |w| ~ 200
    # (the tails are polynomial); the node at 0 counts half towards P(w <= 0). Doubling the
    # nodes and the range changes the numbers below by < 1e-5.
    u = np.linspace(-9.0, 9.0, 1201)
    g = 0.05 * np.sinh(u)
    node_w = 0.05 * np.cosh(u) * (u[1] - u[0])
    s = 2 * y - 1
    logp = np.stack([log_ndtr(s * (gi * Phi[:, 0] + g[:, None] * Phi[:, 1])).sum(-1)
                     - (a + 2 / q) * np.log(b + abs(gi) ** q + np.abs(g) ** q) for gi in g])
    p = np.exp(logp - logp.max()) * node_w[:, None] * node_w[None, :]
    p /= p.sum()
    for k, marginal in enumerate((p.sum(1), p.sum(0))):
        mean = np.sum(g * marginal)
        sd = np.sqrt(np.sum((g - mean) ** 2 * marginal))
        F0 = marginal[g < 0].sum() + 0.5 * marginal[g == 0].sum()  # the mass below the kink
        wk = draws["w"][..., k]
        assert abs(wk.mean() - mean) < Z * sd / np.sqrt(_ess(wk)), k
        assert abs(np.mean(wk <= 0.0) - F0) < Z * np.sqrt(F0 * (1 - F0) / _ess(wk)), k


# whole-chain statistical cross-check (among the default tier's costliest): slow tier; the default tier
# keeps the exact checks of this sampler's conditionals
@pytest.mark.slow
def test_agrees_with_nuts_where_nuts_certifies():
    """Six weights, 80 points, q = 1.5: NUTS certifies; the means agree within the joint
    Monte Carlo error of the two samplers."""
    from zoo.validation.references import ReferenceConfig, run_reference

    Phi, y = _probit_data(80, 6, 8, signal=0.7)
    spec = GGSMProbit(q=1.5, a=2.0, b=1.0)
    ref = run_reference(spec, Phi, y, config=ReferenceConfig(num_warmup=500, num_samples=1000, seed=1))
    assert ref.certified, ref.failures
    draws, _ = G.sample(spec, Phi, y, G.SliceGibbsConfig(num_warmup=300, num_samples=1500, seed=9))
    nuts_w = ref.posterior.draws["w"]
    for k in range(6):
        se = np.sqrt(np.var(draws["w"][..., k]) / _ess(draws["w"][..., k])
                     + np.var(nuts_w[..., k]) / _ess(nuts_w[..., k]))
        assert abs(draws["w"][..., k].mean() - nuts_w[..., k].mean()) < Z * se, k


def test_linear_separation_detects_both_cases():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = (X[:, 0] > 0).astype(float)
    Phi = np.hstack([np.ones((60, 1)), X])
    assert ME.linear_separation(Phi, y)["separable"] is True
    # a copy of a point with the opposite label: no hyperplane puts both on their side
    Phi_dup = np.vstack([Phi, Phi[:1]])
    y_dup = np.append(y, 1.0 - y[0])
    assert ME.linear_separation(Phi_dup, y_dup)["separable"] is False


def test_paper_design_is_separable_and_the_weak_variant_is_not():
    from zoo import data as datasets

    for split in range(3):
        for name, expected in (("ggig_linear", True), ("ggig_linear_weak", False)):
            sp = datasets.load(name, split)
            Phi = np.hstack([np.ones((sp.X_train.shape[0], 1)), sp.X_train])
            assert ME.linear_separation(Phi, sp.y_train)["separable"] is expected, (name, split)


def test_scale_moments():
    assert ME.scale_moments(2.0, 1.0) == {"tail_exponent": 3.0, "mean_exists": True, "sd_exists": False}
    assert ME.scale_moments(0.5, 1.0)["mean_exists"] is False
    assert ME.scale_moments(2.0, 1.5)["sd_exists"] is True


def test_config_validation():
    with pytest.raises(ValueError, match="num_samples"):
        G.SliceGibbsConfig(num_samples=0)
    with pytest.raises(ValueError, match="init_scale"):
        G.SliceGibbsConfig(init_scale=0.0)
