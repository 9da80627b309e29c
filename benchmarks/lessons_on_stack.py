"""Do the lessons run on this interpreter's stack? (The lessons are stored and timed on one stack,
Python 3.11 with ArviZ 0.23; a student on Python 3.12+ installs JAX 0.12 and ArviZ 1.x.)

    python benchmarks/lessons_on_stack.py                  # every lesson
    python benchmarks/lessons_on_stack.py 02_pcvm_laplace_ep_em_vs_nuts.ipynb ...

Each lesson is executed as notebooks/refresh.py executes it (a fresh kernel, a temporary folder,
one reference cache for the whole run); the table says whether it ran to the end, and if not the
cell's error (a `claim` the run did not support, an API the stack lacks), and how many outputs and
quoted values differ from the stored lesson beyond refresh.py's tolerance (another JAX release draws
other NUTS draws, so numbers of MCMC runs move by Monte Carlo error and a borderline outcome can
flip). Nothing is stored. Writes results/lessons_on_stack_py<major><minor>.md with the date, command,
machine and stack.
"""
from __future__ import annotations

import datetime
import os
import platform
import re
import sys
import tempfile
import time

from lesson_numbers import NOTEBOOKS, refresh_module  # the script beside this one (benchmarks/ is on sys.path)
from zoo.validation.base.atomic import write_text_atomic

HERE = os.path.dirname(os.path.abspath(__file__))


def _last_error_line(err: Exception) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    lines = [line.strip() for line in text.splitlines() if re.match(r"^\w+(Error|Exception|NotSupported)\b", line.strip())]
    return (lines[-1] if lines else text.strip().splitlines()[-1])[:300].replace("|", "/")


def main(argv=None) -> int:
    import arviz
    import jax
    import nbformat

    refresh = refresh_module()
    names = (argv if argv is not None else sys.argv[1:]) or sorted(
        f for f in os.listdir(NOTEBOOKS) if f.endswith(".ipynb") and f[:2].isdigit())
    started = datetime.datetime.now(datetime.timezone.utc)
    stack = f"Python {platform.python_version()}, jax {jax.__version__}, arviz {arviz.__version__}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-lessons-on-stack-") as work:
        cache = os.path.join(work, "cache")
        os.makedirs(cache)
        for k, name in enumerate(names):
            path = os.path.join(NOTEBOOKS, name)
            run_dir = os.path.join(work, f"run{k}")
            os.makedirs(run_dir)
            t0 = time.perf_counter()
            try:
                executed = refresh.execute(path, workdir=run_dir, cache_dir=cache)
            except Exception as err:  # a cell failed: its error is the result
                rows.append((name, "no", _last_error_line(err), "-", time.perf_counter() - t0))
            else:
                found = refresh.differences(nbformat.read(path, as_version=4), refresh.for_storage(executed))
                rows.append((name, "yes", "", str(len(found)), time.perf_counter() - t0))
            print(" | ".join(str(c) for c in rows[-1][:4]), file=sys.stderr)
    lines = [f"# The lessons on {stack}", "",
             f"{started:%Y-%m-%d %H:%M} UTC, `python benchmarks/lessons_on_stack.py`, "
             f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores). The lessons are stored "
             "on Python 3.11 / ArviZ 0.23.", "",
             "| lesson | runs to the end | where it stopped | differences from the stored lesson | seconds |",
             "|---|---|---|---|---|"]
    lines += [f"| {n} | {ok} | {why} | {diff} | {secs:.0f} |" for n, ok, why, diff, secs in rows]
    text = "\n".join(lines) + "\n"
    out = os.path.join(HERE, "results", f"lessons_on_stack_py{sys.version_info.major}{sys.version_info.minor}.md")
    write_text_atomic(out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
