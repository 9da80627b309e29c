"""Which sampler certifies the gridRVM reference, for each (case, hyper-prior, prior
variant), at what cost, and how far each variant's VB is from it.

Issue 15 asks for the table GGSM and GIG have: (variant, prior, size) -> which sampler
certifies, at what cost. For every cell this script runs **each** sampler of the
model's reference chain (NUTS on the non-centred form, then ``grid-gibbs``, the
Polya-Gamma Gibbs sampler of validation/references/grid_gibbs.py; their settings are the model
record's) on split 0, each bounded by ``--time-limit``, and records

* per sampler: certified or not, worst R-hat, smallest bulk ESS, divergences, seconds
  (compilation included, as a user waits for it) and smallest bulk ESS per second;
* the reference: the first sampler of the chain that certifies (what `zoo compare` uses);
* where both certify, how far they are apart (largest |z| of the posterior medians,
  validation/runs/reference_table.py: median_agreement) - two samplers agreeing is evidence
  neither certificate is a false one;
* which posterior moments exist for the variant (validation/records/grid_rvm_record.py);
* the variant's VB (``vb``, ``vb-s-grid``, ``vb-rvm``) against a certified reference:
  median sd ratio, k-hat on the joint, pred_mae, the verdict; its test error always.

Cases (the two of docs/grid-rvm.md; their sizes bracket the Woodbury crossover):
* ``digits``: the 8 x 8 digits, even vs odd, 500 training images, M = 64 < N;
* ``esl``: the ESL mixture on the per-dimension RBF table, N = 200, M = 2 x 200 = 400 > N;
* ``esl-noise2`` (not by default): the same with 2 noise inputs, M = 800.

Hyper-priors: ``proper`` a0 = b0 = c0 = d0 = 2 (the zoo's default) and ``paper`` 1e-6.

One signed JSON per cell in ``<out>/cells/`` (validation/runs/reference_table.py: one
``ReferenceCellConfig`` in, a typed ``ReferenceTableCell`` out), written atomically; a rerun
skips finished cells. The table goes to ``<out>/table.md``; ``--table-only`` writes it again
from the stored cells (the committed ones included, which are unsigned) without computing
anything.

    python benchmarks/grid_references.py                         # 12 cells, about 1-1.5 h
    python benchmarks/grid_references.py --cases digits --priors proper --variants p-grid
"""
from __future__ import annotations

import argparse
import os
import sys

import zoo
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, markdown_table,
                                                          moments_text, reference_used_text, tried_text)
from zoo.validation.runs.reference_table import ReferenceCellConfig, read_reference_table, run_reference_table
from zoo.validation.runs.reference_table_result import EngineNumbers, ReferenceTableCell

MODEL = "grid-rvm"
CASES = {"digits": ("digits_even_odd", {}), "esl": ("esl_mixture", {}), "esl-noise2": ("esl_mixture", {"noise": 2})}
DEFAULT_CASES = ("digits", "esl")
PRIORS = {"proper": 2.0, "paper": 1e-6}
VARIANTS = ("p-grid", "s-grid", "rvm")
VB_ENGINE = {"p-grid": "vb", "s-grid": "vb-s-grid", "rvm": "vb-rvm"}
SAMPLERS = ("nuts", "grid-gibbs")


def cell_config(case: str, prior: str, variant: str, time_limit: float | None) -> ReferenceCellConfig:
    """The cell (case, prior, variant): every sampler of the chain on the variant's prior, and
    the variant's VB."""
    data, extra = CASES[case]
    return ReferenceCellConfig(
        name=f"{case}__{prior}__{variant}", label=f"{case} {prior} {variant}",
        coordinates={"case": case, "prior": prior, "variant": variant}, model=MODEL, data=data,
        params={**{k: PRIORS[prior] for k in ("a0", "b0", "c0", "d0")}, **extra}, samplers=SAMPLERS,
        engines=(VB_ENGINE[variant],), time_limit=time_limit, every_sampler=True,
        variant=None if variant == "p-grid" else variant)


def table(cells: list[ReferenceTableCell]) -> str:
    rows = []
    for c in cells:
        where = c.coordinates
        vb = c.engine(VB_ENGINE[where["variant"]]) or EngineNumbers(VB_ENGINE[where["variant"]])
        rows.append([f"{where['case']} ({c.n_train}, {c.n_weights})", where["prior"], where["variant"],
                     tried_text(c.tried, "nuts"), ess_rate_text(c.tried, "nuts"), tried_text(c.tried, "grid-gibbs"),
                     ess_rate_text(c.tried, "grid-gibbs"), reference_used_text(c.reference),
                     agreement_text(c.agreement), moments_text(c.moments), fmt(vb.sd_ratio_median, ".2f"),
                     fmt(vb.khat, ".2f"), fmt(vb.pred_mae, ".4f"), vb.verdict or "-",
                     f"{fmt(vb.test_error, '.3f')} ({fmt(c.reference_test_error, '.3f')})"])
    return markdown_table(
        "gridRVM: which reference sampler certifies, by case, hyper-prior and prior variant",
        "Split 0; every sampler of the chain NUTS -> grid-gibbs is run (the first certified one is the "
        "reference `zoo compare` uses), no cache, seconds include compilation; min ESS/s = smallest bulk "
        "ESS per wall second. Agreement: largest |z| of the posterior medians between the two samplers "
        "where both certify (about 3 expected by chance over a few hundred coordinates). VB's sd ratio "
        "(median), k-hat (joint) and pred_mae only against a certified reference.",
        ["case (N, M)", "prior", "variant", "NUTS", "min ESS/s", "grid-gibbs", "min ESS/s", "reference", "agreement",
         "moments", "VB sd ratio", "VB k-hat", "VB pred_mae", "VB verdict", "VB test error (reference)"], rows)


def _choices(text, known, what, ap):
    chosen = [v for v in text.split(",") if v]
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        ap.error(f"unknown {what} {unknown or text!r}; known: {', '.join(known)}")
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"of {', '.join(CASES)}")
    ap.add_argument("--priors", default=",".join(PRIORS), help=f"of {', '.join(PRIORS)}")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--out", default="benchmarks/results/grid_references")
    ap.add_argument("--time-limit", type=float, default=300.0,
                    help="wall-clock seconds per reference sampler (default 300); a sampler that runs "
                         "out is recorded as such")
    ap.add_argument("--table-only", action="store_true",
                    help="write table.md from the cells stored in --out, computing nothing (each read as "
                         "stored, signed or not); a missing or unreadable cell is named and nothing is written")
    args = ap.parse_args(argv)
    cases = _choices(args.cases, CASES, "case", ap)
    priors = _choices(args.priors, PRIORS, "prior", ap)
    variants = _choices(args.variants, VARIANTS, "variant", ap)
    configs = [cell_config(case, prior, variant, args.time_limit)
               for prior in priors for case in cases for variant in variants]
    if args.table_only:
        try:
            result = read_reference_table(configs, args.out)
        except ValueError as err:
            print(f"grid_references.py --table-only: {err}", file=sys.stderr)
            return 2
    else:
        zoo.enable_compilation_cache()
        result = run_reference_table(configs, args.out)
    text = table(list(result.cells))
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
