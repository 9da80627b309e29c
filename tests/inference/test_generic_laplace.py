"""Generic Laplace engine (inference/generic_laplace.py): a Laplace approximation in
NumPyro's unconstrained space, built from the model alone.

Known answers it is held to:
* Bayesian logistic regression with a Gaussian prior: mode against scipy's BFGS on a
  hand-written objective, covariance against the closed form
  (X^T diag(p (1 - p)) X + I / s^2)^-1;
* the hand-derived EPCVM Laplace (inference/pcvm_laplace.py) on the PCVM surrogate model;
* a conjugate positive site, lam | x ~ InvGamma(A, B): in u = log lam the log density
  (with its Jacobian) is -A u - B e^-u, so the mode is log(B / A), the variance 1 / A
  and the Laplace evidence is the exact evidence with Gamma(A) replaced by Stirling's
  formula - all closed form.

Each fit compiles one Newton program (seconds, not milliseconds), so the
fits are module fixtures shared between tests.
"""
from __future__ import annotations

import math
import re

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.nn import sigmoid
from jax.scipy.special import ndtr
from scipy.optimize import minimize
from scipy.special import expit, gammaln
from problems import ripley_subset

import zoo  # noqa: F401  (float64)
from zoo.inference import generic_laplace as gl
from zoo.inference import pcvm_laplace
from zoo.inference.posterior import ApproximationFailed, DrawsPosterior
from zoo.models.base import Site
from zoo.models.basis import pcvm_basis
from zoo.models.ggsm_probit import GGSMProbit
from zoo.models.pcvm import PCVM
from zoo.validation.records.registry import get_engine


# ---------------------------------------------------------------------------------
# Test models
# ---------------------------------------------------------------------------------
class LogisticRegression:
    """w ~ N(0, s^2 I), y_n ~ Bernoulli(sigmoid(Phi_n w))."""

    name = "logistic"

    def __init__(self, s=1.5):
        self.s = s

    def sites(self, M):
        return (Site("w", (M,), "real", ("basis",)),)

    def model(self, Phi, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, self.s).expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=Phi @ w), obs=y)

    def linear_predictor(self, params, Phi):
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        return sigmoid(f)

    def to_dict(self):
        return {"model": self.name, "s": self.s}


class InvGammaScale:
    """lam ~ InvGamma(a, b); every entry of Phi is an observation x ~ N(0, lam).
    Posterior lam | x ~ InvGamma(A, B), A = a + n/2, B = b + sum x^2 / 2 (n entries).

    The model also has a latent site the spec does not list: ``nuisance`` ~ N(0, 1),
    independent of everything (a stand-in for a hyper-parameter the spec leaves out;
    its posterior is its prior, so the known answers for lam are unchanged)."""

    name = "invgamma_scale"

    def __init__(self, a=2.0, b=1.0):
        self.a, self.b = a, b

    def sites(self, M):
        return (Site("lam", (), "positive"),)

    def model(self, Phi, y=None):
        lam = numpyro.sample("lam", dist.InverseGamma(self.a, self.b))
        numpyro.sample("nuisance", dist.Normal(0.0, 1.0))
        numpyro.sample("x", dist.Normal(0.0, jnp.sqrt(lam)).expand(Phi.shape).to_event(2), obs=Phi)

    def linear_predictor(self, params, Phi):
        return jnp.zeros(jnp.shape(params["lam"]) + (Phi.shape[0],))

    def prob(self, f):
        return ndtr(f)

    def to_dict(self):
        return {"model": self.name, "a": self.a, "b": self.b}

    def posterior(self, Phi):
        return self.a + Phi.size / 2.0, self.b + np.sum(Phi**2) / 2.0


class WrongSite(LogisticRegression):
    """spec.sites names a site ("v") the model does not have."""

    def sites(self, M):
        return (Site("v", (M,)),)


# ---------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def logistic():
    """60 points, 3 features (a constant and two N(0,1)), labels from the model: not separable."""
    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(60), rng.normal(size=(60, 2))])
    y = (rng.uniform(size=60) < expit(X @ np.array([0.3, 1.2, -0.8]))).astype(float)
    spec = LogisticRegression(s=1.5)
    return spec, X, y, gl.fit(spec, X, y)


