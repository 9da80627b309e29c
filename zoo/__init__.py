"""Sparse Bayesian classifier zoo.

The import package ``zoo`` is assembled from the top-level folders of the repository:
``zoo.models`` <- ``models/``, ``zoo.inference`` <- ``inference/``,
``zoo.validation`` <- ``validation/``, ``zoo.data`` <- ``data/`` (see pyproject.toml).

Importing it switches JAX to float64: every engine and reference in this project is
compared at the 1e-3 level and below, where float32 round-off would be visible.

Caches. The command line keeps two things between runs, both in one folder,
``~/.cache/sparse-bayes-zoo`` (:func:`cache_dir`; env ZOO_CACHE_DIR moves it):

* certified reference draws of ``zoo compare`` (``<sampler>-<key>.nc`` and ``.json`` at the
  folder's top; ``zoo compare --cache-dir`` moves them, ``--no-cache`` skips them);
* JAX's compiled programs in ``jax/<jax version>/`` inside it (:func:`jax_cache_dir`; env
  ZOO_JAX_CACHE moves them alone).

An entry is re-used only when its content key matches (a reference: model, data, sampler
settings and package versions; a program: the program, the jax version and the backend),
so deleting them is always safe: ``zoo cache`` shows them and ``zoo cache --clear``
deletes them. Importing ``zoo`` writes nothing there; the commands that compute (compare,
sbc, study, reproduce) do.
"""
from __future__ import annotations

import os as _os

import jax as _jax

_jax.config.update("jax_enable_x64", True)

#: CPU devices to ask for, one per chain of the default NUTS reference
#: (env ZOO_HOST_DEVICES; 1 turns the request off).
HOST_DEVICES = int(_os.environ.get("ZOO_HOST_DEVICES", "4"))


def request_host_devices(n: int = HOST_DEVICES) -> bool:
    """Ask XLA for ``n`` CPU devices so NUTS chains can run in parallel.

    JAX exposes one CPU device unless asked before its backend starts (the first JAX
    computation of the process), so this runs at ``import zoo``. Parallel chains take
    about half the wall time of "sequential" with bit-identical draws, and single-device
    work is not slowed by the extra devices (benchmarks/README.md, "Measurements behind
    design choices"). Returns
    False (and changes nothing) if the backend already started or the user chose a count.
    """
    from jax._src import xla_bridge

    if n <= 1 or xla_bridge.backends_are_initialized():
        return False
    if _jax.config.jax_num_cpu_devices >= 0 or "xla_force_host_platform_device_count" in _os.environ.get(
        "XLA_FLAGS", ""
    ):
        return False
    _jax.config.update("jax_num_cpu_devices", int(n))
    return True


HOST_DEVICES_REQUESTED = request_host_devices()

# Running from a source checkout without installing: let ``zoo.models`` etc. resolve to
# the top-level folders. An installed copy already has them inside this package.
_here = _os.path.dirname(_os.path.abspath(__file__))
_repo = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "models")) and _os.path.isdir(
    _os.path.join(_repo, "models")
):
    __path__.append(_repo)  # type: ignore[name-defined]  # noqa: F821

# One BLAS thread. Our factorizations are small (active sets of tens to a few hundred
# columns), where OpenBLAS threads only contend (100x slower factorizations measured with
# default threads; benchmarks/README.md, "Measurements behind design choices"), both
# through JAX's LAPACK and numpy. Set ZOO_BLAS_THREADS to override.
try:
    import scipy.linalg as _scipy_linalg  # noqa: F401  (load scipy's own OpenBLAS so it is limited too)
    from threadpoolctl import threadpool_limits as _threadpool_limits

    _threadpool_limits(int(_os.environ.get("ZOO_BLAS_THREADS", "1")), user_api="blas")
except ImportError:  # threadpoolctl comes with scikit-learn; without it, keep defaults
    pass


def writable_folder(path) -> bool:
    """Whether ``path`` is a folder that exists or can be made, and can be written (the
    zoo's own folder checks: Matplotlib's below, the reference cache's lock)."""
    try:
        _os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return _os.access(path, _os.W_OK | _os.X_OK)


def _matplotlib_folder() -> None:
    """Matplotlib keeps its config and font cache in ``~/.config/matplotlib`` and
    ``~/.cache/matplotlib``; with a HOME that cannot be written it warns at import and
    makes a temporary folder in every process. Where its default cannot be written (and
    MPLCONFIGDIR is not set), point it at ``matplotlib/`` in the zoo's cache folder, or,
    where that cannot be written either, at one temporary folder for this process - so a
    read-only HOME runs every command quietly. A writable HOME is left as it is."""
    if "MPLCONFIGDIR" in _os.environ:
        return
    home = _os.path.expanduser("~")
    config = _os.path.join(_os.environ.get("XDG_CONFIG_HOME") or _os.path.join(home, ".config"), "matplotlib")
    if writable_folder(config):
        return
    ours = _os.path.join(cache_dir(), "matplotlib")
    if writable_folder(ours):
        _os.environ["MPLCONFIGDIR"] = ours
    else:
        import tempfile

        _os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="zoo-matplotlib-")


def cache_dir() -> str:
    """The zoo's cache folder: env ZOO_CACHE_DIR, else ``~/.cache/sparse-bayes-zoo``."""
    return _os.environ.get("ZOO_CACHE_DIR") or _os.path.join(_os.path.expanduser("~"), ".cache", "sparse-bayes-zoo")


def jax_cache_dir(cache_folder: str | None = None) -> str:
    """The folder of JAX's compiled programs: env ZOO_JAX_CACHE, else ``jax/<jax version>/`` in
    ``cache_folder`` (default :func:`cache_dir`) - one folder per JAX release, so that two environments sharing the cache
    (Python 3.11 and 3.13, say, which install different JAX releases) never mix their programs,
    and a folder left by an older JAX can be deleted whole."""
    return _os.environ.get("ZOO_JAX_CACHE") or _os.path.join(cache_folder or cache_dir(), "jax", _jax.__version__)


def enable_compilation_cache(path: str | None = None) -> str:
    """Keep JAX's compiled programs on disk, so a new process skips recompilation.

    Every engine compiles its loops once per shape bucket (seconds each); a benchmark or
    CLI run that starts many processes, or is run again, pays that once. ``path`` defaults
    to :func:`jax_cache_dir` (env ZOO_JAX_CACHE, else ``~/.cache/sparse-bayes-zoo/jax/<jax
    version>``, or ``jax/<jax version>`` inside env ZOO_CACHE_DIR). Not switched on at import (a library should not
    write to the user's home unasked); the CLI's computing commands and the benchmarks call
    it. Compiled programs are keyed by JAX on the program, the jax version and the
    backend, so a stale entry is never used. Returns the directory.
    """
    path = path or jax_cache_dir()
    _os.makedirs(path, exist_ok=True)
    _jax.config.update("jax_compilation_cache_dir", path)
    _jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    return path


_matplotlib_folder()  # before anything imports matplotlib

__version__ = "0.1.0"
