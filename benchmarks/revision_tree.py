"""An importable copy of the zoo at an older git revision, for before/after benchmarks that
must run the code as it was (the "before" of a change that replaced it).

``tree_at(rev)`` exports the revision with ``git archive`` and lays it out as the installed
package is laid out (``zoo``, ``zoo.models``, ``zoo.inference``, ... as pyproject.toml maps
them), under a cache folder keyed by the commit; put the returned folder first on
``PYTHONPATH`` of a fresh process and ``import zoo`` imports that revision (Python's path
finder runs before the editable install's finder). The revision's third-party packages are
those of the running environment.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: top-level folders of the repository -> where the installed package puts them
PACKAGE_DIRS = {"zoo": "zoo", "models": "zoo/models", "inference": "zoo/inference", "validation": "zoo/validation",
                "data": "zoo/data", "reproductions": "zoo/reproductions"}


def commit_of(rev: str) -> str:
    return subprocess.run(["git", "-C", REPO, "rev-parse", f"{rev}^{{commit}}"], check=True, capture_output=True,
                          text=True).stdout.strip()


def tree_at(rev: str, cache: str | None = None) -> str:
    """The folder to put on PYTHONPATH to import the zoo at ``rev`` (built once per commit)."""
    commit = commit_of(rev)
    cache = cache or os.path.join(tempfile.gettempdir(), "zoo-revisions")
    dest = os.path.join(cache, commit[:12])
    if os.path.isdir(os.path.join(dest, "zoo")):
        return dest
    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(dir=cache)
    src = os.path.join(work, "src")
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", REPO, "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    pkg = os.path.join(work, "pkg")
    for top, inside in PACKAGE_DIRS.items():
        if os.path.isdir(os.path.join(src, top)):
            shutil.copytree(os.path.join(src, top), os.path.join(pkg, inside))
    os.replace(pkg, dest) if not os.path.exists(dest) else None
    shutil.rmtree(work, ignore_errors=True)
    return dest
