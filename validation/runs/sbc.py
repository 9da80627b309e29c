"""Simulation-based calibration (SBC) of any engine, the reference samplers included.

If parameters are drawn from the prior, data are simulated from the model given them,
and an exact posterior is computed from those data, then the rank of the true value
among L independent posterior draws is uniform on {0, ..., L} (Talts et al. 2018),
for every parameter and every function of the parameters. An engine whose ranks are not
uniform does not give the posterior of the model it claims to approximate; which way
they fail says how (truths piled at low ranks: the posterior shifted up; at high ranks:
shifted down; in both tails: too narrow; in the middle: too wide - :func:`failure_shape`).

One simulation here:
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

Simulations whose labels are all of one class are redrawn, not fitted (every engine
refuses such data). That keeps the ranks uniform: conditioning the joint draw on an event
of the data alone leaves each posterior p(theta | y) unchanged. How many were redrawn is
reported. A fit that fails (``ApproximationFailed`` or any error) is reported as a
failure with its message; its ranks are missing, which itself biases the ranks, so the
count matters.

The test of uniformity: each quantity's ranks are turned into PIT values
u = (rank + V) / (L + 1) with V uniform on (0, 1) (exactly uniform when the ranks are),
and their empirical CDF is checked against ArviZ's simultaneous confidence band
(``ecdf_confidence_band``, the "optimized" band of Sailynoja, Burkner & Vehtari 2022):
the band holds the whole ECDF of S uniform values with probability 1 - a. With K
quantities, a = false_alarm / K (Bonferroni), so a calibrated engine is called
miscalibrated with probability at most ``false_alarm`` (5%); the rate reached is measured
by simulation in ``benchmarks/sbc_false_alarm.py``.

Power grows with S, and every verdict says what its run could have seen: the smallest
mean shift and sd factors of one quantity that the test detects 80% of the time at the
run's S, L and K (:func:`detectable_defects`; tabled by ``benchmarks/sbc_power.py``). A
run that stays inside its bands but could not see a mean one posterior sd off or an sd
halved is "too few simulations to call" (:data:`TOO_FEW`, :data:`USELESS`), not
"calibrated"; a run that leaves a band is "miscalibrated" at any S.

Not applicable, with the reason instead of ranks: point estimates (no distribution to
rank in) and engines that fit a different model (their ranks against this model's prior
would only restate that they are not this model's posterior).

Long runs: every finished simulation is written atomically to its own file under the
run's folder, keyed by everything that determines it; a rerun reuses what is there and
does only the rest. ``executor``: any object with ``map(fn, iterable)`` (a
``concurrent.futures`` executor; ``distributed.Client.get_executor()`` for a Dask
cluster); None runs the simulations one after another in this process.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

import numpy as np
from scipy.special import betaincinv, ndtr, ndtri

from ...inference.compile_cache import batch_size_for
from ...inference.contracts import many_of
from ...models.base import flatten, unflatten
from ..base.atomic import atomic_write
from ..base.code_digest import code_digest, spec_key
from ..base.signing import SBC_SIMULATION, read_signed_json, write_signed_json
from ..base.figures import ShownFigure
from ..judge.rates import wilson_interval
from ..records import registry
from ..references import run_reference
from ..references.nuts import nuts_posteriors
from ..references.nuts_program import as_numpy_key, default_layout
from .compare import default_references

# a user engine given as a path: the one rule for every caller (validation/runs/engines.py)
from .engines import engine_label, import_engine, user_entry
from . import fence

#: family-wise false-alarm rate of the uniformity test for a calibrated engine
FALSE_ALARM = 0.05
CALIBRATED = "calibrated"
MISCALIBRATED = "miscalibrated"
#: the ranks stayed inside their bands, but the run was too small to have seen a gross
#: defect (:data:`USELESS`): not a verdict of "calibrated"
TOO_FEW = "too few simulations to call"
NOT_APPLICABLE = "not applicable"
#: file format of the stored simulations (bump when their content changes; 2: each
#: simulation also keeps the truth and its posterior's mean and sd of every quantity, which
#: the coverage and contraction views read)
SBC_FORMAT = 2


# --------------------------------------------------------------------------------------
# The problem: a spec with a proper prior and a fixed design
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SBCProblem:
    """What SBC simulates from: a spec (proper prior), a training design and held-out
    design rows for the predictive quantities. ``variants``: specs of the model variants
    some engines approximate instead (as in ``Prepared.variants``)."""

    spec: Any
    Phi: np.ndarray
    Phi_new: np.ndarray
    variants: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update(json.dumps(self.spec.to_dict(), sort_keys=True, default=str).encode())
        for a in (self.Phi, self.Phi_new):
            h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        return h.hexdigest()[:16]


def rbf_design(n: int = 60, n_basis: int = 6, n_new: int = 3, *, width: float = 1.0, seed: int = 0):
    """(Phi, Phi_new): Gaussian RBF features exp(-|x - c|^2 / (2 width^2)) of 2-d
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


def problem_for(record, *, n: int = 60, n_basis: int | None = None, n_new: int = 3, seed: int = 0) -> SBCProblem:
    """The SBC problem of a registered model: its record's ``sbc_spec`` (a spec with a
    proper prior, and its variants) on :func:`rbf_design`. n_basis None: the spec's own
    number of weights where it fixes one (gridRVM's table: ``n_weights``), else
    :data:`DEFAULT_N_BASIS`; a width the spec cannot take is refused by the spec."""
    if record.sbc_spec is None:
        raise ValueError(f"model {record.name!r} names no SBC spec (ModelRecord.sbc_spec)")
    spec, variants = record.sbc_spec()
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
        return _with_batch(ResolvedEngine(entry.name, entry.fit()))
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
        return _with_batch(ResolvedEngine(engine, entry.fit(), variant=entry.variant))
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
        return _with_batch(ResolvedEngine(engine, user_entry(engine).fit()))
    raise ValueError(f"model {record.name!r} has no engine or reference sampler {engine!r}; engines: "
                     f"{', '.join(record.engine_names)}; samplers: {', '.join(record.sampler_names)}; "
                     "or give 'module:function'")


def _with_batch(resolved: ResolvedEngine) -> ResolvedEngine:
    """``resolved`` with its fit's batched form (``fit.many``), where the fit has one."""
    many = many_of(resolved.fit) if resolved.fit is not None else None
    return resolved if many is None else replace(resolved, batched=_engine_batch(many))


# --------------------------------------------------------------------------------------
# One simulation
# --------------------------------------------------------------------------------------
_OBSERVED: dict[str, str] = {}


def observed_site(spec, Phi) -> str:
    """The name of the model's observed (label) site (found by tracing the model once per
    spec and design shape: a trace costs ~8 ms, paid by every simulation before)."""
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
    """Names of the ranked quantities, in the order of :func:`_quantities`."""
    names = []
    for s in spec.sites(Phi.shape[1]):
        names += [s.name] if s.shape == () else [f"{s.name}[{','.join(map(str, i))}]" for i in np.ndindex(*s.shape)]
    return names + [f"f_new[{j}]" for j in range(Phi_new.shape[0])] + ["log_lik"]


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


def _quantities(spec, params: dict[str, np.ndarray], Phi, Phi_new, y) -> np.ndarray:
    """(n, K) quantities of n parameter draws: the flat sites, f at Phi_new, log p(y | theta).
    y: the labels (N,), or (n, N) one label vector per draw (many simulations at once)."""
    import jax

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


def _posterior_draws(posterior, key, n: int) -> dict[str, np.ndarray]:
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
                            ).get_trace(jnp.asarray(Phi), y=params[obs])
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

    key = spec_key(spec, np.asarray(Phi, dtype=float))
    if key not in _PRIOR_SAMPLERS:
        Phi_j = jax.numpy.asarray(Phi)

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
    raise RuntimeError(f"{MAX_BATCHES * PRIOR_BATCH} prior draws gave no accepted draw with labels of both classes")


