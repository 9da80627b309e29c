"""What a classifier fit will do and cost, said before it runs (``ModelRecord.classifier_plan``).

A model's record knows how its engines scale; the scikit-learn classifier
(``zoo/classifier.py``) asks the record for a :class:`FitPlan` once it has the design's size
and prints it (``verbose``), warns when the estimate is long and refuses, before any work,
a fit whose arrays cannot fit in the machine's memory. The classifier reads the plan
generically; nothing outside a record says how a model's engines scale.

The time estimates are cost models, not promises: ``seconds = fixed + coef * work / 1e9``,
where ``work`` counts the dominant arithmetic of the engine's path from its size (the
formula is the engine's, from its docstrings and DERIVATIONS.md) times the number of
iterations such fits typically take, and ``fixed`` (set-up) and ``coef`` are fitted to the
seconds, compilation left out, that ``benchmarks/classifier_cost.py`` measured on its
synthetic data on one machine (stated in :data:`REFERENCE_MACHINE`). JAX compiles an
engine's loops once per data shape in a process, so the first fit of a shape pays
``compile`` seconds more (said beside the estimate; a grid search's later fits do not pay
it). The iteration counts depend on the data (how separable, the kernel width), the
machine may be faster, slower or busy, so every estimate carries a factor it is good to
either way (:attr:`CostModel.factor`: the benchmark's ratios of estimate to actual
within its run, widened for the load - a second run at a lighter load was up to 4x faster).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

#: where the cost models' constants were measured: the machine, its load and the date are
#: recorded with the measurements (benchmarks/results/classifier_cost/table.md), not here,
#: where they would go stale unseen; a plan names the benchmark so a user can rerun it
REFERENCE_MACHINE = "the benchmark's machine (benchmarks/classifier_cost.py)"
#: bytes of one float64
FLOAT64 = 8


@dataclass(frozen=True)
class CostModel:
    """seconds = fixed + coef * work / 1e9 on the reference machine, compilation left out.

    * fixed: seconds that do not grow with the problem (set-up).
    * coef: seconds per 1e9 units of ``work`` (the work function is the path's own).
    * factor: the estimate holds to this factor either way (data and machine load included).
    * compile: seconds JAX takes to compile the path's loops on the first fit of a data
      shape in a process (the benchmark's median; 0 where the engine's own timing does
      not separate it, so that it is part of ``fixed`` and ``coef``).
    """

    fixed: float
    coef: float
    factor: float = 3.0
    compile: float = 0.0

    def __post_init__(self):
        if not (self.fixed >= 0 and self.coef > 0 and self.factor >= 1 and self.compile >= 0):
            raise ValueError(f"a cost model needs fixed >= 0, coef > 0, factor >= 1 and compile >= 0; got {self}")

    def seconds(self, work: float) -> float:
        """The estimated wall time, in seconds on the reference machine, of a fit doing
        ``work`` units of work: ``fixed + coef * work / 1e9`` (compilation not included)."""
        return self.fixed + self.coef * float(work) / 1e9


@dataclass(frozen=True)
class FitPlan:
    """How one classifier fit will run, known before it starts.

    * candidates: the basis functions (design columns) the engine starts from or scores.
    * path: how the engine runs, in a few words ("sequential selection, full scan of every
      candidate at every step", "all 2000 columns, dense O(N M^2) per sweep").
    * seconds: the estimated wall time on the reference machine, compilation left out, or
      None where no honest estimate exists; factor: it holds to this factor either way;
      compile_seconds: what a first fit of this shape in a process adds for compiling.
    * unit: what the engine's progress lines count ("selection step", "sweep", "round"), ""
      when the engine reports no progress (a loop compiled whole).
    * memory_bytes: the largest arrays the path holds at once (design included).
    * advice: what to do when the fit is too slow or too large for the machine.
    * fit_kwargs: end-to-end options this path needs, merged into the design's (e.g. the
      selection's working set).
    * design: ``design(basis, X) -> what the engine takes`` instead of ``basis.transform(X)``
      (the kernel columns never formed, for large N); None: the dense design.
    * cost_key, work: which cost model of the record gave ``seconds`` and the work it was
      evaluated at (the benchmark fits the models' constants from them); None without one.
    * cap_seconds: the same cost model at the engine's iteration cap, where the typical
      count of ``work`` may be far off (a loop with a cap and no other bound); None: not said.
    * iterations: the iteration count ``work`` assumes (so that a benchmark can put a fit's
      actual count in its place when it fits the constants); None: not a count of iterations.
    """

    candidates: int
    path: str
    seconds: float | None = None
    factor: float | None = None
    compile_seconds: float = 0.0
    unit: str = ""
    memory_bytes: float = 0.0
    advice: str = ""
    fit_kwargs: dict[str, Any] = field(default_factory=dict)
    design: Callable[[Any, Any], Any] | None = None
    cost_key: str | None = None
    work: float | None = None
    cap_seconds: float | None = None
    iterations: int | None = None

    def estimate_text(self) -> str:
        """"~40 s (13 s .. 2 min)" or "no estimate"."""
        if self.seconds is None:
            return "no estimate"
        f = self.factor or 1.0
        cap = "" if self.cap_seconds is None else f", at most ~{duration(self.cap_seconds)} at the iteration cap"
        first = (f", plus ~{duration(self.compile_seconds)} compiling on a first fit of this shape"
                 if self.compile_seconds >= 1 else "")
        return (f"~{duration(self.seconds)} ({duration(self.seconds / f)} .. {duration(self.seconds * f)}{cap}"
                f"{first}) on {REFERENCE_MACHINE}")


def estimate(costs: dict[str, CostModel], key: str, work: float, **plan) -> FitPlan:
    """A FitPlan whose seconds and factor come from the cost model ``costs[key]`` at ``work``."""
    model = costs[key]
    return FitPlan(seconds=model.seconds(work), factor=model.factor, compile_seconds=model.compile, cost_key=key,
                   work=float(work), **plan)


def dense_update_plan(costs: dict[str, CostModel], key: str, n_samples: int, n_columns: int, *, typical: int,
                      cap: int, path: Callable[[str], str], advice: str, covariance: bool) -> FitPlan:
    """The plan of an engine that keeps every column and makes one dense Gaussian update of
    all of them per iteration (GGSM's MM, GIG's VB): ``typical`` iterations for the
    estimate, the ``cap``'s time beside it. path(form) words the path around the update's
    form (the M x M one, or Woodbury's N x N one when M > N); covariance: whether the fit
    also holds the M x M posterior covariance."""
    n, m = int(n_samples), int(n_columns)
    per = gaussian_block_flops(n, m)
    form = "O(N^2 M + N^3) (the N x N form: M > N)" if m > n else "O(N M^2 + M^3)"
    # the design, the update's min(N, M)-square matrix, its factor and a product
    memory = n * m * FLOAT64 + 3 * min(n, m) ** 2 * FLOAT64 + (m * m * FLOAT64 if covariance else 0)
    plan = estimate(costs, key, typical * per, candidates=m, memory_bytes=memory, path=path(form), advice=advice)
    return replace(plan, cap_seconds=costs[key].seconds(cap * per), iterations=typical)


def gaussian_block_flops(n: int, m: int) -> float:
    """Flops of one dense Gaussian update of m weights from n rows - the form an engine
    takes by the paper's rule (Woodbury's n x n form when m > n): Phi^T Lambda Phi and
    the m x m factorization, or Phi Lambda^-1 Phi^T and the n x n one."""
    n, m = float(n), float(m)
    return 2 * n * m * m + m ** 3 if m <= n else 2 * n * n * m + n ** 3


def power_work(size: float, exponent: float) -> float:
    """Work growing as size^exponent, in the cost models' units: 1e9 at size 1000 (so that
    ``coef`` is the seconds of the growing part at size 1000)."""
    return 1e9 * (float(size) / 1000.0) ** exponent


def duration(seconds: float) -> str:
    """A duration for people: 0.4 s, 12 s, 3.5 min, 2.1 h."""
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 10:
        return f"{seconds:.1g} s" if seconds < 1 else f"{seconds:.0f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min" if seconds < 600 else f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def size_text(n_bytes: float) -> str:
    """Bytes for people: 32 MB, 4.1 GB, 32 TB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.2g} {unit}" if n_bytes / scale < 10 else f"{n_bytes / scale:.0f} {unit}"
    return f"{n_bytes / 1e3:.0f} kB"
