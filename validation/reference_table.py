"""Building blocks of the reference tables (benchmarks/ggsm_references.py and
gig_references.py): one JSON cell per setting, written atomically and skipped when it
exists, each recording the reference samplers tried and rendering them the same way."""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from .atomic import write_json_atomic


def tried_record(summary: dict[str, Any]) -> dict[str, Any]:
    """What a cell keeps of one entry of a comparison's ``references_tried``."""
    return {"sampler": summary["sampler_name"], "certified": summary["certified"],
            "rhat_max": summary["rhat_max"], "ess_bulk_min": summary["ess_bulk_min"],
            "divergences": summary["divergences"], "seconds": summary["seconds"],
            "draws_per_chain": summary["sampler"].get("num_samples_total"),
            "time_limit": summary.get("time_limit"), "failures": summary["failures"][:3]}


def tried_text(tried: list[dict[str, Any]], sampler: str) -> str:
    """One table cell: how ``sampler`` fared in a cell's ``tried`` records."""
    t = next((t for t in tried if t["sampler"] == sampler), None)
    if t is None:
        return "not run"
    if t.get("time_limit") is not None:
        return f"ran out of time ({t['time_limit']:g} s)"
    word = "certified" if t["certified"] else "no"
    return (f"{word} (R-hat {t['rhat_max']:.3f}, ESS {t['ess_bulk_min']:.0f}, div {t['divergences']}, "
            f"{t['seconds']:.0f} s)")


def load_or_run(path: str, label: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The cell stored at ``path``, or ``run()``'s, written there atomically (so an
    interrupted table resumes at the first missing cell)."""
    if os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    print(f"{label} ...", flush=True)
    cell = run()
    write_json_atomic(cell, path)
    print(f"  reference {cell['reference']['sampler']} certified={cell['reference']['certified']} "
          f"({cell['wall_seconds']:.0f} s)", flush=True)
    return cell
