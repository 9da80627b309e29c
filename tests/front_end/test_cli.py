"""The `zoo` command line, called in-process through ``zoo.cli.main``.

A bad argument must end the command with a non-zero status and one line on stderr that
names the problem - never a Python traceback, and before any expensive work (so nothing
is written to the output folder).
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import jax
import pytest

import zoo
from zoo import data as datasets
from zoo.cli import main
from zoo.validation.records import registry
from zoo.validation.runs.results import ComparisonResult, EngineRow, ReferenceSummary

from repository import REPO


def run_cli(argv, capsys):
    """(exit status, stdout, stderr) as a shell would see them.

    ``raise SystemExit("text")`` exits with status 1 after Python prints the text on
    stderr; any other exception escaping ``main`` is a traceback for the user, so it is
    reported as a test failure here.
    """
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code
        if isinstance(status, str):
            print(status, file=sys.stderr)
            status = 1
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"`zoo {' '.join(argv)}` ended in a traceback: {type(exc).__name__}: {exc}")
    out, err = capsys.readouterr()
    return status, out, err


def test_datasets_lists_every_data_set(capsys):
    status, out, err = run_cli(["datasets"], capsys)
    assert status == 0
    listed = {line.split()[0] for line in out.splitlines()[1:] if line.strip()}
    assert listed == set(datasets.names())
    # every row's numbers start in the header's columns, however long the name
    lines = [line for line in out.splitlines() if line.strip()]
    column = lines[0].index("train")
    assert all(line[column - 2:column + len("train")].strip().isdigit() for line in lines[1:])
    # the "default of" column: each model beside its record's default data set, and no other
    start = lines[0].index("default of")
    shown = {line.split()[0]: line[start:].split("  ")[0].strip() for line in lines[1:]}
    expected: dict[str, list[str]] = {}
    for name in registry.model_names():
        expected.setdefault(registry.get_model(name).default_data, []).append(name)
    assert shown == {data: ", ".join(expected.get(data, ["-"])) for data in shown}


# (extra argv, words the message must contain). Each case would otherwise reach the
# expensive part (CV, NUTS) within seconds, so they also check that arguments are
# validated first.
BAD_ARGUMENTS = {
    "unknown data set": (["--data", "no_such_data"], ["no_such_data", "ripley"]),
    "unknown model": (["--model", "no_such_model"], ["no_such_model", "pcvm"]),
    # a user's model by its path: a bare NumPyro function has no data; a model of its own data
    # takes no --data; a module that is not there
    "model path to a function": (["--model", "user_models:eight_schools_noncentered"],
                                 ["a model is a Model", "got function", "Model(fn, data)"]),
    "own-data model with --data": (["--model", "user_models:EIGHT_SCHOOLS_MODEL", "--data", "ripley"],
                                   ["brings its own data", "ripley"]),
    "model path to no module": (["--model", "no_such_module:M"], ["cannot import 'no_such_module'"]),
    "unknown engine": (["--engines", "em,no_such_engine"], ["no_such_engine", "laplace"]),
    "param not name=value": (["--param", "width"], ["name=value", "width"]),
    "param value not a number": (["--param", "width=wide"], ["width", "wide"]),
    "unknown param name": (["--param", "gamma=2"], ["gamma", "width"]),
    "negative width": (["--param", "width=-0.5"], ["width", "-0.5"]),
    "zero alpha": (["--param", "width=0.7", "--param", "alpha=0"], ["alpha"]),
    # the value as written, not numpy's repr of it (it read "got array(-1.)")
    "negative alpha": (["--param", "width=0.7", "--param", "alpha=-1"], ["alpha must be positive", "got -1"]),
    # /proc exists but takes no new files: it answers ENOENT, which read "No such file"
    "--out in /proc": (["--out", "/proc/zoo-report"], ["cannot be created in /proc",
                                                      "the folder does not take new files"]),
    "split out of range": (["--split", "3"], ["split 3", "ripley"]),
    "no NUTS draws": (["--samples", "0"], ["samples"]),
    "no NUTS chains": (["--chains", "0"], ["chains"]),
    # R-hat needs two chains: one ran for minutes and then crashed printing a None
    "one NUTS chain": (["--chains", "1"], ["--chains", "at least 2", "R-hat", "got 1"]),
    "a sampler of another model": (["--reference", "nuts,pg-gibbs"], ["pg-gibbs", "pcvm", "nuts"]),
    "target accept above 1": (["--target-accept", "1.5"], ["target", "accept", "1.5"]),
    "empty engine list": (["--engines", ",", "--param", "width=0.7"], ["engine"]),
    "ggsm q out of range": (["--model", "ggsm-probit", "--param", "q=3"], ["q", "(0, 2]"]),
    "ggsm negative prior scale": (["--model", "ggsm-probit", "--param", "b=-1"], ["b"]),
    "ggsm engine of another model": (["--model", "ggsm-probit", "--engines", "laplace"], ["laplace", "mm"]),
    "a user engine that does not import": (["--engines", "ep,no_such_module_xyz:fit"],
                                           ["cannot import", "no_such_module_xyz"]),
    "a user engine without the contract": (["--engines", "os.path:join"],
                                           ["os.path:join", "contract", "fit(spec, Phi, y, *, config=None)"]),
}


class _NoCV:
    """The progress of a protocol's cross-validation: its first report (one width done) fails the test."""

    def update(self, n=1):
        pytest.fail("the CV started before the arguments were checked")

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


