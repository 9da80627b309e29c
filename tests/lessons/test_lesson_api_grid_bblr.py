"""The public pieces lessons 05 (gridRVM) and 06 (BBLR) use beyond tests/lessons/test_lesson_api.py:
gridRVM's relevance figure of a comparison as a Figure (no file, no pyplot), built from the
same panels ``zoo compare`` saves as relevance.png."""
from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
from matplotlib.figure import Figure

import zoo  # noqa: F401  (float64)
from zoo.models.base import Site
from zoo.validation.base import arviz_adapter
from zoo.models.grid_rvm import GridRVM
from zoo.validation.base.figures import axis_label_problems
from zoo.validation.records.grid_relevance import (
    comparison_figures,
    draw_relevance,
    relevance_comparison_figure,
    relevance_panels,
)


def _comparison(with_reference: bool = True):
    """A stand-in for a gridRVM Comparison: what the relevance figure reads of one."""
    spec = GridRVM((3, 2))
    rng = np.random.default_rng(0)
    alpha = rng.gamma(2.0, 0.5, size=(2, 50, 3))
    beta = rng.gamma(2.0, 0.5, size=(2, 50, 2))
    mean = np.arange(6.0) - 2.5
    reference = SimpleNamespace(idata=arviz_adapter.draws_to_idata(
        {"alpha": alpha, "beta": beta}, (Site("alpha", (3,)), Site("beta", (2,)))), sampler="nuts",
                                posterior=SimpleNamespace(mean_flat=lambda: mean))
    vb = SimpleNamespace(hyper_factors={"alpha": (np.full(3, 3.0), np.full(3, 2.0)),
                                        "beta": (np.full(2, 4.0), np.full(2, 1.0))},
                         mean_flat=lambda: 0.5 * mean)
    return SimpleNamespace(reference=reference if with_reference else None, prepared=SimpleNamespace(spec=spec),
                           variant_references={}, posteriors={"vb": vb}), alpha, mean


def test_relevance_panels_hold_the_reference_and_vb_quantiles():
    comp, alpha, mean = _comparison()
    (panel,) = relevance_panels(comp)
    assert set(panel["rows"]) == {"reference (nuts)", "vb"} and set(panel["columns"]) == {"reference (nuts)", "vb"}
    np.testing.assert_allclose(panel["rows"]["reference (nuts)"][1], np.median(1.0 / alpha.reshape(-1, 3), axis=0))
    np.testing.assert_allclose(panel["weights"], mean.reshape(3, 2))
    # VB's 1/alpha ~ inverse-Gamma(3, 2): quantiles in order, the median near 2 / 2.67
    q = panel["rows"]["vb"]
    assert np.all(q[0] < q[1]) and np.all(q[1] < q[2])
    np.testing.assert_allclose(q[1], 2.0 / 2.674, rtol=1e-3)


def test_relevance_comparison_figure_is_a_labelled_figure():
    comp, _, _ = _comparison()
    fig = relevance_comparison_figure(comp)
    assert isinstance(fig, Figure)
    assert axis_label_problems(fig) == []
    # the table, its colour bar, the row bars and the column bars
    assert len(fig.axes) == 4
    assert "reference against VB" in fig.get_suptitle()


def test_no_reference_no_figure():
    comp, _, _ = _comparison(with_reference=False)
    assert relevance_panels(comp) == []
    assert relevance_comparison_figure(comp) is None


def test_draw_relevance_labels_every_block_of_several_panels():
    comp, _, _ = _comparison()
    (panel,) = relevance_panels(comp)
    fig = draw_relevance([panel, dict(panel, title="second")], title="two panels")
    assert axis_label_problems(fig) == []
    assert len(fig.axes) == 8


def test_the_report_still_saves_the_same_figure(tmp_path):
    comp, _, _ = _comparison()
    out = comparison_figures(comp, str(tmp_path))
    assert set(out) == {"relevance", "weight_tables"}
    for path, caption in out.values():
        assert os.path.getsize(path) > 0 and caption
