"""ONNX LSTM import: the gate split, the layouts and the exporter's surrounding nodes, the float execution
against onnxruntime, and one message per form CMSIS-NN's kernel cannot run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import import_onnx
from quantcore.ir import Graph, Op
from quantcore.runtime import float_exec
from quantcore.runtime.onnx_float import OnnxFloat
from quantcore.support import ONNX_OPS
from tests.lstm_models import lstm_model, torch_lstm_classifier

# onnxruntime runs the LSTM in float32, the IR executor in float64: over <= 12 steps the float32 rounding
# of the gate sums (|sum| < 10, eps 2^-24 relative) stays far below 1e-5 (measured: ~1.5e-7).
TOLERANCE = 1e-5


def _write(tmp_path: Path, model: onnx.ModelProto | bytes, name: str = "lstm.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


def _against_onnxruntime(path: Path, graph: Graph, samples: int = 3) -> float:
    """The largest difference between the IR float executor's outputs and onnxruntime's over samples."""
    shape = graph.tensor(graph.inputs[0]).shape
    x = np.random.default_rng(5).standard_normal((samples * shape[0], *shape[1:])).astype(np.float32)
    ort = OnnxFloat(path.read_bytes(), graph).activations({graph.inputs[0]: x})
    ours = float_exec.run(graph, {graph.inputs[0]: x})
    return max(float(np.abs(ort[name] - ours[name]).max()) for name in graph.outputs)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("squeeze", [True, False])
def test_layouts_run_as_onnxruntime_does(tmp_path: Path, layout: int, squeeze: bool) -> None:
    path = _write(tmp_path, lstm_model(layout=layout, squeeze=squeeze, bias=squeeze))
    graph = import_onnx(path)
    lstms = [n for n in graph.nodes if n.op is Op.LSTM]
    assert len(lstms) == 1 and lstms[0].attr("streaming") is False
    assert graph.tensor(lstms[0].inputs[0]).shape == (1, 9, 10)
    assert graph.tensor(lstms[0].outputs[0]).shape == (1, 9, 16)
    # batch 1: moving the size-1 batch axis is a RESHAPE (no copy), never a TRANSPOSE
    assert not [n for n in graph.nodes if n.op is Op.TRANSPOSE]
    assert _against_onnxruntime(path, graph) < TOLERANCE


def test_batch_first_over_a_batch_of_three(tmp_path: Path) -> None:
    model = lstm_model(layout=1, batch=3)
    graph = import_onnx(_write(tmp_path, model), batch=3)
    x = np.random.default_rng(6).standard_normal((3, 9, 10)).astype(np.float32)
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert np.abs(float_exec.run(graph, {"x": x})[graph.outputs[0]] - expected).max() < TOLERANCE


def test_gates_split_in_tflite_order_and_biases_summed(tmp_path: Path) -> None:
    model = lstm_model(layout=1, hidden=4, features=3)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    graph = import_onnx(_write(tmp_path, model))
    (node,) = [n for n in graph.nodes if n.op is Op.LSTM]
    w, r, b = inits["W"][0], inits["R"][0], inits["B"][0]
    for position, block in enumerate((0, 2, 3, 1)):  # IR (i, f, c, o) <- ONNX blocks (i, o, f, c)
        rows = slice(4 * block, 4 * block + 4)
        np.testing.assert_array_equal(graph.constant(node.inputs[1 + position]), w[rows])
        np.testing.assert_array_equal(graph.constant(node.inputs[5 + position]), r[rows])
        np.testing.assert_array_equal(graph.constant(node.inputs[9 + position]), b[rows] + b[16:][rows])


def test_zero_initial_state_and_full_sequence_lengths_are_accepted(tmp_path: Path) -> None:
    extra = {
        4: np.array([9], np.int32),
        5: np.zeros((1, 1, 16), np.float32),
        6: np.zeros((1, 1, 16), np.float32),
        7: np.zeros((1, 48), np.float32),
    }
    path = _write(tmp_path, lstm_model(layout=0, extra=extra))
    graph = import_onnx(path)
    assert _against_onnxruntime(path, graph) < TOLERANCE


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("head", ["flatten", "h_n", "last"])
def test_torch_exporters(tmp_path: Path, legacy: bool, head: str) -> None:
    """The default (dynamo) export, and the TorchScript one with a dynamic batch (onnxruntime runs a model
    with an LSTM sample by sample, so its sequence-first tensors stack the samples as the IR does); the
    classifier reading the whole sequence, h_n[-1] (Y_h, then a Gather of the direction axis) or y[:, -1]
    (a Gather of Y's last step, taken into the layer)."""
    path = torch_lstm_classifier(tmp_path / "classifier.onnx", legacy=legacy, head=head)
    graph = import_onnx(path)
    assert [n.op for n in graph.nodes if n.op not in (Op.RESHAPE,)] == [Op.LSTM, Op.FULLY_CONNECTED]
    (lstm,) = [n for n in graph.nodes if n.op is Op.LSTM]
    assert lstm.attr("last_step") is (head != "flatten")
    assert graph.tensor(lstm.outputs[0]).shape == ((1, 12, 16) if head == "flatten" else (1, 16))
    assert _against_onnxruntime(path, graph) < TOLERANCE


@pytest.mark.parametrize("layout", [0, 1])
def test_final_hidden_state_alone(tmp_path: Path, layout: int) -> None:
    path = _write(tmp_path, lstm_model(layout=layout, final_state=True))
    graph = import_onnx(path)
    (lstm,) = [n for n in graph.nodes if n.op is Op.LSTM]
    assert lstm.attr("last_step") is True and graph.tensor(lstm.outputs[0]).shape == (1, 16)
    assert graph.tensor(graph.outputs[0]).shape == (1, 1, 16)
    assert _against_onnxruntime(path, graph) < TOLERANCE


def _reason(check: str) -> str:
    (constraint,) = [c for c in ONNX_OPS["LSTM"].constraints if c.name == check]
    return constraint.reason


@pytest.mark.parametrize(
    ("kwargs", "check", "fact"),
    [
        (
            {"attrs": {"direction": "bidirectional"}, "squeeze": False},
            "lstm_forward",
            "Its direction is 'bidirectional'.",
        ),
        ({"attrs": {"direction": "reverse"}}, "lstm_forward", "Its direction is 'reverse'."),
        ({"attrs": {"clip": 3.0}}, "lstm_no_clip", "Its clip attribute is 3.0."),
        ({"attrs": {"input_forget": 1}}, "lstm_separate_gates", "Its input_forget attribute is 1."),
        (
            {"attrs": {"activations": ["Sigmoid", "Tanh", "Relu"]}},
            "lstm_default_activations",
            "Its activations are ['Sigmoid', 'Tanh', 'Relu'].",
        ),
        (
            {"extra": {7: np.full((1, 48), 0.5, np.float32)}},
            "lstm_no_peepholes",
            "It has peephole weights 'in7'.",
        ),
        (
            {"extra": {5: np.ones((1, 1, 16), np.float32)}},
            "lstm_zero_initial_state",
            "Its initial state 'in5' is not a constant of zeros.",
        ),
        (
            {"extra": {6: "c0"}},
            "lstm_zero_initial_state",
            "Its initial state 'c0' is not a constant of zeros.",
        ),
        ({"extra": {4: np.array([5], np.int32)}}, "lstm_full_sequences", "Its sequence_lens is [5]."),
        (
            {"outputs": ("Y", "Y_h")},
            "lstm_sequence_output",
            "The graph reads its output(s) 'Y', 'Y_h'.",
        ),
        (
            {"outputs": ("Y", "", "Y_c")},
            "lstm_sequence_output",
            "The graph reads its output(s) 'Y', 'Y_c'.",
        ),
    ],
)
def test_refusals_name_the_node_and_the_rule(
    tmp_path: Path, kwargs: dict[str, object], check: str, fact: str
) -> None:
    path = _write(tmp_path, lstm_model(layout=0, **kwargs))  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError) as info:
        import_onnx(path)
    assert str(info.value) == f"{path}: node 'lstm': LSTM is not supported: {fact} {_reason(check)}"


