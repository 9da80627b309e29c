"""The seconds JAX spends tracing, lowering and compiling while a block runs, from JAX's
own monitoring events: a sampler's or an engine's time is reported apart from its
compilation (what a user pays once per data shape in a process)."""
from __future__ import annotations

import jax

#: the monitoring events that together make up a compilation
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class CompileTimer:
    """Sum of JAX's own tracing/lowering/compilation durations while active
    (``with CompileTimer() as t: ...; t.seconds``)."""

    def __init__(self):
        self.seconds = 0.0

    def _listener(self, event: str, duration: float, **_):
        if event in COMPILE_EVENTS:
            self.seconds += float(duration)

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)
        return False
