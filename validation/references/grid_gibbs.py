"""A second reference sampler for gridRVM: Polya-Gamma Gibbs with a move along the p-grid's ridge.

Why a second sampler. NUTS is gridRVM's first reference and certifies it under the
default proper prior, but it is one algorithm checking many engines; a sampler built on
different machinery, with no step size and no divergences, is an independent witness of
the same posterior. It is also the one that can go where NUTS has trouble: under vague
Gamma constants the p-grid's scale ridge (alpha c, beta / c leaves every precision
alpha_i beta_j unchanged, DERIVATIONS.md §5.5) is a long, nearly flat valley in log c, and
the Gibbs sampler below crosses it in one exact draw per sweep. What can go wrong with a
Gibbs sampler is slow mixing, which R-hat and ESS measure.

The target is p(w, alpha, beta | y) of ``models/grid_rvm.py`` (precisions on their own
scale, w centred: ``GridRVM.log_joint``), augmented with one Polya-Gamma latent omega_n
per observation (Polson, Scott & Windle 2013), under which the logistic likelihood is
Gaussian in w. One sweep, every step an exact draw from a conditional of
p(w, alpha, beta, omega | y) or a slice update that leaves that conditional invariant:

1. omega_n | w ~ PG(1, phi_n^T w) (``validation/references/polya_gamma.py``);
2. w | omega, alpha, beta ~ N(m, V), V^-1 = Phi^T diag(omega) Phi + diag(prec),
   m = V Phi^T (y - 1/2). Two exact ways, chosen by the design's shape:

   * M <= N: a Cholesky of I + D Phi^T diag(omega) Phi D in the scaled coordinates
     w = D b, D = diag(prec^-1/2) (``pg_gibbs.draw_beta``; well conditioned however
     small or large a precision is);
   * M > N: Bhattacharya, Chakraborty & Mallick (2016, Biometrika 103:985, Algorithm 1),
     an N x N Cholesky only: with S = diag(1 / prec), A = diag(omega)^(1/2) Phi and
     a = diag(omega)^(-1/2) (y - 1/2), draw u ~ N(0, S), delta ~ N(0, I_N), set
     v = A u + delta, solve (A S A^T + I_N) z = a - v, and w = u + S A^T z;

3. the precisions given w:

   * p-grid: alpha_i | w, beta ~ Gamma(a0 + M2/2, rate b0 + 1/2 sum_j beta_j w_ij^2), then
     beta_j | w, alpha ~ Gamma(c0 + M1/2, rate d0 + 1/2 sum_i alpha_i w_ij^2);
   * rvm: alpha_k | w ~ Gamma(a0 + 1/2, rate b0 + w_k^2 / 2);
   * s-grid: alpha_i + beta_j has no conjugate form, so each log alpha_i (independent
     given w and beta) gets a univariate slice update (``validation/references/slice_sampling.py``) of
     a0 x - b0 e^x + sum_j [1/2 log(e^x + beta_j) - 1/2 e^x w_ij^2] (the Gamma prior, the
     Gaussian of the row's weights and the Jacobian e^x of the log), then each log beta_j
     likewise given the new alpha;

4. p-grid only, a move along the ridge (a generalized Gibbs step along the group
   (alpha, beta) -> (c alpha, beta / c), Liu & Sabatti 2000): the precisions, hence w's
   prior and the likelihood, do not change, and the conditional of c, with the
   Jacobian c^(M1 - M2) and the Haar measure dc / c, is GIG(M1 a0 - M2 c0, 2 b0 sum alpha,
   2 d0 sum beta) (DERIVATIONS.md §5.5), drawn exactly (``models.distributions.GIG``).
   Without it alpha and beta can only drift along the ridge by the small steps their
   conditionals allow. It can be switched off (``ridge_move=False``): the target is the
   same either way, only the mixing differs.

The slice widths (s-grid) are adapted to three posterior sds of each log precision during
warm-up only, then frozen. The tests check each Gamma conditional, the s-grid's slice
target and the ridge move's GIG against the model's own ``log_joint`` (exact identities),
that the ridge move leaves the Gamma prior of (alpha, beta) invariant, both w-draws
against the Gaussian conditional computed directly (and against each other), and the
chain's draws, with and without the ridge move, against NUTS where NUTS certifies.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ...models.checks import check_design
from ...models.distributions import GIG
from ...models.grid_rvm import GridRVM
from .pg_gibbs import draw_beta
from .polya_gamma import sample_pg1
from .sampler import ReferenceSampler
from .slice_sampling import (
    GibbsRun,
    progress_bar,
    record_blocks,
    run_chain_blocks,
    slice_1d,
)

#: sweeps per compiled block; warm-up adapts the slice widths after every block
BLOCK = 100
#: the over-dispersed start draws alpha and beta from their priors, clipped to this range
#: (a vague prior's draws can underflow to 0 or be astronomically large)
INIT_RANGE = (1e-2, 1e2)
#: how the w | omega, alpha, beta draw is made: "auto" picks "bcm" when M > N
W_METHODS = ("auto", "cholesky", "bcm")


class ChainState(NamedTuple):
    """One chain's state. The s-grid keeps its precisions as logs: its slice updates work
    on that scale, and under a vague prior a factor the data do not need has its exact
    conditional near e^(-1/c0) = e^(-1e6) (DERIVATIONS.md §5.7), which a float64 cannot
    hold (it would round to 0 and its log to -inf)."""
    w: jnp.ndarray  # (M,)
    alpha: jnp.ndarray  # (M1,), or (M,) for the rvm; log alpha for the s-grid
    beta: jnp.ndarray  # (M2,), or (0,) for the rvm; log beta for the s-grid
    key: jnp.ndarray


def _precision(prior, shape, alpha, beta):
    """The flat precisions, by the model's own definition (GridRVM.precision); for the
    s-grid from the logs of the state (ChainState), alpha_i + beta_j = exp(logaddexp),
    floored at the smallest normal float as the model floors it."""
    if prior == "s-grid":
        log_table = jnp.logaddexp(alpha[..., :, None], beta[..., None, :])
        prec = jnp.maximum(jnp.exp(log_table), jnp.finfo(log_table.dtype).tiny)
        return prec.reshape(prec.shape[:-2] + (shape[0] * shape[1],))
    return GridRVM(shape, prior).precision(alpha, None if prior == "rvm" else beta)


# -- step 2: w | omega, alpha, beta ------------------------------------------------------
def draw_w(key, Phi, kappa, omega, prec, bcm: bool):
    """w ~ N(m, V), V^-1 = Phi^T diag(omega) Phi + diag(prec), m = V Phi^T kappa.

    bcm False: the Cholesky of the M x M scaled precision (pg_gibbs.draw_beta with
    tau = 1 / prec). bcm True: Bhattacharya, Chakraborty & Mallick's algorithm, one
    N x N Cholesky (module docstring, step 2)."""
    if not bcm:
        return draw_beta(key, Phi, kappa, omega, -jnp.log(prec))
    k_u, k_delta = jax.random.split(key)
    n, m = Phi.shape
    var = 1.0 / prec
    u = jnp.sqrt(var) * jax.random.normal(k_u, (m,))
    delta = jax.random.normal(k_delta, (n,))
    root = jnp.sqrt(omega)
    A = root[:, None] * Phi
    AS = A * var[None, :]
    L = jnp.linalg.cholesky(AS @ A.T + jnp.eye(n))
    z = jax.scipy.linalg.cho_solve((L, True), kappa / root - (A @ u + delta))
    return u + AS.T @ z


# -- step 3: the precisions given w ------------------------------------------------------
def alpha_gamma_params(prior, shape, w, beta, a0, b0):
    """(shape, rate) of the Gamma conditional of alpha given w (and beta): one pair per
    row for the p-grid, per weight for the rvm (not defined for the s-grid)."""
    if prior == "rvm":
        return a0 + 0.5 + jnp.zeros_like(w), b0 + 0.5 * w * w
    if prior != "p-grid":
        raise ValueError(f"alpha has a Gamma conditional under the p-grid and the rvm, not the {prior}")
    W2 = (w * w).reshape(shape)
    return a0 + 0.5 * shape[1] + jnp.zeros(shape[0]), b0 + 0.5 * W2 @ beta


def beta_gamma_params(shape, w, alpha, c0, d0):
    """(shape, rate) of the p-grid's Gamma conditional of beta given w and alpha."""
    W2 = (w * w).reshape(shape)
    return c0 + 0.5 * shape[0] + jnp.zeros(shape[1]), d0 + 0.5 * alpha @ W2


