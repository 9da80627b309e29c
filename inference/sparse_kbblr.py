"""``sla-sparse``: sparse kernel BBLR - SLA with a hard-EM step for the Gaussian-Laplace
mixture prior (Hasan & Pal, Algorithm 3 of their App. C; DERIVATIONS.md §6.6).

The model is the BBLR spec with ``prior="gauss-laplace"`` on a kernel design
Phi_ij = k(x_i, x_j) (KBBLR, eqs. 36-38): every weight has the prior
pi N(0, s2) + (1 - pi) Laplace(0, ell) (eq. 41). For fixed (pi, s2, ell) the engine
minimizes E(w) = -log p(y, w) of that spec - exactly the NumPyro model's negative log
joint - by SLA's range optimization (``inference/sla.py``: the sigmoid's gamma annealed,
each stage a loop of a gradient-descent phase and a coordinate-probe phase). After every
probe phase a hard-assignment EM step re-estimates the prior::

    j in G  iff  pi N(w_j; 0, s2) >= (1 - pi) Laplace(w_j; 0, ell),   L = the others,
    pi = |G| / M,   s2 = mean_G w_j^2,   ell = mean_L |w_j|,

with the floors of :class:`SparseConfig` (an empty component keeps its old scale, pi stays
inside [1 / (2M), 1 - 1 / (2M)], ell and s2 cannot fall below their floors). A stage ends
when a probe phase moves nothing and the EM step moves (pi, s2, ell) by less than
``em_tol`` (relative) without changing the assignment; the constants the last rounds ran
at are the answer's, frozen into a new spec (``dataclasses.replace``), so that NUTS or a
Laplace approximation can be run on exactly the model the engine ended at.

Within one segment - one gamma and one (pi, s2, ell) - every accepted move lowers E, so the
recorded objective never rises there (tested); an EM step changes the function itself.

How this differs from ``sla.run_sla``, and why:

* the gradient is the hand-derived one (eq. 38 for the likelihood, eqs. 42-44 for the
  mixture prior), and at w_j = 0, where the Laplace component has a kink, the descent takes
  the minimum-norm subgradient and stops a coordinate at 0 instead of letting it cross
  (orthant-wise steps, as OWL-QN does for an L1 term). Plain gradient steps stall at the
  kink: every step that moves a weight across 0 pays ``|step| / ell`` and is refused, and the
  learning rate then shrinks for every coordinate at once;
* the probe tracks f = Phi w and moves it by a column per candidate, O(N) per candidate
  instead of the O(N M) of recomputing Phi w: the same moves as SLA's probe (tested),
  affordable for a kernel design with M = N columns; and while only the EM's scales are
  settling (the last probe moved nothing and the assignment held) the probe waits until
  the EM's change falls below ``em_tol`` - the stopping rule is unchanged, the rounds in
  between are a descent and an EM step;
* the probe's steps and the floors are in units of ``u``, the root mean square of the
  start's weights: the SLA constants (R0 = 8, S0 = 0.2) were made for a linear model on
  standardized inputs, whose weights are of order one; kernel weights are an order of
  magnitude smaller, and a step grid of 0.2 would be coarser than most of them.

The kept kernel functions ("support vectors" in the paper, which gives no threshold) are
the members of the broader component of the final hard assignment - the Gaussian one
whenever the Laplace is the spike, as it is from the default start - i.e. the weights the
EM itself calls non-negligible. A magnitude count (``|w_j| >= 1 %`` of the largest) is
recorded beside it.

What to expect: the hard EM prices a kept weight at about log M + log(s / ell) nats of
prior (DERIVATIONS.md §6.6), and the BBLR likelihood is bounded, so the EM ends very sparse
- a handful of kernel functions - and where the data are weak (BBLR2's b = 1/2 on Liver) it
keeps none, w = 0 and the prediction is the constant a + b / 2.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.nn import log_sigmoid

from ..models.bblr import BBLR, DEFAULT_GAMMA, _log, bb_log_prob, gauss_laplace_log_prob, gauss_laplace_responsibility
from ..models.checks import check_design, check_spec
from .contracts import EndToEndFit
from .posterior import FitInfo, PointPosterior
from .sla import SLAConfig, gamma_schedule, logistic_start, mean_objective, probe_steps

ENGINE_NAME = "sla-sparse"
OBJECTIVE_NAME = ("E(w) = -log joint of the gauss-laplace spec at the stage's gamma and the segment's "
                  "(pi, s2, ell)")
#: a weight is counted "large" when ``|w_j|`` is at least this fraction of the largest ``|w|``
MAGNITUDE_FRACTION = 0.01


@dataclass(frozen=True)
class SparseConfig:
    """Settings of the sparse engine (module docstring).

    sla: SLA's constants (gamma schedule, probe radius and step and their shrink factors,
        learning rate, thresholds, round cap, start). The probe's radius and step are
        multiplied by u, the start's root-mean-square weight.
    em_tol: a stage ends when a probe phase moves nothing and the EM step changes none of
        (pi, s2, ell) by more than this (relative) and no assignment.
    ell_floor, sd_floor: the smallest ell and sqrt(s2), in units of u. The guard against a
        component collapsing onto 0: the weights the Laplace holds reach exactly 0, so
        ``mean_L |w|`` is 0 and ell sits on its floor whenever L has members.
    pi_floor: the smallest share of a component; None: 1 / (2M) (an emptied component
        keeps half a weight's share, so it can win weights back).
    init_pi, init_sd, init_ell: the constants the end-to-end fit starts the EM from, sd
        and ell in units of u (the fixed-spec fit starts from the spec's own): the Gaussian
        as wide as the start's weights, the Laplace a spike ten times narrower.
    """

    sla: SLAConfig = field(default_factory=SLAConfig)
    em_tol: float = 1e-3
    ell_floor: float = 0.01
    sd_floor: float = 0.01
    pi_floor: float | None = None
    init_pi: float = 0.5
    init_sd: float = 1.0
    init_ell: float = 0.1

    def __post_init__(self):
        name = type(self).__name__
        if not isinstance(self.sla, SLAConfig):
            raise ValueError(f"{name}.sla must be an SLAConfig, got {type(self.sla).__name__}")
        if getattr(self.sla, "loss", "bblr") != "bblr":
            raise ValueError(f"{name}.sla.loss must be 'bblr' (the engine minimizes the model's -log joint), "
                             f"got {self.sla.loss!r}")
        for key in ("em_tol", "ell_floor", "sd_floor", "init_sd", "init_ell"):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}.{key} must be a positive number, got {v!r}")
        for key in ("init_pi", "pi_floor"):
            v = getattr(self, key)
            if v is not None and not (isinstance(v, (int, float)) and 0 < v < (1 if key == "init_pi" else 0.5)):
                raise ValueError(f"{name}.{key} must lie in (0, {'1' if key == 'init_pi' else '1/2'}), got {v!r}")


# -- the gradient of E / N, eqs. 38 and 42-44 ------------------------------------------------
def _split(hyper):
    return (hyper[i] for i in range(7))


def likelihood_score(f, y, a, b, gamma):
    """d log p(y_n | f_n) / d f_n = delta_n b gamma sigma_n (1 - sigma_n) (eqs. 23-26, 38),
    delta_n = (t_n - mu_n) / (mu_n (1 - mu_n)): for t = 1 it is b gamma sigma (1 - sigma)
    / mu, for t = 0 minus that over 1 - mu, here as exp of logs (finite where mu -> 0)."""
    log_s, log_1ms = log_sigmoid(gamma * f), log_sigmoid(-gamma * f)
    log_p = bb_log_prob(y, f, a, b, gamma)  # log mu for t = 1, log(1 - mu) for t = 0
    mag = b * gamma * jnp.exp(log_s + log_1ms - log_p)
    return jnp.where(y > 0.5, mag, -mag)


def mean_gradient(w, Phi, y, hyper):
    """The gradient of E / N at w (differentiable points: no w_j = 0): the descent's own
    smooth part plus the Laplace term's sign part, i.e. eq. 38 and eqs. 42-44."""
    _, g_smooth, kink = _smooth_parts(w, Phi, y, hyper)
    return g_smooth + kink * jnp.sign(w)


def _pseudo_gradient(w, g_smooth, kink):
    """Minimum-norm subgradient of E / N: away from 0 the gradient; at w_j = 0 the smooth
    part's derivative g plus the kink's +-kink, i.e. g + kink if that is < 0 (E falls to
    the right), g - kink if that is > 0 (falls to the left), else 0 (0 is optimal in j)."""
    at_zero = jnp.where(g_smooth + kink < 0, g_smooth + kink, jnp.where(g_smooth - kink > 0, g_smooth - kink, 0.0))
    return jnp.where(w == 0, at_zero, g_smooth + kink * jnp.sign(w))


def _smooth_parts(w, Phi, y, hyper):
    """(E / N, the gradient of E / N without the Laplace kink's sign term, the kink's
    size (1 - r_j) / (ell N) per coordinate)."""
    a, b, gamma, _, pi, s2, ell = _split(hyper)
    n = Phi.shape[0]
    f = Phi @ w
    e = mean_objective(w, Phi, y, hyper, "gauss-laplace")  # SLA's objective, this prior
    r = gauss_laplace_responsibility(w, pi, s2, ell)
    g_smooth = -(Phi.T @ likelihood_score(f, y, a, b, gamma) - r * w / s2) / n
    return e, g_smooth, (1.0 - r) / (ell * n)


def _descent(w, Phi, y, hyper, eta0, settings):
    """The gradient-descent phase: a step w - eta pg (pg the pseudo-gradient) in which a
    coordinate that would cross 0 stops at 0 is taken only if it lowers E / N by more than
    eps_loss, else eta shrinks by r_eta; until eta < eta_min, |pg| < eps_grad or the step
    cap. Returns (w, E / N, steps)."""
    r_eta, eta_min, eps_loss, eps_grad, max_descent = settings

    def parts(w):
        e, g, kink = _smooth_parts(w, Phi, y, hyper)
        return e, _pseudo_gradient(w, g, kink)

    def cond(st):
        w, e, pg, eta, n = st
        return (eta > eta_min) & (jnp.linalg.norm(pg) > eps_grad) & (n < max_descent)

    def body(st):
        w, e, pg, eta, n = st
        trial = w - eta * pg
        orthant = jnp.where(w != 0, jnp.sign(w), -jnp.sign(pg))
        w_new = jnp.where(jnp.sign(trial) == orthant, trial, 0.0)
        e_new, pg_new = parts(w_new)
        accept = jnp.isfinite(e_new) & (e - e_new > eps_loss)
        return (jnp.where(accept, w_new, w), jnp.where(accept, e_new, e), jnp.where(accept, pg_new, pg),
                jnp.where(accept, eta, eta * r_eta), n + 1)

    e0, pg0 = parts(w)
    w, e, _, _, n = lax.while_loop(cond, body, (w, e0, pg0, jnp.asarray(eta0, float), jnp.asarray(0)))
    return w, e, n


def _probe(w, Phi, y, hyper, steps, eps_loss):
    """The coordinate probe of ``sla._probe`` (each coordinate in turn, the first of the
    steps +-S, +-2S, ..., +-R that lowers E / N by more than eps_loss) with f = Phi w
    carried along: a candidate costs one column, not a matrix product. Returns (w, E / N
    recomputed from w, number of moves)."""
    a, b, gamma, _, pi, s2, ell = _split(hyper)
    n = Phi.shape[0]
    # the label's branch of bb_log_prob only: log(c_y + b sigmoid(t gamma f)), t = 2y - 1
    t_gamma = (2.0 * y - 1.0) * gamma
    log_cy = jnp.where(y > 0.5, _log(a), _log(1.0 - a - b))
    log_b = _log(b)

    def nll(f):
        return -jnp.sum(jnp.logaddexp(log_cy, log_b + log_sigmoid(t_gamma * f)), axis=-1)

    def one(d, st):
        w, f, e, moves = st
        col = Phi[:, d]
        f_cand = f[None, :] + steps[:, None] * col[None, :]
        w_cand = w[d] + steps
        change = (nll(f_cand) - nll(f) - gauss_laplace_log_prob(w_cand, pi, s2, ell)
                  + gauss_laplace_log_prob(w[d], pi, s2, ell)) / n
        values = e + change
        better = jnp.isfinite(values) & (-change > eps_loss)
        k = jnp.argmax(better)  # the first improving step, in the probe's order
        hit = better[k]
        return (jnp.where(hit, w.at[d].set(w_cand[k]), w), jnp.where(hit, f_cand[k], f),
                jnp.where(hit, values[k], e), moves + hit.astype(jnp.int32))

    e0 = mean_objective(w, Phi, y, hyper, "gauss-laplace")
    w, _, _, moves = lax.fori_loop(0, w.shape[0], one, (w, Phi @ w, e0, jnp.asarray(0, jnp.int32)))
    return w, mean_objective(w, Phi, y, hyper, "gauss-laplace"), moves


_descent_jit = jax.jit(_descent)
_probe_jit = jax.jit(_probe)


# -- the hard EM step ---------------------------------------------------------------------
@dataclass(frozen=True)
class EMStep:
    """One hard-assignment EM step: the new constants, the assignment (True: Gaussian)
    under the old ones, and which floors acted."""

    pi: float
    s2: float
    ell: float
    gaussian: np.ndarray
    floors: tuple[str, ...]


def hard_em_step(w, pi: float, s2: float, ell: float, *, s2_floor: float, ell_floor: float,
                 pi_floor: float | None = None) -> EMStep:
    """Assign w_j to the Gaussian where pi N(w_j; 0, s2) >= (1 - pi) Laplace(w_j; 0, ell),
    else to the Laplace; then ``pi = |G| / M``, s2 = mean_G w^2, ``ell = mean_L |w|`` (the maximum
    likelihood values for the hard assignment). Guards: pi in [1 / (2M), 1 - 1 / (2M)]
    (an empty component keeps half a member's share, so it can win weights back); an empty
    component keeps its old scale; s2 >= s2_floor, ell >= ell_floor."""
    w = np.asarray(w, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError("w must be a non-empty vector of finite weights")
    if not (0 < pi < 1 and s2 > 0 and ell > 0 and s2_floor > 0 and ell_floor > 0):
        raise ValueError(f"need 0 < pi < 1 and positive s2, ell and floors; got pi = {pi!r}, s2 = {s2!r}, "
                         f"ell = {ell!r}, floors {s2_floor!r}, {ell_floor!r}")
    m = w.size
    log_g = math.log(pi) - 0.5 * math.log(2 * math.pi * s2) - 0.5 * w * w / s2
    log_l = math.log1p(-pi) - math.log(2 * ell) - np.abs(w) / ell
    gaussian = log_g >= log_l
    n_g = int(gaussian.sum())
    floors = []
    pi_new = n_g / m
    lo = 0.5 / m if pi_floor is None else pi_floor
    if not lo <= pi_new <= 1 - lo:
        pi_new = min(max(pi_new, lo), 1 - lo)
        floors.append("pi")
    if n_g:
        s2_new = float(np.mean(w[gaussian] ** 2))
    else:
        s2_new = s2
        floors.append("empty G")
    if n_g < m:
        ell_new = float(np.mean(np.abs(w[~gaussian])))
    else:
        ell_new = ell
        floors.append("empty L")
    if s2_new < s2_floor:
        s2_new = s2_floor
        floors.append("s2")
    if ell_new < ell_floor:
        ell_new = ell_floor
        floors.append("ell")
    return EMStep(float(pi_new), float(s2_new), float(ell_new), gaussian, tuple(floors))


def kept_columns(w, spec: BBLR) -> np.ndarray:
    """Indices of the kept kernel functions: the members of the broader component under
    the spec's (pi, s2, ell) - the Gaussian when sqrt(s2) >= sqrt(2) ell (the Laplace's
    sd), else the Laplace."""
    w = np.asarray(w, dtype=float)
    log_g = math.log(spec.pi) - 0.5 * math.log(2 * math.pi * spec.s2) - 0.5 * w * w / spec.s2
    log_l = math.log1p(-spec.pi) - math.log(2 * spec.ell) - np.abs(w) / spec.ell
    gaussian = log_g >= log_l
    broad_is_gaussian = math.sqrt(spec.s2) >= math.sqrt(2.0) * spec.ell
    return np.flatnonzero(gaussian if broad_is_gaussian else ~gaussian)


def magnitude_count(w, fraction: float = MAGNITUDE_FRACTION) -> int:
    """How many ``|w_j|`` are at least ``fraction`` of the largest (0 for w = 0)."""
    a = np.abs(np.asarray(w, dtype=float))
    return int(np.sum(a >= fraction * a.max())) if a.size and a.max() > 0 else 0


# -- the driver -----------------------------------------------------------------------------
def _rel_change(new: EMStep, pi, s2, ell) -> float:
    return max(abs(new.pi - pi) / pi, abs(new.s2 - s2) / s2, abs(new.ell - ell) / ell)


def run_sparse_sla(spec: BBLR, Phi, y, config: SparseConfig, w0=None,
                   progress=None) -> tuple[np.ndarray, BBLR, dict[str, Any]]:
    """Algorithm 3 from the spec's (pi, s2, ell) and w0 (None: the configured start);
    ``progress(round, state)`` after every (descent, probe, EM) round if given, state
    {"gamma", "E" (the objective), "gaussian" (the EM's Gaussian members)}.

    Returns (w, final spec, record). The record holds ``trace`` (E after every descent and
    probe phase and at the start of every segment), ``segment_of`` (a segment: one gamma
    and one (pi, s2, ell)), ``stage_of``, ``stages``, ``em`` (every EM step: stage, round,
    constants, ``|G|``, floors that acted), ``unit`` (u), ``gaussian`` (the final assignment),
    ``kept`` (indices), ``n_kept``, ``n_large`` (magnitude count) and ``converged``."""
    if spec.prior != "gauss-laplace":
        raise ValueError(f"the sparse engine needs a spec with prior='gauss-laplace', got prior={spec.prior!r}")
    cfg = config.sla
    Phi_j, y_j = jnp.asarray(Phi), jnp.asarray(y, float)
    n, m = Phi.shape
    if w0 is None:
        w0 = logistic_start(Phi, y, spec.lam) if cfg.start == "lr" else np.zeros(m)
    w0 = np.asarray(w0, float)
    unit = float(np.sqrt(np.mean(w0 ** 2)))
    if not unit > 0:
        unit = 1.0  # a zero start: SLA's own units
    s2_floor, ell_floor = (config.sd_floor * unit) ** 2, config.ell_floor * unit
    pi, s2, ell = spec.pi, max(spec.s2, s2_floor), max(spec.ell, ell_floor)
    w = jnp.asarray(w0)
    settings = (cfg.r_eta, cfg.eta_min, cfg.eps_loss, cfg.eps_grad, cfg.max_descent)
    radius, step = cfg.radius * unit, cfg.step * unit
    trace, segment_of, stage_of, stages, em_log = [], [], [], [], []
    segment, converged = -1, True
    last = None

    def mark(value, stage):
        trace.append(n * float(value))
        segment_of.append(segment)
        stage_of.append(stage)

    for i, gamma in enumerate(gamma_schedule(spec.gamma, cfg)):
        steps = jnp.asarray(probe_steps(step, radius))
        rounds, settled, hyper, probe_due = 0, False, None, True
        while rounds < cfg.max_rounds:
            if hyper is None:
                hyper = jnp.asarray([spec.a, spec.b, gamma, spec.lam, pi, s2, ell])
                segment += 1
                mark(mean_objective(w, Phi_j, y_j, hyper, "gauss-laplace"), i)
            rounds += 1
            w, e, _ = _descent_jit(w, Phi_j, y_j, hyper, cfg.eta0, settings)
            mark(e, i)
            moves = None
            if probe_due:
                w, e, moves = _probe_jit(w, Phi_j, y_j, hyper, steps, cfg.eps_loss)
                moves = int(moves)
                mark(e, i)
            step_em = hard_em_step(np.asarray(w), pi, s2, ell, s2_floor=s2_floor, ell_floor=ell_floor,
                                   pi_floor=config.pi_floor)
            change = _rel_change(step_em, pi, s2, ell)
            same = last is not None and np.array_equal(step_em.gaussian, last)
            last = step_em.gaussian
            em_log.append({"stage": i, "round": rounds, "pi": step_em.pi, "s2": step_em.s2, "ell": step_em.ell,
                           "n_gaussian": int(step_em.gaussian.sum()), "floors": list(step_em.floors),
                           "change": change, "probe_moves": moves})
            if progress is not None:
                progress(len(em_log), {"gamma": float(gamma), "E": trace[-1],
                                       "gaussian": int(step_em.gaussian.sum())})
            if moves == 0 and same and change < config.em_tol:
                settled = True
                break
            # after a probe that moved nothing, with the assignment unchanged, only the
            # scales are still settling: the probe waits until the EM has settled (or the
            # assignment changes), then runs again - the stopping rule is unchanged
            probe_due = not (same and (moves == 0 or moves is None)) or change < config.em_tol
            if change > 0:
                pi, s2, ell = step_em.pi, step_em.s2, step_em.ell
                hyper = None  # a new segment: the objective is another function
        converged &= settled
        stages.append({"gamma": gamma, "radius": radius, "step": step, "rounds": rounds, "settled": settled,
                       "objective": trace[-1]})
        radius, step = radius * cfg.r_radius, step * cfg.r_step
    final = dataclass_replace(spec, pi=pi, s2=s2, ell=ell)
    w = np.asarray(w)
    kept = kept_columns(w, final)
    gaussian = hard_em_step(w, pi, s2, ell, s2_floor=s2_floor, ell_floor=ell_floor).gaussian
    return w, final, {"trace": np.asarray(trace), "segment_of": np.asarray(segment_of),
                      "stage_of": np.asarray(stage_of), "stages": stages, "em": em_log, "unit": unit,
                      "floors": {"s2": s2_floor, "ell": ell_floor}, "gaussian": gaussian, "kept": kept,
                      "n_kept": int(kept.size), "n_large": magnitude_count(w), "converged": bool(converged)}


# -- the two contracts --------------------------------------------------------------------
def _posterior(spec: BBLR, w, rec, seconds, *, columns=None) -> PointPosterior:
    """The answer as a point posterior of ``spec`` (the EM's final constants) over
    ``columns`` (None: all of them), the record in its info."""
    reason = "" if rec["converged"] else (
        "a stage ended on its round cap (max_rounds) before the probe and the EM settled: "
        + ", ".join(f"gamma {s['gamma']:g}" for s in rec["stages"] if not s["settled"]))
    w = np.asarray(w, float)
    value = w if columns is None else w[columns]
    extra = {"stages": rec["stages"], "segment_of": rec["segment_of"], "stage_of": rec["stage_of"],
             "em": rec["em"], "unit": rec["unit"], "floors": rec["floors"],
             "pi": spec.pi, "s2": spec.s2, "ell": spec.ell, "gaussian": rec["gaussian"], "kept": rec["kept"],
             "n_kept": rec["n_kept"], "n_large": rec["n_large"], "n_nonzero": int(np.sum(w != 0)),
             # the count every pruning engine reports under this key (compare's "weights kept")
             "n_active": rec["n_kept"],
             "kept_rule": "members of the broader mixture component under the final (pi, s2, ell)",
             "w_all": w, "objective_final": rec["stages"][-1]["objective"]}
    info = FitInfo(ENGINE_NAME, rec["converged"], int(sum(s["rounds"] for s in rec["stages"])), reason, seconds,
                   0.0, OBJECTIVE_NAME, rec["trace"], extra)
    return PointPosterior(spec, spec.sites(value.size), value, info)


def fit(spec, Phi, y, *, config: SparseConfig | None = None) -> PointPosterior:
    """Algorithm 3 from ``spec``'s (pi, s2, ell) and SLA's start: a point posterior of the
    spec the EM ends at (``dataclasses.replace(spec, pi=..., s2=..., ell=...)``; the spec
    given is where the EM starts, not the model the answer belongs to - the engine entry
    says so with ``other_model``). Every column is kept in the answer; the kept ones are
    listed in ``info.extra["kept"]``."""
    check_spec(spec, BBLR, ENGINE_NAME)
    Phi, y = check_design(Phi, y)
    config = config or SparseConfig()
    t0 = time.perf_counter()
    w, final, rec = run_sparse_sla(spec, Phi, y, config)
    post = _posterior(final, w, rec, time.perf_counter() - t0)
    post.info.extra["initial"] = {"pi": spec.pi, "s2": spec.s2, "ell": spec.ell}
    return post


#: the a, b of the end-to-end fit: from the class counts (BBLR2) or the weak Beta prior (BBLR1)
AB_RULES = ("counts", "weak")


def run_from_own_start(spec: BBLR, Phi, y, config: SparseConfig | None = None, progress=None):
    """Algorithm 3 from SLA's start (the L2-LR solution with the spec's lam) and the EM's
    own initial constants: (pi, s2, ell) = (init_pi, (init_sd u)^2, init_ell u), u the
    start's RMS weight. a, b, gamma are the spec's. Returns (w, final spec, record, the
    spec the EM started from). progress: as in :func:`run_sparse_sla`."""
    Phi, y = check_design(Phi, y)
    config = config or SparseConfig()
    w0 = logistic_start(Phi, y, spec.lam) if config.sla.start == "lr" else np.zeros(Phi.shape[1])
    unit = float(np.sqrt(np.mean(w0 ** 2)))
    unit = unit if unit > 0 else 1.0
    spec0 = dataclass_replace(spec, prior="gauss-laplace", pi=config.init_pi, s2=(config.init_sd * unit) ** 2,
                              ell=config.init_ell * unit)
    w, final, rec = run_sparse_sla(spec0, Phi, y, config, w0=w0, progress=progress)
    return w, final, rec, spec0


def fit_end_to_end(Phi_all, y, *, seed: int = 0, config: SparseConfig | None = None, gamma: float | None = None,
                   ab: str = "counts", progress=None) -> EndToEndFit:
    """Sparse KBBLR as the zoo runs it: a, b by ``ab`` ("counts": BBLR2, a = N+ / 2N,
    b = 1/2; "weak": BBLR1's alpha = beta = 1, n = 100), gamma (None: the zoo's default 4),
    Algorithm 3 from :func:`run_from_own_start` on all columns, and the answer restricted
    to the kept ones (the members of the broader component; the dropped weights are those
    the Laplace spike holds - exactly 0 but for any the probe left a step away: their
    number and the largest change of a training score from dropping them are recorded).
    No random numbers are drawn (``seed`` is the contract's). progress: as in
    :func:`run_sparse_sla`."""
    Phi_all, y = check_design(Phi_all, y)
    if ab not in AB_RULES:
        raise ValueError(f"ab must be one of {AB_RULES}, got {ab!r}")
    t0 = time.perf_counter()
    kwargs = {"gamma": DEFAULT_GAMMA if gamma is None else float(gamma), "prior": "gauss-laplace"}
    spec = BBLR.from_counts(y, **kwargs) if ab == "counts" else BBLR.weak_prior(**kwargs)
    w, final, rec, spec0 = run_from_own_start(spec, Phi_all, y, config, progress=progress)
    kept = rec["kept"]
    post = _posterior(final, w, rec, time.perf_counter() - t0, columns=kept)
    dropped = np.setdiff1d(np.arange(w.size), kept)
    post.info.extra.update(
        initial={"pi": spec0.pi, "s2": spec0.s2, "ell": spec0.ell, "a": spec0.a, "b": spec0.b, "ab": ab},
        dropped_nonzero=int(np.sum(w[dropped] != 0)),
        dropped_max_score_change=float(np.max(np.abs(Phi_all[:, dropped] @ w[dropped]))) if dropped.size else 0.0)
    return EndToEndFit(post, final, kept)
