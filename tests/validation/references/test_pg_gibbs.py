"""The second GIG-logistic reference sampler (Polya-Gamma Gibbs) and its parts.

What would make it wrong, and the test that would see it:
* a wrong PG(1, c) sampler -> its mean, variance and Laplace transform at several c
  against the closed forms;
* a u | beta conditional that is not the model's -> compared with NumPyro's log density of
  the model's marginal form (written once in models/gig_logistic.py), for both mixing
  families;
* a wrong beta | tau, omega draw -> sample mean and the quadratic form against the
  Gaussian conditional computed directly;
* a chain that does not target the posterior -> against NUTS on a small problem where
  NUTS certifies, through the reference machinery (run_reference with sampler pg-gibbs).

Tolerances are Monte Carlo errors at fixed seeds: a mean within Z = 4.5 standard errors
(sd / sqrt(n) for independent draws, sd / sqrt(ESS) for chains); with about 40 such
comparisons the chance that a correct sampler trips one is below 1e-3.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from zoo.models.gig_logistic import GIGLogistic
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.judge import moment_existence as ME
from zoo.validation.references import pg_gibbs as G
from zoo.validation.references import polya_gamma as PG

Z = 4.5


def _logistic_data(n_obs, d, seed, signal=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_obs, d))
    beta = signal * rng.standard_normal(d)
    y = (rng.uniform(size=n_obs) < 1.0 / (1.0 + np.exp(-X @ beta))).astype(float)
    return X, y


# -- Polya-Gamma draws ------------------------------------------------------------------
@pytest.mark.parametrize("c", [0.0, 0.7, 2.5, 8.0, 40.0])
def test_polya_gamma_moments_and_laplace_transform(c):
    """Both proposal regimes are covered: |c|/2 < 1/0.64 draws the truncated inverse
    Gaussian by the Levy route, larger |c| by Michael-Schucany-Haas."""
    n = 20000
    w, tries = PG.sample_pg1_with_tries(jax.random.PRNGKey(int(10 * c) + 1), jnp.full((n,), c))
    w = np.asarray(w)
    assert np.all(w > 0)
    mean, var = float(PG.mean_pg1(c)), float(PG.var_pg1(c))
    assert abs(w.mean() - mean) < Z * np.sqrt(var / n)
    sq = (w - mean) ** 2
    assert abs(sq.mean() - var) < Z * sq.std() / np.sqrt(n)
    for s in (0.5, 4.0):
        e = np.exp(-s * w)
        assert abs(e.mean() - float(PG.laplace_transform_pg1(c, s))) < Z * e.std() / np.sqrt(n)
    # the paper's bound on the expected number of proposals is 1.0009 (sd of tries ~ 0.03)
    assert float(np.mean(tries)) < 1.0009 + Z * 0.03 / np.sqrt(n)


def test_polya_gamma_closed_forms_are_continuous_at_zero():
    for c in (1e-5, 1e-3, 2e-2):
        assert float(PG.mean_pg1(c)) == pytest.approx(np.tanh(c / 2) / (2 * c) if c > 1e-4 else 0.25, rel=1e-9)
    assert float(PG.var_pg1(0.011)) == pytest.approx(float(PG.var_pg1(0.009)), rel=1e-4)
    c = 0.5
    assert float(PG.var_pg1(c)) == pytest.approx((np.sinh(c) - c) / (4 * c ** 3 * np.cosh(c / 2) ** 2), rel=1e-12)


def test_sample_pg1_keeps_the_shape():
    out = PG.sample_pg1(jax.random.PRNGKey(0), jnp.zeros((3, 4)))
    assert out.shape == (3, 4) and bool(jnp.all(out > 0))


# -- the conditionals ------------------------------------------------------------------
@pytest.mark.parametrize("rho,k,theta", [(1.0, 1.0, 1.0), (1.0, 1e-6, 1e-6), (-2.0, 0.5, 3.0)])
def test_u_conditional_is_the_model_log_density(rho, k, theta):
    """log p(u, beta, y) of the model's marginal form, in (u, beta) coordinates (beta =
    sqrt(tau(u)) z, Jacobian 1 / sqrt(tau)), minus our log p(u | beta) must not depend on u."""
    X, y = _logistic_data(20, 3, 0)
    spec = GIGLogistic(rho=rho, k=k, theta=theta, mixing="gamma" if rho > 0 else "inverse-gamma",
                       parameterization="marginal")
    beta = jnp.array([0.3, -1.2, 2.0])
    diffs = []
    for shift in (-2.0, 0.0, 1.5, 4.0):
        u = jnp.array([0.1, -0.5, 1.0]) + shift
        lt = G.log_tau(u, rho, theta)
        z = beta * jnp.exp(-0.5 * lt)
        joint, _ = log_density(spec.model, (jnp.asarray(X),), {"y": jnp.asarray(y)}, {"u": u, "z": z})
        joint = float(joint) - float(jnp.sum(0.5 * lt))
        diffs.append(joint - float(jnp.sum(G.log_conditional_u(u, beta, rho, k, theta))))
    np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-9)


@pytest.mark.parametrize("rho,k,theta", [(1.0, 1.0, 1.0), (1.0, 1e-6, 1e-6), (-2.0, 0.5, 3.0)])
def test_the_scale_move_targets_the_models_joint(rho, k, theta):
    """Step 4 samples t from p(e^t beta, u + 2 sign t | y) e^(d t) (the move's Jacobian; u's
    shift has Jacobian 1): its log density minus the model's own (NumPyro's log density of
    the marginal form in (u, beta) coordinates, as above) must not depend on t."""
    X, y = _logistic_data(20, 3, 0)
    spec = GIGLogistic(rho=rho, k=k, theta=theta, mixing="gamma" if rho > 0 else "inverse-gamma",
                       parameterization="marginal")
    beta, u = jnp.array([0.3, -1.2, 2.0]), jnp.array([0.1, -0.5, 1.0])
    sign = 1.0 if rho > 0 else -1.0

    def log_joint(b, v):
        lt = G.log_tau(v, rho, theta)
        joint, _ = log_density(spec.model, (jnp.asarray(X),), {"y": jnp.asarray(y)},
                               {"u": v, "z": b * jnp.exp(-0.5 * lt)})
        return float(joint) - float(jnp.sum(0.5 * lt))

    diffs = []
    for t in (-1.5, -0.2, 0.0, 0.7, 2.0):
        ours = float(G.log_rescaling_density(t, jnp.asarray(X) @ beta, jnp.asarray(y - 0.5), u, rho, k))
        diffs.append(ours - (log_joint(np.exp(t) * beta, u + 2.0 * sign * t) + 3 * t))
    # the constant holds the prior's normalizers (about 1e6 at k = 1e-6): round-off relative to it
    assert np.ptp(diffs) < 1e-9 * max(1.0, abs(diffs[0])), diffs


def test_the_scale_move_density_is_minus_infinity_where_the_predictor_overflows():
    value = G.log_rescaling_density(800.0, jnp.array([1.0, -2.0]), jnp.array([0.5, -0.5]), jnp.zeros(2), 1.0, 1.0)
    assert float(value) == -np.inf


def test_u_conditional_is_minus_infinity_where_tau_underflows():
    value = G.log_conditional_u(jnp.array(-2000.0), jnp.array(1.0), 1.0, 1.0, 1.0)
    assert float(value) == -np.inf


def test_beta_draw_is_the_gaussian_conditional():
    X, y = _logistic_data(15, 4, 3)
    rng = np.random.default_rng(4)
    omega = rng.uniform(0.05, 0.3, 15)
    log_tau = np.log(np.array([1e-6, 0.5, 2.0, 40.0]))  # tiny to large prior variances
    kappa = y - 0.5
    V = np.linalg.inv(X.T @ (omega[:, None] * X) + np.diag(np.exp(-log_tau)))
    m = V @ X.T @ kappa
    n = 20000
    keys = jax.random.split(jax.random.PRNGKey(5), n)
    draws = np.asarray(jax.vmap(lambda key: G.draw_beta(key, jnp.asarray(X), jnp.asarray(kappa),
                                                        jnp.asarray(omega), jnp.asarray(log_tau)))(keys))
    sd = np.sqrt(np.diag(V))
    assert np.all(np.abs(draws.mean(0) - m) < Z * sd / np.sqrt(n))
    # (beta - m)^T V^-1 (beta - m) ~ chi^2_4: mean 4, variance 8
    quad = np.einsum("ni,ij,nj->n", draws - m, np.linalg.inv(V), draws - m)
    assert abs(quad.mean() - 4.0) < Z * np.sqrt(8.0 / n)


# -- which moments exist -----------------------------------------------------------------
def test_separating_support_bounds():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] > 0).astype(float)  # feature 0 alone separates
    assert ME.separating_support_bounds(X, y) == {"lower": 1, "upper": 1}
    y2 = (X[:, 0] + X[:, 1] > 0).astype(float)  # needs two features (and the LP finds <= 3)
    b = ME.separating_support_bounds(X, y2)
    assert b["lower"] == 2 and b["upper"] in (2, 3)
    assert ME.separating_support_bounds(X[:, :2], y2) == {"lower": 2, "upper": 2}


def test_gig_moments_follow_the_tail_index():
    from zoo.validation.records.gig_logistic_record import moments as gig_moments

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    y2 = (X[:, 0] + X[:, 1] > 0).astype(float)  # separable, and only with both features: m_min = 2
    m = gig_moments(GIGLogistic(k=1.0), X, y2)  # tail r^-(1 + 2 * 2): mean and sd exist
    assert m["mean_exists"] is True and m["sd_exists"] is True
    m = gig_moments(GIGLogistic(k=0.2), X, y2)  # r^-(1 + 0.8): neither
    assert m["mean_exists"] is False and m["sd_exists"] is False
    m = gig_moments(GIGLogistic(k=0.4), X, y2)  # r^-(1 + 1.6): mean, no sd
    assert m["mean_exists"] is True and m["sd_exists"] is False
    Xn, yn = _logistic_data(200, 3, 1, signal=0.5)  # overlapping classes: all exist
    m = gig_moments(GIGLogistic(k=1e-6, theta=1e-6), Xn, yn)
    assert m["mean_exists"] is True and m["sd_exists"] is True


def test_tail_index():
    assert ME.tail_index(GIGLogistic(k=0.3)) == pytest.approx(0.6)
    assert ME.tail_index(GIGLogistic(rho=-1.5, mixing="inverse-gamma")) == pytest.approx(3.0)


# -- the chain --------------------------------------------------------------------------
# whole-chain statistical cross-check (among the default tier's costliest): slow tier; the default tier keeps
# the exact checks of every conditional above
@pytest.mark.slow
def test_agrees_with_nuts_where_nuts_certifies(tmp_path):
    """Three coefficients, 60 overlapping points, k = 1: NUTS certifies, so does the
    Gibbs sampler (through run_reference, which also caches and names it), and their
    means agree within the joint Monte Carlo error. NUTS runs on the collapsed form
    (beta alone, tau and a integrated out by quadrature), the most independent of the
    Gibbs sampler's augmented one; on this problem the marginal form at target
    acceptance 0.95 kept one divergence, the collapsed form none."""
    from zoo.validation.references import ReferenceConfig, run_reference

    X, y = _logistic_data(60, 3, 2, signal=0.8)
    spec = GIGLogistic(parameterization="collapsed")
    nuts = run_reference(spec, X, y, config=ReferenceConfig(num_warmup=500, num_samples=1000, seed=1,
                                                             target_accept=0.95))
    assert nuts.certified, nuts.failures
    cfg = ReferenceConfig(sampler=G.PG_GIBBS, num_warmup=300, num_samples=2000, seed=3)
    gibbs = run_reference(spec, X, y, config=cfg, cache_dir=tmp_path)
    assert gibbs.certified, gibbs.failures
    assert gibbs.sampler == "pg-gibbs"
    assert run_reference(spec, X, y, config=cfg, cache_dir=tmp_path).from_cache
    a, b = nuts.posterior.draws["beta"], gibbs.posterior.draws["beta"]
    for j in range(3):
        se = np.sqrt(np.var(a[..., j]) / adapter.ess_bulk(a[..., j]) + np.var(b[..., j]) / adapter.ess_bulk(b[..., j]))
        assert abs(a[..., j].mean() - b[..., j].mean()) < Z * se, j


def test_refuses_another_model():
    from zoo.models.ggsm_probit import GGSMProbit

    X, y = _logistic_data(10, 2, 0)
    with pytest.raises(ValueError, match="gig-logistic only"):
        G.PGGibbsChains(GGSMProbit(), X, y)
    with pytest.raises(ValueError, match="num_warmup"):
        G.PGGibbsChains(GIGLogistic(), X, y, num_warmup=0)


@pytest.mark.long
def test_a_reference_keeps_its_compiled_programs_and_the_next_data_set_compiles_nothing(monkeypatch):
    # The Gibbs sweeps and NUTS's program (nuts_program.py) take the data as arguments,
    # compiled once per shape and reused by the next data set, so run_reference must not
    # clear JAX's caches after a run; a second data set of the same shape (another seed,
    # other labels) then compiles no program at all.
    import dataclasses

    import jax

    from zoo.validation.references import certified_run as R  # the module whose jax.clear_caches the run calls

    cleared = []
    monkeypatch.setattr(R.jax, "clear_caches", lambda: cleared.append(True))
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 3))
    y = (rng.uniform(size=30) < 0.5).astype(float)
    configs = {"pg-gibbs": R.ReferenceConfig(sampler=G.PG_GIBBS, num_warmup=100, num_samples=100, max_doublings=0),
               "nuts": R.ReferenceConfig(num_warmup=50, num_samples=50, max_doublings=0)}
    for name, config in configs.items():
        R.run_reference(GIGLogistic(), X, y, config=config)
        compiled = []

        def listener(event, duration, **_):
            if event == "/jax/core/compile/backend_compile_duration":
                compiled.append(duration)

        jax.monitoring.register_event_duration_secs_listener(listener)
        try:
            R.run_reference(GIGLogistic(), X, 1.0 - y, config=dataclasses.replace(config, seed=7))
        finally:
            jax.monitoring.unregister_event_duration_listener(listener)
        assert compiled == [], (name, compiled)
    assert cleared == []
