"""Where GIG VB's ELBO loses its 96 nats below the reference log Z (docs/validation.md, the
evidence table): the Jaakkola-Jordan bound, the mean field, or a missing normalizer?

    python benchmarks/gig_elbo_gap.py

On the GIG default case (Horii's synthetic design), Monte Carlo over the engine's own
q(beta) q(tau) q(h) (20,000 draws; the model's centred form, whose latent sites are those q
factorizes over):
(a) E_q[log p(y, beta, tau, h)] - E_q[log q] with the exact logistic likelihood: the ELBO of
    this q, which lies below log Z by KL(q || posterior);
(b) the same with the Jaakkola-Jordan bound at the engine's xi in place of log sigma: it must
    equal the engine's reported ELBO (within its Monte Carlo error) if the engine's
    normalizers are right.
So gap = (b - engine, ~0) + (a - b, the JJ bound's looseness) + (log Z - a, the mean field's
KL). Written to results/gig_elbo_gap.json.
"""
import datetime
import os
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from dataclasses import replace

import numpyro.distributions as dist
from numpyro.infer.util import log_density

from zoo.inference import gig_vb
from zoo.models.distributions import GIG
from zoo.validation.runs.compare import CompareConfig, prepare_problem

#: draws of q
S = 20000


def main() -> None:
    p = prepare_problem(CompareConfig(model="gig-logistic"))
    spec, Phi, y = p.spec, p.Phi_train, p.y_train
    print(spec.rho, spec.k, spec.theta, spec.mixing, Phi.shape)
    res = gig_vb.run(spec, Phi, y)
    q = res.q
    print("engine ELBO", res.trace[-1])
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    L = np.linalg.cholesky(res.cov)
    beta = res.bbar + np.asarray(jax.random.normal(k1, (S, len(res.bbar)))) @ L.T
    qtau = GIG(spec.rho - 0.5, jnp.asarray(q["tau_a"]), jnp.asarray(q["tau_b"]))
    tau = np.asarray(qtau.sample(k2, (S,)))
    qh = dist.Gamma(jnp.asarray(q["h_shape"]), jnp.asarray(q["h_rate"]))
    h = np.asarray(qh.sample(k3, (S,)))
    logq = (dist.MultivariateNormal(res.bbar, scale_tril=L).log_prob(beta) + qtau.log_prob(tau).sum(-1)
            + qh.log_prob(h).sum(-1))
    centred = replace(spec, parameterization="centred")

    def logp(b, t, hh):
        return log_density(centred.model, (Phi, y), {}, {"beta": b, "tau": t, "h": hh})[0]
    lp = jax.vmap(logp)(beta, tau, h)
    f = beta @ Phi.T
    loglik = (y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f)).sum(-1)
    xi = np.asarray(q["xi"]); lam = np.tanh(xi / 2) / (4 * xi)
    # JJ: log sigma(s) >= log sigma(xi) + (s - xi)/2 - lam (s^2 - xi^2) with s = (2y-1) f
    s = (2 * y - 1) * f
    jj = (jax.nn.log_sigmoid(xi) + (s - xi) / 2 - lam * (s ** 2 - xi ** 2)).sum(-1)
    exact = np.asarray(lp - logq); bound = np.asarray(lp - loglik + jj - logq)
    se = lambda a: a.std() / np.sqrt(len(a))
    print(f"ELBO of q, exact likelihood: {exact.mean():.3f} +- {se(exact):.3f}")
    print(f"ELBO of q, JJ bound:         {bound.mean():.3f} +- {se(bound):.3f}   (engine {res.trace[-1]:.3f})")
    print(f"JJ looseness E_q[loglik - JJ]: {np.mean(loglik - jj):.3f}")
    out = {"date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "command": "python benchmarks/gig_elbo_gap.py " + " ".join(sys.argv[1:]), "draws": S,
           "engine_elbo": float(res.trace[-1]),
           "elbo_jj_monte_carlo": [float(bound.mean()), float(se(bound))],
           "elbo_exact_likelihood_monte_carlo": [float(exact.mean()), float(se(exact))],
           "jj_looseness": float(np.mean(loglik - jj))}
    write_json_atomic(out, os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "gig_elbo_gap.json"))


if __name__ == "__main__":
    main()
