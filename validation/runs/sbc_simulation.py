"""One SBC simulation, and the problems, engines and settings it runs with.

A simulation:

1. parameters and labels from the NumPyro model itself (``numpyro.infer.Predictive`` on
   ``spec.model(Phi)``, the same code every engine and the reference see), on a fixed
   design ``Phi`` (:class:`SBCProblem`);
2. the engine's fixed-spec fit ``fit(spec, Phi, y)`` on those labels;
3. L draws from its posterior (a Gaussian's are independent; a sampler's are thinned
   evenly over its chains, so they are as close to independent as its ESS allows);
4. the rank of the truth among them for every coordinate of ``spec.sites``, for the
   linear predictor at a few held-out design rows (the predictive) and for the
   log-likelihood of the simulated labels (a test quantity that depends on the data,
   which catches posteriors that are wrong in ways the marginals hide; Modrak et al. 2023).

A model that brings its own data (a user's NumPyro model, ``models/general.py``) is simulated
on its own inputs: the parameters from its prior and every observed site from its prior
predictive; the ranked quantities are its judged sites and, where every latent site is
judged (so that a draw determines the likelihood), the log-likelihood of the simulated
observations. It has no held-out rows and no ``f_new``.

Simulations whose labels are all of one class are redrawn, not fitted (every engine
refuses such data); a general model's simulations are redrawn where an observation is not
finite. That keeps the ranks uniform: conditioning the joint draw on an event
of the data alone leaves each posterior p(theta | y) unchanged. How many were redrawn is
reported. A fit that fails (``ApproximationFailed`` or any error) is a failed simulation
with its message; its ranks are missing, which itself biases the ranks, so the count matters.

Engines: a model's engine by name, one of its reference samplers, ``module:function`` or a
callable (:func:`resolve_engine`; a user's engine is labelled by ``engines.user_entry``,
as everywhere). The run of many simulations is ``sbc.py``; the statistics of their ranks
are the judge's (``validation/judge/rank_uniformity.py``, ``rank_power.py``, ``sbc_verdict.py``).
"""
from __future__ import annotations

import functools
import hashlib
import json
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from ...inference.compile_cache import batch_size_for
from ...inference.contracts import many_of
from ...models.base import as_jax, flatten, is_classifier, unflatten
from ..base.code_digest import spec_key
from ..judge.rank_uniformity import FALSE_ALARM
from ..references import run_reference
from ..references.nuts import nuts_posteriors
from ..references.nuts_program import as_numpy_key
from .compare import default_references

# a user engine given as a path: the one rule for every caller (validation/runs/engines.py)
from .engines import user_entry
from . import fence



# --------------------------------------------------------------------------------------
# The problem: a spec with a proper prior and a fixed design
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SBCProblem:
    """What SBC simulates from: a spec (proper prior), a training design and held-out
    design rows for the predictive quantities. ``variants``: specs of the model variants
    some engines approximate instead (as in ``Prepared.variants``). A general model's
    problem is its own data's inputs (a dict) and no held-out rows (``Phi_new`` None)."""

    spec: Any
    Phi: np.ndarray | dict[str, np.ndarray]
    Phi_new: np.ndarray | None
    variants: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """A short hex digest (16 characters) of the problem: the spec and the design (a
        classifier's training and held-out rows; a general model's inputs by name, shape and
        values). Part of an SBC run's key (:func:`~zoo.validation.runs.sbc.run_key`), so that
        stored simulations are reused only for the same problem."""
        h = hashlib.sha256()
        h.update(json.dumps(self.spec.to_dict(), sort_keys=True, default=str).encode())
        if isinstance(self.Phi, dict):  # a general model's inputs: each by name, shape and bytes
            for name, a in sorted(self.Phi.items()):
                h.update(f"{name}:{np.shape(a)}".encode())
                h.update(np.ascontiguousarray(a, dtype=float).tobytes())
            return h.hexdigest()[:16]
        for a in (self.Phi, self.Phi_new):
            h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        return h.hexdigest()[:16]

    def design(self) -> dict[str, Any]:
        """What a result says of the simulated problem: a classifier's design sizes, or a
        general model's data (its digest and the sizes of its observed sites)."""
        if isinstance(self.Phi, dict):
            return {"data": self.spec.data,
                    "observed": {k: list(np.shape(v)) for k, v in self.spec.observations.items()}}
        return {"n": int(self.Phi.shape[0]), "n_basis": int(self.Phi.shape[1]), "n_new": int(self.Phi_new.shape[0])}


