"""posteriordb's posteriors in the zoo (validation/records/posteriordb.py): the shipped data and
reference draws read, Stan's names mapped onto the model's sites, and the long check that the
zoo's certified reference and posteriordb's - two exact samplers of one posterior - are told
apart by no verdict."""
from __future__ import annotations

import numpy as np
import pytest

from zoo.models.base import Site
from zoo.validation.records import posteriordb as P

NAME = "eight_schools-eight_schools_noncentered"


def test_the_shipped_posterior_reads_as_posteriordb_stores_it():
    data = P.posterior_data(NAME)
    assert data["J"] == 8 and isinstance(data["J"], int)
    np.testing.assert_array_equal(data["y"], [28, 8, -3, 7, -1, 1, 18, 12])
    draws = P.reference_draws(NAME)
    assert sorted(draws) == sorted(["mu", "tau"] + [f"theta[{i}]" for i in range(1, 9)])
    assert {v.shape for v in draws.values()} == {(10, 1000)}  # 10 chains of 1,000 (posteriordb's info)
    m = P.model(NAME)
    assert m.name == NAME and m.spec.judged == (Site("mu", (), "real"), Site("tau", (), "positive"),
                                                Site("theta", (8,), "real"))


def test_stan_names_map_onto_sites_one_based_and_row_major():
    draws = {"a": np.zeros((2, 3)), **{f"x[{i},{j}]": np.full((2, 3), 10 * i + j) for i in (1, 2) for j in (1, 2, 3)}}
    out = P.draws_on_sites(draws, (Site("a", ()), Site("x", (2, 3))))
    assert out["x"].shape == (2, 3, 2, 3) and out["x"][0, 0, 1, 2] == 23 and out["x"][1, 2, 0, 0] == 11
    with pytest.raises(ValueError, match="posteriordb's draws lack 'x\\[1,4\\]' \\(site 'x' of shape \\(2, 4\\)\\)"):
        P.draws_on_sites(draws, (Site("x", (2, 4)),))
    with pytest.raises(ValueError, match="posteriordb posterior 'no_such' is not shipped with the zoo; shipped: "
                                         "eight_schools-eight_schools_noncentered"):
        P.model("no_such")


@pytest.mark.long
def test_posteriordb_reference_draws_are_indistinguishable_from_the_zoo_certified_reference():
    """Both are exact samplers of one posterior: each verdict calls them different at most 5% of
    the time (the three together at most 15%), so 'indistinguishable' three times is the
    expected outcome; at these fixed seeds it is the one measured (max |z| 2.0, 2.5 and 2.0
    against thresholds 3.6, 3.6 and 3.7: docs/your-model.md)."""
    from zoo.validation.records import registry
    from zoo.validation.runs.compare import CompareConfig, compare

    try:
        res = compare(CompareConfig(model=P.model(NAME), engines=(P.reference_draws_engine,),
                                    evidence="off")).result
    finally:
        registry.unregister(NAME)
    assert res.reference.certified
    row = res.engines["zoo.validation.records.posteriordb:reference_draws_engine"]
    assert row.failure is None
    assert [v.status for v in (row.verdict, row.joint_verdict, row.distribution_verdict)] == [
        "indistinguishable"] * 3
