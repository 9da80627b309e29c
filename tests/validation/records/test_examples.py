"""Every model the zoo ships that is not one of its five (validation/records/examples.py:
eight schools, a linear regression, a hierarchical logistic regression, posteriordb's three
posteriors) runs end to end at small size: a NUTS reference with its certificate (certified or
said not to be), a generic engine judged against it with a verdict, and SBC from the model's
own prior predictive - or, for a flat prior, the one line saying SBC needs a proper one.

Small size: 2 chains x (150 warm-up + 200 draws), short enough that a reference may fall short
of the certificate's ESS; the run then says "not certified" and the engine's verdict says it
had no certified reference - both are results of this test, not failures. The full runs and
their numbers are in docs/your-model.md (benchmarks/examples.py)."""
from __future__ import annotations

import pytest

from zoo.validation.records.examples import EXAMPLES
from zoo.validation.references import ReferenceConfig
from zoo.validation.runs.compare import CompareConfig, compare
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import SBCSettings

SHORT_NUTS = ReferenceConfig(num_chains=2, num_warmup=150, num_samples=200, max_doublings=0)


# every test leaves the registry as it found it (conftest.py)
pytestmark = pytest.mark.usefixtures("registry_as_it_was")


def test_the_examples_are_the_three_of_the_issue_and_posteriordbs_three():
    assert list(EXAMPLES) == ["eight_schools", "kidiq_linear", "heart_hierarchical",
                              "eight_schools-eight_schools_noncentered", "kidiq-kidscore_momiq",
                              "gp_pois_regr-gp_pois_regr"]
    heart = EXAMPLES["heart_hierarchical"]()
    # 270 patients, four kinds of chest pain, the group index kept as integers (never traced as floats)
    assert heart.spec.inputs["group"].dtype.kind == "i" and sorted(set(heart.spec.inputs["group"])) == [0, 1, 2, 3]
    assert heart.spec.observations["disease"].shape == (270,)
    assert [s.name for s in heart.spec.judged] == ["mu", "tau", "z", "b"]


#: the examples the issue names (posteriordb's are the others)
ISSUE_EXAMPLES = ("eight_schools", "kidiq_linear", "heart_hierarchical")


def compared_at_small_size(name, tmp_path):
    """``zoo compare`` of example ``name`` with the short reference and auto-laplace (the cheapest generic engine to compile): the
    reference's certificate said, the engine's verdict given (or said not to apply); the model."""
    model = EXAMPLES[name]()
    result = compare(CompareConfig(model=model, engines=("auto-laplace",), reference=SHORT_NUTS,
                                   cache_dir=str(tmp_path), evidence="off")).result
    assert result.classifier is False and result.n_test is None
    reference = result.reference
    assert reference.sampler["sampler"] == "numpyro.NUTS"
    # certified, or not with the reasons said
    assert reference.certified or reference.failures, reference
    row = result.engines["auto-laplace"]
    assert row.failure is None, row.failure
    status = row.verdict.status
    if reference.certified:
        assert status in {"indistinguishable", "differs"}, row.verdict
    else:
        assert status == "not applicable" and row.verdict.reason.startswith("the reference is not certified")
    return model


@pytest.mark.parametrize("name", ISSUE_EXAMPLES)
def test_each_example_runs_end_to_end_at_small_size(name, tmp_path):
    model = compared_at_small_size(name, tmp_path)
    # SBC from the model's own prior predictive (posteriordb's are in test_posteriordb.py:
    # compared at small size there; their SBC runs in the long tier)
    sbc = run_sbc(SBCConfig(model=model, engine="auto-laplace", settings=SBCSettings(n_sims=10, n_draws=9)))
    assert sbc.counts.n_sims == 10 and sbc.counts.ok == 10, sbc.failure_messages
    assert sbc.status in {"calibrated", "miscalibrated", "too few simulations to call"}, sbc.reason
