"""The format of a stored result: what lets a result written by one version of the zoo be read
by another - or refused with a reason, never half-read.

Every result a run returns as JSON carries ``"format": N``: the layout version of that kind of
result. A reader knows the formats it reads (:func:`check_format`); a stored result of a layout
it does not know - one written by a newer zoo, one too old to read, a file that is not that
kind of result at all - is refused with one line saying which and why. Results written before
formats were stamped carry none and are read as format 1, the layout they have.
"""
from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


def check_format(d: Any, what: str, *, current: int, oldest: int = 1, required: tuple[str, ...] = ()) -> int:
    """The format of stored result ``d`` (a JSON object) of kind ``what`` (for the message),
    which this zoo reads from ``oldest`` to ``current``; ValueError naming the problem when it
    is not a JSON object, its format is not an integer, is newer or older than those, or when
    it lacks any of the ``required`` keys."""
    if not isinstance(d, Mapping):
        raise ValueError(f"not a stored {what}: a {type(d).__name__}, not a JSON object")
    version = d.get("format", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"not a stored {what}: its format is {version!r}, not an integer")
    if version > current:
        raise ValueError(f"a stored {what} of format {version}, written by a newer zoo: this one reads formats "
                         f"{oldest} to {current}; update the zoo or run it again")
    if version < oldest:
        raise ValueError(f"a stored {what} of format {version}, too old to read (this zoo reads formats {oldest} "
                         f"to {current}); run it again")
    missing = [k for k in required if k not in d]
    if missing:
        raise ValueError(f"not a stored {what} of format {version}: it lacks {', '.join(map(repr, missing))}")
    return version


def stamp(d: Mapping[str, Any], version: int) -> dict[str, Any]:
    """``d`` with its format first."""
    return {"format": version, **{k: v for k, v in d.items() if k != "format"}}


def frozen(value: Any) -> Any:
    """A JSON value that cannot be changed in place: objects as read-only mappings, arrays as
    tuples, all the way down - the parts of a frozen result that stay JSON (a model's spec, a
    simulated design), so that a reader cannot alter the result it was handed."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """:func:`frozen`'s inverse: plain dicts and lists, what ``json.dumps`` writes."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thawed(v) for v in value]
    return value


def check_parts(d: Mapping[str, Any], what: str, known) -> None:
    """ValueError naming the keys of stored result ``d`` that are none of ``known``: a part
    this zoo would drop without reading is refused rather than half-read."""
    unknown = sorted(set(d) - set(known) - {"format"})
    if unknown:
        raise ValueError(f"not a stored {what} this zoo reads: unknown part(s) {', '.join(map(repr, unknown))}")


def record_json(record) -> dict[str, Any]:
    """A frozen dataclass (with frozen dataclasses, tuples and read-only mappings inside) as
    plain JSON: its fields in their declared order, so that what a typed result writes is the
    layout its untyped predecessor wrote, key for key."""
    def plain(v):
        if is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in fields(v)}
        if isinstance(v, Mapping):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return plain(record)


def record_fields(cls: type, d: Any, what: str, *, within: str | None = None) -> dict[str, Any]:
    """JSON object ``d`` checked as the fields of frozen dataclass ``cls``: every field without
    a default there and no key unknown; the keyword arguments, or ValueError in one line naming
    what is wrong. ``what`` names the part; ``within``: the stored result it is part of, for
    the message ("not a stored <within>: <what> lacks ..."; None: "not a stored <what>: it
    lacks ...")."""
    if not isinstance(d, Mapping):
        raise ValueError(f"not a stored {within}: {what} is a {type(d).__name__}, not a JSON object" if within else
                         f"not a stored {what}: a {type(d).__name__}, not a JSON object")
    names = [f.name for f in fields(cls)]
    unknown = ", ".join(map(repr, sorted(set(d) - set(names) - {"format"})))
    if unknown:
        raise ValueError(f"not a stored {within}: {what} has unknown part(s) {unknown}" if within else
                         f"not a stored {what} this zoo reads: unknown part(s) {unknown}")
    missing = ", ".join(repr(f.name) for f in fields(cls)
                        if f.name not in d and f.default is MISSING and f.default_factory is MISSING)
    if missing:
        raise ValueError(f"not a stored {within}: {what} lacks {missing}" if within else
                         f"not a stored {what}: it lacks {missing}")
    return {k: v for k, v in d.items() if k != "format"}


def record_from_json(cls: type[T], d: Any, what: str, *, within: str | None = None,
                     **parts: Callable[[Any], Any]) -> T:
    """The frozen dataclass ``cls`` a JSON object ``d`` holds - a part of a stored result (one
    quantity's line of a test, a view), not a result itself, so it carries no format of its
    own: the result holding it is versioned. Checked by :func:`record_fields`; ``parts``:
    field -> function building that field's typed value from its JSON (a nested record);
    other fields are frozen (:func:`frozen`)."""
    kw = record_fields(cls, d, what, within=within)
    return cls(**{k: (parts[k](v) if k in parts and v is not None else frozen(v)) for k, v in kw.items()})


__all__ = ["check_format", "check_parts", "stamp", "frozen", "thawed", "record_json", "record_fields", "record_from_json"]
