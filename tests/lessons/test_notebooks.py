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

from pathlib import Path

import pytest

from repository import REPO, notebook_refresh

NOTEBOOK_DIR = REPO / "notebooks"


refresh = notebook_refresh()
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


# --------------------------------------------------------------------------------------
# Numbers in the prose (issue 54): computed and quoted, never typed
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", LESSONS, ids=[p.name for p in LESSONS])
def test_lesson_prose_types_no_number(path):
    """Every number a lesson's sentences state is computed in the same run and quoted
    (zoo.lessons.quote, a mark <!--=name--> in the markdown); the lesson's own definitions are
    listed with a reason. The stored prose shows the values its metadata keeps (checked by
    storage_problems above); a re-run that quotes other values is stale (the slow test)."""
    nbformat = pytest.importorskip("nbformat")
    typed = refresh.typed_numbers(nbformat.read(path, as_version=4))
    assert not typed, (f"{path.name} states {len(typed)} number(s) by hand: " + ", ".join(typed[:20])
                       + " - quote each from the code that computes it (zoo.lessons.quote)")


def test_stated_numbers_finds_results_and_skips_structure():
    prose = ("Laplace's sds are off by up to +68% (w[8]), see lesson 07 and Exercise 2, `x = 0.5`, "
             "[link](https://a.b/1.5) (Vehtari et al. 2024). The draws follow $N(0, 1)$ with "
             "$\\hat R \\le 1.01$ and a $90\\%$ interval; 2 chains of 300 draws.\n### Exercise 3\n## 4. Title")
    decimals, wholes = refresh.stated_numbers(prose)
    assert decimals == ["+68%", "1.01", "90%"] and wholes == ["2", "300"], (decimals, wholes)
    bound = "off by +68%<!--=worst--> and 2<!--=chains--> chains, at <!--=fresh-->"
    assert refresh.stated_numbers(bound, {"worst": "+68%", "chains": "2"}) == ([], [])
    # a value in front of its mark that is not the kept one is typed
    assert refresh.stated_numbers("off by +70%<!--=worst-->", {"worst": "+68%"})[0] == ["+70%"]


def _markdown_notebook(*texts, quoted=None, typed=None):
    nbformat = pytest.importorskip("nbformat")
    from nbformat.v4 import new_markdown_cell, new_notebook

    nb = nbformat.from_dict(new_notebook(cells=[new_markdown_cell(t) for t in texts]))
    if quoted is not None:
        nb.metadata[refresh.QUOTED_KEY] = quoted
    if typed is not None:
        nb.metadata[refresh.TYPED_KEY] = typed
    return nb


def test_quotes_are_rendered_replaced_and_checked():
    nb = _markdown_notebook("Off by <!--=worst--> at a threshold of <!--=c-->.", "a 90% interval")
    assert refresh.render_quotes(nb, {"worst": "+68%", "c": "4.33", "unused": "1"}) == []
    assert nb.cells[0].source == "Off by +68%<!--=worst--> at a threshold of 4.33<!--=c-->."
    assert nb.metadata[refresh.QUOTED_KEY] == {"c": "4.33", "worst": "+68%"}  # only what the prose shows
    assert refresh.quote_problems(nb) == []
    # the typed "90%" is caught until it is listed with its reason
    assert refresh.typed_numbers(nb) == ["cell 1: 90%"]
    nb.metadata[refresh.TYPED_KEY] = {"90%": "the exercise's choice of interval"}
    assert refresh.typed_numbers(nb) == []
    # a new run replaces the values, not the prose around them
    assert refresh.render_quotes(nb, {"worst": "+78%", "c": "4.33"}) == []
    assert nb.cells[0].source == "Off by +78%<!--=worst--> at a threshold of 4.33<!--=c-->."
    # planted: a mark the run never quoted; prose edited around a value
    assert "never quoted" in refresh.render_quotes(_markdown_notebook("x <!--=gone-->", quoted={}), {})[0]
    edited = _markdown_notebook("Off by 70%<!--=worst-->", quoted={"worst": "+78%"})
    assert refresh.quote_problems(edited) and "no longer ends" in refresh.render_quotes(edited, {"worst": "+1%"})[0]
    assert refresh.quote_problems(_markdown_notebook("x 1<!--=a-->", quoted={})) != []
    assert refresh.quote_problems(_markdown_notebook("x", typed={"5%": " "})) != []


def test_a_moved_quoted_value_is_a_stale_output():
    stored = _markdown_notebook("sd x1.13<!--=r-->", quoted={"r": "1.13"})
    close = _markdown_notebook("sd x1.14<!--=r-->", quoted={"r": "1.14"})  # last-digit round-off
    moved = _markdown_notebook("sd x1.45<!--=r-->", quoted={"r": "1.45"})
    assert refresh.differences(stored, close) == []
    assert refresh.differences(stored, moved) and refresh.differences(stored, _markdown_notebook("sd", quoted={}))


def test_a_first_run_replaces_a_guessed_number_in_front_of_a_new_mark():
    nb = _markdown_notebook("k-hat 0.690<!--=k--> from <!--=n--> draws, step -2.8e-14<!--=e-->")
    assert refresh.render_quotes(nb, {"k": "0.691", "n": "1638", "e": "-3.1e-14"}) == []
    assert nb.cells[0].source == "k-hat 0.691<!--=k--> from 1638<!--=n--> draws, step -3.1e-14<!--=e-->"
    # a guessed sign the value lacks is not silently dropped
    signed = _markdown_notebook("the power $-qa$ = -1<!--=p-->")
    assert "has a sign" in refresh.render_quotes(signed, {"p": "1"})[0]
