"""From bytes to a checked ONNX model with static shapes: decode, check, fix the batch, fold constants, infer.

Everything that can be computed without an input is computed here (Constant nodes, Shape of a static
tensor, shape arithmetic feeding a Reshape, DequantizeLinear of int8 weights), so the translation to
the IR only sees layers. Each failure becomes a ModelError naming the file (and the node or tensor).

The file is untrusted: it is read through quantcore.untrusted (a regular file, at most
quantcore.limits.MODEL_MAX_BYTES), its external data only from files in its own folder
(quantcore/importers/_external.py), and folding runs within the budget of quantcore/importers/_fold.py.
Shape inference runs without data propagation: ONNX's propagation materialises the values of Range and
Tile (20 GB for a Range of 10^9), while folding computes the same values within the budget.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from quantcore import limits
from quantcore.display import quoted, shown
from quantcore.errors import ModelError
from quantcore.importers import _external, _qdq, _source
from quantcore.importers._fold import Folder, FoldRefused
from quantcore.importers._source import Source
from quantcore.importers._walk import graphs_of, messages
from quantcore.ir import QuantParams

MIN_OPSET = 7
"""Opset 7 brought numpy broadcasting to Add/Mul; older models should be converted first."""
_MAX_FOLD_ROUNDS = 16
"""Rounds of shape inference and folding: a round folds every chain it can in graph order; the next one
folds what became computable once the shapes of its results were inferred (Shape of a Reshape's output)."""
_NOT_FOLDABLE = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)

Shape = tuple[int | str | None, ...]


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
    runnable: bytes = b""
    """The model as read and checked (external data inlined), before any change: what onnxruntime runs,
    so that it never opens the file, or a file the model names, again."""


def read(path_or_bytes: str | os.PathLike[str] | bytes, name: str | None) -> Source:
    """The model's bytes (quantcore/importers/_source.py); bytes given are named `name` in messages."""
    return _source.read(path_or_bytes, name or "<onnx bytes>")


def decode(source: Source) -> tuple[onnx.ModelProto, bool]:
    """Parse and check the protobuf, its external data read in; a corrupt or truncated file is a
    ModelError naming it. Also says whether external data was read in."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(source.data)
    except Exception as e:
        # protobuf's DecodeError (and, from its C++ backend, other types): the bytes are not a ModelProto.
        problem = f"is not a readable ONNX file (corrupt or truncated?): {_first_line(e)}"
        raise ModelError(source.path, problem) from None
    _check_text(model, source.path)
    if not model.graph.node and not model.graph.output:
        raise ModelError(source.path, "is not an ONNX model: it holds no graph (empty or truncated file?)")
    _external.refuse_sparse(model, source.path)
    external = _external.uses_external_data(model)
    if external:
        _external.inline(model, source.directory, source.path, len(source.data))
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        # ValidationError, and whatever else the C++ checker raises on a malformed proto.
        raise ModelError(source.path, f"is not a valid ONNX model (onnx.checker: {_first_line(e)})") from None
    return model, external


def _check_text(model: onnx.ModelProto, path: str) -> None:
    """Refuse text fields that are not UTF-8: protobuf parses ONNX's (proto2) strings unchecked and hands
    such a one out as bytes, which fails wherever a name is used later."""
    for message in messages(model):
        for descriptor, value in message.ListFields():
            if descriptor.type != descriptor.TYPE_STRING:
                continue
            if any(isinstance(v, bytes) for v in (value if descriptor.is_repeated else [value])):
                where = f"the {descriptor.name} of a {type(message).__name__}"
                raise ModelError(path, f"holds text that is not UTF-8 ({where}); the file is corrupt")


def _first_line(error: BaseException) -> str:
    """The first line of a library's message (it may quote names from the model), on one line and short."""
    text = str(error).strip()
    return shown(text.splitlines()[0], 4 * limits.NAME_MAX_CHARS) if text else type(error).__name__


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
    model, inlined = decode(source)
    runnable = model.SerializeToString() if inlined else source.data
    opset = default_opset(model, source.path)
    name_nodes(model)
    fix_batch(model, batch)
    loaded = Loaded(model, opset, _initializers(model, source.path), {}, runnable=runnable)
    folder = Folder(opset)
    for _ in range(_MAX_FOLD_ROUNDS):
        loaded.types = _types(_infer(model, source.path, strict=False))
        if not _fold_round(loaded, folder, source.path):
            break
    loaded.model = _infer(model, source.path, strict=True)
    loaded.types = _types(loaded.model)
    return loaded


