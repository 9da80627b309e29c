"""Running a reference: sample, certify, continue while more draws can help, cache; the
time-limited child process; the first certified of several samplers."""
from __future__ import annotations

import contextlib
import datetime as _dt
import multiprocessing
import os
import platform
import secrets
import shutil
import tempfile
import time
import warnings
from dataclasses import asdict, replace

import jax
import numpy as np

from zoo import writable_folder as _writable  # the package root's folder check

from ...inference.posterior import DrawsPosterior
from ...models.base import checked_problem, is_classifier, problem_sites
from ..base import arviz_adapter as adapter
from ..base.atomic import _jsonable
from ..base.compile_timer import CompileTimer
from ..base.processes import die_with_parent
from .cache import (
    _array_digest,
    _read_cache,
    _write_cache,
    cache_key,
    machine_key,
    package_versions,
)

try:  # an exclusive lock per cache entry, so two runs of one key sample once (Linux, macOS)
    import fcntl
except ImportError:  # no fcntl (Windows): runs of one key may both sample; entries stay atomic
    fcntl = None
from .certification import (
    CERTIFICATION,
    _certify_run,
    _checks,
    _diagnosed_sites,
    pilot_config,
    pilot_decision,
)
from .config import Reference, ReferenceConfig, _fit_info
from .nuts import sampler_of


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


def _reference_child(spec, Phi, y, config, cache_dir, parent_pid=None, key=None, mac_key=None,
                     deadline=None) -> None:
    """Body of the child process of a time-limited run: sample and write the cache entry
    signed with ``mac_key`` (the parent's). The parent holds the entry's lock for the whole
    run, so the child takes none. The child dies with its parent (a killed ``zoo compare``
    leaves no sampler running on)."""
    import zoo  # noqa: F401  (float64 and the host devices, as in the parent)

    die_with_parent(parent_pid)

    Phi, y = checked_problem(spec, Phi, y)
    sites = problem_sites(spec, Phi)
    _run_and_certify(spec, Phi, y, config, cache_dir, key, sites, False, mac_key=mac_key, deadline=deadline)


def _run_with_time_limit(spec, Phi, y, config: ReferenceConfig, cache_dir, key: str, sites) -> Reference:
    """Run the sampler in a spawned child process and wait at most ``config.time_limit``
    seconds. The child writes its Reference to the disk cache (atomically, signed with the
    key the parent gives it), which is how it comes back; a child still running at the
    limit is killed. Spawned, not forked: a forked child of a process that has started JAX
    can deadlock. Without a cache folder (or without a usable cache key of this user) a
    temporary folder and a one-off key carry the result, and the folder is deleted
    afterwards, however the run ends (the draws are read fully into memory,
    :func:`adapter.from_netcdf`)."""

    mac_key = machine_key(create=True) if cache_dir is not None else None
    persistent = mac_key is not None
    if not persistent:
        mac_key = secrets.token_bytes(32)
    folder = cache_dir if persistent else tempfile.mkdtemp(prefix="zoo-reference-")
    try:
        child_config = replace(config, time_limit=None)
        # the child may continue an uncertified run past max_doublings while its next
        # doubling still fits before this deadline (wall clock: the two processes share it)
        deadline = time.time() + config.time_limit
        proc = multiprocessing.get_context("spawn").Process(
            target=_reference_child, args=(spec, Phi, y, child_config, folder, os.getpid(), key, mac_key, deadline),
            daemon=True)
        proc.start()
        proc.join(config.time_limit)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise ReferenceTimeout(config.sampler, config.time_limit)
        if proc.exitcode != 0:
            raise RuntimeError(f"the {config.sampler} reference process failed (exit code {proc.exitcode})")
        ref = _read_cache(folder, key, spec, sites, config, mac_key=mac_key)
        if ref is None:
            raise RuntimeError(f"the {config.sampler} reference process finished but left no readable result")
        return replace(ref, from_cache=False, cache_path=ref.cache_path if persistent else None)
    finally:
        if not persistent:
            shutil.rmtree(folder, ignore_errors=True)


