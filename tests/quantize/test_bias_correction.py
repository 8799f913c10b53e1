"""Empirical bias correction: sequential, exact in the JSON round trip, chosen by output SQNR."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.quantize import params_json
from quantcore.quantize.bias_correction import correct_biases, corrected_layers
from quantcore.quantize.document import DocumentError, from_document
from quantcore.verify.evaluate import int8_outputs
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("bc") / "small.onnx"
    onnx.save(small_cnn(seed=3), path)
    return pipeline.load_model(path)


def _data(n: int, seed: int) -> DataSet:
    # Inputs with a non-zero mean, as images have: weight rounding then shifts every output's mean.
    return DataSet(np.random.default_rng(seed).uniform(0, 1, (n, 1, 16, 16)).astype(np.float32), None)


def _forced(model: pipeline.LoadedModel, on: bool) -> pipeline.QuantizeResult:
    return pipeline.quantize(model, _data(96, 1), pipeline.QuantizeOptions(bias_correction=on))


def test_each_layer_is_corrected_on_inputs_from_corrected_layers(model: pipeline.LoadedModel) -> None:
    """Run again on its own result, the correction finds exactly the same values and leaves the graph as
    it is: every layer was measured on inputs the earlier layers' corrections had already moved. (Measured
    all at once on the uncorrected graph, the values would change on the second run.)"""
    plain = _forced(model, False).qgraph
    data = _data(96, 1)
    corrected, first, _ = correct_biases(model.graph, model.float_model, plain, data)
    assert set(first) == {n.name for n in corrected_layers(model.graph, plain)} and len(first) == 4
    assert max(float(np.abs(v).max()) for v in first.values()) > 1e-4  # there was something to correct
    again, second, _ = correct_biases(model.graph, model.float_model, corrected, data)
    assert second.keys() == first.keys()
    for name in first:
        np.testing.assert_array_equal(second[name], first[name])
        bias = corrected.node(name).inputs[2]
        np.testing.assert_array_equal(again.constant(bias), corrected.constant(bias))


def test_the_document_records_the_corrections_and_a_rebuilt_graph_has_the_same_biases(
    model: pipeline.LoadedModel, tmp_path: Path
) -> None:
    result = _forced(model, True)
    entry = result.document["transforms"]["bias_correction"]
    assert entry["mode"] == "on" and entry["applied"] is True and entry["samples"] == 96
    assert params_json.validate(json.loads(json.dumps(result.document))) == []
    params_json.write(tmp_path / "p.json", result.document)
    rebuilt = from_document(model.graph, params_json.load(tmp_path / "p.json"))
    plain = _forced(model, False).qgraph
    changed = 0
    for name in entry["layers"]:
        bias = result.qgraph.node(name).inputs[2]
        np.testing.assert_array_equal(rebuilt.constant(bias), result.qgraph.constant(bias))
        changed += int(np.count_nonzero(result.qgraph.constant(bias) != plain.constant(bias)))
    assert changed > 0


def test_auto_mode_keeps_the_correction_only_when_it_scores_higher(model: pipeline.LoadedModel) -> None:
    auto = pipeline.quantize(model, _data(96, 1)).document["transforms"]["bias_correction"]
    scores = auto["output_sqnr_db"]
    assert auto["mode"] == "auto" and auto["applied"] is (scores["on"] > scores["off"])
    off = _forced(model, False).document["transforms"]["bias_correction"]
    assert off == {"mode": "off", "applied": False}


def test_the_correction_lifts_the_output_sqnr_on_held_out_samples(model: pipeline.LoadedModel) -> None:
    held_out = _data(200, 7)
    on = pipeline.evaluate(model, _forced(model, True).document, held_out).output_sqnr_db
    off = pipeline.evaluate(model, _forced(model, False).document, held_out).output_sqnr_db
    assert on > off


def test_a_correction_of_the_wrong_length_names_the_layer(model: pipeline.LoadedModel) -> None:
    document = copy.deepcopy(_forced(model, True).document)
    layer, values = next(iter(document["transforms"]["bias_correction"]["layers"].items()))
    document["transforms"]["bias_correction"]["layers"][layer] = values[:-1]
    with pytest.raises(
        DocumentError, match=rf"bias_correction\.layers\[{layer!r}\]: {len(values) - 1} values"
    ):
        from_document(model.graph, document)


def test_per_tensor_weights_with_a_depthwise_layer_round_trip(model: pipeline.LoadedModel) -> None:
    """Per-tensor weight scales have no axis: the depthwise layer's channel count comes from its op."""
    options = pipeline.QuantizeOptions(per_channel=False, bias_correction=True)
    result = pipeline.quantize(model, _data(96, 1), options)
    rebuilt = from_document(model.graph, json.loads(json.dumps(result.document)))
    dw = next(n for n in result.qgraph.nodes if n.attr("kernel") == "arm_depthwise_conv_wrapper_s8")
    for name in dw.inputs[1:]:
        np.testing.assert_array_equal(rebuilt.constant(name), result.qgraph.constant(name))


def test_the_outputs_of_the_correcting_run_are_the_corrected_graphs(model: pipeline.LoadedModel) -> None:
    """The run that measures the corrections ends with the corrected graph's output on every sample: the
    same bits as running that graph afresh, so the automatic choice scores it without another run."""
    data = _data(96, 2)
    result = correct_biases(model.graph, model.float_model, _forced(model, False).qgraph, data)
    fresh = int8_outputs(result.qgraph, data, batch_size=40)
    assert result.outputs.shape == fresh.shape == (96, 10)
    np.testing.assert_array_equal(result.outputs, fresh)