# every test leaves the registry as it found it (conftest.py)
pytestmark = pytest.mark.usefixtures("registry_as_it_was")


@pytest.fixture
def no_work(monkeypatch):
    """Any step that costs time (CV, reference sampling, SBC, a study, a reproduction) fails
    the test: an argument error must come before all of them. The protocol's own value
    checks (a negative width) may run: they come before its first CV fit."""
    from zoo import reproductions as reproduce
    from zoo.validation.records import registry
    from zoo.validation.runs import compare, sbc, study

    def forbidden(*args, **kwargs):
        pytest.fail("work started before the arguments were checked")

    real_prepare = registry.prepare

    def prepare_without_cv(model, split, params=None, *, progress=None):
        return real_prepare(model, split, params, progress=_NoCV())

    monkeypatch.setattr(registry, "prepare", prepare_without_cv)
    for module, name in [(compare, "first_certified_reference"), (sbc, "run_sbc"), (study, "run_study"),
                         (reproduce, "run")]:
        monkeypatch.setattr(module, name, forbidden)
    # the command line binds these names at its import: they are guarded there too
    monkeypatch.setattr("zoo.cli.run_sbc", forbidden)
    monkeypatch.setattr("zoo.cli.run_study", forbidden)


@pytest.mark.parametrize("extra,words", list(BAD_ARGUMENTS.values()), ids=list(BAD_ARGUMENTS))
def test_bad_compare_arguments_fail_with_one_clear_line(extra, words, capsys, tmp_path, no_work):
    out_dir = tmp_path / "report"
    # small NUTS settings bound the cost should a case ever slip through to sampling
    argv = ["compare", "--no-progress", "--no-cache", "--out", str(out_dir),
            "--warmup", "20", "--samples", "20", "--chains", "2", *extra]
    # a later flag wins in argparse, so the case's own --samples/--chains apply
    status, out, err = run_cli(argv, capsys)
    assert status not in (0, None)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], f"message {lines[0]!r} does not mention {word!r}"
    assert not out_dir.exists(), "a failed command must not start writing a report"


@pytest.mark.long
def test_compare_writes_a_report_and_prints_the_table(capsys, tmp_path, fast_nuts_cli_args, nuts_cache_dir,
                                                       monkeypatch):
    """The success path, small: width given (no CV), one engine and the README's example of
    a user's engine (examples/biased_ep.py, imported from the current folder as the README
    runs it), the short NUTS settings of conftest.py (certified here) and the session's
    NUTS cache."""
    monkeypatch.chdir(REPO)
    out_dir = tmp_path / "report"
    argv = ["compare", "--param", "width=0.7", "--engines", "em,examples.biased_ep:fit", *fast_nuts_cli_args,
            "--no-progress", "--cache-dir", str(nuts_cache_dir), "--out", str(out_dir)]
    status, out, err = run_cli(argv, capsys)
    assert status == 0, err
    assert "pcvm on ripley" in out
    assert "reference (nuts): certified" in out
    assert any(line.startswith("em ") for line in out.splitlines())
    # the biased EP is measured and judged like the zoo's engines, and its bias is seen
    assert any(line.startswith("examples.biased_ep:fit ") for line in out.splitlines())
    assert "examples.biased_ep:fit differs from the reference" in out
    assert (out_dir / "report.md").is_file() and (out_dir / "results.json").is_file()
    assert f"report: {out_dir / 'report.md'}" in out
    # the report names the device and why (--device auto: the CPU for a comparison)
    assert "Computed on: cpu, " in (out_dir / "report.md").read_text()
    assert json.loads((out_dir / "results.json").read_text())["config"]["device"].startswith("cpu, ")
    # a cache folder that cannot be written (a shared, read-only one) is still read: the same
    # run again reads its reference from it, with one warning instead of a refusal. Root writes
    # anywhere, so the folder check is told the folder is read-only.
    from zoo import cli

    real = cli.folder_problem
    monkeypatch.setattr(cli, "folder_problem", lambda path, what: (
        f"{what} {path} cannot be written: Read-only file system" if str(path) == str(nuts_cache_dir)
        else real(path, what)))
    status, out, err = run_cli(argv[:-1] + [str(tmp_path / "again")], capsys)
    assert status == 0, err
    assert "(from cache)" in out
    assert [line for line in err.splitlines() if line.strip()] == [
        f"zoo compare: warning: cache folder (--cache-dir, env ZOO_CACHE_DIR) {nuts_cache_dir} cannot be written: "
        "Read-only file system; its references are read, new ones are not kept"]


