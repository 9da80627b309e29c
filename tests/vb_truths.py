"""Truths for the VB engines computed without their formulas (tests/inference/test_gig_vb.py and
tests/inference/test_grid_vb.py): expectations under a mean-field q by quadrature or Monte Carlo of
the NumPyro model's own log density, the Jaakkola-Jordan bound's gap by Gauss-Hermite, and
the tiny one-column problems they are computed on. None of the engines' moment formulas,
Bessel ratios or entropies is used here."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer.util import log_density
from scipy import special


def one_column_problem(n, seed=0, signal=1.5):
    """(x, y): n standard normal inputs of one column, labels from sigmoid(signal x)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1))
    y = (rng.random(n) < special.expit(signal * x[:, 0])).astype(float)
    return x, y


class MeanFieldQuadrature:
    """E_q[log p(y, z)] - E_q[log q(z)] for a mean-field q of scalar factors (scipy frozen
    distributions), by a tensor-product trapezoid rule: a "real" factor on its own scale
    over mean +- 12 sd, a "positive" one in u = log z over the range where its density in u
    is within e^-40 of its peak. The integrands are smooth (analytic in a strip), so the
    trapezoid rule converges geometrically; the log joint is evaluated once on the grid, and
    a q with other parameters (near the first) only reweights it (``elbo``)."""

    def __init__(self, log_joint, factors, kinds, nodes):
        self.axes = []
        for d, kind, m in zip(factors, kinds, nodes):
            if kind == "real":
                t = np.linspace(d.mean() - 12 * d.std(), d.mean() + 12 * d.std(), m)
                self.axes.append((kind, t, t))
            else:
                coarse = np.arange(-60.0, 60.0, 0.01)
                psi = d.logpdf(np.exp(coarse)) + coarse
                inside = coarse[psi >= np.max(psi) - 40.0]
                t = np.linspace(inside[0] - 0.1, inside[-1] + 0.1, m)
                self.axes.append((kind, t, np.exp(t)))
        self.mesh = np.meshgrid(*[x for _, _, x in self.axes], indexing="ij")
        self.log_joint = np.asarray(log_joint(*[jnp.asarray(g.ravel()) for g in self.mesh])).reshape(self.mesh[0].shape)

    def _weights(self, factors):
        out = []
        for (kind, t, x), d in zip(self.axes, factors):
            log_q = d.logpdf(x)
            w = np.exp(log_q + (t if kind == "positive" else 0.0)) * (t[1] - t[0])
            w[[0, -1]] *= 0.5
            out.append((w, log_q))
        return out

    def masses(self, factors):
        return np.array([np.sum(w) for w, _ in self._weights(factors)])

    def expect(self, factors, values):
        """E_q of a function given by its values on the grid."""
        out = np.broadcast_to(values, self.mesh[0].shape)
        for w, _ in self._weights(factors):
            out = np.tensordot(w, out, axes=(0, 0))
        return float(out)

    def elbo(self, factors):
        return self.expect(factors, self.log_joint) - sum(float(w @ log_q) for w, log_q in self._weights(factors))


def jj_gap_terms(y, f_mean, f_var, xi):
    """Per point, E_q[log p(y_n | w)] - E_q[JJ bound at xi_n] where f_n = phi_n^T w has mean
    f_mean and variance f_var under q: the exact term by 80-node Gauss-Hermite in f_n (log
    sigmoid is analytic in a strip of half-width pi and these f have sd <= 1.1: exact to
    rounding), the bound in closed form with lambda written as (sigmoid(xi) - 1/2) / (2 xi)
    - not the engines' tanh form."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    f = f_mean[:, None] + np.sqrt(f_var)[:, None] * z
    exact = -np.logaddexp(0.0, np.where(y[:, None] == 1, -f, f)) @ w / np.sqrt(2.0 * np.pi)
    lam = (special.expit(xi) - 0.5) / (2.0 * xi)
    bound = -np.logaddexp(0.0, -xi) + (y - 0.5) * f_mean - 0.5 * xi - lam * (f_var + f_mean ** 2 - xi ** 2)
    return exact - bound


def f_moments(x, theta):
    """Mean and variance of f_n = x_n w under q(w) = N(theta[0], exp(theta[1])^2)."""
    return x[:, 0] * theta[0], x[:, 0] ** 2 * np.exp(2.0 * theta[1])


def monte_carlo_elbo(model, x, y, factors, *, n_draws=500_000, seed=1, chunk=100_000):
    """(E_q[log p(y, z)] - E_q[log q(z)], its Monte Carlo standard error) with the log joint
    from NumPyro's ``log_density`` of ``model(x, y=y)``. ``factors``: (site name, frozen scipy
    distribution, event shape of its independent draws) per site, drawn in that order; the
    log joint is evaluated in chunks of ``chunk`` draws (bounded memory)."""
    rng = np.random.default_rng(seed)
    draws = [d.rvs(size=(n_draws,) + shape, random_state=rng) for _, d, shape in factors]
    log_q = sum(d.logpdf(v) if shape == () else np.sum(d.logpdf(v), axis=1)
                for (_, d, shape), v in zip(factors, draws))
    names = [name for name, _, _ in factors]
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    log_joint = jax.jit(jax.vmap(lambda *values: log_density(model, (xj,), {"y": yj}, dict(zip(names, values)))[0]))
    log_p = np.concatenate([np.asarray(log_joint(*(jnp.asarray(v[k:k + chunk]) for v in draws)))
                            for k in range(0, n_draws, chunk)])
    values = log_p - log_q
    return float(np.mean(values)), float(np.std(values) / np.sqrt(n_draws))


def assert_stationary_maximum(bound, theta, *, delta=1e-4, gradient_tol=1e-6):
    """Each coordinate of ``theta`` moved by +-delta: the central difference of ``bound``
    (its gradient) is below ``gradient_tol``, neither move raises it, and its second
    difference is negative (a maximum in that direction, not a saddle)."""
    center = bound(theta)
    for i in range(theta.size):
        step = np.zeros(theta.size)
        step[i] = delta
        up, down = bound(theta + step), bound(theta - step)
        assert abs(up - down) / (2 * delta) < gradient_tol, (i, (up - down) / (2 * delta))
        assert max(up, down) <= center + 1e-10, i
        assert up + down - 2 * center < 0, i
    return center


def assert_jj_xi_optimal(x, y, theta, xi, *, delta=1e-4, gradient_tol=1e-6):
    """xi enters only the Jaakkola-Jordan gap, point by point: moving every log xi_n at once
    by +-delta leaves the gap stationary and no smaller than at the engine's xi."""
    gap, up, down = (jj_gap_terms(y, *f_moments(x, theta), xi * np.exp(s)) for s in (0.0, delta, -delta))
    assert np.max(np.abs(up - down)) / (2 * delta) < gradient_tol
    assert np.all(np.minimum(up, down) >= gap - 1e-12)
