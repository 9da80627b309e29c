"""Files and numbers written under each ArviZ line, for tests/validation/base/test_arviz_lines.py.

The zoo runs on ArviZ 0.2x (Python 3.11) and on ArviZ 1.x (Python 3.12+), and one machine
holds only one of them, so what one line writes is kept here for the other to read:

    python tests/arviz_lines.py      # run once under each line (adds or replaces its own entry)

writes ``tests/data/arviz_lines/written_by_arviz_<major>.nc`` (the fixed draws of
:func:`fixture_draws` through the adapter, as every stored result is written) and that line's
diagnostics of the same draws into ``tests/data/arviz_lines/diagnostics.json``, keyed by its
ArviZ version. The test reads every file with the installed line and compares the installed
line's diagnostics with every stored line's: two implementations of the same definitions,
which must agree to round-off.
"""
from __future__ import annotations

import json
import os

import numpy as np

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "arviz_lines")
DIAGNOSTICS = os.path.join(FOLDER, "diagnostics.json")
ATTRS = {"engine": "fixture", "posterior_kind": "draws", "converged": True, "settings": {"rounds": 3}}


def fixture_draws():
    """Draws of a scalar b and a vector w (3), 4 chains x 200, autocorrelated (AR(1), one
    coordinate heavy-tailed and one chain offset, so R-hat and the ESS are not trivial), a
    sampler statistic, constant data and log importance weights with a heavy right tail."""
    rng = np.random.default_rng(2026)
    chains, draws = 4, 200
    noise = rng.standard_normal((chains, draws, 4))
    noise[..., 3] = rng.standard_t(2.5, size=(chains, draws))
    x = np.zeros_like(noise)
    x[:, 0] = noise[:, 0]
    for t in range(1, draws):
        x[:, t] = 0.7 * x[:, t - 1] + noise[:, t]
    x[1, :, 2] += 0.4  # one chain of w[1] elsewhere
    return {
        "draws": {"b": x[..., 0], "w": x[..., 1:]},
        "diverging": rng.uniform(size=(chains, draws)) < 0.01,
        "constant_data": {"Phi": rng.standard_normal((5, 3)), "y": (rng.uniform(size=5) < 0.5).astype(float)},
        "log_weights": 1.3 * rng.standard_normal(2000),
    }


def sites():
    from zoo.models.base import Site

    return (Site("b", ()), Site("w", (3,), dims=("basis",)))


def diagnostics_of(fixture) -> dict:
    """The installed line's diagnostics of the fixture: per coordinate (b, w[0..2]) R-hat, bulk
    and tail ESS, MCSE of mean and sd; k-hat and the smoothed log weights' first ten."""
    from zoo.validation.base import arviz_adapter as adapter

    per = {"b": adapter.scalar_diagnostics(fixture["draws"]["b"])}
    for j in range(3):
        per[f"w[{j}]"] = adapter.scalar_diagnostics(fixture["draws"]["w"][..., j])
    khat, smoothed = adapter.psis_khat(fixture["log_weights"])
    return {"coordinates": per, "khat": khat, "smoothed_log_weights_head": [float(v) for v in smoothed[:10]]}


def main() -> None:
    from zoo.validation.base import arviz_adapter as adapter

    fixture = fixture_draws()
    os.makedirs(FOLDER, exist_ok=True)
    idata = adapter.draws_to_idata(fixture["draws"], sites(), constant_data=fixture["constant_data"],
                                   sample_stats={"diverging": fixture["diverging"]}, attrs=ATTRS)
    major = adapter.ARVIZ_VERSION.split(".")[0]
    path = adapter.to_netcdf(idata, os.path.join(FOLDER, f"written_by_arviz_{major}.nc"))
    stored = {}
    if os.path.exists(DIAGNOSTICS):
        with open(DIAGNOSTICS, encoding="utf-8") as fh:
            stored = json.load(fh)
    stored = {v: d for v, d in stored.items() if v.split(".")[0] != major}  # one entry per line
    stored[adapter.ARVIZ_VERSION] = diagnostics_of(fixture)
    with open(DIAGNOSTICS, "w", encoding="utf-8") as fh:
        json.dump(stored, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"wrote {path} and the diagnostics of ArviZ {adapter.ARVIZ_VERSION}")


if __name__ == "__main__":
    main()
