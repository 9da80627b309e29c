"""The documents say what the registry says: every place README.md, docs/*.md and the data
catalog state a per-model fact - the models, the default model, each model's engines,
default engines, default data, reference chain and samplers, raw inputs, the classifier's
engines, the planted defects of a model's own engines - is read here and held to the
records (``zoo.validation.records.registry``), exactly.

Each checker is a function of a document's text (and its name, for the message) that reads
the registry itself and returns one line per fact that differs - ``DOC:LINE: what: the
document says X; the registry says Y`` - or that it cannot find where the document states
it (a passage that was rewritten must be rewritten here too, not silently skipped). Each is
shown to catch a planted change: a copy of the document with one fact changed must yield
exactly one line, naming that fact. Nothing here compiles anything: reading the registry and
the catalog's table is all.

What is checked, and where:

* README.md, "Models and engines": the table's models (in registry order, each linking its
  page), each row's engines (every engine but the ADVI and Pathfinder ones every model
  has), default data and reference chain; the sentence naming the generic engines every
  model has; the main job ("`zoo compare` without options runs ..."): the default model,
  its default data and default engines; "What `zoo compare` does" step 1: the models that
  take their inputs raw; the count and list of models in the first line; the lists of model
  pages (here and in docs/README.md).
* docs/<model page>.md: the opening's engines and every "reference chain is ..." sentence,
  "`--reference ...` is the default", the "**The default case.**" paragraph's data set.
* every document: `zoo compare` and `zoo sbc` command lines (models, engines, data sets,
  ``--param`` names and values, samplers; a comment that names engines or a data set for a
  command without ``--engines`` / ``--data`` names the defaults), ``SparseBayesClassifier(
  model=..., engine=...)`` and the engine list after it, "No ... is in a model's default
  engines".
* docs/generic-methods.md: the table of generic engines. docs/validation.md: the generic
  methods' paragraph, the SBC tables of "every engine of every model" and of the reference
  samplers, the defect battery's table and its count of the engines' own defects.
* data/catalog.py: its prose names no model's default (the data layer cannot know it; `zoo
  datasets` would compute it from the registry in the zoo layer).
"""
from __future__ import annotations

import re
import shlex

import pytest

from repository import REPO
from zoo.classifier import classifier_engines, classifier_models
from zoo.data import catalog
from zoo.validation.records import registry

_TICKS = re.compile(r"`([^`\n]+)`")
# an engine's, a model's or a data set's name as the documents write it in backticks
_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*$")
# an engine's name: no underscores (those are data sets' and code's)
_ENGINE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")
_NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


# --- the registry's facts ------------------------------------------------------------

def _record(model):
    return registry.get_model(model)


def _chain(model) -> list[str]:
    return [r.get("sampler", "nuts") for r in _record(model).references]


def _common_generic() -> list[str]:
    """The generic engines every model has, in the first model's order."""
    records = [_record(m) for m in registry.model_names()]
    shared = set.intersection(*({e.name for e in r.engines if e.generic} for r in records))
    return [e.name for e in records[0].engines if e.name in shared]


def _listed_engines(model) -> list[str]:
    """The engines a model's row and page list: all but the ADVI and Pathfinder engines every
    model has (those are named once, for all)."""
    apart = {e for e in _common_generic() if e.startswith(("advi-", "pathfinder"))}
    return [e for e in _record(model).engine_names if e not in apart]


# --- reading the documents -------------------------------------------------------------

def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _said(doc, text, pos, what, said, truth) -> str:
    def shown(v):
        return ", ".join(v) if isinstance(v, (list, tuple)) else str(v)
    return f"{doc}:{_line(text, pos)}: {what}: the document says {shown(said) or '(nothing)'}; " \
           f"the registry says {shown(truth) or '(nothing)'}"


def _names(span: str, pattern: re.Pattern = _NAME) -> list[str]:
    """The backticked names in a span (not paths, commands or code)."""
    return [t for t in _TICKS.findall(span) if pattern.match(t)]


def _find(text: str, anchor: str | re.Pattern):
    if isinstance(anchor, str):
        pos = text.find(anchor)
        return (pos, pos + len(anchor)) if pos >= 0 else None
    m = anchor.search(text)
    return (m.start(), m.end()) if m else None


def _span(text: str, anchor, stop: str) -> tuple[int, str] | None:
    """(where, the text from ``anchor`` to the regex ``stop``), or None where either is missing."""
    found = _find(text, anchor)
    if found is None:
        return None
    m = re.compile(stop).search(text, found[1])
    return (found[0], text[found[0]: m.start()]) if m else None


