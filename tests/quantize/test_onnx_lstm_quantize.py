"""A float ONNX LSTM calibrated and quantized to TFLite's integer LSTM scheme: the cell state's
power-of-two scale from its calibrated range, per-tensor int8 weights, int32 biases at s_in * s_wx, the
params file rebuilding the same layer, and every inference starting from the zero state."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.ir import Graph, Node, Op
from quantcore.quantize.document import from_document
from quantcore.quantize.recurrent import cell_scale
from quantcore.runtime import int8_exec
from quantcore.scheme.recurrent import GATES
from tests.lstm_models import lstm_model


@pytest.mark.parametrize(
    ("lo", "hi", "power"),
    [
        (0.0, 0.0, -15),  # nothing observed: the floor, [-1, 1)
        (-0.3, 0.5, -15),
        (-1.0, 0.2, -15),  # 2^0 covers 1 exactly
        (-1.0001, 0.2, -14),
        (-2.7309, 7.9487, -12),  # TFLite's prepare-quantize test's cell stats: 8 = 2^3
        (-10.0, 10.0, -11),  # TFLite's own unit test: GetPowerOfTwoScale(-10, 10) == 4
        (3.0, 10.0, -11),
        (0.0, 1024.0, -5),
        (0.0, 5000.0, -5),  # beyond 2^10: TFLite stops at pot 10 (the cell saturates)
    ],
)
def test_cell_scale_is_the_power_of_two_covering_the_range(lo: float, hi: float, power: int) -> None:
    assert cell_scale(lo, hi) == 2.0**power


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-v)))


def _cell_peak(model_path: Path, x: np.ndarray) -> float:
    """max |c_t| over every step of every sample, by a numpy LSTM written from ONNX's definition (gate
    blocks i, o, f, c), independent of the importer and the IR executor."""
    import onnx

    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(model_path)).graph.initializer}
    w, r, b = inits["W"][0].astype(np.float64), inits["R"][0].astype(np.float64), inits["B"][0]
    hidden = r.shape[1]
    peak = 0.0
    for sample in x.astype(np.float64):
        h, c = np.zeros(hidden), np.zeros(hidden)
        for step in sample:
            z = w @ step + r @ h + b[: 4 * hidden] + b[4 * hidden :]
            i, o, f, g = (z[k * hidden : (k + 1) * hidden] for k in range(4))
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            peak = max(peak, float(np.abs(c).max()))
    return peak


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, pipeline.QuantizeResult]:
    path = tmp_path_factory.mktemp("lstm") / "lstm.onnx"
    path.write_bytes(lstm_model(layout=0, seq=8, features=12, hidden=16, seed=3).SerializeToString())
    x = np.random.default_rng(11).standard_normal((40, 8, 12)).astype(np.float32) * 1.5
    options = pipeline.QuantizeOptions(bias_correction=False, int16_output=False)
    return path, x, pipeline.quantize(pipeline.load_model(path), DataSet(x), options)


def _lstm(graph: Graph) -> Node:
    (node,) = [n for n in graph.nodes if n.op is Op.LSTM]
    return node


def test_cell_state_scale_covers_the_calibrated_cell_range(
    quantized: tuple[Path, np.ndarray, pipeline.QuantizeResult],
) -> None:
    path, x, result = quantized
    params = _lstm(result.qgraph).attr("params")
    assert params["cell_scale_power"] == min(10, max(0, math.ceil(math.log2(_cell_peak(path, x))))) - 15


def test_weights_and_biases_take_tflites_scheme(
    quantized: tuple[Path, np.ndarray, pipeline.QuantizeResult],
) -> None:
    _, _, result = quantized
    float_graph, qgraph = result.model.graph, result.qgraph
    (float_node,), node = [n for n in float_graph.nodes if n.op is Op.LSTM], _lstm(qgraph)
    x_quant = qgraph.tensor(node.inputs[0]).quant
    assert x_quant is not None
    for k, gate in enumerate(GATES):
        w = float_graph.constant(float_node.inputs[1 + k]).astype(np.float64)
        s_w = np.abs(w).max() / 127
        q_w = qgraph.tensor(node.inputs[1 + k])
        assert q_w.quant is not None and float(q_w.quant.scale) == s_w and int(q_w.quant.zero_point) == 0
        np.testing.assert_array_equal(q_w.data, np.sign(w) * np.floor(np.abs(w) / s_w + 0.5))
        b = float_graph.constant(float_node.inputs[9 + k]).astype(np.float64) / (float(x_quant.scale) * s_w)
        q_b = qgraph.tensor(node.inputs[9 + k])
        assert q_b.dtype.label == "int32" and q_b.name == f"{node.name}.bias_{gate}"
        np.testing.assert_array_equal(q_b.data, np.sign(b) * np.floor(np.abs(b) + 0.5))
    out = qgraph.tensor(node.outputs[0]).quant
    assert out is not None
    assert node.attr("hidden_state")["scale"] == float(out.scale)
    assert (
        node.attr("params")["output_offset"] == int(out.zero_point) == -node.attr("params")["hidden_offset"]
    )


def test_params_file_rebuilds_the_same_layer(
    quantized: tuple[Path, np.ndarray, pipeline.QuantizeResult],
) -> None:
    _, _, result = quantized
    rebuilt = from_document(result.model.graph, result.document)
    ours, theirs = _lstm(result.qgraph), _lstm(rebuilt)
    assert theirs.attr("params") == ours.attr("params")
    for a, b in zip(ours.inputs[1:], theirs.inputs[1:], strict=True):
        np.testing.assert_array_equal(result.qgraph.constant(a), rebuilt.constant(b))


def test_each_inference_starts_from_the_zero_state(
    quantized: tuple[Path, np.ndarray, pipeline.QuantizeResult],
) -> None:
    _, x, result = quantized
    qgraph = result.qgraph
    cases = _quantized_input(qgraph, x[:3])
    together = int8_exec.run(qgraph, {qgraph.inputs[0]: cases})[qgraph.outputs[0]]
    alone = int8_exec.run(qgraph, {qgraph.inputs[0]: cases[2:]})[qgraph.outputs[0]]
    steps = len(together) // 3  # the output is sequence first: each sample's steps stacked on axis 0
    np.testing.assert_array_equal(together[2 * steps :], alone)
    assert not np.array_equal(together[:steps], alone)  # the samples differ: the check can fail


def _quantized_input(qgraph: Graph, x: np.ndarray) -> np.ndarray:
    from quantcore.scheme.arith import quantize_activation

    quant = qgraph.tensor(qgraph.inputs[0]).quant
    assert quant is not None
    return quantize_activation(x, float(quant.scale), int(quant.zero_point))


def test_generated_c_makes_the_stateless_call(
    quantized: tuple[Path, np.ndarray, pipeline.QuantizeResult], tmp_path: Path
) -> None:
    from quantcore.codegen.generate import generate
    from quantcore.targets.build import read_header

    generate(quantized[2].qgraph, tmp_path / "model", force=True)
    source = (tmp_path / "model" / "model.c").read_text()
    assert ".hidden_state = NULL," in source and "_hidden_state[" not in source
    assert "memset(" not in source  # nothing to reset between invokes: the kernel zeroes the cell state
    # the int16 cell state and the two int16 work buffers of 16 values each
    assert read_header(tmp_path / "model").state_bytes == 16 * (2 + 2 + 2)


def test_generated_c_copies_out_the_last_step(tmp_path: Path) -> None:
    from quantcore.codegen.generate import generate

    path = tmp_path / "final.onnx"
    path.write_bytes(
        lstm_model(layout=1, seq=8, features=12, hidden=16, final_state=True).SerializeToString()
    )
    x = np.random.default_rng(12).standard_normal((20, 8, 12)).astype(np.float32)
    options = pipeline.QuantizeOptions(bias_correction=False, int16_output=False)
    qgraph = pipeline.quantize(pipeline.load_model(path), DataSet(x), options).qgraph
    generate(qgraph, tmp_path / "model", force=True)
    source = (tmp_path / "model" / "model.c").read_text()
    assert "static int8_t l0_lstm_sequence[128] __attribute__((aligned(MODEL_ALIGNMENT)));" in source
    assert "memcpy(&t_lstm_last_step[b * 16], &l0_lstm_sequence[(b * 8 + 7) * 16], 16);" in source
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: _quantized_input(qgraph, x[:2])})
    assert env[_lstm(qgraph).outputs[0]].shape == (2, 16)
