"""What a reference table returns (``validation/runs/reference_table.py`` runs it): a
:class:`ReferenceTableCell` per setting - the samplers of the model's reference chain that ran
(:class:`TriedReference`), the reference used (:class:`ReferenceUsed`), the engines' numbers
(:class:`EngineNumbers`), two references' agreement (:class:`ReferenceAgreement`), the modes
found (:class:`ModesFound`), where it ran (:class:`Machine`) - and the table of them
(:class:`ReferenceTable`); frozen and typed, with ``to_json`` / ``from_json``.

Stored layout. :meth:`ReferenceTableCell.to_json` is stamped ``"format": 1``
(:data:`REFERENCE_CELL_FORMAT`). Cells written before the tables were typed carry no
``"format"``: they are format 0, each benchmark's own untyped dict, and
:meth:`ReferenceTableCell.from_json` converts them explicitly (``_format_0_cell``, which says
what each old key becomes), so the committed cells rebuild their tables without a rerun.
"""
from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Mapping

from ..base.result_format import check_format, check_parts, frozen, record_fields, record_json, stamp
from .results import ReferenceSummary

#: the layout of a stored reference-table cell; bump it when a field changes meaning. 0: the
#: untyped cells written before (no "format"), read by conversion (``_format_0_cell``)
REFERENCE_CELL_FORMAT = 1
#: the layout of :meth:`ReferenceTable.to_json`
REFERENCE_TABLE_FORMAT = 1

_CELL = "reference-table cell"


# --------------------------------------------------------------------------------------
# The parts of a cell
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TriedReference:
    """One sampler of the reference chain as a cell keeps it: certified or not, its worst R-hat,
    smallest bulk ESS, divergences, seconds (compilation included) and kept draws a chain;
    ``time_limit``: the limit it ran out of (then no diagnostics). failures: the first three
    reasons it did not certify; None where not recorded (format-0 gig cells), as is
    ``draws_per_chain``."""

    sampler: str
    certified: bool
    rhat_max: float | None = None
    ess_bulk_min: float | None = None
    divergences: int | None = None
    seconds: float | None = None
    draws_per_chain: int | None = None
    time_limit: float | None = None
    failures: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.failures is not None:
            object.__setattr__(self, "failures", tuple(self.failures))

    @classmethod
    def of(cls, summary: ReferenceSummary) -> "TriedReference":
        """What a cell keeps of one sampler a comparison tried."""
        return cls(sampler=summary.sampler_name, certified=bool(summary.certified), rhat_max=summary.rhat_max,
                   ess_bulk_min=summary.ess_bulk_min, divergences=summary.divergences, seconds=summary.seconds,
                   draws_per_chain=summary.sampler.get("num_samples_total"), time_limit=summary.time_limit,
                   failures=tuple(summary.failures[:3]))

    def to_json(self) -> dict[str, Any]:
        """The sampler as a stored cell holds it (one of its ``tried``): its fields as a JSON
        object, in their declared order."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any, what: str = "a tried sampler") -> "TriedReference":
        """The tried sampler a stored cell's JSON object ``d`` holds; ValueError in one line
        for one that is not a JSON object, lacks a field or has a part this zoo does not know
        (``what`` names it in the message)."""
        return cls(**record_fields(cls, d, what, within=_CELL))


@dataclass(frozen=True)
class ReferenceUsed:
    """The reference ``zoo compare`` would use: the first sampler of the chain that certified
    (``sampler`` None and not certified where none did - or, in a compare-protocol cell, the
    run closest to certifying, not certified). Its diagnostics and timings are None where the
    cell did not record them (every-sampler cells keep them in ``tried``)."""

    sampler: str | None
    certified: bool
    rhat_max: float | None = None
    ess_bulk_min: float | None = None
    ess_tail_min: float | None = None
    seconds: float | None = None
    warm_seconds: float | None = None
    from_cache: bool | None = None

    @classmethod
    def of(cls, summary: ReferenceSummary) -> "ReferenceUsed":
        """What a cell keeps of the reference a comparison used (its
        :class:`~zoo.validation.runs.results.ReferenceSummary`): the sampler, whether it
        certified, its worst R-hat and smallest ESS, its seconds and whether it came from the
        cache."""
        return cls(sampler=summary.sampler_name, certified=bool(summary.certified), rhat_max=summary.rhat_max,
                   ess_bulk_min=summary.ess_bulk_min, ess_tail_min=summary.ess_tail_min, seconds=summary.seconds,
                   warm_seconds=summary.warm_seconds, from_cache=summary.from_cache)

    def to_json(self) -> dict[str, Any]:
        """The reference as a stored cell holds it (its ``reference``): the fields as a JSON
        object, in their declared order."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "ReferenceUsed":
        """The reference a stored cell's JSON object holds; ValueError in one line for one that
        is not a JSON object, lacks a field or has a part this zoo does not know."""
        return cls(**record_fields(cls, d, "the reference", within=_CELL))


