"""A small table of results that shows itself in a notebook, a terminal and a Markdown file.

The zoo's runs produce tables (engines against a reference, a defect battery, a study): the
report writes them as Markdown, and a notebook or a script wants the same rows as values.
:class:`Table` keeps both: ``rows`` hold the values (None where there is no value), the
text forms are made from them by one formatter (:func:`format_value`), so a notebook shows
exactly the report's numbers without parsing the report.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


def format_value(v: Any, digits: int = 4) -> str:
    """One table cell: None as ``null``, booleans as yes/no, integers as they are, floats
    with ``digits`` decimals (in scientific notation below 1e-3 and from 1e4 on)."""
    if v is None:
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if not np.isfinite(v):
            return "nan"
        return f"{v:.{digits}g}" if abs(v) < 1e-3 or abs(v) >= 1e4 else f"{v:.{digits}f}"
    return str(v)


def markdown_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell (one line, no column separators)."""
    return " ".join(str(text).split()).replace("|", "\\|")


@dataclass(frozen=True)
class Table:
    """Rows of values under named columns, with notes that say what the rows cannot.

    ``digits`` maps a column to its number of decimals (default 4). A cell may be a string
    already (a reason in place of a number, ``"0.30 / 0.56"``); it is shown as it is.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    digits: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.columns)]
        if bad:
            raise ValueError(f"table row {bad[0]} has {len(self.rows[bad[0]])} cells for {len(self.columns)} columns")

    def column(self, name: str) -> list[Any]:
        """The values of one column, top to bottom."""
        if name not in self.columns:
            raise KeyError(f"no column {name!r}; the columns are {', '.join(self.columns)}")
        k = self.columns.index(name)
        return [row[k] for row in self.rows]

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts column -> value."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def select(self, columns: Sequence[str]) -> "Table":
        """The same rows with only ``columns``, in that order."""
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise KeyError(f"no column {missing[0]!r}; the columns are {', '.join(self.columns)}")
        ks = [self.columns.index(c) for c in columns]
        return Table(tuple(columns), tuple(tuple(row[k] for k in ks) for row in self.rows),
                     {c: d for c, d in self.digits.items() if c in columns}, self.notes)

    def _text(self, row) -> list[str]:
        return [format_value(v, self.digits.get(c, 4)) for c, v in zip(self.columns, row)]

    def to_markdown(self, *, notes: bool = True) -> str:
        """The table as Markdown: a header row of the column names, then one line per row with
        each cell formatted by :func:`format_value` and made safe by :func:`markdown_cell`;
        with ``notes`` (the default) the table's notes follow after a blank line, one a line."""
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(markdown_cell(t) for t in self._text(row)) + " |" for row in self.rows]
        if notes and self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __str__(self) -> str:
        """Aligned plain text (a terminal, a log)."""
        cells = [list(self.columns)] + [self._text(row) for row in self.rows]
        widths = [max(len(r[k]) for r in cells) for k in range(len(self.columns))]
        lines = ["  ".join(t.ljust(w) for t, w in zip(r, widths)).rstrip() for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines + list(self.notes))
