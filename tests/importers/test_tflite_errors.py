"""Bad .tflite files: each is one clear message naming the file (and operator or tensor) and what to do,
exit status 2 through the CLI and nothing written; mutated bytes of a real model import or fail so,
never crash or hang. The bad models are real TFLM models with a field changed in place."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
import tflite
from hypothesis import given
from hypothesis import strategies as st

from quantcore.cli import main
from quantcore.errors import ModelError
from quantcore.importers.tflite import import_tflite
from quantcore.ir import Graph, Op
from tests import tflm
from tests.fuzzing import fuzz


def _field(table: Any, slot: int) -> int:
    """The file position of a table's field (its vtable slot: 4, 6, 8, ...); the field must be present."""
    offset = table._tab.Offset(slot)
    assert offset, slot
    return int(table._tab.Pos + offset)


def _edited(raw: bytes, edit: Callable[[Any, bytearray], None]) -> bytes:
    data = bytearray(raw)
    edit(tflite.Model.GetRootAsModel(raw, 0), data)
    return bytes(data)


def _activation(model: Any) -> Any:
    """The first operator's output tensor of subgraph 0 (an int8 activation in hello_world_int8)."""
    graph = model.Subgraphs(0)
    return graph.Tensors(int(graph.Operators(0).Outputs(0)))


def _set_type(model: Any, data: bytearray) -> None:
    data[_field(_activation(model), 6)] = tflite.TensorType.UINT8


def _drop_scales(model: Any, data: bytearray) -> None:
    struct.pack_into("<I", data, tflm.field_vector(_activation(model).Quantization(), 8) - 4, 0)


def _dynamic(model: Any, data: bytearray) -> None:
    struct.pack_into("<i", data, tflm.field_vector(_activation(model), 18) + 4, -1)  # shape_signature[1]


def _two_subgraphs(model: Any, data: bytearray) -> None:
    struct.pack_into("<I", data, tflm.field_vector(model, 8) - 4, 2)


def _huge_buffer(model: Any, data: bytearray) -> None:
    graph = model.Subgraphs(0)
    weights = graph.Tensors(int(graph.Operators(0).Inputs(1)))
    buffer = model.Buffers(weights.Buffer())
    struct.pack_into("<I", data, tflm.field_vector(buffer, 4) - 4, 0x7FFFFFF0)


def _no_outputs(model: Any, data: bytearray) -> None:
    operator = model.Subgraphs(0).Operators(0)
    struct.pack_into("<I", data, tflm.field_vector(operator, 8) - 4, 0)  # Operator.outputs: length 0


def _missing_weights(model: Any, data: bytearray) -> None:
    operator = model.Subgraphs(0).Operators(0)
    struct.pack_into(
        "<i", data, tflm.field_vector(operator, 6) + 4, -1
    )  # Operator.inputs[1]: "optional, absent"


CASES = {
    "uint8": (
        _set_type,
        "tensor 'sequential/dense/MatMul;sequential/dense/Relu;sequential/dense/BiasAdd' is UINT8"
        " in an int8 model (uint8 is TF1's legacy asymmetric quantization; re-convert with TF2's int8"
        " converter); Fixpoint imports float32 models and int8 models",
    ),
    "no_quantization": (
        _drop_scales,
        "has no quantization parameters (scale, zero point); re-convert the model"
        " with TensorFlow's full-integer converter",
    ),
    "dynamic": (
        _dynamic,
        "has a dynamic shape (shape signature [-1, -1]); Fixpoint needs static shapes - convert"
        " with a fixed input shape (only the batch may be -1)",
    ),
    "subgraphs": (
        _two_subgraphs,
        "has 2 subgraphs; Fixpoint imports models of one subgraph (no WHILE/IF/"
        "CALL_ONCE control flow) - convert the model without control flow",
    ),
    "no_outputs": (
        _no_outputs,
        "operator 0 (FULLY_CONNECTED) has inputs [0, 6, 5] and outputs []; a FULLY_CONNECTED needs 2 input"
        " tensor(s) and 1 output - the file is damaged",
    ),
    "missing_weights": (
        _missing_weights,
        "operator 0 (FULLY_CONNECTED) has inputs [0, -1, 5] and outputs [7]; a FULLY_CONNECTED needs 2"
        " input tensor(s) and 1 output",
    ),
    "buffer_past_end": (
        _huge_buffer,
        "is corrupt: buffer 7 claims 2147483632 entries in a file of 2704 bytes",
    ),
}


@pytest.fixture(scope="module")
def hello() -> bytes:
    return tflm.model("hello_world_int8").read_bytes()


