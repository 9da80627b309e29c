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

One JSON per cell in ``<out>/cells/``, written atomically; a rerun skips finished cells,
and the table lists every cell in the folder.

    python benchmarks/bblr_references.py                                   # 8 cells
    python benchmarks/bblr_references.py --data pima --gammas 4 --configs 1 --priors gaussian,gauss-laplace
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

import zoo
from zoo import data as datasets
from zoo.validation.base.atomic import write_text_atomic
from zoo.validation.judge.metrics import posterior_metrics
from zoo.validation.judge.modes import basins
from zoo.validation.judge.verdict import verdict
from zoo.validation.records import registry
from zoo.validation.runs.compare import timed_fit
from zoo.validation.report.reference_table_report import (agreement_text, ess_rate_text, fmt, reference_used_text,
                                                          tried_text)
from zoo.validation.runs.reference_table import load_or_run, machine, median_agreement, run_every_sampler

MODEL = "bblr"
DATA = ("pima", "liver", "breast_wisconsin", "heart")
GAMMAS = (4.0, 20.0)
CONFIGS = (2,)
PRIORS = ("gaussian", "gauss-laplace")
DEFAULT_PRIORS = ("gaussian",)
SAMPLERS = ("nuts", "parallel-tempering")


def _cell_path(out, data, gamma, config, prior):
    return os.path.join(out, "cells", f"{data}__g{gamma:g}__c{config}__{prior}.json")


def run_cell(data: str, gamma: float, config: int, prior: str, time_limit: float | None) -> dict:
    record = registry.get_model(MODEL)
    split = datasets.load(data, 0, standardize=not record.raw_inputs)
    prepared = registry.prepare(MODEL, split, {"gamma": gamma, "config": float(config)})
    spec = prepared.spec if prior == "gaussian" else dataclasses.replace(prepared.spec, prior="gauss-laplace")
    Phi, y = prepared.Phi_train, prepared.y_train
    t0 = time.perf_counter()
    tried, runs = run_every_sampler(MODEL, spec, Phi, y, time_limit)
    reference = next((r for r in runs.values() if r.certified), None)
    both = [r for r in runs.values() if r.certified]
    agreement = (median_agreement(both[0].posterior, both[1].posterior, prepared.Phi_test)
                 if len(both) == 2 else None)
    y_test = np.asarray(prepared.y_test) > 0

    def test_error(post):
        return float(np.mean((np.asarray(post.predict_proba(prepared.Phi_test)) > 0.5) != y_test))

    engines = {}
    for name in ("sla", "laplace"):
        entry = record.engine(name)
        try:
            posterior, warm, _ = timed_fit(entry.fit(), spec, Phi, y)
        except Exception as err:  # noqa: BLE001 - a refusal is a result (Laplace: not positive definite)
            engines[name] = {"failure": f"{type(err).__name__}: {err}"}
            continue
        row = {"seconds": warm, "test_error": test_error(posterior)}
        if reference is not None and name == "laplace":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = posterior_metrics(posterior, reference, Phi, y, prepared.Phi_test, prepared.y_test,
                                      key=jax.random.PRNGKey(0))
                row.update(sd_ratio_median=m["sd_ratio_median"], khat=m["khat"], pred_mae=m["pred_mae"],
                           verdict=verdict(posterior, reference.posterior).status)
        engines[name] = row

    # the modes, from the draws of the reference (or, with none certified, of the run
    # closest to it - marked as such)
    source = reference or (min(runs.values(), key=lambda r: r.diagnostics["rhat_max"]) if runs else None)
    modes = None
    if source is not None:
        sla_point = None
        if "failure" not in engines["sla"]:
            sla_point = record.engine("sla").fit()(spec, Phi, y).mean_flat()
        Pj, yj = jnp.asarray(Phi), jnp.asarray(y, float)
        b = basins(lambda w: spec.log_joint(w, Pj, yj), source.posterior.flat_draws(), point=sla_point)
        modes = {"from": source.sampler, "certified": bool(source.certified), "n_modes": len(b["modes"]),
                 "main_share": b["main_share"], "main_share_se": b["modes"][0]["share_se"] if b["modes"] else None,
                 "n_failed": b["n_failed"], "n_starts": b["n_starts"],
                 "sla_is_main_mode": None if sla_point is None else b["point"]["is_main_mode"]}
        if reference is not None:
            engines.setdefault("reference", {})["test_error"] = test_error(reference.posterior)
    return {
        "data": data, "gamma": gamma, "config": config, "prior": prior, "lam": float(spec.lam),
        "gamma2_over_lam": float(spec.gamma ** 2 / spec.lam), "a": float(spec.a), "b": float(spec.b),
        "n_train": int(Phi.shape[0]), "n_weights": int(Phi.shape[1]),
        "reference": {"sampler": None if reference is None else reference.sampler, "certified": reference is not None},
        "tried": tried, "agreement": agreement, "modes": modes, "engines": engines,
        "wall_seconds": time.perf_counter() - t0,
        "machine": machine(),
    }


