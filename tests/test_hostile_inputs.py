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

from zoo.validation.runs import engines

REPO = pathlib.Path(__file__).resolve().parent.parent
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
def test_a_user_engine_in_the_current_folder_is_found_and_shadows_nothing(tmp_path, command):
    folder = _hostile_folder(tmp_path)
    run = _zoo(RESOLVING[command](folder), folder)
    out, err = _text(run.stdout), _text(run.stderr)
    assert "hostile" not in out + err and "Traceback" not in err, err[-3000:]
    # the engine was found and checked: what stops the command is the bad name after it
    assert run.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "no_such" in err and "myeng" not in err, err


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
    """A study's defect given as module:function (validation/runs/defects.py) goes through it."""
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
