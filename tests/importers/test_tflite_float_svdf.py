"""A float .tflite SVDF (no float SVDF ships with TFLM: tests/tflm.py's float_svdf_model writes one):
imported as the IR's float SVDF and run by the float executor as TFLM's float interpreter runs it (the
state carried from one invoke to the next), calibrated (its state's range: the feature projections it
stores) and quantized to TFLite's integer SVDF - int8 input, output and feature weights, int16 time
weights of 10 bits and int16 state, int32 bias at s_state * s_time - run by arm_svdf_state_s16_s8; the
params file rebuilds the same layer; what cannot be translated is refused naming the operator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.errors import ModelError
from quantcore.ir import Graph, Node, Op
from quantcore.quantize.consistency import problems
from quantcore.quantize.document import from_document
from quantcore.runtime import float_exec, int8_exec
from quantcore.scheme.arith import quantize_activation
from tests import tflm

FEATURES, FILTERS, MEMORY, RANK = 16, 12, 8, 2
INVOKES = 10


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("svdf") / "svdf.tflite"
    path.write_bytes(tflm.float_svdf_model(FEATURES, FILTERS, MEMORY, RANK, seed=3))
    return path


def _calib() -> np.ndarray:
    """1000 samples: the output's tails (a sum over the memory) need them - 200 range it to [-3.6, 5.4]
    while other inputs reach -5.1, which then saturates."""
    return np.random.default_rng(1).standard_normal((1000, FEATURES)).astype(np.float32)


@pytest.fixture(scope="module")
def quantized(model_path: Path) -> pipeline.QuantizeResult:
    return pipeline.quantize(pipeline.load_model(model_path), DataSet(_calib()))


def _svdf(graph: Graph) -> Node:
    (node,) = [n for n in graph.nodes if n.op is Op.SVDF]
    return node


def test_float_import_runs_as_tflms_float_interpreter_invoke_after_invoke(model_path: Path) -> None:
    graph = pipeline.load_model(model_path).graph
    assert _svdf(graph).attr("state") == {"shape": [1, FILTERS * MEMORY], "tensor": "activation_state"}
    x = np.random.default_rng(5).standard_normal((INVOKES, FEATURES)).astype(np.float32)
    ours = float_exec.run(graph, {graph.inputs[0]: x})[graph.outputs[0]]
    theirs = np.concatenate(tflm.outputs(tflm.interpreter(model_path), x))
    # float64 here, float32 in TFLM (sums of 16 and 8 products of values ~1): float32's precision
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6)
    fresh = float_exec.run(graph, {graph.inputs[0]: x[-1:]})[graph.outputs[0]]
    assert np.abs(fresh[0] - ours[-1]).max() > 0.1  # the state is carried: the memory changes the output


def test_quantized_by_tflites_integer_svdf_scheme(quantized: pipeline.QuantizeResult) -> None:
    float_graph, qgraph = quantized.model.graph, quantized.qgraph
    float_node, node = _svdf(float_graph), _svdf(qgraph)
    assert node.attr("kernel") == "arm_svdf_state_s16_s8"
    wf = float_graph.constant(float_node.inputs[1]).astype(np.float64)
    wt = float_graph.constant(float_node.inputs[2])
    bias = float_graph.constant(float_node.inputs[3]).astype(np.float64)
    # the state holds the feature projections: symmetric int16 over their calibrated peak
    s_state = np.abs(_calib().astype(np.float64) @ wf.T).max() / 32767
    state = node.attr("state")
    assert (state["dtype"], state["zero_point"]) == ("int16", 0)
    assert state["scale"] == pytest.approx(s_state, rel=1e-6)  # float32 activations in the float model
    assert node.attr("params")["state_scale"] == state["scale"]
    q_wf = qgraph.tensor(node.inputs[1])
    s_wf = np.abs(wf).max() / 127
    assert q_wf.quant is not None and float(q_wf.quant.scale) == s_wf
    np.testing.assert_array_equal(q_wf.data, np.sign(wf) * np.floor(np.abs(wf) / s_wf + 0.5))
    q_wt = qgraph.tensor(node.inputs[2])
    s_wt = float(np.abs(wt).max() / np.float32(512))  # float32, as TFLite's quantizer divides
    assert q_wt.dtype.label == "int16" and q_wt.quant is not None and float(q_wt.quant.scale) == s_wt
    np.testing.assert_array_equal(q_wt.data, np.round(wt.astype(np.float64) / s_wt))
    # 10 bits: the largest time weight is 512
    assert q_wt.data is not None and int(np.abs(q_wt.data).max()) == 512
    q_b = qgraph.tensor(node.inputs[3])
    b = bias / (state["scale"] * s_wt)
    assert q_b.dtype.label == "int32"
    np.testing.assert_array_equal(q_b.data, np.sign(b) * np.floor(np.abs(b) + 0.5))


def test_params_file_rebuilds_the_same_layer(quantized: pipeline.QuantizeResult) -> None:
    rebuilt = from_document(quantized.model.graph, quantized.document)
    ours, theirs = _svdf(quantized.qgraph), _svdf(rebuilt)
    assert theirs.attr("params") == ours.attr("params")
    for a, b in zip(ours.inputs[1:], theirs.inputs[1:], strict=True):
        np.testing.assert_array_equal(quantized.qgraph.constant(a), rebuilt.constant(b))
    assert list(problems(quantized.document)) == []


def test_int8_state_is_carried_and_close_to_float(quantized: pipeline.QuantizeResult) -> None:
    qgraph, graph = quantized.qgraph, quantized.model.graph
    qin, qout = qgraph.tensor(qgraph.inputs[0]).quant, qgraph.tensor(qgraph.outputs[0]).quant
    assert qin is not None and qout is not None
    x = np.random.default_rng(2).standard_normal((50, FEATURES)).astype(np.float32)
    q = quantize_activation(x, float(qin.scale), int(qin.zero_point))
    carried = int8_exec.run(qgraph, {qgraph.inputs[0]: q})[qgraph.outputs[0]]
    fresh = np.concatenate(
        [int8_exec.run(qgraph, {qgraph.inputs[0]: row[np.newaxis]})[qgraph.outputs[0]] for row in q]
    )
    assert np.count_nonzero(carried[1:] != fresh[1:]) > 0 and np.array_equal(carried[:1], fresh[:1])
    reference = float_exec.run(graph, {graph.inputs[0]: x})[graph.outputs[0]]
    values = (carried.astype(np.float64) - int(qout.zero_point)) * float(qout.scale)
    sqnr = 10 * np.log10(np.sum(reference**2) / np.sum((values - reference) ** 2))
    assert sqnr > 30.0  # a quality bar, not an identity: measured 37.8 dB


@pytest.mark.parametrize(
    ("position", "tensor", "message"),
    [
        (4, 3, "(SVDF, output 'output'): its activation state (input 4) must be a variable tensor"),
        (
            4,
            0,
            "(SVDF, output 'output'): its activation state 'input' is FLOAT32 [1, 16]; expected"
            " FLOAT32 [1, 96]",
        ),
        (
            2,
            3,
            "(SVDF): its input 2 'bias' has shape [6]; a SVDF needs 2 dimensions there - the file is"
            " damaged; re-convert the model",
        ),
        (1, 4, "(SVDF, output 'output'): its feature weights (input 1) must be a constant"),
    ],
)
def test_a_float_svdf_it_cannot_translate_is_refused_naming_the_operator(
    position: int, tensor: int, message: str, model_path: Path, tmp_path: Path
) -> None:
    path = tmp_path / "bad.tflite"
    path.write_bytes(tflm.with_operator_input(model_path.read_bytes(), position, tensor))
    with pytest.raises(ModelError) as caught:
        pipeline.load_model(path)
    assert str(caught.value) == f"{path}: operator 0 {message}"


def test_tflm_runs_the_quantized_layer_as_the_reference_does(
    quantized: pipeline.QuantizeResult, tmp_path: Path
) -> None:
    """The quantized layer written back as an int8 .tflite (Fixpoint's integers and scales) is a model
    TFLM accepts - its int8 SVDF checks the bias scale is s_state * s_time - and TFLM's interpreter
    computes the reference's bytes, invoke after invoke."""
    qgraph = quantized.qgraph
    node = _svdf(qgraph)

    def tensor(name: str, data: np.ndarray | None = None) -> tflm.SvdfTensor:
        t = qgraph.tensor(name)
        assert t.quant is not None
        dtype = {"int8": np.int8, "int16": np.int16, "int32": np.int32}[t.quant.dtype.label]
        values = np.zeros(0, dtype) if data is None else data.astype(dtype)
        return tflm.SvdfTensor(t.shape, values, float(t.quant.scale), int(t.quant.zero_point))

    state = node.attr("state")
    state_tensor = tflm.SvdfTensor((1, FILTERS * MEMORY), np.zeros(0, np.int16), state["scale"], 0)
    tensors = [
        tensor(node.inputs[0]),
        *(tensor(name, qgraph.constant(name)) for name in node.inputs[1:]),
        state_tensor,
        tensor(node.outputs[0]),
    ]
    path = tmp_path / "int8.tflite"
    path.write_bytes(tflm.svdf_model(tensors, RANK))
    x = np.random.default_rng(8).standard_normal((INVOKES, FEATURES)).astype(np.float32)
    quant = qgraph.tensor(qgraph.inputs[0]).quant
    assert quant is not None
    q = quantize_activation(x, float(quant.scale), int(quant.zero_point))
    ours = int8_exec.run(qgraph, {qgraph.inputs[0]: q})[qgraph.outputs[0]]
    theirs = np.concatenate(tflm.outputs(tflm.interpreter(path), q))
    assert np.array_equal(ours, theirs)
    assert np.unique(ours).size >= 30  # many values: not a saturated layer
