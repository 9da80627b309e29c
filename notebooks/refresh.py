"""Re-execute the teaching notebooks and store them with their outputs.

    python notebooks/refresh.py                        # every lesson, then every solutions notebook
    python notebooks/refresh.py notebooks/03_ggsm_probit_shape_and_references.ipynb
    python notebooks/refresh.py --check                # re-execute, report stale outputs, store nothing

The notebooks are stored executed, so that they read on a code host without running.
``tests/lessons/test_notebooks.py`` re-executes each one and fails when its stored outputs are
stale; both use the functions below, so a notebook runs the same way in both:

* nbclient, a fresh ``python3`` kernel, a temporary working directory (nothing a notebook
  writes lands in the repository) and a temporary TMPDIR;
* the kernel imports the ``zoo`` this process imports (PYTHONPATH), finds the repository's
  stored benchmark results under ZOO_REPOSITORY, reads and writes reference draws in
  ZOO_CACHE_DIR (here a fresh temporary folder unless ``--cache-dir`` names one: cached
  draws are the draws a run would make, so the cache changes the time, never an output),
  draws figures with matplotlib's inline backend, and runs with progress bars switched off
  (TQDM_DISABLE) and a fixed PYTHONHASHSEED;
* an IPython startup file (in a temporary IPYTHONDIR) checks every figure the kernel draws
  for axis labels (``zoo.validation.base.figures.axis_label_problems``).

A notebook is not stored while a figure lacks an axis label or its code uses a private
name (:func:`private_names`): the lessons use the package's public API only.

A lesson's prose types no number (see "Numbers in the prose" below): the code that computes a
value quotes it (``zoo.lessons.quote``), the markdown marks where it stands
(``VALUE<!--=name-->``), and each run writes the values it quoted into the prose before the
notebook is stored; a mark the run did not fill stops the refresh. A statement without a
number is checked by the code that computed it (``zoo.lessons.claim``).

What is stored: every output the kernel produced, the stderr stream included - a student
who runs a lesson sees its warnings, so the stored copy shows them too - with the
machine's paths taken out of it (:func:`portable_stderr`); no timing metadata, and a
language_info without the Python version. The notebooks themselves fix every seed and
print no wall-clock time or absolute path.

When is a stored output stale (:func:`differences`)? Per code cell, the stdout text, the
warnings on stderr (category and message, :func:`warning_lines`), the text of every rich
output (Markdown, plain text) and the number of images are compared with a fresh run.
Images are compared by count only: PNG bytes change with the matplotlib, FreeType and
font versions of the machine that drew them. Text is compared
after every number in it is taken out and compared on its own: the words and layout must
match exactly (runs of white space count as one space: NumPy pads array columns to the
widest entry), and two numbers agree when they are within :data:`RTOL` of each other, or,
when printed with a decimal point, within one unit of their last printed digit.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# the mark a quoted value stands in front of, and the switch that makes a lesson's claims strict:
# one definition, the one the lessons' own calls use
from zoo.lessons import QUOTE_MARK, STRICT_CLAIMS_ENV

NOTEBOOK_DIR = Path(__file__).resolve().parent
#: seconds per cell: far above any cell's run time, so only a hung cell fails
CELL_TIMEOUT = 600
#: relative tolerance for numbers in text outputs. On the machine that stored a notebook a
#: re-run reproduces every number bit for bit (fixed seeds; NUTS's parallel and sequential
#: chain layouts give identical draws), so any tolerance only matters on another machine.
#: There the floating-point round-off differs (another CPU's vector width changes the order
#: of a sum, another BLAS or XLA build its kernels): a deterministic number moves in its last
#: bits, which the printed digits hide except at a rounding boundary (hence the allowance of
#: one unit in the last printed digit), and a number computed from MCMC draws may move by a
#: fraction of its Monte Carlo error where a chain's path is sensitive to round-off. 5%
#: covers the second for the quantities the notebooks print (R-hat, sd ratios, shares of
#: draws; their Monte Carlo errors are a few percent at the draws used) while any change a
#: reader would notice - a count, a status, a number moved by more than a twentieth - fails.
RTOL = 0.05
#: a stored text output must not contain an absolute path of the machine that stored it
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:/tmp/|/home/|/root/|/Users/|/var/folders/|[A-Za-z]:\\)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")
_TEXT_TYPES = ("text/markdown", "text/plain", "text/latex")
REFRESH_HINT = "python notebooks/refresh.py"


#: where the solutions of each lesson's exercises are kept, apart from the lesson
SOLUTIONS_DIR = NOTEBOOK_DIR / "solutions"
#: the tag of a code cell that shows another library's figure as that library draws it (ArviZ's
#: trace or energy plot, whose axes ArviZ labels its own way): the axis-label audit skips it
FOREIGN_FIGURE_TAG = "figure-drawn-by-another-library"


#: How a lesson is laid out (tests/lessons/test_notebooks.py checks it). Its first cell names what
#: the student will learn and what they need first; its exercises are markdown cells headed
#: "### Exercise N" with open answers; their solutions are kept apart, in
#: notebooks/solutions/<lesson>_solutions.ipynb, one "## Solution to exercise N" per
#: exercise, executed and stored like the lessons.
LESSON_OPENING = ("What you will learn", "What you need first")
EXERCISE_HEADING = "Exercise"
SOLUTION_HEADING = "Solution to exercise"


def solutions_of(lesson: Path) -> Path:
    """Where the solutions of a lesson's exercises are kept."""
    return SOLUTIONS_DIR / f"{Path(lesson).stem}_solutions.ipynb"


