"""The disk cache of references: content keys, atomic entries signed with the user's key,
certificates recomputed on every read, and :func:`clear_cache`, which deletes only what it
can prove the zoo wrote.

An entry is a netCDF file of every sampled site, the sampler statistics, the data and the
sampler's attributes, then a JSON record (the commit mark) holding the SHA-256 of the
netCDF file's bytes, the digest of those draws and statistics, the timings and the
provenance, signed as a whole with an HMAC-SHA256 under the user's key
(:mod:`zoo.validation.base.signing`: ``cache-key`` in
:func:`~zoo.validation.base.signing.config_dir`, 32 random bytes, owner-only; the domain
:data:`MAC_DOMAIN`). A digest alone proves nothing against someone who can write
the cache folder (they can edit the file and recompute it); the signature can be made only
with the key. A read verifies the record's signature, then the file's bytes against the
digest it carries, and only then opens the netCDF file: nothing unauthenticated is parsed.
The key hashes the model and its code, the data, the sampler's settings and code, the
certification rule and the package versions (:func:`cache_key`); a stored certificate is
never trusted: reading an entry recomputes it from the draws with the current rule.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import tempfile
import warnings
from dataclasses import asdict, dataclass, field

import jax
import numpy as np
import numpyro

from ...inference.posterior import DrawsPosterior
from ...models.base import Site
from ..base import arviz_adapter as adapter
from ..base import signing
from ..base.atomic import _jsonable, atomic_write, write_text_atomic
from ..base.code_digest import code_digest
from ..base.signing import (  # noqa: F401  (KEY_FILE, KeyUnavailable, config_dir, key_path: re-exported)
    KEY_FILE, KeyUnavailable, Untrusted, config_dir, file_sha256, key_path, machine_key)
from .certification import CERTIFICATION, _certify_run, _checks, _diagnosed_sites
from .config import Reference, ReferenceConfig, _fit_info, _sampler_name
from .nuts import sampler_of

try:  # a lock held by a running command is never deleted (Linux, macOS)
    import fcntl
except ImportError:  # no fcntl (Windows): no run locks an entry either
    fcntl = None

#: bump when the cache layout changes, so old entries are recomputed rather than misread
#: (2: every sampled site stored, content digest over draws and statistics, no stored
#: certificate; 3: the record signed with the user's cache key, HMAC-SHA256; 4: the record
#: names the netCDF file and carries the SHA-256 of its bytes, checked before it is opened)
CACHE_FORMAT = 4

#: the signing domain of a cache entry's record (:mod:`zoo.validation.base.signing`): a record signed as
#: anything else never passes for an entry's
MAC_DOMAIN = "reference cache entry"


# --------------------------------------------------------------------------------------
# The key (validation/base/signing.py): the cache's names for it
# --------------------------------------------------------------------------------------
def sign_record(record: dict, mac_key: bytes) -> dict:
    """``record`` (JSON-able) with ``key_id`` and ``mac`` set for ``mac_key``, as a cache
    entry's record."""
    return signing.sign_record(record, mac_key, MAC_DOMAIN)


def _verify_record(record, mac_key: bytes | None) -> None:
    """Raise :class:`Untrusted` saying why ``record`` is not a cache entry's record signed
    with ``mac_key``."""
    signing.verify_record(record, mac_key, MAC_DOMAIN)


_reason = signing.reason_of


class _Damaged(ValueError):
    """An entry that cannot be what the zoo wrote for this key: a record of another key or
    format, or a netCDF file whose bytes or draws do not match the signed record."""


class _Outdated(_Damaged):
    """An entry written by a zoo of another cache format."""


#: what a damaged entry raises while it is authenticated and parsed (a malformed record,
#: a truncated or garbage netCDF/HDF5 file: h5py raises OSError, ValueError, KeyError or
#: TypeError). Anything else - an ImportError, a MemoryError, a programming error - is not
#: the entry's fault and propagates, so a valid entry is never sampled again over it.
_DAMAGE = (OSError, ValueError, KeyError, TypeError)
#: a record holds the cache key, digests, timings and the provenance: a few kilobytes
_RECORD_MAX_CHARS = 1_000_000


