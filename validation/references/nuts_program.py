"""NUTS as one compiled program that takes the data as arguments: many data sets and their
chains in one vmapped call, compiled once per shape.

Why: ``numpyro.infer.MCMC.run`` compiles its sampling loop anew on every call, even for a
kept MCMC object (it jits a fresh wrapper that it passes as a static argument). On the
zoo's SBC problem (60 points, 6 basis functions) that compilation is about 90 % of a
reference's time, so SBC of NUTS over 100 simulated data sets spent most of its time
compiling the same program 100 times. Here the program is built from NumPyro's own
pieces - :func:`numpyro.infer.util.initialize_model` with ``dynamic_args=True``, which
gives the potential energy as a function of the data, and the functional NUTS kernel
:func:`numpyro.infer.hmc.hmc` driven by that generator - so the data are traced
arguments, and one compiled program serves every data set, seed and batch of one shape.

What is the same as :class:`~zoo.validation.references.nuts.NutsRun` (``MCMC`` with
``NUTS``): the model's potential, the kernel (multinomial NUTS, diagonal mass matrix and
step size adapted by NumPyro's windowed warm-up, target acceptance and tree depth from the
:class:`~zoo.validation.references.config.ReferenceConfig`), the initialization rule
(NumPyro's ``init_to_uniform``: every unconstrained coordinate uniform on (-2, 2), redrawn
until the potential and its gradient are finite), and the draws kept (the constrained
sites, via the model's own transforms). What differs: the random stream (each chain's key
is split here, not as ``MCMC`` splits it) and the arithmetic of a vectorized batch (batched
matrix products may round differently from single ones, and a NUTS trajectory amplifies the
last bit). The draws are therefore
*equivalent in distribution* to ``MCMC``'s, not identical - tested in
``tests/validation/references/test_nuts_program.py`` against ``MCMC`` on one posterior, and by SBC itself.

Under ``vmap`` every lane of a batch runs until the slowest lane's tree is built (a
``while_loop`` of a vmapped NUTS step continues while any lane continues), so a batch
costs its deepest tree at each step; the ``batch`` size of :func:`sample_many` bounds the
waste and the memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.infer import init_to_uniform
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model

from ...models.base import as_jax, is_classifier, problem_shape
from ..base.code_digest import spec_key

#: NumPyro's HMC-state fields kept per draw (numpyro names, as NutsRun's extra fields)
STATE_FIELDS = ("diverging", "num_steps", "accept_prob", "energy", "potential_energy")
#: init_to_uniform's radius (NumPyro's default) and its number of tries
INIT_RADIUS = 2.0
INIT_TRIES = 100
#: compiled programs kept per process (one per spec, shape and settings)
_PROGRAMS: dict[str, "NutsProgram"] = {}
_MAX_PROGRAMS = 8


@dataclass(frozen=True)
class NutsSettings:
    """What the compiled program depends on besides the model and the data's shape."""

    num_chains: int
    num_warmup: int
    num_samples: int
    target_accept: float
    max_tree_depth: int

    @classmethod
    def of(cls, config) -> "NutsSettings":
        """From a :class:`~zoo.validation.references.config.ReferenceConfig`."""
        return cls(int(config.num_chains), int(config.num_warmup), int(config.num_samples),
                   float(config.target_accept), int(config.max_tree_depth))


def sampled_site_names(spec, Phi, y) -> list[str]:
    """The latent sites the model samples (not observed, not deterministic), in order. Traced
    with its latent values put where NumPyro's initialization puts them, not drawn: an improper
    flat prior (``ImproperUniform``, Stan's parameter without a sampling statement) cannot be
    drawn from."""
    trace = handlers.trace(handlers.substitute(handlers.seed(spec.model, jax.random.PRNGKey(0)),
                                               substitute_fn=init_to_uniform)).get_trace(Phi, y=y)
    return [name for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]]


