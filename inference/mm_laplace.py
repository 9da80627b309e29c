"""``mm-laplace``: a Laplace approximation at the GGIG MM mode over the weights MM kept.

The MM engine (:mod:`zoo.inference.mm`) returns one point w* with some weights pruned to
exactly 0. This engine turns that point into a distribution that can be set against the
NUTS reference:

1. run MM (rule ``ggig`` by default) to its mode w*; A = {i : w*_i != 0};
2. take the log posterior of w_A with lambda integrated out (the target below), polish
   w*_A to its exact stationary point by Newton's method (MM stops on a step-size
   tolerance of 1e-3, not at zero gradient; the shift is reported), and take the
   Hessian H there in closed form. For q <= 1 a weight MM was still shrinking towards
   the cusp at 0 may reach MM's pruning threshold during the polish; it is pruned by
   MM's own rule (the limit MM was heading for) and listed in ``extra["polish_pruned"]``
   and ``info.reason``. The polish can move far where the target is flat (at q = 0.1 on
   the Section 6.1 design ~0.9 along the overall scale of w): ``extra["polish_shift"]``;
3. if -H is not positive definite, raise :class:`~zoo.inference.posterior.ApproximationFailed` - no Gaussian is
   centred there, and a regularized one would approximate nothing;
4. otherwise draw w_A ~ N(w*_A, (-H)^-1), hold every pruned weight at exactly 0 in every
   draw, and draw lambda from its exact conditional given each w draw.

Target, and which exponent. With lambda integrated out, the GGSM prior of m weights is
proportional to ``(b + sum |w_i|^q)^-(a + m/q)``. Two readings give two targets over w_A:

* ``exponent="mm"`` (default): ``m = |A|``, the objective MM maximizes (eq. 9 with n the
  number of active weights), so w* is its stationary point and the Gaussian sits at the
  MM mode, as the issue asks. It is also a statement about the spec's own model: the
  GGSM family is closed under integrating weights out (integrate ``w_-A`` out of
  prod_i GN(w_i | lambda) and the ``|A|`` remaining factors are left), so this is the exact
  marginal prior of w_A times the likelihood with the pruned weights' columns dropped.
  Its lambda conditional is ``lambda | w_A ~ InvGamma(a + |A|/q, b + sum_A |w_i|^q)``.
* ``exponent="model"``: m = n (all weights), the model's density with the pruned weights
  *conditioned* to be exactly 0. w* is not its stationary point (the larger exponent
  shrinks harder), so the Newton polish moves it, sometimes into the cusp of ``|w|^q`` at 0
  (then the approximation fails, saying so). Its lambda conditional is
  ``lambda | w ~ InvGamma(a + n/q, b + sum |w_i|^q)``.

Either way lambda is drawn from the conditional *of the same target* as w, so each draw
(lambda, w) comes from one stated joint distribution. Mixing the two (w from the ``|A|``
exponent, lambda with n/q) would not be a distribution of anything; conditioning on
exact zeros also claims more shrinkage than the reference, whose pruned weights are small
but not 0 and each add ``|w_i|^q`` (not 0) to the scale of lambda's conditional.

Why draws and not a Gaussian over (lambda, w). lambda is positive and its conditional is
known exactly (conjugate InvGamma); a Gaussian over lambda would put mass below 0 and
miss its skew, while the exact conditional costs nothing. The result is a
:class:`~zoo.inference.posterior.DrawsPosterior` (1 chain, ``n_draws`` draws, seeded) over the spec's sites.

Curvature. ``|w|^q`` has no second derivative at 0, but every active weight is at least the
pruning threshold (1e-4) away from it, where the closed form below is exact. For q < 1
the prior's curvature ``q (q - 1) |w|^(q-2)`` is positive (the prior is convex in w near 0)
and unbounded as w -> 0: a weight that MM was still shrinking towards 0 when it stopped
makes -H indefinite. That is the case this engine reports instead of forcing.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import log_ndtr

from ..models.ggsm_probit import GGSMProbit
from ..models.checks import check_design
from ..models.special import inverse_mills_ratio
from . import mm
from .posterior import ApproximationFailed, DrawsPosterior, FitInfo
from .contracts import EndToEndFit

__all__ = ["EXPONENTS", "fit", "fit_end_to_end", "log_target", "gradient_and_neg_hessian"]

EXPONENTS = ("mm", "model")
#: Newton stops when the Newton decrement g^T (-H)^-1 g (the predicted gain, in nats)
#: falls below this: far below any Monte Carlo error of the draws
NEWTON_DECREMENT_TOL = 1e-14
#: ... and accepts the point as stationary if the decrement left when it cannot step any
#: further (round-off of a sum of N log-probabilities) or hits the cap is below this
NEWTON_DECREMENT_ACCEPT = 1e-8
NEWTON_MAX_ITER = 200  # halving towards the cusp takes ~14 steps from |w| = 1 to 1e-4
#: a step may cover at most this fraction of the way to 0 for any weight, so no weight
#: crosses the cusp of |w|^q (where the target is not differentiable) inside a step
FRACTION_TO_CUSP = 0.5


def _prior_shape(spec: GGSMProbit, n_active: int, n_total: int, exponent: str) -> float:
    """a + m/q: the exponent of (b + sum |w|^q) and the InvGamma shape of lambda's conditional."""
    m = n_active if exponent == "mm" else n_total
    return spec.a + m / spec.q


