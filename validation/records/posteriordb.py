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

Shipped (:data:`POSTERIORS`): eight_schools-eight_schools_noncentered (a hierarchical normal
model), kidiq-kidscore_momiq (a linear regression with an improper flat prior on its
coefficients) and gp_pois_regr-gp_pois_regr (a Poisson regression on a latent Gaussian
process). A translation takes every name of its posterior's data, as posteriordb's data sets
are shared by several models: what the Stan model does not declare it ignores, as Stan does.
The zoo's reference for a posterior is its default NUTS unless :data:`REFERENCES` says
otherwise (posteriordb's own sampler settings, where the default's are not enough).
"""
from __future__ import annotations

import io
import json
import zipfile

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

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


def kidscore_momiq(N, kid_score, mom_iq, mom_hs=None, mom_hs_new=None, mom_iq_new=None):
    """posteriordb's ``kidscore_momiq.stan`` (Gelman & Hill's ARM, ch. 3): a linear regression
    of a child's test score on the mother's IQ. ``vector[2] beta`` has no sampling statement in
    Stan - an improper flat prior on the real plane -, sigma ~ Cauchy(0, 2.5) on sigma > 0 (a
    half-Cauchy), kid_score ~ N(beta[1] + beta[2] * mom_iq, sigma). N is the data's size, as in
    Stan (the shapes of the vectors carry it here). posteriordb's kidiq data, shared by the
    kidiq models, also hold mom_hs, mom_hs_new and mom_iq_new: taken and not used, as Stan
    ignores data a model does not declare."""
    beta = numpyro.sample("beta", dist.ImproperUniform(constraints.real, (), event_shape=(2,)))
    sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
    numpyro.sample("kid_score", dist.Normal(beta[0] + beta[1] * mom_iq, sigma).to_event(1), obs=kid_score)


def _cholesky(a, n: int):
    """The lower Cholesky factor of the n x n positive definite matrix ``a``, by the
    Cholesky-Banachiewicz recursion written in jax.numpy (n is a plain int: unrolled).
    Not jnp.linalg.cholesky: with it the zoo's NUTS reference hung on the CPU
    (jaxlib 0.10.2), every thread of XLA's CPU pool inside jaxlib's batched Cholesky kernel
    (the chains' draws of the deterministic site f, vmapped), each waiting on work queued to
    that same pool."""
    L = jnp.zeros_like(a)
    for j in range(n):
        d = jnp.sqrt(a[j, j] - jnp.dot(L[j, :j], L[j, :j]))
        col = (a[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / d
        L = L.at[j, j].set(d).at[j + 1:, j].set(col)
    return L


def gp_pois_regr(N, x, k, y=None):
    """posteriordb's ``gp_pois_regr.stan``: a Poisson regression with a log link on a latent
    Gaussian process, non-centred. rho ~ Gamma(25, 4) (shape, rate - Stan's and NumPyro's
    parameterization alike) on rho > 0, alpha ~ N(0, 2) on alpha > 0 (a half-normal), f_tilde
    ~ N(0, 1); f = L f_tilde with L the Cholesky factor of Stan's ``gp_exp_quad_cov(x, alpha,
    rho)`` (alpha^2 exp(-(x_i - x_j)^2 / (2 rho^2))) plus 1e-10 on its diagonal; k ~
    Poisson(exp(f)). posteriordb's data for it also hold ``y`` (the outcome of its sibling
    ``gp_regr``): taken and not used, as Stan ignores data a model does not declare."""
    rho = numpyro.sample("rho", dist.Gamma(25.0, 4.0))
    alpha = numpyro.sample("alpha", dist.HalfNormal(2.0))
    f_tilde = numpyro.sample("f_tilde", dist.Normal(0.0, 1.0).expand([N]).to_event(1))
    d = x[:, None] - x[None, :]
    cov = alpha ** 2 * jnp.exp(-0.5 * d ** 2 / rho ** 2) + 1e-10 * jnp.eye(N)
    f = numpyro.deterministic("f", _cholesky(cov, N) @ f_tilde)
    numpyro.sample("k", dist.Poisson(jnp.exp(f)).to_event(1), obs=k)


#: posterior name -> (its NumPyro translation, the sites posteriordb's reference draws hold)
POSTERIORS = {
    "eight_schools-eight_schools_noncentered": (eight_schools_noncentered, ("mu", "tau", "theta")),
    "kidiq-kidscore_momiq": (kidscore_momiq, ("beta", "sigma")),
    "gp_pois_regr-gp_pois_regr": (gp_pois_regr, ("rho", "alpha", "f")),
}


#: posterior name -> the zoo's reference chain for it, where not its default NUTS: for
#: gp_pois_regr, NUTS at posteriordb's own adapt_delta 0.99 (at the default 0.9 the chains
#: diverged a few times, 7 at seed 0, and an uncertified reference judges nothing)
REFERENCES = {
    "gp_pois_regr-gp_pois_regr": ({"sampler": "nuts", "target_accept": 0.99},),
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
    """The shipped posterior as a :class:`~zoo.validation.records.user_model.Model`: its
    NumPyro translation on its data, named after it, judged on the sites its reference
    draws hold, with its reference chain (:data:`REFERENCES`; NUTS with its default settings otherwise)."""
    _known(name)
    fn, sites = POSTERIORS[name]
    if name in REFERENCES:
        return Model(fn, posterior_data(name), name=name, sites=sites, references=REFERENCES[name])
    return Model(fn, posterior_data(name), name=name, sites=sites)


def reference_draws(name: str) -> dict[str, np.ndarray]:
    """posteriordb's reference draws of a shipped posterior: parameter name (Stan's, e.g.
    ``theta[1]``) -> (chains, draws)."""
    _known(name)
    chains = _zipped_json(f"{FOLDER}/{name}/reference_draws.json.zip")
    names = list(chains[0])
    return {k: np.array([c[k] for c in chains], dtype=float) for k in names}


def draws_on_sites(draws: dict[str, np.ndarray], sites) -> dict[str, np.ndarray]:
    """posteriordb's draws by Stan name -> ``{site: (chains, draws, *shape)}`` for ``sites``
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


__all__ = ["POSTERIORS", "REFERENCES", "eight_schools_noncentered", "kidscore_momiq", "gp_pois_regr",
           "posterior_data", "model", "reference_draws", "draws_on_sites", "reference_draws_engine"]