def _first_accepted(spec, obs: str, draws, log_w, uniforms):
    """(parameters, labels, position) of the first of PRIOR_BATCH prior draws that is
    accepted (rejection on the factor terms) and has labels of both classes; None if none."""
    draws, log_w = {k: np.asarray(v) for k, v in draws.items()}, np.asarray(log_w)
    if np.any(log_w > 1e-12):
        raise ValueError(f"{type(spec).__name__}.model has a factor term that is not a log-probability "
                         "(positive somewhere): its prior cannot be drawn by rejection, so SBC cannot simulate it")
    accept = np.log(np.asarray(uniforms)) < log_w
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


def _rank_many(spec, Phi, Phi_new, fitted, settings: SBCSettings) -> dict[int, dict[str, Any]]:
    """:func:`_ranked` of many simulations at once. fitted: (index, key, truth, y, redraws,
    posterior, seconds) each. The draws of Gaussian posteriors come from one call for all
    (the same normal variates as ``posterior.sample``'s), every simulation's quantities
    (truth and draws) from one call of the quantity program, the ranks as in ``_ranked``."""
    import jax

    results: dict[int, dict[str, Any]] = {}
    ranked = [f for f in fitted if f[5].kind != "point"]
    for index, _, _, _, redraws, posterior, seconds in fitted:
        if posterior.kind == "point":
            results[index] = {"index": index, "status": "point", "redraws": redraws, "seconds": seconds,
                              "message": "the engine returned a point estimate"}
    if not ranked:
        return results
    n = settings.n_draws
    split = jax.vmap(lambda k: jax.random.split(k, 3))(np.stack([np.asarray(f[1]) for f in ranked]))
    k_draws, k_ties = np.asarray(split[:, 1]), np.asarray(split[:, 2])
    gaussian = [j for j, f in enumerate(ranked) if f[5].kind == "gaussian"]
    normals = {}
    if gaussian:
        dim = ranked[gaussian[0]][5].dim
        same = [j for j in gaussian if ranked[j][5].dim == dim]
        z = np.asarray(_normals(n, dim)(_padded(k_draws[same])))
        normals = {j: z[i] for i, j in enumerate(same)}
    rows, labels = [], []
    for j, (index, _, truth, y, _, posterior, _) in enumerate(ranked):
        if j in normals:  # posterior.sample's draws, from the normals drawn above for all at once
            draws = posterior.sample_from_normals(normals[j])
        else:
            draws = _posterior_draws(posterior, k_draws[j], n)
        rows.append({k: np.concatenate([np.asarray(truth[k])[None], np.asarray(draws[k])]) for k in draws})
        labels.append(np.broadcast_to(np.asarray(y, dtype=float), (1 + len(next(iter(draws.values()))), len(y))))
    counts = [len(lab) for lab in labels]
    q = _quantities(spec, {k: _padded(np.concatenate([r[k] for r in rows]), len(rows)) for k in rows[0]}, Phi,
                    Phi_new, _padded(np.concatenate(labels), len(rows)))
    starts = np.cumsum([0] + counts)
    for j, (index, _, _, _, redraws, posterior, seconds) in enumerate(ranked):
        block = q[starts[j]:starts[j + 1]]
        results[index] = _rank_result(index, redraws, seconds, posterior, block[0], block[1:], k_ties[j])
    return results


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


def _failed_fit(index: int, redraws: int, seconds: float, err: BaseException | str) -> dict[str, Any]:
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
        return None, _failed_fit(index, redraws, time.perf_counter() - t0, err)
    seconds = time.perf_counter() - t0
    problem = fence.posterior_problem(posterior)
    if problem:
        return None, _failed_fit(index, redraws, seconds, f"the engine {problem}: not ranked")
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


def _ranked(spec, Phi, Phi_new, posterior, key, truth, y, index: int, redraws: int, seconds: float,
            settings: SBCSettings) -> dict[str, Any]:
    """The result of a simulation whose fit returned ``posterior``: the truth's ranks among
    ``settings.n_draws`` of its draws. JSON-able."""
    import jax

    if posterior.kind == "point":
        return {"index": index, "status": "point", "redraws": redraws, "seconds": seconds,
                "message": "the engine returned a point estimate"}
    key, k_draws, k_ties = jax.random.split(key, 3)
    draws = _posterior_draws(posterior, k_draws, settings.n_draws)
    q_true = _quantities(spec, {k: v[None] for k, v in truth.items()}, Phi, Phi_new, y)[0]
    q_draws = _quantities(spec, draws, Phi, Phi_new, y)
    return _rank_result(index, redraws, seconds, posterior, q_true, q_draws, k_ties)