#: how often a run waiting for another run's lock tries again (seconds)
LOCK_POLL_SECONDS = 0.5


@contextlib.contextmanager
def _entry_lock(cache_dir, key: str, sampler: str, time_limit: float | None = None):
    """Hold an exclusive lock on ``<cache_dir>/<sampler>-<key[:32]>.lock`` (fcntl.flock)
    while the block runs: a second run of the same entry waits, then finds the entry the
    first one wrote. Yields (whether the folder can be written, the seconds spent waiting):
    a folder that cannot be written (or whose lock file cannot be made) is read without a
    lock and nothing is written to it; where there is no fcntl, nothing is locked.

    A run that has to wait says so at once, in a warning naming the lock and who holds it
    (the holder writes its pid, host and start time into the lock file), and the wait counts
    against ``time_limit``: past it, :class:`ReferenceTimeout`, as if the sampler itself had
    run out of time."""
    writable = _writable(cache_dir)
    if fcntl is None or not writable:
        yield writable, 0.0
        return
    path = os.path.join(os.fspath(cache_dir), f"{sampler}-{key[:32]}.lock")
    can_write = True
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:  # another user's lock file in a shared folder: a read-only descriptor locks too
            fd = os.open(path, os.O_RDONLY)
            can_write = False
        except OSError:
            yield False, 0.0
            return
    t0, waited = time.time(), 0.0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd) or "a run that did not say who it is"
            limit = "" if time_limit is None else f" (counted against the time limit of {time_limit:g} s)"
            warnings.warn(f"waiting for another zoo run to finish the {sampler} reference it is sampling: {path} "
                          f"is held by {holder}{limit}", stacklevel=3)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time_limit is not None and time.time() - t0 >= time_limit:
                        raise ReferenceTimeout(sampler, time_limit) from None
                    time.sleep(LOCK_POLL_SECONDS)
            waited = time.time() - t0
        if can_write:
            # who holds it, for a run that has to wait (the lock itself is the flock)
            stamp = f"pid {os.getpid()} on {platform.node()} since {_dt.datetime.now().isoformat(timespec='seconds')}"
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, stamp.encode(), 0)
            except OSError:
                pass
        yield True, waited
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _lock_holder(fd: int) -> str:
    """What the run holding a lock wrote into it (pid, host, since when), or ''."""
    try:
        return os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


def run_reference(spec, Phi, y, *, config: ReferenceConfig = ReferenceConfig(), cache_dir=None,
                  progress: bool = False) -> Reference:
    """The reference sampler of ``config`` (NUTS, or the model's own sampler it was given:
    :func:`~zoo.validation.references.nuts.sampler_of`) on ``spec``'s posterior given
    (Phi, y), certified (or not) by :data:`~zoo.validation.references.certification.CERTIFICATION`.

    Phi: (n, M) design matrix; y: (n,) labels (0/1 or +-1; the model sees 0/1) - or, for a
    general model (``models/general.py``), its data arrays and its observations by site.
    cache_dir: folder of the disk cache (None: no cache). A hit returns the stored
    Reference with ``from_cache=True`` and the original run's timings. A general model
    whose function's source Python cannot show (typed at a prompt) is not cached: nothing
    would tell its next version from this one.
    Raises :class:`ReferenceTimeout` when ``config.time_limit`` runs out first.
    """
    Phi, y = checked_problem(spec, Phi, y)
    sites = problem_sites(spec, Phi)
    if cache_dir is not None and not is_classifier(spec) and spec.code is None:
        warnings.warn(f"model {spec.name}: its function's source cannot be read, so its reference is sampled "
                      "but not cached")
        cache_dir = None
    key = cache_key(spec, Phi, y, config)
    try:
        if cache_dir is None:
            return _sample(spec, Phi, y, config, None, key, sites, progress)
        # read -> run -> write under the entry's lock, so two runs of one key sample once
        with _entry_lock(cache_dir, key, config.sampler, config.time_limit) as (writable, waited):
            cached = _read_cache(cache_dir, key, spec, sites, config)
            if cached is not None:
                return cached
            if config.time_limit is not None and waited > 0:
                # the wait for another run's lock was part of this sampler's time
                if waited >= config.time_limit:
                    raise ReferenceTimeout(config.sampler, config.time_limit)
                config = replace(config, time_limit=config.time_limit - waited)
            if not writable:
                warnings.warn(f"cannot write to the reference cache folder {cache_dir}: the {config.sampler} "
                              "reference is sampled but not cached")
            return _sample(spec, Phi, y, config, cache_dir if writable else None, key, sites, progress)
    finally:
        # A sampler whose programs cannot be reused by the next data set may ask for JAX's
        # compiled programs to be dropped after its run: JAX keeps every one (and its memory
        # mappings) for the life of the process, and NumPyro's MCMC.run, which compiled its
        # loop anew on every call, once killed a battery with "LLVM compilation error:
        # Cannot allocate memory" after ~15 runs. None of the zoo's samplers asks any more:
        # NUTS (nuts_program.py) and the Gibbs sweeps are programs that take the data as
        # arguments, compiled once per shape and reused by every later data set of that
        # shape (clearing them made a PG-Gibbs run of GIG's SBC problem take ~40 s, not ~8).
        if sampler_of(config).clear_compiled_after_run:
            jax.clear_caches()