@dataclass(frozen=True)
class ReferenceAgreement:
    """How far two reference samplers of the same model are apart
    (:func:`~zoo.validation.runs.reference_table.median_agreement`): the largest ``|z|`` over
    all coordinates of the difference of posterior medians, how many coordinates, how many
    with ``|z| > 3``, and the mean ``|p_a - p_b|`` of the test-set predictive
    probabilities. samplers, certified: the two samplers, in the chain's order, and whether each
    certified. second: the cross-check's own run of the second sampler (None where both runs
    are the cell's ``tried``)."""

    samplers: tuple[str, str]
    certified: tuple[bool, bool]
    max_abs_z_median: float
    n_coordinates: int
    n_abs_z_above_3: int
    pred_mae_between: float
    second: TriedReference | None = None

    def __post_init__(self):
        object.__setattr__(self, "samplers", tuple(self.samplers))
        object.__setattr__(self, "certified", tuple(self.certified))

    def to_json(self) -> dict[str, Any]:
        """The agreement as a stored cell holds it (its ``agreement``): the fields as a JSON
        object, in their declared order, ``second`` (if any) as a tried sampler's object."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "ReferenceAgreement":
        """The agreement a stored cell's JSON object holds, its ``second`` read by
        :meth:`TriedReference.from_json`; ValueError in one line for one that is not a JSON
        object, lacks a field or has a part this zoo does not know."""
        kw = record_fields(cls, d, "the agreement", within=_CELL)
        if kw.get("second") is not None:
            kw["second"] = TriedReference.from_json(kw["second"], "the agreement's second sampler")
        return cls(**kw)


@dataclass(frozen=True)
class EngineNumbers:
    """One engine in a cell: ``failure`` (None, or why it has no answer here: then every number
    is None), its warm seconds, whether it converged, the weights it kept (``n_basis``), the
    reference's warm seconds over its own, its test error; against a certified reference only:
    pred_mae, k-hat on the joint, the median sd ratio and standardized mean error, the median sd
    ratio of each group of coordinates the config names (``sd_ratio_groups``: GIG's noise and
    relevant coefficients), the marginal verdict's status; ``null_reasons``: why a metric is
    None (judge/metrics.py). A number the cell did not record is None."""

    engine: str
    failure: str | None = None
    seconds: float | None = None
    converged: bool | None = None
    n_basis: int | None = None
    speedup_vs_reference: float | None = None
    test_error: float | None = None
    pred_mae: float | None = None
    khat: float | None = None
    sd_ratio_median: float | None = None
    std_mean_err_median: float | None = None
    sd_ratio_groups: Mapping[str, float | None] = field(default_factory=dict)
    verdict: str | None = None
    null_reasons: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "sd_ratio_groups", frozen(self.sd_ratio_groups))
        object.__setattr__(self, "null_reasons", frozen(self.null_reasons))

    def to_json(self) -> dict[str, Any]:
        """The engine's numbers as a stored cell holds them (one of its ``engines``): the
        fields as a JSON object, in their declared order."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "EngineNumbers":
        """The engine's numbers a stored cell's JSON object holds; ValueError in one line for
        one that is not a JSON object, lacks ``engine`` or has a part this zoo does not know."""
        return cls(**record_fields(cls, d, "an engine", within=_CELL))


