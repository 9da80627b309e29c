"""The shared compile cache (inference/compile_cache.py): bounded, least recently used
first out, counting every compilation, rebuilding a value its owner rejects; and
``run_compiled`` compiles once per argument signature."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference.compile_cache import CompiledPrograms, batch_size_for, run_batched, run_compiled


def test_bounded_least_recently_used_and_counts_every_build():
    cache = CompiledPrograms("test", max_entries=2)
    builds = []

    def build(k):
        return lambda: builds.append(k) or f"program {k}"

    assert cache.get("a", build("a"))[0] == "program a"
    cache.get("b", build("b"))
    value, seconds = cache.get("a", build("a"))  # hit: "a" becomes the most recent
    assert value == "program a" and seconds == 0.0
    cache.get("c", build("c"))  # evicts "b", the least recently used
    assert "a" in cache and "c" in cache and "b" not in cache and len(cache) == 2
    cache.get("b", build("b"))  # rebuilt after eviction
    assert builds == ["a", "b", "c", "b"]
    assert cache.stats()[0] == 4  # evicted builds still count


def test_a_rejected_value_is_rebuilt():
    cache = CompiledPrograms("test")
    cache.get("k", lambda: "stale")
    value, _ = cache.get("k", lambda: "fresh", is_current=lambda v: v != "stale")
    assert value == "fresh" and cache.stats()[0] == 2


def test_run_compiled_compiles_once_per_signature():
    cache = CompiledPrograms("test")
    square = jax.jit(lambda x: x * x)
    out, warm, compile_s = run_compiled(cache, square, jnp.arange(3.0))
    np.testing.assert_array_equal(out, [0.0, 1.0, 4.0])
    assert compile_s > 0 and warm >= 0
    _, _, compile_again = run_compiled(cache, square, jnp.ones(3))  # same shape and dtype
    assert compile_again == 0.0
    run_compiled(cache, square, jnp.ones(4))  # new shape: a second program
    assert cache.stats()[0] == 2


def test_max_entries_must_be_positive():
    with pytest.raises(ValueError, match="max_entries"):
        CompiledPrograms("test", max_entries=0)


def _newton_sqrt(a, tol):
    """sqrt(a) by Newton's iteration in a while_loop: items stop after different counts."""
    def cond(s):
        return jnp.abs(s[0] * s[0] - a) > tol

    def body(s):
        return 0.5 * (s[0] + a / s[0]), s[1] + 1

    return jax.lax.while_loop(cond, body, (a, 0))


def test_run_batched_gives_each_item_its_own_loop_and_pads_to_a_shared_program():
    cache = CompiledPrograms("batched")
    a = np.array([2.0, 9.0, 1e6, 0.25, 7.0])
    (roots, steps), _, compile_seconds = run_batched(cache, "sqrt", _newton_sqrt, (a,), (1e-12,))
    assert roots.shape == (5,) and compile_seconds > 0
    for i, ai in enumerate(a):  # each item as the loop alone would end it
        alone = _newton_sqrt(ai, 1e-12)
        assert roots[i] == pytest.approx(float(alone[0]), rel=1e-15) and steps[i] == int(alone[1])
    assert len(set(steps.tolist())) > 1  # the items really stopped at different iterations
    # 5 and 7 items share the padded batch of 8: one program
    assert batch_size_for(5) == batch_size_for(7) == 8
    (roots7, _), _, again = run_batched(cache, "sqrt", _newton_sqrt, (np.arange(1.0, 8.0),), (1e-12,))
    assert again == 0.0 and len(cache) == 1 and roots7[3] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="same non-zero leading length"):
        run_batched(cache, "two", lambda x, y: x + y, (np.ones(3), np.ones(4)))
