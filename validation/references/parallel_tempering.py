"""A reference sampler for posteriors with separated modes: parallel tempering with HMC moves.

Why. NUTS moves by Hamiltonian trajectories of one fixed energy level at a time; a
posterior whose modes are divided by a region of low density (BBLR at a large gamma^2 /
lam: DERIVATIONS.md §6.7) keeps each chain in the mode it found first. R-hat notices
that (chains started apart disagree), but no amount of NUTS draws repairs it. Parallel
tempering (replica exchange; Geyer 1991, Hukushima & Nemoto 1996) runs K copies of the
chain on the tempered targets

    pi_beta(theta) ∝ p(theta) p(y | theta)^beta,   1 = beta_0 > beta_1 > ... > beta_{K-1} = 0,

and proposes to exchange the states of neighbouring temperatures. The hottest copy samples
the prior, where every mode is reachable; an exchange is accepted with probability
min(1, exp((beta_k - beta_{k+1}) (l_{k+1} - l_k))), l = log p(y | theta), which leaves the
product of the tempered targets invariant, so the coldest copy is a Markov chain whose
stationary law is the posterior itself. That is the design choice: the draws of the cold
copy are an ordinary Markov chain, so the zoo's certification rule (R-hat across
independently started runs, bulk and tail ESS, divergences) applies unchanged; a
sequential Monte Carlo sampler would instead need a new, weaker notion of effective size
for its resampled particles.

The moves. Each copy makes one HMC transition per iteration (LEAPFROG_STEPS leapfrog
steps, the step size jittered uniformly by +-20 % so that no trajectory length resonates
with the target), on the unconstrained parameters of the NumPyro model, with a diagonal
mass matrix and step size of its own. The exchanges follow the deterministic even-odd
scheme (Okabe et al. 2001; Syed et al. 2021: non-reversible, so a state travels between
the ends in O(K) iterations instead of O(K^2)): at even iterations the pairs (0, 1), (2, 3),
..., at odd ones (1, 2), (3, 4), ...

The temperatures. Warm-up places the ladder so that every neighbouring pair rejects
equally often (Syed et al. 2021, §5: the cumulative rejection rate Lambda(beta) is
estimated from one block of exchanges, and the new ladder puts beta_k at
Lambda^-1(k Lambda(1) / (K - 1)) by linear interpolation). Lambda(1), the global
communication barrier, is reported: a round trip needs about 2 Lambda + 2 exchanges' worth of
luck, and K much above 2 Lambda buys little.

What certifies it. The rule of ``validation/references/`` on the cold copy's draws, plus
two checks of this sampler's own: divergent HMC transitions of the cold copy (an energy
error above DIVERGENCE_ENERGY) count as divergences, and every run must complete at least
``Certification.min_round_trips`` round trips (a state carried from the coldest to the
hottest copy and back) while it records draws. A round trip is a fresh descent from the
prior into the posterior; with too few, the share of a mode rests on too few descents for
R-hat to have had a chance to see it missing.

The warm-up (num_warmup iterations, in blocks of BLOCK): the step size of every copy by
dual averaging (Hoffman & Gelman 2014) towards an acceptance of TARGET_ACCEPT; the ladder
re-placed after every block but the last two; the mass matrix set to each copy's
regularized draw variance after the blocks listed in MASS_BLOCKS, the step size's averaging
restarted after each. Then everything is frozen and the draws are recorded.

The sampler works on any model of the zoo: the tempered potential is built from the model's
own NumPyro program (its prior part with the observed sites blocked, its log-likelihood
from the observed sites), with the data passed as arguments, so one compiled program
serves every data set of one shape (SBC, tables).
"""
from __future__ import annotations

import json
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.util import (
    constrain_fn,
    initialize_model,
    log_likelihood,
    potential_energy,
)

from ...inference.compile_cache import CompiledPrograms
from ...models.checks import check_design
from .sampler import ReferenceSampler
from .slice_sampling import GibbsRun, progress_bar