@dataclass(frozen=True)
class ModesFound:
    """The modes the draws of ``sampler`` (the reference; with none certified, the run closest
    to certifying: ``certified`` False) flow to (judge/modes.py: basins): how many, the largest
    basin's share and its standard error (None without a mode), the ascents that reached no
    proper mode of ``n_starts``, and whether the answer of ``point_engine`` is that main mode
    (None where that engine failed)."""

    sampler: str
    certified: bool
    n_modes: int
    main_share: float | None
    main_share_se: float | None
    n_failed: int
    n_starts: int
    point_engine: str | None = None
    point_is_main_mode: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The modes as a stored cell holds them (its ``modes``): the fields as a JSON object,
        in their declared order."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "ModesFound":
        """The modes a stored cell's JSON object holds; ValueError in one line for one that is
        not a JSON object, lacks a field or has a part this zoo does not know."""
        return cls(**record_fields(cls, d, "the modes", within=_CELL))


@dataclass(frozen=True)
class Machine:
    """Where a cell ran."""

    processor: str
    python: str
    cpus: int | None

    def to_json(self) -> dict[str, Any]:
        """The machine as a stored cell holds it (its ``machine``): processor, Python version
        and CPU count as a JSON object."""
        return record_json(self)

    @classmethod
    def from_json(cls, d: Any) -> "Machine":
        """The machine a stored cell's JSON object holds; ValueError in one line for one that
        is not a JSON object, lacks a field or has a part this zoo does not know."""
        return cls(**record_fields(cls, d, "the machine", within=_CELL))


def machine() -> Machine:
    """This machine."""
    import platform

    return Machine(processor=platform.processor() or platform.machine(), python=platform.python_version(),
                   cpus=os.cpu_count())


# --------------------------------------------------------------------------------------
# A cell
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceTableCell:
    """One cell of a reference table.

    The setting: model, data, split, params (the model's ``--param`` values), variant (the
    model variant whose prior was judged; None: the model's own), spec_changes (spec fields
    replaced after the protocol's ``prepare``: BBLR's ``prior``), label (the setting in words)
    and coordinates (where the cell sits in its benchmark's table, by that table's words: ggsm
    design, prior, q; gig k; grid case, prior, variant; bblr data, gamma, config, prior).
    spec: the frozen spec judged (its ``to_dict``; None where not recorded, format-0 cells of
    ggsm, gig and grid; a format-0 bblr cell's holds what it recorded: a, b, gamma, lam, prior).
    n_train, n_weights: the training design's size (None where not recorded).

    What ran: tried (each sampler of the chain that ran, in order), reference (the one used),
    moments (the record's analysis of which posterior moments exist: ``mean_exists``,
    ``sd_exists``, ``reason`` and the model's own keys, as its record documents them; None:
    all exist), engines (one :class:`EngineNumbers` each), reference_test_error, agreement (of
    two references: :class:`ReferenceAgreement`, None where not run), modes (None where not
    looked for), wall_seconds (the cell's computation, a later cross-check not counted: its
    second sampler's seconds are the agreement's), machine.
    """

    model: str
    data: str
    split: int
    params: Mapping[str, float]
    label: str
    coordinates: Mapping[str, Any]
    tried: tuple[TriedReference, ...]
    reference: ReferenceUsed
    variant: str | None = None
    spec_changes: Mapping[str, Any] = field(default_factory=dict)
    spec: Mapping[str, Any] | None = None
    n_train: int | None = None
    n_weights: int | None = None
    moments: Mapping[str, Any] | None = None
    engines: tuple[EngineNumbers, ...] = ()
    reference_test_error: float | None = None
    agreement: ReferenceAgreement | None = None
    modes: ModesFound | None = None
    wall_seconds: float | None = None
    machine: Machine | None = None

    def __post_init__(self):
        for name in ("params", "coordinates", "spec_changes", "spec", "moments"):
            object.__setattr__(self, name, frozen(getattr(self, name)))
        object.__setattr__(self, "tried", tuple(self.tried))
        object.__setattr__(self, "engines", tuple(self.engines))

    def engine(self, name: str) -> EngineNumbers | None:
        """The numbers of engine ``name`` (None where the cell has none)."""
        return next((e for e in self.engines if e.engine == name), None)

    def tried_run(self, sampler: str) -> TriedReference | None:
        """How ``sampler`` fared (None where it did not run)."""
        return next((t for t in self.tried if t.sampler == sampler), None)

    def to_json(self) -> dict[str, Any]:
        """A JSON object, stamped with :data:`REFERENCE_CELL_FORMAT`."""
        return stamp(record_json(self), REFERENCE_CELL_FORMAT)

    @classmethod
    def from_json(cls, d: Any) -> "ReferenceTableCell":
        """The cell a stored JSON object holds - of format 1, or of format 0 (no ``"format"``:
        the untyped cells written before, converted by ``_format_0_cell``); ValueError in one
        line naming what is wrong (a newer or unknown format, a part this zoo does not know, a
        missing one)."""
        if isinstance(d, Mapping) and "format" not in d:
            d = {"format": 0, **d}
        version = check_format(d, _CELL, current=REFERENCE_CELL_FORMAT, oldest=0)
        if version == 0:
            d = _format_0_cell(d)
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        check_format(d, _CELL, current=REFERENCE_CELL_FORMAT, oldest=1, required=tuple(required))
        check_parts(d, _CELL, {f.name for f in fields(cls)})
        kw = {k: v for k, v in d.items() if k != "format"}
        for name in ("tried", "engines"):
            if not isinstance(kw.get(name, []), list):
                raise ValueError(f"not a stored {_CELL}: its {name!r} is not a list")
        try:
            kw["tried"] = tuple(TriedReference.from_json(t) for t in kw["tried"])
            kw["reference"] = ReferenceUsed.from_json(kw["reference"])
            kw["engines"] = tuple(EngineNumbers.from_json(e) for e in kw.get("engines", []))
            for name, part in (("agreement", ReferenceAgreement), ("modes", ModesFound), ("machine", Machine)):
                if kw.get(name) is not None:
                    kw[name] = part.from_json(kw[name])
            return cls(**kw)
        except TypeError as err:  # a value of the wrong kind where a list or a mapping belongs
            raise ValueError(f"not a stored {_CELL}: {err}") from None


