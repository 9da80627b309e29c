"""The repository stands alone: nothing in it points at material users do not have, and
every citation of DERIVATIONS.md names a section that exists.

* no tracked file points at the team's private folder beside the repository or cites its
  private derivation notes (the two words are assembled below, so this file itself points
  nowhere);
* every ``DERIVATIONS.md §N`` / ``§N.M`` in a tracked file is a heading of DERIVATIONS.md
  (a citation like ``§2.3`` right after one to DERIVATIONS.md counts as well);
* Python sources outside ``benchmarks/`` quote no machine-specific timings ("2-core").
The checkers are functions of text, shown to catch planted defects, so the tests can fail.
"""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from repository import REPO


_PRIVATE_FOLDER = "../" + "sha" + "red"
_PRIVATE_NOTES = "NO" + "TES"
_OUTSIDE = re.compile(re.escape(_PRIVATE_FOLDER) + r"|\b" + _PRIVATE_NOTES + r"(\.md)?\b")
_HEADING = re.compile(r"^#+\s+§(\d+(?:\.\d+)?)\s", re.MULTILINE)
# "DERIVATIONS.md §2.4", "DERIVATIONS.md, §2.4", and further "§x.y" on the same line after it
_CITATION = re.compile(r"DERIVATIONS\.md,?\s+((?:§\d+(?:\.\d+)?[\s,;)/and-]*)+)")
_SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
_MACHINE = re.compile(r"\b2-core\b|\b2 (busy )?cores\b")


def _tracked_files() -> list[pathlib.Path]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / line for line in out.stdout.splitlines() if line]


def _text(path: pathlib.Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
        return None  # binary data file, or deleted in the working tree


def outside_references(text: str) -> list[str]:
    """Lines that point outside the repository."""
    return [line.strip() for line in text.splitlines() if _OUTSIDE.search(line)]


def derivation_sections(document: str) -> set[str]:
    return set(_HEADING.findall(document))


def unknown_citations(text: str, sections: set[str]) -> list[str]:
    """Sections cited as DERIVATIONS.md §N(.M) that the document does not have."""
    cited = [s for group in _CITATION.findall(text) for s in _SECTION.findall(group)]
    return sorted({s for s in cited if s not in sections})


def test_nothing_points_outside_the_repository():
    offenders = {}
    for path in _tracked_files():
        if path.name == "test_standalone.py":
            continue  # this file names what it looks for
        text = _text(path)
        if text is not None and (lines := outside_references(text)):
            offenders[str(path.relative_to(REPO))] = lines[:3]
    assert offenders == {}


def test_every_citation_of_the_derivations_exists():
    sections = derivation_sections((REPO / "DERIVATIONS.md").read_text(encoding="utf-8"))
    assert {"1.1", "1.5", "2.5", "3.3", "4"} <= sections  # the document has its structure
    bad = {}
    for path in _tracked_files():
        if path.name == "test_standalone.py":
            continue  # its planted defects cite sections that do not exist, on purpose
        text = _text(path)
        if text is not None and (missing := unknown_citations(text, sections)):
            bad[str(path.relative_to(REPO))] = missing
    assert bad == {}


def test_no_machine_specific_timings_in_the_sources():
    offenders = [str(p.relative_to(REPO)) for p in _tracked_files()
                 if p.suffix == ".py" and "benchmarks" not in p.parts and p.name != "test_standalone.py"
                 and (t := _text(p)) is not None and _MACHINE.search(t)]
    assert offenders == []


def test_the_checkers_catch_planted_defects():
    assert outside_references(f"see {_PRIVATE_FOLDER}/reference for the proof")
    assert outside_references(f"as {_PRIVATE_NOTES} 3.4 says")
    assert not outside_references(f"{_PRIVATE_NOTES}TAKING is a word; notes are fine")
    sections = derivation_sections("# title\n## §1 PCVM\n### §1.2 EM\n")
    assert sections == {"1", "1.2"}
    assert unknown_citations("(DERIVATIONS.md §1.2)", sections) == []
    assert unknown_citations("(DERIVATIONS.md §1.3)", sections) == ["1.3"]
    assert unknown_citations("DERIVATIONS.md §1.2 and §7.1", sections) == ["7.1"]
    assert _MACHINE.search("measured on the 2-core machine")
