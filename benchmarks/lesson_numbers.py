"""How many numbers each lesson's prose states by hand, how many it quotes from its run, and how
long each lesson takes to run (issue 54's "before" and "after").

    python benchmarks/lesson_numbers.py                 # counts, now and at the commit before issue 54
    python benchmarks/lesson_numbers.py --time          # also run every lesson, empty cache then warm

A lesson's prose is its markdown cells. A number there is *quoted* when it stands in front of a
mark ``<!--=name-->`` whose value the last run wrote (zoo.lessons.quote; notebooks/refresh.py),
*a definition* when the lesson lists it with a reason (an exercise's own setting), and *typed*
otherwise: re-executing the notebook cannot update it. The count is notebooks/refresh.py's
``stated_numbers`` - the same one the tests use - so it is a heuristic stated as such: numbers
inside code spans, link targets, exercise and numbered headings, coordinate names, references to
lessons, sections, equations and cells, citations' years, and whole numbers inside maths are
left out. The "before" columns read the lessons as they were at BEFORE (git), with the same rules.

--time: each lesson is executed as refresh.py executes it, first with an empty reference cache
(it samples every reference it needs and compiles every program), then again with the cache the
first run filled; the seconds are wall-clock on this machine, in one run. The warm run's outputs
and quoted values are compared with the stored lesson as the slow test compares them.

Writes results/lesson_numbers.md (and docs/lessons.md's table is this file's) with the date,
command and machine.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from zoo.validation.base.atomic import write_text_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NOTEBOOKS = os.path.join(REPO, "notebooks")
OUT = os.path.join(HERE, "results", "lesson_numbers.md")
#: the last commit before issue 54 changed a lesson
BEFORE = "8a7e1b9"


def refresh_module():
    """notebooks/refresh.py, loaded from its file once per process (lessons_on_stack.py uses it too)."""
    name = "zoo_notebooks_refresh"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(NOTEBOOKS, "refresh.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def counts(nb: dict) -> dict:
    """typed decimals/percentages, typed whole numbers, quoted values shown, definitions listed."""
    import nbformat

    refresh = refresh_module()
    nb = nbformat.from_dict(nb)
    allowed = set(nb.metadata.get(refresh.TYPED_KEY, {}))
    stated = refresh.prose_numbers(nb)
    marks = sum(len(refresh.QUOTE_MARK.findall(refresh.text_of(c.source))) for c in nb.cells if c.cell_type == "markdown")
    return {"typed_decimals": [n for _, d, _ in stated for n in d if n not in allowed],
            "typed_whole": [n for _, _, w in stated for n in w if n not in allowed],
            "quoted": marks, "definitions": sum(n in allowed for _, d, w in stated for n in d + w)}


def before(name: str) -> dict | None:
    try:
        text = subprocess.run(["git", "-C", REPO, "show", f"{BEFORE}:notebooks/{name}"], capture_output=True,
                              text=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return counts(json.loads(text))


def run_times(path: str) -> tuple[float, float, int]:
    """Seconds to execute the lesson with an empty cache, then with the cache that run filled, and
    how many differences the warm run's outputs and quoted values show from the stored notebook
    (refresh.py's comparison: 0 means the stored lesson is what a run gives)."""
    import nbformat

    refresh = refresh_module()
    seconds = []
    with tempfile.TemporaryDirectory(prefix="zoo-lesson-time-") as work:
        cache = os.path.join(work, "cache")
        os.makedirs(cache)
        for k in range(2):
            run_dir = os.path.join(work, f"run{k}")
            os.makedirs(run_dir)
            t0 = time.perf_counter()
            executed = refresh.execute(path, workdir=run_dir, cache_dir=cache)
            seconds.append(time.perf_counter() - t0)
    stored = nbformat.read(path, as_version=4)
    found = refresh.differences(stored, refresh.for_storage(executed)) + refresh.rendering_problems(executed)
    for line in found:
        print(f"  {os.path.basename(path)}: {line}", file=sys.stderr)
    return seconds[0], seconds[1], len(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", action="store_true", help="also execute every lesson, empty cache then warm")
    args = parser.parse_args(argv)
    lessons = sorted(f for f in os.listdir(NOTEBOOKS) if f.endswith(".ipynb") and f[:2].isdigit())
    started = datetime.datetime.now(datetime.timezone.utc)
    head = ("| lesson | typed now (decimals and % / whole) | quoted now | definitions listed | "
            "typed before (decimals and % / whole) |" + (" run time, empty cache (s) | warm (s) | stored outputs "
                                                      "current |" if args.time else ""))
    lines = ["# Numbers in the lessons' prose: typed by hand or quoted from the run", "",
             f"{started:%Y-%m-%d %H:%M} UTC, `python benchmarks/lesson_numbers.py{' --time' if args.time else ''}`, "
             f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores); before = the lessons at "
             f"commit {BEFORE}. The count is notebooks/refresh.py's `stated_numbers` (a heuristic: "
             "benchmarks/lesson_numbers.py says what it leaves out).", "", head,
             "|" + "---|" * (head.count("|") - 1)]
    totals = {"now_dec": 0, "now_whole": 0, "quoted": 0, "before_dec": 0, "before_whole": 0}
    for name in lessons:
        with open(os.path.join(NOTEBOOKS, name), encoding="utf-8") as fh:
            now = counts(json.load(fh))
        old = before(name)
        totals["now_dec"] += len(now["typed_decimals"])
        totals["now_whole"] += len(now["typed_whole"])
        totals["quoted"] += now["quoted"]
        old_cell = "not in git" if old is None else f"{len(old['typed_decimals'])} / {len(old['typed_whole'])}"
        if old is not None:
            totals["before_dec"] += len(old["typed_decimals"])
            totals["before_whole"] += len(old["typed_whole"])
        row = (f"| {name} | {len(now['typed_decimals'])} / {len(now['typed_whole'])} | {now['quoted']} | "
               f"{now['definitions']} | {old_cell} |")
        if args.time:
            cold, warm, stale = run_times(os.path.join(NOTEBOOKS, name))
            row += f" {cold:.0f} | {warm:.0f} | {'yes' if not stale else f'no: {stale} difference(s)'} |"
            print(f"{name}: {cold:.0f} s empty cache, {warm:.0f} s warm", file=sys.stderr)
        lines.append(row)
    lines += ["", f"In all: {totals['now_dec']} decimals or percentages and {totals['now_whole']} whole numbers typed "
                  f"in prose now, {totals['quoted']} values quoted from the run; before: {totals['before_dec']} and "
                  f"{totals['before_whole']}."]
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_text_atomic(OUT, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
