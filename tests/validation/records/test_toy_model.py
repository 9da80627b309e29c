"""A model enters the zoo with one record (CONTRIBUTING.md's recipe), shown on a toy (the
engines' contracts are tests/inference/test_contracts.py's, the import structure
tests/project/test_layering.py's).

* a toy model defined here - a Gaussian-prior probit with one engine of its own and a
  classifier hyper-parameter (its prior precision ``alpha``) declared only in its record -
  enters the zoo by one ``register`` call and runs through ``compare`` and the report end to
  end, through the scikit-learn classifier and through SBC, and the command line then lists it;
* a record that contradicts itself is refused when it is made;
* every model's own defects live in its record.
"""
from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass, field, replace

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from jax.scipy.special import log_ndtr, ndtr

from zoo.inference.contracts import EndToEndFit, EngineEntry
from zoo.inference.posterior import FitInfo, GaussianPosterior
from zoo.models.base import Site
from zoo.models.basis import LinearBasis, WithBias
from zoo.validation.records import registry
from zoo.validation.judge.defects import Defect, posterior_defect
from zoo.validation.records.model_record import ClassifierParam, ModelRecord, positive_number
from zoo.validation.records.protocol import Prepared


# --------------------------------------------------------------------------------------
# A toy model enters the zoo with one record
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class GaussianProbit:
    """y ~ Bernoulli(Phi(Phi w)), w ~ N(0, 1/alpha): the smallest model the zoo can hold."""

    alpha: float = 1.0
    name: str = field(default="toy-probit", init=False)

    def model(self, Phi, y=None):
        Phi = jnp.asarray(Phi)
        w = numpyro.sample("w", dist.Normal(0.0, 1.0 / math.sqrt(self.alpha)).expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(probs=ndtr(Phi @ w)), obs=y)

    def sites(self, n_basis):
        return (Site("w", (n_basis,), "real", ("basis",)),)

    def linear_predictor(self, params, Phi):
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        return ndtr(f)

    def flat_design(self, Phi):
        return jnp.asarray(Phi)

    def gaussian_prob(self, mean_f, var_f):
        return ndtr(mean_f / jnp.sqrt(1.0 + var_f))

    def constant_data(self, n_basis):
        return {"alpha": np.asarray(self.alpha)}

    def to_dict(self):
        return {"model": self.name, "alpha": float(self.alpha)}


def toy_laplace(spec, Phi, y, *, config=None):
    """Laplace approximation of the toy posterior: Newton to the mode, Gaussian there."""
    Phi, y = jnp.asarray(Phi), jnp.asarray(y)
    s = 2.0 * y - 1.0

    def log_joint(w):
        return jnp.sum(log_ndtr(s * (Phi @ w))) - 0.5 * spec.alpha * jnp.sum(w**2)

    w = jnp.zeros(Phi.shape[1])
    for n_iter in range(1, 51):
        step = jnp.linalg.solve(-jax.hessian(log_joint)(w), jax.grad(log_joint)(w))
        w = w + step
        if float(jnp.max(jnp.abs(step))) < 1e-10:
            break
    chol = np.linalg.cholesky(np.linalg.inv(-np.asarray(jax.hessian(log_joint)(w))))
    info = FitInfo("toy-laplace", converged=True, n_iter=n_iter, objective="log joint")
    return GaussianPosterior(spec, spec.sites(Phi.shape[1]), np.asarray(w), chol, info)


def toy_laplace_end_to_end(Phi_all, y, *, seed=0, config=None, spec=None):
    """The toy selects nothing: the Laplace fit of the spec given (default alpha 1), every column kept."""
    spec = GaussianProbit() if spec is None else spec
    return EndToEndFit(toy_laplace(spec, Phi_all, y, config=config), spec, np.arange(np.shape(Phi_all)[1]))


def toy_design(X, y01, engine, options):
    """The toy's classifier: linear with a bias column, at the prior precision ``alpha``
    the classifier was given (None: 1)."""
    if options["basis"] != "linear":
        raise ValueError(f"toy-probit takes basis 'linear', not {options['basis']!r}")
    alpha = 1.0 if options["alpha"] is None else options["alpha"]
    return WithBias(LinearBasis.fit(X)), {"spec": GaussianProbit(alpha=alpha)}


