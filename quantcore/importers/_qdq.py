"""QDQ models (ONNX Runtime's quantize_static, QAT exports): strip the Q/DQ nodes, keep their scales.

Weights and biases arrive as int8/int32 initializers behind a DequantizeLinear; they are folded at load
time into float constants (the same float32 arithmetic as ONNX Runtime: (q - zero_point) * scale) and
keep their QuantParams. Activations arrive as a QuantizeLinear -> DequantizeLinear pair; the pair is
removed, every reader of the DequantizeLinear reads the float tensor the pair quantized, and that tensor
keeps the pair's QuantParams.

uint8 (and uint16) quantization is stored in the int8 (int16) form with the same real values:
q' = q - 128 and zero_point' = zero_point - 128, scales unchanged. This is exact, and is the scheme the
int8 CMSIS-NN kernels use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from quantcore.display import quoted, shown
from quantcore.errors import ModelError
from quantcore.ir import DType, QuantParams

QDQ_DOMAINS = ("", "ai.onnx", "com.microsoft")
_FORMS: Mapping[str, tuple[DType, int]] = {
    "int8": (DType.INT8, 0),
    "uint8": (DType.INT8, -128),
    "int16": (DType.INT16, 0),
    "uint16": (DType.INT16, -32768),
    "int32": (DType.INT32, 0),
}
"""numpy dtype of the quantized values -> (IR dtype, offset added to the zero point)."""


def is_q(node: onnx.NodeProto) -> bool:
    return node.op_type == "QuantizeLinear" and node.domain in QDQ_DOMAINS


def is_dq(node: onnx.NodeProto) -> bool:
    return node.op_type == "DequantizeLinear" and node.domain in QDQ_DOMAINS


def _attrs(node: onnx.NodeProto) -> dict[str, int]:
    return {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}


def params(
    scale: np.ndarray,
    zero_point: np.ndarray | None,
    qtype: np.dtype[np.generic],
    axis: int,
    rank: int,
    path: str,
    node: str,
) -> QuantParams:
    """QuantParams of a Q/DQ node's scale and zero point (`axis` as the node says, used when per axis)."""
    form = _FORMS.get(np.dtype(qtype).name)
    if form is None:
        raise ModelError(
            path,
            f"quantizes to {np.dtype(qtype).name}; Fixpoint keeps int8, uint8, int16, uint16 and int32 "
            "quantization (re-quantize with those types)",
            shown(node),
        )
    dtype, offset = form
    scale = np.array(scale, np.float32)
    zp = np.zeros(scale.shape, np.int64) if zero_point is None else np.array(zero_point, np.int64)
    per_axis = scale.ndim == 1 and scale.size > 1
    if not per_axis:
        scale, zp = scale.reshape(()), zp.reshape(())
    return QuantParams(
        dtype, scale, np.asarray(zp + offset), axis=(axis % rank) if per_axis else None, method="qdq"
    )


def dequantize(
    node: onnx.NodeProto, inputs: Sequence[np.ndarray | None], path: str
) -> tuple[np.ndarray, QuantParams]:
    """A DequantizeLinear of constants: its float32 value (computed as ONNX Runtime does) and QuantParams."""
    q, scale = inputs[0], inputs[1]
    zero_point = inputs[2] if len(inputs) > 2 else None
    assert q is not None and scale is not None
    attrs = _attrs(node)
    if attrs.get("block_size", 0):
        raise ModelError(path, "blocked quantization (block_size) is not supported", shown(node.name))
    axis = attrs.get("axis", 1)
    _check_scale(q, scale, zero_point, axis, path, node.name)
    quant = params(scale, zero_point, q.dtype, axis, max(q.ndim, 1), path, node.name)
    shape = [1] * q.ndim
    if quant.axis is not None:
        shape[quant.axis] = -1
    s = np.asarray(scale, np.float32).reshape(shape if quant.axis is not None else ())
    z = np.zeros((), np.int64) if zero_point is None else np.asarray(zero_point, np.int64).reshape(s.shape)
    value = (q.astype(np.int64) - z).astype(np.float32) * s
    return value.astype(np.float32), quant


def _check_scale(
    q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, axis: int, path: str, node: str
) -> None:
    """What ONNX requires of a DequantizeLinear's scale: one value, or one per element along `axis`
    (numpy would otherwise broadcast a long scale against a short axis into a far larger tensor)."""
    count = int(np.size(scale))
    per_axis = np.ndim(scale) == 1 and count > 1
    if count == 0 or (not per_axis and count != 1):
        problem = f"has a scale of shape {np.shape(scale)}; it must be one value or one per channel"
        raise ModelError(path, problem, shown(node))
    if per_axis and not (-q.ndim <= axis < q.ndim and q.shape[axis] == count):
        problem = f"has {count} scales for axis {axis} of a tensor of shape {q.shape}; re-export the model"
        raise ModelError(path, problem, shown(node))
    if zero_point is not None and np.size(zero_point) != count:
        problem = f"has {np.size(zero_point)} zero points for {count} scales; re-export the model"
        raise ModelError(path, problem, shown(node))


@dataclass
class Plan:
    """What stripping the activation Q/DQ pairs does to the graph."""

    renames: dict[str, str] = field(default_factory=dict)
    """ONNX value name -> the IR tensor that stands for it."""
    quant: dict[str, QuantParams] = field(default_factory=dict)
    """IR activation name -> the QuantParams its pair carried."""
    skip: set[str] = field(default_factory=set)
    """Names of the Q and DQ nodes removed."""