#: the sampler the key prefix ``gibbs_`` of a format-0 ggsm cross-check names
_GGSM_GIBBS = "slice-gibbs"


def _format_0_cell(d: Mapping[str, Any]) -> dict[str, Any]:
    """A format-0 cell (one of the four benchmarks' untyped dicts, told apart by a key only that
    layout has: ggsm ``design``, gig ``k``, grid ``case``, bblr ``gamma``) as the format-1 JSON object
    it stands for. What each old key becomes:

    * all: ``tried`` entries keep their keys (absent ones None: gig's lack ``draws_per_chain``
      and ``failures``); ``reference`` keeps its keys (absent ones None); ``wall_seconds`` and
      ``machine`` as they were; split 0 (every table ran split 0).
    * ggsm: model ggsm-probit, data = design, params q, a, b; coordinates design, prior, q; each
      ``engines`` entry an engine; ``cross_check`` the agreement of NUTS and slice-Gibbs
      (``nuts_certified``, ``gibbs_certified``), its ``gibbs_rhat_max`` and ``gibbs_seconds``
      the second sampler's run.
    * gig: model gig-logistic, data horii_synthetic, params k, theta; coordinates k; ``vb`` the
      engine vb, its ``sd_ratio_noise`` / ``sd_ratio_relevant`` the sd-ratio groups ``noise`` and
      ``relevant``, its ``reference_test_error`` the cell's.
    * grid: model grid-rvm; data and params as stored; variant None for p-grid (the model's own
      prior), else the variant; coordinates case, prior, variant; ``vb`` the engine it names,
      its ``reference_test_error`` the cell's; ``agreement`` that of the two samplers of
      ``tried`` (it was stored only where both certified).
    * bblr: model bblr, params gamma and config; spec_changes ``prior`` where not gaussian;
      spec a, b, gamma, lam, prior (``gamma2_over_lam`` is gamma^2 / lam of these);
      coordinates data, gamma, config, prior; ``engines`` sla and laplace, ``engines.reference``
      the reference's test error; ``agreement`` as grid's; ``modes`` with ``from`` its sampler
      and ``sla_is_main_mode`` SLA's point (a mode search started from SLA's answer).
    """
    layouts = {"design": "ggsm", "k": "gig", "case": "grid", "gamma": "bblr"}
    layout = next((name for key, name in layouts.items() if key in d), None)
    if layout is None:
        raise ValueError(f"not a stored {_CELL}: without a format and of none of the untyped layouts (no "
                         f"{', '.join(map(repr, layouts))})")
    needs = {"ggsm": ("design", "prior", "q", "a", "b", "engines", "moments"), "gig": ("k", "theta", "vb", "moments"),
             "grid": ("case", "data", "params", "prior", "variant", "vb", "moments", "n_train", "n_weights"),
             "bblr": ("data", "gamma", "config", "prior", "lam", "a", "b", "engines", "n_train", "n_weights")}[layout]
    missing = [k for k in ("reference", "tried", "wall_seconds", "machine", *needs) if k not in d]
    if missing:
        raise ValueError(f"not a stored {_CELL} of format 0 ({layout}'s layout): it lacks "
                         f"{', '.join(map(repr, missing))}")
    try:
        return _converted_format_0(d, layout)
    except (KeyError, TypeError, AttributeError) as err:  # a part inside lacks a key or is of another kind
        what = f"a part lacks {err}" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"not a stored {_CELL} of format 0 ({layout}'s layout): {what}") from None


