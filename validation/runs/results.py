"""What a comparison returns: frozen dataclasses, turned into JSON only at the edge.

:func:`~zoo.validation.runs.compare.compare` builds a :class:`ComparisonResult`: the frozen
problem (model, data, hyper-parameters), the reference's :class:`ReferenceSummary` (and every
sampler tried, and the variants' references), and one :class:`EngineRow` per engine with its
metrics, its :class:`~zoo.validation.judge.verdict.Verdict` s and, for an engine that fits a
variant of the model, an :class:`AgainstVariant` row. The report, the command line, the study
and the benchmarks read these attributes; ``to_json()`` gives the ``results.json`` layout (one
flat dict per engine row, the variant's numbers under ``"vs_<variant>"``), and ``from_json``
reads a stored one back, so a study's stored cells are read as the same types.

The metrics of a row stay a mapping ``name -> value`` (the keys of
:data:`~zoo.validation.judge.metrics.METRIC_KEYS`, with ``null_reasons`` saying why a value
is None): they are a table the report lays out by name, not fields a reader picks one by one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from ..base.result_format import check_format, stamp
from ..base.tables import Table
from ..judge.metrics import METRIC_KEYS
from ..judge.verdict import Verdict
from ..references import Reference, ReferenceTimeout


# --------------------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceSummary:
    """One reference run as a comparison records it: certificate, diagnostics, timings.

    ``sampler_name`` is None when there is no reference at all (every sampler of the chain
    ran out of time); a single sampler that ran out of time (an entry of
    ``references_tried``) keeps its name and has ``time_limit``. The diagnostics are None
    where a sampler has none (no draws; ebfmi_min and treedepth_fraction are NUTS's only).
    """

    sampler_name: str | None
    certified: bool
    failures: tuple[str, ...] = ()
    rhat_max: float | None = None
    ess_bulk_min: float | None = None
    ess_tail_min: float | None = None
    divergences: int | None = None
    ebfmi_min: float | None = None
    treedepth_fraction: float | None = None
    # every sampled site the certificate covers, latent ones included
    diagnosed_sites: tuple[str, ...] = ()
    seconds: float | None = None
    # sampling alone: JAX's tracing/compilation time taken out (as for the engines)
    warm_seconds: float | None = None
    compile_seconds: float | None = None
    from_cache: bool = False
    # the sampler's settings as its provenance records them
    sampler: Mapping[str, Any] = field(default_factory=dict)
    time_limit: float | None = None

    @property
    def ran_out_of_time(self) -> bool:
        """Whether this stands for no reference at all: every sampler ran out of time."""
        return self.sampler_name is None

    @classmethod
    def of(cls, ref: Reference) -> "ReferenceSummary":
        """The summary of a finished reference run: its sampler, certificate and failures, the
        diagnostics of its certificate, its seconds (in all, warm, compiling), whether it was
        read from the cache and the sampler's settings from its provenance."""
        d = ref.diagnostics
        return cls(
            sampler_name=ref.sampler, certified=bool(ref.certified), failures=tuple(ref.failures),
            rhat_max=d["rhat_max"], ess_bulk_min=d["ess_bulk_min"], ess_tail_min=d["ess_tail_min"],
            divergences=int(d["divergences"]), ebfmi_min=d.get("ebfmi_min"),
            treedepth_fraction=d.get("treedepth_fraction"), diagnosed_sites=tuple(d.get("diagnosed_sites", ())),
            seconds=float(ref.seconds), warm_seconds=float(ref.posterior.info.seconds),
            compile_seconds=float(ref.compile_seconds), from_cache=bool(getattr(ref, "from_cache", False)),
            sampler=dict(ref.provenance.get("sampler", {})))

    @classmethod
    def timed_out(cls, err: ReferenceTimeout) -> "ReferenceSummary":
        """One sampler that ran out of time: no draws, so no diagnostics and no timings."""
        return cls(sampler_name=err.sampler, certified=False, failures=(str(err),), time_limit=err.time_limit)

    @classmethod
    def none(cls, timed_out: list[tuple[str, float]]) -> "ReferenceSummary":
        """No reference: every sampler ran out of time; one failure per sampler, in the words
        of the warning the user saw when it was stopped."""
        return cls(sampler_name=None, certified=False,
                   failures=tuple(str(ReferenceTimeout(s, limit)) for s, limit in timed_out))

    def to_json(self) -> dict[str, Any]:
        """The reference as ``results.json`` stores it (``reference``, each of
        ``references_tried`` and ``variant_references``): a flat JSON object of its fields,
        ``time_limit`` only where the sampler had one."""
        out = {"certified": self.certified, "failures": list(self.failures), "rhat_max": self.rhat_max,
               "ess_bulk_min": self.ess_bulk_min, "ess_tail_min": self.ess_tail_min,
               "divergences": self.divergences, "ebfmi_min": self.ebfmi_min,
               "treedepth_fraction": self.treedepth_fraction, "diagnosed_sites": list(self.diagnosed_sites),
               "seconds": self.seconds, "warm_seconds": self.warm_seconds, "compile_seconds": self.compile_seconds,
               "from_cache": self.from_cache, "sampler_name": self.sampler_name, "sampler": dict(self.sampler)}
        if self.time_limit is not None:
            out["time_limit"] = self.time_limit
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ReferenceSummary":
        """The summary a stored ``results.json`` object holds (the layout of :meth:`to_json`);
        a key that is not a field is a TypeError."""
        return cls(**{**d, "failures": tuple(d.get("failures", ())),
                      "diagnosed_sites": tuple(d.get("diagnosed_sites", ()))})


# --------------------------------------------------------------------------------------
# The engines
# --------------------------------------------------------------------------------------
def _verdict_json(v: Verdict | None) -> dict[str, Any]:
    return {} if v is None else v.to_json()


@dataclass(frozen=True)
class AgainstVariant:
    """An engine that fits a variant of the model (PCVM's Laplace its surrogate, gridRVM's
    s-grid engines the s-grid prior), measured against that variant's own reference: its
    distance there is its approximation error. No verdicts when the variant has no
    reference."""

    variant: str
    metrics: Mapping[str, Any]
    reference_certified: bool
    verdict: Verdict | None = None
    joint_verdict: Verdict | None = None
    distribution_verdict: Verdict | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as ``results.json`` stores it under its engine's ``"vs_<variant>"``: the
        metrics, ``reference_certified`` and each verdict there is, flat in one JSON object."""
        return {**self.metrics, "reference_certified": self.reference_certified, **_verdicts_json(self)}

    @classmethod
    def from_json(cls, variant: str, d: Mapping[str, Any]) -> "AgainstVariant":
        """The row against ``variant`` a stored ``"vs_<variant>"`` object holds: the metrics
        among :data:`~zoo.validation.judge.metrics.METRIC_KEYS` that it has, and its verdicts
        (None for one stored before that verdict existed)."""
        return cls(variant=variant, metrics={k: d[k] for k in METRIC_KEYS if k in d},
                   reference_certified=bool(d["reference_certified"]), **_verdicts_from_json(d))


#: the verdicts of an engine row, as results.json names them
VERDICT_FIELDS = ("verdict", "joint_verdict", "distribution_verdict")


def _verdicts_json(row) -> dict[str, Any]:
    return {k: getattr(row, k).to_json() for k in VERDICT_FIELDS if getattr(row, k) is not None}


def _verdicts_from_json(d: Mapping[str, Any]) -> dict[str, Verdict | None]:
    """The verdicts of a stored row; one stored before a verdict existed has None for it."""
    return {k: Verdict.from_json(d[k]) if d.get(k) else None for k in VERDICT_FIELDS}


class VerdictRow(NamedTuple):
    """One engine's three verdicts against one reference (variant None: the model's own)."""

    engine: str
    variant: str | None
    marginal: Verdict
    joint: Verdict | None
    distribution: Verdict | None


#: the fields of an engine row besides its metrics, verdicts and variant, in results.json's order
_ROW_FIELDS = ("kind", "description", "other_model", "n_basis", "seconds", "compile_seconds", "converged", "reason",
               "n_iter", "objective", "speedup_vs_reference", "failure", "pruned_vs_reference")


@dataclass(frozen=True)
class EngineRow:
    """One engine of a comparison: its metrics against the reference, its fit, its verdicts.

    failure: None, or why the engine has no posterior here (one line; every metric is then
    None with that reason, and there are no verdicts). seconds / compile_seconds: the warm
    fit and the compilation of the first one. speedup_vs_reference: the reference's warm
    sampling time over the engine's warm fit. pruned_vs_reference: the weights the engine
    set to exactly 0, each beside the reference's marginal.
    """

    name: str
    metrics: Mapping[str, Any]
    kind: str
    description: str
    other_model: str | None
    n_basis: int | None
    seconds: float | None
    compile_seconds: float | None
    converged: bool
    reason: str
    n_iter: int | None
    objective: str
    speedup_vs_reference: float | None
    failure: str | None
    pruned_vs_reference: tuple[Mapping[str, Any], ...] | None
    verdict: Verdict | None = None
    joint_verdict: Verdict | None = None
    distribution_verdict: Verdict | None = None
    against_variant: AgainstVariant | None = None

    def to_json(self) -> dict[str, Any]:
        """The engine's row as ``results.json`` stores it under ``engines``: its metrics and fit
        fields flat in one JSON object, then its verdicts, and the row against a variant (if
        any) under ``"vs_<variant>"``."""
        out = {**self.metrics, **{k: getattr(self, k) for k in _ROW_FIELDS}}
        if self.pruned_vs_reference is not None:
            out["pruned_vs_reference"] = [dict(r) for r in self.pruned_vs_reference]
        out.update(_verdicts_json(self))
        if self.against_variant is not None:
            out[f"vs_{self.against_variant.variant}"] = self.against_variant.to_json()
        return out

    @classmethod
    def from_json(cls, name: str, d: Mapping[str, Any]) -> "EngineRow":
        """The row of engine ``name`` a stored ``results.json`` object holds (the layout of
        :meth:`to_json`): a fit field it lacks is None, a verdict stored before that verdict
        existed is None, and a ``"vs_<variant>"`` part is read by
        :meth:`AgainstVariant.from_json`."""
        variants = [k for k in d if k.startswith("vs_")]
        pruned = d.get("pruned_vs_reference")
        return cls(name=name, metrics={k: d[k] for k in METRIC_KEYS if k in d},
                   **{k: d.get(k) for k in _ROW_FIELDS if k != "pruned_vs_reference"},
                   pruned_vs_reference=None if pruned is None else tuple(pruned), **_verdicts_from_json(d),
                   against_variant=AgainstVariant.from_json(variants[0][3:], d[variants[0]]) if variants else None)


# --------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComparisonResult:
    """Everything a comparison measured. ``reference`` stands for no reference when every
    sampler ran out of time (``reference.ran_out_of_time``); ``references_tried`` lists every
    sampler run in order; ``variant_references`` the reference of each model variant an
    engine fits. ``config`` records what was asked for (engines, params, reference settings,
    seed, metric draws)."""

    model: str
    data: str
    split: int
    n_train: int
    n_test: int | None  # None: a general model, which has no test set
    hyper: Mapping[str, Any]
    selection: Mapping[str, Any]
    moments: Mapping[str, Any] | None
    spec: Mapping[str, Any]
    reference: ReferenceSummary
    references_tried: tuple[ReferenceSummary, ...]
    variant_references: Mapping[str, ReferenceSummary]
    reference_test_error: float | None
    engines: Mapping[str, EngineRow]
    config: Mapping[str, Any]
    # the evidence verdicts (validation/runs/compare.py ``_evidence``): mode, seconds, the
    # reference log Z per model or variant, each engine's value, kind and verdict; None
    # when off or when no engine reports a log evidence
    evidence: Mapping[str, Any] | None = None
    # Ctrl-C stopped the comparison: the engines that finished have their rows, the others
    # a failure saying they were interrupted or not run
    interrupted: bool = False

    @property
    def verdicts(self) -> list[VerdictRow]:
        """The verdicts of every engine that has them (variant None), then of every engine
        against the reference of the variant it fits."""
        rows = [VerdictRow(name, None, r.verdict, r.joint_verdict, r.distribution_verdict)
                for name, r in self.engines.items() if r.verdict is not None]
        rows += [VerdictRow(name, r.against_variant.variant, r.against_variant.verdict,
                            r.against_variant.joint_verdict, r.against_variant.distribution_verdict)
                 for name, r in self.engines.items()
                 if r.against_variant is not None and r.against_variant.verdict is not None]
        return rows

    @property
    def classifier(self) -> bool:
        """Whether the model judged is a classifier (one of the zoo's five): a general model
        (models/general.py) has no test set (``n_test`` None), and its results no predictive
        metrics and no weights kept."""
        return self.n_test is not None

    def table(self, *, timings: bool = True, variants: bool = False) -> Table:
        """The engines as a :class:`~zoo.validation.base.tables.Table`, one row per engine,
        the columns of :data:`ENGINE_COLUMNS` (the report's table of engines is this table).

        ``timings``: keep the three timing columns (they change from run to run; a lesson or a
        test that compares numbers drops them). ``variants``: after each engine that fits a
        variant of the model, a row "<engine> vs <variant> reference" measured against that
        variant's own reference (its approximation error alone). A failed engine's row holds
        its failure in the first metric column. The notes say why a value is null.
        """
        columns = ENGINE_COLUMNS if timings else tuple(c for c in ENGINE_COLUMNS if c not in TIMING_COLUMNS)
        if not self.classifier:  # no weights to keep, no predictive probabilities, no test set
            columns = tuple(c for c in columns if c not in CLASSIFIER_COLUMNS)
        rows, notes = [], []
        for name, r in self.engines.items():
            rows.append(_engine_cells(name, r, columns))
            reasons = (r.metrics.get("null_reasons") or {}) if not r.failure else {}
            shown = {METRIC_OF_COLUMN[c] for c in columns if c in METRIC_OF_COLUMN}
            notes += [f"{name}: {k} is null: {why}" for k, why in reasons.items() if k in shown]
            if variants and r.against_variant is not None:
                rows.append(_engine_cells(f"{name} vs {r.against_variant.variant} reference", r, columns,
                                          r.against_variant))
        return Table(columns, tuple(rows), dict(ENGINE_DIGITS), tuple(notes))

    def to_json(self) -> dict[str, Any]:
        """The ``results.json`` layout, stamped with :data:`COMPARISON_FORMAT`."""
        return stamp({
            "model": self.model, "data": self.data, "split": self.split, "n_train": self.n_train,
            "n_test": self.n_test, "hyper": dict(self.hyper), "selection": dict(self.selection),
            "moments": None if self.moments is None else dict(self.moments), "spec": dict(self.spec),
            "reference": self.reference.to_json(),
            "references_tried": [r.to_json() for r in self.references_tried],
            "variant_references": {k: v.to_json() for k, v in self.variant_references.items()},
            "reference_test_error": self.reference_test_error,
            "engines": {k: r.to_json() for k, r in self.engines.items()},
            "config": dict(self.config),
            "evidence": None if self.evidence is None else dict(self.evidence),
            "interrupted": self.interrupted,
        }, COMPARISON_FORMAT)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ComparisonResult":
        """A stored comparison read back; ValueError with the reason for one this zoo cannot
        read (a newer format, not a comparison, a key missing: base/result_format.py)."""
        check_format(d, "comparison result", current=COMPARISON_FORMAT, required=COMPARISON_KEYS)
        return cls(
            **{k: d[k] for k in ("model", "data", "split", "n_train", "n_test", "hyper", "selection", "moments",
                                 "spec", "reference_test_error", "config")},
            reference=ReferenceSummary.from_json(d["reference"]),
            references_tried=tuple(ReferenceSummary.from_json(r) for r in d["references_tried"]),
            variant_references={k: ReferenceSummary.from_json(v) for k, v in d["variant_references"].items()},
            engines={k: EngineRow.from_json(k, r) for k, r in d["engines"].items()},
            evidence=d.get("evidence"), interrupted=bool(d.get("interrupted", False)))


#: the layout of ComparisonResult.to_json (results.json, a study's compare cells); bump when it
#: changes, and keep from_json reading the older ones it can. 1: the layout before formats
#: were stamped (such files carry no "format" and read as 1)
COMPARISON_FORMAT = 1
#: what every stored comparison holds
COMPARISON_KEYS = ("model", "data", "split", "n_train", "n_test", "hyper", "selection", "moments", "spec",
                   "reference", "references_tried", "variant_references", "reference_test_error", "engines",
                   "config")

#: the columns of :meth:`ComparisonResult.table`, in order
ENGINE_COLUMNS = ("engine", "kind", "weights kept", "pred_mae", "std mean err (median)", "std mean err (max)",
                  "sd ratio (median)", "KL(q, ref Gauss)", "k-hat", "outside support", "test error", "AUC",
                  "verdict", "joint verdict", "distribution verdict", "seconds (warm)", "compile s",
                  "speed-up vs reference")
TIMING_COLUMNS = ("seconds (warm)", "compile s", "speed-up vs reference")
#: the columns only a classifier's table has
CLASSIFIER_COLUMNS = ("weights kept", "pred_mae", "test error", "AUC")
#: the metric (a key of METRIC_KEYS) each metric column shows
METRIC_OF_COLUMN = {"pred_mae": "pred_mae", "std mean err (median)": "std_mean_err_median",
                    "std mean err (max)": "std_mean_err_max", "sd ratio (median)": "sd_ratio_median",
                    "KL(q, ref Gauss)": "kl_gauss", "k-hat": "khat", "outside support": "outside_support_fraction",
                    "test error": "test_error", "AUC": "auc"}
ENGINE_DIGITS = {"std mean err (median)": 3, "std mean err (max)": 3, "sd ratio (median)": 3,
                 "KL(q, ref Gauss)": 3, "k-hat": 3, "outside support": 3, "seconds (warm)": 3, "compile s": 2,
                 "speed-up vs reference": 1}


def _engine_cells(name: str, row: EngineRow, columns, against: AgainstVariant | None = None) -> tuple:
    """One table row: the values of ``columns`` for an engine's row, or, with ``against``,
    for that engine measured against its variant's reference (no timings there)."""
    source = row if against is None else against
    values = {"engine": name, "kind": row.kind, "weights kept": row.n_basis,
              "verdict": None if source.verdict is None else source.verdict.status,
              "joint verdict": None if source.joint_verdict is None else source.joint_verdict.status,
              "distribution verdict": (None if source.distribution_verdict is None
                                       else source.distribution_verdict.status),
              "seconds (warm)": row.seconds if against is None else None,
              "compile s": row.compile_seconds if against is None else None,
              "speed-up vs reference": row.speedup_vs_reference if against is None else None}
    values |= {c: source.metrics.get(m) for c, m in METRIC_OF_COLUMN.items()}
    if row.failure and against is None:
        # no fit, so nothing was measured: empty cells (a null would read as "measured, none"),
        # the failure in place of the first metric
        values = {c: (values[c] if c in ("engine", "kind") else "") for c in values}
        values["weights kept"] = "-" if "weights kept" in columns else None
        first = next(c for c in columns if c in METRIC_OF_COLUMN or c in TIMING_COLUMNS)
        values[first] = f"failed: {row.failure}"
    return tuple(values[c] for c in columns)


__all__ = ["ReferenceSummary", "AgainstVariant", "EngineRow", "ComparisonResult", "VerdictRow", "ENGINE_COLUMNS",
           "COMPARISON_FORMAT"]
