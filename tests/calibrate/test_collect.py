"""The calibration stage over a graph: methods per layer, and bounded activations kept at their bound."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.calibrate.errors import NonFiniteBatchError
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.data import DataSet
from quantcore.ir import Graph
from quantcore.passes import prepare
from quantcore.runtime import float_exec
from tests.ir_builder import GraphBuilder


class _Float:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]:
        return float_exec.run(self.graph, feeds)


def _relu6_net() -> tuple[Graph, DataSet]:
    b = GraphBuilder((1, 2, 6, 6), seed=3)
    graph = prepare(b.conv(4, 1).clip(0.0, 6.0).conv(3, 1).build())
    # Large inputs drive most ReLU6 outputs into saturation at 6.
    x = np.random.default_rng(0).normal(0, 40, (64, 6, 6, 2)).astype(np.float32)
    return graph, DataSet(x)


def test_entropy_never_clips_a_relu6_below_the_bound_it_saturates_at() -> None:
    graph, data = _relu6_net()
    relu6_out = graph.nodes[0].outputs[0]
    env = float_exec.run(graph, {"input": data.x})
    assert np.mean(env[relu6_out] == 6.0) > 0.3  # the spike the methods would read as a tail
    calibration, _ = calibrate(graph, _Float(graph), data, CalibrationPlan(RangeMethod(Method.ENTROPY)))
    assert calibration.ranges[relu6_out] == (0.0, 6.0)


def test_mse_s_own_clip_of_a_relu6_stands() -> None:
    """MSE weighs what clipping costs: where few values reach the top, its clip is kept (entropy's not)."""
    b = GraphBuilder((1, 2, 6, 6), seed=3)
    graph = prepare(b.conv(4, 1).clip(0.0, 6.0).conv(3, 1).build())
    x = np.random.default_rng(0).normal(0, 1, (64, 6, 6, 2)).astype(np.float32)
    x[0, 0, 0] = 40.0  # one pixel drives a few outputs to the top of the range
    out = graph.nodes[0].outputs[0]
    ranges = {}
    for method in (Method.MSE, Method.ENTROPY):
        calibration, _ = calibrate(graph, _Float(graph), DataSet(x), CalibrationPlan(RangeMethod(method)))
        ranges[method] = calibration.ranges[out][1]
        top = calibration.observed[out][1]
    assert ranges[Method.ENTROPY] == top
    assert 0.9 * top < ranges[Method.MSE] < top


def test_per_layer_methods_apply_to_that_layer_only() -> None:
    graph, data = _relu6_net()
    first, second = graph.nodes[0], graph.nodes[1]
    plan = CalibrationPlan(
        RangeMethod(Method.MINMAX), {second.name: RangeMethod(Method.PERCENTILE, percentile=90.0)}
    )
    calibration, summary = calibrate(graph, _Float(graph), data, plan)
    assert calibration.methods[first.outputs[0]] == "minmax"
    assert calibration.methods[second.outputs[0]] == "percentile"
    lo, hi = calibration.ranges[second.outputs[0]]
    observed = calibration.observed[second.outputs[0]]
    assert observed[0] < lo and hi < observed[1]  # percentile 90 clips both tails; minmax would not
    assert summary == {
        "method": "minmax",
        "samples": 64,
        "percentile": 90.0,
        "per_layer": {second.name: "percentile"},
    }


def test_non_finite_activations_name_the_tensor_with_and_without_histograms() -> None:
    graph, data = _relu6_net()
    bad = graph.nodes[1].outputs[0]

    class Poisoned(_Float):
        def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]:
            values = super().activations(feeds)
            values[bad] = values[bad].copy()
            values[bad].flat[:3] = np.nan
            return values

    for method in (Method.MINMAX, Method.ENTROPY):  # min/max runs without histograms
        with pytest.raises(NonFiniteBatchError, match=f"'{bad}'.*3 non-finite"):
            calibrate(graph, Poisoned(graph), data, CalibrationPlan(RangeMethod(method)))
