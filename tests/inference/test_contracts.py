"""One contract per engine (``inference/contracts.py``), read from its signature (the
import structure is tests/project/test_layering.py's, the toy model that enters through one record
tests/validation/records/test_toy_model.py's):

* every engine of every registered model keeps its contract;
* an engine derived for one model refuses another model's spec with a TypeError;
* the checker itself is shown to catch each kind of bad signature;
* the end-to-end fit type lives with the contracts.
"""
from __future__ import annotations

import numpy as np
import pytest

from zoo.inference.contracts import (
    EndToEndFit,
    EndToEndFitter,
    FixedSpecFit,
    contract_problems,
)
from zoo.validation.records import registry


# --------------------------------------------------------------------------------------
# Engine contracts
# --------------------------------------------------------------------------------------
def _every_engine():
    for model in registry.model_names():
        for entry in registry.get_model(model).engines:
            yield model, entry


@pytest.mark.parametrize("model,entry", list(_every_engine()), ids=lambda v: getattr(v, "name", v))
def test_every_registered_engine_keeps_the_contract(model, entry):
    fit = entry.fit()
    assert contract_problems(fit, "fixed") == [], f"{model}/{entry.name} fixed-spec fit"
    assert isinstance(fit, FixedSpecFit)
    if entry.end_to_end is not None:
        end_to_end = entry.fit_end_to_end()
        assert contract_problems(end_to_end, "end_to_end") == [], f"{model}/{entry.name} end-to-end fit"
        assert isinstance(end_to_end, EndToEndFitter)


def _model_specific_engines():
    """(model, engine, a spec of another model) for every engine derived for one model
    (the generic Laplace, SVI and Pathfinder engines fit any spec and are left out)."""
    names = registry.model_names()
    for model, entry in _every_engine():
        generic = ("generic_laplace:", "generic_svi:", "generic_pathfinder:")
        if isinstance(entry.fixed, str) and entry.fixed.startswith(generic):
            continue
        other = next(n for n in names if registry.get_model(n).spec_class is not registry.get_model(model).spec_class)
        yield model, entry, registry.get_model(other).spec_class()


@pytest.mark.parametrize("model,entry,wrong_spec", list(_model_specific_engines()),
                         ids=lambda v: getattr(v, "name", v))
def test_an_engine_refuses_another_models_spec_with_a_type_error(model, entry, wrong_spec):
    """One behaviour for the wrong-spec guard (models.checks.check_spec): TypeError,
    raised before any work, naming both types."""
    rng = np.random.default_rng(0)
    Phi, y = rng.normal(size=(20, 3)), np.tile([0.0, 1.0], 10)
    with pytest.raises(TypeError, match=f"got {type(wrong_spec).__name__}"):
        entry.fit()(wrong_spec, Phi, y)


def test_contract_checker_finds_each_kind_of_departure():
    def good(spec, Phi, y, *, config=None, rule="a"):
        pass

    def config_by_position(spec, Phi, y, config=None):
        pass

    def required_option(spec, Phi, y, *, config=None, rule):
        pass

    def no_config(spec, Phi, y):
        pass

    def end_to_end_without_seed(Phi_all, y, *, config=None):
        pass

    assert contract_problems(good, "fixed") == []
    assert any("'config' must be keyword-only" in p for p in contract_problems(config_by_position, "fixed"))
    assert any("'rule' has no default" in p for p in contract_problems(required_option, "fixed"))
    assert contract_problems(no_config, "fixed") == ["has no keyword 'config'"]
    assert contract_problems(end_to_end_without_seed, "end_to_end") == ["has no keyword 'seed'"]
    assert contract_problems(good, "end_to_end")  # (spec, Phi, y): y is a third positional
    with pytest.raises(ValueError, match="kind"):
        contract_problems(good, "other")


def test_the_end_to_end_fit_type_lives_with_the_contracts():
    # engines return it; nothing above inference defines it again
    assert EndToEndFit._fields == ("posterior", "spec", "active")