def toy_prepare(split, params, *, progress=None):
    basis = WithBias(LinearBasis.fit(split.X_train))
    spec = GaussianProbit(alpha=float(params.get("alpha", 1.0)))
    return Prepared(spec=spec, Phi_train=basis.transform(split.X_train), Phi_test=basis.transform(split.X_test),
                    y_train=split.y_train, y_test=split.y_test, hyper={"alpha": spec.alpha, "n_basis": basis.n_basis},
                    selection={"alpha": "given" if "alpha" in params else "default 1"}, basis=basis)


TOY = ModelRecord(
    name="toy-probit", title="toy probit", summary="Gaussian-prior probit (a test's toy)",
    spec_class=GaussianProbit, prepare=toy_prepare, params=("alpha",), selection="alpha as given",
    default_data="ripley",
    engines=(EngineEntry("laplace", "gaussian", "Newton mode and Hessian of the toy's log joint", toy_laplace,
                         toy_laplace_end_to_end),),
    default_engines=("laplace",),
    classifier=toy_design,
    classifier_params=(ClassifierParam("alpha", "the toy's prior precision (None: 1)", positive_number),),
    sbc_spec=lambda: (GaussianProbit(alpha=2.0), {}),
)


@pytest.fixture
def toy_registered():
    registry.register(TOY)
    try:
        yield TOY
    finally:
        registry.unregister(TOY.name)


@pytest.mark.long
def test_a_toy_model_runs_through_compare_with_one_record(toy_registered, fast_nuts, nuts_cache_dir, tmp_path,
                                                          capsys):
    from zoo.cli import build_parser
    from zoo.validation.report.compare_report import write_report
    from zoo.validation.runs.compare import CompareConfig, compare

    comp = compare(CompareConfig(model="toy-probit", reference=fast_nuts, cache_dir=str(nuts_cache_dir)))
    res = comp.result.to_json()
    assert res["model"] == "toy-probit" and res["data"] == "ripley"
    assert res["reference"]["certified"], res["reference"]["failures"]
    row = res["engines"]["laplace"]
    assert row["failure"] is None and row["kind"] == "gaussian"
    # The toy posterior (250 points, 3 weights) is close to Gaussian, so its Laplace
    # approximation must sit near the reference: NUTS's mean is known to about 1/sqrt(ESS)
    # of a posterior sd (ESS >= 400 by certification: 0.05), and a Laplace mean on a
    # posterior this close to Gaussian is off by a small fraction of an sd. A broken
    # engine (wrong sign, wrong prior) would be off by whole sds.
    assert row["std_mean_err_max"] < 0.25
    assert 0.8 < row["sd_ratio_median"] < 1.2
    files = write_report(comp, str(tmp_path / "report"))
    text = pathlib.Path(files["report"]).read_text()
    assert text.startswith("# TOY-PROBIT on `ripley`") and "| laplace | gaussian | 3 |" in text
    assert "Reference: **nuts** (NUTS on the NumPyro model)" in text  # the sampler's own description

    # the command line reads the same registry: the toy is listed and its defaults shown
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines where it likes
    assert "toy-probit" in help_text and "ripley for toy-probit" in help_text


def test_unknown_names_are_answered_with_the_registered_ones(toy_registered):
    from zoo.classifier import SparseBayesClassifier, classifier_models
    from zoo.validation.runs.compare import CompareConfig

    with pytest.raises(ValueError) as err:
        CompareConfig(model="no-such-model")
    assert all(name in str(err.value) for name in registry.model_names())
    # the classifier's models are the records with a design, in registry order; a record
    # without one (the toy's, bare) is refused with the list
    with_design = tuple(n for n in registry.model_names() if registry.get_model(n).classifier is not None)
    assert classifier_models() == with_design and with_design[-1] == "toy-probit"
    bare = registry.register(replace(TOY, name="toy-bare", classifier=None, classifier_params=()))
    try:
        with pytest.raises(ValueError, match=f"toy-bare.*has no classifier; available: {', '.join(with_design)}$"):
            SparseBayesClassifier(model="toy-bare", engine="laplace").fit(np.eye(4)[:, :2], [0, 1, 0, 1])
    finally:
        registry.unregister(bare.name)
    with pytest.raises(ValueError, match="has no engine 'nope'; available: em, laplace, ep, auto-laplace"):
        registry.get_engine("pcvm", "nope")