#: copies of the chain (temperatures), the coldest at the posterior, the hottest at the prior
N_TEMPERATURES = 8
LEAPFROG_STEPS = 10
#: the step-size jitter: each transition's step is eps * U(1 - JITTER, 1 + JITTER)
JITTER = 0.2
TARGET_ACCEPT = 0.7
#: an HMC transition whose energy error exceeds this is divergent (NumPyro's NUTS uses 1000)
DIVERGENCE_ENERGY = 1000.0
#: iterations per compiled block; the warm-up adapts between blocks
BLOCK = 100
#: starts drawn uniformly in [-INIT_RADIUS, INIT_RADIUS] per unconstrained coordinate, as
#: NumPyro's default init_to_uniform does for NUTS (dispersed chains, so R-hat can see modes)
INIT_RADIUS = 2.0
#: after which warm-up blocks (0-based, counted from the start) the mass matrix is re-set
MASS_BLOCKS = (2, 4, 6)
#: dual averaging constants (Hoffman & Gelman 2014, as in Stan)
DA_GAMMA, DA_T0, DA_KAPPA = 0.05, 10.0, 0.75


class _Programs(NamedTuple):
    """The model's pieces on the flat unconstrained vector."""

    neg_log_prior: callable  # (z, Phi, y) -> -log p(theta) - log|Jacobian|
    log_lik: callable  # (z, Phi, y) -> log p(y | theta)
    constrain: callable  # (z, Phi, y) -> {site: constrained value}
    size: int


#: the programs of the last few (spec, shape) pairs, in the zoo's bounded cache; keyed by
#: the spec's content, since model specs compare by identity (an SBC run builds a new spec
#: object per simulation, and a cache keyed by identity rebuilt and recompiled everything
#: in each - until LLVM ran out of memory for executables)
_PROGRAMS = CompiledPrograms("parallel-tempering programs", max_entries=8)


def _programs(spec, n: int, m: int) -> _Programs:
    """The programs of ``_build_programs`` for this spec's content and this shape."""
    key = (type(spec).__module__, type(spec).__qualname__, json.dumps(spec.to_dict(), sort_keys=True, default=repr),
           int(n), int(m))
    return _PROGRAMS.get(key, lambda: _build_programs(spec, n, m))[0]


def _build_programs(spec, n: int, m: int) -> _Programs:
    """The tempered target's two parts, built from the model's NumPyro program. The prior
    part is the potential energy of the model with its observed sites hidden (so it keeps
    the Jacobians of the constraining transforms); the likelihood part is the sum of the
    observed sites' log probabilities at the constrained values."""
    model = spec.model
    # the shapes are all initialize_model needs: the data are arguments of every program
    # built here, so one compiled program serves every data set of this shape
    info = initialize_model(jax.random.PRNGKey(0), model, model_args=(jnp.zeros((n, m)),),
                            model_kwargs={"y": jnp.zeros(n)})
    z0 = info.param_info.z
    _, unravel = ravel_pytree(z0)
    size = int(ravel_pytree(z0)[0].shape[0])
    # the data sites by name: hiding every observed site would also hide the factors that
    # carry the transforms' Jacobians (NumPyro adds them as observed sites while it
    # computes a potential energy), and the prior part would lose them
    trace = handlers.trace(handlers.seed(model, jax.random.PRNGKey(0))).get_trace(
        jnp.zeros((n, m)), y=jnp.zeros(n))
    observed = [name for name, site in trace.items() if site["type"] == "sample" and site["is_observed"]]
    prior_only = handlers.block(model, hide=observed)

    def neg_log_prior(z, Phi, y):
        return potential_energy(prior_only, (Phi,), {"y": y}, unravel(z))

    def constrain(z, Phi, y):
        return constrain_fn(model, (Phi,), {"y": y}, unravel(z))

    def log_lik(z, Phi, y):
        parts = log_likelihood(model, constrain(z, Phi, y), Phi, y=y, batch_ndims=0)
        return sum(jnp.sum(v) for v in parts.values())

    return _Programs(neg_log_prior, log_lik, constrain, size)


