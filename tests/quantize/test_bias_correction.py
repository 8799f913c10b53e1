"""Empirical bias correction: sequential, exact in the JSON round trip, chosen by output SQNR."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.calibrate.collect import CalibrationPlan, calibrate
from quantcore.data import DataSet
from quantcore.ir import Graph
from quantcore.quantize import params_json
from quantcore.quantize.bias_correction import Corrected, correct_biases, corrected_layers, with_corrections
from quantcore.quantize.document import DocumentError, from_document
from quantcore.quantize.graph import QuantConfig, quantize_graph
from quantcore.quantize.mixed_precision import Move, output_move
from quantcore.verify.evaluate import int8_outputs
from tests.onnx_models import outlier_cnn, small_cnn


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
    corrected, first, _, _ = correct_biases(model.graph, model.float_model, plain, data)
    assert set(first) == {n.name for n in corrected_layers(model.graph, plain)} and len(first) == 4
    assert max(float(np.abs(v).max()) for v in first.values()) > 1e-4  # there was something to correct
    again, second, _, _ = correct_biases(model.graph, model.float_model, corrected, data)
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


@pytest.fixture(scope="module")
def logits_model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    """A net whose output layer can move to int16 (a fully connected layer, no softmax after it)."""
    path = tmp_path_factory.mktemp("bc") / "logits.onnx"
    onnx.save(outlier_cnn(factor=1.0), path)
    return pipeline.load_model(path)


def _output_trial(model: pipeline.LoadedModel, data: DataSet) -> tuple[Corrected, Graph, Move]:
    """As pipeline._choose_output builds it: the corrected int8 graph's run keeping the tensor the output
    layer reads, and the graph with the output layer at int16 and the other layers' corrections."""
    graph = model.graph
    calibration, _ = calibrate(graph, model.float_model, data, CalibrationPlan())
    config = QuantConfig(lower_pools=False)
    move = output_move(graph)
    assert isinstance(move, Move) and move.layers == {"fc"}
    cut = frozenset(graph.node(name).inputs[0] for name in move.layers)
    best = correct_biases(
        graph, model.float_model, quantize_graph(graph, calibration, config), data, keep=cut
    )
    assert best.prefix.tensors.keys() == cut and best.prefix.float_means.keys() == best.corrections.keys()
    wide = quantize_graph(graph, calibration, dataclasses.replace(config, int16_layers=move.layers))
    kept = {name: c for name, c in best.corrections.items() if name not in move.layers}
    return best, with_corrections(graph, wide, kept), move


def _assert_same_run(one: Corrected, other: Corrected) -> None:
    assert one.corrections.keys() == other.corrections.keys()
    for name in one.corrections:
        np.testing.assert_array_equal(one.corrections[name], other.corrections[name])
    for node in corrected_layers(one.qgraph, one.qgraph):
        bias = node.inputs[2]
        np.testing.assert_array_equal(one.qgraph.constant(bias), other.qgraph.constant(bias))
    np.testing.assert_array_equal(one.outputs, other.outputs)


def test_a_run_started_from_a_kept_tensor_runs_the_tail_alone_and_gives_the_whole_runs_bits(
    logits_model: pipeline.LoadedModel,
) -> None:
    """The int16-output trial re-measures the output layer alone: started from the int8 tensor the
    candidate's correcting run kept, it runs only the nodes after it - the same corrections, biases and
    outputs, bit for bit, as running the whole trial graph."""
    data = _data(96, 4)
    best, wide, move = _output_trial(logits_model, data)
    full = correct_biases(logits_model.graph, logits_model.float_model, wide, data, only=move.layers)
    tail = correct_biases(
        logits_model.graph, logits_model.float_model, wide, data, only=move.layers, start=best.prefix
    )
    assert full.corrections.keys() == {"fc"}
    _assert_same_run(tail, full)
    # The kept tensor is what the tail read: other values there give other outputs.
    shifted = {name: np.where(v < 127, v + 1, v).astype(v.dtype) for name, v in best.prefix.tensors.items()}
    moved = correct_biases(
        logits_model.graph,
        logits_model.float_model,
        wide,
        data,
        only=move.layers,
        start=best.prefix._replace(tensors=shifted),
    )
    assert not np.array_equal(moved.outputs, full.outputs)


def test_a_kept_tensor_made_by_other_layers_is_not_used(logits_model: pipeline.LoadedModel) -> None:
    """A prefix whose graph computes the kept tensor differently (here: the layers before it uncorrected)
    is ignored: the run starts from the input, as without it."""
    data = _data(96, 4)
    best, wide, move = _output_trial(logits_model, data)
    uncorrected = with_corrections(
        logits_model.graph, best.qgraph, {name: 0 * c for name, c in best.corrections.items()}
    )
    stale = correct_biases(
        logits_model.graph,
        logits_model.float_model,
        uncorrected,
        data,
        only=move.layers,
        keep=frozenset(best.prefix.tensors),
    )
    assert any(not np.array_equal(stale.prefix.tensors[k], v) for k, v in best.prefix.tensors.items())
    full = correct_biases(logits_model.graph, logits_model.float_model, wide, data, only=move.layers)
    _assert_same_run(
        correct_biases(
            logits_model.graph, logits_model.float_model, wide, data, only=move.layers, start=stale.prefix
        ),
        full,
    )
