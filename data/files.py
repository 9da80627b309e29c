"""The data files shipped with the package, read as package resources.

Use :func:`open_text` / :func:`read_bytes` (``importlib.resources``) rather than file
paths, so that the files are found both in a source checkout and in an installed copy.
Origins, licences and checksums are in ``PROVENANCE.md`` and ``SHA256SUMS`` beside them.
"""
from __future__ import annotations

import hashlib
import io
from importlib import resources


def _resource(relative: str):
    node = resources.files(__package__)
    for part in relative.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        raise FileNotFoundError(
            f"data file {relative!r} is not in the zoo.data package; see data/PROVENANCE.md "
            "for the files that are shipped"
        )
    return node


def read_bytes(relative: str) -> bytes:
    """Bytes of the shipped file ``relative`` (a '/'-separated path inside data/)."""
    return _resource(relative).read_bytes()


def open_text(relative: str) -> io.StringIO:
    """The shipped file ``relative`` as a text stream (UTF-8)."""
    return io.StringIO(read_bytes(relative).decode("utf-8"))


def checksums() -> dict[str, str]:
    """The expected sha256 of every shipped data file, read from ``SHA256SUMS``."""
    expected: dict[str, str] = {}
    for line in read_bytes("SHA256SUMS").decode("ascii").splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            expected[name.strip()] = digest
    return expected


def verify() -> dict[str, bool]:
    """Recompute the sha256 of every file listed in ``SHA256SUMS``; map path -> match."""
    return {
        name: hashlib.sha256(read_bytes(name)).hexdigest() == digest
        for name, digest in checksums().items()
    }