@pytest.fixture(scope="module")
def ripley_design():
    """40 Ripley points, 5 label-signed RBF columns (the design of test_pcvm_laplace.py)."""
    X, y = ripley_subset(40, seed=1)
    cols = np.random.default_rng(1).choice(40, 5, replace=False)
    return pcvm_basis(X, y, 0.7).subset(cols).transform(X), y


def neg_log_post(w, X, y, s):
    f = X @ w
    return -np.sum(y * f - np.logaddexp(0.0, f)) + 0.5 * np.sum(w**2) / s**2


def neg_log_post_grad(w, X, y, s):
    return -X.T @ (y - expit(X @ w)) + w / s**2


# ---------------------------------------------------------------------------------
# 1. Logistic regression: the analytic Laplace
# ---------------------------------------------------------------------------------
def test_logistic_mode_matches_scipy_and_covariance_matches_closed_form(logistic):
    spec, X, y, post = logistic
    info = post.info
    assert isinstance(post, DrawsPosterior) and info.engine == "auto-laplace" and info.converged
    assert info.objective == gl.OBJECTIVE_NAME
    assert info.extra["layout"] == [("w", (3,))]
    mode = info.extra["mode"]

    res = minimize(neg_log_post, np.zeros(3), args=(X, y, spec.s), jac=neg_log_post_grad,
                   method="BFGS", options={"gtol": 1e-8})
    assert res.success
    # both are within far less than 1e-6 of the exact mode: the engine stops at a Newton
    # decrement of 1e-6 posterior sd (sd here ~0.2-0.4, so < 1e-6 in w), BFGS at
    # |grad| <= 1e-8 (error <= ||Sigma||_2 sqrt(3) 1e-8 < 1e-8)
    np.testing.assert_allclose(mode, res.x, rtol=0, atol=1e-6)
    assert info.extra["newton_decrement"] <= 1e-6
    assert np.max(np.abs(neg_log_post_grad(mode, X, y, spec.s))) < 1e-6
    assert np.max(np.abs(res.x)) > 0.3  # the mode is not the prior mode 0

    p = expit(X @ mode)
    cov_exact = np.linalg.inv((X.T * (p * (1 - p))) @ X + np.eye(3) / spec.s**2)
    cov = np.linalg.inv(info.extra["precision"])
    # the same point, autodiff against the closed form: only round-off separates them
    # (~1e-14 relative); 1e-8 leaves room for the inversion of a condition ~10 matrix
    np.testing.assert_allclose(cov, cov_exact, rtol=1e-8, atol=0)
    np.testing.assert_allclose(info.extra["mode_constrained"]["w"], mode, rtol=0, atol=0)  # identity transform

    # the trace is the log joint per Newton step, non-decreasing, ending at the mode
    assert info.trace.shape == (info.n_iter + 1,) and 2 <= info.n_iter <= 20
    assert np.all(np.diff(info.trace) >= 0)
    log_joint_mode = -neg_log_post(mode, X, y, spec.s) - 1.5 * math.log(2 * math.pi * spec.s**2)
    assert info.trace[-1] == pytest.approx(log_joint_mode, abs=1e-10)
    assert info.extra["log_joint_at_mode"] == pytest.approx(log_joint_mode, abs=1e-10)
    _, logdet = np.linalg.slogdet(cov_exact)
    assert info.extra["log_evidence_laplace"] == pytest.approx(
        log_joint_mode + 1.5 * math.log(2 * math.pi) + 0.5 * logdet, abs=1e-9)


# ---------------------------------------------------------------------------------
# 3. The draws are the Gaussian
# ---------------------------------------------------------------------------------
def test_draws_have_the_mode_and_covariance_within_monte_carlo_error(logistic):
    spec, X, y, post = logistic
    w = post.draws["w"]
    assert w.shape == (1, 4000, 3)
    flat = w[0]
    n = flat.shape[0]
    mode = post.info.extra["mode"]
    cov = np.linalg.inv(post.info.extra["precision"])
    sd = np.sqrt(np.diag(cov))
    # the sample mean has sd sd/sqrt(n): 4 of those is a 6e-5 two-sided chance per coordinate
    assert np.all(np.abs(flat.mean(0) - mode) < 4 * sd / math.sqrt(n))
    # a sample covariance entry has sd sqrt((S_ii S_jj + S_ij^2) / n) for Gaussian draws
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(np.cov(flat.T) - cov) < 4 * se)
    # L z instead of L^-T z would give the precision, not the covariance: far outside 4 se
    assert np.max(np.abs(post.info.extra["precision"] - cov) / se) > 40