class NutsProgram:
    """NUTS on ``spec.model`` for data of one shape, compiled once.

    ``run(keys, Phi, ys)`` samples D data sets at once: ``Phi`` (n, M) shared, ``ys`` (D, n)
    labels 0/1 - or, for a general model (``models/general.py``), ``Phi`` its data arrays
    shared and ``ys`` its observations by site, each with D data sets in front -, ``keys``
    (D, 2) one PRNG key per data set (its chains' keys are split from
    it). Returns ``(draws, stats)``: draws ``{site: (D, chains, num_samples, *shape)}`` of the
    ``keep`` sites and every site the model samples (constrained), stats ``{field: (D, chains,
    num_samples)}`` of :data:`STATE_FIELDS` plus ``adapt_state.step_size``, all NumPy.

    layout: "vectorized" (every chain of every data set one lane of one vmapped program,
    compiled per batch size), "parallel" (a data set's chains pmapped over the CPU devices,
    one per device; the data sets one after another) or "sequential" (one jitted chain,
    called per chain); :func:`default_layout` chooses. Whatever the layout and batch, a
    data set's draws depend on its key only (within a layout: vectorized arithmetic may
    round differently from the others).
    """

    def __init__(self, spec, Phi0, y0, settings: NutsSettings, layout: str = "vectorized",
                 keep: tuple[str, ...] = ()):
        """``Phi0``, ``y0``: one data set of the program's shape (:func:`program_for`); only its
        structure is used."""
        self.spec, self.settings = spec, settings
        info = initialize_model(jax.random.PRNGKey(0), spec.model, model_args=(Phi0,), model_kwargs={"y": y0},
                                dynamic_args=True)
        potential_gen, postprocess_gen = info.potential_fn, info.postprocess_fn
        template = info.param_info.z
        # the measured sites (deterministic ones included) and every site NUTS moves
        sampled = list(dict.fromkeys(list(keep) + sampled_site_names(spec, Phi0, y0)))
        init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo="NUTS")
        s = settings

        def uniform_init(key, potential):
            """init_to_uniform: unconstrained coordinates U(-2, 2), redrawn until finite."""
            leaves, tree = jax.tree_util.tree_flatten(template)

            def draw(k):
                ks = jax.random.split(k, len(leaves))
                return jax.tree_util.tree_unflatten(tree, [
                    jax.random.uniform(ki, jnp.shape(x), minval=-INIT_RADIUS, maxval=INIT_RADIUS)
                    for ki, x in zip(ks, leaves)])

            def finite(z):
                pe, grad = jax.value_and_grad(potential)(z)
                ok = jnp.isfinite(pe)
                for g in jax.tree_util.tree_leaves(grad):
                    ok = ok & jnp.all(jnp.isfinite(g))
                return ok

            def body(carry):
                i, k, _, _ = carry
                k, sub = jax.random.split(k)
                z = draw(sub)
                return i + 1, k, z, finite(z)

            k0, sub0 = jax.random.split(key)
            z0 = draw(sub0)
            _, _, z, _ = jax.lax.while_loop(lambda c: (c[0] < INIT_TRIES) & ~c[3], body, (1, k0, z0, finite(z0)))
            return z

        def step(args, kwargs, st):
            st = sample_kernel(st, model_args=args, model_kwargs=kwargs)
            kept = {f: getattr(st, f) for f in STATE_FIELDS}
            kept["adapt_state.step_size"] = st.adapt_state.step_size
            return st, (st.z, kept)

        def kept_draws(Phi, y, state, length):
            """``length`` draws from ``state`` on: (last state, constrained draws, stats)."""
            args, kwargs = (Phi,), {"y": y}
            state, (zs, stats) = jax.lax.scan(lambda st, _: step(args, kwargs, st), state, None, length=length)
            constrained = jax.vmap(postprocess_gen(Phi, y=y))(zs)
            return state, {k: constrained[k] for k in sampled}, stats

        def one_chain(key, Phi, y):
            k_init, k_run = jax.random.split(key)
            args, kwargs = (Phi,), {"y": y}
            z0 = uniform_init(k_init, potential_gen(Phi, y=y))
            state = init_kernel(z0, num_warmup=s.num_warmup, target_accept_prob=s.target_accept,
                                max_tree_depth=s.max_tree_depth, model_args=args, model_kwargs=kwargs, rng_key=k_run)
            state, _ = jax.lax.scan(lambda st, _: (sample_kernel(st, model_args=args, model_kwargs=kwargs), None),
                                    state, None, length=s.num_warmup)
            return kept_draws(Phi, y, state, s.num_samples)

        def continued_chain(state, Phi, y):
            # past warm-up (state.i >= num_warmup) the kernel adapts nothing: these draws
            # extend the same Markov chain with its adapted step size and mass matrix
            return kept_draws(Phi, y, state, s.num_samples)

        def per_data_set(key, Phi, y):
            return jax.vmap(one_chain, in_axes=(0, None, None))(jax.random.split(key, s.num_chains), Phi, y)

        def per_data_set_continued(states, Phi, y):
            return jax.vmap(continued_chain, in_axes=(0, None, None))(states, Phi, y)

        self.layout = layout
        if layout == "vectorized":
            self._run = jax.jit(jax.vmap(per_data_set, in_axes=(0, None, 0)))
            self._continue = jax.jit(jax.vmap(per_data_set_continued, in_axes=(0, None, 0)))
        elif layout == "parallel":
            self._chains = jax.pmap(one_chain, in_axes=(0, None, None))
            self._chains_continued = jax.pmap(continued_chain, in_axes=(0, None, None))
        else:
            self._chain = jax.jit(one_chain)
            self._chain_continued = jax.jit(continued_chain)
        self.sites = tuple(sampled)

    def run(self, keys, Phi, ys) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """NUTS on D data sets at once, each from its own key in ``keys`` (D, 2): ``(draws,
        stats)`` as NumPy arrays with leading axes (D, chains), as the class docstring says.
        :meth:`run_with_states` also returns the chains' last states, to continue them."""
        draws, stats, _ = self.run_with_states(keys, Phi, ys)
        return draws, stats

    def run_with_states(self, keys, Phi, ys):
        """As :meth:`run`, plus the chains' last states (a pytree with leading axes (D,
        chains), kept where JAX put them) for :meth:`continue_chains`."""
        Phi, ys, keys = _data(Phi), _data(ys), jnp.asarray(keys)
        if self.layout == "vectorized":
            return self._numpy(*self._run(keys, Phi, ys))
        chain_keys = [jax.random.split(keys[d], self.settings.num_chains) for d in range(_count(ys))]
        if self.layout == "parallel":
            parts = [self._chains(k, Phi, _take(ys, d)) for d, k in enumerate(chain_keys)]
        else:
            parts = [_stacked([self._chain(k, Phi, _take(ys, d)) for k in ks]) for d, ks in enumerate(chain_keys)]
        return self._numpy(*_stacked(parts))

    def continue_chains(self, states, Phi, ys):
        """``num_samples`` more draws of every chain from ``states`` (as
        :meth:`run_with_states` or this method returned them): the same Markov chains
        continued, with their adapted step sizes and mass matrices, by a second program
        compiled once per shape. Returns (draws, stats, states) as run_with_states."""
        Phi, ys = _data(Phi), _data(ys)
        if self.layout == "vectorized":
            return self._numpy(*self._continue(states, Phi, ys))
        if self.layout == "parallel":
            parts = [self._chains_continued(_take(states, d), Phi, _take(ys, d)) for d in range(_count(ys))]
        else:
            parts = [_stacked([self._chain_continued(_take(states, d, c), Phi, _take(ys, d))
                               for c in range(self.settings.num_chains)]) for d in range(_count(ys))]
        return self._numpy(*_stacked(parts))

    @staticmethod
    def _numpy(states, draws, stats):
        return ({k: np.asarray(v, dtype=float) for k, v in draws.items()},
                {k: np.asarray(v) for k, v in stats.items()}, states)


