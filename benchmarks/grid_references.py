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

One JSON per cell in ``<out>/cells/``, written atomically; a rerun skips finished cells.
The table goes to ``<out>/table.md``.

    python benchmarks/grid_references.py                         # 12 cells, about 1-1.5 h
    python benchmarks/grid_references.py --cases digits --priors proper --variants p-grid
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import numpy as np

import zoo
from zoo import data as datasets
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.judge.metrics import posterior_metrics
from zoo.validation.judge.verdict import verdict
from zoo.validation.records import registry
from zoo.validation.runs.compare import timed_fit
from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, reference_used_text,
                                                          tried_text)
from zoo.validation.runs.reference_table import load_or_run, machine, median_agreement, run_every_sampler

MODEL = "grid-rvm"
CASES = {"digits": ("digits_even_odd", {}), "esl": ("esl_mixture", {}), "esl-noise2": ("esl_mixture", {"noise": 2})}
DEFAULT_CASES = ("digits", "esl")
PRIORS = {"proper": 2.0, "paper": 1e-6}
VARIANTS = ("p-grid", "s-grid", "rvm")
VB_ENGINE = {"p-grid": "vb", "s-grid": "vb-s-grid", "rvm": "vb-rvm"}


def _cell_path(out, case, prior, variant):
    return os.path.join(out, "cells", f"{case}__{prior}__{variant}.json")


def run_cell(case: str, prior: str, variant: str, time_limit: float | None) -> dict:
    data, extra = CASES[case]
    params = {**{k: PRIORS[prior] for k in ("a0", "b0", "c0", "d0")}, **extra}
    record = registry.get_model(MODEL)
    split = datasets.load(data, 0, standardize=not record.raw_inputs)
    prepared = registry.prepare(MODEL, split, params)
    spec = prepared.spec if variant == "p-grid" else prepared.variants[variant]
    moments = prepared.moments if variant == "p-grid" else prepared.variant_moments.get(variant)
    Phi, y = prepared.Phi_train, prepared.y_train
    t0 = time.perf_counter()
    tried, runs = run_every_sampler(MODEL, spec, Phi, y, time_limit)
    reference = next((r for r in runs.values() if r.certified), None)
    both = [r for r in runs.values() if r.certified]
    agreement = (median_agreement(both[0].posterior, both[1].posterior, prepared.Phi_test)
                 if len(both) == 2 else None)

    entry = record.engine(VB_ENGINE[variant])
    posterior, warm, _ = timed_fit(entry.fit(), spec, Phi, y)
    y_test = np.asarray(prepared.y_test) > 0

    def test_error(post):
        return float(np.mean((np.asarray(post.predict_proba(prepared.Phi_test)) > 0.5) != y_test))

    vb = {"engine": entry.name, "seconds": warm, "converged": bool(posterior.info.converged),
          "test_error": test_error(posterior)}
    if reference is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = posterior_metrics(posterior, reference, Phi, y, prepared.Phi_test, prepared.y_test,
                                  key=jax.random.PRNGKey(0), moments=moments)
            v = verdict(posterior, reference.posterior, moments=moments)
        vb.update(sd_ratio_median=m["sd_ratio_median"], khat=m["khat"], pred_mae=m["pred_mae"],
                  reference_test_error=test_error(reference.posterior), verdict=v.status,
                  null_reasons=m.get("null_reasons", {}))
    return {
        "case": case, "data": data, "params": params, "prior": prior, "variant": variant,
        "n_train": int(Phi.shape[0]), "n_weights": int(Phi.shape[1]),
        "reference": {"sampler": None if reference is None else reference.sampler,
                      "certified": reference is not None},
        "tried": tried,
        "agreement": agreement,
        "moments": moments,
        "vb": vb,
        "wall_seconds": time.perf_counter() - t0,
        "machine": machine(),
    }


def _moments_text(m):
    if not m:
        return "all"
    if m.get("sd_exists"):
        return "all"
    return "mean, no sd" if m.get("mean_exists") else "none" if m.get("mean_exists") is False else "unknown"


def table(cells: list[dict]) -> str:
    lines = [
        "# gridRVM: which reference sampler certifies, by case, hyper-prior and prior variant",
        "",
        "Split 0; every sampler of the chain NUTS -> grid-gibbs is run (the first certified one is the "
        "reference `zoo compare` uses), no cache, seconds include compilation; min ESS/s = smallest bulk "
        "ESS per wall second. Agreement: largest |z| of the posterior medians between the two samplers "
        "where both certify (about 3 expected by chance over a few hundred coordinates). VB's sd ratio "
        "(median), k-hat (joint) and pred_mae only against a certified reference.",
        "",
        "| case (N, M) | prior | variant | NUTS | min ESS/s | grid-gibbs | min ESS/s | reference | agreement | "
        "moments | VB sd ratio | VB k-hat | VB pred_mae | VB verdict | VB test error (reference) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        used, agree = reference_used_text(c["reference"]), agreement_text(c.get("agreement"))
        vb = c["vb"]
        lines.append(
            f"| {c['case']} ({c['n_train']}, {c['n_weights']}) | {c['prior']} | {c['variant']} | "
            f"{tried_text(c['tried'], 'nuts')} | {ess_rate_text(c['tried'], 'nuts')} | "
            f"{tried_text(c['tried'], 'grid-gibbs')} | {ess_rate_text(c['tried'], 'grid-gibbs')} | {used} | {agree} | "
            f"{_moments_text(c['moments'])} | {fmt(vb.get('sd_ratio_median'), '.2f')} | {fmt(vb.get('khat'), '.2f')} | "
            f"{fmt(vb.get('pred_mae'), '.4f')} | {vb.get('verdict', '-')} | "
            f"{fmt(vb['test_error'], '.3f')} ({fmt(vb.get('reference_test_error'), '.3f')}) |")
    return "\n".join(lines) + "\n"


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
    args = ap.parse_args(argv)
    zoo.enable_compilation_cache()
    cases = _choices(args.cases, CASES, "case", ap)
    priors = _choices(args.priors, PRIORS, "prior", ap)
    variants = _choices(args.variants, VARIANTS, "variant", ap)
    cells = [load_or_run(_cell_path(args.out, case, prior, variant), f"{case} {prior} {variant}",
                         lambda: run_cell(case, prior, variant, args.time_limit))
             for prior in priors for case in cases for variant in variants]
    text = table(cells)
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
