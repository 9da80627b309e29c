"""Which sampler certifies the GIG-logistic reference, as the hyper-prior k = theta goes
from the default 1 to the paper's 1e-6, and how far VB's spread is from it.

Issue 4 asks for "a statement of the prior settings at which NUTS is trustworthy". For
each k (theta = k) this script runs the `zoo compare` protocol for gig-logistic on split
0 of Horii's synthetic design (100 x 100, separable) with the engine ``vb`` and the
model's reference samplers with their record's settings, tried in the order NUTS (on the
marginal form at target acceptance 0.95), then the Polya-Gamma Gibbs sampler of
validation/references/pg_gibbs.py - the order that tells where NUTS is trustworthy (the record's own
chain puts PG-Gibbs first) - and records per k:
* each sampler tried: certified or not, worst R-hat, smallest bulk ESS, divergences,
  seconds (``--time-limit`` bounds each; a sampler that runs out is recorded so);
* which posterior moments of beta exist on these data (validation/records/gig_logistic_record.py, moments:
  the tail index is 2k, so the mean needs k > 1/(2m) and the sd k > 1/m, with m the
  fewest features that separate the data, 2 <= m <= 53 here);
* VB against the reference where it is certified: median sd ratio over the 90 noise and
  the 10 relevant coefficients, k-hat, pred_mae; VB's test error always.

One signed JSON per k in ``<out>/cells/`` (validation/runs/reference_table.py: one
``ReferenceCellConfig`` in, a typed ``ReferenceTableCell`` out), written atomically; a rerun
skips finished cells. The table goes to ``<out>/table.md``; ``--table-only`` writes it again
from the stored cells (the committed ones included, which are unsigned) without computing
anything.

    python benchmarks/gig_references.py                    # k = 1, 0.5, 0.1, 0.01, 1e-6
    python benchmarks/gig_references.py --k 1,0.3 --time-limit 900
"""
from __future__ import annotations

import argparse
import os
import sys

import zoo
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.report.reference_table_report import fmt, markdown_table, reference_used_text, tried_text
from zoo.validation.runs.reference_table import ReferenceCellConfig, read_reference_table, run_reference_table
from zoo.validation.runs.reference_table_result import EngineNumbers, ReferenceTableCell

MODEL = "gig-logistic"
K_GRID = (1.0, 0.5, 0.1, 0.01, 1e-6)
N_RELEVANT = 10  # Horii's beta* = (0 x 90, 2 x 10): the last ten coefficients
#: tried in this order: the order that tells where NUTS is trustworthy
SAMPLERS = ("nuts", "pg-gibbs")


def cell_config(k: float, time_limit: float | None) -> ReferenceCellConfig:
    """The cell k = theta: the `zoo compare` protocol on split 0 of Horii's design, VB's sd ratio
    kept for the noise and the relevant coefficients apart."""
    return ReferenceCellConfig(
        name=f"k{k:g}", label=f"k = {k:g}", coordinates={"k": k}, model=MODEL, data="horii_synthetic",
        params={"k": k, "theta": k}, samplers=SAMPLERS, engines=("vb",), time_limit=time_limit,
        sd_ratio_groups={"noise": (None, -N_RELEVANT), "relevant": (-N_RELEVANT, None)})


def table(cells: list[ReferenceTableCell]) -> str:
    word = {True: "exists", False: "does not exist", None: "unknown"}
    rows = []
    for c in cells:
        m = c.moments or {}
        vb = c.engine("vb") or EngineNumbers("vb")
        groups = vb.sd_ratio_groups
        rows.append([f"{c.coordinates['k']:g}", tried_text(c.tried, "nuts"), tried_text(c.tried, "pg-gibbs"),
                     reference_used_text(c.reference), f"{word[m.get('mean_exists')]} / {word[m.get('sd_exists')]}",
                     f"{fmt(groups.get('noise'), '.2f')} / {fmt(groups.get('relevant'), '.2f')}", fmt(vb.khat, '.2f'),
                     fmt(vb.pred_mae, '.3f'), f"{fmt(vb.test_error, '.3f')} ({fmt(c.reference_test_error, '.3f')})"])
    return markdown_table(
        "GIG logistic: which reference sampler certifies, by hyper-prior k = theta",
        "Horii's synthetic design, split 0 (100 x 100, linearly separable); reference chain NUTS (marginal "
        "form, target acceptance 0.95) -> Polya-Gamma Gibbs; the first certified one is the reference. "
        "VB's sd ratio (median over the 90 noise / 10 relevant coefficients), k-hat and pred_mae only "
        "against a certified reference.",
        ["k = theta", "NUTS", "PG-Gibbs", "reference", "posterior mean / sd of beta", "VB sd ratio noise / relevant",
         "VB k-hat", "VB pred_mae", "VB test error (reference)"], rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", default=",".join(f"{k:g}" for k in K_GRID), help="hyper-prior k = theta values")
    ap.add_argument("--out", default="benchmarks/results/gig_references")
    ap.add_argument("--cache-dir", default=os.environ.get("ZOO_CACHE_DIR"),
                    help="reference cache (default: none; ZOO_CACHE_DIR if set)")
    ap.add_argument("--time-limit", type=float, default=1200.0,
                    help="wall-clock seconds per reference sampler (default 1200)")
    ap.add_argument("--table-only", action="store_true",
                    help="write table.md from the cells stored in --out, computing nothing (each read as "
                         "stored, signed or not); a missing or unreadable cell is named and nothing is written")
    args = ap.parse_args(argv)
    ks = [float(v) for v in args.k.split(",") if v]
    if not ks or any(not k > 0 for k in ks):
        ap.error(f"k values must be positive numbers; got {args.k!r}")
    configs = [cell_config(k, args.time_limit) for k in ks]
    if args.table_only:
        try:
            result = read_reference_table(configs, args.out)
        except ValueError as err:
            print(f"gig_references.py --table-only: {err}", file=sys.stderr)
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