def _missing(doc, what) -> str:
    return f"{doc}: {what} not found: the passage was rewritten - update the checker in " \
           f"tests/project/test_docs_match_registry.py with it"


def _table(text: str, start: int) -> list[tuple[int, list[str]]]:
    """The first markdown table at or after ``start``: (offset, cells) per row, header first."""
    rows, pos = [], text.find("\n|", start - 1 if start else 0)
    if pos < 0:
        return rows
    pos += 1
    while pos < len(text) and text.startswith("|", pos):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        if not re.match(r"^\|[\s|:-]+\|$", line):
            rows.append((pos, [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]))
        pos = end + 1
    return rows


def _without_brackets(cell: str) -> str:
    """A cell with its parenthetical remarks (nested ones too) and bold marks taken out."""
    cell = cell.replace("**", "")
    while True:
        shorter = re.sub(r"\([^()]*\)", "", cell)
        if shorter == cell:
            return shorter
        cell = shorter


def _samplers(words: str) -> list[str]:
    """A chain as prose writes it ("slice-Gibbs, then NUTS", "NUTS and parallel tempering")
    as sampler names (lower case, spaces as hyphens)."""
    words = _without_brackets(words).replace("`", "")
    parts = re.split(r",\s*then\s+|\s*,\s*|\s+then\s+|\s+and\s+", words.strip())
    return [re.sub(r"\s+", "-", p.strip().lower()) for p in parts if p.strip()]


def _compare(doc, text, pos, what, said, truth, *, ordered=True) -> list[str]:
    same = list(said) == list(truth) if ordered else sorted(set(said)) == sorted(set(truth)) \
        and len(said) == len(set(said))
    return [] if same else [_said(doc, text, pos, what, said, truth)]


# --- README.md ---------------------------------------------------------------------------

def models_table(text: str, doc: str = "README.md") -> tuple[list[str], dict[str, str]]:
    """The table of models and engines: (problems, model -> the page its row links)."""
    found = _find(text, "## Models and engines")
    if found is None:
        return [_missing(doc, "the heading '## Models and engines'")], {}
    rows = _table(text, found[1])
    if not rows:
        return [_missing(doc, "the table of models and engines")], {}
    (head_pos, header), body = rows[0], rows[1:]
    columns = {name: header.index(name) for name in ("model", "engines", "default data", "reference chain")
               if name in header}
    problems = [_said(doc, text, head_pos, "the table's columns", header,
                      ["model", "...", "engines", "default data", "reference chain", "..."])] \
        if len(columns) < 4 else []
    if problems:
        return problems, {}
    pages, listed = {}, []
    for pos, cells in body:
        names = _names(cells[columns["model"]])
        model = names[0] if names else cells[columns["model"]]
        listed.append(model)
        link = _LINK.search(cells[columns["model"]])
        if link:
            pages[model] = link.group(1)
        if model not in registry.model_names():
            continue
        problems += _compare(doc, text, pos, f"{model} engines", _names(cells[columns["engines"]]),
                             _listed_engines(model), ordered=False)
        problems += _compare(doc, text, pos, f"{model} default data", _names(cells[columns["default data"]]),
                             [_record(model).default_data])
        problems += _compare(doc, text, pos, f"{model} reference chain", _samplers(cells[columns["reference chain"]]),
                             _chain(model))
    problems += _compare(doc, text, body[0][0] if body else head_pos, "the models of the table", listed,
                         registry.model_names())
    missing_pages = [m for m in listed if m in registry.model_names() and m not in pages]
    if missing_pages:
        problems.append(f"{doc}: the table's rows of {', '.join(missing_pages)} link no page")
    return problems, pages


def generic_engines(text: str, doc: str, anchor: str, stop: str) -> list[str]:
    """A list of the generic engines every model has (a sentence, a table, a paragraph)."""
    span = _span(text, anchor, stop)
    if span is None:
        return [_missing(doc, f"the list of generic engines at {anchor!r}")]
    pos, words = span
    return _compare(doc, text, pos, "the generic engines every model has", _names(words, _ENGINE), _common_generic(),
                    ordered=False)


