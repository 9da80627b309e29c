"""The ``zoo`` command line.

    zoo compare            # PCVM on Ripley, engines em,laplace,ep against NUTS -> ./zoo-report/
    zoo compare --model pcvm --data banana --split 3 --engines laplace,ep --param width=0.7
    zoo sbc --model pcvm --engine laplace,ep   # simulation-based calibration -> ./zoo-sbc/
    zoo sbc --model pcvm --engine my_module:fit  # ... of your own engine
    zoo study example      # a grid of comparisons, SBC runs and defect batteries on Dask
    zoo datasets           # names, sizes and sources of the embedded data
    zoo reproduce --help   # paper reproductions (our numbers beside the published ones)
"""
from __future__ import annotations

import argparse
import os
import sys


def _parse_params(items: list[str]) -> dict[str, float]:
    params = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param takes name=value, got {item!r}")
        name, value = item.split("=", 1)
        try:
            params[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--param {name}: value {value!r} is not a number") from None
    return params


def _default_cache_dir() -> str:
    return os.environ.get(
        "ZOO_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "sparse-bayes-zoo")
    )


def _cmd_compare(args) -> int:
    from zoo.validation.compare import CompareConfig, compare, default_references
    from zoo.validation.report import write_report

    progress = not args.no_progress and sys.stderr.isatty()
    try:  # bad arguments or data end in one clear line, not a traceback
        samplers = None if args.reference is None else tuple(
            s.strip() for s in args.reference.split(",") if s.strip())
        ref_cfg = default_references(
            args.model, samplers, num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples,
            target_accept=args.target_accept, seed=args.seed, time_limit=args.time_limit,
        )
        config = CompareConfig(
            model=args.model, data=args.data, split=args.split,
            engines=None if args.engines is None else tuple(e.strip() for e in args.engines.split(",") if e.strip()),
            params=_parse_params(args.param), reference=ref_cfg, seed=args.seed,
            cache_dir=None if args.no_cache else args.cache_dir,
        )
        comp = compare(config, progress=progress)
    except ValueError as err:
        print(f"zoo compare: error: {err}", file=sys.stderr)
        return 2
    files = write_report(comp, args.out)
    print(summary_table(comp.results))
    print(f"\nreport: {files['report']}")
    if comp.reference is None:
        # not an error: the report holds the engines' timings and test-set figures and says
        # why it holds nothing else
        print("zoo compare: warning: no reference: " + "; ".join(comp.results["reference"]["failures"]),
              file=sys.stderr)
    return 0


def summary_table(res) -> str:
    from zoo.validation.verdict import summary_line

    # engine names such as mm-laplace are longer than the 8 characters the column had
    name_width = max([9] + [len(name) + 2 for name in res["engines"]])
    lines = [
        f"{res['model']} on {res['data']} (split {res['split']}), n_train={res['n_train']}, "
        f"n_basis={res['hyper'].get('n_basis')}, "
        + ", ".join(f"{k}={v:g}" for k, v in res["hyper"].items() if k != "n_basis" and isinstance(v, (int, float))),
        *_reference_summary_lines(res),
        "",
        f"{'engine':<{name_width}}{'pred_mae':>10}{'smerr_med':>11}{'sd_ratio':>10}{'khat':>8}{'test_err':>10}{'seconds':>10}{'x ref':>9}",
    ]

    def f(v, spec):
        width = int(spec.split(".")[0])
        return format(v, spec) if v is not None else format("null", f">{width}")

    variant_rows = []
    for name, r in res["engines"].items():
        label = name + ("*" if r.get("other_model") else "")
        if r.get("failure"):
            lines.append(f"{label:<{name_width}}failed: {r['failure']}")
            continue
        lines.append(
            f"{label:<{name_width}}{f(r['pred_mae'], '10.5f')}{f(r['std_mean_err_median'], '11.3f')}"
            f"{f(r['sd_ratio_median'], '10.3f')}{f(r['khat'], '8.2f')}{f(r['test_error'], '10.4f')}"
            f"{f(r['seconds'], '10.4f')}{f(r['speedup_vs_reference'], '9.0f')}"
        )
        for key, v in r.items():
            if key.startswith("vs_") and isinstance(v, dict):
                variant = key[3:]
                variant_rows.append((f"{name} vs {variant}", v))
                # the engine against the reference of the model it fits: its approximation error
                vs_label = f"  vs {variant}"
                lines.append(f"{vs_label:<{name_width}}{f(v.get('pred_mae'), '10.5f')}"
                             f"{f(v.get('std_mean_err_median'), '11.3f')}{f(v.get('sd_ratio_median'), '10.3f')}"
                             f"{f(v.get('khat'), '8.2f')}{f(v.get('test_error'), '10.4f')}")
    if any(r.get("other_model") for r in res["engines"].values()):
        lines.append("* fits another model (prior) than the reference's: its row is a distance, not an approximation error")
    if variant_rows:
        lines.append("  vs X: the same engine against the reference of the model variant X it fits")
    verdicts = [(name, r["verdict"]) for name, r in res["engines"].items() if r.get("verdict")]
    verdicts += [(label, v["verdict"]) for label, v in variant_rows if v.get("verdict")]
    if verdicts:
        lines += ["", "verdicts (an exact engine is called different about 5% of the time, in any dimension):"]
        lines += ["  " + summary_line(name, v) for name, v in verdicts]
    return "\n".join(lines)


def _reference_summary_lines(res) -> list[str]:
    """Which sampler is the reference and whether it is certified (or that there is none)."""
    from zoo.validation.compare import reference_ran_out_of_time

    ref = res["reference"]
    if reference_ran_out_of_time(ref):
        return ["reference: none, NOT CERTIFIED: " + "; ".join(ref["failures"]),
                "  (the rows below hold only test-set figures and timings: nothing to measure them against)"]
    status = "certified" if ref["certified"] else "NOT CERTIFIED: " + "; ".join(ref["failures"])
    sampler = ref.get("sampler_name", "nuts")
    others = [t for t in res.get("references_tried", []) if t.get("sampler_name") != sampler]
    return [
        f"reference ({sampler}): {status} (R-hat max {ref['rhat_max']:.4f}, ESS bulk/tail min "
        f"{ref['ess_bulk_min']:.0f}/{ref['ess_tail_min']:.0f}, divergences {ref['divergences']}, "
        f"{ref['seconds']:.1f} s); reference test error {res['reference_test_error']:.4f}",
        *[f"  tried first: {t['sampler_name']}, ran out of time (limit {t['time_limit']:g} s, no draws)"
          if t.get("time_limit") is not None else
          f"  tried first: {t['sampler_name']}, not certified (R-hat max {t['rhat_max']:.3f}, "
          f"ESS bulk min {t['ess_bulk_min']:.0f}, divergences {t['divergences']}, {t['seconds']:.0f} s)"
          for t in others],
    ]


def _cmd_datasets(args) -> int:
    from zoo import data as datasets

    rows = datasets.describe()
    width = max(len("name"), *(len(r["name"]) for r in rows)) + 2  # the longest name sets the column
    print(f"{'name':<{width}}{'train':>7}{'test':>7}{'dim':>5}{'splits':>8}  source")
    for r in rows:
        print(f"{r['name']:<{width}}{r['n_train']:>7}{r['n_test']:>7}{r['dim']:>5}{r['n_splits']:>8}  {r['source']}")
    return 0


def _cmd_reproduce(args) -> int:
    from zoo.validation import reproduce

    entry = reproduce.get_entry(args.entry)
    options = {o.name: getattr(args, o.name) for o in entry.options}
    try:  # bad sizes end in one clear line, not a traceback
        result = reproduce.run(args.entry, out=args.out, reps=args.reps, jobs=args.jobs, seed=args.seed, **options)
    except ValueError as err:
        print(f"zoo reproduce {args.entry}: error: {err}", file=sys.stderr)
        return 2
    with open(result["files"]["table.md"]) as fh:
        print(fh.read())
    print(f"table: {result['files']['table.md']} and {result['files']['table.json']}")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _cmd_sbc(args) -> int:
    from zoo.validation import registry
    from zoo.validation.atomic import atomic_write, write_json_atomic
    from zoo.validation.sbc import SBCSettings, plot_sbc, run_sbc, sbc_names, summary_line

    # a user's engine given as module:function is imported like `python -m` would: from
    # the current folder first
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        record = registry.get_model(args.model)
        names = [e.strip() for e in args.engine.split(",") if e.strip()]
        if names == ["all"]:
            names = sbc_names(record)
        if not names:
            raise ValueError("--engine names no engine")
        settings = SBCSettings(n_sims=args.sims, n_draws=args.draws, seed=args.seed)
    except ValueError as err:
        print(f"zoo sbc: error: {err}", file=sys.stderr)
        return 2
    problem = {"n": args.n, "n_basis": args.n_basis}
    rows = []
    for name in names:
        folder = os.path.join(args.out, args.model, name.replace(":", "_").replace("/", "_"))
        show = not args.no_progress and sys.stderr.isatty()

        def progress(done, total, _name=name):
            print(f"\r{_name}: {done}/{total} simulations", end="", file=sys.stderr, flush=True)
        try:
            summary = run_sbc(args.model, name, settings=settings, out_dir=folder, problem_kwargs=problem,
                              progress=progress if show else None)
        except ValueError as err:
            print(f"zoo sbc: error: {err}", file=sys.stderr)
            return 2
        if show:
            print(file=sys.stderr)
        write_json_atomic(summary, os.path.join(folder, "sbc.json"))
        figure = plot_sbc(summary, os.path.join(folder, "sbc.png"))
        print(summary_line(summary))
        rows.append((name, summary, figure))
    lines = [f"# SBC: {args.model}", "",
             f"{args.sims} simulations, {args.draws} posterior draws ranked in each, design of {args.n} points and "
             f"{rows[0][1]['design']['n_basis'] if rows else args.n_basis} RBF features (validation/sbc.py); "
             "each engine is called miscalibrated when a "
             "quantity's PIT ECDF leaves its simultaneous band, with a 5% family-wise false-alarm rate.", "",
             "| engine | verdict | fits ok / failed | median fit seconds | figure |", "|---|---|---|---|---|"]
    for name, summary, figure in rows:
        counts = summary.get("counts", {})
        secs = counts.get("fit_seconds_median")
        lines.append(f"| {name} | {summary['reason']} | {counts.get('ok', '-')} / {counts.get('failed', '-')} | "
                     f"{'-' if secs is None else f'{secs:.3g}'} | "
                     f"{os.path.relpath(figure, args.out) if figure else '-'} |")
    report = os.path.join(args.out, args.model, "sbc.md")
    atomic_write(report, lambda tmp: open(tmp, "w").write("\n".join(lines) + "\n"))
    print(f"\nreport: {report}")
    return 0


def _add_sbc_parser(sub, records) -> None:
    p = sub.add_parser(
        "sbc",
        help="simulation-based calibration of engines (or your own fit function) on a model's prior",
        description="Draws parameters and labels from the model's prior, fits the engine to each "
        "simulated data set and ranks the true values among its posterior draws; uniform ranks mean a "
        "calibrated engine. Finished simulations are kept in OUT, so a rerun resumes.",
    )
    p.add_argument("--model", default="pcvm", help="model name: " + ", ".join(r.name for r in records))
    p.add_argument("--engine", default="all", metavar="NAMES",
                   help="comma-separated: the model's engines, its reference samplers (nuts, ...; "
                        "sampler@variant on a model variant, e.g. grid-gibbs@s-grid), or "
                        "module:function of your own with the contract fit(spec, Phi, y, *, config=None) "
                        "(default: all engines and samplers of the model). Engines: "
                        + "; ".join(f"{r.name} {', '.join(r.engine_names + r.sampler_names)}" for r in records))
    p.add_argument("--sims", type=_positive_int, default=100, help="simulations (default 100)")
    p.add_argument("--draws", type=_positive_int, default=99, help="posterior draws ranked per simulation (default 99)")
    p.add_argument("--n", type=_positive_int, default=60, help="training points of the design (default 60)")
    p.add_argument("--n-basis", type=_positive_int, default=None,
                   help="RBF features of the design (default 6, or the model's own number of weights where its "
                        "spec fixes one: grid-rvm's 4 x 3 table)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="zoo-sbc", help="output folder (default ./zoo-sbc)")
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    p.set_defaults(func=_cmd_sbc)


def _cmd_study(args) -> int:
    from zoo.validation.study import expand, load_config, run_study

    if os.getcwd() not in sys.path:  # user engines given as module:function
        sys.path.insert(0, os.getcwd())
    try:
        config = load_config(args.config)
        expand(config)  # every name checked before a cluster starts
    except ValueError as err:
        print(f"zoo study: error: {err}", file=sys.stderr)
        return 2
    out = run_study(config, args.out, scheduler=args.scheduler, n_workers=args.workers,
                    progress=not args.no_progress)
    print(f"{out['ran']} cells run, {out['reused']} already done; report: {out['report']}")
    return 0


def _add_study_parser(sub) -> None:
    p = sub.add_parser(
        "study",
        help="run a study (a grid of comparisons, SBC runs and defect batteries) on Dask",
        description="CONFIG is a TOML file, or the name of a shipped study (example). Cells run on a Dask "
        "LocalCluster of this machine, or on an existing cluster with --scheduler; each finished cell is kept "
        "in OUT/cells/, so the same command resumes a killed study without redoing any cell.",
    )
    p.add_argument("config", help="study TOML file, or 'example'")
    p.add_argument("--out", default="zoo-study", help="output folder (default ./zoo-study)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a LocalCluster)")
    p.add_argument("--workers", type=_positive_int, default=None,
                   help="LocalCluster worker processes (default: the number of cores)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_study)


def _add_reproduce_parser(sub) -> None:
    from zoo.validation import reproduce

    r = sub.add_parser(
        "reproduce",
        help="rerun a paper's experiment; write our numbers beside the paper's",
        description="Each entry NAME writes OUT/NAME/table.md and table.json (our numbers beside the "
        "paper's, marked reproduced / NOT reproduced with the criterion) and keeps its finished fits in "
        "OUT/NAME/cells/, so an interrupted run resumes. `zoo reproduce NAME --help` shows the entry's "
        "size options and defaults.",
    )
    entries = r.add_subparsers(dest="entry", required=True, metavar="NAME",
                               title="entries (NAME)")
    for e in reproduce.ENTRIES.values():
        # argparse %-formats help texts
        p = entries.add_parser(e.name, help=e.description.replace("%", "%%"),
                               description=f"{e.description} Defaults: {e.default_sizes}.".replace("%", "%%"))
        p.add_argument("--reps", type=_positive_int, default=e.default_reps,
                       help=f"repetitions / test splits (default {e.default_reps})")
        p.add_argument("--out", default="zoo-reproduce", help="output folder (default ./zoo-reproduce)")
        p.add_argument("--jobs", type=_positive_int, default=2, help="worker processes (default 2)")
        p.add_argument("--seed", type=int, default=0, help="seed of the CV folds (default 0)")
        for o in e.options:
            p.add_argument("--" + o.name.replace("_", "-"), dest=o.name, default=o.default,
                           help=f"{o.help} (default {o.default})".replace("%", "%%"))
        p.set_defaults(func=_cmd_reproduce)


def _reference_defaults_text(records, setting: str) -> str:
    """"(default N; model: sampler M, ...)" for one ReferenceConfig setting, read from the
    records' reference chains, so the help never disagrees with what runs."""
    from zoo.validation.reference import ReferenceConfig

    base = getattr(ReferenceConfig(), setting)
    special = [f"{r.name}: " + ", ".join(f"{d.get('sampler', 'nuts')} {d[setting]:g}" for d in r.references
                                         if setting in d)
               for r in records if any(setting in d for d in r.references)]
    return f"(default {base:g}" + ("; " + "; ".join(special) if special else "") + ")"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description="Sparse Bayesian classifier zoo")
    sub = parser.add_subparsers(dest="command", required=True)

    from zoo.validation import registry

    records = [registry.get_model(name) for name in registry.model_names()]
    c = sub.add_parser(
        "compare",
        help="fit engines and a reference sampler on one frozen spec and data; write a report",
        description="Hyper-parameters are frozen once ("
        + "; ".join(f"{r.name}: {r.selection}" for r in records)
        + "); the reference sampler and every engine then approximate the same posterior.",
    )
    c.add_argument("--model", default="pcvm",
                   help="model name: " + ", ".join(r.name + (" (default)" if r.name == "pcvm" else "") for r in records))
    c.add_argument("--data", default=None,
                   help="data set name, see `zoo datasets` (default: "
                        + ", ".join(f"{r.default_data} for {r.name}" for r in records) + ")")
    c.add_argument("--split", type=int, default=0, help="k-th seeded train/test split (ripley has one)")
    c.add_argument("--engines", default=None,
                   help="comma-separated engines (default: "
                        + "; ".join(f"{','.join(r.default_engines)} for {r.name}" for r in records)
                        + "). All engines: "
                        + "; ".join(f"{r.name} {', '.join(r.engine_names)}" for r in records))
    c.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a scalar hyper-parameter (repeatable): "
                        + "; ".join(f"{r.name} {', '.join(r.params)}" for r in records if r.params))
    c.add_argument("--reference", default=None, metavar="SAMPLERS",
                   help="reference samplers to try in order, the first certified one is used (default: "
                        + "; ".join(f"{r.name} {','.join(d.get('sampler', 'nuts') for d in r.references)}"
                                    for r in records)
                        + "). Besides nuts: "
                        + "; ".join(f"{', '.join(s.name for s in r.samplers)} ({r.name} only)"
                                    for r in records if r.samplers))
    c.add_argument("--chains", type=int, default=4, help="reference chains (default 4)")
    c.add_argument("--warmup", type=int, default=None,
                   help="reference warm-up iterations (Gibbs: sweeps) per chain "
                        + _reference_defaults_text(records, "num_warmup"))
    c.add_argument("--samples", type=int, default=None,
                   help="reference draws (Gibbs: sweeps) per chain " + _reference_defaults_text(records, "num_samples"))
    c.add_argument("--target-accept", type=float, default=None,
                   help="NUTS target acceptance " + _reference_defaults_text(records, "target_accept"))
    c.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="wall-clock limit for each reference sampler (default: none); a sampler that runs "
                        "out of time is stopped with a warning and the next one in the chain is tried; when "
                        "all run out of time, the report says there is no reference and gives the engines' "
                        "timings and test-set figures only")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", default="zoo-report", help="output folder (default ./zoo-report)")
    c.add_argument("--cache-dir", default=_default_cache_dir(), help="where reference draws are cached")
    c.add_argument("--no-cache", action="store_true", help="always rerun the reference sampler")
    c.add_argument("--no-progress", action="store_true", help="no progress bars")
    c.set_defaults(func=_cmd_compare)

    d = sub.add_parser("datasets", help="list the embedded data sets")
    d.set_defaults(func=_cmd_datasets)

    _add_sbc_parser(sub, records)
    _add_study_parser(sub)
    _add_reproduce_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import zoo

    zoo.enable_compilation_cache()
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