def _stacked(outs):
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *outs)


def _data(tree):
    """Data or labels as JAX arrays: a classifier's as floats (labels 0/1), a general model's
    dict of arrays with their dtypes (integer indices stay integers)."""
    if isinstance(tree, dict):
        return as_jax(tree)
    return jnp.asarray(tree, dtype=float)


def _take(tree, *index):
    """Entry ``index`` of every array of a pytree (a data set of a batch, a chain's state)."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


def _count(ys) -> int:
    """How many data sets a batch of labels (D, n) or of observations ({site: (D, ...)}) holds."""
    return int(jax.tree_util.tree_leaves(ys)[0].shape[0])


def program_for(spec, Phi, y, settings: NutsSettings, layout: str = "vectorized",
                keep: tuple[str, ...] = ()) -> NutsProgram:
    """The process's compiled program of this spec, data shape and settings (built on first
    use; JAX compiles it on its first call per batch size). ``Phi``, ``y``: one data set of
    that shape (a classifier's program is built on zeros of its design's shape with both
    labels, a general model's on the data given)."""
    key = spec_key(spec, problem_shape(Phi), problem_shape(y), sorted(settings.__dict__.items()), layout,
                   tuple(keep))
    if key not in _PROGRAMS:
        if len(_PROGRAMS) >= _MAX_PROGRAMS:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        if is_classifier(spec):
            n, M = np.shape(Phi)
            # a data set of the right shape with both labels: only the structure is used
            Phi0, y0 = jnp.zeros((n, M)), jnp.zeros(n).at[0].set(1.0)
        else:
            Phi0, y0 = as_jax(Phi), as_jax(y)
        _PROGRAMS[key] = NutsProgram(spec, Phi0, y0, settings, layout, tuple(keep))
    return _PROGRAMS[key]


def sample_many(spec, Phi, ys, keys, config, *, batch: int | None = None, layout: str = "vectorized", keep=(),
                on_batch: Callable[[int, int], None] | None = None) -> list[tuple[dict, dict]]:
    """NUTS on ``spec``'s posterior for each data set ``(Phi, ys[d])`` with key ``keys[d]``,
    ``batch`` data sets per call of the compiled program (None: all at once). Returns one
    ``(draws, stats)`` per data set, draws ``{site: (chains, draws, *shape)}`` and stats
    ``{numpyro field: (chains, draws)}`` as :class:`~zoo.validation.references.nuts.NutsRun`
    gives them."""
    keys = np.asarray(keys)
    if is_classifier(spec):
        Phi = np.asarray(Phi, dtype=float)
        ys = np.asarray(ys, dtype=float)
        if ys.ndim != 2 or ys.shape[1] != Phi.shape[0] or keys.shape[0] != ys.shape[0]:
            raise ValueError(f"sample_many needs ys (D, n) and keys (D, 2) for Phi {Phi.shape}; "
                             f"got ys {ys.shape}, keys {keys.shape}")
    else:
        ys = {k: np.asarray(v) for k, v in ys.items()}
        if keys.shape[0] != _count(ys):
            raise ValueError(f"sample_many needs one key per data set: {_count(ys)} data sets, {keys.shape[0]} keys")
    n_sets = _count(ys)
    program = program_for(spec, Phi, _take(ys, 0), NutsSettings.of(config), layout, tuple(keep))
    size = n_sets if batch is None else max(1, int(batch))
    out: list[tuple[dict, dict]] = []
    for start in range(0, n_sets, size):
        part = jax.tree_util.tree_map(lambda a: a[start:start + size], ys)
        draws, stats = program.run(keys[start:start + size], Phi, part)
        for d in range(next(iter(draws.values())).shape[0]):
            out.append(({k: v[d] for k, v in draws.items()}, {k: v[d] for k, v in stats.items()}))
        if on_batch is not None:
            on_batch(len(out), n_sets)
    return out


def default_layout(num_chains: int) -> str:
    """How the program lays out chains and data sets on this process's devices:

    * "vectorized" where JAX's default device is an accelerator: every chain of every data
      set of a batch is one lane of one program (the GPU's width pays for the lanes that
      wait for the batch's deepest tree);
    * "parallel" on the CPU with a device per chain (``import zoo`` asks for them): the
      chains of a data set run side by side, one per device, as ``MCMC``'s "parallel";
    * "sequential" on the CPU otherwise: one chain after another.

    Measured (benchmarks/results/sbc_speed/table.md): vectorizing on the CPU was
    several times slower than "parallel" - vmapped tree building computes both sides of
    every branch and waits for the deepest lane - so the CPU never vectorizes."""
    if jax.default_backend() != "cpu":
        return "vectorized"
    return "parallel" if jax.local_device_count() >= int(num_chains) else "sequential"


def as_numpy_key(key) -> np.ndarray:
    """A PRNG key as the (2,) uint32 array the program takes (new-style typed keys too)."""
    if jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key, dtype=np.uint32)


__all__ = ["NutsProgram", "NutsSettings", "program_for", "sample_many", "default_layout", "as_numpy_key", "STATE_FIELDS"]
