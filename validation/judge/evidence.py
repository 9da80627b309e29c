"""The evidence judged: the model's log marginal likelihood from its certified reference draws.

Several engines report a log marginal likelihood log Z = log p(y) or a bound on it (EP's
log Z, the Laplace evidence of EPCVM and of the generic Laplace, the ELBO of mean-field VB
and of the ADVI families), and some choose hyper-parameters or basis functions by it. How
far each is from the model's own log Z was not measured. This module computes a reference
log Z of the *same* model (the NumPyro program NUTS samples, every normalizer and factor
as written) with a Monte Carlo error, by two independent estimators that must agree
before it is used (DERIVATIONS.md §11):

- **bridge sampling** (Meng & Wong 1996) from the reference draws: a Gaussian proposal g
  fitted to the first half of every chain in NumPyro's unconstrained coordinates, the
  iterative optimal bridge between the second halves and as many draws of g, and the
  relative error of Frühwirth-Schnatter (2004), with the autocorrelation of the
  posterior-side term counted through its effective sample size;
- **annealed importance sampling** (Neal 2001) from the same Gaussian to the posterior
  along the geometric path g^(1 - beta) p(y, theta)^beta, HMC moves in the coordinates
  that whiten g; its error from the weights' spread, trusted only where their Pareto
  k-hat is below the threshold for that many particles.

The two share the proposal's mean and covariance and nothing else: bridge sampling uses
the posterior draws directly, AIS never touches them after fitting g. Where they disagree
by more than their joint error, the reference log Z is not certified and no engine's value
is judged against it. On a model of one or two latent dimensions the integral is also done
by quadrature (:func:`quadrature_log_evidence`), which is how the estimators and their
errors are tested.

The verdict (:func:`evidence_verdict`): an engine's estimate of log Z differs where
``|value - log Z_ref| > z_(1 - alpha/2) se_ref``; a lower bound (an ELBO) is violated where
``value - log Z_ref > z_(1 - alpha) se_ref``, and its gap log Z_ref - value (the KL divergence
of q from the posterior, for an exact ELBO) is reported. An exact value is flagged with
probability alpha as far as se_ref is a calibrated standard error (measured in
``benchmarks/evidence.py`` against quadrature).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.distributions import biject_to
from numpyro.infer.util import initialize_model
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import norm

from ...inference.importance import khat_threshold, psis
from ...models.base import as_jax, checked_problem
from ..base import arviz_adapter as adapter
from ..references.nuts_program import sampled_site_names
from .verdict import DIFFERS, FALSE_ALARM, INDISTINGUISHABLE, NOT_APPLICABLE

#: a lower bound above the reference log Z by more than its error
VIOLATES_BOUND = "violates the bound"
#: a lower bound not above the reference log Z
CONSISTENT_BOUND = "consistent bound"
#: how an engine's number relates to log Z
ESTIMATE, LOWER_BOUND = "estimate", "lower bound"
KINDS = (ESTIMATE, LOWER_BOUND)
#: ridge added to the proposal's covariance, relative to its mean variance
PROPOSAL_RIDGE = 1e-8
#: fewer posterior draws per half than this: no bridge estimate
MIN_BRIDGE_DRAWS = 100


# ----------------------------------------------------------------------------------------
# The model's density in unconstrained coordinates
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnconstrainedDensity:
    """``log p(y, T(z)) + log |J_T(z)|`` of a NumPyro model, z its flat unconstrained latents.

    Its integral over z is the evidence p(y): a change of variables does not change an
    integral, and the Jacobian is part of NumPyro's potential energy.

    log_joint: ``(n, d) -> (n,)``, jitted. log_joint_one: ``(d,) -> ()`` (for gradients).
    to_unconstrained: ``{site: (n, *shape)}`` constrained draws -> ``(n, d)``.
    names: the latent sites, in the flat order. dim: d.
    """

    log_joint: Callable
    log_joint_one: Callable
    to_unconstrained: Callable
    names: tuple[str, ...]
    dim: int


def unconstrained_density(spec, Phi, y) -> UnconstrainedDensity:
    """The :class:`UnconstrainedDensity` of ``spec.model`` on (Phi, y): every latent
    site the model samples (not only its measured sites), so the integral is p(y)."""
    Phi_np, y_np = checked_problem(spec, Phi, y)
    if y_np is None:
        raise ValueError("the evidence needs labels y")
    Phi_j, y_j = as_jax(Phi_np), as_jax(y_np)
    info = initialize_model(jax.random.PRNGKey(0), spec.model, model_args=(Phi_j,), model_kwargs={"y": y_j})
    template = info.param_info.z
    _, unravel = ravel_pytree(template)
    transforms = {name: biject_to(info.model_trace[name]["fn"].support) for name in template}
    potential = info.potential_fn

    def one(z):
        return -potential(unravel(z))

    def unconstrain_one(draw):
        return ravel_pytree({k: transforms[k].inv(draw[k]) for k in template})[0]

    log_joint = jax.jit(jax.vmap(one))
    to_u = jax.jit(jax.vmap(unconstrain_one))
    dim = int(ravel_pytree(template)[0].size)
    return UnconstrainedDensity(
        log_joint=lambda z: np.asarray(log_joint(jnp.asarray(z))),
        log_joint_one=one,
        to_unconstrained=lambda draws: np.asarray(to_u({k: jnp.asarray(draws[k]) for k in template})),
        names=tuple(template), dim=dim)


def reference_chains(density: UnconstrainedDensity, idata) -> np.ndarray:
    """The reference's draws of every latent site, unconstrained: (chains, draws, d)."""
    draws = adapter.posterior_variables(idata, density.names)
    chains, n = next(iter(draws.values())).shape[:2]
    flat = {k: v.reshape(chains * n, *v.shape[2:]) for k, v in draws.items()}
    return density.to_unconstrained(flat).reshape(chains, n, density.dim)


