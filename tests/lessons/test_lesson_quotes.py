"""zoo.lessons: the values a lesson's prose quotes (notebooks/refresh.py writes them into the prose)."""
import pytest

from repository import notebook_refresh
from zoo import lessons


def test_quote_records_text_and_refuses_what_prose_cannot_show():
    lessons.forget_quotes()
    lessons.quote(worst=f"{0.6812:+.0%}", chains=2)
    assert lessons.quoted() == {"worst": "+68%", "chains": "2"}
    lessons.quote(worst="+70%")  # a cell run again replaces its value
    assert lessons.quoted()["worst"] == "+70%"
    for bad in ({"x": ""}, {"x": "a\nb"}, {"x": "1<!--=y-->"}):
        with pytest.raises(ValueError, match="quoted value"):
            lessons.quote(**bad)
    lessons.forget_quotes()
    assert lessons.quoted() == {}


def test_refresh_reads_the_lessons_own_mark():
    assert notebook_refresh().QUOTE_MARK is lessons.QUOTE_MARK


def test_a_claim_the_run_does_not_support_stops_the_lesson_while_it_is_stored(monkeypatch):
    monkeypatch.setenv(lessons.STRICT_CLAIMS_ENV, "1")
    lessons.claim(2 > 1, "two is more than one")
    with pytest.raises(lessons.ClaimNotSupported, match="both engines differ"):
        lessons.claim(False, "both engines differ")


def test_in_a_students_run_an_unsupported_claim_warns_and_the_lesson_runs_on(monkeypatch):
    monkeypatch.delenv(lessons.STRICT_CLAIMS_ENV, raising=False)
    with pytest.warns(lessons.ClaimWarning, match="both engines differ"):
        lessons.claim(False, "both engines differ")


def test_refresh_runs_lessons_with_strict_claims(tmp_path):
    module = notebook_refresh()
    assert module.kernel_environment(tmp_path, tmp_path)[lessons.STRICT_CLAIMS_ENV] == "1"


def _ggsm_problem():
    import numpy as np

    from zoo.models.ggsm_probit import GGSMProbit

    rng = np.random.default_rng(0)
    Phi = rng.standard_normal((30, 4))
    y = (rng.random(30) < 0.5).astype(float)
    return GGSMProbit(q=0.8), Phi, y


def _written_ggsm(q, a, b, *, b_factor=1.0, constant=0.0, name="w"):
    """The GGSM probit model as a lesson writes it: standard distributions, the generalized
    normal prior of the weights written out as a factor."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln, log_ndtr

    def model(Phi, y=None):
        lam = numpyro.sample("lam", dist.InverseGamma(a, b * b_factor))
        w = numpyro.sample(name, dist.ImproperUniform(dist.constraints.real, (), (Phi.shape[1],)))
        numpyro.factor("prior_w", jnp.sum(jnp.log(q / 2) - jnp.log(lam) / q - gammaln(1 / q) - jnp.abs(w) ** q / lam)
                       + constant)
        f = Phi @ w
        # probit as logits: log Phi(f) - log Phi(-f), exact where Phi(f) itself rounds to 0 or 1
        numpyro.sample("y", dist.Bernoulli(logits=log_ndtr(f) - log_ndtr(-f)), obs=y)

    return model


def test_a_model_written_on_the_page_is_checked_against_the_zoos():
    spec, Phi, y = _ggsm_problem()
    same = lessons.compare_log_densities(_written_ggsm(spec.q, spec.a, spec.b), spec, Phi, y)
    assert same.same and same.sites == ("lam", "w") and "the same log density" in same.line
    assert "e-1" not in same.line  # round-off is machine-dependent: not printed
    # planted: a prior scale twice the zoo's; a dropped normalizing constant; another site name
    other = lessons.compare_log_densities(_written_ggsm(spec.q, spec.a, spec.b, b_factor=2.0), spec, Phi, y)
    assert not other.same and not other.same_up_to_constant and "DIFFERENT" in other.line
    shifted = lessons.compare_log_densities(_written_ggsm(spec.q, spec.a, spec.b, constant=3.0), spec, Phi, y)
    assert not shifted.same and shifted.same_up_to_constant
    with pytest.raises(ValueError, match="latent sites"):
        lessons.compare_log_densities(_written_ggsm(spec.q, spec.a, spec.b, name="weights"), spec, Phi, y)