class _Copies(NamedTuple):
    """Every chain's K copies: arrays of shape (chains, K, ...), position k at temperature k."""

    z: jax.Array  # (C, K, D) unconstrained parameters
    nlp: jax.Array  # (C, K) -log prior
    ll: jax.Array  # (C, K) log-likelihood
    g_nlp: jax.Array  # (C, K, D)
    g_ll: jax.Array  # (C, K, D)
    ident: jax.Array  # (C, K) which replica sits at each temperature
    last_end: jax.Array  # (C, K) per replica: 0 none yet, 1 last at the cold end, 2 at the hot end


class _Adapt(NamedTuple):
    """Dual-averaging state per copy (C, K)."""

    log_eps: jax.Array
    log_eps_bar: jax.Array
    h_bar: jax.Array
    mu: jax.Array
    t: jax.Array


def _value_and_grads(prog, z, Phi, y):
    nlp, g_nlp = jax.value_and_grad(prog.neg_log_prior)(z, Phi, y)
    ll, g_ll = jax.value_and_grad(prog.log_lik)(z, Phi, y)
    return nlp, ll, g_nlp, g_ll


def _hmc(prog, key, z, nlp, ll, g_nlp, g_ll, beta, eps, inv_mass, Phi, y):
    """One HMC transition of one copy on U_beta = -log prior - beta log-likelihood."""
    k_mom, k_jit, k_acc = jax.random.split(key, 3)
    p = jax.random.normal(k_mom, z.shape) / jnp.sqrt(inv_mass)
    step = eps * jax.random.uniform(k_jit, minval=1.0 - JITTER, maxval=1.0 + JITTER)
    h0 = nlp - beta * ll + 0.5 * jnp.sum(inv_mass * p * p)

    def leapfrog(_, c):
        z, p, nlp, ll, g_nlp, g_ll = c
        p = p - 0.5 * step * (g_nlp - beta * g_ll)
        z = z + step * inv_mass * p
        nlp, ll, g_nlp, g_ll = _value_and_grads(prog, z, Phi, y)
        p = p - 0.5 * step * (g_nlp - beta * g_ll)
        return z, p, nlp, ll, g_nlp, g_ll

    z1, p1, nlp1, ll1, gn1, gl1 = jax.lax.fori_loop(0, LEAPFROG_STEPS, leapfrog, (z, p, nlp, ll, g_nlp, g_ll))
    h1 = nlp1 - beta * ll1 + 0.5 * jnp.sum(inv_mass * p1 * p1)
    delta = jnp.where(jnp.isfinite(h1), h1 - h0, jnp.inf)
    accept_prob = jnp.exp(jnp.minimum(0.0, -delta))
    take = jax.random.uniform(k_acc) < accept_prob
    pick = lambda new, old: jnp.where(take, new, old)  # noqa: E731
    return (pick(z1, z), pick(nlp1, nlp), pick(ll1, ll), pick(gn1, g_nlp), pick(gl1, g_ll),
            accept_prob, delta > DIVERGENCE_ENERGY)


def _exchange(key, copies_c, beta, parity):
    """The even-odd exchange round of one chain: returns the permuted copies, the
    acceptance probabilities of the K - 1 pairs (0 where not proposed), which pairs were
    proposed, and whether a round trip completed."""
    z, nlp, ll, g_nlp, g_ll, ident, last_end = copies_c
    K = beta.shape[0]
    k = jnp.arange(K - 1)
    log_r = (beta[:-1] - beta[1:]) * (ll[1:] - ll[:-1])
    prob = jnp.exp(jnp.minimum(0.0, log_r))
    proposed = (k % 2) == parity
    accepted = proposed & (jax.random.uniform(key, (K - 1,)) < prob)
    acc = accepted.astype(jnp.int32)
    # disjoint pairs: position k takes k + 1's state and vice versa where accepted
    perm = jnp.arange(K) + jnp.pad(acc, (0, 1)) - jnp.pad(acc, (1, 0))
    z, nlp, ll, g_nlp, g_ll, ident = (a[perm] for a in (z, nlp, ll, g_nlp, g_ll, ident))
    cold, hot = ident[0], ident[K - 1]
    round_trip = last_end[cold] == 2
    last_end = last_end.at[cold].set(1)
    last_end = last_end.at[hot].set(jnp.where(last_end[hot] == 1, 2, last_end[hot]))
    return (z, nlp, ll, g_nlp, g_ll, ident, last_end), jnp.where(proposed, prob, 0.0), proposed, round_trip


