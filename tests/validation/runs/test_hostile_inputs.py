"""Hostile inputs: the start of a growing suite of what a hostile tester throws at the zoo.

Each case is something a user's machine or folder may hold that the zoo must survive or
refuse in one line, never misread or die on in a traceback:

* the current folder: files in it named like installed packages (``yaml.py``, ``dask.py``)
  are never imported in their place; a user's engine given as ``module:function`` is still
  found there, and one whose module is named like an installed one is refused in one line
  naming both files (validation/runs/engines.py);
* any locale: under ``LC_ALL=C`` with Python's UTF-8 mode off the commands still print
  (non-ASCII as backslash escapes) and every text file the zoo writes or reads is UTF-8.

The command line runs in fresh processes, started as a user starts it: the ``zoo`` console
script, whose ``sys.path`` does not begin with the current folder (``python -m zoo.cli``
would put it there itself, before any zoo code runs).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from repository import REPO
from zoo.validation.runs import engines

_SCRIPT = pathlib.Path(sys.executable).parent / "zoo"
#: the console script of this environment; else the module, with -P (Python >= 3.11) so that
#: the current folder is not put first on the path by Python itself
ZOO = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-P", "-m", "zoo.cli"]

#: modules the zoo or its dependencies import, and that a folder may hold a file of
HOSTILE = ("yaml", "dask", "h5py", "distributed", "netCDF4", "toolz", "cloudpickle")

#: a user's engine that keeps the contract and uses installed packages that the hostile
#: folder also holds files of
USER_ENGINE = """\
import dask
import yaml


def fit(spec, Phi, y, *, config=None):
    raise RuntimeError("not called by these tests")
"""


def _env(**changes) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(changes)
    return env


def _zoo(args, cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(ZOO + list(args), cwd=cwd, env=env or _env(), capture_output=True, timeout=300)


def _hostile_folder(folder: pathlib.Path) -> pathlib.Path:
    for name in HOSTILE:
        (folder / f"{name}.py").write_text(f"raise RuntimeError('hostile {name}.py of the current folder imported')\n")
    (folder / "myeng.py").write_text(USER_ENGINE)
    return folder


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "backslashreplace")


# --------------------------------------------------------------------------------------
# The current folder never shadows an installed module
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["--help"], ["datasets"]])
@pytest.mark.long
def test_a_command_without_user_engines_imports_nothing_of_the_current_folder(tmp_path, args):
    run = _zoo(args, _hostile_folder(tmp_path))
    out, err = _text(run.stdout), _text(run.stderr)
    assert run.returncode == 0, err[-2000:]
    assert "hostile" not in out + err and "Traceback" not in err, err[-2000:]


def _study_config(folder: pathlib.Path) -> str:
    path = folder / "study.toml"
    path.write_text(textwrap.dedent("""\
        name = "hostile"

        [[compare]]
        models = ["pcvm"]
        engines = ["myeng:fit"]
        params = { no_such_parameter = 1 }
        """))
    return str(path)


#: each command that resolves a user's engine, stopped by a bad argument checked after the
#: engine is imported (so before any work): the engine's own `import yaml, dask` must get
#: the installed packages
RESOLVING = {
    "compare": lambda folder: ["compare", "--engines", "myeng:fit", "--param", "no_such_parameter=1"],
    "sbc": lambda folder: ["sbc", "--model", "pcvm", "--engine", "myeng:fit,no_such_engine"],
    "study": lambda folder: ["study", _study_config(folder)],
}


@pytest.mark.parametrize("command", sorted(RESOLVING))
@pytest.mark.long
def test_a_user_engine_in_the_current_folder_is_found_and_shadows_nothing(tmp_path, command):
    folder = _hostile_folder(tmp_path)
    run = _zoo(RESOLVING[command](folder), folder)
    out, err = _text(run.stdout), _text(run.stderr)
    assert "hostile" not in out + err and "Traceback" not in err, err[-3000:]
    # the engine was found and checked: what stops the command is the bad name after it
    assert run.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "no_such" in err and "myeng" not in err, err


@pytest.mark.long
def test_a_user_module_named_like_an_installed_one_is_refused_naming_both_files(tmp_path):
    (tmp_path / "json.py").write_text("def fit(spec, Phi, y, *, config=None):\n    return None\n")
    run = _zoo(["compare", "--engines", "json:fit", "--param", "no_such_parameter=1"], tmp_path)
    err = _text(run.stderr)
    assert run.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert str(tmp_path / "json.py") in err and json.__file__ in err, err


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """tmp_path as the current folder, not on sys.path; sys.path and the modules imported
    from it are restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd(), str(tmp_path))])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        module = sys.modules[name]
        if str(tmp_path) in str(getattr(module, "__file__", None) or getattr(module, "__path__", "")):
            del sys.modules[name]