def _rank_result(index: int, redraws: int, seconds: float, posterior, q_true, q_draws, k_ties) -> dict[str, Any]:
    """A simulation's result from the truth's quantities (K,) and its draws' (n, K); a failed
    one where any of them is not finite (NaN draws would rank as if below every truth)."""
    import jax

    if not (np.all(np.isfinite(q_true)) and np.all(np.isfinite(q_draws))):
        bad = int(np.size(q_draws) - np.count_nonzero(np.isfinite(q_draws)))
        return _failed_fit(index, redraws, seconds, f"{bad} non-finite ranked quantities (NaN or inf) in the "
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
    return _ranked(spec, Phi, Phi_new, posterior, key, truth, y, index, redraws, outcome, settings)


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
        ys = np.stack([np.asarray(y, dtype=float) for _, _, _, y, _ in started])
        posteriors, share = fenced_batch(batched, spec, Phi, ys, np.stack(keys), time_limit)
        fitted = []
        for (index, key, truth, y, redraws), posterior in zip(started, posteriors):
            if isinstance(posterior, (BaseException, str)):
                results[index] = _failed_fit(index, redraws, share, posterior)
                continue
            info = posterior.info
            seconds = float(info.seconds) + float(info.compile_seconds)
            fitted.append((index, key, truth, y, redraws, posterior, seconds))
        with on_host:
            results.update(_rank_many(spec, Phi, Phi_new, fitted, settings))
    return [results[i] for i in indices]


# --------------------------------------------------------------------------------------
# The uniformity test
# --------------------------------------------------------------------------------------
def eval_points(n_sims: int) -> np.ndarray:
    """Where the PIT ECDF is compared with its band: fixed (not data dependent, as the
    band's calibration requires), at most 100 points, inside (0, 1)."""
    k = min(n_sims, 100)
    return np.arange(1, k) / k


@functools.lru_cache(maxsize=64)
def simultaneous_band(n_sims: int, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """ArviZ's simultaneous ECDF band for ``n_sims`` uniform values, at :func:`eval_points`."""
    from arviz.stats.ecdf_utils import ecdf_confidence_band

    x = eval_points(n_sims)
    lower, upper = ecdf_confidence_band(n_sims, x, x, prob=prob, method="optimized")
    return np.asarray(lower), np.asarray(upper)


def pit_values(ranks: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT: (rank + V) / (L + 1), V ~ U(0, 1): uniform on (0, 1) exactly when
    the ranks are uniform on 0..L."""
    ranks = np.asarray(ranks, dtype=float)
    return (ranks + rng.uniform(size=ranks.shape)) / (n_draws + 1)


def uniformity(ranks: np.ndarray, n_draws: int, *, names: list[str] | None = None,
               false_alarm: float = FALSE_ALARM, seed: int = 0) -> dict[str, Any]:
    """The uniformity test of (S, K) ranks in 0..``n_draws``: per quantity, does the PIT
    ECDF stay inside the simultaneous band of level 1 - false_alarm / K?

    Per quantity also the shares of its PIT values in the lowest tenth, the highest
    tenth, both (``share_in_outer_tenths``) and below one half, the two shape scores of
    :func:`failure_shape` and, for a quantity outside its band, its shape in words."""
    ranks = np.asarray(ranks)
    S, K = ranks.shape
    names = names or [f"q[{k}]" for k in range(K)]
    rng = np.random.default_rng(seed)
    u = pit_values(ranks, n_draws, rng)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, 1.0 - false_alarm / K)
    ecdf = (u[:, None, :] <= x[None, :, None]).mean(0)  # (points, K)
    # how far outside the band, in units of the band's half-width at that point
    half = (upper - lower)[:, None] / 2.0
    excess = np.maximum(ecdf - upper[:, None], lower[:, None] - ecdf) / half
    worst = excess.max(0)
    per = []
    for k in range(K):
        low, high = float(np.mean(u[:, k] < 0.1)), float(np.mean(u[:, k] > 0.9))
        below = float(np.mean(u[:, k] < 0.5))
        inside = bool(worst[k] <= 0.0)
        shape = failure_shape(low, high, below, S)
        per.append({"name": names[k], "inside": inside, "excess": float(worst[k]),
                    "share_in_lower_tenth": low, "share_in_upper_tenth": high,
                    "share_in_outer_tenths": low + high, "share_below_half": below,
                    "shift_score": shape["shift_score"], "spread_score": shape["spread_score"],
                    # words only where the test failed: a lean inside the band is chance
                    "shape": None if inside else shape["shape"]})
    failed = [p for p in per if not p["inside"]]
    status = MISCALIBRATED if failed else CALIBRATED
    return {"status": status, "n_sims": S, "n_draws": n_draws, "n_quantities": K, "false_alarm": false_alarm,
            "band_level": 1.0 - false_alarm / K, "quantities": per,
            "worst": sorted(failed, key=lambda p: -p["excess"])[:3]}


def conjugate_normal_ranks(rng: np.random.Generator, n_sims: int, n_draws: int, n_quantities: int, *,
                           sd_factor: float = 1.0, shift: float = 0.0, defective: int | None = None) -> np.ndarray:
    """(n_sims, K) ranks of SBC on a problem with a known answer: theta ~ N(0, 1) and
    x ~ N(theta, 1) per quantity, so theta | x ~ N(x / 2, 1 / 2). The engine's draws are
    exact (``sd_factor = 1``, ``shift = 0``: the ranks are uniform) or have a planted
    defect: sd scaled by ``sd_factor``, mean moved by ``shift`` posterior sds, in the
    first ``defective`` quantities (None: all; the rest stay exact). Used to measure the
    uniformity test's false-alarm rate and power. A positive ``shift`` moves the draws
    up, so the truths fall at low ranks: a posterior shifted up."""
    theta = rng.standard_normal((n_sims, n_quantities))
    x = theta + rng.standard_normal((n_sims, n_quantities))
    k = n_quantities if defective is None else int(defective)
    scale = np.where(np.arange(n_quantities) < k, sd_factor, 1.0)
    offset = np.where(np.arange(n_quantities) < k, shift, 0.0)
    draws = x[:, None, :] / 2.0 + np.sqrt(0.5) * (offset + scale * rng.standard_normal(
        (n_sims, n_draws, n_quantities)))
    return (draws < theta[:, None, :]).sum(1)


# --------------------------------------------------------------------------------------
# The shape of a failure
# --------------------------------------------------------------------------------------
#: standard errors a shape score must reach before its word is used. The quantity has
#: already failed the band test, so these scores only choose the words; two standard
#: errors keep a wrong word rare (about 2% one-sided per score) without leaving most
#: flagged shifts at "no simple shape"
SHAPE_SCORE = 2.0
SHIFTED_UP = "posterior shifted up"
SHIFTED_DOWN = "posterior shifted down"
TOO_NARROW = "too narrow"
TOO_WIDE = "too wide"
NO_SIMPLE_SHAPE = "no simple shape"


def failure_shape(lower: float, upper: float, below: float, n_sims: int) -> dict[str, Any]:
    """A quantity's rank distribution in words, from the shares of its PIT values in the
    lowest tenth (``lower``), the highest tenth (``upper``) and below one half
    (``below``) over ``n_sims`` simulations.

    Two scores, each in binomial standard errors at this S (not fixed cut-offs: the same
    share is strong evidence at S = 1000 and none at S = 20):
    * shift: (below - 1/2) / sqrt(1/4 / S). Truths piled at LOW ranks (most of them below
      the posterior median) mean the posterior sits too high: "posterior shifted up";
      piled at high ranks, "shifted down".
    * spread: probit(lower) + probit(upper) - 2 probit(0.1), over its delta-method
      standard error. For draws off by a shift d and an sd factor s (N(mu + d sd, (s sd)^2)
      against the truth's N(mu, sd^2)), probit(lower) = d + s probit(0.1) and
      probit(upper) = -d + s probit(0.1): the shift cancels in the sum, which reads
      2 s probit(0.1). So the score sees the spread whatever the shift: positive when the
      tails are fuller than any pure shift makes them ("too narrow"; a pure narrowing
      over-fills both tails), negative when emptier ("too wide"). A pure shift, which
      piles truths in ONE tail and empties the other, scores about 0 - reading the two
      outer tenths together, as this module once did, called a shift "too narrow".

    Both scores past :data:`SHAPE_SCORE`: both words ("posterior shifted up and too
    narrow"); neither: "no simple shape". Returns the scores and ``shape``."""
    S = int(n_sims)
    shift = (below - 0.5) / np.sqrt(0.25 / S)
    # continuity-corrected shares (half a count added to each of the three cells: lowest
    # tenth, middle, highest tenth): an empty tenth has a finite probit, and the middle
    # cell keeps a share, so the variance below stays positive
    pl, pu = (lower * S + 0.5) / (S + 1.5), (upper * S + 0.5) / (S + 1.5)
    zl, zu = ndtri(pl), ndtri(pu)
    dl, du = np.exp(-0.5 * zl * zl) / np.sqrt(2 * np.pi), np.exp(-0.5 * zu * zu) / np.sqrt(2 * np.pi)
    # multinomial (co)variances of the two shares, through the probit's slope
    var = (pl * (1 - pl) / dl ** 2 + pu * (1 - pu) / du ** 2 - 2 * pl * pu / (dl * du)) / S
    spread = (zl + zu - 2 * ndtri(0.1)) / np.sqrt(var)
    words = []
    if abs(shift) >= SHAPE_SCORE:
        words.append(SHIFTED_UP if shift > 0 else SHIFTED_DOWN)
    if abs(spread) >= SHAPE_SCORE:
        words.append(TOO_NARROW if spread > 0 else TOO_WIDE)
    return {"shape": " and ".join(words) if words else NO_SIMPLE_SHAPE,
            "shift_score": float(shift), "spread_score": float(spread)}


def describe_failure(q: dict[str, Any]) -> str:
    """A failing quantity of :func:`uniformity` in words: its shape (:func:`failure_shape`)
    and the shares it was read from."""
    shape = q["shape"] or NO_SIMPLE_SHAPE
    return (f"{q['name']} ({shape}: {100 * q['share_below_half']:.0f}% of truths below the posterior median, "
            f"{100 * q['share_in_lower_tenth']:.0f}% / {100 * q['share_in_upper_tenth']:.0f}% in the lowest / "
            "highest tenth of ranks; 50%, 10% / 10% if calibrated)")


# --------------------------------------------------------------------------------------
# Power: what a run of S simulations could have seen
# --------------------------------------------------------------------------------------
#: the detection probability the power line states
POWER_PROBABILITY = 0.8
#: replicates of the power simulation: the 80% is estimated with a binomial Monte Carlo
#: sd of sqrt(0.8 x 0.2 / 1000) = 1.3%
POWER_REPLICATES = 1000
#: of the power simulation's uniforms: a fixed seed makes every power line deterministic
POWER_SEED = 20261127
#: the largest defects searched: a shift of 8 posterior sds, an sd x 1/100 and x 100
MAX_SHIFT_SD = 8.0
MAX_SD_FACTOR = 100.0
#: when a run that stays inside its bands is "too few simulations to call": when the
#: smallest defects it detects with 80% probability are a mean off by more than one
#: posterior sd, or an sd narrower than half the true one (or none at all). Both are
#: gross errors: a posterior one sd off covers the truth with its central 95% interval 83%
#: of the time, one half as wide 67% of the time (its "95%" interval is a 67% one). A
#: test blind to either says nothing a user would call calibrated. A posterior too wide
#: errs on the safe side (its intervals over-cover), so widening is reported, not used.
#: With L = 99 and K = 10 to 30 quantities this makes 10 and 20 simulations too few and
#: 50 enough (benchmarks/results/sbc_power.md)
USELESS = {"mean_shift_sd": 1.0, "sd_factor_narrow": 0.5}
#: simulation counts tried for the number a useful run needs
SIMS_GRID = (10, 20, 50, 100, 200, 500, 1000)

_GAUSS_LEGENDRE = np.polynomial.legendre.leggauss(64)


@functools.lru_cache(maxsize=16)
def _order_statistic_probits(n_draws: int) -> np.ndarray:
    """(L, 64): probit of the (r + 1)-th smallest of L uniforms at the Gauss-Legendre
    nodes of its quantile, r = 0..L-1 (the rank cdf of :func:`pit_cdf` integrates over it)."""
    nodes = (_GAUSS_LEGENDRE[0] + 1.0) / 2.0
    r = np.arange(n_draws, dtype=float)[:, None]
    return ndtri(betaincinv(r + 1.0, n_draws - r, nodes[None, :]))


def pit_cdf(x: np.ndarray, n_draws: int, shift: float = 0.0, sd_factor: float = 1.0) -> np.ndarray:
    """P(u <= x) for the randomized PIT u of one quantity whose L posterior draws are off
    by ``shift`` posterior sds and an sd scaled by ``sd_factor`` (the defect
    :func:`conjugate_normal_ranks` plants), exactly up to quadrature.

    With z the truth's standardized place in the exact posterior (N(0, 1)), each draw
    falls below the truth with probability p = Phi((z - shift) / sd_factor), so the rank R
    is Binomial(L, p) and R <= r exactly when the (r + 1)-th smallest of L uniforms, a
    Beta(r + 1, L - r) variable B, exceeds p: P(R <= r) = E[Phi(shift + sd_factor
    probit(B))], a smooth integral over B's quantile (64-node Gauss-Legendre). u = (R +
    V) / (L + 1) then has a piecewise linear cdf between those values."""
    L = int(n_draws)
    weights = _GAUSS_LEGENDRE[1] / 2.0
    cdf = np.concatenate([[0.0], ndtr(shift + sd_factor * _order_statistic_probits(L)) @ weights, [1.0]])
    t = np.asarray(x, dtype=float) * (L + 1)
    r = np.clip(np.floor(t).astype(int), 0, L)
    # cdf[r] is P(R <= r - 1): the randomized PIT spreads P(R = r) evenly over [r, r + 1)
    return cdf[r] + (t - r) * (cdf[r + 1] - cdf[r])


@functools.lru_cache(maxsize=4)
def _sorted_uniforms(n_sims: int, replicates: int, seed: int) -> np.ndarray:
    """``replicates`` sorted samples of ``n_sims`` uniforms, row i shifted by i and
    flattened, so one ``searchsorted`` counts every row's values below its thresholds.
    The same uniforms serve every defect size (common random numbers: the estimated
    detection rate then moves smoothly with the size, and bisection finds one crossing)."""
    u = np.sort(np.random.default_rng(seed).uniform(size=(replicates, n_sims)), axis=1)
    return (u + np.arange(replicates)[:, None]).ravel()


def detection_rate(n_sims: int, n_draws: int, n_quantities: int, *, shift: float = 0.0, sd_factor: float = 1.0,
                   false_alarm: float = FALSE_ALARM, replicates: int = POWER_REPLICATES,
                   seed: int = POWER_SEED) -> float:
    """How often the uniformity test flags a quantity off by ``shift`` posterior sds and
    an sd x ``sd_factor``, in a run of S = ``n_sims`` simulations, L = ``n_draws`` draws
    and K = ``n_quantities`` quantities (the defective quantity's ECDF against its band of
    level 1 - false_alarm / K).

    Only the defective quantity is simulated: its PIT values are exact draws from
    :func:`pit_cdf` (inverse cdf of sorted uniforms), so their ECDF at the test's points is
    the count of uniforms below the cdf there. The other K - 1 quantities are taken as
    exact and their own chance alarms (up to the false-alarm rate) not counted, and real
    defects touch several quantities at once: so this is the conservative, hardest case,
    and a run's real power is at least this."""
    S, K = int(n_sims), int(n_quantities)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, 1.0 - false_alarm / K)
    G = pit_cdf(x, n_draws, shift, sd_factor)
    flat = _sorted_uniforms(S, int(replicates), int(seed))
    offset = np.arange(int(replicates))[:, None]
    ecdf = (np.searchsorted(flat, G[None, :] + offset, side="right") - offset * S) / S
    return float(np.mean(((ecdf > upper) | (ecdf < lower)).any(1)))


def _smallest_detected(rate: Callable[[float], float], top: float, tol: float) -> float | None:
    """The smallest size in [0, top] whose detection rate reaches POWER_PROBABILITY
    (bisection to ``tol``; the rate grows with the size), None if even ``top`` does not."""
    if rate(top) < POWER_PROBABILITY:
        return None
    lo, hi = 0.0, top
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if rate(mid) >= POWER_PROBABILITY else (mid, hi)
    return hi


@functools.lru_cache(maxsize=256)
def _detectable(n_sims: int, n_draws: int, n_quantities: int, false_alarm: float) -> tuple:
    def rate(**defect):
        return detection_rate(n_sims, n_draws, n_quantities, false_alarm=false_alarm, **defect)

    shift = _smallest_detected(lambda d: rate(shift=d), MAX_SHIFT_SD, 1e-3)
    # the sd factors on a log scale: x 0.5 and x 2 are defects of the same size
    narrow = _smallest_detected(lambda a: rate(sd_factor=float(np.exp(-a))), np.log(MAX_SD_FACTOR), 1e-3)
    wide = _smallest_detected(lambda a: rate(sd_factor=float(np.exp(a))), np.log(MAX_SD_FACTOR), 1e-3)
    return (shift, None if narrow is None else float(np.exp(-narrow)), None if wide is None else float(np.exp(wide)))


def power_useful(power: dict[str, Any]) -> bool:
    """Whether a run with this power may call an engine calibrated (:data:`USELESS`)."""
    shift, narrow = power["mean_shift_sd"], power["sd_factor_narrow"]
    return (shift is not None and shift <= USELESS["mean_shift_sd"]
            and narrow is not None and narrow >= USELESS["sd_factor_narrow"])


def _detected_sizes(power: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The power's defects in words: (those detected, those not even at the largest size)."""
    shift, narrow, wide = power["mean_shift_sd"], power["sd_factor_narrow"], power["sd_factor_wide"]
    seen, missed = [], []
    if shift is not None:
        seen.append(f"a mean off by {shift:.2f} posterior sd")
    else:
        missed.append(f"mean shift up to {MAX_SHIFT_SD:g} posterior sd")
    if narrow is not None and wide is not None:
        seen.append(f"an sd off by x{narrow:.2f} / x{wide:.2f}")
    elif narrow is not None:
        seen.append(f"an sd off by x{narrow:.2f}")
        missed.append(f"widening up to x{MAX_SD_FACTOR:g}")
    elif wide is not None:
        seen.append(f"an sd off by x{wide:.2f}")
        missed.append(f"narrowing down to x{1 / MAX_SD_FACTOR:g}")
    else:
        missed.append(f"sd off by x{1 / MAX_SD_FACTOR:g} to x{MAX_SD_FACTOR:g}")
    return seen, missed


def power_line(power: dict[str, Any]) -> str:
    """The power of a run in one line."""
    seen, missed = _detected_sizes(power)
    head = f"with {power['n_sims']} simulations this test detects ({100 * power['probability']:.0f}% of the time)"
    if not seen:
        return f"{head} no {' and no '.join(missed)} in one quantity"
    return f"{head} {' or '.join(seen)} in any one quantity" + (f", but no {' and no '.join(missed)}" if missed else "")


def detectable_defects(n_sims: int, n_draws: int, n_quantities: int,
                       false_alarm: float = FALSE_ALARM) -> dict[str, Any]:
    """The power of a run of S = ``n_sims`` simulations, L = ``n_draws`` draws and K =
    ``n_quantities`` quantities: the smallest mean shift (in posterior sds) and sd factors
    (narrow, below 1; wide, above 1) of ONE quantity that the uniformity test detects with
    probability :data:`POWER_PROBABILITY` (None: not even the largest searched). Computed
    by :func:`detection_rate` with bisection on the size; cached, so a summary pays for it
    once per (S, L, K, false_alarm)."""
    shift, narrow, wide = _detectable(int(n_sims), int(n_draws), int(n_quantities), float(false_alarm))
    power = {"probability": POWER_PROBABILITY,
             "probability_mc_sd": float(np.sqrt(POWER_PROBABILITY * (1 - POWER_PROBABILITY) / POWER_REPLICATES)),
             "mean_shift_sd": shift, "sd_factor_narrow": narrow, "sd_factor_wide": wide,
             "n_sims": int(n_sims), "n_draws": int(n_draws), "n_quantities": int(n_quantities),
             "false_alarm": float(false_alarm), "replicates": POWER_REPLICATES, "seed": POWER_SEED,
             "method": ("one quantity's ranks off by a normal mean shift or sd factor (as conjugate_normal_ranks "
                        "plants them), their exact PIT distribution against the same simultaneous band of level "
                        "1 - false_alarm / K; the other K - 1 quantities exact and their chance alarms not "
                        f"counted (the conservative, hardest case); {POWER_REPLICATES} replicates with common "
                        f"random numbers (seed {POWER_SEED}), bisection on the size")}
    power["useful"] = power_useful(power)
    power["line"] = power_line(power)
    return power


def simulations_needed(n_draws: int, n_quantities: int, false_alarm: float = FALSE_ALARM) -> dict[str, Any] | None:
    """The power at the smallest S of :data:`SIMS_GRID` whose power is useful
    (:func:`power_useful`), None if none is."""
    for s in SIMS_GRID:
        power = detectable_defects(s, n_draws, n_quantities, false_alarm)
        if power["useful"]:
            return power
    return None


def quantity_glossary(names: list[str]) -> dict[str, str]:
    """What each kind of ranked quantity is: name pattern -> meaning."""
    out: dict[str, str] = {}
    for name in names:
        base, bracket, _ = name.partition("[")
        if base == "f_new":
            out["f_new[k]"] = ("the linear predictor f = phi(x_k)' w (the model's own linear_predictor) at the k-th "
                               "held-out design row: it probes the predictive")
        elif name == "log_lik":
            out["log_lik"] = ("the log-likelihood of the simulated labels under each draw: a test quantity that "
                              "depends on the data, so it sees joint errors the marginals hide")
        else:
            key = f"{base}[i]" if bracket else base
            out[key] = (f"the i-th coordinate of the model's parameter {base}" if bracket
                        else f"the model's parameter {base}") + " (its truth drawn from the prior)"
    return out


# --------------------------------------------------------------------------------------
# A run: many simulations, stored one by one, resumable
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Task:
    """Everything one simulation needs, picklable for a process or a Dask worker."""

    model: str
    engine: str
    problem_kwargs: tuple[tuple[str, Any], ...]
    settings: SBCSettings
    index: int
    path: str
    # a reference sampler run on one of the model's variants (gridRVM's s-grid): its name
    variant: str | None = None
    # the most seconds the fit may take (fence.py); None: no limit
    time_limit: float | None = None


@dataclass(frozen=True)
class _BatchTask:
    """Simulations ``indices`` of one run with the engine's batched fit (one compiled
    program for all of them), each written to its own path as it would be alone."""

    model: str
    engine: str
    problem_kwargs: tuple[tuple[str, Any], ...]
    settings: SBCSettings
    indices: tuple[int, ...]
    paths: tuple[str, ...]
    variant: str | None = None
    time_limit: float | None = None  # per simulation of the batch


#: simulations per batched task: a task is the unit a Dask worker takes and the unit that is
#: written before the next starts (resumability); the compiled program is built once per
#: worker process and reused by its later tasks, so small tasks cost little. Where the
#: chains run as lanes of one vectorized program (an accelerator), a task is as wide as
#: :data:`SIMS_PER_VECTORIZED_BATCH`: the lanes are what the accelerator is good at
SIMS_PER_BATCH = 10
SIMS_PER_VECTORIZED_BATCH = 1000
#: simulations per task of an engine's ``fit.many``: one vmapped program over the data sets;
#: an engine's fit takes milliseconds, so a task of 64 is still a fraction of a second, and
#: 64 is one of the batch sizes its programs are compiled for (compile_cache.batch_size_for)
SIMS_PER_ENGINE_BATCH = 64


def sims_per_batch(resolved: ResolvedEngine | None = None) -> int:
    """Simulations per batched task of ``resolved`` on this process's device (see
    :data:`SIMS_PER_BATCH`); None: a sampler's (NUTS's)."""
    if resolved is not None and not resolved.accelerator_pays:
        return SIMS_PER_ENGINE_BATCH
    return SIMS_PER_VECTORIZED_BATCH if default_layout(4) == "vectorized" else SIMS_PER_BATCH


@functools.lru_cache(maxsize=8)
def _problem(model: str, problem_kwargs) -> tuple[Any, SBCProblem]:
    """The record and SBC problem of a task, kept per process: every task of a run in one
    worker then holds the same spec object, and an engine that caches its compiled program
    per spec object (ADVI, Pathfinder, auto-laplace) compiles once per worker, not once per
    simulation (~5 s a fit instead of ~0.4 s for ADVI on PCVM's problem)."""
    record = registry.get_model(model)
    return record, problem_for(record, **dict(problem_kwargs))


def _task_problem(task: _Task | _BatchTask):
    """A task's problem, resolved engine and spec, rebuilt from names in a worker."""
    import zoo  # noqa: F401  (float64 in a fresh worker)

    record, problem = _problem(task.model, task.problem_kwargs)
    resolved = resolve_engine(record, task.engine, task.settings)
    if task.variant is not None:
        resolved = replace(resolved, variant=task.variant)
    spec = problem.spec if resolved.variant is None else problem.variants[resolved.variant]
    return problem, resolved, spec


def _run_task(task: _Task) -> dict[str, Any]:
    """One simulation in a worker: fit, write the result atomically. Returns the result."""
    problem, resolved, spec = _task_problem(task)
    result = simulate_one(spec, problem.Phi, problem.Phi_new, resolved.fit, task.index, task.settings,
                          task.time_limit)
    write_signed_json(result, task.path, SBC_SIMULATION)
    return result


def _run_batch_task(task: _BatchTask) -> list[dict[str, Any]]:
    """A batch of simulations in a worker (:func:`simulate_batch`); each result written
    atomically to its path. Returns the results."""
    problem, resolved, spec = _task_problem(task)
    results = simulate_batch(spec, problem.Phi, problem.Phi_new, resolved.batched, task.indices, task.settings,
                             task.time_limit)
    for result, path in zip(results, task.paths):
        write_signed_json(result, path, SBC_SIMULATION)
    return results


def _fit_module(fit: Callable) -> str:
    # through partials and the return-value check to the engine's own code
    while isinstance(fit, functools.partial) or hasattr(fit, "__wrapped_engine__"):
        fit = fit.func if isinstance(fit, functools.partial) else fit.__wrapped_engine__
    return fit.__module__


def run_key(model: str, engine: str, problem: SBCProblem, settings: SBCSettings, fit: Callable) -> str:
    """What determines a run's simulations (not the number of them: a longer run extends a
    shorter one): model, engine, problem, settings, and the code of this module, of the
    model and of the engine (its module and the zoo modules it imports) - a stored
    simulation of code that has since changed is not reused."""

    s = asdict(settings)
    s.pop("n_sims")
    s.pop("false_alarm")
    modules = (__name__, type(problem.spec).__module__, _fit_module(fit))
    # a reference sampler's options come from the model's record, outside the digested code
    options = repr(sorted(fit.keywords.items())) if isinstance(fit, functools.partial) else ""
    payload = {"format": SBC_FORMAT, "model": model, "engine": engine, "problem": problem.digest(),
               "settings": s, "code": code_digest(modules), "options": options}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def stored_simulations(folder: str, n_sims: int) -> tuple[list[str], dict[int, dict[str, Any]]]:
    """(the path of each of a run's ``n_sims`` simulations in ``folder``, made if missing;
    the results already stored there, by index): what a resumed run reuses - only those
    signed with this user's key for this run's folder and this simulation's name
    (base/signing.py); any other is named in a warning and simulated again."""
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"{i:05d}.json") for i in range(n_sims)]
    results: dict[int, dict[str, Any]] = {}
    for i, p in enumerate(paths):
        stored = read_signed_json(p, SBC_SIMULATION, "stored SBC simulation")
        if stored is not None:
            results[i] = stored
    return paths, results


def run_sbc(model: str, engine: str, *, settings: SBCSettings = SBCSettings(), out_dir=None,
            problem_kwargs: dict[str, Any] | None = None, executor=None, progress: Callable | None = None,
            variant: str | None = None,
            engine_time_limit: float | None = fence.DEFAULT_ENGINE_TIME_LIMIT) -> dict[str, Any]:
    """SBC of ``engine`` (a registry engine, a reference sampler name, or
    ``"module:function"``) on the registered ``model``.

    engine_time_limit: the most seconds one simulation's fit may take (validation/runs/fence.py;
    a batched fit gets it once per simulation); past it the simulation fails with that
    reason. None: no limit.

    out_dir: where the simulations are kept (one JSON each, under ``sims-<key>/``); a
    rerun with the same key reuses them. None: a temporary folder, discarded.
    Returns the summary (JSON-able): status, reason, counts, the uniformity test.
    """
    import tempfile


    limit = fence.check_time_limit(engine_time_limit, "engine_time_limit")
    if isinstance(engine, str) and "@" in engine and ":" not in engine and variant is None:
        engine, variant = engine.split("@", 1)  # "grid-gibbs@s-grid": a sampler on a variant
    record = registry.get_model(model)
    if record.sbc_spec is None:
        return {"model": model, "engine": engine_label(engine),
                "settings": asdict(settings), "status": NOT_APPLICABLE,
                "reason": f"{record.title} names no proper prior to draw parameters from (an improper prior "
                          "has no prior draws, so SBC cannot start)"}
    problem_kwargs = dict(problem_kwargs or {})
    # the problem the tasks of this process will use too (one spec object: see _problem)
    problem = _problem(model, tuple(sorted(problem_kwargs.items())))[1]
    resolved = resolve_engine(record, engine, settings)
    if variant is not None:
        # a function that approximates one of the model's variants, or a reference sampler
        # run on a variant's posterior (our ground truth there needs SBC as much)
        if not callable(engine) and engine not in record.sampler_names:
            raise ValueError("variant= is for engines given as functions and for reference samplers; "
                             "a registry engine names its own")
        if variant not in problem.variants:
            raise ValueError(f"{record.title} has no variant {variant!r}; variants: {', '.join(problem.variants) or 'none'}")
        resolved = replace(resolved, variant=variant,
                           label=resolved.label if callable(engine) else f"{resolved.label}@{variant}")
    base = {"model": model, "engine": resolved.label, "settings": asdict(settings),
            "design": {**problem_kwargs, "n": int(problem.Phi.shape[0]), "n_basis": int(problem.Phi.shape[1]),
                       "n_new": int(problem.Phi_new.shape[0])},
            "spec": (problem.spec if resolved.variant is None else problem.variants[resolved.variant]).to_dict(),
            "variant": resolved.variant}
    if resolved.not_applicable:
        return {**base, "status": NOT_APPLICABLE, "reason": resolved.not_applicable}
    if callable(engine) and executor is not None:
        raise ValueError("an engine given as a Python function runs in this process only; "
                         "give it as 'module:function' to run it on an executor")
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="zoo-sbc-")
        out_dir = tmp.name
    try:
        key = run_key(model, (resolved.label if callable(engine) else engine) + f"@{resolved.variant}",
                      problem, settings, resolved.fit)
        folder = os.path.join(os.fspath(out_dir), f"sims-{key}")
        paths, results = stored_simulations(folder, settings.n_sims)
        reused = len(results)
        todo = [i for i in range(settings.n_sims) if i not in results]
        t0 = time.perf_counter()
        if callable(engine):
            # a Python function runs here, one batch or one simulation at a time
            spec = problem.spec if resolved.variant is None else problem.variants[resolved.variant]
            size = sims_per_batch(resolved) if resolved.batched is not None else 1
            for chunk in (todo[i:i + size] for i in range(0, len(todo), size)):
                if resolved.batched is not None:
                    done = simulate_batch(spec, problem.Phi, problem.Phi_new, resolved.batched, chunk, settings,
                                          limit)
                else:
                    done = [simulate_one(spec, problem.Phi, problem.Phi_new, resolved.fit, chunk[0], settings,
                                         limit)]
                for r in done:
                    results[r["index"]] = r
                    write_signed_json(r, paths[r["index"]], SBC_SIMULATION)
                if progress:
                    progress(len(results), settings.n_sims)
        elif resolved.batched is not None:
            size = sims_per_batch(resolved)
            chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
            tasks = [_BatchTask(model, engine, tuple(sorted(problem_kwargs.items())), settings, tuple(chunk),
                                tuple(paths[i] for i in chunk), variant=variant, time_limit=limit) for chunk in chunks]
            mapper = map if executor is None else executor.map
            for batch in mapper(_run_batch_task, tasks):
                for r in batch:
                    results[r["index"]] = r
                if progress:
                    progress(len(results), settings.n_sims)
        else:
            tasks = [_Task(model, engine, tuple(sorted(problem_kwargs.items())), settings, i, paths[i],
                           variant=variant, time_limit=limit) for i in todo]
            mapper = map if executor is None else executor.map
            for r in mapper(_run_task, tasks):
                results[r["index"]] = r
                if progress:
                    progress(len(results), settings.n_sims)
        wall = time.perf_counter() - t0
        return {**base, **summarize([results[i] for i in range(settings.n_sims)], quantity_names(
            problem.spec if resolved.variant is None else problem.variants[resolved.variant],
            problem.Phi, problem.Phi_new), settings), "key": key, "folder": folder,
            "reused": reused, "wall_seconds": wall}
    finally:
        if tmp is not None:
            tmp.cleanup()


def summarize(results: list[dict[str, Any]], names: list[str], settings: SBCSettings) -> dict[str, Any]:
    """The verdict of a run from its simulations."""
    ok = [r for r in results if r["status"] == "ok"]
    failed = [r for r in results if r["status"] == "failed"]
    points = [r for r in results if r["status"] == "point"]
    counts = {"n_sims": len(results), "ok": len(ok), "failed": len(failed), "point": len(points),
              "redraws": int(sum(r.get("redraws", 0) for r in results)),
              "not_converged": int(sum(not r.get("converged", True) for r in ok)),
              "fit_seconds_median": float(np.median([r["seconds"] for r in results if "seconds" in r]))
              if any("seconds" in r for r in results) else None}
    failures = sorted({r["message"] for r in failed})[:5]
    if points:
        return {"status": NOT_APPLICABLE, "reason": "the engine returned point estimates", "counts": counts}
    if len(ok) < 10:
        # the reason names what went wrong, not only how often (a user's engine that returns
        # None, an array or non-finite draws fails every simulation with the same line)
        why = (f"; the fits failed with: {failures[0]}" + (f" (and {len(failures) - 1} other message"
               f"{'s' if len(failures) > 2 else ''})" if len(failures) > 1 else "")) if failures else ""
        return {"status": NOT_APPLICABLE, "counts": counts, "failure_messages": failures,
                "reason": f"only {len(ok)} of {len(results)} fits succeeded: too few to test uniformity{why}"}
    ranks = np.array([r["ranks"] for r in ok])
    n_draws = ok[0]["n_draws"]
    test = uniformity(ranks, n_draws, names=names, false_alarm=settings.false_alarm, seed=settings.seed)
    S, K = len(ok), test["n_quantities"]
    power = detectable_defects(S, n_draws, K, settings.false_alarm)
    inside = (f"the ranks of all {K} quantities stay inside their simultaneous {100 * test['band_level']:.2f}% "
              f"bands over {S} simulations ({100 * settings.false_alarm:g}% family-wise false-alarm rate)")
    needed = None
    if test["status"] == MISCALIBRATED:
        # a detection keeps its false-alarm rate at any S: it stands however small the run
        status = MISCALIBRATED
        reason = ("miscalibrated: " + "; ".join(describe_failure(q) for q in test["worst"])
                  + f" ({sum(not q['inside'] for q in test['quantities'])} of {K} quantities "
                  f"outside their bands over {S} simulations)")
    elif power["useful"]:
        status = CALIBRATED
        reason = f"calibrated: {inside}"
    else:
        status = TOO_FEW
        enough = simulations_needed(n_draws, K, settings.false_alarm)
        needed = None if enough is None else enough["n_sims"]
        reason = (f"{TOO_FEW}: {inside}, but a run this small misses a mean off by "
                  f"{USELESS['mean_shift_sd']:g} posterior sd or an sd x{USELESS['sd_factor_narrow']:g} more than "
                  f"{100 * (1 - POWER_PROBABILITY):.0f}% of the time; "
                  + (f"{needed} simulations would be enough (they detect {' or '.join(_detected_sizes(enough)[0])} "
                     f"{100 * POWER_PROBABILITY:.0f}% of the time)" if enough is not None else
                     f"not even {SIMS_GRID[-1]} simulations would be enough with {K} quantities"))
    if failed:
        reason += (f"; {len(failed)} of {len(results)} fits failed and are missing from the ranks, "
                   "which can bias them")
    reason += f"; {power['line']}"
    return {"status": status, "reason": reason, "counts": counts, "failure_messages": failures,
            "uniformity": test, "power": {**power, "simulations_needed": needed},
            "glossary": quantity_glossary(names), "ranks": ranks.tolist(),
            "coverage": coverage_view(ranks, n_draws, names, settings),
            "contraction": contraction_view(ok, names)}


# --------------------------------------------------------------------------------------
# Two more views of the same simulations: coverage and contraction
# --------------------------------------------------------------------------------------
#: the nominal levels of central intervals the coverage view states numbers for
COVERAGE_LEVELS = (0.5, 0.8, 0.9, 0.95)


def coverage_view(ranks: np.ndarray, n_draws: int, names: list[str], settings: SBCSettings) -> dict[str, Any]:
    """Empirical coverage of central posterior intervals against their nominal level.

    The truth lies in the central interval of level p exactly when its PIT value u does,
    i.e. when w = |2u - 1| <= p; so the coverage curve is the ECDF of w, and w is uniform
    when the ranks are. The same simultaneous band as the uniformity test's (level
    1 - false_alarm / K) therefore holds the whole curve of a calibrated engine; it is a view
    of the simulations, not a second verdict (the verdict stays the uniformity test's,
    whose false-alarm rate is measured). Numbers at :data:`COVERAGE_LEVELS` come with
    pointwise 95% Wilson intervals. The PIT values are those the test used (same seed)."""
    S, K = ranks.shape
    u = pit_values(ranks, n_draws, np.random.default_rng(settings.seed))
    w = np.abs(2.0 * u - 1.0)
    per = []
    for k in range(K):
        levels = []
        for p in COVERAGE_LEVELS:
            hits = int(np.sum(w[:, k] <= p))
            lo, hi = wilson_interval(hits, S)
            levels.append({"nominal": p, "coverage": hits / S, "interval": [lo, hi]})
        per.append({"name": names[k], "levels": levels})
    return {"levels": list(COVERAGE_LEVELS), "n_sims": S, "interval": "pointwise 95% Wilson",
            "band_level": 1.0 - settings.false_alarm / K, "quantities": per}


def coverage_line(summary: dict[str, Any], level: float = 0.9) -> str | None:
    """One line: the median over quantities of the empirical coverage of central intervals
    of nominal ``level``, and the quantity furthest from it with its Wilson interval."""
    view = summary.get("coverage")
    if not view or level not in view["levels"]:
        return None
    i = view["levels"].index(level)
    rows = [(q["name"], q["levels"][i]) for q in view["quantities"]]
    median = float(np.median([r["coverage"] for _, r in rows]))
    name, worst = max(rows, key=lambda r: abs(r[1]["coverage"] - level))
    lo, hi = worst["interval"]
    return (f"{100 * level:g}% central intervals cover the truth in {100 * median:.0f}% of simulations "
            f"(median over quantities); furthest: {name} {100 * worst['coverage']:.0f}% "
            f"[{100 * lo:.0f}, {100 * hi:.0f}]")


def contraction_view(ok: list[dict[str, Any]], names: list[str]) -> dict[str, Any] | None:
    """Posterior contraction against z-score, per simulation and quantity (Betancourt's
    view of what the fits learn): z = (posterior mean - truth) / posterior sd, and
    contraction = 1 - posterior variance / variance of the truths over the simulations (the
    prior's variance in SBC; the variance under the conditioning posterior in posterior
    SBC). A calibrated engine's z have mean 0 and sd near 1 (exactly 1 for Gaussian
    posteriors; P(|z| > 2) is then 4.6%); contraction near 0 means the data taught the fit
    nothing about a quantity, near 1 that they pinned it down. None when the stored
    simulations predate these numbers (format 1)."""
    if not ok or any("post_mean" not in r for r in ok):
        return None
    truth = np.array([r["truth"] for r in ok])
    mean, sd = np.array([r["post_mean"] for r in ok]), np.array([r["post_sd"] for r in ok])
    spread = truth.var(0, ddof=1) if len(ok) > 1 else np.full(truth.shape[1], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, (mean - truth) / sd, np.nan)
        contraction = np.where(spread > 0, 1.0 - sd ** 2 / spread, np.nan)
    per = []
    for k, name in enumerate(names):
        zk = z[:, k][np.isfinite(z[:, k])]
        per.append({"name": name, "z_mean": float(zk.mean()) if zk.size else None,
                    "z_sd": float(zk.std(ddof=1)) if zk.size > 1 else None,
                    "share_abs_z_above_2": float(np.mean(np.abs(zk) > 2.0)) if zk.size else None,
                    "contraction_median": float(np.nanmedian(contraction[:, k]))
                    if np.isfinite(contraction[:, k]).any() else None})
    return {"z": np.round(z, 5).tolist(), "contraction": np.round(contraction, 5).tolist(), "quantities": per,
            "truth_spread": "variance of the truths over the simulations"}


def rank_summary(ranks, names: list[str], n_draws: int, *, settings: SBCSettings | None = None,
                 model: str = "(ranks)", engine: str = "(ranks)") -> dict[str, Any]:
    """The SBC verdict of ranks computed elsewhere (e.g. by :func:`conjugate_normal_ranks` or a
    user's own simulation loop): ``ranks`` (simulations, quantities), each the rank of the
    true value among ``n_draws`` posterior draws; ``names`` one per quantity. The summary has
    the layout of :func:`run_sbc`'s, so :func:`sbc_figure` and :func:`summary_line` read it."""
    settings = settings or SBCSettings(n_sims=len(ranks), n_draws=n_draws)
    ranks = np.asarray(ranks)
    if ranks.ndim != 2 or ranks.shape[1] != len(names):
        raise ValueError(f"ranks must be (simulations, quantities) with one name per quantity: got shape "
                         f"{ranks.shape} and {len(names)} name(s)")
    if not np.issubdtype(ranks.dtype, np.integer) or ranks.min() < 0 or ranks.max() > n_draws:
        raise ValueError(f"ranks must be integers from 0 to n_draws = {n_draws}")
    results = [{"status": "ok", "ranks": r.tolist(), "n_draws": int(n_draws)} for r in ranks]
    return {"model": model, "engine": engine, "settings": asdict(settings),
            **summarize(results, list(names), settings)}


def summary_line(summary: dict[str, Any]) -> str:
    head = f"{summary['model']} / {summary['engine']}"
    if summary["status"] == NOT_APPLICABLE:
        return f"{head}: no SBC: {summary['reason']}"
    return f"{head}: {summary['reason']}"


__all__ = ["SBCProblem", "SBCSettings", "rbf_design", "problem_for", "resolve_engine", "import_engine",
           "simulate_one", "uniformity", "conjugate_normal_ranks", "run_sbc", "summarize", "rank_summary", "summary_line",
           "sbc_figure", "plot_sbc", "sbc_views_figure", "plot_sbc_views", "coverage_view", "contraction_view",
           "coverage_line", "FALSE_ALARM",
           "CALIBRATED", "MISCALIBRATED", "TOO_FEW", "NOT_APPLICABLE", "failure_shape", "describe_failure",
           "detection_rate", "detectable_defects", "simulations_needed", "power_line", "pit_cdf",
           "quantity_glossary"]


def sbc_figure(summary: dict[str, Any], *, max_quantities: int = 8):
    """Rank histograms and PIT-ECDF difference plots of an SBC run (a summary of
    :func:`run_sbc` or :func:`rank_summary`), for the failing quantities first and then the
    others, up to ``max_quantities``; a matplotlib Figure off pyplot that a notebook shows (no
    pyplot state is touched). None when there are no ranks to plot.

    Left: the histogram of the ranks of the truths, with the band where a bar of a uniform
    histogram lies 99% of the time. Right: the empirical CDF of the fractional ranks minus
    the uniform CDF, inside the simultaneous band the test used (its edges drawn); where the
    curve leaves the band it is drawn thick and marked, so a failure is seen where it is.
    """
    if "ranks" not in summary:
        return None
    from scipy.stats import binom  # scipy.stats is slow to import: only the figure needs it here

    test = summary["uniformity"]
    ranks = np.asarray(summary["ranks"])
    S, K = ranks.shape
    L = test["n_draws"]
    shown = _shown_quantities(summary, max_quantities)
    u = pit_values(ranks, L, np.random.default_rng(summary["settings"]["seed"]))
    x = eval_points(S)
    lower, upper = simultaneous_band(S, test["band_level"])
    bins = min(20, L + 1)
    edges = np.linspace(-0.5, L + 0.5, bins + 1)
    p_bin = np.diff(edges) / (L + 1)
    lo_c, hi_c = binom.ppf(0.005, S, p_bin.mean()), binom.ppf(0.995, S, p_bin.mean())
    fig = ShownFigure(figsize=(9.5, 0.6 + 2.0 * len(shown)))
    axes = fig.subplots(len(shown), 2, squeeze=False, sharex="col")
    for row, k in enumerate(shown):
        q = test["quantities"][k]
        colour = "tab:blue" if q["inside"] else "tab:red"
        ax = axes[row, 0]
        ax.axhspan(lo_c, hi_c, color="0.85")
        ax.hist(ranks[:, k], bins=edges, color=colour)
        ax.set_ylabel(f"{q['name']}\nsimulations", fontsize=8)
        ax = axes[row, 1]
        ax.fill_between(x, lower - x, upper - x, color="0.88", step="mid")
        ax.step(x, lower - x, where="mid", color="0.45", lw=0.7)
        ax.step(x, upper - x, where="mid", color="0.45", lw=0.7)
        diff = (u[:, k][:, None] <= x[None, :]).mean(0) - x
        ax.step(x, diff, where="mid", color=colour, lw=1.0)
        out = (diff < lower - x) | (diff > upper - x)
        if out.any():
            ax.plot(x[out], diff[out], "o", color="tab:red", ms=3)
            # in a box, so that a curve running under it does not hide it
            ax.text(0.99, 0.04, f"outside the band at {out.mean():.0%} of u", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="tab:red",
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5})
        ax.axhline(0.0, color="0.4", lw=0.5)
        ax.set_ylabel("ECDF(u) - u", fontsize=8)
        if row == 0:
            axes[row, 0].set_title("rank histogram (grey: 99% of a uniform bar)", fontsize=9)
            ax.set_title(f"PIT-ECDF minus uniform, simultaneous {100 * test['band_level']:.2f}% band", fontsize=9)
    axes[-1, 0].set_xlabel(f"rank of the true value among L = {L} posterior draws")
    axes[-1, 1].set_xlabel("fractional rank u")
    fig.suptitle(f"SBC {summary['model']} / {summary['engine']}: {summary['status']} "
                 f"({summary['counts']['ok']} simulations, L = {L}; red: a quantity outside its band)", fontsize=10)
    fig.tight_layout()
    return fig


def _shown_quantities(summary: dict[str, Any], max_quantities: int) -> list[int]:
    """The quantities a figure shows: those outside their bands first (worst first), then
    the others in order, up to ``max_quantities``."""
    qs = summary["uniformity"]["quantities"]
    return sorted(range(len(qs)), key=lambda k: (qs[k]["inside"], -qs[k]["excess"]))[:max_quantities]


def sbc_views_figure(summary: dict[str, Any], *, max_quantities: int = 8):
    """The coverage and contraction views of an SBC run (:func:`coverage_view`,
    :func:`contraction_view`) for the quantities :func:`sbc_figure` shows; None without ranks.

    Left: empirical coverage of central intervals minus their nominal level, against the
    nominal level, inside the simultaneous band of the run's uniformity test (a calibrated
    engine's curves stay inside it with the test's probability); below zero is too narrow
    (under-coverage), above zero too wide. Right: each simulation's posterior contraction
    against its z-score; a calibrated engine's points spread around z = 0 with |z| > 2
    rare; a cloud off-centre is a bias, one beyond +-2 with high contraction an
    overconfident fit."""
    if "ranks" not in summary:
        return None
    test = summary["uniformity"]
    ranks = np.asarray(summary["ranks"])
    S, K = ranks.shape
    shown = _shown_quantities(summary, max_quantities)
    u = pit_values(ranks, test["n_draws"], np.random.default_rng(summary["settings"]["seed"]))
    w = np.abs(2.0 * u - 1.0)
    x = eval_points(S)
    lower, upper = simultaneous_band(S, test["band_level"])
    fig = ShownFigure(figsize=(10.0, 4.2))
    ax_cov, ax_con = fig.subplots(1, 2)
    ax_cov.fill_between(x, lower - x, upper - x, color="0.88", step="mid",
                        label=f"simultaneous {100 * test['band_level']:.2f}% band")
    colours = [f"C{i % 10}" for i in range(len(shown))]
    for colour, k in zip(colours, shown):
        q = test["quantities"][k]
        cover = (w[:, k][:, None] <= x[None, :]).mean(0)
        ax_cov.step(x, cover - x, where="mid", color=colour, lw=1.6 if not q["inside"] else 0.9,
                    label=q["name"] + ("" if q["inside"] else " (outside its band)"))
    ax_cov.axhline(0.0, color="0.4", lw=0.5)
    ax_cov.set_xlabel("nominal level of the central interval")
    ax_cov.set_ylabel("empirical coverage - nominal")
    ax_cov.set_title("coverage (below 0: intervals too narrow)", fontsize=9)
    ax_cov.legend(fontsize=6, loc="best", framealpha=0.6)
    view = summary.get("contraction")
    if view is None:
        ax_con.text(0.5, 0.5, "no posterior means and sds with these ranks\n(ranks given alone, or simulations of an older format)",
                    ha="center", va="center", transform=ax_con.transAxes, fontsize=8)
    else:
        z, contraction = np.asarray(view["z"], dtype=float), np.asarray(view["contraction"], dtype=float)
        for colour, k in zip(colours, shown):
            ax_con.plot(contraction[:, k], z[:, k], "o", ms=2.5, alpha=0.6, color=colour,
                        label=test["quantities"][k]["name"])
        for level in (-2.0, 2.0):
            ax_con.axhline(level, color="0.5", lw=0.6, ls="--")
        ax_con.axhline(0.0, color="0.4", lw=0.5)
        ax_con.set_xlabel("posterior contraction 1 - var(post) / var(truths)")
        ax_con.set_ylabel("z = (posterior mean - truth) / posterior sd")
        ax_con.set_title("contraction against z-score (dashed: |z| = 2)", fontsize=9)
    fig.suptitle(f"{summary.get('kind', 'SBC')} {summary['model']} / {summary['engine']}: coverage and "
                 f"contraction over {S} simulations", fontsize=10)
    fig.tight_layout()
    return fig


def plot_sbc_views(summary: dict[str, Any], path, *, max_quantities: int = 8) -> str | None:
    """:func:`sbc_views_figure`, written atomically to ``path`` (PNG); the path, or None."""
    fig = sbc_views_figure(summary, max_quantities=max_quantities)
    if fig is None:
        return None
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90), suffix=".png")
    return os.fspath(path)


def plot_sbc(summary: dict[str, Any], path, *, max_quantities: int = 8) -> str | None:
    """:func:`sbc_figure`, written atomically to ``path`` (PNG); the path, or None when there
    are no ranks to plot."""
    fig = sbc_figure(summary, max_quantities=max_quantities)
    if fig is None:
        return None
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=90), suffix=".png")
    return os.fspath(path)
