"""Sphinx configuration of the zoo's documentation: the guide (README and docs/), the lessons
(notebooks/, as stored - executed by ``notebooks/refresh.py``, not here) and the API reference
generated from the docstrings (docs/api/).

Build (the README's command; CI runs it with warnings as errors):

    python -m sphinx -b html -W --keep-going -n -c docs . build/docs

The source folder is the repository root, so that the guide's links between README,
docs/, notebooks/ and the benchmarks' result files resolve as they do on disk; only the
files named in ``include_patterns`` are read.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))

project = "Sparse Bayesian classifier zoo"
author = "The zoo's developers"
copyright = "the zoo's developers, MIT licence"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "myst_nb",
    "zoo_api",
]

root_doc = "docs/index"
include_patterns = ["docs/**", "README.md", "CONTRIBUTING.md", "DERIVATIONS.md", "notebooks/*.ipynb", "notebooks/solutions/*.ipynb",
                    "benchmarks/README.md", "benchmarks/results/*.md", "benchmarks/results/**/*.md"]
# the accelerator check's raw reports name figures that were not kept (its README summarizes them)
exclude_patterns = ["build", "docs/_ext/**", "benchmarks/results/accelerator_check/run*/**"]

# the lessons are shown as stored: refresh.py executes them and checks their outputs
nb_execution_mode = "off"
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath", "amsmath"]

nitpicky = True
# names of other packages that docstrings and annotations mention; without network access
# (CI has none) their inventories cannot be read, so they are not cross-referenced
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|jnp|jax|numpyro|scipy|xr|xarray|az|arviz|matplotlib|sklearn|dask|distributed|pd)(\..*)?"),
    (r"py:.*", r"(Any|Callable|Iterable|Iterator|Sequence|Mapping|Optional|Union|Literal|TypeVar|Self)"),
    (r"py:.*", r"(typing|collections\.abc|os|pathlib|concurrent\.futures|abc|enum|dataclasses)\..*"),
    # annotations autodoc shows as written (``from __future__ import annotations``): a union or
    # a generic it cannot split into names is no cross-reference a reader follows
    (r"py:class", r".*[\[\]|'].*"),
]
autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "pydata_sphinx_theme"
html_title = "Sparse Bayesian classifier zoo"
html_theme_options = {"navigation_with_keys": False}
