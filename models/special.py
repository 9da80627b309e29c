"""Special functions the zoo needs that JAX does not ship, or needs in one stable form.

``inverse_mills_ratio(u)``: N(u) / Phi(u), the ratio every probit engine meets (the EM
E-step, the EP tilted moments, the MM latent mean, the Laplace gradient). See its
docstring for the form that stays finite.

``log_ndtr(x)``: log Phi(x) as JAX's, at a fraction of its cost (see its docstring).

``log_bessel_kv(nu, x)``: log K_nu(x), the modified Bessel function of the second kind,
for real order nu and x > 0. It is the normalizer of the generalized inverse Gaussian
(``models/distributions.GIG``) and of the variational q(tau) of the GIG-hierarchical
logistic model.

Why our own. JAX has no K_nu; TensorFlow Probability's JAX substrate has one, but it is a
large dependency pinned to other JAX releases and does not differentiate in nu. Here
log K_nu is a quadrature of the integral representation

    K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt,            x > 0,

which holds for every real nu (and K_{-nu} = K_nu). The integrand g(t) is even and
analytic in t, so the trapezoidal rule on [0, T] with a half weight at t = 0 is the
trapezoidal rule on the whole line and converges geometrically in the number of nodes
once g(T) is negligible - no special treatment of small x, large x or large nu.

The window [L, T] is placed where g lives. Its log, h(t) = -x cosh t + log cosh(nu t),
peaks near ``t* = asinh(|nu| / x)`` with curvature about -s, s = sqrt(x^2 + nu^2). Bounds:

* right: for t > t*, h falls by at least s (cosh(d) - 1) at distance d, so
  d_R = acosh(1 + 60 / s) drops it by 60 nats (e^-60 relative; double precision);
* left: for nu t large, h(t* - d) falls by about s (d - 1 + e^-d) >= 60 at
  d_L = sqrt(120 / s) + 60 / s; the window starts at L = max(0, t* - d_L).

The nodes must resolve both the peak (width s^-1/2) and the unit scale on which cosh
changes (the shoulder at t ~ log(2 / x) when x -> 0 and nu ~ 0), so spacing <=
min(s^-1/2, 1) / 4 suffices; the widest case (s -> 0) is a window of ~20 at spacing 1/4.
``N_NODES`` = 256 meets that everywhere; the test checks against scipy for nu in
[0, 200] and x in [1e-8, 1e5] at 1e-12 relative accuracy on log K.

Derivatives. The window depends on (nu, x) only through bounds where the integrand is
e^-60 of its peak, so the bounds are held fixed under differentiation
(``stop_gradient``); d/dx and d/dnu of the quadrature then approximate the integrals of
the differentiated integrand to the same accuracy. d/dnu log K_nu (needed for E[log tau]
under a GIG) has no closed form in general; here it comes from autodiff.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax.scipy.special import erfcx as _jax_erfcx
from jax.scipy.special import logsumexp

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def inverse_mills_ratio(u):
    """N(u) / Phi(u) elementwise, finite for every finite u (-> -u as u -> -inf, -> 0 as
    u -> +inf).

    With N(u) = exp(-u^2/2) / sqrt(2 pi), Phi(u) = erfc(-u / sqrt 2) / 2 and the scaled
    complementary error function erfcx(x) = exp(x^2) erfc(x), the ratio is
    sqrt(2/pi) / erfcx(-u / sqrt 2): no 0/0 for u << 0 (a confidently misclassified
    point), where both N and Phi underflow.

    NumPy input (host code such as the Newton loop of mm_laplace) is evaluated with
    SciPy's erfcx, JAX input (traced engine loops) with JAX's (its asymptotic series for
    x >= 20, see ``_erfcx_jax``): the two agree to ~1e-15 relative, and each engine keeps
    the exact numbers it had when it carried a copy.
    """
    erfcx = scipy.special.erfcx if isinstance(u, (np.ndarray, np.floating, float)) else _erfcx_jax
    return _SQRT_2_OVER_PI / erfcx(-u / math.sqrt(2.0))


def _erfcx_jax(x):
    """JAX's erfcx, except for x >= 20, where the asymptotic series is used.

    jax.scipy.special.erfcx (JAX 0.10) returns exactly 0 for x in about [26.54, 26.64] in
    float64 (it multiplies exp(x^2) by an erfc(x) that has already underflowed; jax-ml/jax
    issue 38607), which made the inverse Mills ratio infinite for u in about
    [-37.67, -37.54]. For x >= 20 the series erfcx(x) = (1 + sum_n (-1)^n (2n-1)!! /
    (2x^2)^n) / (x sqrt(pi)), cut after 10 terms, is exact to ~1e-15 relative.
    """
    big = x >= 20.0
    xs = jnp.where(big, x, 20.0)
    z = 1.0 / (2.0 * xs * xs)
    term = jnp.ones_like(xs)
    total = jnp.ones_like(xs)
    for n in range(1, 11):
        term = term * (-(2 * n - 1) * z)
        total = total + term
    return jnp.where(big, total / (xs * math.sqrt(math.pi)), _jax_erfcx(jnp.where(big, 0.0, x)))


def log_ndtr(x):
    """log Phi(x) in float64, as ``jax.scipy.special.log_ndtr`` computes it (they agree to
    within 5e-16, relative where ``|log Phi| > 1`` and absolute below; the tests check both
    against scipy) at a fraction of its cost: one erfc, one log and no branch evaluated in
    vain. jax's version evaluates Phi twice and its asymptotic series for every element
    and selects among them (about 290 ns an element here, against 12 ns); GGSM's slice-Gibbs
    sweep (validation/references/slice_gibbs.py) spends nearly all its time in it, on every slice
    evaluation of every weight.

    x > -20: ``Phi(x) = erfc(|x| / sqrt 2) / 2`` for x < 0 and 1 - erfc(x / sqrt 2) / 2 for
    x >= 0 (for x >= 0, log(1 - e/2) instead of log1p(-e/2) loses at most 1.2e-16 in
    absolute terms, where log Phi lies in (-0.7, 0]). x <= -20, where erfc underflows soon
    after: jax's own asymptotic series of order 3,
    log Phi(x) = -x^2/2 - log(-x sqrt(2 pi)) + log(1 - 1/x^2 + 3/x^4 - 15/x^6).
    """
    x = jnp.asarray(x)
    e = jax.lax.erfc(jnp.abs(x) * 0.7071067811865476)
    near = jnp.where(x >= 0.0, 1.0 - 0.5 * e, 0.5 * e)
    xs = jnp.minimum(x, -20.0)
    r = 1.0 / (xs * xs)
    far = (1.0 + r * (-1.0 + r * (3.0 - 15.0 * r))) / (-xs * 2.5066282746310002)  # sqrt(2 pi)
    is_near = x > -20.0
    return jnp.log(jnp.where(is_near, near, far)) - jnp.where(is_near, 0.0, 0.5 * xs * xs)


#: trapezoid nodes of the log K_nu quadrature (see the module docstring for why 256)
N_NODES = 256
_DROP = 60.0  # nats below the peak where the window ends


def _log_cosh(u):
    """log cosh(u) without overflow: |u| + log1p(e^-2|u|) - log 2."""
    a = jnp.abs(u)
    return a + jnp.log1p(jnp.exp(-2.0 * a)) - jnp.log(2.0)


def _log_bessel_kv_scalar(nu, x):
    nu = jnp.abs(nu)
    s = jnp.sqrt(x * x + nu * nu)
    t_peak = jnp.arcsinh(nu / x)
    d_right = jnp.arccosh(1.0 + _DROP / s)
    d_left = jnp.sqrt(2.0 * _DROP / s) + _DROP / s
    lo = jax.lax.stop_gradient(jnp.maximum(0.0, t_peak - d_left))
    hi = jax.lax.stop_gradient(t_peak + d_right)
    u = jnp.linspace(0.0, 1.0, N_NODES)
    t = lo + (hi - lo) * u
    step = (hi - lo) / (N_NODES - 1)
    log_g = -x * jnp.cosh(t) + _log_cosh(nu * t)
    # trapezoid weights: half at both ends. At t = 0 the half weight is the even
    # extension's; at t = L > 0 and at T the integrand is negligible anyway.
    log_w = jnp.full(N_NODES, jnp.log(step)).at[0].add(-jnp.log(2.0)).at[-1].add(-jnp.log(2.0))
    return logsumexp(log_g + log_w)


# compiled once per input size: run eagerly, the vmapped quadrature dispatches dozens of
# small operations per call
_log_bessel_kv_flat = jax.jit(jax.vmap(_log_bessel_kv_scalar))


def log_bessel_kv(nu, x):
    """log K_nu(x) for real nu and x > 0, elementwise with broadcasting.

    Returns +inf at x = 0 (K_nu(0) is infinite) and NaN for x < 0. Differentiable in both
    arguments (see the module docstring).
    """
    nu, x = jnp.broadcast_arrays(jnp.asarray(nu, dtype=float), jnp.asarray(x, dtype=float))
    safe_x = jnp.where(x > 0, x, 1.0)  # keeps the masked branch's gradient finite
    flat = _log_bessel_kv_flat(nu.reshape(-1), safe_x.reshape(-1)).reshape(x.shape)
    return jnp.where(x > 0, flat, jnp.where(x == 0, jnp.inf, jnp.nan))


def log_bessel_k_half(x):
    """log K_{1/2}(x) = log sqrt(pi / (2 x)) - x, exact (the order of the VB q(tau))."""
    x = jnp.asarray(x, dtype=float)
    return 0.5 * jnp.log(jnp.pi / (2.0 * x)) - x


# -- E[sigmoid(T)] for a Gaussian T ------------------------------------------------------
# Two fixed-node rules, each exact to float precision in its own range (the test checks
# both against scipy's adaptive quadrature):
# * narrow T (sd <= 5): the trapezoid rule in z = (t - mean) / sd on [-12, 12], step 0.05.
#   The integrand is analytic in a strip of half-width pi / sd (sigmoid's poles), so the
#   error is about exp(-2 pi (pi / sd) / 0.05) <= e^-79; the mass beyond 12 sd is 4e-33.
# * wide T (sd > 5): sigmoid(t) = 1{t > 0} - sign(t) sigmoid(-|t|), so
#   E sigmoid(T) = Phi(mean / sd) + int_0^inf sigmoid(-t) [N(-t) - N(t)] dt with N the
#   density of T; the integrand is smooth on [0, 40] (beyond it sigmoid(-t) < 5e-18) and
#   Gauss-Legendre with 200 nodes integrates it to float precision.
_Z_STEP = 0.05
_Z_NODES = np.arange(-12.0, 12.0 + _Z_STEP / 2, _Z_STEP)
_Z_WEIGHTS = np.exp(-0.5 * _Z_NODES ** 2) * _Z_STEP / math.sqrt(2 * math.pi)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(200)
_T_NODES, _T_WEIGHTS = 20.0 * (_GL_X + 1.0), 20.0 * _GL_W
_WIDE = 5.0


def expected_sigmoid(mean, sd):
    """E[sigmoid(T)] for T ~ N(mean, sd^2), elementwise (sd >= 0; sd = 0 gives
    sigmoid(mean)). The predictive of every logistic-type model under a Gaussian
    posterior, exact where MacKay's sigmoid(mean / sqrt(1 + pi sd^2 / 8)) is not."""
    mean, sd = jnp.broadcast_arrays(jnp.asarray(mean, float), jnp.asarray(sd, float))
    narrow_sd = jnp.minimum(sd, _WIDE)[..., None]
    narrow = jnp.sum(_Z_WEIGHTS * jax.nn.sigmoid(mean[..., None] + narrow_sd * _Z_NODES), axis=-1)
    wide_sd = jnp.maximum(sd, _WIDE)[..., None]
    m = mean[..., None]
    t = _T_NODES

    def density(x):
        return jnp.exp(-0.5 * ((x - m) / wide_sd) ** 2) / (wide_sd * math.sqrt(2 * math.pi))

    wide = (jax.scipy.stats.norm.cdf(mean / jnp.maximum(sd, _WIDE))
            + jnp.sum(_T_WEIGHTS * jax.nn.sigmoid(-t) * (density(-t) - density(t)), axis=-1))
    return jnp.where(sd <= _WIDE, narrow, wide)
