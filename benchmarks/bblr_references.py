"""Which sampler certifies the BBLR reference, for each (configuration, data set, prior,
gamma), at what cost; how many modes the posterior has; and how far SLA and the Laplace
Gaussian are from it.

Issue 16 asks for the table the other models have. BBLR's likelihood is bounded, so its
posterior need not be log-concave, and the sharper the likelihood (gamma^2 / lam grows:
DERIVATIONS.md §6.2) the rougher it gets. For every cell this script runs **each**
sampler of the model's reference chain (NUTS, then parallel tempering:
validation/references/parallel_tempering.py; settings as the model record has them) on split 0, each
bounded by ``--time-limit``, and records

* per sampler: certified or not, worst R-hat, smallest bulk ESS, divergences, seconds
  (compilation included) and the smallest bulk ESS per second;
* the reference: the first sampler of the chain that certifies (what `zoo compare` uses);
* where both certify, how far apart they are (largest |z| of the posterior medians,
  validation/runs/reference_table.py: median_agreement);
* the modes the reference's draws flow to (validation/judge/modes.py: basins), the largest
  basin's share, and whether SLA's answer is that main mode;
* SLA's and the Laplace Gaussian's test errors, and the Laplace Gaussian against a
  certified reference: median sd ratio, k-hat on the joint, pred_mae, the verdict.

Cells: ``--data`` x ``--gammas`` x ``--configs`` x ``--priors``. config 1 = BBLR1 (a, b
from the weak prior), 2 = BBLR2 (from the class counts); lam = 1. prior ``gaussian`` is the
model's N(0, I / lam); ``gauss-laplace`` is the sparse version's mixture prior (pi = 1/2,
s2 = 1, ell = 0.1: the spec's defaults) on the same linear weights.

One signed JSON per cell in ``<out>/cells/`` (validation/runs/reference_table.py: one
``ReferenceCellConfig`` in, a typed ``ReferenceTableCell`` out), written atomically; a rerun
skips finished cells, and the table lists every cell in the folder (those of other settings
only where this user signed them). ``--table-only`` writes the table again from every cell
stored in the folder (the committed ones included, which are unsigned) without computing
anything.

    python benchmarks/bblr_references.py                                   # 8 cells
    python benchmarks/bblr_references.py --data pima --gammas 4 --configs 1 --priors gaussian,gauss-laplace
"""
from __future__ import annotations

import argparse
import os
import sys

import zoo
from zoo import data as datasets
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, markdown_table,
                                                          reference_used_text, tried_text)
from zoo.validation.runs.reference_table import (ReferenceCellConfig, read_reference_table, run_reference_table,
                                                 stored_cells)
from zoo.validation.runs.reference_table_result import EngineNumbers, ModesFound, ReferenceTableCell

MODEL = "bblr"
DATA = ("pima", "liver", "breast_wisconsin", "heart")
GAMMAS = (4.0, 20.0)
CONFIGS = (2,)
PRIORS = ("gaussian", "gauss-laplace")
DEFAULT_PRIORS = ("gaussian",)
SAMPLERS = ("nuts", "parallel-tempering")


def cell_config(data: str, gamma: float, config: int, prior: str, time_limit: float | None) -> ReferenceCellConfig:
    """The cell (data, gamma, BBLR config, prior): every sampler of the chain, SLA and the
    Laplace Gaussian, and the modes (is SLA's answer the main one?)."""
    return ReferenceCellConfig(
        name=f"{data}__g{gamma:g}__c{config}__{prior}", label=f"{data} gamma={gamma:g} BBLR{config} {prior}",
        coordinates={"data": data, "gamma": gamma, "config": config, "prior": prior}, model=MODEL, data=data,
        params={"gamma": gamma, "config": float(config)}, samplers=SAMPLERS, engines=("sla", "laplace"),
        time_limit=time_limit, every_sampler=True, spec_changes={} if prior == "gaussian" else {"prior": prior},
        modes="sla")


def _modes_text(m: ModesFound | None) -> str:
    if m is None:
        return "-"
    if m.n_modes == 0:  # e.g. the Gauss-Laplace prior's cusp at 0: no Newton ascent converges
        return f"none found ({m.n_failed} of {m.n_starts} ascents reached no proper mode)"
    share = f"{m.main_share:.2f} ± {m.main_share_se:.2f}"
    main = {True: "yes", False: "**no**", None: "-"}[m.point_is_main_mode]
    caveat = "" if m.certified else f" (from uncertified {m.sampler})"
    return f"{m.n_modes} / {share} / {main}{caveat}"


def _engine_text(e: EngineNumbers | None) -> str:
    if e is None:
        return "-"
    if e.failure is not None:
        return "failed: " + e.failure.split(":")[0]
    return fmt(e.test_error)


