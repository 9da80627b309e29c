"""The fence around an engine: a time limit on its fit, and the checks that make whatever
it returns measurable or a one-line failure of its own row.

Every place that runs engines (``compare``, SBC, studies, the defect battery) fits an
engine inside :func:`time_limit` and measures its result only after
:func:`posterior_problem` has passed it. What the fence does not do, and why:

* :func:`time_limit` is kept in the process that runs the engine: a timer interrupts the
  fit the next time the interpreter runs Python code (a signal in the main thread, an
  exception set asynchronously in any other thread, as in a Dask worker). A fit stuck
  inside one long call that never returns to Python (one compiled XLA program that loops
  forever, a C extension's loop) is stopped only when that call returns.
* :func:`isolated_timed_fit` runs a user's engine named by its path in a child process,
  killed at the limit wherever it is stuck (``compare`` does so for every such engine):
  it costs a JAX start-up and a compilation per engine, too much for SBC's hundreds of
  short fits, and it needs an engine importable by name (not a notebook's function). The
  reference samplers, whose runs are long anyway, run that way too (``references/certified_run.py``).
* ``KeyboardInterrupt`` is not the engine's failure: it reaches the caller, which stops
  and writes what finished (``compare`` returns the rows it has; SBC has stored every
  finished simulation).
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
import time
from typing import Any, Callable

import numpy as np

from ...inference.contracts import EngineReturnError
from ..base.processes import die_with_parent
from .engines import user_entry

#: the default limit on one engine's fit, in seconds: far above what any engine of the zoo
#: takes on its default case (the slowest, GIG's VB on a1a, fits in about a minute), short
#: enough that a hung engine costs minutes, not a night
DEFAULT_ENGINE_TIME_LIMIT = 900.0


class EngineTimeout(BaseException):
    """An engine's fit ran past its time limit.

    A ``BaseException``, as ``KeyboardInterrupt`` is, so that an engine's own ``except
    Exception`` cannot swallow it; the code that fences the engine turns it into the
    engine's failed row."""


def check_time_limit(seconds: float | None, what: str = "engine time limit") -> float | None:
    """``seconds`` as a float, or None for no limit; ValueError naming ``what`` for anything
    that is not a positive, finite number."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < float("inf"):
        raise ValueError(f"{what} must be a positive number of seconds or None; got {seconds!r}")
    return float(seconds)


@contextlib.contextmanager
def time_limit(seconds: float | None, label: str):
    """Run the body with at most ``seconds`` of wall time (None: no limit); past it, the body
    is interrupted with :class:`EngineTimeout` naming ``label`` and the limit."""
    seconds = check_time_limit(seconds)
    if seconds is None:
        yield
        return
    message = f"{label} ran past its time limit of {seconds:g} s and was stopped"
    if threading.current_thread() is threading.main_thread():
        with _alarm(seconds, message):
            yield
    else:
        with _thread_timer(seconds, message):
            yield


@contextlib.contextmanager
def _alarm(seconds: float, message: str):
    """The main thread's limit: SIGALRM from a one-shot interval timer. A handler the caller
    had installed, and a timer it had running, are put back afterwards."""
    state = {"active": True}

    def on_alarm(signum, frame):
        if state["active"]:  # a signal that arrives as the body ends is ignored
            raise EngineTimeout(message)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        state["active"] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0] > 0:
            signal.setitimer(signal.ITIMER_REAL, *previous_timer)


@contextlib.contextmanager
def _thread_timer(seconds: float, message: str):
    """Any other thread's limit: a timer thread that sets :class:`EngineTimeout` as a pending
    exception of this thread (``PyThreadState_SetAsyncExc``). Under one lock with the end of
    the body, so a timer that fires as the body ends leaves nothing pending behind it."""
    target = threading.get_ident()
    lock = threading.Lock()
    state = {"active": True, "fired": False}

    def fire():
        with lock:
            if state["active"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(EngineTimeout))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except EngineTimeout as err:
        # the asynchronous exception carries no message: give it one
        raise EngineTimeout(message) from err.__cause__
    finally:
        with lock:
            state["active"] = False
            timer.cancel()
            if state["fired"]:
                # fired but maybe not yet delivered: clear it, so it cannot surface later
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)


def limited(fit: Callable, seconds: float | None, label: str) -> Callable:
    """``fit`` whose every call runs under :func:`time_limit` (its ``many`` form, where it has
    one, gets the limit once per data set of the batch)."""
    if seconds is None:
        return fit

    def fit_limited(spec, Phi, y, *, config=None):
        with time_limit(seconds, label):
            return fit(spec, Phi, y, config=config)

    fit_limited.__name__ = getattr(fit, "__name__", "fit")
    for attr in ("__wrapped_engine__",):
        if hasattr(fit, attr):
            setattr(fit_limited, attr, getattr(fit, attr))
    many = getattr(fit, "many", None)
    if callable(many):
        def many_limited(spec, Phi, ys, *, config=None):
            with time_limit(seconds * max(len(ys), 1), f"{label} (a batch of {len(ys)})"):
                return many(spec, Phi, ys, config=config)

        fit_limited.many = many_limited
    return fit_limited


#: seconds a child process may take to start and import the zoo and the engine before its
#: first fit (importing JAX is most of it; a loaded machine can take far longer than an idle one)
CHILD_START_SECONDS = 120.0


def isolated_timed_fit(target: str, spec, Phi, y, limit: float) -> tuple[Any, float, float]:
    """:func:`~zoo.validation.runs.compare.timed_fit` of the user's engine ``target``
    (``"module:function"``) in a spawned child process, each of its two calls limited to
    ``limit`` seconds: (posterior, warm seconds, compile seconds). Where the in-process limit
    cannot reach - a fit stuck inside one compiled call or a C loop - the child is killed;
    a child that dies (a crash, ``os._exit``) is the engine's failure too. Every failure is
    raised as ``EngineReturnError`` (one line naming the engine) or :class:`EngineTimeout`.
    The child imports the engine as the parent did (its ``sys.path`` and current folder are
    the parent's) and sends the posterior back pickled."""
    ctx = multiprocessing.get_context("spawn")  # a fork of a process running JAX can deadlock
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_isolated_child, args=(target, spec, Phi, y, send, os.getpid()), daemon=True)
    proc.start()
    send.close()
    try:
        wait, phase = CHILD_START_SECONDS, "starting"
        while True:
            if not receive.poll(wait):
                if phase == "starting":
                    raise EngineReturnError(f"{target}: its process did not start within {CHILD_START_SECONDS:g} s")
                raise EngineTimeout(f"{target} ran past its time limit of {limit:g} s and was stopped "
                                   "(its process killed)")
            try:
                message = receive.recv()
            except EOFError:
                proc.join(5)
                raise EngineReturnError(f"{target}: its process ended without a result (exit code "
                                        f"{proc.exitcode})") from None
            if message[0] == "fitting":
                wait, phase = limit, "fitting"
            elif message[0] == "failed":
                raise EngineReturnError(message[1])
            else:
                _, posterior, warm, compile_s = message
                return posterior, warm, compile_s
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        receive.close()


