"""Every notebook in notebooks/ is stored executed, and its stored outputs are current.

The notebooks are teaching material that must read on a code host without running, so they
are stored with their outputs (figures included). This test re-executes each one - nbclient,
a fresh ``python3`` kernel, a temporary working directory, exactly as
``notebooks/refresh.py`` runs them - and fails when a stored output is stale: per code cell,
the printed text and every displayed text are compared with the fresh run's (numbers to a
relative tolerance, ``refresh.RTOL``; the reason is stated there) and images by their count
(PNG bytes depend on the machine's matplotlib and fonts). To refresh a notebook:

    python notebooks/refresh.py notebooks/<name>.ipynb

The kernel uses the session's reference cache (ZOO_CACHE_DIR, conftest.py), so a NUTS
reference already computed by test_compare.py (PCVM on Ripley with the short settings) is
read back instead of being sampled again; cached draws are the draws a run would make, so
the cache changes the time, never an output. Temporary files of the kernel (TMPDIR) go under
pytest's tmp_path.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from repository import REPO

NOTEBOOK_DIR = REPO / "notebooks"


def _refresh_module():
    """notebooks/refresh.py (not a package module: loaded from its file)."""
    name = "zoo_notebooks_refresh"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, NOTEBOOK_DIR / "refresh.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]


refresh = _refresh_module()
#: the lessons, then the solutions of their exercises
NOTEBOOKS = refresh.notebooks()
LESSONS = [p for p in NOTEBOOKS if p.parent == NOTEBOOK_DIR]


def _how_to_refresh(path: Path) -> str:
    return f"refresh it with: {refresh.REFRESH_HINT} notebooks/{path.name}"


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_executed(path):
    """Executed top to bottom in one kernel, without errors, timing metadata or an absolute
    path of the machine that ran it; a lesson with at least one figure."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    problems = refresh.storage_problems(nb)
    assert not problems, f"{path.name}: " + "; ".join(problems) + f"\n{_how_to_refresh(path)}"
    if path in LESSONS:
        assert sum(c.images for c in refresh.cell_outputs(nb)) >= 1, f"{path.name} stores no figure"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_uses_the_public_api_only(path):
    """No name with a leading underscore: what a lesson needs is in the package's public API."""
    nbformat = pytest.importorskip("nbformat")
    found = refresh.private_names(nbformat.read(path, as_version=4))
    assert not found, f"{path.name} uses private names: " + "; ".join(found)


