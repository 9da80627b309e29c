"""False-alarm rate and power of SBC's uniformity test (validation/judge/rank_uniformity.py), by simulation.

Ranks of an exact posterior (a conjugate normal problem, ``sbc.conjugate_normal_ranks``)
are uniform, so every "miscalibrated" is a false alarm; the test promises at most 5%
family-wise for any number K of quantities. Power rows plant a defect in every quantity
(sd halved or doubled, mean moved by 0.25 or 0.5 posterior sds). 95% Wilson intervals.

``--battery-power`` answers a different question: at how many simulations S would SBC
catch the defect battery's generic defects (validation/runs/battery.py) in 95% of runs, had
the engine been exact otherwise? The defects as the battery plants them, on K = 11 ranked
quantities (PCVM's SBC problem): covariance x 0.5 and x 2 (sds x 0.71 and x 1.41) in every
quantity, the mean moved by 0.5 sd in one quantity and in all.

    python benchmarks/sbc_false_alarm.py                  # 1000 replicates per cell
    python benchmarks/sbc_false_alarm.py --replicates 200
    python benchmarks/sbc_false_alarm.py --battery-power  # power of the battery's defects by S
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys

import numpy as np

import zoo  # noqa: F401
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.judge.rank_uniformity import MISCALIBRATED, conjugate_normal_ranks, uniformity

SIMS = (30, 100, 300)
QUANTITIES = (1, 5, 20, 50)
DEFECTS = (("sd x 0.5", {"sd_factor": 0.5}), ("sd x 2", {"sd_factor": 2.0}),
           ("mean + 0.5 sd", {"shift": 0.5}), ("mean + 0.25 sd", {"shift": 0.25}))
N_DRAWS = 99
BATTERY_K = 11
BATTERY_SIMS = (100, 200, 400, 800)
BATTERY_DEFECTS = (("cov x 0.5", {"sd_factor": 0.5 ** 0.5}), ("cov x 2", {"sd_factor": 2.0 ** 0.5}),
                   ("mean + 0.5 sd (one)", {"shift": 0.5, "defective": 1}), ("mean + 0.5 sd (all)", {"shift": 0.5}))


def cell(n_sims: int, k: int, reps: int, seed: int, **defect) -> dict:
    rng = np.random.default_rng(seed)
    flagged = sum(uniformity(conjugate_normal_ranks(rng, n_sims, N_DRAWS, k, **defect), N_DRAWS,
                             seed=seed + r).status == MISCALIBRATED for r in range(reps))
    lo, hi = wilson_interval(flagged, reps)
    return {"n_sims": n_sims, "k": k, "replicates": reps, "flagged": flagged, "rate": flagged / reps,
            "ci95": [lo, hi], **defect}


def battery_power(replicates: int) -> list[dict]:
    """Power of SBC against the battery's generic defects at each S of BATTERY_SIMS, and
    the smallest of them whose detection rate reaches 95%."""
    rows = []
    print(f"| defect (K = {BATTERY_K}) | S = " + " | S = ".join(map(str, BATTERY_SIMS)) + " | 95% reached at |")
    print("|---" * (len(BATTERY_SIMS) + 2) + "|")
    for name, defect in BATTERY_DEFECTS:
        cells = [dict(cell(s, BATTERY_K, replicates, seed=13 * s + 1, **defect), defect=name) for s in BATTERY_SIMS]
        rows += cells
        reached = next((c["n_sims"] for c in cells if c["rate"] >= 0.95), None)
        print(f"| {name} | " + " | ".join(f"{c['rate']:.2f}" for c in cells) + " | "
              + (f"S = {reached}" if reached else f"beyond S = {BATTERY_SIMS[-1]}") + " |", flush=True)
    return rows


def _meta() -> dict:
    """When, how and where the rows were measured, and with which band (the zoo's own since issue 53)."""
    return {"date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            "command": "python " + " ".join(sys.argv), "python": platform.python_version(),
            "machine": f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)",
            "band": "zoo.validation.judge.ecdf_band (exact coverage, smallest covering central band)"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--battery-power", action="store_true",
                        help="only the power of the defect battery's generic defects by S (200 replicates a cell)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "sbc_false_alarm.json"))
    args = parser.parse_args(argv)
    if args.battery_power:
        stored = {}
        if os.path.exists(args.out):
            with open(args.out) as fh:
                stored = json.load(fh)
        stored["battery_power"] = {"meta": _meta(), "k": BATTERY_K, "rows": battery_power(min(args.replicates, 200))}
        write_json_atomic(stored, args.out)
        return
    rows, power = [], []
    print("| simulations S | K = " + " | K = ".join(map(str, QUANTITIES)) + " |")
    print("|---" * (len(QUANTITIES) + 1) + "|")
    for s in SIMS:
        cells = [cell(s, k, args.replicates, seed=100 * s + k) for k in QUANTITIES]
        rows += cells
        print(f"| {s} | " + " | ".join(f"{c['rate']:.3f} ({c['ci95'][0]:.3f}-{c['ci95'][1]:.3f})" for c in cells)
              + " |", flush=True)
    print("\n| defect (in every quantity, K = 5) | S = " + " | S = ".join(map(str, SIMS)) + " |")
    print("|---" * (len(SIMS) + 1) + "|")
    for name, defect in DEFECTS:
        cells = [dict(cell(s, 5, max(50, args.replicates // 5), seed=7 * s, **defect), defect=name) for s in SIMS]
        power += cells
        print(f"| {name} | " + " | ".join(f"{c['rate']:.2f}" for c in cells) + " |", flush=True)
    stored = {}
    if os.path.exists(args.out):  # keep the battery-power rows of an earlier run
        with open(args.out) as fh:
            stored = json.load(fh)
    stored.update({"meta": _meta(), "n_draws": N_DRAWS, "false_alarm": rows, "power": power})
    write_json_atomic(stored, args.out)


if __name__ == "__main__":
    main()
