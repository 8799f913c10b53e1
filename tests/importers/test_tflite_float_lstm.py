"""A float .tflite UNIDIRECTIONAL_SEQUENCE_LSTM (TFLM's mnist_lstm, trained_lstm.tflite): imported as the
IR's float LSTM, run by the float executor as TFLM's float interpreter runs it (the state carried from one
invoke to the next), calibrated and quantized by the code that quantizes an ONNX LSTM (TFLite's integer
scheme: the cell state's power-of-two scale, per-tensor int8 weights, int32 biases at s_in * s_wx), and
what cannot be translated refused, naming the operator."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
import tflite

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.errors import ModelError
from quantcore.ir import Graph, Node, Op
from quantcore.runtime import float_exec, int8_exec
from quantcore.scheme.arith import quantize_activation
from quantcore.scheme.recurrent import GATES
from tests import tflm

INVOKES = 6


def _lstm(graph: Graph) -> Node:
    (node,) = [n for n in graph.nodes if n.op is Op.LSTM]
    return node


@pytest.fixture(scope="module")
def quantized() -> pipeline.QuantizeResult:
    calib, _ = tflm.mnist_digits(100, seed=1)
    options = pipeline.QuantizeOptions(bias_correction=False)
    return pipeline.quantize(pipeline.load_model(tflm.model("trained_lstm")), DataSet(calib), options)


def test_float_import_runs_as_tflms_float_interpreter_invoke_after_invoke() -> None:
    path = tflm.model("trained_lstm")
    graph = pipeline.load_model(path).graph
    node = _lstm(graph)
    assert node.attr("streaming") is True and node.attr("cell_clip") == 10.0
    x, _ = tflm.mnist_digits(INVOKES, seed=3)
    ours = float_exec.run(graph, {graph.inputs[0]: x})
    theirs = np.concatenate(tflm.outputs(tflm.interpreter(path), x))
    # float64 here, float32 in TFLM (28 steps of 20-unit products, then a softmax): they agree to float32's
    # precision, not bit for bit.
    np.testing.assert_allclose(ours[graph.outputs[0]], theirs, rtol=0, atol=2e-6)
    # the state is carried: the same input after others gives other outputs than from the reset state
    fresh = float_exec.run(graph, {graph.inputs[0]: x[-1:]})[graph.outputs[0]]
    assert np.abs(fresh[0] - ours[graph.outputs[0]][-1]).max() > 1e-3


def test_quantized_by_tflites_integer_lstm_scheme(quantized: pipeline.QuantizeResult) -> None:
    float_graph, qgraph = quantized.model.graph, quantized.qgraph
    float_node, node = _lstm(float_graph), _lstm(qgraph)
    assert node.attr("kernel") == "arm_lstm_unidirectional_s8"
    params = node.attr("params")
    # The cells of these noisy digits reach -8.59 (TensorFlow's own int8 twin, calibrated on clean MNIST,
    # has 2^3 = 8): 2^4 covers them, cell scale 2^(4 - 15); cell clip 10 is 20480 steps of 2^-11.
    assert (params["cell_scale_power"], params["cell_clip"]) == (-11, 20480)
    x_quant, out = qgraph.tensor(node.inputs[0]).quant, qgraph.tensor(node.outputs[0]).quant
    assert x_quant is not None and out is not None
    assert (float(x_quant.scale), int(x_quant.zero_point)) == (1 / 255, -128)  # the digits' [0, 1]
    assert node.attr("hidden_state")["scale"] == float(out.scale)
    assert params["output_offset"] == int(out.zero_point) == -params["hidden_offset"]
    for k, gate in enumerate(GATES):
        w = float_graph.constant(float_node.inputs[1 + k]).astype(np.float64)
        s_w = np.abs(w).max() / 127
        q_w = qgraph.tensor(node.inputs[1 + k])
        assert q_w.quant is not None and float(q_w.quant.scale) == s_w
        np.testing.assert_array_equal(q_w.data, np.sign(w) * np.floor(np.abs(w) / s_w + 0.5))
        b = float_graph.constant(float_node.inputs[9 + k]).astype(np.float64) / (float(x_quant.scale) * s_w)
        q_b = qgraph.tensor(node.inputs[9 + k])
        assert q_b.name == f"{node.name}.bias_{gate}"
        np.testing.assert_array_equal(q_b.data, np.sign(b) * np.floor(np.abs(b) + 0.5))


def test_the_quantized_state_is_carried_from_one_invoke_to_the_next(
    quantized: pipeline.QuantizeResult,
) -> None:
    qgraph = quantized.qgraph
    quant = qgraph.tensor(qgraph.inputs[0]).quant
    assert quant is not None
    x, _ = tflm.mnist_digits(INVOKES, seed=4)
    q = quantize_activation(x, float(quant.scale), int(quant.zero_point))
    out = _lstm(qgraph).outputs[0]
    carried = int8_exec.run(qgraph, {qgraph.inputs[0]: q})[out]
    fresh = np.concatenate([int8_exec.run(qgraph, {qgraph.inputs[0]: row[np.newaxis]})[out] for row in q])
    assert np.array_equal(carried[:1], fresh[:1])  # the first invoke starts from the reset state
    assert np.count_nonzero(carried[1:] != fresh[1:]) > 0
    assert np.unique(carried).size >= 100  # the layer takes many values: not a saturated check


def test_int8_output_is_close_to_float(quantized: pipeline.QuantizeResult) -> None:
    """Fixpoint's int8 model against the float model on other digits than the calibration's, in a row."""
    qgraph, graph = quantized.qgraph, quantized.model.graph
    x, _ = tflm.mnist_digits(50, seed=2)
    reference = float_exec.run(graph, {graph.inputs[0]: x})[graph.outputs[0]]
    qin, qout = qgraph.tensor(qgraph.inputs[0]).quant, qgraph.tensor(qgraph.outputs[0]).quant
    assert qin is not None and qout is not None
    q = int8_exec.run(
        qgraph, {qgraph.inputs[0]: quantize_activation(x, float(qin.scale), int(qin.zero_point))}
    )
    values = (q[qgraph.outputs[0]].astype(np.float64) - int(qout.zero_point)) * float(qout.scale)
    sqnr = 10 * math.log10(np.sum(reference**2) / np.sum((values - reference) ** 2))
    # A quality bar, not an identity: measured 34.0 dB over 200 such digits (bench/tflite_lstm_twin.py),
    # TensorFlow's own int8 twin 33.1 dB.
    assert sqnr > 30.0
    assert np.array_equal(values.argmax(-1), reference.argmax(-1))


PREFIX = "operator 0 (UNIDIRECTIONAL_SEQUENCE_LSTM, output 'tfl.unidirectional_sequence_lstm'): "


@pytest.mark.parametrize(
    ("position", "tensor", "message"),
    [
        (tflm.LSTM_HIDDEN_INPUT, 8, "its hidden state (input 18) must be a variable tensor"),
        (
            tflm.LSTM_CELL_INPUT,
            0,
            "its cell state 'serving_default_fixed_input:0' is FLOAT32 [1, 28, 28]; expected FLOAT32 [1, 20]",
        ),
        (12, 17, "its bias (input 12) must be a constant"),
        (1, 4, "has weights 'arith.constant' of shape (20, 20); expected (20, 28)"),
    ],
)
def test_a_float_lstm_it_cannot_translate_is_refused_naming_the_operator(
    position: int, tensor: int, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.tflite"
    path.write_bytes(tflm.with_operator_input(tflm.model("trained_lstm").read_bytes(), position, tensor))
    with pytest.raises(ModelError) as caught:
        pipeline.load_model(path)
    assert str(caught.value) == f"{path}: {PREFIX}{message}"


def _patched_twin(qgraph: Graph) -> bytes:
    """TensorFlow's trained_lstm_int8 with its LSTM's integers and scales replaced, in place, by those
    Fixpoint chose for the float model (the same shapes and types: every vector keeps its length)."""
    node = _lstm(qgraph)
    raw = tflm.model("trained_lstm_int8").read_bytes()
    data = bytearray(raw)
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    op = graph.Operators(0)

    def put(index: int, scale: float, zero_point: int, values: np.ndarray | None = None) -> None:
        t = graph.Tensors(index)
        quant = t.Quantization()
        struct.pack_into("<f", data, tflm.field_vector(quant, 8), scale)
        struct.pack_into("<q", data, tflm.field_vector(quant, 10), zero_point)
        if values is not None:
            buffer = model.Buffers(t.Buffer())
            start = tflm.field_vector(buffer, 4)
            assert buffer.DataLength() == values.nbytes
            data[start : start + values.nbytes] = values.tobytes()

    hidden, cell = node.attr("hidden_state"), node.attr("cell_state")
    for position, name in zip(range(13), node.inputs, strict=True):
        tflite_position = position if position < 9 else position + 3  # no peepholes (9-11)
        quant = qgraph.tensor(name).quant
        assert quant is not None
        values = None if position == 0 else np.ascontiguousarray(qgraph.constant(name))
        put(int(op.Inputs(tflite_position)), float(quant.scale), int(quant.zero_point), values)
    put(int(op.Inputs(tflm.LSTM_HIDDEN_INPUT)), hidden["scale"], hidden["zero_point"])
    put(int(op.Inputs(tflm.LSTM_CELL_INPUT)), cell["scale"], 0)
    put(int(op.Outputs(0)), hidden["scale"], hidden["zero_point"])
    return bytes(data)


def test_tflm_runs_the_quantized_lstm_as_the_reference_does(
    quantized: pipeline.QuantizeResult, tmp_path: Path
) -> None:
    """Fixpoint's quantization of the float model written into TensorFlow's int8 twin (its integers and
    scales in place of TensorFlow's): TFLM's interpreter takes it and its LSTM layer computes the
    reference's bytes, invoke after invoke."""
    qgraph = quantized.qgraph
    path = tmp_path / "ours.tflite"
    path.write_bytes(_patched_twin(qgraph))
    quant = qgraph.tensor(qgraph.inputs[0]).quant
    assert quant is not None
    x, _ = tflm.mnist_digits(INVOKES, seed=6)
    q = quantize_activation(x, float(quant.scale), int(quant.zero_point))
    out = _lstm(qgraph).outputs[0]
    ours = int8_exec.run(qgraph, {qgraph.inputs[0]: q})[out]
    interpreter = tflm.interpreter(path)
    index = int(tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0).Operators(0).Outputs(0))
    theirs = []
    for row in q:
        interpreter.set_input(row[np.newaxis], 0)
        interpreter.invoke()
        theirs.append(np.array(interpreter.GetTensor(index, 0)["tensor_data"]).reshape(ours.shape[1:]))
    assert np.array_equal(ours, np.stack(theirs))
