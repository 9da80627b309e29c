"""Distributions the zoo needs that NumPyro does not ship."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import gammaln, log_ndtr, ndtr
from numpyro.distributions import constraints
from numpyro.distributions.util import promote_shapes, validate_sample

from .special import log_bessel_kv


class ProbitBernoulli(dist.Distribution):
    """Bernoulli with success probability Phi(f), the standard normal CDF of ``f``.

    ``log_prob`` uses ``log_ndtr`` on both sides, so a confident wrong prediction
    (f = -40 for a label 1) costs -804 nats instead of -inf, and NUTS never sees a NaN
    gradient. ``Bernoulli(probs=ndtr(f))`` loses this below f of about -8.
    """

    arg_constraints = {"f": constraints.real}
    support = constraints.boolean
    has_enumerate_support = False

    def __init__(self, f, *, validate_args=None):
        (self.f,) = promote_shapes(f)
        super().__init__(batch_shape=jnp.shape(f), validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        return (jax.random.uniform(key, shape) < ndtr(self.f)).astype(jnp.result_type(float))

    @validate_sample
    def log_prob(self, value):
        """log Phi(f) for a label 1 and log Phi(-f) for a label 0, elementwise, each by
        ``log_ndtr`` (finite for any ``f``)."""
        return value * log_ndtr(self.f) + (1.0 - value) * log_ndtr(-self.f)

    @property
    def mean(self):
        return ndtr(self.f)

    @property
    def variance(self):
        p = ndtr(self.f)
        return p * (1.0 - p)


class GeneralizedNormal(dist.Distribution):
    """Generalized normal (exponential power) distribution with shape q and scale lambda::

        p(w) = q / (2 lambda^(1/q) Gamma(1/q)) exp(-|w - loc|^q / lambda),   q > 0, lambda > 0.

    q = 2 is N(loc, lambda / 2), q = 1 the Laplace distribution with scale lambda; q < 1 is
    spikier at loc with heavier tails. This is the parametrization of the GGIG paper (the
    prior of ``models/ggsm_probit.py``); scipy's ``gennorm(beta=q, loc, scale=lambda^(1/q))``
    is the same law.

    Sampling is exact: ``|w - loc|^q / lambda ~ Gamma(1/q, 1)``, with an independent random sign.
    """

    arg_constraints = {
        "loc": constraints.real,
        "lam": constraints.positive,
        "q": constraints.positive,
    }
    support = constraints.real
    reparametrized_params = ["loc", "lam"]

    def __init__(self, lam=1.0, q=2.0, loc=0.0, *, validate_args=None):
        self.loc, self.lam, self.q = promote_shapes(loc, lam, q)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(loc), jnp.shape(lam), jnp.shape(q))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        key_gamma, key_sign = jax.random.split(key)
        g = jax.random.gamma(key_gamma, jnp.broadcast_to(1.0 / self.q, shape), shape)
        magnitude = (self.lam * g) ** (1.0 / self.q)
        sign = jnp.where(jax.random.bernoulli(key_sign, 0.5, shape), 1.0, -1.0)
        return self.loc + sign * magnitude

    @validate_sample
    def log_prob(self, value):
        """The log density at ``value``, elementwise (the class docstring's formula)."""
        q = self.q
        log_norm = jnp.log(q) - jnp.log(2.0) - jnp.log(self.lam) / q - gammaln(1.0 / q)
        return log_norm - jnp.abs(value - self.loc) ** q / self.lam

    @property
    def mean(self):
        return jnp.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        q = self.q
        return jnp.broadcast_to(
            self.lam ** (2.0 / q) * jnp.exp(gammaln(3.0 / q) - gammaln(1.0 / q)), self.batch_shape
        )


class GIG(dist.Distribution):
    """Generalized inverse Gaussian GIG(p, a, b) on x > 0:

        p(x) = (a/b)^(p/2) / (2 K_p(sqrt(a b))) x^(p-1) exp(-(a x + b / x) / 2),

    with K_p the modified Bessel function of the second kind (``models/special.py``).
    This is the parametrization of the GIG-hierarchical logistic paper (Horii; DERIVATIONS.md §3.3).
    It includes its two boundary cases, where the Bessel normalizer degenerates:

    * b = 0, a > 0, p > 0: Gamma(p, rate a / 2) (p = 1 is the exponential mixing density
      that makes beta | a Laplace);
    * a = 0, b > 0, p < 0: InvGamma(-p, scale b / 2).

    scipy's ``geninvgauss(p, sqrt(a b), scale=sqrt(b / a))`` is the same law for a, b > 0.

    Sampling is exact: with x = sqrt(b/a) e^y the log density of y is
    psi(y) = p y - w cosh(y), w = sqrt(a b), strictly concave with mode
    m = asinh(p / w). Rejection from an envelope that is flat (at psi(m)) on [m - s, m + t]
    and follows the tangent lines of psi beyond, with t, s chosen where psi has dropped by
    1 nat, accepts with probability >= (1 - 1/e) / (1 + 1/e) ~ 0.46 for every (p, a, b):
    concavity puts psi above its chords on [m - s, m + t] and makes the tangent slopes at
    least 1/t and 1/s in size (Devroye 2014 uses the same idea for the GIG). The boundary
    cases are drawn from their Gamma / inverse-gamma forms.
    """

    arg_constraints = {
        "p": constraints.real,
        "a": constraints.nonnegative,
        "b": constraints.nonnegative,
    }
    support = constraints.positive

    def __init__(self, p, a, b, *, validate_args=None):
        self.p, self.a, self.b = promote_shapes(p, a, b)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(p), jnp.shape(a), jnp.shape(b))
        _check_gig_parameters(p, a, b)
        # a boundary case known when the distribution is built (a or b a concrete array of
        # zeros, as in models/gig_logistic.py) skips the Bessel branch entirely: under NUTS
        # the branches of jnp.where are all evaluated, and the quadrature of log K_p is by
        # far the most expensive of them
        self._static_case = _static_case(a, b)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    # -- which of the three forms each element takes ---------------------------------
    def _cases(self):
        # jnp.logical_not, not ~: the parameters may be Python floats, whose comparisons are
        # Python bools, and ~ on a bool is integer inversion (~True == -2), deprecated in 3.12
        gamma_case = jnp.asarray(self.b == 0)
        invgamma_case = jnp.asarray(self.a == 0) & jnp.logical_not(gamma_case)
        bessel_case = jnp.logical_not(gamma_case | invgamma_case)
        # placeholders in the branches an element does not take, so that no branch
        # produces NaN or infinite gradients that jnp.where would propagate
        a_s = jnp.where(self.a > 0, self.a, 1.0)
        b_s = jnp.where(self.b > 0, self.b, 1.0)
        p_gamma = jnp.where(gamma_case, self.p, 1.0)
        p_invgamma = jnp.where(invgamma_case, self.p, -1.0)
        return gamma_case, invgamma_case, bessel_case, a_s, b_s, p_gamma, p_invgamma

    @validate_sample
    def log_prob(self, value):
        """The log density at ``value``, elementwise, in whichever of the three forms (Bessel,
        Gamma, inverse gamma) each element's parameters take; -inf where ``value <= 0``."""
        x = jnp.where(value > 0, value, 1.0)
        log_x = jnp.log(x)
        if self._static_case == "gamma":
            a, p = self.a, self.p
            out = p * jnp.log(0.5 * a) - gammaln(p) + (p - 1.0) * log_x - 0.5 * a * x
            return jnp.where(value > 0, out, -jnp.inf)
        if self._static_case == "invgamma":
            b, p = self.b, self.p
            out = -p * jnp.log(0.5 * b) - gammaln(-p) + (p - 1.0) * log_x - 0.5 * b / x
            return jnp.where(value > 0, out, -jnp.inf)
        gamma_case, invgamma_case, _, a_s, b_s, p_g, p_ig = self._cases()
        p = self.p
        omega = jnp.sqrt(a_s * b_s)
        bessel = (0.5 * p * (jnp.log(a_s) - jnp.log(b_s)) - jnp.log(2.0) - log_bessel_kv(p, omega)
                  + (p - 1.0) * log_x - 0.5 * (a_s * x + b_s / x))
        gamma = p_g * jnp.log(0.5 * a_s) - gammaln(p_g) + (p_g - 1.0) * log_x - 0.5 * a_s * x
        invgamma = (-p_ig * jnp.log(0.5 * b_s) - gammaln(-p_ig) + (p_ig - 1.0) * log_x
                    - 0.5 * b_s / x)
        out = jnp.where(gamma_case, gamma, jnp.where(invgamma_case, invgamma, bessel))
        return jnp.where(value > 0, out, -jnp.inf)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        gamma_case, invgamma_case, _, a_s, b_s, p_g, p_ig = self._cases()
        key_bessel, key_gamma = jax.random.split(key)
        p = jnp.broadcast_to(self.p, shape)
        a_b, b_b = jnp.broadcast_to(a_s, shape), jnp.broadcast_to(b_s, shape)
        omega = jnp.sqrt(a_b * b_b)
        keys = jax.random.split(key_bessel, math.prod(shape))
        y = _sample_log_gig_cores(keys, p.reshape(-1), omega.reshape(-1)).reshape(shape)
        bessel = jnp.exp(0.5 * (jnp.log(b_b) - jnp.log(a_b)) + y)
        g = jax.random.gamma(key_gamma, jnp.broadcast_to(jnp.where(gamma_case, p_g, -p_ig), shape), shape)
        gamma = g / (0.5 * a_b)
        invgamma = 0.5 * b_b / g
        return jnp.where(gamma_case, gamma, jnp.where(invgamma_case, invgamma, bessel))

    def moment(self, r):
        """E[x^r] = (b/a)^(r/2) K_{p+r}(w) / K_p(w) (finite for every r when a, b > 0);
        in the Gamma case Gamma(p + r) / Gamma(p) (2/a)^r (p + r > 0), in the inverse-gamma
        case Gamma(-p - r) / Gamma(-p) (b/2)^r (-p - r > 0); +inf where it does not exist."""

        gamma_case, invgamma_case, _, a_s, b_s, p_g, p_ig = self._cases()
        omega = jnp.sqrt(a_s * b_s)
        bessel = jnp.exp(0.5 * r * (jnp.log(b_s) - jnp.log(a_s))
                         + log_bessel_kv(self.p + r, omega) - log_bessel_kv(self.p, omega))
        gamma = jnp.where(p_g + r > 0,
                          jnp.exp(gammaln(jnp.maximum(p_g + r, 1e-300)) - gammaln(p_g) - r * jnp.log(0.5 * a_s)),
                          jnp.inf)
        invgamma = jnp.where(-p_ig - r > 0,
                             jnp.exp(gammaln(jnp.maximum(-p_ig - r, 1e-300)) - gammaln(-p_ig) + r * jnp.log(0.5 * b_s)),
                             jnp.inf)
        return jnp.where(gamma_case, gamma, jnp.where(invgamma_case, invgamma, bessel))

    @property
    def mean(self):
        return jnp.broadcast_to(self.moment(1.0), self.batch_shape)

    @property
    def variance(self):
        m1, m2 = self.moment(1.0), self.moment(2.0)
        return jnp.broadcast_to(jnp.where(jnp.isfinite(m2), m2 - m1 * m1, jnp.inf), self.batch_shape)


