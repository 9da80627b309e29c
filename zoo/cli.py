"""The ``zoo`` command line.

    zoo compare            # PCVM on Ripley, engines em,laplace,ep against NUTS -> ./zoo-report/
    zoo compare --model pcvm --data banana --split 3 --engines laplace,ep --param width=0.7
    zoo sbc --model pcvm --engine laplace,ep   # simulation-based calibration -> ./zoo-sbc/
    zoo sbc --model pcvm --engine my_module:fit  # ... of your own engine
    zoo sbc --model pcvm --engine ep --conditional  # posterior SBC: near the default case's data
    zoo study example      # a grid of comparisons, SBC runs and defect batteries on Dask
    zoo datasets           # names, sizes and sources of the embedded data
    zoo reproduce --help   # paper reproductions (our numbers beside the published ones)
    zoo cache [--clear]    # where the caches are, how big; --clear deletes them

Every name, number and folder is checked before any work starts, and a bad one ends the
command with one line on stderr (status 2). Ctrl-C ends a command with one line and
status 130; finished work (cells, simulations, cached references) is kept, and the same
command resumes from it. Worker processes of ``--jobs``/``zoo study`` never outlive the
command, whether it is interrupted, terminated or killed.
"""
from __future__ import annotations

import argparse
import codecs
import errno
from dataclasses import replace
import os
import sys
import tempfile
import warnings

import zoo
from zoo import data as datasets
from zoo import devices
from zoo import reproductions as reproduce
from zoo.models.checks import check_seed
from zoo.validation.base.atomic import write_json_atomic
from zoo.validation.records import registry
from zoo.validation.references import ReferenceConfig
from zoo.validation.references import cache as reference_cache
from zoo.validation.references.posteriordb_export import write_posteriordb
from zoo.validation.report.compare_report import summary_table, write_report
from zoo.validation.runs.compare import (
    EVIDENCE_MODES,
    CompareConfig,
    compare,
    default_references,
)
from zoo.validation.runs.engines import model_name, resolve_entry
from zoo.validation.runs.fence import DEFAULT_ENGINE_TIME_LIMIT
from zoo.validation.runs.limits import (BASIS_FUNCTIONS, CHAIN_DRAWS, DESIGN_POINTS, DRAWS, SIMULATIONS,
                                        check_count)
from zoo.validation.report.reproduction_report import write_reproduction_report
from zoo.validation.report.study_report import report_study
from zoo.validation.report.sbc_report import (plot_sbc, plot_sbc_views, sbc_design_words, sbc_glossary,
                                              write_sbc_report)
from zoo.validation.report.sbc_report import summary_line as sbc_summary_line
from zoo.validation.runs.sbc import SBCConfig, run_sbc
from zoo.validation.runs.sbc_simulation import DEFAULT_DESIGN_POINTS, SBCSettings, resolve_engine, sbc_names
from zoo.validation.runs import posterior_sbc
from zoo.validation.runs.study import expand, load_config, run_study

# the command line's own public names; everything else here is imported for the commands' use
__all__ = ["main", "build_parser", "folder_problem", "bars_fit"]


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
    return zoo.cache_dir()


