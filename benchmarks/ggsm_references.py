"""Which sampler certifies the GGSM probit reference, for each (design, prior, q).

Issue 3 asks for a table (q, prior) -> reference used, certified or not. For every cell
this script runs the `zoo compare` protocol for ggsm-probit with the engines ``mm`` and
``mm-laplace`` and the model's reference samplers, each with its record's settings
(``validation/records/ggsm_probit_record.py``), tried in the order NUTS, then
slice-within-Gibbs - the order that tells where NUTS certifies (the record's own chain
puts slice-Gibbs first); the stored table was made with NUTS 4 x (2000 + 2500), one
doubling, and slice-Gibbs 4 x (1000 + 2500), two doublings, on split 0 of

* ``ggig_linear``: the paper's Section 6.1 design (d = 50, 8 relevant features with
  w = 3, N = 200): linearly separable, so the posterior of the scale of w has the heavy
  tail r^-(1 + q a) and moments exist only for q a > 1 (mean) and q a > 2 (sd);
* ``ggig_linear_weak``: the same inputs and noise with w = 0.3 (not the paper's): not
  separable, every moment exists - the design where engines are measured against a
  certified reference in the usual way.

Priors: ``proper`` a = b = 1 (the compare default) and ``paper`` a = b = 1e-3.

Per cell it records: each sampler tried (certified or not, worst R-hat, smallest ESS,
divergences, seconds), which one is the reference, which moments exist, and the speed of
``mm`` (warm seconds, one call after compilation, as `zoo compare` times every engine)
against the reference's warm seconds, plus pred_mae of mm and mm-laplace where the
reference is certified. One JSON per cell in ``<out>/cells/``, written atomically; a rerun
with the same ``--out`` skips finished cells. The table goes to ``<out>/table.md``.

Cross-check. Where NUTS certifies, the slice-Gibbs sampler is run as well (its default
settings) and the two certified references are compared on the real design: the largest
|z| over all coordinates of the difference of posterior medians, z = (median_NUTS -
median_Gibbs) / sqrt(mcse_NUTS^2 + mcse_Gibbs^2) with ArviZ's Monte Carlo standard error of
the median (medians always exist; means may not, see above), and the mean |p_NUTS -
p_Gibbs| of the test-set predictive probabilities. With ~50 coordinates, two correct
samplers give a largest |z| around 2-3.

    python benchmarks/ggsm_references.py                       # all 20 cells (about 1-2 h)
    python benchmarks/ggsm_references.py --designs ggig_linear --priors proper --q 1
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import zoo
from zoo.models.ggsm_probit import Q_GRID
from zoo.validation.base.atomic import write_json_atomic, write_text_atomic
from zoo.validation.runs.compare import CompareConfig, compare, default_references
from zoo.validation.report.reference_table_report import tried_text
from zoo.validation.runs.reference_table import load_or_run, median_agreement, tried_record

PRIORS = {"proper": {"a": 1.0, "b": 1.0}, "paper": {"a": 1e-3, "b": 1e-3}}
DESIGNS = ("ggig_linear", "ggig_linear_weak")


def _cell_path(out, design, prior, q):
    return os.path.join(out, "cells", f"{design}__{prior}__q{q:g}.json")


def run_cell(design: str, prior: str, q: float, cache_dir: str | None, time_limit: float | None = None) -> dict:
    import warnings

    config = CompareConfig(model="ggsm-probit", data=design, engines=("mm", "mm-laplace"),
                           params={"q": q, **PRIORS[prior]}, cache_dir=cache_dir,
                           reference=default_references("ggsm-probit", ("nuts", "slice-gibbs"),
                                                        time_limit=time_limit))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # uncertified references are recorded, not warned about
        comp = compare(config)
    res = comp.result
    ref = res.reference
    engines = {}
    for name, row in res.engines.items():
        engines[name] = {
            "failure": row.failure,
            "seconds": row.seconds,
            "speedup_vs_reference": row.speedup_vs_reference,
            "pred_mae": row.metrics["pred_mae"] if ref.certified else None,
            "sd_ratio_median": row.metrics["sd_ratio_median"] if ref.certified else None,
            "std_mean_err_median": row.metrics["std_mean_err_median"] if ref.certified else None,
            "n_basis": row.n_basis,
        }
    return {
        "design": design, "prior": prior, "q": q, **PRIORS[prior],
        "reference": {"sampler": ref.sampler_name, "certified": ref.certified,
                      "rhat_max": ref.rhat_max, "ess_bulk_min": ref.ess_bulk_min,
                      "ess_tail_min": ref.ess_tail_min, "seconds": ref.seconds,
                      "warm_seconds": ref.warm_seconds, "from_cache": ref.from_cache},
        "tried": [tried_record(t.to_json()) for t in res.references_tried],
        "moments": res.moments,
        "engines": engines,
        "wall_seconds": time.perf_counter() - t0,
        "machine": {"processor": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
    }


def cross_check(design: str, prior: str, q: float, cache_dir: str | None) -> dict:
    """Run slice-Gibbs where NUTS certified and compare the two references (see above)."""
    import warnings

    from zoo import data as datasets
    from zoo.validation.records import registry
    from zoo.validation.references import run_reference

    prepared = registry.prepare("ggsm-probit", datasets.load(design, 0), {"q": q, **PRIORS[prior]})
    nuts_cfg, gibbs_cfg = default_references("ggsm-probit", ("nuts", "slice-gibbs"))
    args = (prepared.spec, prepared.Phi_train, prepared.y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nuts = run_reference(*args, config=nuts_cfg, cache_dir=cache_dir)
        gibbs = run_reference(*args, config=gibbs_cfg, cache_dir=cache_dir)
    return {"nuts_certified": nuts.certified, "gibbs_certified": gibbs.certified,
            "gibbs_rhat_max": gibbs.diagnostics["rhat_max"], "gibbs_seconds": gibbs.seconds,
            **median_agreement(nuts.posterior, gibbs.posterior, prepared.Phi_test)}


def _fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def table(cells: list[dict]) -> str:
    lines = [
        "# GGSM probit: which reference sampler certifies",
        "",
        "Split 0; reference chain NUTS -> slice-Gibbs (the first certified one is the reference). "
        "Moments: which posterior moments of w exist on these data (see validation/records/ggsm_probit_record.py: moments). "
        "mm speed-up = reference warm seconds / mm warm seconds. pred_mae only against a certified reference.",
        "",
        "| design | prior | q | NUTS | slice-Gibbs | reference | moments of w | mm s | mm speed-up | pred_mae mm / mm-laplace | NUTS vs slice-Gibbs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        ref = c["reference"]
        used = f"**{ref['sampler']}**" if ref["certified"] else "**none certified**"
        m = c["moments"] or {}
        moments = ("all" if m.get("sd_exists") else "mean, no sd" if m.get("mean_exists") else
                   "none" if m.get("mean_exists") is False else "unknown")
        mm = c["engines"].get("mm", {})
        lap = c["engines"].get("mm-laplace", {})
        lap_mae = "failed" if lap.get("failure") else _fmt(lap.get("pred_mae"), ".4f")
        x = c.get("cross_check")
        cross = "-" if x is None else (
            f"Gibbs {'certified' if x['gibbs_certified'] else 'NOT certified'}; max abs z of medians "
            f"{x['max_abs_z_median']:.2f} over {x['n_coordinates']} ({x['n_abs_z_above_3']} above 3); "
            f"mean abs dp {x['pred_mae_between']:.4f}")
        lines.append(
            f"| {c['design']} | {c['prior']} | {c['q']:g} | {tried_text(c['tried'], 'nuts')} | {tried_text(c['tried'], 'slice-gibbs')} | {used} | "
            f"{moments} | {_fmt(mm.get('seconds'), '.3f')} | {_fmt(mm.get('speedup_vs_reference'), '.0f')} | "
            f"{_fmt(mm.get('pred_mae'), '.4f')} / {lap_mae} | {cross} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--priors", default=",".join(PRIORS))
    ap.add_argument("--q", default=",".join(f"{q:g}" for q in sorted(Q_GRID, reverse=True)))
    ap.add_argument("--out", default="benchmarks/results/ggsm_references")
    ap.add_argument("--cache-dir", default=os.environ.get("ZOO_CACHE_DIR"),
                    help="reference cache (default: none; ZOO_CACHE_DIR if set)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="wall-clock seconds per reference sampler (default: none); a sampler that runs "
                         "out is recorded as such")
    ap.add_argument("--no-cross-check", action="store_true",
                    help="do not run slice-Gibbs where NUTS certified (see Cross-check above)")
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    designs = [d for d in args.designs.split(",") if d]
    priors = [p for p in args.priors.split(",") if p]
    unknown = [d for d in designs if d not in DESIGNS] + [p for p in priors if p not in PRIORS]
    if unknown:
        ap.error(f"unknown design or prior: {unknown}")
    qs = [float(v) for v in args.q.split(",") if v]
    cells = []
    for design in designs:
        for prior in priors:
            for q in qs:
                cells.append(load_or_run(
                    _cell_path(args.out, design, prior, q), f"{design} {prior} q={q:g}",
                    lambda: run_cell(design, prior, q, args.cache_dir, args.time_limit)))
    if not args.no_cross_check:
        for i, cell in enumerate(cells):
            if cell["reference"]["sampler"] == "nuts" and cell["reference"]["certified"] and "cross_check" not in cell:
                print(f"cross-check {cell['design']} {cell['prior']} q={cell['q']:g} ...", flush=True)
                cell = {**cell, "cross_check": cross_check(cell["design"], cell["prior"], cell["q"], args.cache_dir)}
                write_json_atomic(cell, _cell_path(args.out, cell["design"], cell["prior"], cell["q"]))
                cells[i] = cell
    text = table(cells)
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
