"""Which device a command computes on (``--device auto|cpu|accelerator``).

The zoo's posteriors are small (tens to a few thousand points, a handful to a few hundred
weights): one NUTS chain or one engine's loop is bound by the latency of its many small
steps, not by arithmetic, and an accelerator makes it slower. Measured on one H100 machine
with JAX's CUDA build (issue 37): the default ``zoo compare`` did not finish in 110 s on the
GPU (JAX ran the 4 NUTS chains one after another there) and took 52 s on the same
machine's CPU; EPCVM's selection at N = 8,000 took 44 s on the GPU against 51 s on the CPU.
What an accelerator does well is many independent small problems in one program: SBC of
NUTS runs its simulated data sets' chains as lanes of one vectorized program
(validation/references/nuts_program.py; benchmarks/results/sbc_speed/).

So ``auto`` chooses per command:

* ``compare``, ``study``, ``reproduce``: the CPU (one chain per CPU device, engines whose
  loops are latency-bound), for the command's own process and the worker processes it
  starts (a study's or a reproduction's LocalCluster; a ``--scheduler``'s workers keep
  their own);
* ``sbc``: whatever JAX finds (an accelerator if there is one) when every engine of the
  run has a batched form measured to pay there (NUTS's chains as lanes of one program),
  else the CPU. Engines' own batched forms (``fit.many``, one vmapped loop over the data
  sets) run many simulations per program on the CPU too; they have not been measured on
  an accelerator, so ``auto`` does not send them there.

``cpu`` hides any accelerator from JAX; ``accelerator`` leaves JAX's own choice (an
accelerator where one is installed, else the CPU). The choice is made by setting JAX's
platform before its first computation, which is why importing the zoo computes nothing;
:func:`choose` refuses to choose once JAX has started (the device is then what it is).
"""
from __future__ import annotations

import os

import jax

#: the values ``--device`` takes (what each chooses: the module docstring)
DEVICES = ("auto", "cpu", "accelerator")
#: what ``auto`` chooses where every engine has a batched form, and otherwise
_AUTO_BATCHED = "accelerator"
_AUTO_OTHERWISE = "cpu"


def backend_started() -> bool:
    """Whether JAX has started its backends (after which the platform is fixed)."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def choose(requested: str, *, batched: bool = False) -> dict:
    """Set the device of this process before any JAX computation.

    requested: one of :data:`DEVICES`; batched: whether every engine of the command runs many
    problems in one program (``auto`` then leaves an accelerator in use).
    Returns {"requested", "wanted", "why"}; :func:`describe` adds what JAX then uses.
    Raises ValueError for an unknown name.
    """
    if requested not in DEVICES:
        raise ValueError(f"--device must be one of {', '.join(DEVICES)}; got {requested!r}")
    if requested == "auto":
        wanted = _AUTO_BATCHED if batched else _AUTO_OTHERWISE
        why = ("auto: many simulations run as one vectorized program, which an accelerator runs well"
               if batched else "auto: the zoo's posteriors are small and their loops latency-bound, "
                               "faster on the CPU than on an accelerator")
    else:
        wanted, why = requested, f"--device {requested}"
    if backend_started():
        return {"requested": requested, "wanted": wanted,
                "why": why + " (not applied: JAX had already started in this process)"}
    if wanted == "cpu":
        jax.config.update("jax_platforms", "cpu")
        # and for the processes this one starts (a LocalCluster's workers, a time-limited
        # reference's child), which read the environment, not this process's config
        os.environ["JAX_PLATFORMS"] = "cpu"
    return {"requested": requested, "wanted": wanted, "why": why}


def describe(choice: dict | None = None) -> str:
    """One line for a report: the device JAX computes on, and why (starts JAX's backend)."""
    device = jax.devices()[0]
    kind = getattr(device, "device_kind", device.platform)
    where = f"{device.platform} ({kind})" if kind and kind != device.platform else device.platform
    count = jax.local_device_count()
    line = f"{where}, {count} device{'s' if count != 1 else ''}"
    if choice is None:
        return line
    note = ""
    if choice["wanted"] == "accelerator" and device.platform == "cpu":
        note = "; no accelerator found, so the CPU"
    return f"{line} ({choice['why']}{note})"