def _isolated_child(target: str, spec, Phi, y, conn, parent_pid: int) -> None:
    """The child of :func:`isolated_timed_fit`: the engine resolved by name, called twice
    (the first compiles, the second is the warm time), the result or one line sent back."""
    die_with_parent(parent_pid)  # (this module's package, zoo, set float64 on import)
    try:
        fit = user_entry(target).fit()
        conn.send(("fitting",))
        t0 = time.perf_counter()
        fit(spec, Phi, y)
        cold = time.perf_counter() - t0
        conn.send(("fitting",))
        t0 = time.perf_counter()
        posterior = fit(spec, Phi, y)
        warm = time.perf_counter() - t0
        conn.send(("done", posterior, warm, max(cold - warm, 0.0)))
    except BaseException as err:  # noqa: BLE001 - every failure goes back as one line
        text = " ".join(str(err).split())
        conn.send(("failed", text if text.startswith(target) else f"{target} raised {type(err).__name__}"
                   + (f": {text}" if text else "")))
    finally:
        conn.close()


def _non_finite(values: Any) -> int:
    a = np.asarray(values, dtype=float)
    return int(a.size - np.count_nonzero(np.isfinite(a)))


def posterior_problem(posterior) -> str | None:
    """What makes ``posterior`` unmeasurable, in one line, or None: any non-finite number in
    what the measurements read (a Gaussian's mean and Cholesky factor, every draw, a point's
    value), checked when it is about to be measured - not only when it was made, since an
    engine can change a posterior's arrays after its constructor checked them - and a
    Gaussian whose covariance is singular (a zero on its factor's diagonal: no density) or
    overflows."""
    kind = getattr(posterior, "kind", None)
    if kind == "gaussian":
        for name in ("mean_vec", "chol"):
            bad = _non_finite(getattr(posterior, name))
            if bad:
                what = "mean" if name == "mean_vec" else "Cholesky factor"
                return f"returned a Gaussian whose {what} has {bad} non-finite value(s) (NaN or inf)"
        chol = np.asarray(posterior.chol, dtype=float)
        diag = np.abs(np.diagonal(chol))
        if diag.size and not np.all(diag > 0):
            return (f"returned a Gaussian with a singular covariance ({int(np.sum(~(diag > 0)))} zero(s) on the "
                    "diagonal of its Cholesky factor): it has no density to measure")
        with np.errstate(over="ignore", invalid="ignore"):
            variances = np.sum(chol**2, axis=1)
        if not np.all(np.isfinite(variances)):
            return "returned a Gaussian whose variances overflow (not finite in double precision)"
        return None
    if kind == "draws":
        for name, values in posterior.draws.items():
            bad = _non_finite(values)
            if bad:
                return f"returned draws of {name!r} with {bad} non-finite value(s) (NaN or inf)"
        return None
    if kind == "point":
        bad = _non_finite(posterior.value)
        if bad:
            return f"returned a point estimate with {bad} non-finite value(s) (NaN or inf)"
    return None


__all__ = ["DEFAULT_ENGINE_TIME_LIMIT", "EngineTimeout", "check_time_limit", "time_limit", "limited",
           "posterior_problem", "isolated_timed_fit"]
