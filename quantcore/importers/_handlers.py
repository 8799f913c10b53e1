"""One translation function per ONNX operator: ONNX node -> IR node(s), as ops.Op's contract describes them.

Handlers run after the support table's constraints passed, so they only translate. Nodes whose inputs are
all constants never get here (they were folded at load time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import onnx

from quantcore.display import quoted
from quantcore.importers._builder import Builder
from quantcore.importers._geometry import Geometry, resolve
from quantcore.importers._onnx_lstm import lstm, move
from quantcore.ir import Activation, Op, QuantParams
from quantcore.support import OnnxNode
from quantcore.support.onnx_ops import spatial_axes

Handler = Callable[[Builder, OnnxNode], None]

_FLOAT_MAX = float(np.finfo(np.float32).max)


def _pair(values: object, default: int) -> tuple[int, int]:
    if not isinstance(values, list | tuple) or not values:
        return (default, default)
    return (int(values[0]), int(values[1]))


def _x(b: Builder, n: OnnxNode) -> str:
    return b.activation(n.inputs[0], n.name)


# -- convolution and pooling ----------------------------------------------------------------------------


def _geometry(b: Builder, n: OnnxNode, kernel: tuple[int, int], output: str, ceil: bool = False) -> Geometry:
    _, _, h, w = b.shape(n.inputs[0], n.name)
    geometry = resolve(
        (h, w),
        kernel,
        strides=n.attr("strides"),
        dilations=n.attr("dilations"),
        pads=n.attr("pads"),
        auto_pad=n.attr("auto_pad", "NOTSET"),
        ceil_mode=ceil,
    )
    inferred = b.shape(output, n.name)[2:]
    if geometry.output_hw != inferred:
        raise b.error(
            f"output {quoted(output)} is {inferred[0]}x{inferred[1]} by ONNX shape inference but "
            f"{geometry.output_hw[0]}x{geometry.output_hw[1]} by ONNX Runtime's window rule (ceil_mode "
            "drops a last window that would start in the padding); re-export with ceil_mode=0 or less "
            "padding",
            n.name,
        )
    return geometry


def conv(b: Builder, n: OnnxNode) -> None:
    x, w = _x(b, n), b.constant(n.inputs[1], n.name)
    bias = b.constant(n.inputs[2], n.name) if n.has_input(2) else ""
    kh, kw = b.shape(n.inputs[1])[2:]
    y = b.output(n.outputs[0], n.name)
    geometry = _geometry(b, n, (kh, kw), n.outputs[0])
    attrs = {
        "strides": _pair(n.attr("strides"), 1),
        "pads": geometry.pads,
        "dilations": _pair(n.attr("dilations"), 1),
        "groups": int(n.attr("group", 1)),
        "activation": Activation.NONE,
    }
    b.emit(n.name, Op.CONV2D, (x, w, bias), (y,), attrs)


def _pool(b: Builder, n: OnnxNode, op: Op) -> None:
    x = _x(b, n)
    y = b.output(n.outputs[0], n.name)
    kernel = _pair(n.attr("kernel_shape"), 1)
    geometry = _geometry(b, n, kernel, n.outputs[0], ceil=bool(n.attr("ceil_mode", 0)))
    attrs: dict[str, object] = {
        "kernel": kernel,
        "strides": _pair(n.attr("strides"), 1),
        "pads": geometry.pads,
        "ceil_pads": geometry.ceil_pads,
    }
    if op is Op.AVG_POOL:
        attrs["count_include_pad"] = bool(n.attr("count_include_pad", 0))
    b.emit(n.name, op, (x,), (y,), attrs)


def max_pool(b: Builder, n: OnnxNode) -> None:
    _pool(b, n, Op.MAX_POOL)


def average_pool(b: Builder, n: OnnxNode) -> None:
    _pool(b, n, Op.AVG_POOL)


def global_average_pool(b: Builder, n: OnnxNode) -> None:
    b.emit(n.name, Op.GLOBAL_AVG_POOL, (_x(b, n),), (b.output(n.outputs[0], n.name),))


def _whole_axis_pool(b: Builder, n: OnnxNode, op: Op, axes: tuple[int, ...]) -> None:
    """A mean or maximum over H and/or W (`axes`, the reduced ones of size > 1): the pool the TorchScript
    exporter writes for the same layer (GlobalAveragePool for a mean over both; a pool whose window is the
    whole reduced axis otherwise), then a RESHAPE where keepdims=0 dropped the reduced axes."""
    x, y = _x(b, n), b.output(n.outputs[0], n.name)
    batch, channels, h, w = b.tensors[x].shape
    if not axes:  # every reduced axis has size 1: the result is the input itself
        b.emit(n.name, Op.RESHAPE, (x,), (y,), {"shape": b.tensors[y].shape})
        return
    window = (h if 2 in axes else 1, w if 3 in axes else 1)
    pooled_shape = (batch, channels, h // window[0], w // window[1])
    pooled = y if pooled_shape == b.tensors[y].shape else b.synthesize(n.name, "pooled", pooled_shape)
    if op is Op.AVG_POOL and set(axes) == {2, 3}:
        b.emit(n.name, Op.GLOBAL_AVG_POOL, (x,), (pooled,))
    else:
        attrs: dict[str, object] = {
            "kernel": window,
            "strides": window,
            "pads": (0, 0, 0, 0),
            "ceil_pads": (0, 0),
        }
        if op is Op.AVG_POOL:
            attrs["count_include_pad"] = False
        b.emit(n.name, op, (x,), (pooled,), attrs)
    if pooled != y:
        b.emit(f"{n.name}:squeeze", Op.RESHAPE, (pooled,), (y,), {"shape": b.tensors[y].shape})


def global_max_pool(b: Builder, n: OnnxNode) -> None:
    _whole_axis_pool(b, n, Op.MAX_POOL, (2, 3))


def reduce_mean(b: Builder, n: OnnxNode) -> None:
    _whole_axis_pool(b, n, Op.AVG_POOL, spatial_axes(n) or ())


def reduce_max(b: Builder, n: OnnxNode) -> None:
    _whole_axis_pool(b, n, Op.MAX_POOL, spatial_axes(n) or ())


# -- fully connected ------------------------------------------------------------------------------------


def _transposed_quant(quant: QuantParams | None) -> QuantParams | None:
    if quant is None or quant.axis is None:
        return quant
    return QuantParams(quant.dtype, quant.scale, quant.zero_point, 1 - quant.axis, method=quant.method)


def _vector_quant(quant: QuantParams | None) -> QuantParams | None:
    """A per-axis bias reshaped from (1, N) to (N,) is per axis 0."""
    if quant is None or quant.axis is None:
        return quant
    return QuantParams(quant.dtype, quant.scale, quant.zero_point, 0, method=quant.method)


def _scaled(b: Builder, n: OnnxNode, value: str, factor: float) -> None:
    if factor != 1.0 and b.weight_quant.get(value) is not None:
        raise b.error(
            f"scales the quantized constant {quoted(value)} by {factor}; export alpha = beta = 1", n.name
        )


def _bias(b: Builder, n: OnnxNode, value: str, outputs: int, factor: float = 1.0) -> str:
    """A constant bias as an (outputs,) vector: kept under its own name when the import leaves it as is."""
    data = b.float_data(value, n.name)
    if data.shape == (outputs,) and factor == 1.0:
        return b.constant(value, n.name)
    _scaled(b, n, value, factor)
    quant = b.weight_quant.get(value)
    per_output = data.size == outputs  # else a scalar, broadcast
    vector = np.broadcast_to(data.reshape(-1 if per_output else ()), (outputs,)) * np.float32(factor)
    return b.derived(value, "bias", vector, _vector_quant(quant) if per_output else quant)


def gemm(b: Builder, n: OnnxNode) -> None:
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    a = _x(b, n)
    if n.attr("transA", 0):
        rows, cols = b.shape(n.inputs[0], n.name)
        transposed = b.synthesize(n.name, "A_T", (cols, rows))
        b.emit(f"{n.name}:transpose_a", Op.TRANSPOSE, (a,), (transposed,), {"perm": (1, 0)})
        a = transposed
    weights = b.float_data(n.inputs[1], n.name)
    quant = b.weight_quant.get(n.inputs[1])
    if n.attr("transB", 0) and alpha == 1.0:
        w = b.constant(n.inputs[1], n.name)
    else:
        _scaled(b, n, n.inputs[1], alpha)
        data = (weights if n.attr("transB", 0) else weights.T) * np.float32(alpha)
        w = b.derived(n.inputs[1], "weight", data, quant if n.attr("transB", 0) else _transposed_quant(quant))
    outputs = b.tensors[w].shape[0]
    bias = _bias(b, n, n.inputs[2], outputs, beta) if n.has_input(2) and beta != 0.0 else ""
    y = b.output(n.outputs[0], n.name)
    b.emit(n.name, Op.FULLY_CONNECTED, (a, w, bias), (y,), {"activation": Activation.NONE})


def matmul(b: Builder, n: OnnxNode) -> None:
    a = _x(b, n)
    weights = b.float_data(n.inputs[1], n.name)
    w = b.derived(n.inputs[1], "weight", weights.T, _transposed_quant(b.weight_quant.get(n.inputs[1])))
    outputs = weights.shape[1]
    add = _following_bias_add(b, n.outputs[0], outputs)
    if add is None:
        bias, result = "", n.outputs[0]
    else:
        constant = add.input[1] if b.is_const(add.input[1]) else add.input[0]
        bias, result = _bias(b, n, constant, outputs), add.output[0]
        b.skip.add(add.name)
    y = b.output(result, n.name)
    b.emit(n.name, Op.FULLY_CONNECTED, (a, w, bias), (y,), {"activation": Activation.NONE})


def _following_bias_add(b: Builder, value: str, outputs: int) -> onnx.NodeProto | None:
    """The Add that adds a constant per-output vector to a MatMul's result, if that is its only reader."""
    readers = b.readers.get(value, [])
    if len(readers) != 1 or value in b.graph_outputs:
        return None
    add = readers[0]
    if add.op_type != "Add" or add.domain not in ("", "ai.onnx") or add.name in b.skip:
        return None
    other = add.input[1] if add.input[0] == value else add.input[0]
    if not b.is_const(other) or add.input[0] == add.input[1]:
        return None
    constant = b.consts[other]
    vector_like = (
        constant.size in (1, outputs) and constant.ndim <= 2 and constant.shape[-1:] in ((), (1,), (outputs,))
    )
    same_shape = b.shape(add.output[0], add.name) == b.shape(value, add.name)
    return add if vector_like and same_shape and np.issubdtype(constant.dtype, np.floating) else None


