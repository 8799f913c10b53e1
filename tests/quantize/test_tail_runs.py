"""Candidate graphs scored from where the previous one left off (quantcore/runtime/tail.py): a trial that
differs from the last graph scored only from some layer on runs only the layers after the tensors they
share - the same output bits as a whole run - and a graph that shares nothing runs whole."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.data import DataSet
from quantcore.ir import Graph, Op
from quantcore.quantize import lowering
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.runtime import tail
from quantcore.verify.evaluate import int8_outputs
from tests.onnx_models import outlier_cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path: Path = tmp_path_factory.mktemp("tail") / "outlier.onnx"
    onnx.save(outlier_cnn(factor=1.0), path)
    return pipeline.load_model(path)


def _data() -> DataSet:
    return DataSet(np.random.default_rng(6).uniform(0, 1, (72, 1, 16, 16)).astype(np.float32), None)


def _graphs(model: pipeline.LoadedModel, data: DataSet) -> dict[str, Graph]:
    """The graph as quantized, and the trials pipeline.quantize scores against it: its average pool as a
    depthwise convolution, its output layer at int16; and one with another first layer (equalized)."""
    graph = model.graph
    calibration, _ = calibrate(graph, model.float_model, data, CalibrationPlan())
    config = QuantConfig(lower_pools=False)
    pool = next(n.name for n in graph.nodes if n.op in (Op.AVG_POOL, Op.GLOBAL_AVG_POOL))
    fc = next(n.name for n in graph.nodes if n.op is Op.FULLY_CONNECTED)
    first = graph.nodes[0].name
    out = graph.node(first).outputs[0]
    low, high = calibration.ranges[out]
    wider = dataclasses.replace(calibration, ranges={**calibration.ranges, out: (low, 2 * high)})
    return {
        "base": quantize_graph(graph, calibration, config),
        "pool": quantize_graph(lowering.substitute(graph, [pool]), calibration, config),
        "int16 output": quantize_graph(
            graph, calibration, dataclasses.replace(config, int16_layers=frozenset({fc}))
        ),
        "first layer": quantize_graph(graph, wider, config),
    }


@pytest.mark.parametrize("trial", ["pool", "int16 output"])
def test_a_trial_scored_after_the_graph_runs_its_tail_alone_with_the_whole_runs_bits(
    model: pipeline.LoadedModel, trial: str
) -> None:
    data = _data()
    graphs = _graphs(model, data)
    base, other = graphs["base"], graphs[trial]
    given = tail.shared(base, other)
    needed = tail.needed(other, given)
    assert needed.inputs <= given and other.nodes[0].name not in needed.names  # the tail alone runs
    selection = pipeline._Selection(model, data, 64)
    np.testing.assert_array_equal(selection.int8(base), int8_outputs(base, data, batch_size=40))
    np.testing.assert_array_equal(selection.int8(other), int8_outputs(other, data, batch_size=40))


def test_the_tail_reads_the_kept_tensors(model: pipeline.LoadedModel) -> None:
    """Other values in the tensors kept from the last run give other outputs: they are what the trial
    read, not a run of its own."""
    data = _data()
    graphs = _graphs(model, data)
    selection = pipeline._Selection(model, data, 64)
    selection.int8(graphs["base"])
    assert selection._last is not None
    _, env = selection._last
    for name in tail.needed(graphs["pool"], tail.shared(graphs["base"], graphs["pool"]) & env.keys()).inputs:
        env[name] = np.where(env[name] < 127, env[name] + 1, env[name]).astype(env[name].dtype)
    assert not np.array_equal(selection.int8(graphs["pool"]), int8_outputs(graphs["pool"], data))


def test_a_graph_differing_from_its_first_layer_runs_whole(model: pipeline.LoadedModel) -> None:
    data = _data()
    graphs = _graphs(model, data)
    given = tail.shared(graphs["base"], graphs["first layer"])
    assert graphs["first layer"].inputs[0] in tail.needed(graphs["first layer"], given).inputs
    selection = pipeline._Selection(model, data, 64)
    selection.int8(graphs["base"])
    expected = int8_outputs(graphs["first layer"], data, batch_size=40)
    np.testing.assert_array_equal(selection.int8(graphs["first layer"]), expected)
