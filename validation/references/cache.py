"""The disk cache of references: content keys, atomic entries signed with this machine's
key, certificates recomputed on every read.

An entry is a netCDF file of every sampled site and the sampler statistics, then a JSON
record (the commit mark) holding the digest of those draws and statistics, the timings and
the provenance, signed as a whole with an HMAC-SHA256 under the user's cache key
(:func:`key_path`: 32 random bytes, owner-only). A digest alone proves nothing against
someone who can write the cache folder (they can shift the draws and recompute it); the
signature can be made only with the key. The key hashes the model and its code, the data,
the sampler's settings and code, the certification rule and the package versions
(:func:`cache_key`); a stored certificate is never trusted: reading an entry recomputes it
from the draws with the current rule.
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat
import warnings
from dataclasses import asdict

import jax
import numpy as np
import numpyro

from ...inference.posterior import DrawsPosterior
from ...models.base import Site
from ..base import arviz_adapter as adapter
from ..base.atomic import _jsonable, write_text_atomic
from ..base.code_digest import code_digest
from .certification import CERTIFICATION, _certify_run, _checks, _diagnosed_sites
from .config import Reference, ReferenceConfig, _fit_info, _sampler_name
from .sampler import get_sampler

#: bump when the cache layout changes, so old entries are recomputed rather than misread
#: (2: every sampled site stored, content digest over draws and statistics, no stored
#: certificate; 3: the record signed with the user's cache key, HMAC-SHA256)
CACHE_FORMAT = 3

#: the key file's name in :func:`config_dir`
KEY_FILE = "cache-key"
_KEY_BYTES = 32
#: what the signature covers is prefixed with this, so a MAC made for anything else with
#: the same key can never pass for an entry's
_MAC_DOMAIN = b"sparse-bayes-zoo reference cache entry\n"


# --------------------------------------------------------------------------------------
# The cache key (a secret): where it lives, making it, reading it
# --------------------------------------------------------------------------------------
def config_dir() -> str:
    """The user's zoo config folder: env ZOO_CONFIG_DIR, else ``$XDG_CONFIG_HOME/sparse-bayes-zoo``,
    else ``~/.config/sparse-bayes-zoo``."""
    if os.environ.get("ZOO_CONFIG_DIR"):
        return os.environ["ZOO_CONFIG_DIR"]
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "sparse-bayes-zoo")


def key_path() -> str:
    """The file of the key that signs this user's reference cache entries."""
    return os.path.join(config_dir(), KEY_FILE)


class Untrusted(ValueError):
    """A cache record that is not signed with this machine's key, or whose signature
    does not match what it says."""


class KeyUnavailable(RuntimeError):
    """The cache key cannot be used (too open permissions, another owner, wrong size,
    cannot be made); the message says why and what to do."""


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, stacklevel=3)