def _fit_module(path: pathlib.Path, marker: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"MARK = {marker!r}\n\ndef fit(spec, Phi, y, *, config=None):\n    return MARK\n")


def test_import_engine_finds_a_module_of_the_current_folder_behind_installed_ones(user_folder):
    _fit_module(user_folder / "hostile_case_engine.py", "here")
    installed = list(sys.path)
    fn = engines.import_engine("hostile_case_engine:fit")
    assert fn(None, None, None) == "here"
    # the folder is searched after every installed place, never before one
    assert sys.path[: len(installed)] == installed and sys.path[len(installed):] == [str(user_folder)]
    engines.import_engine("hostile_case_engine:fit")  # a second resolution: nothing added again
    assert sys.path.count(str(user_folder)) == 1


def test_import_engine_finds_a_package_of_the_current_folder(user_folder):
    (user_folder / "hostile_case_pkg").mkdir()
    (user_folder / "hostile_case_pkg" / "__init__.py").write_text("")
    _fit_module(user_folder / "hostile_case_pkg" / "engine.py", "package")
    assert engines.import_engine("hostile_case_pkg.engine:fit")(None, None, None) == "package"


def test_import_engine_finds_a_module_on_the_path_outside_the_current_folder(user_folder, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("pythonpath")
    _fit_module(elsewhere / "hostile_case_elsewhere.py", "elsewhere")
    sys.path.insert(0, str(elsewhere))  # as PYTHONPATH puts it (the fixture restores sys.path)
    before = list(sys.path)
    try:
        assert engines.import_engine("hostile_case_elsewhere:fit")(None, None, None) == "elsewhere"
        assert sys.path == before  # the current folder holds nothing of it: not added
    finally:
        sys.modules.pop("hostile_case_elsewhere", None)


@pytest.mark.parametrize("front", [False, True], ids=["folder not on the path", "folder first on the path"])
@pytest.mark.parametrize("name", ["json", "numpy", "yaml"])
def test_import_engine_refuses_a_module_named_like_an_installed_one(user_folder, name, front):
    installed = importlib.util.find_spec(name).origin
    _fit_module(user_folder / f"{name}.py", "shadow")
    if front:  # as `python -m`, `python -c` or PYTHONPATH=. put it
        sys.path.insert(0, "")
    with pytest.raises(ValueError) as err:
        engines.import_engine(f"{name}:fit")
    message = str(err.value)
    assert "\n" not in message and str(user_folder / f"{name}.py") in message and installed in message, message
    assert f"{name}:fit" in message


def test_a_package_of_the_current_folder_named_like_an_installed_one_is_refused(user_folder):
    installed = importlib.util.find_spec("yaml").origin
    (user_folder / "yaml").mkdir()
    (user_folder / "yaml" / "__init__.py").write_text("")
    _fit_module(user_folder / "yaml" / "engine.py", "shadow")
    with pytest.raises(ValueError) as err:
        engines.import_engine("yaml.engine:fit")
    assert str(user_folder / "yaml" / "__init__.py") in str(err.value) and installed in str(err.value), err.value


def test_import_user_module_is_the_same_rule_for_other_user_code(user_folder):
    """A study's defect given as module:function (validation/runs/battery.py) goes through it."""
    _fit_module(user_folder / "hostile_case_defects.py", "defect")
    assert engines.import_user_module("hostile_case_defects", "defect 'hostile_case_defects:fit'").MARK == "defect"
    _fit_module(user_folder / "json.py", "shadow")
    with pytest.raises(ValueError, match="defect 'json:fit'"):
        engines.import_user_module("json", "defect 'json:fit'")


# --------------------------------------------------------------------------------------
# Any locale
# --------------------------------------------------------------------------------------
def _c_locale() -> dict[str, str]:
    env = _env(LC_ALL="C", LANG="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    return env


@pytest.mark.parametrize("args", [["datasets"], ["reproduce", "--help"], ["--help"]])
@pytest.mark.long
def test_commands_print_in_the_c_locale(tmp_path, args):
    run = _zoo(args, tmp_path, env=_c_locale())
    out, err = _text(run.stdout), _text(run.stderr)
    assert run.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert out.strip()
    if args == ["datasets"]:  # a source with an accent, escaped instead of raising
        assert "ripley" in out and "\\x" in out


def test_text_files_are_utf8_in_the_c_locale(tmp_path):
    text = "± ä — σ²"
    code = textwrap.dedent(f"""\
        import locale, sys
        from zoo.validation.base.atomic import write_text_atomic
        assert locale.getpreferredencoding(False).lower() in ("ascii", "ansi_x3.4-1968"), locale.getpreferredencoding()
        write_text_atomic(sys.argv[1], {ascii(text)})
        """)
    path = tmp_path / "report.md"
    run = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path, env=_c_locale(), capture_output=True,
                         timeout=300)
    assert run.returncode == 0, _text(run.stderr)[-3000:]
    assert path.read_bytes() == text.encode("utf-8")


#: the package's folders (as installed: zoo, zoo.models, zoo.inference, ...)
PACKAGE = ("zoo", "models", "inference", "validation", "reproductions", "data")
#: the calls that open a file as text unless given a binary mode
_TEXT_BY_DEFAULT = {"open", "read_text", "write_text", "fdopen"}
#: callables named ``open`` of modules whose default mode is binary, or that take no text encoding
_BINARY_OPEN = {"os", "gzip", "bz2", "lzma", "tarfile", "zipfile"}


def _text_opens_without_encoding(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        keywords = {k.arg: k.value for k in node.keywords}
        if "encoding" in keywords or name not in (*_TEXT_BY_DEFAULT, "TextIOWrapper", "NamedTemporaryFile"):
            continue
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _BINARY_OPEN:
            mode = keywords.get("mode", node.args[1] if len(node.args) > 1 else None)
            if not (isinstance(mode, ast.Constant) and "t" in str(mode.value)):
                continue
        elif name in ("open", "fdopen") or name == "NamedTemporaryFile":
            position = 1 if isinstance(f, ast.Name) or name == "fdopen" else 0
            mode = keywords.get("mode", node.args[position] if len(node.args) > position else None)
            if name == "NamedTemporaryFile" and mode is None:
                continue  # w+b
            if isinstance(mode, ast.Constant) and "b" in str(mode.value):
                continue
        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_text_file_the_package_opens_names_its_encoding():
    """A text file opened without ``encoding=`` is read or written in the locale's
    encoding (ASCII under LC_ALL=C): every one must say UTF-8."""
    found = [hit for folder in PACKAGE for path in sorted((REPO / folder).rglob("*.py"))
             for hit in _text_opens_without_encoding(path)]
    assert not found, "\n".join(found)


# --------------------------------------------------------------------------------------
# Fail early and say why (issue 50, item 5): every value is checked before any work - no
# data loaded for a fit, no cross-validation, no cluster, no output folder - and a bad one
# ends the command in one line that names it
# --------------------------------------------------------------------------------------
#: a refusal comes before any work: the seconds it may take are the interpreter's and the
#: imports' (about 4 s), far below the work's (27 s of CV for a bad PCVM alpha, minutes for
#: a bad seed, forever for 10^17 simulations)
BEFORE_ANY_WORK_S = 20


def _refused(args, folder, *words, env=None):
    """Run ``zoo args`` in ``folder`` with --out inside it; assert status 2, one line on
    stderr beginning with the command and naming ``words``, no output folder, and no
    more than BEFORE_ANY_WORK_S seconds (a hung run fails at the timeout instead)."""
    import time

    out = folder / "out"
    t0 = time.perf_counter()
    run = subprocess.run(ZOO + list(args) + ["--out", str(out)], cwd=folder, env=env or _env(), capture_output=True,
                         timeout=120)
    seconds = time.perf_counter() - t0
    err = _text(run.stderr)
    lines = [line for line in err.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"zoo {args[0]}"), err[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists(), "the command wrote its output folder before refusing"
    assert seconds < BEFORE_ANY_WORK_S, f"refused after {seconds:.0f} s: work ran first"
    return lines[0]


# -- 1. hyper-parameter values, by their domain in the model's record --------------------
@pytest.mark.long
def test_a_bad_parameter_value_is_refused_before_the_cross_validation(tmp_path):
    """`zoo compare --param alpha=0` was refused by the spec after 27 s of CV."""
    _refused(["compare", "--param", "alpha=0", "--no-progress"], tmp_path,
             "pcvm parameter alpha must be positive", "got 0")


@pytest.mark.parametrize("model, params, words", [
    ("pcvm", {"alpha": 0.0}, ["pcvm parameter alpha", "positive", "got 0"]),
    ("pcvm", {"width": float("nan")}, ["width", "finite", "got nan"]),
    ("pcvm", {"alpha_bias": float("inf")}, ["alpha_bias", "finite", "got inf"]),
    ("pcvm", {"alpha": "1"}, ["alpha", "a number", "'1'"]),
    ("pcvm", {"alpha": True}, ["alpha", "a number", "True"]),
    ("ggsm-probit", {"q": 0.0}, ["ggsm-probit parameter q", "(0, 2]", "got 0"]),
    ("ggsm-probit", {"a": -1.0}, ["parameter a", "positive", "got -1"]),
    ("gig-logistic", {"rho": 0.0}, ["parameter rho", "nonzero", "got 0"]),
    ("gig-logistic", {"bias": 0.5}, ["parameter bias", "0 or 1", "got 0.5"]),
    ("grid-rvm", {"noise": 2.5}, ["parameter noise", "integer", "got 2.5"]),
    ("grid-rvm", {"noise": 1e9}, ["parameter noise", "to 1000", "got 1e+09"]),
    ("grid-rvm", {"d0": 0.0}, ["parameter d0", "positive"]),
    ("bblr", {"flip": 0.5}, ["parameter flip", "[0, 0.5)", "got 0.5"]),
    ("bblr", {"config": 3.0}, ["parameter config", "1 or 2", "got 3"]),
    ("bblr", {"pi": 1.0, "s2": 1.0, "ell": 1.0, "sparse": 1.0}, ["parameter pi", "(0, 1)", "got 1"]),
    ("bblr", {"a": 0.6, "b": 0.6}, ["a + b must be <= 1", "a = 0.6, b = 0.6"]),
])
def test_every_model_refuses_a_parameter_value_outside_its_domain(model, params, words):
    from zoo.validation.records import registry

    record = registry.get_model(model)
    with pytest.raises(ValueError) as err:
        record.check_params(params)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message
    # the registry's protocol call refuses them before the model's prepare runs (on no
    # split at all: prepare would fail otherwise, and not with this message)
    with pytest.raises(ValueError) as err:
        registry.prepare(model, None, params)
    assert str(err.value) == message


def test_every_parameter_of_every_model_declares_its_domain_and_admits_the_papers_settings():
    """Each --param has a declared domain (a name without one would take any finite
    number), and the domains refuse nothing the papers' settings or a shipped study use."""
    import glob

    from zoo.validation.records import registry
    from zoo.validation.runs.study import expand, load_config

    good = {"pcvm": {"width": 0.7, "alpha": 1.0, "alpha_bias": 0.01},
            "ggsm-probit": {"q": 2.0, "a": 1e-3, "b": 1e-3, "width": 1.0},
            "gig-logistic": {"k": 1e-6, "theta": 1e-6, "rho": -1.0, "bias": 0.0},
            "grid-rvm": {"a0": 1e-6, "b0": 1e-6, "c0": 1e-6, "d0": 1e-6, "delta": 5.55, "noise": 30.0},
            "bblr": {"gamma": 4.0, "lam": 1.0, "a": 0.0, "b": 1.0, "flip": 0.1, "rbf": 1.0, "sparse": 1.0,
                     "pi": 0.5, "s2": 1.0, "ell": 0.1}}
    for name in registry.model_names():
        record = registry.get_model(name)
        assert set(record.param_domains) == set(record.params), name
        record.check_params(good[name])
    for path in glob.glob(str(REPO / "validation" / "runs" / "studies" / "*.toml")):
        expand(load_config(path))


@pytest.mark.long
def test_a_study_refuses_a_bad_parameter_value_before_any_cluster(tmp_path):
    study = tmp_path / "study.toml"
    study.write_text('[[compare]]\nmodels = ["pcvm"]\nparams = { width = 0.7, alpha = -2 }\n')
    _refused(["study", str(study), "--no-progress"], tmp_path, "pcvm parameter alpha must be positive", "got -2")


# -- 2. the size options of `zoo reproduce` ----------------------------------------------
@pytest.mark.long
def test_a_reproduce_size_below_what_its_protocol_needs_is_refused_before_any_cell(tmp_path):
    """`zoo reproduce horii-table1 --n-train 1` ran 80 cells that each failed in a Dask traceback."""
    _refused(["reproduce", "horii-table1", "--n-train", "1", "--no-progress"], tmp_path,
             "--n-train must be at least 10", "5-fold stratified CV", "got 1")


@pytest.mark.parametrize("name, reps, options, words", [
    # a size above the minimum whose drawn labels leave a class short of the CV's folds
    ("horii-table1", 1, {"n_train": 10}, ["--n-train 10", "repetition 0", "5 of each"]),
    ("ggig-feature-selection", 1, {"n_train": "4"}, ["--n-train must be at least 10", "got 4"]),
    ("ggig-feature-selection", 1, {"n_relevant": "60"}, ["--n-relevant must be at most 50", "50 features"]),
    ("ggig-feature-selection", 1, {"q_grid": "3"}, ["--q-grid", "(0, 2]"]),
    ("ggig-table1", 101, {}, ["--reps must be at most 100", "spiral"]),
    ("ggig-table2", 1, {"select_splits": 101}, ["--select-splits must be at most 100"]),
    ("horii-table1", 20_000, {}, ["--reps = 20,000", "10,000"]),
    ("bblr-kernel", 1, {"max_train": 12}, ["--max-train 12", "the SVC's 5-fold", "raise --max-train"]),
    ("bblr-kernel", 1, {"max_train": 4}, ["--max-train must be at least 10", "got 4"]),
    ("bblr-uci", 1, {"folds": 1}, ["--folds must be at least 2", "got 1"]),
    ("bblr-uci", 100, {}, ["--reps must be at most 99"]),
    ("bblr-table14", 1, {}, ["--reps must be at least 2", "paired standard error"]),
    ("gridrvm-digits", 1, {"sizes": "5,60", "relevance_size": 60}, ["--sizes must all be at least 10"]),
])
def test_every_reproduce_entry_checks_its_sizes_before_any_cell(tmp_path, monkeypatch, name, reps, options, words):
    from zoo import reproductions as reproduce

    def no_cells(*args, **kwargs):
        pytest.fail("the entry's cell store started before its options were checked")

    monkeypatch.setattr(reproduce, "CellStore", no_cells)
    with pytest.raises(ValueError) as err:
        reproduce.run(reproduce.ReproductionConfig(name, reps=reps, options=options), out=str(tmp_path / "out"), jobs=1)
    message = str(err.value)
    assert "\n" not in message and all(w in message for w in words), message
    assert not (tmp_path / "out").exists()


def test_every_reproduce_entry_accepts_its_defaults_without_work(monkeypatch):
    from zoo import reproductions as reproduce

    for name in reproduce.ENTRIES:
        entry, reps, parsed = reproduce.check(name)
        assert reps == entry.default_reps and set(parsed) == {o.name for o in entry.options}


# -- 3. absurd counts ---------------------------------------------------------------------
def test_a_study_of_absurdly_many_simulations_is_refused_with_the_time_it_would_take(tmp_path):
    """`sims = 100000000000000000` in a study file started a cluster and ran."""
    study = tmp_path / "study.toml"
    study.write_text('[[sbc]]\nmodel = "pcvm"\nengines = ["laplace"]\nsims = 100000000000000000\n')
    line = _refused(["study", str(study), "--no-progress"], tmp_path,
                    "[[sbc]] block 1", "sims = 100,000,000,000,000,000", "100,000", "years")
    assert "~1 s per simulation" in line


@pytest.mark.parametrize("block, words", [
    ('[[sbc]]\nmodel = "pcvm"\ndraws = 10000000\n', ["draws = 10,000,000", "100,000", "over 100 simulations"]),
    ('[[sbc]]\nmodel = "pcvm"\nreplicates = 1000000\n', ["replicates = 1,000,000", "1,000", "per replicate"]),
    ('[[sbc]]\nmodel = "pcvm"\nsims = 5\n', ["at least 10 simulations"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\ndatasets = 100000000\n', ["datasets = 100,000,000", "years"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nsbc_sims = 1000000000\n', ["sbc_sims = 1,000,000,000"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nsbc_replicates = 5000\n', ["sbc_replicates = 5,000"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nreference_draws = 10000000000\n', ["reference_draws = 10,000,000,000"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nproblem = { n = 10000000000 }\n', ["problem n = 10,000,000,000"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nproblem = { n = -3 }\n', ["problem n must be a positive integer"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nproblem = { size = 3 }\n', ["unknown key 'size'"]),
    ('[[defects]]\nmodel = "pcvm"\nengine = "ep"\nproblem = { seed = -1 }\n', ["problem seed", "2**32 - 1"]),
])
def test_a_study_refuses_every_absurd_count_before_it_expands(block, words):
    import tomllib

    from zoo.validation.runs.study import expand

    with pytest.raises(ValueError) as err:
        expand(tomllib.loads(block))
    message = str(err.value)
    assert "\n" not in message and message.startswith("study: [[") and all(w in message for w in words), message


@pytest.mark.parametrize("args, words", [
    (["--sims", "100000000000000000"], ["--sims = 100,000,000,000,000,000", "years"]),
    (["--draws", "10000000"], ["--draws = 10,000,000", "over 100 simulations"]),
    (["--n", "10000000000"], ["--n = 10,000,000,000"]),
])
@pytest.mark.long
def test_zoo_sbc_refuses_an_absurd_count(tmp_path, args, words):
    _refused(["sbc", "--engine", "laplace", "--no-progress", *args], tmp_path, *words)


# -- 4. seeds -----------------------------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["compare", "--param", "width=0.7", "--no-cache", "--no-progress"],
    ["sbc", "--engine", "laplace", "--no-progress"],
    ["reproduce", "horii-table1", "--no-progress"],
])
@pytest.mark.parametrize("seed", ["-1", str(2**32)])
@pytest.mark.long
def test_a_seed_outside_0_to_2_to_the_32_is_refused_before_any_work(tmp_path, command, seed):
    """`--seed -1` ran `zoo compare` for 113 s (and `zoo sbc` for 40) before numpy refused it."""
    _refused([*command, "--seed", seed], tmp_path, "--seed must be an integer from 0 to", f"got {seed}")


def test_a_reproduce_seed_whose_cell_seeds_overflow_is_refused(tmp_path, monkeypatch):
    """Cells seed scikit-learn with seed x 100003 + repetition: --seed 50000 passed and every
    cell failed on scikit-learn's 2**32 bound."""
    from zoo import reproductions as reproduce

    with pytest.raises(ValueError, match=r"--seed must be an integer from 0 to 42948 for zoo reproduce"):
        reproduce.check("horii-table1", seed=50_000)
    reproduce.check("horii-table1", seed=reproduce.MAX_SEED)


def test_seed_check_refuses_what_numpy_and_scikit_learn_refuse():
    import numpy as np

    from zoo.models.checks import MAX_SEED, check_seed

    assert check_seed(0) == 0 and check_seed(np.int64(MAX_SEED)) == MAX_SEED
    np.random.RandomState(MAX_SEED)  # the bound is the libraries' own
    for bad in (-1, MAX_SEED + 1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="seed must be an integer from 0 to 4294967295"):
            check_seed(bad)


# -- 5. a compile cache that cannot be written --------------------------------------------
def _read_only_folder(tmp_path: pathlib.Path) -> str:
    """A folder that exists and takes no new files: a chmod'ed one, or (as root, whom
    permissions do not stop) one of /proc's."""
    folder = tmp_path / "read-only-jax-cache"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").write_text("")
    except OSError:
        return str(folder)
    if os.path.isdir("/proc/self/fdinfo"):
        return "/proc/self/fdinfo"
    # as root with no /proc there is no folder that refuses a write: nothing to test with
    pytest.skip("no folder on this machine refuses new files (root, and no /proc), so an unwritable "
                "compile cache cannot be made here")


@pytest.mark.long
def test_a_read_only_compile_cache_costs_a_warning_not_the_command(tmp_path):
    """A read-only JAX cache folder (a shared, read-only cache) ended `zoo compare` with
    status 2; the programs are then compiled without a persistent cache."""
    ro = _read_only_folder(tmp_path)
    out = tmp_path / "out"
    run = subprocess.run(ZOO + ["sbc", "--engine", "laplace", "--sims", "10", "--draws", "9", "--n", "20",
                                "--no-progress", "--out", str(out)],
                         cwd=tmp_path, env=_env(ZOO_JAX_CACHE=ro), capture_output=True, timeout=300)
    err = _text(run.stderr)
    assert run.returncode == 0, err[-3000:]
    warnings_ = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings_) == 1 and warnings_[0].startswith("zoo sbc: warning: JAX cache folder"), err
    assert ro in warnings_[0] and "without a compile cache" in warnings_[0], warnings_[0]
    assert (out / "pcvm" / "sbc.md").exists()


def test_zoo_compare_goes_on_past_a_read_only_compile_cache(tmp_path, monkeypatch, capsys):
    """The same for `zoo compare`, in this process: it reaches the comparison."""
    from zoo import cli

    ro = _read_only_folder(tmp_path)
    monkeypatch.setenv("ZOO_JAX_CACHE", ro)

    def reached(*args, **kwargs):
        raise ValueError("reached the comparison")

    monkeypatch.setattr(cli, "compare", reached)
    status = cli.main(["compare", "--param", "width=0.7", "--param", "alpha=1", "--engines", "em", "--no-cache",
                       "--no-progress", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and err[-1] == "zoo compare: error: reached the comparison", err
    assert len(err) == 2 and err[0].startswith("zoo compare: warning: JAX cache folder (env ZOO_JAX_CACHE)"), err