def _markdown(nb) -> list[str]:
    return [refresh.text_of(c.source) for c in nb.cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_is_written_for_a_student(path):
    """A lesson opens with what the student will learn and what they need first, has
    exercises, and their solutions are kept apart, one solution per exercise
    (notebooks/solutions/<lesson>_solutions.ipynb; the convention is written in refresh.py)."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    first = _markdown(nb)[0]
    for heading in refresh.LESSON_OPENING:
        assert heading in first, f"{path.name}: the first cell has no {heading!r}"
    exercises = refresh.exercise_numbers(nb, refresh.EXERCISE_HEADING)
    assert exercises, f"{path.name} has no exercise (a markdown heading {refresh.EXERCISE_HEADING!r} N)"
    solutions_path = refresh.solutions_of(path)
    assert solutions_path.exists(), f"{path.name} has exercises but no {solutions_path.relative_to(NOTEBOOK_DIR)}"
    solved = refresh.exercise_numbers(nbformat.read(solutions_path, as_version=4), refresh.SOLUTION_HEADING)
    assert solved == exercises, f"{path.name}: exercises {exercises}, solutions for {solved}"
    # no answer in the lesson itself
    assert not refresh.exercise_numbers(nb, refresh.SOLUTION_HEADING), f"{path.name} holds a solution"


# Re-executing all six notebooks is the costliest part of the default tier, whose budget is
# about a quarter hour, so it runs with the slow tier (`pytest -m slow`, or `python notebooks/refresh.py
# --check` before a release); the default tier keeps the cheap checks: each notebook is stored
# executed without errors (above) and the staleness comparison itself works (below).
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_outputs_are_current(path, tmp_path, nuts_cache_dir):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    stored = nbformat.read(path, as_version=4)
    try:
        fresh_executed = refresh.execute(path, workdir=tmp_path, cache_dir=nuts_cache_dir)
    except nbclient.exceptions.CellExecutionError as err:
        pytest.fail(f"{path.name} failed:\n{err}")
    problems = refresh.figure_problems(fresh_executed)
    fresh = refresh.for_storage(fresh_executed)
    found = refresh.differences(stored, fresh)
    found += [f"a figure lacks an axis label: {p}" for p in problems]
    if found:
        # the fresh run, for a look at what changed
        nbformat.write(fresh, str(tmp_path / path.name))
    assert not found, (
        f"{path.name}: stored outputs are stale ({len(found)} difference(s) beyond the tolerance):\n  - "
        + "\n  - ".join(found)
        + f"\nThe fresh run is at {tmp_path / path.name}; {_how_to_refresh(path)}")


def _notebook(*outputs_per_cell):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cells = []
    for k, outputs in enumerate(outputs_per_cell, start=1):
        made = []
        for kind, value in outputs:
            if kind == "stdout":
                made.append(new_output("stream", name="stdout", text=value))
            elif kind == "stderr":
                made.append(new_output("stream", name="stderr", text=value))
            elif kind == "markdown":
                made.append(new_output("display_data", data={"text/markdown": value}))
            else:  # an image
                made.append(new_output("display_data", data={"image/png": value, "text/plain": "<Figure>"}))
        cells.append(new_code_cell("pass", execution_count=k, outputs=made))
    nb = new_notebook(cells=cells)
    return nbformat.from_dict(nb)


def test_staleness_check_tolerates_round_off_and_nothing_more():
    """The comparison the test above relies on: what it lets through, what it fails."""
    base = _notebook([("stdout", "sd ratio 0.38, ESS 858, certified True\n"), ("image", "AAAA")],
                     [("markdown", "| a | 0.034 |")])
    same = _notebook([("stdout", "sd ratio 0.39, ESS 859, certified True\n"), ("image", "BBBB"),
                      ("stderr", "a warning\n")],  # last digit at a rounding boundary; other PNG bytes; stderr
                     [("markdown", "| a |   0.035 |")])  # 3% off, and padding
    assert refresh.differences(base, same) == []
    assert refresh.storage_problems(base) == []
    changed = {
        "number": _notebook([("stdout", "sd ratio 0.45, ESS 858, certified True\n"), ("image", "AAAA")],
                            [("markdown", "| a | 0.034 |")]),
        "count": _notebook([("stdout", "sd ratio 0.38, ESS 858, certified True\n"), ("image", "AAAA")],
                           [("markdown", "| a | 0.034 |")], []),
        "word": _notebook([("stdout", "sd ratio 0.38, ESS 858, certified False\n"), ("image", "AAAA")],
                          [("markdown", "| a | 0.034 |")]),
        "image": _notebook([("stdout", "sd ratio 0.38, ESS 858, certified True\n")], [("markdown", "| a | 0.034 |")]),
        "integer": _notebook([("stdout", "sd ratio 0.38, ESS 920, certified True\n"), ("image", "AAAA")],
                             [("markdown", "| a | 0.034 |")]),
    }
    for what, nb in changed.items():
        assert refresh.differences(base, nb), f"a changed {what} went unnoticed"
    # 9 -> 10 weights kept is a change, not round-off (integers get no last-digit allowance)
    assert not refresh.numbers_agree("9", "10") and refresh.numbers_agree("0.125", "0.126")
    leaky = _notebook([("stdout", "report written to /tmp/pytest-7/report\n")])
    assert any("absolute path" in p for p in refresh.storage_problems(leaky))
    # warnings are stored and compared by category and message, not by where they were raised
    warned = _notebook([("stdout", "sd ratio 0.38, ESS 858, certified True\n"), ("image", "AAAA"),
                        ("stderr", "numpyro/infer/mcmc.py:12: UserWarning: 3 chains on 1 device\n  warn(x)\n")],
                       [("markdown", "| a | 0.034 |")])
    moved = _notebook([("stdout", "sd ratio 0.38, ESS 858, certified True\n"), ("image", "AAAA"),
                       ("stderr", "numpyro/infer/mcmc.py:40: UserWarning: 3 chains on 1 device\n  warn(y)\n")],
                      [("markdown", "| a | 0.034 |")])
    assert refresh.differences(warned, moved) == []
    assert refresh.differences(warned, base) and refresh.differences(base, warned)
    assert refresh.storage_problems(warned) == []


def test_stderr_is_stored_without_the_machines_paths():
    root = str(NOTEBOOK_DIR.parent)
    text = ("/usr/lib/python3/site-packages/numpyro/infer/mcmc.py:12: UserWarning: slow\n"
            f"{root}/validation/runs/sbc.py:3: RuntimeWarning: see https://example.org/a/b\n"
            "/tmp/ipykernel_1/123.py:4: UserWarning: mine\n")
    assert refresh.portable_stderr(text) == (
        "numpyro/infer/mcmc.py:12: UserWarning: slow\n"
        "validation/runs/sbc.py:3: RuntimeWarning: see https://example.org/a/b\n"
        "<path>:4: UserWarning: mine\n")
    assert refresh.warning_lines(text) == ["RuntimeWarning: see https://example.org/a/b", "UserWarning: mine",
                                           "UserWarning: slow"]


def test_private_names_are_found():
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("from zoo.validation.runs.sbc import _problem, run_sbc\n"
                                           "import zoo._private\nx = fig._suptitle\n%matplotlib inline\n"
                                           "y = x.__class__\n_mine = 1")])
    found = refresh.private_names(nbformat.from_dict(nb))
    assert sorted(f.split(": ")[1] for f in found) == ["_private", "_problem", "_suptitle"], found