def test_compare_without_a_reference_writes_the_report_and_warns(capsys, tmp_path, monkeypatch):
    """Every reference sampler running out of time is not an error: the report is written
    (saying there is no reference), the table printed, one warning on stderr, status 0.
    --no-cache keeps an earlier run from standing in for the sampler; the temporary folder
    the time-limited sampler reported through is deleted (it was left, empty, in /tmp)."""
    import tempfile

    out_dir = tmp_path / "report"
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    argv = ["compare", "--param", "width=0.7", "--engines", "em", "--time-limit", "0.01", "--no-progress",
            "--no-cache", "--out", str(out_dir)]
    with pytest.warns(UserWarning, match="ran out of time"):
        status, out, err = run_cli(argv, capsys)
    assert os.listdir(tmp_path / "tmp") == []
    assert status == 0, err
    assert "reference: none, NOT CERTIFIED" in out
    assert any(line.startswith("em ") for line in out.splitlines())
    assert "zoo compare: warning: no reference: nuts ran out of time" in err
    assert "**No reference: not certified - every reference sampler ran out of time.**" in (
        out_dir / "report.md").read_text()


def _summary_result(engines: dict, reference: ReferenceSummary, *, model="ggsm-probit", data="heart",
                    n_train=170, hyper=None) -> ComparisonResult:
    """A small ComparisonResult for the printed summary: only what it shows is filled in."""
    return ComparisonResult(model=model, data=data, split=0, n_train=n_train, n_test=0, hyper=hyper or {},
                            selection={}, moments=None, spec={}, reference=reference, references_tried=(reference,),
                            variant_references={}, reference_test_error=0.1, engines=engines, config={})


def _row(name, *, failure=None, **metrics) -> EngineRow:
    values = {k: metrics.get(k) for k in ("pred_mae", "std_mean_err_median", "sd_ratio_median", "khat", "test_error")}
    return EngineRow(name=name, metrics=values, kind="point", description="", other_model=None, n_basis=None,
                     seconds=None if failure else 0.01, compile_seconds=None, converged=failure is None,
                     reason=failure or "", n_iter=None, objective="",
                     speedup_vs_reference=None if failure else 100.0, failure=failure, pruned_vs_reference=None)


def test_summary_table_shows_a_failed_ggsm_engine_as_failed_not_as_numbers():
    """A failed engine row (compare.failed_row) is printed as its reason; the other rows
    keep their numbers, and the engine column is wide enough for 'mm-laplace'."""
    from zoo.validation.report.compare_report import summary_table

    ok = _row("mm", pred_mae=0.01, std_mean_err_median=0.2, test_error=0.1)
    failed = _row("mm-laplace", failure="ApproximationFailed: Hessian not positive definite")
    reference = ReferenceSummary("nuts", True, rhat_max=1.0, ess_bulk_min=500.0, ess_tail_min=500.0, divergences=0,
                                 seconds=1.0)
    res = _summary_result({"mm": ok, "mm-laplace": failed}, reference, hyper={"q": 1.0, "n_basis": 14})
    lines = summary_table(res).splitlines()
    row = next(ln for ln in lines if ln.startswith("mm-laplace "))
    assert row.split() == ["mm-laplace", "failed:", "ApproximationFailed:", "Hessian", "not", "positive", "definite"]
    assert next(ln for ln in lines if ln.startswith("mm ")).split()[1] == "0.01000"


