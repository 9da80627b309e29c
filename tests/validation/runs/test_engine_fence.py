"""The fence around an engine (validation/runs/fence.py): what a user's engine does -
raise, exit, hang, return what cannot be measured, be interrupted - ends in its own row (or
its own simulations), and the other engines, the reference and the report still come out.

Each case is one a hostile tester found ending a run with no report (or ranking NaN draws);
the comparisons use the short NUTS settings and the session's NUTS cache (conftest.py).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.inference import expectation_propagation
from zoo.inference.posterior import FitInfo, GaussianPosterior
from zoo.validation.report.compare_report import write_report
from zoo.validation.runs import fence
from zoo.validation.runs.compare import CompareConfig, compare
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import SBCSettings

PREFIX = "test_engine_fence:"


def _gaussian(spec, Phi, mean, chol):
    sites = spec.sites(Phi.shape[1])
    return GaussianPosterior(spec, sites, np.asarray(mean, dtype=float), np.asarray(chol, dtype=float),
                             FitInfo("hostile", True, 0, "", 0.0, 0.0, "", {}))


def zero_chol(spec, Phi, y, *, config=None):
    """Passes the constructor (all finite), has no density: every measurement divides by 0."""
    d = Phi.shape[1] + 1
    return _gaussian(spec, Phi, np.zeros(d), np.zeros((d, d)))


def huge_chol(spec, Phi, y, *, config=None):
    """Finite, but its variances overflow double precision."""
    d = Phi.shape[1] + 1
    return _gaussian(spec, Phi, np.zeros(d), 1e200 * np.eye(d))


def exits(spec, Phi, y, *, config=None):
    sys.exit(0)


def nan_after_construction(spec, Phi, y, *, config=None):
    """EP's posterior, its mean array changed in place after the constructor checked it."""
    ep = expectation_propagation.fit(spec, Phi, y, config=config)
    mean = np.array(ep.mean_vec)
    post = dataclasses.replace(ep, mean_vec=mean)
    mean[1] = np.nan
    return post


def standard_normal(spec, Phi, y, *, config=None):
    """N(0, I): quick, measurable, wrong."""
    d = Phi.shape[1] + 1
    return _gaussian(spec, Phi, np.zeros(d), np.eye(d))


def hangs(spec, Phi, y, *, config=None):
    while True:  # an engine that never returns; its own `except Exception` cannot keep the limit out
        try:
            time.sleep(3600)
        except Exception:  # noqa: BLE001 - the point: a user's blanket except
            pass


def interrupted(spec, Phi, y, *, config=None):
    raise KeyboardInterrupt  # as Ctrl-C while this engine runs


HOSTILE = {
    zero_chol: "returned a Gaussian with a singular covariance",
    huge_chol: "returned a Gaussian whose variances overflow",
    exits: "called exit(0): an engine may not end the run",
    nan_after_construction: "returned a Gaussian whose mean has 1 non-finite value(s)",
}


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory, nuts_cache_dir, fast_nuts):
    config = CompareConfig(model="pcvm", data="ripley", params={"width": 0.7},
                           engines=("ep", *HOSTILE, "laplace"), reference=fast_nuts,
                           cache_dir=str(nuts_cache_dir), metric_draws=1000)
    comp = compare(config)
    files = write_report(comp, str(tmp_path_factory.mktemp("report")))
    with open(files["results"]) as fh:
        return comp, files, json.load(fh)


@pytest.mark.parametrize("engine", list(HOSTILE), ids=[f.__name__ for f in HOSTILE])
@pytest.mark.long
def test_an_engine_whose_result_cannot_be_measured_fails_its_own_row(hostile_run, engine):
    """Before the fence: a zero or x1e200 Cholesky factor raised FloatingPointError from the
    metrics (rc 1, no report, EP's row lost); sys.exit(0) ended `zoo compare` with status 0
    and nothing written; NaN put in after construction gave one line naming no engine."""
    comp, files, res = hostile_run
    name = PREFIX + engine.__name__
    row = res["engines"][name]
    assert row["failure"] is not None and HOSTILE[engine] in row["failure"], row["failure"]
    assert name in row["failure"] and "\n" not in row["failure"]
    assert name not in comp.posteriors and row["pred_mae"] is None
    md = open(files["report"]).read()
    assert f"| {name} |" in md and "failed" in md.split(f"| {name} |")[1].splitlines()[0]
    # the engines before and after it were measured and judged as usual
    for own in ("ep", "laplace"):
        assert res["engines"][own]["failure"] is None
        assert res["engines"][own]["verdict"]["status"] != "not applicable"
    assert res["interrupted"] is False


@pytest.mark.long
def test_a_hung_engine_is_stopped_at_its_limit_and_ctrl_c_keeps_the_finished_rows(
        tmp_path, nuts_cache_dir, fast_nuts):
    """Before: an engine that never returned hung `zoo compare` (no per-engine limit), and
    Ctrl-C then discarded the rows already finished."""
    config = CompareConfig(model="pcvm", data="ripley", params={"width": 0.7},
                           engines=(standard_normal, hangs, interrupted, "ep"), reference=fast_nuts,
                           cache_dir=str(nuts_cache_dir), metric_draws=1000, engine_time_limit=2.0)
    t0 = time.perf_counter()
    comp = compare(config)
    rows = comp.result.engines
    assert rows[PREFIX + "standard_normal"].failure is None
    assert rows[PREFIX + "standard_normal"].verdict.status == "differs"
    assert rows[PREFIX + "hangs"].failure == f"{PREFIX}hangs ran past its time limit of 2 s and was stopped"
    assert rows[PREFIX + "interrupted"].failure == "interrupted (Ctrl-C) while it ran"
    assert rows["ep"].failure == "not run: the comparison was interrupted (Ctrl-C)"
    assert comp.interrupted and comp.result.evidence is None
    files = write_report(comp, str(tmp_path))
    with open(files["results"]) as fh:
        assert json.load(fh)["interrupted"] is True
    assert time.perf_counter() - t0 < 120  # the hang cost its limit, not the session


