"""Shared fixtures of the integration tests (test_compare, test_cli, test_notebooks).

NUTS compilation, not sampling, is most of the cost of a short comparison. The integration tests therefore share one session-wide NUTS cache
folder and one set of short NUTS settings: the first test that needs the reference of
(PCVM, Ripley, width 0.7) computes it and the others read it back. References are cached
under a content hash of model, data, sampler settings and package versions, so sharing
can only save time, never change a result; every file still passes when run alone.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

# The CLI keeps JAX's compiled programs in a persistent cache (zoo.enable_compilation_cache);
# tests must not write into the user's home, so point it at a fresh temporary folder - one
# per test process, empty at its start, so nothing outlives the session.
os.environ.setdefault("ZOO_JAX_CACHE", tempfile.mkdtemp(prefix="zoo-test-jax-cache-"))
# the reference cache's signing key (validation/references/cache.py) of the test session
# alone: tests never make or read the user's own key in ~/.config
os.environ.setdefault("ZOO_CONFIG_DIR", tempfile.mkdtemp(prefix="zoo-test-config-"))

import zoo  # noqa: F401  (before any JAX computation: float64 and CPU devices for parallel chains)

# The tests use that cache too: many of them compile the same programs again (a new closure
# or a new sampler object over the same shapes), and a program read back from the cache is
# the one compiled, so results are unchanged. Measured on test_reference.py +
# test_reference_samplers.py: 228 -> 186 CPU s. ZOO_TEST_NO_JAX_CACHE=1 switches it off.
if not os.environ.get("ZOO_TEST_NO_JAX_CACHE"):
    zoo.enable_compilation_cache()
from zoo.validation.references import ReferenceConfig

#: 2 chains x (300 warm-up + 1000 draws). On PCVM/Ripley with width 0.7 (about 9
#: parameters) and seed 0 this certifies the probit and the surrogate reference without
#: doublings (measured: R-hat <= 1.003, bulk and tail ESS >= 540).
FAST_NUTS = ReferenceConfig(num_chains=2, num_warmup=300, num_samples=1000)


@pytest.fixture(autouse=True)
def _device_choice_stays_in_its_test():
    """A command run in the test process (``main(["study", ...])``) chooses its device as the
    command line does: zoo/devices.py puts JAX_PLATFORMS=cpu into this process's environment for
    the processes it starts. Restored after every test, so a later test's subprocess (a "fresh"
    process of test_devices.py) does not inherit a choice it did not make."""
    before = os.environ.get("JAX_PLATFORMS")
    yield
    if before is None:
        os.environ.pop("JAX_PLATFORMS", None)
    else:
        os.environ["JAX_PLATFORMS"] = before


@pytest.fixture
def registry_as_it_was():
    """A user's model (a Model in a config, a path on the command line) joins the process's
    model registry: out again after the test, so that no other test of this process sees a
    sixth model. Files that add models use it for every test (``pytestmark``)."""
    from zoo.validation.records import registry

    before = registry.model_names()
    yield
    for name in set(registry.model_names()) - set(before):
        registry.unregister(name)


@pytest.fixture(scope="session")
def fast_nuts() -> ReferenceConfig:
    return FAST_NUTS


@pytest.fixture(scope="session")
def fast_nuts_cli_args(fast_nuts) -> list[str]:
    """The same settings as `zoo compare` options (so the CLI hits the same cache entry)."""
    return ["--chains", str(fast_nuts.num_chains), "--warmup", str(fast_nuts.num_warmup),
            "--samples", str(fast_nuts.num_samples), "--target-accept", str(fast_nuts.target_accept),
            "--seed", str(fast_nuts.seed)]


@pytest.fixture(scope="session")
def nuts_cache_dir(tmp_path_factory):
    """One NUTS reference cache for the whole test session - shared by the worker processes
    of a parallel run (pytest-xdist: the README's test command) through their common base
    folder. Two workers that need the same reference at once may both compute it; each
    entry is written atomically, so either copy is whole and they are equal."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "nuts-cache"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("nuts-cache")


@pytest.fixture(scope="module")
def private_cache_key(tmp_path_factory):
    """A module's cache entries signed with a key of its own, never the user's (or another
    module's): use with ``pytestmark = pytest.mark.usefixtures("private_cache_key")``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZOO_CONFIG_DIR", str(tmp_path_factory.mktemp("zoo-config")))
        yield


@pytest.fixture(scope="module")
def normal_means_problem():
    """The small known-answer problem of the cache and reference tests: (spec, Phi, y)."""
    from problems import NormalMeans  # tests/problems.py, on the path under pytest

    rng = np.random.default_rng(1)
    Phi = rng.normal([0.5, -1.0], 1.0, size=(20, 2))
    y = np.tile([0.0, 1.0], 10)
    return NormalMeans(), Phi, y


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test is in one tier: marked ``long`` or ``slow``, never both (``-m long`` would run a
    slow one in CI). Checked before ``-m`` deselects anything, so every tier's run sees it."""
    both = [item.nodeid for item in items if item.get_closest_marker("long") and item.get_closest_marker("slow")]
    if both:
        raise pytest.UsageError(f"marked both long and slow (choose one tier): {', '.join(both[:5])}")
