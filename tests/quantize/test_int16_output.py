"""The int16 output layer: the move, the automatic choice by default, its record, its widened range, the
switch that turns it off, and the graph rebuilt from the file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore import cli, pipeline
from quantcore.data import DataSet
from quantcore.errors import InputError
from quantcore.ir import DType
from quantcore.quantize import params_json
from quantcore.quantize.document import from_document
from quantcore.quantize.mixed_precision import Budget, Move, output_move
from quantcore.quantize.precision import INT16_OUTPUT_MARGIN
from quantcore.runtime import int8_exec
from tests.onnx_models import outlier_cnn, small_cnn


def _data(n: int = 96, seed: int = 1) -> DataSet:
    return DataSet(np.random.default_rng(seed).uniform(0, 1, (n, 1, 16, 16)).astype(np.float32), None)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("out16") / "outlier.onnx"
    onnx.save(outlier_cnn(factor=1.0), path)
    return pipeline.load_model(path)


@pytest.fixture(scope="module")
def softmax_model(tmp_path_factory: pytest.TempPathFactory) -> pipeline.LoadedModel:
    path = tmp_path_factory.mktemp("out16") / "small.onnx"
    onnx.save(small_cnn(seed=1), path)
    return pipeline.load_model(path)


def _quantize(model: pipeline.LoadedModel, **options: object) -> pipeline.QuantizeResult:
    return pipeline.quantize(model, _data(), pipeline.QuantizeOptions(bias_correction=False, **options))  # type: ignore[arg-type]


def test_the_output_move_is_the_producer_of_the_output_through_the_flatten(
    model: pipeline.LoadedModel, softmax_model: pipeline.LoadedModel
) -> None:
    assert output_move(model.graph) == Move("logits", frozenset({"fc"}))
    reason = output_move(softmax_model.graph)
    assert reason == "layer 'softmax' (softmax) producing 'probs' has no CMSIS-NN s16 kernel"


def test_by_default_the_output_is_int16_with_a_widened_range_and_the_choice_is_recorded(
    model: pipeline.LoadedModel,
) -> None:
    result = _quantize(model)
    document = json.loads(json.dumps(result.document))
    assert params_json.validate(document) == []
    entry = document["transforms"]["int16_output"]
    assert entry["mode"] == "auto" and entry["applied"] is True and entry["layers"] == ["fc"]
    assert entry["margin"] == INT16_OUTPUT_MARGIN == 4.0
    assert entry["output_sqnr_db"]["on"] >= entry["output_sqnr_db"]["off"] + 0.1
    assert set(entry["memory"]) == {"off", "on"}
    logits = document["tensors"]["logits"]
    assert logits["dtype"] == "int16" and logits["zero_point"] == 0
    lo, hi = logits["observed"]["min"], logits["observed"]["max"]
    assert logits["range"] == {"min": 4 * lo, "max": 4 * hi}
    assert logits["scale"] == max(-4 * lo, 4 * hi) / 32767
    kernels = {layer["name"]: layer["kernel"] for layer in document["layers"]}
    assert kernels["fc"] == "arm_fully_connected_s16" and kernels["flat.to_int16"] == "fixpoint_requantize"
    # Only the output layer: every other layer stays int8.
    wide = [n.name for n in result.qgraph.nodes if result.qgraph.tensor(n.outputs[0]).dtype is DType.INT16]
    assert wide == ["flat.to_int16", "fc"]
    # The graph rebuilt from the file runs to the same int16 bytes.
    rebuilt = from_document(model.graph, document)
    x = {"x": _data(8, 5).x.transpose(0, 2, 3, 1)}
    ours = int8_exec.run(result.qgraph, int8_exec.quantize_inputs(result.qgraph, x))["logits"]
    theirs = int8_exec.run(rebuilt, int8_exec.quantize_inputs(rebuilt, x))["logits"]
    assert ours.dtype == np.int16 and np.array_equal(ours, theirs)


def test_the_int16_output_raises_the_output_sqnr_on_held_out_samples(model: pipeline.LoadedModel) -> None:
    held_out = _data(200, 9)
    on = pipeline.evaluate(model, _quantize(model).document, held_out)
    off = pipeline.evaluate(model, _quantize(model, int16_output=False).document, held_out)
    assert on.output_sqnr_db > off.output_sqnr_db  # 41.38 against 40.94 dB


def test_off_keeps_int8_logits(model: pipeline.LoadedModel) -> None:
    document = _quantize(model, int16_output=False).document
    assert document["transforms"]["int16_output"] == {"mode": "off", "applied": False}
    assert document["tensors"]["logits"]["dtype"] == "int8"
    assert all(layer["kernel"] != "fixpoint_requantize" for layer in document["layers"])


def test_a_budget_the_int16_output_does_not_fit_keeps_int8(model: pipeline.LoadedModel) -> None:
    """The int16 output must fit the budget like any automatic int16 choice (here the pool substituted
    as a depthwise convolution does not fit 1000 B either, and is not chosen)."""
    entry = _quantize(model, budget=Budget(ram=1000)).document["transforms"]["int16_output"]
    assert entry["applied"] is False and "output_sqnr_db" not in entry
    assert entry["reason"] == f"ram {entry['memory']['on']['ram']} B > budget 1000 B"
    fits = entry["memory"]["on"]["ram"]
    assert _quantize(model, budget=Budget(ram=fits)).document["transforms"]["int16_output"]["applied"]


def test_no_s16_kernel_for_the_producer(softmax_model: pipeline.LoadedModel) -> None:
    entry = _quantize(softmax_model).document["transforms"]["int16_output"]
    assert entry == {
        "mode": "auto",
        "applied": False,
        "reason": "layer 'softmax' (softmax) producing 'probs' has no CMSIS-NN s16 kernel",
    }
    with pytest.raises(InputError, match=r"small\.onnx: --int16-output on: layer 'softmax' \(softmax\)"):
        _quantize(softmax_model, int16_output=True)


def test_int16_auto_builds_on_the_int16_output(model: pipeline.LoadedModel) -> None:
    document = _quantize(model, int16_auto=True).document
    assert document["transforms"]["int16_output"]["applied"] is True
    trials = document["mixed_precision"]["trials"]
    assert trials and all(t["layers"] != ["fc"] for t in trials)  # the output move is made already
    assert document["tensors"]["logits"]["dtype"] == "int16"


def test_named_by_int16(model: pipeline.LoadedModel) -> None:
    entry = _quantize(model, int16_layers=frozenset({"fc"})).document["transforms"]["int16_output"]
    assert entry == {"mode": "auto", "applied": True, "layers": ["fc"], "reason": "named by --int16"}


def test_the_cli_switch_and_line(
    model: pipeline.LoadedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "calib.npy", _data().x)
    base = ["quantize", str(model.path), "--calib", str(tmp_path / "calib.npy"), "--bias-correction", "off"]
    assert cli.main([*base, "-o", str(tmp_path / "on.json")]) == 0
    entry = params_json.load(tmp_path / "on.json")["transforms"]["int16_output"]
    sqnr, memory = entry["output_sqnr_db"], entry["memory"]
    assert (
        f"int16 output: fc; calibration output SQNR {sqnr['off']:.2f} -> {sqnr['on']:.2f} dB; flash"
        f" {memory['off']['flash']} -> {memory['on']['flash']} B, ram {memory['off']['ram']} ->"
        f" {memory['on']['ram']} B\n"
    ) in capsys.readouterr().out
    assert cli.main([*base, "--int16-output", "off", "-o", str(tmp_path / "off.json")]) == 0
    assert "int16 output: off\n" in capsys.readouterr().out
    assert params_json.load(tmp_path / "off.json")["tensors"]["logits"]["dtype"] == "int8"


def test_bias_corrections_carry_over_to_the_int16_output_and_replay_from_the_file(
    model: pipeline.LoadedModel,
) -> None:
    """The corrections measured on the int8 graph are kept for the layers before the output, the output
    layer's is measured again; the file records them and a rebuilt graph runs to the same bytes."""
    options = pipeline.QuantizeOptions(bias_correction=True, int16_output=True)
    off = pipeline.quantize(model, _data(), dataclasses.replace(options, int16_output=False)).document
    result = pipeline.quantize(model, _data(), options)
    document = json.loads(json.dumps(result.document))
    assert document["transforms"]["int16_output"]["applied"] is True
    layers = document["transforms"]["bias_correction"]["layers"]
    before = off["transforms"]["bias_correction"]["layers"]
    assert list(layers) == list(before) and "fc" in layers
    assert {k: v for k, v in layers.items() if k != "fc"} == {k: v for k, v in before.items() if k != "fc"}
    assert layers["fc"] != before["fc"]
    fc = next(layer for layer in document["layers"] if layer["name"] == "fc")
    assert document["tensors"][fc["bias"]]["dtype"] == "int64"  # the s16 kernels' bias
    rebuilt = from_document(model.graph, document)
    x = {"x": _data(8, 5).x.transpose(0, 2, 3, 1)}
    ours = int8_exec.run(result.qgraph, int8_exec.quantize_inputs(result.qgraph, x))["logits"]
    theirs = int8_exec.run(rebuilt, int8_exec.quantize_inputs(rebuilt, x))["logits"]
    assert np.array_equal(ours, theirs)
