"""Layer sensitivity: each layer quantized alone, the gradient ranking, the command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore import cli, pipeline
from quantcore.data import DataSet
from quantcore.ir.io_layout import to_firmware
from quantcore.quantize import params_json
from quantcore.runtime import float_exec
from quantcore.verify.sensitivity import LayerSensitivity, SensitivityReport, gradient_magnitudes
from tests.onnx_models import outlier_cnn


def _data(n: int = 64, seed: int = 4, labels: bool = False) -> DataSet:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (n, 1, 16, 16)).astype(np.float32)
    return DataSet(x, rng.integers(0, 10, n) if labels else None)


def _project(tmp_path: Path, model: onnx.ModelProto, **options: object) -> tuple[pipeline.LoadedModel, dict]:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    loaded = pipeline.load_model(path)
    result = pipeline.quantize(loaded, _data(), pipeline.QuantizeOptions(**options))  # type: ignore[arg-type]
    params_json.write(tmp_path / "params.json", result.document)
    return loaded, result.document


def _one_conv() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b"),
    ]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes,
        "one_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_network_of_one_layer_loses_alone_exactly_what_it_loses_in_full(tmp_path: Path) -> None:
    # int8 output: with the int16 output quantize picks here (41.6 -> 50.0 dB), the input's int8 -> int16
    # conversion is a layer of the full graph that the conv quantized alone does not have (52.0 dB).
    model, document = _project(tmp_path, _one_conv(), int16_output=False)
    report = pipeline.sensitivity(model, document, _data(), gradients=False)
    assert [layer.name for layer in report.layers] == ["conv"]
    assert report.layers[0].output_sqnr_db == report.output_sqnr_db
    assert 38.6 < report.output_sqnr_db < 44.6  # 41.63 dB measured: 3 dB either side


def test_the_layer_reading_the_outlier_channel_ranks_first_until_equalization(tmp_path: Path) -> None:
    """conv1's channel 2 is 40x its neighbours and conv2 reads it through weights 40x smaller: conv2's
    per-output-channel weight scales, set by the other inputs' weights, leave those few levels, so conv2
    alone costs the most. Equalization evens the weights out and conv2 alone recovers."""
    data = _data(labels=True)
    model, plain = _project(tmp_path, outlier_cnn(factor=40.0), equalize=False, bias_correction=False)
    before = pipeline.sensitivity(model, plain, data, gradients=False)
    ranking = before.ranking()
    assert ranking[0].name == "conv2"
    assert ranking[0].output_sqnr_db < min(layer.output_sqnr_db for layer in ranking[1:]) - 6
    # The whole network is no better than its worst layer alone: the other layers only add noise.
    assert before.output_sqnr_db <= ranking[0].output_sqnr_db + 0.5
    assert all(layer.top1_drop_points is not None for layer in before.layers)
    _, equalized = _project(tmp_path, outlier_cnn(factor=40.0), equalize=True, bias_correction=False)
    after = pipeline.sensitivity(model, equalized, data, gradients=False)
    conv2 = {layer.name: layer.output_sqnr_db for layer in after.layers}["conv2"]
    assert conv2 > ranking[0].output_sqnr_db + 20 and after.output_sqnr_db > before.output_sqnr_db + 15


def test_the_gradient_of_the_logits_is_softmax_minus_the_label(tmp_path: Path) -> None:
    """For the layer producing the logits, d(cross-entropy)/d(logits) = softmax(z) - onehot(y): its mean
    magnitude, computed here in numpy, must be what torch's autograd found."""
    model, _ = _project(tmp_path, outlier_cnn(factor=1.0))
    data = _data(48, labels=True)
    grads = gradient_magnitudes(model.graph, data, batch_size=16)
    x = to_firmware(model.graph, model.graph.inputs[0], data.x)
    z = float_exec.run(model.graph, {model.graph.inputs[0]: x})[model.graph.outputs[0]]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert data.y is not None
    p[np.arange(len(z)), data.y] -= 1.0
    # float32 in torch against float64 here: agreement to 1e-6 relative.
    assert grads["fc"] == pytest.approx(float(np.abs(p).mean()), rel=1e-5)
    assert set(grads) == {n.name for n in model.graph.nodes if n.op.computes}


def test_the_command_prints_the_table_and_writes_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(tmp_path, outlier_cnn(factor=40.0), equalize=False, bias_correction=False)
    np.savez(tmp_path / "data.npz", x=_data(32).x, y=np.arange(32) % 10)
    args = [str(tmp_path / "model.onnx"), str(tmp_path / "params.json"), "--data", str(tmp_path / "data.npz")]
    assert cli.main(["sensitivity", *args, "--report-json", str(tmp_path / "s.json")]) == 0
    table = capsys.readouterr().out
    assert "SQNR alone dB" in table and "|grad|" in table and "most sensitive alone: conv2" in table
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["samples"] == 32 and written["ranking"]["sqnr"][0] == "conv2"
    rows = [line.split() for line in table.splitlines()[2:] if line.strip()][:-1]  # the summary is last
    assert [row[1] for row in rows] == written["ranking"]["sqnr"]  # printed most sensitive first
    assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
    by_name = {layer["name"]: layer for layer in written["layers"]}
    sqnr = [by_name[row[1]]["output_sqnr_db"] for row in rows]
    assert sqnr == sorted(sqnr, key=lambda db: math.inf if db is None else db)
    assert set(written["ranking"]) == {"sqnr", "gradient", "gradient_noise"}
    assert [layer["name"] for layer in written["layers"]] == ["conv1", "pool1", "conv2", "gap", "fc"]
    assert cli.main(["sensitivity", *args, "--json", "--no-gradient", "--samples", "8"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["samples"] == 8 and set(printed["ranking"]) == {"sqnr"}
    assert all(layer["gradient"] is None for layer in printed["layers"])


def test_the_table_lists_the_most_sensitive_layer_first_and_ties_in_graph_order() -> None:
    """Lowest SQNR alone first; equal figures (two 30 dB layers, the exact ones at +inf) keep the order
    the layers run in. The JSON keeps graph order in `layers` and the ranking in `ranking`."""
    layers = [
        LayerSensitivity("conv1", "conv2d", 30.0, int16_capable=True),
        LayerSensitivity("pool1", "max_pool2d", math.inf),
        LayerSensitivity("conv2", "conv2d", 12.5, int16_capable=True),
        LayerSensitivity("fc", "fully_connected", 30.0, int16_capable=True),
        LayerSensitivity("flatten", "reshape", math.inf),
    ]
    report = SensitivityReport("m.onnx", "p.json", 16, 11.0, layers)
    assert report.format_table() == (
        "rank  layer    op               SQNR alone dB  s16\n"
        "----  -------  ---------------  -------------  ---\n"
        "1     conv2    conv2d           12.50          yes\n"
        "2     conv1    conv2d           30.00          yes\n"
        "3     fc       fully_connected  30.00          yes\n"
        "4     pool1    max_pool2d       inf\n"
        "5     flatten  reshape          inf\n"
        "\n"
        "16 samples; every layer quantized: output SQNR 11.00 dB; most sensitive alone: conv2 (12.50 dB)"
    )
    document = report.to_dict()
    assert [layer["name"] for layer in document["layers"]] == ["conv1", "pool1", "conv2", "fc", "flatten"]
    assert document["ranking"] == {"sqnr": ["conv2", "conv1", "fc", "pool1", "flatten"]}