def test_a_record_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="default engines"):
        replace(TOY, default_engines=("ep",))
    with pytest.raises(ValueError, match="reference chain"):
        replace(TOY, references=({"sampler": "slice-gibbs"},))  # not a sampler of this record
    with pytest.raises(ValueError, match="engine names repeat"):
        replace(TOY, engines=TOY.engines * 2)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(replace(registry.get_model("pcvm"), summary="another"))
    with pytest.raises(ValueError, match=r"unknown toy probit parameter\(s\) \['beta'\]; use alpha"):
        TOY.check_params({"beta": 1.0})
    with pytest.raises(ValueError, match=r"defect 'wide' names engines \['ep'\] not among its engines \['laplace'\]"):
        replace(TOY, defects=(Defect("wide", "cov x 3", posterior_defect(cov_factor=3.0), engines=("ep",)),))
    with pytest.raises(ValueError, match="classifier parameters .* without a classifier design"):
        replace(TOY, classifier=None)
    with pytest.raises(ValueError, match="must be distinct public names, none of model, engine, width"):
        replace(TOY, classifier_params=(ClassifierParam("width", "again"),))
    with pytest.raises(ValueError, match="defect names already taken: 'cov x 2' \\(a generic defect\\)"):
        registry.register(replace(TOY, defects=(Defect("cov x 2", "again", posterior_defect(cov_factor=2.0)),)))


@pytest.mark.long
def test_a_toy_models_classifier_hyper_parameter_lives_in_its_record(toy_registered, tmp_path):
    """``alpha`` is declared only in the toy's record, yet it is a scikit-learn parameter of
    the classifier (get_params, set_params, clone), reaches the fit, is checked in one line
    and refused for other models; the toy's engine and its own defect run through SBC."""
    from sklearn.base import clone

    from zoo.classifier import SparseBayesClassifier
    from zoo.validation.runs import battery as D
    from zoo.validation.judge.sbc_verdict import TOO_FEW
    from zoo.validation.runs.sbc import SBCConfig, run_sbc
    from zoo.validation.runs.sbc_simulation import SBCSettings

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=60) > 0, "yes", "no")
    clf = SparseBayesClassifier(model="toy-probit", engine="laplace", basis="linear")
    assert clf.get_params()["alpha"] is None and "alpha" not in repr(clf)
    assert clf.set_params(alpha=4.0) is clf and clone(clf).get_params() == clf.get_params()
    clf.fit(X, y)
    assert clf.spec_.alpha == 4.0 and list(clf.classes_) == ["no", "yes"]
    proba = clf.predict_proba(X)
    assert proba.shape == (60, 2) and np.allclose(proba.sum(1), 1.0)
    assert np.mean(clf.predict(X) != y) < 0.3
    # the precision reaches the fit: a weaker prior leaves the weights larger
    weak = clone(clf).set_params(alpha=0.01).fit(X, y)
    assert np.linalg.norm(weak.posterior_.mean_flat()) > np.linalg.norm(clf.posterior_.mean_flat())
    with pytest.raises(ValueError, match=r"^alpha must be a positive number or None, got -1.0$"):
        clone(clf).set_params(alpha=-1.0).fit(X, y)
    with pytest.raises(ValueError, match=r"^alpha does not apply to pcvm \(it takes scan\)$"):
        SparseBayesClassifier(model="pcvm", alpha=1.0).fit(X, y)

    # SBC from the record's sbc_spec (alpha = 2), the toy's engine as registered
    summary = run_sbc(SBCConfig("toy-probit", "laplace", settings=SBCSettings(n_sims=10, n_draws=9)),
                      out_dir=tmp_path / "sbc")
    # every fit works; 10 simulations can detect no defect of useful size (SBC's power line),
    # so a sound engine is "too few to call" - "miscalibrated" would be a real detection
    assert summary.counts.ok == 10 and summary.status == TOO_FEW, summary
    # a generic defect applies to the toy's engine, no model's own defect does
    assert D.get_defect("cov x 2").applies_to("toy-probit", "laplace")
    assert not D.get_defect("truncation ignored").applies_to("toy-probit", "laplace")


def test_every_model_defect_lives_in_its_record():
    """The defect table is the generic defects and the records' own, each bound to its model."""
    from zoo.validation.runs import battery as D

    own = {d.name: (name, d.engines) for name in registry.model_names() for d in registry.get_model(name).defects}
    assert {n: (d.model, d.engines) for n, d in D.all_defects().items() if d.model is not None} == own
    assert own["truncation ignored"] == ("pcvm", ("ep",))
    assert not D.get_defect("truncation ignored").applies_to("gig-logistic", "ep")
