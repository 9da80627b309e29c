"""``sla``: the smoothed loss approximation of Nguyen & Sanner as Hasan & Pal run it for
BBLR (DERIVATIONS.md §6.4), ``laplace``: a Gaussian at the mode it finds, and ``slam``: SLA
with its two learning parameters chosen on held-out data (the end of this module).

SLA minimizes E_gamma(w) = -sum_n log p(y_n | w; a, b, gamma) - log p(w) (the negative log
joint of models/bblr.py) while the sharpness gamma is annealed: gamma_1 < gamma_2 < ... up
to the spec's gamma, each stage started from the previous stage's solution, the first from a
chosen start (the L2 logistic regression solution by default; the paper starts from the
SVM's or the LR's). The bounded likelihood makes E_gamma non-convex, the more so the larger
gamma: the annealing is a continuation from a nearly convex problem to the target one.

One stage ("range optimization", Algorithm 2), repeated until a round improves nothing:

1. gradient descent with a slowly decreasing learning rate: a step w - eta grad is taken
   only if it lowers E by more than ``eps_loss``; otherwise eta is multiplied by ``r_eta``;
   until eta < ``eta_min`` or the gradient is smaller than ``eps_grad``;
2. a 1-D probe of every coordinate in turn: the steps +-S, +-2S, ..., +-R are tried in
   that order and the first that lowers E by more than ``eps_loss`` is taken.

After each stage gamma is multiplied by ``r_gamma``, the radius R by ``r_radius`` and the
grid step S by ``r_step``. Every accepted move lowers E_gamma, so within a stage the
objective never rises (tested, from the recorded trace); between stages it is another
function.

Scale. Both thresholds and the learning rate refer to the mean objective E / N, so that
the defaults do not depend on the number of points. The constants of the paper's appendix
were lost in extraction; the defaults below are Nguyen & Sanner's as far as they are known
(R0 = 8, S0 = 0.2, both halved each stage, gamma x 10 from 2) and our own choice elsewhere
(DERIVATIONS.md §6.4 says which).

Why the model's gamma is the last stage. For the linear model only gamma w enters the
likelihood, so the posterior of v = gamma w under the Gaussian prior N(0, 1/lam) is that of
gamma = 1 with the prior N(0, gamma^2 / lam) (DERIVATIONS.md §6.2): annealing gamma with lam
fixed is annealing the prior's scale from tight to loose. SLA's answer is the mode of the
spec it is given; the engines are compared against NUTS on that same spec.

SLAM. Hasan & Pal choose lam and two of SLA's learning parameters on a validation split of
the training data. Here the two are the descent's initial learning rate eta0 and the probe's
initial spacing S0: they decide which basin SLA's accepted moves end in (a large eta0 can
jump a ridge of the non-convex E_gamma that small steps never cross; the probe's spacing
decides which coordinate moves are seen at all), while the later constants only refine the
mode found. Both are picked on a stratified, seeded fifth of the training points held out
(fewest held-out errors; ties by the held-out log likelihood, then SLA's defaults) over a
3 x 3 grid around the defaults, lam before them over its own grid on the same fifth, and
SLA then runs on all training points with the chosen values (``fit_slam``,
``fit_slam_end_to_end``). The choice is coordinate-wise (lam at the default pair, then the
pair at that lam): 11 + 9 fits instead of 99.

``SLAConfig.loss = "sigmoid"`` runs the same procedure on Nguyen & Sanner's own objective,
sum_n 1 / (1 + exp(gamma t_n f_n)) + lam / 2 ||w||^2 (t_n = 2 y_n - 1): the "SLA" column of
Hasan & Pal's tables. It is not a log likelihood, so only ``sla`` and ``slam`` accept it.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..models.bblr import BBLR, DEFAULT_GAMMA, bb_log_prob, log_prior
from ..models.checks import check_design, check_spec
from .contracts import EndToEndFit
from .generic_laplace import CONVERGED, newton_program
from .posterior import ApproximationFailed, FitInfo, GaussianPosterior, PointPosterior

ENGINE_NAME = "sla"
OBJECTIVE_NAME = "E_gamma(w) = -log joint at the stage's gamma (model's gamma in the last stage)"
SIGMOID_OBJECTIVE_NAME = ("sum_n sigmoid(-gamma t_n f_n) - log p(w) at the stage's gamma (Nguyen & Sanner's "
                          "sigmoid loss; model's gamma in the last stage)")
STARTS = ("lr", "zeros")
#: what SLA minimizes besides -log p(w): the model's negative log likelihood, or Nguyen &
#: Sanner's sigmoid loss sum_n 1 / (1 + exp(gamma t_n f_n)), t_n = 2 y_n - 1 (SLAConfig.loss)
LOSSES = ("bblr", "sigmoid")
#: SLAConfig.laplace_hessian: the model's own curvature, or the planted defect
LAPLACE_HESSIANS = ("model", "logistic")


@dataclass(frozen=True)
class SLAConfig:
    """Settings of SLA (module docstring). Thresholds and eta refer to E / N.

    - gamma_min, r_gamma: the first stage's gamma (capped at the spec's) and its growth.
    - radius, r_radius, step, r_step: the coordinate probe's range R and grid S, and their
      shrink factors per stage (Nguyen & Sanner: 8, 1/2, 0.2, 1/2).
    - eta0, r_eta, eta_min: gradient descent's learning rate, its shrink factor on a step
      that does not lower E, and where the descent stops.
    - eps_loss: smallest decrease of E / N that counts as one; eps_grad: gradient norm of
      E / N below which the descent stops.
    - max_rounds: cap on (descent, probe) rounds per stage; max_descent: steps per descent.
    - start: "lr" (L2 logistic regression with the spec's lam, by Newton) or "zeros".
    - loss: "bblr" (the model's negative log likelihood: SLA's answer is the spec's posterior
      mode) or "sigmoid" (Nguyen & Sanner's sigmoid loss sum_n sigmoid(-gamma t_n f_n) with
      the same Gaussian term lam / 2 ||w||^2 - not a log likelihood; the "SLA" column of
      Hasan & Pal's tables. Only with a = 0, b = 1, so that the spec's prediction
      sigmoid(gamma f) > 1/2 is the loss's own rule f > 0).
    - laplace_hessian: the curvature of ``laplace``'s Gaussian: "model" (the Hessian of the
      spec's own log joint) or "logistic" - a documented defect for the planted-defect
      battery: the Hessian of plain L2 logistic regression (a = 0, b = 1) at the same mode,
      the slip of reusing LR's Laplace for the bounded likelihood. With a > 0 or a + b < 1
      the bounded likelihood is flatter, so this Gaussian is too narrow.
    """

    gamma_min: float = 2.0
    r_gamma: float = 10.0
    radius: float = 8.0
    r_radius: float = 0.5
    step: float = 0.2
    r_step: float = 0.5
    eta0: float = 1.0
    r_eta: float = 0.5
    eta_min: float = 1e-8
    eps_loss: float = 1e-10
    eps_grad: float = 1e-8
    max_rounds: int = 100
    max_descent: int = 10_000
    start: str = "lr"
    loss: str = "bblr"
    laplace_hessian: str = "model"

    def __post_init__(self):
        name = type(self).__name__
        for key in ("gamma_min", "radius", "step", "eta0", "eta_min", "eps_loss", "eps_grad"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}.{key} must be a positive number, got {v!r}")
        if not self.r_gamma > 1:
            raise ValueError(f"{name}.r_gamma must be > 1 (gamma grows each stage), got {self.r_gamma!r}")
        for key in ("r_radius", "r_step", "r_eta"):
            v = getattr(self, key)
            if not 0 < v <= 1:
                raise ValueError(f"{name}.{key} must lie in (0, 1], got {v!r}")
        if self.step > self.radius:
            raise ValueError(f"{name}.step ({self.step}) must not exceed radius ({self.radius})")
        for key in ("max_rounds", "max_descent"):
            v = getattr(self, key)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}.{key} must be an integer >= 1, got {v!r}")
        if self.start not in STARTS:
            raise ValueError(f"{name}.start must be one of {STARTS}, got {self.start!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"{name}.loss must be one of {LOSSES}, got {self.loss!r}")
        if self.laplace_hessian not in LAPLACE_HESSIANS:
            raise ValueError(f"{name}.laplace_hessian must be one of {LAPLACE_HESSIANS}, got {self.laplace_hessian!r}")


def gamma_schedule(target: float, config: SLAConfig) -> list[float]:
    """gamma_min, gamma_min r, gamma_min r^2, ... below the target, then the target."""
    out, g = [], config.gamma_min
    while g < target * (1 - 1e-12):
        out.append(g)
        g *= config.r_gamma
    return out + [float(target)]


# -- the objective: E / N as a function of traced constants --------------------------------
def _hyper(spec: BBLR, gamma: float):
    return jnp.asarray([spec.a, spec.b, gamma, spec.lam, spec.pi, spec.s2, spec.ell])


def mean_objective(w, Phi, y, hyper, prior: str, loss: str = "bblr"):
    """E_gamma(w) / N with hyper = (a, b, gamma, lam, pi, s2, ell); loss "sigmoid" puts
    Nguyen & Sanner's sum_n sigmoid(-gamma t_n f_n) in place of the negative log likelihood."""
    a, b, gamma, lam, pi, s2, ell = (hyper[i] for i in range(7))
    if loss == "sigmoid":
        data_term = jnp.sum(jax.nn.sigmoid(-gamma * (2.0 * y - 1.0) * (Phi @ w)))
    else:
        data_term = -jnp.sum(bb_log_prob(y, Phi @ w, a, b, gamma))
    return (data_term - log_prior(w, prior, lam, pi, s2, ell)) / Phi.shape[0]


def _descent(w, Phi, y, hyper, eta0, settings, prior, loss):
    """Stage 1: gradient descent that only accepts a decrease (returns w, E / N, steps)."""
    r_eta, eta_min, eps_loss, eps_grad, max_descent = settings
    value_and_grad = jax.value_and_grad(mean_objective)

    def cond(st):
        w, e, g, eta, n = st
        return (eta > eta_min) & (jnp.linalg.norm(g) > eps_grad) & (n < max_descent)

    def body(st):
        w, e, g, eta, n = st
        w_new = w - eta * g
        e_new, g_new = value_and_grad(w_new, Phi, y, hyper, prior, loss)
        accept = jnp.isfinite(e_new) & (e - e_new > eps_loss)
        return (jnp.where(accept, w_new, w), jnp.where(accept, e_new, e), jnp.where(accept, g_new, g),
                jnp.where(accept, eta, eta * r_eta), n + 1)

    e0, g0 = value_and_grad(w, Phi, y, hyper, prior, loss)
    w, e, _, _, n = lax.while_loop(cond, body, (w, e0, g0, jnp.asarray(eta0, float), jnp.asarray(0)))
    return w, e, n


def _probe(w, Phi, y, hyper, steps, eps_loss, prior, loss):
    """Stage 2: each coordinate in turn, the first of ``steps`` (+-S, +-2S, ..., +-R) that
    lowers E / N by more than eps_loss. Returns (w, E / N, number of moves)."""
    def one(d, st):
        w, e, moves = st
        cand = w[None, :] + steps[:, None] * jax.nn.one_hot(d, w.shape[0])[None, :]
        values = jax.vmap(lambda v: mean_objective(v, Phi, y, hyper, prior, loss))(cand)
        better = jnp.isfinite(values) & (e - values > eps_loss)
        k = jnp.argmax(better)  # the first improving step, in the probe's order
        hit = better[k]
        return jnp.where(hit, cand[k], w), jnp.where(hit, values[k], e), moves + hit.astype(jnp.int32)

    e0 = mean_objective(w, Phi, y, hyper, prior, loss)
    return lax.fori_loop(0, w.shape[0], one, (w, e0, jnp.asarray(0, jnp.int32)))


_descent_jit = jax.jit(_descent, static_argnums=(6, 7))
_probe_jit = jax.jit(_probe, static_argnums=(6, 7))


def probe_steps(step: float, radius: float) -> np.ndarray:
    """The offsets the coordinate probe tries on each weight: ``step, -step, 2 step,
    -2 step, ...`` up to the largest multiple of ``step`` within ``radius``."""
    k = int(math.floor(radius / step + 1e-9))
    mult = np.repeat(np.arange(1, k + 1), 2) * np.tile([1.0, -1.0], k)
    return step * mult


def _lr_objective(w, Phi, y, lam):
    f = Phi @ w
    return -jnp.sum(y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f)) + 0.5 * lam * w @ w


# compiled once per data shape (data and lam are arguments, not constants of the program)
_lr_value = jax.jit(_lr_objective)
_lr_grad = jax.jit(jax.grad(_lr_objective))
_lr_hess = jax.jit(jax.hessian(_lr_objective))


def logistic_start(Phi, y, lam: float, *, max_iter: int = 100) -> np.ndarray:
    """The L2 logistic regression solution (a = 0, b = 1, gamma = 1, prior N(0, 1/lam)) by
    Newton's method with step halving: SLA's default start."""
    Phi, y, lam = jnp.asarray(Phi), jnp.asarray(y, float), jnp.asarray(lam, float)
    w = jnp.zeros(Phi.shape[1])
    for _ in range(max_iter):
        g, H = _lr_grad(w, Phi, y, lam), _lr_hess(w, Phi, y, lam)
        # a tiny ridge only steers the start where the prior is nearly flat along a
        # direction the data do not see (a duplicated column); the start is no estimate
        d = jnp.linalg.solve(H + 1e-10 * (1.0 + jnp.max(jnp.diag(H))) * jnp.eye(H.shape[0]), g)
        t, f0 = 1.0, _lr_value(w, Phi, y, lam)
        while _lr_value(w - t * d, Phi, y, lam) > f0 and t > 1e-10:
            t *= 0.5
        w = w - t * d
        if float(jnp.max(jnp.abs(g))) < 1e-10 * Phi.shape[0]:
            break
    return np.asarray(w)


def run_sla(spec: BBLR, Phi, y, config: SLAConfig, w0=None) -> tuple[np.ndarray, dict[str, Any]]:
    """SLA's stages from w0 (or the configured start). Returns (w, record) with the
    record's ``trace`` (E, not E / N, after every descent and probe phase), ``stage_of``
    (the stage of each trace entry), ``stages`` and ``converged``."""
    Phi_j, y_j = jnp.asarray(Phi), jnp.asarray(y, float)
    n = Phi.shape[0]
    if w0 is None:
        w0 = logistic_start(Phi, y, spec.lam) if config.start == "lr" else np.zeros(Phi.shape[1])
    w = jnp.asarray(w0, float)
    settings = (config.r_eta, config.eta_min, config.eps_loss, config.eps_grad, config.max_descent)
    radius, step = config.radius, config.step
    trace, stage_of, stages, converged = [], [], [], True
    for i, gamma in enumerate(gamma_schedule(spec.gamma, config)):
        hyper = _hyper(spec, gamma)
        steps = jnp.asarray(probe_steps(step, radius))
        e = float(mean_objective(w, Phi_j, y_j, hyper, spec.prior, config.loss))
        trace.append(n * e)
        stage_of.append(i)
        rounds, settled = 0, False
        while rounds < config.max_rounds:
            rounds += 1
            w, e, n_steps = _descent_jit(w, Phi_j, y_j, hyper, config.eta0, settings, spec.prior, config.loss)
            # a descent that ran into its step cap stopped with the gradient still large
            # and the learning rate still above eta_min: not a settled point, even if the
            # probe that follows finds no move on its grid
            capped = int(n_steps) >= config.max_descent
            trace.append(n * float(e))
            stage_of.append(i)
            w, e, moves = _probe_jit(w, Phi_j, y_j, hyper, steps, config.eps_loss, spec.prior, config.loss)
            trace.append(n * float(e))
            stage_of.append(i)
            if int(moves) == 0:
                settled = not capped
                break
        converged &= settled
        stages.append({"gamma": gamma, "radius": radius, "step": step, "rounds": rounds, "settled": settled,
                       "descent_capped": capped, "objective": n * float(e)})
        radius, step = radius * config.r_radius, step * config.r_step
    return np.asarray(w), {"trace": np.asarray(trace), "stage_of": np.asarray(stage_of), "stages": stages,
                           "converged": bool(converged)}


def fit(spec, Phi, y, *, config: SLAConfig | None = None) -> PointPosterior:
    """SLA's solution for ``spec`` (its gamma is the last stage's) as a point estimate."""
    check_spec(spec, BBLR, ENGINE_NAME)
    Phi, y = check_design(Phi, y)
    config = config or SLAConfig()
    _check_loss(spec, config)
    t0 = time.perf_counter()
    w, rec = run_sla(spec, Phi, y, config)
    return _point(spec, Phi, w, rec, time.perf_counter() - t0, config=config)


def _check_loss(spec: BBLR, config: SLAConfig) -> None:
    """The sigmoid loss classifies by the sign of f: only a spec with a = 0, b = 1 predicts
    by the same rule (and a, b enter nothing else of that loss)."""
    if config.loss == "sigmoid" and (spec.a != 0.0 or spec.b != 1.0):
        raise ValueError(f"SLAConfig.loss 'sigmoid' needs a spec with a = 0 and b = 1 (its prediction "
                         f"sigmoid(gamma f) > 1/2 is then the loss's rule f > 0); got a = {spec.a:g}, b = {spec.b:g}")


def _point(spec, Phi, w, rec, seconds, *, config: SLAConfig | None = None, engine: str = ENGINE_NAME) -> PointPosterior:
    """SLA's answer w, with the record of :func:`run_sla` that reached it, as a posterior."""
    last = rec["stages"][-1]
    reason = "" if rec["converged"] else "; ".join(
        f"gamma {s['gamma']:g}: " + ("its last gradient descent stopped at the step cap (max_descent) with the "
                                     "gradient still above eps_grad" if s.get("descent_capped") else
                                     "the stage ended on its round cap (max_rounds) with the probe still improving")
        for s in rec["stages"] if not s["settled"])
    objective = OBJECTIVE_NAME if config is None or config.loss == "bblr" else SIGMOID_OBJECTIVE_NAME
    info = FitInfo(engine, rec["converged"], int(sum(s["rounds"] for s in rec["stages"])), reason, seconds,
                   0.0, objective, rec["trace"],
                   {"stages": rec["stages"], "stage_of": rec["stage_of"], "objective_final": last["objective"]})
    return PointPosterior(spec, spec.sites(Phi.shape[1]), np.asarray(w, float), info)


# -- laplace: a Gaussian at SLA's mode ------------------------------------------------------
LAPLACE_NAME = "laplace"


def _positive_definite(eig) -> bool:
    """Positive definite with a condition number float64 can invert (an eigenvalue below
    1e-12 of the largest is a flat direction: its 'variance' would be rounding noise)."""
    return bool(eig[0] > 1e-12 * abs(eig[-1]))


#: the Newton decrement at which Laplace's polish of SLA's point stops (the generic Laplace
#: engine's tolerance: the mode within 1e-6 posterior sds)
NEWTON_TOL = 1e-6
#: compiled once per prior: the data and constants are arguments of the program
_NEWTON_PROGRAMS: dict[str, Any] = {}


def _newton(prior: str):
    """The zoo's damped modified Newton (``generic_laplace.newton_program``) on the log
    joint of BBLR with this prior, data passed as ((Phi, hyper), y)."""
    if prior not in _NEWTON_PROGRAMS:
        def log_joint(w, data, y):
            Phi, hyper = data
            return -Phi.shape[0] * mean_objective(w, Phi, y, hyper, prior)

        _NEWTON_PROGRAMS[prior] = jax.jit(newton_program(log_joint, 100))
    return _NEWTON_PROGRAMS[prior]


def fit_laplace(spec, Phi, y, *, config: SLAConfig | None = None) -> GaussianPosterior:
    """N(w*, H^-1) at the mode w* of the spec's log joint that SLA reaches: SLA's point
    polished to a stationary point by the generic Laplace engine's damped Newton, H the
    Hessian of -log joint there (autodiff). Raises ApproximationFailed where no mode with H
    positive definite to float precision is reached (a saddle, or a plateau of the bounded
    likelihood: no Gaussian approximates the posterior at such a point)."""
    check_spec(spec, BBLR, LAPLACE_NAME)
    Phi, y = check_design(Phi, y)
    config = config or SLAConfig()
    if config.loss != "bblr":
        raise ValueError(f"{LAPLACE_NAME} approximates the model's posterior: SLAConfig.loss must be 'bblr', "
                         f"got {config.loss!r}")
    t0 = time.perf_counter()
    w, rec = run_sla(spec, Phi, y, config)
    Phi_j, y_j = jnp.asarray(Phi), jnp.asarray(y, float)
    n = Phi.shape[0]
    state = _newton(spec.prior)(jnp.asarray(w), NEWTON_TOL, (Phi_j, _hyper(spec, spec.gamma)), y_j)
    w, H = state.x, -np.asarray(state.hess)  # H: the Hessian of E = -log joint at w
    eig = np.linalg.eigvalsh(H)
    if int(state.status) != CONVERGED or not _positive_definite(eig):
        raise ApproximationFailed(
            f"{LAPLACE_NAME}: from SLA's point no mode with a Hessian positive definite to float precision "
            f"was reached (Newton status {int(state.status)} after {int(state.n_iter)} steps; eigenvalues of "
            f"the negative log joint's Hessian {eig[0]:.3g} .. {eig[-1]:.3g}): this is not positive definite "
            "curvature, and no Gaussian approximation exists there")
    if config.laplace_hessian == "logistic":
        # the planted defect (SLAConfig docstring): LR's curvature, a = 0 and b = 1, at the mode
        logistic = _hyper(dataclass_replace(spec, a=0.0, b=1.0), spec.gamma)
        H = n * np.asarray(jax.hessian(mean_objective)(w, Phi_j, y_j, logistic, spec.prior))
    cov = np.linalg.inv(np.asarray(H))
    chol = np.linalg.cholesky(0.5 * (cov + cov.T))
    seconds = time.perf_counter() - t0
    info = FitInfo(LAPLACE_NAME, True, len(rec["trace"]), "", seconds, 0.0, "log joint at the mode",
                   np.asarray([float(state.value)]),
                   {"sla_stages": rec["stages"], "newton_steps": int(state.n_iter), "min_eig": float(eig[0])})
    return GaussianPosterior(spec, spec.sites(Phi.shape[1]), np.asarray(w, float), chol, info)


# -- end to end: SLAM's choice of lam (BBLR3) ------------------------------------------------
#: the lam grid of the end-to-end fit: 10^-3 .. 10^2 in half decades
LAM_GRID = tuple(float(v) for v in 10.0 ** np.arange(-3.0, 2.01, 0.5))
#: share of each class held out for validation
VALIDATION_SHARE = 0.2


def held_out_fifth(y, seed: int) -> np.ndarray:
    """The validation points of SLAM's meta-optimization (a boolean mask): a stratified,
    seeded fifth of each class. :func:`select_lam` and :func:`fit_slam` draw the same one
    for the same seed."""
    y = np.asarray(y)
    rng = np.random.default_rng([seed, 16])
    held = np.zeros(len(y), bool)
    for label in (0.0, 1.0):
        idx = np.flatnonzero(y == label)
        held[rng.choice(idx, size=max(1, int(round(VALIDATION_SHARE * idx.size))), replace=False)] = True
    if len(np.unique(y[~held])) < 2:
        raise ValueError("too few points of one class to hold out a validation fifth")
    return held


def select_lam(Phi, y, *, gamma: float, seed: int, config: SLAConfig | None = None,
               lam_grid=LAM_GRID) -> tuple[float, dict[str, Any]]:
    """SLAM's choice of lam as the zoo runs it (DERIVATIONS.md §6.5): hold out a stratified
    fifth of the training points (seeded, :func:`held_out_fifth`), fit SLA on the rest for
    every lam of the grid (BBLR2's a, b from the fitting part's counts), and keep the lam
    with the fewest validation errors, ties to the larger lam (the stronger prior). SLA's
    two learning parameters are SLAM's other choice, made at the chosen lam by
    :func:`fit_slam`."""
    Phi, y = check_design(Phi, y)
    lam_grid = _check_grid(lam_grid, "lam_grid")
    held = held_out_fifth(y, seed)
    fit_part, val = ~held, held
    errors = []
    for lam in lam_grid:
        spec = BBLR.from_counts(y[fit_part], gamma=gamma, lam=lam)
        w, _ = run_sla(spec, Phi[fit_part], y[fit_part], config or SLAConfig())
        p = np.asarray(spec.prob(Phi[val] @ w))
        errors.append(int(np.sum((p > 0.5) != (y[val] > 0.5))))
    best = min(errors)
    chosen = max(lam for lam, e in zip(lam_grid, errors) if e == best)
    return chosen, {"lam_grid": list(lam_grid), "validation_errors": errors, "n_validation": int(val.sum()),
                    "lam": chosen, "rule": "fewest validation errors, ties to the larger lam"}


def _selected_spec(Phi_all, y, gamma, seed, config, lam_grid=LAM_GRID) -> tuple[BBLR, dict[str, Any]]:
    """BBLR2's a, b from all points' counts, the given gamma (None: the default) and SLAM's
    lam: the spec every end-to-end fit of this module is made on."""
    gamma = DEFAULT_GAMMA if gamma is None else float(gamma)
    lam, selection = select_lam(Phi_all, y, gamma=gamma, seed=seed, config=config, lam_grid=lam_grid)
    return BBLR.from_counts(np.asarray(y), gamma=gamma, lam=lam), selection


def _end_to_end(fit_spec, Phi_all, y, *, gamma, seed, config, lam_grid=LAM_GRID, then=None) -> EndToEndFit:
    """What every end-to-end fit of this module does: the spec of :func:`_selected_spec`,
    ``fit_spec(spec)`` on all points, optionally ``then(spec, posterior)`` (BBLR4's
    learning of a, b, gamma), and the lam selection recorded in the answer."""
    spec, selection = _selected_spec(Phi_all, y, gamma, seed, config, lam_grid)
    post = fit_spec(spec)
    if then is not None:
        spec, post = then(spec, post)
    post.info.extra["selection"] = selection
    return EndToEndFit(post, spec, np.arange(np.asarray(Phi_all).shape[1]))


def fit_end_to_end(Phi_all, y, *, seed: int = 0, config: SLAConfig | None = None, gamma: float | None = None,
                   learn_likelihood: bool = False):
    """BBLR3 with SLA's default learning parameters: a, b from the class counts (BBLR2),
    lam by SLAM's validation (:func:`select_lam`), then SLA on all points. Every column is
    kept (:func:`fit_slam_end_to_end` also chooses the learning parameters).

    learn_likelihood: BBLR4 - then (a, b, gamma) are learned as well (:func:`learn_ab_gamma`),
    starting from the asymptotic a, b of the BBLR3 solution's training TPR and TNR."""
    then = (lambda spec, post: learn_ab_gamma(spec, post, Phi_all, y, config=config)) if learn_likelihood else None
    return _end_to_end(lambda spec: fit(spec, Phi_all, y, config=config), Phi_all, y, gamma=gamma, seed=seed,
                       config=config, then=then)


def asymptotic_ab(w, Phi, y) -> tuple[float, float]:
    """(a, b) = (1 - TNR, TPR + TNR - 1) of the hard predictions sign(f) on (Phi, y)
    (eqs. 27-30: as gamma -> infinity the largest P(y = 1) is a + b = TPR and the largest
    P(y = 0) is 1 - a = TNR), clipped so that a, c >= 0.01 and b >= 0.05."""
    y = np.asarray(y) > 0.5
    pred = np.asarray(Phi) @ np.asarray(w) > 0
    tpr = float(np.mean(pred[y])) if y.any() else 0.5
    tnr = float(np.mean(~pred[~y])) if (~y).any() else 0.5
    a = min(max(1.0 - tnr, 0.01), 0.94)
    b = min(max(tpr + tnr - 1.0, 0.05), 0.99 - a)
    return a, b


def _abg_unpack(z):
    """(a, b, gamma) from z = (logits of a, b, c; log gamma)."""
    abc = jax.nn.softmax(z[:3])
    return abc[0], abc[1], jnp.exp(z[3])


def _abg_negative_log_likelihood(z, w, Phi, y):
    a, b, gamma = _abg_unpack(z)
    return -jnp.sum(bb_log_prob(y, Phi @ w, a, b, gamma))


# compiled once per data shape (w and the data are arguments), not once per round
_abg_value_and_grad = jax.jit(jax.value_and_grad(_abg_negative_log_likelihood))


def learn_ab_gamma(spec: BBLR, post: PointPosterior, Phi, y, *, config: SLAConfig | None = None,
                   rounds: int = 5, engine: str = ENGINE_NAME) -> tuple[BBLR, PointPosterior]:
    """BBLR4's alternation (DERIVATIONS.md §6.5): (a, b, gamma) by maximizing the log
    likelihood at fixed w (L-BFGS over a softmax of (a, b, c) and log gamma; the gradients
    are eqs. 31-35, here by autodiff), then w by SLA's last stage at the new constants, from
    the previous w; ``rounds`` times or until (a, b, gamma) move by less than 1e-4 (relative).
    Starts from the asymptotic a, b of the given solution (:func:`asymptotic_ab`); the
    answer is the w of the last SLA run, at the last constants."""
    from scipy.optimize import minimize

    t0 = time.perf_counter()
    Phi_j, y_j = jnp.asarray(Phi), jnp.asarray(y, float)
    a, b = asymptotic_ab(post.mean_flat(), Phi, y)
    spec = spec.with_params(a=a, b=b)
    w = jnp.asarray(post.mean_flat())
    history, settled = [(spec.a, spec.b, spec.gamma)], False
    one_stage = dataclass_replace(config or SLAConfig(), gamma_min=spec.gamma)
    if one_stage.loss != "bblr":
        raise ValueError(f"BBLR4 learns the likelihood's a, b, gamma: SLAConfig.loss must be 'bblr', "
                         f"got {one_stage.loss!r}")

    for _ in range(rounds):
        z0 = np.log(np.array([spec.a, spec.b, max(spec.c, 1e-6), 1.0]))
        z0[3] = np.log(spec.gamma)
        res = minimize(lambda z, w=w: tuple(np.asarray(v, float) for v in _abg_value_and_grad(jnp.asarray(z), w,
                                                                                               Phi_j, y_j)),
                       z0, jac=True, method="L-BFGS-B")
        a_, b_, g_ = (float(v) for v in _abg_unpack(jnp.asarray(res.x)))
        new = spec.with_params(a=a_, b=min(b_, 1.0 - a_), gamma=g_)
        w_new, rec = run_sla(new, Phi, y, dataclass_replace(one_stage, gamma_min=new.gamma), w0=w)
        moved = max(abs(x - y_) / max(abs(y_), 1e-12) for x, y_ in zip((new.a, new.b, new.gamma), history[-1]))
        spec, w = new, jnp.asarray(w_new)
        history.append((spec.a, spec.b, spec.gamma))
        if moved < 1e-4:
            settled = True
            break
    final = _point(spec, np.asarray(Phi), np.asarray(w), rec, time.perf_counter() - t0, config=one_stage,
                   engine=engine)
    # gamma and the scale of w trade against each other (only the prior holds the scale),
    # so (a, b, gamma) may still drift slowly after the rounds: said, not hidden
    final.info.extra["learned"] = {"history_a_b_gamma": history, "settled": settled, "rounds": len(history) - 1}
    return spec, final


def fit_laplace_end_to_end(Phi_all, y, *, seed: int = 0, config: SLAConfig | None = None,
                           gamma: float | None = None):
    """The Laplace Gaussian at the mode of the spec :func:`fit_end_to_end` chooses."""
    return _end_to_end(lambda spec: fit_laplace(spec, Phi_all, y, config=config), Phi_all, y, gamma=gamma,
                       seed=seed, config=config)


# -- slam: SLA with its two learning parameters chosen on held-out data (SLAM) ---------------
SLAM_NAME = "slam"
#: SLAM's grid of the descent's initial learning rate eta0 (on the scale of E / N) and of
#: the probe's initial spacing S0: a factor 10 (eta0) and 4 (S0) either side of SLA's
#: defaults (1 and 0.2), which are in the grid
ETA0_GRID = (0.1, 1.0, 10.0)
STEP_GRID = (0.05, 0.2, 0.8)
#: held-out log likelihoods closer than this many nats per held-out point count as equal in
#: SLAM's tie-break: settings that reach the same mode differ by SLA's stopping tolerance
#: (measured: 1e-4 nats over 123 Pima points), and differences far below the held-out log
#: likelihood's own sampling error (several nats on a hundred points) decide nothing
LOGLIK_TIE = 1e-3


def _check_grid(values, name: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        out = ()
    if not out or not all(math.isfinite(v) and v > 0 for v in out) or len(set(out)) != len(out):
        raise ValueError(f"{name} must be a non-empty sequence of distinct positive numbers, got {values!r}")
    return out


def choose_learning_parameters(spec: BBLR, Phi, y, held, config: SLAConfig, eta0_grid=ETA0_GRID,
                               step_grid=STEP_GRID) -> tuple[SLAConfig, dict[str, Any]]:
    """SLAM's choice of SLA's two learning parameters (eta0, S0) for ``spec``: SLA from the
    configured start on the points outside ``held`` for every pair of the grids, then

    1. the fewest held-out 0-1 errors (the spec's rule p(y = 1 | x) > 1/2),
    2. among those, the largest held-out log likelihood sum log p(y | f) under the spec's
       likelihood (within LOGLIK_TIE nats per held-out point: settings that reach the same
       mode tie),
    3. among those, SLA's own defaults if they are there, else the smallest eta0, then the
       smallest S0 (the most cautious settings).

    Every pair is fitted (a grid, not a line search: with the bounded likelihood the held-out
    error is a step function of the settings, with no slope for a bracket to follow).
    Returns the config with the chosen pair and a record of every pair's scores."""
    eta0_grid, step_grid = _check_grid(eta0_grid, "eta0_grid"), _check_grid(step_grid, "step_grid")
    held = np.asarray(held, bool)
    fit_part = ~held
    y_val = np.asarray(y)[held] > 0.5
    rows = []
    for eta0 in eta0_grid:
        for step in step_grid:
            try:
                cfg = dataclass_replace(config, eta0=eta0, step=step)
            except ValueError as err:
                raise ValueError(f"SLAM's grid point eta0 = {eta0:g}, S0 = {step:g} is not a valid SLA "
                                 f"setting: {err}") from None
            w, rec = run_sla(spec, Phi[fit_part], y[fit_part], cfg)
            f = Phi[held] @ w
            errors = int(np.sum((np.asarray(spec.prob(f)) > 0.5) != y_val))
            loglik = float(jnp.sum(bb_log_prob(jnp.asarray(y_val, float), f, spec.a, spec.b, spec.gamma)))
            rows.append({"eta0": eta0, "step": step, "validation_errors": errors, "validation_loglik": loglik,
                         "converged": rec["converged"]})
    fewest = min(r["validation_errors"] for r in rows)
    tied = [r for r in rows if r["validation_errors"] == fewest]
    best_ll = max(r["validation_loglik"] for r in tied)
    tied = [r for r in tied if r["validation_loglik"] >= best_ll - LOGLIK_TIE * held.sum()]
    chosen = min(tied, key=lambda r: ((r["eta0"], r["step"]) != (config.eta0, config.step), r["eta0"], r["step"]))
    record = {"eta0_grid": list(eta0_grid), "step_grid": list(step_grid), "grid": rows,
              "eta0": chosen["eta0"], "step": chosen["step"], "n_validation": int(held.sum()),
              "rule": "fewest held-out errors, then the largest held-out log likelihood, then SLA's defaults, "
                      "then the smallest eta0 and S0"}
    return dataclass_replace(config, eta0=chosen["eta0"], step=chosen["step"]), record


def fit_slam(spec, Phi, y, *, config: SLAConfig | None = None, seed: int = 0, eta0_grid=ETA0_GRID,
             step_grid=STEP_GRID) -> PointPosterior:
    """SLAM for a fixed spec: SLA's initial learning rate eta0 and initial probe spacing S0
    chosen on a held-out stratified fifth of the training points (:func:`held_out_fifth`,
    seeded; :func:`choose_learning_parameters` says how), then SLA with the chosen pair on
    all the training points. The answer is a point of the same posterior as ``sla``'s -
    only the optimizer's path, hence possibly the mode it reaches, depends on the pair.
    The chosen pair and every pair's held-out scores are in ``info.extra["slam"]``."""
    check_spec(spec, BBLR, SLAM_NAME)
    Phi, y = check_design(Phi, y)
    config = config or SLAConfig()
    _check_loss(spec, config)
    t0 = time.perf_counter()
    chosen, record = choose_learning_parameters(spec, Phi, y, held_out_fifth(y, seed), config, eta0_grid, step_grid)
    w, rec = run_sla(spec, Phi, y, chosen)
    post = _point(spec, Phi, w, rec, time.perf_counter() - t0, config=chosen, engine=SLAM_NAME)
    post.info.extra["slam"] = record
    return post


def fit_slam_end_to_end(Phi_all, y, *, seed: int = 0, config: SLAConfig | None = None, gamma: float | None = None,
                        learn_likelihood: bool = False, lam_grid=LAM_GRID, eta0_grid=ETA0_GRID,
                        step_grid=STEP_GRID):
    """BBLR3 with SLAM's whole meta-optimization: lam by :func:`select_lam` (at SLA's
    default learning parameters), then (eta0, S0) at that lam by :func:`fit_slam`, both on
    the same held-out fifth (the same seed), then SLA on all points with the chosen values.
    learn_likelihood: BBLR4 - (a, b, gamma) learned from there (:func:`learn_ab_gamma`, with
    the chosen learning parameters)."""
    config = config or SLAConfig()

    def fit_spec(spec):
        return fit_slam(spec, Phi_all, y, config=config, seed=seed, eta0_grid=eta0_grid, step_grid=step_grid)

    def learn(spec, post):
        chosen = dataclass_replace(config, eta0=post.info.extra["slam"]["eta0"], step=post.info.extra["slam"]["step"])
        spec, learned = learn_ab_gamma(spec, post, Phi_all, y, config=chosen, engine=SLAM_NAME)
        learned.info.extra["slam"] = post.info.extra["slam"]
        return spec, learned

    return _end_to_end(fit_spec, Phi_all, y, gamma=gamma, seed=seed, config=config, lam_grid=lam_grid,
                       then=learn if learn_likelihood else None)
