"""NUTS on the model itself: the reference sampler of every model (NumPyro's NUTS kernel,
run as compiled programs that take the data as arguments: ``nuts_program.py``), its chain
layout and its own checks (E-BFMI, tree depth)."""
from __future__ import annotations

import time
import warnings

import jax
import numpy as np

from ...inference.posterior import DrawsPosterior
from ...models.base import is_classifier, problem_sites
from ..base import batched_diagnostics
from ..base.compile_timer import CompileTimer
from .certification import _certify_run, _diagnosed_sites, nuts_energy_checks
from .config import ReferenceConfig, _fit_info
from .nuts_program import NutsSettings, as_numpy_key, default_layout, program_for, sample_many, sampled_site_names
from .sampler import NUTS, ReferenceRunner, ReferenceSampler

#: NumPyro per-draw fields kept as ArviZ sample_stats (numpyro name -> arviz name)
_EXTRA_FIELDS = {
    "diverging": "diverging",
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "energy": "energy",
    "potential_energy": "lp",  # stored negated: lp = -potential energy
    "adapt_state.step_size": "step_size",
}


def effective_chain_method(config: ReferenceConfig) -> str:
    """The layout actually used. "parallel" needs one device per chain: on the CPU without
    them the chains run "sequential" - the same draws bit for bit, only slower - with a
    warning; where JAX's default device is an accelerator they run "vectorized", as lanes
    of one program on it (one after another, a GPU computed a small posterior slower than
    the CPU: issue 37's measurements in benchmarks/results/accelerator_check/)."""
    if config.chain_method == "parallel" and jax.default_backend() != "cpu":
        return "vectorized"
    if config.chain_method == "parallel" and jax.local_device_count() < config.num_chains:
        warnings.warn(
            f"chain_method='parallel' needs {config.num_chains} CPU devices but JAX has "
            f"{jax.local_device_count()}; running the chains one after another (same draws, "
            "slower). Import zoo (or call zoo.request_host_devices()) before any JAX computation "
            "to get them."
        )
        return "sequential"
    return config.chain_method


def _length(part) -> int:
    """Draws per chain in a (draws, extra) pair."""
    return next(iter(part[0].values())).shape[1]