# -- normalisation, activations -------------------------------------------------------------------------


def batch_norm(b: Builder, n: OnnxNode) -> None:
    params = tuple(b.constant(v, n.name) for v in n.inputs[1:5])
    y = b.output(n.outputs[0], n.name)
    b.emit(n.name, Op.BATCH_NORM, (_x(b, n), *params), (y,), {"epsilon": float(n.attr("epsilon", 1e-5))})


def relu(b: Builder, n: OnnxNode) -> None:
    b.emit(n.name, Op.RELU, (_x(b, n),), (b.output(n.outputs[0], n.name),))


def _bound(value: object) -> float | None:
    if value is None:
        return None
    bound = float(np.asarray(value, np.float64).reshape(-1)[0])
    return None if math.isinf(bound) or abs(bound) >= _FLOAT_MAX else bound


def clip(b: Builder, n: OnnxNode) -> None:
    if n.opset < 11:
        lo, hi = _bound(n.attr("min")), _bound(n.attr("max"))
    else:
        lo, hi = (_bound(n.const(i)) if n.has_input(i) else None for i in (1, 2))
    y = b.output(n.outputs[0], n.name)
    b.emit(n.name, Op.CLIP, (_x(b, n),), (y,), {"min": lo, "max": hi})


# -- elementwise ----------------------------------------------------------------------------------------


