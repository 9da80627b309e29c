"""What a reference run is asked for (:class:`ReferenceConfig`) and what it returns
(:class:`Reference`: draws, certificate, provenance)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ...inference.posterior import DrawsPosterior, FitInfo
from ...models.base import Site
from .sampler import NUTS, ReferenceSampler


@dataclass(frozen=True)
class ReferenceConfig:
    """Settings of the reference sampler (NUTS unless ``sampler`` says otherwise).

    sampler: "nuts" (the wing's built-in, known by name), or a model's own sampler given as
    its :class:`~zoo.validation.references.sampler.ReferenceSampler` (``SLICE_GIBBS`` of
    ``slice_gibbs.py`` for GGSM probit, ``PG_GIBBS`` for GIG logistic, ...; a model's record
    resolves its names: ``ModelRecord.reference_sampler(name)``, ``reference_config``).
    Given a ReferenceSampler, ``sampler`` holds its name - what the cache key hashes and
    results files write - and ``sampler_entry`` the object, which runs it (not compared,
    not shown, not serialized). Any other name is a ValueError: no table of samplers is
    consulted. For the Gibbs samplers num_warmup and num_samples count sweeps; num_chains,
    seed and max_doublings apply as for NUTS, target_accept and max_tree_depth do not, and
    their chains need no layout choice.

    chain_method: "parallel" by default (one chain per CPU device; falls back to
    "sequential" when the process has fewer devices than chains, and runs "vectorized"
    where JAX's default device is an accelerator); the fastest layout in wall time
    (benchmarks/README.md, "Measurements behind design choices").
    "parallel" and "sequential" give identical draws (verified bit for bit);
    "vectorized" draws differ (batched arithmetic changes the last bits, and NUTS
    trajectories amplify that), so the layout is part of the cache key.
    max_doublings: when certification fails only on R-hat/ESS with zero divergences,
    the chains are continued until the draws double, at most this many times - or, in a
    run with a ``time_limit``, for as long as the next doubling is predicted to fit in the
    time left (its cost from the last stretch of draws, with a margin): a sampler given a
    budget uses it before giving up. The entry records its ``doublings`` and, for an
    uncertified run, why it stopped (``doublings_stopped``).
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    target_accept: float = 0.9
    max_tree_depth: int = 10
    seed: int = 0
    chain_method: str = "parallel"
    max_doublings: int = 2
    # given: a name ("nuts") or a ReferenceSampler; held: the name (its object: sampler_entry)
    sampler: str = NUTS
    # wall-clock seconds for the whole run (warm-up, draws, doublings); None: no limit.
    # A limited run happens in a child process that is killed when time is up
    # (:class:`ReferenceTimeout`); a run that finishes gives the same draws as without
    # a limit, so the limit is not part of the cache key. (Only a run that the limit let
    # continue past max_doublings has more draws than an unlimited one: a superset of the
    # same chains, with its doublings recorded.)
    time_limit: float | None = None
    # NUTS only: run a short pilot first (:data:`PILOT`) and skip this sampler when the
    # pilot predicts that it cannot certify (:func:`pilot_decision`). Acted on by
    # first_certified_reference for every sampler but the last of its list; the full
    # run's draws do not depend on it, so it is not part of the cache key.
    pilot: bool = False
    # the ReferenceSampler given as ``sampler`` (a model's own; None: NUTS by name), kept by
    # ``replace``. Out of equality, the repr, the settings and the cache key, which hold its
    # name (``sampler``); ``nuts.sampler_of(config)`` is the sampler a config runs
    sampler_entry: ReferenceSampler | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if isinstance(self.sampler, ReferenceSampler):
            object.__setattr__(self, "sampler_entry", self.sampler)
            object.__setattr__(self, "sampler", self.sampler.name)
        if not isinstance(self.sampler, str):
            raise TypeError(f"ReferenceConfig.sampler must be a sampler's name or a ReferenceSampler; "
                            f"got {self.sampler!r}")
        entry = self.sampler_entry
        if entry is None and self.sampler != NUTS:
            raise ValueError(f"unknown reference sampler {self.sampler!r}; known: {NUTS} (built in); a model's own "
                             "sampler is given as its ReferenceSampler, e.g. "
                             f"registry.get_model(model).reference_sampler({self.sampler!r})")
        if entry is not None and (not isinstance(entry, ReferenceSampler) or entry.name != self.sampler):
            raise ValueError(f"sampler_entry must be the ReferenceSampler called {self.sampler!r}; got {entry!r}")
        if self.pilot and self.sampler != "nuts":
            raise ValueError(f"pilot is a NUTS setting; the {self.sampler} sampler has none")
        if self.chain_method not in ("parallel", "sequential", "vectorized"):
            raise ValueError(
                f"chain_method must be 'parallel', 'sequential' or 'vectorized'; got {self.chain_method!r}"
            )
        for name in ("num_chains", "num_warmup", "num_samples", "max_tree_depth"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"ReferenceConfig.{name} must be a positive integer")
        if not 0.0 < self.target_accept < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1); got {self.target_accept}")
        if self.max_doublings < 0:
            raise ValueError("max_doublings must be >= 0")
        if self.time_limit is not None and not (
                isinstance(self.time_limit, (int, float)) and not isinstance(self.time_limit, bool)
                and 0 < self.time_limit < float("inf")):
            raise ValueError(f"time_limit must be a positive number of seconds or None; got {self.time_limit!r}")

    def sampler_settings(self) -> dict[str, Any]:
        """The settings that determine the draws (the cache key's share of the config).

        parallel and sequential produce the same draws, so they share a layout name.
        """
        settings = self.to_dict()
        settings.pop("chain_method")
        settings.pop("time_limit")
        settings.pop("pilot")
        if self.sampler != "nuts":
            # the Gibbs samplers: no step size, no trees; one chain per device or one
            # after another give the same draws (each chain has its own key)
            for name in ("target_accept", "max_tree_depth"):
                settings.pop(name)
            settings["sampler"] = f"zoo.{self.sampler}"
            return settings
        settings["chain_layout"] = "vectorized" if self.chain_method == "vectorized" else "per-chain"
        settings["sampler"] = "numpyro.NUTS"
        return settings

    def to_dict(self) -> dict[str, Any]:
        """Every setting, the sampler by its name (``dataclasses.asdict`` without the
        sampler's object): what results files write."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sampler_entry"}


@dataclass(frozen=True, eq=False)
class Reference:
    """A reference posterior (NUTS or a second sampler) with its certificate and provenance.

    posterior: DrawsPosterior over spec.sites(M), draws ``(chains, draws, *shape)``.
    idata: ArviZ InferenceData (posterior, sample_stats incl. diverging, constant_data
    Phi and y). certified: passes :data:`~zoo.validation.references.certification.CERTIFICATION`;
    failures: why not, as sentences.
    diagnostics: rhat_max, ess_bulk_min, ess_tail_min, divergences, per_site (lists).
    seconds: wall time of the sampling, compilation included (from the original run when
    read from the cache); compile_seconds: the part of it JAX spent tracing and compiling.
    """

    posterior: DrawsPosterior
    idata: Any
    certified: bool
    failures: list[str]
    diagnostics: dict[str, Any]
    seconds: float
    provenance: dict[str, Any]
    compile_seconds: float = 0.0
    from_cache: bool = False
    cache_path: str | None = None

    @property
    def sites(self) -> tuple[Site, ...]:
        """The sites the reference's posterior holds draws of (its ``posterior.sites``)."""
        return self.posterior.sites

    @property
    def sampler(self) -> str:
        """Which sampler produced the draws: nuts, slice-gibbs or pg-gibbs."""
        return _sampler_name(self.provenance.get("sampler", {}))

    def require_certified(self) -> "Reference":
        """Return self, or raise if the reference may not serve as ground truth."""
        if not self.certified:
            raise RuntimeError(f"{self.sampler} reference is not certified: " + "; ".join(self.failures))
        return self


def _fit_info(certified, failures, seconds, compile_seconds, sampler, diagnostics) -> FitInfo:
    return FitInfo(
        engine=_sampler_name(sampler),
        converged=bool(certified),
        n_iter=int(sampler["num_warmup"]) + int(sampler["num_samples_total"]),
        reason="; ".join(failures),
        seconds=max(float(seconds) - float(compile_seconds), 0.0),
        compile_seconds=float(compile_seconds),
        objective="",
        extra={"certified": bool(certified), "divergences": diagnostics.get("divergences")},
    )


def _sampler_name(sampler_settings: dict) -> str:
    """The sampler name in a provenance's sampler settings ("zoo.NAME/VERSION" for a
    model's own sampler, "numpyro.NUTS" for NUTS)."""
    text = str(sampler_settings.get("sampler", ""))
    return text[len("zoo."):].split("/", 1)[0] if text.startswith("zoo.") else "nuts"
