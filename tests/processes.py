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


def wait_until(predicate, timeout: float, what: str, poll: float = 0.1) -> float:
    """Poll ``predicate`` until it holds; the seconds it took. AssertionError naming
    ``what`` after ``timeout`` seconds."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)
    return time.monotonic() - t0