def _initializers(model: onnx.ModelProto, path: str) -> dict[str, np.ndarray]:
    consts = {}
    for tensor in model.graph.initializer:
        try:
            consts[tensor.name] = numpy_helper.to_array(tensor)
        except Exception as e:
            # numpy_helper raises ValueError, TypeError, KeyError... for data that does not fit the dims.
            problem = f"initializer {quoted(tensor.name)} cannot be read: {_first_line(e)}"
            raise ModelError(path, problem) from None
    return consts


def _infer(model: onnx.ModelProto, path: str, *, strict: bool) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, check_type=strict, strict_mode=strict, data_prop=False)
    except Exception as e:
        # InferenceError, ValidationError, RuntimeError... from the C++ inference on a malformed graph.
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


def _fold_round(loaded: Loaded, folder: Folder, path: str) -> bool:
    """Fold every node computable at import, in graph order (so chains fold in one round)."""
    graph = loaded.model.graph
    kept: list[onnx.NodeProto] = []
    folded = False
    for node in graph.node:
        try:
            values = _fold(loaded, folder, node, path)
        except FoldRefused as e:
            inner = "" if e.node == node.name else f"in its subgraph, node {quoted(e.node)}: "
            raise ModelError(path, inner + e.problem, shown(node.name)) from None
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


def _fold(loaded: Loaded, folder: Folder, node: onnx.NodeProto, path: str) -> list[np.ndarray] | None:
    constant = all(name in loaded.consts for name in node.input if name)
    if _qdq.is_dq(node):  # also com.microsoft's, which the reference implementation does not run
        return _dequantize(loaded, folder, node, path) if constant else None
    if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_FOLDABLE:
        return None
    if node.op_type in ("Shape", "Size") and not constant:
        return _static_shape(loaded, node)
    if node.op_type == "CastLike" and not constant:
        return _cast_like(loaded, folder, node)
    outer = _outer_names(node)
    if not constant or not outer <= loaded.consts.keys():
        return None
    feeds = {name: loaded.consts[name] for name in (*node.input, *outer) if name}
    return folder.run(node, feeds)


def _outer_names(node: onnx.NodeProto) -> set[str]:
    """Values of the enclosing graph that the node's subgraphs (Loop/Scan/If bodies) read."""
    read: set[str] = set()
    made: set[str] = set()
    for graph in graphs_of(node):
        made.update(v.name for v in graph.input)
        made.update(t.name for t in graph.initializer)
        for inner in graph.node:
            read.update(inner.input)
            made.update(inner.output)
    return read - made - {""}


def _dequantize(loaded: Loaded, folder: Folder, node: onnx.NodeProto, path: str) -> list[np.ndarray]:
    """A DequantizeLinear of a constant (a QDQ weight or bias): folded, its QuantParams kept."""
    inputs = [loaded.consts[name] if name else None for name in node.input]
    folder.admit(node, inputs)
    value, quant = _qdq.dequantize(node, inputs, path)
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


def _cast_like(loaded: Loaded, folder: Folder, node: onnx.NodeProto) -> list[np.ndarray] | None:
    """CastLike of a constant to the type of an activation (torch's exporter writes one for every
    constant it casts to "the input's dtype"): a Cast to that type, known from shape inference."""
    value, target = node.input[0], node.input[1] if len(node.input) > 1 else ""
    elem_type, _ = loaded.types.get(target, (0, None))
    if value not in loaded.consts or not elem_type:
        return None
    cast = onnx.helper.make_node("Cast", [value], [node.output[0]], name=node.name, to=elem_type)
    return folder.run(cast, {value: loaded.consts[value]})


def name_nodes(model: onnx.ModelProto) -> None:
    """Give every unnamed node the name "<op_type>_<index>" (and make duplicates unique), before folding
    removes nodes, so that names match the positions in the file."""
    taken = {node.name for node in model.graph.node if node.name}
    seen: set[str] = set()
    next_suffix: dict[str, int] = {}  # so that 100,000 nodes of one name cost 100,000 steps, not 10^10
    for index, node in enumerate(model.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        candidate, n = name, next_suffix.get(name, 1)
        while candidate in seen or (candidate != node.name and candidate in taken):
            candidate, n = f"{name}_{n}", n + 1
        next_suffix[name] = n
        node.name = candidate
        seen.add(candidate)