def generic_engine_table(text: str, doc: str, anchor: str) -> list[str]:
    """A table of the generic engines every model has: its ``engine`` column."""
    found = _find(text, anchor)
    rows = _table(text, found[1]) if found else []
    if not rows or "engine" not in rows[0][1]:
        return [_missing(doc, f"the table of generic engines after {anchor!r}")]
    column = rows[0][1].index("engine")
    names = [n for _, cells in rows[1:] for n in _names(cells[column], _ENGINE)]
    return _compare(doc, text, rows[0][0], "the generic engines every model has", names, _common_generic(),
                    ordered=False)


def default_runs(text: str, doc: str) -> list[str]:
    """Every "`zoo compare` without options runs ...": the default model, and, where named,
    its default data and default engines (up to the end of the clause)."""
    problems = []
    for m in re.finditer(r"`zoo compare` without options runs", text):
        stop = re.compile(r";|\.\s|\.$").search(text, m.end())
        words = _names(text[m.end(): stop.start() if stop else len(text)])
        models = [w for w in words if w in registry.model_names()]
        problems += _compare(doc, text, m.start(), "the default model", models, [registry.DEFAULT_MODEL])
        record = _record(registry.DEFAULT_MODEL)
        data = [w for w in words if w in catalog.names()]
        if data:
            problems += _compare(doc, text, m.start(), "the default model's default data", data,
                                 [record.default_data])
        engines = [w for w in words if w not in models and w not in data]
        if engines:
            problems += _compare(doc, text, m.start(), "the default model's default engines", engines,
                                 record.default_engines)
    return problems


def raw_inputs(text: str, doc: str = "README.md") -> list[str]:
    """The models whose inputs `zoo compare` does not standardize."""
    span = _span(text, "except for the models whose record takes them raw:", r"\.\s")
    if span is None:
        return [_missing(doc, "the sentence on raw inputs ('except for the models whose record takes them raw:')")]
    pos, words = span
    return _compare(doc, text, pos, "the models that take their inputs raw", _names(words),
                    [m for m in registry.model_names() if _record(m).raw_inputs])


def model_count(text: str, doc: str = "README.md") -> list[str]:
    """The first line's "Five sparse Bayesian binary classifiers - A, B, ... and E - "."""
    m = re.search(r"(\w+) sparse Bayesian binary classifiers - (.+?) - ", text, re.DOTALL)
    if m is None:
        return [_missing(doc, "the first line's count of models")]
    items = [i for i in re.split(r",\s*|\s+and\s+", m.group(2)) if i.strip()]
    said = _NUMBERS.get(m.group(1).lower(), m.group(1))
    problems = _compare(doc, text, m.start(), "the number of models", [str(said)], [str(len(registry.model_names()))])
    return problems + _compare(doc, text, m.start(), "the number of models listed", [str(len(items))],
                               [str(len(registry.model_names()))])


def page_lists(text: str, doc: str, pages: list[str], anchors: list[tuple[str, str]]) -> list[str]:
    """Lists of the models' pages (``pages``, in registry order, as file names): each span
    from anchor to stop links exactly those, in that order."""
    problems = []
    for anchor, stop in anchors:
        span = _span(text, anchor, stop)
        if span is None:
            problems.append(_missing(doc, f"the list of model pages at {anchor!r}"))
            continue
        pos, words = span
        linked = [link.rsplit("/", 1)[-1] for link in _LINK.findall(words)]
        problems += _compare(doc, text, pos, "the model pages", linked, pages)
    return problems


# --- a model's page ----------------------------------------------------------------------

def model_page(text: str, doc: str, model: str) -> list[str]:
    """The opening's engines; every "reference chain is ..." and "`--reference ...` is the
    default"; the data set of "**The default case.**"."""
    problems = []
    span = _span(text, re.compile(r"\bEngines "), r"\(\[models and engines\]")
    if span is None:
        problems.append(_missing(doc, "the opening's 'Engines ... ([models and engines](...))'"))
    else:
        problems += _compare(doc, text, span[0], f"{model} engines", _names(span[1]), _listed_engines(model),
                             ordered=False)
    chains = list(re.finditer(r"reference chain is (?:therefore )?([^.:;(]+)", text))
    if not chains:
        problems.append(_missing(doc, "a sentence 'the reference chain is ...'"))
    for m in chains:
        problems += _compare(doc, text, m.start(), f"{model} reference chain", _samplers(m.group(1)), _chain(model))
    for m in re.finditer(r"`--reference ([^`\s]+)` is the default", text):
        problems += _compare(doc, text, m.start(), f"{model} reference chain", m.group(1).split(","), _chain(model))
    for m in re.finditer(r"\*\*The default case\.\*\*", text):
        stop = text.find("\n\n", m.end())
        data = [w for w in _names(text[m.end(): stop if stop >= 0 else len(text)]) if w in catalog.names()]
        problems += _compare(doc, text, m.start(), f"{model} default data", data, [_record(model).default_data])
    return problems