def _static_case(a, b) -> str | None:
    """"gamma" / "invgamma" when b / a is a concrete all-zero array, else None."""
    import numpy as np

    def concrete_zero(v):
        if isinstance(v, jax.core.Tracer):
            return False
        try:
            return bool(np.all(np.asarray(v) == 0))
        except (TypeError, jax.errors.ConcretizationTypeError):
            return False

    if concrete_zero(b):
        return "gamma"
    if concrete_zero(a):
        return "invgamma"
    return None


def _check_gig_parameters(p, a, b):
    """Clear errors for concrete parameters outside the GIG family (skipped under tracing)."""
    import numpy as np

    try:
        p_, a_, b_ = np.broadcast_arrays(np.asarray(p, float), np.asarray(a, float), np.asarray(b, float))
    except (TypeError, jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return
    if not (np.all(np.isfinite(p_)) and np.all(np.isfinite(a_)) and np.all(np.isfinite(b_))):
        raise ValueError("GIG parameters p, a, b must be finite")
    if np.any(a_ < 0) or np.any(b_ < 0):
        raise ValueError(f"GIG needs a >= 0 and b >= 0, got a min {a_.min()}, b min {b_.min()}")
    if np.any((a_ == 0) & (b_ == 0)):
        raise ValueError("GIG needs a > 0 or b > 0 (a = b = 0 is not a distribution)")
    if np.any((b_ == 0) & (p_ <= 0)):
        raise ValueError("GIG with b = 0 is Gamma(p, rate a/2) and needs p > 0")
    if np.any((a_ == 0) & (p_ >= 0)):
        raise ValueError("GIG with a = 0 is InvGamma(-p, scale b/2) and needs p < 0")


def _log_gig_core_psi(y, p, omega):
    """log density of y = log(x / sqrt(b/a)) up to a constant: p y - omega cosh y."""
    return p * y - omega * jnp.cosh(y)


def _drop_point(p, omega, mode, direction):
    """The distance d > 0 at which psi(mode + direction d) = psi(mode) - 1, by bisection in
    log d (psi is concave, so the drop grows monotonically with d). Any d > 0 gives a valid
    envelope; this one gives the acceptance bound of the class docstring."""
    top = _log_gig_core_psi(mode, p, omega)

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        dropped = top - _log_gig_core_psi(mode + direction * jnp.exp(mid), p, omega) >= 1.0
        return jnp.where(dropped, lo, mid), jnp.where(dropped, mid, hi)

    lo, hi = jax.lax.fori_loop(0, 64, body, (jnp.asarray(-40.0), jnp.asarray(8.0)))
    return jnp.exp(hi)


def _sample_log_gig_core(key, p, omega):
    """One exact draw of y with density proportional to exp(p y - omega cosh y), omega > 0."""
    mode = jnp.arcsinh(p / omega)
    top = _log_gig_core_psi(mode, p, omega)
    t = _drop_point(p, omega, mode, 1.0)
    s = _drop_point(p, omega, mode, -1.0)
    # tangent slopes beyond the flat part (negative on the right, positive on the left)
    slope_r = p - omega * jnp.sinh(mode + t)
    slope_l = p - omega * jnp.sinh(mode - s)
    rel_r = _log_gig_core_psi(mode + t, p, omega) - top  # about -1
    rel_l = _log_gig_core_psi(mode - s, p, omega) - top
    area_mid = t + s
    area_r = jnp.exp(rel_r) / -slope_r
    area_l = jnp.exp(rel_l) / slope_l
    total = area_mid + area_r + area_l

    def propose(k):
        k_u, k_e, k_v = jax.random.split(k, 3)
        u = jax.random.uniform(k_u) * total
        e = jax.random.exponential(k_e)
        y_mid = mode - s + u  # uniform on [mode - s, mode + t] when u < area_mid
        y_r = mode + t + e / -slope_r
        y_l = mode - s - e / slope_l
        in_mid = u < area_mid
        in_r = (~in_mid) & (u < area_mid + area_r)
        y = jnp.where(in_mid, y_mid, jnp.where(in_r, y_r, y_l))
        log_env = jnp.where(in_mid, 0.0, jnp.where(in_r, rel_r + slope_r * (y - mode - t),
                                                   rel_l + slope_l * (y - mode + s)))
        log_accept = _log_gig_core_psi(y, p, omega) - top - log_env
        return y, jnp.log(jax.random.uniform(k_v)) <= log_accept

    def cond(state):
        return ~state[2]

    def body(state):
        k, _, _ = state
        k, k_prop = jax.random.split(k)
        y, ok = propose(k_prop)
        return k, y, ok

    _, y, _ = jax.lax.while_loop(cond, body, (key, mode, jnp.asarray(False)))
    return y


# compiled once per number of draws, whatever the parameters (eager vmap of a while_loop
# would recompile its pieces on every call)
_sample_log_gig_cores = jax.jit(jax.vmap(_sample_log_gig_core))


class LogBetaPrime(dist.Distribution):
    """u = log(X) for X ~ BetaPrime(alpha, beta) (X = G1 / G2 with independent
    G1 ~ Gamma(alpha, 1), G2 ~ Gamma(beta, 1)): the type-IV logistic law on the real line,

        p(u) = exp(alpha u) (1 + e^u)^-(alpha + beta) / B(alpha, beta).

    It is the log of a Gamma-mixed Gamma scale: tau | a ~ Gamma(rho, rate a/2) with
    a ~ Gamma(k, rate theta) gives tau / (2 theta) ~ BetaPrime(rho, k). That lets
    ``models/gig_logistic.py`` integrate the hyper-parameter out and hand NUTS log tau
    directly (its "marginal" parameterization).
    """

    arg_constraints = {"alpha": constraints.positive, "beta": constraints.positive}
    support = constraints.real

    def __init__(self, alpha, beta, *, validate_args=None):
        self.alpha, self.beta = promote_shapes(alpha, beta)
        batch_shape = jax.lax.broadcast_shapes(jnp.shape(alpha), jnp.shape(beta))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def sample(self, key, sample_shape=()):
        shape = sample_shape + self.batch_shape
        k1, k2 = jax.random.split(key)
        # log of a Gamma(alpha) draw, stable for small alpha: log G = log G' + log(U) / alpha
        # with G' ~ Gamma(alpha + 1) (Marsaglia & Tsang's boost), so that tiny shapes
        # (the paper's k = 1e-6) do not underflow to log 0
        return _log_gamma_draw(k1, jnp.broadcast_to(self.alpha, shape)) - \
            _log_gamma_draw(k2, jnp.broadcast_to(self.beta, shape))

    @validate_sample
    def log_prob(self, value):
        """The log density of ``u = value`` (the class docstring's formula), elementwise,
        with ``log(1 + e^u)`` computed as a softplus."""
        from jax.scipy.special import betaln

        return self.alpha * value - (self.alpha + self.beta) * jax.nn.softplus(value) - betaln(self.alpha, self.beta)


def _log_gamma_draw(key, shape_param):
    k1, k2 = jax.random.split(key)
    g = jax.random.gamma(k1, shape_param + 1.0)
    u = jax.random.uniform(k2, shape_param.shape, minval=jnp.finfo(jnp.float64).tiny)
    return jnp.log(g) + jnp.log(u) / shape_param
