"""Where the repository lies, for the tests that read its files (sources, notebooks,
benchmarks, examples): one definition, so a test file can move between the folders of
tests/ without counting parent directories. Importable as ``repository`` because pytest
puts tests/ (the folder of the root conftest.py) on sys.path."""
from pathlib import Path

#: the repository's root folder (the one holding pyproject.toml)
REPO = Path(__file__).resolve().parent.parent


def notebook_refresh():
    """notebooks/refresh.py, the script that runs and stores the lessons (not a package module:
    loaded from its file, once per process, under one name)."""
    import importlib.util
    import sys

    name = "zoo_notebooks_refresh"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "notebooks" / "refresh.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it executes
        spec.loader.exec_module(module)
    return sys.modules[name]