def folder_problem(path: str, what: str) -> str | None:
    """Why ``path`` cannot be (or become) a folder this process writes into, in words that
    name ``what`` it is for; None if it can. Creates nothing: an existing folder, or else
    the nearest existing parent, must take a (nameless, at once deleted) file. A file where
    the folder should be, or a parent that is a file, is named as such."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{what} {path} is a file, not a folder"
    probe = path
    while not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if os.path.exists(probe) or parent == probe:
            return f"{what} {path} cannot be created: {probe} is not a folder"
        probe = parent
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        verb = "cannot be written" if probe == path else f"cannot be created in {probe}"
        # a folder that exists but takes no new files (/proc, /sys) answers "No such file"
        why = ("the folder does not take new files" if err.errno == errno.ENOENT
               else err.strerror or str(err))
        return f"{what} {path} {verb}: {why}"
    return None


def _check_folders(folders: list[tuple[str, str]]) -> None:
    """ValueError for the first (path, what) that cannot be written."""
    for path, what in folders:
        problem = folder_problem(path, what)
        if problem:
            raise ValueError(problem)


def _file_in_the_way(path: str) -> bool:
    """Whether a file (anything not a folder) stands where ``path`` or one of its parents
    must be a folder: a misconfigured path, unlike a folder that only refuses new files."""
    probe = os.path.abspath(os.fspath(path))
    while not os.path.isdir(probe):
        parent = os.path.dirname(probe)
        if os.path.exists(probe) or parent == probe:
            return True
        probe = parent
    return False


#: the running command ("zoo compare"), for the warnings of steps the commands share
_command = "zoo"


def _start_compiling(extra: list[tuple[str, str]] = ()) -> str | None:
    """Before a computing command's work: check its output folders (``extra``) and the JAX
    compilation cache folder, then switch that cache on. Returns the cache folder, or None
    when it runs without one. ValueError (one line) when an output folder cannot be
    written, or a file stands where the cache folder must be (a misconfigured ZOO_CACHE_DIR
    or ZOO_JAX_CACHE). A cache folder that only refuses new files (read-only, a shared
    cache) costs nothing but compile time: one warning line, and the command goes on without
    a persistent compile cache. Commands that compile nothing (``zoo datasets``, ``zoo
    cache``) never call this, so a broken cache cannot stop them."""

    jax_dir = zoo.jax_cache_dir()
    what = "JAX cache folder (env ZOO_JAX_CACHE)" if os.environ.get("ZOO_JAX_CACHE") else \
        "JAX cache folder (inside env ZOO_CACHE_DIR)" if os.environ.get("ZOO_CACHE_DIR") else "JAX cache folder"
    _check_folders(list(extra))
    problem = folder_problem(jax_dir, what)
    if problem and _file_in_the_way(jax_dir):
        raise ValueError(problem)
    if problem:
        print(f"{_command}: warning: {problem}; going on without a compile cache (each process compiles its "
              "programs again)", file=sys.stderr)
        return None
    return zoo.enable_compilation_cache(jax_dir)


def bars_fit(stream) -> bool:
    """Whether progress bars belong on ``stream``: a terminal that reports a width. Under a
    pipe or a log file a bar is only noise, and a terminal of zero columns (some IDE
    consoles, ``docker exec`` without a size) made tqdm emit a line per update."""
    try:
        if not stream.isatty():
            return False
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):
        return False


def _cmd_compare(args) -> int:
    # a user's engine given as module:function is found on the path or in the current
    # folder, which never comes before an installed package (runs/engines.py)
    progress = not args.no_progress and bars_fit(sys.stderr)
    try:  # bad arguments, data or folders end in one clear line, not a traceback
        if args.chains < 2:
            # certification rests on R-hat, which compares chains: one chain would sample
            # for minutes and then have nothing to certify with
            raise ValueError(f"--chains must be at least 2 (R-hat, which certifies the reference, compares "
                             f"chains); got {args.chains}")
        # a negative seed passed every check and failed in numpy minutes later
        check_seed(args.seed, "--seed")
        for flag, value in (("--warmup", args.warmup), ("--samples", args.samples)):
            if value is not None and value > 0:  # below 1: the reference settings' own line
                check_count(value, flag, CHAIN_DRAWS)
        # a user's model named by its path (module:attr, a Model) is imported as a user's engine
        # is, and joins the registry under its own name
        args.model = model_name(args.model)
        samplers = None if args.reference is None else tuple(
            s.strip() for s in args.reference.split(",") if s.strip())
        ref_cfg = default_references(
            args.model, samplers, num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples,
            target_accept=args.target_accept, seed=args.seed, time_limit=args.time_limit,
        )
        device = devices.choose(args.device)
        # every name before any work (compare() checks them again, after nothing costly);
        # a user's module:function is imported and its signature checked here, before the
        # values (an engine that cannot be found is the first thing to say)
        record = registry.get_model(args.model)
        engines = None if args.engines is None else tuple(e.strip() for e in args.engines.split(",") if e.strip())
        for name in engines or ():
            resolve_entry(record, name)
        config = CompareConfig(
            model=args.model, data=args.data, split=args.split, engines=engines,
            params=_parse_params(args.param), reference=ref_cfg, seed=args.seed,
            cache_dir=None if args.no_cache else args.cache_dir, evidence=args.evidence,
            engine_time_limit=args.engine_time_limit or None,
        )
        if not record.own_data:  # a user's model brings its own data
            datasets.load(config.data, config.split, standardize=False)
        reference_cache = [] if args.no_cache else [(args.cache_dir, "cache folder (--cache-dir, env ZOO_CACHE_DIR)")]
        read_only = reference_cache and os.path.isdir(args.cache_dir) and folder_problem(*reference_cache[0])
        if read_only:
            # an existing cache that cannot be written is still read (a shared, read-only
            # cache): its entries are used, a reference it lacks is sampled and not kept
            print(f"zoo compare: warning: {read_only}; its references are read, new ones are not kept", file=sys.stderr)
            reference_cache = []
        _start_compiling([(args.out, "--out"), *reference_cache])
        config = replace(config, device=devices.describe(device))
        comp = compare(config, progress=progress)
    except ValueError as err:
        print(f"zoo compare: error: {err}", file=sys.stderr)
        return 2
    files = write_report(comp, args.out)
    print(summary_table(comp.result))
    print(f"\nreport: {files['report']}")
    if args.export_reference:
        _export_reference(comp, args.export_reference)
    if comp.interrupted:
        # Ctrl-C while the engines ran: the report holds the rows that finished
        print("zoo compare: interrupted; the report holds the engines that finished, the others say they were "
              "not run", file=sys.stderr)
        return 130
    if comp.reference is None:
        # not an error: the report holds the engines' timings and test-set figures and says
        # why it holds nothing else
        print("zoo compare: warning: no reference: " + "; ".join(comp.result.reference.failures),
              file=sys.stderr)
    return 0


def _cmd_datasets(args) -> int:
    rows = datasets.describe()
    # the models that run a data set when `zoo compare --model NAME` names no --data: a fact
    # of their records, read here (the data layer cannot import the records)
    default_of: dict[str, list[str]] = {}
    for name in registry.model_names():
        default_of.setdefault(registry.get_model(name).default_data, []).append(name)
    defaults = {r["name"]: ", ".join(default_of.get(r["name"], ())) or "-" for r in rows}
    width = max(len("name"), *(len(r["name"]) for r in rows)) + 2  # the longest name sets the column
    models = max(len("default of"), *(len(d) for d in defaults.values())) + 2
    print(f"{'name':<{width}}{'train':>7}{'test':>7}{'dim':>5}{'splits':>8}  {'default of':<{models}}source")
    for r in rows:
        print(f"{r['name']:<{width}}{r['n_train']:>7}{r['n_test']:>7}{r['dim']:>5}{r['n_splits']:>8}  "
              f"{defaults[r['name']]:<{models}}{r['source']}")
    # models with data of their own (installed packages' entry points, zoo.models): no data set
    own = [registry.get_model(name) for name in registry.model_names() if registry.get_model(name).own_data]
    if own:
        print("\nmodels that bring their own data (zoo compare --model NAME):")
        for record in own:
            print(f"  {record.name}: {record.summary}")
    return 0


def _cmd_reproduce(args) -> int:
    entry = reproduce.get_entry(args.entry)
    options = {o.name: getattr(args, o.name) for o in entry.options}
    try:  # bad sizes or folders end in one clear line, not a traceback
        # the config checks --reps, --seed and the entry's options against what its protocol
        # takes (sizes its CV needs, splits its data have) when made: before any cell runs and
        # before the folders are checked (--jobs argparse has checked); the folders are only
        # written after the cells
        config = reproduce.ReproductionConfig(args.entry, reps=args.reps, seed=args.seed, options=options)
        device = devices.choose(args.device)
        jax_cache = _start_compiling([(args.out, "--out")])
        result = reproduce.run(config, out=args.out, jobs=args.jobs, jax_cache=jax_cache,
                               progress=not args.no_progress and bars_fit(sys.stderr), device=devices.describe(device))
    except ValueError as err:
        print(f"zoo reproduce {args.entry}: error: {err}", file=sys.stderr)
        return 2
    report = write_reproduction_report(result)
    with open(report, encoding="utf-8") as fh:
        print(fh.read())
    print(f"table: {report} and {os.path.join(result.folder, 'table.json')}")
    for cell, reason in result.failed:  # the run went on past them; its status says so at the end
        print(f"zoo reproduce {args.entry}: cell failed: {cell}: {reason}", file=sys.stderr)
    return 1 if result.failed else 0


def _non_negative_seconds(text: str) -> float:
    """A time limit in seconds from the command line: a finite number >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0 (0: no limit), got {text!r}")
    return value


