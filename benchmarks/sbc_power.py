"""The power line of SBC (validation/judge/rank_power.py, ``detectable_defects``) as a table, and a check
of it by the uniformity test itself.

For each number of simulations S and of ranked quantities K (L = 99 draws, 5% family-wise
false alarms): the smallest mean shift (posterior sds) and sd factors (narrow, wide) of
ONE quantity that the test detects 80% of the time, whether that power is useful (else a
run inside its bands is "too few simulations to call"), and the seconds the line took
uncached (apart from the band of that S, which a summary's own test has computed).

The check: at each size of the line, ``--replicates`` full runs of the test - ranks of K
quantities from ``conjugate_normal_ranks`` with the defect in the first only, judged by
``uniformity`` as a summary judges them - must flag about 80% (more by up to the K - 1
exact quantities' own false alarms, which the line leaves out; 95% Wilson intervals).

    python benchmarks/sbc_power.py                    # 400 replicates a check (about 4 min on 2 cores)
    python benchmarks/sbc_power.py --replicates 100   # quicker
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

import zoo  # noqa: F401
from zoo.validation.base.atomic import atomic_write, write_json_atomic
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.judge import rank_uniformity
from zoo.validation.judge import rank_power

SIMS = (10, 20, 50, 100, 200, 500)
QUANTITIES = (10, 30)
N_DRAWS = 99


def measured(n_sims: int, k: int, reps: int, seed: int, **defect) -> dict:
    """How often the full test flags K quantities, the first with ``defect``."""
    rng = np.random.default_rng(seed)
    flagged = sum(rank_uniformity.uniformity(rank_uniformity.conjugate_normal_ranks(rng, n_sims, N_DRAWS, k, defective=1, **defect), N_DRAWS,
                                 seed=seed + r).status == rank_uniformity.MISCALIBRATED for r in range(reps))
    lo, hi = wilson_interval(flagged, reps)
    return {"flagged": flagged, "replicates": reps, "rate": flagged / reps, "ci95": [lo, hi]}


def row(n_sims: int, k: int, reps: int) -> dict:
    # the band first (a summary has it already, from its own uniformity test), then the line
    t0 = time.perf_counter()
    rank_uniformity.simultaneous_band(n_sims, 1.0 - rank_uniformity.FALSE_ALARM / k)
    t1 = time.perf_counter()
    power = rank_power.detectable_defects(n_sims, N_DRAWS, k)
    seconds = time.perf_counter() - t1
    checks = {}
    for name, defect in (("mean_shift_sd", {"shift": power.mean_shift_sd}),
                         ("sd_factor_narrow", {"sd_factor": power.sd_factor_narrow}),
                         ("sd_factor_wide", {"sd_factor": power.sd_factor_wide})):
        value = next(iter(defect.values()))
        checks[name] = None if value is None else measured(n_sims, k, reps, seed=1000 * n_sims + k, **defect)
    return {**{key: getattr(power, key) for key in ("n_sims", "n_quantities", "n_draws", "mean_shift_sd", "sd_factor_narrow",
                                          "sd_factor_wide", "useful", "line")},
            "band_seconds": t1 - t0, "seconds": seconds, "check": checks}


def _size(value, fmt):
    return "none" if value is None else fmt.format(value)


def _rate(check):
    return "-" if check is None else f"{check['rate']:.2f} ({check['ci95'][0]:.2f}-{check['ci95'][1]:.2f})"


def table(rows) -> list[str]:
    lines = ["| K | S | mean shift (sd) | sd narrow | sd wide | inside the bands means | seconds: band, line | "
             "test flags: shift / narrow / wide |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["check"]
        lines.append(f"| {r['n_quantities']} | {r['n_sims']} | {_size(r['mean_shift_sd'], '{:.2f}')} | "
                     f"{_size(r['sd_factor_narrow'], 'x{:.2f}')} | {_size(r['sd_factor_wide'], 'x{:.2f}')} | "
                     f"{'calibrated' if r['useful'] else 'too few to call'} | "
                     f"{r['band_seconds']:.2f}, {r['seconds']:.2f} | {_rate(c['mean_shift_sd'])} / "
                     f"{_rate(c['sd_factor_narrow'])} / {_rate(c['sd_factor_wide'])} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=400)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "results", "sbc_power"),
                        help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for k in QUANTITIES:
        for s in SIMS:
            rows.append(row(s, k, args.replicates))
            print(table(rows[-1:])[-1], flush=True)
    wall = time.perf_counter() - t0
    command = "python benchmarks/sbc_power.py" + ("" if args.replicates == 400 else f" --replicates {args.replicates}")
    machine = f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {sys.version.split()[0]}"
    meta = {"date": datetime.date.today().isoformat(), "command": command, "machine": machine,
            "wall_seconds": wall, "n_draws": N_DRAWS, "false_alarm": rank_uniformity.FALSE_ALARM,
            "probability": rank_power.POWER_PROBABILITY, "power_replicates": rank_power.POWER_REPLICATES,
            "power_seed": rank_power.POWER_SEED, "useless": rank_power.USELESS, "check_replicates": args.replicates}
    write_json_atomic({**meta, "rows": rows}, args.out + ".json")
    md = ["# SBC power: what a run of S simulations detects", "",
          f"`{command}`, {meta['date']}, {machine}, {wall:.0f} s in all.", "",
          f"L = {N_DRAWS} draws, {100 * rank_uniformity.FALSE_ALARM:g}% family-wise false alarms, K quantities. Sizes: the "
          f"smallest defect of ONE quantity the uniformity test detects {100 * rank_power.POWER_PROBABILITY:.0f}% of the "
          f"time (rank_power.detectable_defects: {rank_power.POWER_REPLICATES} replicates, Monte Carlo sd of the 80% "
          f"{100 * np.sqrt(0.16 / rank_power.POWER_REPLICATES):.1f}%; 'none': not even a mean {rank_power.MAX_SHIFT_SD:g} sd off "
          f"or an sd x{1 / rank_power.MAX_SD_FACTOR:g} / x{rank_power.MAX_SD_FACTOR:g}). A run inside its bands is called "
          f"calibrated only where the mean shift is at most {rank_power.USELESS['mean_shift_sd']:g} sd and the narrow "
          f"factor at least x{rank_power.USELESS['sd_factor_narrow']:g}. Test flags: the full test (K quantities, the "
          f"defect in the first) at the line's sizes, {args.replicates} replicates, 95% Wilson intervals; about "
          "0.80 expected, a little more from the other quantities' own false alarms.", ""] + table(rows)

    def write(tmp):
        with open(tmp, "w") as fh:
            fh.write("\n".join(md) + "\n")
    atomic_write(args.out + ".md", write)


if __name__ == "__main__":
    main()
