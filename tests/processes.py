"""Helpers of the tests that start real processes and check which of them still run
(test_reproduce.py, test_study.py): /proc, no psutil."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

#: the lines a kill test's driver runs first (inside its ``if __name__ == "__main__":``;
#: the driver's text puts ``    # AS FROM A TERMINAL`` where they go, see ``driver_text``).
#: Ctrl-C as a terminal delivers it to a foreground command, whose SIGINT starts at its
#: default. The test itself may run where SIGINT is ignored (a background job of a
#: non-interactive shell, nohup: how a CI run started by hand inherited it), and Python keeps
#: an inherited "ignore" - rightly, `nohup zoo ... &` must not stop on a stray Ctrl-C - so
#: the driver sets the terminal's default back itself. SIGUSR1 dumps every thread's stack,
#: for a driver that does not stop.
_AS_FROM_A_TERMINAL = """\
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
"""
_MARK = "    # AS FROM A TERMINAL\n"


def driver_text(text: str) -> str:
    """A kill test's driver script with the terminal's signal set-up in place of its mark."""
    if _MARK not in text:
        raise ValueError("the driver has no '# AS FROM A TERMINAL' line")
    return text.replace(_MARK, _AS_FROM_A_TERMINAL)


def start_driver(argv: list[str], folder, env: dict) -> subprocess.Popen:
    """Start a driver in its own session (so a Ctrl-C can go to its process group alone),
    writing to ``folder``/stdout and ``folder``/stderr: files stay readable after the driver
    has been killed, where a pipe's content is lost."""
    with open(os.path.join(folder, "stdout"), "w") as out, open(os.path.join(folder, "stderr"), "w") as err:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=err, start_new_session=True)


def signal_and_watch(driver: subprocess.Popen, pids, signame: str, within: float = 15.0):
    """Send ``signame`` to the driver (SIGINT to its whole process group, as a terminal
    does), wait up to ``within`` seconds for every process of ``pids`` to stop, then up to
    60 s for the driver to exit. Returns (seconds waited, the survivors as
    :func:`describe_running` gives them, the driver's signal masks if it was still running
    beside survivors - it then also got SIGUSR1, so its stacks are in its stderr)."""
    if signame == "SIGINT":
        os.killpg(driver.pid, signal.SIGINT)
    else:
        os.kill(driver.pid, getattr(signal, signame))
    t0 = time.monotonic()
    while any(map(process_running, pids)) and time.monotonic() - t0 < within:
        time.sleep(0.1)
    seconds, survivors, stuck = time.monotonic() - t0, describe_running(pids), ""
    if survivors != "none" and driver.poll() is None:
        stuck = signal_masks(driver.pid)
        os.kill(driver.pid, signal.SIGUSR1)
        time.sleep(2)
    with contextlib.suppress(subprocess.TimeoutExpired):
        driver.wait(timeout=60)
    return seconds, survivors, stuck


def _state(pid: int) -> str | None:
    """The state letter of ``pid`` in /proc (R, S, D, Z, ...), None if there is no such
    process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def process_running(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process that nobody reaped yet is a zombie: not
    running)."""
    return _state(pid) not in (None, "Z", "X")


def describe_running(pids) -> str:
    """The processes of ``pids`` that still run, each with its state letter and command
    line (what a failed "workers must be gone" check shows, to tell a stuck worker from a
    restarted one)."""
    described = []
    for pid in sorted(pids):
        state = _state(pid)
        if state in (None, "Z", "X"):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        described.append(f"{pid} ({state}) {cmd[:200]}")
    return "; ".join(described) or "none"


def signal_masks(pid: int) -> str:
    """The signal masks of a process as /proc shows them (hex bit sets): blocked, ignored,
    caught. Bit 2 (0x2) is SIGINT: a driver that inherited SIGINT ignored or blocked never
    sees a Ctrl-C."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return ", ".join(line.strip() for line in fh if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def wait_until(predicate, timeout: float, what: str, poll: float = 0.1) -> float:
    """Poll ``predicate`` until it holds; the seconds it took. AssertionError naming
    ``what`` after ``timeout`` seconds."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)
    return time.monotonic() - t0
