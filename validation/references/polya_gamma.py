"""Exact draws from the Polya-Gamma law PG(1, c), in JAX.

Why. A logistic likelihood becomes Gaussian in the weights once each observation gets a
latent omega_j ~ PG(1, x_j^T beta) (Polson, Scott & Windle 2013, JASA 108:1339): then

    p(beta | omega, y) = N(m, V),  V^-1 = X^T diag(omega) X + prior precision,
    m = V X^T (y - 1/2),

which is the data augmentation of the GIG-logistic Gibbs reference sampler
(``validation/references/pg_gibbs.py``). JAX ships no PG sampler, so this module writes one.

The law. PG(1, c) has the Laplace transform E exp(-s omega) = cosh(c/2) / cosh(sqrt(c^2/4 +
s/2)) and the moments E omega = tanh(c/2) / (2c), Var omega = (sinh c - c) / (4 c^3
cosh^2(c/2)) (1/4 and 1/24 at c = 0); the tests check all three.

The algorithm (Devroye's alternating-series method as the 2013 paper sets it out). With
``z = |c| / 2``, 4 omega has the law J*(1, z), whose density is

    f(x) = cosh(z) exp(-z^2 x / 2) sum_n (-1)^n a_n(x),
    a_n(x) = pi (n + 1/2) (2 / (pi x))^(3/2) exp(-2 (n + 1/2)^2 / x)   for x <= t,
    a_n(x) = pi (n + 1/2) exp(-(n + 1/2)^2 pi^2 x / 2)                  for x >  t,

with the truncation point t = 0.64. The partial sums alternate around f and a_0 bounds it,
so: propose X from cosh(z) exp(-z^2 x / 2) a_0(x) - an exponential right of t and a
truncated inverse Gaussian IG(mean 1/z, shape 1) left of t, mixed by their masses p and q
- and accept with the series, which decides after a handful of terms. The expected number
of proposals is below 1.001 for every c (the paper's bound), so the loops are short.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

#: the truncation point of the alternating series (the value the paper shows is optimal)
TRUNC = 0.64
#: safety cap on the number of series terms per proposal (never reached in practice: the
#: terms fall like exp(-n^2); a capped proposal is rejected, so the cap biases nothing
#: unless it is hit, and the tests count it)
MAX_TERMS = 50


def _a_n(n, x):
    """The n-th term of the alternating series of J*(1, 0), piecewise at TRUNC."""
    h = n + 0.5
    left = jnp.pi * h * (2.0 / (jnp.pi * x)) ** 1.5 * jnp.exp(-2.0 * h * h / x)
    right = jnp.pi * h * jnp.exp(-h * h * jnp.pi ** 2 * x / 2.0)
    return jnp.where(x <= TRUNC, left, right)


def _truncated_inverse_gaussian(key, z):
    """A draw of IG(mean 1/z, shape 1) conditioned on X < TRUNC.

    mean > TRUNC (z small): X = 1 / N^2 truncated to N^2 > 1 / TRUNC is the z = 0 law
    (a Levy law, drawn by an exponential proposal for the excess of |N| over
    1/sqrt(TRUNC)), then tilted by exp(-z^2 X / 2) by rejection. mean <= TRUNC: draw the
    full IG (Michael, Schucany & Haas 1976) until it falls below TRUNC - at least about
    half of it lies there.

    Both branches are computed and one is selected (a lax.cond under vmap would do the
    same); each gets harmless parameters when it is not the one used, so that its loop
    ends at once instead of running the other regime's slow rejection.
    """
    mean = 1.0 / jnp.maximum(z, 1e-300)
    use_small = mean > TRUNC
    z_small = jnp.where(use_small, z, 0.0)
    mean_large = jnp.where(use_small, 0.5 * TRUNC, mean)

    def small_z(key):
        def cond(c):
            return ~c[2]

        def body(c):
            key, _, _ = c
            key, k1, k2, k3 = jax.random.split(key, 4)
            e1 = jax.random.exponential(k1)
            e2 = jax.random.exponential(k2)
            x = TRUNC / (1.0 + TRUNC * e1) ** 2
            # accept the truncated-Levy proposal (e1^2 <= 2 e2 / t) and the tilt together
            ok = (e1 * e1 <= 2.0 * e2 / TRUNC) & (jax.random.uniform(k3) <= jnp.exp(-0.5 * z_small * z_small * x))
            return key, x, ok

        _, x, _ = jax.lax.while_loop(cond, body, (key, jnp.asarray(TRUNC), jnp.asarray(False)))
        return x

    def large_z(key):
        def cond(c):
            return c[1] >= TRUNC

        def body(c):
            key, _ = c
            key, k1, k2 = jax.random.split(key, 3)
            yy = jax.random.normal(k1) ** 2
            m = mean_large
            x = m + 0.5 * m * m * yy - 0.5 * m * jnp.sqrt(4.0 * m * yy + (m * yy) ** 2)
            x = jnp.where(jax.random.uniform(k2) > m / (m + x), m * m / x, x)
            return key, x

        _, x = jax.lax.while_loop(cond, body, (key, jnp.asarray(TRUNC + 1.0)))
        return x

    k_small, k_large = jax.random.split(key)
    return jnp.where(use_small, small_z(k_small), large_z(k_large))


def _proposal_masses(z):
    """(log p, log q): masses of the right (exponential) and left (inverse Gaussian)
    pieces of the proposal cosh(z) exp(-z^2 x / 2) a_0(x), without the common cosh(z)."""
    K = jnp.pi ** 2 / 8.0 + z * z / 2.0
    log_p = jnp.log(jnp.pi / (2.0 * K)) - K * TRUNC
    # q = 2 exp(-z) P(IG(1/z, 1) < t), the IG distribution function written in logs
    rt = jnp.sqrt(TRUNC)
    log_q = jnp.log(2.0) + jnp.logaddexp(-z + log_ndtr((TRUNC * z - 1.0) / rt),
                                         z + log_ndtr(-(TRUNC * z + 1.0) / rt))
    return log_p, log_q


def _sample_one(key, c):
    """One draw of PG(1, c) and the number of proposals it took."""
    z = 0.5 * jnp.abs(c)
    K = jnp.pi ** 2 / 8.0 + z * z / 2.0
    log_p, log_q = _proposal_masses(z)
    prob_right = jnp.exp(log_p - jnp.logaddexp(log_p, log_q))

    def propose_and_test(key):
        k_piece, k_exp, k_ig, k_u = jax.random.split(key, 4)
        x_right = TRUNC + jax.random.exponential(k_exp) / K
        x = jnp.where(jax.random.uniform(k_piece) < prob_right, x_right, _truncated_inverse_gaussian(k_ig, z))
        s = _a_n(0, x)
        level = jax.random.uniform(k_u) * s

        # partial sums: odd n subtract (an upper bound falls below the level: accept),
        # even n add (a lower bound rises above it: reject)
        def cond(c):
            return ~c[2] & (c[0] <= MAX_TERMS)

        def body(c):
            n, s, _, _ = c
            odd = n % 2 == 1
            s = jnp.where(odd, s - _a_n(n, x), s + _a_n(n, x))
            accept = odd & (level <= s)
            reject = ~odd & (level > s)
            return n + 1, s, accept | reject, accept

        _, _, _, accepted = jax.lax.while_loop(cond, body, (1, s, jnp.asarray(False), jnp.asarray(False)))
        return x, accepted

    def cond(c):
        return ~c[2]

    def body(c):
        key, _, _, tries = c
        key, sub = jax.random.split(key)
        x, accepted = propose_and_test(sub)
        return key, x, accepted, tries + 1

    _, x, _, tries = jax.lax.while_loop(cond, body, (key, jnp.asarray(1.0), jnp.asarray(False), 0))
    return x / 4.0, tries


@jax.jit
def sample_pg1(key, c):
    """Draws omega_j ~ PG(1, c_j), independently, for an array c of any shape."""
    c = jnp.asarray(c, dtype=float)
    omega, _ = jax.vmap(_sample_one)(jax.random.split(key, c.size), c.reshape(-1))
    return omega.reshape(c.shape)


@jax.jit
def sample_pg1_with_tries(key, c):
    """As :func:`sample_pg1` for a 1-D c, plus the number of proposals per draw (tests)."""
    c = jnp.asarray(c, dtype=float)
    return jax.vmap(_sample_one)(jax.random.split(key, c.shape[0]), c)


def mean_pg1(c):
    """E omega for omega ~ PG(1, c): tanh(c/2) / (2c), 1/4 at c = 0."""
    c = jnp.asarray(c, dtype=float)
    small = jnp.abs(c) < 1e-4
    cs = jnp.where(small, 1.0, c)
    return jnp.where(small, 0.25 - c * c / 48.0, jnp.tanh(cs / 2.0) / (2.0 * cs))


def var_pg1(c):
    """Var omega for omega ~ PG(1, c): (sinh c - c) / (4 c^3 cosh^2(c/2)), 1/24 at c = 0."""
    c = jnp.asarray(c, dtype=float)
    small = jnp.abs(c) < 1e-2
    cs = jnp.where(small, 1.0, c)
    return jnp.where(small, 1.0 / 24.0 - c * c / 240.0,
                     (jnp.sinh(cs) - cs) / (4.0 * cs ** 3 * jnp.cosh(cs / 2.0) ** 2))


def laplace_transform_pg1(c, s):
    """E exp(-s omega) for omega ~ PG(1, c): cosh(c/2) / cosh(sqrt(c^2/4 + s/2))."""
    return jnp.cosh(c / 2.0) / jnp.cosh(jnp.sqrt(c * c / 4.0 + s / 2.0))
