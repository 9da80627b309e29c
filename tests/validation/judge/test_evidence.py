"""The reference log evidence (validation/judge/evidence.py): bridge sampling from certified
reference draws and annealed importance sampling both match quadrature on two-dimensional
models within their stated errors; the verdict flags a wrong estimate and a bound above
log Z, passes exact ones, and refuses to judge against estimators that disagree.

Tolerances: an estimate and the quadrature value (whose own error is ~1e-10) must agree
within z = 3.29 of the estimator's standard error (a two-sided 0.1% test if the error is
calibrated, which ``benchmarks/evidence.py`` measures over independent reference runs);
the seeds are fixed."""
import math

import numpy as np
import pytest
from numpyro.infer.util import log_density

import zoo  # noqa: F401  (float64)
from zoo.models.bblr import BBLR
from zoo.models.pcvm import PCVM
from zoo.validation.judge import evidence as ev
from zoo.validation.judge.verdict import DIFFERS, INDISTINGUISHABLE, NOT_APPLICABLE
from zoo.validation.references import ReferenceConfig, run_reference

#: two-sided 0.1% quantile of the standard normal
Z_TEST = 3.29


#: two latent dimensions each: PCVM on one column (w >= 0 and the bias b), BBLR on two
CASES = {"pcvm (w >= 0, b)": (PCVM(alpha=1.0, alpha_bias=1.0), 1),
         "bblr (two weights)": (BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5), 2)}


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def case(request):
    spec, n_basis = CASES[request.param]
    Phi, y = ev.small_problem(n_basis)
    ref = run_reference(spec, Phi, y, config=ReferenceConfig(num_samples=2000, seed=5)).require_certified()
    density = ev.unconstrained_density(spec, Phi, y)
    chains = ev.reference_chains(density, ref.idata)
    return density, chains, ev.quadrature_log_evidence(density, chains)


@pytest.mark.long
def test_quadrature_has_converged_and_covers_the_posterior(case):
    _, _, quad = case
    assert quad.se < 1e-6
    # the density at the grid's edge is negligible against its peak
    assert quad.log_z is not None, quad.reason
    assert quad.details["log_density_at_edge_minus_peak"] < -ev.QUADRATURE_EDGE_DROP


@pytest.mark.long
def test_bridge_sampling_matches_quadrature_within_its_error(case):
    density, chains, quad = case
    bridge = ev.bridge_sampling(density, chains, seed=0)
    assert bridge.log_z is not None, bridge.reason
    assert 0 < bridge.se < 0.05
    assert abs(bridge.log_z - quad.log_z) <= Z_TEST * bridge.se


@pytest.mark.long
def test_ais_matches_quadrature_within_its_error(case):
    density, chains, quad = case
    ais = ev.annealed_importance_sampling(density, chains, seed=1, particles=128, temperatures=100)
    assert ais.log_z is not None, ais.reason
    assert ais.details["acceptance"] > 0.5
    assert abs(ais.log_z - quad.log_z) <= Z_TEST * ais.se


def test_the_density_is_the_models_joint_with_the_jacobian_of_pcvms_positive_weight():
    # w = exp(u) on PCVM's w >= 0: log p(y, b, w) + log|dw/du| = log p(y, b, w) + u; a
    # density without the Jacobian would integrate to the wrong evidence
    spec, n_basis = CASES["pcvm (w >= 0, b)"]
    Phi, y = ev.small_problem(n_basis)
    density = ev.unconstrained_density(spec, Phi, y)
    assert density.names == ("b", "w") and density.dim == 2
    z = np.array([[0.3, -0.4], [-1.0, 0.8]])
    expected = [float(log_density(spec.model, (Phi,), {"y": y}, {"b": b, "w": np.exp([u])})[0]) + u for b, u in z]
    np.testing.assert_allclose(density.log_joint(z), expected, rtol=1e-10)
    # and back: the constrained draws map to the same coordinates
    np.testing.assert_allclose(density.to_unconstrained({"b": z[:, 0], "w": np.exp(z[:, 1:])}), z, rtol=1e-12)


def _reference(log_z=-50.0, se=0.01, certified=True, reason=""):
    est = ev.EvidenceEstimate("bridge sampling", log_z, se, 0.0)
    return ev.ReferenceEvidence(est, est, certified, reason)


def test_an_exact_estimate_is_indistinguishable_and_a_wrong_one_differs_by_its_size():
    ref = _reference()
    exact = ev.evidence_verdict(-50.0 + 0.5 * 0.01, ev.ESTIMATE, ref)
    assert exact.status == INDISTINGUISHABLE
    assert exact.detectable == pytest.approx(1.96 * 0.01, rel=1e-3)
    wrong = ev.evidence_verdict(-50.1, ev.ESTIMATE, ref)
    assert wrong.status == DIFFERS and wrong.difference == pytest.approx(-0.1)


def test_a_bound_above_log_z_is_a_violation_and_one_below_is_consistent_with_its_gap():
    ref = _reference()
    below = ev.evidence_verdict(-52.0, ev.LOWER_BOUND, ref)
    assert below.status == ev.CONSISTENT_BOUND and below.difference == pytest.approx(-2.0)
    above = ev.evidence_verdict(-49.9, ev.LOWER_BOUND, ref)
    assert above.status == ev.VIOLATES_BOUND


