"""From bytes to a checked ONNX model with static shapes: decode, check, fix the batch, fold constants, infer.

Everything that can be computed without an input is computed here (Constant nodes, Shape of a static
tensor, shape arithmetic feeding a Reshape, DequantizeLinear of int8 weights), so the translation to
the IR only sees layers. Each failure becomes a ModelError naming the file (and the node or tensor).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from quantcore.errors import ModelError
from quantcore.importers import _qdq
from quantcore.ir import QuantParams

MIN_OPSET = 7
"""Opset 7 brought numpy broadcasting to Add/Mul; older models should be converted first."""
_MAX_FOLD_ROUNDS = 8
_NOT_FOLDABLE = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)

Shape = tuple[int | str | None, ...]


@dataclass(frozen=True)
class Source:
    """The model's bytes and how to name it in messages."""

    data: bytes
    path: str
    directory: Path | None
    """Where external data files are looked up (the model file's folder)."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class Loaded:
    """A decoded model after folding and strict shape inference."""

    model: onnx.ModelProto
    opset: int
    consts: dict[str, np.ndarray]
    """Every constant value by name (initializers and folded outputs), in its ONNX dtype."""
    types: dict[str, tuple[int, Shape | None]]
    """(elem_type, shape) of every value shape inference knows."""
    weight_quant: dict[str, QuantParams] = field(default_factory=dict)
    """QuantParams of constants folded from a DequantizeLinear (QDQ weights and biases)."""


def read(path_or_bytes: str | os.PathLike[str] | bytes, name: str | None) -> Source:
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        return Source(bytes(path_or_bytes), name or "<onnx bytes>", None)
    path = Path(path_or_bytes)
    try:
        return Source(path.read_bytes(), str(path), path.parent)
    except OSError as e:
        raise ModelError(str(path), f"cannot read the model file: {e.strerror or e}") from None


def decode(source: Source) -> onnx.ModelProto:
    """Parse and check the protobuf; a corrupt or truncated file is a ModelError naming it."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(source.data)
    except Exception as e:
        # protobuf's DecodeError (and, from its C++ backend, other types): the bytes are not a ModelProto.
        raise ModelError(source.path, f"is not a readable ONNX file (corrupt or truncated?): {e}") from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(source.path, "is not an ONNX model: it holds no graph (empty or truncated file?)")
    if source.directory is not None and _has_external_data(model):
        try:
            onnx.load_external_data_for_model(model, str(source.directory))
        except (OSError, ValueError) as e:
            raise ModelError(source.path, f"cannot load the model's external data: {e}") from None
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as e:
        raise ModelError(source.path, f"is not a valid ONNX model (onnx.checker: {_first_line(e)})") from None
    return model


def _has_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def default_opset(model: onnx.ModelProto, path: str) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    opset = versions[0] if versions else 1
    if opset < MIN_OPSET:
        raise ModelError(
            path,
            f"uses ONNX opset {opset}; Fixpoint reads opset {MIN_OPSET} and newer. Convert it with "
            "onnx.version_converter.convert_version(model, 13) or re-export.",
        )
    return opset


def fix_batch(model: onnx.ModelProto, batch: int) -> None:
    """Give every graph input's first dimension the value `batch` when it is symbolic or unknown."""
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        if dims and not (dims[0].HasField("dim_value") and dims[0].dim_value > 0):
            dims[0].Clear()
            dims[0].dim_value = batch


def load(source: Source, batch: int) -> Loaded:
    model = decode(source)
    opset = default_opset(model, source.path)
    name_nodes(model)
    fix_batch(model, batch)
    loaded = Loaded(model, opset, _initializers(model, source.path), {})
    for _ in range(_MAX_FOLD_ROUNDS):
        loaded.types = _types(_infer(model, source.path, strict=False))
        if not _fold_round(loaded, source.path):
            break
    loaded.model = _infer(model, source.path, strict=True)
    loaded.types = _types(loaded.model)
    return loaded


