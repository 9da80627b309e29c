"""What a reproduction is: an :class:`Entry` (its name, options and the function that runs
it), its :class:`Option` s, and the :class:`RunContext` the function receives. The paper
modules declare their entries with these; ``__init__.py`` collects them."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from .cells import CellStore


@dataclass(frozen=True)
class Option:
    """An entry-specific option. kind: "int", "float" (a positive finite number),
    "int_list", "float_list", "str_list" or "choice" (one of ``choices``). List options
    take comma-separated text on the CLI."""

    name: str
    kind: str
    default: Any
    help: str
    choices: tuple = ()

    def parse(self, value):
        """The option's value from CLI text or a Python value; ValueError if invalid."""
        flag = "--" + self.name.replace("_", "-")
        try:
            if self.kind == "int":
                out = int(value)
                if out < 1:
                    raise ValueError
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
    :class:`RunContext` and returns {"markdown": body text, "json": table object}."""

    name: str
    description: str
    default_reps: int
    default_sizes: str
    options: tuple[Option, ...]
    run: str

    def option(self, name: str) -> Option:
        for o in self.options:
            if o.name == name:
                return o
        raise KeyError(name)


@dataclass
class RunContext:
    entry: Entry
    reps: int
    seed: int
    options: dict
    store: CellStore
    out_dir: str
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))
