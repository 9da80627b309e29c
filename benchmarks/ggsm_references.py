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

Per cell it records (validation/runs/reference_table.py: one ``ReferenceCellConfig`` in, a
typed ``ReferenceTableCell`` out): each sampler tried (certified or not, worst R-hat,
smallest ESS, divergences, seconds), which one is the reference, which moments exist, and
the speed of ``mm`` (warm seconds, one call after compilation, as `zoo compare` times every
engine) against the reference's warm seconds, plus pred_mae of mm and mm-laplace where the
reference is certified. One signed JSON per cell in ``<out>/cells/``, written atomically; a
rerun with the same ``--out`` skips finished cells. The table goes to ``<out>/table.md``;
``--table-only`` writes it again from the stored cells (the committed ones included, which
are unsigned) without computing anything.

Cross-check. Where NUTS certifies, the slice-Gibbs sampler is run as well (its default
settings) and the two certified references are compared on the real design: the largest
|z| over all coordinates of the difference of posterior medians, z = (median_NUTS -
median_Gibbs) / sqrt(mcse_NUTS^2 + mcse_Gibbs^2) with ArviZ's Monte Carlo standard error of
the median (medians always exist; means may not, see above), and the mean |p_NUTS -
p_Gibbs| of the test-set predictive probabilities. With ~50 coordinates, two correct
samplers give a largest |z| around 2-3. The cross-check is part of the cell (its
``agreement``), stored signed with it; a stored cell that lacks it gets it on the next run.

    python benchmarks/ggsm_references.py                       # all 20 cells (about 1-2 h)
    python benchmarks/ggsm_references.py --designs ggig_linear --priors proper --q 1
"""
from __future__ import annotations

import argparse
import os
import sys

import zoo
from zoo.models.ggsm_probit import Q_GRID
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.report.reference_table_report import (fmt, markdown_table, moments_text, reference_used_text,
                                                          tried_text)
from zoo.validation.runs.reference_table import ReferenceCellConfig, read_reference_table, run_reference_table
from zoo.validation.runs.reference_table_result import EngineNumbers, ReferenceTableCell

MODEL = "ggsm-probit"
PRIORS = {"proper": {"a": 1.0, "b": 1.0}, "paper": {"a": 1e-3, "b": 1e-3}}
DESIGNS = ("ggig_linear", "ggig_linear_weak")
#: tried in this order: the order that tells where NUTS certifies
SAMPLERS = ("nuts", "slice-gibbs")
ENGINES = ("mm", "mm-laplace")


def cell_config(design: str, prior: str, q: float, time_limit: float | None = None,
                cross_check: bool = True) -> ReferenceCellConfig:
    """The cell (design, prior, q): the `zoo compare` protocol on split 0."""
    return ReferenceCellConfig(
        name=f"{design}__{prior}__q{q:g}", label=f"{design} {prior} q={q:g}",
        coordinates={"design": design, "prior": prior, "q": q}, model=MODEL, data=design,
        params={"q": q, **PRIORS[prior]}, samplers=SAMPLERS, engines=ENGINES, time_limit=time_limit,
        cross_check=cross_check)


def _cross_text(c: ReferenceTableCell) -> str:
    x = c.agreement
    if x is None:
        return "-"
    return (f"Gibbs {'certified' if x.certified[1] else 'NOT certified'}; max abs z of medians "
            f"{x.max_abs_z_median:.2f} over {x.n_coordinates} ({x.n_abs_z_above_3} above 3); "
            f"mean abs dp {x.pred_mae_between:.4f}")


def table(cells: list[ReferenceTableCell]) -> str:
    rows = []
    for c in cells:
        where = c.coordinates
        mm = c.engine("mm") or EngineNumbers("mm")
        lap = c.engine("mm-laplace") or EngineNumbers("mm-laplace")
        lap_mae = "failed" if lap.failure else fmt(lap.pred_mae, ".4f")
        rows.append([where["design"], where["prior"], f"{where['q']:g}", tried_text(c.tried, "nuts"),
                     tried_text(c.tried, "slice-gibbs"), reference_used_text(c.reference), moments_text(c.moments),
                     fmt(mm.seconds, ".3f"), fmt(mm.speedup_vs_reference, ".0f"),
                     f"{fmt(mm.pred_mae, '.4f')} / {lap_mae}", _cross_text(c)])
    return markdown_table(
        "GGSM probit: which reference sampler certifies",
        "Split 0; reference chain NUTS -> slice-Gibbs (the first certified one is the reference). "
        "Moments: which posterior moments of w exist on these data (see validation/records/ggsm_probit_record.py: moments). "
        "mm speed-up = reference warm seconds / mm warm seconds. pred_mae only against a certified reference.",
        ["design", "prior", "q", "NUTS", "slice-Gibbs", "reference", "moments of w", "mm s", "mm speed-up",
         "pred_mae mm / mm-laplace", "NUTS vs slice-Gibbs"], rows)


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
    ap.add_argument("--table-only", action="store_true",
                    help="write table.md from the cells stored in --out, computing nothing (each read as "
                         "stored, signed or not); a missing or unreadable cell is named and nothing is written")
    args = ap.parse_args(argv)
    designs = [d for d in args.designs.split(",") if d]
    priors = [p for p in args.priors.split(",") if p]
    unknown = [d for d in designs if d not in DESIGNS] + [p for p in priors if p not in PRIORS]
    if unknown:
        ap.error(f"unknown design or prior: {unknown}")
    qs = [float(v) for v in args.q.split(",") if v]
    configs = [cell_config(design, prior, q, args.time_limit, cross_check=not args.no_cross_check)
               for design in designs for prior in priors for q in qs]
    if args.table_only:
        try:
            result = read_reference_table(configs, args.out)
        except ValueError as err:
            print(f"ggsm_references.py --table-only: {err}", file=sys.stderr)
            return 2
    else:
        zoo.enable_compilation_cache()
        result = run_reference_table(configs, args.out, cache_dir=args.cache_dir)
    text = table(list(result.cells))
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