def _refused(tmp_path: Path, raw: bytes, capsys: pytest.CaptureFixture[str], name: str = "bad.tflite") -> str:
    model, out = tmp_path / name, tmp_path / "p.json"
    model.write_bytes(raw)
    assert main(["quantize", str(model), "-o", str(out)]) == 2
    assert not out.exists()
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0 and str(model) in message, message
    return message


@pytest.mark.parametrize("case", sorted(CASES))
def test_edited_model_is_one_clear_message(
    case: str, hello: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected = CASES[case]
    message = _refused(tmp_path, _edited(hello, edit), capsys)
    assert expected in message, message


def test_truncated_file(hello: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = _refused(tmp_path, hello[: len(hello) // 3], capsys)
    assert message.endswith(
        "bad.tflite: is corrupt or truncated: its flatbuffer breaks TensorFlow Lite's schema (error:"
        " unpack_from requires a buffer of at least 1064 bytes for unpacking 4 bytes at offset 1060"
        " (actual buffer size is 901)); re-export it from TensorFlow"
    ), message


def test_wrong_identifier(hello: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = _refused(tmp_path, hello[:4] + b"ONNX" + hello[8:], capsys)
    assert message.endswith(
        "bad.tflite: is not a TensorFlow Lite model (bytes 4..8 are b'ONNX', a .tflite file has b'TFL3');"
        " pass a .tflite file written by TensorFlow's converter, or an .onnx model"
    ), message


REFUSED_MODELS = {
    "unsupported_operators_are_listed_with_index_and_reason": (
        "dtln_noise_suppression",
        "bad.tflite",
        "bad.tflite: 1 operator is not supported: operator 3 LOGISTIC (output 'StatefulPartitionedCall:0'):"
        " CMSIS-NN has no int8 kernel for it (arm_nn_activation_s16 takes int16 only); re-convert the model"
        " with supported operators in their place (SUPPORTED_OPS.md)",
    ),
    "an_int8_svdf_state_with_a_zero_point_is_refused": (
        "keyword_scrambled_8bit",
        "bad.tflite",
        "bad.tflite: operator 1 (SVDF, output 'tensor_5'): its int8 activation state has zero point -50:"
        " TFLM's SVDF stores zero point + value in the int8 state (wrapping when that leaves int8) and"
        " subtracts the zero point again, which arm_svdf_s8 - it has no state offset - cannot reproduce bit"
        " for bit; convert with int16 state (TFLM's keyword_scrambled.tflite form, arm_svdf_state_s16_s8) or"
        " a state zero point of 0",
    ),
    "tflms_signal_library_is_named_as_feature_extraction": (
        "audio_preprocessor_int8",
        "bad.tflite",
        "bad.tflite: 17 operators are not supported: operators 0, 2, 3, 4, 9, 10, 11, 12, 13 CUSTOM:Signal*"
        " (outputs 'signal_window', 'signal_fft_auto_scale', 'signal_rfft' and 6 more): an operator of"
        " TFLM's signal library (audio feature extraction, not a network layer); operators 5 CAST,"
        " 6 STRIDED_SLICE, 8 CAST, 14 CAST, 17 DIV, 19 MINIMUM, 20 MAXIMUM, 21 CAST (outputs 'Cast',"
        " 'strided_slice', 'Cast_1' and 5 more): no CMSIS-NN kernel in Fixpoint's support table runs it;"
        " for CUSTOM:Signal*: compute the features in the application (TFLM's signal library runs there)"
        " and import the network that takes them; for CAST, STRIDED_SLICE, DIV, MINIMUM, MAXIMUM:"
        " re-convert the model with supported operators in their place (SUPPORTED_OPS.md)",
    ),
    "a_model_compiled_by_vela_asks_for_the_model_before_it": (
        "person_detect_vela",
        "bad.tflite",
        "bad.tflite: 1 operator is not supported: operator 0 CUSTOM:ethos-u (output"
        " 'MobilenetV1/Predictions/Reshape_1'): the model was compiled by Vela for an Ethos-U NPU (the"
        " network is inside this one operator); import the .tflite that was given to Vela, before its"
        " compilation",
    ),
    "float_model_without_calib_is_refused": (
        "hello_world_float",
        "float.tflite",
        "float.tflite: a float model needs --calib DATA (representative inputs) to choose its activation"
        " ranges; only an int8 .tflite (TensorFlow's full-integer converter) brings its own",
    ),
}
"""TFLM example models refused: test id -> (model, the file's name, how the message ends)."""


@pytest.mark.parametrize("case", list(REFUSED_MODELS))
def test_a_refused_model_is_one_message_saying_why_and_what_to_do(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, file, ending = REFUSED_MODELS[case]
    message = _refused(tmp_path, tflm.model(model).read_bytes(), capsys, file)
    assert message.endswith(ending), message


def test_int8_mean_is_refused_with_tflms_arithmetic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(tmp_path, tflm.model("mobilenet_v2_quantized").read_bytes(), capsys)
    assert (
        "operator 81 (MEAN, output 'adaptive_avg_pool2d_1.1_transform_1'): TFLM computes an int8 MEAN"
        in message
    )


def outcome(raw: bytes) -> Graph | ModelError:
    """The import in its forked child: a graph, or one ModelError of one line naming the model."""
    try:
        return import_tflite(raw, name="fuzz.tflite")
    except ModelError as error:
        message = str(error)
        assert message.startswith("fuzz.tflite: ") and "\n" not in message, message
        return error


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    raw = bytearray(tflm.model("hello_world_int8").read_bytes())
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(raw) - 1))
        raw[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw)


@fuzz(40)
@given(mutated())
def test_mutated_bytes_import_or_fail_with_one_line(raw: bytes) -> None:
    assert isinstance(outcome(raw), Graph | ModelError)


def _float16_weights_model(weights: np.ndarray) -> bytes:
    """x (1, 4) -> FULLY_CONNECTED whose float32 weights are a DEQUANTIZE of float16 constants, as
    TensorFlow's float16 post-training quantization writes them."""
    b = flatbuffers.Builder(1024)

    def vec(array: np.ndarray) -> int:
        return int(b.CreateNumpyVector(np.ascontiguousarray(array)))

    def table_vector(offsets: list[int]) -> int:
        b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            b.PrependUOffsetTRelative(offset)
        return int(b.EndVector())

    def buffer(data: bytes) -> int:
        raw = vec(np.frombuffer(data, np.uint8)) if data else None
        tflite.BufferStart(b)
        if raw is not None:
            tflite.BufferAddData(b, raw)
        return int(tflite.BufferEnd(b))

    def tensor(name: str, shape: list[int], dtype: int, buffer_index: int) -> int:
        n, sh = b.CreateString(name), vec(np.array(shape, np.int32))
        tflite.TensorStart(b)
        tflite.TensorAddName(b, n)
        tflite.TensorAddShape(b, sh)
        tflite.TensorAddType(b, dtype)
        tflite.TensorAddBuffer(b, buffer_index)
        return int(tflite.TensorEnd(b))

    def opcode(code: int) -> int:
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, code)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        return int(tflite.OperatorCodeEnd(b))

    def operator(index: int, inputs: list[int], outputs: list[int]) -> int:
        i, o = vec(np.array(inputs, np.int32)), vec(np.array(outputs, np.int32))
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, index)
        tflite.OperatorAddInputs(b, i)
        tflite.OperatorAddOutputs(b, o)
        return int(tflite.OperatorEnd(b))

    T = tflite.TensorType
    shapes = [[1, 4], list(weights.shape), list(weights.shape), [1, weights.shape[0]]]
    types, buffers = [T.FLOAT32, T.FLOAT16, T.FLOAT32, T.FLOAT32], [0, 1, 0, 0]
    tensors = table_vector(
        [
            tensor(n, s, t, i)
            for n, s, t, i in zip(["x", "w16", "w", "y"], shapes, types, buffers, strict=True)
        ]
    )
    operators = table_vector([operator(0, [1], [2]), operator(1, [0, 2, -1], [3])])
    inputs, outputs = vec(np.array([0], np.int32)), vec(np.array([3], np.int32))
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors)
    tflite.SubGraphAddInputs(b, inputs)
    tflite.SubGraphAddOutputs(b, outputs)
    tflite.SubGraphAddOperators(b, operators)
    subgraphs = table_vector([tflite.SubGraphEnd(b)])
    ops = tflite.BuiltinOperator
    codes = table_vector([opcode(ops.DEQUANTIZE), opcode(ops.FULLY_CONNECTED)])
    data = table_vector([buffer(b""), buffer(weights.tobytes())])
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddBuffers(b, data)
    b.Finish(tflite.ModelEnd(b), b"TFL3")
    return bytes(b.Output())


def test_float16_weights_are_folded_not_refused_as_a_conversion() -> None:
    """The DEQUANTIZE of float16 weights becomes their float32 constant (it was once folded and then
    refused as 'a conversion inside the model')."""
    weights = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float16)
    graph = import_tflite(_float16_weights_model(weights), name="f16.tflite")
    assert [(n.op, n.inputs) for n in graph.nodes] == [(Op.FULLY_CONNECTED, ("x", "w", ""))]
    assert np.array_equal(graph.constant("w"), weights.astype(np.float32))
