"""The reference tables as a typed unit of run (benchmarks/ggsm_references.py, gig_references.py,
grid_references.py, bblr_references.py): which sampler of a model's reference chain certifies, at
what cost, and how far the engines are from it, one cell per setting.

One cell is a frozen :class:`ReferenceCellConfig` in and a frozen
:class:`~zoo.validation.runs.reference_table_result.ReferenceTableCell` out
(:func:`run_reference_cell`); :func:`run_reference_table` runs a table's configs, writes each
finished cell to ``<out>/cells/<name>.json`` atomically and signed (``base/signing.py``), and
skips the cells stored there already, so an interrupted table resumes at the first missing cell;
:func:`read_reference_table` reads a table back without computing anything. Each benchmark keeps
only what is its own: its grid of settings (its configs) and its table's columns; the cells in
words and the tables' shared layout are the report wing's
(``validation/report/reference_table_report.py``).

What a cell computes: two protocols, and the config says which (``every_sampler``).

* The ``zoo compare`` protocol (ggsm, gig): the chain is tried in order and stops at the first
  sampler that certifies (:func:`~.compare.compare`, with the reference cache when one is
  given), and the engines are measured as ``zoo compare`` measures them. ``cross_check``: where
  the chain's first sampler is the reference, the second one runs as well (the record's
  settings, no time limit) and the two are compared (:func:`median_agreement`), certified or
  not - evidence that the first one's certificate is not a false one.
* Every sampler (grid, bblr): each sampler of the chain runs to its end or its time limit,
  without a cache (the seconds are what a user without one waits); the reference is the first
  that certified, and where two certify their agreement is recorded. The engines are fitted on
  the spec judged - the model's, a variant of its prior (``variant``) or the spec with some
  fields replaced (``spec_changes``) - and measured against a certified reference; ``modes``
  finds the modes the reference's draws flow to (``judge/modes.py``) and whether an engine's
  answer is the main one.

What a cell and a table are, and their stored layout (older untyped cells read by conversion):
``validation/runs/reference_table_result.py``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ... import data as datasets
from ..base import arviz_adapter as adapter
from ..base.result_format import frozen, thawed
from ..base.signing import REFERENCE_TABLE_CELL, read_signed_json, unsigned, write_signed_json
from ..judge.metrics import posterior_metrics
from ..judge.modes import basins
from ..judge.verdict import verdict
from ..records import registry
from ..references import ReferenceTimeout, run_reference
from .compare import CompareConfig, compare, default_references, prepare_problem, timed_fit
from .reference_table_result import (EngineNumbers, ModesFound, ReferenceAgreement, ReferenceTable, ReferenceTableCell,
                                     ReferenceUsed, TriedReference, machine)
from .results import EngineRow, ReferenceSummary

# --------------------------------------------------------------------------------------
# What one cell runs
# --------------------------------------------------------------------------------------
def _file_stem(name: str) -> bool:
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


@dataclass(frozen=True)
class ReferenceCellConfig:
    """One cell of a reference table (module docstring: what each protocol computes).

    name: the cell's file stem in ``<out>/cells/`` (unique in its table); label: the setting in
    words (progress lines); coordinates: where the cell sits in its table, in that table's words.
    model, data, split, params: the problem (the model record's protocol prepares it).
    samplers: the reference chain, in the order tried (each with its record's settings);
    engines: the model's engines measured; time_limit: wall-clock seconds per reference sampler
    (None: none; one that runs out is recorded so). every_sampler: run every sampler of the
    chain (grid, bblr) rather than the ``zoo compare`` protocol (ggsm, gig). cross_check
    (compare protocol): where the first sampler is the reference, run the second and record
    their agreement. variant, spec_changes, modes (every-sampler cells): judge a variant of the
    model's prior or the spec with fields replaced; look for the modes and whether engine
    ``modes``'s answer is the main one. sd_ratio_groups: name -> (start, stop) of a slice of the
    coordinates, whose median sd ratio each engine records (GIG: the noise and relevant
    coefficients)."""

    name: str
    model: str
    data: str
    params: Mapping[str, float]
    samplers: tuple[str, ...]
    engines: tuple[str, ...]
    label: str = ""
    coordinates: Mapping[str, Any] = field(default_factory=dict)
    split: int = 0
    time_limit: float | None = None
    every_sampler: bool = False
    cross_check: bool = False
    variant: str | None = None
    spec_changes: Mapping[str, Any] = field(default_factory=dict)
    modes: str | None = None
    sd_ratio_groups: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def __post_init__(self):
        if not _file_stem(self.name):
            raise ValueError(f"a reference cell's name is a file name without a folder; got {self.name!r}")
        record = registry.get_model(self.model)  # ValueError naming the known models
        record.check_params(dict(self.params))
        for name in ("samplers", "engines"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        default_references(self.model, self.samplers)  # ValueError naming an unknown sampler
        for engine in self.engines:
            record.engine(engine)  # ValueError listing the model's engines
        if not self.label:
            object.__setattr__(self, "label", self.name)
        if self.time_limit is not None and not self.time_limit > 0:
            raise ValueError(f"time_limit must be positive seconds or None; got {self.time_limit!r}")
        if self.cross_check and (self.every_sampler or len(self.samplers) < 2):
            raise ValueError("cross_check compares the chain's first two samplers in the compare protocol: "
                             "it needs two samplers and every_sampler=False (every-sampler cells compare them anyway)")
        if not self.every_sampler and (self.variant is not None or self.spec_changes or self.modes is not None):
            raise ValueError("variant, spec_changes and modes are every-sampler options: the compare protocol "
                             "judges the model's own spec")
        if self.modes is not None and self.modes not in self.engines:
            raise ValueError(f"modes names the engine whose answer is placed among the modes; {self.modes!r} "
                             f"is not one of {self.engines}")
        for name in ("params", "coordinates", "spec_changes", "sd_ratio_groups"):
            object.__setattr__(self, name, frozen(getattr(self, name)))

    def same_setting(self, cell: ReferenceTableCell) -> bool:
        """Whether ``cell`` is of this config's problem (model, data, split, params, variant,
        spec changes): a stored cell of another one is not this cell."""
        return ((cell.model, cell.data, cell.split, thawed(cell.params), cell.variant, thawed(cell.spec_changes))
                == (self.model, self.data, self.split, thawed(self.params), self.variant,
                    thawed(self.spec_changes)))


def _float(value) -> float | None:
    return None if value is None else float(value)


def _group_medians(sd_ratio, groups: Mapping[str, tuple[int | None, int | None]]) -> dict[str, float | None]:
    """The median sd ratio of each group of coordinates (None without per-coordinate ratios)."""
    if sd_ratio is None:
        return {name: None for name in groups}
    v = np.asarray(sd_ratio, dtype=float)
    return {name: float(np.median(v[slice(*bounds)])) for name, bounds in groups.items()}


def run_reference_cell(config: ReferenceCellConfig, *, cache_dir: str | None = None) -> ReferenceTableCell:
    """Compute one cell (module docstring). cache_dir: the reference cache of the compare
    protocol and its cross-check (None: none); every-sampler cells never use one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an uncertified run is recorded, not warned about
        return _every_sampler_cell(config) if config.every_sampler else _compare_cell(config, cache_dir)


def _compare_config(config: ReferenceCellConfig, cache_dir: str | None) -> CompareConfig:
    return CompareConfig(model=config.model, data=config.data, split=config.split, engines=config.engines,
                         params=dict(config.params), cache_dir=cache_dir,
                         reference=default_references(config.model, config.samplers, time_limit=config.time_limit))


def _compare_cell(config: ReferenceCellConfig, cache_dir: str | None) -> ReferenceTableCell:
    """The ``zoo compare`` protocol's cell, with its cross-check where asked and applicable."""
    t0 = time.perf_counter()
    comp = compare(_compare_config(config, cache_dir))
    res = comp.result
    certified = bool(res.reference.certified)
    cell = ReferenceTableCell(
        model=config.model, data=config.data, split=config.split, params=config.params, label=config.label,
        coordinates=config.coordinates, spec=res.spec, n_train=res.n_train,
        n_weights=int(comp.prepared.Phi_train.shape[1]),
        tried=tuple(TriedReference.of(t) for t in res.references_tried), reference=ReferenceUsed.of(res.reference),
        moments=res.moments, engines=tuple(_numbers_of_row(row, certified, config.sd_ratio_groups)
                                           for row in res.engines.values()),
        reference_test_error=_float(res.reference_test_error), wall_seconds=time.perf_counter() - t0,
        machine=machine())
    if needs_cross_check(config, cell):
        cell = dataclasses.replace(cell, agreement=cross_check(config, comp.prepared, comp.reference,
                                                               cache_dir=cache_dir))
    return cell


def _numbers_of_row(row: EngineRow, certified: bool, groups) -> EngineNumbers:
    """An engine row of a comparison as a cell keeps it: the numbers against the reference only
    where that reference is certified."""
    m = row.metrics
    against = certified and row.failure is None
    return EngineNumbers(
        engine=row.name, failure=row.failure, seconds=_float(row.seconds),
        converged=None if row.failure else bool(row.converged), n_basis=row.n_basis,
        speedup_vs_reference=_float(row.speedup_vs_reference), test_error=_float(m.get("test_error")),
        pred_mae=_float(m.get("pred_mae")) if against else None, khat=_float(m.get("khat")) if against else None,
        sd_ratio_median=_float(m.get("sd_ratio_median")) if against else None,
        std_mean_err_median=_float(m.get("std_mean_err_median")) if against else None,
        sd_ratio_groups=_group_medians(m.get("sd_ratio") if against else None, groups),
        verdict=row.verdict.status if against and row.verdict is not None else None,
        null_reasons=dict(m.get("null_reasons") or {}))


def needs_cross_check(config: ReferenceCellConfig, cell: ReferenceTableCell) -> bool:
    """Whether ``cell`` lacks the cross-check ``config`` asks for: its reference is the chain's
    first sampler, certified, and no agreement is recorded yet."""
    return (config.cross_check and cell.agreement is None and cell.reference.certified
            and cell.reference.sampler == config.samplers[0])


def cross_check(config: ReferenceCellConfig, prepared, first=None, *,
                cache_dir: str | None = None) -> ReferenceAgreement:
    """The chain's first two samplers on the prepared problem, each with its record's settings
    and no time limit (``first``: the first one's Reference, when the cell has just run it), and
    their agreement, its second run recorded."""
    first_config, second_config = default_references(config.model, config.samplers[:2])
    args = (prepared.spec, prepared.Phi_train, prepared.y_train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an uncertified run is recorded, not warned about
        if first is None:
            first = run_reference(*args, config=first_config, cache_dir=cache_dir)
        second = run_reference(*args, config=second_config, cache_dir=cache_dir)
    return median_agreement(first, second, prepared.Phi_test,
                            second_run=TriedReference.of(ReferenceSummary.of(second)))


def add_cross_check(config: ReferenceCellConfig, cell: ReferenceTableCell, *,
                    cache_dir: str | None = None) -> ReferenceTableCell:
    """A stored cell with the cross-check it lacks (:func:`needs_cross_check`): the problem
    prepared again, the chain's first two samplers run (the first from the cache when it is
    there) and compared."""
    prepared = prepare_problem(_compare_config(config, cache_dir))
    return dataclasses.replace(cell, agreement=cross_check(config, prepared, cache_dir=cache_dir))


def median_agreement(first, second, Phi_test, *, second_run: TriedReference | None = None) -> ReferenceAgreement:
    """How far two reference runs (``Reference``) of the same model are apart: the largest ``|z|``
    over all coordinates of the difference of posterior medians, ``z = (median_a - median_b) /
    sqrt(mcse_a^2 + mcse_b^2)`` with ArviZ's Monte Carlo standard error of the median (medians
    always exist, means may not), and the mean ``|p_a - p_b|`` of the test-set predictive
    probabilities. Two correct samplers give a largest ``|z|`` around 2-3 over a few dozen
    coordinates (about sqrt(2 log d))."""
    post_a, post_b = first.posterior, second.posterior
    fa, fb = post_a.flat_draws(), post_b.flat_draws()  # (chains * draws, d)
    ca = fa.reshape(post_a.n_chains, post_a.n_draws, -1)
    cb = fb.reshape(post_b.n_chains, post_b.n_draws, -1)
    z = []
    for j in range(fa.shape[1]):
        se = np.hypot(adapter.mcse_median(ca[..., j]), adapter.mcse_median(cb[..., j]))
        z.append(float((np.median(fa[:, j]) - np.median(fb[:, j])) / se))
    z = np.abs(np.array(z))
    p_a = np.asarray(post_a.predict_proba(Phi_test))
    p_b = np.asarray(post_b.predict_proba(Phi_test))
    return ReferenceAgreement(samplers=(first.sampler, second.sampler),
                              certified=(bool(first.certified), bool(second.certified)),
                              max_abs_z_median=float(z.max()), n_coordinates=int(z.size),
                              n_abs_z_above_3=int(np.sum(z > 3)), pred_mae_between=float(np.mean(np.abs(p_a - p_b))),
                              second=second_run)


def run_every_sampler(model: str, spec, Phi, y, time_limit: float | None,
                      samplers: tuple[str, ...] | None = None) -> tuple[tuple[TriedReference, ...], dict]:
    """Every sampler of ``model``'s reference chain (``samplers``: these, in this order) on
    (spec, Phi, y), not only the first that certifies, each without a cache (the seconds are what
    a user without one waits) and bounded by ``time_limit``. Returns (tried, {sampler: Reference}
    of those that finished)."""
    tried, runs = [], {}
    for config in default_references(model, samplers, time_limit=time_limit):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an uncertified run is recorded, not warned about
            try:
                ref = run_reference(spec, Phi, y, config=config, cache_dir=None)
            except ReferenceTimeout as err:
                tried.append(TriedReference.of(ReferenceSummary.timed_out(err)))
                continue
        runs[config.sampler] = ref
        tried.append(TriedReference.of(ReferenceSummary.of(ref)))
    return tuple(tried), runs


def _every_sampler_cell(config: ReferenceCellConfig) -> ReferenceTableCell:
    """Every sampler of the chain, the engines against the first certified, the agreement of
    two certified, the modes where asked."""
    record = registry.get_model(config.model)
    split = datasets.load(config.data, config.split, standardize=not record.raw_inputs)
    prepared = registry.prepare(config.model, split, dict(config.params))
    spec = prepared.spec if config.variant is None else prepared.variants[config.variant]
    moments = prepared.moments if config.variant is None else prepared.variant_moments.get(config.variant)
    if config.spec_changes:
        spec = dataclasses.replace(spec, **config.spec_changes)
        moments = record.moments(spec, prepared.Phi_train, prepared.y_train) if record.moments else None
    Phi, y = prepared.Phi_train, prepared.y_train
    t0 = time.perf_counter()
    tried, runs = run_every_sampler(config.model, spec, Phi, y, config.time_limit, config.samplers)
    certified = [r for r in runs.values() if r.certified]
    reference = certified[0] if certified else None
    agreement = median_agreement(certified[0], certified[1], prepared.Phi_test) if len(certified) >= 2 else None
    y_test = np.asarray(prepared.y_test) > 0

    def test_error(post) -> float:
        return float(np.mean((np.asarray(post.predict_proba(prepared.Phi_test)) > 0.5) != y_test))

    engines, posteriors = [], {}
    for name in config.engines:
        entry = record.engine(name)
        try:
            posterior, warm, _ = timed_fit(entry.fit(), spec, Phi, y)
        except Exception as err:  # noqa: BLE001 - a refusal is a result (Laplace: not positive definite)
            engines.append(EngineNumbers(engine=entry.name, failure=f"{type(err).__name__}: {err}"))
            continue
        posteriors[name] = posterior
        numbers = {"engine": entry.name, "seconds": float(warm), "converged": bool(posterior.info.converged),
                   "n_basis": int(posterior.info.extra.get("n_active", Phi.shape[1])),
                   "test_error": test_error(posterior),
                   "speedup_vs_reference": (float(reference.posterior.info.seconds / warm)
                                            if reference is not None and warm > 0 else None)}
        if reference is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = posterior_metrics(posterior, reference, Phi, y, prepared.Phi_test, prepared.y_test,
                                      key=jax.random.PRNGKey(0), moments=moments)
                v = verdict(posterior, reference.posterior, moments=moments)
            numbers.update(sd_ratio_median=_float(m["sd_ratio_median"]), khat=_float(m["khat"]),
                           pred_mae=_float(m["pred_mae"]), std_mean_err_median=_float(m["std_mean_err_median"]),
                           sd_ratio_groups=_group_medians(m.get("sd_ratio"), config.sd_ratio_groups),
                           verdict=v.status, null_reasons=dict(m.get("null_reasons") or {}))
        engines.append(EngineNumbers(**numbers))

    # the modes, from the draws of the reference (or, with none certified, of the run closest
    # to it - marked as such)
    modes = None
    source = reference or (min(runs.values(), key=lambda r: r.diagnostics["rhat_max"]) if runs else None)
    if config.modes is not None and source is not None:
        point = posteriors.get(config.modes)
        Pj, yj = jnp.asarray(Phi), jnp.asarray(y, float)
        b = basins(lambda w: spec.log_joint(w, Pj, yj), source.posterior.flat_draws(),
                   point=None if point is None else point.mean_flat())
        modes = ModesFound(sampler=source.sampler, certified=bool(source.certified), n_modes=len(b["modes"]),
                           main_share=b["main_share"], main_share_se=b["modes"][0]["share_se"] if b["modes"] else None,
                           n_failed=b["n_failed"], n_starts=b["n_starts"], point_engine=config.modes,
                           point_is_main_mode=None if point is None else b["point"]["is_main_mode"])
    return ReferenceTableCell(
        model=config.model, data=config.data, split=config.split, params=config.params, label=config.label,
        coordinates=config.coordinates, variant=config.variant, spec_changes=config.spec_changes,
        spec=spec.to_dict(), n_train=int(Phi.shape[0]), n_weights=int(Phi.shape[1]), tried=tried,
        reference=(ReferenceUsed.of(ReferenceSummary.of(reference)) if reference is not None
                   else ReferenceUsed(sampler=None, certified=False)),
        moments=moments, engines=tuple(engines),
        reference_test_error=None if reference is None else test_error(reference.posterior),
        agreement=agreement, modes=modes, wall_seconds=time.perf_counter() - t0, machine=machine())


# --------------------------------------------------------------------------------------
# A table: resumable, each cell stored signed
# --------------------------------------------------------------------------------------
def cell_path(out_dir, name: str) -> str:
    """Where a table in ``out_dir`` stores its cell ``name``."""
    return os.path.join(os.fspath(out_dir), "cells", f"{name}.json")


def _check_names(configs: Sequence[ReferenceCellConfig]) -> None:
    names = [c.name for c in configs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"reference cells named more than once: {', '.join(repeated)}")


def _trusted_cell(path: str, config: ReferenceCellConfig) -> ReferenceTableCell | None:
    """The cell stored at ``path`` when this user signed it there, it reads as a cell and it is
    of ``config``'s setting; otherwise None, with a warning naming the file and why (it is
    computed again)."""
    stored = read_signed_json(path, REFERENCE_TABLE_CELL, "stored reference-table cell")
    if stored is None:
        return None
    try:
        cell = ReferenceTableCell.from_json(stored)
    except ValueError as err:
        warnings.warn(f"ignoring stored reference-table cell {path}: {err}; computing it again", stacklevel=3)
        return None
    if not config.same_setting(cell):
        warnings.warn(f"ignoring stored reference-table cell {path}: it is of another setting ({cell.label}); "
                      "computing it again", stacklevel=3)
        return None
    return cell


def _store(cell: ReferenceTableCell, path: str) -> None:
    write_signed_json(cell.to_json(), path, REFERENCE_TABLE_CELL)


def run_reference_table(configs: Sequence[ReferenceCellConfig], out_dir, *,
                        cache_dir: str | None = None) -> ReferenceTable:
    """Every cell of ``configs``: the one stored in ``<out_dir>/cells/<name>.json`` when this
    user signed it there and it is of that config's setting, else computed
    (:func:`run_reference_cell`) and written there atomically, signed - so an interrupted table
    resumes at the first missing cell. A stored cell that lacks the cross-check its config asks
    for gets it, and is written back the same way. Prints a line per cell it computes."""
    _check_names(configs)
    cells, computed, checked, reused = [], [], [], []
    for config in configs:
        path = cell_path(out_dir, config.name)
        cell = _trusted_cell(path, config)
        if cell is None:
            print(f"{config.label} ...", flush=True)
            cell = run_reference_cell(config, cache_dir=cache_dir)
            _store(cell, path)
            computed.append(config.name)
            print(f"  reference {cell.reference.sampler} certified={cell.reference.certified} "
                  f"({cell.wall_seconds:.0f} s)", flush=True)
        elif needs_cross_check(config, cell):
            print(f"cross-check {config.label} ...", flush=True)
            cell = add_cross_check(config, cell, cache_dir=cache_dir)
            _store(cell, path)
            checked.append(config.name)
        else:
            reused.append(config.name)
        cells.append(cell)
    return ReferenceTable(names=tuple(c.name for c in configs), cells=tuple(cells), computed=tuple(computed),
                          cross_checked=tuple(checked), reused=tuple(reused), out_dir=os.fspath(out_dir))


def read_stored_cell(path) -> ReferenceTableCell:
    """The cell a file holds, as stored - signed or not (its signature fields dropped, not
    checked) -, for a table written again from its stored cells without computing anything;
    ValueError naming the file and what is wrong with it."""
    try:
        with open(os.fspath(path), encoding="utf-8") as fh:
            stored = json.load(fh)
        return ReferenceTableCell.from_json(unsigned(stored) if isinstance(stored, dict) else stored)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ValueError(f"{path}: {reason}") from None


def read_reference_table(configs: Sequence[ReferenceCellConfig], out_dir) -> ReferenceTable:
    """The table of ``configs`` from the cells stored in ``out_dir``, computing nothing: each
    read as stored (:func:`read_stored_cell`: a table's committed cells are unsigned - a
    signature is one user's -, and a table written from them runs nothing and reuses nothing
    in place of a computation). ValueError naming every cell that is missing, unreadable or
    of another setting."""
    _check_names(configs)
    cells, problems = [], []
    for config in configs:
        path = cell_path(out_dir, config.name)
        if not os.path.exists(path):
            problems.append(f"{config.name}: not stored")
            continue
        try:
            cell = read_stored_cell(path)
        except ValueError as err:
            problems.append(f"{config.name}: {err}")
            continue
        if not config.same_setting(cell):
            problems.append(f"{config.name}: of another setting ({cell.label})")
            continue
        cells.append(cell)
    if problems:
        raise ValueError(f"{out_dir}: {len(problems)} of {len(configs)} cells cannot be read without computing "
                         f"them: {'; '.join(problems)}")
    names = tuple(c.name for c in configs)
    return ReferenceTable(names=names, cells=tuple(cells), reused=names, out_dir=os.fspath(out_dir))


def stored_cells(out_dir, *, signed: bool = True, skip: Sequence[str] = ()) -> dict[str, ReferenceTableCell]:
    """Every cell stored in ``<out_dir>/cells/`` by name, but those of ``skip``: signed=True,
    those this user signed there (each other one is left out with a warning naming it);
    signed=False, each as stored (ValueError naming one that cannot be read)."""
    folder = os.path.join(os.fspath(out_dir), "cells")
    names = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json")) if os.path.isdir(folder) else []
    out = {}
    for name in names:
        path = cell_path(out_dir, name)
        if name in skip:
            continue
        if not signed:
            out[name] = read_stored_cell(path)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read_signed_json's warning says it computes the cell again
            stored = read_signed_json(path, REFERENCE_TABLE_CELL, "stored reference-table cell")
        try:
            if stored is None:
                raise ValueError("not signed by this user's key there, or changed after signing")
            out[name] = ReferenceTableCell.from_json(stored)
        except ValueError as err:
            warnings.warn(f"leaving stored reference-table cell {path} out: {err}", stacklevel=2)
    return out


__all__ = ["ReferenceCellConfig", "run_reference_cell", "needs_cross_check", "cross_check", "add_cross_check",
           "median_agreement", "run_every_sampler", "cell_path", "run_reference_table", "read_stored_cell",
           "read_reference_table", "stored_cells"]
