"""The reference posterior: ground truth for every engine, and the rule that certifies it.

``run_reference(spec, Phi, y)`` runs NUTS on ``spec.model`` (4 chains, float64), checks
convergence with rank-normalized split R-hat and bulk/tail ESS (Vehtari et al. 2021) and
the divergence count, and returns a :class:`Reference`. The reference is *certified* only
if every coordinate of every *sampled* site passes :data:`CERTIFICATION` - the measured
sites and the latent ones the sampler moves (GIG logistic's u and z, the Gibbs samplers'
auxiliary blocks) - and, for NUTS, the energy (E-BFMI) and tree-depth checks pass. An uncertified
reference says why in ``failures`` (one sentence per problem) and must not be used as
truth silently. When the only problem is too few effective draws (no divergences), the
chains are continued until the number of draws has doubled, up to
``config.max_doublings`` times: more draws, the same rule - never a looser one.

A second sampler. Where NUTS cannot certify a posterior (GGSM probit at q <= 1 on
separable data: validation/ggsm_gibbs.py says why; GIG logistic, whose NUTS runs keep a
few divergences: validation/gig_gibbs.py), ``ReferenceConfig(sampler="slice-gibbs")`` or
``"pg-gibbs"`` runs a sampler built for that model, certified by the same rule (it has no
divergences; a slice update that exhausts its shrinkage steps counts as a failure).
:func:`first_certified_reference` tries a list of samplers in order and stops at the
first certified one; the Reference names its sampler in ``provenance["sampler"]``.

A pilot. A NUTS entry of such a list may ask for a pilot (``ReferenceConfig(pilot=True)``):
before the full run, a short NUTS run (:data:`PILOT`: its warm-up and draws) is checked by
an explicit rule, :func:`pilot_decision`, for signs that the full run cannot certify -
divergences, energy or tree-depth failures, chains that disagree, or an effective sample
size per draw too small to reach the rule's ESS within the run's cap of draws. If it
predicts failure the full run is skipped and the next sampler is tried at once; the
pilot's draws stand in the ``tried`` list as an uncertified run whose first failure says
what the pilot saw. The last sampler of a list always runs in full (a pilot only chooses
between samplers: a wrong prediction costs time, never the reference).

Results are cached on disk (netCDF draws + provenance JSON, each written atomically)
under a content hash of the model, its hyper-parameters, the data, the sampler settings,
the certification rule, a digest of the source code that defines the model and the
sampler (``code_digest.py``) and the package versions, much like posteriordb's reference
posteriors carry their provenance. A stored certificate is never trusted: every read
recomputes it from the stored draws and sampler statistics (whose digest the record
holds), with the current rule.

Chain layout. ``chain_method="parallel"`` (the default) puts one chain on each XLA CPU
device; it needs about half the wall time of "vectorized" or "sequential" (measured:
benchmarks/README.md, "Measurements behind design choices"). JAX exposes one CPU device
unless asked for more *before its backend starts* (the first JAX computation of the
process), so ``import zoo`` asks for :data:`HOST_DEVICES` devices if the backend
has not started and the user has not chosen a count (:func:`zoo.request_host_devices`;
``ZOO_HOST_DEVICES=1`` in the environment turns this off). Extra host devices do not
slow single-device work (measured: a Cholesky/matmul loop and a small-op loop took the
same time with 1 and 4 devices). If the devices are missing anyway (something ran JAX
before this import), "parallel" falls back to "sequential", which yields bit-for-bit the
same draws (verified), so import order can change the speed, never the result.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

import jax
import numpy as np
import numpyro
from numpyro.infer import MCMC, NUTS

from ..inference.posterior import DrawsPosterior, FitInfo
from ..models.base import Site
from . import arviz_adapter as adapter
from .atomic import _jsonable, write_text_atomic
from .code_digest import code_digest
from ..models.checks import check_design

# The host-device request lives in zoo/__init__.py so that it happens at `import zoo`,
# before anything can start the JAX backend.
from zoo import HOST_DEVICES, HOST_DEVICES_REQUESTED, request_host_devices  # noqa: E402,F401



# --------------------------------------------------------------------------------------
# The certification rule: the one place where its thresholds live.
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Certification:
    """When a NUTS run may serve as ground truth.

    rhat_max: rank-normalized split R-hat of every coordinate at most this (Vehtari et al.
    2021 recommend 1.01); ess_bulk_min / ess_tail_min: bulk and tail ESS of every
    coordinate at least this (their recommendation of 100 per chain, 4 chains) - so the
    reference mean is known to within sd/20, and its 5%/95% quantiles are usable;
    max_divergences: divergent transitions after warmup allowed (any divergence means
    NUTS missed part of the posterior, which biases it without showing in R-hat).
    ebfmi_min (NUTS): the energy Bayesian fraction of missing information of every chain,
    mean((E_t - E_{t-1})^2) / var(E), at least this. Below 0.3 (Betancourt 2016) the
    momentum resampling cannot move the chain through the energy levels of the
    posterior: heavy tails go unexplored while R-hat can still look fine.
    max_treedepth_fraction (NUTS): at most this fraction of transitions may stop at the
    maximum tree depth. A saturated tree ended before the U-turn criterion: a few are
    harmless, but many mean the chain moves by truncated trajectories and its ESS is not
    what the trajectories' length suggests.
    Neither NUTS check can be fixed by more draws, so both stop the doubling loop.
    min_round_trips (parallel tempering): every run must carry states from its coldest
    copy to its hottest (the prior) and back at least this often while it records draws.
    Each round trip is a fresh descent from the prior into the posterior; a mode holding a
    tenth of the mass is missed by ten independent descents with probability 0.9^10 = 0.35
    per chain, and by all four chains' forty with 0.9^40 = 1.5 % (the descents are not
    exactly independent, so this is a guide, not a guarantee).
    """

    rhat_max: float = 1.01
    ess_bulk_min: float = 400.0
    ess_tail_min: float = 400.0
    max_divergences: int = 0
    ebfmi_min: float = 0.3
    max_treedepth_fraction: float = 0.01
    min_round_trips: int = 10


CERTIFICATION = Certification()


@dataclass(frozen=True)
class PilotRule:
    """When a short NUTS pilot predicts that the full NUTS run cannot be certified.

    The pilot is NUTS with the full run's chains, seed, target acceptance and tree depth,
    but only ``num_warmup`` warm-up iterations and ``num_samples`` draws per chain (no
    doublings). It predicts failure - and the full run is skipped - when any of these holds
    (each a check of :data:`CERTIFICATION` that more draws of the same kind cannot mend, or
    a projection that the run's cap of draws cannot reach it):

    * divergences: more than the rule allows among the pilot's draws. A divergence is a
      geometry problem of the posterior at the adapted step size; the full run's longer
      warm-up adapts the same step size to the same geometry;
    * energy (E-BFMI below the rule's minimum in some chain) or tree depth (more than the
      rule's fraction of transitions at the maximum depth): the certification's own NUTS
      checks, which stop its doubling loop too;
    * R-hat above ``rhat_max``: after the pilot's warm-up the chains still sit in different
      places (modes, or a scale the sampler crawls along); the certification needs 1.01;
    * the projected ESS: the smallest bulk or tail ESS of any coordinate per recorded draw,
      times every draw the full run may make (chains x num_samples x 2^max_doublings),
      falls short of the rule's ESS by more than the factor ``ess_margin``. The pilot's
      short warm-up makes its ESS per draw pessimistic, hence the margin.

    Otherwise the full run goes ahead (its draws are its own: the pilot's are discarded).
    """

    num_warmup: int = 300
    num_samples: int = 200
    rhat_max: float = 1.2
    ess_margin: float = 2.0


PILOT = PilotRule()
RHAT_MAX = CERTIFICATION.rhat_max
ESS_BULK_MIN = CERTIFICATION.ess_bulk_min
ESS_TAIL_MIN = CERTIFICATION.ess_tail_min
MAX_DIVERGENCES = CERTIFICATION.max_divergences

#: at most this many per-coordinate sentences per criterion; the rest are counted
_MAX_SENTENCES_PER_CHECK = 10
#: bump when the cache layout changes, so old entries are recomputed rather than misread
#: (2: every sampled site stored, content digest over draws and statistics, no stored
#: certificate)
CACHE_FORMAT = 2
#: NumPyro per-draw fields kept as ArviZ sample_stats (numpyro name -> arviz name)
_EXTRA_FIELDS = {
    "diverging": "diverging",
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "energy": "energy",
    "potential_energy": "lp",  # stored negated: lp = -potential energy
    "adapt_state.step_size": "step_size",
}


@dataclass(frozen=True)
class ReferenceSampler:
    """A sampler a reference can come from.

    name: what ``ReferenceConfig.sampler`` and ``--reference`` call it. runner: the class
    that runs it - ``runner(spec, Phi, y, config, progress)`` with ``first()`` and
    ``more(n)`` returning (draws, extra) - draws of every site it samples, the measured
    ones included - and ``sample_stats``, ``sampler_checks`` and ``layout`` as
    :class:`NutsRun` has them (a runner whose ``sampler_checks`` count events over the
    recorded draws, so that more draws can meet them, sets ``checks_count_events = True``:
    then those failures, like R-hat's and ESS's, let the chains be continued). code_modules: the modules whose source defines the
    sampler; their digest (with what they import from the zoo, and the runner class's
    own source) is part of the cache key, so changed sampler code never reads stale draws.

    NUTS (:data:`NUTS_SAMPLER`) works on any model written in NumPyro. A model whose posterior
    NUTS cannot certify may bring its own sampler in its registry record (GGSM probit's
    slice-Gibbs, GIG logistic's Polya-Gamma Gibbs); registering the record registers it
    here (:func:`register_sampler`).
    """

    name: str
    runner: Any
    code_modules: tuple[str, ...] = ()
    #: whether run_reference drops JAX's compiled programs after a run of this sampler:
    #: True where they cannot be reused by the next data set (NUTS: NumPyro re-jits its
    #: loop on every run), False where they take the data as arguments (the Gibbs sweeps)
    clear_compiled_after_run: bool = False

    def code_digest(self) -> str:
        """Digest of the code that defines this sampler (the reference harness itself,
        this module, is left out: it does not change the draws)."""
        return code_digest(self.code_modules, exclude=(__name__,), objects=(self.runner,))


#: name -> sampler; NUTS is built in, the models' own samplers come with their records
_SAMPLERS: dict[str, ReferenceSampler] = {}


def register_sampler(sampler: ReferenceSampler) -> None:
    """Make ``sampler`` usable by name. Registering the same entry again is a no-op; a
    different sampler under a name already taken is an error."""
    known = _SAMPLERS.get(sampler.name)
    if known is not None and known != sampler:
        raise ValueError(f"a different reference sampler is already registered as {sampler.name!r}")
    _SAMPLERS[sampler.name] = sampler


def known_samplers() -> tuple[str, ...]:
    """The names of every registered reference sampler, NUTS first."""
    return tuple(_SAMPLERS)


def get_sampler(name: str) -> ReferenceSampler:
    if name not in _SAMPLERS:
        raise ValueError(f"unknown reference sampler {name!r}; known: {', '.join(_SAMPLERS)}")
    return _SAMPLERS[name]


@dataclass(frozen=True)
class ReferenceConfig:
    """Settings of the reference sampler (NUTS unless ``sampler`` says otherwise).

    sampler: "nuts", or a model's own sampler (:func:`known_samplers`: "slice-gibbs" for
    GGSM probit, "pg-gibbs" for GIG logistic). For the Gibbs samplers num_warmup and
    num_samples count sweeps; num_chains, seed and max_doublings apply as for NUTS,
    target_accept and max_tree_depth do not, and their chains need no layout choice.

    chain_method: "parallel" by default (one chain per CPU device; falls back to
    "sequential" when the process has fewer devices than chains); the fastest layout in
    wall time (benchmarks/README.md, "Measurements behind design choices").
    "parallel" and "sequential" give identical draws (verified bit for bit);
    "vectorized" draws differ (batched arithmetic changes the last bits, and NUTS
    trajectories amplify that), so the layout is part of the cache key.
    max_doublings: when certification fails only on R-hat/ESS with zero divergences,
    the chains are continued until the draws double, at most this many times.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_accept: float = 0.9
    max_tree_depth: int = 10
    seed: int = 0
    chain_method: str = "parallel"
    max_doublings: int = 2
    sampler: str = "nuts"
    # wall-clock seconds for the whole run (warm-up, draws, doublings); None: no limit.
    # A limited run happens in a child process that is killed when time is up
    # (:class:`ReferenceTimeout`); a run that finishes gives the same draws as without
    # a limit, so the limit is not part of the cache key.
    time_limit: float | None = None
    # NUTS only: run a short pilot first (:data:`PILOT`) and skip this sampler when the
    # pilot predicts that it cannot certify (:func:`pilot_decision`). Acted on by
    # first_certified_reference for every sampler but the last of its list; the full
    # run's draws do not depend on it, so it is not part of the cache key.
    pilot: bool = False

    def __post_init__(self):
        get_sampler(self.sampler)  # ValueError naming the known ones
        if self.pilot and self.sampler != "nuts":
            raise ValueError(f"pilot is a NUTS setting; the {self.sampler} sampler has none")
        if self.chain_method not in ("parallel", "sequential", "vectorized"):
            raise ValueError(
                f"chain_method must be 'parallel', 'sequential' or 'vectorized'; got {self.chain_method!r}"
            )
        for name in ("num_chains", "num_warmup", "num_samples", "max_tree_depth"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"ReferenceConfig.{name} must be a positive integer")
        if not 0.0 < self.target_accept < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1); got {self.target_accept}")
        if self.max_doublings < 0:
            raise ValueError("max_doublings must be >= 0")
        if self.time_limit is not None and not (
                isinstance(self.time_limit, (int, float)) and not isinstance(self.time_limit, bool)
                and 0 < self.time_limit < float("inf")):
            raise ValueError(f"time_limit must be a positive number of seconds or None; got {self.time_limit!r}")

    def sampler_settings(self) -> dict[str, Any]:
        """The settings that determine the draws (the cache key's share of the config).

        parallel and sequential produce the same draws, so they share a layout name.
        """
        settings = asdict(self)
        settings.pop("chain_method")
        settings.pop("time_limit")
        settings.pop("pilot")
        if self.sampler != "nuts":
            # the Gibbs samplers: no step size, no trees; one chain per device or one
            # after another give the same draws (each chain has its own key)
            for name in ("target_accept", "max_tree_depth"):
                settings.pop(name)
            settings["sampler"] = f"zoo.{self.sampler}"
            return settings
        settings["chain_layout"] = "vectorized" if self.chain_method == "vectorized" else "per-chain"
        settings["sampler"] = "numpyro.NUTS"
        return settings


@dataclass(frozen=True, eq=False)
class Reference:
    """A reference posterior (NUTS or a second sampler) with its certificate and provenance.

    posterior: DrawsPosterior over spec.sites(M), draws (chains, draws, *shape).
    idata: ArviZ InferenceData (posterior, sample_stats incl. diverging, constant_data
    Phi and y). certified: passes :data:`CERTIFICATION`; failures: why not, as sentences.
    diagnostics: rhat_max, ess_bulk_min, ess_tail_min, divergences, per_site (lists).
    seconds: wall time of the sampling, compilation included (from the original run when
    read from the cache); compile_seconds: the part of it JAX spent tracing and compiling.
    """

    posterior: DrawsPosterior
    idata: Any
    certified: bool
    failures: list[str]
    diagnostics: dict[str, Any]
    seconds: float
    provenance: dict[str, Any]
    compile_seconds: float = 0.0
    from_cache: bool = False
    cache_path: str | None = None

    @property
    def sites(self) -> tuple[Site, ...]:
        return self.posterior.sites

    @property
    def sampler(self) -> str:
        """Which sampler produced the draws: nuts, slice-gibbs or pg-gibbs."""
        return _sampler_name(self.provenance.get("sampler", {}))

    def require_certified(self) -> "Reference":
        """Return self, or raise if the reference may not serve as ground truth."""
        if not self.certified:
            raise RuntimeError(f"{self.sampler} reference is not certified: " + "; ".join(self.failures))
        return self


# --------------------------------------------------------------------------------------
# Certification
# --------------------------------------------------------------------------------------
def _coordinate_names(site: Site) -> list[str]:
    if site.shape == ():
        return [site.name]
    return [f"{site.name}[{','.join(map(str, i))}]" for i in np.ndindex(*site.shape)]


def _count_divergences(divergences) -> int:
    arr = np.asarray(divergences)
    if arr.ndim == 0:
        return int(arr)
    return int(np.sum(arr.astype(bool)))


def _check_failures(diag: dict, sites: tuple[Site, ...], divergences: int, rule: Certification):
    """(sentences, kinds): one sentence per failing coordinate and criterion."""
    sentences: list[str] = []
    kinds: set[str] = set()
    checks = (
        ("rhat", "R-hat", lambda v: not (v <= rule.rhat_max), lambda v: f"{v:.3f} > {rule.rhat_max}"),
        ("ess_bulk", "bulk ESS", lambda v: not (v >= rule.ess_bulk_min), lambda v: f"{v:.0f} < {rule.ess_bulk_min:.0f}"),
        ("ess_tail", "tail ESS", lambda v: not (v >= rule.ess_tail_min), lambda v: f"{v:.0f} < {rule.ess_tail_min:.0f}"),
    )
    for key, label, fails, describe in checks:
        bad = []
        for s in sites:
            values = np.asarray(diag["per_site"][s.name][key], dtype=float).ravel()
            bad.extend((name, v) for name, v in zip(_coordinate_names(s), values) if fails(v))
        if bad:
            kinds.add(key)
        for name, v in bad[:_MAX_SENTENCES_PER_CHECK]:
            shown = "NaN (constant or non-finite draws)" if not np.isfinite(v) else describe(v)
            sentences.append(f"{name}: {label} {shown}")
        if len(bad) > _MAX_SENTENCES_PER_CHECK:
            sentences.append(f"... and {len(bad) - _MAX_SENTENCES_PER_CHECK} more coordinates fail the {label} check")
    if divergences > rule.max_divergences:
        kinds.add("divergences")
        sentences.append(
            f"{divergences} divergent transitions after warmup (allowed: {rule.max_divergences})"
        )
    return sentences, kinds


def certify(idata_or_draws, sites: tuple[Site, ...], divergences, *, rule: Certification = CERTIFICATION):
    """Apply the certification rule to any draws.

    idata_or_draws: InferenceData, or {site: (chains, draws, *shape)}.
    divergences: a count, or the (chains, draws) boolean ``diverging`` array.
    Returns (certified, failures, diagnostics); diagnostics holds rhat_max, ess_bulk_min,
    ess_tail_min, divergences and per_site {name: {rhat, ess_bulk, ess_tail}} as lists.
    """
    sites = tuple(sites)
    idata = idata_or_draws
    if isinstance(idata_or_draws, dict):
        idata = adapter.draws_to_idata(idata_or_draws, sites)
    diag = adapter.summary_diagnostics(idata, sites=sites)
    n_div = _count_divergences(divergences)
    failures, _ = _check_failures(diag, sites, n_div, rule)
    diagnostics = _diagnostics_dict(diag, n_div, idata)
    return not failures, failures, diagnostics


def _diagnostics_dict(diag: dict, n_div: int, idata) -> dict:
    post = idata.posterior
    return {
        "rhat_max": diag["rhat_max"],
        "ess_bulk_min": diag["ess_bulk_min"],
        "ess_tail_min": diag["ess_tail_min"],
        "divergences": n_div,
        "n_chains": int(post.sizes["chain"]),
        "n_draws": int(post.sizes["draw"]),
        "per_site": {
            name: {k: np.asarray(v).tolist() for k, v in vals.items()} for name, vals in diag["per_site"].items()
        },
    }


def _diagnosed_sites(measured: tuple[Site, ...], draws: dict[str, np.ndarray]) -> tuple[Site, ...]:
    """The measured sites, then every other block the sampler moved (its latent sites),
    each named and shaped as its draws are: all of them are diagnosed."""
    names = {s.name for s in measured}
    others = tuple(Site(k, tuple(np.shape(v)[2:])) for k, v in sorted(draws.items()) if k not in names)
    return tuple(measured) + others


def _certify_run(draws, stats, diagnosed, runner, settings):
    """(certified, failures, diagnostics, kinds) of a run: R-hat, ESS and divergences over
    every diagnosed site, then the sampler's own checks (NUTS: E-BFMI, tree depth; Gibbs:
    slice shrinkage). ``stats`` are the sampler statistics as stored (ArviZ names)."""
    idata = adapter.draws_to_idata(draws, diagnosed)
    diag = adapter.summary_diagnostics(idata, sites=diagnosed)
    n_div = _count_divergences(stats["diverging"])
    failures, kinds = _check_failures(diag, diagnosed, n_div, CERTIFICATION)
    sampler_failures, sampler_numbers = runner.sampler_checks(stats, settings, CERTIFICATION)
    if sampler_failures:
        failures = failures + sampler_failures
        # a check that counts events over the recorded draws (tempering's round trips) can
        # be met by more draws; a fault of the sampler (a capped slice update, NUTS's
        # energy) cannot
        kinds = kinds | {"sampler_count" if getattr(runner, "checks_count_events", False) else "sampler"}
    diagnostics = _diagnostics_dict(diag, n_div, idata)
    diagnostics.update(sampler_numbers)
    diagnostics["diagnosed_sites"] = [s.name for s in diagnosed]
    return not failures, failures, diagnostics, kinds


def nuts_energy_checks(stats: dict, max_tree_depth: int, rule: "Certification"):
    """(failures, numbers) of the NUTS-only checks on stored statistics (chains, draws):
    E-BFMI of every chain from ``energy``, and the fraction of transitions whose leapfrog
    count ``n_steps`` reached 2^max_tree_depth - 1 (a tree at the depth limit; a U-turn
    found exactly at the last doubling is counted too, which errs on the strict side)."""
    failures: list[str] = []
    energy = np.asarray(stats["energy"], dtype=float)
    ebfmi = np.mean(np.diff(energy, axis=1) ** 2, axis=1) / np.var(energy, axis=1)
    for c, value in enumerate(ebfmi):
        if not value >= rule.ebfmi_min:
            failures.append(f"chain {c}: E-BFMI {value:.3f} < {rule.ebfmi_min}")
    saturated = float(np.mean(np.asarray(stats["n_steps"]) >= 2 ** int(max_tree_depth) - 1))
    if saturated > rule.max_treedepth_fraction:
        failures.append(f"{100 * saturated:.1f}% of transitions reached the maximum tree depth "
                        f"{int(max_tree_depth)} (allowed: {100 * rule.max_treedepth_fraction:g}%)")
    return failures, {"ebfmi_min": float(np.min(ebfmi)), "treedepth_fraction": saturated}


# --------------------------------------------------------------------------------------
# Hashing and the disk cache
# --------------------------------------------------------------------------------------
def package_versions() -> dict[str, str]:
    return {
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "arviz": adapter.ARVIZ_VERSION,
        "numpy": np.__version__,
    }


def _array_digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _content_digest(draws: dict[str, np.ndarray], stats: dict[str, np.ndarray]) -> str:
    """Digest of everything the certificate is computed from: the draws of every
    sampled site and the sampler statistics."""
    h = hashlib.sha256()
    for group, arrays in (("draws", draws), ("stats", stats)):
        for name in sorted(arrays):
            h.update(f"{group}/{name}".encode())
            h.update(_array_digest(np.asarray(arrays[name], dtype=np.float64)).encode())
    return h.hexdigest()


def model_code_digest(spec) -> str:
    """Digest of the source that defines the spec's model (its module and the zoo modules
    it imports: distributions, special functions, checks)."""
    return code_digest((type(spec).__module__,), objects=(type(spec),))


def cache_key(spec, Phi: np.ndarray, y: np.ndarray, config: ReferenceConfig) -> str:
    """Content hash of (model + hyper-parameters, the model's code, data, sampler settings
    and code, the certification rule, package versions)."""
    payload = {
        "spec": spec.to_dict(),
        "model_code": model_code_digest(spec),
        "Phi": _array_digest(Phi),
        "y": _array_digest(y),
        "sampler": config.sampler_settings(),
        "sampler_code": get_sampler(config.sampler).code_digest(),
        "certification_rule": asdict(CERTIFICATION),
        "versions": package_versions(),
        "cache_format": CACHE_FORMAT,
    }
    text = json.dumps(_jsonable(payload), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _atomic_write_text(path: str, text: str) -> None:
    write_text_atomic(path, text)


def _cache_paths(cache_dir, key: str, sampler: str = "nuts") -> tuple[str, str]:
    base = os.path.join(os.fspath(cache_dir), f"{sampler}-{key[:32]}")
    return base + ".nc", base + ".json"


def _stored_draws_and_stats(idata) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every posterior variable as (chains, draws, ...) and every sampler statistic as
    (chains, draws), as stored."""
    post = idata.posterior
    draws = {name: np.asarray(post[name].transpose("chain", "draw", ...).values, dtype=float)
             for name in post.data_vars}
    stats = {}
    if "sample_stats" in idata.groups():
        ss = idata.sample_stats
        stats = {name: np.asarray(ss[name].transpose("chain", "draw", ...).values) for name in ss.data_vars}
    return draws, stats


def _write_cache(cache_dir, key: str, reference: Reference) -> str:
    """netCDF first, provenance JSON last: the JSON is the commit mark of an entry, and it
    names the digest of the draws and statistics it belongs to, so a half-written or
    swapped netCDF file is detected on reading. No certificate is stored as a fact: the
    provenance keeps the one computed when the run ended, for the record, and every read
    recomputes it from the draws."""
    nc_path, json_path = _cache_paths(cache_dir, key, _sampler_name(reference.provenance["sampler"]))
    adapter.to_netcdf(reference.idata, nc_path)
    record = {
        "cache_format": CACHE_FORMAT,
        "cache_key": key,
        "content_sha256": _content_digest(*_stored_draws_and_stats(reference.idata)),
        "seconds": reference.seconds,
        "compile_seconds": reference.compile_seconds,
        "provenance": reference.provenance,
    }
    _atomic_write_text(json_path, json.dumps(_jsonable(record), indent=1, sort_keys=True))
    return nc_path


def _read_cache(cache_dir, key: str, spec, sites: tuple[Site, ...], config: ReferenceConfig) -> Reference | None:
    """The cached Reference, or None when there is no complete, intact entry.

    The certificate is recomputed from the stored draws and statistics with the current
    rule; the record contributes only what cannot be recomputed (timings, provenance).
    """
    nc_path, json_path = _cache_paths(cache_dir, key, config.sampler)
    if not (os.path.exists(nc_path) and os.path.exists(json_path)):
        return None
    try:
        with open(json_path) as fh:
            record = json.load(fh)
        if record.get("cache_format") != CACHE_FORMAT or record.get("cache_key") != key:
            raise ValueError("cache record belongs to another key or format")
        idata = adapter.from_netcdf(nc_path)
        stored, stats = _stored_draws_and_stats(idata)
        if _content_digest(stored, stats) != record["content_sha256"]:
            raise ValueError("draws do not match the digest recorded with them")
        draws = adapter.idata_to_draws(idata, sites)
        stored.update(draws)  # the measured sites in their own axis order
        diagnosed = _diagnosed_sites(sites, stored)
        certified, failures, diagnostics, _ = _certify_run(
            stored, stats, diagnosed, get_sampler(config.sampler).runner, config.sampler_settings())
        diagnostics = _jsonable(diagnostics)
        provenance = dict(record["provenance"], certified=certified, checks=_checks(diagnostics),
                          diagnostics={k: v for k, v in diagnostics.items() if k != "per_site"})
        info = _fit_info(certified, failures, record["seconds"], record["compile_seconds"],
                         provenance["sampler"], diagnostics)
        posterior = DrawsPosterior(spec, sites, draws, info)
    except Exception as err:  # any damage: recompute, never crash or trust it
        warnings.warn(f"ignoring unreadable reference cache entry {nc_path}: {type(err).__name__}: {err}")
        return None
    return Reference(
        posterior=posterior, idata=idata, certified=certified, failures=failures, diagnostics=diagnostics,
        seconds=float(record["seconds"]), provenance=provenance,
        compile_seconds=float(record["compile_seconds"]), from_cache=True, cache_path=nc_path,
    )


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------
_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class _CompileTimer:
    """Sum of JAX's own tracing/lowering/compilation durations while active."""

    def __init__(self):
        self.seconds = 0.0

    def _listener(self, event: str, duration: float, **_):
        if event in _COMPILE_EVENTS:
            self.seconds += float(duration)

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)
        return False


def effective_chain_method(config: ReferenceConfig) -> str:
    """The layout actually used. "parallel" needs one device per chain; without them the
    chains run "sequential" - the same draws bit for bit, only slower - with a warning."""
    if config.chain_method == "parallel" and jax.local_device_count() < config.num_chains:
        warnings.warn(
            f"chain_method='parallel' needs {config.num_chains} CPU devices but JAX has "
            f"{jax.local_device_count()}; running the chains one after another (same draws, "
            "slower). Import zoo (or call zoo.request_host_devices()) before any JAX computation "
            "to get them."
        )
        return "sequential"
    return config.chain_method


def _collect(mcmc) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    draws = {k: np.asarray(v, dtype=float) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    extra = {k: np.asarray(v) for k, v in mcmc.get_extra_fields(group_by_chain=True).items()}
    return draws, extra


def _sample_stats(extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    stats = {}
    for numpyro_name, arviz_name in _EXTRA_FIELDS.items():
        if numpyro_name in extra:
            value = extra[numpyro_name]
            stats[arviz_name] = -value if numpyro_name == "potential_energy" else value
    stats["diverging"] = stats["diverging"].astype(bool)
    return stats


def _fit_info(certified, failures, seconds, compile_seconds, sampler, diagnostics) -> FitInfo:
    return FitInfo(
        engine=_sampler_name(sampler),
        converged=bool(certified),
        n_iter=int(sampler["num_warmup"]) + int(sampler["num_samples_total"]),
        reason="; ".join(failures),
        seconds=max(float(seconds) - float(compile_seconds), 0.0),
        compile_seconds=float(compile_seconds),
        objective="",
        extra={"certified": bool(certified), "divergences": diagnostics.get("divergences")},
    )


def _sampler_name(sampler_settings: dict) -> str:
    """The sampler name in a provenance's sampler settings ("zoo.NAME/VERSION" for a
    model's own sampler, "numpyro.NUTS" for NUTS)."""
    text = str(sampler_settings.get("sampler", ""))
    return text[len("zoo."):].split("/", 1)[0] if text.startswith("zoo.") else "nuts"


class NutsRun:
    """NUTS on ``spec.model``: a first run, then continuations of the same chains."""

    name = "numpyro.NUTS"

    def __init__(self, spec, Phi, y, config: ReferenceConfig, progress: bool):
        self.Phi, self.y = Phi, y
        # keep the measured sites and every site NUTS moves (not the deterministic ones):
        # all of them are diagnosed
        measured = [s.name for s in spec.sites(Phi.shape[1])]
        self.keep = tuple(dict.fromkeys(measured + sampled_site_names(spec, Phi, y)))
        self.method = effective_chain_method(config)
        kernel = NUTS(spec.model, target_accept_prob=config.target_accept, max_tree_depth=config.max_tree_depth)
        self.mcmc = MCMC(
            kernel, num_warmup=config.num_warmup, num_samples=config.num_samples,
            num_chains=config.num_chains, chain_method=self.method, progress_bar=progress,
        )
        self.seed = config.seed
        self.chunk = int(config.num_samples)

    def first(self):
        self.mcmc.run(jax.random.PRNGKey(self.seed), self.Phi, y=self.y, extra_fields=tuple(_EXTRA_FIELDS))
        return self._kept(*_collect(self.mcmc))

    def _kept(self, draws, extra):
        return {k: draws[k] for k in self.keep}, extra

    def more(self, n_more: int):
        """The next n_more draws of every chain: continued from its last state with the
        adapted step size and mass matrix, so the new draws extend the same Markov chains.
        They are drawn in pieces of the first run's length: NumPyro compiles its loop for
        every run, and pieces of one length are one program, which JAX's persistent
        compilation cache (on in the command line) then compiles once. Each piece starts
        from the last one's state and key, so the draws are those of one long run."""
        parts = []
        left = int(n_more)
        while left > 0:
            n = min(self.chunk, left)
            self.mcmc.post_warmup_state = self.mcmc.last_state
            self.mcmc.num_samples = n
            self.mcmc.run(self.mcmc.post_warmup_state.rng_key, self.Phi, y=self.y,
                          extra_fields=tuple(_EXTRA_FIELDS))
            parts.append(self._kept(*_collect(self.mcmc)))
            left -= n
        if len(parts) == 1:
            return parts[0]
        return tuple({k: np.concatenate([p[i][k] for p in parts], axis=1) for k in parts[0][i]} for i in (0, 1))

    @staticmethod
    def sample_stats(extra):
        return _sample_stats(extra)

    @staticmethod
    def sampler_checks(stats, settings, rule) -> tuple[list[str], dict]:
        """E-BFMI and tree-depth saturation (divergences are counted by the rule itself)."""
        return nuts_energy_checks(stats, settings["max_tree_depth"], rule)

    def layout(self) -> dict:
        return {"chain_method": self.method}


def sampled_site_names(spec, Phi, y) -> list[str]:
    """The latent sites the model samples (not observed, not deterministic), in order."""
    from numpyro import handlers

    trace = handlers.trace(handlers.seed(spec.model, jax.random.PRNGKey(0))).get_trace(Phi, y=y)
    return [name for name, site in trace.items() if site["type"] == "sample" and not site["is_observed"]]


#: NUTS on the model itself: the reference sampler of every model
NUTS_SAMPLER = ReferenceSampler("nuts", NutsRun, clear_compiled_after_run=True)
register_sampler(NUTS_SAMPLER)


class ReferenceTimeout(RuntimeError):
    """A reference sampler did not finish within its ``time_limit``: no draws at all, so
    nothing to certify or to measure against. ``sampler`` and ``time_limit`` say which."""

    def __init__(self, sampler: str, time_limit: float):
        self.sampler, self.time_limit = sampler, float(time_limit)
        super().__init__(f"{sampler} ran out of time: no result within the time limit of {time_limit:g} s "
                         "(the run was stopped; not certified)")


class NoReference(RuntimeError):
    """Every reference sampler of a chain ran out of time: there is no posterior to
    measure the engines against. ``timed_out`` holds (sampler, time limit in seconds) of
    each, in the order tried, so a report can name them without parsing the message."""

    def __init__(self, message: str, timed_out: list[tuple[str, float]]):
        self.timed_out = [(sampler, float(limit)) for sampler, limit in timed_out]
        super().__init__(message)


def _reference_child(spec, Phi, y, config, cache_dir, parent_pid=None) -> None:
    """Body of the child process of a time-limited run: sample and write the cache. The
    child dies with its parent (a killed ``zoo compare`` leaves no sampler running on)."""
    import zoo  # noqa: F401  (float64 and the host devices, as in the parent)

    from .study import die_with_parent

    die_with_parent(parent_pid)

    run_reference(spec, Phi, y, config=config, cache_dir=cache_dir)


def _run_with_time_limit(spec, Phi, y, config: ReferenceConfig, cache_dir, key: str, sites) -> Reference:
    """Run the sampler in a spawned child process and wait at most ``config.time_limit``
    seconds. The child writes its Reference to the disk cache (atomically), which is how
    it comes back; a child still running at the limit is killed. Spawned, not forked: a
    forked child of a process that has started JAX can deadlock. Without a cache folder a
    temporary one carries the result and is deleted afterwards, however the run ends (the
    draws are read fully into memory, :func:`adapter.from_netcdf`)."""
    import multiprocessing
    import shutil
    import tempfile

    folder = cache_dir if cache_dir is not None else tempfile.mkdtemp(prefix="zoo-reference-")
    try:
        child_config = replace(config, time_limit=None)
        proc = multiprocessing.get_context("spawn").Process(
            target=_reference_child, args=(spec, Phi, y, child_config, folder, os.getpid()), daemon=True)
        proc.start()
        proc.join(config.time_limit)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise ReferenceTimeout(config.sampler, config.time_limit)
        if proc.exitcode != 0:
            raise RuntimeError(f"the {config.sampler} reference process failed (exit code {proc.exitcode})")
        ref = _read_cache(folder, key, spec, sites, config)
        if ref is None:
            raise RuntimeError(f"the {config.sampler} reference process finished but left no readable result")
        return replace(ref, from_cache=False, cache_path=ref.cache_path if cache_dir is not None else None)
    finally:
        if cache_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def run_reference(spec, Phi, y, *, config: ReferenceConfig = ReferenceConfig(), cache_dir=None,
                  progress: bool = False) -> Reference:
    """The reference sampler of ``config.sampler`` on ``spec``'s posterior given (Phi, y),
    certified (or not) by :data:`CERTIFICATION`.

    Phi: (n, M) design matrix; y: (n,) labels (0/1 or +-1; the model sees 0/1).
    cache_dir: folder of the disk cache (None: no cache). A hit returns the stored
    Reference with ``from_cache=True`` and the original run's timings.
    Raises :class:`ReferenceTimeout` when ``config.time_limit`` runs out first.
    """
    Phi, y = check_design(Phi, y)
    sites = tuple(spec.sites(Phi.shape[1]))
    key = cache_key(spec, Phi, y, config)
    if cache_dir is not None:
        cached = _read_cache(cache_dir, key, spec, sites, config)
        if cached is not None:
            return cached
    try:
        if config.time_limit is not None:
            return _run_with_time_limit(spec, Phi, y, config, cache_dir, key, sites)
        return _run_and_certify(spec, Phi, y, config, cache_dir, key, sites, progress)
    finally:
        # NumPyro's MCMC.run compiles its sampling loop anew on every call (it jits a fresh
        # wrapper that it passes as a static argument), and JAX keeps every compiled
        # program (and its memory mappings, ~4,400 per NUTS run here) for the life of the
        # process: a battery or an SBC of NUTS died with "LLVM compilation error: Cannot
        # allocate memory" after ~15 runs per process, at the kernel's 65,530 mappings.
        # None of them is reusable, so they are dropped after a NUTS run. The Gibbs
        # samplers' sweeps are module-level programs that take the data as arguments: they
        # are compiled once per shape and reused by every later data set of that shape
        # (clearing them after each run made a PG-Gibbs run of GIG's SBC problem take
        # ~40 s instead of ~8 s), so a Gibbs run keeps them.
        if get_sampler(config.sampler).clear_compiled_after_run:
            jax.clear_caches()


def _run_and_certify(spec, Phi, y, config, cache_dir, key, sites, progress) -> Reference:
    runner = get_sampler(config.sampler).runner(spec, Phi, y, config, progress)
    settings = config.sampler_settings()
    attempts = []
    with _CompileTimer() as compile_timer:
        # seconds counts the sampler only (not the diagnostics between attempts)
        start = time.perf_counter()
        draws, extra = runner.first()
        seconds = time.perf_counter() - start
        diagnosed = _diagnosed_sites(sites, draws)
        certified, failures, diagnostics, kinds = _certify_run(
            draws, runner.sample_stats(extra), diagnosed, runner, settings)
        attempts.append(_attempt(draws, certified, failures, diagnostics, seconds))
        doublings = 0
        # More draws may fix too-small ESS or a slowly mixing chain; they cannot fix
        # divergences (a geometry problem) or a sampler fault, so those stop the loop.
        while (not certified and kinds <= {"rhat", "ess_bulk", "ess_tail", "sampler_count"}
               and doublings < config.max_doublings):
            n_more = next(iter(draws.values())).shape[1]
            start = time.perf_counter()
            more_draws, more_extra = runner.more(n_more)
            seconds += time.perf_counter() - start
            draws = {k: np.concatenate([draws[k], more_draws[k]], axis=1) for k in draws}
            extra = {k: np.concatenate([extra[k], more_extra[k]], axis=1) for k in extra}
            doublings += 1
            certified, failures, diagnostics, kinds = _certify_run(
                draws, runner.sample_stats(extra), diagnosed, runner, settings)
            attempts.append(_attempt(draws, certified, failures, diagnostics, seconds))
    compile_seconds = min(compile_timer.seconds, seconds)

    sampler = dict(settings, **runner.layout(), num_samples_total=int(
        next(iter(draws.values())).shape[1]), doublings=doublings)
    provenance = {
        "sampler": sampler,
        "seed": config.seed,
        "certification_rule": asdict(CERTIFICATION),
        "checks": _checks(diagnostics),
        "certified": certified,
        "attempts": attempts,
        "diagnostics": {k: v for k, v in diagnostics.items() if k != "per_site"},
        "package_versions": package_versions(),
        "python": platform.python_version(),
        "devices": jax.local_device_count(),
        "spec": spec.to_dict(),
        "data": {"Phi_sha256": _array_digest(Phi), "y_sha256": _array_digest(y),
                 "n": int(Phi.shape[0]), "n_basis": int(Phi.shape[1])},
        "cache_key": key,
        "seconds": seconds,
        "compile_seconds": compile_seconds,
        "timing_note": "seconds is wall time of warmup + sampling including JIT compilation; "
                       "compile_seconds is JAX's own tracing/lowering/compile time within it",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    provenance = _jsonable(provenance)
    # every diagnosed site is stored (the certificate is recomputed from them on reading);
    # the certificate itself is not an attribute of the stored draws
    idata = adapter.draws_to_idata(
        draws, diagnosed, constant_data={"Phi": Phi, "y": y}, sample_stats=runner.sample_stats(extra),
        attrs={"sampler": runner.name, "cache_key": key},
    )
    info = _fit_info(certified, failures, seconds, compile_seconds, sampler, diagnostics)
    measured = {s.name: draws[s.name] for s in sites}
    reference = Reference(
        posterior=DrawsPosterior(spec, sites, measured, info), idata=idata, certified=certified,
        failures=failures, diagnostics=_jsonable(diagnostics), seconds=seconds, provenance=provenance,
        compile_seconds=compile_seconds, from_cache=False,
    )
    if cache_dir is not None:
        path = _write_cache(cache_dir, key, reference)
        reference = replace(reference, cache_path=path)
    return reference


def pilot_config(config: ReferenceConfig, rule: PilotRule | None = None) -> ReferenceConfig:
    """The pilot run of a NUTS ``config`` (rule: :data:`PILOT` unless given): its chains,
    seed and kernel settings, the pilot's warm-up and draws, no doublings (a cache entry of
    its own)."""
    rule = PILOT if rule is None else rule
    return replace(config, num_warmup=rule.num_warmup, num_samples=rule.num_samples, max_doublings=0, pilot=False)


def pilot_decision(diagnostics: dict, config: ReferenceConfig, rule: PilotRule | None = None,
                   certification: Certification = CERTIFICATION) -> dict[str, Any]:
    """Whether the full NUTS run of ``config`` may certify, judged from a pilot's
    ``diagnostics`` (a Reference's: rhat_max, ess_bulk_min, ess_tail_min, divergences,
    n_chains, n_draws, and for NUTS ebfmi_min and treedepth_fraction) by :class:`PilotRule`.

    Returns {"go": bool, "reasons": [one sentence per failed check], the numbers judged,
    "projected_ess_bulk"/"projected_ess_tail" (ESS per draw times the full run's cap of
    draws) and "cap_draws"}. A NaN (constant or non-finite draws) fails its check.
    """
    rule = PILOT if rule is None else rule
    d = diagnostics
    reasons: list[str] = []
    if d["divergences"] > certification.max_divergences:
        reasons.append(f"{int(d['divergences'])} divergent transitions (allowed: {certification.max_divergences})")
    ebfmi, depth = d.get("ebfmi_min"), d.get("treedepth_fraction")
    if ebfmi is not None and not ebfmi >= certification.ebfmi_min:
        reasons.append(f"E-BFMI {ebfmi:.3f} < {certification.ebfmi_min}")
    if depth is not None and not depth <= certification.max_treedepth_fraction:
        reasons.append(f"{100 * depth:.1f}% of transitions at the maximum tree depth "
                       f"(allowed: {100 * certification.max_treedepth_fraction:g}%)")
    if not d["rhat_max"] <= rule.rhat_max:
        reasons.append(f"R-hat {d['rhat_max']:.3f} > {rule.rhat_max}: the chains disagree after the warm-up")
    draws = int(d["n_chains"]) * int(d["n_draws"])
    cap = int(config.num_chains) * int(config.num_samples) * 2 ** int(config.max_doublings)

    def projected(ess):
        return float(ess) / draws * cap if np.isfinite(ess) else 0.0

    bulk, tail = projected(d["ess_bulk_min"]), projected(d["ess_tail_min"])
    for label, value, needed in (("bulk", bulk, certification.ess_bulk_min),
                                 ("tail", tail, certification.ess_tail_min)):
        if not value * rule.ess_margin >= needed:
            reasons.append(f"{label} ESS projected to {value:.0f} at the cap of {cap} draws "
                           f"(needed: {needed:.0f}, margin {rule.ess_margin:g})")
    return {
        "go": not reasons, "reasons": reasons,
        "pilot": {"num_warmup": rule.num_warmup, "num_samples": rule.num_samples},
        "rule": asdict(rule),
        **{k: d.get(k) for k in ("rhat_max", "ess_bulk_min", "ess_tail_min", "divergences", "ebfmi_min",
                                 "treedepth_fraction")},
        "projected_ess_bulk": bulk, "projected_ess_tail": tail, "cap_draws": cap,
    }


def _stopped_by_pilot(pilot: "Reference", decision: dict) -> "Reference":
    """The pilot's run as the tried entry of a sampler it stopped: uncertified, the
    pilot's prediction first among its failures."""
    rule = decision["pilot"]
    head = (f"the pilot ({rule['num_warmup']} warm-up + {rule['num_samples']} draws a chain) predicts the full run "
            "cannot certify: " + "; ".join(decision["reasons"]))
    return replace(pilot, certified=False, failures=[head] + [f for f in pilot.failures if f != head],
                   provenance=dict(pilot.provenance, certified=False, pilot=_jsonable(decision)))


def first_certified_reference(spec, Phi, y, *, configs, cache_dir=None, progress: bool = False):
    """Try the reference samplers of ``configs`` in order and stop at the first certified.

    Returns (reference, tried): ``tried`` holds, in order, every Reference run and the
    :class:`ReferenceTimeout` of every sampler that ran out of time (so a report can name
    it). When none certifies, ``reference`` is the run closest to certification (smallest
    worst R-hat) and is *not* certified: callers must say so, never present it as truth.
    Raises :class:`NoReference` when every sampler ran out of time.

    A NUTS config with ``pilot=True`` that is not the last of the list runs its pilot
    first (:func:`pilot_config`, cached like any run): a pilot that already meets the
    certification rule is the reference; one that :func:`pilot_decision` says cannot lead
    to a certified run stands in ``tried`` as uncertified (its ``provenance["pilot"]``
    holds the decision) and the next sampler is tried; otherwise the full run follows,
    the decision in its ``provenance["pilot"]``.
    """
    configs = (configs,) if isinstance(configs, ReferenceConfig) else tuple(configs)
    if not configs:
        raise ValueError("no reference sampler configured")
    tried = []
    for position, config in enumerate(configs):
        decision = None
        try:
            if config.pilot and position < len(configs) - 1:
                pilot = run_reference(spec, Phi, y, config=pilot_config(config), cache_dir=cache_dir,
                                      progress=progress)
                decision = dict(pilot_decision(pilot.diagnostics, config), seconds=float(pilot.seconds),
                                from_cache=bool(pilot.from_cache))
                if pilot.certified:
                    ref = replace(pilot, provenance=dict(pilot.provenance, pilot=_jsonable(
                        dict(decision, go=True, reasons=[], certified=True))))
                    tried.append(ref)
                    return ref, tried
                if not decision["go"]:
                    tried.append(_stopped_by_pilot(pilot, decision))
                    warnings.warn(f"reference: {tried[-1].failures[0]}; trying the next sampler")
                    continue
            ref = run_reference(spec, Phi, y, config=config, cache_dir=cache_dir, progress=progress)
        except ReferenceTimeout as err:
            tried.append(err)
            warnings.warn(f"reference: {err}; trying the next sampler" if config is not configs[-1] else
                          f"reference: {err}")
            continue
        if decision is not None:
            ref = replace(ref, provenance=dict(ref.provenance, pilot=_jsonable(decision)))
        tried.append(ref)
        if ref.certified:
            return ref, tried
    runs = [r for r in tried if isinstance(r, Reference)]
    if not runs:
        raise NoReference("no reference: " + "; ".join(map(str, tried)),
                          [(err.sampler, err.time_limit) for err in tried])

    def closeness(ref):
        rhat = ref.diagnostics.get("rhat_max")
        return rhat if rhat is not None and np.isfinite(rhat) else np.inf

    return min(runs, key=closeness), tried


def cached_reference(spec, Phi, y, *, config: ReferenceConfig = ReferenceConfig(), cache_dir) -> Reference | None:
    """The cached Reference for these inputs, or None (no entry, or a damaged one).

    Never samples: a report can show a reference without paying for NUTS.
    """
    Phi, y = check_design(Phi, y)
    sites = tuple(spec.sites(Phi.shape[1]))
    return _read_cache(cache_dir, cache_key(spec, Phi, y, config), spec, sites, config)


def _attempt(draws, certified, failures, diagnostics, seconds) -> dict:
    return {"num_samples": int(next(iter(draws.values())).shape[1]), "certified": bool(certified),
            "n_failures": len(failures), "rhat_max": diagnostics["rhat_max"],
            "ess_bulk_min": diagnostics["ess_bulk_min"], "ess_tail_min": diagnostics["ess_tail_min"],
            "divergences": diagnostics["divergences"], "seconds": float(seconds)}


def _checks(diagnostics: dict) -> list[dict]:
    rule = CERTIFICATION
    return [
        {"check": f"R-hat <= {rule.rhat_max} for every coordinate", "value": diagnostics["rhat_max"],
         "passed": bool(diagnostics["rhat_max"] <= rule.rhat_max)},
        {"check": f"bulk ESS >= {rule.ess_bulk_min:.0f} for every coordinate", "value": diagnostics["ess_bulk_min"],
         "passed": bool(diagnostics["ess_bulk_min"] >= rule.ess_bulk_min)},
        {"check": f"tail ESS >= {rule.ess_tail_min:.0f} for every coordinate", "value": diagnostics["ess_tail_min"],
         "passed": bool(diagnostics["ess_tail_min"] >= rule.ess_tail_min)},
        {"check": f"divergences <= {rule.max_divergences}", "value": diagnostics["divergences"],
         "passed": bool(diagnostics["divergences"] <= rule.max_divergences)},
    ] + ([
        {"check": f"E-BFMI >= {rule.ebfmi_min} in every chain", "value": diagnostics["ebfmi_min"],
         "passed": bool(diagnostics["ebfmi_min"] >= rule.ebfmi_min)},
        {"check": f"at most {100 * rule.max_treedepth_fraction:g}% of transitions at the maximum tree depth",
         "value": diagnostics["treedepth_fraction"],
         "passed": bool(diagnostics["treedepth_fraction"] <= rule.max_treedepth_fraction)},
    ] if "ebfmi_min" in diagnostics else [])