def _binary(b: Builder, n: OnnxNode, op: Op) -> None:
    first, second = n.inputs[0], n.inputs[1]
    if b.is_const(first):
        first, second = second, first  # Add and Mul commute: the constant goes second
    inputs = (b.activation(first, n.name), b.operand(second, n.name))
    b.emit(n.name, op, inputs, (b.output(n.outputs[0], n.name),), {"activation": Activation.NONE})


def add(b: Builder, n: OnnxNode) -> None:
    _binary(b, n, Op.ADD)


def mul(b: Builder, n: OnnxNode) -> None:
    _binary(b, n, Op.MUL)


# -- shape and data movement ----------------------------------------------------------------------------


def reshape(b: Builder, n: OnnxNode) -> None:
    y = b.output(n.outputs[0], n.name)
    b.emit(n.name, Op.RESHAPE, (_x(b, n),), (y,), {"shape": b.tensors[y].shape})


def softmax(b: Builder, n: OnnxNode) -> None:
    x = _x(b, n)
    shape = b.tensors[x].shape
    y = b.output(n.outputs[0], n.name)
    if n.opset >= 13:
        b.emit(n.name, Op.SOFTMAX, (x,), (y,), {"axis": int(n.attr("axis", -1)) % len(shape)})
        return
    # Before opset 13 Softmax works on the input coerced to 2-D at `axis`: one softmax over axis.. end.
    axis = int(n.attr("axis", 1)) % len(shape)
    wide = [i for i in range(axis, len(shape)) if shape[i] != 1]
    if len(wide) <= 1:
        b.emit(n.name, Op.SOFTMAX, (x,), (y,), {"axis": wide[0] if wide else len(shape) - 1})
        return
    flat = (math.prod(shape[:axis]), math.prod(shape[axis:]))
    x2, y2 = b.synthesize(n.name, "2d_in", flat), b.synthesize(n.name, "2d_out", flat)
    b.emit(f"{n.name}:to_2d", Op.RESHAPE, (x,), (x2,), {"shape": flat})
    b.emit(n.name, Op.SOFTMAX, (x2,), (y2,), {"axis": 1})
    b.emit(f"{n.name}:from_2d", Op.RESHAPE, (y2,), (y,), {"shape": shape})