@partial(jax.jit, static_argnames=("prog", "n_iter", "adapt"))
def _block(prog, key, copies, adapt_state, beta, inv_mass, it0, Phi, y, *, n_iter: int, adapt: bool):
    """n_iter iterations (HMC for every copy, then an exchange round) of every chain.

    Returns the new copies and adaptation state, and per iteration: the cold copy's
    constrained draw, its acceptance and divergence, the pairs' exchange probabilities and
    proposals, the round trips, and every copy's unconstrained state (for the mass matrix).
    """
    C, K, _ = copies.z.shape
    hmc = jax.vmap(jax.vmap(partial(_hmc, prog), in_axes=(0, 0, 0, 0, 0, 0, 0, 0, 0, None, None)),
                   in_axes=(0, 0, 0, 0, 0, 0, 0, 0, 0, None, None))
    exchange = jax.vmap(_exchange, in_axes=(0, 0, 0, None))
    constrain = jax.vmap(prog.constrain, in_axes=(0, None, None))

    def one(carry, i):
        key, copies, ad = carry
        key, k_hmc, k_ex = jax.random.split(key, 3)
        eps = jnp.exp(ad.log_eps)
        z, nlp, ll, g_nlp, g_ll, acc, div = hmc(
            jax.random.split(k_hmc, C * K).reshape(C, K, -1), copies.z, copies.nlp, copies.ll, copies.g_nlp,
            copies.g_ll, beta, eps, inv_mass, Phi, y)
        if adapt:
            t = ad.t + 1.0
            h_bar = (1.0 - 1.0 / (t + DA_T0)) * ad.h_bar + (TARGET_ACCEPT - acc) / (t + DA_T0)
            log_eps = ad.mu - jnp.sqrt(t) / DA_GAMMA * h_bar
            w = t ** (-DA_KAPPA)
            ad = _Adapt(log_eps, w * log_eps + (1.0 - w) * ad.log_eps_bar, h_bar, ad.mu, t)
        # the exchange moves states between temperatures; the cold copy's HMC statistics
        # are those of the transition made at temperature 0, before the exchange
        moved, prob, proposed, trip = exchange(
            jax.random.split(k_ex, C), (z, nlp, ll, g_nlp, g_ll, copies.ident, copies.last_end), beta,
            (it0 + i) % 2)
        copies = _Copies(*moved)
        out = {"cold": constrain(copies.z[:, 0], Phi, y), "accept": acc[:, 0], "diverging": div[:, 0],
               "swap_prob": prob, "swap_proposed": proposed, "round_trip": trip, "z": copies.z}
        return (key, copies, ad), out

    (key, copies, adapt_state), out = jax.lax.scan(one, (key, copies, adapt_state), jnp.arange(n_iter))
    return key, copies, adapt_state, out


@partial(jax.jit, static_argnames=("prog",))
def _start_values(prog, z, Phi, y):
    """-log prior, log-likelihood and their gradients at every copy's start (C, K, D);
    compiled once per program (a jit built per run would be compiled, and kept, per run:
    an SBC of hundreds of runs ran out of memory for executables that way)."""
    return jax.vmap(jax.vmap(partial(_value_and_grads, prog), in_axes=(0, None, None)), in_axes=(0, None, None))(
        z, Phi, y)


def place_ladder(beta: np.ndarray, reject: np.ndarray) -> tuple[np.ndarray, float]:
    """Syed et al.'s ladder update for one chain: ``beta`` descending from 1 to 0 (K
    values), ``reject`` the K - 1 neighbours' rejection rates. Returns the new ladder,
    on which the estimated cumulative barrier is split evenly, and the barrier Lambda."""
    up = np.asarray(beta, float)[::-1]  # ascending 0 .. 1
    r = np.clip(np.asarray(reject, float)[::-1], 1e-6, None)  # pair (k, k+1) in ascending order
    cum = np.concatenate([[0.0], np.cumsum(r)])
    barrier = float(cum[-1])
    new_up = np.interp(np.linspace(0.0, barrier, len(up)), cum, up)
    new_up[0], new_up[-1] = 0.0, 1.0
    return new_up[::-1].copy(), barrier


