"""posteriordb's posteriors in the zoo: their data, a NumPyro translation of their Stan model,
and their reference draws judged as an engine against the zoo's own certified reference.

posteriordb (stan-dev/posteriordb, BSD-3; shipped files and their provenance in
``data/PROVENANCE.md``) holds, per posterior, its data as JSON, its Stan model and, for many,
reference draws made by Stan's NUTS. Both references are exact samplers of the same posterior,
so the zoo's verdicts of the one against the other should call them different no more often than
their stated false-alarm rates: a verdict of "differs" is evidence against one of the two
(a translation error included).

    from zoo.validation.records import posteriordb
    from zoo.validation.runs.compare import CompareConfig, compare

    model = posteriordb.model("eight_schools-eight_schools_noncentered")
    result = compare(CompareConfig(model=model, engines=(posteriordb.reference_draws_engine,))).result

:func:`reference_draws_engine` is an engine (``fit(spec, Phi, y)``) that ignores the data and
returns posteriordb's draws of the posterior the model is named after, over the model's judged
sites - whose names must be posteriordb's (``theta[3]`` is entry 2 of site ``theta``).
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import numpyro
import numpyro.distributions as dist

from ... import data as datasets
from ...inference.posterior import DrawsPosterior, FitInfo
from .user_model import Model

#: the folder of the shipped posteriors inside the package's data
FOLDER = "posteriordb"


# --------------------------------------------------------------------------------------
# NumPyro translations of posteriordb's Stan models (the sites named as Stan names them)
# --------------------------------------------------------------------------------------
def eight_schools_noncentered(J, sigma, y=None):
    """posteriordb's ``eight_schools_noncentered.stan``: theta_trans ~ N(0, 1), mu ~ N(0, 5),
    tau ~ Cauchy(0, 5) on tau > 0 (Stan's ``real<lower=0> tau`` with a Cauchy statement: a
    half-Cauchy), theta = theta_trans * tau + mu, y ~ N(theta, sigma)."""
    theta_trans = numpyro.sample("theta_trans", dist.Normal(0.0, 1.0).expand([J]).to_event(1))
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    theta = numpyro.deterministic("theta", theta_trans * tau + mu)
    numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)


#: posterior name -> (its NumPyro translation, the sites posteriordb's reference draws hold)
POSTERIORS = {
    "eight_schools-eight_schools_noncentered": (eight_schools_noncentered, ("mu", "tau", "theta")),
}


def _known(name: str) -> None:
    if name not in POSTERIORS:
        raise ValueError(f"posteriordb posterior {name!r} is not shipped with the zoo; shipped: "
                         f"{', '.join(POSTERIORS)}")


def _zipped_json(relative: str):
    """The one JSON file of a zip archive among the package's data."""
    with zipfile.ZipFile(io.BytesIO(datasets.read_bytes(relative))) as archive:
        (member,) = [m for m in archive.namelist() if m.endswith(".json")]
        return json.loads(archive.read(member))


def posterior_data(name: str) -> dict:
    """The data of a shipped posterior, as posteriordb stores them (whole numbers stay Python
    ints: sizes)."""
    _known(name)
    d = _zipped_json(f"{FOLDER}/{name}/data.json.zip")
    return {k: (v if isinstance(v, int) and not isinstance(v, bool) else np.asarray(v, dtype=float))
            for k, v in d.items()}


def model(name: str) -> Model:
    """The shipped posterior as a :class:`Model`: its NumPyro translation on its data, named
    after it, judged on the sites its reference draws hold."""
    _known(name)
    fn, sites = POSTERIORS[name]
    return Model(fn, posterior_data(name), name=name, sites=sites)


def reference_draws(name: str) -> dict[str, np.ndarray]:
    """posteriordb's reference draws of a shipped posterior: parameter name (Stan's, e.g.
    ``theta[1]``) -> (chains, draws)."""
    _known(name)
    chains = _zipped_json(f"{FOLDER}/{name}/reference_draws.json.zip")
    names = list(chains[0])
    return {k: np.array([c[k] for c in chains], dtype=float) for k in names}


def draws_on_sites(draws: dict[str, np.ndarray], sites) -> dict[str, np.ndarray]:
    """posteriordb's draws by Stan name -> {site: (chains, draws, *shape)} for ``sites``
    (Stan's indices start at 1, its arrays are row-major: ``x[2,3]`` is ``x[1, 2]``).
    ValueError naming the first site posteriordb's draws lack."""
    out = {}
    for site in sites:
        if not site.shape:
            if site.name not in draws:
                raise ValueError(f"posteriordb's draws lack {site.name!r}; they hold {', '.join(sorted(draws))}")
            out[site.name] = draws[site.name]
            continue
        parts = []
        for index in np.ndindex(*site.shape):
            key = f"{site.name}[{','.join(str(i + 1) for i in index)}]"
            if key not in draws:
                raise ValueError(f"posteriordb's draws lack {key!r} (site {site.name!r} of shape {site.shape})")
            parts.append(draws[key])
        stacked = np.stack(parts, axis=-1)
        out[site.name] = stacked.reshape(stacked.shape[:2] + tuple(site.shape))
    return out


def reference_draws_engine(spec, Phi, y, *, config=None) -> DrawsPosterior:
    """posteriordb's reference draws of the posterior ``spec`` is named after (a model made by
    :func:`model`), as an engine's answer: the zoo judges them like any engine's draws. The
    data are not used: posteriordb's draws were made from its own copy of them, which
    :func:`model` reads."""
    name = getattr(spec, "name", None)
    _known(name)
    draws = draws_on_sites(reference_draws(name), spec.sites())
    chains, n = next(iter(draws.values())).shape[:2]
    info = FitInfo("posteriordb", converged=True, n_iter=0, seconds=0.0,
                   reason="", extra={"source": f"posteriordb reference draws of {name}: {chains} chains x {n}"})
    return DrawsPosterior(spec, tuple(spec.sites()), draws, info)


__all__ = ["POSTERIORS", "eight_schools_noncentered", "posterior_data", "model", "reference_draws",
           "draws_on_sites", "reference_draws_engine"]