def exercise_numbers(nb, heading: str) -> list[int]:
    """The numbers N of the markdown headings "<heading> N" of a notebook, in order."""
    pattern = re.compile(rf"^#+\s*{re.escape(heading)}\s+(\d+)\b", re.MULTILINE)
    return [int(n) for c in nb.cells if c.cell_type == "markdown" for n in pattern.findall(text_of(c.source))]


def notebooks() -> list[Path]:
    """Every notebook: the lessons, then their solutions."""
    return sorted(NOTEBOOK_DIR.glob("*.ipynb")) + sorted(SOLUTIONS_DIR.glob("*.ipynb"))


# --------------------------------------------------------------------------------------
# Running a notebook
# --------------------------------------------------------------------------------------
#: the kernel's startup file: every figure the kernel renders (shown inline or saved) is
#: checked for axis labels after it is drawn, and each one without is recorded in the file
#: named by ZOO_FIGURE_AUDIT (one JSON line per figure: the cell's execution count, the problems)
_STARTUP = """\
import json as _j, os as _o
def _zoo_figure_audit():
    from zoo.validation.base.figures import axis_label_problems
    from matplotlib.backend_bases import FigureCanvasBase
    render = FigureCanvasBase.print_figure
    def print_figure(self, *args, **kwargs):
        out = render(self, *args, **kwargs)
        problems = axis_label_problems(self.figure)
        if problems:
            with open(_o.environ["ZOO_FIGURE_AUDIT"], "a") as fh:
                # IPython counts the running cell as the next one until its post-execute hooks
                # (where the inline backend draws) are done
                fh.write(_j.dumps({"cell": get_ipython().execution_count - 1, "problems": problems}) + "\\n")
        return out
    FigureCanvasBase.print_figure = print_figure
_zoo_figure_audit()
del _zoo_figure_audit
"""