# --- every document ----------------------------------------------------------------------

def _commands(text: str):
    """(offset, command, comment) of every `zoo compare` / `zoo sbc` in a fenced code block
    (continued lines joined) or an inline code span."""
    for block in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        offset, pending, start = block.start(1), "", None
        for line in block.group(1).splitlines(keepends=True):
            start = offset if start is None else start
            offset += len(line)
            line = line.rstrip("\n")
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            full, pos, pending, start = pending + line, start, "", None
            head, _, comment = full.partition(" #")
            found = re.search(r"\bzoo (compare|sbc)\b", head)
            if found:
                yield pos, head[found.start():].strip(), comment.strip(" #")
    for m in _TICKS.finditer(text):
        if re.match(r"zoo (compare|sbc)\b", m.group(1)):
            yield m.start(), m.group(1), ""


def _options(words: list[str]) -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    for i, word in enumerate(words):
        if word.startswith("--"):
            name, _, value = word.partition("=")
            if not value and i + 1 < len(words) and not words[i + 1].startswith("--"):
                value = words[i + 1]
            options.setdefault(name, []).append(value)
    return options


def commands(text: str, doc: str) -> list[str]:
    """Every `zoo compare` and `zoo sbc` command: its model, engines, data set, ``--param``
    names and values and reference samplers exist; a comment naming engines (``engines
    a,b``) or a data set on a command without ``--engines`` / ``--data`` names the model's
    defaults."""
    problems = []
    for pos, command, comment in _commands(text):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        options = _options(words)

        def given(name):
            # placeholders (<model>, NAME, [--param ...]) are not values
            values = [v for v in options.get(name, []) if v and not re.search(r"[<\[|]", v)
                      and not re.fullmatch(r"[A-Z_]+", v)]
            return values[-1] if values else None

        model = given("--model") or registry.DEFAULT_MODEL
        if ":" in model:
            # a user's model by its path (module:attr): the registry knows it only once imported;
            # its import and checks are tests/front_end/test_cli.py's and docs/your-model.md's
            continue
        if model not in registry.model_names():
            problems.append(_said(doc, text, pos, f"`{command}`: the model", model, registry.model_names()))
            continue
        record = _record(model)
        engines = given("--engines") or given("--engine")
        for engine in (engines or "").split(","):
            if engine and engine != "all" and ":" not in engine and not record.has_engine(engine):
                problems.append(_said(doc, text, pos, f"`{command}`: {model} engine", engine, record.engine_names))
        data = given("--data")
        if data and data not in catalog.names():
            problems.append(_said(doc, text, pos, f"`{command}`: the data set", data, "one of zoo datasets"))
        params = {}
        for value in options.get("--param", []):
            name, _, number = value.partition("=")
            if re.search(r"[<\[\]]", value):
                continue
            try:
                params[name] = float(number)
            except ValueError:
                params[name] = number
        try:
            record.check_params(params)
        except ValueError as err:
            problems.append(f"{doc}:{_line(text, pos)}: `{command}`: {err}")
        for sampler in (given("--reference") or "").split(","):
            if sampler and sampler not in record.sampler_names:
                problems.append(_said(doc, text, pos, f"`{command}`: {model} sampler", sampler, record.sampler_names))
        named = re.search(r"\bengines\s+([a-z][a-z0-9+-]*(?:,[a-z][a-z0-9+-]*)+)", comment)
        if named and not engines:
            problems += _compare(doc, text, pos, f"`{command}` (its comment): {model} default engines",
                                 named.group(1).split(","), record.default_engines)
        if not data:
            for name in catalog.names():
                if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", comment, re.IGNORECASE) \
                        and name != record.default_data:
                    problems.append(_said(doc, text, pos, f"`{command}` (its comment): {model} default data",
                                          name, record.default_data))
    return problems


