"""Which moments of a sparse-prior posterior exist on given data.

These functions describe the posterior, not a sampler: the protocols of the models
(``validation/records/``) use them to say which metrics are meaningful, and the reports
quote their sentences.

The argument (written out in DERIVATIONS.md §4): if the
likelihood does not decay along some direction of the weights - the training data are
linearly separable, quasi-completely separable, or the design has a null space - the
posterior of the overall scale r along that direction keeps the tail of the prior. For
GGSM probit that is r^-(1 + q a) (:func:`scale_moments`); for GIG logistic with m features
in the direction it is r^-(1 + m alpha) (:func:`tail_index`,
:func:`separating_support_bounds`). A sample mean of draws whose mean does not exist
estimates nothing, so metrics built on it are reported as null with the reason.
"""
from __future__ import annotations

import numpy as np

from ...models.checks import check_design


def linear_separation(Phi, y, *, tol: float = 1e-7) -> dict:
    """Is there a w with s_i (Phi w)_i > 0 for every training point (s = 2y - 1)?

    Solved as a bounded linear program (scipy's HiGHS): maximize the margin t subject to
    s_i (Phi w)_i >= t, -1 <= w_j <= 1, t <= 1. It is always feasible (w = 0, t = 0), so
    the solver cannot stall on an infeasibility proof (the plain feasibility form did,
    on 2 of 100 splits). The data are separable iff the optimal margin is > ``tol``.
    Returns {"separable": bool or None, "margin": t, "status": text}. Separable data
    leave the likelihood bounded away from 0 along a cone of directions, so the posterior
    of the overall scale r = ||w|| keeps the prior's tail r^-(1 + q a).
    """
    from scipy.optimize import linprog

    Phi, y = check_design(Phi, y)
    n_obs, n = Phi.shape
    s = 2.0 * y - 1.0
    # variables (w, t): rows  -s_i Phi_i w + t <= 0
    A_ub = np.hstack([-(s[:, None] * Phi), np.ones((n_obs, 1))])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n_obs), bounds=[(-1.0, 1.0)] * n + [(None, 1.0)],
                  method="highs")
    if res.status != 0:
        return {"separable": None, "margin": None, "status": f"LP did not finish: {res.message}"}
    margin = float(-res.fun)
    if margin > tol:
        return {"separable": True, "margin": margin,
                "status": f"linearly separable (margin {margin:.3g} with |w_j| <= 1)"}
    return {"separable": False, "margin": margin, "status": "not linearly separable"}


def scale_moments(q: float, a: float) -> dict:
    """Which moments of w exist when the data are separable: E|w|^k < inf iff k < q a."""
    qa = q * a
    return {"tail_exponent": 1.0 + qa, "mean_exists": qa > 1.0, "sd_exists": qa > 2.0}


def likelihood_flat_direction(Phi, y, *, tol: float = 1e-7) -> dict:
    """Is there a direction w != 0 along which the probit likelihood never decays?

    That is the case iff some w != 0 has s_i (Phi w)_i >= 0 for every i: strict or quasi-
    complete separation, or a direction in the null space of Phi (more basis functions than
    independent rows, as with an RBF basis plus a bias). Along it the likelihood stays
    bounded below, so the posterior of the scale of w keeps the prior's tail r^-(1 + q a)
    (:func:`scale_moments`). Otherwise every direction misclassifies some point and the
    likelihood decays like exp(-c r^2): all moments exist.

    Returns {"flat": bool or None, "kind": "separable" | "quasi-separable" |
    "null space" | None, "status": text}.
    """
    from scipy.optimize import linprog

    Phi, y = check_design(Phi, y)
    n_obs, n = Phi.shape
    if np.linalg.matrix_rank(Phi) < n:
        return {"flat": True, "kind": "null space",
                "status": f"Phi has rank {np.linalg.matrix_rank(Phi)} < {n} columns: the likelihood is "
                          "constant along its null space"}
    sep = linear_separation(Phi, y, tol=tol)
    if sep["separable"] is None:
        return {"flat": None, "kind": None, "status": sep["status"]}
    if sep["separable"]:
        return {"flat": True, "kind": "separable", "status": sep["status"]}
    # quasi-complete separation: maximize sum_i s_i (Phi w)_i subject to every term >= 0
    s = 2.0 * y - 1.0
    signed = s[:, None] * Phi
    res = linprog(-signed.sum(0), A_ub=-signed, b_ub=np.zeros(n_obs), bounds=[(-1.0, 1.0)] * n, method="highs")
    if res.status != 0:
        return {"flat": None, "kind": None, "status": f"LP did not finish: {res.message}"}
    if -res.fun > tol:
        return {"flat": True, "kind": "quasi-separable",
                "status": "quasi-completely separable: some points lie on every separating hyperplane"}
    return {"flat": False, "kind": None, "status": "not separable, not even quasi-completely"}


