"""One bounded cache of ahead-of-time compiled programs, used by every engine.

Why compile ahead of time: every engine reports warm run time (``FitInfo.seconds``) apart
from compilation (``FitInfo.compile_seconds``). ``jax.jit(f).lower(*args).compile()``
makes the compilation an explicit step that can be timed, and the executable it returns
never traces or compiles again, so the time of a call to it is run time only.

Why one cache per engine, and bounded: an executable is specialized to its argument
shapes (and to the settings baked into the program), so a study over many data sets or
padded sizes compiles many of them, and each keeps its code and constants alive for the
life of the process. An unbounded dict grows with the study; this one drops the least
recently used program once it holds ``max_entries`` (a dropped program is recompiled if
it is asked for again - correct, only slower). The counters of :meth:`CompiledPrograms.stats`
cover every compilation of the process, evicted ones included, because the engines take
differences of them to attribute compile time to one fit.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable, Hashable

import jax
import jax.numpy as jnp
import numpy as np

from ..models.checks import check_binary_labels

#: Programs kept per engine. Generous for one comparison (a basis selection touches a
#: handful of padded sizes), small enough that a long study cannot hoard executables.
DEFAULT_MAX_ENTRIES = 64


class CompiledPrograms:
    """A least-recently-used map from a key to a compiled program (or any value built by
    compiling), with compile-time bookkeeping.

    ``name`` only labels the cache in messages; ``max_entries`` bounds it.
    """

    def __init__(self, name: str, max_entries: int = DEFAULT_MAX_ENTRIES):
        if int(max_entries) < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.name = name
        self.max_entries = int(max_entries)
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._n_compiled = 0
        self._compile_seconds = 0.0

    def get(self, key: Hashable, build: Callable[[], Any], *,
            is_current: Callable[[Any], bool] | None = None) -> tuple[Any, float]:
        """(value, compile seconds spent in this call): the cached value for ``key``, or
        ``build()`` timed, stored and returned. ``is_current(value)`` may reject a stored
        value (e.g. one keyed by ``id()`` of an object that no longer exists), which is
        then rebuilt."""
        value = self._entries.get(key)
        if value is not None and (is_current is None or is_current(value)):
            self._entries.move_to_end(key)
            return value, 0.0
        start = time.perf_counter()
        value = build()
        seconds = time.perf_counter() - start
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        self._n_compiled += 1
        self._compile_seconds += seconds
        return value, seconds

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> tuple[int, float]:
        """(number, total seconds) of programs compiled through this cache in this process."""
        return self._n_compiled, self._compile_seconds

    def clear(self) -> None:
        """Forget every program (the counters of :meth:`stats` keep their totals)."""
        self._entries.clear()

    def __repr__(self) -> str:
        return f"CompiledPrograms({self.name!r}, {len(self)}/{self.max_entries} programs)"


class SameObject:
    """The part of a cache key that names one object (a model spec): equal only to that very object,
    hashed by its id. A program compiled from ``spec.model`` is right for that spec only,
    and a bare ``id(spec)`` could be reused by a later object once the spec is gone; this
    key holds the spec, so while its program is cached the id cannot pass to another."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, SameObject) and other.obj is self.obj


