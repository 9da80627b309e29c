"""The report of a reproduction: ``<out>/<entry>/table.md``, the entry's table under a header
that says how the run was made (settings, cells computed and reused, seconds, device) - written
from the :class:`~zoo.validation.runs.reproduction_result.ReproductionResult` alone
(``validation/runs/reproduction_result.py``), so a stored ``table.json`` is reported again
without running anything."""
from __future__ import annotations

import os

from ..base.atomic import write_text_atomic
from ..runs.reproduction_result import ReproductionResult


def reproduction_markdown(result: ReproductionResult) -> str:
    """The whole ``table.md``: the header, then the entry's own table."""
    header = [
        f"# {result.entry}: our numbers beside the paper's",
        "",
        result.description,
        "",
        "Settings of this run: " + ", ".join(f"{k} = {_show(v)}" for k, v in result.settings.items()),
        f"(defaults: {result.defaults}).",
        f"Cells: {result.cells_computed} computed in this run, {result.cells_reused} found on disk; wall time of "
        f"this run {result.wall_seconds_this_run:.0f} s with {result.settings['jobs']} job(s).",
        *([f"Computed on: {result.device}."] if result.device else []),
        "",
    ]
    return "\n".join(header) + result.markdown.rstrip() + "\n"


def write_reproduction_report(result: ReproductionResult, folder=None) -> str:
    """``table.md`` in ``folder`` (None: the result's own folder), written atomically; its path."""
    folder = result.folder if folder is None else folder
    if folder is None:
        raise ValueError("the result names no folder: give the folder to write table.md in")
    path = os.path.join(os.fspath(folder), "table.md")
    write_text_atomic(path, reproduction_markdown(result))
    return path


def _show(v) -> str:
    """A setting as the header shows it: lists comma-separated, floats by %g."""
    items = list(v) if isinstance(v, (list, tuple)) else None
    return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in items) if items is not None else str(v)


__all__ = ["reproduction_markdown", "write_reproduction_report"]