def package_versions() -> dict[str, str]:
    """The versions of the packages that can change a reference's draws (JAX, NumPyro,
    ArviZ, NumPy), by name: part of every cache key (:func:`cache_key`) and of a reference's
    provenance."""
    return {
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "arviz": adapter.ARVIZ_VERSION,
        "numpy": np.__version__,
    }


def _array_digest(a) -> str:
    """A digest of an array's shape and values - or of a dict of them (a general model's data,
    its observations), name by name."""
    h = hashlib.sha256()
    for name, value in (sorted(a.items()) if isinstance(a, dict) else [("", a)]):
        v = np.ascontiguousarray(value, dtype=np.float64)
        h.update(f"{name}{v.shape!r}".encode() if name else repr(v.shape).encode())
        h.update(v.tobytes())
    return h.hexdigest()


def _content_digest(draws: dict[str, np.ndarray], stats: dict[str, np.ndarray]) -> str:
    """Digest of everything the certificate is computed from: the draws of every
    sampled site and the sampler statistics."""
    h = hashlib.sha256()
    for group, arrays in (("draws", draws), ("stats", stats)):
        for name in sorted(arrays):
            h.update(f"{group}/{name}".encode())
            h.update(_array_digest(np.asarray(arrays[name], dtype=np.float64)).encode())
    return h.hexdigest()


def model_code_digest(spec) -> str:
    """Digest of the source that defines the spec's model (its module and the zoo modules
    it imports: distributions, special functions, checks)."""
    return code_digest((type(spec).__module__,), objects=(type(spec),))


