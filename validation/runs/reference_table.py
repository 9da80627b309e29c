"""Building blocks of the reference tables (benchmarks/ggsm_references.py,
gig_references.py, grid_references.py, bblr_references.py): one JSON cell per setting,
written atomically and skipped when it exists, each running every sampler of the model's
reference chain and recording them the same way, and the agreement of two references where
both certify. Their table cells in words are the report wing's
(``validation/report/reference_table_report.py``)."""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable

from ..base.signing import REFERENCE_TABLE_CELL, read_signed_json, write_signed_json
from ..references import ReferenceTimeout, run_reference
from .compare import default_references
from .results import ReferenceSummary


def tried_record(summary: dict[str, Any]) -> dict[str, Any]:
    """What a cell keeps of one entry of a comparison's ``references_tried``."""
    return {"sampler": summary["sampler_name"], "certified": summary["certified"],
            "rhat_max": summary["rhat_max"], "ess_bulk_min": summary["ess_bulk_min"],
            "divergences": summary["divergences"], "seconds": summary["seconds"],
            "draws_per_chain": summary["sampler"].get("num_samples_total"),
            "time_limit": summary.get("time_limit"), "failures": summary["failures"][:3]}


def load_or_run(path: str, label: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The cell stored at ``path``, or ``run()``'s, written there atomically (so an
    interrupted table resumes at the first missing cell)."""
    stored = read_signed_json(path, REFERENCE_TABLE_CELL, "stored reference-table cell")
    if stored is not None:
        return stored
    print(f"{label} ...", flush=True)
    cell = run()
    write_signed_json(cell, path, REFERENCE_TABLE_CELL)
    print(f"  reference {cell['reference']['sampler']} certified={cell['reference']['certified']} "
          f"({cell['wall_seconds']:.0f} s)", flush=True)
    return cell


def median_agreement(post_a, post_b, Phi_test) -> dict[str, Any]:
    """How far two reference posteriors of the same model are apart: the largest |z| over
    all coordinates of the difference of posterior medians, z = (median_a - median_b) /
    sqrt(mcse_a^2 + mcse_b^2) with ArviZ's Monte Carlo standard error of the median
    (medians always exist, means may not), and the mean |p_a - p_b| of the test-set
    predictive probabilities. Two correct samplers give a largest |z| around 2-3 over a few
    dozen coordinates (about sqrt(2 log d))."""
    import arviz as az
    import numpy as np

    fa, fb = post_a.flat_draws(), post_b.flat_draws()  # (chains * draws, d)
    ca = fa.reshape(post_a.n_chains, post_a.n_draws, -1)
    cb = fb.reshape(post_b.n_chains, post_b.n_draws, -1)
    z = []
    for j in range(fa.shape[1]):
        se = np.hypot(float(az.mcse(ca[..., j], method="median")), float(az.mcse(cb[..., j], method="median")))
        z.append(float((np.median(fa[:, j]) - np.median(fb[:, j])) / se))
    z = np.abs(np.array(z))
    p_a = np.asarray(post_a.predict_proba(Phi_test))
    p_b = np.asarray(post_b.predict_proba(Phi_test))
    return {"max_abs_z_median": float(z.max()), "n_coordinates": int(z.size),
            "n_abs_z_above_3": int(np.sum(z > 3)), "pred_mae_between": float(np.mean(np.abs(p_a - p_b)))}


def run_every_sampler(model: str, spec, Phi, y, time_limit: float | None) -> tuple[list[dict[str, Any]], dict]:
    """Every sampler of ``model``'s reference chain on (spec, Phi, y), not only the first
    that certifies, each without a cache (the seconds are what a user without one waits)
    and bounded by ``time_limit``. Returns (tried records, {sampler: Reference})."""
    tried, runs = [], {}
    for config in default_references(model, time_limit=time_limit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an uncertified run is recorded, not warned about
            try:
                ref = run_reference(spec, Phi, y, config=config, cache_dir=None)
            except ReferenceTimeout as err:
                tried.append(tried_record(ReferenceSummary.timed_out(err).to_json()))
                continue
        runs[config.sampler] = ref
        tried.append(tried_record(ReferenceSummary.of(ref).to_json()))
    return tried, runs


def machine() -> dict[str, Any]:
    """Where a cell ran."""
    import platform

    return {"processor": platform.processor() or platform.machine(), "python": platform.python_version(),
            "cpus": os.cpu_count()}
