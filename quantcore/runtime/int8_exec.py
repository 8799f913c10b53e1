"""The int8 reference executor: runs a quantized graph through the bit-exact CMSIS-NN kernels.

Each layer carries the name of the CMSIS-NN function it becomes (node attr "kernel") and that call's
integer parameters (attr "params", the same numbers the quant-params JSON and the generated C hold), so
what runs here is what the firmware computes, byte for byte. Data-movement ops (reshape, transpose, pad,
concat) have no arithmetic and run as numpy copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from quantcore.ir import DType, Graph, GraphError, Node, Op, QuantParams
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.convert import requantize_tensor
from quantcore.kernels.elementwise import (
    elementwise_add_s8,
    elementwise_add_s16,
    elementwise_mul_s8,
    elementwise_mul_s16,
)
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.pooling import avgpool_s8, avgpool_s16, max_pool_s8, max_pool_s16
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.s16 import convolve_s16, depthwise_conv_s16, fully_connected_s16
from quantcore.kernels.softmax import softmax_s8, softmax_s8_s16
from quantcore.runtime import recurrent_exec
from quantcore.scheme.arith import dequantize, quantize_activation

Array = np.ndarray
Env = dict[str, Array]


def quantize_inputs(graph: Graph, inputs: Mapping[str, Array]) -> Env:
    """Float graph inputs (in the graph's layout) to the int8 tensors the first layers read."""
    env = {}
    for name in graph.inputs:
        quant = graph.tensor(name).quant
        if quant is None:
            raise GraphError(f"graph input {name!r} has no quantization parameters")
        env[name] = quantize_to(graph, name, inputs[name])
    return env


def quantize_to(graph: Graph, name: str, x: Array) -> Array:
    quant = graph.tensor(name).quant
    assert quant is not None
    wide = quant.dtype is DType.INT16
    return quantize_activation(
        x, activation_scale(quant), int(quant.zero_point), *((-32768, 32767) if wide else (-128, 127))
    )


def dequantize_tensor(graph: Graph, name: str, q: Array) -> Array:
    quant = graph.tensor(name).quant
    assert quant is not None
    return dequantize(q, activation_scale(quant), int(quant.zero_point))


def activation_scale(quant: QuantParams) -> float | Array:
    """The scale of an activation: one float, or per channel (along the last, NHWC channel axis) for the
    input of depthwise layers given per-channel scales (quantcore/quantize/channel_scales.py)."""
    return float(quant.scale) if quant.axis is None else np.asarray(quant.scale, np.float64)


def run(graph: Graph, inputs: Mapping[str, Array], rounding: Rounding | None = None) -> Env:
    """Run on int8 inputs (see quantize_inputs); returns every tensor as the kernels wrote it."""
    rounding = rounding or Rounding(graph.meta.get("rounding", "double"))
    env: Env = dict(inputs)
    for node in graph.nodes:
        env[node.outputs[0]] = run_node(graph, node, env, rounding)
    return env


def run_node(graph: Graph, node: Node, env: Mapping[str, Array], rounding: Rounding) -> Array:
    """One node's output from the tensors computed so far (`env`); constants come from the graph."""
    args = [env.get(i) if i else None for i in node.inputs]  # constants are read by the kernels
    return _call(graph, node, args, rounding)


def _call(graph: Graph, node: Node, args: list[Array | None], rounding: Rounding) -> Array:
    if node.op in _MOVES:
        return _MOVES[node.op](graph, node, args)
    kernel = node.attr("kernel")
    if kernel not in _KERNELS:
        raise GraphError(
            f"node {node.name!r} ({node.op.json_name}) has no int8 kernel (attr kernel={kernel!r})"
        )
    out_shape = graph.tensor(node.outputs[0]).shape
    return _KERNELS[kernel](graph, node, args, dict(node.attr("params")), out_shape, rounding)


def _weights(graph: Graph, node: Node) -> tuple[Array, Array | None]:
    w = graph.constant(node.inputs[1])
    b = graph.constant(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    return w, b


def _conv(fn: Callable[..., Array]) -> Callable[..., Array]:
    def call(
        graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
    ) -> Array:
        w, b = _weights(graph, node)
        return fn(
            args[0],
            w,
            b,
            multiplier=np.asarray(p["multiplier"], np.int32),
            shift=np.asarray(p["shift"], np.int32),
            input_offset=p["input_offset"],
            output_offset=p["output_offset"],
            stride=tuple(p["stride"]),
            padding=tuple(p["padding"]),
            dilation=tuple(p["dilation"]),
            act_min=p["act_min"],
            act_max=p["act_max"],
            output_hw=(out[1], out[2]),
            rounding=r,
        )

    return call


def _conv16(depthwise: bool) -> Callable[..., Array]:
    def call(
        graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
    ) -> Array:
        w, b = _weights(graph, node)
        common = {
            "multiplier": np.asarray(p["multiplier"], np.int32),
            "shift": np.asarray(p["shift"], np.int32),
            "stride": tuple(p["stride"]),
            "padding": tuple(p["padding"]),
            "dilation": tuple(p["dilation"]),
            "act_min": p["act_min"],
            "act_max": p["act_max"],
            "output_hw": (out[1], out[2]),
        }
        if depthwise:
            return depthwise_conv_s16(args[0], w, b, **common)
        return convolve_s16(args[0], w, b, rounding=r, **common)

    return call


def _fc16(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    w, b = _weights(graph, node)
    x = args[0].reshape(args[0].shape[0], -1)
    return fully_connected_s16(
        x, w, b, multiplier=p["multiplier"], shift=p["shift"], act_min=p["act_min"], act_max=p["act_max"]
    )


def _requantize(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    wide = graph.tensor(node.outputs[0]).dtype is DType.INT16
    return requantize_tensor(args[0], out_dtype=np.int16 if wide else np.int8, rounding=r, **p)


def _fc(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    w, b = _weights(graph, node)
    per_channel = isinstance(p["multiplier"], list)
    mult = np.asarray(p["multiplier"], np.int32) if per_channel else p["multiplier"]
    shift = np.asarray(p["shift"], np.int32) if per_channel else p["shift"]
    x = args[0].reshape(args[0].shape[0], -1)
    return fully_connected_s8(
        x,
        w,
        b,
        multiplier=mult,
        shift=shift,
        input_offset=p["input_offset"],
        output_offset=p["output_offset"],
        filter_offset=p.get("filter_offset", 0),
        act_min=p["act_min"],
        act_max=p["act_max"],
        rounding=r,
    )


def _pool(fn: Callable[..., Array]) -> Callable[..., Array]:
    def call(
        graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
    ) -> Array:
        return fn(
            args[0],
            kernel=tuple(p["kernel"]),
            stride=tuple(p["stride"]),
            padding=tuple(p["padding"]),
            act_min=p["act_min"],
            act_max=p["act_max"],
            output_hw=(out[1], out[2]),
        )

    return call


def _elementwise(fn: Callable[..., Array]) -> Callable[..., Array]:
    def call(
        graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
    ) -> Array:
        return fn(args[0], args[1], rounding=r, **p)

    return call


def _softmax(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    return softmax_s8(args[0], mult=p["mult"], shift=p["shift"], diff_min=p["diff_min"])


_KERNELS: dict[str, Callable[..., Array]] = {
    "arm_convolve_wrapper_s8": _conv(convolve_s8),
    "arm_depthwise_conv_wrapper_s8": _conv(depthwise_conv_s8),
    "arm_fully_connected_s8": _fc,
    "arm_fully_connected_per_channel_s8": _fc,
    "arm_avgpool_s8": _pool(avgpool_s8),
    "arm_max_pool_s8": _pool(max_pool_s8),
    "arm_elementwise_add_s8": _elementwise(elementwise_add_s8),
    "arm_elementwise_mul_s8": _elementwise(elementwise_mul_s8),
    "arm_softmax_s8": _softmax,
    "arm_softmax_s8_s16": lambda g, n, a, p, o, r: softmax_s8_s16(
        a[0], mult=p["mult"], shift=p["shift"], diff_min=p["diff_min"]
    ),
    "arm_convolve_wrapper_s16": _conv16(depthwise=False),
    "arm_depthwise_conv_wrapper_s16": _conv16(depthwise=True),
    "arm_fully_connected_s16": _fc16,
    "arm_avgpool_s16": _pool(avgpool_s16),
    "arm_max_pool_s16": _pool(max_pool_s16),
    "arm_elementwise_add_s16": _elementwise(elementwise_add_s16),
    "arm_elementwise_mul_s16": _elementwise(elementwise_mul_s16),
    "fixpoint_requantize": _requantize,
    "arm_svdf_s8": recurrent_exec.svdf,
    "arm_svdf_state_s16_s8": recurrent_exec.svdf,
    "arm_lstm_unidirectional_s8": recurrent_exec.lstm,
    "arm_lstm_unidirectional_s16": recurrent_exec.lstm,
}


def _pad(graph: Graph, node: Node, args: list[Any]) -> Array:
    pads = node.attr("pads")
    half = len(pads) // 2
    quant = graph.tensor(node.inputs[0]).quant
    fill = int(quant.zero_point) if quant is not None else 0
    return np.pad(args[0], list(zip(pads[:half], pads[half:], strict=True)), constant_values=fill)


_MOVES: dict[Op, Callable[[Graph, Node, list[Any]], Array]] = {
    # -1: the leading axis may change length (float_exec's RESHAPE says why)
    Op.RESHAPE: lambda g, n, a: a[0].reshape((-1, *n.attr("shape")[1:])),
    Op.TRANSPOSE: lambda g, n, a: np.ascontiguousarray(a[0].transpose(n.attr("perm"))),
    Op.CONCAT: lambda g, n, a: np.concatenate(a, axis=n.attr("axis")),
    Op.PAD: _pad,
    Op.IDENTITY: lambda g, n, a: a[0],
}