def _modes_text(m):
    if m is None:
        return "-"
    if m["n_modes"] == 0:  # e.g. the Gauss-Laplace prior's cusp at 0: no Newton ascent converges
        return f"none found ({m['n_failed']} of {m['n_starts']} ascents reached no proper mode)"
    share = f"{m['main_share']:.2f} ± {m['main_share_se']:.2f}"
    main = {True: "yes", False: "**no**", None: "-"}[m["sla_is_main_mode"]]
    caveat = "" if m["certified"] else f" (from uncertified {m['from']})"
    return f"{m['n_modes']} / {share} / {main}{caveat}"


def _engine_text(e):
    if e is None:
        return "-"
    if "failure" in e:
        return "failed: " + e["failure"].split(":")[0]
    return fmt(e.get("test_error"))


def table(cells: list[dict]) -> str:
    lines = [
        "# BBLR: which reference sampler certifies, by data set, gamma, configuration and prior",
        "",
        "Split 0, lam = 1 (the posterior depends on gamma^2 / lam: DERIVATIONS.md §6.2); every sampler of the chain "
        "NUTS -> parallel-tempering is run (the first certified one is the reference `zoo compare` uses), no cache, "
        "seconds include compilation; min ESS/s = smallest bulk ESS per wall second. Agreement: largest |z| of the "
        "posterior medians between the two samplers where both certify. Modes: distinct modes the reference's draws "
        "flow to / the largest basin's share ± its standard error / whether SLA's answer is that main mode "
        "(validation/judge/modes.py). Laplace's sd ratio (median), k-hat (joint), pred_mae and verdict only against a "
        "certified reference.",
        "",
        "| data (N, M) | gamma (gamma^2/lam) | config | prior | NUTS | min ESS/s | parallel tempering | min ESS/s | "
        "reference | agreement | modes / main share / SLA main | test error: SLA / Laplace / reference | "
        "Laplace sd ratio | k-hat | pred_mae | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        used, agree = reference_used_text(c["reference"]), agreement_text(c.get("agreement"))
        e = c["engines"]
        lap = e.get("laplace", {})
        lines.append(
            f"| {c['data']} ({c['n_train']}, {c['n_weights']}) | {c['gamma']:g} ({c['gamma2_over_lam']:g}) | "
            f"BBLR{c['config']} | {c['prior']} | "
            f"{tried_text(c['tried'], 'nuts')} | {ess_rate_text(c['tried'], 'nuts')} | "
            f"{tried_text(c['tried'], 'parallel-tempering')} | {ess_rate_text(c['tried'], 'parallel-tempering')} | "
            f"{used} | {agree} | {_modes_text(c.get('modes'))} | "
            f"{_engine_text(e.get('sla'))} / {_engine_text(lap)} / {_engine_text(e.get('reference'))} | "
            f"{fmt(lap.get('sd_ratio_median'), '.2f')} | {fmt(lap.get('khat'), '.2f')} | "
            f"{fmt(lap.get('pred_mae'), '.4f')} | {lap.get('verdict', '-')} |")
    return "\n".join(lines) + "\n"


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
    args = ap.parse_args(argv)
    data = _choices(args.data, datasets.names(), "data set", ap)
    gammas = _choices(args.gammas, None, "gamma", ap, float)
    if any(not g > 0 for g in gammas):
        ap.error("gammas must be positive")
    configs = _choices(args.configs, (1, 2), "configuration", ap, int)
    priors = _choices(args.priors, PRIORS, "prior", ap)
    zoo.enable_compilation_cache()
    for prior in priors:
        for config in configs:
            for gamma in gammas:
                for d in data:
                    load_or_run(_cell_path(args.out, d, gamma, config, prior), f"{d} gamma={gamma:g} BBLR{config} {prior}",
                                lambda: run_cell(d, gamma, config, prior, args.time_limit))
    cells = []
    for path in sorted(glob.glob(os.path.join(args.out, "cells", "*.json"))):
        with open(path) as fh:
            cells.append(json.load(fh))
    cells.sort(key=lambda c: (c["prior"], c["config"], c["gamma"], DATA.index(c["data"]) if c["data"] in DATA else 99))
    text = table(cells)
    write_text_atomic(os.path.join(args.out, "table.md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
