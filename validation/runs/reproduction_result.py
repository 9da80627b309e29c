"""What a reproduction (``zoo reproduce ENTRY``: a paper's experiment rerun, ``zoo.reproductions``)
returns: :class:`ReproductionResult`, frozen and typed, with ``to_json`` / ``from_json`` in a
versioned layout (``base/result_format.py``) - the layout of the ``table.json`` a run stores.

The run's own parts (its entry, settings, cell counts, seconds, device) are fields; the entry's
numbers are its own JSON (``table``: rows, claims, cells - each paper's layout, documented in its
module) and its table in markdown (``markdown``), so that the report
(``validation/report/reproduction_report.py``) is written from the stored result alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..base.result_format import check_format, frozen, stamp, thawed

#: the layout of a stored reproduction. 2: the entry's description and its markdown table are
#: stored with its numbers (format 1, the table.json written before results were typed, lacks
#: them, so its report cannot be rebuilt from it: it is refused, and the run's cells make it
#: again at no cost)
REPRODUCTION_FORMAT = 2

#: the run's own parts in the stored JSON; every other key is the entry's table
RUN_PARTS = ("entry", "description", "settings", "defaults", "cells_computed", "cells_reused",
             "wall_seconds_this_run", "device", "markdown")


@dataclass(frozen=True)
class ReproductionResult:
    """One run of a reproduction entry.

    entry, description: the entry's name and what it reproduces. settings: the run's
    repetitions, seed, jobs and the entry's options as parsed; defaults: the entry's default
    sizes, in words. cells_computed, cells_reused: the units of work fitted in this run and
    found on disk. wall_seconds_this_run: its seconds. device: where it computed, in words
    (None: not said). markdown: the entry's table (our numbers beside the paper's, each marked
    reproduced / NOT reproduced with its criterion). table: the entry's numbers as JSON, in its
    own layout; a run whose cells failed has ``complete: False`` and ``failed`` (cell, reason)
    there instead. folder: where it is stored (not part of the result's value)."""

    entry: str
    description: str
    settings: Mapping[str, Any]
    defaults: str
    cells_computed: int
    cells_reused: int
    wall_seconds_this_run: float
    markdown: str
    table: Mapping[str, Any]
    device: str | None = None
    folder: str | None = field(default=None, compare=False)

    def __post_init__(self):
        clash = sorted(set(self.table) & set(RUN_PARTS + ("format",)))
        if clash:
            raise ValueError(f"entry {self.entry}'s table uses the run's own key(s) {', '.join(clash)}")
        object.__setattr__(self, "settings", frozen(self.settings))
        object.__setattr__(self, "table", frozen(self.table))

    @property
    def failed(self) -> list[tuple[str, str]]:
        """(cell, reason) of every cell that failed ([] for a complete run)."""
        return [(f["cell"], f["reason"]) for f in self.table.get("failed", ())]

    def to_json(self) -> dict[str, Any]:
        """The ``table.json`` layout: the run's parts and the entry's table side by side, stamped
        with :data:`~zoo.validation.runs.reproduction_result.REPRODUCTION_FORMAT`."""
        run = {"entry": self.entry, "description": self.description, "settings": self.settings,
               "defaults": self.defaults, "cells_computed": self.cells_computed, "cells_reused": self.cells_reused,
               "wall_seconds_this_run": self.wall_seconds_this_run,
               **({"device": self.device} if self.device is not None else {}), "markdown": self.markdown}
        return stamp(thawed({**run, **self.table}), REPRODUCTION_FORMAT)

    @classmethod
    def from_json(cls, d: Any, *, folder: str | None = None) -> "ReproductionResult":
        """The result a stored ``table.json`` holds; ValueError in one line naming what is wrong."""
        check_format(d, "reproduction", current=REPRODUCTION_FORMAT, oldest=REPRODUCTION_FORMAT,
                     required=RUN_PARTS[:-2] + ("markdown",))
        run = {k: d[k] for k in RUN_PARTS if k in d}
        table = {k: v for k, v in d.items() if k not in RUN_PARTS and k != "format"}
        return cls(**run, table=table, folder=folder)


__all__ = ["ReproductionResult", "REPRODUCTION_FORMAT", "RUN_PARTS"]
