"""Where tests find TensorFlow Lite Micro's checkout and its example models (never committed here).

FIXPOINT_TFLM_REPO names the checkout, else the per-user cache (~/.cache/fixpoint/tflite-micro); a test
that needs a model it lacks is skipped with the reason (failed under FIXPOINT_REQUIRE_TARGETS=1: see
tests/needs.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from tests import needs

_EXAMPLES = "tensorflow/lite/micro/examples/"
MODELS = {
    "hello_world_int8": "tensorflow/lite/micro/examples/hello_world/models/hello_world_int8.tflite",
    "hello_world_float": "tensorflow/lite/micro/examples/hello_world/models/hello_world_float.tflite",
    "micro_speech_quantized": _EXAMPLES + "micro_speech/models/micro_speech_quantized.tflite",
    "person_detect": "tensorflow/lite/micro/models/person_detect.tflite",
    "keyword_scrambled_8bit": "tensorflow/lite/micro/models/keyword_scrambled_8bit.tflite",
    "mobilenet_v2_quantized": "third_party/xtensa/examples/pytorch_to_tflite/"
    "mobilenet_v2_quantized_1x3x224x224.tflite",
    "simple_add_model": "tensorflow/lite/micro/examples/memory_footprint/models/simple_add_model.tflite",
    "trained_lstm_int8": "tensorflow/lite/micro/examples/mnist_lstm/trained_lstm_int8.tflite",
    "trained_lstm": "tensorflow/lite/micro/examples/mnist_lstm/trained_lstm.tflite",
    "keyword_scrambled": "tensorflow/lite/micro/models/keyword_scrambled.tflite",
    "micro_speech_lstm": "third_party/xtensa/examples/micro_speech_lstm/micro_speech_lstm.tflite",
    "dtln_noise_suppression": _EXAMPLES + "dtln/dtln_noise_suppression.tflite",
    "audio_preprocessor_int8": _EXAMPLES + "micro_speech/models/audio_preprocessor_int8.tflite",
    "person_detect_vela": "tensorflow/lite/micro/models/person_detect_vela.tflite",
}
"""TFLM's example models by short name -> path inside the checkout (every .tflite outside its tests)."""