def concat(b: Builder, n: OnnxNode) -> None:
    inputs = tuple(b.operand(v, n.name) for v in n.inputs if v)
    y = b.output(n.outputs[0], n.name)
    axis = int(n.attr("axis", 1)) % len(b.tensors[y].shape)
    b.emit(n.name, Op.CONCAT, inputs, (y,), {"axis": axis})


def pad(b: Builder, n: OnnxNode) -> None:
    x = _x(b, n)
    rank = len(b.tensors[x].shape)
    if n.opset < 11:
        amounts = [int(p) for p in n.attr("pads")]
        value = float(n.attr("value", 0.0))
    else:
        amounts = [int(p) for p in np.asarray(n.const(1)).reshape(-1)]
        value = float(np.asarray(n.const(2)).reshape(-1)[0]) if n.has_input(2) else 0.0
    if n.has_input(3):
        axes = [int(a) % rank for a in np.asarray(n.const(3)).reshape(-1)]
        full = [0] * (2 * rank)
        for i, axis in enumerate(axes):
            full[axis], full[rank + axis] = amounts[i], amounts[len(axes) + i]
        amounts = full
    y = b.output(n.outputs[0], n.name)
    b.emit(n.name, Op.PAD, (x,), (y,), {"pads": tuple(amounts), "value": value})


def transpose(b: Builder, n: OnnxNode) -> None:
    x = _x(b, n)
    rank = len(b.tensors[x].shape)
    perm = tuple(int(p) for p in n.attr("perm") or reversed(range(rank)))
    y = b.output(n.outputs[0], n.name)
    if rank <= 3:  # moving only size-1 axes (a batch of 1) is a RESHAPE: no copy in the generated code
        move(b, n.name, x, y, perm)
    else:  # 4-D tensors are NCHW images to the layout pass, which remaps a TRANSPOSE's perm
        b.emit(n.name, Op.TRANSPOSE, (x,), (y,), {"perm": perm})


def identity(b: Builder, n: OnnxNode) -> None:
    b.emit(n.name, Op.IDENTITY, (_x(b, n),), (b.output(n.outputs[0], n.name),))


def constant(b: Builder, n: OnnxNode) -> None:
    raise b.error("this Constant node could not be evaluated at import", n.name)


HANDLERS: Mapping[str, Handler] = {
    "Conv": conv,
    "Gemm": gemm,
    "MatMul": matmul,
    "BatchNormalization": batch_norm,
    "Relu": relu,
    "Clip": clip,
    "MaxPool": max_pool,
    "AveragePool": average_pool,
    "GlobalAveragePool": global_average_pool,
    "GlobalMaxPool": global_max_pool,
    "ReduceMean": reduce_mean,
    "ReduceMax": reduce_max,
    "Add": add,
    "Mul": mul,
    "Flatten": reshape,
    "Reshape": reshape,
    "Squeeze": reshape,
    "Gather": reshape,
    "Unsqueeze": reshape,
    "Softmax": softmax,
    "Concat": concat,
    "Pad": pad,
    "Transpose": transpose,
    "LSTM": lstm,
    "Identity": identity,
    "Dropout": identity,
    "Constant": constant,
}
"""Keyed like support.ONNX_OPS (a test checks they match)."""