def signature_key(fn: Any, *args) -> tuple:
    """A cache key for ``fn(*args)``: the function, the pytree structure of the
    arguments and the shape and dtype of every leaf (what a jitted program is
    specialized to)."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    return (fn, treedef, tuple((np.shape(x), jnp.result_type(x)) for x in leaves))


def run_compiled(cache: CompiledPrograms, jitted, *args) -> tuple[Any, float, float]:
    """Run ``jitted(*args)`` through ``cache``: (output, warm seconds, compile seconds).

    The program is compiled ahead of time the first time this argument signature is
    seen, so the warm seconds never include tracing or compilation.
    """
    executable, compile_seconds = cache.get(signature_key(jitted, *args),
                                            lambda: jitted.lower(*args).compile())
    start = time.perf_counter()
    out = jax.block_until_ready(executable(*args))
    return out, time.perf_counter() - start, compile_seconds


#: padded sizes grow in steps of this beyond it instead of doubling: large-N selections
#: keep 100-300 columns, where a power of two could waste up to 4x of an O(N P^2) step
PADDING_STEP = 64


def padded_size(n: int, minimum: int = 1, step: int = PADDING_STEP) -> int:
    """The size a dimension of n is padded to so that nearby sizes share one compiled
    program: the smallest power of two >= n (and >= minimum) up to ``step``, beyond that
    the smallest multiple of ``step`` >= n. Zero padding changes no value but round-off."""
    size = max(int(minimum), 1)
    while size < n and size < step:
        size *= 2
    if size < n:
        size = step * -(-int(n) // step)
    return size


# --------------------------------------------------------------------------------------
# Many data sets of one shape in one program (an engine's ``fit.many``)
# --------------------------------------------------------------------------------------
def batch_size_for(n: int) -> int:
    """The batch a run of ``n`` data sets is padded to, so that a few batch sizes share one
    program each (the last, shorter chunk of an SBC run does not compile anew):
    :func:`padded_size` with no step cap below 1,024."""
    return padded_size(n, 1, step=1024)


def run_batched(cache: CompiledPrograms, key: Hashable, fn: Callable, per_item: tuple, shared: tuple = ()
                ) -> tuple[Any, float, float]:
    """``fn(*item_i, *shared)`` for every item, as one compiled ``jax.vmap`` program.

    per_item: arguments whose leaves carry the items on a leading axis (all of one length
    B); shared: arguments every item uses as they are. ``key`` names the program apart from
    the shapes (the engine's static settings); the batch is padded to
    :func:`batch_size_for` (B) by repeating the last item, and the padding is cut from the
    output. Returns (output with leading axis B, warm seconds of the whole batch, compile
    seconds spent in this call).

    Why vmap gives each item its own fit: an engine's loop is a ``lax.while_loop``, which
    under vmap runs until every item has stopped and keeps each finished item's state as
    it was when its own condition turned false, so item i ends where ``fn`` alone would
    (to round-off: batched products may sum in another order)."""
    leaves = jax.tree_util.tree_leaves(per_item)
    if not leaves:
        raise ValueError("run_batched needs at least one per-item argument")
    B = int(np.shape(leaves[0])[0])
    if B == 0 or any(int(np.shape(x)[0]) != B for x in leaves):
        raise ValueError("every per-item argument needs the same non-zero leading length, got "
                         f"{sorted({int(np.shape(x)[0]) for x in leaves})}")
    size = batch_size_for(B)
    if size > B:
        per_item = jax.tree_util.tree_map(
            lambda x: np.concatenate([np.asarray(x), np.repeat(np.asarray(x)[-1:], size - B, axis=0)]), per_item)
    args = (*per_item, *shared)
    in_axes = (0,) * len(per_item) + (None,) * len(shared)
    full_key = (key, "batched", signature_key(None, *args))
    executable, compile_seconds = cache.get(
        full_key, lambda: jax.jit(jax.vmap(fn, in_axes=in_axes)).lower(*args).compile())
    start = time.perf_counter()
    out = jax.block_until_ready(executable(*args))
    seconds = time.perf_counter() - start
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[:B], out), seconds, compile_seconds


# an engine's fit.many around run_batched: the label rows checked one by one, the outputs
# finished one by one, a failure kept in its own row
def fit_rows(ys, n_samples: int, run_rows) -> list:
    """The entries of a batched fit over the label vectors ``ys`` (D, n_samples): each row's
    labels are checked as ``fit`` checks its ``y`` (the ValueError of a refused row is that
    row's entry, returned, not raised), and the accepted rows, as 0/1 floats (K, n), go to
    ``run_rows``, which returns their K entries in order. A ``ys`` that is not a table of
    n_samples columns concerns the whole call and is raised."""
    ys = np.asarray(ys)
    if ys.ndim != 2 or ys.shape[1] != n_samples:
        raise ValueError(f"ys must be a table (data sets, {n_samples}) of label vectors, one a row; "
                         f"got shape {ys.shape}")
    entries: list = [None] * ys.shape[0]
    accepted, rows = [], []
    for i, y in enumerate(ys):
        try:
            rows.append(check_binary_labels(y, n_samples=n_samples))
            accepted.append(i)
        except ValueError as err:
            entries[i] = err
    if rows:
        done = run_rows(np.stack(rows))
        if len(done) != len(rows):
            raise RuntimeError(f"a batched fit returned {len(done)} entries for {len(rows)} data sets")
        for i, entry in zip(accepted, done):
            entries[i] = entry
    return entries


def finish_each(batched, n: int, finish) -> list:
    """``[finish(i, item i of batched)]`` for the first n items of a pytree of arrays with a
    leading item axis, the exception ``finish`` raised standing in for item i's entry: one
    data set whose post-processing fails (a covariance that is not positive definite, a
    non-finite mean) is not the batch's failure."""
    entries = []
    for i in range(n):
        item = jax.tree_util.tree_map(lambda a: a[i], batched)
        try:
            entries.append(finish(i, item))
        except Exception as err:  # noqa: BLE001 - whatever fit would have raised is this row's entry
            entries.append(err)
    return entries