def test_same_seed_same_draws_and_warm_call_does_not_compile(logistic):
    spec, X, y, post = logistic
    again = gl.fit(spec, X, y)
    np.testing.assert_array_equal(again.draws["w"], post.draws["w"])
    assert again.info.compile_seconds == 0.0 and again.info.seconds > 0
    other = gl.fit(spec, X, y, config=gl.GenericLaplaceConfig(seed=1, n_draws=10))
    assert other.draws["w"].shape == (1, 10, 3)
    assert not np.allclose(other.draws["w"][0], post.draws["w"][0, :10])
    # the mode does not depend on the start (strictly concave) up to the tolerance
    np.testing.assert_allclose(other.info.extra["mode"], post.info.extra["mode"], atol=1e-6)


# ---------------------------------------------------------------------------------
# 2. Against the hand-derived EPCVM Laplace on the PCVM surrogate
# ---------------------------------------------------------------------------------
@pytest.mark.long
def test_pcvm_surrogate_agrees_with_the_hand_derived_laplace(ripley_design):
    Phi, y = ripley_design
    spec = PCVM(alpha=np.array([0.3, 1.0, 2.0, 0.5, 4.0]), alpha_bias=0.2, surrogate=True)
    post = gl.fit(spec, Phi, y)
    ref = pcvm_laplace.fit(spec, Phi, y)
    assert ref.info.converged and ref.info.extra["jitter"] == 0.0
    assert post.info.extra["layout"] == [("b", ()), ("w", (5,))]  # = laplace's theta = [b, w]
    # the surrogate has real support: both Gaussians live in theta itself
    mode, cov = post.info.extra["mode"], np.linalg.inv(post.info.extra["precision"])
    # pcvm_laplace.py stops at max|grad| <= 1e-6 (its own tolerance), so its mode is within
    # ||Sigma||_2 ||g||_2 <= lambda_max(Sigma) sqrt(d) 1e-6 of the exact mode; ours is
    # within 1e-6 sd (smaller). Covariances at two points that close differ by O(1e-6)
    # relative (the Hessian changes smoothly); 1e-5 of the largest entry leaves room.
    bound = np.linalg.eigvalsh(ref.cov)[-1] * math.sqrt(6) * 1e-6
    np.testing.assert_allclose(mode, ref.mean_vec, rtol=0, atol=bound)
    np.testing.assert_allclose(cov, ref.cov, rtol=0, atol=1e-5 * np.max(np.abs(ref.cov)))
    # the draws are of the spec's sites, in the spec's shapes
    assert post.draws["b"].shape == (1, 4000) and post.draws["w"].shape == (1, 4000, 5)
    # pcvm_laplace.py reports the evidence of the *normalized* surrogate prior
    # 2 N(w | 0, 1/alpha) sigma(3 w); the model as written lacks the factor 2 per weight
    assert post.info.extra["log_evidence_laplace"] + 5 * math.log(2.0) == pytest.approx(
        ref.info.extra["log_evidence"], abs=1e-6)


# ---------------------------------------------------------------------------------
# 4. Positive sites: Gaussian in log space, centred at the mode with the Jacobian
# ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(5)
    Phi = rng.normal(scale=1.7, size=(12, 2))
    y = np.arange(12) % 2
    spec = InvGammaScale(a=2.0, b=1.0)
    return spec, Phi, y, gl.fit(spec, Phi, y)


