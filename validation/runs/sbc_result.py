"""What an SBC or posterior SBC run returns: :class:`SBCResult`, frozen and typed, with its
counts in :class:`SBCCounts`; ``to_json`` / ``from_json`` in a versioned layout
(``base/result_format.py``), so that a result stored by a study is read back as the same
object, or refused with a reason.

The judge's views of the ranks are the judge's own typed records, documented where the judge
makes them: the uniformity test (:class:`~zoo.validation.judge.rank_uniformity.UniformityTest`,
``validation/judge/rank_uniformity.py``), what the run could detect
(:class:`~zoo.validation.judge.rank_power.RankPower`, ``rank_power.py``), coverage
(:class:`~zoo.validation.judge.rank_uniformity.CoverageView`) and contraction
(:class:`~zoo.validation.judge.rank_uniformity.ContractionView`). Their JSON is the layout
the judge's dicts had before they were typed, key for key, so results stored before read back.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from ..base.result_format import check_format, check_parts, frozen, stamp, thawed
from ..judge.rank_power import RankPower
from ..judge.rank_uniformity import ContractionView, CoverageView, UniformityTest
from .sbc_simulation import SBCSettings

#: the layout of a stored SBC result; bump it when a field changes meaning
SBC_RESULT_FORMAT = 1


@dataclass(frozen=True)
class SBCCounts:
    """How a run's simulations went: ``n_sims`` in all, ``ok`` ranked, ``failed`` fits (not
    ranked), ``point`` estimates (no draws to rank), ``redraws`` prior draws discarded,
    ``not_converged`` fits that said so, and the median seconds of one fit (None without)."""

    n_sims: int
    ok: int
    failed: int
    point: int
    redraws: int
    not_converged: int
    fit_seconds_median: float | None


@dataclass(frozen=True)
class SBCResult:
    """One SBC (or posterior SBC) run of one engine on one model.

    status: ``calibrated``, ``miscalibrated``, ``too few to call`` or ``not applicable``
    (validation/judge/sbc_verdict.py), with ``reason`` in words (ending with what the run could
    detect). kind: None for SBC from the prior, ``"posterior SBC"`` for posterior SBC (then
    ``conditioning`` says on what). settings: the run's
    :class:`~zoo.validation.runs.sbc_simulation.SBCSettings`. design: the
    simulated design's sizes and the problem's keywords; spec: the frozen model judged (its
    JSON); variant: the model variant the engine approximates (None: the model itself).
    counts, failure_messages: how the fits went. uniformity, power, coverage, contraction:
    the judge's views of the ranks (typed records, see above); glossary: what each ranked quantity is;
    ranks: (simulations, quantities). key, folder, reused, wall_seconds: where its
    simulations are stored, how many a rerun reused, and the seconds it ran. A run that did
    not start (no proper prior, an engine SBC does not apply to) has a status and a reason
    and little else."""

    model: str
    engine: str
    settings: SBCSettings
    status: str
    reason: str
    kind: str | None = None
    variant: str | None = None
    design: Mapping[str, Any] | None = None
    spec: Mapping[str, Any] | None = None
    conditioning: Mapping[str, Any] | None = None
    counts: SBCCounts | None = None
    failure_messages: tuple[str, ...] = ()
    uniformity: UniformityTest | None = None
    power: RankPower | None = None
    glossary: Mapping[str, str] = field(default_factory=dict)
    ranks: tuple[tuple[int, ...], ...] | None = None
    coverage: CoverageView | None = None
    contraction: ContractionView | None = None
    key: str | None = None
    folder: str | None = None
    reused: int = 0
    wall_seconds: float | None = None

    def __post_init__(self):
        # the JSON parts frozen all the way down, whatever the caller handed in
        for name in ("design", "spec", "conditioning", "glossary", "ranks", "failure_messages"):
            object.__setattr__(self, name, frozen(getattr(self, name)))

    def to_json(self) -> dict[str, Any]:
        """A JSON object, stamped with :data:`~zoo.validation.runs.sbc_result.SBC_RESULT_FORMAT`."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["settings"] = asdict(self.settings)
        d["counts"] = None if self.counts is None else asdict(self.counts)
        for name in _VIEWS:
            d[name] = None if d[name] is None else d[name].to_json()
        return stamp(thawed(d), SBC_RESULT_FORMAT)

    @classmethod
    def from_json(cls, d: Any) -> "SBCResult":
        """The result a stored JSON object holds; ValueError in one line naming what is wrong
        (a newer or unknown format, a part this zoo does not know, a missing one)."""
        check_format(d, "SBC result", current=SBC_RESULT_FORMAT,
                     required=("model", "engine", "settings", "status", "reason"))
        known = {f.name for f in fields(cls)}
        check_parts(d, "SBC result", known)
        kw = {k: v for k, v in d.items() if k in known}
        try:
            kw["settings"] = SBCSettings(**d["settings"])
            if d.get("counts") is not None:
                kw["counts"] = SBCCounts(**d["counts"])
        except TypeError as err:
            raise ValueError(f"not a stored SBC result: {err}") from None
        for name, view in _VIEWS.items():
            if d.get(name) is not None:
                try:
                    kw[name] = view.from_json(d[name])
                except ValueError as err:
                    raise ValueError(f"not a stored SBC result: its {name}: {err}") from None
        return cls(**kw)


#: the judge's views an SBC result holds, each with the type that reads its JSON
_VIEWS = {"uniformity": UniformityTest, "power": RankPower, "coverage": CoverageView, "contraction": ContractionView}


__all__ = ["SBCResult", "SBCCounts", "SBC_RESULT_FORMAT"]
