"""What the zoo reads back, signed with this user's key: the proof that a stored result is
the zoo's own work on this account, not a file someone put or edited in a shared folder.

A stored result (a reference cache entry, a study cell, an SBC simulation, an output
folder's manifest) is a JSON record signed as a whole with HMAC-SHA256 under a 32-byte
random key that only this user can read (:func:`key_path`). A digest alone proves
nothing against someone who can write the folder (they can change the content and
recompute it); the signature can be made only with the key. Each kind of record signs
under its own *domain*, so a record signed as one kind never passes as another.

What this does not protect against: anyone who can read the key (this user's other
processes, root) can sign; a record signed on another machine or account is not trusted
here - it is recomputed, never refused as damage. Nothing here is secret but the key.
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
from typing import Any

from .atomic import _jsonable, write_text_atomic

#: the key file's name in :func:`config_dir`
KEY_FILE = "cache-key"
_KEY_BYTES = 32


def config_dir() -> str:
    """The user's zoo config folder: env ZOO_CONFIG_DIR, else ``$XDG_CONFIG_HOME/sparse-bayes-zoo``,
    else ``~/.config/sparse-bayes-zoo``."""
    if os.environ.get("ZOO_CONFIG_DIR"):
        return os.environ["ZOO_CONFIG_DIR"]
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "sparse-bayes-zoo")


def key_path() -> str:
    """The file of the key that signs this user's stored results."""
    return os.path.join(config_dir(), KEY_FILE)


class Untrusted(ValueError):
    """A record that is not signed with this user's key, or whose signature does not match
    what it says."""


