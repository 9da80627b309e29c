"""Every ArviZ call of the project goes through this module (arviz 0.23 line, InferenceData).

ArviZ 1.x changes the data structures and needs Python >= 3.12; keeping all calls in one
place means one file to port. Nothing else in the project imports arviz.

Conventions shared with the NUTS reference, so that an approximation and the reference
can be put side by side (forest plots, the same diagnostics):
* posterior variables are the model's latent sites (``spec.sites(M)``), shaped
  (chain, draw, *site shape), with the site's ``dims`` (e.g. "w" -> ("basis",));
* constant data ``Phi`` has dims ("obs", "basis") and ``y`` has ("obs",);
* a Gaussian approximation is represented by draws from it with the reference's
  (chains, draws); a point estimate by a single draw, shape (1, 1, *site shape).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from typing import Any

import numpy as np

import matplotlib

# matplotlib's font cache folder, fixed (and remembered) now, outside _private_cache_home:
# arviz imports pyplot, whose font list would otherwise be rebuilt in a throwaway folder
matplotlib.get_cachedir()


@contextlib.contextmanager
def _private_cache_home():
    """XDG_CACHE_HOME pointed at a fresh temporary folder while the block runs.

    Importing arviz 0.23 makes ``~/.cache/arviz`` and writes a once-a-day stamp there
    (``daily_warning``, through one fixed temporary name): with a HOME that cannot be
    written even ``zoo --help`` died on it, and processes starting at once (a
    LocalCluster's workers) raced on the temporary name. The stamp only rations a
    FutureWarning that we silence anyway, so ArviZ gets a folder of this import's own."""
    saved = os.environ.get("XDG_CACHE_HOME")
    with tempfile.TemporaryDirectory(prefix="zoo-arviz-") as folder:
        os.environ["XDG_CACHE_HOME"] = folder
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("XDG_CACHE_HOME", None)
            else:
                os.environ["XDG_CACHE_HOME"] = saved


with warnings.catch_warnings(), _private_cache_home():
    # arviz 0.23 announces its 1.x refactor with a FutureWarning at import; we pin < 1.
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

from ...models.base import Site
from .atomic import atomic_write
from .figures import ShownFigure

#: dims of the data arrays stored next to the draws (constant_data / observed_data)
DATA_DIMS: dict[str, tuple[str, ...]] = {
    "Phi": ("obs", "basis"),
    "y": ("obs",),
    "Phi_train": ("obs", "basis"),
    "y_train": ("obs",),
    "Phi_test": ("obs_test", "basis"),
    "y_test": ("obs_test",),
    "alpha": ("basis",),
}

ARVIZ_VERSION = az.__version__


def site_dims(site: Site) -> tuple[str, ...]:
    """The ArviZ dims of a site: its own ``dims`` or ``<name>_dim_<i>`` (ArviZ's default)."""
    if len(site.dims) == len(site.shape):
        return tuple(site.dims)
    return tuple(f"{site.name}_dim_{i}" for i in range(len(site.shape)))


def _netcdf_attr(value: Any):
    """netCDF attributes hold strings and numbers only: encode the rest as JSON text."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def draws_to_idata(
    draws: dict[str, np.ndarray],
    sites: tuple[Site, ...],
    *,
    constant_data: dict[str, np.ndarray] | None = None,
    observed: dict[str, np.ndarray] | None = None,
    sample_stats: dict[str, np.ndarray] | None = None,
    attrs: dict[str, Any] | None = None,
) -> az.InferenceData:
    """Wrap draws {site: (chains, draws, *site.shape)} as InferenceData.

    Only the given sites enter the posterior group (in their order); extra keys of
    ``draws`` are ignored. ``sample_stats`` arrays are (chains, draws) (e.g. "diverging").
    Data arrays named in :data:`DATA_DIMS` get those dims. ``attrs`` go onto the posterior
    group; values that netCDF cannot store (dicts, lists, bools) are JSON-encoded.
    """
    posterior, dims = {}, {}
    lead = None
    for s in sites:
        if s.name not in draws:
            raise ValueError(f"draws lack site {s.name!r}")
        arr = np.asarray(draws[s.name], dtype=float)
        if arr.ndim != 2 + len(s.shape) or tuple(arr.shape[2:]) != tuple(s.shape):
            raise ValueError(
                f"site {s.name!r}: draws of shape {arr.shape}, expected (chains, draws, *{s.shape})"
            )
        if lead is not None and arr.shape[:2] != lead:
            raise ValueError(f"site {s.name!r} has (chains, draws) {arr.shape[:2]}, others {lead}")
        lead = arr.shape[:2]
        posterior[s.name] = arr
        dims[s.name] = list(site_dims(s))
    for group in (constant_data or {}), (observed or {}):
        dims.update(_data_dims(group))
    kwargs: dict[str, Any] = {}
    if constant_data:
        kwargs["constant_data"] = {k: np.asarray(v) for k, v in constant_data.items()}
    if observed:
        kwargs["observed_data"] = {k: np.asarray(v) for k, v in observed.items()}
    if sample_stats:
        kwargs["sample_stats"] = {k: np.asarray(v) for k, v in sample_stats.items()}
    clean_attrs = {k: _netcdf_attr(v) for k, v in (attrs or {}).items()}
    return az.from_dict(posterior=posterior, dims=dims, posterior_attrs=clean_attrs, **kwargs)


def _data_dims(data: dict[str, np.ndarray]) -> dict[str, list[str]]:
    dims = {}
    for name, value in data.items():
        if name in DATA_DIMS and np.ndim(value) == len(DATA_DIMS[name]):
            dims[name] = list(DATA_DIMS[name])
    return dims


def with_constant_data(idata: az.InferenceData, constant_data: dict[str, np.ndarray]) -> az.InferenceData:
    """A copy of idata whose constant_data group also holds ``constant_data`` (same
    names are replaced). Arrays named in :data:`DATA_DIMS` get those dims."""
    data = {k: np.asarray(v) for k, v in constant_data.items()}
    new_group = az.from_dict(constant_data=data, dims=_data_dims(data)).constant_data
    out = idata.copy()
    if "constant_data" in out.groups():
        old = out.constant_data.drop_vars([k for k in data if k in out.constant_data], errors="ignore")
        merged = old.merge(new_group, compat="override", combine_attrs="override")
        del out["constant_data"]
        out.add_groups(constant_data=merged)
    else:
        out.add_groups(constant_data=new_group)
    return out


def idata_to_draws(idata: az.InferenceData, sites: tuple[Site, ...]) -> dict[str, np.ndarray]:
    """The inverse of :func:`draws_to_idata` for the posterior group."""
    out = {}
    for s in sites:
        if s.name not in idata.posterior:
            raise KeyError(f"InferenceData has no posterior variable {s.name!r}")
        da = idata.posterior[s.name].transpose("chain", "draw", *site_dims(s))
        out[s.name] = np.asarray(da.values, dtype=float)
    return out


def posterior_variables_names(idata: az.InferenceData) -> tuple[str, ...]:
    """The names of the posterior group's variables."""
    return tuple(idata.posterior.data_vars)


def posterior_variables(idata: az.InferenceData, names) -> dict[str, np.ndarray]:
    """Draws {name: (chains, draws, *shape)} of the posterior group's variables ``names``,
    in their stored axis order after chain and draw (for sites that are not measured
    sites, such as a hierarchical model's scales: the evidence needs every latent)."""
    out = {}
    for name in names:
        if name not in idata.posterior:
            raise KeyError(f"InferenceData has no posterior variable {name!r}")
        da = idata.posterior[name]
        rest = [d for d in da.dims if d not in ("chain", "draw")]
        out[name] = np.asarray(da.transpose("chain", "draw", *rest).values, dtype=float)
    return out


def posterior_to_idata(posterior, key, chains: int = 4, draws: int = 1000, constant_data=None):
    """Any Posterior as InferenceData with the NUTS reference's names, dims and draw shape.

    Gaussian: ``chains * draws`` draws from it, shaped (chains, draws, ...).
    Point: one draw, shape (1, 1, *site shape) - it claims no spread, so there is nothing
    to repeat. Draws: its own draws unchanged (``key``, ``chains``, ``draws`` unused).
    """
    kind = getattr(posterior, "kind", "")
    sites = posterior.sites
    if kind == "draws":
        grouped = posterior.draws
    elif kind == "point":
        flat = posterior.sample(key, 1)
        grouped = {k: np.asarray(v).reshape((1, 1) + v.shape[1:]) for k, v in flat.items()}
    else:
        flat = posterior.sample(key, chains * draws)
        grouped = {k: np.asarray(v).reshape((chains, draws) + v.shape[1:]) for k, v in flat.items()}
    info = getattr(posterior, "info", None)
    attrs = {"posterior_kind": kind}
    if info is not None:
        attrs.update(engine=info.engine, converged=bool(info.converged), reason=info.reason)
    return draws_to_idata(grouped, sites, constant_data=constant_data, attrs=attrs)


def _per_coordinate(ds, sites) -> dict[str, np.ndarray]:
    return {s.name: np.asarray(ds[s.name].transpose(*site_dims(s)).values, dtype=float) for s in sites}


def summary_diagnostics(idata: az.InferenceData, var_names=None, sites: tuple[Site, ...] | None = None) -> dict:
    """Rank-normalized split R-hat and bulk/tail ESS (Vehtari et al. 2021) of the posterior.

    Returns {"rhat_max", "ess_bulk_min", "ess_tail_min", "per_site": {name: {"rhat",
    "ess_bulk", "ess_tail"}}} with per-site arrays shaped like the site. A NaN (e.g. a
    constant chain) propagates into the max/min, so a caller's comparison fails on it.
    """
    if sites is None:
        names = list(var_names) if var_names is not None else list(idata.posterior.data_vars)
        sites = tuple(
            Site(n, tuple(idata.posterior[n].shape[2:]), dims=tuple(idata.posterior[n].dims[2:])) for n in names
        )
    names = [s.name for s in sites]
    with warnings.catch_warnings():
        # ArviZ warns on NaN/degenerate chains; the NaN itself is what we report.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        rhat = _per_coordinate(az.rhat(idata, var_names=names, method="rank"), sites)
        bulk = _per_coordinate(az.ess(idata, var_names=names, method="bulk"), sites)
        tail = _per_coordinate(az.ess(idata, var_names=names, method="tail"), sites)
    all_rhat = np.concatenate([rhat[n].ravel() for n in names])
    all_bulk = np.concatenate([bulk[n].ravel() for n in names])
    all_tail = np.concatenate([tail[n].ravel() for n in names])
    return {
        "rhat_max": float(np.max(all_rhat)),
        "ess_bulk_min": float(np.min(all_bulk)),
        "ess_tail_min": float(np.min(all_tail)),
        "per_site": {n: {"rhat": rhat[n], "ess_bulk": bulk[n], "ess_tail": tail[n]} for n in names},
    }


def ess_bulk(draws) -> float:
    """Rank-normalized bulk ESS of one scalar quantity given as (chains, draws)."""
    arr = np.asarray(draws, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"ess_bulk expects (chains, draws), got shape {arr.shape}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(az.ess(arr, method="bulk"))


def psis_khat(log_weights) -> tuple[float, np.ndarray]:
    """Pareto-smoothed importance sampling (Vehtari et al. 2024) of one set of log weights.

    log_weights: (S,) finite log importance ratios (any additive constant).
    Returns (k-hat, smoothed normalized log weights of shape (S,)).
    Exactly constant weights have no tail to fit (ArviZ then reports k-hat = inf);
    callers that can meet them (a proposal equal to the target) must check first.
    """
    lw = np.asarray(log_weights, dtype=float).ravel()
    if not np.all(np.isfinite(lw)):
        raise ValueError("psis_khat needs finite log weights; drop the zero-weight draws first")
    lw = lw - lw.max()  # exp() of the largest weight is 1: no overflow
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        smoothed, khat = az.psislw(lw, reff=1.0)
    return float(np.asarray(khat)), np.asarray(smoothed)


def to_netcdf(idata: az.InferenceData, path) -> str:
    """Write idata to ``path`` atomically: a temporary file in the same folder, then
    os.replace, so a reader never sees a half-written file."""
    return atomic_write(path, lambda tmp: idata.to_netcdf(tmp, engine="h5netcdf"), suffix=".nc")


def from_netcdf(path) -> az.InferenceData:
    """Read InferenceData fully into memory (no open file handle left behind, and a
    damaged file fails here rather than at first access)."""
    with az.rc_context({"data.load": "eager"}):
        return az.from_netcdf(os.fspath(path), engine="h5netcdf")


def posterior_attrs(idata: az.InferenceData) -> dict[str, Any]:
    return dict(idata.posterior.attrs)


#: the forest plot's coordinates at most (one row per coordinate and posterior: at 100
#: coordinates and three posteriors the figure was 67 inches tall and took 11 s to draw)
FOREST_MAX_COORDS = 30


def forest_coords(idatas: dict[str, az.InferenceData], var_names, max_coords: int = FOREST_MAX_COORDS):
    """Which coordinates a forest plot shows: all of them if there are at most
    ``max_coords``; otherwise the ``max_coords`` where some posterior's mean is furthest
    from the first posterior's (the reference), in the first posterior's sds, in index
    order. Scalar sites are always shown and count towards the cap; only sites with one
    dimension are thinned.

    Returns (coords for az.plot_forest - {dim: [indices]}, or None when all are shown;
    the number of coordinates shown; the number there are).
    """
    first, *others = list(idatas.values())
    sizes = {v: int(np.prod(first.posterior[v].shape[2:], dtype=int)) for v in var_names}
    total = sum(sizes.values())
    if total <= max_coords:
        return None, total, total
    thinned = [v for v in var_names if first.posterior[v].ndim == 3]
    room = max_coords - sum(sizes[v] for v in var_names if v not in thinned)
    if not thinned or room < len(thinned):
        return None, total, total
    scores = []  # (distance, var, index)
    for v in thinned:
        draws = first.posterior[v].values.reshape(-1, sizes[v])
        centre, sd = draws.mean(0), draws.std(0)
        far = np.zeros(sizes[v])
        for other in others:
            m = other.posterior[v].values.reshape(-1, sizes[v]).mean(0)
            far = np.maximum(far, np.abs(m - centre) / np.where(sd > 0, sd, 1.0))
        scores += [(float(d), v, i) for i, d in enumerate(far)]
    scores.sort(key=lambda t: -t[0])
    keep = {v: [] for v in thinned}
    for _, v, i in scores[:room]:
        keep[v].append(i)
    coords = {}
    for v in thinned:
        dim = first.posterior[v].dims[2]
        coords[dim] = [first.posterior[v].coords[dim].values[i] for i in sorted(keep[v])]
    shown = total - sum(sizes[v] for v in thinned) + room
    return coords, shown, total


def forest_figure(
    idatas: dict[str, az.InferenceData], var_names, *, hdi_prob: float = 0.94, colors=None,
    coords: dict | None = None,
):
    """Forest plot (HDI intervals per coordinate) of several posteriors side by side, as a
    matplotlib Figure drawn off pyplot (the user's global backend and pyplot's
    figures are untouched; a notebook shows it with ``display``).

    idatas: {label: InferenceData}, e.g. {"NUTS": ref.idata, "Laplace": ...}. coords:
    the coordinates to show (as from :func:`forest_coords`; None: all).
    """
    labels = list(idatas)
    data = [idatas[k] for k in labels]
    n_coords = sum(
        int(np.prod(data[0].posterior[v].shape[2:], dtype=int))
        if not (coords and data[0].posterior[v].ndim == 3 and data[0].posterior[v].dims[2] in coords)
        else len(coords[data[0].posterior[v].dims[2]])
        for v in var_names
    )
    fig = ShownFigure(figsize=(7.0, 1.5 + 0.22 * n_coords * max(1, len(labels))))
    ax = fig.add_subplot(1, 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        az.plot_forest(
            data, model_names=labels, var_names=list(var_names), combined=True,
            hdi_prob=hdi_prob, ax=ax, show=False, **({"coords": coords} if coords else {}),
            **({"colors": list(colors)} if colors is not None else {}),
        )
    ax.set_xlabel(f"parameter value: median (dot), quartiles (thick), {100 * hdi_prob:g}% HDI (thin)")
    ax.set_ylabel("parameter (one row per posterior)")
    fig.tight_layout()
    return fig


def plot_forest(
    idatas: dict[str, az.InferenceData], var_names, path, *, hdi_prob: float = 0.94, colors=None,
    coords: dict | None = None,
) -> str:
    """:func:`forest_figure`, saved as PNG at ``path`` (atomically); returns the path."""
    fig = forest_figure(idatas, var_names, hdi_prob=hdi_prob, colors=colors, coords=coords)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110), suffix=".png")
