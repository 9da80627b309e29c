"""What a planted-defect battery returns: :class:`BatteryResult`, frozen and typed, one
:class:`BatteryRow` per detector and defect; ``to_json`` / ``from_json`` in a versioned layout
(``base/result_format.py``), which is also the layout of the ``battery.json`` a run stores and of
the benchmarks' collections of batteries (:func:`load_batteries`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from typing import Any, Mapping

from ..base.result_format import check_format, check_parts, frozen, stamp, thawed

#: the layout of a stored battery; bump it when a field changes meaning
BATTERY_RESULT_FORMAT = 1


@dataclass(frozen=True)
class BatteryRow:
    """One detector on one engine as planted: ``detected`` of ``trials`` flagged it.

    failed_fits: fits that failed (no trial). not_applicable: data sets where a verdict
    declined (e.g. the joint verdict on a pruned posterior; verdict rows only). too_few:
    SBC replicates too small to call (counted as trials that detected nothing; SBC rows
    only). None where a row does not count it."""

    detector: str
    defect: str
    detected: int
    trials: int
    failed_fits: int = 0
    not_applicable: int | None = None
    too_few: int | None = None

    @property
    def rate(self) -> float | None:
        """detected / trials, None without trials."""
        return self.detected / self.trials if self.trials else None

    def to_json(self) -> dict[str, Any]:
        """The row as the JSON object a stored battery holds (one of its ``rows``): its
        fields by name, those that are None left out."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class BatteryResult:
    """The battery of one engine on one model: ``rows`` (detector x defect, in the order the
    report shows them), ``defects`` (name -> what it plants), the data sets run and the
    certified ones among them (only those are trials of the verdicts), the settings
    (``BatterySettings`` as JSON), the seconds it ran, and ``note``: a remark a benchmark
    stored beside the result (None)."""

    model: str
    engine: str
    settings: Mapping[str, Any]
    defects: Mapping[str, str]
    rows: tuple[BatteryRow, ...]
    certified_datasets: int
    datasets: int
    seconds: float | None = None
    note: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "settings", frozen(self.settings))
        object.__setattr__(self, "defects", frozen(self.defects))
        object.__setattr__(self, "rows", tuple(self.rows))

    def to_json(self) -> dict[str, Any]:
        """A JSON object, stamped with
        :data:`~zoo.validation.runs.battery_result.BATTERY_RESULT_FORMAT`."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for optional in ("seconds", "note"):  # absent where not known, as stored before
            if d[optional] is None:
                del d[optional]
        d["rows"] = [r.to_json() for r in self.rows]
        return stamp(thawed(d), BATTERY_RESULT_FORMAT)

    @classmethod
    def from_json(cls, d: Any) -> "BatteryResult":
        """The battery a stored JSON object holds; ValueError in one line naming what is wrong."""
        check_format(d, "defect battery", current=BATTERY_RESULT_FORMAT,
                     required=("model", "engine", "settings", "defects", "rows", "certified_datasets", "datasets"))
        check_parts(d, "defect battery", {f.name for f in fields(cls)})
        try:
            rows = tuple(BatteryRow(**r) for r in d["rows"])
        except TypeError as err:
            raise ValueError(f"not a stored defect battery: a row {err}") from None
        return cls(**{**{k: v for k, v in d.items() if k != "format"}, "rows": rows})


def load_batteries(path) -> dict[str, BatteryResult]:
    """A benchmark's stored collection of batteries (label -> battery, one JSON object), each
    read by :meth:`BatteryResult.from_json`; ValueError naming the file and the label of one
    that cannot be read."""
    with open(os.fspath(path), encoding="utf-8") as fh:
        stored = json.load(fh)
    if not isinstance(stored, dict):
        raise ValueError(f"{path}: not a collection of batteries (label -> battery)")
    out = {}
    for label, battery in stored.items():
        try:
            out[label] = BatteryResult.from_json(battery)
        except ValueError as err:
            raise ValueError(f"{path}: {label}: {err}") from None
    return out


__all__ = ["BatteryResult", "BatteryRow", "BATTERY_RESULT_FORMAT", "load_batteries"]
