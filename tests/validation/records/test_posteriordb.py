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


def test_a_reference_exported_in_posteriordb_layout_reads_back_as_its_draws(tmp_path):
    """posteriordb out: a reference written by write_posteriordb (validation/references/
    posteriordb_export.py) reads back through the same reader as posteriordb's own files, draw
    for draw; its info holds posteriordb's keys and the zoo's certificate. A short run (100
    draws a chain, no doubling) is not certified: refused unless asked, and then its info says so."""
    import json
    import zipfile

    from zoo.validation.references import ReferenceConfig, run_reference
    from zoo.validation.references.posteriordb_export import write_posteriordb

    m = P.model(NAME)
    ref = run_reference(m.spec, dict(m.spec.inputs), dict(m.spec.observations),
                        config=ReferenceConfig(num_warmup=100, num_samples=100, max_doublings=0))
    assert not ref.certified  # 4 x 100 draws, none added: below the certificate's ESS of 400
    with pytest.raises(ValueError, match="reference is not certified .*not exported as a reference posterior"):
        write_posteriordb(ref, tmp_path, "schools")
    paths = write_posteriordb(ref, tmp_path, "schools", allow_uncertified=True)
    assert paths == {"draws": str(tmp_path / "draws" / "schools.json.zip"),
                     "info": str(tmp_path / "info" / "schools.info.json")}
    with zipfile.ZipFile(paths["draws"]) as archive:
        chains = json.loads(archive.read("schools.json"))
    by_name = {k: np.array([c[k] for c in chains]) for k in chains[0]}
    again = P.draws_on_sites(by_name, m.spec.judged)
    for site in m.spec.judged:
        np.testing.assert_array_equal(again[site.name], ref.posterior.draws[site.name])
    info = json.load(open(paths["info"]))
    assert info["diagnostics"]["nchains"] == 4 and info["diagnostics"]["ndraws"] == 400
    assert len(info["diagnostics"]["r_hat"]) == len(info["diagnostics"]["diagnostic_information"]["names"]) == 10
    assert info["zoo"]["certified"] is False and info["comments"].startswith("NOT CERTIFIED: ")
    assert info["inference"]["method_arguments"]["seed"] == 0 and "numpyro" in info["versions"]