def log_target(w_A, Phi_A, s, spec: GGSMProbit, shape: float) -> float:
    """``sum_n log Phi(s_n (Phi_A w_A)_n) - shape * log(b + sum |w_A|^q)`` (up to a constant)."""
    w_A = np.asarray(w_A, float)
    return float(np.sum(log_ndtr(s * (Phi_A @ w_A))) - shape * math.log(spec.b + np.sum(np.abs(w_A) ** spec.q)))


def gradient_and_neg_hessian(w_A, Phi_A, s, spec: GGSMProbit, shape: float):
    """(gradient, -Hessian) of :func:`log_target` at w_A (all entries non-zero), closed form.

    Likelihood: with f = Phi_A w and r = phi(f) / Phi(s f) (the inverse Mills ratio, in
    its erfcx form so that it stays finite when s f is very negative),
    d/df log Phi(s f) = s r and d2/df2 = -r (s f + r), which lies in (-1, 0).
    Prior -c log(b + S), ``S = sum |w_i|^q``, ``t_i = dS/dw_i = q |w_i|^(q-1) sign(w_i)``:
    gradient -c t / (b + S); Hessian ``-c [diag(q (q-1) |w_i|^(q-2)) / (b + S) - t t^T / (b + S)^2]``.
    """
    w_A = np.asarray(w_A, float)
    q, c = spec.q, shape
    f = Phi_A @ w_A
    r = inverse_mills_ratio(s * f)
    aw = np.abs(w_A)
    denom = spec.b + np.sum(aw**q)
    t = q * aw ** (q - 1.0) * np.sign(w_A)
    grad = Phi_A.T @ (s * r) - c * t / denom
    curv = r * (s * f + r)  # -d2/df2 log Phi(s f), > 0
    neg_hess = (Phi_A.T * curv) @ Phi_A + c * (np.diag(q * (q - 1.0) * aw ** (q - 2.0)) / denom
                                               - np.outer(t, t) / denom**2)
    return grad, 0.5 * (neg_hess + neg_hess.T)


def _check_positive_definite(neg_hess, w_A, active, spec: GGSMProbit, shape: float, where: str):
    """Cholesky factor of -H, or ApproximationFailed naming the smallest eigenvalue."""
    eig, vec = np.linalg.eigh(neg_hess) if np.all(np.isfinite(neg_hess)) else (None, None)
    if eig is not None and eig[0] > 0:
        try:
            return np.linalg.cholesky(neg_hess), float(eig[0])
        except np.linalg.LinAlgError:
            pass  # positive by eigh, yet not factorizable: report it as not positive definite
    if eig is None:
        detail = "the Hessian is not finite"
    else:
        # the weight that dominates the failing direction: usually one near the cusp at 0
        j = int(np.argmax(np.abs(vec[:, 0])))
        detail = (f"smallest eigenvalue of -H = {eig[0]:.4g}; the direction of it is mostly "
                  f"w[{int(active[j])}] = {w_A[j]:.4g}")
        v = vec[:, 0]
        if abs(v @ w_A) > 0.7 * np.linalg.norm(w_A):
            # -log(b + S) is convex in S, so the marginal prior is convex along w -> e^t w
            detail += (" - close to rescaling all of w, along which the marginal prior "
                       "(b + sum |w|^q)^-(a + m/q) is convex and the likelihood too flat to outweigh it")
        elif spec.q < 1 and abs(w_A[j]) < 0.1 * np.max(np.abs(w_A)):
            detail += (" - a small weight: for q < 1 the prior |w|^q is convex near 0 with curvature "
                       "growing like |w|^(q-2), so a weight still shrinking towards 0 makes -H indefinite")
    raise ApproximationFailed(
        f"mm-laplace: the Hessian of the log posterior is not positive definite at the {where} "
        f"({detail}; q = {spec.q:g}, {len(w_A)} active weights, exponent a + {shape - spec.a:.4g}): "
        f"a Laplace approximation does not exist there"
    )