def classifier_calls(text: str, doc: str) -> list[str]:
    """``SparseBayesClassifier(model="M", engine="E"...)``: M has a classifier, E is one of its
    engines; an "(engines `a`, `b`; ...)" right after the call's code span lists them all."""
    problems = []
    for m in re.finditer(r'SparseBayesClassifier\(\s*model="([^"]+)"(?:,\s*engine="([^"]+)")?', text):
        model, engine = m.group(1), m.group(2)
        if model not in classifier_models():
            problems.append(_said(doc, text, m.start(), "the classifier's model", model, classifier_models()))
            continue
        if engine and engine not in classifier_engines(model):
            problems.append(_said(doc, text, m.start(), f"{model} classifier engine", engine,
                                  classifier_engines(model)))
        tail = text[m.end(): m.end() + 400]
        tick = tail.find("`")
        if tick < 0 or "\n\n" in tail[:tick] or "SparseBayesClassifier(" in tail[:tick]:
            continue
        listed = re.match(r"\s*\(engines\s+((?:`[^`]+`[,\s]*(?:and\s+)?)+)", tail[tick + 1:])
        if listed:
            problems += _compare(doc, text, m.start(), f"{model} classifier engines", _names(listed.group(1)),
                                 classifier_engines(model), ordered=False)
    return problems


def _family(subject: str) -> tuple[str, ...] | None:
    kinds = []
    if re.search(r"\bgeneric\b", subject):
        kinds.append("generic")
    if "ADVI" in subject:
        kinds.append("advi")
    if "Pathfinder" in subject:
        kinds.append("pathfinder")
    if "+psis" in subject:
        kinds.append("psis")
    return tuple(kinds) or None


def no_default_claims(text: str, doc: str) -> list[str]:
    """Every "No <engines> is in a model's default engines": no model's default engines
    include one (generic, ADVI, Pathfinder, `+psis`, as the subject says)."""
    problems = []
    for m in re.finditer(r"\bNo ([^.]*?) is in a model's default(?: `zoo compare`)? engines", text):
        kinds = _family(m.group(1))
        if kinds is None:
            problems.append(f"{doc}:{_line(text, m.start())}: cannot tell which engines {m.group(0)!r} means")
            continue
        found = []
        for model in registry.model_names():
            record = _record(model)
            generic = {e.name for e in record.engines if e.generic}
            for engine in record.default_engines:
                if ("generic" in kinds and engine in generic) or ("advi" in kinds and engine.startswith("advi-")) \
                        or ("pathfinder" in kinds and engine.startswith("pathfinder")) \
                        or ("psis" in kinds and engine.endswith("+psis")):
                    found.append(f"{model} {engine}")
        problems += _compare(doc, text, m.start(), f"default engines that are {' or '.join(kinds)}", [], found)
    return problems


# --- docs/validation.md -------------------------------------------------------------------

def _table_after(text: str, doc: str, anchor: str, columns: tuple[str, str]):
    found = _find(text, anchor)
    if found is None:
        return None, [_missing(doc, f"the table after {anchor!r}")]
    rows = _table(text, found[1])
    if not rows or any(c not in rows[0][1] for c in columns):
        return None, [_missing(doc, f"a table with columns {columns} after {anchor!r}")]
    index = [rows[0][1].index(c) for c in columns]
    return [(pos, cells[index[0]], cells[index[1]]) for pos, cells in rows[1:]], []


def sbc_tables(text: str, doc: str = "docs/validation.md") -> list[str]:
    """"Every engine of every model" (rows model | engine, "every model" for the generic
    ones) names each model's engines exactly; the reference samplers' own table names each
    model's samplers."""
    problems = []
    for anchor, column, truth, split in (
            ("Every engine of every model, 100 simulations each", "engine",
             lambda m: _record(m).engine_names, lambda cell: [
                 e.strip() for e in _without_brackets(cell).split(",") if e.strip()]),
            ("**The reference samplers' own SBC**", "sampler",
             lambda m: _record(m).sampler_names, _samplers)):
        rows, missing = _table_after(text, doc, anchor, ("model", column))
        problems += missing
        if rows is None:
            continue
        named: dict[str, list[str]] = {m: [] for m in registry.model_names()}
        first: dict[str, int] = {}
        for pos, model, cell in rows:
            targets = registry.model_names() if model == "every model" else [model]
            if model != "every model" and model not in registry.model_names():
                problems.append(_said(doc, text, pos, f"the {column}s' SBC table: model", model, registry.model_names()))
                continue
            for target in targets:
                named[target] += split(cell)
                first.setdefault(target, pos)
        for model in registry.model_names():
            problems += _compare(doc, text, first.get(model, 0), f"the {column}s' SBC table: {model} {column}s",
                                 named[model], truth(model), ordered=False)
    return problems