def svdf_biases_divided(raw: bytes, divisor: int) -> bytes:
    """A model with every SVDF bias (int32) divided by `divisor`, in place: keyword_scrambled's scrambled
    biases saturate every SVDF output; divided by 1000 its layers take many values (a real test of the
    state they carry)."""
    import tflite

    data = bytearray(raw)
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() != tflite.BuiltinOperator.SVDF:
            continue
        buffer = model.Buffers(graph.Tensors(int(op.Inputs(3))).Buffer())
        start = field_vector(buffer, 4)
        size = buffer.DataLength()
        bias = np.frombuffer(raw[start : start + size], np.int32)
        data[start : start + size] = (bias // divisor).astype(np.int32).tobytes()
    return bytes(data)


SVDF_TIME_WEIGHTS_INPUT, SVDF_BIAS_INPUT, SVDF_STATE_INPUT = 2, 3, 4


def svdf_int8_state_model(raw: bytes, time_scale_divisor: float) -> bytes:
    """keyword_scrambled_8bit made an arm_svdf_s8 model, in place: every SVDF's int8 activation state
    zero point set to 0 (its zero points -50, -13... are what arm_svdf_s8, with no state offset, cannot
    reproduce; at 0 the layer is TFLM's int8-state SVDF exactly), and every SVDF's time weights' and
    bias's scales divided by `time_scale_divisor` (its scrambled time weights drive every output to -128
    or 127 at the scale they have; TFLM derives the output multiplier from it and checks that the bias
    scale is s_state * s_time)."""
    import tflite

    data = bytearray(raw)
    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() != tflite.BuiltinOperator.SVDF:
            continue
        state = graph.Tensors(int(op.Inputs(SVDF_STATE_INPUT))).Quantization()
        start = field_vector(state, 10)  # QuantizationParameters.zero_point: [int64]
        data[start : start + 8 * state.ZeroPointLength()] = bytes(8 * state.ZeroPointLength())
        for position in SVDF_TIME_WEIGHTS_INPUT, SVDF_BIAS_INPUT:  # TFLM: s_bias = s_state * s_time
            quant = graph.Tensors(int(op.Inputs(position))).Quantization()
            start = int(quant._tab.Vector(quant._tab.Offset(8)))  # QuantizationParameters.scale: [float32]
            scale = np.frombuffer(raw[start : start + 4], np.float32) / np.float32(time_scale_divisor)
            data[start : start + 4] = scale.astype(np.float32).tobytes()
    return bytes(data)


LSTM_BIAS_INPUTS, LSTM_HIDDEN_INPUT, LSTM_CELL_INPUT = (12, 13, 14, 15), 18, 19


def lstm_model(raw: bytes, steps: int, batch: int, time_major: bool, int16: bool = False) -> bytes:
    """A one-operator .tflite: the model's first int8 UNIDIRECTIONAL_SEQUENCE_LSTM (its weights, biases,
    scales and options) over `steps` time steps of `batch` sequences, time-major - input (steps, batch,
    features), output (steps, batch, hidden) - or batch-major, written with the tflite package's
    flatbuffer builder. Time-major with batch > 1 is what the kernel's time_major flag changes.

    `int16`: TensorFlow's 16x8 form instead - int16 input, output and hidden state of zero point 0 at
    1/256 of the int8 scales (the same real steps, finer), int64 biases (the int32 ones times 256: their
    scale is the input's times the weights'); the weights and the int16 cell state as they are."""
    import flatbuffers
    import tflite

    model = tflite.Model.GetRootAsModel(raw, 0)
    graph = model.Subgraphs(0)
    op = next(
        graph.Operators(i)
        for i in range(graph.OperatorsLength())
        if model.OperatorCodes(graph.Operators(i).OpcodeIndex()).BuiltinCode()
        == tflite.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM
    )
    options = tflite.UnidirectionalSequenceLSTMOptions()
    table = op.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    b = flatbuffers.Builder(1 << 16)
    vector = functools.partial(_vector, b)

    def lead(sequence: int) -> list[int]:
        return [steps, sequence] if time_major else [sequence, steps]

    features = int(graph.Tensors(op.Inputs(1)).ShapeAsNumpy()[1])
    hidden = int(graph.Tensors(op.Inputs(5)).ShapeAsNumpy()[1])
    shapes = {
        0: [*lead(batch), features],
        LSTM_HIDDEN_INPUT: [batch, hidden],
        LSTM_CELL_INPUT: [batch, hidden],
    }
    sources = [int(op.Inputs(i)) for i in range(op.InputsLength())] + [int(op.Outputs(0))]
    tensors = []
    data = []
    for position, index in enumerate(sources):
        if index < 0:
            continue
        t = graph.Tensors(index)
        content = model.Buffers(t.Buffer()).DataAsNumpy()
        buffer = 0
        if isinstance(content, np.ndarray) and content.size:
            data.append(content.tobytes())
            buffer = len(data)
        shape = shapes.get(position, [*lead(batch), hidden] if position == len(sources) - 1 else None)
        quant = t.Quantization()
        scale, zero_point, kind = quant.ScaleAsNumpy(), quant.ZeroPointAsNumpy(), t.Type()
        if int16 and position in (0, LSTM_HIDDEN_INPUT, len(sources) - 1):
            scale, zero_point, kind = scale / 256, zero_point * 0, tflite.TensorType.INT16
        elif int16 and position in LSTM_BIAS_INPUTS:
            scale, kind = scale / 256, tflite.TensorType.INT64
            data[-1] = (np.frombuffer(data[-1], np.int32).astype(np.int64) * 256).tobytes()
        s_offset, z_offset = vector(scale.astype(np.float32)), vector(zero_point.astype(np.int64))
        tflite.QuantizationParametersStart(b)
        tflite.QuantizationParametersAddScale(b, s_offset)
        tflite.QuantizationParametersAddZeroPoint(b, z_offset)
        q = tflite.QuantizationParametersEnd(b)
        name = b.CreateString(t.Name())
        shape_offset = vector(np.array(shape if shape is not None else t.ShapeAsNumpy(), np.int32))
        tflite.TensorStart(b)
        tflite.TensorAddName(b, name)
        tflite.TensorAddShape(b, shape_offset)
        tflite.TensorAddType(b, kind)
        tflite.TensorAddBuffer(b, buffer)
        tflite.TensorAddQuantization(b, q)
        tflite.TensorAddIsVariable(b, position in (LSTM_HIDDEN_INPUT, LSTM_CELL_INPUT))
        tensors.append((index, tflite.TensorEnd(b)))
    renumbered = {index: i for i, (index, _) in enumerate(tensors)}
    inputs = [renumbered.get(i, -1) for i in sources[:-1]]
    output = renumbered[sources[-1]]
    tflite.UnidirectionalSequenceLSTMOptionsStart(b)
    tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, options.FusedActivationFunction())
    tflite.UnidirectionalSequenceLSTMOptionsAddCellClip(b, options.CellClip())
    tflite.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, time_major)
    lstm_options = tflite.UnidirectionalSequenceLSTMOptionsEnd(b)
    return _one_operator_model(
        b,
        [t for _, t in tensors],
        (inputs, output),
        (tflite.BuiltinOptions.UnidirectionalSequenceLSTMOptions, lstm_options),
        tflite.BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM,
        data,
    )


