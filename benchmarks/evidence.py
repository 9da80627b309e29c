"""The evidence judged (validation/judge/evidence.py): is the reference log Z's stated error
calibrated, and how far is each engine's log evidence from it?

    python benchmarks/evidence.py calibration --repeats 10
    python benchmarks/evidence.py models --models pcvm ggsm-probit bblr
    python benchmarks/evidence.py selection --cache-dir /tmp/zoo-selection-cache

calibration: on the two-dimensional cases of tests/validation/judge/test_evidence.py (PCVM with one basis
function; BBLR with two weights), ``repeats`` certified NUTS references with different
seeds; for each, z = (estimate - quadrature) / se for bridge sampling and for AIS. A
calibrated se gives z ~ N(0, 1): the share with |z| > 1.96 is tabled with its Wilson
interval. Written to results/evidence_calibration.json.

models: each model's default comparison (``zoo compare --model M``); the reference log Z of
the frozen model and of every variant an engine fits (bridge sampling, checked by AIS),
and every engine's reported log evidence or bound with its evidence verdict. Written to
results/evidence_models.json and printed as a table.

selection: does an engine's evidence-based choice change when the reference log Z stands in
for the engine's? On each default case, the model the engine chose against a few
alternatives, each a frozen model with its own certified NUTS reference (a seed of its own,
so that the references' errors are independent) and reference log Z (bridge sampling,
checked by AIS); the difference alternative - chosen by the engine and by the reference,
the latter with se = sqrt(se_1^2 + se_2^2) (``evidence.log_z_difference``). The choice
changes where the reference prefers the alternative by more than 1.96 se, stands where it
prefers the chosen model so, and is unresolved in between.
- pcvm: EPCVM_Lap's selection (the basis and alpha that maximize its Laplace evidence) on
  the default case (Ripley, the CV width) against the selected alphas scaled by c, the
  selected set less each of the members whose deletion the selection rule predicts to
  cost least, and plus each of the pruned candidates whose addition at a stated alpha it
  predicts to cost least (and all of them together). Engine: the Laplace log evidence of
  the normalized surrogate prior (``log_evidence``, what the selection's trace records);
  references: the surrogate model NumPyro writes (its log Z plus M log 2, the normalizer
  it omits, so that models of different M compare; DERIVATIONS.md §11.1) and the probit
  PCVM frozen for ``zoo compare`` (its truncated prior normalized).
- grid-rvm: (a) the prior (p-grid, s-grid, rvm) that VB's ELBO and the generic Laplace's
  evidence choose, against the reference log Z of each prior; (b) relevance: VB's
  pruning_summary on the p-grid decides which pixel rows / columns are relevant; the model
  without a row (its weights removed, the table one row shorter: alpha_i -> infinity) or
  column against the full model, by the ELBO and by the reference log Z.
Written to results/evidence_selection.json (after every model, and the evidence of every
frozen model cached under --cache-dir, so an interrupted run resumes) and printed as
markdown tables.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import sys
import time
import zlib
from dataclasses import replace

import numpy as np

import zoo  # noqa: F401  (float64)
from zoo import data as datasets
from zoo.inference import basis_selection, grid_vb, pcvm_laplace
from zoo.models.basis import pcvm_basis
from zoo.models.bblr import BBLR
from zoo.models.grid_rvm import GridRVM
from zoo.models.pcvm import PCVM
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.judge import evidence as ev
from zoo.validation.judge.rates import wilson_interval
from zoo.validation.records import registry
from zoo.validation.references import ReferenceConfig, first_certified_reference, run_reference
from zoo.validation.runs.compare import CompareConfig, compare, default_references, prepare_problem

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: the cases of tests/validation/judge/test_evidence.py: (spec, columns), two latent dimensions each
CASES = {"pcvm, w >= 0 and b": (PCVM(alpha=1.0, alpha_bias=1.0), 1),
         "bblr, two weights": (BBLR(a=0.2, b=0.6, gamma=3.0, lam=0.5), 2)}


def machine() -> dict:
    return {"date": datetime.date.today().isoformat(), "machine": platform.platform(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "command": " ".join(sys.argv)}


def calibration(repeats: int) -> dict:
    out = {"cases": {}, **machine()}
    for name, (spec, n_basis) in CASES.items():
        Phi, y = ev.small_problem(n_basis)
        density = ev.unconstrained_density(spec, Phi, y)
        rows, quad = [], None
        for seed in range(repeats):
            ref = run_reference(spec, Phi, y, config=ReferenceConfig(num_samples=2000, seed=100 + seed))
            chains = ev.reference_chains(density, ref.idata)
            if quad is None:
                quad = ev.quadrature_log_evidence(density, chains)
            bridge = ev.bridge_sampling(density, chains, seed=seed)
            ais = ev.annealed_importance_sampling(density, chains, seed=seed)
            rows.append({"certified": ref.certified,
                         "bridge": bridge.to_json(), "ais": ais.to_json(),
                         "z_bridge": (bridge.log_z - quad.log_z) / bridge.se,
                         "z_ais": None if ais.log_z is None else (ais.log_z - quad.log_z) / ais.se})
            print(f"{name} seed {seed}: z bridge {rows[-1]['z_bridge']:+.2f}, z AIS {rows[-1]['z_ais']:+.2f}",
                  flush=True)
        summary = {}
        for method in ("bridge", "ais"):
            z = np.array([r[f"z_{method}"] for r in rows if r[f"z_{method}"] is not None])
            hits = int(np.sum(np.abs(z) > 1.96))
            low, high = wilson_interval(hits, z.size)
            summary[method] = {"n": int(z.size), "outside_1_96": hits, "wilson_95": [low, high],
                               "mean_z": float(z.mean()), "sd_z": float(z.std(ddof=1)),
                               "median_se": float(np.median([r[method]["se"] for r in rows if r[method]["se"]])),
                               "median_seconds": float(np.median([r[method]["seconds"] for r in rows]))}
        out["cases"][name] = {"quadrature": quad.to_json(), "runs": rows, "summary": summary}
    return out


def models(names, cache_dir) -> dict:
    out = {"models": {}, **machine()}
    for model in names:
        t0 = time.perf_counter()
        comp = compare(CompareConfig(model=model, cache_dir=cache_dir))
        compare_seconds = time.perf_counter() - t0
        prepared = comp.prepared
        Phi, y = prepared.Phi_train, prepared.y_train
        specs = {None: (prepared.spec, comp.reference)}
        specs |= {v: (prepared.variants[v], r) for v, r in comp.variant_references.items()}
        references = {}
        for variant, (spec, ref) in specs.items():
            if ref is None:
                continue
            t1 = time.perf_counter()
            references[variant] = ev.reference_evidence(spec, Phi, y, ref.idata)
            print(f"{model} {variant or 'model'}: reference log Z {references[variant].log_z} "
                  f"+- {references[variant].se} (certified {references[variant].certified}: "
                  f"{references[variant].reason}) in {time.perf_counter() - t1:.1f} s", flush=True)
        engines = {}
        for name, posterior in comp.posteriors.items():
            claim = ev.engine_evidence(posterior)
            # a +psis engine's draws are the base engine's re-weighted: its evidence is the base's
            if claim is None or name.endswith("+psis"):
                continue
            value, kind, source = claim
            record = registry.get_model(model)
            variant = record.engine(name).variant if record.has_engine(name) else None
            reference = references.get(variant)
            verdict = None if reference is None else ev.evidence_verdict(value, kind, reference)
            engines[name] = {"value": value, "kind": kind, "source": source, "variant": variant,
                             "verdict": None if verdict is None else verdict.to_json()}
        out["models"][model] = {
            "compare_seconds": compare_seconds,
            "references": {str(k or "model"): r.to_json() for k, r in references.items()},
            "engines": engines}
    return out


def table(result: dict) -> str:
    lines = ["| model | engine | kind | engine value | reference log Z (+- se) | verdict | difference |",
             "|---|---|---|---|---|---|---|"]
    for model, m in result["models"].items():
        for name, e in m["engines"].items():
            v = e["verdict"] or {}
            ref = m["references"].get(e["variant"] or "model", {})
            ref_text = "-" if ref.get("log_z") is None else f"{ref['log_z']:.3f} +- {ref['se']:.3f}"
            diff = "-" if v.get("difference") is None else f"{v['difference']:+.3f}"
            lines.append(f"| {model} | {name} | {e['kind']} | {e['value']:.3f} | {ref_text} | "
                         f"{v.get('status', 'no reference')} | {diff} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# selection: the engines' evidence-based choices against the reference log Z
# ----------------------------------------------------------------------------------------
#: pcvm: the factors by which every selected alpha (not the bias's) is scaled
PCVM_SCALES = (0.25, 0.5, 2.0, 4.0)
#: what a reference's preference means for the engine's choice (alternative minus chosen)
CHANGES = {ev.PREFERS_FIRST: "yes", ev.PREFERS_SECOND: "no", ev.UNRESOLVED: "unresolved"}
SELECTION_MODELS = ("pcvm", "grid-rvm")


def _seed(name: str) -> int:
    """A seed of the frozen model's own, stable across runs and orderings: the references
    of two models share no random numbers, so the errors of their log Zs are independent."""
    return zlib.crc32(name.encode()) % 100_000


def _evidence_key(spec, Phi, y, configs) -> str:
    h = hashlib.sha256(json.dumps(spec.to_dict(), sort_keys=True, default=float).encode())
    for a in (Phi, y):
        h.update(np.ascontiguousarray(a, dtype=float).tobytes())
    h.update(json.dumps([c.sampler_settings() for c in configs], sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]


def _reference_configs(model: str, seed: int, nuts_draws: int | None):
    """The record's reference samplers with ``seed``; NUTS keeping ``nuts_draws`` draws a
    chain (None: the record's number), its warm-up as the record's."""
    return tuple(replace(c, num_samples=int(nuts_draws)) if c.sampler == "nuts" and nuts_draws else c
                 for c in default_references(model, seed=seed))


def frozen_evidence(model: str, spec, Phi, y, name: str, cache_dir: str | None, nuts_draws: int | None = None):
    """(reference log Z, facts of its reference run) of one frozen model: the first
    certified of the record's reference samplers (NUTS with ``nuts_draws`` draws a chain),
    run with the seed of ``name``, then bridge sampling checked by AIS with that seed. A
    reference run that is not certified makes an uncertified log Z (no choice is judged
    against it). Cached under ``cache_dir``."""
    seed = _seed(name)
    configs = _reference_configs(model, seed, nuts_draws)
    path = None
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        path = os.path.join(cache_dir, f"evidence-selection-{_evidence_key(spec, Phi, y, configs)}.json")
        if os.path.exists(path):
            with open(path) as fh:
                stored = json.load(fh)
            print(f"{name}: reference log Z from the cache", flush=True)
            return ev.ReferenceEvidence.from_json(stored["evidence"]), stored["reference"]
    t0 = time.perf_counter()
    ref, tried = first_certified_reference(spec, Phi, y, configs=configs, cache_dir=cache_dir)
    t1 = time.perf_counter()
    form = spec
    if ref.sampler != "nuts" and getattr(spec, "parameterization", None) == "noncentred":
        # a Gibbs sampler keeps the weights w, not NUTS's z: the same integral in the
        # centred form (w = z / sqrt(prec) is a change of variables)
        form = spec.with_params(parameterization="centred")
    evidence = ev.reference_evidence(form, Phi, y, ref.idata, seed=seed)
    if not ref.certified:
        evidence = ev.ReferenceEvidence(evidence.bridge, evidence.ais, False,
                                        "the reference sampler is not certified: " + "; ".join(ref.failures),
                                        evidence.false_alarm)
    facts = {"sampler": ref.sampler, "certified": bool(ref.certified), "failures": list(ref.failures),
             "seed": seed, "draws": list(np.shape(ref.posterior.draws[ref.posterior.sites[0].name])[:2]),
             "rhat_max": ref.diagnostics.get("rhat_max"), "ess_bulk_min": ref.diagnostics.get("ess_bulk_min"),
             "sampling_seconds": t1 - t0, "evidence_seconds": time.perf_counter() - t1,
             "evidence_form": getattr(form, "parameterization", None),
             "tried": [{"sampler": getattr(r, "sampler", str(r)), "certified": bool(getattr(r, "certified", False)),
                        "failures": list(getattr(r, "failures", []))} for r in tried]}
    value = "none" if evidence.log_z is None else f"{evidence.log_z:.3f} +- {evidence.se:.3f}"
    print(f"{name}: reference log Z {value} (certified {evidence.certified}"
          f"{': ' + evidence.reason if evidence.reason else ''}); {facts['sampler']} {t1 - t0:.0f} s, "
          f"evidence {facts['evidence_seconds']:.0f} s", flush=True)
    if path:
        write_json_atomic({"name": name, "spec": spec.to_dict(), "evidence": evidence.to_json(), "reference": facts},
                          path)
    return evidence, facts


def _judged(alt: ev.ReferenceEvidence, chosen: ev.ReferenceEvidence, offset: float = 0.0) -> dict:
    """The reference's difference alternative - chosen and what it means for the choice."""
    d = ev.log_z_difference(alt, chosen, offset=offset)
    return {**d.to_json(), "changes": CHANGES.get(d.status, "no certified reference")}


def pcvm_selection(cache_dir, scales=PCVM_SCALES, n_drop: int = 4, n_add: int = 3,
                   nuts_draws: int | None = None) -> dict:
    """EPCVM_Lap's selection on PCVM's default case against alternative frozen models."""
    config = CompareConfig(model="pcvm")
    record = registry.get_model("pcvm")
    t0 = time.perf_counter()
    prepared = prepare_problem(config)
    split = datasets.load(config.data, config.split, standardize=not record.raw_inputs)
    X, y = split.X_train, prepared.y_train
    width = prepared.hyper["width"]
    Phi_all = pcvm_basis(X, y, width).transform(X)
    _, sel = pcvm_laplace.fit_with_selection(Phi_all, y)
    active, alpha, alpha_bias = np.asarray(sel.active), np.asarray(sel.alpha), float(sel.alpha_bias)
    if not (np.allclose(Phi_all[:, active], prepared.Phi_train) and np.allclose(alpha, prepared.spec.alpha)
            and math.isclose(alpha_bias, prepared.spec.alpha_bias)):
        raise RuntimeError("the selection re-run on the CV width does not reproduce the default case's model")
    prepare_seconds = time.perf_counter() - t0
    f = sel.factors
    spec0 = prepared.spec
    # the rule's predicted change of the evidence (DERIVATIONS.md §1.5): deleting member k
    # gains l(inf) - l(alpha_k) = -l(alpha_k); adding candidate k at alpha a gains l(a)
    l_in = basis_selection.marginal_likelihood_term(alpha, f.s[active], f.q[active])
    a_add = float(np.median(alpha))
    out = np.setdiff1d(np.arange(Phi_all.shape[1]), active)
    out = out[f.q[out] > 0]  # a weight >= 0 can only enter with q > 0 (its would-be mean)
    l_out = basis_selection.marginal_likelihood_term(np.full(out.size, a_add), f.s[out], f.q[out])
    alts = [{"name": "selected", "group": "selected", "active": active, "alpha": alpha, "predicted": None,
             "description": f"EPCVM_Lap's selection: {active.size} of {Phi_all.shape[1]} candidates"}]
    for c in scales:
        alts.append({"name": f"alpha x {c:g}", "group": "scale", "active": active, "alpha": alpha * c,
                     "predicted": None, "description": f"every selected alpha times {c:g} (the bias's kept)"})
    for j in np.argsort(l_in)[:n_drop]:
        alts.append({"name": f"- {int(active[j])}", "group": "drop", "active": np.delete(active, j),
                     "alpha": np.delete(alpha, j), "predicted": float(-l_in[j]),
                     "description": f"without member {int(active[j])} (alpha {alpha[j]:.4g}); the other alphas kept"})
    top = out[np.argsort(-l_out)[:n_add]]
    for k in top:
        alts.append({"name": f"+ {int(k)}", "group": "add", "active": np.append(active, k),
                     "alpha": np.append(alpha, a_add), "predicted": float(l_out[out == k][0]),
                     "description": f"with pruned candidate {int(k)} at alpha {a_add:.4g} "
                                    "(the selected alphas' median)"})
    if len(top) > 1:
        alts.append({"name": "+ " + " ".join(str(int(k)) for k in top), "group": "add",
                     "active": np.concatenate([active, top]),
                     "alpha": np.concatenate([alpha, np.full(len(top), a_add)]),
                     "predicted": None, "description": f"with all {len(top)} at alpha {a_add:.4g}"})
    rows = []
    for alt in alts:
        Phi = Phi_all[:, alt["active"]]
        spec = spec0.with_params(alpha=np.asarray(alt["alpha"], dtype=float))
        M = int(len(alt["active"]))
        fit = pcvm_laplace.fit(spec, Phi, y)
        row = {k: alt[k] for k in ("name", "group", "description", "predicted")}
        row |= {"active": [int(k) for k in alt["active"]], "alpha": [float(a) for a in alt["alpha"]], "M": M,
                "engine": {"log_evidence": float(fit.info.extra["log_evidence"]),
                           "log_evidence_model": float(fit.info.extra["log_evidence_model"]),
                           "converged": bool(fit.info.converged)},
                "references": {}}
        for variant, s in (("surrogate", spec.with_params(surrogate=True)), ("model", spec)):
            evidence, facts = frozen_evidence("pcvm", s, Phi, y, f"pcvm/{alt['name']}/{variant}", cache_dir,
                                             nuts_draws)
            row["references"][variant] = {"evidence": evidence.to_json(), "reference": facts,
                                          # the surrogate prior's normalizer, which NumPyro's model omits
                                          "normalizer": M * math.log(2.0) if variant == "surrogate" else 0.0}
            row.setdefault("_evidence", {})[variant] = evidence
        rows.append(row)
    chosen = rows[0]
    for row in rows:
        row["engine_difference"] = row["engine"]["log_evidence"] - chosen["engine"]["log_evidence"]
        row["differences"] = {}
        for variant in ("surrogate", "model"):
            offset = row["references"][variant]["normalizer"] - chosen["references"][variant]["normalizer"]
            row["differences"][variant] = (None if row is chosen else
                                           _judged(row["_evidence"][variant], chosen["_evidence"][variant], offset))
    for row in rows:
        del row["_evidence"]
    return {"case": {"data": config.data, "split": config.split, "width": width, "n_train": int(len(y)),
                     "candidates": int(Phi_all.shape[1]), "selected": [int(k) for k in active],
                     "alpha": [float(a) for a in alpha], "alpha_bias": alpha_bias,
                     "selection_converged": bool(sel.converged), "selection_steps": int(sel.n_iter),
                     "add_alpha": a_add, "prepare_seconds": prepare_seconds},
            "engine": "laplace (EPCVM_Lap): info.extra['log_evidence'], the Laplace evidence of the normalized "
                      "surrogate prior, which the selection's trace records",
            "references": {"surrogate": "the surrogate model NumPyro writes, its log Z plus M log 2 (the prior's "
                                        "normalizer it omits)",
                           "model": "the probit PCVM frozen for zoo compare (truncated prior, normalized)"},
            "alternatives": rows}


def _drop_design(spec: GridRVM, Phi, axis: str, index: int):
    """(spec, design) of the table without one row or column: its weights removed from the
    model (the limit alpha_i -> infinity of the row's precision), the table one shorter."""
    m1, m2 = spec.shape
    table = np.arange(m1 * m2).reshape(m1, m2)
    keep = np.delete(table, index, axis=0 if axis == "row" else 1)
    return spec.with_params(shape=keep.shape), np.asarray(Phi)[:, keep.ravel()]


def grid_selection(cache_dir, n_kept: int = 2, n_pruned: int = 2, nuts_draws: int | None = None) -> dict:
    """gridRVM's default case: (a) the prior each engine's evidence picks against the
    reference log Zs; (b) VB's relevance of rows / columns against the reference."""
    config = CompareConfig(model="grid-rvm")
    record = registry.get_model("grid-rvm")
    prepared = prepare_problem(config)
    spec, Phi, y = prepared.spec, prepared.Phi_train, prepared.y_train
    priors = {"p-grid": spec, **prepared.variants}
    refs, facts, values = {}, {}, {}
    posts = {}
    for prior, s in priors.items():
        refs[prior], facts[prior] = frozen_evidence("grid-rvm", s, Phi, y, f"grid-rvm/{prior}", cache_dir,
                                                       nuts_draws)
        for family in ("vb", "auto-laplace"):
            name = family if prior == "p-grid" else f"{family}-{prior}"
            post = record.engine(name).fit()(spec, Phi, y)
            posts[name] = post
            value, kind, source = ev.engine_evidence(post)
            values.setdefault(family, {})[prior] = {"engine": name, "value": value, "kind": kind, "source": source,
                                                    "converged": bool(post.info.converged)}
    choices = {}
    for family, by_prior in values.items():
        pick = max(by_prior, key=lambda p: by_prior[p]["value"])
        choices[family] = {"chosen": pick, "alternatives": {
            p: {"engine_difference": by_prior[p]["value"] - by_prior[pick]["value"],
                "reference": _judged(refs[p], refs[pick])} for p in priors if p != pick}}
    best = max(priors, key=lambda p: refs[p].log_z)
    reference_pick = {"chosen": best, "against": {p: ev.log_z_difference(refs[best], refs[p]).to_json()
                                                  for p in priors if p != best}}
    # (b) relevance on the p-grid: VB's pruning summary
    vb = posts["vb"].info.extra
    m1, m2 = spec.shape
    gamma = np.asarray(vb["well_determinedness"]).reshape(m1, m2)
    kept = np.asarray(vb["relevant"]).reshape(m1, m2)
    axes = {"row": (kept.any(axis=1), gamma.sum(axis=1), np.asarray(vb["alpha_mean"])),
            "column": (kept.any(axis=0), gamma.sum(axis=0), np.asarray(vb["beta_mean"]))}
    picks = [("row", int(i)) for i in [i for i in np.argsort(axes["row"][1]) if axes["row"][0][i]][:n_kept]]
    pruned_rows = [int(i) for i in np.argsort(axes["row"][1]) if not axes["row"][0][i]]
    pruned_columns = [int(j) for j in np.argsort(axes["column"][1]) if not axes["column"][0][j]]
    # pruned rows if VB prunes any, else pruned columns (the p-grid treats both alike)
    picks += ([("row", i) for i in pruned_rows] or [("column", j) for j in pruned_columns])[:n_pruned]
    full_elbo = values["vb"]["p-grid"]["value"]
    relevance = []
    for axis, i in picks:
        relevant, gsum, precision = axes[axis]
        s_red, Phi_red = _drop_design(spec, Phi, axis, i)
        post = grid_vb.fit(s_red, Phi_red, y)
        elbo = ev.engine_evidence(post)[0]
        ref_red, facts_red = frozen_evidence("grid-rvm", s_red, Phi_red, y, f"grid-rvm/p-grid/without {axis} {i}",
                                             cache_dir, nuts_draws)
        keep = bool(relevant[i])
        # the alternative is the opposite of VB's decision: alternative - chosen
        if keep:
            judged, engine_diff = _judged(ref_red, refs["p-grid"]), elbo - full_elbo
        else:
            judged, engine_diff = _judged(refs["p-grid"], ref_red), full_elbo - elbo
        relevance.append({"axis": axis, "index": i, "vb_relevant": keep,
                          "vb_relevant_weights": int((kept[i] if axis == "row" else kept[:, i]).sum()),
                          "gamma_sum": float(gsum[i]), "expected_precision": float(precision[i]),
                          "alternative": f"without {axis} {i}" if keep else f"with {axis} {i}",
                          "elbo_reduced": elbo, "elbo_full": full_elbo, "vb_converged": bool(post.info.converged),
                          "engine_difference": engine_diff, "reference_reduced": ref_red.to_json(),
                          "reference_run": facts_red, "reference": judged})
    return {"case": {"data": config.data, "shape": list(spec.shape), "n_train": int(len(y)),
                     "pruning": vb["pruning"], "row_gamma_sum": axes["row"][1].tolist(),
                     "column_gamma_sum": axes["column"][1].tolist(), "alpha_mean": axes["row"][2].tolist(),
                     "beta_mean": axes["column"][2].tolist()},
            "priors": {p: {"reference": refs[p].to_json(), "reference_run": facts[p],
                           **{family: values[family][p] for family in values}} for p in priors},
            "choices": choices, "reference_pick": reference_pick,
            "relevance": relevance,
            "relevance_note": ("rows and columns are pixel rows and columns of the 8 x 8 image (design column "
                               "i * 8 + j); removing one is the model with those weights fixed at 0, the table one "
                               "shorter; least relevant: the smallest sum of gamma = 1 - E[prec] Var(w) "
                               "(pruning_summary's rule) among the kept; pruned rows where VB prunes any, else "
                               "pruned columns")}


def selection(models, cache_dir, out_path, **options) -> dict:
    out = {"models": {}, **machine()}
    if os.path.exists(out_path):  # resume: keep the models already done by this command
        with open(out_path) as fh:
            previous = json.load(fh)
        out["models"] = {m: r for m, r in previous.get("models", {}).items() if m in models}
    for model in models:
        if model in out["models"] and not options.get("redo"):
            print(f"{model}: already in {out_path}", flush=True)
            continue
        t0 = time.perf_counter()
        if model == "pcvm":
            result = pcvm_selection(cache_dir, options.get("scales", PCVM_SCALES), options.get("drops", 4),
                                    options.get("adds", 3), options.get("nuts_draws"))
        elif model == "grid-rvm":
            result = grid_selection(cache_dir, options.get("grid_kept", 2), options.get("grid_pruned", 2),
                                    options.get("nuts_draws"))
        else:
            raise ValueError(f"selection covers {', '.join(SELECTION_MODELS)}; not {model!r}")
        result["seconds"] = time.perf_counter() - t0
        result["nuts_draws_per_chain"] = options.get("nuts_draws") or "the record's"
        out["models"][model] = result
        write_json_atomic(out, out_path)
    return out


def _pm(d) -> str:
    return "-" if d is None or d.get("difference") is None else f"{d['difference']:+.3f} +- {d['se']:.3f}"


def _cert(*refs) -> str:
    return "yes" if all(r["certified"] for r in refs) else "no"


def selection_table(result: dict) -> str:
    """Markdown tables of the selection job's result."""
    out = []
    if "pcvm" in result["models"]:
        m = result["models"]["pcvm"]
        rows = m["alternatives"]
        sel = rows[0]
        out += [f"PCVM ({m['case']['data']}, width {m['case']['width']:g}): EPCVM_Lap's selection, "
                f"{len(sel['active'])} of {m['case']['candidates']} candidates. Differences are alternative - "
                "selected; engine: Laplace log evidence (normalized surrogate prior), the rule's prediction in "
                "brackets; references: the surrogate (+ M log 2) and the probit PCVM.", "",
                "| alternative | M | engine Δ log Z (rule) | surrogate ref Δ ± se | certified | changes? | "
                "PCVM ref Δ ± se | certified | changes? |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            e = f"{r['engine']['log_evidence']:.3f}" if r is sel else f"{r['engine_difference']:+.3f}"
            if r.get("predicted") is not None:
                e += f" ({r['predicted']:+.3f})"
            cells = []
            for v in ("surrogate", "model"):
                ref = r["references"][v]["evidence"]
                if r is sel:
                    cells += [f"{ref['log_z'] + r['references'][v]['normalizer']:.3f} +- {ref['se']:.3f}",
                              _cert(ref), "-"]
                else:
                    d = r["differences"][v]
                    cells += [_pm(d) + ("" if d["z"] is None else f" (z {d['z']:+.1f})"),
                              _cert(ref, sel["references"][v]["evidence"]), d["changes"]]
            out.append(f"| {r['name'] if r is not sel else 'selected (absolute values)'} | {r['M']} | {e} | "
                       + " | ".join(cells) + " |")
        out.append("")
    if "grid-rvm" in result["models"]:
        m = result["models"]["grid-rvm"]
        out += ["gridRVM (digits, p-grid model): (a) the prior chosen by each engine's evidence", "",
                "| prior | VB ELBO | generic Laplace | reference log Z ± se | certified |", "|---|---|---|---|---|"]
        for p, d in m["priors"].items():
            out.append(f"| {p} | {d['vb']['value']:.3f} | {d['auto-laplace']['value']:.3f} | "
                       f"{d['reference']['log_z']:.3f} +- {d['reference']['se']:.3f} | {_cert(d['reference'])} |")
        out += ["", "| engine | its choice | alternative | engine Δ | reference Δ ± se | certified | changes? |",
                "|---|---|---|---|---|---|---|"]
        for family, c in m["choices"].items():
            for p, a in c["alternatives"].items():
                refs = (m["priors"][p]["reference"], m["priors"][c["chosen"]]["reference"])
                z = a["reference"]["z"]
                out.append(f"| {family} | {c['chosen']} | {p} | {a['engine_difference']:+.3f} | "
                           f"{_pm(a['reference'])}{'' if z is None else f' (z {z:+.1f})'} | {_cert(*refs)} | "
                           f"{a['reference']['changes']} |")
        rp = m["reference_pick"]
        out += ["", f"The reference's own pick: {rp['chosen']} ("
                + "; ".join(f"over {p}: {_pm(d)}, {d['status']}" for p, d in rp["against"].items()) + ")", "",
                "(b) relevance (VB, p-grid): the alternative is the opposite of VB's decision; Δ = alternative - "
                "VB's choice", "",
                "| row/column | VB relevant (weights; sum gamma) | alternative | ELBO Δ | reference Δ ± se | "
                "certified | changes? |", "|---|---|---|---|---|---|---|"]
        full = m["priors"]["p-grid"]["reference"]
        for r in m["relevance"]:
            z = r["reference"]["z"]
            out.append(f"| {r['axis']} {r['index']} | {'yes' if r['vb_relevant'] else 'no'} "
                       f"({r['vb_relevant_weights']}; {r['gamma_sum']:.2f}) | {r['alternative']} | "
                       f"{r['engine_difference']:+.3f} | {_pm(r['reference'])}"
                       f"{'' if z is None else f' (z {z:+.1f})'} | "
                       f"{_cert(r['reference_reduced'], full)} | {r['reference']['changes']} |")
    return "\n".join(out)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="job", required=True)
    cal = sub.add_parser("calibration")
    cal.add_argument("--repeats", type=int, default=10)
    mod = sub.add_parser("models")
    mod.add_argument("--models", nargs="+", default=list(registry.model_names()))
    mod.add_argument("--cache-dir", default=None)
    sel = sub.add_parser("selection")
    sel.add_argument("--models", nargs="+", default=list(SELECTION_MODELS), choices=SELECTION_MODELS)
    sel.add_argument("--cache-dir", default=None, help="reference draws and reference log Zs (resumes a run)")
    sel.add_argument("--scales", nargs="+", type=float, default=list(PCVM_SCALES))
    sel.add_argument("--drops", type=int, default=4, help="pcvm: members dropped, one at a time")
    sel.add_argument("--adds", type=int, default=3, help="pcvm: pruned candidates added, one at a time and together")
    sel.add_argument("--grid-kept", type=int, default=2, help="grid-rvm: least relevant rows VB keeps")
    sel.add_argument("--grid-pruned", type=int, default=2,
                     help="grid-rvm: rows VB prunes (columns where it prunes no row)")
    sel.add_argument("--nuts-draws", type=int, default=2000,
                     help="NUTS draws a chain for every reference (0: the record's); bridge sampling uses "
                          "their second halves")
    sel.add_argument("--redo", action="store_true", help="recompute models already in the results file")
    sel.add_argument("--table", action="store_true", help="only print the tables of the results file")
    args = parser.parse_args(argv)
    os.makedirs(RESULTS, exist_ok=True)
    if args.job == "calibration":
        result = calibration(args.repeats)
        write_json_atomic(result, os.path.join(RESULTS, "evidence_calibration.json"))
        for name, case in result["cases"].items():
            for method, s in case["summary"].items():
                print(f"{name} {method}: |z| > 1.96 in {s['outside_1_96']}/{s['n']} "
                      f"(Wilson {s['wilson_95'][0]:.2f}-{s['wilson_95'][1]:.2f}); mean z {s['mean_z']:+.2f}, "
                      f"sd z {s['sd_z']:.2f}; median se {s['median_se']:.4f}, {s['median_seconds']:.1f} s")
    elif args.job == "selection":
        path = os.path.join(RESULTS, "evidence_selection.json")
        if args.table:
            with open(path) as fh:
                print(selection_table(json.load(fh)))
            return
        result = selection(args.models, args.cache_dir, path, scales=tuple(args.scales), drops=args.drops,
                           adds=args.adds, grid_kept=args.grid_kept, grid_pruned=args.grid_pruned, redo=args.redo,
                           nuts_draws=args.nuts_draws or None)
        print(selection_table(result))
    else:
        result = models(args.models, args.cache_dir)
        write_json_atomic(result, os.path.join(RESULTS, "evidence_models.json"))
        print(table(result))


if __name__ == "__main__":
    main()