def defect_table(text: str, doc: str = "docs/validation.md") -> list[str]:
    """The defect battery's table names every model's own defects with their model and
    engine; the count of "defects inside the engines' own code" is theirs."""
    own = {d.name: (m, d.engines) for m in registry.model_names() for d in _record(m).defects}
    problems = []
    rows, missing = _table_after(text, doc, "Detection rates with 95% Wilson intervals", ("engine", "defect"))
    problems += missing
    seen = []
    for pos, target, defect in rows or []:
        name = _without_brackets(defect).strip()
        if name not in own:
            continue
        seen.append(name)
        model, _, engine = target.partition(" / ")
        engine = _without_brackets(engine).strip()
        if (model.strip(), engine) not in {(own[name][0], e) for e in own[name][1]}:
            problems.append(_said(doc, text, pos, f"the engine of defect {name!r}", f"{model.strip()} / {engine}",
                                  [f"{own[name][0]} / {e}" for e in own[name][1]]))
    if rows is not None:
        problems += _compare(doc, text, rows[0][0] if rows else 0, "the models' own defects in the battery's table",
                             sorted(set(seen)), sorted(own), ordered=False)
    m = re.search(r"and (\w+) defects inside the engines' own code", text)
    if m is None:
        problems.append(_missing(doc, "the count of \"defects inside the engines' own code\""))
    else:
        problems += _compare(doc, text, m.start(), "the number of the models' own defects",
                             [str(_NUMBERS.get(m.group(1).lower(), m.group(1)))], [str(len(own))])
    return problems


# --- data/catalog.py -----------------------------------------------------------------------

def catalog_prose(rows: list[dict]) -> list[str]:
    """The catalog's prose (``describe()``'s source, encoding, positive, notes) says nothing
    about which model uses a data set or how `zoo compare` treats it: the data layer cannot
    read the records."""
    problems = []
    for row in rows:
        for key in ("source", "encoding", "positive", "notes"):
            said = row.get(key) or ""
            word = re.search(r"\bdefault\b|zoo compare", said, re.IGNORECASE)
            if word:
                problems.append(f"data/catalog.py: {row['name']} {key} says {word.group(0)!r} ({said!r}): which "
                                "model defaults to a data set and how it loads it are the registry's facts")
    return problems


# --- the tests ---------------------------------------------------------------------------------

