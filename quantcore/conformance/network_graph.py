"""A whole-network test case (CMSIS-NN's ds_cnn_s, ...) as a quantized IR graph in the product's own form.

`network_graph` gives what quantcore.quantize.graph.quantize_graph gives for a model the product quantized:
NHWC int8 activations with QuantParams, int8 weight constants in the layout the int8 executor reads (OHWI,
[1, H, W, C*mult], [out, in]), int32 bias constants, node attrs "kernel" and "params" as int8_exec and the
quant-params JSON hold them, and graph meta (rounding, weights). The code generator and the target checks
can then run CMSIS-NN's own network exactly like a model the product quantized.

The vectors hold the integers only. Zero points follow from the offsets, but the float scales do not: a
multiplier is s_in * s_w[c] / s_out, and one product leaves one scale free per layer. The scales here are
therefore nominal, chosen so that the product's own formulas (quantize.params) give back every multiplier,
shift and softmax parameter of the vectors bit for bit: activations have scale 1.0, except the softmax's
input, whose scale its (mult, shift) fixes (beta = 1), and the softmax output, fixed at 1/256; weight scales
are then M[c] * s_out / s_in with M[c] = multiplier[c] * 2^(shift[c] - 31). int8 execution never reads a
scale, so the graph runs bit-exactly; only a float input to quantize (int8_exec.quantize_inputs) or an
output to dequantize would see the nominal values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.layer_params import (
    ConvParams,
    FullyConnectedParams,
    Pair,
    PoolParams,
    SoftmaxParams,
    Window,
)
from quantcore.conformance.network import Layer, LayerKind, Shape, load_network
from quantcore.errors import VectorCaseError
from quantcore.ir import DType, Graph, Layout, Node, Op, QuantParams, Tensor
from quantcore.quantize.graph import SOFTMAX_OUTPUT
from quantcore.quantize.params import SOFTMAX_INT_BITS

BATCH = 1

CALIBRATION: dict[str, Any] = {"method": "minmax", "samples": 1}
"""The `calibration` entry to_document needs: TFLite's converter chose the vectors' ranges from the min/max
of its representative data; how many samples it used is not recorded, and 1 stands in for it."""

_KEEPS_QPARAMS = (LayerKind.AVERAGE_POOL_2D, LayerKind.MAX_POOL_2D)
"""CMSIS-NN's pools do not requantize: their output has their input's scale and zero point."""


def network_graph(case: VectorCase) -> Graph:
    """The case's network (conformance.network.load_network) as a quantized, verified graph."""
    net = load_network(case)
    input_scale, scales = output_scales(net.layers)
    first = net.layers[0].params
    zero_point = -first.input_offset if isinstance(first, ConvParams | FullyConnectedParams) else 0
    chain = _Chain(
        f"{case.name}_input", (BATCH, *net.input_shape), input_scale, zero_point, str(case.json_path)
    )
    for layer, scale in zip(net.layers, scales, strict=True):
        if layer.kind is LayerKind.FULLY_CONNECTED and len(chain.shape) != 2:
            chain.flatten(f"{layer.name}_flatten")
        _ADDERS[layer.kind](chain, layer, scale)
    meta = {
        "source": case.json_path.name,
        "source_name": case.npz_path.name,
        "sha256": hashlib.sha256(case.npz_path.read_bytes()).hexdigest(),
        "layout": "NHWC",
        "rounding": "double",  # TFLite's reference outputs: CMSIS-NN's default rounding
        "weights": "per-channel",
    }
    return chain.graph(case.name, meta).verify()


def output_scales(layers: Sequence[Layer]) -> tuple[float, list[float]]:
    """(network input scale, each layer's output scale): nominal 1.0, except what a softmax fixes - its
    input (back through pools to the layer that produces it) and its output (1/256)."""
    scales: list[float | None] = [None] * len(layers)
    input_scale = 1.0
    for i, layer in enumerate(layers):
        if layer.kind is not LayerKind.SOFTMAX:
            continue
        scales[i] = SOFTMAX_OUTPUT[0]
        softmax = layer.params_as(SoftmaxParams)
        fixed = softmax_input_scale(softmax.mult, softmax.shift)
        j = i - 1
        while j >= 0 and layers[j].kind in _KEEPS_QPARAMS:
            scales[j], j = fixed, j - 1
        if j >= 0:
            scales[j] = fixed
        else:
            input_scale = fixed
    result: list[float] = []
    for layer, scale in zip(layers, scales, strict=True):
        keeps = layer.kind in _KEEPS_QPARAMS
        result.append((result[-1] if result else input_scale) if keeps else (scale or 1.0))
    return input_scale, result


