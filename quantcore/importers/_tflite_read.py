"""From the bytes of a .tflite file to plain, checked Python values: tensors, operators, their options.

The file is read with the `tflite` package's flatbuffer bindings (generated from TensorFlow Lite's
schema), never by hand. Those bindings trust the bytes: a vector length or an offset from a corrupt or
hostile file becomes an IndexError or struct.error deep inside them, or a loop over 2^31 elements. So
every vector length is checked against the file's size before it is iterated (an element takes at least
one byte), every access runs inside one handler that turns the bindings' exceptions into a ModelError
naming the file, and what leaves this module is plain data (numpy arrays, tuples) that the translation
can use without touching the flatbuffer again.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
import tflite

from quantcore.display import quoted, said, shown
from quantcore.errors import ModelError

IDENTIFIER = b"TFL3"
"""TensorFlow Lite's flatbuffer file identifier, at bytes 4..8 of every .tflite file."""

_TYPES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_BUILTINS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_NUMPY = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "FLOAT64": np.float64,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "INT16": np.int16,
    "UINT16": np.uint16,
    "INT32": np.int32,
    "UINT32": np.uint32,
    "INT64": np.int64,
    "UINT64": np.uint64,
    "BOOL": np.bool_,
}
"""TFLite tensor types whose buffers this module can read as numpy arrays; others stay bytes-less."""

_BINDING_ERRORS = (struct.error, IndexError, ValueError, OverflowError, TypeError, UnicodeError)
"""What the generated bindings (and numpy.frombuffer under them) raise on bytes that break the schema."""


@dataclass(frozen=True)
class Quant:
    """A tensor's affine quantization: real = scale * (q - zero_point), per tensor or along `axis`."""

    scale: np.ndarray
    """float32, shape () or (channels,)."""
    zero_point: np.ndarray
    """int64, the same shape as scale."""
    axis: int


@dataclass(frozen=True)
class TflTensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    """TensorFlow Lite's type name: FLOAT32, INT8, UINT8, INT16, INT32, ..."""
    data: np.ndarray | None
    """The constant's value (shaped, in its own dtype), None for an activation."""
    quant: Quant | None
    dynamic: tuple[int, ...] | None
    """The shape signature when it has an unknown (-1) dimension, else None."""


@dataclass(frozen=True)
class TflOperator:
    index: int
    op: str
    """The builtin operator's name (CONV_2D, ...) or "CUSTOM:<code>"."""
    inputs: tuple[int, ...]
    """Tensor indices; -1 marks an absent optional input."""
    outputs: tuple[int, ...]
    options: dict[str, Any]