def _newton_polish(w0, Phi, s, spec, active, n_total, exponent, prune_threshold):
    """Newton's method with backtracking from MM's point w0 (over ``active``) to the
    stationary point of the target.

    Returns (w over the final active set, that set, cholesky of -H at w, min eigenvalue
    of -H, Newton steps). Every iterate must have -H positive definite, else
    ApproximationFailed (the Newton step would not point to a maximum, and the Gaussian
    would have no centre).

    For q <= 1 the target has a cusp at w_i = 0 and its maximum may sit there: MM
    approaches such a weight only geometrically and stops on its step tolerance before
    pruning it. Steps therefore never cross 0 (each covers at most FRACTION_TO_CUSP of
    the way), and a weight that falls below MM's pruning threshold is pruned - MM's own
    rule, applied to the limit MM was heading for (the caller reports which). For q > 1
    |w|^q is differentiable at 0 and weights may cross it freely.
    """
    w, active = np.array(w0, float), np.asarray(active)
    shape = _prior_shape(spec, active.size, n_total, exponent)
    value = log_target(w, Phi[:, active], s, spec, shape)
    for it in range(NEWTON_MAX_ITER + 1):
        Phi_A = Phi[:, active]
        grad, neg_hess = gradient_and_neg_hessian(w, Phi_A, s, spec, shape)
        L, min_eig = _check_positive_definite(
            neg_hess, w, active, spec, shape, "MM mode" if it == 0 else f"Newton iterate {it} from the MM mode")
        step = solve_triangular(L.T, solve_triangular(L, grad, lower=True), lower=False)
        decrement = float(grad @ step)  # twice the gain the quadratic model predicts, in nats
        if decrement < NEWTON_DECREMENT_TOL or it == NEWTON_MAX_ITER:
            break
        t = 1.0
        toward = step * np.sign(w) < 0
        if spec.q <= 1 and toward.any():
            t = min(t, FRACTION_TO_CUSP * float(np.min(np.abs(w[toward]) / np.abs(step[toward]))))
        while t > 1e-12:
            w_new = w + t * step
            v_new = log_target(w_new, Phi_A, s, spec, shape)
            if v_new >= value:
                break
            t *= 0.5
        else:
            break  # no ascent along the Newton direction: only round-off is left (checked below)
        w, value = w_new, v_new
        small = np.abs(w) < prune_threshold
        if spec.q <= 1 and small.any():
            if small.all():
                raise ApproximationFailed(
                    "mm-laplace: polishing the MM mode pruned every weight (the target's maximum is "
                    "at w = 0, the cusp of |w|^q): no Laplace approximation exists there")
            w, active = w[~small], active[~small]
            shape = _prior_shape(spec, active.size, n_total, exponent)
            value = log_target(w, Phi[:, active], s, spec, shape)
    if decrement >= NEWTON_DECREMENT_ACCEPT:
        raise ApproximationFailed(
            f"mm-laplace: Newton's method from the MM mode did not reach a stationary point in "
            f"{it} steps (max |gradient| = {np.max(np.abs(grad)):.3g}, Newton decrement {decrement:.3g}); "
            f"a Laplace approximation needs one")
    return w, active, L, min_eig, it


