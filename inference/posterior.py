"""Posterior types returned by every engine and by the NUTS reference.

Three kinds, one interface:

* :class:`GaussianPosterior` - mean and Cholesky factor over the flat parameter vector
  (Laplace, EP, VB);
* :class:`PointPosterior`   - a single parameter value (MAP by EM/MM, SLA);
* :class:`DrawsPosterior`   - draws of shape ``(chains, draws, *site_shape)`` (NUTS, Gibbs,
  a Gaussian in an unconstrained space pushed through its transforms).

Each knows its spec and sites, can ``sample``, ``predict_proba`` on a new design matrix
and carries a :class:`FitInfo` (objective trace, iterations, timings, converged flag).
Conversion to ArviZ lives in :mod:`zoo.validation.base.arviz_adapter`, the only module that
imports ArviZ.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln as _gammaln

from ..models.base import Site, flatten, total_size, unflatten


class ApproximationFailed(RuntimeError):
    """An engine's approximation does not exist for this posterior (e.g. a Laplace
    approximation at a point where the Hessian of the log density is not negative
    definite). Raised instead of forcing an answer - regularizing the Hessian would hand
    out a Gaussian that approximates nothing - so callers such as ``zoo compare`` can
    report the engine as failed, with this message as the reason."""


@dataclass(frozen=True, eq=False)
class FitInfo:
    """How a fit went.

    seconds: warm wall time of the fit (compilation excluded); compile_seconds: the time
    the first, compiling call took beyond that (0 when measured without a cold call).
    trace: the engine's objective per iteration (log joint, ELBO, log evidence, ...),
    named by ``objective``. ``converged`` is False with a ``reason`` whenever the engine
    stopped on its iteration cap or hit a numerical problem - never a silent NaN.
    """

    engine: str
    converged: bool
    n_iter: int
    reason: str = ""
    seconds: float = float("nan")
    compile_seconds: float = 0.0
    objective: str = ""
    trace: np.ndarray = field(default_factory=lambda: np.zeros(0))
    extra: dict[str, Any] = field(default_factory=dict)

    def with_timing(self, seconds: float, compile_seconds: float) -> "FitInfo":
        """A copy with ``seconds`` and ``compile_seconds`` set, every other field kept."""
        return FitInfo(
            self.engine, self.converged, self.n_iter, self.reason, seconds,
            compile_seconds, self.objective, self.trace, self.extra,
        )


class Posterior:
    """Common interface. Subclasses set ``kind`` and implement the abstract pieces."""

    kind: str = "abstract"
    spec: Any
    sites: tuple[Site, ...]
    info: FitInfo

    # --- to implement ---
    def sample(self, key, n: int) -> dict[str, np.ndarray]:
        """n independent draws, as ``{site: array of shape (n, *site.shape)}``."""
        raise NotImplementedError

    def mean_flat(self) -> np.ndarray:
        """The posterior mean (a point estimate's value) as a flat vector of length
        :attr:`dim`, in the order of ``sites``."""
        raise NotImplementedError

    def sd_flat(self) -> np.ndarray | None:
        """Marginal standard deviations, or None for a point estimate."""
        raise NotImplementedError

    def predict_proba(self, Phi_new) -> np.ndarray:
        """The predictive probability ``p(y = 1 | x)`` of each row of the design ``Phi_new``,
        shape (n,)."""
        raise NotImplementedError

    # --- shared ---
    @property
    def dim(self) -> int:
        """The length of the flat parameter vector: the sites' total size."""
        return total_size(self.sites)

    def mean(self) -> dict[str, np.ndarray]:
        """:meth:`mean_flat` split into site values, ``{site: array of the site's shape}``."""
        return {k: np.asarray(v) for k, v in unflatten(self.mean_flat(), self.sites).items()}

    def flat_names(self) -> list[str]:
        """Human names of the flat coordinates, e.g. ['b', 'w[0]', 'w[1]', ...]."""
        names = []
        for s in self.sites:
            if s.shape == ():
                names.append(s.name)
            else:
                names.extend(f"{s.name}[{','.join(map(str, i))}]" for i in np.ndindex(*s.shape))
        return names

    def support_mask(self) -> np.ndarray:
        """Boolean per flat coordinate: True where the target's support is w >= 0."""
        return np.concatenate(
            [np.full(s.size, s.support == "nonnegative") for s in self.sites]
        )


@dataclass(frozen=True, eq=False)
class GaussianPosterior(Posterior):
    """N(mean, L L^T) over the flat parameter vector ordered as ``sites``.

    hyper_factors: for a mean-field approximation that also covers latents beside the
    measured sites (gridRVM's VB: q(w) q(alpha) q(beta)), those factors as
    {site: (shape, rate)} of independent Gammas; the metrics then take the importance
    weights (k-hat) on the joint, where the model's density is known in closed form.
    """

    spec: Any
    sites: tuple[Site, ...]
    mean_vec: np.ndarray
    chol: np.ndarray
    info: FitInfo
    hyper_factors: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    kind: str = field(default="gaussian", init=False)

    def __post_init__(self):
        d = total_size(self.sites)
        if self.mean_vec.shape != (d,) or self.chol.shape != (d, d):
            raise ValueError(
                f"Gaussian posterior shapes do not match the sites: mean {self.mean_vec.shape}, "
                f"chol {self.chol.shape}, expected ({d},) and ({d}, {d})"
            )
        if not (np.all(np.isfinite(self.mean_vec)) and np.all(np.isfinite(self.chol))):
            raise FloatingPointError(f"{self.info.engine}: posterior mean or covariance is not finite")

    @property
    def cov(self) -> np.ndarray:
        """The covariance ``L L^T``, shape (dim, dim)."""
        return self.chol @ self.chol.T

    def mean_flat(self):
        """The Gaussian's mean vector."""
        return np.asarray(self.mean_vec)

    def sd_flat(self):
        return np.sqrt(np.sum(self.chol**2, axis=1))

    def sample_flat(self, key, n: int) -> np.ndarray:
        """``n`` independent draws as flat vectors, shape (n, dim), from the JAX PRNG ``key``."""
        return self.flat_from_normals(jax.random.normal(key, (n, self.dim)))

    def flat_from_normals(self, z) -> np.ndarray:
        """The flat draws mean + L z of standard normals z (n, dim): :meth:`sample_flat`'s,
        for normals drawn elsewhere (SBC draws those of many posteriors in one call)."""
        return np.asarray(self.mean_vec[None, :] + z @ self.chol.T)

    def sample(self, key, n):
        return self.sample_from_normals(jax.random.normal(key, (n, self.dim)))

    def sample_from_normals(self, z) -> dict[str, np.ndarray]:
        """:meth:`sample`'s draws for the standard normals z (n, dim)."""
        return {k: np.asarray(v) for k, v in unflatten(self.flat_from_normals(z), self.sites).items()}

    def log_density_flat(self, theta) -> np.ndarray:
        """log N(theta | mean, cov) for a batch of flat vectors, shape (n,)."""
        diff = np.atleast_2d(theta) - self.mean_vec[None, :]
        sol = jax.scipy.linalg.solve_triangular(self.chol, diff.T, lower=True)
        logdet = 2.0 * np.sum(np.log(np.diag(self.chol)))
        return np.asarray(-0.5 * np.sum(sol**2, axis=0) - 0.5 * (self.dim * np.log(2 * np.pi) + logdet))

    def sample_hyper(self, key, n: int) -> dict[str, np.ndarray]:
        """n draws of each Gamma factor of ``hyper_factors`` and their total log density
        (key "log_q"); {} when there are none."""
        if not self.hyper_factors:
            return {}
        out, log_q = {}, np.zeros(n)
        for i, (name, (shape, rate)) in enumerate(sorted(self.hyper_factors.items())):
            shape, rate = np.asarray(shape, float), np.asarray(rate, float)
            g = np.asarray(jax.random.gamma(jax.random.fold_in(key, i), shape, (n,) + shape.shape)) / rate
            out[name] = g
            log_q += np.sum(shape * np.log(rate) - _gammaln(shape) + (shape - 1.0) * np.log(g) - rate * g, axis=1)
        out["log_q"] = log_q
        return out

    def predict_proba(self, Phi_new):
        """``E[p(y = 1 | f)]`` under the Gaussian's distribution of each row's linear predictor
        ``f``: the spec's ``gaussian_prob`` of its mean and variance (no sampling)."""
        A = np.asarray(self.spec.flat_design(Phi_new))
        mean_f = A @ self.mean_vec
        var_f = np.sum((A @ self.chol) ** 2, axis=1)
        return np.asarray(self.spec.gaussian_prob(mean_f, var_f))


@dataclass(frozen=True, eq=False)
class PointPosterior(Posterior):
    """A point estimate (MAP). ``sd_flat`` is None: it claims no uncertainty."""

    spec: Any
    sites: tuple[Site, ...]
    value: np.ndarray
    info: FitInfo
    kind: str = field(default="point", init=False)

    def __post_init__(self):
        if self.value.shape != (total_size(self.sites),):
            raise ValueError(f"point estimate has shape {self.value.shape}, expected ({total_size(self.sites)},)")
        if not np.all(np.isfinite(self.value)):
            raise FloatingPointError(f"{self.info.engine}: point estimate is not finite")

    def mean_flat(self):
        """The point estimate itself."""
        return np.asarray(self.value)

    def sd_flat(self):
        return None

    def sample(self, key, n):
        flat = np.broadcast_to(self.value, (n, self.dim))
        return {k: np.asarray(v) for k, v in unflatten(flat, self.sites).items()}

    def predict_proba(self, Phi_new):
        """The plug-in prediction: the spec's link applied to the linear predictor at the
        point estimate."""
        params = unflatten(self.value, self.sites)
        return np.asarray(self.spec.prob(self.spec.linear_predictor(params, Phi_new)))


@dataclass(frozen=True, eq=False)
class DrawsPosterior(Posterior):
    """Draws ``{site: (chains, draws, *shape)}`` - the NUTS reference and sampler engines.

    log_weights: None, or (chains, draws) importance log weights log p(z, y) - log q(z)
    of each draw, where the draws come from an approximation q with a density over the
    model's whole latent space z (every sample site of its NumPyro model, Jacobians of the
    transforms included): SVI's guides, Pathfinder. They give the Pareto k-hat of q as a
    proposal and the importance-corrected draws (``inference/importance.py``).
    """

    spec: Any
    sites: tuple[Site, ...]
    draws: dict[str, np.ndarray]
    info: FitInfo
    log_weights: np.ndarray | None = None
    kind: str = field(default="draws", init=False)

    def __post_init__(self):
        shapes = {s.name: s.shape for s in self.sites}
        lead = None
        for name, shape in shapes.items():
            if name not in self.draws:
                raise ValueError(f"draws lack site {name!r}")
            arr = self.draws[name]
            if arr.ndim != 2 + len(shape) or tuple(arr.shape[2:]) != shape:
                raise ValueError(f"site {name!r}: draws of shape {arr.shape}, expected (chains, draws, *{shape})")
            lead = arr.shape[:2] if lead is None else lead
            if arr.shape[:2] != lead:
                raise ValueError("all sites must have the same (chains, draws)")
        if self.log_weights is not None:
            lw = np.asarray(self.log_weights)
            if lw.shape != tuple(lead):
                raise ValueError(f"log_weights of shape {lw.shape}, expected (chains, draws) = {tuple(lead)}")
            if np.any(np.isnan(lw)) or np.any(lw == np.inf):
                raise ValueError("log_weights must be finite or -inf (a draw outside the target's support)")

    @property
    def n_chains(self) -> int:
        """The number of chains (the draws' first axis)."""
        return self.draws[self.sites[0].name].shape[0]

    @property
    def n_draws(self) -> int:
        """The number of draws per chain (the draws' second axis)."""
        return self.draws[self.sites[0].name].shape[1]

    def flat_draws(self) -> np.ndarray:
        """All draws as (chains * draws, dim) in flat order."""
        pooled = {k: v.reshape((-1,) + v.shape[2:]) for k, v in self.draws.items()}
        return np.asarray(flatten(pooled, self.sites))

    def mean_flat(self):
        """The mean of all draws, pooled over chains, in flat order (unweighted: the
        ``log_weights`` are not applied)."""
        return self.flat_draws().mean(0)

    def sd_flat(self):
        return self.flat_draws().std(0, ddof=1)

    def sample(self, key, n):
        flat = self.flat_draws()
        idx = np.asarray(jax.random.choice(key, flat.shape[0], (n,), replace=n > flat.shape[0]))
        return {k: np.asarray(v) for k, v in unflatten(flat[idx], self.sites).items()}

    def predict_proba(self, Phi_new, max_draws: int = 4000):
        """Posterior predictive mean of p(y=1|x), averaged over (up to max_draws) draws."""
        flat = self.flat_draws()
        if flat.shape[0] > max_draws:  # evenly thinned, deterministic
            flat = flat[np.linspace(0, flat.shape[0] - 1, max_draws).astype(int)]
        params = unflatten(flat, self.sites)
        p = self.spec.prob(self.spec.linear_predictor(params, jnp.asarray(Phi_new)))
        return np.asarray(jnp.mean(p, axis=0))
