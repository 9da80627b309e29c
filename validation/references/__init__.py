"""The reference posterior: ground truth for every engine, and the rule that certifies it.

``run_reference(spec, Phi, y)`` runs NUTS on ``spec.model`` (4 chains, float64), checks
convergence with rank-normalized split R-hat and bulk/tail ESS (Vehtari et al. 2021) and
the divergence count, and returns a :class:`Reference`. The reference is *certified* only
if every coordinate of every *sampled* site passes
:data:`~zoo.validation.references.certification.CERTIFICATION` - the measured sites and the
latent ones the sampler moves (GIG logistic's u and z, the Gibbs samplers' auxiliary
blocks) - and, for NUTS, the energy (E-BFMI) and tree-depth checks pass. An uncertified
reference says why in ``failures`` (one sentence per problem) and must not be used as
truth silently. When the only problem is too few effective draws (no divergences), the
chains are continued until the number of draws has doubled, up to
``config.max_doublings`` times: more draws, the same rule - never a looser one.

A second sampler. Where NUTS cannot certify a posterior (GGSM probit at q <= 1 on
separable data: validation/references/slice_gibbs.py says why; GIG logistic, whose NUTS runs keep a
few divergences: validation/references/pg_gibbs.py), ``ReferenceConfig(sampler=SLICE_GIBBS)`` or
``PG_GIBBS`` runs a sampler built for that model, certified by the same rule (it has no
divergences; a slice update that exhausts its shrinkage steps counts as a failure). A
model's own sampler is handed over as its object, never looked up in a table: the model's
record resolves the names its reference chain and ``--reference`` use
(``ModelRecord.reference_sampler``, ``ModelRecord.reference_config``); only NUTS, this
wing's built-in, is known here by name.
:func:`first_certified_reference` tries a list of samplers in order and stops at the
first certified one; the Reference names its sampler in ``provenance["sampler"]``.

A pilot. A NUTS entry of such a list may ask for a pilot (``ReferenceConfig(pilot=True)``):
before the full run, a short NUTS run (:data:`~zoo.validation.references.certification.PILOT`: its
warm-up and draws) is checked by an explicit rule, :func:`pilot_decision`, for signs that
the full run cannot certify - divergences, energy or tree-depth failures, chains that
disagree, or an effective sample size per draw too small to reach the rule's ESS within
the run's cap of draws. If it predicts failure the full run is skipped and the next
sampler is tried at once; the pilot's draws stand in the ``tried`` list as an uncertified
run whose first failure says what the pilot saw. The last sampler of a list always runs
in full (a pilot only chooses between samplers: a wrong prediction costs time, never the
reference).

Results are cached on disk (netCDF draws + provenance JSON, each written atomically)
under a content hash of the model, its hyper-parameters, the data, the sampler settings,
the certification rule, a digest of the source code that defines the model and the
sampler (``base/code_digest.py``) and the package versions, much like posteriordb's reference
posteriors carry their provenance. A stored certificate is never trusted: every read
recomputes it from the stored draws and sampler statistics (whose digest the record
holds), with the current rule.

Chain layout. ``chain_method="parallel"`` (the default) puts one chain on each XLA CPU
device; it needs about half the wall time of "vectorized" or "sequential" (measured:
benchmarks/README.md, "Measurements behind design choices"). JAX exposes one CPU device
unless asked for more *before its backend starts* (the first JAX computation of the
process), so ``import zoo`` asks for ``zoo.HOST_DEVICES`` devices if the backend
has not started and the user has not chosen a count (:func:`zoo.request_host_devices`;
``ZOO_HOST_DEVICES=1`` in the environment turns this off). Extra host devices do not
slow single-device work (measured: a Cholesky/matmul loop and a small-op loop took the
same time with 1 and 4 devices). If the devices are missing anyway (something ran JAX
before this import), "parallel" falls back to "sequential", which yields bit-for-bit the
same draws (verified), so import order can change the speed, never the result.

The wing's files: ``sampler.py`` (the runner contract :class:`ReferenceRunner` and
:class:`ReferenceSampler`), ``certification.py`` (the rule and the pilot's rule), ``config.py``
(:class:`ReferenceConfig`, :class:`Reference`), ``cache.py`` (keys and entries), ``nuts.py``
(NUTS, and :func:`sampler_of`: the sampler a config runs; ``nuts_program.py``: NUTS as one
compiled program over many data sets, for SBC), ``certified_run.py`` (running, continuing,
the time limit, the first certified of several),
and each model's own sampler (``slice_gibbs.py``, ``pg_gibbs.py``, ``grid_gibbs.py``,
``parallel_tempering.py``, on the blocks of ``slice_sampling.py`` and ``polya_gamma.py``).
This package re-exports what callers outside the wing use.
"""
from __future__ import annotations

from .cache import cache_key, package_versions
from .certification import (
    CERTIFICATION,
    ESS_BULK_MIN,
    ESS_TAIL_MIN,
    MAX_DIVERGENCES,
    PILOT,
    RHAT_MAX,
    Certification,
    PilotRule,
    certify,
    nuts_energy_checks,
    pilot_config,
    pilot_decision,
)
from .config import Reference, ReferenceConfig
from .nuts import NUTS_SAMPLER, NutsRun, sampler_of
from .certified_run import (
    NoReference,
    ReferenceTimeout,
    cached_reference,
    first_certified_reference,
    run_reference,
)
from .sampler import NUTS, ReferenceRunner, ReferenceSampler, sampler_named

__all__ = [
    "CERTIFICATION", "ESS_BULK_MIN", "ESS_TAIL_MIN", "MAX_DIVERGENCES", "NUTS", "NUTS_SAMPLER", "PILOT", "RHAT_MAX",
    "Certification", "NoReference", "NutsRun", "PilotRule", "Reference", "ReferenceConfig", "ReferenceRunner",
    "ReferenceSampler", "ReferenceTimeout", "cache_key", "cached_reference", "certify", "first_certified_reference",
    "nuts_energy_checks", "package_versions", "pilot_config", "pilot_decision", "run_reference", "sampler_named",
    "sampler_of",
]