def sgrid_log_conditional(x, w_line, log_other, shape0, rate0):
    """log density of x = log alpha_i given the row's weights w_i. and beta (or of
    x = log beta_j given the column's weights and alpha), up to a constant, Jacobian of
    the log included: shape0 x - rate0 e^x + sum [1/2 log(e^x + other) - 1/2 e^x w^2],
    with the other factors given as logs (log(e^x + other) = logaddexp(x, log other):
    finite however small either is)."""
    t = jnp.exp(x)
    value = shape0 * x - rate0 * t + jnp.sum(0.5 * jnp.logaddexp(x, log_other) - 0.5 * t * w_line * w_line)
    # e^x overflows far out on the right: such points are outside any slice, not NaN
    return jnp.where(jnp.isfinite(value), value, -jnp.inf)


def _slice_lines(key, log_values, W, log_other, shape0, rate0, widths):
    """A slice update of every log precision of one kind (rows of W against the other
    kind, given as logs)."""
    def update(key_i, x_i, w_line, width_i):
        def logf(x):
            return sgrid_log_conditional(x, w_line, log_other, shape0, rate0)

        x_new, _, evals, capped = slice_1d(key_i, x_i, logf(x_i), logf, width_i)
        return x_new, evals, capped

    keys = jax.random.split(key, log_values.shape[0])
    x, evals, caps = jax.vmap(update)(keys, log_values, W, widths)
    return x, jnp.sum(evals), jnp.sum(caps.astype(jnp.int32))