def _sample_stats(extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    stats = {}
    for numpyro_name, arviz_name in _EXTRA_FIELDS.items():
        if numpyro_name in extra:
            value = extra[numpyro_name]
            stats[arviz_name] = -value if numpyro_name == "potential_energy" else value
    stats["diverging"] = stats["diverging"].astype(bool)
    return stats


def _one_set(y):
    """Labels or observations as a batch of one data set."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a)[None], y)


class NutsRun(ReferenceRunner):
    """NUTS on ``spec.model``: a first run, then continuations of the same chains.

    Both are compiled programs that take the data as arguments (``nuts_program.py``),
    built once per model, shape and settings in a process: a second reference of the same
    shape (the next data set of a battery, the twin run with another seed, a continuation)
    reuses them instead of compiling again, as ``MCMC.run`` did on every call. Its draws
    are those of NumPyro's NUTS kernel with ``MCMC``'s warm-up and initialization, from a
    different random stream (equivalent in distribution, not identical)."""

    name = "numpyro.NUTS"

    def __init__(self, spec, Phi, y, config: ReferenceConfig, progress: bool):
        if is_classifier(spec):
            self.Phi, self.y = np.asarray(Phi, dtype=float), np.asarray(y, dtype=float)
        else:  # a general model's data and observations, checked by run_reference
            self.Phi, self.y = dict(Phi), dict(y)
        # keep the measured sites and every site NUTS moves (not the deterministic ones):
        # all of them are diagnosed
        measured = [s.name for s in problem_sites(spec, self.Phi)]
        self.keep = tuple(dict.fromkeys(measured + sampled_site_names(spec, Phi, y)))
        self.method = effective_chain_method(config)
        self.program = program_for(spec, self.Phi, self.y, NutsSettings.of(config), self.method, self.keep)
        self.key = as_numpy_key(jax.random.PRNGKey(config.seed))[None]
        self.states = None
        # draws of the last continuation piece beyond what was asked (see more)
        self._surplus: tuple[dict, dict] | None = None

    def first(self):
        draws, extra, self.states = self.program.run_with_states(self.key, self.Phi, _one_set(self.y))
        self._surplus = None
        return self._kept(draws, extra)

    def _kept(self, draws, extra):
        return {k: draws[k][0] for k in self.keep}, {k: v[0] for k, v in extra.items()}

    def more(self, n_more: int):
        """The next n_more draws of every chain: continued from its last state with the
        adapted step size and mass matrix, so the new draws extend the same Markov chains.
        The continuation program draws pieces of the first run's length (one program per
        shape); draws of a last piece beyond n_more are kept and handed out first by the
        next call, so that the draws are always those of one long run."""
        parts = [] if self._surplus is None else [self._surplus]
        self._surplus = None
        have = 0 if not parts else _length(parts[0])
        while have < int(n_more):
            draws, extra, self.states = self.program.continue_chains(self.states, self.Phi, _one_set(self.y))
            parts.append(self._kept(draws, extra))
            have += _length(parts[-1])
        joined = tuple({k: np.concatenate([p[i][k] for p in parts], axis=1) for k in parts[0][i]} for i in (0, 1))
        if have > n_more:
            self._surplus = tuple({k: v[:, n_more:] for k, v in part.items()} for part in joined)
            joined = tuple({k: v[:, :n_more] for k, v in part.items()} for part in joined)
        return joined

    @staticmethod
    def sample_stats(extra):
        return _sample_stats(extra)

    @staticmethod
    def sampler_checks(stats, settings, rule) -> tuple[list[str], dict]:
        """E-BFMI and tree-depth saturation (divergences are counted by the rule itself)."""
        return nuts_energy_checks(stats, settings["max_tree_depth"], rule)

    def layout(self) -> dict:
        return {"chain_method": self.method}


def nuts_posteriors(spec, Phi, ys, keys, *, config: ReferenceConfig, batch: int | None = None) -> list:
    """NUTS on ``spec``'s posterior for many data sets ``(Phi, ys[d])`` of one shape, with
    one compiled program (``nuts_program.py``): the first run of :class:`NutsRun` for each
    (``config``'s chains, warm-up, draws and kernel settings; no continuation), each data
    set's chains keyed by ``keys[d]``. Each posterior is certified by the same rule as a
    reference run (R-hat, ESS, divergences over every sampled site, E-BFMI, tree depth);
    ``info.converged`` says whether it is, ``info.reason`` why not, and ``info.extra``
    holds the chain layout. ``info.seconds`` is the data set's share of its batch's warm
    time; the compilation this call paid is in the first posterior's ``compile_seconds``.

    The draws are equivalent in distribution to ``run_reference``'s, not identical (a
    different random stream; see ``nuts_program.py``); whatever the batch size, the same
    keys give the same draws on one machine and layout."""
    layout = default_layout(config.num_chains)
    measured = problem_sites(spec, Phi)
    settings = config.sampler_settings()
    with CompileTimer() as compiling:
        t0 = time.perf_counter()
        runs = sample_many(spec, Phi, ys, keys, config, batch=batch, layout=layout, keep=[s.name for s in measured])
        wall = time.perf_counter() - t0
    compile_seconds = min(compiling.seconds, wall)
    per = (wall - compile_seconds) / max(len(runs), 1)
    posteriors = []
    # R-hat and ESS of every data set's every coordinate in one batched computation (the
    # same numbers as ArviZ's, tests/validation/base/test_batched_diagnostics.py): one by one through
    # ArviZ cost ~28 ms a posterior, as much as an accelerator's sampling of it
    diagnosed = _diagnosed_sites(measured, runs[0][0]) if runs else ()
    summaries = batched_diagnostics.summaries([draws for draws, _ in runs], diagnosed)
    for d, (draws, extra) in enumerate(runs):
        certified, failures, diagnostics, _ = _certify_run(
            draws, _sample_stats(extra), diagnosed, NutsRun, settings, diag=summaries[d])
        sampler = dict(settings, num_samples_total=int(config.num_samples), chain_method=layout)
        info = _fit_info(certified, failures, per + (compile_seconds if d == 0 else 0.0),
                         compile_seconds if d == 0 else 0.0, sampler, diagnostics)
        info.extra["layout"] = layout
        posteriors.append(DrawsPosterior(spec, measured, {s.name: draws[s.name] for s in measured}, info))
    return posteriors


#: NUTS on the model itself: the reference sampler of every model, the wing's built-in
#: (known by its name, :data:`~zoo.validation.references.sampler.NUTS`, with no registration)
NUTS_SAMPLER = ReferenceSampler(NUTS, NutsRun, code_modules=("zoo.validation.references.nuts_program",),
                                description="NUTS on the NumPyro model")


def sampler_of(config: ReferenceConfig) -> ReferenceSampler:
    """The sampler ``config`` runs: the ReferenceSampler it was given (a model's own,
    ``config.sampler_entry``), or NUTS, the built-in, for ``sampler="nuts"``. The name
    "nuts" belongs to the built-in: another sampler under it is a ValueError."""
    entry = config.sampler_entry
    if entry is None:
        return NUTS_SAMPLER
    if entry.name == NUTS and entry != NUTS_SAMPLER:
        raise ValueError(f"the reference sampler name {NUTS!r} is the built-in NUTS's; give {entry!r} another name")
    return entry