def repo() -> Path:
    return Path(os.environ.get("FIXPOINT_TFLM_REPO") or Path.home() / ".cache" / "fixpoint" / "tflite-micro")


def model_path(name: str) -> Path | None:
    path = repo() / MODELS[name]
    return path if path.is_file() else None


def model(name: str) -> Path:
    """The model's path, or the test is skipped saying what is missing."""
    path = model_path(name)
    if path is None:
        needs.absent(f"{MODELS[name]} not found in the TFLM checkout {repo()} (set FIXPOINT_TFLM_REPO)")
    return path


def interpreter(path: Path) -> Any:
    """TFLM's Python interpreter (reference kernels) on the model, keeping every tensor readable after
    invoke (kPreserveAllTensors); skipped when the tflite-micro package is not installed."""
    runtime = needs.module(
        "tflite_micro.python.tflite_micro.runtime", "the tflite-micro package is not installed"
    )
    return runtime.Interpreter.from_file(
        str(path), intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors
    )


def input_quantization(interpreter: Any) -> tuple[tuple[int, ...], float, int]:
    """The model input's shape after the batch, its scale and its zero point (TFLM's own)."""
    details = interpreter.get_input_details(0)
    quant = details["quantization_parameters"]
    return tuple(details["shape"][1:]), float(quant["scales"][0]), int(quant["zero_points"][0])