def rbf_design(n: int = 60, n_basis: int = 6, n_new: int = 3, *, width: float = 1.0, seed: int = 0):
    """(Phi, Phi_new): Gaussian RBF features ``exp(-|x - c|^2 / (2 width^2))`` of 2-d
    standard normal inputs, centred on the first ``n_basis`` training inputs - the shape
    of the kernel designs the models are used with, small enough that a run takes minutes."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + n_new, 2))
    centres = X[:n_basis]
    sq = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
    Phi_all = np.exp(-sq / (2.0 * width * width))
    return Phi_all[:n], Phi_all[n:]


#: RBF features of the SBC design, unless the model's spec fixes its width
DEFAULT_N_BASIS = 6
#: training points of the SBC design
DEFAULT_DESIGN_POINTS = 60


def problem_for(record, *, n: int | None = None, n_basis: int | None = None, n_new: int | None = None,
                seed: int | None = None) -> SBCProblem:
    """The SBC problem of a registered model: its record's ``sbc_spec`` (a spec with a
    proper prior, and its variants) on :func:`~zoo.validation.runs.sbc_simulation.rbf_design`
    of ``n`` points (None: :data:`~zoo.validation.runs.sbc_simulation.DEFAULT_DESIGN_POINTS`),
    ``n_new`` held-out rows (None: 3), ``seed`` (None: 0). n_basis None: the spec's own
    number of weights where it fixes one (gridRVM's table: ``n_weights``), else
    :data:`~zoo.validation.runs.sbc_simulation.DEFAULT_N_BASIS`; a width the spec cannot take is refused by
    the spec. A model with its own data is simulated on its own inputs and takes none of
    these (ValueError naming them): the one check for SBC, the battery and their callers."""
    if record.sbc_spec is None:
        raise ValueError(record.no_sbc or f"model {record.name!r} names no SBC spec (ModelRecord.sbc_spec)")
    spec, variants = record.sbc_spec()
    if not is_classifier(spec):
        given = sorted(k for k, v in (("n", n), ("n_basis", n_basis), ("n_new", n_new), ("seed", seed)) if v is not None)
        if given:
            raise ValueError(f"model {record.name} is simulated on its own data: it takes no problem keywords "
                             f"(got {', '.join(given)})")
        # no design is made: the model's own inputs
        return SBCProblem(spec, {k: np.asarray(v) for k, v in spec.inputs.items()}, None, dict(variants))
    n = DEFAULT_DESIGN_POINTS if n is None else n
    n_new = 3 if n_new is None else n_new
    seed = 0 if seed is None else seed
    if n_basis is None:
        n_basis = int(getattr(spec, "n_weights", DEFAULT_N_BASIS))
    Phi, Phi_new = rbf_design(n, n_basis, n_new, seed=seed)
    spec.sites(Phi.shape[1])  # a spec with a fixed width says here, by name, if it cannot take this one
    return SBCProblem(spec, Phi, Phi_new, dict(variants))


# --------------------------------------------------------------------------------------
# Engines: registry names, reference samplers, or any function with the contract
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SBCSettings:
    """n_sims: simulations (S). n_draws: posterior draws ranked against the truth (L;
    ranks lie in 0..L). seed: of the prior draws, the engine keys and the PIT jitter.
    reference_draws: per chain, for NUTS run as an engine (4 chains,
    as many warm-up draws, no doubling: SBC wants its cost, not its certificate)."""

    n_sims: int = 100
    n_draws: int = 99
    seed: int = 0
    false_alarm: float = FALSE_ALARM
    reference_draws: int = 500

    def __post_init__(self):
        if int(self.n_sims) < 10:
            raise ValueError(f"SBC needs at least 10 simulations; got n_sims={self.n_sims}")
        if int(self.n_draws) < 9:
            raise ValueError(f"SBC needs at least 9 posterior draws per simulation; got n_draws={self.n_draws}")
        if not 0.0 < self.false_alarm < 1.0:
            raise ValueError(f"false_alarm must lie in (0, 1); got {self.false_alarm}")
        if int(self.reference_draws) < 50:
            raise ValueError(f"reference_draws must be at least 50; got {self.reference_draws}")


@dataclass(frozen=True)
class ResolvedEngine:
    """An engine as SBC runs it: its label, fixed-spec fit, the variant whose posterior it
    approximates (None: the model's own) and, if SBC does not apply, why."""

    label: str
    fit: Callable | None
    variant: str | None = None
    not_applicable: str | None = None
    # many simulations of one shape at once: batched(spec, Phi, ys (D, n), keys (D, 2)) ->
    # D posteriors or exceptions (NUTS: one compiled program for all of them; an engine:
    # its fit.many); None: one fit at a time
    batched: Callable | None = None
    # whether the batched form is one measured to pay on an accelerator (NUTS's chains as
    # lanes of one program: benchmarks/results/accelerator_check). `--device auto` puts an
    # SBC run there only then; engines' batches have not been measured on one
    accelerator_pays: bool = False


def _engine_batch(many: Callable) -> Callable:
    """An engine's ``fit.many`` as SBC's batched form: an engine's fit uses no keys."""

    def batched(spec, Phi, ys, keys):
        return many(spec, Phi, ys)

    return batched


def _reference_fit(spec, Phi, y, *, config=None, reference=None):
    """A reference sampler under the engine contract (SBC checks our ground truth too).

    ``reference``: its ReferenceConfig as the model's reference chain sets it (e.g. GIG's
    NUTS at target_accept 0.95; PG-Gibbs with 2,000 sweeps a chain and up to three
    doublings). NUTS runs with the SBC settings' draws and no doubling. A Gibbs sampler
    keeps its record's first length and doublings and stops at the certificate, as a
    reference run does: its draws are far more autocorrelated than NUTS's, and SBC ranks
    among thinned draws are uniform only when those are close to independent - a certified
    run has a bulk and tail ESS of at least the rule's minimum (400), above the ranked
    draws (99 by default). The chain length so depends on the data set (on its
    autocorrelation, not on where the truth lies); a run that never certifies ends at the
    record's cap and is ranked all the same, so SBC sees the sampler as users get it."""

    return run_reference(spec, Phi, y, config=reference).posterior


def sbc_names(record, *, engines: bool = True, samplers: bool = True) -> list[str]:
    """Everything SBC can check for a model: its engines (each on the prior it fits) and
    its reference samplers on the model and, as ``sampler@variant``, on each variant."""
    names = list(record.engine_names) if engines else []
    if samplers:
        variants = list(record.sbc_spec()[1]) if record.sbc_spec is not None else []
        names += list(record.sampler_names) + [f"{s}@{v}" for s in record.sampler_names for v in variants]
    return names


def resolve_engine(record, engine: str | Callable, settings: SBCSettings = SBCSettings()) -> ResolvedEngine:
    """A model's engine by name, one of its reference samplers by name, a
    ``"module:function"`` path, or a callable with the fixed-spec contract."""
    if callable(engine):
        # the one resolver and label of a user's engine (engines.user_entry: module:qualname,
        # as zoo compare shows it); every return value checked, so a bad one is a failed
        # simulation with one line saying why
        entry = user_entry(engine)
        return _with_batch(ResolvedEngine(entry.name, entry.fit()), record)
    if record.has_engine(engine):
        entry = record.engine(engine)
        # an engine of another model is ranked against that model's prior when the record
        # has it as a variant (gridRVM's s-grid and rvm), and has no SBC otherwise
        if entry.other_model and entry.variant is None:
            return ResolvedEngine(engine, None, not_applicable=(
                f"it fits another model ({entry.other_model}); its ranks against this model's prior "
                "would only restate that"))
        if entry.kind == "point":
            return ResolvedEngine(engine, None, not_applicable="a point estimate has no distribution to rank the truth in")
        return _with_batch(ResolvedEngine(engine, entry.fit(), variant=entry.variant), record)
    if engine in record.sampler_names:
        # NUTS: the settings' draws and no doubling (many short runs). A Gibbs sampler: its
        # record's first run and doublings, stopping at the certificate, as the model's
        # chain runs it (see _reference_fit)
        reference, = default_references(record.name, (engine,), nuts_draws=settings.reference_draws)
        if reference.sampler == "nuts":
            reference = replace(reference, max_doublings=0)
        fit = functools.partial(_reference_fit, reference=reference)
        # NUTS's first run is one compiled program for every data set of the run's shape
        # (nuts_program.py): the per-simulation MCMC recompiled it for each one
        batched = functools.partial(nuts_posteriors, config=reference) if reference.sampler == "nuts" else None
        return ResolvedEngine(f"reference:{engine}", fit, batched=batched, accelerator_pays=batched is not None)
    if ":" in engine:
        return _with_batch(ResolvedEngine(engine, user_entry(engine).fit()), record)
    raise ValueError(f"model {record.name!r} has no engine or reference sampler {engine!r}; engines: "
                     f"{', '.join(record.engine_names)}; samplers: {', '.join(record.sampler_names)}; "
                     "or give 'module:function'")


def _with_batch(resolved: ResolvedEngine, record) -> ResolvedEngine:
    """``resolved`` with its fit's batched form (``fit.many``), where the fit has one. A model
    with its own data is fitted one simulation at a time: ``fit.many`` takes label rows of
    one design (a classifier's), not a general model's observations by site."""
    if record.own_data:
        return resolved
    many = many_of(resolved.fit) if resolved.fit is not None else None
    return resolved if many is None else replace(resolved, batched=_engine_batch(many))


# --------------------------------------------------------------------------------------
# One simulation
# --------------------------------------------------------------------------------------
_OBSERVED: dict[str, str] = {}


def observed_site(spec, Phi) -> str | tuple[str, ...]:
    """The name of the model's observed (label) site (found by tracing the model once per
    spec and design shape: a trace costs ~8 ms, paid by every simulation before); a general
    model's observed sites, a tuple of names (its spec knows them)."""
    if not is_classifier(spec):
        return tuple(spec.observed)
    key = spec_key(spec, tuple(np.shape(Phi)))
    if key not in _OBSERVED:
        _OBSERVED.clear() if len(_OBSERVED) > 64 else None
        _OBSERVED[key] = _find_observed_site(spec, Phi)
    return _OBSERVED[key]


def _find_observed_site(spec, Phi) -> str:
    import jax
    from numpyro import handlers
    from numpyro.distributions.distribution import Unit

    y = np.zeros(Phi.shape[0])
    y[0] = 1.0
    trace = handlers.trace(handlers.seed(spec.model, jax.random.PRNGKey(0))).get_trace(Phi, y=y)
    # numpyro.factor adds observed sites of the Unit distribution: not data
    observed = [name for name, s in trace.items() if s["type"] == "sample" and s["is_observed"]
                and not isinstance(s["fn"], Unit)]
    if len(observed) != 1:
        raise ValueError(f"SBC needs exactly one observed site in {type(spec).__name__}.model; found {observed}")
    return observed[0]


def quantity_names(spec, Phi, Phi_new) -> list[str]:
    """Names of the ranked quantities, in the order of ``_quantities``."""
    names = []
    general = not is_classifier(spec)
    for s in (spec.sites() if general else spec.sites(Phi.shape[1])):
        names += [s.name] if s.shape == () else [f"{s.name}[{','.join(map(str, i))}]" for i in np.ndindex(*s.shape)]
    if general:
        return names + (["log_lik"] if ranks_log_lik(spec) else [])
    return names + [f"f_new[{j}]" for j in range(Phi_new.shape[0])] + ["log_lik"]


def ranks_log_lik(spec) -> bool:
    """Whether a general model's simulations rank the log-likelihood of the simulated
    observations: only where every latent sample site is judged, so that a posterior draw
    (of the judged sites) fixes the likelihood. A model judged on some of its sites, or on
    quantities it computes, is ranked on those alone - SBC then cannot see errors that only
    the joint shows through the likelihood (its result says so)."""
    judged = {s.name for s in spec.sites()}
    return set(spec.latent) <= judged


_QUANTITY_PROGRAMS: dict[str, Callable] = {}


def _quantity_program(spec, M: int) -> Callable:
    """(params, Phi, Phi_new) -> (flat sites, f at Phi_new, p(y = 1) at Phi), jitted once
    per spec and number of basis functions (op by op, these small array operations cost a
    few ms of dispatch per simulation)."""
    import jax
    import jax.numpy as jnp

    key = spec_key(spec, M)
    if key not in _QUANTITY_PROGRAMS:
        sites = spec.sites(M)

        def quantities(params, Phi, Phi_new):
            flat = flatten({s.name: jnp.asarray(params[s.name]) for s in sites}, sites)
            return (flat, spec.linear_predictor(params, Phi_new),
                    spec.prob(spec.linear_predictor(params, Phi)))

        _QUANTITY_PROGRAMS.clear() if len(_QUANTITY_PROGRAMS) > 16 else None
        _QUANTITY_PROGRAMS[key] = jax.jit(quantities)
    return _QUANTITY_PROGRAMS[key]


def _general_quantity_program(spec) -> Callable:
    """(params (n, ...), inputs, observations (n, ...)) -> (flat judged sites (n, K), log
    p(observations | latent sites) (n,)) of a general model, jitted once per spec; the
    log-likelihood is the sum of every observed site's log-probability (zeros where
    :func:`ranks_log_lik` is False: not ranked)."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    key = spec_key(spec, "general")
    if key not in _QUANTITY_PROGRAMS:
        sites = spec.sites()
        with_lik = ranks_log_lik(spec)

        def log_lik(latent, inputs, obs):
            model = handlers.substitute(handlers.seed(spec.model, jax.random.PRNGKey(0)), data=latent)
            trace = handlers.trace(model).get_trace(inputs, y=obs)
            return sum(jnp.sum(trace[o]["fn"].log_prob(trace[o]["value"])) for o in spec.observed)

        def quantities(params, inputs, obs):
            flat = flatten({s.name: jnp.asarray(params[s.name]) for s in sites}, sites)
            if not with_lik:
                return flat, jnp.zeros(flat.shape[0])
            latent = {k: params[k] for k in spec.latent}
            return flat, jax.vmap(log_lik, in_axes=(0, None, 0))(latent, inputs, obs)

        _QUANTITY_PROGRAMS.clear() if len(_QUANTITY_PROGRAMS) > 16 else None
        _QUANTITY_PROGRAMS[key] = jax.jit(quantities)
    return _QUANTITY_PROGRAMS[key]


def _general_quantities(spec, params: dict[str, np.ndarray], inputs, y) -> np.ndarray:
    """:func:`_quantities` of a general model: (n, K) flat judged sites and, where ranked,
    the log-likelihood of the observations ``y`` (by site; each (n, ...) per draw, or one
    value for every draw)."""
    n = int(np.shape(params[spec.sites()[0].name])[0])
    obs = {k: np.broadcast_to(np.asarray(v), (n, *np.shape(spec.observations[k])))
           if np.ndim(v) == np.ndim(spec.observations[k]) else np.asarray(v) for k, v in y.items()}
    flat, log_lik = _general_quantity_program(spec)(params, as_jax(inputs), obs)
    flat = np.asarray(flat)
    return np.concatenate([flat, np.asarray(log_lik)[:, None]], axis=1) if ranks_log_lik(spec) else flat


def _quantities(spec, params: dict[str, np.ndarray], Phi, Phi_new, y) -> np.ndarray:
    """(n, K) quantities of n parameter draws: the flat sites, f at Phi_new, log p(y | theta).
    y: the labels (N,), or (n, N) one label vector per draw (many simulations at once); a
    general model's: :func:`_general_quantities`."""
    import jax

    if not is_classifier(spec):
        return _general_quantities(spec, params, Phi, y)

    sites = spec.sites(Phi.shape[1])
    args = ({s.name: params[s.name] for s in sites}, np.asarray(Phi, dtype=float), np.asarray(Phi_new, dtype=float))
    try:
        flat, f_new, p = _quantity_program(spec, Phi.shape[1])(*args)
    except jax.errors.JAXTypeError:
        # a user's model whose linear predictor converts to NumPy cannot be traced: op by op
        with jax.disable_jit():
            flat, f_new, p = _quantity_program(spec, Phi.shape[1])(*args)
    flat, f_new = np.asarray(flat), np.asarray(f_new)
    p = np.clip(np.asarray(p), 1e-300, 1.0)
    q = np.clip(1.0 - p, 1e-300, 1.0)
    log_lik = (y * np.log(p) + (1.0 - y) * np.log(q)).sum(-1)
    return np.concatenate([flat, f_new, log_lik[:, None]], axis=1)


def posterior_draws(posterior, key, n: int) -> dict[str, np.ndarray]:
    """n draws: independent for closed forms; evenly thinned for a sampler's chains."""
    if posterior.kind == "draws":
        flat = posterior.flat_draws()
        chains = posterior.n_chains
        per = flat.shape[0] // chains
        idx = np.concatenate([c * per + np.linspace(0, per - 1, n // chains + (c < n % chains)).astype(int)
                              for c in range(chains)])
        return {k: np.asarray(v) for k, v in unflatten(flat[idx], posterior.sites).items()}
    return {k: np.asarray(v) for k, v in posterior.sample(key, n).items()}


#: prior draws tried (per batch of ``PRIOR_BATCH``) before a simulation is given up
MAX_BATCHES = 50
PRIOR_BATCH = 64


def _factor_log_weights(spec, Phi, draws: dict[str, Any], obs: str, *, as_numpy: bool = True):
    """Sum of the model's ``numpyro.factor`` terms at each prior draw (0 if it has none).

    Ancestral simulation (``Predictive``) ignores factor terms, so it draws from the model
    without them; where each term is a log-probability (<= 0), accepting a draw with
    probability exp(sum of terms) is exact rejection sampling from the model's prior."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.distributions.distribution import Unit

    def one(params):
        tr = handlers.trace(handlers.substitute(handlers.seed(spec.model, jax.random.PRNGKey(0)), params)
                            ).get_trace(as_jax(Phi), y=_observations(params, obs))
        terms = [jnp.sum(site["fn"].log_prob(site["value"])) for site in tr.values()
                 if site["type"] == "sample" and isinstance(site["fn"], Unit)]
        return sum(terms) if terms else jnp.zeros(())

    out = jax.vmap(one)(draws)
    return np.asarray(out) if as_numpy else out


_PRIOR_SAMPLERS: dict[str, tuple[Callable, Callable]] = {}


def _prior_sampler(spec, Phi, obs: str) -> Callable:
    """key -> (PRIOR_BATCH joint prior draws, their factor log-weights), compiled once per
    spec and design (tracing the model anew for every simulation cost seconds each)."""
    return _prior_programs(spec, Phi, obs)[0]


def _prior_programs(spec, Phi, obs: str) -> tuple[Callable, Callable]:
    """(the jitted prior sampler of :func:`_prior_sampler`, the first round of prior draws
    of many simulations at once: (indices (S,), seed) -> (each simulation's key after its
    prior draw, its prior key, PRIOR_BATCH draws, their log-weights, their acceptance
    uniforms)), both built once per spec and design."""
    import jax
    from numpyro.infer import Predictive

    # a general model's inputs are its spec's data (in its digest): its spec is the key
    key = spec_key(spec, np.asarray(Phi, dtype=float)) if is_classifier(spec) else spec_key(spec, "general")
    if key not in _PRIOR_SAMPLERS:
        Phi_j = as_jax(Phi)

        def sample(k):
            draws = Predictive(spec.model, num_samples=PRIOR_BATCH)(k, Phi_j)
            return draws, _factor_log_weights(spec, Phi_j, draws, obs, as_numpy=False)

        def first_round(index, seed):
            # the keys of _simulation_start and the first pass of draw_from_prior's loop
            k = jax.random.fold_in(jax.random.PRNGKey(seed), index)
            k, k_prior = jax.random.split(k)
            _, k_draws, k_accept = jax.random.split(k_prior, 3)
            draws, log_w = sample(k_draws)
            return k, k_prior, draws, log_w, jax.random.uniform(k_accept, (PRIOR_BATCH,))

        _PRIOR_SAMPLERS.clear() if len(_PRIOR_SAMPLERS) > 16 else None
        _PRIOR_SAMPLERS[key] = (jax.jit(sample), jax.jit(jax.vmap(first_round, in_axes=(0, None))))
    return _PRIOR_SAMPLERS[key]


def draw_from_prior(spec, Phi, key) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """One joint draw (parameters, labels) from the model, labels of both classes.

    Returns (parameters, y, redraws): redraws counts the draws discarded (one-class
    labels, or rejected for a factor term). Discarding on the labels alone leaves every
    posterior p(theta | y) unchanged, so the ranks stay uniform (see the module docstring)."""
    import jax

    obs = observed_site(spec, Phi)
    sampler = _prior_sampler(spec, Phi, obs)
    discarded = 0
    for _ in range(MAX_BATCHES):
        key, k_prior, k_accept = jax.random.split(key, 3)
        draws, log_w = sampler(k_prior)
        chosen = _first_accepted(spec, obs, draws, log_w, jax.random.uniform(k_accept, (PRIOR_BATCH,)))
        if chosen is not None:
            truth, y, i = chosen
            return truth, y, discarded + i
        discarded += PRIOR_BATCH
    wanted = "labels of both classes" if is_classifier(spec) else "finite observations"
    raise RuntimeError(f"{MAX_BATCHES * PRIOR_BATCH} prior draws gave no accepted draw with {wanted}")


def _observations(draws: dict[str, Any], obs: str | tuple[str, ...]):
    """The observed values among ``draws``: a classifier's labels (its one site ``obs``), or a
    general model's observed sites by name."""
    return draws[obs] if isinstance(obs, str) else {k: draws[k] for k in obs}


def _first_accepted(spec, obs: str, draws, log_w, uniforms):
    """(parameters, labels, position) of the first of PRIOR_BATCH prior draws that is
    accepted (rejection on the factor terms) and has labels of both classes; None if none."""
    draws, log_w = {k: np.asarray(v) for k, v in draws.items()}, np.asarray(log_w)
    if np.any(log_w > 1e-12):
        raise ValueError(f"{type(spec).__name__}.model has a factor term that is not a log-probability "
                         "(positive somewhere): its prior cannot be drawn by rejection, so SBC cannot simulate it")
    accept = np.log(np.asarray(uniforms)) < log_w
    if not isinstance(obs, str):
        # a general model: any draw whose observations are all finite (an overflowing
        # prior predictive, a count past the integers, is redrawn as a one-class label is)
        finite = np.ones(len(accept), dtype=bool)
        for k in obs:
            finite &= np.isfinite(draws[k].astype(float)).reshape(len(accept), -1).all(1)
        good = np.flatnonzero(accept & finite)
        if not good.size:
            return None
        i = int(good[0])
        return ({k: np.asarray(v[i]) for k, v in draws.items() if k not in obs}, {k: draws[k][i] for k in obs}, i)
    y = np.asarray(draws[obs], dtype=float)
    both = (y.mean(1) > 0.0) & (y.mean(1) < 1.0)
    good = np.flatnonzero(accept & both)
    if not good.size:
        return None
    i = int(good[0])
    return {k: np.asarray(v[i]) for k, v in draws.items() if k != obs}, y[i], i


def _simulation_starts(spec, Phi, indices, settings: SBCSettings) -> dict[int, tuple | RuntimeError]:
    """:func:`_simulation_start` of many simulations: their keys and the first round of
    their prior draws in one compiled program (one call instead of a dozen small ones per
    simulation). A simulation with no usable draw in that round is drawn alone by
    :func:`draw_from_prior` from its prior key, so that each gets the draw it gets alone.
    Values: (key, truth, labels, redraws), or the RuntimeError of a failed prior draw."""
    obs = observed_site(spec, Phi)
    _, first_round = _prior_programs(spec, Phi, obs)
    keys, k_priors, draws, log_w, uniforms = first_round(_padded(np.asarray(indices, dtype=np.int32)), settings.seed)
    draws = {k: np.asarray(v) for k, v in draws.items()}
    log_w, uniforms, keys = np.asarray(log_w), np.asarray(uniforms), np.asarray(keys)
    starts: dict[int, tuple | RuntimeError] = {}
    for j, index in enumerate(indices):
        chosen = _first_accepted(spec, obs, {k: v[j] for k, v in draws.items()}, log_w[j], uniforms[j])
        if chosen is None:
            try:
                chosen = draw_from_prior(spec, Phi, k_priors[j])
            except RuntimeError as err:
                starts[index] = err
                continue
        starts[index] = (keys[j], *chosen)
    return starts


def rank_many(spec, Phi, Phi_new, fitted, settings: SBCSettings) -> dict[int, dict[str, Any]]:
    """:func:`rank_simulation` of many simulations at once. fitted: (index, key, truth, y, redraws,
    posterior, seconds) each. The draws of Gaussian posteriors come from one call for all
    (the same normal variates as ``posterior.sample``'s), every simulation's quantities
    (truth and draws) from one call of the quantity program, the ranks as in ``rank_simulation``."""
    import jax

    results: dict[int, dict[str, Any]] = {}
    to_rank = [f for f in fitted if f[5].kind != "point"]
    for index, _, _, _, redraws, posterior, seconds in fitted:
        if posterior.kind == "point":
            results[index] = {"index": index, "status": "point", "redraws": redraws, "seconds": seconds,
                              "message": "the engine returned a point estimate"}
    if not to_rank:
        return results
    n = settings.n_draws
    split = jax.vmap(lambda k: jax.random.split(k, 3))(np.stack([np.asarray(f[1]) for f in to_rank]))
    k_draws, k_ties = np.asarray(split[:, 1]), np.asarray(split[:, 2])
    gaussian = [j for j, f in enumerate(to_rank) if f[5].kind == "gaussian"]
    normals = {}
    if gaussian:
        dim = to_rank[gaussian[0]][5].dim
        same = [j for j in gaussian if to_rank[j][5].dim == dim]
        z = np.asarray(_normals(n, dim)(_padded(k_draws[same])))
        normals = {j: z[i] for i, j in enumerate(same)}
    rows, labels = [], []
    for j, (index, _, truth, y, _, posterior, _) in enumerate(to_rank):
        if j in normals:  # posterior.sample's draws, from the normals drawn above for all at once
            draws = posterior.sample_from_normals(normals[j])
        else:
            draws = posterior_draws(posterior, k_draws[j], n)
        rows.append({k: np.concatenate([np.asarray(truth[k])[None], np.asarray(draws[k])]) for k in draws})
        labels.append(_repeated(y, 1 + len(next(iter(draws.values())))))
    counts = [_count_rows(lab) for lab in labels]
    q = _quantities(spec, {k: _padded(np.concatenate([r[k] for r in rows]), len(rows)) for k in rows[0]}, Phi,
                    Phi_new, _padded_tree(_concatenated(labels), len(rows)))
    starts = np.cumsum([0] + counts)
    for j, (index, _, _, _, redraws, posterior, seconds) in enumerate(to_rank):
        block = q[starts[j]:starts[j + 1]]
        results[index] = _rank_result(index, redraws, seconds, posterior, block[0], block[1:], k_ties[j])
    return results


def _repeated(y, count: int):
    """The observations ``y`` once per draw: (count, N) labels, or each observed site (count, ...)."""
    if isinstance(y, dict):
        return {k: np.broadcast_to(np.asarray(v), (count, *np.shape(v))) for k, v in y.items()}
    return np.broadcast_to(np.asarray(y, dtype=float), (count, len(y)))


def _count_rows(y) -> int:
    return len(next(iter(y.values()))) if isinstance(y, dict) else len(y)


def _concatenated(parts: list):
    """Row blocks of labels, or of observations by site, one after another."""
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def _stacked(ys: list):
    """One data set per simulation, stacked: (D, N) labels, or each observed site (D, ...)."""
    if isinstance(ys[0], dict):
        return {k: np.stack([np.asarray(y[k]) for y in ys]) for k in ys[0]}
    return np.stack([np.asarray(y, dtype=float) for y in ys])


def _padded_tree(rows, items: int):
    """:func:`_padded` of labels, or of each observed site's rows."""
    if isinstance(rows, dict):
        return {k: _padded(v, items) for k, v in rows.items()}
    return _padded(rows, items)


def _padded(rows: np.ndarray, items: int | None = None) -> np.ndarray:
    """``rows`` with its last row repeated up to the padded batch size, so that the programs
    above compile for a few batch sizes only (the last, shorter batch of a run, and the
    simulations a batch lost to failed fits, reuse them); the extra rows' results are
    ignored. items: the simulations ``rows`` holds (rows are items x rows per item; None:
    one row each)."""
    items = len(rows) if items is None else items
    per = len(rows) // items
    extra = (batch_size_for(items) - items) * per
    return np.concatenate([rows, np.repeat(rows[-1:], extra, axis=0)]) if extra else rows


_NORMALS: dict[tuple[int, int], Callable] = {}


def _normals(n: int, dim: int) -> Callable:
    """keys (S, 2) -> (S, n, dim) standard normals, jax.random.normal(key, (n, dim)) of each."""
    import jax

    if (n, dim) not in _NORMALS:
        _NORMALS.clear() if len(_NORMALS) > 16 else None
        _NORMALS[(n, dim)] = jax.jit(jax.vmap(lambda k: jax.random.normal(k, (n, dim))))
    return _NORMALS[(n, dim)]


#: the fold_in label of a simulation's key that keys a batched engine's fit (NUTS's chains)
FIT_STREAM = 1


def _simulation_start(spec, Phi, index: int, settings: SBCSettings):
    """Simulation ``index``'s key (after its prior draw), truth, labels and redraws; a
    failed prior draw raises RuntimeError."""
    import jax

    key = jax.random.fold_in(jax.random.PRNGKey(settings.seed), index)
    key, k_prior = jax.random.split(key)
    truth, y, redraws = draw_from_prior(spec, Phi, k_prior)
    return key, truth, y, redraws


def failed_fit(index: int, redraws: int, seconds: float, err: BaseException | str) -> dict[str, Any]:
    """The result of a simulation whose fit failed: ``err`` raised (or returned, by a batched
    fit), or the one line saying why its result cannot be ranked."""
    if isinstance(err, str):
        return {"index": index, "status": "failed", "redraws": redraws, "seconds": seconds, "message": err[:500]}
    return {"index": index, "status": "failed", "redraws": redraws, "seconds": seconds,
            "message": f"{type(err).__name__}: {err}".strip()[:500],
            # the exception may be one a batched fit returned rather than raised
            "where": "".join(traceback.format_exception(type(err), err, err.__traceback__, limit=2))[-500:]}


#: what a fit may raise that fails its simulation rather than the run (fence.py): any
#: exception, an exit() and the time limit; KeyboardInterrupt stops the run
FIT_FAILURES = (Exception, SystemExit, fence.EngineTimeout)


def fenced_fit(fit: Callable, spec, Phi, y, index: int, redraws: int, time_limit: float | None):
    """One simulation's fit inside the fence: (posterior, seconds), or (None, its failed
    result) when the fit raised, ran past ``time_limit`` or returned a posterior with
    non-finite numbers (never ranked)."""
    t0 = time.perf_counter()
    try:
        with fence.time_limit(time_limit, "the engine's fit"):
            posterior = fit(spec, Phi, y)
    except FIT_FAILURES as err:  # noqa: BLE001 - a failed fit is a result of SBC, reported
        return None, failed_fit(index, redraws, time.perf_counter() - t0, err)
    seconds = time.perf_counter() - t0
    problem = fence.posterior_problem(posterior)
    if problem:
        return None, failed_fit(index, redraws, seconds, f"the engine {problem}: not ranked")
    return posterior, seconds


def fenced_batch(batched: Callable, spec, Phi, ys, keys, time_limit: float | None) -> tuple[list, float]:
    """A batched fit inside the fence: (one posterior or one failure per data set - an
    exception or the line saying why it cannot be ranked -, seconds per data set). A batch
    that raises or runs past ``time_limit`` x its size fails each of its data sets."""
    t0 = time.perf_counter()
    try:
        with fence.time_limit(None if time_limit is None else time_limit * len(ys),
                              f"a batched fit of {len(ys)} simulations"):
            posteriors = list(batched(spec, Phi, ys, keys))
    except FIT_FAILURES as err:  # noqa: BLE001 - as fenced_fit: a failed fit is a result
        return [err] * len(ys), (time.perf_counter() - t0) / len(ys)
    share = (time.perf_counter() - t0) / len(ys)
    out = []
    for posterior in posteriors:
        problem = None if isinstance(posterior, BaseException) else fence.posterior_problem(posterior)
        out.append(f"the engine {problem}: not ranked" if problem else posterior)
    return out, share


def rank_simulation(spec, Phi, Phi_new, posterior, key, truth, y, index: int, redraws: int, seconds: float,
            settings: SBCSettings) -> dict[str, Any]:
    """The result of a simulation whose fit returned ``posterior``: the truth's ranks among
    ``settings.n_draws`` of its draws. JSON-able."""
    import jax

    if posterior.kind == "point":
        return {"index": index, "status": "point", "redraws": redraws, "seconds": seconds,
                "message": "the engine returned a point estimate"}
    key, k_draws, k_ties = jax.random.split(key, 3)
    draws = posterior_draws(posterior, k_draws, settings.n_draws)
    q_true = _quantities(spec, {k: v[None] for k, v in truth.items()}, Phi, Phi_new, y)[0]
    q_draws = _quantities(spec, draws, Phi, Phi_new, y)
    return _rank_result(index, redraws, seconds, posterior, q_true, q_draws, k_ties)


def _rank_result(index: int, redraws: int, seconds: float, posterior, q_true, q_draws, k_ties) -> dict[str, Any]:
    """A simulation's result from the truth's quantities (K,) and its draws' (n, K); a failed
    one where any of them is not finite (NaN draws would rank as if below every truth)."""
    import jax

    if not (np.all(np.isfinite(q_true)) and np.all(np.isfinite(q_draws))):
        bad = int(np.size(q_draws) - np.count_nonzero(np.isfinite(q_draws)))
        return failed_fit(index, redraws, seconds, f"{bad} non-finite ranked quantities (NaN or inf) in the "
                                                    "posterior's draws" + ("" if np.all(np.isfinite(q_true)) else
                                                                          " and the truth's") + ": not ranked")
    below = (q_draws < q_true).sum(0)
    ties = (q_draws == q_true).sum(0)
    # ties (a draw equal to the truth, e.g. both at a bound) are split at random
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k_ties)).astype(np.uint32))
    ranks = below + rng.integers(0, ties + 1)
    info = getattr(posterior, "info", None)
    result = {"index": index, "status": "ok", "redraws": redraws, "seconds": seconds,
              "ranks": [int(r) for r in ranks], "n_draws": int(q_draws.shape[0]),
              "converged": bool(getattr(info, "converged", True)),
              # the contraction view: how far the posterior moved from the truth, in its own sd,
              # and how much narrower it is than the distribution the truths come from
              "truth": [float(v) for v in q_true], "post_mean": [float(v) for v in q_draws.mean(0)],
              "post_sd": [float(v) for v in q_draws.std(0, ddof=1)]}
    layout = getattr(info, "extra", {}).get("layout") if info is not None else None
    if layout is not None:
        result["layout"] = layout
    return result


