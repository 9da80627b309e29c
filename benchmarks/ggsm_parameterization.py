"""GGSM probit's NUTS: the model as written (centered: w ~ GeneralizedNormal(lam, q)) against
a non-centered form (z ~ GeneralizedNormal(1, q), w = lam^(1/q) z: the same joint of lam
and w) on the SBC problem's first simulated data sets: mean leapfrog steps per draw,
divergences, the smallest bulk ESS and largest R-hat over lam and w, wall seconds (with
compilation: MCMC.run compiles on every call) and the posterior mean of w.

Why: after issue 37 SBC of GGSM's NUTS is bound by its sampling (~0.9 s a simulation,
trees of 25-120 steps), and a funnel between lam and w would be the usual cause. The
steps per draw answer whether a reparameterization would make it cheaper.

    python benchmarks/ggsm_parameterization.py [N_SIMS]    # ~1 min a simulation on 2 cores
"""
import sys
import time

import zoo
import jax, jax.numpy as jnp, numpy as np, numpyro, numpyro.distributions as dist
import arviz as az
from numpyro.infer import MCMC, NUTS
from zoo.validation.records import registry
from zoo.validation.runs import sbc_simulation
from zoo.models.distributions import GeneralizedNormal, ProbitBernoulli

record = registry.get_model("ggsm-probit")
problem = sbc_simulation.problem_for(record)
spec, Phi = problem.spec, np.asarray(problem.Phi)
M = Phi.shape[1]

def centered(Phi, y=None):
    spec.model(Phi, y)

def noncentered(Phi, y=None):
    lam = numpyro.sample("lam", dist.InverseGamma(spec.a, spec.b))
    z = numpyro.sample("z", GeneralizedNormal(1.0, spec.q).expand([Phi.shape[1]]).to_event(1))
    w = numpyro.deterministic("w", lam ** (1.0 / spec.q) * z)
    numpyro.sample("y", ProbitBernoulli(Phi @ w), obs=y)

rows = []
for index in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    key, truth, y, _ = sbc_simulation._simulation_start(spec, Phi, index, sbc_simulation.SBCSettings())
    for name, model in (("centered", centered), ("non-centered", noncentered)):
        mcmc = MCMC(NUTS(model), num_warmup=500, num_samples=500, num_chains=4, chain_method="sequential", progress_bar=False)
        t = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(index), jnp.asarray(Phi), jnp.asarray(y), extra_fields=("num_steps", "diverging"))
        sec = time.perf_counter() - t
        ex = mcmc.get_extra_fields(group_by_chain=True)
        w = np.asarray(mcmc.get_samples(group_by_chain=True)["w"])
        lam = np.asarray(mcmc.get_samples(group_by_chain=True)["lam"])
        ess = min(float(np.min(az.ess(w[..., i]))) for i in range(M))
        ess = min(ess, float(az.ess(lam)))
        rhat = max(max(float(az.rhat(w[..., i])) for i in range(M)), float(az.rhat(lam)))
        print(f"sim {index} {name:13s} steps/draw {ex['num_steps'].mean():6.1f}  div {int(ex['diverging'].sum()):3d}  "
              f"min ESS {ess:6.0f}  max R-hat {rhat:.3f}  wall {sec:5.1f} s  w-mean {w.mean((0,1)).round(2)}", flush=True)