# -- step 4: the p-grid's ridge ----------------------------------------------------------
def ridge_gig_params(shape, alpha, beta, a0, b0, c0, d0):
    """(p, a, b) of the GIG conditional of the ridge's scale c (DERIVATIONS.md §5.5), in
    the parametrization of models.distributions.GIG: density ~ c^(p-1) e^(-(a c + b / c)/2)."""
    m1, m2 = shape
    return m1 * a0 - m2 * c0, 2.0 * b0 * jnp.sum(alpha), 2.0 * d0 * jnp.sum(beta)


def ridge_move(key, shape, alpha, beta, a0, b0, c0, d0):
    """(c alpha, beta / c) with c drawn from its GIG conditional."""
    c = GIG(*ridge_gig_params(shape, alpha, beta, a0, b0, c0, d0)).sample(key)
    return alpha * c, beta / c


# -- the sweep ---------------------------------------------------------------------------
def _sweep(state: ChainState, widths, Phi, kappa, hyper, ridge, prior, shape, bcm):
    a0, b0, c0, d0 = hyper[0], hyper[1], hyper[2], hyper[3]
    key, k_omega, k_w, k_alpha, k_beta, k_ridge = jax.random.split(state.key, 6)
    omega = sample_pg1(k_omega, Phi @ state.w)
    w = draw_w(k_w, Phi, kappa, omega, _precision(prior, shape, state.alpha, state.beta), bcm)
    evals = caps = jnp.zeros((), jnp.int32)
    beta = state.beta
    if prior == "s-grid":
        m1 = shape[0]
        W = w.reshape(shape)
        # the state holds log alpha, log beta (ChainState)
        alpha, ev_a, cap_a = _slice_lines(k_alpha, state.alpha, W, state.beta, a0, b0, widths[:m1])
        beta, ev_b, cap_b = _slice_lines(k_beta, state.beta, W.T, alpha, c0, d0, widths[m1:])
        evals, caps = ev_a + ev_b, cap_a + cap_b
    else:
        sh, rate = alpha_gamma_params(prior, shape, w, state.beta, a0, b0)
        alpha = jax.random.gamma(k_alpha, sh) / rate
        if prior == "p-grid":
            sh, rate = beta_gamma_params(shape, w, alpha, c0, d0)
            beta = jax.random.gamma(k_beta, sh) / rate
            # a traced switch (a real branch: the chains are not vmapped), so that runs
            # with and without the move share one compiled program
            alpha, beta = jax.lax.cond(ridge, lambda ab: ridge_move(k_ridge, shape, *ab, a0, b0, c0, d0),
                                       lambda ab: ab, (alpha, beta))
    return ChainState(w, alpha, beta, key), {"evaluations": evals, "shrink_caps": caps}


