"""What a reproduction is: an :class:`Entry` (its name, options and the function that runs
it), its :class:`Option` s, and the :class:`RunContext` the function receives. The paper
modules declare their entries with these; ``__init__.py`` collects them."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from zoo import data as datasets
from ..validation.runs.limits import REPETITIONS, check_count
from .cells import CellStore


class OutOfBounds(ValueError):
    """A value of the right kind outside the bounds its entry's protocol takes (its
    message names the option, the bound and why)."""


@dataclass(frozen=True)
class Option:
    """An entry-specific option. kind: "int", "float" (a positive finite number),
    "int_list", "float_list", "str_list" or "choice" (one of ``choices``). List options
    take comma-separated text on the CLI.

    minimum, maximum: for "int" and "int_list", the smallest (default 1) and largest
    (default none) value the entry's protocol takes - a training size its cross-validation
    needs, a count its design has - and why: the reason, in a few words, which the one-line
    refusal gives (``--n-train must be at least 10 (...); got 1``), before any cell runs."""

    name: str
    kind: str
    default: Any
    help: str
    choices: tuple = ()
    minimum: int | None = None
    maximum: int | None = None
    why: str = ""

    def _bounds(self, values: list[int]) -> None:
        """ValueError in one line for an integer value outside [minimum, maximum]."""
        flag = "--" + self.name.replace("_", "-")
        low = 1 if self.minimum is None else self.minimum
        why = f" ({self.why})" if self.why else ""
        for v in values:
            if v < low:
                raise OutOfBounds(f"{flag} must be at least {low}{why}; got {v}")
            if self.maximum is not None and v > self.maximum:
                raise OutOfBounds(f"{flag} must be at most {self.maximum}{why}; got {v}")

    def parse(self, value):
        """The option's value from CLI text or a Python value; ValueError if invalid."""
        flag = "--" + self.name.replace("_", "-")
        try:
            if self.kind == "int":
                out = int(value)
                if out < 1:
                    raise ValueError
                self._bounds([out])
                return out
            if self.kind == "float":
                out = float(value)
                if not (0 < out < float("inf")):
                    raise ValueError
                return out
            if self.kind == "choice":
                if value not in self.choices:
                    raise ValueError
                return value
            items = [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else list(value)
            if not items:
                raise ValueError
            if self.kind == "int_list":
                out = [int(v) for v in items]
                if any(v < 1 for v in out):
                    raise ValueError
                self._bounds(out)
                return out
            if self.kind == "float_list":
                out = [float(v) for v in items]
                if any(not (v > 0) or v == float("inf") for v in out):
                    raise ValueError
                return sorted(out)
            if self.kind == "str_list":
                out = [str(v) for v in items]
                bad = [v for v in out if self.choices and v not in self.choices]
                if bad:
                    raise ValueError
                return out
        except OutOfBounds:
            raise
        except (TypeError, ValueError):
            pass
        want = {"int": "a positive integer", "float": "a positive number", "int_list": "comma-separated positive integers",
                "float_list": "comma-separated positive numbers",
                "str_list": f"comma-separated names from {', '.join(self.choices)}",
                "choice": f"one of {', '.join(self.choices)}"}[self.kind]
        raise ValueError(f"{flag} must be {want}; got {value!r}")


@dataclass(frozen=True)
class Entry:
    """One reproduction. ``run`` is "module:function"; the function takes a
    :class:`RunContext` and returns {"markdown": body text, "json": table object}.

    min_reps, max_reps: the repetitions the protocol takes (a standard error needs two;
    repetitions that are a data set's splits stop at its number of splits; None: up to
    ``limits.REPETITIONS``), reps_why: why, in a few words. check: ``check(options, reps)``
    with the parsed options: ValueError in one line for what the options' own bounds
    cannot say (the sizes and the test set must fit in the data's pool, each training set
    must hold enough of each class for the CV); cheap - no fit - as it runs before any
    cell (:meth:`checked`)."""

    name: str
    description: str
    default_reps: int
    default_sizes: str
    options: tuple[Option, ...]
    run: str
    min_reps: int = 1
    max_reps: int | None = None
    reps_why: str = ""
    check: Callable[[dict, int], None] | None = None

    def option(self, name: str) -> Option:
        """The entry's :class:`Option` called ``name``; KeyError if it has none."""
        for o in self.options:
            if o.name == name:
                return o
        raise KeyError(name)

    def checked(self, reps: int, options: dict) -> dict:
        """The entry's options parsed (missing ones take their defaults), and they and
        ``reps`` checked against what its protocol takes; ValueError in one line naming
        the option, its bound and why. Called before any cell runs."""
        why = f" ({self.reps_why})" if self.reps_why else ""
        if self.min_reps == self.max_reps != reps:
            raise ValueError(f"--reps must be {self.min_reps} for {self.name}{why}; got {reps}")
        if reps < self.min_reps:
            raise ValueError(f"--reps must be at least {self.min_reps} for {self.name}{why}; got {reps}")
        if self.max_reps is not None and reps > self.max_reps:
            raise ValueError(f"--reps must be at most {self.max_reps} for {self.name}{why}; got {reps}")
        check_count(reps, "--reps", REPETITIONS)
        parsed = {o.name: o.parse(options.get(o.name, o.default)) for o in self.options}
        if self.check is not None:
            self.check(parsed, reps)
        return parsed


def check_splits(data_sets, count: int, flag: str = "--reps") -> None:
    """ValueError in one line unless each data set has ``count`` splits: an entry whose
    repetitions (or tuning splits) are a data set's splits stops at their number."""
    n_splits = {row["name"]: row["n_splits"] for row in datasets.describe()}
    for d in data_sets:
        if count > n_splits[d]:
            raise ValueError(f"{flag} must be at most {n_splits[d]} with data set {d} (one of its {n_splits[d]} "
                             f"splits each); got {count}")


def check_classes(labels, need: int, what: str, cv: str, flag: str) -> None:
    """ValueError in one line unless ``labels`` (0/1) hold ``need`` points of each class,
    as a stratified ``need``-fold CV takes. what: the training set, in words ("--n-train
    12: repetition 3"); cv: whose CV ("the L1/L2-LR's"); flag: the option to raise."""
    y = [float(v) > 0.5 for v in labels]
    fewest = min(sum(y), len(y) - sum(y))
    if fewest < need:
        raise ValueError(f"{what} has {fewest} training point(s) of one class; {cv} {need}-fold stratified CV "
                         f"needs {need} of each (raise {flag})")


@dataclass
class RunContext:
    """What an entry's run function receives: its :class:`Entry`, the run's repetitions and
    seed, its options parsed (:meth:`Entry.checked`), the
    :class:`~zoo.reproductions.cells.CellStore` that computes and keeps its cells, and the
    entry's output folder."""

    entry: Entry
    reps: int
    seed: int
    options: dict
    store: CellStore
    out_dir: str
    #: where the entry's progress lines go (default: printed to stderr)
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))
