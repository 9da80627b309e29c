"""The mm-laplace engine (inference/mm_laplace.py) and how `zoo compare` reports it.

* The Gaussian's precision is the negative Hessian of the target at a point where its
  gradient is zero, both checked by finite differences computed here independently
  (scipy's norm.logcdf, not the engine's closed form).
* Pruned weights are exactly 0 in every draw; lambda's draws follow the exact InvGamma
  conditional of the same target as w.
* Where -H is not positive definite the engine raises ApproximationFailed, saying so -
  on a natural case (MM stopped early at q = 0.5 with a weight still shrinking to 0).
* compare() keeps going when one engine fails, and report and summary show the failure
  as text, not numbers; pruned weights are tabled beside the reference's marginals.

Designs are small (N = 80, n = 8 including the bias) so each fit takes milliseconds;
the compare tests use a short, uncertified NUTS run on `heart` (n = 14) that is shared
through a module-wide cache.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import stats

import zoo  # noqa: F401  (float64)
from zoo.validation.report.compare_report import summary_table
from zoo.data import ggig_linear
from zoo.inference import mm, mm_laplace
from zoo.inference.posterior import ApproximationFailed, DrawsPosterior
from zoo.models.basis import LinearBasis, WithBias
from zoo.models.ggsm_probit import GGSMProbit
from zoo.validation.records.registry import get_engine
from zoo.validation.references import ReferenceConfig
from zoo.validation.report.compare_report import (
    PRUNED_ROWS_SHOWN,
    _pruned_table,
    render_markdown,
    write_report,
)
from zoo.validation.runs.compare import CompareConfig, compare


def design(rep=0):
    """Section 6.1 design shrunk: 7 inputs (2 relevant, weight 1 so the classes overlap)
    plus a bias column, 80 training points. With q = 1 MM prunes 3 of the 8 weights."""
    s = ggig_linear(2, 80, rep, n_features=7, weight=1.0, n_test=200)
    basis = WithBias(LinearBasis.fit(s.X_train))
    return basis.transform(s.X_train), s.y_train, basis.transform(s.X_test)


def log_target(w_A, Phi_A, y, spec, shape):
    """The target written out again: log-likelihood plus -shape * log(b + sum |w|^q)."""
    s = 2 * y - 1
    return np.sum(stats.norm.logcdf(s * (Phi_A @ w_A))) - shape * np.log(spec.b + np.sum(np.abs(w_A) ** spec.q))


def fd_gradient(f, x, h=1e-5):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def fd_hessian(f, x, h=1e-4):
    """Central second differences. Truncation error O(h^2) ~ 1e-8 times the fourth
    derivatives; round-off ~ eps |f| / h^2 ~ 1e-16 * 50 / 1e-8 = 5e-7."""
    d = x.size
    E = np.eye(d) * h
    H = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            H[i, j] = (f(x + E[i] + E[j]) - f(x + E[i] - E[j]) - f(x - E[i] + E[j]) + f(x - E[i] - E[j])) / (4 * h * h)
    return H


# --------------------------------------------------------------------------------------
# (a) the Gaussian is the Laplace approximation of the stated target
# --------------------------------------------------------------------------------------
def test_precision_is_the_finite_difference_hessian_at_a_stationary_point_q2():
    Phi, y, _ = design()
    spec = GGSMProbit(q=2.0)
    post = mm_laplace.fit(spec, Phi, y, exponent="mm", n_draws=4000, seed=3)
    e = post.info.extra
    active = np.setdiff1d(np.arange(Phi.shape[1]), e["pruned"])
    assert e["n_active"] == active.size >= 1
    shape = spec.a + active.size / spec.q  # the MM objective's exponent a + |A|/q
    assert e["lam_shape"] == pytest.approx(shape)

    def f(w):
        return log_target(w, Phi[:, active], y, spec, shape)

    mode = e["mode"]
    # the Hessian is taken where the gradient vanishes (MM's tolerance is only 1e-3 on |w|)
    assert np.max(np.abs(fd_gradient(f, mode))) < 1e-6
    H = fd_hessian(f, mode)
    np.testing.assert_allclose(e["precision"], -H, rtol=0, atol=1e-5 * np.max(np.abs(H)))
    assert e["hessian_min_eig"] == pytest.approx(np.linalg.eigvalsh(-H)[0], rel=1e-4)
    # draws of w_A: mean the mode, within 5 Monte Carlo sds sqrt(diag(cov) / n_draws)
    cov = np.linalg.inv(e["precision"])
    w = post.draws["w"][0][:, active]
    assert np.all(np.abs(w.mean(0) - mode) < 5 * np.sqrt(np.diag(cov) / w.shape[0]))
    # the polish moved MM's point by no more than MM's stopping tolerance allows for
    assert e["polish_shift"] < 0.1


# --------------------------------------------------------------------------------------
# (b) pruned weights, (c) lambda
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("exponent", mm_laplace.EXPONENTS)
def test_pruned_weights_are_exactly_zero_in_every_draw(exponent):
    Phi, y, _ = design()
    post = mm_laplace.fit(GGSMProbit(q=1.0), Phi, y, exponent=exponent, n_draws=500)
    pruned = post.info.extra["pruned"]
    mm_w = mm.run(GGSMProbit(q=1.0), Phi, y).w
    assert pruned and set(pruned) >= set(np.flatnonzero(mm_w == 0).tolist())  # MM's pattern, at least
    w = post.draws["w"]
    assert w.shape == (1, 500, Phi.shape[1]) and post.draws["lam"].shape == (1, 500)
    assert np.all(w[:, :, pruned] == 0.0)
    kept = np.setdiff1d(np.arange(Phi.shape[1]), pruned)
    assert np.all(w[:, :, kept] != 0.0)
    assert post.info.engine == "mm-laplace" and post.info.extra["n_active"] == kept.size
    assert post.info.extra["mm_status"] == "converged" and post.info.converged


@pytest.mark.parametrize("exponent", mm_laplace.EXPONENTS)
def test_lambda_draws_follow_the_inverse_gamma_conditional_of_the_same_target(exponent):
    Phi, y, _ = design()
    spec = GGSMProbit(q=1.0, a=2.0, b=0.5)
    n_draws = 4000
    post = mm_laplace.fit(spec, Phi, y, exponent=exponent, n_draws=n_draws, seed=1)
    n_active = post.info.extra["n_active"]
    shape = spec.a + (n_active if exponent == "mm" else Phi.shape[1]) / spec.q
    assert post.info.extra["lam_shape"] == pytest.approx(shape)
    w, lam = post.draws["w"][0], post.draws["lam"][0]
    assert np.all(lam > 0)
    # lam | w ~ InvGamma(shape, b + sum |w|^q)  <=>  (b + sum |w|^q) / lam ~ Gamma(shape, 1),
    # independently of w: checked draw by draw, whatever the w draws are
    u = (spec.b + np.sum(np.abs(w) ** spec.q, axis=1)) / lam
    # Monte Carlo sd of the mean of n Gamma(shape, 1) draws: sqrt(shape / n); 4 sds
    assert abs(u.mean() - shape) < 4 * math.sqrt(shape / n_draws)
    assert stats.kstest(u, stats.gamma(shape).cdf).pvalue > 1e-3
    # seeded: the same seed gives the same draws
    again = mm_laplace.fit(spec, Phi, y, exponent=exponent, n_draws=n_draws, seed=1)
    np.testing.assert_array_equal(again.draws["lam"], post.draws["lam"])


# --------------------------------------------------------------------------------------
# (d) no Laplace approximation where -H is not positive definite
# --------------------------------------------------------------------------------------
def test_indefinite_hessian_raises_approximation_failed_naming_it():
    """A natural case: at q = 0.5 MM stopped after 5 iterations (its iteration cap) while
    w[6] = -0.036 is still shrinking towards 0, where the prior |w|^q is convex with
    curvature ~ |w|^(q-2); run to convergence MM prunes it and the approximation exists."""
    Phi, y, _ = design()
    spec = GGSMProbit(q=0.5)
    with pytest.raises(ApproximationFailed) as err:
        mm_laplace.fit(spec, Phi, y, config=mm.MMConfig(max_iter=5))
    msg = str(err.value)
    assert "not positive definite at the MM mode" in msg
    assert "smallest eigenvalue" in msg and "q = 0.5" in msg
    assert "Laplace approximation does not exist" in msg
    assert "w[6]" in msg  # the weight near the cusp is named
    ok = mm_laplace.fit(spec, Phi, y)
    assert ok.info.extra["hessian_min_eig"] > 0 and 6 in ok.info.extra["pruned"]


def test_bad_arguments_fail_clearly():
    Phi, y, _ = design()
    with pytest.raises(ValueError, match="exponent"):
        mm_laplace.fit(GGSMProbit(), Phi, y, exponent="full")
    with pytest.raises(ValueError, match="n_draws"):
        mm_laplace.fit(GGSMProbit(), Phi, y, n_draws=1)


def test_registry_and_end_to_end_form():
    entry = get_engine("ggsm-probit", "mm-laplace")
    assert entry.kind == "draws" and entry.other_model is None
    assert "sparsity pattern" in entry.description
    Phi, y, Phi_test = design()
    fit = entry.fit_end_to_end()(Phi, y, seed=0, spec=GGSMProbit(q=1.0))
    assert isinstance(fit.posterior, DrawsPosterior)
    assert fit.posterior.draws["w"].shape[-1] == fit.active.size < Phi.shape[1]
    p = fit.posterior.predict_proba(Phi_test[:, fit.active])
    assert np.all((p >= 0) & (p <= 1))


# --------------------------------------------------------------------------------------
# (e) compare: one row per engine; a failure is a row with a reason, not a crash
# --------------------------------------------------------------------------------------
#: short and deliberately uncertified (nothing below reads accuracy off it)
SHORT_NUTS = ReferenceConfig(num_chains=2, num_warmup=100, num_samples=100, max_doublings=0)


@pytest.fixture(scope="module")
def compare_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("nuts-cache-mm-laplace"))


def _compare(cache_dir):
    # heart: 170 x 13 inputs, bias column: n = 14; at q = 1 MM prunes 2 weights
    config = CompareConfig(model="ggsm-probit", data="heart", engines=("mm", "mm-laplace"),
                           params={"q": 1.0}, reference=SHORT_NUTS, cache_dir=cache_dir, metric_draws=500)
    with pytest.warns(UserWarning, match="UNCERTIFIED"):
        return compare(config)


@pytest.fixture(scope="module")
def comparison(compare_cache):
    return _compare(compare_cache)


@pytest.mark.long
def test_compare_gives_a_row_per_engine_with_pruned_weights_beside_the_reference(comparison, tmp_path):
    res = comparison.result.to_json()
    assert list(res["engines"]) == ["mm", "mm-laplace"]
    mm_row, lap_row = res["engines"]["mm"], res["engines"]["mm-laplace"]
    assert mm_row["failure"] is None and lap_row["failure"] is None
    assert lap_row["kind"] == "draws" and lap_row["other_model"] is None
    assert lap_row["sd_ratio_median"] > 0 and mm_row["sd_ratio_median"] is None
    pruned = comparison.posteriors["mm-laplace"].info.extra["pruned"]
    assert pruned and lap_row["n_basis"] == 14 - len(pruned)
    # both engines' pruned weights are tabled against the reference's draws
    for name in ("mm", "mm-laplace"):
        rows = res["engines"][name]["pruned_vs_reference"]
        assert sorted(r["index"] for r in rows) == comparison.posteriors[name].info.extra["pruned"]
        ref_w = comparison.reference.posterior.draws["w"].reshape(-1, 14)
        r = rows[0]
        assert r["engine"] == 0.0
        assert r["ref_mean"] == pytest.approx(ref_w[:, r["index"]].mean())
        assert r["ref_q05"] <= r["ref_mean"] <= r["ref_q95"] and 0 <= r["ref_p_near_zero"] <= 1
    files = write_report(comparison, str(tmp_path / "report"))
    md = open(files["report"]).read()
    assert "### Weights `mm-laplace` pruned, beside the reference" in md
    assert f"| w[{pruned[0]}] | 0 |" in md
    assert "| mm-laplace | draws |" in md


@pytest.mark.long
def test_a_failed_engine_is_a_row_with_its_reason_and_the_others_stay(comparison, compare_cache, monkeypatch,
                                                                        tmp_path):
    def refuse(*args, **kwargs):
        raise ApproximationFailed("mm-laplace: the Hessian of the log posterior is not positive definite "
                                  "at the MM mode (forced by the test)")

    monkeypatch.setattr(mm_laplace, "fit", refuse)  # the registry resolves mm_laplace.fit at call time
    comp = _compare(compare_cache)
    assert comp.result.reference.from_cache
    rows = comp.result.engines
    assert list(rows) == ["mm", "mm-laplace"] and "mm-laplace" not in comp.posteriors
    failed = rows["mm-laplace"]
    assert failed.failure.startswith("ApproximationFailed: ") and "forced by the test" in failed.failure
    assert failed.metrics["pred_mae"] is None and failed.n_basis is None and failed.converged is False
    assert failed.verdict is None and failed.joint_verdict is None
    assert all("engine failed" in v for v in failed.metrics["null_reasons"].values())
    # the other engine's row is the same as in the run without the failure
    for key in ("pred_mae", "std_mean_err_median", "test_error"):
        assert rows["mm"].metrics[key] == comparison.result.engines["mm"].metrics[key], key
    assert rows["mm"].n_basis == comparison.result.engines["mm"].n_basis
    assert rows["mm"].pruned_vs_reference == comparison.result.engines["mm"].pruned_vs_reference
    text = summary_table(comp.result)
    line = next(ln for ln in text.splitlines() if ln.startswith("mm-laplace"))
    assert "failed: ApproximationFailed" in line and not any(ch.isdigit() for ch in line.split("failed:")[0])
    files = write_report(comp, str(tmp_path / "report"))  # figures skip the failed engine
    md = open(files["report"]).read()
    assert "| mm-laplace | draws | - | failed: ApproximationFailed: " in md
    assert "**mm-laplace failed** (no metrics)" in md
    assert "mm-laplace.pred_mae" not in md  # not listed as a null metric as well
    assert os.path.isfile(files["mm"]) and "mm-laplace" not in files


@pytest.mark.long
def test_pruned_table_is_cut_after_its_first_rows(comparison):
    rows = [{"index": i, "engine": 0.0, "ref_mean": 0.01 * i, "ref_sd": 0.1, "ref_q05": -0.2, "ref_q95": 0.2,
             "ref_p_near_zero": 0.5} for i in range(PRUNED_ROWS_SHOWN + 5)]
    lines = _pruned_table("mm", rows)
    assert sum(ln.startswith("| w[") for ln in lines) == PRUNED_ROWS_SHOWN
    assert "... and 5 more" in lines[-1]
    md = render_markdown(comparison.result, {"forest": "f.png", "weights": "w.png", "probabilities": "p.png"}, ".")
    assert md.count("### Weights") == 2