def real_values(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """The data D for int8 vectors q: (q - zero_point) * scale as float32, which quantizes back to q."""
    return ((q.astype(np.float64) - zero_point) * scale).astype(np.float32)


def outputs(interpreter: Any, samples: np.ndarray) -> list[np.ndarray]:
    """TFLM's output 0 for each sample, one invoke each (TFLM's batch is 1)."""
    result = []
    for sample in samples:
        interpreter.set_input(sample[np.newaxis], 0)
        interpreter.invoke()
        result.append(interpreter.get_output(0))
    return result


def mnist_digits(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` inputs (count, 28, 28) for mnist_lstm in [0, 1] (its evaluate.py's /255) made from TFLM's ten
    sample digits (examples/mnist_lstm/samples/sample<k>.png is digit k): each rolled by up to 3 pixels
    with seeded noise of 0.05 added; and their labels. Skipped when the samples are absent."""
    from PIL import Image

    folder = repo() / _EXAMPLES / "mnist_lstm" / "samples"
    if not (folder / "sample0.png").is_file():
        needs.absent(f"mnist_lstm's sample digits not found in the TFLM checkout {repo()}")
    samples = [np.asarray(Image.open(folder / f"sample{k}.png"), np.float32) / 255 for k in range(10)]
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, count)
    shifts = rng.integers(-3, 4, (count, 2))
    images = np.stack(
        [np.roll(samples[k], tuple(s), axis=(0, 1)) for k, s in zip(labels, shifts, strict=True)]
    )
    noisy = np.clip(images + 0.05 * rng.standard_normal(images.shape), 0.0, 1.0)
    return noisy.astype(np.float32), labels.astype(np.int64)


def float_svdf_model(features: int, filters: int, memory: int, rank: int, seed: int) -> bytes:
    """A one-operator float32 .tflite: SVDF over input (1, features) with seeded random feature weights
    (filters, features), time weights (filters, memory) and bias (filters / rank,), its activation state a
    float32 variable tensor (1, filters * memory), no fused activation (no float SVDF model ships with
    TFLM)."""
    rng = np.random.default_rng(seed)
    units = filters // rank
    constants = {
        1: (rng.standard_normal((filters, features)) / np.sqrt(features)).astype(np.float32),
        2: (rng.standard_normal((filters, memory)) / np.sqrt(memory)).astype(np.float32),
        3: (0.1 * rng.standard_normal(units)).astype(np.float32),
    }
    shapes = [
        (1, features),
        (filters, features),
        (filters, memory),
        (units,),
        (1, filters * memory),
        (1, units),
    ]
    tensors = [SvdfTensor(shape, constants.get(i, np.zeros(0, np.float32))) for i, shape in enumerate(shapes)]
    return svdf_model(tensors, rank)


@dataclasses.dataclass(frozen=True)
class SvdfTensor:
    """One tensor of svdf_model: its shape, its data's type (and its data, when a constant; empty
    otherwise) and its quantization (scale None: a float tensor)."""

    shape: tuple[int, ...]
    data: np.ndarray
    scale: float | None = None
    zero_point: int = 0


_TFLITE_TYPES = {"float32": "FLOAT32", "int8": "INT8", "int16": "INT16", "int32": "INT32"}
_SVDF_NAMES = ("input", "weights_feature", "weights_time", "bias", "activation_state", "output")


def svdf_model(tensors: list[SvdfTensor], rank: int) -> bytes:
    """A one-operator .tflite: SVDF of the six tensors (input, feature weights, time weights, bias,
    activation state - a variable tensor -, output), written with the tflite package's flatbuffer builder:
    a float model, or an int8 one with the scales given."""
    import flatbuffers
    import tflite

    b = flatbuffers.Builder(1 << 16)
    vector = functools.partial(_vector, b)
    offsets = []
    for index, (name, t) in enumerate(zip(_SVDF_NAMES, tensors, strict=True)):
        quant = None
        if t.scale is not None:
            s_offset = vector(np.array([t.scale], np.float32))
            z_offset = vector(np.array([t.zero_point], np.int64))
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, s_offset)
            tflite.QuantizationParametersAddZeroPoint(b, z_offset)
            quant = tflite.QuantizationParametersEnd(b)
        name_offset, shape_offset = b.CreateString(name), vector(np.array(t.shape, np.int32))
        tflite.TensorStart(b)
        tflite.TensorAddName(b, name_offset)
        tflite.TensorAddShape(b, shape_offset)
        tflite.TensorAddType(b, getattr(tflite.TensorType, _TFLITE_TYPES[t.data.dtype.name]))
        tflite.TensorAddBuffer(b, index + 1 if t.data.size else 0)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        tflite.TensorAddIsVariable(b, index == SVDF_STATE_INPUT)
        offsets.append(tflite.TensorEnd(b))
    tflite.SVDFOptionsStart(b)
    tflite.SVDFOptionsAddRank(b, rank)
    tflite.SVDFOptionsAddFusedActivationFunction(b, tflite.ActivationFunctionType.NONE)
    svdf_options = tflite.SVDFOptionsEnd(b)
    data = [np.ascontiguousarray(t.data).tobytes() if t.data.size else b"" for t in tensors]
    return _one_operator_model(
        b, offsets, ([0, 1, 2, 3, 4], 5), (tflite.BuiltinOptions.SVDFOptions, svdf_options),
        tflite.BuiltinOperator.SVDF, data,
    )  # fmt: skip


def _vector(b: Any, array: np.ndarray) -> int:
    return int(b.CreateNumpyVector(np.ascontiguousarray(array)))


def _tables(b: Any, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return int(b.EndVector())


def _one_operator_model(
    b: Any,
    tensors: list[int],
    io: tuple[list[int], int],
    options: tuple[int, int],
    code: int,
    data: list[bytes],
) -> bytes:
    """The .tflite of one operator over `tensors` (built in `b`): its inputs and output (tensor indices,
    the first input the graph's), its builtin options (type, table), its operator code, and the buffers'
    contents (buffer 0 is the empty one; a tensor's buffer index counts from 1)."""
    import tflite

    inputs, output = io
    op_inputs, op_outputs = _vector(b, np.array(inputs, np.int32)), _vector(b, np.array([output], np.int32))
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, 0)
    tflite.OperatorAddInputs(b, op_inputs)
    tflite.OperatorAddOutputs(b, op_outputs)
    tflite.OperatorAddBuiltinOptionsType(b, options[0])
    tflite.OperatorAddBuiltinOptions(b, options[1])
    operator = tflite.OperatorEnd(b)
    tensor_vector, operators = _tables(b, tensors), _tables(b, [operator])
    graph_inputs = _vector(b, np.array([inputs[0]], np.int32))
    graph_outputs = _vector(b, np.array([output], np.int32))
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensor_vector)
    tflite.SubGraphAddInputs(b, graph_inputs)
    tflite.SubGraphAddOutputs(b, graph_outputs)
    tflite.SubGraphAddOperators(b, operators)
    subgraph = tflite.SubGraphEnd(b)
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, code)
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    codes = _tables(b, [tflite.OperatorCodeEnd(b)])
    buffer_offsets = []
    for content in [b"", *data]:
        raw_offset = _vector(b, np.frombuffer(content, np.uint8)) if content else None
        tflite.BufferStart(b)
        if raw_offset is not None:
            tflite.BufferAddData(b, raw_offset)
        buffer_offsets.append(tflite.BufferEnd(b))
    buffer_vector, subgraphs = _tables(b, buffer_offsets), _tables(b, [subgraph])
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddBuffers(b, buffer_vector)
    b.Finish(tflite.ModelEnd(b), b"TFL3")
    return bytes(b.Output())


def field_vector(table: Any, slot: int) -> int:
    """The file position of a flatbuffer vector field's first element (its length is the uint32 before
    it), for editing a model's bytes in place."""
    return int(table._tab.Vector(table._tab.Offset(slot)))


def with_operator_input(raw: bytes, position: int, tensor: int) -> bytes:
    """The model with input `position` of its operator 0 set to tensor index `tensor` (-1: absent)."""
    import struct

    import tflite

    data = bytearray(raw)
    op = tflite.Model.GetRootAsModel(raw, 0).Subgraphs(0).Operators(0)
    struct.pack_into("<i", data, field_vector(op, 6) + 4 * position, tensor)
    return bytes(data)