class KeyUnavailable(RuntimeError):
    """The key cannot be used (too open permissions, another owner, wrong size, cannot be
    made); the message says why and what to do."""


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
            raise KeyUnavailable(f"the zoo's key {path} is not a plain file")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise KeyUnavailable(f"the zoo's key {path} belongs to another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            raise KeyUnavailable(
                f"the zoo's key {path} can be read or written by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o}; run `chmod 600 {path}`)")
        data = os.read(fd, _KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != _KEY_BYTES:
        raise KeyUnavailable(f"the zoo's key {path} is not a {_KEY_BYTES}-byte key (delete it to make a new one)")
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
    """This user's key, made first when ``create`` and there is none; None (with a warning,
    once per reason) when it cannot be used or made: then nothing stored is trusted and
    nothing is signed."""
    path = key_path()
    try:
        return _load_key(path)
    except FileNotFoundError:
        if not create:
            return None
    except (KeyUnavailable, OSError) as err:
        _warn_once(f"{reason_of(err)}: the zoo's stored results are neither trusted nor signed "
                   "(everything is recomputed)")
        return None
    try:
        _create_key(path)
        return _load_key(path)
    except (KeyUnavailable, OSError) as err:
        _warn_once(f"cannot make the zoo's key {path}: {reason_of(err)}; the zoo's stored results are neither "
                   "trusted nor signed (everything is recomputed)")
        return None


def reason_of(err: BaseException) -> str:
    """An OSError as its reason and file; anything else as its message."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return str(err)


def key_id(mac_key: bytes) -> str:
    """A public name of the key (it reveals nothing of it), so a reader can tell a record
    of another key from a forged one."""
    return hmac.new(mac_key, b"sparse-bayes-zoo key id", hashlib.sha256).hexdigest()[:16]


def _domain(domain: str) -> bytes:
    return f"sparse-bayes-zoo {domain}\n".encode()


def record_mac(record: dict, mac_key: bytes, domain: str) -> str:
    """HMAC-SHA256 of the whole record except its ``mac``, canonically serialized, under
    ``domain`` (what kind of record it is)."""
    body = {k: v for k, v in record.items() if k != "mac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(mac_key, _domain(domain) + text.encode(), hashlib.sha256).hexdigest()


def sign_record(record: dict, mac_key: bytes, domain: str) -> dict:
    """``record`` (JSON-able; numpy values and non-finite floats made plain, as the JSON
    written holds them) with ``key_id`` and ``mac`` set for ``mac_key`` and ``domain``."""
    body = json.loads(json.dumps(_jsonable({k: v for k, v in record.items() if k != "mac"}), allow_nan=False))
    body["key_id"] = key_id(mac_key)
    body["mac"] = record_mac(body, mac_key, domain)
    return body


def verify_record(record: Any, mac_key: bytes | None, domain: str) -> None:
    """Raise :class:`Untrusted` saying why ``record`` is not signed with ``mac_key`` under
    ``domain``."""
    if not isinstance(record, dict):
        raise Untrusted("not a signed record (not a JSON object)")
    if mac_key is None:
        raise Untrusted(f"not signed by this user's key (there is no usable key: {key_path()})")
    mac = record.get("mac")
    if not isinstance(mac, str):
        raise Untrusted("not signed by this user's key (the record has no signature)")
    if record.get("key_id") != key_id(mac_key):
        raise Untrusted(f"not signed by this user's key ({key_path()})")
    if not hmac.compare_digest(mac, record_mac(record, mac_key, domain)):
        raise Untrusted("signature does not match: the record was changed after signing")


def unsigned(record: dict) -> dict:
    """``record`` without its signature fields (what the code that made it returned)."""
    return {k: v for k, v in record.items() if k not in ("mac", "key_id")}


def file_sha256(path: str, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes, read in chunks (a netCDF entry of many megabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# Stored results as signed JSON files
# --------------------------------------------------------------------------------------
#: the domain of each kind of stored result the zoo reads back (a record signed as one
#: kind never passes as another)
STUDY_CELL, SBC_SIMULATION, BATTERY_CELL, REPRODUCTION_CELL, REFERENCE_TABLE_CELL, OUTPUT_MANIFEST = (
    "study cell", "sbc simulation", "defect battery cell", "reproduction cell", "reference table cell",
    "output folder manifest")


def _context(path, tail: int) -> str:
    """What binds a record to its place: the last ``tail`` components of its path (a run's
    keyed folder and the file's name), so that a signed record copied to another run's
    folder or another simulation's name is not trusted there, while the whole output
    folder can still be moved."""
    parts = os.path.normpath(os.path.abspath(os.fspath(path))).split(os.sep)
    return "/".join(parts[-tail:])


def write_signed_json(obj: dict, path, domain: str, *, tail: int = 2) -> str:
    """``obj`` written atomically to ``path`` as JSON, signed under ``domain`` and its place
    (``_context``) with this user's key (made if missing). Without a usable key it is
    written unsigned (a warning says why, once): a later read will not trust it and
    computes it again."""
    mac_key = machine_key(create=True)
    where = f"{domain} at {_context(path, tail)}"
    body = sign_record(obj, mac_key, where) if mac_key is not None else _jsonable(obj)
    return write_text_atomic(path, json.dumps(body, indent=1))


def read_signed_json(path, domain: str, what: str, *, tail: int = 2) -> dict | None:
    """The record stored at ``path`` (its signature fields removed), or None when there is
    none or it cannot be trusted: not JSON, not signed with this user's key under
    ``domain`` for this place, or changed after signing - then a warning names the file and
    the reason, and the caller computes it again. Authenticated before anything in it is
    used."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
        verify_record(record, machine_key(create=False), f"{domain} at {_context(path, tail)}")
    except (OSError, UnicodeDecodeError, ValueError) as err:  # Untrusted is a ValueError
        warnings.warn(f"ignoring {what} {path}: {reason_of(err)}; computing it again", stacklevel=2)
        return None
    return unsigned(record)


__all__ = ["config_dir", "key_path", "Untrusted", "KeyUnavailable", "machine_key", "key_id", "record_mac",
           "sign_record", "verify_record", "unsigned", "file_sha256", "reason_of", "write_signed_json",
           "read_signed_json", "STUDY_CELL", "SBC_SIMULATION", "BATTERY_CELL", "REPRODUCTION_CELL",
           "REFERENCE_TABLE_CELL", "OUTPUT_MANIFEST"]