def test_positive_site_is_lognormal_at_the_mode_of_the_log_density(toy):
    spec, Phi, y, post = toy
    A, B = spec.posterior(Phi)
    lam = post.draws["lam"]
    assert lam.shape == (1, 4000) and np.all(lam > 0)
    mode = post.info.extra["mode"]  # [log lam, nuisance]
    # in u = log lam: -A u - B e^-u, mode log(B / A), curvature A. Newton's tolerance
    # puts the mode within 1e-6 sd = 1e-6 / sqrt(A) of it; the Hessian there is A up to
    # the same relative amount
    assert mode[0] == pytest.approx(math.log(B / A), abs=1e-6 / math.sqrt(A))
    lam_mode = float(post.info.extra["mode_constrained"]["lam"])
    assert lam_mode == pytest.approx(B / A, rel=1e-6)
    assert lam_mode == pytest.approx(math.exp(mode[0]), rel=1e-14)
    # the mode of lam's own density, B / (A + 1), is 1/(A + 1) ~ 7% away: far outside
    assert abs(B / (A + 1) / (B / A) - 1) > 0.05
    np.testing.assert_allclose(post.info.extra["precision"], np.diag([A, 1.0]), rtol=1e-6, atol=1e-12)
    # the draws: log lam ~ N(log(B / A), 1 / A) within Monte Carlo error (4 standard
    # errors; the sample sd of n Gaussian draws has relative sd sqrt(1 / (2 n)))
    u = np.log(lam[0])
    assert abs(u.mean() - math.log(B / A)) < 4 / math.sqrt(A) / math.sqrt(u.size)
    assert u.std(ddof=1) == pytest.approx(1 / math.sqrt(A), rel=4 * math.sqrt(0.5 / u.size))
    # the Laplace evidence of exp(-A u - B e^-u) is Gamma(A) / B^A with Stirling's
    # log Gamma(A) ~ (A - 1/2) log A - A + log(2 pi)/2 (the nuisance integrates to 1,
    # exactly, as a Gaussian). Off by at most half the mode's error 1e-6 / sqrt(A) (the
    # log det moves by the mode error), far below the Stirling gap ~1 / (12 A) = 6e-3
    log_prior_norm = spec.a * math.log(spec.b) - gammaln(spec.a) - 0.5 * Phi.size * math.log(2 * math.pi)
    stirling = (A - 0.5) * math.log(A) - A + 0.5 * math.log(2 * math.pi)
    expected = log_prior_norm + stirling - A * math.log(B)
    assert post.info.extra["log_evidence_laplace"] == pytest.approx(expected, abs=1e-6)
    exact = log_prior_norm + gammaln(A) - A * math.log(B)
    assert abs(expected - exact) > 1e-3  # the test can tell Laplace from exact


def test_latent_sites_the_spec_does_not_list_are_reported_by_their_mode(toy):
    _, _, _, post = toy
    assert set(post.draws) == {"lam"}
    assert post.info.extra["layout"] == [("lam", ()), ("nuisance", ())]
    assert set(post.info.extra["mode_constrained"]) == {"lam"}
    # its posterior is N(0, 1): mode 0 up to Newton's tolerance (1e-6 sd)
    assert abs(float(post.info.extra["other_sites_mode"]["nuisance"])) < 1e-6


@pytest.mark.long
def test_pcvm_truncated_weights_are_positive_in_every_draw(ripley_design):
    """PCVM (probit, w >= 0): NumPyro samples w through log, so the Gaussian is in log w."""
    Phi, y = ripley_design
    spec = PCVM(alpha=np.array([0.3, 1.0, 2.0, 0.5, 4.0]), alpha_bias=0.2)
    post = gl.fit(spec, Phi, y)
    w = post.draws["w"]
    assert np.all(w > 0) and np.all(np.isfinite(w))
    mode = post.info.extra["mode"]  # [b, log w]
    np.testing.assert_allclose(np.log(post.info.extra["mode_constrained"]["w"]), mode[1:], rtol=1e-12)
    assert float(post.info.extra["mode_constrained"]["b"]) == mode[0]
    # log w is the Gaussian coordinate: its sample mean is within 4 sd / sqrt(n) of the mode
    sd = np.sqrt(np.diag(np.linalg.inv(post.info.extra["precision"])))
    assert np.all(np.abs(np.log(w[0]).mean(0) - mode[1:]) < 4 * sd[1:] / math.sqrt(w.shape[1]))
    assert post.predict_proba(Phi).shape == (40,)


def test_a_spec_site_the_model_lacks_is_a_clear_error(logistic):
    _, X, y, _ = logistic
    with pytest.raises(ValueError, match=r"spec\.sites lists \['v'\].*latent sites: \['w'\]"):
        gl.fit(WrongSite(), X, y)