def _gathered(layout: int, index: int) -> onnx.ModelProto:
    """The LSTM's squeezed Y, then a Gather of step `index` on its time axis."""
    model = lstm_model(layout=layout)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(index, np.int64), "step"))
    gather = onnx.helper.make_node("Gather", ["Ys", "step"], ["h"], axis=layout, name="pick")
    model.graph.node.append(gather)
    model.graph.output[0].CopyFrom(onnx.helper.make_tensor_value_info("h", onnx.TensorProto.FLOAT, (1, 16)))
    return model


@pytest.mark.parametrize(("layout", "index"), [(0, -1), (1, -1), (1, 8)])
def test_gather_of_the_last_step_is_the_layers_last_step(tmp_path: Path, layout: int, index: int) -> None:
    path = _write(tmp_path, _gathered(layout, index))
    graph = import_onnx(path)
    (lstm,) = [n for n in graph.nodes if n.op is Op.LSTM]
    assert lstm.attr("last_step") is True and lstm.outputs[0] == "h"
    assert _against_onnxruntime(path, graph) < TOLERANCE


def test_gather_of_another_step_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError) as info:
        import_onnx(_write(tmp_path, _gathered(1, 3)))
    assert info.value.node == "pick" and "It gathers along axis 1, of size 9." in str(info.value)
    assert "flatten its whole output sequence Y" in str(info.value) and "h_n" in str(info.value)


def test_sequence_first_model_input_is_refused(tmp_path: Path) -> None:
    model = lstm_model(layout=0, batch=1, seq=1)
    model.graph.node.pop(0)  # the LSTM reads the model's (batch-first) input as if it were sequence first
    model.graph.node[0].input[0] = "x"
    with pytest.raises(ModelError) as info:
        import_onnx(_write(tmp_path, model))
    assert "reads the model input 'x' sequence first" in str(info.value)
    assert "torch.nn.LSTM(batch_first=True)" in str(info.value) and "'lstm'" in str(info.value)


def test_sequence_first_batch_of_three_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        import_onnx(_write(tmp_path, lstm_model(layout=0, batch=3)), batch=3)
    assert "is a sequence-first LSTM (layout 0) over a batch of 3" in str(info.value)