def _load_key(path: str) -> bytes:
    """The key in ``path``; FileNotFoundError when there is none; KeyUnavailable when it
    is not a private 32-byte key of this user."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyUnavailable(f"the reference cache key {path} is not a plain file")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise KeyUnavailable(f"the reference cache key {path} belongs to another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            raise KeyUnavailable(
                f"the reference cache key {path} can be read or written by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}; run `chmod 600 {path}`)")
        data = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != _KEY_BYTES:
        raise KeyUnavailable(f"the reference cache key {path} is not a {_KEY_BYTES}-byte key (delete it to make a new one)")
    return data


def _create_key(path: str) -> None:
    """Write a new random key to ``path`` unless one is there: owner-only (0600, the folder
    0700 when made here), atomically (a temporary name, then a hard link that fails if the
    file appeared meanwhile), so processes racing to make it end up with one key."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = os.path.join(folder, f".{KEY_FILE}-{os.getpid()}-{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            os.write(fd, secrets.token_bytes(_KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replaces a key another process has just made
        except FileExistsError:
            pass
        except OSError as err:  # a file system without hard links: create it exclusively
            if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            with open(tmp, "rb") as fh:
                key = fh.read()
            try:
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return
            try:
                os.write(out, key)
                os.fsync(out)
            finally:
                os.close(out)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def machine_key(create: bool = False) -> bytes | None:
    """This user's cache key, made first when ``create`` and there is none; None (with a
    warning, once per reason) when it cannot be used or made: then no entry is trusted and
    none is written."""
    path = key_path()
    try:
        return _load_key(path)
    except FileNotFoundError:
        if not create:
            return None
    except (KeyUnavailable, OSError) as err:
        _warn_once(f"{_reason(err)}: reference cache entries are neither trusted nor written "
                   "(every reference is sampled)")
        return None
    try:
        _create_key(path)
        return _load_key(path)
    except (KeyUnavailable, OSError) as err:
        _warn_once(f"cannot make the reference cache key {path}: {_reason(err)}; reference cache entries "
                   "are neither trusted nor written (every reference is sampled)")
        return None


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return str(err)


def _key_id(mac_key: bytes) -> str:
    """A public name of the key (it reveals nothing of it), so a reader can tell an entry
    of another key from a forged one."""
    return hmac.new(mac_key, b"sparse-bayes-zoo key id", hashlib.sha256).hexdigest()[:16]


def _record_mac(record: dict, mac_key: bytes) -> str:
    """HMAC-SHA256 of the whole record except its ``mac``, canonically serialized."""
    body = {k: v for k, v in record.items() if k != "mac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(mac_key, _MAC_DOMAIN + text.encode(), hashlib.sha256).hexdigest()


def sign_record(record: dict, mac_key: bytes) -> dict:
    """``record`` (JSON-able) with ``key_id`` and ``mac`` set for ``mac_key``."""
    body = json.loads(json.dumps(_jsonable({k: v for k, v in record.items() if k != "mac"}), allow_nan=False))
    body["key_id"] = _key_id(mac_key)
    body["mac"] = _record_mac(body, mac_key)
    return body


def _verify_record(record: dict, mac_key: bytes | None) -> None:
    """Raise ValueError saying why ``record`` is not signed with ``mac_key``."""
    if mac_key is None:
        raise Untrusted(f"not signed by this machine's key (there is no usable key: {key_path()})")
    mac = record.get("mac")
    if not isinstance(mac, str):
        raise Untrusted("not signed by this machine's key (the record has no signature)")
    if record.get("key_id") != _key_id(mac_key):
        raise Untrusted(f"not signed by this machine's key ({key_path()})")
    if not hmac.compare_digest(mac, _record_mac(record, mac_key)):
        raise Untrusted("signature does not match: the record or the draws were changed after signing")


def package_versions() -> dict[str, str]:
    return {
        "jax": jax.__version__,
        "numpyro": numpyro.__version__,
        "arviz": adapter.ARVIZ_VERSION,
        "numpy": np.__version__,
    }


def _array_digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a, dtype=np.float64)
    h = hashlib.sha256()
    h.update(repr(a.shape).encode())
    h.update(a.tobytes())
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
        "sampler_code": get_sampler(config.sampler).code_digest(),
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
    post = idata.posterior
    draws = {name: np.asarray(post[name].transpose("chain", "draw", ...).values, dtype=float)
             for name in post.data_vars}
    stats = {}
    if "sample_stats" in idata.groups():
        ss = idata.sample_stats
        stats = {name: np.asarray(ss[name].transpose("chain", "draw", ...).values) for name in ss.data_vars}
    return draws, stats


def _write_cache(cache_dir, key: str, reference: Reference, mac_key: bytes | None = None) -> str | None:
    """netCDF first, provenance JSON last: the JSON is the commit mark of an entry, and it
    names the digest of the draws and statistics it belongs to, so a half-written or
    swapped netCDF file is detected on reading; the record is signed with ``mac_key``
    (default: :func:`machine_key`, made if missing). Without a usable key nothing is
    written (an entry no reader could trust) and None is returned. No certificate is
    stored as a fact: the provenance keeps the one computed when the run ended, for the
    record, and every read recomputes it from the draws."""
    if mac_key is None:
        mac_key = machine_key(create=True)
        if mac_key is None:
            return None
    nc_path, json_path = _cache_paths(cache_dir, key, _sampler_name(reference.provenance["sampler"]))
    adapter.to_netcdf(reference.idata, nc_path)
    record = {
        "cache_format": CACHE_FORMAT,
        "cache_key": key,
        "content_sha256": _content_digest(*_stored_draws_and_stats(reference.idata)),
        "seconds": reference.seconds,
        "compile_seconds": reference.compile_seconds,
        "provenance": reference.provenance,
    }
    _atomic_write_text(json_path, json.dumps(sign_record(record, mac_key), indent=1, sort_keys=True))
    return nc_path


def _read_cache(cache_dir, key: str, spec, sites: tuple[Site, ...], config: ReferenceConfig,
                mac_key: bytes | None = None) -> Reference | None:
    """The cached Reference, or None when there is no complete, intact entry signed with
    ``mac_key`` (default: :func:`machine_key`, never made here).

    The certificate is recomputed from the stored draws and statistics with the current
    rule; the record contributes only what cannot be recomputed (timings, provenance),
    and only once its signature is verified.
    """
    nc_path, json_path = _cache_paths(cache_dir, key, config.sampler)
    if not (os.path.exists(nc_path) and os.path.exists(json_path)):
        return None
    if mac_key is None:
        mac_key = machine_key(create=False)
    try:
        with open(json_path) as fh:
            record = json.load(fh)
        if not isinstance(record, dict):
            raise ValueError("the cache record is not a JSON object")
        if record.get("cache_format") != CACHE_FORMAT or record.get("cache_key") != key:
            raise ValueError("cache record belongs to another key or format")
        _verify_record(record, mac_key)
        idata = adapter.from_netcdf(nc_path)
        stored, stats = _stored_draws_and_stats(idata)
        if _content_digest(stored, stats) != record["content_sha256"]:
            raise ValueError("draws do not match the digest recorded with them")
        draws = adapter.idata_to_draws(idata, sites)
        stored.update(draws)  # the measured sites in their own axis order
        diagnosed = _diagnosed_sites(sites, stored)
        certified, failures, diagnostics, _ = _certify_run(
            stored, stats, diagnosed, get_sampler(config.sampler).runner, config.sampler_settings())
        diagnostics = _jsonable(diagnostics)
        provenance = dict(record["provenance"], certified=certified, checks=_checks(diagnostics),
                          diagnostics={k: v for k, v in diagnostics.items() if k != "per_site"})
        info = _fit_info(certified, failures, record["seconds"], record["compile_seconds"],
                         provenance["sampler"], diagnostics)
        posterior = DrawsPosterior(spec, sites, draws, info)
    except Untrusted as err:
        warnings.warn(f"ignoring untrusted reference cache entry {json_path}: {err}")
        return None
    except Exception as err:  # any damage: recompute, never crash or trust it
        warnings.warn(f"ignoring unreadable reference cache entry {nc_path} ({json_path}): "
                      f"{type(err).__name__}: {err}")
        return None
    return Reference(
        posterior=posterior, idata=idata, certified=certified, failures=failures, diagnostics=diagnostics,
        seconds=float(record["seconds"]), provenance=provenance,
        compile_seconds=float(record["compile_seconds"]), from_cache=True, cache_path=nc_path,
    )
