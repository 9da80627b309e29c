"""A second reference sampler for GIG-hierarchical logistic regression: Polya-Gamma Gibbs.

Why a second sampler. NUTS on ``GIGLogistic`` keeps a few divergences on Horii's synthetic
design at every parameterization tried (issue 4: 1-12 per 4 x 1000 draws; the divergent
draws sit at one extreme coefficient of a linearly separable design), and at the paper's
near-improper hyper-prior k = theta = 1e-6 it does not finish. A Gibbs sampler has no step
size to adapt and no divergences; what can go wrong with it is slow mixing, which R-hat
and ESS measure.

The target is the model's "marginal" parameterization (``models/gig_logistic.py``): the
hyper-parameter h_i integrated out analytically, so that

    u_i ~ LogBetaPrime(|rho|, k),   tau_i = 2 theta e^(u_i)   (gamma mixing; 1 / tau_i for
                                                                 inverse-gamma mixing)
    beta_i | u_i ~ N(0, tau_i),    y_j | beta ~ Bernoulli(sigmoid(x_j^T beta)),

augmented with one Polya-Gamma latent omega_j per observation (Polson, Scott & Windle
2013), under which the logistic likelihood is Gaussian in beta. One sweep, each step an
exact draw from (or a slice update that leaves invariant) the conditional of the joint
p(u, beta, omega | y):

1. omega_j | beta ~ PG(1, x_j^T beta) (``validation/polya_gamma.py``);
2. beta | u, omega ~ N(m, V), V^-1 = X^T diag(omega) X + diag(1 / tau), m = V X^T (y - 1/2),
   drawn in the scaled coordinates beta = sqrt(tau) b, where the precision I + D X^T
   diag(omega) X D (D = diag sqrt(tau)) is well conditioned however small or large tau is;
3. u_i | beta_i for every i (they are independent given beta): a univariate slice update
   (``validation/slice_sampling.py``) of log p(u_i) + log N(beta_i | 0, tau(u_i)).

Integrating h out before sampling removes the slowest link a Gibbs sampler of the paper's
hierarchy would have (a_i | tau_i | beta_i, which crawls when the hyper-prior is nearly
improper). The slice widths are adapted to three posterior sds of each u_i during warm-up
only, then frozen. The tests check step 1 against the PG law's mean, variance and Laplace
transform, step 2 against the Gaussian conditional computed directly, step 3 against the
model's own log density, and the chain's draws against NUTS where NUTS certifies.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..models.distributions import LogBetaPrime
from ..models.checks import check_design
from .polya_gamma import sample_pg1
from .reference import ReferenceSampler
from .slice_sampling import GibbsRun, progress_bar, record_blocks, run_chain_blocks, slice_1d

#: sweeps per compiled block; warm-up adapts the widths after every block
BLOCK = 100


class ChainState(NamedTuple):
    beta: jnp.ndarray  # (d,)
    u: jnp.ndarray  # (d,) u_i = log(tau_i / 2 theta) (gamma mixing), see log_tau
    key: jnp.ndarray


def log_tau(u, rho, theta):
    """log tau_i from u_i in the marginal parameterization (models/gig_logistic.py)."""
    shift = jnp.log(2.0 * theta)
    return u + shift if rho > 0 else -u - shift


def log_conditional_u(u, beta, rho, k, theta):
    """log p(u_i | beta_i) up to a constant: LogBetaPrime(|rho|, k) prior of u_i times
    N(beta_i | 0, tau(u_i)). Elementwise."""
    lt = log_tau(u, rho, theta)
    value = LogBetaPrime(abs(rho), k).log_prob(u) - 0.5 * lt - 0.5 * beta * beta * jnp.exp(-lt)
    # exp(-lt) overflows for u far out on the small-tau side: such points are outside any
    # slice (log density -inf), not NaN
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


def _sweep(state: ChainState, widths, X, kappa, rho, k, theta):
    key, k_omega, k_beta, k_u = jax.random.split(state.key, 4)
    omega = sample_pg1(k_omega, X @ state.beta)
    beta = draw_beta(k_beta, X, kappa, omega, log_tau(state.u, rho, theta))

    def update_u(key_i, u_i, beta_i, width_i):
        def logf(x):
            return log_conditional_u(x, beta_i, rho, k, theta)

        u_new, _, evals, capped = slice_1d(key_i, u_i, logf(u_i), logf, width_i)
        return u_new, evals, capped

    u, evals, caps = jax.vmap(update_u)(jax.random.split(k_u, state.u.shape[0]), state.u, beta, widths)
    stats = {"evaluations": jnp.sum(evals), "shrink_caps": jnp.sum(caps.astype(jnp.int32))}
    return ChainState(beta, u, key), stats


def _block(state: ChainState, widths, X, kappa, rho, k, theta, n_sweeps: int):
    def step(st, _):
        st, stats = _sweep(st, widths, X, kappa, rho, k, theta)
        return st, (st.beta, st.u, stats)

    return jax.lax.scan(step, state, None, length=n_sweeps)


# Chains are independent: one per CPU device (pmap) when there are enough devices, else
# one after another (as for the GGSM slice-Gibbs sampler, and for the same reason: a
# vmapped while_loop runs every lane until the slowest is done).
_block_one = jax.jit(_block, static_argnums=(4, 5, 6, 7))
_block_parallel = jax.pmap(_block, in_axes=(0, 0, None, None, None, None, None, None),
                           static_broadcasted_argnums=(4, 5, 6, 7))


def _blocks(state, widths, X, kappa, rho, k, theta, n_sweeps):
    return run_chain_blocks(_block_one, _block_parallel, state, widths, X, kappa, rho, k, theta, n_sweeps)


class PGGibbsChains:
    """The chains of one run, kept so that they can be continued (as the reference's
    doublings need): ``draw(n)`` records the next n sweeps of every chain.

    Chains start over-dispersed: u_i from its prior, beta_i ~ N(0, init_scale^2).
    """

    def __init__(self, spec, Phi, y, *, num_chains: int = 4, num_warmup: int = 1000, seed: int = 0,
                 init_scale: float = 1.0, progress: bool = False):
        from ..models.gig_logistic import GIGLogistic

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
        k_beta, k_u, k_chains = jax.random.split(jax.random.PRNGKey(seed), 3)
        beta0 = init_scale * jax.random.normal(k_beta, (num_chains, d))
        u0 = LogBetaPrime(abs(self.rho), self.k).sample(k_u, (num_chains, d))
        # the prior of u can be very wide (k = 1e-6 gives it a tail e^(-k u)); start
        # within the range where tau is representable
        u0 = jnp.clip(u0, -50.0, 50.0)
        self.state = ChainState(beta0, u0, jax.random.split(k_chains, num_chains))
        self.widths = jnp.ones((num_chains, d))
        self.warmed_up = False

    def _run(self, n_sweeps):
        self.state, out = _blocks(self.state, self.widths, self.X, self.kappa, self.rho, self.k, self.theta,
                                  n_sweeps)
        return out

    def warmup(self) -> None:
        blocks = -(-self.num_warmup // BLOCK)
        bar = progress_bar(self.progress, blocks, "PG-Gibbs warm-up")
        for _ in range(blocks):
            _, u_blk, _ = self._run(BLOCK)
            # three posterior sds of each u_i (per chain), kept within sane bounds
            self.widths = jnp.asarray(np.clip(3.0 * np.std(np.asarray(u_blk), axis=1), 1e-2, 1e2))
            bar.update(1)
        bar.close()
        self.warmed_up = True

    def draw(self, n: int):
        """(draws, stats) of the next n sweeps: draws {"beta": (chains, n, d), "u": (chains,
        n, d)} - the two blocks the sampler moves, both diagnosed. (omega is redrawn from
        its exact conditional given beta in every sweep and kept nowhere: its chain mixes
        as x_j^T beta does, which the diagnostics of beta cover.) stats
        (chains, n) arrays "diverging" (all False: a Gibbs sampler has none),
        "evaluations" (log-density evaluations of the slice updates) and "shrink_caps"
        (slice updates that kept their old value because shrinkage hit its limit)."""
        if not self.warmed_up:
            self.warmup()

        def run_block():
            beta_blk, u_blk, st = self._run(BLOCK)
            return {"beta": beta_blk, "u": u_blk}, st

        bar = progress_bar(self.progress, -(-int(n) // BLOCK), "PG-Gibbs")
        return record_blocks(run_block, n, BLOCK, bar)


class PGGibbsRun(GibbsRun):
    """This sampler as a reference sampler (``ReferenceConfig(sampler="pg-gibbs")``)."""

    name = "zoo.pg-gibbs"

    def __init__(self, spec, Phi, y, config, progress: bool):
        self.chains = PGGibbsChains(spec, Phi, y, num_chains=config.num_chains, num_warmup=config.num_warmup,
                                    seed=config.seed, progress=progress)
        self.num_samples, self.num_chains = config.num_samples, config.num_chains


#: the reference-sampler entry GIG logistic's registry record brings
PG_GIBBS = ReferenceSampler("pg-gibbs", PGGibbsRun, code_modules=(__name__,))
