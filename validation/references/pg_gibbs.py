"""A second reference sampler for GIG-hierarchical logistic regression: Polya-Gamma Gibbs.

Why a second sampler. NUTS on ``GIGLogistic`` keeps a few divergences on Horii's synthetic
design at every parameterization tried (issue 4: 1-12 per 4 x 1000 draws; the divergent
draws sit at one extreme coefficient of a linearly separable design), and at the paper's
near-improper hyper-prior k = theta = 1e-6 it does not finish. A Gibbs sampler has no step
size to adapt and no divergences; what can go wrong with it is slow mixing, which R-hat
and ESS measure.

The target is the model's "marginal" parameterization (``models/gig_logistic.py``): the
hyper-parameter h_i integrated out analytically, so that ::

    u_i ~ LogBetaPrime(|rho|, k),   tau_i = 2 theta e^(u_i)   (gamma mixing; 1 / tau_i for
                                                                 inverse-gamma mixing)
    beta_i | u_i ~ N(0, tau_i),    y_j | beta ~ Bernoulli(sigmoid(x_j^T beta)),

augmented with one Polya-Gamma latent omega_j per observation (Polson, Scott & Windle
2013), under which the logistic likelihood is Gaussian in beta. One sweep, each step an
exact draw from (or a slice update that leaves invariant) the conditional of the joint
p(u, beta, omega | y):

1. omega_j | beta ~ PG(1, x_j^T beta) (``validation/references/polya_gamma.py``);
2. beta | u, omega ~ N(m, V), V^-1 = X^T diag(omega) X + diag(1 / tau), m = V X^T (y - 1/2),
   drawn in the scaled coordinates beta = sqrt(tau) b, where the precision I + D X^T
   diag(omega) X D (D = diag sqrt(tau)) is well conditioned however small or large tau is;
3. u_i | beta_i for every i (they are independent given beta): a univariate slice update
   (``validation/references/slice_sampling.py``) of log p(u_i) + log N(beta_i | 0, tau(u_i));
4. a scale move along the group (beta, tau) -> (e^t beta, e^(2t) tau), i.e. u -> u + 2t
   (gamma mixing; u -> u - 2t for inverse-gamma mixing), with omega integrated out
   (generalized Gibbs, Liu & Sabatti 2000, as the GGSM sampler's scale move). Each
   N(beta_i | 0, tau_i) loses a factor e^t under the move, which the Jacobian e^(d t) of
   beta -> e^t beta pays back, so the conditional of t is ::

       log L(e^t X beta) + sum_i log p(u_i + 2t)     (the logistic likelihood, p = LogBetaPrime),

   sampled by a slice update started at t = 0. On separable data (Horii's design) the
   likelihood keeps rising along the separating direction and the overall scale of beta is
   what steps 1-3 move slowest (their slowest coordinates were the relevant beta_i, and
   log ||beta|| had about the ESS of the worst of them); this step moves it in one draw.
   omega is not part of the chain's state (it is redrawn from its exact conditional at the
   start of every sweep), so steps 1-2 form one data-augmentation update of beta | u.

Integrating h out before sampling removes the slowest link a Gibbs sampler of the paper's
hierarchy would have (a_i | tau_i | beta_i, which crawls when the hyper-prior is nearly
improper). The slice widths are adapted to three posterior sds of each u_i (and of
log ||beta||_1 for step 4) during warm-up only, then frozen. The tests check step 1 against
the PG law's mean, variance and Laplace transform, step 2 against the Gaussian conditional
computed directly, steps 3 and 4 against the model's own log density, and the chain's draws
against NUTS where NUTS certifies.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...models.checks import check_design
from ...models.distributions import LogBetaPrime
from ...models.gig_logistic import GIGLogistic
from .polya_gamma import sample_pg1
from .sampler import ReferenceSampler
from .slice_sampling import (
    GibbsRun,
    progress_bar,
    record_blocks,
    run_chain_blocks,
    slice_1d,
)

#: sweeps per compiled block; warm-up adapts the widths after every block
BLOCK = 100


class ChainState(NamedTuple):
    """The state of the chains between sweeps: ``beta`` and ``u`` ((d,) per chain; ``u_i =
    log(tau_i / 2 theta)`` under gamma mixing, see :func:`log_tau`) and each chain's PRNG
    ``key``. :class:`PGGibbsChains` keeps it with the chains in the leading axis."""

    beta: jnp.ndarray  # (d,)
    u: jnp.ndarray  # (d,) u_i = log(tau_i / 2 theta) (gamma mixing), see log_tau
    key: jnp.ndarray


class Widths(NamedTuple):
    """The slice updates' widths, per chain: one stepping-out width per u_i (``u``, (d,)) and
    one for t of the scale move (``log_scale``, a scalar). Adapted during warm-up, then frozen."""

    u: jnp.ndarray  # (d,) stepping-out width per u_i
    log_scale: jnp.ndarray  # () width for t of the scale move (step 4)


def log_tau(u, rho, theta):
    """log tau_i from u_i in the marginal parameterization (models/gig_logistic.py)."""
    shift = jnp.log(2.0 * theta)
    return u + shift if rho > 0 else -u - shift


def log_conditional_u(u, beta, rho, k, theta):
    """log p(u_i | beta_i) up to a constant: ``LogBetaPrime(|rho|, k)`` prior of u_i times
    N(beta_i | 0, tau(u_i)). Elementwise."""
    lt = log_tau(u, rho, theta)
    value = LogBetaPrime(abs(rho), k).log_prob(u) - 0.5 * lt - 0.5 * beta * beta * jnp.exp(-lt)
    # exp(-lt) overflows for u far out on the small-tau side: such points are outside any
    # slice (log density -inf), not NaN
    return jnp.where(jnp.isfinite(value), value, -jnp.inf)


def log_rescaling_density(t, eta, kappa, u, rho, k):
    """Unnormalized log density of t for the move (beta, u) -> (e^t beta, u + 2 sign t)
    (step 4 of the module docstring): log L(e^t eta) + sum_i log p(u_i + 2 sign t), with
    eta = X beta, kappa = y - 1/2 and sign = +1 for gamma mixing (rho > 0), -1 otherwise.
    The logistic log-likelihood is sum_j kappa_j f_j - log(2 cosh(f_j / 2))."""
    sign = 1.0 if rho > 0 else -1.0
    f = jnp.exp(t) * eta
    loglik = jnp.sum(kappa * f - jnp.logaddexp(0.5 * f, -0.5 * f))
    value = loglik + jnp.sum(LogBetaPrime(abs(rho), k).log_prob(u + 2.0 * sign * t))
    # far out, e^t eta overflows: outside any slice (log density -inf), not NaN
    return jnp.where(jnp.isfinite(value), value, -jnp.inf)


def draw_beta(key, X, kappa, omega, log_tau_):
    """beta | tau, omega ~ N(m, V) with V^-1 = X^T diag(omega) X + diag(1/tau) and
    m = V X^T kappa, via beta = sqrt(tau) b, b ~ N(Q^-1 D X^T kappa, Q^-1),
    Q = I + D X^T diag(omega) X D."""
    sd = jnp.exp(0.5 * log_tau_)
    XD = X * sd[None, :]
    Q = jnp.eye(X.shape[1]) + XD.T @ (omega[:, None] * XD)
    L = jnp.linalg.cholesky(Q)
    mean_b = jax.scipy.linalg.cho_solve((L, True), XD.T @ kappa)
    eps = jax.random.normal(key, (X.shape[1],))
    b = mean_b + jax.scipy.linalg.solve_triangular(L.T, eps, lower=False)
    return sd * b


def _sweep(state: ChainState, widths: Widths, X, kappa, scale_move, rho, k, theta):
    key, k_omega, k_beta, k_u, k_scale = jax.random.split(state.key, 5)
    omega = sample_pg1(k_omega, X @ state.beta)
    beta = draw_beta(k_beta, X, kappa, omega, log_tau(state.u, rho, theta))

    def update_u(key_i, u_i, beta_i, width_i):
        def logf(x):
            return log_conditional_u(x, beta_i, rho, k, theta)

        u_new, _, evals, capped = slice_1d(key_i, u_i, logf(u_i), logf, width_i)
        return u_new, evals, capped

    u, evals, caps = jax.vmap(update_u)(jax.random.split(k_u, state.u.shape[0]), state.u, beta, widths.u)
    evals, caps = jnp.sum(evals).astype(jnp.int32), jnp.sum(caps.astype(jnp.int32))

    # 4. the scale move, omega integrated out (a traced switch: one compiled program serves
    # runs with and without it)
    def rescale(args):
        beta, u = args
        eta = X @ beta

        def logf(t):
            return log_rescaling_density(t, eta, kappa, u, rho, k)

        t, _, ev, cap = slice_1d(k_scale, 0.0, logf(0.0), logf, widths.log_scale)
        sign = 1.0 if rho > 0 else -1.0
        return beta * jnp.exp(t), u + 2.0 * sign * t, (ev + 1).astype(jnp.int32), cap.astype(jnp.int32), t

    def keep(args):
        beta, u = args
        return beta, u, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), jnp.zeros(())

    beta, u, ev_scale, cap_scale, t = jax.lax.cond(scale_move, rescale, keep, (beta, u))
    stats = {"evaluations": evals + ev_scale, "shrink_caps": caps + cap_scale, "log_scale_step": t}
    return ChainState(beta, u, key), stats


def _block(state: ChainState, widths, X, kappa, scale_move, rho, k, theta, n_sweeps: int):
    def step(st, _):
        st, stats = _sweep(st, widths, X, kappa, scale_move, rho, k, theta)
        return st, (st.beta, st.u, stats)

    return jax.lax.scan(step, state, None, length=n_sweeps)


# Chains are independent: one per CPU device (pmap) when there are enough devices, else
# one after another (as for the GGSM slice-Gibbs sampler, and for the same reason: a
# vmapped while_loop runs every lane until the slowest is done).
_STATIC = (5, 6, 7, 8)
_block_one = jax.jit(_block, static_argnums=_STATIC)
_block_parallel = jax.pmap(_block, in_axes=(0, 0, None, None, None, None, None, None, None),
                           static_broadcasted_argnums=_STATIC)


def _blocks(state, widths, X, kappa, scale_move, rho, k, theta, n_sweeps):
    return run_chain_blocks(_block_one, _block_parallel, state, widths, X, kappa, scale_move, rho, k, theta,
                            n_sweeps)


def _log_beta_prime_draws(rng, alpha, beta, shape):
    """Draws of LogBetaPrime(alpha, beta) by numpy: log G1 - log G2 with G ~ Gamma, each log
    taken as log G' + log(U) / shape with G' ~ Gamma(shape + 1) (as
    ``models.distributions.LogBetaPrime.sample`` does, so that tiny shapes do not underflow)."""
    def log_gamma(a):
        return np.log(rng.gamma(a + 1.0, size=shape)) + np.log(rng.uniform(np.finfo(float).tiny, 1.0, size=shape)) / a

    return log_gamma(alpha) - log_gamma(beta)


class PGGibbsChains:
    """The chains of one run, kept so that they can be continued (as the reference's
    doublings need): ``draw(n)`` records the next n sweeps of every chain.

    Chains start over-dispersed: u_i from its prior, beta_i ~ N(0, init_scale^2).
    ``scale_move`` switches step 4 on or off (the target is the same either way, only the
    mixing differs).
    """

    def __init__(self, spec, Phi, y, *, num_chains: int = 4, num_warmup: int = 1000, seed: int = 0,
                 init_scale: float = 1.0, scale_move: bool = True, progress: bool = False):
        if not isinstance(spec, GIGLogistic):
            raise ValueError(
                f"the Polya-Gamma Gibbs reference sampler is written for gig-logistic only, not {type(spec).__name__}")
        for name, v in (("num_chains", num_chains), ("num_warmup", num_warmup)):
            if int(v) < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if not init_scale > 0:
            raise ValueError("init_scale must be positive")
        Phi, y = check_design(Phi, y)
        self.X = jnp.asarray(Phi)
        self.kappa = jnp.asarray(y - 0.5)
        self.rho, self.k, self.theta = float(spec.rho), float(spec.k), float(spec.theta)
        self.num_warmup, self.progress = int(num_warmup), progress
        d = Phi.shape[1]
        # the over-dispersed start by numpy: JAX's eager normal and gamma draws cost seconds
        # of compilation each, more than the draws are worth
        rng = np.random.default_rng(seed)
        beta0 = init_scale * rng.standard_normal((num_chains, d))
        u0 = _log_beta_prime_draws(rng, abs(self.rho), self.k, (num_chains, d))
        # the prior of u can be very wide (k = 1e-6 gives it a tail e^(-k u)); start
        # within the range where tau is representable
        u0 = np.clip(u0, -50.0, 50.0)
        self.scale_move = bool(scale_move)
        # kept on the host: pmap returns the state sharded over the devices, and an input
        # laid out unlike the first call's would compile the block a second time
        keys = jax.random.split(jax.random.PRNGKey(seed), num_chains)
        self.state = jax.tree_util.tree_map(np.asarray, ChainState(beta0, u0, keys))
        self.widths = Widths(u=np.ones((num_chains, d)), log_scale=np.ones(num_chains))
        self.warmed_up = False

    def _run(self, n_sweeps):
        state, out = _blocks(self.state, self.widths, self.X, self.kappa, np.asarray(self.scale_move), self.rho,
                             self.k, self.theta, n_sweeps)
        self.state = jax.tree_util.tree_map(np.asarray, state)
        return out

    def warmup(self) -> None:
        """Run the warm-up: ``num_warmup`` sweeps rounded up to whole blocks of :data:`BLOCK`,
        after every block setting the widths to three sds (per chain, clipped) of each u_i and
        of ``log ||beta||_1``. Its draws are discarded; :meth:`draw` runs it first if needed."""
        blocks = -(-self.num_warmup // BLOCK)
        bar = progress_bar(self.progress, blocks, "PG-Gibbs warm-up")
        for _ in range(blocks):
            beta_blk, u_blk, _ = self._run(BLOCK)
            # three posterior sds of each u_i and of log ||beta||_1 (per chain), kept
            # within sane bounds
            log_norm = np.log(np.sum(np.abs(np.asarray(beta_blk)), axis=-1))
            self.widths = Widths(u=np.clip(3.0 * np.std(np.asarray(u_blk), axis=1), 1e-2, 1e2),
                                 log_scale=np.clip(3.0 * np.std(log_norm, axis=1), 1e-3, 50.0))
            bar.update(1)
        bar.close()
        self.warmed_up = True

    def draw(self, n: int):
        """(draws, stats) of the next n sweeps: draws {"beta": (chains, n, d), "u": (chains,
        n, d)} - the two blocks the sampler moves, both diagnosed. (omega is redrawn from
        its exact conditional given beta in every sweep and kept nowhere: its chain mixes
        as x_j^T beta does, which the diagnostics of beta cover.) stats
        (chains, n) arrays "diverging" (all False: a Gibbs sampler has none),
        "evaluations" (log-density evaluations of the slice updates), "shrink_caps"
        (slice updates that kept their old value because shrinkage hit its limit) and
        "log_scale_step" (the t of step 4; 0 without it)."""
        if not self.warmed_up:
            self.warmup()

        def run_block():
            beta_blk, u_blk, st = self._run(BLOCK)
            return {"beta": beta_blk, "u": u_blk}, st

        bar = progress_bar(self.progress, -(-int(n) // BLOCK), "PG-Gibbs")
        return record_blocks(run_block, n, BLOCK, bar)


class PGGibbsRun(GibbsRun):
    """This sampler as a reference sampler (``ReferenceConfig(sampler=PG_GIBBS)``,
    or by name through its model's record)."""

    name = "zoo.pg-gibbs"

    def __init__(self, spec, Phi, y, config, progress: bool):
        self.chains = PGGibbsChains(spec, Phi, y, num_chains=config.num_chains, num_warmup=config.num_warmup,
                                    seed=config.seed, progress=progress)
        self.num_samples, self.num_chains = config.num_samples, config.num_chains


#: the reference-sampler entry GIG logistic's registry record brings (with the scale move
#: of step 4; the code digest in the cache key tells the versions apart)
PG_GIBBS = ReferenceSampler(
    "pg-gibbs", PGGibbsRun, code_modules=(__name__,),
    description="Polya-Gamma Gibbs on the model's marginal form (validation/references/pg_gibbs.py; same "
                "posterior, checked against the model's log density and NUTS in the test suite)")