def simulate_one(spec, Phi, Phi_new, fit: Callable, index: int, settings: SBCSettings,
                 time_limit: float | None = None) -> dict[str, Any]:
    """Simulation ``index``: prior draw, labels, fit (inside :func:`fenced_fit`), ranks.
    JSON-able."""
    try:
        key, truth, y, redraws = _simulation_start(spec, Phi, index, settings)
    except RuntimeError as err:
        return {"index": index, "status": "failed", "redraws": 0, "message": str(err)}
    posterior, outcome = fenced_fit(fit, spec, Phi, y, index, redraws, time_limit)
    if posterior is None:
        return outcome
    return rank_simulation(spec, Phi, Phi_new, posterior, key, truth, y, index, redraws, outcome, settings)


def simulate_batch(spec, Phi, Phi_new, batched: Callable, indices, settings: SBCSettings,
                   time_limit: float | None = None) -> list[dict[str, Any]]:
    """Simulations ``indices`` with one batched fit (:attr:`ResolvedEngine.batched`): the
    same prior draws, labels and ranking as :func:`simulate_one`; each simulation's fit is
    keyed by ``fold_in(key, FIT_STREAM)`` of its own key, so its draws do not depend on
    which simulations share its batch. An entry of the batch that is an exception (or a
    posterior with non-finite numbers) fails its simulation with the reason; a batch that
    raises or runs past ``time_limit`` x its size fails each of its simulations."""
    import contextlib

    import jax

    # the per-simulation work around the batched fit (prior draws, keys, ranks) is many
    # small operations: on the CPU even where the fit runs on an accelerator, whose
    # dispatch and transfers would cost more than they compute (measured on an H100:
    # 1,000 simulations spent two thirds of their time there)
    on_host = (jax.default_device(jax.devices("cpu")[0]) if jax.default_backend() != "cpu"
               else contextlib.nullcontext())
    results: dict[int, dict[str, Any]] = {}
    started = []
    with on_host:
        for index, start in _simulation_starts(spec, Phi, list(indices), settings).items():
            if isinstance(start, RuntimeError):
                results[index] = {"index": index, "status": "failed", "redraws": 0, "message": str(start)}
            else:
                started.append((index, *start))
        keys = ([as_numpy_key(k) for k in jax.vmap(lambda k: jax.random.fold_in(k, FIT_STREAM))(
            np.stack([key for _, key, _, _, _ in started]))] if started else [])
    if started:
        ys = _stacked([y for _, _, _, y, _ in started])
        posteriors, share = fenced_batch(batched, spec, Phi, ys, np.stack(keys), time_limit)
        fitted = []
        for (index, key, truth, y, redraws), posterior in zip(started, posteriors):
            if isinstance(posterior, (BaseException, str)):
                results[index] = failed_fit(index, redraws, share, posterior)
                continue
            info = posterior.info
            seconds = float(info.seconds) + float(info.compile_seconds)
            fitted.append((index, key, truth, y, redraws, posterior, seconds))
        with on_host:
            results.update(rank_many(spec, Phi, Phi_new, fitted, settings))
    return [results[i] for i in indices]
