"""Two runs of ``zoo compare`` side by side: every non-timing value that differs.

A refactor that should not change a number is checked by running the same ``zoo compare``
before and after it (each into its own folder, each with an empty reference cache) and
diffing the two ``results.json`` files value by value. Timings, dates and cache paths and
keys are left out (they differ between any two runs); everything else - metrics, verdicts,
reference diagnostics, chosen hyper-parameters, failures, texts - must agree exactly.

    python benchmarks/same_numbers.py BEFORE AFTER [--models pcvm,...] [--rename MODEL:OLD=NEW ...]

BEFORE and AFTER hold one folder per model (``zoo compare --model M --out BEFORE/M``).
Prints a count per model and one line per differing value (``model: changed path: before
-> after``), then the paths only one run has (``added`` / ``removed``: a change of the
results.json layout); exits 1 when any value present in both differs. ``--rename grid-rvm:laplace=auto-laplace`` compares
BEFORE's engine ``laplace`` of that model with AFTER's ``auto-laplace`` (an engine renamed
between the runs; its name inside texts such as verdict reasons is not rewritten).
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


def renamed(results: dict, renames: dict[str, str]) -> dict:
    """``results`` with its engines (and config's engine list) renamed old -> new."""
    if not renames:
        return results
    out = dict(results)
    out["engines"] = {renames.get(k, k): v for k, v in results.get("engines", {}).items()}
    if "engines" in results.get("config", {}):
        out["config"] = {**results["config"], "engines": [renames.get(e, e) for e in results["config"]["engines"]]}
    return out


def differences(before: dict, after: dict) -> tuple[list[str], list[str], list[str]]:
    """(changed, added, removed): values present in both runs that differ, and paths only
    AFTER or only BEFORE has (a change of the results.json layout, not of a number)."""
    left, right = dict(flatten(before)), dict(flatten(after))
    changed = [f"{path}: {left[path]!r} -> {right[path]!r}" for path in sorted(set(left) & set(right))
               if not same(left[path], right[path])]
    added = [f"{path} = {right[path]!r}" for path in sorted(set(right) - set(left))]
    removed = [f"{path} (was {left[path]!r})" for path in sorted(set(left) - set(right))]
    return changed, added, removed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--rename", action="append", default=[], metavar="MODEL:OLD=NEW",
                        help="an engine renamed between the runs (repeatable)")
    args = parser.parse_args(argv)
    renames: dict[str, dict[str, str]] = {}
    for item in args.rename:
        model, _, pair = item.partition(":")
        old, _, new = pair.partition("=")
        if not (model and old and new):
            parser.error(f"--rename takes MODEL:OLD=NEW, got {item!r}")
        renames.setdefault(model, {})[old] = new
    total = 0
    for model in args.models.split(","):
        with open(os.path.join(args.before, model, "results.json")) as fh:
            before = json.load(fh)
        with open(os.path.join(args.after, model, "results.json")) as fh:
            after = json.load(fh)
        changed, added, removed = differences(renamed(before, renames.get(model, {})), after)
        n_values = sum(1 for _ in flatten(before))
        print(f"{model}: {len(changed)} of {n_values} non-timing values differ; "
              f"layout: {len(added)} paths added, {len(removed)} removed")
        for line in changed:
            print(f"  {model}: changed {line}")
        for line in added:
            print(f"  {model}: added {line}")
        for line in removed:
            print(f"  {model}: removed {line}")
        total += len(changed)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
