"""Univariate slice sampling (Neal 2003: stepping out and shrinkage), written for
``jax.lax`` so that it can sit inside a jitted Gibbs sweep, and the block bookkeeping of
recording chains; shared by the reference samplers of validation/references/slice_gibbs.py and
validation/references/pg_gibbs.py."""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .sampler import ReferenceRunner

#: stepping-out limit (in widths) and shrinkage limit per univariate slice update
MAX_STEP_OUT = 32
MAX_SHRINK = 200


def slice_1d(key, x0, logf0, logf, width):
    """One slice-sampling update of x0 under log density ``logf`` (logf0 = logf(x0)).

    Returns (x1, logf(x1), evaluations, capped). ``capped`` is True if shrinkage hit its
    limit and x0 was kept (it never happens unless the density is degenerate; counted).
    """
    k_level, k_pos, k_split, k_shrink = jax.random.split(key, 4)
    level = logf0 - jax.random.exponential(k_level)
    left = x0 - width * jax.random.uniform(k_pos)
    right = left + width
    # the random split of the step-out budget keeps the update reversible (Neal, Fig. 3)
    j = jnp.floor(MAX_STEP_OUT * jax.random.uniform(k_split)).astype(jnp.int32)
    k = MAX_STEP_OUT - 1 - j

    def out_left(c):
        lo, jj, ev = c
        return lo - width, jj - 1, ev + 1

    def out_right(c):
        hi, kk, ev = c
        return hi + width, kk - 1, ev + 1

    left, _, ev_l = jax.lax.while_loop(lambda c: (c[1] > 0) & (logf(c[0]) > level), out_left, (left, j, 0))
    right, _, ev_r = jax.lax.while_loop(lambda c: (c[1] > 0) & (logf(c[0]) > level), out_right, (right, k, 0))

    def shrink_cond(c):
        _, _, _, _, done, it, _ = c
        return (~done) & (it < MAX_SHRINK)

    def shrink_body(c):
        lo, hi, x, fx, done, it, key = c
        key, sub = jax.random.split(key)
        x_new = lo + (hi - lo) * jax.random.uniform(sub)
        f_new = logf(x_new)
        accept = f_new > level
        lo = jnp.where(~accept & (x_new < x0), x_new, lo)
        hi = jnp.where(~accept & (x_new >= x0), x_new, hi)
        return lo, hi, jnp.where(accept, x_new, x), jnp.where(accept, f_new, fx), accept, it + 1, key

    _, _, x1, f1, done, it, _ = jax.lax.while_loop(
        shrink_cond, shrink_body, (left, right, x0, logf0, jnp.array(False), 0, k_shrink))
    # two evaluations of logf at the initial ends are part of the step-out loops' tests
    evals = ev_l + ev_r + it + 2
    return x1, f1, evals, ~done


def progress_bar(enabled, total, desc):
    """A tqdm bar of ``total`` blocks labelled ``desc`` where ``enabled``, else a stand-in whose
    ``update`` and ``close`` do nothing (tqdm is imported only when a bar is shown)."""
    if not enabled:
        class _No:
            def update(self, n=1):
                pass

            def close(self):
                pass

        return _No()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="block")


def record_blocks(run_block: Callable[[], tuple[dict, dict]], n_sweeps: int, block: int, bar):
    """(draws, stats) of the next ``n_sweeps`` sweeps of every chain.

    run_block() advances the chains by ``block`` sweeps and returns (draws, stats): dicts
    of (chains, block, ...) arrays. Whole blocks keep one compiled program; the surplus
    sweeps of the last block are dropped, so a continuation starts from a state past the
    recorded draws - still the same Markov chain, only thinned once at the seam. stats
    gain "diverging", all False: a Gibbs sampler has no divergences.
    """
    parts = []
    for _ in range(-(-int(n_sweeps) // block)):
        parts.append(run_block())
        bar.update(1)
    bar.close()

    def joined(i):
        return {name: np.concatenate([np.asarray(p[i][name]) for p in parts], axis=1)[:, :int(n_sweeps)]
                for name in parts[0][i]}

    draws, stats = joined(0), joined(1)
    stats["diverging"] = np.zeros(next(iter(stats.values())).shape[:2], dtype=bool)
    return draws, stats


class GibbsRun(ReferenceRunner):
    """The reference-sampler side of a Gibbs sampler built on these blocks: what
    ``validation/references/`` calls (``first``, ``more``, ``sample_stats``,
    ``sampler_checks``, ``layout``). A subclass sets ``self.chains`` (an object whose
    ``draw(n)`` returns (draws, stats) of the next n sweeps, warming up first) and
    ``self.num_samples``/``self.num_chains``."""

    name = "zoo.gibbs"  # the InferenceData's "sampler" attribute; subclasses name theirs

    def first(self):
        return self.chains.draw(self.num_samples)

    def more(self, n_more: int):
        return self.chains.draw(n_more)

    @staticmethod
    def sample_stats(extra):
        return {k: np.asarray(v) for k, v in extra.items()}

    @staticmethod
    def sampler_checks(stats, settings, rule) -> tuple[list[str], dict]:
        # a slice update that ran out of shrinkage steps kept its old value: the chain is
        # then not exactly the posterior's, so a run with any such event is not certified
        caps = int(np.sum(stats["shrink_caps"]))
        return ([f"{caps} slice updates hit the shrinkage limit"] if caps else []), {"shrink_caps": caps}

    def layout(self) -> dict:
        # each chain has its own key, so the draws are the same either way
        return {"chain_method": "parallel" if jax.local_device_count() >= self.num_chains else "sequential"}


def run_chain_blocks(block_one, block_parallel, state, widths, *args):
    """One compiled block of sweeps for every chain of a Gibbs sampler: one chain per CPU
    device (``block_parallel``, a pmap) when the process has enough devices, else one after
    another (``block_one``, a jit): a vmapped while_loop would run every chain until the
    slowest is done. ``state`` and ``widths`` carry the chains in their leading axis;
    ``args`` are shared by every chain. Each chain has its own key, so both layouts give the
    same draws."""
    chains = jax.tree_util.tree_leaves(state)[0].shape[0]
    if jax.local_device_count() >= chains:
        return block_parallel(state, widths, *args)
    outs = [block_one(jax.tree_util.tree_map(lambda x: x[c], state), jax.tree_util.tree_map(lambda x: x[c], widths),
                      *args) for c in range(chains)]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)