def tail_index(spec) -> float:
    """alpha with ``p(beta_i) ~ |beta_i|^-(1 + alpha)`` in the tails of the marginal prior.

    Gamma mixing: ``tau / 2 theta ~ BetaPrime(rho, k)`` has the tail ``tau^-(1 + k)``, so
    ``P(|beta| > t) = P(tau z^2 > t^2) ~ t^-2k``: alpha = 2 k. Inverse-gamma mixing: ``1 / tau`` is
    ``2 theta BetaPrime(|rho|, k)``, whose density near 0 is ``x^(|rho| - 1)``, so ``P(tau > T) ~
    T^-|rho|`` and ``alpha = 2 |rho|`` (the Student-t degrees of freedom).
    """
    return 2.0 * spec.k if spec.mixing == "gamma" else 2.0 * abs(spec.rho)


def separating_support_bounds(Phi, y) -> dict:
    """Bounds on m, the fewest features a direction needs along which the likelihood does
    not decay (a separating direction), for separable data.

    Why it matters (an argument sketched, not a proof; it mirrors the GGSM one of
    :func:`likelihood_flat_direction`): along a separating direction v with m nonzero entries the likelihood
    tends to 1, and the prior density at r v falls like r^-m(1 + alpha) in the m-dimensional
    subspace, whose volume element brings r^(m - 1): the posterior of the scale r keeps the
    tail r^-(1 + m alpha). So E|beta|^s is finite iff s < m_min alpha (:func:`tail_index`),
    with m_min the smallest such m.

    lower: 1 if some single feature separates (s_j x_ji >= 0 for every j, or <= 0), else 2.
    upper: 1 if a single feature separates, else the support of the L1-smallest w with
    s_j x_j^T w >= 1 (a linear program; L1 favours sparse solutions but does not always
    find the sparsest, so this is a bound), or None if the LP finds none.
    """
    from scipy.optimize import linprog

    Phi, y = check_design(Phi, y)
    s = 2.0 * y - 1.0
    signed = s[:, None] * Phi
    single = bool(np.any(np.all(signed >= 0, axis=0) & np.any(signed > 0, axis=0))
                  | np.any(np.all(signed <= 0, axis=0) & np.any(signed < 0, axis=0)))
    n_obs, d = Phi.shape
    # w = w_plus - w_minus, both >= 0; minimize sum(w_plus + w_minus)
    res = linprog(np.ones(2 * d), A_ub=-np.hstack([signed, -signed]), b_ub=-np.ones(n_obs),
                  bounds=[(0, None)] * (2 * d), method="highs")
    upper = None
    if single:
        upper = 1
    elif res.status == 0:
        w = res.x[:d] - res.x[d:]
        upper = int(np.sum(np.abs(w) > 1e-9 * np.max(np.abs(w))))
    return {"lower": 1 if single else 2, "upper": upper}


def flat_support(Phi, y, *, tol: float = 1e-7) -> np.ndarray:
    """Which weights can move along a direction where the logistic or probit likelihood
    does not decay: column k is flagged iff some w with w_k != 0 has s_i (Phi w)_i >= 0
    for every training point (a null-space direction, or a separating or quasi-separating
    one; an all-zero column is the simplest case).

    Those directions form a convex cone; per column two bounded linear programs
    (maximize w_k, then -w_k, over the cone with ``|w_j| <= 1``) decide it, and every solution
    found flags its whole support at once, so columns outside the flat support cost two
    programs and the others usually none. Returns a boolean vector of length M.
    """
    from scipy.optimize import linprog

    Phi, y = check_design(Phi, y)
    n_obs, d = Phi.shape
    signed = (2.0 * y - 1.0)[:, None] * Phi
    flagged = ~np.any(Phi != 0.0, axis=0)
    decided = flagged.copy()
    for k in range(d):
        if decided[k]:
            continue
        for sign in (1.0, -1.0):
            c = np.zeros(d)
            c[k] = -sign
            res = linprog(c, A_ub=-signed, b_ub=np.zeros(n_obs), bounds=[(-1.0, 1.0)] * d, method="highs")
            if res.status == 0 and -res.fun > tol:
                support = np.abs(res.x) > tol
                flagged |= support
                decided |= support
                break
        decided[k] = True
    return flagged