def cache_key(spec, Phi: np.ndarray, y: np.ndarray, config: ReferenceConfig) -> str:
    """Content hash of (model + hyper-parameters, the model's code, data, sampler settings
    and code, the certification rule, package versions)."""
    payload = {
        "spec": spec.to_dict(),
        "model_code": model_code_digest(spec),
        "Phi": _array_digest(Phi),
        "y": _array_digest(y),
        "sampler": config.sampler_settings(),
        "sampler_code": sampler_of(config).code_digest(),
        "certification_rule": asdict(CERTIFICATION),
        "versions": package_versions(),
        # the draws depend on where they were computed (an accelerator runs NUTS's chains
        # vectorized, and its arithmetic rounds differently): an entry is the backend's
        "backend": jax.default_backend(),
        "cache_format": CACHE_FORMAT,
    }
    text = json.dumps(_jsonable(payload), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _atomic_write_text(path: str, text: str) -> None:
    write_text_atomic(path, text)


def _cache_paths(cache_dir, key: str, sampler: str = "nuts") -> tuple[str, str]:
    base = os.path.join(os.fspath(cache_dir), f"{sampler}-{key[:32]}")
    return base + ".nc", base + ".json"


def _stored_draws_and_stats(idata) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every posterior variable as (chains, draws, ...) and every sampler statistic as
    (chains, draws), as stored."""
    post = adapter.group(idata, "posterior")
    draws = {name: np.asarray(post[name].transpose("chain", "draw", ...).values, dtype=float)
             for name in post.data_vars}
    stats = {}
    if "sample_stats" in adapter.groups(idata):
        ss = adapter.group(idata, "sample_stats")
        stats = {name: np.asarray(ss[name].transpose("chain", "draw", ...).values) for name in ss.data_vars}
    return draws, stats


def _write_cache(cache_dir, key: str, reference: Reference, mac_key: bytes | None = None) -> str | None:
    """netCDF first, provenance JSON last: the JSON is the commit mark of an entry, and it
    names the netCDF file and carries the SHA-256 of its bytes (taken after the atomic
    write), so a half-written, swapped or edited netCDF file - draws, statistics, data or
    attributes - is detected on reading; the record is signed with ``mac_key`` (default:
    :func:`machine_key`, made if missing). Without a usable key nothing is written (an
    entry no reader could trust) and None is returned. No certificate is stored as a fact:
    the provenance keeps the one computed when the run ended, for the record, and every
    read recomputes it from the draws."""
    if mac_key is None:
        mac_key = machine_key(create=True)
        if mac_key is None:
            return None
    nc_path, json_path = _cache_paths(cache_dir, key, _sampler_name(reference.provenance["sampler"]))
    # written and hashed in a private folder, then copied into the cache folder: the digest
    # signed is that of the bytes this process wrote, whatever happens in a shared folder
    with tempfile.TemporaryDirectory(prefix="zoo-cache-write-") as private:
        mine = os.path.join(private, "entry.nc")
        adapter.to_netcdf(reference.idata, mine)
        digest = file_sha256(mine)
        atomic_write(nc_path, lambda tmp: shutil.copyfile(mine, tmp), suffix=".nc")
    record = {
        "cache_format": CACHE_FORMAT,
        "cache_key": key,
        "netcdf": os.path.basename(nc_path),
        "netcdf_sha256": digest,
        "content_sha256": _content_digest(*_stored_draws_and_stats(reference.idata)),
        "seconds": reference.seconds,
        "compile_seconds": reference.compile_seconds,
        "provenance": reference.provenance,
    }
    _atomic_write_text(json_path, json.dumps(sign_record(record, mac_key), indent=1, sort_keys=True))
    return nc_path


def _authenticated_record(json_path: str, mac_key: bytes | None, key: str | None = None) -> dict:
    """The record in ``json_path`` once it is a cache entry's record of this format (and of
    cache key ``key``, when given) signed with ``mac_key``: :class:`Untrusted`,
    :class:`_Outdated`, or another of :data:`_DAMAGE` saying why not. The format and the key
    are read before the signature is checked only to say why an entry is not used."""
    with open(json_path, encoding="utf-8") as fh:
        # a record is a few kilobytes: a huge file is not one (and must not exhaust memory)
        text = fh.read(_RECORD_MAX_CHARS + 1)
    if len(text) > _RECORD_MAX_CHARS:
        raise _Damaged(f"the cache record is over {_RECORD_MAX_CHARS} characters: not a record the zoo wrote")
    try:
        record = json.loads(text)
    except RecursionError as err:  # "[[[[...": nesting deeper than a record has
        raise _Damaged("the cache record is nested deeper than any record the zoo writes") from err
    if not isinstance(record, dict):
        raise _Damaged("the cache record is not a JSON object")
    fmt = record.get("cache_format")
    if fmt != CACHE_FORMAT:
        # said before the signature is checked: an older zoo's record is signed differently
        # or not at all, and its format is the reason it is sampled again
        raise _Outdated(f"written in cache format {fmt}; this zoo reads and writes format {CACHE_FORMAT}")
    if key is not None and record.get("cache_key") != key:
        raise _Damaged("cache record belongs to another key")
    _verify_record(record, mac_key)
    return record


def _authenticated_netcdf(record: dict, nc_path: str, private_dir: str) -> str:
    """A private copy of ``nc_path`` (in ``private_dir``, which only this user can read)
    once its bytes are the ones the (verified) ``record`` names; :class:`_Damaged` if not.
    The copy is what is parsed: the digest is taken of the very bytes copied, so a file
    swapped in the shared folder between the check and the parse is never read (copying
    and hashing a typical entry of a megabyte take about a millisecond)."""
    if record.get("netcdf") != os.path.basename(nc_path):
        raise _Damaged(f"the record names another netCDF file ({record.get('netcdf')!r})")
    copy = os.path.join(private_dir, "entry.nc")
    h = hashlib.sha256()
    with open(nc_path, "rb") as src, open(copy, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            h.update(block)
            dst.write(block)
    if not hmac.compare_digest(h.hexdigest(), str(record["netcdf_sha256"])):
        raise _Damaged("the netCDF file's bytes do not match the digest recorded with them")
    return copy


def _read_cache(cache_dir, key: str, spec, sites: tuple[Site, ...], config: ReferenceConfig,
                mac_key: bytes | None = None) -> Reference | None:
    """The cached Reference, or None when there is no complete, intact entry signed with
    ``mac_key`` (default: :func:`machine_key`, never made here).

    In this order: the record's format, its signature, its key; then the netCDF file's
    bytes against the digest in the record; only then is the netCDF file opened. The
    certificate is recomputed from the stored draws and statistics with the current rule;
    the record contributes only what cannot be recomputed (timings, provenance). Damage
    (:data:`_DAMAGE`) is warned about and the entry recomputed; any other error propagates.
    """
    nc_path, json_path = _cache_paths(cache_dir, key, config.sampler)
    if not (os.path.exists(nc_path) and os.path.exists(json_path)):
        return None
    if mac_key is None:
        mac_key = machine_key(create=False)
    try:  # authenticate and parse: what fails here is the entry's damage
        record = _authenticated_record(json_path, mac_key, key)
        # mkdtemp: a folder only this user can enter; the copy is read fully into memory
        # (from_netcdf) and the folder removed at once
        with tempfile.TemporaryDirectory(prefix="zoo-cache-read-") as private:
            idata = adapter.from_netcdf(_authenticated_netcdf(record, nc_path, private))
        if "posterior" not in adapter.groups(idata):
            raise _Damaged("the netCDF file has no posterior group")
        stored, stats = _stored_draws_and_stats(idata)
        if _content_digest(stored, stats) != record["content_sha256"]:
            raise _Damaged("draws do not match the digest recorded with them")
        draws = adapter.idata_to_draws(idata, sites)
        seconds, compile_seconds = float(record["seconds"]), float(record["compile_seconds"])
        provenance = dict(record["provenance"])
    except Untrusted as err:
        warnings.warn(f"ignoring untrusted reference cache entry {json_path}: {err}")
        return None
    except _Outdated as err:
        warnings.warn(f"ignoring outdated reference cache entry {json_path}: {err}; sampling it again")
        return None
    except _DAMAGE as err:  # damage only: recompute, never crash or trust it
        why = str(err) if isinstance(err, _Damaged) else f"{type(err).__name__}: {err}"
        warnings.warn(f"ignoring unreadable reference cache entry {nc_path} ({json_path}): {why}")
        return None
    # the entry is authentic and whole: an error from here on is the zoo's, not the entry's
    stored.update(draws)  # the measured sites in their own axis order
    diagnosed = _diagnosed_sites(sites, stored)
    certified, failures, diagnostics, _ = _certify_run(
        stored, stats, diagnosed, sampler_of(config).runner, config.sampler_settings())
    diagnostics = _jsonable(diagnostics)
    provenance.update(certified=certified, checks=_checks(diagnostics),
                      diagnostics={k: v for k, v in diagnostics.items() if k != "per_site"})
    info = _fit_info(certified, failures, seconds, compile_seconds, provenance["sampler"], diagnostics)
    posterior = DrawsPosterior(spec, sites, draws, info)
    return Reference(
        posterior=posterior, idata=idata, certified=certified, failures=failures, diagnostics=diagnostics,
        seconds=seconds, provenance=provenance,
        compile_seconds=compile_seconds, from_cache=True, cache_path=nc_path,
    )


# --------------------------------------------------------------------------------------
# Clearing the cache: only what the zoo can prove it wrote
# --------------------------------------------------------------------------------------
#: the names the zoo gives a reference cache entry's files (``_cache_paths`` and the
#: lock of certified_run.py's ``_entry_lock``): ``<sampler>-<32 hex>.nc``, ``.json`` and ``.lock``
ENTRY_NAME = re.compile(r"^([a-z][a-z0-9-]*-[0-9a-f]{32})\.(nc|json|lock)$")
#: the names JAX gives the files of its compilation cache (jax/_src/lru_cache.py):
#: ``<program>-<64 hex>-cache`` and ``-atime``, and the lock it takes while evicting
JAX_NAME = re.compile(r"^.+-[0-9a-f]{64}-(cache|atime)$|^\.lockfile$")
#: what a zoo run writes into an entry's lock while it holds it (certified_run.py, ``_entry_lock``)
LOCK_STAMP = re.compile(r"pid [0-9]+ on [^\n]* since [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_LOCK_MAX_BYTES = 4096

#: why a file is kept: (one file, several files, why)
UNSIGNED = ("file that is not an entry signed with your key", "files that are not entries signed with your key",
            "another user's or an older zoo's entries, or files the zoo did not write; the zoo never uses them")
REPLACED = ("netCDF file whose bytes do not match its signed record",
            "netCDF files whose bytes do not match their signed records", "changed after the zoo wrote them")
FOREIGN_LOCK = ("lock file that is not the zoo's", "lock files that are not the zoo's",
                "they hold something other than the zoo's holder stamp")
HELD = ("file in use by a running zoo command", "files in use by a running zoo command",
        "an entry's lock is held; clear again when the command has finished")
TEMPORARY = ("temporary file (.tmp-*)", "temporary files (.tmp-*)",
             "a killed run may leave one, but nothing proves them the zoo's; delete them by hand "
             "when no zoo command runs")
OTHER = ("other file", "other files", "not named as the zoo or JAX name their cache files")
NOT_PLAIN = ("entry that is not a plain file", "entries that are not plain files",
             "links and folders are never followed or deleted")


@dataclass
class ClearReport:
    """What :func:`clear_cache` deleted, what it kept and why, and what it could not delete."""

    deleted: int = 0
    deleted_bytes: int = 0
    #: (one, several, why) -> the paths kept for that reason
    kept: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    #: "path: reason" of each file that could not be deleted
    errors: list[str] = field(default_factory=list)

    def keep(self, why: tuple[str, str, str], path: str) -> None:
        """Record that ``path`` is kept for the reason ``why`` ((one, several, why): the words
        :meth:`lines` reports it with)."""
        self.kept.setdefault(why, []).append(path)

    def delete(self, path: str) -> None:
        """Delete the file ``path`` and count it and its bytes; a file already gone is passed
        over, one that cannot be deleted is recorded in ``errors`` with the reason."""
        try:
            size = os.lstat(path).st_size
            os.remove(path)
        except FileNotFoundError:
            return
        except OSError as err:
            self.errors.append(f"{path}: {_reason(err)}")
            return
        self.deleted += 1
        self.deleted_bytes += size

    def lines(self) -> list[str]:
        """One line per kind of file kept: how many, what they are, why, the first names."""
        out = []
        for (one, several, why), paths in self.kept.items():
            names = ", ".join(os.path.basename(p) for p in paths[:3]) + (", ..." if len(paths) > 3 else "")
            out.append(f"kept {len(paths)} {one if len(paths) == 1 else several} ({why}): {names}")
        return out


def _lock_is_held(path: str) -> bool:
    """Whether a running command holds the lock ``path`` (fcntl.flock)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases the lock just taken
    return False


