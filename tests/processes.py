"""Helpers of the tests that start real processes and check which of them still run
(test_reproduce.py, test_study.py): /proc, no psutil."""
from __future__ import annotations

import time


def process_running(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process that nobody reaped yet is a zombie: not
    running)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def describe_running(pids) -> str:
    """The processes of ``pids`` that still run, each with its state letter and command
    line (what a failed "workers must be gone" check shows, to tell a stuck worker from a
    restarted one)."""
    described = []
    for pid in sorted(pids):
        if not process_running(pid):
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError, IndexError):
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
