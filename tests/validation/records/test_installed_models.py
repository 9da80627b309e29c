"""Models installed packages declare in the entry-point group ``zoo.models``
(validation/records/registry.py): listed by ``zoo datasets`` and ``zoo compare --help`` beside
the five, found by name, and a broken or clashing entry point skipped with one warning naming
it - a package's bad model never stops the zoo. Each case runs in a fresh process whose path
holds a package installed as pip lays one out (a module and its .dist-info folder)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PACKAGE = textwrap.dedent('''
    import numpy as np
    import numpyro
    import numpyro.distributions as dist

    from zoo.validation.records.user_model import Model


    def normal_mean(n, y=None):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("n", n):
            numpyro.sample("y", dist.Normal(mu, 1.0), obs=y)


    NORMAL = Model(normal_mean, {"n": 3, "y": np.array([0.1, 0.5, -0.2])})
    NOT_A_MODEL = 3
''')

ENTRY_POINTS = textwrap.dedent('''
    [zoo.models]
    fake-normal = zoo_fake_models:NORMAL
    missing = zoo_fake_models:NOT_THERE
    three = zoo_fake_models:NOT_A_MODEL
    pcvm = zoo_fake_models:NORMAL
''')


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A folder holding an installed package with four zoo.models entry points: one good, one
    naming nothing, one naming a number, one taking a built-in model's name."""
    root = tmp_path_factory.mktemp("site")
    (root / "zoo_fake_models.py").write_text(PACKAGE)
    info = root / "zoo_fake_models-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zoo-fake-models\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    return root


def _zoo(installed, *argv, code=None):
    env = dict(os.environ, PYTHONPATH=str(installed) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "zoo.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=installed, timeout=300)


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "installed model" in line]


#: one fresh process: zoo datasets and zoo compare --help as the command line runs them, then
#: the installed model found by name (one process: each start imports JAX and the zoo)
PROBE = """
import contextlib, io
import zoo
from zoo.cli import main
from zoo.validation.records import registry
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["datasets"])
    try:
        main(["compare", "--help"])
    except SystemExit:
        pass
print(out.getvalue())
r = registry.get_model("fake-normal")
print("FOUND", r.name, r.own_data, r.prepare(None, {}).spec.name, registry.get_model("pcvm").title)
"""


def test_an_installed_model_is_listed_beside_the_five_and_a_bad_one_named(installed):
    run = _zoo(installed, code=PROBE)
    assert run.returncode == 0, run.stderr
    assert "models that bring their own data (zoo compare --model NAME):" in run.stdout
    assert "  fake-normal: fake-normal: a NumPyro model from outside the zoo (zoo_fake_models:normal_mean)" \
        in run.stdout
    assert "pcvm (default), ggsm-probit, gig-logistic, grid-rvm, bblr, fake-normal;" in " ".join(run.stdout.split())
    # found by its entry point's name, which is the model's name in the zoo; the built-in pcvm untouched
    found = next(line for line in run.stdout.splitlines() if line.startswith("FOUND "))
    assert found.split()[1:4] == ["fake-normal", "True", "fake-normal"] and "PCVM" in found
    # the three bad entry points: one line each, naming the entry point, its package and why
    said = _warnings(run.stderr)
    assert len(said) == 3, run.stderr
    assert any("installed model 'missing' (zoo_fake_models:NOT_THERE, package zoo-fake-models) not loaded: "
               "AttributeError" in line for line in said)
    assert any("installed model 'three' (zoo_fake_models:NOT_A_MODEL, package zoo-fake-models) not loaded: "
               "TypeError: a model is a Model (zoo.validation.records.user_model) or a ModelRecord, got int"
               in line for line in said)
    assert any("installed model 'pcvm' (zoo_fake_models:NORMAL, package zoo-fake-models) not loaded: the name "
               "'pcvm' is taken by another model" in line for line in said)
