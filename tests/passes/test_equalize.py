"""Cross-layer equalization keeps the float function, evens out per-channel ranges, skips what it must,
and the quantizer uses it when (and only when) it raises the output SQNR."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.ir import Graph, Layout, Op
from quantcore.passes import prepare
from quantcore.passes.equalize import ChannelScaled, equalize, find_pairs
from quantcore.quantize import params_json
from quantcore.quantize.document import from_document
from quantcore.runtime.float_exec import run
from tests.ir_builder import GraphBuilder
from tests.onnx_models import outlier_cnn


def _outputs(graph: Graph, x_nchw: np.ndarray) -> dict[str, np.ndarray]:
    x = x_nchw.transpose(0, 2, 3, 1) if graph.tensor("input").layout is Layout.NHWC else x_nchw
    return run(graph, {"input": x})


def _chain(relu6: bool = False) -> Graph:
    b = GraphBuilder((1, 3, 10, 10), seed=3)
    b.conv(6, 3, pad=1)
    b.clip(0.0, 6.0) if relu6 else b.relu()
    b.pool(Op.MAX_POOL, 2, 2).conv(8, 3, pad=1).relu().gap().flatten().fc(4)
    return prepare(b.build())


def _ranges(graph: Graph, node: str, axis: int) -> np.ndarray:
    w = np.abs(graph.constant(graph.node(node).inputs[1]))
    return w.max(axis=tuple(a for a in range(w.ndim) if a != axis % w.ndim))


def test_the_function_is_unchanged_and_activations_are_divided_by_the_recorded_divisors() -> None:
    graph = _chain()
    result = equalize(graph)
    x = np.random.default_rng(1).normal(size=(4, 3, 10, 10))
    before, after = _outputs(graph, x), _outputs(result.graph, x)
    out = graph.outputs[0]
    # Rescaled weights are stored in float32, like the model's: float32 rounding differences only.
    np.testing.assert_allclose(after[out], before[out], rtol=1e-5, atol=1e-5)
    assert set(result.divisors) == {t for p in result.pairs for t in p.tensors}
    for name, divisor in result.divisors.items():
        np.testing.assert_allclose(after[name], before[name] / divisor, rtol=1e-5, atol=1e-5)


def test_a_chain_of_pairs_ends_with_equal_ranges_on_both_sides_of_every_pair() -> None:
    graph = _chain()
    result = equalize(graph)
    assert [(p.producer, p.consumer) for p in result.pairs] == [
        (graph.nodes[0].name, graph.nodes[2].name),
        (graph.nodes[2].name, graph.nodes[5].name),
    ]
    for pair in result.pairs:
        axis = 3 if result.graph.node(pair.producer).op is Op.DEPTHWISE_CONV2D else 0
        r1 = _ranges(result.graph, pair.producer, axis)
        r2 = _ranges(result.graph, pair.consumer, -1)
        # The sweeps stop when every scale is within 1e-4 (log) of 1: ranges agree to that.
        np.testing.assert_allclose(r1, r2, rtol=1e-3)


def test_an_outlier_channel_comes_back_into_line(outlier_model: pipeline.LoadedModel) -> None:
    graph = outlier_model.graph
    producer = graph.nodes[0]
    before = _ranges(graph, producer.name, 0)
    after = _ranges(equalize(graph).graph, producer.name, 0)
    assert before[2] / np.median(before) > 20  # the planted outlier
    assert after[2] / np.median(after) < 4


def test_relu6_residual_branches_and_spatial_flattens_are_not_equalized() -> None:
    assert [p.producer for p in find_pairs(_chain(relu6=True))] == [_chain(relu6=True).nodes[2].name]

    b = GraphBuilder((1, 4, 8, 8), seed=5)
    skip = b.conv(4, 3, pad=1).relu().current
    b.conv(4, 3, pad=1).relu().add(skip).conv(4, 1)
    graph = prepare(b.build())
    # conv0's output feeds conv1 and the add (rescaling it would change the sum); conv1 feeds the add.
    assert find_pairs(graph) == []

    b = GraphBuilder((1, 2, 6, 6), seed=6)
    b.conv(3, 3, pad=1).relu().flatten().fc(5)
    assert find_pairs(prepare(b.build())) == []


def test_channel_scaled_maps_the_original_models_activations_onto_the_equalized_graph() -> None:
    graph = _chain()
    result = equalize(graph)

    class Original:
        def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]:
            return run(graph, {"input": feeds["input"].transpose(0, 2, 3, 1)})

    x = np.random.default_rng(2).normal(size=(2, 3, 10, 10))
    mapped = ChannelScaled(Original(), result.divisors).activations({"input": x}, layout=False)
    direct = _outputs(result.graph, x)
    for name in result.divisors:
        np.testing.assert_allclose(mapped[name], direct[name], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def outlier_model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("cle") / "outlier.onnx"
    onnx.save(outlier_cnn(factor=40.0), path)
    return pipeline.load_model(path)


def _calibration(n: int = 64) -> DataSet:
    return DataSet(np.random.default_rng(4).uniform(0, 1, (n, 1, 16, 16)).astype(np.float32), None)


def test_auto_mode_equalizes_the_outlier_model_and_records_why(outlier_model: pipeline.LoadedModel) -> None:
    data = _calibration()
    auto = pipeline.quantize(outlier_model, data)
    entry = auto.document["transforms"]["cross_layer_equalization"]
    assert entry["mode"] == "auto" and entry["applied"] is True
    assert entry["pairs"] == [["conv1", "conv2"], ["conv2", "fc"]]
    assert entry["output_sqnr_db"]["on"] > entry["output_sqnr_db"]["off"] + 6  # the outlier cost > 1 bit
    assert params_json.validate(json.loads(json.dumps(auto.document))) == []

    assert entry["spread"] > 30  # channel 2 was made 40x wider than its neighbours

    off = pipeline.quantize(outlier_model, data, pipeline.QuantizeOptions(equalize=False))
    off_entry = off.document["transforms"]["cross_layer_equalization"]
    assert off_entry == {"mode": "off", "applied": False, "pairs": entry["pairs"], "spread": entry["spread"]}
    report_on = pipeline.evaluate(outlier_model, auto.document, data)
    report_off = pipeline.evaluate(outlier_model, off.document, data)
    assert report_on.output_sqnr_db > report_off.output_sqnr_db + 10  # 51.01 against 38.45 dB measured
    # Per-layer figures compare like with like: the equalized graph against the rescaled float values.
    assert min(layer.sqnr_db for layer in report_on.layers) > 41  # worst layer 44.02 dB measured


def test_auto_mode_does_not_score_a_model_whose_channels_are_already_in_line(tmp_path: Path) -> None:
    path = tmp_path / "plain.onnx"
    onnx.save(outlier_cnn(factor=1.0), path)
    model = pipeline.load_model(path)
    entry = pipeline.quantize(model, _calibration()).document["transforms"]["cross_layer_equalization"]
    assert entry["applied"] is False and "output_sqnr_db" not in entry
    assert 1.0 < entry["spread"] <= pipeline.EQUALIZE_SPREAD


def test_a_graph_rebuilt_from_the_document_replays_equalization(
    outlier_model: pipeline.LoadedModel, tmp_path: Path
) -> None:
    result = pipeline.quantize(outlier_model, _calibration(), pipeline.QuantizeOptions(equalize=True))
    params_json.write(tmp_path / "p.json", result.document)
    rebuilt = from_document(outlier_model.graph, params_json.load(tmp_path / "p.json"))
    for node in result.qgraph.nodes:
        for name in node.inputs[1:]:
            if name and result.qgraph.tensor(name).is_constant:
                np.testing.assert_array_equal(rebuilt.constant(name), result.qgraph.constant(name))