def kernel_environment(cache_dir, tmp_dir) -> dict[str, str]:
    """The environment variables the kernel runs with (see the module docstring)."""
    import zoo

    # the folder that holds the `zoo` package this process imported: site-packages when
    # installed, the repository root in a source checkout
    zoo_parent = str(Path(zoo.__file__).resolve().parents[1])
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [zoo_parent, os.environ.get("PYTHONPATH")])),
        "ZOO_CACHE_DIR": str(cache_dir),
        # the checkout the notebooks belong to (a notebook may read stored benchmark results)
        "ZOO_REPOSITORY": str(NOTEBOOK_DIR.parent),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "TMPDIR": str(tmp_dir),
        "TQDM_DISABLE": "1",
        "PYTHONHASHSEED": "0",
        # a sentence of the prose the run does not support stops the run (zoo.lessons.claim)
        STRICT_CLAIMS_ENV: "1",
        # IPython's folder of this run: its startup file installs the figure audit
        "IPYTHONDIR": str(Path(tmp_dir) / "ipython"),
        "ZOO_FIGURE_AUDIT": str(Path(tmp_dir) / "figure-audit.jsonl"),
    }


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute(path, *, workdir, cache_dir=None, timeout: int = CELL_TIMEOUT):
    """The notebook at ``path`` executed top to bottom in a fresh ``python3`` kernel whose
    working directory is ``workdir`` (a folder that exists). ``cache_dir``: ZOO_CACHE_DIR
    (None: a fresh folder under ``workdir``). Raises nbclient's CellExecutionError when a
    cell fails. Returns the executed notebook (outputs as the kernel produced them; see
    :func:`for_storage`)."""
    import nbclient
    import nbformat

    workdir = Path(workdir)
    tmp_dir = workdir / "tmp"
    tmp_dir.mkdir(exist_ok=True)
    if cache_dir is None:
        cache_dir = workdir / "reference-cache"
        Path(cache_dir).mkdir(exist_ok=True)
    startup = tmp_dir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-zoo-figure-audit.py").write_text(_STARTUP)
    audit = tmp_dir / "figure-audit.jsonl"
    audit.unlink(missing_ok=True)
    nb = nbformat.read(str(path), as_version=4)
    # one more cell, run last and removed below: what the lesson quoted for its prose
    nb.cells.append(nbformat.v4.new_code_cell(_COLLECT_QUOTED))
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False, coalesce_streams=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    with _environment(kernel_environment(cache_dir, tmp_dir)):
        client.execute()
    collector = nb.cells.pop()
    printed = "".join(text_of(o.get("text", "")) for o in collector.outputs if o.get("name") == "stdout")
    values = json.loads(printed.split(_QUOTED_TAG, 1)[1]) if _QUOTED_TAG in printed else {}
    nb.metadata["zoo_quote_problems"] = render_quotes(nb, values)
    found = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
    # a cell tagged FOREIGN_FIGURE_TAG shows another library's own figure as that library draws it
    # (a lesson teaching ArviZ's trace plot): its figures are not audited
    foreign = {k for k, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1)
               if FOREIGN_FIGURE_TAG in cell.metadata.get("tags", [])}
    nb.metadata["zoo_figure_audit"] = [f"In [{f['cell']}]: {p}" for f in found if f["cell"] not in foreign
                                       for p in f["problems"]]
    return nb


def rendering_problems(nb) -> list[str]:
    """The quote marks an executed notebook's run could not fill (:func:`render_quotes`)."""
    return list(nb.metadata.get("zoo_quote_problems", []))


def figure_problems(nb) -> list[str]:
    """The figures of an executed notebook (:func:`execute`) that lack axis labels."""
    return list(nb.metadata.get("zoo_figure_audit", []))


