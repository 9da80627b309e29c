"""Probe: many NUTS runs (one per simulated data set) in one vmapped program, on the GPU
and on the CPU of one machine - how SBC of NUTS could run (results and reading:
benchmarks/results/vmap_nuts_probe/README.md).

Logistic regression with a N(0, 1) prior, n = 60 points, M = 6 weights (the size of the
zoo's SBC problems); 4 chains x (W warm-up + S draws) per data set; every data set and
chain vmapped together in one jitted program, compiled once. Standalone (JAX and NumPyro
only), so it runs where the zoo is not installed.

    W=500 S=500 python benchmarks/vmap_nuts_probe.py 1,10,100,1000
"""
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model

jax.config.update("jax_enable_x64", True)
N, M, CHAINS = 60, 6, 4
W = int(os.environ.get("W", 500))
S = int(os.environ.get("S", 500))

def model(X, y=None):
    w = numpyro.sample("w", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
    numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)

def simulate(key, D):
    kx, kw, ky = jax.random.split(key, 3)
    X = jax.random.normal(kx, (D, N, M))
    w = jax.random.normal(kw, (D, M))
    y = jax.random.bernoulli(ky, jax.nn.sigmoid(jnp.einsum("dnm,dm->dn", X, w))).astype(jnp.float64)
    return X, y, w

X0, y0, _ = simulate(jax.random.PRNGKey(0), 1)
info = initialize_model(jax.random.PRNGKey(0), model, model_args=(X0[0], y0[0]), dynamic_args=True)
pfg = info.potential_fn  # potential_fn_gen(X, y) -> potential_fn
init_kernel, sample_kernel = hmc(potential_fn_gen=pfg, algo="NUTS")

def one_chain(key, X, y):
    z0 = {"w": jnp.zeros(M)}
    state = init_kernel(z0, num_warmup=W, model_args=(X, y), rng_key=key)
    def step(s, _):
        s = sample_kernel(s, model_args=(X, y))
        return s, s.z["w"]
    state, _ = jax.lax.scan(step, state, None, length=W)
    state, draws = jax.lax.scan(step, state, None, length=S)
    return draws  # (S, M)

@jax.jit
def many(keys, X, y):  # keys (D, CHAINS, 2)
    per_data = jax.vmap(one_chain, in_axes=(0, None, None))
    return jax.vmap(per_data)(keys, X, y)  # (D, CHAINS, S, M)

out = {"device": str(jax.devices()[0]), "platform": jax.default_backend(), "W": W, "S": S}
for D in [int(d) for d in sys.argv[1].split(",")]:
    X, y, w = simulate(jax.random.PRNGKey(D), D)
    keys = jax.random.split(jax.random.PRNGKey(1), D * CHAINS).reshape(D, CHAINS, 2)
    t0 = time.perf_counter()
    many(keys, X, y).block_until_ready()
    first = time.perf_counter() - t0  # compilation included
    keys2 = jax.random.split(jax.random.PRNGKey(2), D * CHAINS).reshape(D, CHAINS, 2)
    t0 = time.perf_counter()
    d = many(keys2, X, y)
    d.block_until_ready()
    warm = time.perf_counter() - t0
    # rank of the true w among the pooled draws, a sanity check of the draws (SBC-like)
    ranks = (d.reshape(D, -1, M) < w[:, None, :]).mean(1)
    out[D] = {"first_s": round(first, 2), "warm_s": round(warm, 2), "warm_per_sim_ms": round(1000 * warm / D, 2),
              "rank_mean": round(float(ranks.mean()), 3)}
    print(D, out[D], flush=True)
print(json.dumps(out))
