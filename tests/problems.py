"""Test problems shared by several test files, written once (imported as a plain module:
pytest puts tests/ on sys.path; session fixtures live in conftest.py).

* :class:`NormalMeans` - a conjugate known-answer model, complete enough to pass through
  the reference pipeline and the metrics;
* Ripley's data, always read through ``zoo.data`` (the catalog's ``ripley`` entry):
  :func:`ripley` (the raw training or test points), :func:`ripley_split` (the catalog's
  :class:`~zoo.data.Split`) and :func:`ripley_subset` (a fixed random subset of the
  training points);
* :func:`grid_table_problem` - Gaussian inputs laid out as a gridRVM table, with planted,
  random or no signal in the labels.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import ndtr

import zoo  # noqa: F401  (float64)
from zoo import data as datasets
from zoo.models.base import Site


class NormalMeans:
    """mu_j ~ N(0, tau^2); the columns of Phi are observations x_ij ~ N(mu_j, sigma^2).

    The posterior is Gaussian: mu_j | x ~ N(sum_i x_ij / sigma^2 / P, 1/P) with
    P = 1/tau^2 + n/sigma^2. ``y`` (0/1 labels, required by the input checks) does not
    enter the likelihood; the link (probit of f = Phi mu) only serves the predictive
    metrics, so the spec is a complete ModelSpec.
    """

    name = "normal_means"

    def __init__(self, tau=2.0, sigma=1.0):
        self.tau, self.sigma = tau, sigma

    def sites(self, M):
        return (Site("mu", (M,), "real", ("basis",)),)

    def model(self, Phi, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, self.tau).expand([Phi.shape[1]]).to_event(1))
        numpyro.sample("x", dist.Normal(mu, self.sigma).to_event(1), obs=Phi)

    def linear_predictor(self, params, Phi):
        return jnp.einsum("nm,...m->...n", jnp.asarray(Phi), jnp.asarray(params["mu"]))

    def prob(self, f):
        return ndtr(f)

    def gaussian_prob(self, mean_f, var_f):
        return ndtr(mean_f / jnp.sqrt(1.0 + var_f))

    def flat_design(self, Phi):
        return jnp.asarray(Phi)

    def to_dict(self):
        return {"model": self.name, "tau": self.tau, "sigma": self.sigma}

    def exact_posterior(self, Phi):
        """Closed-form posterior mean (shape (M,)) and sd (a scalar, equal for all j)."""
        precision = 1.0 / self.tau**2 + Phi.shape[0] / self.sigma**2
        return Phi.sum(0) / self.sigma**2 / precision, 1.0 / np.sqrt(precision)


# --------------------------------------------------------------------------------------
# Ripley's synthetic data (250 training, 1000 test points, two inputs, 0/1 labels)
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _ripley_raw():
    return datasets.load("ripley", 0, standardize=False)


def ripley_split(standardize: bool = True):
    """The catalog's Ripley split (``zoo.data.load("ripley", 0, ...)``), fresh arrays."""
    return datasets.load("ripley", 0, standardize=standardize)


def ripley(train: bool = True):
    """Ripley's raw training (250) or test (1000) points, (X, y) - copies, free to edit."""
    s = _ripley_raw()
    X, y = (s.X_train, s.y_train) if train else (s.X_test, s.y_test)
    return X.copy(), y.copy()


def ripley_subset(n: int, seed: int, standardize_on: str = "all"):
    """n Ripley training points, a fixed random subset (``default_rng(seed).choice``).

    standardize_on: "all" standardizes the inputs on all 250 training points before the
    subset is taken (tests/inference/test_pcvm_laplace.py, test_expectation_propagation.py,
    test_generic_laplace.py); "subset" standardizes on the n chosen points
    (tests/inference/test_pcvm_em.py)."""
    X, y = ripley()
    if standardize_on == "all":
        X = (X - X.mean(0)) / X.std(0)
    elif standardize_on != "subset":
        raise ValueError(f"standardize_on must be 'all' or 'subset', got {standardize_on!r}")
    idx = np.random.default_rng(seed).choice(X.shape[0], n, replace=False)
    X, y = X[idx], y[idx]
    if standardize_on == "subset":
        X = (X - X.mean(0)) / X.std(0)
    return X, y


# --------------------------------------------------------------------------------------
# gridRVM: a table problem
# --------------------------------------------------------------------------------------
def grid_table_problem(shape=(3, 4), n=30, seed=0, signal="planted", scale=1.0):
    """n points with Gaussian inputs, one per cell of an M1 x M2 table (row-major), and
    0/1 labels; the RNG stream: inputs, then the weights (``"random"`` only), then labels.

    signal:
      "planted" - logistic labels of weights 2 in row 0 plus 1 in column 1 (column 0 when
                  there is one column) (tests/inference/test_grid_vb.py);
      "random"  - logistic labels of weights ``scale * N(0, 1) / sqrt(M) * 2``
                  (tests/validation/references/test_grid_gibbs.py);
      "none"    - fair coin labels, independent of the inputs (tests/models/test_grid_rvm_model.py).
    """
    rng = np.random.default_rng(seed)
    m = shape[0] * shape[1]
    X = rng.normal(size=(n, m))
    if signal == "none":
        return X, (rng.uniform(size=n) < 0.5).astype(float)
    if signal == "planted":
        w = np.zeros(shape)
        w[0] = 2.0
        w[:, min(1, shape[1] - 1)] += 1.0
        w = w.ravel()
    elif signal == "random":
        w = scale * rng.standard_normal(m) / np.sqrt(m) * 2.0
    else:
        raise ValueError(f"signal must be 'planted', 'random' or 'none', got {signal!r}")
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ w))).astype(float)
    return X, y
