"""False-alarm rate and power of the joint verdict (validation/judge/verdict.py, DERIVATIONS.md §7),
by simulation.

The exact posterior of each replicate is a correlated Gaussian (a random correlation
matrix, eigenvalues log-normal with sd 1, means and sds as in verdict_false_alarm.py); the
reference is 4 stationary AR(1) chains x 1000 draws with that covariance (phi = 0.8: ESS
about 440, near the certification minimum), fresh per replicate. Columns for an exact
engine, whose every "differs" is a false alarm (the rule promises at most 5% in any
dimension):
* joint, Gaussian engine - the engine's posterior is the exact Gaussian;
* marginal, same replicates - the marginal verdict on the same engines and references;
* joint, draws engine - the engine is a second, independent AR(1) run (Monte Carlo
  error of its own);
* joint, no split - directions and tests from the same reference draws, the rule the
  split replaces: its false alarms are the bias of sample eigen-directions.

Power rows plant a defect: "rotated" (the correlation matrix turned by a random rotation
and renormalized) and "correlations dropped" (mean field) keep every marginal exact; mean
+ 0.5 sd and sd x 0.5 act on coordinate 0. Each rate comes with its binomial 95% interval
(Wilson). A separate script from verdict_false_alarm.py because the posterior (correlated),
the defects and the columns differ; that script's table stays as it was.

    python benchmarks/joint_verdict_false_alarm.py                   # about 4 CPU minutes (d = 200: 40%)
    python benchmarks/joint_verdict_false_alarm.py --replicates 200  # quicker
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import zoo  # noqa: F401  (float64)
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.judge.verdict import FALSE_ALARM, simulate_joint_verdicts

DIMENSIONS = (2, 5, 10, 20, 50, 100, 200)
POWER_DIMENSIONS = (10, 50)
DEFECTS = (("rotated", {"defect": "rotated"}), ("correlations dropped", {"defect": "correlations dropped"}),
           ("mean + 0.5 sd (one)", {"mean_shift": 0.5}), ("sd x 0.5 (one)", {"sd_factor": 0.5}))
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def rate(flagged) -> dict:
    k, n = int(flagged.sum()), len(flagged)
    lo, hi = wilson_interval(k, n)
    return {"flagged": k, "replicates": n, "rate": k / n, "ci95": [lo, hi]}


def false_alarm_row(d: int, n: int, n_draws: int, n_nosplit: int, seed: int) -> dict:
    t0 = time.perf_counter()
    joint, marginal = simulate_joint_verdicts(d, n, seed=seed, with_marginal=True)
    seconds = time.perf_counter() - t0
    return {"d": d, "joint": rate(joint), "marginal": rate(marginal), "seconds_per_replicate": seconds / n,
            "joint_draws_engine": rate(simulate_joint_verdicts(d, n_draws, seed=seed + 1, engine_draws=True)),
            "joint_no_split": rate(simulate_joint_verdicts(d, n_nosplit, seed=seed + 2, split=False))}


def power_row(name: str, defect: dict, d: int, n: int, seed: int) -> dict:
    joint, marginal = simulate_joint_verdicts(d, n, seed=seed, with_marginal=True, **defect)
    return {"defect": name, "d": d, "joint": rate(joint), "marginal": rate(marginal)}


def cell(r: dict) -> str:
    return f"{r['rate']:.3f} ({r['ci95'][0]:.3f}-{r['ci95'][1]:.3f}; {r['flagged']}/{r['replicates']})"


def markdown(result: dict) -> str:
    lines = [f"# Joint verdict: false alarms and power ({result['date']}, {result['machine']})", "",
             f"Command: `{result['command']}` ({result['seconds']:.0f} s wall, {result['cpu_seconds']:.0f} s CPU). "
             "Correlated Gaussian posterior, "
             "reference 4 AR(1) chains x 1000 draws, phi 0.8 (ESS ~440); nominal false-alarm rate "
             f"{FALSE_ALARM:g}. Rate (Wilson 95% interval; flagged/replicates).", "",
             "## False alarms of an exact engine", "",
             "| d | joint, Gaussian engine | marginal, same replicates | joint, draws engine | joint, no split "
             "(biased) | s / replicate (joint + marginal) |", "|---|---|---|---|---|---|"]
    for r in result["false_alarm"]:
        lines.append(f"| {r['d']} | {cell(r['joint'])} | {cell(r['marginal'])} | {cell(r['joint_draws_engine'])} | "
                     f"{cell(r['joint_no_split'])} | {r['seconds_per_replicate']:.3f} |")
    lines += ["", "## Power against planted defects (Gaussian engine)", "",
              "| defect | d | joint | marginal |", "|---|---|---|---|"]
    for r in result["power"]:
        lines.append(f"| {r['defect']} | {r['d']} | {cell(r['joint'])} | {cell(r['marginal'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000, help="per false-alarm cell, Gaussian engine")
    parser.add_argument("--draws-replicates", type=int, default=300, help="per false-alarm cell, draws engine")
    parser.add_argument("--nosplit-replicates", type=int, default=100, help="per cell of the rule without split")
    parser.add_argument("--power-replicates", type=int, default=200)
    parser.add_argument("--out", default=os.path.join(RESULTS, "joint_verdict_false_alarm.json"))
    args = parser.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    rows = []
    for i, d in enumerate(DIMENSIONS):
        rows.append(false_alarm_row(d, args.replicates, args.draws_replicates, args.nosplit_replicates,
                                    seed=1000 * i + 3))
        r = rows[-1]
        print(f"false alarm d={d:4d}: joint {cell(r['joint'])}  marginal {cell(r['marginal'])}  draws engine "
              f"{cell(r['joint_draws_engine'])}  no split {cell(r['joint_no_split'])}", flush=True)
    power = []
    for name, defect in DEFECTS:
        for d in POWER_DIMENSIONS:
            power.append(power_row(name, defect, d, args.power_replicates, seed=7 + d))
            r = power[-1]
            print(f"power {name:22s} d={d:3d}: joint {cell(r['joint'])}  marginal {cell(r['marginal'])}", flush=True)
    command = "python benchmarks/joint_verdict_false_alarm.py" + ("".join(f" {a}" for a in argv) if argv else
                                                                 "".join(f" {a}" for a in sys.argv[1:]))
    result = {"nominal_false_alarm": FALSE_ALARM, "date": datetime.date.today().isoformat(), "command": command,
              "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, shared", "seconds": time.perf_counter() - t0,
              "cpu_seconds": time.process_time() - c0,
              "false_alarm": rows, "power": power}
    write_json_atomic(result, args.out)
    md = markdown(result)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as fh:
        fh.write(md)
    print("\n" + md)


if __name__ == "__main__":
    main()