def test_the_time_limit_stops_python_code_in_the_main_thread_and_in_any_other():
    """Main thread: a signal; any other thread (a Dask worker's): an asynchronous exception.
    Both reach past a blanket ``except Exception``; a limit that does not run out leaves no
    timer or pending exception behind."""
    def spin():
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001
                pass

    t0 = time.perf_counter()
    with pytest.raises(fence.EngineTimeout, match="spinner ran past its time limit of 0.3 s"):
        with fence.time_limit(0.3, "spinner"):
            spin()
    assert time.perf_counter() - t0 < 5

    caught = []

    def in_thread():
        try:
            with fence.time_limit(0.3, "threaded spinner"):
                spin()
        except fence.EngineTimeout as err:
            caught.append(str(err))

    worker = threading.Thread(target=in_thread)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and caught == ["threaded spinner ran past its time limit of 0.3 s and was stopped"]

    with fence.time_limit(5, "quick"):
        pass
    time.sleep(0.05)  # nothing fires later
    with pytest.raises(ValueError, match="engine time limit must be a positive number"):
        with fence.time_limit(-1, "x"):
            pass
    with pytest.raises(ValueError, match="engine_time_limit must be a positive number"):
        CompareConfig(model="pcvm", engine_time_limit=0)


def test_posterior_problem_names_what_cannot_be_measured():
    from zoo.models.pcvm import PCVM

    spec, Phi = PCVM(), np.ones((5, 2))
    assert fence.posterior_problem(standard_normal(spec, Phi, None)) is None
    assert "singular covariance (3 zero(s)" in fence.posterior_problem(zero_chol(spec, Phi, None))
    assert "overflow" in fence.posterior_problem(huge_chol(spec, Phi, None))
    post = standard_normal(spec, Phi, None)
    post.chol[2, 0] = np.inf
    assert fence.posterior_problem(post) == ("returned a Gaussian whose Cholesky factor has 1 non-finite value(s) "
                                             "(NaN or inf)")


def test_sbc_never_ranks_what_cannot_be_measured_and_survives_an_exit(tmp_path):
    """Before: NaN put into a posterior after construction was ranked in `zoo sbc` (a
    "miscalibrated ... shifted up and too narrow" computed from NaN draws), and sys.exit(0)
    ended the run with nothing written."""
    def nan_mean(spec, Phi, y, *, config=None):
        post = standard_normal(spec, Phi, y)
        post.mean_vec[0] = np.nan
        return post

    settings = SBCSettings(n_sims=10, n_draws=9)
    for fit, says in ((nan_mean, "returned a Gaussian whose mean has 1 non-finite value(s)"),
                      (exits, "called exit(0): an engine may not end the run")):
        summary = run_sbc(SBCConfig("pcvm", fit, settings=settings, problem={"n": 30, "n_basis": 3}))
        assert summary.status == "not applicable" and summary.counts.failed == 10
        assert says in summary.reason, summary.reason

    def hangs_once(spec, Phi, y, *, config=None):
        time.sleep(3600)

    summary = run_sbc(SBCConfig("pcvm", hangs_once,
                                settings=settings, problem={"n": 30, "n_basis": 3}, engine_time_limit=0.2))
    assert summary.counts.failed == 10
    assert "ran past its time limit of 0.2 s" in summary.reason, summary.reason


STUCK_IN_XLA = '''
import jax
import jax.numpy as jnp


def fit(spec, Phi, y, *, config=None):
    # one compiled loop that never returns to Python: no signal or asynchronous exception
    # reaches it, only killing its process does
    return jax.jit(lambda x: jax.lax.while_loop(lambda c: c[0] >= 0, lambda c: (c[0] + 1, c[1]), (0, x)))(1.0)


def crashes(spec, Phi, y, *, config=None):
    import os
    os._exit(3)  # the process ends with no exception and no result
'''


@pytest.mark.long
def test_an_engine_named_by_path_runs_in_its_own_process_which_is_killed_at_its_limit(
        tmp_path, monkeypatch, nuts_cache_dir, fast_nuts):
    """Before: a user engine stuck inside one compiled XLA loop could not be stopped by the
    in-process limit. Named by its path, it now runs in a child process, killed at the limit;
    a child that dies without a result fails its row; EP beside them is measured as usual."""
    (tmp_path / "stuck_engine.py").write_text(STUCK_IN_XLA)
    monkeypatch.chdir(tmp_path)
    config = CompareConfig(model="pcvm", data="ripley", params={"width": 0.7},
                           engines=("ep", "stuck_engine:fit", "stuck_engine:crashes"), reference=fast_nuts,
                           cache_dir=str(nuts_cache_dir), metric_draws=1000, engine_time_limit=20.0)
    t0 = time.perf_counter()
    rows = compare(config).result.engines
    assert rows["stuck_engine:fit"].failure == ("stuck_engine:fit ran past its time limit of 20 s and was stopped "
                                                "(its process killed)")
    assert rows["stuck_engine:crashes"].failure == ("stuck_engine:crashes: its process ended without a result "
                                                    "(exit code 3)")
    assert rows["ep"].failure is None and rows["ep"].verdict.status != "not applicable"
    assert time.perf_counter() - t0 < 300
