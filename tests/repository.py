"""Where the repository lies, for the tests that read its files (sources, notebooks,
benchmarks, examples): one definition, so a test file can move between the folders of
tests/ without counting parent directories. Importable as ``repository`` because pytest
puts tests/ (the folder of the root conftest.py) on sys.path."""
from pathlib import Path

#: the repository's root folder (the one holding pyproject.toml)
REPO = Path(__file__).resolve().parent.parent