# ---------------------------------------------------------------------------------
# 5. Failure where no Laplace approximation exists
# ---------------------------------------------------------------------------------
# long: a full optimisation that must end in a refusal (more than the default tier's few seconds)
@pytest.mark.long
def test_ggsm_q_half_has_no_laplace_approximation(ripley_design):
    """GGSM at q = 0.5: the prior -|w|^0.5 / lam has an infinite slope at w = 0 and is
    convex around it (curvature +q (1 - q) |w|^(q-2) / lam). On this small design the
    likelihood does not pin every weight down, so the ascent drives weights into the cusp:
    there the gradient does not vanish and -H has eigenvalues -> -inf. No point with zero
    gradient and negative definite Hessian is reached, and the engine must say so.
    (Checked by hand: seeds 0 and 1 with the "uniform" and "median" starts all fail the
    same way, the failing direction always a weight within 0.005 of 0.)"""
    Phi, y = ripley_design
    with pytest.raises(ApproximationFailed) as err:
        gl.fit(GGSMProbit(q=0.5), Phi, y)
    msg = str(err.value)
    assert msg.startswith("auto-laplace:")
    assert "not positive definite" in msg and "smallest eigenvalue of -H = -" in msg
    assert "iterations = " in msg and "max |gradient| = " in msg
    # the reason is the cusp: the failing direction is a weight next to 0
    m = re.search(r"mostly along w\[\d\] \(unconstrained value ([-0-9.e+]+)\)", msg)
    assert m is not None, msg
    assert abs(float(m.group(1))) < 0.01


def test_iteration_cap_is_a_failure_with_its_numbers(toy):
    spec, Phi, y, _ = toy
    with pytest.raises(ApproximationFailed, match=r"did not converge within max_iter = 1 steps.*iterations = 1"):
        gl.fit(spec, Phi, y, config=gl.GenericLaplaceConfig(max_iter=1))


# ---------------------------------------------------------------------------------
# 6. Configuration, inputs, registry
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("field,value", [
    ("max_iter", 0), ("max_iter", 2.0), ("max_iter", True),
    ("grad_tol", 0.0), ("grad_tol", -1e-6), ("grad_tol", float("nan")), ("grad_tol", "1e-6"),
    ("n_draws", 1), ("n_draws", 10.0),
    ("seed", -1), ("seed", 2**32), ("seed", 0.5),
    ("init", "zeros"), ("init", None),
])
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ValueError, match=rf"GenericLaplaceConfig\.{field} must"):
        gl.GenericLaplaceConfig(**{field: value})


def test_every_init_strategy_is_accepted():
    for name in gl.INIT_STRATEGIES:
        assert gl.GenericLaplaceConfig(init=name).init == name


def test_bad_inputs_fail_at_the_door(logistic):
    spec, X, y, _ = logistic
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gl.fit(spec, bad, y)
    with pytest.raises(ValueError, match="labels"):
        gl.fit(spec, X, y[:-1])
    with pytest.raises(TypeError, match="GenericLaplaceConfig"):
        gl.fit(spec, X, y, config={"max_iter": 5})


def test_registered_as_auto_laplace_for_pcvm_and_ggsm():
    for model in ("pcvm", "ggsm-probit"):
        entry = get_engine(model, "auto-laplace")
        assert entry.kind == "draws" and entry.end_to_end is None and entry.other_model is None
        assert entry.fit() is gl.fit
        with pytest.raises(ValueError, match="no end-to-end mode"):
            entry.fit_end_to_end()


def test_one_name_for_the_generic_laplace_in_every_record():
    """Every model registers generic_laplace.fit once as ``auto-laplace`` (a variant's run
    as ``auto-laplace-<variant>``), under the FitInfo label it passes, and no other name."""
    from zoo.validation.records import registry
    for model in registry.model_names():
        generic = [e for e in registry.get_model(model).engines if e.fixed == "generic_laplace:fit"]
        assert [e.name for e in generic if e.variant is None] == ["auto-laplace"], model
        for e in generic:
            assert dict(e.options).get("name", gl.ENGINE_NAME) == e.name, (model, e.name)
            assert e.name == "auto-laplace" + (f"-{e.variant}" if e.variant else ""), (model, e.name)
