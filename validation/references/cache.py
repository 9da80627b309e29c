"""The disk cache of references: content keys, atomic entries, certificates recomputed on
every read.

An entry is a netCDF file of every sampled site and the sampler statistics, then a JSON
record (the commit mark) holding the digest of those draws and statistics. The key hashes
the model and its code, the data, the sampler's settings and code, the certification rule
and the package versions (:func:`cache_key`); a stored certificate is never trusted: reading
an entry recomputes it from the draws with the current rule.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import asdict

import jax
import numpy as np
import numpyro

from ...inference.posterior import DrawsPosterior
from ...models.base import Site
from ..base import arviz_adapter as adapter
from ..base.atomic import _jsonable, write_text_atomic
from ..base.code_digest import code_digest
from .certification import CERTIFICATION, _certify_run, _checks, _diagnosed_sites
from .config import Reference, ReferenceConfig, _fit_info, _sampler_name
from .sampler import get_sampler

#: bump when the cache layout changes, so old entries are recomputed rather than misread
#: (2: every sampled site stored, content digest over draws and statistics, no stored
#: certificate)
CACHE_FORMAT = 2


def package_versions() -> dict[str, str]:
    return {
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "arviz": adapter.ARVIZ_VERSION,
        "numpy": np.__version__,
    }


def _array_digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(a.shape).encode())
    h.update(a.tobytes())
    return h.hexdigest()


def _content_digest(draws: dict[str, np.ndarray], stats: dict[str, np.ndarray]) -> str:
    """Digest of everything the certificate is computed from: the draws of every
    sampled site and the sampler statistics."""
    h = hashlib.sha256()
    for group, arrays in (("draws", draws), ("stats", stats)):
        for name in sorted(arrays):
            h.update(f"{group}/{name}".encode())
            h.update(_array_digest(np.asarray(arrays[name], dtype=np.float64)).encode())
    return h.hexdigest()


def model_code_digest(spec) -> str:
    """Digest of the source that defines the spec's model (its module and the zoo modules
    it imports: distributions, special functions, checks)."""
    return code_digest((type(spec).__module__,), objects=(type(spec),))


def cache_key(spec, Phi: np.ndarray, y: np.ndarray, config: ReferenceConfig) -> str:
    """Content hash of (model + hyper-parameters, the model's code, data, sampler settings
    and code, the certification rule, package versions)."""
    payload = {
        "spec": spec.to_dict(),
        "model_code": model_code_digest(spec),
        "Phi": _array_digest(Phi),
        "y": _array_digest(y),
        "sampler": config.sampler_settings(),
        "sampler_code": get_sampler(config.sampler).code_digest(),
        "certification_rule": asdict(CERTIFICATION),
        "versions": package_versions(),
        "cache_format": CACHE_FORMAT,
    }
    text = json.dumps(_jsonable(payload), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _atomic_write_text(path: str, text: str) -> None:
    write_text_atomic(path, text)


def _cache_paths(cache_dir, key: str, sampler: str = "nuts") -> tuple[str, str]:
    base = os.path.join(os.fspath(cache_dir), f"{sampler}-{key[:32]}")
    return base + ".nc", base + ".json"


def _stored_draws_and_stats(idata) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every posterior variable as (chains, draws, ...) and every sampler statistic as
    (chains, draws), as stored."""
    post = idata.posterior
    draws = {name: np.asarray(post[name].transpose("chain", "draw", ...).values, dtype=float)
             for name in post.data_vars}
    stats = {}
    if "sample_stats" in idata.groups():
        ss = idata.sample_stats
        stats = {name: np.asarray(ss[name].transpose("chain", "draw", ...).values) for name in ss.data_vars}
    return draws, stats


def _write_cache(cache_dir, key: str, reference: Reference) -> str:
    """netCDF first, provenance JSON last: the JSON is the commit mark of an entry, and it
    names the digest of the draws and statistics it belongs to, so a half-written or
    swapped netCDF file is detected on reading. No certificate is stored as a fact: the
    provenance keeps the one computed when the run ended, for the record, and every read
    recomputes it from the draws."""
    nc_path, json_path = _cache_paths(cache_dir, key, _sampler_name(reference.provenance["sampler"]))
    adapter.to_netcdf(reference.idata, nc_path)
    record = {
        "cache_format": CACHE_FORMAT,
        "cache_key": key,
        "content_sha256": _content_digest(*_stored_draws_and_stats(reference.idata)),
        "seconds": reference.seconds,
        "compile_seconds": reference.compile_seconds,
        "provenance": reference.provenance,
    }
    _atomic_write_text(json_path, json.dumps(_jsonable(record), indent=1, sort_keys=True))
    return nc_path


def _read_cache(cache_dir, key: str, spec, sites: tuple[Site, ...], config: ReferenceConfig) -> Reference | None:
    """The cached Reference, or None when there is no complete, intact entry.

    The certificate is recomputed from the stored draws and statistics with the current
    rule; the record contributes only what cannot be recomputed (timings, provenance).
    """
    nc_path, json_path = _cache_paths(cache_dir, key, config.sampler)
    if not (os.path.exists(nc_path) and os.path.exists(json_path)):
        return None
    try:
        with open(json_path) as fh:
            record = json.load(fh)
        if record.get("cache_format") != CACHE_FORMAT or record.get("cache_key") != key:
            raise ValueError("cache record belongs to another key or format")
        idata = adapter.from_netcdf(nc_path)
        stored, stats = _stored_draws_and_stats(idata)
        if _content_digest(stored, stats) != record["content_sha256"]:
            raise ValueError("draws do not match the digest recorded with them")
        draws = adapter.idata_to_draws(idata, sites)
        stored.update(draws)  # the measured sites in their own axis order
        diagnosed = _diagnosed_sites(sites, stored)
        certified, failures, diagnostics, _ = _certify_run(
            stored, stats, diagnosed, get_sampler(config.sampler).runner, config.sampler_settings())
        diagnostics = _jsonable(diagnostics)
        provenance = dict(record["provenance"], certified=certified, checks=_checks(diagnostics),
                          diagnostics={k: v for k, v in diagnostics.items() if k != "per_site"})
        info = _fit_info(certified, failures, record["seconds"], record["compile_seconds"],
                         provenance["sampler"], diagnostics)
        posterior = DrawsPosterior(spec, sites, draws, info)
    except Exception as err:  # any damage: recompute, never crash or trust it
        warnings.warn(f"ignoring unreadable reference cache entry {nc_path}: {type(err).__name__}: {err}")
        return None
    return Reference(
        posterior=posterior, idata=idata, certified=certified, failures=failures, diagnostics=diagnostics,
        seconds=float(record["seconds"]), provenance=provenance,
        compile_seconds=float(record["compile_seconds"]), from_cache=True, cache_path=nc_path,
    )