def _block(state: ChainState, widths, Phi, kappa, hyper, ridge, prior, shape, bcm, n_sweeps: int):
    def step(st, _):
        st, stats = _sweep(st, widths, Phi, kappa, hyper, ridge, prior, shape, bcm)
        return st, (st.w, st.alpha, st.beta, stats)

    return jax.lax.scan(step, state, None, length=n_sweeps)


# Chains are independent: one per CPU device (pmap) when there are enough devices, else
# one after another (a vmapped while_loop - the PG draws, the GIG draw, the slice updates
# - runs every lane until the slowest is done). The data, the hyper-parameters and the
# ridge switch are arguments, so a compiled block serves every data set of the same
# shape and prior, with the move on or off.
_STATIC = (6, 7, 8, 9)
_block_one = jax.jit(_block, static_argnums=_STATIC)
_block_parallel = jax.pmap(_block, in_axes=(0, 0) + (None,) * 8, static_broadcasted_argnums=_STATIC)


def _blocks(state, widths, Phi, kappa, hyper, ridge, prior, shape, bcm, n_sweeps):
    return run_chain_blocks(_block_one, _block_parallel, state, widths, Phi, kappa, hyper, ridge, prior, shape, bcm,
                            n_sweeps)


class GridGibbsChains:
    """The chains of one run, kept so that they can be continued (as the reference's
    doublings need): ``draw(n)`` records the next n sweeps of every chain.

    Chains start over-dispersed: alpha and beta from their Gamma priors (clipped to
    :data:`INIT_RANGE`), w ~ N(0, 1 / prec). ``ridge_move`` (p-grid only) switches step 4
    on or off; ``w_method`` forces a branch of step 2 ("auto": BCM when M > N).
    """

    def __init__(self, spec, Phi, y, *, num_chains: int = 4, num_warmup: int = 1000, seed: int = 0,
                 ridge_move: bool = True, w_method: str = "auto", progress: bool = False):
        if not isinstance(spec, GridRVM):
            raise ValueError(
                f"the gridRVM Gibbs reference sampler is written for grid-rvm only, not {type(spec).__name__}")
        for name, v in (("num_chains", num_chains), ("num_warmup", num_warmup)):
            if int(v) < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if w_method not in W_METHODS:
            raise ValueError(f"w_method must be one of {W_METHODS}, got {w_method!r}")
        Phi, y = check_design(Phi, y)
        spec.check_design_width(Phi.shape[1])
        n, m = Phi.shape
        self.Phi = jnp.asarray(Phi)
        self.kappa = jnp.asarray(y - 0.5)
        self.hyper = jnp.asarray([spec.a0, spec.b0, spec.c0, spec.d0])
        self.prior, self.shape = spec.prior, tuple(spec.shape)
        self.ridge = bool(ridge_move) and self.prior == "p-grid"
        self.bcm = (m > n) if w_method == "auto" else (w_method == "bcm")
        self.num_warmup, self.progress = int(num_warmup), progress

        chains = int(num_chains)
        n_alpha = spec.hyper_shapes["alpha"][0]
        n_beta = 0 if self.prior == "rvm" else self.shape[1]
        k_alpha, k_beta, k_w, k_chains = jax.random.split(jax.random.PRNGKey(seed), 4)
        lo, hi = INIT_RANGE
        alpha0 = jnp.clip(jax.random.gamma(k_alpha, spec.a0, (chains, n_alpha)) / spec.b0, lo, hi)
        beta0 = jnp.clip(jax.random.gamma(k_beta, spec.c0, (chains, n_beta)) / spec.d0, lo, hi)
        prec0 = GridRVM(self.shape, self.prior).precision(alpha0, None if self.prior == "rvm" else beta0)
        w0 = jax.random.normal(k_w, (chains, m)) / jnp.sqrt(prec0)
        if self.prior == "s-grid":  # its state holds the logs (ChainState)
            alpha0, beta0 = jnp.log(alpha0), jnp.log(beta0)
        self.state = jax.tree_util.tree_map(np.asarray, ChainState(w0, alpha0, beta0,
                                                                   jax.random.split(k_chains, chains)))
        # slice widths of log alpha then log beta (used by the s-grid only)
        self.widths = np.ones((chains, n_alpha + n_beta))
        self.warmed_up = False

    def _run(self, n_sweeps):
        state, out = _blocks(self.state, self.widths, self.Phi, self.kappa, self.hyper,
                             np.asarray(self.ridge), self.prior, self.shape, self.bcm, n_sweeps)
        # kept on the host: pmap returns the state sharded over the devices, and an input
        # laid out unlike the first call's would compile the block a second time
        self.state = jax.tree_util.tree_map(np.asarray, state)
        return out

    def warmup(self) -> None:
        """Run the warm-up: ``num_warmup`` sweeps rounded up to whole blocks of :data:`BLOCK`;
        under the s-grid prior, after every block the slice widths become three sds (per chain,
        clipped) of each log precision (the other priors have no slice updates to adapt). Its
        draws are discarded; :meth:`draw` runs it first if needed."""
        blocks = -(-self.num_warmup // BLOCK)
        bar = progress_bar(self.progress, blocks, "grid-Gibbs warm-up")
        for _ in range(blocks):
            _, alpha_blk, beta_blk, _ = self._run(BLOCK)
            if self.prior == "s-grid":
                # three posterior sds of each log precision (per chain; the state's own
                # coordinates, always finite), within sane bounds
                logs = np.concatenate([np.asarray(alpha_blk), np.asarray(beta_blk)], axis=2)
                self.widths = np.clip(3.0 * np.std(logs, axis=1), 1e-2, 1e2)
            bar.update(1)
        bar.close()
        self.warmed_up = True

    def draw(self, n: int):
        """(draws, stats) of the next n sweeps: draws {"w": (chains, n, M), "alpha":
        (chains, n, M1 or M), "beta": (chains, n, M2) unless rvm} - every block the sampler
        moves, all diagnosed (omega is redrawn from its exact conditional given w in every
        sweep and kept nowhere: it mixes as Phi w does). stats (chains, n) arrays
        "diverging" (all False), "evaluations" (log-density evaluations of the s-grid's
        slice updates; 0 for the conjugate priors) and "shrink_caps" (slice updates that
        kept their old value because shrinkage hit its limit)."""
        if not self.warmed_up:
            self.warmup()

        def run_block():
            w_blk, alpha_blk, beta_blk, st = self._run(BLOCK)
            if self.prior == "s-grid":  # the model's sites are the precisions themselves
                alpha_blk, beta_blk = np.exp(alpha_blk), np.exp(beta_blk)
            draws = {"w": w_blk, "alpha": alpha_blk}
            if self.prior != "rvm":
                draws["beta"] = beta_blk
            return draws, st

        bar = progress_bar(self.progress, -(-int(n) // BLOCK), "grid-Gibbs")
        return record_blocks(run_block, n, BLOCK, bar)


class GridGibbsRun(GibbsRun):
    """This sampler as a reference sampler (``ReferenceConfig(sampler=GRID_GIBBS)``,
    or by name through its model's record),
    ridge move on and the w-draw chosen by the design's shape."""

    name = "zoo.grid-gibbs"

    def __init__(self, spec, Phi, y, config, progress: bool):
        self.chains = GridGibbsChains(spec, Phi, y, num_chains=config.num_chains, num_warmup=config.num_warmup,
                                      seed=config.seed, progress=progress)
        self.num_samples, self.num_chains = config.num_samples, config.num_chains


#: the reference-sampler entry gridRVM's registry record brings
GRID_GIBBS = ReferenceSampler(
    "grid-gibbs", GridGibbsRun, code_modules=(__name__,),
    description="Polya-Gamma Gibbs with a move along the p-grid's scale ridge (validation/references/grid_gibbs.py; "
                "same posterior, checked against the model's log density and NUTS in the test suite)")