def _initializers(model: onnx.ModelProto, path: str) -> dict[str, np.ndarray]:
    consts = {}
    for tensor in model.graph.initializer:
        try:
            consts[tensor.name] = numpy_helper.to_array(tensor)
        except (ValueError, TypeError) as e:
            raise ModelError(path, f"initializer {tensor.name!r} cannot be read: {e}") from None
    return consts


def _infer(model: onnx.ModelProto, path: str, *, strict: bool) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, check_type=strict, strict_mode=strict, data_prop=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError) as e:
        raise ModelError(path, f"shape inference failed: {_first_line(e)}") from None


def _types(model: onnx.ModelProto) -> dict[str, tuple[int, Shape | None]]:
    values = [*model.graph.input, *model.graph.value_info, *model.graph.output]
    return {v.name: _type_of(v) for v in values if v.type.HasField("tensor_type")}


def _type_of(value: onnx.ValueInfoProto) -> tuple[int, Shape | None]:
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape"):
        return tensor_type.elem_type, None
    dims: list[int | str | None] = []
    for d in tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param if d.HasField("dim_param") else None)
    return tensor_type.elem_type, tuple(dims)


# -- constant folding -----------------------------------------------------------------------------------


def _fold_round(loaded: Loaded, path: str) -> bool:
    """Fold every node computable at import, in graph order (so chains fold in one round)."""
    graph = loaded.model.graph
    kept: list[onnx.NodeProto] = []
    folded = False
    for node in graph.node:
        values = _fold(loaded, node, path)
        if values is None:
            kept.append(node)
            continue
        folded = True
        for name, value in zip(node.output, values, strict=False):
            if name:
                loaded.consts[name] = value
                graph.initializer.append(numpy_helper.from_array(value, name))
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
    return folded


def _fold(loaded: Loaded, node: onnx.NodeProto, path: str) -> list[np.ndarray] | None:
    constant = all(name in loaded.consts for name in node.input if name)
    if _qdq.is_dq(node):  # also com.microsoft's, which the reference implementation does not run
        return _dequantize(loaded, node, path) if constant else None
    if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDABLE:
        return None
    if node.op_type in ("Shape", "Size"):
        return _static_shape(loaded, node)
    if not constant:
        return None
    return _evaluate(node, [loaded.consts[name] if name else None for name in node.input], loaded.opset)


def _dequantize(loaded: Loaded, node: onnx.NodeProto, path: str) -> list[np.ndarray]:
    """A DequantizeLinear of a constant (a QDQ weight or bias): folded, its QuantParams kept."""
    value, quant = _qdq.dequantize(node, [loaded.consts[name] if name else None for name in node.input], path)
    loaded.weight_quant[node.output[0]] = quant
    return [value]


def _static_shape(loaded: Loaded, node: onnx.NodeProto) -> list[np.ndarray] | None:
    _, shape = loaded.types.get(node.input[0], (0, None))
    if shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
        return None
    dims = np.array(shape, np.int64)
    if node.op_type == "Size":
        return [np.array(dims.prod(), np.int64)]
    attrs = {a.name: a.i for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return [dims[start:end]]


def _evaluate(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    """One node on constant inputs with ONNX's reference implementation; None when it cannot run."""
    from onnx.reference import ReferenceEvaluator

    try:
        evaluator = ReferenceEvaluator(node, opsets={"": opset})
        feeds = {name: value for name, value in zip(node.input, inputs, strict=True) if name}
        results: Any = evaluator.run(None, feeds)
    except Exception:
        # Any failure of the reference implementation only means "not folded": the node is imported as is
        # (and rejected with the support table's reason when it is not a layer Fixpoint maps).
        return None
    return [np.asarray(r) for r in results]


def name_nodes(model: onnx.ModelProto) -> None:
    """Give every unnamed node the name "<op_type>_<index>" (and make duplicates unique), before folding
    removes nodes, so that names match the positions in the file."""
    taken = {node.name for node in model.graph.node if node.name}
    seen: set[str] = set()
    for index, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        candidate, n = name, 1
        while candidate in seen or (candidate != node.name and candidate in taken):
            candidate, n = f"{name}_{n}", n + 1
        node.name = candidate
        seen.add(candidate)