def _read(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


def _pages() -> dict[str, str]:
    return models_table(_read("README.md"))[1]


def _readme_checks(text: str, doc: str = "README.md") -> list[str]:
    problems, pages = models_table(text, doc)
    problems += generic_engines(text, doc, "Every model also has the generic engines", r"\.\s")
    problems += default_runs(text, doc)
    if "`zoo compare` without options runs" not in text:
        problems.append(_missing(doc, "the main job ('`zoo compare` without options runs ...')"))
    problems += raw_inputs(text, doc)
    problems += model_count(text, doc)
    if set(pages) == set(registry.model_names()):  # else the table's problem is reported
        names = [pages[m].rsplit("/", 1)[-1] for m in registry.model_names()]
        problems += page_lists(text, doc, names, [("Measurements and findings per model:", r"\.\n"),
                                                  (re.compile(r"\n- \[docs/[^\]]+\.md\]"), r" - one page per model")])
    return problems


def _everywhere(text: str, doc: str) -> list[str]:
    return commands(text, doc) + classifier_calls(text, doc) + no_default_claims(text, doc) + default_runs(text, doc)


def _documents() -> list[str]:
    return ["README.md", "CONTRIBUTING.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


def test_readme_states_the_registry():
    assert _readme_checks(_read("README.md")) == []


def test_every_model_has_a_page_that_states_the_registry():
    pages = _pages()
    assert set(pages) == set(registry.model_names())
    problems = []
    for model, page in pages.items():
        problems += model_page(_read(page), page, model)
    assert problems == []


def test_docs_index_lists_the_model_pages():
    names = [_pages()[m].rsplit("/", 1)[-1] for m in registry.model_names()]
    assert page_lists(_read("docs/README.md"), "docs/README.md", names, [("Models:\n", r"\n\n")]) == []


@pytest.mark.parametrize("doc", _documents())
def test_commands_classifier_calls_and_claims_match_the_registry(doc):
    assert _everywhere(_read(doc), doc) == []


def test_generic_engine_lists_match_the_registry():
    assert generic_engine_table(_read("docs/generic-methods.md"), "docs/generic-methods.md",
                                "The generic engines (each needs only") == []
    assert generic_engines(_read("docs/validation.md"), "docs/validation.md",
                           "The generic methods are registry engines of every model", r"\n\n") == []


def test_validation_tables_match_the_registry():
    text = _read("docs/validation.md")
    assert sbc_tables(text) + defect_table(text) == []


def test_catalog_prose_names_no_model_default():
    assert catalog_prose(catalog.describe()) == []
    assert {_record(m).default_data for m in registry.model_names()} <= set(catalog.names())


# --- planted changes: each checker reports exactly the fact changed --------------------------------

def _plant(text: str, old: str, new: str, count: int = 1) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, count)


def _one(problems: list[str], *words: str) -> str:
    assert len(problems) == 1, problems
    assert all(w in problems[0] for w in words), (problems[0], words)
    return problems[0]


def test_planted_readme_table_facts_are_reported():
    text = _read("README.md")
    row = next(line for line in text.splitlines() if line.startswith("| [`ggsm-probit`]"))
    line = text[: text.index(row)].count("\n") + 1
    cases = [
        (row, row.replace("`gj`, ", ""), "ggsm-probit engines"),                          # an engine dropped
        (row, row.replace("`ggig_linear`", "`ggig_linear_weak`"), "ggsm-probit default data"),
        (row, row.replace("slice-Gibbs, then NUTS", "NUTS, then slice-Gibbs"), "ggsm-probit reference chain"),
    ]
    for old, new, what in cases:
        _one(_readme_checks(_plant(text, old, new)), f"README.md:{line}:", what)
    # a row lost: the table's models differ from the registry's
    _one(_readme_checks(_plant(text, row + "\n", "")), "the models of the table")


def test_planted_readme_sentences_are_reported():
    text = _read("README.md")
    _one(_readme_checks(_plant(text, "`advi-lowrank`, ", "")), "the generic engines every model has")
    _one(_readme_checks(_plant(text, "with the engines `em`, `laplace` and `ep`", "with the engines `em` and `ep`")),
         "the default model's default engines", "em, ep", "em, laplace, ep")
    _one(_readme_checks(_plant(text, "Ripley's data (`ripley`)", "the banana data (`banana`)")),
         "the default model's default data", "banana")
    _one(_readme_checks(_plant(text, "`zoo compare` without options runs PCVM\n(`pcvm`)",
                               "`zoo compare` without options runs BBLR\n(`bblr`)")), "the default model", "bblr")
    _one(_readme_checks(_plant(text, " and `grid-rvm` (the digits", " (the digits")),
         "the models that take their inputs raw")
    _one(_readme_checks(_plant(text, "Five sparse", "Six sparse")), "the number of models")
    _one(_readme_checks(_plant(text, "[GIG logistic](docs/gig-logistic.md), ", "")), "the model pages")


def test_planted_model_page_facts_are_reported():
    text = _read("docs/ggsm-probit.md")
    doc = "docs/ggsm-probit.md"
    _one(model_page(_plant(text, "`stu`, `mm-laplace`", "`mm-laplace`"), doc, "ggsm-probit"), "ggsm-probit engines")
    _one(model_page(_plant(text, "reference chain is slice-Gibbs, then NUTS", "reference chain is NUTS, then slice-Gibbs"),
                    doc, "ggsm-probit"), "ggsm-probit reference chain", "nuts, slice-gibbs")
    _one(model_page(_plant(text, "`--reference slice-gibbs,nuts` is", "`--reference nuts` is"), doc, "ggsm-probit"),
         "ggsm-probit reference chain", "says nuts;")
    grid = _read("docs/grid-rvm.md")
    _one(model_page(_plant(grid, "(`digits_even_odd`, shipped", "(`esl_mixture`, shipped"), "docs/grid-rvm.md",
                    "grid-rvm"), "grid-rvm default data", "esl_mixture")
    bblr = _read("docs/bblr.md")
    _one(model_page(_plant(bblr, "reference chain is therefore NUTS, then **parallel tempering**",
                           "reference chain is therefore NUTS, then **slice-Gibbs**"), "docs/bblr.md", "bblr"),
         "bblr reference chain", "docs/bblr.md:")
    pcvm = _read("docs/pcvm.md")
    _one(default_runs(_plant(pcvm, "runs `pcvm` on `ripley`", "runs `pcvm` on `banana`"), "docs/pcvm.md"),
         "docs/pcvm.md:3:", "the default model's default data", "banana")
    # a rewritten opening is not skipped in silence
    _one(model_page(_plant(text, "([models and engines]", "([the models]"), doc, "ggsm-probit"), "not found")


def test_planted_commands_are_reported():
    doc = "docs/x.md"
    good = "```bash\nzoo compare --model ggsm-probit --param q=0.5     # ggig_linear (Section 6.1 design), " \
           "engines mm,lap,gj,stu\n```\n"
    assert commands(good, doc) == []
    _one(commands(good.replace("gj,stu", "stu"), doc), "default engines")
    _one(commands(good.replace("# ggig_linear", "# ggig_linear_weak"), doc), "default data", "ggig_linear_weak")
    _one(commands(good.replace("q=0.5", "qq=0.5"), doc), "qq")
    _one(commands(good.replace("q=0.5", "q=-1"), doc), "parameter q")
    _one(commands("`zoo compare --model pcvm --engines ep,vb`", doc), "pcvm engine", "says vb;")
    _one(commands("```\nzoo sbc --model gig-logistic \\\n  --engine mm --sims 10\n```\n", doc),
         "gig-logistic engine", "says mm;")
    _one(commands("`zoo compare --model ggsm-probit --reference pg-gibbs`", doc), "sampler", "pg-gibbs")
    _one(commands("`zoo compare --model pcvm --data ripleys`", doc), "data set", "ripleys")
    _one(commands("`zoo compare --model pcvms`", doc), "the model", "pcvms")
    assert commands("`zoo sbc --model <model> --engine <engine>` `zoo compare --engines ep,mine:fit+psis`", doc) == []


def test_planted_classifier_calls_are_reported():
    text = _read("docs/grid-rvm.md")
    doc = "docs/grid-rvm.md"
    assert classifier_calls(text, doc) == []
    _one(classifier_calls(_plant(text, "(engines `vb`, `vb-s-grid`, `vb-rvm`;", "(engines `vb`, `vb-rvm`;"), doc),
         "grid-rvm classifier engines")
    _one(classifier_calls('SparseBayesClassifier(model="gig-logistic", engine="auto-laplace")', doc),
         "gig-logistic classifier engine", "auto-laplace")
    _one(classifier_calls('SparseBayesClassifier(model="nope")', doc), "the classifier's model")


def test_planted_claims_are_reported():
    text = _read("docs/generic-methods.md")
    doc = "docs/generic-methods.md"
    assert no_default_claims(text, doc) == []
    # the sentence as it stood: auto-laplace is a default engine of some models
    problem = _one(no_default_claims(_plant(text, "No ADVI or Pathfinder engine is", "No generic engine is"), doc),
                   "default engines that are generic")
    assert "gig-logistic auto-laplace" in problem
    _one(no_default_claims("No engine at all is in a model's default engines.", doc), "cannot tell")


def test_planted_generic_engine_lists_are_reported():
    text = _read("docs/generic-methods.md")
    _one(generic_engine_table(_plant(text, "| `pathfinder-multi` |", "| `pathfinder-many` |"),
                              "docs/generic-methods.md", "The generic engines (each needs only"), "pathfinder-many")
    validation = _read("docs/validation.md")
    _one(generic_engines(_plant(validation, "`advi-lowrank` and `advi-iaf`", "`advi-lowrank` and `advi-flow`"),
                         "docs/validation.md", "The generic methods are registry engines of every model", r"\n\n"),
         "advi-flow")


def test_planted_validation_tables_are_reported():
    text = _read("docs/validation.md")
    _one(sbc_tables(_plant(text, "| ggsm-probit | lap, gj, stu |", "| ggsm-probit | lap, stu |")),
         "the engines' SBC table: ggsm-probit engines")
    _one(sbc_tables(_plant(text, "| gig-logistic | PG-Gibbs |", "| gig-logistic | slice-Gibbs |")),
         "the samplers' SBC table: gig-logistic samplers")
    _one(defect_table(_plant(text, "| bblr / laplace | logistic curvature", "| bblr / sla | logistic curvature")),
         "the engine of defect 'logistic curvature'", "bblr / sla")
    _one(defect_table(_plant(text, "and five defects inside", "and four defects inside")),
         "the number of the models' own defects")


def test_planted_catalog_prose_is_reported():
    rows = [{"name": "digits_even_odd", "notes": "the gridRVM default: not linearly separable"},
            {"name": "horii_synthetic", "notes": "`zoo compare` standardizes the inputs"},
            {"name": "ripley", "notes": "the original training and test files"}]
    problems = catalog_prose(rows)
    assert len(problems) == 2 and "digits_even_odd notes" in problems[0] and "horii_synthetic notes" in problems[1]