def initial_ladder(K: int) -> np.ndarray:
    """A start for the ladder, densest near the prior where the tempered targets change
    fastest for a likelihood that is informative: beta_k = (1 - k / (K - 1))^4."""
    return (1.0 - np.arange(K) / (K - 1)) ** 4


class TemperedChains:
    """``num_chains`` independent parallel-tempering runs (each with its own ladder,
    mass matrices and step sizes) on the spec's posterior."""

    def __init__(self, spec, Phi, y, *, num_chains: int = 4, num_warmup: int = 1000, seed: int = 0,
                 n_temperatures: int = N_TEMPERATURES, progress: bool = False):
        Phi, y = check_design(Phi, y)
        if int(n_temperatures) < 2:
            raise ValueError(f"parallel tempering needs at least 2 temperatures; got {n_temperatures}")
        self.Phi, self.y = jnp.asarray(Phi), jnp.asarray(y)
        self.prog = _programs(spec, *self.Phi.shape)
        C, K, D = int(num_chains), int(n_temperatures), self.prog.size
        self.C, self.K, self.progress = C, K, progress
        key = jax.random.PRNGKey(seed)
        key, k_init = jax.random.split(key)
        z = jax.random.uniform(k_init, (C, K, D), minval=-INIT_RADIUS, maxval=INIT_RADIUS)
        nlp, ll, g_nlp, g_ll = _start_values(self.prog, z, self.Phi, self.y)
        ident = jnp.tile(jnp.arange(K), (C, 1))
        self.copies = _Copies(z, nlp, ll, g_nlp, g_ll, ident, jnp.zeros((C, K), jnp.int32))
        self.key = key
        self.beta = np.tile(initial_ladder(K), (C, 1))
        self.inv_mass = np.ones((C, K, D))
        self.adapt = self._fresh_adaptation(np.full((C, K), 0.1))
        self.iteration = 0
        self.barrier = np.full(C, np.nan)
        self._warm_up(int(num_warmup))

    @staticmethod
    def _fresh_adaptation(eps):
        log_eps = jnp.log(jnp.asarray(eps))
        zeros = jnp.zeros_like(log_eps)
        return _Adapt(log_eps, log_eps, zeros, jnp.log(10.0) + log_eps, zeros)

    def _run(self, n_iter, adapt):
        self.key, self.copies, self.adapt, out = _block(
            self.prog, self.key, self.copies, self.adapt, jnp.asarray(self.beta), jnp.asarray(self.inv_mass),
            self.iteration, self.Phi, self.y, n_iter=int(n_iter), adapt=adapt)
        self.iteration += int(n_iter)
        return jax.tree_util.tree_map(np.asarray, out)

    def _warm_up(self, n_warmup: int):
        sizes = [min(BLOCK, n_warmup - start) for start in range(0, n_warmup, BLOCK)]
        bar = progress_bar(self.progress, len(sizes), "tempering warm-up")
        for b, size in enumerate(sizes):
            out = self._run(size, adapt=True)
            bar.update(1)
            if b < len(sizes) - 2:
                proposed = out["swap_proposed"].sum(axis=0)  # (C, K-1)
                reject = 1.0 - out["swap_prob"].sum(axis=0) / np.maximum(proposed, 1)
                for c in range(self.C):
                    self.beta[c], self.barrier[c] = place_ladder(self.beta[c], reject[c])
            if b in MASS_BLOCKS and b < len(sizes) - 1:
                z = out["z"]  # (n, C, K, D)
                n = z.shape[0]
                # Stan's regularization towards 1e-3 (few draws, or a copy that did not move)
                self.inv_mass = (n / (n + 5.0)) * np.var(z, axis=0) + 1e-3 * (5.0 / (n + 5.0))
                self.adapt = self._fresh_adaptation(np.exp(np.asarray(self.adapt.log_eps_bar)))
        bar.close()
        # frozen from here on: the averaged step size
        self.adapt = self.adapt._replace(log_eps=self.adapt.log_eps_bar)

    def draw(self, n: int):
        """(draws, stats) of the next n iterations: draws ``{site: (C, n, *shape)}`` of the cold
        copy; stats (C, n): accept, diverging, round_trips, swap_accept (the mean exchange
        probability of the pairs proposed in that iteration)."""
        parts = []
        n_blocks = -(-int(n) // BLOCK)
        bar = progress_bar(self.progress, n_blocks, "tempering")
        for _ in range(n_blocks):
            parts.append(self._run(BLOCK, adapt=False))
            bar.update(1)
        bar.close()

        def stacked(get):
            return np.concatenate([np.swapaxes(get(p), 0, 1) for p in parts], axis=1)[:, :int(n)]

        draws = {name: stacked(lambda p, name=name: p["cold"][name]) for name in parts[0]["cold"]}
        proposed = stacked(lambda p: p["swap_proposed"])
        stats = {
            "acceptance_rate": stacked(lambda p: p["accept"]),
            "diverging": stacked(lambda p: p["diverging"]),
            "round_trips": stacked(lambda p: p["round_trip"]).astype(np.int64),
            "swap_accept": stacked(lambda p: p["swap_prob"]).sum(axis=-1) / np.maximum(proposed.sum(axis=-1), 1),
        }
        return draws, stats

    def ladder(self) -> dict:
        """The warm-up's results, per chain: the temperatures, the barrier estimate, step sizes."""
        return {"beta": self.beta.tolist(), "barrier": self.barrier.tolist(),
                "step_size": np.exp(np.asarray(self.adapt.log_eps)).tolist()}


def round_trip_checks(stats, rule) -> tuple[list[str], dict]:
    """Failures and numbers of the tempering-specific check, from the stored statistics:
    every chain completed at least ``rule.min_round_trips`` round trips while recording."""
    trips = np.asarray(stats["round_trips"]).sum(axis=1)
    failures = [f"chain {c}: {int(t)} round trips between the coldest and hottest copies "
                f"(at least {rule.min_round_trips} needed: the tempering did not carry states "
                "between the prior and the posterior often enough)"
                for c, t in enumerate(trips) if t < rule.min_round_trips]
    return failures, {"round_trips_min": int(trips.min()),
                      "swap_accept_mean": float(np.mean(np.asarray(stats["swap_accept"])))}


class TemperingRun(GibbsRun):
    """Parallel tempering as a reference sampler (``ReferenceConfig(sampler=PARALLEL_TEMPERING)``,
    or by name through its model's record):
    num_warmup and num_samples count iterations (one HMC transition of every copy and one
    exchange round). ``first``, ``more`` and ``sample_stats`` are the Gibbs samplers'
    (``self.chains.draw``); the checks and the layout are this sampler's own."""

    name = "zoo.parallel-tempering"
    #: the round-trip check counts events: continuing the chains can meet it
    checks_count_events = True

    def __init__(self, spec, Phi, y, config, progress: bool):
        self.chains = TemperedChains(spec, Phi, y, num_chains=config.num_chains, num_warmup=config.num_warmup,
                                     seed=config.seed, progress=progress)
        self.num_samples, self.num_chains = config.num_samples, config.num_chains

    @staticmethod
    def sampler_checks(stats, settings, rule) -> tuple[list[str], dict]:
        return round_trip_checks(stats, rule)

    def layout(self) -> dict:
        # every chain in one vectorized program; each has its own key stream
        return {"chain_method": "vectorized", **self.chains.ladder()}


#: the entry a model's record brings to use this sampler (BBLR's does)
PARALLEL_TEMPERING = ReferenceSampler(
    "parallel-tempering", TemperingRun, code_modules=(__name__,),
    description="parallel tempering with HMC moves on the NumPyro model (validation/references/parallel_tempering.py; "
                "the cold copy's draws are an ordinary Markov chain on the posterior; its tempered target checked "
                "against the model's log density in the test suite)")
