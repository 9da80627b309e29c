"""The device a command computes on (zoo/devices.py, ``--device``): chosen before JAX
starts, said in the report. Accelerator figures are in benchmarks/results/accelerator_check/;
here the choice logic runs on the CPU, each case in a fresh process (the platform can be
set only before JAX's first computation)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zoo import devices


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_command_line_starts_no_jax_backend():
    # the device can be chosen only before JAX starts; a module that computes at import
    # (a jnp constant) would take the choice away from every command
    got = _fresh("import json, zoo.cli; from zoo import devices; p = zoo.cli.build_parser(); "
                 "p.parse_args(['compare', '--device', 'cpu']); print(json.dumps(devices.backend_started()))")
    assert got is False


@pytest.mark.parametrize("requested, batched, wanted", [
    ("auto", False, "cpu"), ("auto", True, "accelerator"), ("cpu", True, "cpu"), ("accelerator", False, "accelerator")])
def test_the_choice_by_command(requested, batched, wanted):
    got = _fresh("import json, os, jax, zoo; from zoo import devices; "
                 f"c = devices.choose({requested!r}, batched={batched}); "
                 "print(json.dumps([c, jax.config.jax_platforms, os.environ.get('JAX_PLATFORMS'), "
                 "devices.describe(c)]))")
    choice, platforms, env, line = got
    assert choice["wanted"] == wanted and choice["requested"] == requested
    # cpu hides any accelerator from JAX, in this process and in the ones it starts (a
    # LocalCluster's workers read the environment); the others leave JAX's own choice
    assert (platforms == "cpu") == (wanted == "cpu") == (env == "cpu")
    assert line.startswith("cpu, ") and choice["why"] in line
    if wanted == "accelerator":  # this machine has none, and the line says so
        assert "no accelerator found, so the CPU" in line


def test_a_choice_after_jax_started_says_it_was_not_applied():
    got = _fresh("import json, jax, zoo; jax.numpy.ones(2).sum(); from zoo import devices; "
                 "print(json.dumps(devices.choose('cpu')))")
    assert "not applied: JAX had already started" in got["why"]


def test_an_unknown_device_is_refused_in_one_line(capsys):
    with pytest.raises(ValueError, match="--device must be one of auto, cpu, accelerator; got 'tpu'"):
        devices.choose("tpu")
    from zoo import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["compare", "--device", "tpu"])
    assert stop.value.code == 2 and "invalid choice: 'tpu'" in capsys.readouterr().err


def test_every_computing_command_takes_the_device():
    from zoo import cli

    parser = cli.build_parser()
    for argv in (["compare"], ["sbc"], ["study", "example"], ["reproduce", "gridrvm-fig3"]):
        assert parser.parse_args(argv + ["--device", "cpu"]).device == "cpu"
        assert parser.parse_args(argv).device == "auto"


def test_the_study_report_names_the_device(tmp_path):
    from zoo.validation.report.study_report import write_study_report
    from zoo.validation.runs.study import StudyConfig

    path = write_study_report(StudyConfig("s", {}), [], str(tmp_path), device="cpu (auto: small posteriors)")
    assert "Device: cpu (auto: small posteriors)" in open(path).read()
    path = write_study_report(StudyConfig("s", {}), [], str(tmp_path))
    assert "Device:" not in open(path).read()


def test_a_reference_s_chains_are_vectorized_on_an_accelerator_and_keyed_by_backend(monkeypatch):
    # on an accelerator "parallel" (one chain per device) cannot be had, and one chain after
    # another on a GPU was the slowest layout measured: the chains become lanes of one
    # program there; the draws then differ from the CPU's, so the cache key names the backend
    import jax
    import numpy as np

    from zoo.models.pcvm import PCVM
    from zoo.validation.references import ReferenceConfig
    from zoo.validation.references.cache import cache_key
    from zoo.validation.references.nuts import effective_chain_method

    config = ReferenceConfig()
    Phi, y = np.eye(4, 2), np.array([0.0, 1.0, 0.0, 1.0])
    on_cpu = (effective_chain_method(config), cache_key(PCVM(), Phi, y, config))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    on_gpu = (effective_chain_method(config), cache_key(PCVM(), Phi, y, config))
    assert on_cpu[0] == "parallel" and on_gpu[0] == "vectorized"
    assert on_cpu[1] != on_gpu[1]
    # a layout asked for by name is kept
    assert effective_chain_method(ReferenceConfig(chain_method="sequential")) == "sequential"