def _sample(spec, Phi, y, config, cache_dir, key, sites, progress) -> Reference:
    if config.time_limit is not None:
        return _run_with_time_limit(spec, Phi, y, config, cache_dir, key, sites)
    return _run_and_certify(spec, Phi, y, config, cache_dir, key, sites, progress)


#: a doubling past ``max_doublings`` starts only when its predicted cost times this factor,
#: plus :data:`DOUBLING_SLACK_SECONDS` for certifying and writing the entry, fits in the
#: time left: sampling speed varies (NUTS trees deepen, a busy machine), and a child killed
#: at the limit loses every draw it made
DOUBLING_SAFETY = 1.5
#: seconds added to a doubling's predicted cost times :data:`DOUBLING_SAFETY`, for certifying
#: the draws and writing the cache entry
DOUBLING_SLACK_SECONDS = 5.0


def _may_double(doublings: int, max_doublings: int, deadline, predicted_seconds: float) -> tuple[bool, str]:
    """Whether an uncertified run takes another doubling, and the reason it stops when not.

    Up to ``max_doublings`` always; past it only in a time-limited run (``deadline``: wall
    clock seconds since the epoch) whose next doubling, predicted to cost
    ``predicted_seconds``, fits before the deadline with the margins above. A sampler with
    a time budget (``zoo compare --time-limit``) thus uses it before giving up, instead of
    stopping at the cap with most of the budget left."""
    if doublings < max_doublings:
        return True, ""
    if deadline is None:
        return False, f"max_doublings = {max_doublings} reached"
    left = deadline - time.time()
    needed = DOUBLING_SAFETY * predicted_seconds + DOUBLING_SLACK_SECONDS
    if needed <= left:
        return True, ""
    return False, (f"time limit: the next doubling would need about {needed:.0f} s (with margin), "
                   f"{max(left, 0.0):.0f} s left")


def _data_record(spec, Phi, y) -> dict:
    """What a reference's provenance says of its data: digests and sizes."""
    if is_classifier(spec):
        return {"Phi_sha256": _array_digest(Phi), "y_sha256": _array_digest(y),
                "n": int(Phi.shape[0]), "n_basis": int(Phi.shape[1])}
    return {"data_sha256": _array_digest(Phi), "observations_sha256": _array_digest(y),
            "shapes": {k: list(np.shape(v)) for k, v in {**Phi, **y}.items()}}


def _stored_data(spec, Phi, y) -> dict:
    """The data stored beside a reference's draws: a classifier's design and labels as
    constant data; a general model's data arrays as constant data and its observations as
    observed data (the groups InferenceData has for them)."""
    if is_classifier(spec):
        return {"constant_data": {"Phi": Phi, "y": y}}
    return {"constant_data": dict(Phi), "observed": dict(y)}


