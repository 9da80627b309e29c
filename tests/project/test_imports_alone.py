"""Every module of the package imports alone, in a fresh interpreter.

No module may work only because another one was imported first - a table filled as a
side effect of someone else's import (the reference samplers were once registered by
importing the registry of models, so ``ReferenceConfig(sampler="slice-gibbs")`` worked or
failed by what else the process had imported), or an import order that happens to hold in
the test session. One process cannot show this: once a module is imported, every later
import in that process sees it. So each module gets its own interpreter
(:func:`import_failures`), and the checker is shown to catch a planted module that fails
only when imported alone.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from repository import REPO
from test_layering import modules_of  # the package's modules, as the layering test walks them

#: the most seconds one module's import may take in its interpreter (JAX and NumPyro load in
#: a few seconds; more means something hangs)
IMPORT_TIMEOUT = 120


def _import_alone(module: str, cwd) -> str | None:
    """None if ``import module`` succeeds in a fresh interpreter, else the last line of
    its error (the exception and its message)."""
    try:
        done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=cwd, capture_output=True,
                              text=True, timeout=IMPORT_TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return f"no result within {IMPORT_TIMEOUT} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def import_failures(modules, *, cwd=REPO, workers: int = 2) -> dict[str, str]:
    """{module: its error} for every module of ``modules`` whose import fails in a fresh
    interpreter of its own, started in ``cwd``; ``workers`` interpreters at a time."""
    modules = sorted(modules)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        errors = list(pool.map(lambda m: _import_alone(m, cwd), modules))
    return {m: e for m, e in zip(modules, errors) if e is not None}


# Long tier: one interpreter per module (~120 of them), each loading JAX and NumPyro for
# seconds, is minutes of work even two at a time (two workers: the CI machine's cores), far
# over the default tier's 5 s a test; one process cannot stand in for them (a module once
# imported is there for every later import). The default tier keeps the checker's planted
# test and the case that once depended on another module's import (below).
@pytest.mark.long
def test_every_module_imports_alone():
    failures = import_failures(modules_of(REPO))
    assert not failures, "modules that fail when imported alone:\n" + "\n".join(
        f"  {m}: {e}" for m, e in failures.items())


def test_a_reference_config_for_a_models_own_sampler_needs_no_registry():
    """The references wing alone: a ReferenceConfig is built for GGSM probit's own sampler
    as its record builds it (the record's settings, the sampler object it carries), and a
    cache key is computed, with no module of the records wing imported; a name of a
    model's own sampler without its object is refused, naming NUTS, the one it knows."""
    script = textwrap.dedent("""
        import sys

        import numpy as np

        from zoo.validation.references.config import ReferenceConfig

        from zoo.validation.references.cache import cache_key
        from zoo.validation.references.slice_gibbs import SLICE_GIBBS
        from zoo.models.ggsm_probit import GGSMProbit

        config = ReferenceConfig(sampler=SLICE_GIBBS, num_warmup=1000, num_samples=1500, max_doublings=3)
        assert config.sampler == "slice-gibbs" and config.sampler_entry is SLICE_GIBBS, config
        assert config.sampler_settings()["sampler"] == "zoo.slice-gibbs"
        rng = np.random.default_rng(0)
        cache_key(GGSMProbit(q=1.0), rng.standard_normal((6, 2)), np.r_[0.0, 1.0, 0.0, 1.0, 1.0, 0.0], config)
        try:
            ReferenceConfig(sampler="slice-gibbs")
        except ValueError as err:
            assert "unknown reference sampler 'slice-gibbs'; known: nuts" in str(err), err
        else:
            raise AssertionError("a bare name of a model's own sampler was accepted")
        records = sorted(m for m in sys.modules if m.startswith("zoo.validation.records"))
        assert not records, records
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=IMPORT_TIMEOUT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_a_module_that_fails_alone_is_named(tmp_path):
    """A planted package: ``user`` reads a table that ``filler`` fills when imported, so it
    works after ``filler`` in one process and fails alone; the checker names it (and only
    it), with its error."""
    package = tmp_path / "planted"
    package.mkdir()
    files = {
        "__init__.py": "",
        "table.py": "TABLE = {}\n",
        "filler.py": "from .table import TABLE\n\nTABLE['sampler'] = object()\n",
        "user.py": "from .table import TABLE\n\nSAMPLER = TABLE['sampler']\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    # in one process, after the filler, the defect does not show
    together = subprocess.run([sys.executable, "-c", "import planted.filler, planted.user"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=IMPORT_TIMEOUT)
    assert together.returncode == 0, together.stderr
    failures = import_failures(["planted", "planted.table", "planted.filler", "planted.user"], cwd=tmp_path)
    assert list(failures) == ["planted.user"], failures
    assert failures["planted.user"] == "KeyError: 'sampler'"