@dataclass(frozen=True)
class TflModel:
    path: str
    sha256: str
    tensors: tuple[TflTensor, ...]
    operators: tuple[TflOperator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    description: str


def is_tflite(data: bytes) -> bool:
    """True when `data` carries TFLite's flatbuffer identifier (bytes 4..8)."""
    return data[4:8] == IDENTIFIER


def read_model(data: bytes, path: str) -> TflModel:
    """The model in `data`, checked; ModelError naming `path` when it is not a readable TFLite model."""
    if len(data) < 8 or not is_tflite(data):
        found = data[4:8] if len(data) >= 8 else b""
        raise ModelError(
            path,
            f"is not a TensorFlow Lite model (bytes 4..8 are {found!r}, a .tflite file has {IDENTIFIER!r});"
            " pass a .tflite file written by TensorFlow's converter, or an .onnx model",
        )
    with _corrupt(path):
        return _Reader(data, path).model()


@contextmanager
def _corrupt(path: str) -> Iterator[None]:
    try:
        yield
    except _BINDING_ERRORS as exc:
        raise ModelError(
            path,
            f"is corrupt or truncated: its flatbuffer breaks TensorFlow Lite's schema ({type(exc).__name__}:"
            f" {said(exc)}); re-export it from TensorFlow",
        ) from exc


class _Reader:
    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.path = data, path
        self.root = tflite.Model.GetRootAsModel(data, 0)

    def error(self, problem: str) -> ModelError:
        return ModelError(self.path, problem)

    def count(self, length: int, what: str, size: int = 1) -> int:
        """A vector length that can exist in this file (each element takes at least `size` bytes)."""
        if length < 0 or length * size > len(self.data):
            raise self.error(
                f"is corrupt: {what} claims {length} entries in a file of {len(self.data)} bytes"
            )
        return length

    def model(self) -> TflModel:
        root = self.root
        subgraphs = self.count(root.SubgraphsLength(), "the subgraph list", 4)
        if subgraphs != 1:
            raise self.error(
                f"has {subgraphs} subgraphs; Fixpoint imports models of one subgraph (no WHILE/IF/"
                "CALL_ONCE control flow) - convert the model without control flow"
            )
        graph = root.Subgraphs(0)
        codes = [
            self._code(i) for i in range(self.count(root.OperatorCodesLength(), "the operator codes", 4))
        ]
        buffers = self.count(root.BuffersLength(), "the buffer list", 4)
        tensors = tuple(
            self._tensor(graph.Tensors(i), i, buffers)
            for i in range(self.count(graph.TensorsLength(), "tensors", 4))
        )
        operators = tuple(
            self._operator(graph.Operators(i), i, codes, len(tensors))
            for i in range(self.count(graph.OperatorsLength(), "operators", 4))
        )
        inputs = self._indices(graph.InputsAsNumpy, graph.InputsLength(), "the subgraph inputs", len(tensors))
        outputs = self._indices(
            graph.OutputsAsNumpy, graph.OutputsLength(), "the subgraph outputs", len(tensors)
        )
        description = _text(root.Description())
        sha = hashlib.sha256(self.data).hexdigest()
        return TflModel(self.path, sha, tensors, operators, inputs, outputs, description)

    def _code(self, index: int) -> str:
        code = self.root.OperatorCodes(index)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())  # TFLite's GetBuiltinCode
        name = _BUILTINS.get(builtin, f"BUILTIN_{builtin}")
        return f"CUSTOM:{shown(_text(code.CustomCode()))}" if name == "CUSTOM" else name

    def _indices(self, read: Callable[[], Any], length: int, what: str, tensors: int) -> tuple[int, ...]:
        """Tensor indices (-1: an absent optional one), each checked against the model's `tensors`."""
        values = self._integers(read, length, what)
        bad = [v for v in values if not -1 <= v < tensors]
        if bad:
            raise self.error(f"is corrupt: {what} name tensor {bad[0]}, but the model has {tensors} tensors")
        return values

    def _tensor(self, t: Any, index: int, buffers: int) -> TflTensor:
        name = _text(t.Name()) or f"tensor_{index}"
        dtype = _TYPES.get(t.Type(), f"TYPE_{t.Type()}")
        shape = self._integers(t.ShapeAsNumpy, t.ShapeLength(), f"the shape of tensor {quoted(name)}")
        signature = self._integers(
            t.ShapeSignatureAsNumpy, t.ShapeSignatureLength(), f"the shape signature of {quoted(name)}"
        )
        if any(d < 0 for d in shape):
            raise self.error(f"tensor {quoted(name)} has a negative dimension in its shape {shape}")
        dynamic = signature if any(d < 0 for d in signature) else None
        quant = self._quant(t.Quantization(), name)
        buffer = t.Buffer()
        if not 0 <= buffer < max(buffers, 1):
            raise self.error(f"tensor {quoted(name)} names buffer {buffer}, but the model has {buffers}")
        data = self._data(buffer, name, shape, dtype) if buffers else None
        return TflTensor(index, name, shape, dtype, data, quant, dynamic)

    def _integers(self, read: Callable[[], Any], length: int, what: str) -> tuple[int, ...]:
        """An int32 vector (a shape, indices) whose length the file can hold."""
        if not self.count(length, what, 4):
            return ()
        return tuple(int(v) for v in np.asarray(read()).reshape(-1))

    def _quant(self, q: Any, name: str) -> Quant | None:
        if q is None:
            return None
        scales = self.count(q.ScaleLength(), f"the scales of {quoted(name)}", 4)
        zeros = self.count(q.ZeroPointLength(), f"the zero points of {quoted(name)}", 8)
        if scales == 0:
            return None
        scale = np.asarray(q.ScaleAsNumpy(), np.float32).reshape(-1)
        zero = np.asarray(q.ZeroPointAsNumpy(), np.int64).reshape(-1) if zeros else np.zeros(scales, np.int64)
        if zero.size != scale.size:
            raise self.error(f"tensor {quoted(name)} has {scale.size} scales but {zero.size} zero points")
        if scale.size == 1:
            return Quant(scale.reshape(()), zero.reshape(()), 0)
        # The axis is checked where it matters: converters wrote axis 3 for 1-D per-channel biases.
        return Quant(scale, zero, int(q.QuantizedDimension()))

    def _data(self, index: int, name: str, shape: tuple[int, ...], dtype: str) -> np.ndarray | None:
        buffer = self.root.Buffers(index)
        offset, size = int(buffer.Offset()), int(buffer.Size())
        if offset > 1:  # a model over 2 GB keeps its buffers after the flatbuffer, at a file offset
            if offset + size > len(self.data):
                raise self.error(
                    f"buffer {index} of tensor {quoted(name)} lies at bytes {offset}..{offset + size},"
                    f" past the end of the file ({len(self.data)} bytes): the file is truncated"
                )
            raw = np.frombuffer(self.data, np.uint8, size, offset)
        else:
            length = self.count(buffer.DataLength(), f"buffer {index}")
            if not length:
                return None
            raw = np.asarray(buffer.DataAsNumpy(), np.uint8)
        kind = _NUMPY.get(dtype)
        if kind is None:
            raise self.error(
                f"constant tensor {quoted(name)} is of type {dtype}, which Fixpoint does not read"
            )
        needed = math.prod(shape) * np.dtype(kind).itemsize
        if raw.size != needed:
            raise self.error(
                f"constant tensor {quoted(name)} of shape {shape} ({dtype}) needs {needed} bytes, but its"
                f" buffer {index} holds {raw.size}; the file is corrupt - re-export it"
            )
        return raw.view(np.dtype(kind).newbyteorder("<")).astype(kind).reshape(shape)

    def _operator(self, op: Any, index: int, codes: list[str], tensors: int) -> TflOperator:
        code = int(op.OpcodeIndex())
        if not 0 <= code < len(codes):
            raise self.error(f"operator {index} names operator code {code}, but the model has {len(codes)}")
        name = codes[code]
        inputs = self._indices(
            op.InputsAsNumpy, op.InputsLength(), f"the inputs of operator {index}", tensors
        )
        outputs = self._indices(
            op.OutputsAsNumpy, op.OutputsLength(), f"the outputs of operator {index}", tensors
        )
        return TflOperator(index, name, inputs, outputs, _options(op, name))


