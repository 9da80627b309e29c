"""A certified reference written in posteriordb's layout, so that others can use the zoo's
references as the zoo uses posteriordb's.

posteriordb keeps a posterior's reference draws as ``draws/<name>.json.zip``: a zip holding one
JSON file, a list with one object per chain mapping each parameter's Stan name (``w[3]`` for
entry 2 of a vector ``w``; ``x[2,3]`` row-major, indices from 1) to its draws; and
``info/<name>.info.json``: how they were made (``inference``: method and its arguments),
their diagnostics per parameter (bulk and tail ESS, R-hat, divergent transitions per chain) and
the checks they passed. :func:`write_posteriordb` writes both for a zoo reference, its info
holding beside posteriordb's keys the zoo's own: the certificate (certified or not, and why),
the certification rule, the sampler and its settings, the seed, the model (its spec), the
data's digests and the package versions. An uncertified reference is written only when asked
(``allow_uncertified``), and its info says it is not certified.
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import os
import zipfile
from dataclasses import asdict

import numpy as np

from ..base import arviz_adapter as adapter
from ..base.atomic import _jsonable, atomic_write
from .certification import CERTIFICATION
from .config import Reference


def stan_names(site) -> list[str]:
    """The Stan names of a site's coordinates in flat (row-major) order: ``mu``; ``w[1]``,
    ``w[2]``, ...; ``x[1,1]``, ``x[1,2]``, ..."""
    if not site.shape:
        return [site.name]
    return [f"{site.name}[{','.join(str(i + 1) for i in index)}]" for index in np.ndindex(*site.shape)]


def posteriordb_draws(reference: Reference) -> list[dict[str, list[float]]]:
    """The reference's draws as posteriordb stores them: one object per chain, Stan name ->
    that chain's draws."""
    post = reference.posterior
    chains = []
    for c in range(post.n_chains):
        chain = {}
        for site in post.sites:
            values = np.asarray(post.draws[site.name][c], dtype=float).reshape(post.n_draws, -1)
            for j, name in enumerate(stan_names(site)):
                chain[name] = values[:, j].tolist()
        chains.append(chain)
    return chains


def posteriordb_info(reference: Reference, name: str) -> dict:
    """The info object of the reference's draws: posteriordb's keys, and the zoo's certificate
    and provenance under ``zoo``."""
    post = reference.posterior
    names = [n for s in post.sites for n in stan_names(s)]
    per_site = reference.diagnostics.get("per_site", {})

    def per_name(statistic):
        # the certification's own numbers (rank-normalized R-hat, bulk and tail ESS), site by
        # site in row-major order, as the names run
        return [float(v) for s in post.sites
                for v in np.ravel(np.asarray(per_site[s.name][statistic], dtype=float))]

    provenance = reference.provenance
    sampler = dict(provenance.get("sampler", {}))
    stats = adapter.group(reference.idata, "sample_stats") if "sample_stats" in adapter.groups(reference.idata) \
        else {}
    diverging = stats["diverging"].values if "diverging" in stats else np.zeros((post.n_chains, post.n_draws), bool)
    return {
        "name": name,
        "inference": {"method": f"zoo reference: {reference.sampler}", "method_arguments": {
            **sampler, "chains": post.n_chains, "draws_per_chain": post.n_draws, "seed": provenance.get("seed")}},
        "diagnostics": {
            "diagnostic_information": {"names": names},
            "ndraws": post.n_chains * post.n_draws,
            "nchains": post.n_chains,
            "effective_sample_size_bulk": per_name("ess_bulk"),
            "effective_sample_size_tail": per_name("ess_tail"),
            "r_hat": per_name("rhat"),
            "divergent_transitions": [int(np.sum(d)) for d in np.asarray(diverging)],
        },
        "checks_made": {"zoo_certified": bool(reference.certified)},
        "comments": None if reference.certified else "NOT CERTIFIED: " + "; ".join(reference.failures),
        "added_by": "sparse-bayes-zoo",
        "added_date": _dt.date.today().isoformat(),
        "versions": provenance.get("package_versions", {}),
        "zoo": {
            "certified": bool(reference.certified),
            "failures": list(reference.failures),
            "certification_rule": asdict(CERTIFICATION),
            "diagnostics": {k: v for k, v in reference.diagnostics.items() if k != "per_site"},
            "sampler": sampler,
            "seed": provenance.get("seed"),
            "spec": provenance.get("spec"),
            "data": provenance.get("data"),
            "python": provenance.get("python"),
        },
    }


def write_posteriordb(reference: Reference, out_dir, name: str, *, allow_uncertified: bool = False) -> dict[str, str]:
    """Write ``reference`` under ``out_dir`` in posteriordb's layout: ``draws/<name>.json.zip``
    and ``info/<name>.info.json``, each atomically; returns their paths. ValueError for an
    uncertified reference unless ``allow_uncertified`` (its info then says so), and for a
    name that is not a plain file name."""
    if not name or any(c in name for c in "/\\\0") or name in (".", ".."):
        raise ValueError(f"a posterior's name must be a plain file name, got {name!r}")
    if not reference.certified and not allow_uncertified:
        raise ValueError(f"the {reference.sampler} reference is not certified ({'; '.join(reference.failures)}): "
                         "not exported as a reference posterior")
    draws_path = os.path.join(os.fspath(out_dir), "draws", f"{name}.json.zip")
    info_path = os.path.join(os.fspath(out_dir), "info", f"{name}.info.json")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}.json", json.dumps(posteriordb_draws(reference)))
    payload = buffer.getvalue()
    atomic_write(draws_path, lambda tmp: open(tmp, "wb").write(payload), suffix=".zip")
    text = json.dumps(_jsonable(posteriordb_info(reference, name)), indent=2)
    atomic_write(info_path, lambda tmp: open(tmp, "w", encoding="utf-8").write(text), suffix=".json")
    return {"draws": draws_path, "info": info_path}


__all__ = ["stan_names", "posteriordb_draws", "posteriordb_info", "write_posteriordb"]