def test_summary_says_from_cache_and_survives_null_diagnostics():
    """A cache hit is said in the printed summary as in the report; a diagnostic that is
    null (R-hat of a single chain) is printed as n/a, not a crash after the sampling."""
    from zoo.validation.report.compare_report import summary_table

    reference = ReferenceSummary("nuts", True, rhat_max=1.001, ess_bulk_min=900.0, ess_tail_min=800.0,
                                 divergences=0, seconds=12.0, from_cache=True)
    res = _summary_result({}, reference, model="pcvm", data="ripley", n_train=250, hyper={"n_basis": 9})
    line = next(ln for ln in summary_table(res).splitlines() if ln.startswith("reference (nuts)"))
    assert "12.0 s (from cache)" in line
    reference = dataclasses.replace(reference, from_cache=False, certified=False, failures=("R-hat needs 2 chains",),
                                    rhat_max=None)
    res = dataclasses.replace(res, reference=reference, references_tried=(reference,))
    line = next(ln for ln in summary_table(res).splitlines() if ln.startswith("reference (nuts)"))
    assert "R-hat max n/a" in line and "from cache" not in line


def _bad_folders(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    return {"--out is an existing file": (str(a_file), ["is a file, not a folder"]),
            "--out under a file": (str(a_file / "report"), ["cannot be created", "is not a folder"])}


COMMANDS = {
    "compare": ["compare", "--param", "width=0.7", "--engines", "em", "--no-cache", "--no-progress"],
    "reproduce": ["reproduce", "ggig-table1", "--no-progress"],
    "sbc": ["sbc", "--engine", "ep", "--no-progress"],
    "study": ["study", "example", "--no-progress"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", ["--out is an existing file", "--out under a file"])
def test_an_unwritable_out_folder_is_refused_before_any_work(command, case, tmp_path, capsys, no_work):
    path, words = _bad_folders(tmp_path)[case]
    status, out, err = run_cli([*COMMANDS[command], "--out", path], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"zoo {command}"), err
    assert "--out" in lines[0] and path in lines[0] and all(w in lines[0] for w in words), lines[0]


def test_an_unwritable_cache_folder_is_refused_but_datasets_and_cache_still_work(tmp_path, capsys, monkeypatch,
                                                                                  no_work):
    """ZOO_CACHE_DIR (and --cache-dir) that cannot be written: every computing command says
    so in one line before any work. `zoo datasets` compiles nothing, so it does not touch
    the cache and works (it crashed on makedirs); `zoo cache` shows where it points."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    monkeypatch.delenv("ZOO_JAX_CACHE", raising=False)
    monkeypatch.setenv("ZOO_CACHE_DIR", str(a_file))
    status, out, err = run_cli(["datasets"], capsys)
    assert status == 0 and "ripley" in out and not err
    status, out, err = run_cli(["cache"], capsys)
    assert status == 0 and str(a_file) in out
    for command in COMMANDS.values():
        status, out, err = run_cli([*command, "--out", str(tmp_path / "out")], capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 2 and len(lines) == 1 and "ZOO_CACHE_DIR" in lines[0] and str(a_file) in lines[0], err
    monkeypatch.delenv("ZOO_CACHE_DIR")
    monkeypatch.setenv("ZOO_JAX_CACHE", str(tmp_path / "jax"))
    status, out, err = run_cli([*COMMANDS["compare"][:-2], "--no-progress", "--cache-dir", str(a_file / "refs"),
                                "--out", str(tmp_path / "out")], capsys)
    assert status == 2 and "--cache-dir" in err and str(a_file / "refs") in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_sbc_checks_every_engine_name_before_the_first_runs(tmp_path, capsys, no_work):
    status, out, err = run_cli(["sbc", "--model", "pcvm", "--engine", "ep,pg-gibbs", "--out", str(tmp_path / "o"),
                                "--no-progress"], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "pg-gibbs" in lines[0], err
    assert not (tmp_path / "o").exists()


def test_ctrl_c_ends_a_command_with_one_line_and_status_130(tmp_path, capsys, monkeypatch):
    from zoo import reproductions as reproduce

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "run", interrupted)
    status, out, err = run_cli(["reproduce", "ggig-table1", "--out", str(tmp_path), "--no-progress"], capsys)
    assert status == 130
    assert err.strip() == (f"zoo reproduce: interrupted; finished cells are kept in "
                           f"{tmp_path / 'ggig-table1' / 'cells'}; the same command resumes from them")


def test_progress_bars_only_on_a_terminal_that_has_a_width(tmp_path):
    """A terminal of zero columns made tqdm print a line per update; there, as under a
    pipe, no bars."""
    import fcntl
    import io
    import pty
    import struct
    import termios

    from zoo.cli import bars_fit

    assert not bars_fit(io.StringIO())
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            for columns, fits in ((0, False), (80, True)):
                fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
                assert bars_fit(tty) is fits, columns
    finally:
        os.close(leader)
        os.close(follower)


def test_zoo_cache_shows_and_clears_only_its_own_entries(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "jax").mkdir(parents=True)
    monkeypatch.setenv("ZOO_CACHE_DIR", str(cache))
    monkeypatch.delenv("ZOO_JAX_CACHE", raising=False)
    ours = [cache / f"nuts-{'a' * 32}.nc", cache / f"nuts-{'a' * 32}.json", cache / f"slice-gibbs-{'b' * 32}.nc",
            cache / "jax" / f"jit_fit-{'c' * 64}-cache", cache / "jax" / f"jit_fit-{'c' * 64}-atime"]
    for f in ours:
        f.write_bytes(b"x" * 1000)
    (cache / "notes.txt").write_text("the user's own file")
    status, out, err = run_cli(["cache"], capsys)
    assert status == 0
    assert f"reference draws: {cache} (3 files" in out and f"JAX compiled programs: {cache / 'jax'} (2 files" in out
    assert "zoo cache --clear" in out
    status, out, err = run_cli(["cache", "--clear"], capsys)
    # JAX's programs go (jax/ was ours and is empty: gone too); files named like reference
    # entries but not signed with this user's key are not provably the zoo's: kept, and said
    # (tests/validation/references/test_cache_trust.py clears real entries)
    assert status == 0 and "deleted 2 files" in out
    assert "kept 3 files that are not entries signed with your key" in out and "kept 1 other file" in out
    assert sorted(os.listdir(cache)) == sorted(["notes.txt", *(f.name for f in ours[:3])])


def test_the_package_docstring_names_the_real_cache_paths(monkeypatch, tmp_path):
    monkeypatch.delenv("ZOO_CACHE_DIR", raising=False)
    monkeypatch.delenv("ZOO_JAX_CACHE", raising=False)
    home = os.path.join(os.path.expanduser("~"), ".cache", "sparse-bayes-zoo")
    # one folder of compiled programs per JAX release (two environments never mix theirs)
    assert zoo.cache_dir() == home and zoo.jax_cache_dir() == os.path.join(home, "jax", jax.__version__)
    assert "~/.cache/sparse-bayes-zoo" in zoo.__doc__ and "``jax/<jax version>/``" in zoo.__doc__
    assert "~/.cache/sparse-bayes-zoo/jax" in zoo.enable_compilation_cache.__doc__
    assert "~/.cache/zoo" not in zoo.__doc__ + zoo.enable_compilation_cache.__doc__
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    assert zoo.cache_dir() == str(tmp_path) and zoo.jax_cache_dir() == str(tmp_path / "jax" / jax.__version__)


def test_zoo_cache_clears_the_programs_of_every_jax_release(tmp_path, capsys, monkeypatch):
    # one folder per JAX release (zoo.jax_cache_dir): an older release's programs, and those
    # of the flat jax/ of earlier zoo versions, are counted and cleared too; a folder that is
    # not a release's is kept and said
    cache = tmp_path / "cache"
    monkeypatch.setenv("ZOO_CACHE_DIR", str(cache))
    monkeypatch.delenv("ZOO_JAX_CACHE", raising=False)
    program = f"jit_fit-{'c' * 64}-cache"
    for folder in (cache / "jax" / jax.__version__, cache / "jax" / "0.4.30", cache / "jax", cache / "jax" / "mine"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / program).write_bytes(b"x" * 10)
    status, out, _ = run_cli(["cache"], capsys)
    assert status == 0 and f"JAX compiled programs: {cache / 'jax'} (3 files" in out
    status, out, _ = run_cli(["cache", "--clear"], capsys)
    assert status == 0 and "deleted 3 files" in out
    assert sorted(os.listdir(cache / "jax")) == ["mine"] and os.listdir(cache / "jax" / "mine") == [program]
