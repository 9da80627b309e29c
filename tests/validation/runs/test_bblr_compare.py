"""`zoo compare --model bblr --param flip=0.1` end to end at a size the long tier affords (`-m long`):
the BBLR2 spec from the (observed) class counts, SLA / laplace / slam / auto-laplace rows, the
modes figure and the label-noise figure."""
import json
import os

import numpy as np
import pytest

import zoo  # noqa: F401  (float64)
from zoo.validation.references import ReferenceConfig
from zoo.validation.report.compare_report import write_report
from zoo.validation.runs.compare import CompareConfig, compare


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # the record's NUTS (4 x 1000, doublings allowed): R-hat 1.0098 at 4 x 1000 here
    short = ReferenceConfig()
    comp = compare(CompareConfig(model="bblr", params={"flip": 0.1}, reference=short))
    out = tmp_path_factory.mktemp("bblr")
    return comp, write_report(comp, str(out)), str(out)


@pytest.mark.long
def test_bblr2_on_pima_with_its_four_engines(run):
    comp, _, _ = run
    res = comp.result.to_json()
    y = comp.prepared.y_train
    assert res["data"] == "pima" and res["hyper"]["b"] == 0.5 and res["reference"]["certified"]
    assert res["hyper"]["a"] == pytest.approx(np.mean(y) / 2)  # a = N+ / 2N
    assert set(res["engines"]) == {"sla", "laplace", "slam", "auto-laplace"}
    assert res["engines"]["sla"]["kind"] == "point" and res["engines"]["laplace"]["kind"] == "gaussian"
    assert res["engines"]["slam"]["kind"] == "point"
    slam = comp.posteriors["slam"].info.extra["slam"]
    assert slam["eta0"] in slam["eta0_grid"] and slam["step"] in slam["step_grid"]
    # the two Laplace engines reach the same mode (one from SLA, one from a random start)
    lap, auto = comp.posteriors["laplace"], comp.posteriors["auto-laplace"]
    np.testing.assert_allclose(lap.mean_flat(), auto.info.extra["mode"][:lap.dim], atol=1e-5)


@pytest.mark.long
def test_the_report_places_slas_answer_among_the_posteriors_modes(run):
    comp, files, out = run
    text = open(files["report"]).read()
    assert "Modes of the posterior" in text and os.path.getsize(os.path.join(out, "modes.png")) > 1000
    modes = json.load(open(os.path.join(out, "modes.json")))
    assert modes["n_starts"] == 200 and modes["point"]["stationary"]
    # the caption says which mode SLA's is, in the words of the analysis
    word = "main mode" if modes["point"]["is_main_mode"] else "not the main mode"
    assert word in text


@pytest.mark.long
def test_flipped_labels_are_the_same_draw_everywhere_and_the_report_shows_them(run):
    from zoo import data as datasets

    comp, files, out = run
    clean = datasets.load("pima", 0).y_train
    noisy, idx = datasets.flipped_labels(clean, 0.1, 0)
    assert len(idx) == round(0.1 * len(clean)) and np.all(noisy[idx] != clean[idx])
    np.testing.assert_array_equal(comp.prepared.y_train, noisy)  # what the engines and NUTS saw
    np.testing.assert_array_equal(datasets.flipped_labels(clean, 0.1, 0)[1], idx)
    text = open(files["report"]).read()
    assert f"{len(idx)} of {len(clean)} training labels flipped" in text
    assert os.path.getsize(os.path.join(out, "label_noise.png")) > 1000
    with pytest.raises(ValueError, match="fraction of flipped labels"):
        datasets.flipped_labels(clean, 0.6, 0)
