"""The batched rank-normalized R-hat and bulk/tail ESS (validation/base/batched_diagnostics.py)
against ArviZ's own (through the adapter, on whichever ArviZ line is installed: CI runs this
file under 0.2x and 1.x), series by series: they must be the same numbers (to round-off),
since a certificate computed either way must say the same thing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from zoo.validation.base import arviz_adapter
from zoo.validation.base.batched_diagnostics import rank_diagnostics


def _ar1(rng, B, C, N, phi):
    x = np.zeros((B, C, N))
    e = rng.standard_normal((B, C, N))
    x[:, :, 0] = e[:, :, 0]
    for t in range(1, N):
        x[:, :, t] = phi * x[:, :, t - 1] + e[:, :, t]
    return x


def _cases():
    rng = np.random.default_rng(37)
    yield "iid", rng.standard_normal((12, 4, 500))
    for phi in (0.5, 0.9, 0.99, -0.5):
        yield f"ar1 {phi}", _ar1(rng, 12, 4, 500, phi)
    shifted = _ar1(rng, 6, 4, 300, 0.7)
    shifted[:, 0] += 2.0  # one chain elsewhere: R-hat far above 1
    yield "one chain off", shifted
    yield "ties", np.round(_ar1(rng, 8, 4, 200, 0.8), 1)
    yield "two values", (rng.uniform(size=(8, 4, 200)) < 0.1).astype(float)
    yield "odd draws, 2 chains", _ar1(rng, 8, 2, 101, 0.6)
    yield "one chain (R-hat undefined)", _ar1(rng, 5, 1, 400, 0.3)
    yield "short", rng.standard_normal((5, 4, 7))
    heavy = rng.standard_t(1.5, size=(8, 4, 500))
    yield "heavy tails", heavy
    special = rng.standard_normal((4, 4, 100))
    special[0] = 3.0  # a constant series
    special[1, 2] = 1.0  # one constant chain
    special[2, 1, 5] = np.nan  # a NaN
    yield "constant, constant chain, NaN", special


@pytest.mark.parametrize("name, x", list(_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_batched_diagnostics_are_arviz_s(name, x):
    rhat, bulk, tail = rank_diagnostics(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.array([[d["rhat"], d["ess_bulk"], d["ess_tail"]]
                         for d in map(arviz_adapter.scalar_diagnostics, x)])
    np.testing.assert_allclose(rhat, want[:, 0], rtol=1e-10, equal_nan=True, err_msg=f"{name}: R-hat")
    np.testing.assert_allclose(bulk, want[:, 1], rtol=1e-10, equal_nan=True, err_msg=f"{name}: bulk ESS")
    np.testing.assert_allclose(tail, want[:, 2], rtol=1e-10, equal_nan=True, err_msg=f"{name}: tail ESS")


def test_a_bad_shape_is_refused():
    with pytest.raises(ValueError, match="series, chains, draws"):
        rank_diagnostics(np.zeros((4, 100)))


def test_the_batched_summaries_are_the_certificate_s_numbers():
    # summaries() feeds _certify_run for SBC's batched NUTS posteriors: per site and
    # coordinate (scalar, vector and matrix sites) the numbers of adapter.summary_diagnostics
    from zoo.models.base import Site
    from zoo.validation.base import arviz_adapter as adapter
    from zoo.validation.base.batched_diagnostics import summaries

    rng = np.random.default_rng(5)
    sites = (Site("b", ()), Site("w", (3,)), Site("L", (2, 2)))
    runs = [{"b": _ar1(rng, 1, 4, 200, 0.6)[0], "w": np.moveaxis(_ar1(rng, 3, 4, 200, 0.8), 0, -1),
             "L": np.moveaxis(_ar1(rng, 4, 4, 200, 0.3), 0, -1).reshape(4, 200, 2, 2)} for _ in range(3)]
    for got, draws in zip(summaries(runs, sites), runs):
        want = adapter.summary_diagnostics(adapter.draws_to_idata(draws, sites), sites=sites)
        for key in ("rhat_max", "ess_bulk_min", "ess_tail_min"):
            assert got[key] == pytest.approx(want[key], rel=1e-10), key
        for s in sites:
            for key in ("rhat", "ess_bulk", "ess_tail"):
                np.testing.assert_allclose(got["per_site"][s.name][key], want["per_site"][s.name][key], rtol=1e-10)