def for_storage(nb):
    """The executed notebook as it is stored: stderr streams with the machine's paths taken
    out (:func:`portable_stderr`), no timing or widget metadata, language_info without the
    Python version."""
    for cell in nb.cells:
        for key in ("execution", "ExecuteTime", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            for out in cell.outputs:
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["text"] = portable_stderr(text_of(out.get("text", "")))
    nb.metadata.pop("widgets", None)
    nb.metadata.pop("zoo_figure_audit", None)
    nb.metadata.pop("zoo_quote_problems", None)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


# --------------------------------------------------------------------------------------
# Comparing outputs
# --------------------------------------------------------------------------------------
_PATH = re.compile(r"(?<![\w.:/<])(?:/|[A-Za-z]:\\)[^\s:'\"]+")
_WARNING = re.compile(r"\b(\w*Warning): (.*)")


def portable_stderr(text: str) -> str:
    """stderr as a student sees it, without the machine's paths: a file of an installed
    package keeps its path from the package on (``numpyro/infer/mcmc.py``), a file of this
    repository its path in it, any other absolute path becomes ``<path>``."""
    root = str(NOTEBOOK_DIR.parent) + os.sep

    def shorter(m):
        path = m.group(0)
        for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
            if marker in path:
                return path.split(marker, 1)[1]
        if path.startswith(root):
            return path[len(root):]
        return "<path>"

    return _PATH.sub(shorter, text)


def warning_lines(text: str) -> list[str]:
    """The warnings in a stderr text, each as ``Category: message`` (what is compared of
    stderr: where a warning was raised and its source line depend on package versions)."""
    return sorted(f"{m.group(1)}: {m.group(2).strip()}" for m in map(_WARNING.search, text.splitlines()) if m)


@dataclass
class CellOutputs:
    """What is compared of one code cell's outputs."""

    index: int
    stdout: str = ""
    stderr: str = ""
    texts: list[str] = field(default_factory=list)
    images: int = 0
    errors: list[str] = field(default_factory=list)


def text_of(value) -> str:
    """A notebook field's text (stored as one string or a list of lines)."""
    return "".join(value) if isinstance(value, list) else str(value)


def cell_outputs(nb) -> list[CellOutputs]:
    """The compared outputs of every code cell, in order."""
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        c = CellOutputs(i)
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":
                if out.get("name") == "stdout":
                    c.stdout += text_of(out.get("text", ""))
                elif out.get("name") == "stderr":
                    c.stderr += text_of(out.get("text", ""))
            elif kind in ("display_data", "execute_result"):
                data = out.get("data", {})
                if any(m in data for m in _IMAGE_TYPES):
                    c.images += 1
                else:
                    for m in _TEXT_TYPES:
                        if m in data:
                            c.texts.append(text_of(data[m]))
                            break
            elif kind == "error":
                c.errors.append(f"{out.get('ename')}: {out.get('evalue')}")
        cells.append(c)
    return cells


def _split(text: str) -> tuple[str, list[str]]:
    """(skeleton, numbers): the text with every number replaced by '#' and runs of white
    space by one space, and the numbers in order."""
    text = _ADDRESS.sub("0x?", text)
    numbers = _NUMBER.findall(text)
    skeleton = " ".join(_NUMBER.sub("#", text).split())
    return skeleton, numbers


def _last_digit_unit(token: str) -> float | None:
    """One unit in the last printed digit of a number printed with a decimal point
    (``1.25`` -> 0.01, ``3.1e-05`` -> 1e-06); None for an integer."""
    mantissa, _, exponent = token.lower().partition("e")
    if "." not in mantissa:
        return None
    decimals = len(mantissa.split(".")[1])
    return 10.0 ** (int(exponent or 0) - decimals)


def numbers_agree(stored: str, fresh: str, rtol: float = RTOL) -> bool:
    a, b = float(stored), float(fresh)
    if a == b:
        return True
    slack = rtol * max(abs(a), abs(b))
    units = [u for u in (_last_digit_unit(stored), _last_digit_unit(fresh)) if u is not None]
    if units:
        slack = max(slack, max(units) * (1.0 + 1e-9))
    return abs(a - b) <= slack


def _short(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def text_difference(stored: str, fresh: str, rtol: float = RTOL) -> str | None:
    """Why two text outputs differ beyond the tolerance, or None when they agree."""
    s_skel, s_num = _split(stored)
    f_skel, f_num = _split(fresh)
    if s_skel != f_skel or len(s_num) != len(f_num):
        return f"the text differs:\n    stored: {_short(stored)!r}\n    now:    {_short(fresh)!r}"
    bad = [(a, b) for a, b in zip(s_num, f_num) if not numbers_agree(a, b, rtol)]
    if bad:
        shown = ", ".join(f"{a} -> {b}" for a, b in bad[:5])
        return (f"{len(bad)} number(s) moved by more than {100 * rtol:g}% (stored -> now): {shown}"
                f"\n    in: {_short(fresh)!r}")
    return None


def differences(stored_nb, fresh_nb, rtol: float = RTOL) -> list[str]:
    """Every difference between the stored outputs and a fresh run's, one sentence each
    (an empty list: the stored outputs are current)."""
    stored, fresh = cell_outputs(stored_nb), cell_outputs(fresh_nb)
    if [c.index for c in stored] != [c.index for c in fresh]:
        return ["the notebook's cells changed while it ran"]
    found = prose_differences(stored_nb, fresh_nb, rtol)
    for s, f in zip(stored, fresh):
        where = f"code cell {s.index}"
        if f.errors:
            found.append(f"{where} raised {'; '.join(f.errors)}")
        if s.images != f.images:
            found.append(f"{where}: {s.images} image(s) stored, {f.images} now")
        if (diff := text_difference(s.stdout, f.stdout, rtol)) is not None:
            found.append(f"{where}, printed output: {diff}")
        s_warn, f_warn = warning_lines(s.stderr), warning_lines(f.stderr)
        if len(s_warn) != len(f_warn):
            found.append(f"{where}: {len(s_warn)} warning(s) stored, {len(f_warn)} now: {_short(chr(10).join(f_warn))!r}")
        elif (diff := text_difference("\n".join(s_warn), "\n".join(f_warn), rtol)) is not None:
            found.append(f"{where}, warnings: {diff}")
        if len(s.texts) != len(f.texts):
            found.append(f"{where}: {len(s.texts)} displayed text output(s) stored, {len(f.texts)} now")
        else:
            for k, (a, b) in enumerate(zip(s.texts, f.texts)):
                if (diff := text_difference(a, b, rtol)) is not None:
                    found.append(f"{where}, displayed output {k}: {diff}")
    return found


def storage_problems(nb) -> list[str]:
    """Why a stored notebook is not stored as this module stores it (empty: it is)."""
    problems = []
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        problems.append(f"not executed top to bottom in one kernel (execution counts {counts})")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"code cell {i} stores an error: {out.get('ename')}: {out.get('evalue')}")
        if "execution" in cell.metadata:
            problems.append(f"code cell {i} stores timing metadata")
    for c in cell_outputs(nb):
        for text in [c.stdout, c.stderr, *c.texts]:
            if m := _ABSOLUTE_PATH.search(text):
                problems.append(f"code cell {c.index} prints an absolute path ({text[m.start():m.start() + 40]!r})")
    return problems + quote_problems(nb)


def private_names(nb) -> list[str]:
    """Private names a notebook's code uses (a lesson uses the public API only): an import
    from a module path with a part that starts with an underscore, an imported name that
    does, or an attribute that does (dunder names such as ``__file__`` aside)."""
    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        # IPython's magics and shell escapes are not Python
        source = "\n".join(line for line in text_of(cell.source).splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(source)
        except SyntaxError as err:
            found.append(f"code cell {i} is not valid Python ({err.msg}, line {err.lineno})")
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = (node.module or "").split(".") + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [part for a in node.names for part in a.name.split(".")]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            found += [f"code cell {i}, line {node.lineno}: {n}" for n in names if private(n)]
    return found


# --------------------------------------------------------------------------------------
# Numbers in the prose
# --------------------------------------------------------------------------------------
#: The lessons' prose types no number: a number a sentence states is quoted by the code that
#: computed it (``zoo.lessons.quote``) and stands in the markdown in front of its mark
#: ``<!--=name-->``; :func:`render_quotes` writes the values a run quoted in front of their
#: marks, and the notebook's metadata keeps them (QUOTED_KEY), so that a stored lesson can be
#: checked without running it (:func:`quote_problems`) and a fresh run compared with it. The
#: few numbers that are the lesson's own definitions, not results ("a 90% interval"), are listed
#: in the metadata under TYPED_KEY, each with the reason it is typed.
QUOTED_KEY = "zoo_quoted"
TYPED_KEY = "zoo_typed_numbers"
#: the code appended to a lesson while it runs (and removed before it is stored): prints what
#: the lesson quoted, behind a tag
_QUOTED_TAG = "ZOO-QUOTED-VALUES:"
_COLLECT_QUOTED = (f"import json, zoo.lessons\nprint({_QUOTED_TAG!r} + json.dumps(zoo.lessons.quoted()))")

#: text that holds numbers without stating a result: left out before numbers are counted
_NOT_STATED = [
    re.compile(r"`[^`]*`"),                                     # code spans
    re.compile(r"\]\([^)]*\)"),                                 # link targets
    re.compile(r"https?://\S+"),
    re.compile(r"^#+\s*(Exercise|Solution to exercise)\s+\d+.*$", re.M),
    re.compile(r"^#+\s*\d+(\.\d+)*\.?", re.M),                  # a numbered heading
    re.compile(r"\b[a-zA-Z_]+\[\d+(,\s*\d+)*\]"),               # w[8]: a coordinate's name, not a value
    re.compile(r"\b\d{2}_[a-z_]+(\.ipynb)?"),                   # 07_validation_...: a lesson's file
    re.compile(r"§\s*\d+(\.\d+)*"),                             # DERIVATIONS.md §1.1: a section
    re.compile(r"\b(?:[Ss]ections?|[Ee]qs?\.|[Ee]quations?|Fig\.|[Tt]able|[Ss]teps?|[Ll]essons?|[Ee]xercises?|"
               r"[Ss]olutions?|[Pp]arts?|[Cc]ells?|[Aa]lgorithms?|[Uu]pdates?)\s*\(?\d+(\.\d+)*\)?(\s*(,|and|or|to|-|–)\s*\d+(\.\d+)*)*"),
    re.compile(r"\bet al\.?,?\s*\(?\d{4}[a-z]?\)?"),               # a citation's year
    re.compile(r"\(\d{4}\)"),
    re.compile(r"\b(?:Python|ArviZ|JAX|NumPyro|jax|numpyro|arviz)\s*\d+(\.\d+)*(\.x)?"),  # a release
]
_MATHS = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
#: a number as prose states one: a decimal, a percentage, or a whole number (signs included)
_DECIMAL_OR_PERCENT = re.compile(r"(?<![\w.])[-+−]?\d+(?:\.\d+)?\s?\\?%|(?<![\w.])[-+−]?\d+\.\d+")
_WHOLE = re.compile(r"(?<![\w.\-])\d+(?![\w.%])")


def stated_numbers(markdown: str, quoted: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    r"""The numbers a piece of lesson prose states by hand: (decimals and percentages, whole
    numbers). Values standing in front of their quote marks (``quoted``: the stored values) are
    computed, not typed, and are left out, as are code spans, link targets, exercise and
    numbered headings, coordinate names (``w[8]``), references to lessons, sections, equations
    and cells, citations' years and releases. Inside maths only decimals and percentages count:
    a formula's whole numbers (``N(0, 1)``, ``\log_{10}``) are its definition, a decimal there is
    a value (``\hat R \le 1.01``)."""
    text = markdown
    for name, value in (quoted or {}).items():
        text = text.replace(f"{value}<!--={name}-->", " ")
    text = QUOTE_MARK.sub(" ", text)
    maths = _MATHS.findall(text)
    text = _MATHS.sub(" ", text)
    for pattern in _NOT_STATED:
        text = pattern.sub(" ", text)
    decimals = _DECIMAL_OR_PERCENT.findall(text)
    for formula in maths:
        decimals += [d.replace("\\", "") for d in _DECIMAL_OR_PERCENT.findall(formula)]
    wholes = _WHOLE.findall(_DECIMAL_OR_PERCENT.sub(" ", text))
    return [d.replace(" ", "") for d in decimals], wholes


def prose_numbers(nb) -> list[tuple[int, list[str], list[str]]]:
    """Per markdown cell, (its index, the decimals and percentages, the whole numbers) its prose
    states outside the quote marks (:func:`stated_numbers`, with the notebook's kept values)."""
    quoted = dict(nb.metadata.get(QUOTED_KEY, {}))
    return [(i, *stated_numbers(text_of(cell.source), quoted))
            for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"]


def typed_numbers(nb) -> list[str]:
    """Every number the notebook's markdown states by hand and does not list under TYPED_KEY,
    as "cell i: number" (an empty list: every number in its prose is computed or a definition)."""
    allowed = set(nb.metadata.get(TYPED_KEY, {}))
    return [f"cell {i}: {n}" for i, decimals, wholes in prose_numbers(nb) for n in decimals + wholes
            if n not in allowed]


def quote_problems(nb) -> list[str]:
    """Where a stored notebook's prose and its quoted values disagree: a mark whose value is not
    kept in the metadata, or whose kept value is not what stands in front of it; a reason-less
    entry of TYPED_KEY."""
    quoted = dict(nb.metadata.get(QUOTED_KEY, {}))
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = text_of(cell.source)
        for m in QUOTE_MARK.finditer(text):
            name = m.group(1)
            if name not in quoted:
                problems.append(f"cell {i}: <!--={name}--> marks a value no run has quoted")
            elif not text[:m.start()].endswith(quoted[name]):
                problems.append(f"cell {i}: the prose in front of <!--={name}--> is not its quoted value "
                                f"{quoted[name]!r}")
    for number, reason in dict(nb.metadata.get(TYPED_KEY, {})).items():
        if not str(reason).strip():
            problems.append(f"the typed number {number!r} is listed without a reason")
    return problems


_GUESSED_NUMBER = re.compile(r"[-+−]?\d[\d.,]*(?:[eE][-+]?\d+)?%?$")


def render_quotes(nb, values: dict[str, str]) -> list[str]:
    """Write each quoted value in front of its marks in the notebook's markdown, replacing the
    value the last run wrote there (kept in the metadata), and keep the new values in the
    metadata. Returns the problems: a mark whose name the run did not quote, a stored value no
    longer in front of its mark (the prose was edited around it)."""
    previous = dict(nb.metadata.get(QUOTED_KEY, {}))
    problems = []
    used = {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = text_of(cell.source)
        pieces, at = [], 0
        for m in QUOTE_MARK.finditer(text):
            name = m.group(1)
            before = text[at:m.start()]
            if name not in values:
                problems.append(f"markdown cell {i}: <!--={name}--> marks a value the lesson never quoted "
                                "(zoo.lessons.quote)")
                pieces.append(before + m.group(0))
            else:
                old = previous.get(name)
                if old is None:
                    # a mark no run has filled yet: the author may have written a guess in front of
                    # it; a number there is replaced (a word is not: write the mark alone)
                    guess = _GUESSED_NUMBER.search(before)
                    old = guess.group(0) if guess else None
                    if old and old[0] in "-+−" and not values[name].startswith(old[0]):
                        # "= -1" guessed for a value "1": is the minus the prose's or the guess's?
                        problems.append(f"markdown cell {i}: the number {old!r} in front of the new mark <!--={name}--> "
                                        f"has a sign its value {values[name]!r} lacks; write the mark alone")
                        old = None
                if old is not None and before.endswith(old):
                    before = before[:len(before) - len(old)]
                elif old is not None:
                    problems.append(f"markdown cell {i}: the prose in front of <!--={name}--> no longer ends with "
                                    f"its last value {old!r}; write the mark alone and the value is put in front of it")
                pieces.append(before + values[name] + m.group(0))
                used[name] = values[name]
            at = m.end()
        pieces.append(text[at:])
        cell.source = "".join(pieces)
    nb.metadata[QUOTED_KEY] = dict(sorted(used.items()))
    return problems


def prose_differences(stored_nb, fresh_nb, rtol: float = RTOL) -> list[str]:
    """Where a fresh run's rendered prose differs from the stored prose beyond the tolerance
    (the numbers a lesson quotes are compared like its printed numbers)."""
    stored = [c for c in stored_nb.cells if c.cell_type == "markdown"]
    fresh = [c for c in fresh_nb.cells if c.cell_type == "markdown"]
    if len(stored) != len(fresh):
        return ["the notebook's markdown cells changed while it ran"]
    s_vals, f_vals = dict(stored_nb.metadata.get(QUOTED_KEY, {})), dict(fresh_nb.metadata.get(QUOTED_KEY, {}))
    found = []
    for name in sorted(set(s_vals) | set(f_vals)):
        a, b = s_vals.get(name), f_vals.get(name)
        if a is None or b is None:
            found.append(f"the quoted value {name!r} is {'new' if a is None else 'no longer quoted'}")
        elif (diff := text_difference(a, b, rtol)) is not None:
            found.append(f"the quoted value {name!r}: {diff}")
    return found


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------
def refresh(path: Path, *, cache_dir=None, check: bool = False) -> list[str]:
    """Execute one notebook; store it (or, with ``check``, only compare). Returns the
    differences from the stored outputs."""
    import nbformat

    stored = nbformat.read(str(path), as_version=4)
    private = private_names(stored)  # the code, read before anything runs
    if private:
        raise SystemExit(f"{path.name} not stored: it uses private names: " + "; ".join(private))
    with tempfile.TemporaryDirectory(prefix="zoo-notebook-") as workdir:
        executed = execute(path, workdir=workdir, cache_dir=cache_dir)
    unlabelled = figure_problems(executed)
    unrendered = rendering_problems(executed)
    if unrendered:
        # prose whose quoted values could not be written is not stored: mend the marks first
        raise SystemExit(f"{path.name} not stored: " + "; ".join(unrendered))
    fresh = for_storage(executed)
    problems = storage_problems(stored)
    found = differences(stored, fresh) if not problems else [f"was not stored as this script stores it: {problems[0]}"]
    if unlabelled:
        # a lesson with an unlabelled figure is not stored: mend it first
        raise SystemExit(f"{path.name} not stored: a figure lacks an axis label: " + "; ".join(unlabelled))
    if not check:
        nbformat.validate(fresh)
        nbformat.write(fresh, str(path))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: every notebook in notebooks/)")
    parser.add_argument("--check", action="store_true", help="compare with the stored outputs; write nothing")
    parser.add_argument("--cache-dir", default=None,
                        help="reference cache to read and fill (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    paths = args.paths or notebooks()
    stale = 0
    for path in paths:
        t0 = time.perf_counter()
        found = refresh(path, cache_dir=args.cache_dir, check=args.check)
        verb = "checked" if args.check else "stored"
        print(f"{verb} {path.name} ({time.perf_counter() - t0:.0f} s): "
              + ("outputs unchanged" if not found else f"{len(found)} difference(s) from the stored notebook"))
        for line in found:
            print("  - " + line)
        stale += bool(found)
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