def test_no_verdict_against_an_uncertified_reference_or_without_a_value():
    v = ev.evidence_verdict(-50.0, ev.ESTIMATE, _reference(certified=False, reason="they disagree"))
    assert v.status == NOT_APPLICABLE and "they disagree" in v.reason
    assert ev.evidence_verdict(math.nan, ev.ESTIMATE, _reference()).status == NOT_APPLICABLE
    with pytest.raises(ValueError, match="kind"):
        ev.evidence_verdict(-50.0, "upper bound", _reference())


def test_a_bridge_estimate_alone_judges_with_its_caveat_and_never_certifies():
    """``zoo compare``'s default: bridge sampling without AIS. Engines are judged against
    its value and error (an exact one indistinguishable, one 0.1 off differs), each verdict
    saying it is against an unchecked estimate; a failed bridge gives no verdict."""
    est = ev.EvidenceEstimate("bridge sampling", -50.0, 0.01, 0.0)
    skipped = ev.EvidenceEstimate("annealed importance sampling", None, None, 0.0, reason="not run")
    alone = ev.ReferenceEvidence(est, skipped, False, ev.UNCHECKED, checked=False)
    exact = ev.evidence_verdict(-50.005, ev.ESTIMATE, alone)
    assert exact.status == INDISTINGUISHABLE and ev.UNCHECKED in exact.reason
    assert ev.evidence_verdict(-50.1, ev.ESTIMATE, alone).status == DIFFERS
    assert alone.to_json()["checked"] is False and not alone.certified
    failed = ev.ReferenceEvidence(ev.EvidenceEstimate("bridge sampling", None, None, 0.0, reason="no root"),
                                  skipped, False, "no bridge estimate: no root", checked=False)
    assert ev.evidence_verdict(-50.0, ev.ESTIMATE, failed).status == NOT_APPLICABLE


def test_estimators_that_disagree_do_not_certify_the_reference():
    bridge = ev.EvidenceEstimate("bridge sampling", -50.0, 0.01, 0.0)
    close = ev.EvidenceEstimate("annealed importance sampling", -50.02, 0.01, 0.0)
    far = ev.EvidenceEstimate("annealed importance sampling", -50.2, 0.01, 0.0)
    assert ev.judged_reference(bridge, close).certified
    judged = ev.judged_reference(bridge, far)
    assert not judged.certified and "disagree" in judged.reason
    failed = ev.EvidenceEstimate("annealed importance sampling", None, None, 0.0, reason="k-hat too large")
    assert "k-hat too large" in ev.judged_reference(bridge, failed).reason


def test_quadrature_refuses_more_than_two_dimensions():
    density = ev.UnconstrainedDensity(None, None, None, ("w",), 3)
    with pytest.raises(ValueError, match="1 or 2 latent dimensions"):
        ev.quadrature_log_evidence(density, np.zeros((2, 10, 3)))


def test_a_log_z_difference_carries_both_errors_and_is_resolved_only_beyond_them():
    """log_z_difference: d = log Z_1 - log Z_2 + offset, se = hypot(se_1, se_2); a model is
    preferred only where |d| / se > 1.96; no verdict against an uncertified log Z."""
    a, b = _reference(-50.0, 0.03), _reference(-50.1, 0.04)
    d = ev.log_z_difference(a, b)
    assert d.difference == pytest.approx(0.1) and d.se == pytest.approx(0.05)
    assert d.z == pytest.approx(2.0) and d.status == ev.PREFERS_FIRST and d.certified
    # the same gap within the joint error (z = 0.1 / 0.0707 = 1.41) is not resolved, though
    # it would be against either error alone
    wide = ev.log_z_difference(_reference(-50.0, 0.05), _reference(-50.1, 0.05))
    assert wide.status == ev.UNRESOLVED
    # an exact offset (a normalizer one model omits) moves the difference, not its error
    shifted = ev.log_z_difference(a, b, offset=-0.3)
    assert shifted.difference == pytest.approx(-0.2) and shifted.se == pytest.approx(0.05)
    assert shifted.status == ev.PREFERS_SECOND
    assert ev.log_z_difference(b, a).status == ev.PREFERS_SECOND
    refused = ev.log_z_difference(a, _reference(certified=False, reason="they disagree"))
    assert refused.status == NOT_APPLICABLE and "they disagree" in refused.reason
    assert refused.difference == pytest.approx(0.0) and not refused.certified
    missing = ev.ReferenceEvidence(ev.EvidenceEstimate("bridge sampling", None, None, 0.0, reason="no root"),
                                   ev.EvidenceEstimate("annealed importance sampling", None, None, 0.0),
                                   False, "no bridge estimate: no root")
    assert ev.log_z_difference(missing, a).status == NOT_APPLICABLE
    assert ev.log_z_difference(missing, a).difference is None


def test_a_reference_log_z_reads_back_from_its_json():
    est = ev.EvidenceEstimate("bridge sampling", -50.0, 0.01, 1.5, {"dimension": 3})
    skipped = ev.EvidenceEstimate("annealed importance sampling", None, None, 0.0, reason="not run")
    for ref in (ev.ReferenceEvidence(est, est, True, ""),
                ev.ReferenceEvidence(est, skipped, False, ev.UNCHECKED, checked=False)):
        back = ev.ReferenceEvidence.from_json(ref.to_json())
        assert back == ref and back.to_json() == ref.to_json()
