"""Two runs of ``zoo compare`` side by side: every non-timing value that differs.

A refactor that should not change a number is checked by running the same ``zoo compare``
before and after it (each into its own folder, each with an empty reference cache) and
diffing the two ``results.json`` files value by value. Timings, dates and cache paths and
keys are left out (they differ between any two runs); everything else - metrics, verdicts,
reference diagnostics, chosen hyper-parameters, failures, texts - must agree exactly.

    python benchmarks/same_numbers.py BEFORE AFTER [--models pcvm,ggsm-probit,...]

BEFORE and AFTER hold one folder per model (``zoo compare --model M --out BEFORE/M``).
Prints one line per differing value (``model: path: before -> after``) and a count per
model; exits 1 when any value differs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

#: keys whose values are timings or run-specific bookkeeping, at any depth
TIMING_KEYS = {"seconds", "compile_seconds", "warm_seconds", "wall_seconds", "speedup_vs_reference", "date",
               "from_cache", "cache_path", "cache_key", "timing_note", "seconds_per_fit", "median_fit_seconds"}
DEFAULT_MODELS = ("pcvm", "ggsm-probit", "gig-logistic", "grid-rvm", "bblr")


def flatten(value, path=""):
    """(path, leaf) for every leaf of a JSON value, timing keys left out."""
    if isinstance(value, dict):
        for key in sorted(value):
            if key in TIMING_KEYS or "seconds" in key:
                continue
            yield from flatten(value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from flatten(item, f"{path}[{i}]")
    else:
        yield path, value


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def differences(before: dict, after: dict) -> list[str]:
    left, right = dict(flatten(before)), dict(flatten(after))
    out = []
    for path in sorted(set(left) | set(right)):
        a, b = left.get(path, "<absent>"), right.get(path, "<absent>")
        if not same(a, b):
            out.append(f"{path}: {a!r} -> {b!r}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    args = parser.parse_args(argv)
    total = 0
    for model in args.models.split(","):
        with open(os.path.join(args.before, model, "results.json")) as fh:
            before = json.load(fh)
        with open(os.path.join(args.after, model, "results.json")) as fh:
            after = json.load(fh)
        diff = differences(before, after)
        n_values = sum(1 for _ in flatten(before))
        print(f"{model}: {len(diff)} of {n_values} non-timing values differ")
        for line in diff:
            print(f"  {model}: {line}")
        total += len(diff)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
