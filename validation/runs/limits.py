"""The largest counts a run takes, refused before any work.

A count on the command line or in a study file (simulations, draws, replicates, data
sets, chain draws, repetitions) multiplies the work, and a slip of a few zeros
(``sims = 100000000000000000``) started a run that would outlive the machine. Each bound
below is far above what a real study uses (the reason is beside it), and a count past it
ends the command in one line that gives the count, the bound and roughly how long the
run would take, from a stated cost per unit on one core: an order of magnitude, not a
forecast (the measured costs are in ``benchmarks/``; these are deliberately round).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limit", "check_count", "duration", "SIMULATIONS", "DRAWS", "REPLICATES", "DATASETS", "CHAIN_DRAWS",
           "DESIGN_POINTS", "BASIS_FUNCTIONS", "REPETITIONS"]


@dataclass(frozen=True)
class Limit:
    """The most of one count a run takes. unit: one of what is counted, in words
    ("simulation"). seconds_each: a rough cost of one on one core (None: no estimate, the
    bound is about memory). why: why no real run needs more, in a few words."""

    maximum: int
    unit: str
    seconds_each: float | None
    why: str


#: simulations of one SBC run (a study cell, one engine of `zoo sbc`, a battery replicate):
#: SBC papers use up to ~10,000, and 100,000 already resolve a rank histogram far below any
#: band; ~1 s each: a fit and its draws, from a
#: hundredth of a second (the Gaussian engines) to seconds (NUTS)
SIMULATIONS = Limit(100_000, "simulation", 1.0, "SBC papers use up to ~10,000")
#: posterior draws ranked per simulation: SBC ranks L ~ 100 to 1,000 (the default is 99);
#: ~1 ms a draw is NUTS's on the small SBC posteriors, the engines' are cheaper
DRAWS = Limit(100_000, "draw", 1e-3, "SBC ranks 100 to 1,000 draws per simulation")
#: independent SBC runs of one block (a study's replicates, a battery's sbc_replicates):
#: the defect battery's default is 20; the cost of each is its simulations'
REPLICATES = Limit(1_000, "replicate", None, "the defect battery uses 20")
#: simulated data sets of a defect battery, each with its own certified reference run
#: (~30 s: NUTS to its certificate and the engine's fits); the battery's default is 100
DATASETS = Limit(10_000, "data set", 30.0, "the defect battery uses 100")
#: draws per chain of a reference run (--warmup, --samples, reference_draws): a certified
#: reference needs ~1,000 (zoo compare stops at 4 x 4,000); ~1 ms a NUTS draw
CHAIN_DRAWS = Limit(1_000_000, "draw per chain", 1e-3, "a certified reference needs ~1,000 per chain")
#: points and RBF features of an SBC design: the dense design is points x features floats
#: (800 MB at both bounds), and every simulation fits on it
DESIGN_POINTS = Limit(100_000, "design point", None, "the SBC design has 60 by default")
BASIS_FUNCTIONS = Limit(1_000, "basis function", None, "the SBC design has 6 by default")
#: repetitions of a `zoo reproduce` entry (each repeats every cell): the papers' largest is
#: Horii's 1,000
REPETITIONS = Limit(10_000, "repetition", None, "the papers' largest is 1,000")


def duration(seconds: float) -> str:
    """A length of time in the largest unit that keeps it at least 1 (``3.2e+09 years``)."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            n = seconds / size
            if n >= 1e6:
                return f"{n:.1e} {unit}"
            return f"{n:,.0f} {unit if round(n) != 1 else unit[:-1]}"
    return f"{seconds:.0f} seconds"


def check_count(value: int, name: str, limit: Limit, *, seconds_each: float | None = None,
                over: tuple[int, str] | None = None) -> int:
    """``value`` as an int; ValueError in one line when it exceeds ``limit.maximum``: the
    count, the bound, why, and about how long it would take at ``seconds_each`` (default
    the limit's own) per unit, times ``over`` = (n, "simulations") where each of n repeats
    them (draws per simulation). Lower bounds are the caller's (each command says its own)."""
    value = int(value)
    if value <= limit.maximum:
        return value
    each = limit.seconds_each if seconds_each is None else seconds_each
    times, what = over if over is not None else (1, "")
    cost = "" if each is None else (f": at ~{each:g} s per {limit.unit}{f' over {times:,} {what}' if what else ''} "
                                    f"it would take about {duration(value * each * times)} on one core")
    raise ValueError(f"{name} = {value:,} is more than the {limit.maximum:,} a run takes ({limit.why}){cost}")