def _converted_format_0(d: Mapping[str, Any], layout: str) -> dict[str, Any]:
    """:func:`_format_0_cell`'s conversion of a cell of ``layout`` with its top-level parts."""

    def part(value, what):
        if not isinstance(value, Mapping):
            raise ValueError(f"not a stored {_CELL} of format 0 ({layout}'s layout): {what} is not a JSON object")
        return value

    def tried_pair() -> tuple[str, str]:
        certified = [t["sampler"] for t in d["tried"] if isinstance(t, Mapping) and t.get("certified")]
        if len(certified) != 2:
            raise ValueError(f"not a stored {_CELL} of format 0 ({layout}'s layout): an agreement beside "
                             f"{len(certified)} certified sampler(s), not 2")
        return certified[0], certified[1]

    cell: dict[str, Any] = {"format": REFERENCE_CELL_FORMAT, "split": 0, "tried": list(d["tried"]),
                            "reference": dict(part(d["reference"], "its reference")),
                            "wall_seconds": d["wall_seconds"], "machine": d["machine"], "moments": d.get("moments")}
    if layout == "ggsm":
        cell.update(model="ggsm-probit", data=d["design"], params={"q": d["q"], "a": d["a"], "b": d["b"]},
                    label=f"{d['design']} {d['prior']} q={d['q']:g}",
                    coordinates={"design": d["design"], "prior": d["prior"], "q": d["q"]},
                    engines=[{"engine": name, **part(row, f"engine {name}")}
                             for name, row in part(d["engines"], "its engines").items()])
        x = d.get("cross_check")
        if x is not None:
            x = part(x, "its cross-check")
            cell["agreement"] = {
                "samplers": ["nuts", _GGSM_GIBBS], "certified": [x["nuts_certified"], x["gibbs_certified"]],
                **{k: x[k] for k in ("max_abs_z_median", "n_coordinates", "n_abs_z_above_3", "pred_mae_between")},
                "second": {"sampler": _GGSM_GIBBS, "certified": x["gibbs_certified"], "rhat_max": x["gibbs_rhat_max"],
                           "seconds": x["gibbs_seconds"]}}
    elif layout == "gig":
        vb = dict(part(d["vb"], "its vb"))
        groups = {"noise": vb.pop("sd_ratio_noise", None), "relevant": vb.pop("sd_ratio_relevant", None)}
        cell.update(model="gig-logistic", data="horii_synthetic", params={"k": d["k"], "theta": d["theta"]},
                    label=f"k = {d['k']:g}", coordinates={"k": d["k"]},
                    reference_test_error=vb.pop("reference_test_error", None),
                    engines=[{"engine": "vb", **vb, "sd_ratio_groups": groups}])
    elif layout == "grid":
        vb = dict(part(d["vb"], "its vb"))
        cell.update(model="grid-rvm", data=d["data"], params=d["params"],
                    label=f"{d['case']} {d['prior']} {d['variant']}",
                    coordinates={"case": d["case"], "prior": d["prior"], "variant": d["variant"]},
                    variant=None if d["variant"] == "p-grid" else d["variant"],
                    n_train=d["n_train"], n_weights=d["n_weights"],
                    reference_test_error=vb.pop("reference_test_error", None), engines=[vb])
    else:
        engines = dict(part(d["engines"], "its engines"))
        reference = part(engines.pop("reference", {}), "its engines' reference")
        cell.update(model="bblr", data=d["data"], params={"gamma": d["gamma"], "config": float(d["config"])},
                    label=f"{d['data']} gamma={d['gamma']:g} BBLR{d['config']} {d['prior']}",
                    coordinates={"data": d["data"], "gamma": d["gamma"], "config": d["config"], "prior": d["prior"]},
                    spec_changes={} if d["prior"] == "gaussian" else {"prior": d["prior"]},
                    spec={"model": "bblr", "a": d["a"], "b": d["b"], "gamma": d["gamma"], "prior": d["prior"],
                          "lam": d["lam"]},
                    n_train=d["n_train"], n_weights=d["n_weights"],
                    reference_test_error=reference.get("test_error"),
                    engines=[{"engine": name, **part(row, f"engine {name}")} for name, row in engines.items()])
        m = d.get("modes")
        if m is not None:
            m = dict(part(m, "its modes"))
            cell["modes"] = {"sampler": m.pop("from", None), **{k: v for k, v in m.items() if k != "sla_is_main_mode"},
                             "point_engine": "sla", "point_is_main_mode": m.get("sla_is_main_mode")}
    if layout in ("grid", "bblr") and d.get("agreement") is not None:
        a = part(d["agreement"], "its agreement")
        cell["agreement"] = {"samplers": list(tried_pair()), "certified": [True, True], **a}
    return cell


