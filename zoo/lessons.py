"""What the lessons in ``notebooks/`` call so that their prose cannot drift from their runs.

A lesson's sentences state numbers: a sd off by some percentage, a verdict's threshold, the
draws a reference took. Typed by hand, such a number stays behind when the lesson is re-run on
another release or another data set. So a lesson never types one: the code cell that computes
it *quotes* it, formatted as the sentence will show it,

    quote(laplace_worst_sd=f"{worst['difference']:+.0%}", threshold=f"{v.threshold:.2f}")

and the markdown below marks where each quoted value stands with an HTML comment naming it,
which every notebook viewer hides::

    Laplace's worst sd is off by +68%<!--=laplace_worst_sd-->, against a threshold of ...

``notebooks/refresh.py`` executes the lesson, collects what it quoted (:func:`quoted`) and
writes each value in front of its mark, so the stored prose is always the last run's; the
test of the lessons fails when a markdown cell states a number without a mark (the few numbers
that are a lesson's own definitions - "a 90% interval" - are listed with a reason in the
notebook's metadata instead), and when a re-run quotes a value the stored prose does not show.

A sentence may also state what a run shows without a number - "both engines differ", "the
reference is certified". The code that computed it then checks it (:func:`claim`): a run that
no longer supports the sentence stops with the sentence named, and the lesson cannot be stored
until its prose says what the run shows.

The mark's syntax, ``VALUE<!--=name-->``, is :data:`QUOTE_MARK`; a newly written mark may stand
alone (``<!--=name-->``): the next refresh writes the value in front of it.
"""
from __future__ import annotations

import re

__all__ = ["QUOTE_MARK", "ClaimNotSupported", "claim", "quote", "quoted", "forget_quotes"]

#: where a quoted value stands in a lesson's markdown: ``<!--=name-->`` right after the value
QUOTE_MARK = re.compile(r"<!--=([A-Za-z_][A-Za-z0-9_]*)-->")

_QUOTED: dict[str, str] = {}


def quote(**values) -> None:
    """Record values the lesson's prose states, each under its name, as the text the prose
    shows (a number is formatted by the caller: ``f"{x:.2f}"``; anything else is turned into
    text with ``str``). Quoting a name again replaces its value (a student re-running a cell)."""
    for name, value in values.items():
        if not QUOTE_MARK.fullmatch(f"<!--={name}-->"):
            raise ValueError(f"a quoted value needs a name made of letters, digits and _; got {name!r}")
        text = value if isinstance(value, str) else str(value)
        if not text.strip():
            raise ValueError(f"the quoted value {name!r} is empty: the prose would state nothing")
        if "<!--" in text or "\n" in text:
            raise ValueError(f"the quoted value {name!r} must be one line of prose without marks; got {text!r}")
        _QUOTED[name] = text


def quoted() -> dict[str, str]:
    """Every value quoted in this process so far, by name."""
    return dict(_QUOTED)


def forget_quotes() -> None:
    """Forget every quoted value (a fresh start for the next lesson in the same process)."""
    _QUOTED.clear()


class ClaimNotSupported(AssertionError):
    """A lesson's prose says something its own run no longer shows."""


def claim(holds, says: str) -> None:
    """Check a statement the lesson's prose makes about this run (``says``, in the prose's
    words); raise :class:`ClaimNotSupported` naming it when ``holds`` is false."""
    if not bool(holds):
        raise ClaimNotSupported(f"the lesson says {says!r}, and this run does not show it: rewrite that sentence")
