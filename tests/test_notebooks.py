"""Every notebook in notebooks/ runs top to bottom without a cell error.

Each notebook is executed with nbclient in a fresh ``python3`` kernel whose working
directory is a temporary folder. The kernel finds ``zoo`` where this test process found
it (an installed package, or the source checkout via PYTHONPATH), and uses the session's
NUTS cache (ZOO_CACHE_DIR), so it never writes into the user's home cache; a reference
already computed by test_compare.py is read back instead of being sampled again.
Temporary files of the kernel (TMPDIR) also go under pytest's tmp_path.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import zoo

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
#: seconds per cell: far above any cell's run time, so only a hung cell fails
CELL_TIMEOUT = 600


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, (
                f"{path.name}: code cell {i} has stored outputs; clear them before committing"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch, nuts_cache_dir):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")

    # the folder that holds the `zoo` package this process imported: site-packages when
    # installed, the repository root in a source checkout
    zoo_parent = str(Path(zoo.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [zoo_parent, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("ZOO_CACHE_DIR", str(nuts_cache_dir))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # files a notebook puts in tempfile.mkdtemp() land under tmp_path and are cleaned up
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        pytest.fail(f"{path.name} failed:\n{err}")
    errors = [
        out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