def softmax_input_scale(mult: int, shift: int) -> float:
    """The input scale for which quantize.params.softmax_params (beta = 1) gives back (mult, shift): the
    kernel's multiplier is beta * s_in in Q5.26, i.e. mult * 2^(shift - 31) = s_in * 2^(31 - 5)."""
    return float(np.ldexp(float(mult), shift - 31 - (31 - SOFTMAX_INT_BITS)))


def effective_multipliers(multiplier: int | Array, shift: int | Array) -> Array:
    """multiplier * 2^(shift - 31), exactly (a 31-bit integer times a power of two is a float64)."""
    return np.ldexp(np.asarray(multiplier, np.float64), np.asarray(shift, np.int64) - 31)


# -- the graph being built ------------------------------------------------------------------------


@dataclass
class _Chain:
    """A chain of layers under construction: its tensors, nodes and the current tensor's qparams."""

    current: str
    shape: Shape
    scale: float
    zero_point: int
    source: str
    """The case file, for error messages."""
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.first = self.current
        self.tensors[self.current] = _activation(self.current, self.shape, self.scale, self.zero_point)

    def advance(
        self, name: str, shape: Shape, scale: float, zero_point: int
    ) -> tuple[str, Shape, float, int]:
        """Make a new tensor the current one; returns the previous one's (name, shape, scale, zero point)."""
        previous = (self.current, self.shape, self.scale, self.zero_point)
        self.tensors[name] = _activation(name, shape, scale, zero_point)
        self.current, self.shape, self.scale, self.zero_point = name, shape, scale, zero_point
        return previous

    def constant(self, tensor: Tensor) -> str:
        self.tensors[tensor.name] = tensor
        return tensor.name

    def node(self, name: str, op: Op, inputs: tuple[str, ...], attrs: dict[str, Any]) -> None:
        self.nodes.append(Node(name, op, inputs, (self.current,), attrs))

    def flatten(self, name: str) -> None:
        """(N, 1, 1, K) -> (N, K) before a fully connected layer, as the importer's Flatten/Reshape."""
        shape = (self.shape[0], int(np.prod(self.shape[1:])))
        x, *_ = self.advance(f"{name}_output", shape, self.scale, self.zero_point)
        self.node(name, Op.RESHAPE, (x,), {"shape": shape, "kernel": None, "params": {}})

    def graph(self, name: str, meta: dict[str, Any]) -> Graph:
        return Graph(name, dict(self.tensors), tuple(self.nodes), (self.first,), (self.current,), meta)


def _activation(name: str, shape: Shape, scale: float, zero_point: int) -> Tensor:
    quant = QuantParams(DType.INT8, np.array(scale), np.array(zero_point))
    return Tensor(name, shape, DType.INT8, layout=Layout.NHWC if len(shape) == 4 else None, quant=quant)


def _weight(name: str, data: np.ndarray, scale: np.ndarray, axis: int | None) -> Tensor:
    quant = QuantParams(DType.INT8, scale, np.zeros(scale.shape, np.int64), axis=axis)
    return Tensor(name, data.shape, DType.INT8, data, quant=quant)


def _bias(name: str, values: np.ndarray | None, scale: np.ndarray) -> Tensor:
    data = np.zeros(len(scale), np.int32) if values is None else np.asarray(values, np.int32)
    quant = QuantParams(DType.INT32, scale, np.zeros(len(scale), np.int64), axis=0)
    return Tensor(name, data.shape, DType.INT32, data, quant=quant)


# -- layers ---------------------------------------------------------------------------------------


def _ints(values: Array) -> list[int]:
    return [int(v) for v in np.asarray(values).ravel()]


def _clamp(clamped: Window | FullyConnectedParams) -> dict[str, int]:
    return {"act_min": clamped.act_min, "act_max": clamped.act_max}


def _window(
    window: Window, dilation: Pair, in_shape: Shape, out_shape: Shape, kernel: Sequence[int]
) -> dict[str, Any]:
    """The float graph's attrs of a windowed op: strides, dilations and pads (top, left, bottom, right),
    the after side being what the output size implies (as CMSIS-NN derives it)."""
    stride, before = window.stride, window.padding
    total = [
        max(0, (o - 1) * s + (k - 1) * d + 1 - i)
        for o, s, k, d, i in zip(out_shape[1:3], stride, kernel, dilation, in_shape[1:3], strict=True)
    ]
    pads = (*before, total[0] - before[0], total[1] - before[1])
    return {"strides": stride, "dilations": dilation, "pads": pads}