_OPTIONS: dict[str, tuple[Any, tuple[str, ...]]] = {  # the tflite package's untyped option classes
    "CONV_2D": (
        tflite.Conv2DOptions,
        ("Padding", "StrideH", "StrideW", "DilationHFactor", "DilationWFactor", "FusedActivationFunction"),
    ),
    "DEPTHWISE_CONV_2D": (
        tflite.DepthwiseConv2DOptions,
        (
            "Padding",
            "StrideH",
            "StrideW",
            "DilationHFactor",
            "DilationWFactor",
            "DepthMultiplier",
            "FusedActivationFunction",
        ),
    ),
    "FULLY_CONNECTED": (
        tflite.FullyConnectedOptions,
        ("FusedActivationFunction", "WeightsFormat", "KeepNumDims"),
    ),
    "AVERAGE_POOL_2D": (
        tflite.Pool2DOptions,
        ("Padding", "StrideH", "StrideW", "FilterHeight", "FilterWidth", "FusedActivationFunction"),
    ),
    "MAX_POOL_2D": (
        tflite.Pool2DOptions,
        ("Padding", "StrideH", "StrideW", "FilterHeight", "FilterWidth", "FusedActivationFunction"),
    ),
    "ADD": (tflite.AddOptions, ("FusedActivationFunction",)),
    "MUL": (tflite.MulOptions, ("FusedActivationFunction",)),
    "SOFTMAX": (tflite.SoftmaxOptions, ("Beta",)),
    "CONCATENATION": (tflite.ConcatenationOptions, ("Axis", "FusedActivationFunction")),
    "MEAN": (tflite.ReducerOptions, ("KeepDims",)),
    "SVDF": (tflite.SVDFOptions, ("Rank", "FusedActivationFunction", "AsymmetricQuantizeInputs")),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (
        tflite.UnidirectionalSequenceLSTMOptions,
        ("FusedActivationFunction", "CellClip", "ProjClip", "TimeMajor", "AsymmetricQuantizeInputs"),
    ),
}
"""The builtin options each translated operator reads (the flatbuffer's defaults when absent)."""


def _options(op: Any, name: str) -> dict[str, Any]:
    spec = _OPTIONS.get(name)
    if spec is None:
        return {}
    cls, fields = spec
    table = op.BuiltinOptions()
    if table is None:  # absent: every field reads as the schema's default
        options = cls.GetRootAs(_EMPTY_TABLE, 0)
    else:
        options = cls()
        options.Init(table.Bytes, table.Pos)
    return {field: getattr(options, field)() for field in fields}


def _empty_table() -> bytes:
    builder = flatbuffers.Builder(16)
    builder.StartObject(0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


_EMPTY_TABLE = _empty_table()


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value else ""