def _is_zoo_lock(path: str) -> bool:
    """A lock file as the zoo leaves it: empty, or the holder stamp of the last run."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            data = os.read(fd, _LOCK_MAX_BYTES + 1)
        finally:
            os.close(fd)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return len(data) <= _LOCK_MAX_BYTES and (text == "" or LOCK_STAMP.fullmatch(text) is not None)


#: the folders of JAX releases in the cache's jax/ (``zoo.jax_cache_dir``: one per release)
JAX_RELEASE = re.compile(r"^[0-9]+(\.[0-9]+)+[a-z0-9.+-]*$")


def jax_cache_folders(folder, jax_dir) -> list[str]:
    """The folders of JAX's compiled programs that ``zoo cache`` counts and clears: ``jax_dir``
    alone, or - where it is the zoo's own ``folder/jax/<jax release>`` - every release's folder
    there and ``folder/jax`` itself (where programs lay before one folder per release), so
    that programs an older JAX left are not kept for ever."""
    jax_dir = os.fspath(jax_dir)
    root = os.path.join(os.fspath(folder), "jax")
    if os.path.abspath(os.path.dirname(jax_dir)) != os.path.abspath(root):
        return [jax_dir]
    releases = []
    if os.path.isdir(root) and not os.path.islink(root):
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if JAX_RELEASE.match(name) and os.path.isdir(path) and not os.path.islink(path):
                releases.append(path)
    if jax_dir not in releases:
        releases.append(jax_dir)
    return releases + [root]


def _plain_files(folder: str, report: ClearReport, skip=None) -> list[str]:
    """The names of the plain files in ``folder``; anything else (links, folders but those
    in ``skip``, a path or a list of them) is reported kept."""
    if not os.path.isdir(folder):
        return []
    names = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            names.append(name)
        elif os.path.abspath(path) not in {os.path.abspath(p) for p in ([skip] if isinstance(skip, str) else skip or [])}:
            report.keep(NOT_PLAIN, path)
    return names


def clear_cache(folder, jax_dir=None, mac_key: bytes | None = None) -> ClearReport:
    """Delete from the reference cache ``folder`` (and JAX's compilation cache ``jax_dir``)
    what the zoo can prove it wrote, and report the rest.

    Deleted: an entry whose record verifies under ``mac_key`` (default: the user's key,
    never made here) as a record of this format naming the netCDF file beside it - the
    record, and that netCDF file when its bytes match the recorded digest; a lock file of
    the zoo's name that is empty or holds the zoo's holder stamp; in ``jax_dir``, files of
    JAX's own names (which cannot be authenticated: JAX signs nothing), and ``jax_dir``
    itself once empty if it is ``folder/jax``. Kept, by reason: everything else - entries
    of another key or an older zoo, files made by hand under the zoo's names, lock files
    holding anything else, ``.tmp-*`` files, files of an entry whose lock a running command
    holds, links and folders (never followed), and other names. Where ``jax_dir`` is the
    zoo's ``folder/jax/<release>``, every release's folder is cleared (:func:`jax_cache_folders`)."""
    folder = os.fspath(folder)
    report = ClearReport()
    if mac_key is None:
        mac_key = machine_key(create=False)
    jax_folders = [] if jax_dir is None else jax_cache_folders(folder, jax_dir)
    names = _plain_files(folder, report, skip=jax_folders)
    present, todo = set(names), set(names)

    def path(name: str) -> str:
        return os.path.join(folder, name)

    for name in names:
        match = ENTRY_NAME.match(name)
        if not match or match.group(2) != "json":
            continue
        base = match.group(1)
        parts = [n for n in (base + ".nc", name, base + ".lock") if n in present]
        if base + ".lock" in present and _lock_is_held(path(base + ".lock")):
            for n in parts:
                report.keep(HELD, path(n))
                todo.discard(n)
            continue
        try:
            record = _authenticated_record(path(name), mac_key)
            if record.get("netcdf") != base + ".nc" or not str(record.get("cache_key", "")).startswith(base[-32:]):
                continue  # a signed record, but not the one the zoo writes under this name
            digest = record["netcdf_sha256"]
        except (Untrusted, *_DAMAGE):
            continue  # left to be kept as not signed with this key
        if base + ".nc" in present:
            todo.discard(base + ".nc")
            try:
                same = file_sha256(path(base + ".nc")) == digest
            except OSError:
                same = False
            if same:
                report.delete(path(base + ".nc"))
            else:
                report.keep(REPLACED, path(base + ".nc"))
        report.delete(path(name))
        todo.discard(name)
    for name in sorted(todo):
        match = ENTRY_NAME.match(name)
        if match and match.group(2) == "lock":
            if _lock_is_held(path(name)):
                report.keep(HELD, path(name))
            elif _is_zoo_lock(path(name)):
                report.delete(path(name))
            else:
                report.keep(FOREIGN_LOCK, path(name))
        elif match:
            report.keep(UNSIGNED, path(name))
        elif name.startswith(".tmp-"):
            report.keep(TEMPORARY, path(name))
        else:
            report.keep(OTHER, path(name))
    ours = os.path.abspath(os.path.join(folder, "jax"))
    for jax_folder in jax_folders:  # release folders first, then jax/ itself
        for name in _plain_files(jax_folder, report, skip=jax_folders):
            if JAX_NAME.match(name):
                report.delete(os.path.join(jax_folder, name))
            else:
                report.keep(OTHER, os.path.join(jax_folder, name))
        if os.path.abspath(jax_folder) == ours or os.path.abspath(os.path.dirname(jax_folder)) == ours:
            try:
                os.rmdir(jax_folder)  # only when empty: the zoo made it
            except OSError:
                pass
    return report
