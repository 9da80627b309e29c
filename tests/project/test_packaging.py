"""What `pip install .` installs: every package folder of the project, or the installed zoo
misses modules that an editable install (or the repository on sys.path) still finds - CI's
fresh environment met `No module named 'zoo.validation.report'` that way."""
from __future__ import annotations

import pathlib
import tomllib

from repository import REPO
from test_layering import FOLDERS, modules_of  # the project's folders and modules, as the layering test reads them


def package_folders(root: pathlib.Path) -> set[str]:
    """The dotted name of every folder with an ``__init__.py`` under the project's folders."""
    return {module for module, path in modules_of(root).items() if path.name == "__init__.py"}


def unlisted(root: pathlib.Path, listed) -> list[str]:
    """Package folders that the list of installed packages leaves out."""
    return sorted(package_folders(root) - set(listed))


def test_every_package_folder_is_installed():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    assert setuptools["package-dir"] == {package: folder for folder, package in FOLDERS.items()}
    assert unlisted(REPO, setuptools["packages"]) == []
    assert not set(setuptools["packages"]) - package_folders(REPO)  # nothing listed that is not there


def test_a_package_folder_left_out_is_named(tmp_path):
    for folder in ("zoo", "validation/report", "validation/runs/studies"):
        (tmp_path / folder).mkdir(parents=True)
    for init in ("zoo", "validation", "validation/report"):
        (tmp_path / init / "__init__.py").write_text("")
    assert unlisted(tmp_path, ["zoo", "zoo.validation"]) == ["zoo.validation.report"]
