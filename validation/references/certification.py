"""When draws may serve as ground truth: the certification rule and the pilot's rule.

:data:`CERTIFICATION` holds every threshold (rank-normalized split R-hat, bulk and tail ESS,
divergences; NUTS's E-BFMI and tree depth; tempering's round trips), and :func:`certify` /
``_certify_run`` apply it to any draws. :class:`PilotRule` and :func:`pilot_decision` say
when a short NUTS pilot predicts that the full run cannot certify.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ...models.base import Site
from ..base import arviz_adapter as adapter
from .config import ReferenceConfig


@dataclass(frozen=True)
class Certification:
    """When a NUTS run may serve as ground truth.

    rhat_max: rank-normalized split R-hat of every coordinate at most this (Vehtari et al.
    2021 recommend 1.01); ess_bulk_min / ess_tail_min: bulk and tail ESS of every
    coordinate at least this (their recommendation of 100 per chain, 4 chains) - so the
    reference mean is known to within sd/20, and its 5%/95% quantiles are usable;
    max_divergences: divergent transitions after warmup allowed (any divergence means
    NUTS missed part of the posterior, which biases it without showing in R-hat).
    ebfmi_min (NUTS): the energy Bayesian fraction of missing information of every chain,
    mean((E_t - E_{t-1})^2) / var(E), at least this. Below 0.3 (Betancourt 2016) the
    momentum resampling cannot move the chain through the energy levels of the
    posterior: heavy tails go unexplored while R-hat can still look fine.
    max_treedepth_fraction (NUTS): at most this fraction of transitions may stop at the
    maximum tree depth. A saturated tree ended before the U-turn criterion: a few are
    harmless, but many mean the chain moves by truncated trajectories and its ESS is not
    what the trajectories' length suggests.
    Neither NUTS check can be fixed by more draws, so both stop the doubling loop.
    min_round_trips (parallel tempering): every run must carry states from its coldest
    copy to its hottest (the prior) and back at least this often while it records draws.
    Each round trip is a fresh descent from the prior into the posterior; a mode holding a
    tenth of the mass is missed by ten independent descents with probability 0.9^10 = 0.35
    per chain, and by all four chains' forty with 0.9^40 = 1.5 % (the descents are not
    exactly independent, so this is a guide, not a guarantee).
    """

    rhat_max: float = 1.01
    ess_bulk_min: float = 400.0
    ess_tail_min: float = 400.0
    max_divergences: int = 0
    ebfmi_min: float = 0.3
    max_treedepth_fraction: float = 0.01
    min_round_trips: int = 10


#: the certification rule every reference is judged by (the defaults of :class:`Certification`)
CERTIFICATION = Certification()


@dataclass(frozen=True)
class PilotRule:
    """When a short NUTS pilot predicts that the full NUTS run cannot be certified.

    The pilot is NUTS with the full run's chains, seed, target acceptance and tree depth,
    but only ``num_warmup`` warm-up iterations and ``num_samples`` draws per chain (no
    doublings). It predicts failure - and the full run is skipped - when any of these holds
    (each a check of :data:`~zoo.validation.references.certification.CERTIFICATION` that more
    draws of the same kind cannot mend, or a projection that the run's cap of draws cannot
    reach it):

    * divergences: more than the rule allows among the pilot's draws. A divergence is a
      geometry problem of the posterior at the adapted step size; the full run's longer
      warm-up adapts the same step size to the same geometry;
    * energy (E-BFMI below the rule's minimum in some chain) or tree depth (more than the
      rule's fraction of transitions at the maximum depth): the certification's own NUTS
      checks, which stop its doubling loop too;
    * R-hat above ``rhat_max``: after the pilot's warm-up the chains still sit in different
      places (modes, or a scale the sampler crawls along); the certification needs 1.01;
    * the projected ESS: the smallest bulk or tail ESS of any coordinate per recorded draw,
      times every draw the full run may make (chains x num_samples x 2^max_doublings),
      falls short of the rule's ESS by more than the factor ``ess_margin``. The pilot's
      short warm-up makes its ESS per draw pessimistic, hence the margin.

    Otherwise the full run goes ahead (its draws are its own: the pilot's are discarded).
    """

    num_warmup: int = 300
    num_samples: int = 200
    rhat_max: float = 1.2
    ess_margin: float = 2.0


#: the pilot's rule a NUTS reference with ``pilot=True`` uses (the defaults of :class:`PilotRule`)
PILOT = PilotRule()


RHAT_MAX = CERTIFICATION.rhat_max


ESS_BULK_MIN = CERTIFICATION.ess_bulk_min


ESS_TAIL_MIN = CERTIFICATION.ess_tail_min


MAX_DIVERGENCES = CERTIFICATION.max_divergences


#: at most this many per-coordinate sentences per criterion; the rest are counted
_MAX_SENTENCES_PER_CHECK = 10


def _coordinate_names(site: Site) -> list[str]:
    if site.shape == ():
        return [site.name]
    return [f"{site.name}[{','.join(map(str, i))}]" for i in np.ndindex(*site.shape)]


def _count_divergences(divergences) -> int:
    arr = np.asarray(divergences)
    if arr.ndim == 0:
        return int(arr)
    return int(np.sum(arr.astype(bool)))


def _check_failures(diag: dict, sites: tuple[Site, ...], divergences: int, rule: Certification):
    """(sentences, kinds): one sentence per failing coordinate and criterion."""
    sentences: list[str] = []
    kinds: set[str] = set()
    checks = (
        ("rhat", "R-hat", lambda v: not (v <= rule.rhat_max), lambda v: f"{v:.4f} > {rule.rhat_max}"),
        ("ess_bulk", "bulk ESS", lambda v: not (v >= rule.ess_bulk_min), lambda v: f"{v:.0f} < {rule.ess_bulk_min:.0f}"),
        ("ess_tail", "tail ESS", lambda v: not (v >= rule.ess_tail_min), lambda v: f"{v:.0f} < {rule.ess_tail_min:.0f}"),
    )
    for key, label, fails, describe in checks:
        bad = []
        for s in sites:
            values = np.asarray(diag["per_site"][s.name][key], dtype=float).ravel()
            bad.extend((name, v) for name, v in zip(_coordinate_names(s), values) if fails(v))
        if bad:
            kinds.add(key)
        for name, v in bad[:_MAX_SENTENCES_PER_CHECK]:
            shown = "NaN (constant or non-finite draws)" if not np.isfinite(v) else describe(v)
            sentences.append(f"{name}: {label} {shown}")
        if len(bad) > _MAX_SENTENCES_PER_CHECK:
            sentences.append(f"... and {len(bad) - _MAX_SENTENCES_PER_CHECK} more coordinates fail the {label} check")
    if divergences > rule.max_divergences:
        kinds.add("divergences")
        sentences.append(
            f"{divergences} divergent transitions after warmup (allowed: {rule.max_divergences})"
        )
    return sentences, kinds


def certify(idata_or_draws, sites: tuple[Site, ...], divergences, *, rule: Certification = CERTIFICATION):
    """Apply the certification rule to any draws.

    idata_or_draws: InferenceData, or ``{site: (chains, draws, *shape)}``.
    divergences: a count, or the (chains, draws) boolean ``diverging`` array.
    Returns (certified, failures, diagnostics); diagnostics holds rhat_max, ess_bulk_min,
    ess_tail_min, divergences and per_site {name: {rhat, ess_bulk, ess_tail}} as lists.
    """
    sites = tuple(sites)
    idata = idata_or_draws
    if isinstance(idata_or_draws, dict):
        idata = adapter.draws_to_idata(idata_or_draws, sites)
    diag = adapter.summary_diagnostics(idata, sites=sites)
    n_div = _count_divergences(divergences)
    failures, _ = _check_failures(diag, sites, n_div, rule)
    post = adapter.group(idata, "posterior")
    diagnostics = _diagnostics_dict(diag, n_div, post.sizes["chain"], post.sizes["draw"])
    return not failures, failures, diagnostics


def _diagnostics_dict(diag: dict, n_div: int, n_chains: int, n_draws: int) -> dict:
    return {
        "rhat_max": diag["rhat_max"],
        "ess_bulk_min": diag["ess_bulk_min"],
        "ess_tail_min": diag["ess_tail_min"],
        "divergences": n_div,
        "n_chains": int(n_chains),
        "n_draws": int(n_draws),
        "per_site": {
            name: {k: np.asarray(v).tolist() for k, v in vals.items()} for name, vals in diag["per_site"].items()
        },
    }


def _diagnosed_sites(measured: tuple[Site, ...], draws: dict[str, np.ndarray]) -> tuple[Site, ...]:
    """The measured sites, then every other block the sampler moved (its latent sites),
    each named and shaped as its draws are: all of them are diagnosed."""
    names = {s.name for s in measured}
    others = tuple(Site(k, tuple(np.shape(v)[2:])) for k, v in sorted(draws.items()) if k not in names)
    return tuple(measured) + others


def _certify_run(draws, stats, diagnosed, runner, settings, diag: dict | None = None):
    """(certified, failures, diagnostics, kinds) of a run: R-hat, ESS and divergences over
    every diagnosed site, then the sampler's own checks (NUTS: E-BFMI, tree depth; Gibbs:
    slice shrinkage). ``stats`` are the sampler statistics as stored (ArviZ names).
    ``diag``: the R-hat/ESS summary if already computed (``batched_diagnostics.summaries``,
    the same numbers as ArviZ's for many runs at once); None: ArviZ computes it here."""
    if diag is None:
        diag = adapter.summary_diagnostics(adapter.draws_to_idata(draws, diagnosed), sites=diagnosed)
    n_chains, n_draws = np.shape(draws[diagnosed[0].name])[:2]
    n_div = _count_divergences(stats["diverging"])
    failures, kinds = _check_failures(diag, diagnosed, n_div, CERTIFICATION)
    sampler_failures, sampler_numbers = runner.sampler_checks(stats, settings, CERTIFICATION)
    if sampler_failures:
        failures = failures + sampler_failures
        # a check that counts events over the recorded draws (tempering's round trips) can
        # be met by more draws; a fault of the sampler (a capped slice update, NUTS's
        # energy) cannot
        kinds = kinds | {"sampler_count" if getattr(runner, "checks_count_events", False) else "sampler"}
    diagnostics = _diagnostics_dict(diag, n_div, n_chains, n_draws)
    diagnostics.update(sampler_numbers)
    diagnostics["diagnosed_sites"] = [s.name for s in diagnosed]
    return not failures, failures, diagnostics, kinds


def nuts_energy_checks(stats: dict, max_tree_depth: int, rule: "Certification"):
    """(failures, numbers) of the NUTS-only checks on stored statistics (chains, draws):
    E-BFMI of every chain from ``energy``, and the fraction of transitions whose leapfrog
    count ``n_steps`` reached 2^max_tree_depth - 1 (a tree at the depth limit; a U-turn
    found exactly at the last doubling is counted too, which errs on the strict side)."""
    failures: list[str] = []
    energy = np.asarray(stats["energy"], dtype=float)
    ebfmi = np.mean(np.diff(energy, axis=1) ** 2, axis=1) / np.var(energy, axis=1)
    for c, value in enumerate(ebfmi):
        if not value >= rule.ebfmi_min:
            failures.append(f"chain {c}: E-BFMI {value:.3f} < {rule.ebfmi_min}")
    saturated = float(np.mean(np.asarray(stats["n_steps"]) >= 2 ** int(max_tree_depth) - 1))
    if saturated > rule.max_treedepth_fraction:
        failures.append(f"{100 * saturated:.1f}% of transitions reached the maximum tree depth "
                        f"{int(max_tree_depth)} (allowed: {100 * rule.max_treedepth_fraction:g}%)")
    return failures, {"ebfmi_min": float(np.min(ebfmi)), "treedepth_fraction": saturated}


def pilot_config(config: ReferenceConfig, rule: PilotRule | None = None) -> ReferenceConfig:
    """The pilot run of a NUTS ``config`` (rule:
    :data:`~zoo.validation.references.certification.PILOT` unless given): its chains, seed and
    kernel settings, the pilot's warm-up and draws, no doublings (a cache entry of its own)."""
    rule = PILOT if rule is None else rule
    return replace(config, num_warmup=rule.num_warmup, num_samples=rule.num_samples, max_doublings=0, pilot=False)


def pilot_decision(diagnostics: dict, config: ReferenceConfig, rule: PilotRule | None = None,
                   certification: Certification = CERTIFICATION) -> dict[str, Any]:
    """Whether the full NUTS run of ``config`` may certify, judged from a pilot's
    ``diagnostics`` (a Reference's: rhat_max, ess_bulk_min, ess_tail_min, divergences,
    n_chains, n_draws, and for NUTS ebfmi_min and treedepth_fraction) by :class:`PilotRule`.

    Returns {"go": bool, "reasons": [one sentence per failed check], the numbers judged,
    "projected_ess_bulk"/"projected_ess_tail" (ESS per draw times the full run's cap of
    draws) and "cap_draws"}. A NaN (constant or non-finite draws) fails its check.
    """
    rule = PILOT if rule is None else rule
    d = diagnostics
    reasons: list[str] = []
    if d["divergences"] > certification.max_divergences:
        reasons.append(f"{int(d['divergences'])} divergent transitions (allowed: {certification.max_divergences})")
    ebfmi, depth = d.get("ebfmi_min"), d.get("treedepth_fraction")
    if ebfmi is not None and not ebfmi >= certification.ebfmi_min:
        reasons.append(f"E-BFMI {ebfmi:.3f} < {certification.ebfmi_min}")
    if depth is not None and not depth <= certification.max_treedepth_fraction:
        reasons.append(f"{100 * depth:.1f}% of transitions at the maximum tree depth "
                       f"(allowed: {100 * certification.max_treedepth_fraction:g}%)")
    if not d["rhat_max"] <= rule.rhat_max:
        reasons.append(f"R-hat {d['rhat_max']:.3f} > {rule.rhat_max}: the chains disagree after the warm-up")
    draws = int(d["n_chains"]) * int(d["n_draws"])
    cap = int(config.num_chains) * int(config.num_samples) * 2 ** int(config.max_doublings)

    def projected(ess):
        return float(ess) / draws * cap if np.isfinite(ess) else 0.0

    bulk, tail = projected(d["ess_bulk_min"]), projected(d["ess_tail_min"])
    for label, value, needed in (("bulk", bulk, certification.ess_bulk_min),
                                 ("tail", tail, certification.ess_tail_min)):
        if not value * rule.ess_margin >= needed:
            reasons.append(f"{label} ESS projected to {value:.0f} at the cap of {cap} draws "
                           f"(needed: {needed:.0f}, margin {rule.ess_margin:g})")
    return {
        "go": not reasons, "reasons": reasons,
        "pilot": {"num_warmup": rule.num_warmup, "num_samples": rule.num_samples},
        "rule": asdict(rule),
        **{k: d.get(k) for k in ("rhat_max", "ess_bulk_min", "ess_tail_min", "divergences", "ebfmi_min",
                                 "treedepth_fraction")},
        "projected_ess_bulk": bulk, "projected_ess_tail": tail, "cap_draws": cap,
    }


def _checks(diagnostics: dict) -> list[dict]:
    rule = CERTIFICATION
    return [
        {"check": f"R-hat <= {rule.rhat_max} for every coordinate", "value": diagnostics["rhat_max"],
         "passed": bool(diagnostics["rhat_max"] <= rule.rhat_max)},
        {"check": f"bulk ESS >= {rule.ess_bulk_min:.0f} for every coordinate", "value": diagnostics["ess_bulk_min"],
         "passed": bool(diagnostics["ess_bulk_min"] >= rule.ess_bulk_min)},
        {"check": f"tail ESS >= {rule.ess_tail_min:.0f} for every coordinate", "value": diagnostics["ess_tail_min"],
         "passed": bool(diagnostics["ess_tail_min"] >= rule.ess_tail_min)},
        {"check": f"divergences <= {rule.max_divergences}", "value": diagnostics["divergences"],
         "passed": bool(diagnostics["divergences"] <= rule.max_divergences)},
    ] + ([
        {"check": f"E-BFMI >= {rule.ebfmi_min} in every chain", "value": diagnostics["ebfmi_min"],
         "passed": bool(diagnostics["ebfmi_min"] >= rule.ebfmi_min)},
        {"check": f"at most {100 * rule.max_treedepth_fraction:g}% of transitions at the maximum tree depth",
         "value": diagnostics["treedepth_fraction"],
         "passed": bool(diagnostics["treedepth_fraction"] <= rule.max_treedepth_fraction)},
    ] if "ebfmi_min" in diagnostics else [])
