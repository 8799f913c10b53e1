"""Bad .tflite files: each is one clear message naming the file (and operator or tensor) and what to do,
exit status 2 through the CLI and nothing written; mutated bytes of a real model import or fail so,
never crash or hang. The bad models are real TFLM models with a field changed in place."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tflite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantcore.cli import main
from quantcore.errors import ModelError
from quantcore.importers.tflite import import_tflite
from quantcore.ir import Graph
from tests import tflm

FUZZ = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES") or 0)


def fuzz(default: int) -> Any:
    """Hypothesis settings: `default` examples (FIXPOINT_FUZZ_EXAMPLES overrides), no deadline."""
    return settings(max_examples=FUZZ or default, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _field(table: Any, slot: int) -> int:
    """The file position of a table's field (its vtable slot: 4, 6, 8, ...); the field must be present."""
    offset = table._tab.Offset(slot)
    assert offset, slot
    return int(table._tab.Pos + offset)


def _vector(table: Any, slot: int) -> int:
    """The file position of a vector field's first element (its length is the uint32 before it)."""
    return int(table._tab.Vector(table._tab.Offset(slot)))


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
    struct.pack_into("<I", data, _vector(_activation(model).Quantization(), 8) - 4, 0)


def _dynamic(model: Any, data: bytearray) -> None:
    struct.pack_into("<i", data, _vector(_activation(model), 18) + 4, -1)  # shape_signature[1]


def _two_subgraphs(model: Any, data: bytearray) -> None:
    struct.pack_into("<I", data, _vector(model, 8) - 4, 2)


def _huge_buffer(model: Any, data: bytearray) -> None:
    graph = model.Subgraphs(0)
    weights = graph.Tensors(int(graph.Operators(0).Inputs(1)))
    buffer = model.Buffers(weights.Buffer())
    struct.pack_into("<I", data, _vector(buffer, 4) - 4, 0x7FFFFFF0)


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


def test_unsupported_operators_are_listed_with_index_and_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tflm.model("trained_lstm_int8").read_bytes()
    message = _refused(tmp_path, raw, capsys)
    assert message.endswith(
        "bad.tflite: 1 operator is not supported: operator 0 UNIDIRECTIONAL_SEQUENCE_LSTM (output"
        " 'tfl.unidirectional_sequence_lstm'): Fixpoint does not translate LSTM layers yet; no"
        " re-conversion avoids it: run this model with TFLM until Fixpoint translates it (CMSIS-NN has the"
        " kernels; a later version of Fixpoint)"
    ), message


def test_the_same_operator_refused_again_is_one_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(tmp_path, tflm.model("keyword_scrambled_8bit").read_bytes(), capsys)
    assert message.endswith(
        "bad.tflite: 7 operators are not supported: operators 1, 3, 5, 7, 9, 10, 11 SVDF (outputs 'tensor_5',"
        " 'tensor_13', 'tensor_21' and 4 more): Fixpoint does not translate SVDF layers yet; no"
        " re-conversion avoids it: run this model with TFLM until Fixpoint translates it (CMSIS-NN has the"
        " kernels; a later version of Fixpoint)"
    ), message


def test_different_advice_is_given_per_operator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = _refused(tmp_path, tflm.model("dtln_noise_suppression").read_bytes(), capsys)
    assert message.endswith(
        "bad.tflite: 3 operators are not supported: operators 0, 1 UNIDIRECTIONAL_SEQUENCE_LSTM (outputs"
        " 'tfl.unidirectional_sequence_lstm', 'tfl.unidirectional_sequence_lstm1'): Fixpoint does not"
        " translate LSTM layers yet; operator 3 LOGISTIC (output 'StatefulPartitionedCall:0'): CMSIS-NN has"
        " no int8 kernel for it (arm_nn_activation_s16 takes int16 only); for UNIDIRECTIONAL_SEQUENCE_LSTM:"
        " no re-conversion avoids it: run this model with TFLM until Fixpoint translates it (CMSIS-NN has"
        " the kernels; a later version of Fixpoint); for LOGISTIC: re-convert the model with supported"
        " operators in their place (SUPPORTED_OPS.md)"
    ), message


def test_tflms_signal_library_is_named_as_feature_extraction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(tmp_path, tflm.model("audio_preprocessor_int8").read_bytes(), capsys)
    assert message.endswith(
        "bad.tflite: 17 operators are not supported: operators 0, 2, 3, 4, 9, 10, 11, 12, 13 CUSTOM:Signal*"
        " (outputs 'signal_window', 'signal_fft_auto_scale', 'signal_rfft' and 6 more): an operator of"
        " TFLM's signal library (audio feature extraction, not a network layer); operators 5 CAST,"
        " 6 STRIDED_SLICE, 8 CAST, 14 CAST, 17 DIV, 19 MINIMUM, 20 MAXIMUM, 21 CAST (outputs 'Cast',"
        " 'strided_slice', 'Cast_1' and 5 more): no CMSIS-NN kernel in Fixpoint's support table runs it;"
        " for CUSTOM:Signal*: compute the features in the application (TFLM's signal library runs there)"
        " and import the network that takes them; for CAST, STRIDED_SLICE, DIV, MINIMUM, MAXIMUM:"
        " re-convert the model with supported operators in their place (SUPPORTED_OPS.md)"
    ), message


def test_a_model_compiled_by_vela_asks_for_the_model_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(tmp_path, tflm.model("person_detect_vela").read_bytes(), capsys)
    assert message.endswith(
        "bad.tflite: 1 operator is not supported: operator 0 CUSTOM:ethos-u (output"
        " 'MobilenetV1/Predictions/Reshape_1'): the model was compiled by Vela for an Ethos-U NPU (the"
        " network is inside this one operator); import the .tflite that was given to Vela, before its"
        " compilation"
    ), message


def test_int8_mean_is_refused_with_tflms_arithmetic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    message = _refused(tmp_path, tflm.model("mobilenet_v2_quantized").read_bytes(), capsys)
    assert (
        "operator 81 (MEAN, output 'adaptive_avg_pool2d_1.1_transform_1'): TFLM computes an int8 MEAN"
        in message
    )


def test_float_model_without_calib_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = _refused(tmp_path, tflm.model("hello_world_float").read_bytes(), capsys, "float.tflite")
    assert message.endswith(
        "float.tflite: a float model needs --calib DATA (representative inputs) to choose its activation"
        " ranges; only an int8 .tflite (TensorFlow's full-integer converter) brings its own"
    ), message


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