def fit(spec: GGSMProbit, Phi, y, *, config: mm.MMConfig | None = None, rule: str = "ggig",
        exponent: str = "mm", n_draws: int = 4000, seed: int = 0) -> DrawsPosterior:
    """Laplace approximation at the MM mode over the active weights, as draws.

    config: the MM settings (its ``rule`` is replaced by ``rule``; ``rule`` only decides
    which MM iteration finds the mode and the sparsity pattern - the Gaussian is always
    of the spec's GGSM target). exponent: "mm" or "model" (module docstring). n_draws,
    seed: size and seed of the draws. Raises ApproximationFailed where -H is not positive
    definite.
    """
    if exponent not in EXPONENTS:
        raise ValueError(f"exponent must be one of {EXPONENTS}, got {exponent!r}")
    if not (isinstance(n_draws, (int, np.integer)) and n_draws >= 2):
        raise ValueError(f"n_draws must be an integer >= 2, got {n_draws!r}")
    config = dataclasses.replace(config or mm.MMConfig(), rule=rule)
    t0 = time.perf_counter()
    res = mm.run(spec, Phi, y, config=config)
    Phi, y01 = check_design(Phi, y)
    s = 2.0 * y01 - 1.0
    n = Phi.shape[1]
    active = np.flatnonzero(res.w)
    if active.size == 0:  # mm.run returns the last iterate with an active weight; guard anyway
        raise ApproximationFailed(f"mm-laplace: MM pruned every weight ({res.reason}); nothing to approximate")
    w_mode, kept, L, min_eig, n_newton = _newton_polish(
        res.w[active], Phi, s, spec, active, n, exponent, config.prune_threshold)
    polish_pruned = np.setdiff1d(active, kept)
    shift = np.abs(res.w)
    shift[kept] = np.abs(w_mode - res.w[kept])
    active, pruned = kept, np.setdiff1d(np.arange(n), kept)
    shape = _prior_shape(spec, active.size, n, exponent)

    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_draws, active.size))
    # -H = L L^T, so L^-T z has covariance (L L^T)^-1 = (-H)^-1
    w_draws = np.zeros((n_draws, n))
    w_draws[:, active] = w_mode[None, :] + solve_triangular(L.T, z.T, lower=False).T
    # lambda | w ~ InvGamma(shape, b + sum |w|^q), drawn as scale / Gamma(shape, 1); the
    # pruned zeros add nothing to the sum
    scale = spec.b + np.sum(np.abs(w_draws[:, active]) ** spec.q, axis=1)
    lam = scale / rng.standard_gamma(shape, n_draws)
    seconds = time.perf_counter() - t0 - res.compile_seconds

    info = FitInfo(
        engine="mm-laplace",
        converged=res.status == "converged",
        n_iter=res.n_iter,
        reason="; ".join(filter(None, [res.reason, (
            f"the Newton polish pruned {polish_pruned.size} weight(s) MM was still shrinking to 0: "
            f"{[int(i) for i in polish_pruned]}") if polish_pruned.size else ""])),
        seconds=seconds,
        compile_seconds=res.compile_seconds,
        objective=f"MM's {config.rule} objective F(w) per iteration; the Gaussian is over "
                  f"log p(y | w_A) - (a + {'|A|' if exponent == 'mm' else 'n'}/q) log(b + sum_A |w|^q)",
        trace=res.trace,
        extra={
            "n_active": int(active.size),
            "pruned": [int(i) for i in pruned],
            "hessian_min_eig": min_eig,
            "mm_status": res.status,
            "exponent": exponent,
            "lam_shape": float(shape),
            "mode": w_mode,
            "precision": L @ L.T,
            "newton_steps": int(n_newton),
            # how far the Newton polish moved MM's point (MM stops on a step-size tolerance)
            "polish_shift": float(np.max(shift)),
            # weights MM was still shrinking to 0 (q <= 1) that the polish pruned by MM's rule
            "polish_pruned": [int(i) for i in polish_pruned],
            "rule": config.rule,
        },
    )
    draws = {"lam": lam[None, :], "w": w_draws[None, :, :]}
    return DrawsPosterior(spec, spec.sites(n), draws, info)


def fit_end_to_end(Phi_all, y, *, seed: int = 0, spec: GGSMProbit | None = None,
                   config: mm.MMConfig | None = None, **kwargs):
    """Registry form: the fit on all columns, reported over the columns MM kept (as
    :func:`zoo.inference.mm.fit_end_to_end`); ``seed`` seeds the draws."""
    spec = spec or GGSMProbit()
    full = fit(spec, Phi_all, y, config=config, seed=seed, **kwargs)
    active = np.setdiff1d(np.arange(full.draws["w"].shape[-1]), full.info.extra["pruned"])
    draws = {"lam": full.draws["lam"], "w": full.draws["w"][:, :, active]}
    return EndToEndFit(posterior=DrawsPosterior(spec, spec.sites(active.size), draws, full.info),
                       spec=spec, active=active)
