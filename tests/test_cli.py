"""The `zoo` command line, called in-process through ``zoo.cli.main``.

A bad argument must end the command with a non-zero status and one line on stderr that
names the problem - never a Python traceback, and before any expensive work (so nothing
is written to the output folder).
"""
from __future__ import annotations

import sys

import pytest

import zoo  # noqa: F401
from zoo.cli import main
from zoo import data as datasets


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


# (extra argv, words the message must contain). Each case would otherwise reach the
# expensive part (CV, NUTS) within seconds, so they also check that arguments are
# validated first.
BAD_ARGUMENTS = {
    "unknown data set": (["--data", "no_such_data"], ["no_such_data", "ripley"]),
    "unknown model": (["--model", "no_such_model"], ["no_such_model", "pcvm"]),
    "unknown engine": (["--engines", "em,no_such_engine"], ["no_such_engine", "laplace"]),
    "param not name=value": (["--param", "width"], ["name=value", "width"]),
    "param value not a number": (["--param", "width=wide"], ["width", "wide"]),
    "unknown param name": (["--param", "gamma=2"], ["gamma", "width"]),
    "negative width": (["--param", "width=-0.5"], ["width", "-0.5"]),
    "zero alpha": (["--param", "width=0.7", "--param", "alpha=0"], ["alpha"]),
    "split out of range": (["--split", "3"], ["split 3", "ripley"]),
    "no NUTS draws": (["--samples", "0"], ["samples"]),
    "no NUTS chains": (["--chains", "0"], ["chains"]),
    "target accept above 1": (["--target-accept", "1.5"], ["target", "accept", "1.5"]),
    "empty engine list": (["--engines", ",", "--param", "width=0.7"], ["engine"]),
    "ggsm q out of range": (["--model", "ggsm-probit", "--param", "q=3"], ["q", "(0, 2]"]),
    "ggsm negative prior scale": (["--model", "ggsm-probit", "--param", "b=-1"], ["b"]),
    "ggsm engine of another model": (["--model", "ggsm-probit", "--engines", "laplace"], ["laplace", "mm"]),
}


@pytest.mark.parametrize("extra,words", list(BAD_ARGUMENTS.values()), ids=list(BAD_ARGUMENTS))
def test_bad_compare_arguments_fail_with_one_clear_line(extra, words, capsys, tmp_path):
    out_dir = tmp_path / "report"
    # small NUTS settings bound the cost should a case ever slip through to sampling
    argv = ["compare", "--no-progress", "--no-cache", "--out", str(out_dir),
            "--warmup", "20", "--samples", "20", "--chains", "1", *extra]
    # a later flag wins in argparse, so the case's own --samples/--chains apply
    status, out, err = run_cli(argv, capsys)
    assert status not in (0, None)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], f"message {lines[0]!r} does not mention {word!r}"
    assert not out_dir.exists(), "a failed command must not start writing a report"


def test_compare_writes_a_report_and_prints_the_table(capsys, tmp_path, fast_nuts_cli_args, nuts_cache_dir):
    """The success path, small: width given (no CV), one engine, the short NUTS settings
    of conftest.py (certified here) and the session's NUTS cache."""
    out_dir = tmp_path / "report"
    argv = ["compare", "--param", "width=0.7", "--engines", "em", *fast_nuts_cli_args, "--no-progress",
            "--cache-dir", str(nuts_cache_dir), "--out", str(out_dir)]
    status, out, err = run_cli(argv, capsys)
    assert status == 0, err
    assert "pcvm on ripley" in out
    assert "reference (nuts): certified" in out
    assert any(line.startswith("em ") for line in out.splitlines())
    assert (out_dir / "report.md").is_file() and (out_dir / "results.json").is_file()
    assert f"report: {out_dir / 'report.md'}" in out


def test_compare_without_a_reference_writes_the_report_and_warns(capsys, tmp_path):
    """Every reference sampler running out of time is not an error: the report is written
    (saying there is no reference), the table printed, one warning on stderr, status 0.
    The empty cache folder keeps an earlier run from standing in for the sampler."""
    out_dir = tmp_path / "report"
    argv = ["compare", "--param", "width=0.7", "--engines", "em", "--time-limit", "0.01", "--no-progress",
            "--cache-dir", str(tmp_path / "empty-cache"), "--out", str(out_dir)]
    with pytest.warns(UserWarning, match="ran out of time"):
        status, out, err = run_cli(argv, capsys)
    assert status == 0, err
    assert "reference: none, NOT CERTIFIED" in out
    assert any(line.startswith("em ") for line in out.splitlines())
    assert "zoo compare: warning: no reference: nuts ran out of time" in err
    assert "**No reference: not certified - every reference sampler ran out of time.**" in (
        out_dir / "report.md").read_text()


def test_summary_table_shows_a_failed_ggsm_engine_as_failed_not_as_numbers():
    """A failed engine row (compare.failed_row) is printed as its reason; the other rows
    keep their numbers, and the engine column is wide enough for 'mm-laplace'."""
    from zoo.cli import summary_table

    ok = {"pred_mae": 0.01, "std_mean_err_median": 0.2, "sd_ratio_median": None, "khat": None,
          "test_error": 0.1, "seconds": 0.01, "speedup_vs_reference": 100.0, "other_model": None, "failure": None}
    failed = {**{k: None for k in ok}, "failure": "ApproximationFailed: Hessian not positive definite"}
    res = {"model": "ggsm-probit", "data": "heart", "split": 0, "n_train": 170, "hyper": {"q": 1.0, "n_basis": 14},
           "reference": {"certified": True, "failures": [], "rhat_max": 1.0, "ess_bulk_min": 500.0,
                         "ess_tail_min": 500.0, "divergences": 0, "seconds": 1.0},
           "reference_test_error": 0.1, "engines": {"mm": ok, "mm-laplace": failed}}
    lines = summary_table(res).splitlines()
    row = next(ln for ln in lines if ln.startswith("mm-laplace "))
    assert row.split() == ["mm-laplace", "failed:", "ApproximationFailed:", "Hessian", "not", "positive", "definite"]
    assert next(ln for ln in lines if ln.startswith("mm ")).split()[1] == "0.01000"