# ----------------------------------------------------------------------------------------
# The estimates
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvidenceEstimate:
    """log Z with its standard error, from one method; ``log_z`` None with ``reason``
    where the method could not give one. ``details``: what it was computed from."""

    method: str
    log_z: float | None
    se: float | None
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The estimate as a plain dict of its fields, the JSON form stored in result files
        (inside :meth:`ReferenceEvidence.to_json`, which reads it back field by field)."""
        return asdict(self)


@dataclass(frozen=True)
class GaussianProposal:
    """N(mean, L L') in unconstrained coordinates: draws and log density."""

    mean: np.ndarray
    chol: np.ndarray

    @classmethod
    def fitted(cls, z: np.ndarray) -> "GaussianProposal":
        """Mean and covariance of draws z (n, d), with a small ridge so that the Cholesky
        factor exists where a coordinate barely moves."""
        z = np.asarray(z, dtype=float)
        cov = np.atleast_2d(np.cov(z, rowvar=False))
        cov = cov + PROPOSAL_RIDGE * max(float(np.mean(np.diag(cov))), 1e-300) * np.eye(cov.shape[0])
        return cls(z.mean(axis=0), np.linalg.cholesky(cov))

    @property
    def log_det_chol(self) -> float:
        """``log det L``, the sum of the logs of the Cholesky factor's diagonal: half the log
        determinant of the covariance."""
        return float(np.sum(np.log(np.diag(self.chol))))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` independent draws from the proposal, drawn with ``rng``, shape (n, d)."""
        return self.mean + rng.standard_normal((n, self.mean.size)) @ self.chol.T

    def log_density(self, z: np.ndarray) -> np.ndarray:
        """The proposal's normalized log density at each row of ``z`` (n, d), shape (n,)."""
        u = np.linalg.solve(self.chol, (np.asarray(z) - self.mean).T).T
        d = self.mean.size
        return -0.5 * np.sum(u * u, axis=1) - 0.5 * d * math.log(2 * math.pi) - self.log_det_chol


def _log_mean_exp(x: np.ndarray) -> float:
    return float(logsumexp(x) - math.log(x.size))


def bridge_sampling(density: UnconstrainedDensity, chains: np.ndarray, *, seed: int = 0,
                    tol: float = 1e-10, max_iter: int = 1000) -> EvidenceEstimate:
    """log Z by the optimal bridge (Meng & Wong 1996, their eq. 4.1; its fixed point found as
    the root of the estimating equation, below) between the
    second halves of the reference chains (C, S, d) and as many draws of a Gaussian fitted
    to the first halves. Standard error: Frühwirth-Schnatter (2004), the relative MSE of
    the bridge estimator with the posterior-side term's variance inflated by N1 / ESS."""
    t0 = time.perf_counter()
    chains = np.asarray(chains, dtype=float)
    C, S, d = chains.shape
    half = S // 2
    if C * (S - half) < MIN_BRIDGE_DRAWS:
        return EvidenceEstimate("bridge sampling", None, None, 0.0,
                                reason=f"{C * (S - half)} posterior draws in the second halves; "
                                       f"bridge sampling needs {MIN_BRIDGE_DRAWS}")
    g = GaussianProposal.fitted(chains[:, :half].reshape(-1, d))
    post = chains[:, half:]
    n1 = post.shape[0] * post.shape[1]
    n2 = n1
    rng = np.random.default_rng(seed)
    prop = g.sample(rng, n2)
    l1 = density.log_joint(post.reshape(-1, d)) - g.log_density(post.reshape(-1, d))
    l2 = density.log_joint(prop) - g.log_density(prop)
    if not np.all(np.isfinite(l1)):
        return EvidenceEstimate("bridge sampling", None, None, time.perf_counter() - t0,
                                reason="the model's log density is not finite at some reference draws")
    # proposal draws where the model has no density (outside its support) contribute 0
    l2 = np.where(np.isfinite(l2), l2, -np.inf)
    # the effective number of posterior draws sets the bridge's weights (Meng & Schilling 2002)
    ess1 = min(adapter.ess_bulk(l1.reshape(post.shape[0], post.shape[1])), float(n1))
    log_s1, log_s2 = math.log(ess1 / (ess1 + n2)), math.log(n2 / (ess1 + n2))
    # The optimal bridge's estimating equation (the fixed point of Meng & Wong's eq. 4.1
    # iteration), G(r) = mean_j r / (s1 l1_j + s2 r) - mean_i l2_i / (s1 l2_i + s2 r) = 0, has
    # one root: G rises from -(share of finite l2) / s1 to 1 / s2 as r goes from 0 to
    # infinity. Solved by bracketing in log r, which converges where the plain iteration
    # crawls (poor overlap of g and the posterior makes its contraction slow).
    def G(lr):
        first = np.mean(np.exp(lr - np.logaddexp(log_s1 + l1, log_s2 + lr)))
        second = np.mean(np.exp(l2 - np.logaddexp(log_s1 + l2, log_s2 + lr)))
        return first - second

    finite = np.concatenate([l1, l2[np.isfinite(l2)]])
    lo, hi = float(finite.min()) - 50.0, float(finite.max()) + 50.0
    if not (G(lo) < 0 < G(hi)):
        return EvidenceEstimate("bridge sampling", None, None, time.perf_counter() - t0,
                                reason="no proposal draw has a finite density under the model")
    lz = float(brentq(G, lo, hi, xtol=tol, maxiter=max_iter))
    # Frühwirth-Schnatter (2004): f1 at posterior draws, f2 at proposal draws, both
    # with the normalized posterior p/Z; RE^2 = V(f2)/(N2 E(f2)^2) + (N1/ESS) V(f1)/(N1 E(f1)^2)
    s1, s2 = math.exp(log_s1), math.exp(log_s2)
    f1 = 1.0 / (s1 * np.exp(np.minimum(l1 - lz, 700.0)) + s2)
    r2 = np.exp(np.minimum(l2 - lz, 700.0))
    f2 = r2 / (s1 * r2 + s2)
    f1_chains = f1.reshape(post.shape[0], post.shape[1])
    ess_f1 = min(adapter.ess_bulk(f1_chains), float(n1)) if np.ptp(f1) > 0 else float(n1)
    re2 = float(np.var(f2) / (n2 * np.mean(f2) ** 2) + np.var(f1) / (ess_f1 * np.mean(f1) ** 2))
    return EvidenceEstimate(
        "bridge sampling", float(lz), math.sqrt(re2), time.perf_counter() - t0,
        details={"posterior_draws": int(n1), "proposal_draws": int(n2), "ess_posterior_term": float(ess_f1),
                 "dimension": int(d),
                 "proposal_outside_support": float(np.mean(~np.isfinite(l2)))})


def _whitened_target(density: UnconstrainedDensity, g: GaussianProposal):
    mean, chol, log_det = jnp.asarray(g.mean), jnp.asarray(g.chol), g.log_det_chol

    def log_target(u):
        return density.log_joint_one(mean + chol @ u) + log_det

    return log_target


#: AIS: the mean acceptance probability its step size is steered towards
AIS_TARGET_ACCEPT = 0.65
#: AIS: how fast log(step size) follows the acceptance (per temperature)
AIS_ADAPT_RATE = 1.0


def annealed_importance_sampling(density: UnconstrainedDensity, chains: np.ndarray, *, seed: int = 0,
                                 particles: int = 256, temperatures: int = 200, leapfrog_steps: int = 8,
                                 step_size: float | None = None) -> EvidenceEstimate:
    """log Z by AIS (Neal 2001) from a Gaussian g fitted to all reference draws to the
    posterior along g^(1-beta) p^beta, beta on a sigmoid ladder of ``temperatures`` steps,
    one HMC move (``leapfrog_steps`` leapfrog steps in coordinates that make g standard
    normal) of every particle per temperature. The step size starts at ``step_size``
    (default 0.5 d^(-1/4)) and follows the particles' mean acceptance probability at the
    previous temperature towards AIS_TARGET_ACCEPT: a posterior far from g (a funnel, a
    Laplace prior's kink) needs much smaller steps than one close to it, and a fixed step
    that is never accepted leaves the particles where g put them. log Z = log mean w; its
    standard error by the delta method, sd(w) / (sqrt(n) mean(w)), trusted where the
    weights' Pareto k-hat is at most min(1 - 1/log10 n, 0.7)."""
    t0 = time.perf_counter()
    chains = np.asarray(chains, dtype=float)
    d = chains.shape[-1]
    g = GaussianProposal.fitted(chains.reshape(-1, d))
    log_target = _whitened_target(density, g)
    const = -0.5 * d * math.log(2 * math.pi)
    first_step = 0.5 * d ** -0.25 if step_size is None else float(step_size)

    def log_base(u):
        return -0.5 * jnp.sum(u * u) + const

    # sigmoid ladder (Grosse et al. 2013): finer at both ends, where the log weights move most
    x = np.linspace(-4.0, 4.0, temperatures + 1)
    sig = 1.0 / (1.0 + np.exp(-x))
    betas = jnp.asarray((sig - sig[0]) / (sig[-1] - sig[0]))

    def log_pi(u, beta):
        return (1.0 - beta) * log_base(u) + beta * log_target(u)

    grad_pi = jax.grad(log_pi)

    def hmc(u, beta, key, eps):
        k_mom, k_acc = jax.random.split(key)
        p0 = jax.random.normal(k_mom, u.shape)

        def leap(_, state):
            q, p = state
            p = p + 0.5 * eps * grad_pi(q, beta)
            q = q + eps * p
            p = p + 0.5 * eps * grad_pi(q, beta)
            return q, p

        q, p = jax.lax.fori_loop(0, leapfrog_steps, leap, (u, p0))
        log_accept = log_pi(q, beta) - 0.5 * jnp.sum(p * p) - log_pi(u, beta) + 0.5 * jnp.sum(p0 * p0)
        log_accept = jnp.where(jnp.isfinite(log_accept), jnp.minimum(log_accept, 0.0), -jnp.inf)
        accept = jnp.log(jax.random.uniform(k_acc)) < log_accept
        return jnp.where(accept, q, u), jnp.exp(log_accept)

    moves = jax.vmap(hmc, in_axes=(0, None, 0, None))
    log_ratio = jax.vmap(lambda u: log_target(u) - log_base(u))

    def run(key):
        k0, k_run = jax.random.split(key)
        u0 = jax.random.normal(k0, (particles, d))

        def step(carry, inputs):
            u, log_w, log_eps = carry
            beta_prev, beta, k = inputs
            log_w = log_w + (beta - beta_prev) * log_ratio(u)
            u, accept_prob = moves(u, beta, jax.random.split(k, particles), jnp.exp(log_eps))
            rate = jnp.mean(accept_prob)
            log_eps = log_eps + AIS_ADAPT_RATE * (rate - AIS_TARGET_ACCEPT)
            return (u, log_w, log_eps), (rate, jnp.exp(log_eps))

        keys = jax.random.split(k_run, temperatures)
        (_, log_w, _), (rates, steps) = jax.lax.scan(
            step, (u0, jnp.zeros(particles), jnp.log(first_step)), (betas[:-1], betas[1:], keys))
        return log_w, rates, steps

    log_w, rates, steps = jax.jit(run)(jax.random.PRNGKey(seed))
    acc = np.asarray(rates)
    log_w = np.asarray(log_w, dtype=float)
    seconds = time.perf_counter() - t0
    finite = np.isfinite(log_w)
    if finite.sum() < particles:
        return EvidenceEstimate("annealed importance sampling", None, None, seconds,
                                reason=f"{particles - int(finite.sum())} of {particles} particles ended with a "
                                       "non-finite weight")
    lz = _log_mean_exp(log_w)
    w = np.exp(log_w - log_w.max())
    rel = float(np.std(w) / (math.sqrt(particles) * np.mean(w)))
    khat = psis(log_w)[1]  # 0 for equal weights (no tail)
    threshold = khat_threshold(particles)
    details = {"particles": particles, "temperatures": temperatures, "leapfrog_steps": leapfrog_steps,
               "first_step_size": first_step, "last_step_size": float(np.asarray(steps)[-1]),
               "acceptance": float(np.mean(acc)), "khat": float(khat),
               "khat_threshold": threshold, "dimension": int(d)}
    if not khat <= threshold:
        return EvidenceEstimate("annealed importance sampling", None, None, seconds, details,
                                reason=f"the AIS weights' Pareto k-hat {khat:.2f} exceeds {threshold:.2f} "
                                       f"(the threshold for {particles} particles): their mean is not reliable")
    return EvidenceEstimate("annealed importance sampling", lz, rel, seconds, details)


#: quadrature: the log density at the grid's edge must be this far below its peak
QUADRATURE_EDGE_DROP = 30.0
#: quadrature: the widest grid tried, in sds of the reference draws
QUADRATURE_MAX_WIDTH = 160.0
#: quadrature: log densities evaluated per call
QUADRATURE_CHUNK = 200_000


def quadrature_log_evidence(density: UnconstrainedDensity, chains: np.ndarray, *, points_per_sd: int = 8,
                            width: float = 10.0) -> EvidenceEstimate:
    """log Z by the trapezoidal rule on a grid over the reference draws' mean +- ``width``
    sds, in the coordinates that make their covariance the identity (so that the grid
    follows a correlated posterior), ``points_per_sd`` points per sd. The grid is widened
    (doubled, up to QUADRATURE_MAX_WIDTH) until the log density at its edge lies
    QUADRATURE_EDGE_DROP below its peak: a posterior with heavy tails (BBLR's bounded
    likelihood under a Laplace-like prior) needs more room than a Gaussian. Models of one
    or two latent dimensions only. The error stated is the change from a grid with half
    the points per axis (the trapezoidal rule converges fast on a smooth integrand that
    has vanished at the grid's edge)."""
    t0 = time.perf_counter()
    chains = np.asarray(chains, dtype=float)
    d = chains.shape[-1]
    if d > 2:
        raise ValueError(f"quadrature is for models of 1 or 2 latent dimensions; this one has {d}")
    g = GaussianProposal.fitted(chains.reshape(-1, d))

    def on_grid(n, half_width):
        axis = np.linspace(-half_width, half_width, n)
        cell = (axis[1] - axis[0]) ** d
        grids = np.meshgrid(*([axis] * d), indexing="ij")
        u = np.stack([x.ravel() for x in grids], axis=1)
        z = g.mean + u @ g.chol.T
        lp = np.concatenate([density.log_joint(z[i:i + QUADRATURE_CHUNK])
                             for i in range(0, z.shape[0], QUADRATURE_CHUNK)]) + g.log_det_chol
        lp = np.where(np.isfinite(lp), lp, -np.inf).reshape((n,) * d)
        # trapezoid weights: half at both ends of every axis
        w1 = np.full(n, 0.0)
        w1[[0, -1]] = math.log(0.5)
        lw = sum(w1.reshape([-1 if i == j else 1 for j in range(d)]) for i in range(d))
        edge = max(float(np.max(np.take(lp, idx, axis=a))) for a in range(d) for idx in (0, -1))
        return float(logsumexp(lp + lw) + math.log(cell)), edge - float(np.max(lp))

    while True:
        points = int(2 * width * points_per_sd) + 1
        fine, drop = on_grid(points, width)
        if drop < -QUADRATURE_EDGE_DROP or width >= QUADRATURE_MAX_WIDTH:
            break
        width *= 2
    coarse, _ = on_grid(points // 2 + 1, width)
    details = {"points_per_axis": points, "width_sds": width, "dimension": int(d),
               "log_density_at_edge_minus_peak": drop}
    if drop >= -QUADRATURE_EDGE_DROP:
        return EvidenceEstimate("quadrature", None, None, time.perf_counter() - t0, details,
                                reason=f"the log density at the edge of a grid of +-{width:g} sds is only "
                                       f"{-drop:.1f} below its peak: the tails do not fit")
    return EvidenceEstimate("quadrature", fine, abs(fine - coarse), time.perf_counter() - t0, details)


# ----------------------------------------------------------------------------------------
# The reference log Z and the verdict
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceEvidence:
    """The reference log Z: the bridge estimate, certified where AIS agrees with it
    within z_(1 - alpha/2) of their joint error. ``log_z``/``se``: the bridge's."""

    bridge: EvidenceEstimate
    ais: EvidenceEstimate
    certified: bool
    reason: str
    false_alarm: float = FALSE_ALARM
    # False: AIS was not run (bridge sampling alone was asked for, as ``zoo compare`` does by
    # default): never certified, yet engines are judged against the bridge's value and
    # error, their verdicts saying so (:func:`evidence_verdict`)
    checked: bool = True

    @property
    def log_z(self) -> float | None:
        """The reference log Z: the bridge estimate's (None where bridge sampling gave none)."""
        return self.bridge.log_z

    @property
    def se(self) -> float | None:
        """The Monte Carlo standard error of ``log_z``: the bridge estimate's."""
        return self.bridge.se

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored in result files: both estimates, ``certified``, ``checked``, the
        reason and the false-alarm rate, plus ``log_z`` and ``se`` for a reader of the file
        (:meth:`from_json` ignores those two: they are the bridge's)."""
        return {"bridge": self.bridge.to_json(), "ais": self.ais.to_json(), "certified": self.certified,
                "checked": self.checked, "reason": self.reason, "false_alarm": self.false_alarm,
                "log_z": self.log_z, "se": self.se}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ReferenceEvidence":
        """The inverse of :meth:`to_json` (a stored reference log Z read back)."""
        return cls(EvidenceEstimate(**d["bridge"]), EvidenceEstimate(**d["ais"]), bool(d["certified"]),
                   d["reason"], float(d.get("false_alarm", FALSE_ALARM)), bool(d.get("checked", True)))


def form_of_reference(spec, Phi, y, idata):
    """``spec``, or the same model in another of its ``parameterizations`` whose latent
    sites are all among the reference's draws (a reference sampler may work in another
    form: GIG logistic's Polya-Gamma Gibbs keeps beta and u, not the marginal form's z).
    The evidence is the same in every form; the first that fits is used."""
    have = set(adapter.posterior_variables_names(idata))
    forms = [spec] + [replace(spec, parameterization=p) for p in getattr(spec, "parameterizations", ())
                      if p != getattr(spec, "parameterization", None)]
    for form in forms:
        if set(sampled_site_names(form, *checked_problem(form, Phi, y))) <= have:
            return form
    return spec


#: the reason of a reference log Z from bridge sampling alone
UNCHECKED = "bridge sampling alone, not cross-checked by AIS"


def reference_evidence(spec, Phi, y, idata, *, seed: int = 0, false_alarm: float = FALSE_ALARM,
                       ais_options: dict | None = None, check: bool = True) -> ReferenceEvidence:
    """log Z of ``spec``'s model on (Phi, y) from a reference's draws (``idata``, every
    latent site): bridge sampling, checked by AIS. A reference without every latent site
    the model samples (one sampled in another parameterization) gives an uncertified
    reference log Z with the reason. check False: bridge sampling alone (AIS costs 10 s to
    20 minutes on the default cases, the bridge under a second to half a minute), an
    unchecked reference (:attr:`ReferenceEvidence.checked`)."""
    spec = form_of_reference(spec, Phi, y, idata)
    density = unconstrained_density(spec, Phi, y)
    try:
        chains = reference_chains(density, idata)
    except KeyError as err:
        missing = EvidenceEstimate("bridge sampling", None, None, 0.0,
                                   reason=f"the reference's draws lack a latent site of the model ({err.args[0]})")
        return judged_reference(missing, missing, false_alarm)
    bridge = bridge_sampling(density, chains, seed=seed)
    if not check:
        skipped = EvidenceEstimate("annealed importance sampling", None, None, 0.0, reason="not run")
        reason = UNCHECKED if bridge.log_z is not None else f"no bridge estimate: {bridge.reason}"
        return ReferenceEvidence(bridge, skipped, False, reason, false_alarm, checked=False)
    ais = annealed_importance_sampling(density, chains, seed=seed + 1, **(ais_options or {}))
    return judged_reference(bridge, ais, false_alarm)


def judged_reference(bridge: EvidenceEstimate, ais: EvidenceEstimate, false_alarm: float = FALSE_ALARM):
    """:class:`ReferenceEvidence` from the two estimates: certified where both exist and
    agree within z_(1 - alpha/2) sqrt(se_b^2 + se_a^2)."""
    if bridge.log_z is None:
        return ReferenceEvidence(bridge, ais, False, f"no bridge estimate: {bridge.reason}", false_alarm)
    if ais.log_z is None:
        return ReferenceEvidence(bridge, ais, False, f"no independent check: {ais.reason}", false_alarm)
    z = float(norm.ppf(1 - false_alarm / 2))
    joint = math.hypot(bridge.se, ais.se)
    gap = bridge.log_z - ais.log_z
    if abs(gap) > z * joint:
        return ReferenceEvidence(
            bridge, ais, False,
            f"bridge sampling ({bridge.log_z:.3f} +- {bridge.se:.3f}) and AIS ({ais.log_z:.3f} +- {ais.se:.3f}) "
            f"disagree by {gap:+.3f}, beyond {z:.2f} x their joint error {joint:.3f}", false_alarm)
    return ReferenceEvidence(bridge, ais, True, "", false_alarm)


@dataclass(frozen=True)
class EvidenceVerdict:
    """An engine's log Z (or lower bound) against the reference's.

    status: indistinguishable / differs for an estimate, consistent bound / violates the
    bound for a lower bound, not applicable (with ``reason``) without a certified
    reference. difference: ``value - log Z_ref``. detectable: the smallest ``|difference|`` the
    reference resolves at this false-alarm rate (``z se_ref``)."""

    engine_value: float | None
    kind: str
    status: str
    difference: float | None
    detectable: float | None
    reference_log_z: float | None
    reference_se: float | None
    false_alarm: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The verdict as a plain dict of its fields, the JSON form stored in result files."""
        return asdict(self)


def evidence_verdict(value: float | None, kind: str, reference: ReferenceEvidence) -> EvidenceVerdict:
    """Judge an engine's log Z ``value`` of ``kind`` (estimate or lower bound)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    alpha = reference.false_alarm
    ref_z, ref_se = reference.log_z, reference.se
    if value is None or not math.isfinite(value):
        return EvidenceVerdict(value, kind, NOT_APPLICABLE, None, None, ref_z, ref_se, alpha,
                               "the engine reports no finite log evidence")
    unchecked = not reference.checked and ref_z is not None and ref_se is not None and math.isfinite(ref_se)
    if not reference.certified and not unchecked:
        return EvidenceVerdict(value, kind, NOT_APPLICABLE, None, None, ref_z, ref_se, alpha,
                               f"reference log Z not certified: {reference.reason}")
    # against an unchecked bridge estimate the verdict stands on the bridge's own error,
    # calibrated on two-dimensional cases against quadrature (docs/validation.md) and
    # wrong where its proposal misses the posterior (GGSM): the verdict says so
    caveat = f"against {UNCHECKED}" if unchecked else ""
    diff = float(value - ref_z)
    if kind == ESTIMATE:
        z = float(norm.ppf(1 - alpha / 2))
        status = DIFFERS if abs(diff) > z * ref_se else INDISTINGUISHABLE
    else:
        z = float(norm.ppf(1 - alpha))
        status = VIOLATES_BOUND if diff > z * ref_se else CONSISTENT_BOUND
    return EvidenceVerdict(float(value), kind, status, diff, z * ref_se, ref_z, ref_se, alpha, caveat)


#: a difference of two reference log Zs: the first model preferred, the second, or neither
PREFERS_FIRST, PREFERS_SECOND, UNRESOLVED = "prefers the first", "prefers the second", "unresolved"


@dataclass(frozen=True)
class LogZDifference:
    """log Z_first - log Z_second (+ a known offset) from two reference log Zs, with the
    Monte Carlo error of the difference.

    status: :data:`PREFERS_FIRST` / :data:`PREFERS_SECOND` where ``|z| = |difference| / se``
    exceeds ``z_(1 - alpha/2)``, :data:`UNRESOLVED` where it does not, not applicable (with
    ``reason``) where either log Z is missing (difference None) or not certified (the
    difference and its error still given, for the record). certified: both references
    certified (False with an unchecked bridge estimate, which is judged with its caveat, as
    :func:`evidence_verdict` does)."""

    difference: float | None
    se: float | None
    z: float | None
    status: str
    certified: bool
    false_alarm: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The difference as a plain dict of its fields, the JSON form stored in result files."""
        return asdict(self)


def log_z_difference(first: ReferenceEvidence, second: ReferenceEvidence, *, offset: float = 0.0,
                     false_alarm: float = FALSE_ALARM) -> LogZDifference:
    """Which of two models the reference log Z prefers: d = log Z_first - log Z_second +
    ``offset`` (a constant known exactly, such as a prior's normalizer that one NumPyro
    model omits), se = sqrt(se_first^2 + se_second^2) - the errors of two *independent*
    reference runs (different seeds: runs that share random numbers have correlated
    errors, which this does not count). Preferred where ``|d| > z_(1 - alpha/2) se``."""
    for ref in (first, second):
        if ref.log_z is None or ref.se is None or not math.isfinite(ref.se):
            return LogZDifference(None, None, None, NOT_APPLICABLE, False, false_alarm,
                                  f"no reference log Z: {ref.reason}")
    diff = float(first.log_z - second.log_z + offset)
    se = math.hypot(first.se, second.se)
    z = float(diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff)))
    for ref in (first, second):
        # the numbers stand, for the record; no preference is read from them
        if ref.checked and not ref.certified:
            return LogZDifference(diff, se, z, NOT_APPLICABLE, False, false_alarm,
                                  f"reference log Z not certified: {ref.reason}")
    threshold = float(norm.ppf(1 - false_alarm / 2))
    status = UNRESOLVED if abs(z) <= threshold else (PREFERS_FIRST if z > 0 else PREFERS_SECOND)
    certified = bool(first.certified and second.certified)
    return LogZDifference(diff, se, z, status, certified, false_alarm,
                          "" if certified else f"against {UNCHECKED}")


#: where an engine's FitInfo carries its log evidence, and what kind of number it is
EVIDENCE_KEYS = (
    ("log_evidence_model", ESTIMATE),     # EPCVM's Laplace evidence of the model as NumPyro writes it
    ("log_evidence", ESTIMATE),           # EP's log Z_EP
    ("log_evidence_laplace", ESTIMATE),   # the generic Laplace (auto-laplace)
    ("elbo", LOWER_BOUND),                # Pathfinder: the ELBO of its chosen Gaussian (a few draws)
)


def engine_evidence(posterior) -> tuple[float, str, str] | None:
    """(value, kind, where it was read) of the log evidence an engine reports, or None.

    Read from ``info.extra`` (EVIDENCE_KEYS); the ADVI families' ``final_loss`` is minus
    their last block's mean ELBO estimate; an engine whose objective is an evidence lower
    bound (mean-field VB) reports it as the last value of its trace. The stochastic ELBOs
    (Pathfinder's, the ADVI families') carry Monte Carlo noise of their own that the
    verdict does not count: a bound violated by a small margin there is not a defect."""
    info = getattr(posterior, "info", None)
    if info is None:
        return None
    extra = info.extra or {}
    for key, kind in EVIDENCE_KEYS:
        if key in extra and extra[key] is not None:
            return float(extra[key]), kind, f"info.extra[{key!r}]"
    if "final_loss" in extra and extra["final_loss"] is not None:
        return -float(extra["final_loss"]), LOWER_BOUND, "-info.extra['final_loss'] (last block's mean -ELBO)"
    objective = (info.objective or "").lower()
    if "evidence lower bound" in objective and info.trace is not None and len(info.trace):
        return float(np.asarray(info.trace)[-1]), LOWER_BOUND, "info.trace[-1] (the ELBO at the last update)"
    return None


# ----------------------------------------------------------------------------------------
# Problems small enough for quadrature: the tests' and the calibration's
# ----------------------------------------------------------------------------------------
def small_problem(n_basis: int, seed: int = 1, n: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """(Phi, y) with ``n_basis`` columns, for a model small enough that its evidence can be
    integrated by quadrature: PCVM on one column has two latents (w >= 0 and the bias b),
    BBLR on two columns its two weights. Labels drawn from a logistic model of slope 2 on
    ``Phi @ |N(0, I)| + 0.3``."""
    rng = np.random.default_rng(seed)
    Phi = rng.standard_normal((n, n_basis))
    f = Phi @ np.abs(rng.standard_normal(n_basis)) + 0.3
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * f))).astype(float)
    return Phi, y