def _export_reference(comp, folder: str) -> None:
    """zoo compare --export-reference: the certified reference in posteriordb's layout, named
    <model>-<data> (a user's model: its name); a line saying why not where it is not written."""
    res = comp.result
    name = res.model if not res.classifier else f"{res.model}-{res.data}-split{res.split}"
    if comp.reference is None or not comp.reference.certified:
        print("zoo compare: reference not exported: it is not certified", file=sys.stderr)
        return
    paths = write_posteriordb(comp.reference, folder, name)
    print(f"reference in posteriordb's layout: {paths['draws']}, {paths['info']}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _cmd_sbc(args) -> int:
    # a user's engine given as module:function is found on the path or in the current
    # folder, which never comes before an installed package (runs/engines.py)
    try:
        # a user's model named by its path (module:attr) is imported as a user's engine is
        args.model = model_name(args.model)
        record = registry.get_model(args.model)
        if record.own_data and (args.n is not None or args.n_basis is not None or args.conditional):
            raise ValueError(f"model {args.model} is simulated on its own data: --n, --n-basis and --conditional "
                             "are for the zoo's classifiers")
        names = [e.strip() for e in args.engine.split(",") if e.strip()]
        if names == ["all"]:
            names = sbc_names(record)
        if not names:
            raise ValueError("--engine names no engine")
        # counts past any real run's (sims = 10^17 started running) and a seed numpy refuses
        # (--seed -1 failed after the first simulations), before any work
        check_seed(args.seed, "--seed")
        check_count(args.sims, "--sims", SIMULATIONS)
        check_count(args.draws, "--draws", DRAWS, over=(args.sims, "simulations"))
        args.n = DEFAULT_DESIGN_POINTS if args.n is None else args.n
        check_count(args.n, "--n", DESIGN_POINTS)
        if args.n_basis is not None:
            check_count(args.n_basis, "--n-basis", BASIS_FUNCTIONS)
        if args.new_data is not None:
            check_count(args.new_data, "--new-data", DESIGN_POINTS)
        settings = SBCSettings(n_sims=args.sims, n_draws=args.draws, seed=args.seed)
        # every name before the first engine runs: a typo in the last one must not wait
        # for the others' simulations
        resolved = [resolve_engine(record, name, settings) for name in names]
        # engines' fit.many batches are not measured on an accelerator: only NUTS's are
        device = devices.choose(args.device, batched=all(r.accelerator_pays for r in resolved))
        _start_compiling([(args.out, "--out")])
    except ValueError as err:
        print(f"zoo sbc: error: {err}", file=sys.stderr)
        return 2
    device_line = devices.describe(device)
    print(f"device: {device_line}", file=sys.stderr)
    problem = {} if record.own_data else {"n": args.n, "n_basis": args.n_basis}
    rows = []
    for name in names:
        folder = os.path.join(args.out, args.model, name.replace(":", "_").replace("/", "_"))
        show = not args.no_progress and bars_fit(sys.stderr)

        def progress(done, total, _name=name):
            print(f"\r{_name}: {done}/{total} simulations", end="", file=sys.stderr, flush=True)
        try:
            if args.conditional:
                summary = posterior_sbc.run_posterior_sbc(
                    posterior_sbc.PosteriorSBCConfig(args.model, name, settings=settings, n_new_data=args.new_data,
                                                     engine_time_limit=args.engine_time_limit or None),
                    out_dir=folder, cache_dir=args.cache_dir, progress=progress if show else None)
            else:
                summary = run_sbc(SBCConfig(args.model, name, settings=settings, problem=problem,
                                            engine_time_limit=args.engine_time_limit or None),
                                  out_dir=folder, progress=progress if show else None)
        except ValueError as err:
            print(f"zoo sbc: error: {err}", file=sys.stderr)
            return 2
        if show:
            print(file=sys.stderr)
        write_json_atomic(summary.to_json(), os.path.join(folder, "sbc.json"))
        figure = plot_sbc(summary, os.path.join(folder, "sbc.png"))
        views = plot_sbc_views(summary, os.path.join(folder, "sbc-views.png"))
        print(sbc_summary_line(summary))
        rows.append((name, summary, figure, views))
    # what the ranked quantities are, once for all engines (the same names, or a variant's)
    glossary = sbc_glossary(summary for _, summary, _, _ in rows)
    if glossary:
        print("\nranked quantities:")
        for pattern, meaning in glossary.items():
            print(f"  {pattern}: {meaning}")
    design = sbc_design_words([summary for _, summary, _, _ in rows], conditional=args.conditional, n=args.n,
                              n_basis=args.n_basis)
    report = write_sbc_report(rows, args.out, args.model, n_sims=args.sims, n_draws=args.draws, design=design,
                              device_line=device_line, conditional=args.conditional)
    print(f"\nreport: {report}")
    return 0


def _add_device_argument(p, auto: str) -> None:
    p.add_argument("--device", default="auto", choices=devices.DEVICES,
                   help=f"where JAX computes (default auto: {auto}; cpu hides an accelerator; accelerator "
                        "leaves JAX's own choice). The report says which was used and why")


def _add_sbc_parser(sub, records) -> None:
    p = sub.add_parser(
        "sbc",
        help="simulation-based calibration of engines (or your own fit function) on a model's prior",
        description="Draws parameters and labels from the model's prior, fits the engine to each "
        "simulated data set and ranks the true values among its posterior draws; uniform ranks mean a "
        "calibrated engine. Finished simulations are kept in OUT, so a rerun resumes.",
    )
    p.add_argument("--model", default=registry.DEFAULT_MODEL,
                   help="model name: " + ", ".join(r.name for r in records)
                   + "; or your own NumPyro model as module:attr, a zoo.validation.records.user_model.Model "
                     "(simulated on its own data: its observed sites drawn from its prior predictive)")
    p.add_argument("--engine", default="all", metavar="NAMES",
                   help="comma-separated: the model's engines, its reference samplers (nuts, ...; "
                        "sampler@variant on a model variant, e.g. grid-gibbs@s-grid), or "
                        "module:function of your own with the contract fit(spec, Phi, y, *, config=None); "
                        "an engine with '+psis' appended is its importance-corrected form "
                        "(default: all engines and samplers of the model). Engines: "
                        + "; ".join(f"{r.name} {', '.join(r.engine_names + r.sampler_names)}" for r in records))
    p.add_argument("--sims", type=_positive_int, default=100, help="simulations (default 100)")
    p.add_argument("--draws", type=_positive_int, default=99, help="posterior draws ranked per simulation (default 99)")
    p.add_argument("--n", type=_positive_int, default=None,
                   help=f"training points of the design (default {DEFAULT_DESIGN_POINTS})")
    p.add_argument("--n-basis", type=_positive_int, default=None,
                   help="RBF features of the design (default 6, or the model's own number of weights where its "
                        "spec fixes one: grid-rvm's 4 x 3 table)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="zoo-sbc", help="output folder (default ./zoo-sbc)")
    p.add_argument("--conditional", action="store_true",
                   help="posterior SBC: truths drawn from the certified reference posterior of the model's default "
                        "case (zoo compare's), new labels simulated from them and fitted together with the observed "
                        "ones - calibration near the data a user has, not over the whole prior (--n and --n-basis "
                        "do not apply)")
    p.add_argument("--engine-time-limit", type=_non_negative_seconds, default=DEFAULT_ENGINE_TIME_LIMIT,
                   metavar="SECONDS",
                   help=f"the most seconds one simulation's fit may take (default {DEFAULT_ENGINE_TIME_LIMIT:g}; 0: no "
                        "limit); a fit past it fails its simulation with that reason")
    p.add_argument("--new-data", type=_positive_int, default=None,
                   help="with --conditional: new labels per simulation (default: as many as the observed ones)")
    p.add_argument("--cache-dir", default=_default_cache_dir(),
                   help="with --conditional: where the default case's reference run is kept (as zoo compare's)")
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    _add_device_argument(p, "an accelerator when every engine runs its simulations as one program (nuts), "
                            "else the CPU")
    p.set_defaults(func=_cmd_sbc)


def _cmd_study(args) -> int:
    # user engines given as module:function: found as `zoo compare` finds them (expand
    # imports them here, before the workers start: they inherit the path it leaves)
    try:
        config = load_config(args.config)
        expand(config)  # every name checked before a cluster starts
        device = devices.choose(args.device)
        jax_cache = _start_compiling([(args.out, "--out")])
    except ValueError as err:
        print(f"zoo study: error: {err}", file=sys.stderr)
        return 2
    out = run_study(config, args.out, scheduler=args.scheduler, n_workers=args.workers,
                    progress=not args.no_progress, jax_cache=jax_cache,
                    device=f"{device['wanted']} ({device['why']})",
                    engine_time_limit=args.engine_time_limit or None)
    report = report_study(out)
    print(f"{out.ran} cells run, {out.reused} already done; report: {report}")
    for label, reason in out.failed:
        print(f"zoo study: cell failed: {label}: {reason}", file=sys.stderr)
    # the finished cells and the report stand; the status says that not every cell did
    return 1 if out.failed else 0


def _add_study_parser(sub) -> None:
    p = sub.add_parser(
        "study",
        help="run a study (a grid of comparisons, SBC runs and defect batteries) on Dask",
        description="CONFIG is a TOML file, or the name of a shipped study (example). Cells run on a Dask "
        "LocalCluster of this machine, or on an existing cluster with --scheduler; each finished cell is kept "
        "in OUT/cells/, so the same command resumes a killed study without redoing any cell. The LocalCluster's "
        "workers stop with this command (Ctrl-C, SIGTERM and kill -9 alike).",
    )
    p.add_argument("config", help="study TOML file, or 'example'")
    p.add_argument("--out", default="zoo-study", help="output folder (default ./zoo-study)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a LocalCluster)")
    p.add_argument("--workers", type=_positive_int, default=None,
                   help="LocalCluster worker processes (default: the number of cores)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.add_argument("--engine-time-limit", type=_non_negative_seconds, default=DEFAULT_ENGINE_TIME_LIMIT,
                   metavar="SECONDS",
                   help=f"the most seconds one fit of an engine may take in any cell - a comparison's, an SBC "
                        f"simulation's, a defect battery's (default {DEFAULT_ENGINE_TIME_LIMIT:g}; 0: no limit)")
    _add_device_argument(p, "the CPU, for this process and the LocalCluster's workers; the workers of a "
                            "--scheduler keep their own")
    p.set_defaults(func=_cmd_study)


def _add_reproduce_parser(sub) -> None:
    r = sub.add_parser(
        "reproduce",
        help="rerun a paper's experiment; write our numbers beside the paper's",
        description="Each entry NAME writes OUT/NAME/table.md and table.json (our numbers beside the "
        "paper's, marked reproduced / NOT reproduced with the criterion) and keeps its finished fits in "
        "OUT/NAME/cells/, so an interrupted run resumes. With --jobs above 1 the cells run on a Dask "
        "LocalCluster (as `zoo study`'s), whose workers stop with this command (Ctrl-C, SIGTERM and kill -9 "
        "alike). `zoo reproduce NAME --help` shows the entry's size options and defaults.",
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
        p.add_argument("--jobs", type=_positive_int, default=2,
                       help="worker processes of a Dask LocalCluster; 1: all in this process (default 2)")
        p.add_argument("--seed", type=int, default=0,
                       help="seed of every random choice of the run: CV folds, noise, solvers (default 0)")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        _add_device_argument(p, "the CPU, for this process and the LocalCluster's workers")
        for o in e.options:
            p.add_argument("--" + o.name.replace("_", "-"), dest=o.name, default=o.default,
                           help=f"{o.help} (default {o.default})".replace("%", "%%"))
        p.set_defaults(func=_cmd_reproduce)


def _reference_defaults_text(records, setting: str) -> str:
    """"(default N; model: sampler M, ...)" for one ReferenceConfig setting, read from the
    records' reference chains, so the help never disagrees with what runs."""

    base = getattr(ReferenceConfig(), setting)
    special = [f"{r.name}: " + ", ".join(f"{d.get('sampler', 'nuts')} {d[setting]:g}" for d in r.references
                                         if setting in d)
               for r in records if any(setting in d for d in r.references)]
    return f"(default {base:g}" + ("; " + "; ".join(special) if special else "") + ")"


def build_parser() -> argparse.ArgumentParser:
    """The ``zoo`` argument parser: one sub-command each for compare, sbc, study, datasets,
    reproduce and cache, whose help texts list the registered models, engines and defaults.
    Each sub-command stores the function that runs it as ``func``."""
    parser = argparse.ArgumentParser(prog="zoo", description="Sparse Bayesian classifier zoo")
    sub = parser.add_subparsers(dest="command", required=True)


    records = [registry.get_model(name) for name in registry.model_names()]
    c = sub.add_parser(
        "compare",
        help="fit engines and a reference sampler on one frozen spec and data; write a report",
        description="Hyper-parameters are frozen once ("
        + "; ".join(f"{r.name}: {r.selection}" for r in records)
        + "); the reference sampler and every engine then approximate the same posterior.",
    )
    c.add_argument("--model", default=registry.DEFAULT_MODEL,
                   help="model name: " + ", ".join(r.name + (" (default)" if r.name == registry.DEFAULT_MODEL else "")
                                                   for r in records)
                   + "; or your own NumPyro model as module:attr, a zoo.validation.records.user_model.Model "
                     "(its function and data), imported as your engines are")
    c.add_argument("--data", default=None,
                   help="data set name, see `zoo datasets` (default: "
                        + ", ".join(f"{r.default_data} for {r.name}" for r in records) + ")")
    c.add_argument("--split", type=int, default=0, help="k-th seeded train/test split (ripley has one)")
    c.add_argument("--engines", default=None,
                   help="comma-separated engines (default: "
                        + "; ".join(f"{','.join(r.default_engines)} for {r.name}" for r in records)
                        + "). All engines: "
                        + "; ".join(f"{r.name} {', '.join(r.engine_names)}" for r in records)
                        + ". Your own: module:function with fit(spec, Phi, y, *, config=None) -> Posterior, "
                          "found on the Python path or in the current folder (e.g. examples.biased_ep:fit). "
                          "Any of these "
                          "with '+psis' appended (ep+psis, advi-meanfield+psis): its draws importance-resampled "
                          "against the model's density, trusted where k-hat <= min(1 - 1/log10 S, 0.7), S the "
                          "weighted draws")
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
    c.add_argument("--engine-time-limit", type=_non_negative_seconds, default=DEFAULT_ENGINE_TIME_LIMIT,
                   metavar="SECONDS",
                   help=f"the most seconds one call of an engine's fit may take (default "
                        f"{DEFAULT_ENGINE_TIME_LIMIT:g}; 0: no limit); an engine past it is stopped and its row says "
                        "so, the others go on (your module:function engine runs in a process of its own, killed "
                        "at the limit; the zoo's engines are stopped the next time they run Python code)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--evidence", default="bridge", choices=EVIDENCE_MODES,
                   help="judge the log evidence (or ELBO) engines report against the model's reference log Z: "
                        "bridge (default) from the reference's draws by bridge sampling, under a second on most "
                        "models; checked also runs annealed importance sampling and judges only where the two "
                        "agree (10 s to 20 min more); off skips it")
    c.add_argument("--out", default="zoo-report", help="output folder (default ./zoo-report)")
    c.add_argument("--export-reference", default=None, metavar="FOLDER",
                   help="also write the certified reference in posteriordb's layout: FOLDER/draws/<model>-<data>"
                        ".json.zip and FOLDER/info/<model>-<data>.info.json (its certificate, sampler, settings, "
                        "seed, package versions); an uncertified reference is not written")
    c.add_argument("--cache-dir", default=_default_cache_dir(),
                   help="where reference draws are cached (default: env ZOO_CACHE_DIR, else "
                        "~/.cache/sparse-bayes-zoo; `zoo cache --clear` empties it)")
    c.add_argument("--no-cache", action="store_true", help="always rerun the reference sampler")
    c.add_argument("--no-progress", action="store_true", help="no progress bars")
    _add_device_argument(c, "the CPU: the posteriors are small and their loops latency-bound")
    c.set_defaults(func=_cmd_compare)

    d = sub.add_parser("datasets", help="list the embedded data sets")
    d.set_defaults(func=_cmd_datasets)

    k = sub.add_parser(
        "cache", help="show where the caches are and how big; --clear deletes them",
        description="The zoo caches certified reference draws (zoo compare) and JAX's compiled programs, both "
        "in one folder: env ZOO_CACHE_DIR, else ~/.cache/sparse-bayes-zoo (the programs in its jax/<jax version>/ "
        "folder, or in env ZOO_JAX_CACHE). Entries are re-used only when their content key matches, so deleting them is "
        "always safe: the next run recomputes what it needs. --clear deletes only what the zoo can prove it wrote "
        "(entries signed with your key, its own lock files, JAX's files in its folder) and says what it kept "
        "and why; a running command's entry is kept.")
    k.add_argument("--cache-dir", default=None, help="the cache folder (default: as zoo compare's --cache-dir)")
    k.add_argument("--clear", action="store_true", help="delete the cached references and compiled programs")
    k.set_defaults(func=_cmd_cache)

    _add_sbc_parser(sub, records)
    _add_study_parser(sub)
    _add_reproduce_parser(sub)
    return parser


def _printable_console() -> None:
    """Any locale: where stdout or stderr is not UTF-8 (``LC_ALL=C`` with Python's UTF-8
    mode off gives ASCII), what it cannot encode is printed as a backslash escape rather
    than raising UnicodeEncodeError; child processes (a study's workers) do the same."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            utf = codecs.lookup(encoding).name.startswith("utf")
        except LookupError:
            utf = False
        # "strict", or "surrogateescape" as Python sets it in the C locale: both raise
        keeps_going = getattr(stream, "errors", None) in ("backslashreplace", "replace", "namereplace",
                                                          "xmlcharrefreplace", "ignore")
        if not utf and not keeps_going and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
            os.environ.setdefault("PYTHONIOENCODING", ":backslashreplace")


def _zoo_folders() -> tuple[str, ...]:
    """The folders the zoo's code lives in (one in an installed wheel; several in an
    editable install, whose sub-packages keep the repository's layout)."""
    import importlib  # only to name the folders of the zoo's own sub-packages

    names = ("zoo", "zoo.validation", "zoo.inference", "zoo.models", "zoo.reproductions", "zoo.data")
    return tuple(os.path.dirname(os.path.abspath(importlib.import_module(n).__file__)) + os.sep for n in names)


def _one_line_warnings() -> None:
    """The zoo's own warnings (a UserWarning raised in its code: an untrusted stored file, a
    held lock, earlier outputs left in a folder) as one line, ``zoo CMD: warning: ...``, as
    its errors are; a library's warnings keep Python's format, file and line."""
    default, folders = warnings.formatwarning, _zoo_folders()

    def formatwarning(message, category, filename, lineno, line=None):
        if issubclass(category, UserWarning) and os.path.abspath(filename).startswith(folders):
            return f"{_command}: warning: {' '.join(str(message).split())}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning


def main(argv: list[str] | None = None) -> int:
    """Run the ``zoo`` command ``argv`` (default: ``sys.argv[1:]``) and return its exit status: 0
    on success; 1 when part of the work failed (cells of a study or a reproduction, cache entries
    that could not be deleted); 2 for a bad name, number or folder (one line on stderr; argparse's
    own errors exit with 2 as well); 130 on Ctrl-C. The console script ``zoo`` calls it."""
    global _command
    _printable_console()  # before argparse, whose help and errors print too
    args = build_parser().parse_args(argv)
    _command = f"zoo {args.command}"
    _one_line_warnings()
    # each computing command checks and switches on the JAX compilation cache itself
    # (_start_compiling), after its own arguments: `zoo datasets` and `zoo cache` read
    # nothing from it and must work when the cache folder is broken
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Ctrl-C: one line (after a line break where a progress bar may be unfinished) and
        # the shell's status for SIGINT, 128 + 2. Every finished unit of work is already on
        # disk (written atomically); the worker clusters killed their workers on the way out
        print(f"{chr(10) if bars_fit(sys.stderr) else ''}zoo {args.command}: interrupted; {_kept(args)}",
              file=sys.stderr, flush=True)
        return 130


def _kept(args) -> str:
    """What an interrupted command leaves behind, and how to resume."""
    if args.command == "reproduce":
        return (f"finished cells are kept in {os.path.join(args.out, args.entry, 'cells')}; "
                "the same command resumes from them")
    if args.command == "study":
        return f"finished cells are kept in {os.path.join(args.out, 'cells')}; the same command resumes from them"
    if args.command == "sbc":
        return f"finished simulations are kept under {args.out}; the same command resumes from them"
    if args.command == "compare" and not args.no_cache:
        return f"a reference run that finished is kept in {args.cache_dir}, so a rerun skips it"
    return "nothing was written"


#: names of the reference cache's entries (validation/references/cache.py, _cache_paths) and
#: of JAX's compiled programs: what `zoo cache` counts; `zoo cache --clear` deletes of these
#: only what it can prove the zoo wrote (reference_cache.clear_cache)
_REFERENCE_ENTRY = reference_cache.ENTRY_NAME
_JAX_ENTRY = reference_cache.JAX_NAME


def _cache_entries(folder: str, pattern) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if pattern.search(f) and os.path.isfile(os.path.join(folder, f)))


def _cmd_cache(args) -> int:
    folder = args.cache_dir or zoo.cache_dir()
    jax_dir = zoo.jax_cache_dir(args.cache_dir)
    jax_folders = reference_cache.jax_cache_folders(folder, jax_dir)  # every JAX release's, and jax/ itself
    groups = [("reference draws", folder, _cache_entries(folder, _REFERENCE_ENTRY)),
              ("JAX compiled programs", jax_folders[-1], [f for d in jax_folders for f in _cache_entries(d, _JAX_ENTRY)])]
    for label, where, files in groups:
        size = sum(os.path.getsize(f) for f in files)
        print(f"{label}: {where} ({len(files)} files, {size / 1e6:.1f} MB)")
    if not args.clear:
        print("clear with: zoo cache --clear (always safe: entries are recomputed when needed; it deletes only "
              "entries signed with your key and JAX's own files, and says what it keeps)")
        return 0
    report = reference_cache.clear_cache(folder, jax_dir)
    print(f"deleted {report.deleted} files ({report.deleted_bytes / 1e6:.1f} MB)")
    for line in report.lines():
        print(line)
    for error in report.errors:
        print(f"zoo cache: error: cannot delete {error}", file=sys.stderr)
    return 1 if report.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