def plan(
    graph: onnx.GraphProto,
    consts: Mapping[str, np.ndarray],
    types: Mapping[str, tuple[int, object]],
    path: str,
) -> Plan:
    """Pair every QuantizeLinear of an activation with the DequantizeLinear nodes reading it."""
    result = Plan()
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    inputs = {i.name for i in graph.input}
    for node in graph.node:
        if is_q(node):
            _pair(node, readers.get(node.output[0], []), consts, types, outputs, inputs, path, result)
    for node in graph.node:
        if is_dq(node) and node.name not in result.skip:
            raise ModelError(
                path,
                f"DequantizeLinear reads {quoted(node.input[0])}, which is neither a constant nor a"
                " QuantizeLinear output (an integer model input?); Fixpoint imports float and QDQ models",
                shown(node.name),
            )
    return result


def _pair(
    q: onnx.NodeProto,
    dqs: list[onnx.NodeProto],
    consts: Mapping[str, np.ndarray],
    types: Mapping[str, tuple[int, object]],
    outputs: set[str],
    inputs: set[str],
    path: str,
    result: Plan,
) -> None:
    """Remove q and its DequantizeLinear readers; the float tensor q reads keeps their QuantParams."""
    x = result.renames.get(q.input[0], q.input[0])
    quant = _pair_params(q, x, dqs, consts, types, outputs, path)
    # The graph output keeps its ONNX name: the tensor feeding the pair is renamed to it.
    graph_output = next((d.output[0] for d in dqs if d.output[0] in outputs), None)
    canon = graph_output if graph_output is not None and x not in inputs else x
    previous = result.quant.get(canon)
    if previous is not None and not _equal(previous, quant):
        raise ModelError(path, f"tensor {quoted(x)} is quantized twice with different scales", shown(q.name))
    result.quant[canon] = quant
    if canon != x:
        result.renames[x] = canon
    for dq in dqs:
        result.renames[dq.output[0]] = canon
        result.skip.add(dq.name)
    result.skip.add(q.name)


def _pair_params(
    q: onnx.NodeProto,
    x: str,
    dqs: list[onnx.NodeProto],
    consts: Mapping[str, np.ndarray],
    types: Mapping[str, tuple[int, object]],
    outputs: set[str],
    path: str,
) -> QuantParams:
    """The QuantParams of a Q -> DQ pair, after checking it really is one (same scales on both sides)."""
    if x in consts:
        problem = f"QuantizeLinear of the constant {quoted(x)} could not be folded at import"
        raise ModelError(path, problem, shown(q.name))
    if types.get(x, (onnx.TensorProto.FLOAT, None))[0] != onnx.TensorProto.FLOAT:
        raise ModelError(path, f"QuantizeLinear reads {quoted(x)}, which is not float32", shown(q.name))
    if not dqs or any(not is_dq(d) for d in dqs) or q.output[0] in outputs:
        raise ModelError(
            path,
            "QuantizeLinear's output must be read only by DequantizeLinear nodes (an integer model output?); "
            "Fixpoint imports float and QDQ models",
            shown(q.name),
        )
    scale = _const(q, 1, consts, path)
    zp = _const(q, 2, consts, path) if len(q.input) > 2 and q.input[2] else None
    axis = _attrs(q).get("axis", 1)
    for dq in dqs:
        if not _same(dq, scale, zp, consts, path) or _attrs(dq).get("axis", 1) != axis:
            problem = f"DequantizeLinear after {quoted(q.name)} uses other scales or zero points"
            raise ModelError(path, problem, shown(dq.name))
    qtype = zp.dtype if zp is not None else np.dtype(np.uint8)  # QuantizeLinear's default output type
    return params(scale, zp, qtype, axis, _rank(types.get(x)), path, q.name)


def _const(node: onnx.NodeProto, index: int, consts: Mapping[str, np.ndarray], path: str) -> np.ndarray:
    value = consts.get(node.input[index])
    if value is None:
        problem = f"{node.op_type}'s scale and zero point must be constants"
        raise ModelError(path, problem, shown(node.name))
    return value


def _same(
    dq: onnx.NodeProto, scale: np.ndarray, zp: np.ndarray | None, consts: Mapping[str, np.ndarray], path: str
) -> bool:
    dq_scale = _const(dq, 1, consts, path)
    dq_zp = _const(dq, 2, consts, path) if len(dq.input) > 2 and dq.input[2] else None
    zps_equal = (zp is None and dq_zp is None) or (
        zp is not None and dq_zp is not None and np.array_equal(zp, dq_zp) and zp.dtype == dq_zp.dtype
    )
    return bool(np.array_equal(scale, dq_scale)) and zps_equal


def _equal(a: QuantParams, b: QuantParams) -> bool:
    return (
        a.dtype is b.dtype
        and a.axis == b.axis
        and np.array_equal(a.scale, b.scale)
        and np.array_equal(a.zero_point, b.zero_point)
    )


def _rank(entry: tuple[int, object] | None) -> int:
    shape = entry[1] if entry is not None else None
    return len(shape) if isinstance(shape, tuple) and shape else 1