def _run_and_certify(spec, Phi, y, config, cache_dir, key, sites, progress, mac_key=None,
                     deadline=None) -> Reference:
    runner = sampler_of(config).runner(spec, Phi, y, config, progress)
    settings = config.sampler_settings()
    attempts = []
    with CompileTimer() as compile_timer:
        # seconds counts the sampler only (not the diagnostics between attempts)
        start = time.perf_counter()
        draws, extra = runner.first()
        seconds = time.perf_counter() - start
        diagnosed = _diagnosed_sites(sites, draws)
        certified, failures, diagnostics, kinds = _certify_run(
            draws, runner.sample_stats(extra), diagnosed, runner, settings)
        attempts.append(_attempt(draws, certified, failures, diagnostics, seconds))
        doublings = 0
        # the cost of the next doubling, predicted from the last stretch of draws (the first
        # one's includes warm-up and compilation, so the first prediction is generous)
        n_drawn = next(iter(draws.values())).shape[1]
        seconds_per_draw = seconds / n_drawn
        stop_reason = ""
        # More draws may fix too-small ESS or a slowly mixing chain; they cannot fix
        # divergences (a geometry problem) or a sampler fault, so those stop the loop.
        while not certified and kinds <= {"rhat", "ess_bulk", "ess_tail", "sampler_count"}:
            n_more = next(iter(draws.values())).shape[1]
            go, stop_reason = _may_double(doublings, config.max_doublings, deadline, seconds_per_draw * n_more)
            if not go:
                break
            start = time.perf_counter()
            more_draws, more_extra = runner.more(n_more)
            stretch = time.perf_counter() - start
            seconds += stretch
            seconds_per_draw = stretch / n_more
            draws = {k: np.concatenate([draws[k], more_draws[k]], axis=1) for k in draws}
            extra = {k: np.concatenate([extra[k], more_extra[k]], axis=1) for k in extra}
            doublings += 1
            certified, failures, diagnostics, kinds = _certify_run(
                draws, runner.sample_stats(extra), diagnosed, runner, settings)
            attempts.append(_attempt(draws, certified, failures, diagnostics, seconds))
    compile_seconds = min(compile_timer.seconds, seconds)

    sampler = dict(settings, **runner.layout(), num_samples_total=int(
        next(iter(draws.values())).shape[1]), doublings=doublings)
    if stop_reason:  # an uncertified run that could have gone on: why it stopped
        sampler["doublings_stopped"] = stop_reason
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
        "data": _data_record(spec, Phi, y),
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
        draws, diagnosed, **_stored_data(spec, Phi, y), sample_stats=runner.sample_stats(extra),
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
        try:
            path = _write_cache(cache_dir, key, reference, mac_key)
        except OSError as err:
            warnings.warn(f"cannot write the reference cache entry in {cache_dir} "
                          f"({err.strerror or err}): the {config.sampler} reference is not cached")
            path = None
        reference = replace(reference, cache_path=path)
    return reference


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
    first (:func:`~zoo.validation.references.certification.pilot_config`, cached like any run):
    a pilot that already meets the certification rule is the reference; one that
    :func:`~zoo.validation.references.certification.pilot_decision` says cannot lead
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
    Phi, y = checked_problem(spec, Phi, y)
    sites = problem_sites(spec, Phi)
    return _read_cache(cache_dir, cache_key(spec, Phi, y, config), spec, sites, config)


def _attempt(draws, certified, failures, diagnostics, seconds) -> dict:
    return {"num_samples": int(next(iter(draws.values())).shape[1]), "certified": bool(certified),
            "n_failures": len(failures), "rhat_max": diagnostics["rhat_max"],
            "ess_bulk_min": diagnostics["ess_bulk_min"], "ess_tail_min": diagnostics["ess_tail_min"],
            "divergences": diagnostics["divergences"], "seconds": float(seconds)}