def table(cells: list[ReferenceTableCell]) -> str:
    rows = []
    for c in cells:
        where = c.coordinates
        lap = c.engine("laplace")
        measured = lap or EngineNumbers("laplace")
        rows.append([f"{where['data']} ({c.n_train}, {c.n_weights})",
                     f"{where['gamma']:g} ({c.spec['gamma'] ** 2 / c.spec['lam']:g})", f"BBLR{where['config']}",
                     where["prior"], tried_text(c.tried, "nuts"), ess_rate_text(c.tried, "nuts"),
                     tried_text(c.tried, "parallel-tempering"), ess_rate_text(c.tried, "parallel-tempering"),
                     reference_used_text(c.reference), agreement_text(c.agreement), _modes_text(c.modes),
                     f"{_engine_text(c.engine('sla'))} / {_engine_text(lap)} / {fmt(c.reference_test_error)}",
                     fmt(measured.sd_ratio_median, ".2f"), fmt(measured.khat, ".2f"), fmt(measured.pred_mae, ".4f"),
                     measured.verdict or "-"])
    return markdown_table(
        "BBLR: which reference sampler certifies, by data set, gamma, configuration and prior",
        "Split 0, lam = 1 (the posterior depends on gamma^2 / lam: DERIVATIONS.md §6.2); every sampler of the chain "
        "NUTS -> parallel-tempering is run (the first certified one is the reference `zoo compare` uses), no cache, "
        "seconds include compilation; min ESS/s = smallest bulk ESS per wall second. Agreement: largest |z| of the "
        "posterior medians between the two samplers where both certify. Modes: distinct modes the reference's draws "
        "flow to / the largest basin's share ± its standard error / whether SLA's answer is that main mode "
        "(validation/judge/modes.py). Laplace's sd ratio (median), k-hat (joint), pred_mae and verdict only against a "
        "certified reference.",
        ["data (N, M)", "gamma (gamma^2/lam)", "config", "prior", "NUTS", "min ESS/s", "parallel tempering",
         "min ESS/s", "reference", "agreement", "modes / main share / SLA main",
         "test error: SLA / Laplace / reference", "Laplace sd ratio", "k-hat", "pred_mae", "verdict"], rows)


def _order(c: ReferenceTableCell):
    where = c.coordinates
    return (where["prior"], where["config"], where["gamma"], DATA.index(where["data"]) if where["data"] in DATA else 99)


def _choices(text, known, what, ap, cast=str):
    try:
        chosen = [cast(v) for v in text.split(",") if v]
    except ValueError:
        ap.error(f"bad {what} list {text!r}")
    unknown = [v for v in chosen if known is not None and v not in known]
    if unknown or not chosen:
        ap.error(f"unknown {what} {unknown or text!r}; known: {', '.join(map(str, known))}")
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=",".join(DATA), help="data sets of the catalog (default: the paper's four)")
    ap.add_argument("--gammas", default=",".join(f"{g:g}" for g in GAMMAS), help="gamma values (lam = 1)")
    ap.add_argument("--configs", default=",".join(map(str, CONFIGS)), help="1 (BBLR1) and/or 2 (BBLR2)")
    ap.add_argument("--priors", default=",".join(DEFAULT_PRIORS), help=f"of {', '.join(PRIORS)}")
    ap.add_argument("--out", default="benchmarks/results/bblr_references")
    ap.add_argument("--time-limit", type=float, default=600.0,
                    help="wall-clock seconds per reference sampler (default 600); a sampler that runs out is "
                         "recorded as such")
    ap.add_argument("--table-only", action="store_true",
                    help="write table.md from every cell stored in --out, computing nothing (each read as stored, "
                         "signed or not); a missing or unreadable cell is named and nothing is written")
    args = ap.parse_args(argv)
    data = _choices(args.data, datasets.names(), "data set", ap)
    gammas = _choices(args.gammas, None, "gamma", ap, float)
    if any(not g > 0 for g in gammas):
        ap.error("gammas must be positive")
    configs = _choices(args.configs, (1, 2), "configuration", ap, int)
    priors = _choices(args.priors, PRIORS, "prior", ap)
    cell_configs = [cell_config(d, gamma, config, prior, args.time_limit)
                    for prior in priors for config in configs for gamma in gammas for d in data]
    if args.table_only:
        try:
            result = read_reference_table(cell_configs, args.out)
            others = stored_cells(args.out, signed=False, skip=result.names)
        except ValueError as err:
            print(f"bblr_references.py --table-only: {err}", file=sys.stderr)
            return 2
    else:
        zoo.enable_compilation_cache()
        result = run_reference_table(cell_configs, args.out)
        others = stored_cells(args.out, signed=True, skip=result.names)
    # the table lists every cell in the folder: those of this run, then the others stored there
    # (read as the run reads them: signed by this user, or with --table-only as stored), in the
    # order of the table's coordinates (then of their names, as the folder lists them)
    named = {**others, **dict(zip(result.names, result.cells))}
    text = table([named[n] for n in sorted(named, key=lambda n: (_order(named[n]), n))])
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
