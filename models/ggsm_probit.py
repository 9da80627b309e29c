"""GGSM probit: probit regression with a generalized Gaussian scale mixture prior
(Liu, Wu & Zhou, the GGIG paper; DERIVATIONS.md §2). ::

    p(y_n = 1 | w) = Phi( phi(x_n)^T w )
    w_i | lambda  ~  GeneralizedNormal(lambda, q)   i.i.d.,  q in (0, 2]
                     density q / (2 lambda^(1/q) Gamma(1/q)) exp(-|w_i|^q / lambda)
    lambda        ~  InvGamma(a, b)                 (shape a, scale b), one lambda shared

The shape q sets how sparse the weights are (q = 2: Gaussian, q = 1: Laplace, q -> 0:
ever spikier); the paper chooses it by cross-validation from {0.1, 0.5, 1.0, 1.5, 2.0}.

The bias is not a separate site: as in the paper, phi(x) carries a constant column
(``LinearBasis(with_bias=True)`` gives [1, x]; the kernel design is [1, K]), and its
weight has the same prior as every other weight.

Prior on lambda. The paper uses a = b = 1e-3 (near Jeffreys). Two facts make that a bad
*default*: (i) the marginal prior of w is then proportional to ``(b + sum |w_i|^q)^-(a + n/q)``,
which with b -> 0 rewards shrinking all of w towards 0 by up to (n/q) log(1/b) nats, so
the MAP iteration of the paper can collapse to w = 0 (DERIVATIONS.md §2.5), and (ii) NUTS does not
certify on that posterior even at q = 2 (R-hat 1.17 in the probe of the issue). The default
here is a = b = 1 (a proper, weakly informative prior: lambda has mode 1/2 and no mean),
with which NUTS certifies at q = 2; ``GGSMProbit.paper_prior()`` gives a = b = 1e-3.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import ndtr

from .checks import check_positive
from .base import Site
from .distributions import GeneralizedNormal, ProbitBernoulli

#: the shapes the paper cross-validates over
Q_GRID = (0.1, 0.5, 1.0, 1.5, 2.0)
#: the paper's near-Jeffreys InvGamma(a, b) on lambda
PAPER_A = PAPER_B = 1e-3


@dataclass(frozen=True, eq=False)
class GGSMProbit:
    """GGSM probit spec.

    - q: shape of the generalized normal prior, in (0, 2] (the scale-mixture bound of the
      paper's MM algorithm needs q <= 2).
    - a, b: shape and scale of the InvGamma prior on lambda.
    """

    q: float = 1.0
    a: float = 1.0
    b: float = 1.0
    name: str = field(default="ggsm-probit", init=False)

    def __post_init__(self):
        q = float(self.q)
        if not (0.0 < q <= 2.0):
            raise ValueError(f"q must lie in (0, 2], got {self.q!r}")
        check_positive(self.a, "a")
        check_positive(self.b, "b")
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "a", float(self.a))
        object.__setattr__(self, "b", float(self.b))

    @classmethod
    def paper_prior(cls, q: float = 1.0) -> "GGSMProbit":
        """The paper's InvGamma(1e-3, 1e-3) on lambda."""
        return cls(q=q, a=PAPER_A, b=PAPER_B)

    # -- the contract -------------------------------------------------------------
    def sites(self, n_basis: int) -> tuple[Site, ...]:
        """The shared scale ``lam`` (positive) and the weights ``w``, one per basis column
        (the bias is a column of the design, not a site)."""
        return (Site("lam", (), "positive"), Site("w", (n_basis,), "real", ("basis",)))

    def model(self, Phi, y=None):
        """The NumPyro model: ``lam`` from its InvGamma prior, i.i.d. generalized normal
        weights given ``lam``, and the probit likelihood of ``f = Phi @ w``."""
        Phi = jnp.asarray(Phi)
        n_basis = Phi.shape[1]
        lam = numpyro.sample("lam", dist.InverseGamma(self.a, self.b))
        w = numpyro.sample("w", GeneralizedNormal(lam, self.q).expand([n_basis]).to_event(1))
        numpyro.sample("y", ProbitBernoulli(Phi @ w), obs=y)

    def linear_predictor(self, params, Phi):
        """``f = Phi @ w``, shape (..., n), for site values with any batch dims in front."""
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["w"]))

    def prob(self, f):
        """``p(y = 1 | f) = Phi(f)``, the standard normal CDF."""
        return ndtr(f)

    def gaussian_prob(self, mean_f, var_f):
        """E[Phi(f)] for f ~ N(mean_f, var_f) (exact)."""
        return ndtr(mean_f / jnp.sqrt(1.0 + var_f))

    # -- helpers ------------------------------------------------------------------
    def flat_design(self, Phi):
        """f = Phi @ w: the design is the flat design of w (lambda does not enter f)."""
        return jnp.asarray(Phi)

    def log_marginal_prior(self, w):
        """log p(w) with lambda integrated out, up to a constant:
        ``-(a + n/q) log(b + sum |w_i|^q)`` (the objective of DERIVATIONS.md §2.4)."""
        w = jnp.asarray(w)
        n = w.shape[-1]
        return -(self.a + n / self.q) * jnp.log(self.b + jnp.sum(jnp.abs(w) ** self.q, axis=-1))

    def with_params(self, **overrides) -> "GGSMProbit":
        """A copy with the given hyper-parameters replaced (checked as in the constructor)."""
        return replace(self, **overrides)

    def constant_data(self, n_basis: int) -> dict[str, Any]:
        """Hyper-parameters as arrays, for the constant_data group of InferenceData."""
        import numpy as np

        return {"q": np.asarray(self.q), "a": np.asarray(self.a), "b": np.asarray(self.b)}

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a JSON-able dict, for hashes and reports."""
        return {"model": self.name, "q": self.q, "a": self.a, "b": self.b}