def _weighted(
    chain: _Chain, layer: Layer, p: ConvParams | FullyConnectedParams, scale: float, axis: int | None
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """Advance past a conv / depthwise / fully connected layer: its output, weight and bias tensors, with
    weight scales s_w[c] = M[c] * s_out / s_in; returns (inputs, offsets and clamp params)."""
    out_shape = (chain.shape[0], *layer.output_shape)
    x, _, s_in, zp_in = chain.advance(f"{layer.name}_output", out_shape, scale, p.output_offset)
    weights = np.asarray(p.weights, np.int8)
    s_w = effective_multipliers(p.multiplier, p.shift) * scale / s_in
    channels = weights.shape[0 if axis is None else axis]
    w = chain.constant(_weight(f"{layer.name}.weight", weights, s_w, axis))
    b = chain.constant(_bias(f"{layer.name}.bias", p.bias, np.broadcast_to(s_in * s_w, (channels,)).copy()))
    if -zp_in != p.input_offset:
        # One tensor has one zero point: a layer must read the offset its producer wrote.
        raise VectorCaseError(
            chain.source,
            f"layer {layer.name}: input_offset {p.input_offset} does not match the zero point {zp_in}"
            f" of its input {x!r}; the network's offsets do not chain",
        )
    clamped = p.window if isinstance(p, ConvParams) else p
    params = {"input_offset": -zp_in, "output_offset": chain.zero_point, **_clamp(clamped)}
    return (x, w, b), params


def _add_conv(chain: _Chain, layer: Layer, scale: float) -> None:
    depthwise = layer.kind is LayerKind.DEPTHWISE_CONV_2D
    in_shape, p = chain.shape, layer.params_as(ConvParams)
    inputs, params = _weighted(chain, layer, p, scale, 3 if depthwise else 0)
    attrs = _window(p.window, p.dilation, in_shape, chain.shape, np.shape(p.weights)[1:3])
    params.update(
        multiplier=_ints(p.multiplier),
        shift=_ints(p.shift),
        stride=list(attrs["strides"]),
        padding=list(attrs["pads"][:2]),
        dilation=list(attrs["dilations"]),
    )
    if depthwise:
        params["ch_mult"] = chain.shape[-1] // in_shape[-1]
    else:
        attrs["groups"] = 1
    op = Op.DEPTHWISE_CONV2D if depthwise else Op.CONV2D
    chain.node(layer.name, op, inputs, {**attrs, "kernel": layer.kind.c_function, "params": params})


def _add_fully_connected(chain: _Chain, layer: Layer, scale: float) -> None:
    # One multiplier in the vectors: arm_fully_connected_s8 with per-tensor weights.
    p = layer.params_as(FullyConnectedParams)
    inputs, params = _weighted(chain, layer, p, scale, None)
    params.update(multiplier=p.multiplier, shift=p.shift, filter_offset=0)
    attrs = {"kernel": layer.kind.c_function, "params": params}
    chain.node(layer.name, Op.FULLY_CONNECTED, inputs, attrs)


def _add_pool(chain: _Chain, layer: Layer, scale: float) -> None:
    p = layer.params_as(PoolParams)
    window = list(p.kernel)
    out_shape = (chain.shape[0], *layer.output_shape)
    x, in_shape, _, _ = chain.advance(f"{layer.name}_output", out_shape, scale, chain.zero_point)
    attrs = _window(p.window, (1, 1), in_shape, out_shape, window)
    del attrs["dilations"]
    params = {"kernel": window, "stride": list(attrs["strides"]), "padding": list(attrs["pads"][:2])}
    if layer.kind is LayerKind.AVERAGE_POOL_2D:
        attrs["count_include_pad"] = False
    # As in quantize_graph, the float graph's window attr "kernel" gives way to the CMSIS-NN function.
    attrs.update(kernel=layer.kind.c_function, params={**params, **_clamp(p.window)})
    chain.node(layer.name, _POOL_OPS[layer.kind], (x,), attrs)


def _add_softmax(chain: _Chain, layer: Layer, scale: float) -> None:
    p = layer.params_as(SoftmaxParams)
    params = {"mult": p.mult, "shift": p.shift, "diff_min": p.diff_min}
    x, *_ = chain.advance(f"{layer.name}_output", (chain.shape[0], *layer.output_shape), *SOFTMAX_OUTPUT)
    attrs = {"axis": len(chain.shape) - 1, "kernel": layer.kind.c_function, "params": params}
    chain.node(layer.name, Op.SOFTMAX, (x,), attrs)


_POOL_OPS = {LayerKind.AVERAGE_POOL_2D: Op.AVG_POOL, LayerKind.MAX_POOL_2D: Op.MAX_POOL}

_ADDERS: dict[LayerKind, Callable[[_Chain, Layer, float], None]] = {
    LayerKind.CONV_2D: _add_conv,
    LayerKind.DEPTHWISE_CONV_2D: _add_conv,
    LayerKind.FULLY_CONNECTED: _add_fully_connected,
    LayerKind.AVERAGE_POOL_2D: _add_pool,
    LayerKind.MAX_POOL_2D: _add_pool,
    LayerKind.SOFTMAX: _add_softmax,
}
