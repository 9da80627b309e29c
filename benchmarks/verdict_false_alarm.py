"""False-alarm rate and power of the verdict (validation/judge/verdict.py), by simulation.

An engine whose Gaussian posterior is the exact one is judged against reference draws of
that posterior: 4 stationary AR(1) chains x 1000 draws per coordinate (phi = 0.8: ESS about
440, near the certification minimum; phi = 0: independent draws, ESS 4000), a fresh
reference, fresh means and sds per replicate. Every "differs" is then a false alarm; the
rule promises at most 5% for any dimension d. Power rows plant one defect in coordinate 0
(mean moved by 0.5 or 0.2 sd; sd scaled by 2 or 0.5). Each rate comes with its binomial
95% interval (Wilson).

    python benchmarks/verdict_false_alarm.py                  # 400 replicates per cell
    python benchmarks/verdict_false_alarm.py --replicates 50  # quicker
"""
from __future__ import annotations

import argparse
import os

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.judge.verdict import FALSE_ALARM, simulate_verdicts

DIMENSIONS = (2, 5, 10, 20, 50, 100, 200, 500)
DEFECTS = (("mean + 0.5 sd", {"mean_shift": 0.5}), ("mean + 0.2 sd", {"mean_shift": 0.2}),
           ("sd x 2", {"sd_factor": 2.0}), ("sd x 0.5", {"sd_factor": 0.5}))


def cell(d: int, n: int, phi: float, seed: int, **defect) -> dict:
    flagged = simulate_verdicts(d, n, seed=seed, phi=phi, **defect)
    k = int(flagged.sum())
    lo, hi = wilson_interval(k, n)
    return {"d": d, "phi": phi, "replicates": n, "flagged": k, "rate": k / n, "ci95": [lo, hi], **defect}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=400)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "verdict_false_alarm.json"))
    args = parser.parse_args(argv)
    rows, power = [], []
    for phi in (0.8, 0.0):
        for i, d in enumerate(DIMENSIONS):
            rows.append(cell(d, args.replicates, phi, seed=1000 * i + int(10 * phi)))
            r = rows[-1]
            print(f"false alarm  phi={phi:.1f} d={d:4d}: {r['flagged']:3d}/{r['replicates']} = {r['rate']:.3f} "
                  f"(95% CI {r['ci95'][0]:.3f}-{r['ci95'][1]:.3f})", flush=True)
    for name, defect in DEFECTS:
        for d in (20, 200):
            power.append(dict(cell(d, max(20, args.replicates // 4), 0.8, seed=7 + d, **defect), defect=name))
            r = power[-1]
            print(f"power {name:14s} d={d:4d}: {r['rate']:.3f}", flush=True)
    write_json_atomic({"nominal_false_alarm": FALSE_ALARM, "false_alarm": rows, "power": power}, args.out)
    print("\n| d | false alarms, ESS ~440 (phi 0.8) | false alarms, independent draws |\n|---|---|---|")
    for d in DIMENSIONS:
        a = next(r for r in rows if r["d"] == d and r["phi"] == 0.8)
        b = next(r for r in rows if r["d"] == d and r["phi"] == 0.0)
        print(f"| {d} | {a['rate']:.3f} ({a['ci95'][0]:.3f}-{a['ci95'][1]:.3f}) | "
              f"{b['rate']:.3f} ({b['ci95'][0]:.3f}-{b['ci95'][1]:.3f}) |")


if __name__ == "__main__":
    main()