@dataclass(frozen=True)
class ReferenceTable:
    """A table's cells in the order of its configs, each with its file stem (``names``), and
    which of them this run computed, completed with a cross-check, or found stored."""

    names: tuple[str, ...]
    cells: tuple[ReferenceTableCell, ...]
    computed: tuple[str, ...] = ()
    cross_checked: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()
    out_dir: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name in ("names", "cells", "computed", "cross_checked", "reused"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if len(self.names) != len(self.cells):
            raise ValueError(f"a reference table of {len(self.cells)} cells has {len(self.names)} names")

    def cell(self, name: str) -> ReferenceTableCell:
        """The cell stored as ``name``; KeyError naming the table's cells otherwise."""
        try:
            return self.cells[self.names.index(name)]
        except ValueError:
            raise KeyError(f"no cell {name!r} in this table; it has {', '.join(self.names)}") from None

    def to_json(self) -> dict[str, Any]:
        """A JSON object, stamped with :data:`REFERENCE_TABLE_FORMAT` (its cells stamped too)."""
        return stamp({"names": list(self.names), "cells": [c.to_json() for c in self.cells],
                      "computed": list(self.computed), "cross_checked": list(self.cross_checked),
                      "reused": list(self.reused)}, REFERENCE_TABLE_FORMAT)

    @classmethod
    def from_json(cls, d: Any, *, out_dir: str | None = None) -> "ReferenceTable":
        """The table a stored JSON object holds (the layout of :meth:`to_json`), each cell read
        by :meth:`ReferenceTableCell.from_json`; ValueError in one line for a newer or unknown
        format, a missing or unknown part, or a cell that cannot be read. ``out_dir``: the
        folder the table is stored in, kept with it (it is not part of the JSON)."""
        check_format(d, "reference table", current=REFERENCE_TABLE_FORMAT,
                     required=("names", "cells", "computed", "cross_checked", "reused"))
        check_parts(d, "reference table", {"names", "cells", "computed", "cross_checked", "reused"})
        return cls(names=d["names"], cells=tuple(ReferenceTableCell.from_json(c) for c in d["cells"]),
                   computed=d["computed"], cross_checked=d["cross_checked"], reused=d["reused"], out_dir=out_dir)


__all__ = ["REFERENCE_CELL_FORMAT", "REFERENCE_TABLE_FORMAT", "TriedReference", "ReferenceUsed",
           "ReferenceAgreement", "EngineNumbers", "ModesFound", "Machine", "machine", "ReferenceTableCell",
           "ReferenceTable"]
