"""A second reference sampler for GGSM probit: slice-within-Gibbs with a scale move.

Why a second sampler. NUTS on ``GGSMProbit`` fails to certify for q <= 1 on the paper's
Section 6.1 design (issue 3). Two different things go wrong, and this sampler is built for
both:

1. *Heavy tail of the overall scale.* Write w = r u with ``||u|| = 1``. With lambda integrated
   out the prior is proportional to ``(b + r^q ||u||_q^q)^-(a + n/q)``, the volume element
   brings r^(n-1), so the prior of r has the tail r^-(1 + q a). When the training data are
   linearly separable (the Section 6.1 design at N = 200 is: ``moment_existence.linear_separation``), the
   likelihood tends to 1 along every separating direction, so the *posterior* of r keeps
   that tail: its mean exists only if q a > 1 and its variance only if q a > 2. NUTS adapts
   one step size to the bulk and cannot travel such a tail. In t = log r the tail is only
   exponential, exp(-q a t), so a move that rescales all of w at once mixes well.
2. *The kink of |w|^q at zero* (q <= 1) spoils HMC's step-size adaptation; a univariate
   slice sampler needs no gradient and is exact for any density, kinks and spikes included.

One sweep, for each chain (all three steps leave the posterior invariant):

* scale move (generalized Gibbs along the group w -> e^t w, Liu & Sabatti 2000): with
  lambda integrated out, p(w) is proportional to ``L(w) (b + sum |w_i|^q)^-(a + n/q)``; the
  conditional of t given the direction is proportional to p(e^t w) e^(n t) (n = the
  dimension of w: the Jacobian of the rescaling; dt is the invariant measure of the group)
  and is sampled exactly by slice sampling;
* ``lambda | w ~ InvGamma(a + n/q, b + sum |w_i|^q)`` exactly (the conjugate update; the test
  suite checks that log p_model(lambda, w) minus this log density is constant in lambda);
* ``w_i | w_-i, lambda`` for every i by univariate slice sampling with stepping out and
  shrinkage (Neal 2003) on ``log Phi-likelihood - |w_i|^q / lambda``.

The scale move targets the w-marginal, so lambda is redrawn right after it and every
recorded (lambda, w) is a draw of the joint chain. The slice widths (one per weight, one
for t) are adapted to three posterior standard deviations during warm-up only and then
frozen, so the recorded chain is a time-homogeneous Markov chain.

The density evaluated is the one of ``GGSMProbit.model`` (probit likelihood by
log Phi, ``models.special.log_ndtr``, the generalized normal prior, InvGamma on lambda); the tests check the
sampler's log density against NumPyro's log density of the model written once, and its
draws against NUTS where NUTS certifies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...models.checks import check_design
from ...models.ggsm_probit import GGSMProbit
from ...models.special import log_ndtr
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


@dataclass(frozen=True)
class SliceGibbsConfig:
    """Settings of the slice-within-Gibbs sampler (one draw recorded per sweep)."""

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 2500
    seed: int = 0
    init_scale: float = 1.0  # chains start at w ~ N(0, init_scale^2 I): over-dispersed

    def __post_init__(self):
        for name in ("num_chains", "num_warmup", "num_samples"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SliceGibbsConfig.{name} must be a positive integer")

        if not self.init_scale > 0:
            raise ValueError("SliceGibbsConfig.init_scale must be positive")


class ChainState(NamedTuple):
    """The state of the chains between sweeps: the weights ``w`` ((n,) per chain), lambda
    (``lam``, a scalar per chain) and each chain's PRNG ``key``. :class:`SliceGibbsChains`
    keeps it with the chains in the leading axis."""

    w: jnp.ndarray  # (n,)
    lam: jnp.ndarray  # ()
    key: jnp.ndarray


class Widths(NamedTuple):
    """The slice updates' widths, per chain: one stepping-out width per weight (``w``, (n,))
    and one for t, the log of the scale move's factor (``log_scale``, a scalar). Adapted during
    warm-up, then frozen."""

    w: jnp.ndarray  # (n,) stepping-out width per weight
    log_scale: jnp.ndarray  # () width for t = log of the rescaling factor


# --------------------------------------------------------------------------------------
# The log densities
# --------------------------------------------------------------------------------------
def log_joint(w, lam, Phi, y, q, a, b):
    """log p(y, w, lambda) of ``GGSMProbit.model``, normalizing constants included."""
    from jax.scipy.special import gammaln

    s = 2.0 * y - 1.0
    n = w.shape[-1]
    ll = jnp.sum(log_ndtr(s * (Phi @ w)))
    log_prior_w = n * (jnp.log(q) - jnp.log(2.0) - jnp.log(lam) / q - gammaln(1.0 / q)) - jnp.sum(
        jnp.abs(w) ** q) / lam
    log_prior_lam = a * jnp.log(b) - gammaln(a) - (a + 1.0) * jnp.log(lam) - b / lam
    return ll + log_prior_w + log_prior_lam


def log_rescaling_density(t, eta, sum_q, s, q, a, b, n):
    """Unnormalized log density of t for the move w -> e^t w (lambda integrated out):
    log p(y, e^t w) + n t, with eta = Phi w and ``sum_q = sum |w_i|^q`` of the current w.

    p(y, w) with lambda integrated out is ``L(w) (b + sum |w|^q)^-(a + n/q)`` times a constant
    (``GGSMProbit.log_marginal_prior``); n t is the Jacobian of the rescaling.
    """
    value = jnp.sum(log_ndtr(s * jnp.exp(t) * eta)) - (a + n / q) * jnp.log(b + jnp.exp(q * t) * sum_q) + n * t
    # With a nearly improper prior (a = 1e-3) the scale's tail decays like exp(-q a t) and a
    # slice can reach t where e^t w overflows; such points are outside the slice (a chain
    # that cannot represent w there would otherwise continue from inf/NaN)
    finite = jnp.isfinite(value) & jnp.isfinite(jnp.exp(t) * jnp.max(jnp.abs(eta))) & jnp.isfinite(
        jnp.exp(q * t) * sum_q)
    return jnp.where(finite, value, -jnp.inf)


def lam_conditional(w, q, a, b):
    """(shape, scale) of the InvGamma law of lambda | w."""
    n = w.shape[-1]
    return a + n / q, b + jnp.sum(jnp.abs(w) ** q, axis=-1)


# --------------------------------------------------------------------------------------
# One sweep and blocks of sweeps
# --------------------------------------------------------------------------------------
def _sweep(state: ChainState, widths: Widths, Phi, s, q, a, b):
    n = Phi.shape[1]
    key, k_scale, k_lam, k_coords = jax.random.split(state.key, 4)
    w = state.w
    eta = Phi @ w  # recomputed each sweep so round-off in the running updates cannot drift

    # 1. rescale w along its direction, lambda integrated out
    sum_q = jnp.sum(jnp.abs(w) ** q)

    def log_scale_density(t):
        return log_rescaling_density(t, eta, sum_q, s, q, a, b, n)

    t, _, ev_scale, cap_scale = slice_1d(k_scale, 0.0, log_scale_density(0.0), log_scale_density,
                                          widths.log_scale)
    w = w * jnp.exp(t)
    eta = eta * jnp.exp(t)

    # 2. lambda | w exactly
    shape, scale = lam_conditional(w, q, a, b)
    lam = scale / jax.random.gamma(k_lam, shape)

    # 3. w_i | w_-i, lambda, coordinate by coordinate. The log-likelihood at the current
    # point is carried from one update to the next (the last one evaluated it at the point
    # it moved to), saving one evaluation in each
    def coordinate(i, carry):
        w, eta, loglik, evals, caps, key = carry
        key, sub = jax.random.split(key)
        col = Phi[:, i]
        w_i = w[i]

        def loglik_at(x):
            return jnp.sum(log_ndtr(s * (eta + col * (x - w_i))))

        def logf(x):
            return loglik_at(x) - jnp.abs(x) ** q / lam

        x1, f1, ev, cap = slice_1d(sub, w_i, loglik - jnp.abs(w_i) ** q / lam, logf, widths.w[i])
        eta = eta + col * (x1 - w_i)
        return w.at[i].set(x1), eta, f1 + jnp.abs(x1) ** q / lam, evals + ev, caps + cap, key

    loglik = jnp.sum(log_ndtr(s * eta))

    # evaluations: the scale move's own, its start, and this log-likelihood
    w, eta, _, evals, caps, _ = jax.lax.fori_loop(
        0, n, coordinate, (w, eta, loglik, ev_scale + 2, cap_scale.astype(jnp.int32), k_coords))
    stats = {"evaluations": evals, "shrink_caps": caps, "log_scale_step": t}
    return ChainState(w, lam, key), stats


def _block(state: ChainState, widths: Widths, Phi, s, q, a, b, n_sweeps: int):
    def step(st, _):
        st, stats = _sweep(st, widths, Phi, s, q, a, b)
        return st, (st.w, st.lam, stats)

    return jax.lax.scan(step, state, None, length=n_sweeps)


# Chains are independent. They run one per CPU device (pmap) when the process has a
# device per chain (`import zoo` asks for 4), else one after another. Not vmap: a vmapped
# while_loop runs every lane until the slowest finishes, so 4 vmapped chains cost several
# times one chain alone (benchmarks/README.md, "Measurements behind design choices").
_block_one = jax.jit(_block, static_argnums=(7,))
_block_parallel = jax.pmap(_block, in_axes=(0, 0, None, None, None, None, None, None),
                           static_broadcasted_argnums=(7,))


def _blocks(state: ChainState, widths: Widths, Phi, s, q, a, b, n_sweeps: int):
    return run_chain_blocks(_block_one, _block_parallel, state, widths, Phi, s, q, a, b, n_sweeps)


def _adapted_widths(w_draws: np.ndarray) -> Widths:
    """Three posterior sds of each weight and of log ||w||_1, from a warm-up block."""
    sd_w = np.std(w_draws, axis=1)
    log_norm = np.log(np.sum(np.abs(w_draws), axis=-1))
    sd_t = np.std(log_norm, axis=1)
    return Widths(w=np.clip(3.0 * sd_w, 1e-6, 1e3), log_scale=np.clip(3.0 * sd_t, 1e-3, 50.0))


class SliceGibbsChains:
    """The chains of one run, kept so that they can be continued.

    ``warmup()`` runs the warm-up blocks (adapting the widths); ``draw(n)`` records the
    next n sweeps of every chain with the frozen widths and may be called again to extend
    the same Markov chains (the reference doubles its draws this way).
    """

    def __init__(self, spec, Phi, y, config: SliceGibbsConfig = SliceGibbsConfig(), *, progress: bool = False):
        if not isinstance(spec, GGSMProbit):
            raise ValueError(
                f"the slice-Gibbs reference sampler is written for ggsm-probit only, not {type(spec).__name__}")
        Phi, y = check_design(Phi, y)
        self.config, self.progress = config, progress
        self.Phi, self.s = jnp.asarray(Phi), jnp.asarray(2.0 * y - 1.0)
        self.q, self.a, self.b = float(spec.q), float(spec.a), float(spec.b)
        n = Phi.shape[1]
        chains = int(config.num_chains)
        # the over-dispersed start by numpy: JAX's eager normal and gamma draws cost seconds
        # of compilation each, more than the draws are worth
        rng = np.random.default_rng(config.seed)
        w0 = config.init_scale * rng.standard_normal((chains, n))
        # lambda | w0 (lam_conditional's law, evaluated in numpy like the rest of the start)
        shape = self.a + n / self.q
        scale = self.b + np.sum(np.abs(w0) ** self.q, axis=-1)
        lam0 = scale / rng.gamma(shape, size=chains)
        keys = jax.random.split(jax.random.PRNGKey(config.seed), chains)
        # kept on the host: pmap returns the state sharded over the devices, and an input
        # laid out unlike the first call's compiled the block a second time (20-30 s)
        self.state = jax.tree_util.tree_map(np.asarray, ChainState(w0, lam0, keys))
        self.widths = Widths(w=np.ones((chains, n)), log_scale=np.full((chains,), 1.0))
        self.warmed_up = False

    def _run(self, n_sweeps):
        state, out = _blocks(self.state, self.widths, self.Phi, self.s, self.q, self.a, self.b, n_sweeps)
        self.state = jax.tree_util.tree_map(np.asarray, state)
        return out

    def warmup(self) -> None:
        """Run the warm-up: ``config.num_warmup`` sweeps rounded up to whole blocks of
        :data:`BLOCK`, after every block setting the widths to three posterior sds (per chain,
        clipped) of each weight and of ``log ||w||_1``. Its draws are discarded; :meth:`draw`
        runs it first if needed."""
        blocks = -(-int(self.config.num_warmup) // BLOCK)
        bar = progress_bar(self.progress, blocks, "slice-Gibbs warm-up")
        for _ in range(blocks):
            w_blk, _, _ = self._run(BLOCK)
            self.widths = _adapted_widths(np.asarray(w_blk))
            bar.update(1)
        bar.close()
        self.warmed_up = True

    def draw(self, n: int):
        """(draws, stats) of the next n sweeps; see :func:`sample`."""
        if not self.warmed_up:
            self.warmup()

        def run_block():
            w_blk, lam_blk, st = self._run(BLOCK)
            return {"lam": lam_blk, "w": w_blk}, st

        bar = progress_bar(self.progress, -(-int(n) // BLOCK), "slice-Gibbs")
        return record_blocks(run_block, n, BLOCK, bar)


def sample(spec, Phi, y, config: SliceGibbsConfig = SliceGibbsConfig(), *, progress: bool = False):
    """Draws of (lambda, w) from the GGSM probit posterior.

    Returns (draws, stats): draws {"lam": (chains, draws), "w": (chains, draws, n)};
    stats {"diverging": zeros (the sampler has no divergences), "evaluations",
    "shrink_caps", "log_scale_step"} per draw (chains, draws), for the sample_stats group.
    """
    chains = SliceGibbsChains(spec, Phi, y, config, progress=progress)
    return chains.draw(int(config.num_samples))


class SliceGibbsRun(GibbsRun):
    """This sampler as a reference sampler (``ReferenceConfig(sampler=SLICE_GIBBS)``,
    or by name through its model's record)."""

    name = "zoo.slice-gibbs"

    def __init__(self, spec, Phi, y, config, progress: bool):
        gibbs_config = SliceGibbsConfig(num_chains=config.num_chains, num_warmup=config.num_warmup,
                                        num_samples=config.num_samples, seed=config.seed)
        self.chains = SliceGibbsChains(spec, Phi, y, gibbs_config, progress=progress)
        self.num_samples, self.num_chains = config.num_samples, config.num_chains


#: the reference-sampler entry GGSM probit's registry record brings; version 2: the scale
#: move never steps to an overflowing w
SLICE_GIBBS = ReferenceSampler(
    "slice-gibbs", SliceGibbsRun, code_modules=(__name__,),
    description="slice-within-Gibbs with a scale move (validation/references/slice_gibbs.py; same posterior, "
                "checked against the model's log density, quadrature and NUTS in the test suite)")
