"""How many numbers each lesson's prose states by hand, and how many its code writes (issue 54's
"before" and "after").

    python benchmarks/lesson_numbers.py

A lesson's prose is its markdown cells; a number there was typed, and re-executing the
notebook cannot update it. A number in a markdown *output* (a cell that renders text from
computed values) moves with the run. The count is a heuristic, stated as such: numbers inside
code spans, maths, links, section, equation and lesson references, numbered headings and the
"Exercise N" / "Solution to exercise N" headings are left out;
decimals and percentages are counted apart from whole numbers, because they are what a
measured value looks like (whole numbers are often counts, indices or lesson numbers).
Writes results/lesson_numbers.md with the date, command and machine.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import sys

from zoo.validation.base.atomic import write_text_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
NOTEBOOKS = os.path.join(os.path.dirname(HERE), "notebooks")
OUT = os.path.join(HERE, "results", "lesson_numbers.md")

_LEFT_OUT = [
    re.compile(r"`[^`]*`"),                      # code spans
    re.compile(r"\$\$.*?\$\$", re.S),            # display maths
    re.compile(r"\$[^$\n]*\$"),                  # inline maths
    re.compile(r"\]\([^)]*\)"),                  # link targets
    re.compile(r"https?://\S+"),
    re.compile(r"^#+\s*(Exercise|Solution to exercise)\s+\d+.*$", re.M),
    re.compile(r"\b[a-zA-Z_]+\[\d+\]"),          # w[8]: a coordinate's name, not a value
    re.compile(r"\b\d{2}_[a-z_]+"),              # 07_validation_...: a file name
    re.compile(r"§\s*\d+(\.\d+)*"),                # DERIVATIONS.md §1.1: a section
    re.compile(r"^#+\s*\d+(\.\d+)*", re.M),         # a numbered heading
    re.compile(r"\b(Sections?|sections?|eqs?\.|Eqs?\.|Fig\.|Table|step|Step|lesson|Lesson)\s*\d+(\.\d+)*"),
]
DECIMAL = re.compile(r"(?<![\w.])[-+−]?\d+\.\d+%?|(?<![\w.])[-+−]?\d+%")
WHOLE = re.compile(r"(?<![\w.\-])\d+(?![\w.%])")


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def prose_numbers(text: str) -> tuple[list[str], list[str]]:
    """(decimals and percentages, whole numbers) stated in a piece of markdown prose."""
    for pattern in _LEFT_OUT:
        text = pattern.sub(" ", text)
    decimals = DECIMAL.findall(text)
    text = DECIMAL.sub(" ", text)
    return decimals, WHOLE.findall(text)


def audit(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    typed_dec, typed_whole, computed_md = [], [], 0
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            d, w = prose_numbers(_text(cell["source"]))
            typed_dec += d
            typed_whole += w
        for out in cell.get("outputs", []):
            if "text/markdown" in out.get("data", {}):
                computed_md += len(DECIMAL.findall(_text(out["data"]["text/markdown"])))
    return {"lesson": os.path.basename(path), "typed_decimals": typed_dec, "typed_whole": len(typed_whole),
            "computed_markdown_decimals": computed_md}


def main() -> int:
    lessons = sorted(f for f in os.listdir(NOTEBOOKS) if f.endswith(".ipynb") and f[:2].isdigit())
    rows = [audit(os.path.join(NOTEBOOKS, f)) for f in lessons]
    started = datetime.datetime.now(datetime.timezone.utc)
    lines = ["# Numbers in the lessons' prose: typed by hand or computed", "",
             f"{started:%Y-%m-%d %H:%M} UTC, `python {' '.join(sys.argv)}`, "
             f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores). A heuristic count "
             "(benchmarks/lesson_numbers.py says what it leaves out).", "",
             "| lesson | decimals and % typed in prose | whole numbers typed in prose | decimals in computed "
             "markdown outputs | the typed decimals |", "|---|---|---|---|---|"]
    for r in rows:
        shown = ", ".join(r["typed_decimals"][:12]) + (" ..." if len(r["typed_decimals"]) > 12 else "")
        lines.append(f"| {r['lesson']} | {len(r['typed_decimals'])} | {r['typed_whole']} | "
                     f"{r['computed_markdown_decimals']} | {shown} |")
    lines += ["", f"In all: {sum(len(r['typed_decimals']) for r in rows)} decimals or percentages and "
                  f"{sum(r['typed_whole'] for r in rows)} whole numbers typed in prose; "
                  f"{sum(r['computed_markdown_decimals'] for r in rows)} decimals written by code."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_text_atomic(OUT, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
