"""Child processes that do not outlive the process that needs them.

A time-limited reference run (``references/certified_run.py``) and every Dask worker of a study
(``runs/study.py``) run in processes of their own; a driver killed with ``kill -9`` must not
leave them running on. Both ask the kernel for that here.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int | None = None) -> bool:
    """Ask Linux to SIGKILL this process when its parent dies (prctl PR_SET_PDEATHSIG).

    Dask's workers already leave when the pipe from their driver closes, but that needs a
    Python thread to run: a worker inside one long C call that holds the GIL outlived a
    ``kill -9`` of its driver for as long as the call lasted (measured: still alive after
    20 s), the kernel's signal does not wait. The "parent" of this request is the thread
    that started the process (in Dask, the nanny's process-watching thread, which lives as
    long as the worker is wanted). ``parent_pid``: the process that should be the parent;
    if it is already gone (reparented before the request took effect), exit now.
    Returns False where the request is not available (not Linux).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)
    return True
