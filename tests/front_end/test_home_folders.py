"""The zoo runs where HOME cannot be written, and many processes can start at once.

ArviZ 0.23 made ``~/.cache/arviz`` at import and wrote a daily stamp there through one
fixed temporary name; Matplotlib warns and makes a temporary folder where ``~/.config`` is
not writable. With an unwritable HOME even ``zoo --help`` died in a traceback, and processes
starting together (a LocalCluster's workers) could race on ArviZ's file. The zoo now gives
ArviZ a folder of its own import and Matplotlib a folder it can write
(``zoo/__init__.py``, ``validation/base/arviz_adapter.py``). Run in fresh processes: what
is tested is what happens at import.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


ZOO = [sys.executable, "-m", "zoo.cli"]


def _env(**changes) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "ZOO_CACHE_DIR", "ZOO_JAX_CACHE")}
    env.update(changes)
    return env


@pytest.mark.long
def test_commands_run_with_a_home_that_cannot_be_written(tmp_path):
    # a HOME below a regular file cannot be made by anyone, root included (root ignores
    # permission bits, so a chmod-ed folder would not test this as root)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = _env(HOME=str(blocker / "home"))
    for args in (["--help"], ["datasets"]):
        run = subprocess.run(ZOO + args, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "Traceback" not in run.stderr and "Matplotlib created a temporary" not in run.stderr, run.stderr


@pytest.mark.long
def test_six_processes_importing_arviz_at_once_all_start(tmp_path):
    env = _env(HOME=str(tmp_path / "home"))
    code = "import zoo.validation.base.arviz_adapter"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(6)]
    outcomes = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in outcomes), [err[-500:] for rc, err in outcomes if rc]
    # nothing of ArviZ's is left in the user's cache: it had a folder of its own import
    assert not (tmp_path / "home" / ".cache" / "arviz").exists()
