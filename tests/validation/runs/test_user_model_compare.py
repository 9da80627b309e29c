"""A user's NumPyro model compared like the zoo's own (validation/records/user_model.py,
validation/runs/compare.py): a Model object in CompareConfig, its certified NUTS reference, the
generic engines judged against it, and a report and results.json whose classifier parts are
absent, not faked."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import user_models as um
from zoo.models.general import GeneralModelError
from zoo.validation.judge.metrics import CLASSIFIER_KEYS, metric_keys
from zoo.validation.records import registry
from zoo.validation.records.user_model import DEFAULT_ENGINES, OWN_DATA, Model
from zoo.validation.report.compare_report import summary_table, write_report
from zoo.validation.runs.compare import CompareConfig, compare
from zoo.validation.runs.results import CLASSIFIER_COLUMNS, ComparisonResult


# every test leaves the registry as it found it (conftest.py)
pytestmark = pytest.mark.usefixtures("registry_as_it_was")


def test_a_model_object_is_a_model_name_in_a_compare_config():
    m = Model(um.eight_schools_noncentered, um.EIGHT_SCHOOLS)
    config = CompareConfig(model=m)
    assert (config.model, config.data, config.engines) == ("eight_schools_noncentered", OWN_DATA, DEFAULT_ENGINES)
    record = registry.get_model("eight_schools_noncentered")
    assert record.own_data and record.params == () and set(DEFAULT_ENGINES) <= set(record.engine_names)
    # the model's own data, no split, nothing selected; classifier parameters refused
    prepared = m.prepare()
    assert (prepared.Phi_test, prepared.y_test) == (None, None) and sorted(prepared.Phi_train) == ["sigma", "y"]
    with pytest.raises(ValueError, match="unknown eight_schools_noncentered parameter\\(s\\) \\['width'\\]; it "
                                         "takes none"):
        CompareConfig(model=m, params={"width": 1.0})
    # the same name again (the user's model, changed) replaces it; a built-in model's name is refused
    CompareConfig(model=Model(um.eight_schools_noncentered, {**um.EIGHT_SCHOOLS, "y": um.EIGHT_SCHOOLS["y"] + 1}))
    with pytest.raises(ValueError, match="model name 'pcvm' is the zoo's own model's: give yours another name"):
        CompareConfig(model=Model(um.eight_schools_noncentered, um.EIGHT_SCHOOLS, name="pcvm"))
    with pytest.raises(GeneralModelError, match="has discrete latent site\\(s\\) coin"):
        Model(um.with_a_coin, um.EIGHT_SCHOOLS)


def _exact_log_evidence() -> float:
    """log p(y) of eight_schools_noncentered: y | tau ~ N(0, diag(sigma^2 + tau^2) + 25 11'),
    integrated against tau's HalfCauchy(5) prior by quadrature."""
    from scipy import integrate, stats

    y, sigma = um.EIGHT_SCHOOLS["y"], um.EIGHT_SCHOOLS["sigma"]

    def joint(tau):
        return stats.halfcauchy.pdf(tau, scale=5.0) * stats.multivariate_normal.pdf(
            y, np.zeros(8), np.diag(sigma ** 2 + tau ** 2) + 25.0)

    return float(np.log(integrate.quad(joint, 0, np.inf, limit=200)[0]))


@pytest.mark.long
def test_eight_schools_is_compared_end_to_end_without_classifier_parts(tmp_path):
    m = Model(um.eight_schools_noncentered, um.EIGHT_SCHOOLS)
    comp = compare(CompareConfig(model=m, engines=("auto-laplace", "advi-meanfield")))
    res = comp.result
    assert res.reference.certified and not res.classifier
    # the evidence: bridge sampling from the reference's draws against log p(y) by quadrature
    # over tau (mu and theta integrate out in closed form: tests/models/test_general_spec.py),
    # within 4 of its standard errors
    log_z = res.evidence["references"]["model"]
    assert abs(log_z["log_z"] - _exact_log_evidence()) < 4 * log_z["se"], (log_z, _exact_log_evidence())
    assert res.evidence["engines"]["advi-meanfield"]["verdict"]["status"] == "consistent bound"
    assert (res.n_train, res.n_test, res.reference_test_error) == (8, None, None)
    for name in ("auto-laplace", "advi-meanfield"):
        row = res.engines[name]
        assert row.failure is None and row.n_basis is None
        # the classifier's metrics are absent, not null; the posterior's are all there
        assert not set(CLASSIFIER_KEYS) & set(row.metrics) and set(metric_keys(False)) <= set(row.metrics)
        assert row.metrics["khat"] is not None
    # the funnel: Laplace's sds of theta_tilde far too small, far past the verdict's threshold
    assert res.engines["auto-laplace"].verdict.status == "differs"
    table = res.table()
    assert not set(CLASSIFIER_COLUMNS) & set(table.columns)
    files = write_report(comp, str(tmp_path))
    report = open(files["report"]).read()
    assert report.startswith("# eight_schools_noncentered on its own data: engines against the reference")
    assert "Observed values: 8; no test set and no classifier part" in report
    assert "pred_mae |" not in report and "probabilities" not in files and "boundary" not in files
    again = ComparisonResult.from_json(json.loads(open(files["results"]).read()))
    assert again.to_json() == res.to_json()
    lines = summary_table(res).splitlines()
    assert lines[0] == "eight_schools_noncentered on its own data, 8 observed values"
    assert "pred_mae" not in summary_table(res) and np.isfinite(res.engines["advi-meanfield"].metrics["khat"])


@pytest.mark.long
def test_the_example_of_docs_your_model_runs_as_written(tmp_path, monkeypatch, capsys):
    """docs/your-model.md's file, written to a fresh folder, and its command, run there: the
    model is imported from the current folder as the page says, compared, reported."""
    from repository import REPO
    from zoo.cli import main

    page = open(f"{REPO}/docs/your-model.md", encoding="utf-8").read()
    (tmp_path / "my_schools.py").write_text(page.split("```python\n", 1)[1].split("```", 1)[0])
    command = page.split("```bash\n", 1)[1].split("```", 1)[0].split()
    assert command[:4] == ["zoo", "compare", "--model", "my_schools:MODEL"]
    monkeypatch.chdir(tmp_path)
    # the current folder joins sys.path to import the model (runs/engines.py): as it was, after
    monkeypatch.setattr(sys, "path", list(sys.path))
    status = main(command[1:] + ["--out", str(tmp_path / "out"), "--no-progress", "--no-cache"])
    monkeypatch.delitem(sys.modules, "my_schools")
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[0] == "schools on its own data, 8 observed values"
    assert "reference (nuts): certified" in out and (tmp_path / "out" / "report.md").exists()


def test_an_improper_posterior_is_an_uncertified_reference_reported_not_a_crash(tmp_path):
    """Flat priors on a and b with only a + b in the likelihood: the posterior is improper along
    a - b. The chains drift apart along it, the certificate refuses them, and the comparison
    says so and judges nothing - no crash, no verdict."""
    from zoo.validation.references import ReferenceConfig

    short = ReferenceConfig(num_chains=2, num_warmup=200, num_samples=300, max_doublings=0)
    result = compare(CompareConfig(model=um.UNIDENTIFIED_MODEL, engines=("advi-meanfield",), reference=short,
                                   cache_dir=str(tmp_path), evidence="off")).result
    assert not result.reference.certified
    assert any("R-hat" in f for f in result.reference.failures), result.reference.failures
    row = result.engines["advi-meanfield"]
    assert row.failure is not None or row.verdict.status == "not applicable"
    # the report says the reference is not certified, in words, rather than showing verdicts
    text = summary_table(result)
    assert "NOT certified" in text or "not certified" in text, text


def test_a_density_that_needs_unjudged_sites_gives_one_line_not_a_traceback(tmp_path):
    """Judged on mu alone, a user's engine answers for mu alone; the model's density needs nu too,
    so its draws have no importance weights: k-hat and the +psis form each say so in one line
    (the generic engines weigh their draws on the whole latent space themselves and keep theirs)."""
    from zoo.validation.references import ReferenceConfig

    short = ReferenceConfig(num_chains=2, num_warmup=200, num_samples=300, max_doublings=0)
    result = compare(CompareConfig(model=um.TWO_MEANS_ON_MU, engines=("user_models:mu_prior",
                                                                      "user_models:mu_prior+psis"),
                                   reference=short, cache_dir=str(tmp_path), evidence="off")).result
    says = ("model two_means is judged on mu, not on every latent site (nu): the model's density is over its "
            "latent sites, so draws over the judged sites have no importance weights")
    mine = result.engines["user_models:mu_prior"]
    assert mine.failure is None and mine.metrics["khat"] is None
    assert mine.metrics["khat_reason"] == says
    corrected = result.engines["user_models:mu_prior+psis"]
    assert corrected.failure is not None and says in corrected.failure, corrected.failure
