"""Quantize a prepared float graph (NHWC, fused) into an int8 graph the reference executor and the code
generator run: activations get (scale, zero point) from their calibrated ranges, constants become int8
weights and int32 biases, and every layer gets its CMSIS-NN kernel and integer parameters.

Ops that only move data (pooling, reshape, pad, transpose, concat) must keep their input's scale and
zero point - CMSIS-NN's kernels for them do no requantization - so such tensors form groups that share
one range; a softmax output is fixed at scale 1/256, zero point -128.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.calibrate.calibration import Calibration
from quantcore.ir import Activation, DType, Graph, Node, Op, QuantParams, Tensor
from quantcore.kernels.requantize import Rounding
from quantcore.quantize import params as P
from quantcore.quantize.lowering import lower_narrowing_pools
from quantcore.quantize.precision import INT16_OUTPUT_MARGIN, assign_precision
from quantcore.scheme.arith import quantize_bias, quantize_weights, weight_floor, weight_scales
from quantcore.scheme.qparams import quant_params

_SHARES_INPUT_QPARAMS = (Op.MAX_POOL, Op.AVG_POOL, Op.RESHAPE, Op.PAD, Op.TRANSPOSE, Op.CONCAT)
SOFTMAX_OUTPUT = (1.0 / 256.0, -128)


@dataclass(frozen=True)
class QuantConfig:
    per_channel: bool = True
    """One weight scale per output channel (CMSIS-NN's default); False = one per tensor."""
    rounding: Rounding = Rounding.DOUBLE
    """The requantization rounding of the firmware's CMSIS-NN build."""
    int16_layers: frozenset[str] = frozenset()
    """Layers that run with int16 activations on CMSIS-NN's s16 kernels (mixed precision)."""
    lower_pools: bool = True
    """Run every average pool that narrows its range NARROWING times as a depthwise conv (its own output
    scale). pipeline.quantize passes False and substitutes the pools lowering's rule chose itself."""
    channel_scales: frozenset[str] = frozenset()
    """Activation tensors quantized with one scale per channel (quantcore/quantize/channel_scales.py);
    their per-channel ranges are in Calibration.channels."""


def quantize_graph(graph: Graph, calibration: Calibration, config: QuantConfig = QuantConfig()) -> Graph:
    graph = lower_narrowing_pools(graph, calibration.ranges) if config.lower_pools else graph
    graph, copies = assign_precision(graph, config.int16_layers)
    calibration = _with_copies(calibration, copies)
    activations = _activation_qparams(graph, calibration, config.channel_scales)
    graph = graph.with_tensors(*activations.values())
    graph = _with_cell_states(graph, calibration)
    nodes = []
    for node in graph.nodes:
        quantized, constants = _QUANTIZERS.get(node.op, _passthrough)(graph, node, config)
        graph = graph.with_tensors(*constants)
        nodes.append(quantized)
    return graph.evolve(
        nodes=nodes,
        meta={
            **graph.meta,
            "rounding": config.rounding.value,
            "weights": "per-channel" if config.per_channel else "per-tensor",
        },
    ).verify()


# -- activations ----------------------------------------------------------------------------------


def _with_copies(calibration: Calibration, copies: Mapping[str, str]) -> Calibration:
    """A converted copy of a tensor holds the same real values: it takes its source's statistics."""
    if not copies:
        return calibration

    def extend(table: Mapping[str, Any]) -> dict[str, Any]:
        return {**table, **{new: table[src] for new, src in copies.items() if src in table}}

    return Calibration(
        extend(calibration.ranges),
        extend(calibration.observed),
        extend(calibration.methods),
        calibration.channels,
    )


def activation_groups(graph: Graph) -> dict[str, str]:
    """Union-find over tensors that must share qparams; maps every activation to its group's root."""
    parent = {t.name: t.name for t in graph.activations()}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for node in graph.nodes:
        if node.op in _SHARES_INPUT_QPARAMS:
            for name in [i for i in node.inputs if i and not graph.tensor(i).is_constant] + list(
                node.outputs
            ):
                parent[root(name)] = root(node.outputs[0])
    return {name: root(name) for name in parent}


def _activation_qparams(
    graph: Graph, calibration: Calibration, per_channel: frozenset[str] = frozenset()
) -> dict[str, Tensor]:
    groups = activation_groups(graph)
    fixed = {
        groups[n.outputs[0]]: SOFTMAX_OUTPUT
        for n in graph.nodes
        if n.op is Op.SOFTMAX and graph.tensor(n.outputs[0]).dtype is not DType.INT16  # int16: imported
    }
    imported = {groups[t.name]: t.quant for t in graph.activations() if t.quant is not None}
    spans: dict[str, tuple[float, float]] = {}
    for name, group in groups.items():
        if name in calibration.ranges:
            lo, hi = calibration.ranges[name]
            old = spans.get(group, (lo, hi))
            spans[group] = (min(lo, old[0]), max(hi, old[1]))
    for name in graph.outputs:
        root = groups.get(name, "")
        if root in spans and graph.tensor(name).dtype is DType.INT16:
            lo, hi = spans[root]
            spans[root] = (lo * INT16_OUTPUT_MARGIN, hi * INT16_OUTPUT_MARGIN)
    result = {}
    for tensor in graph.activations():
        group = groups[tensor.name]
        dtype = DType.INT16 if tensor.dtype is DType.INT16 else DType.INT8
        quant = _qparams_for(tensor.evolve(dtype=dtype), group, fixed, imported, spans, calibration)
        if tensor.name in per_channel:
            quant = _per_channel(tensor.name, quant, groups, calibration)
        result[tensor.name] = tensor.evolve(dtype=dtype, quant=quant)
    return result


def _per_channel(
    name: str, quant: QuantParams, groups: Mapping[str, str], calibration: Calibration
) -> QuantParams:
    """The tensor's scale split per channel around its zero point (quantcore/quantize/channel_scales.py)."""
    from quantcore.quantize.channel_scales import channel_scales

    alone = sum(1 for g in groups.values() if g == groups[name]) == 1
    if quant.dtype is not DType.INT8 or quant.clip is None or not alone or name not in calibration.channels:
        raise P.QuantizationError(
            f"tensor {name!r}: per-channel scales need an int8 tensor of its own calibrated range"
            " (not int16, fixed, imported or shared with a pad/pool/reshape) and its per-channel ranges"
        )
    scales = channel_scales(float(quant.scale), int(quant.zero_point), quant.clip, calibration.channels[name])
    return QuantParams(
        quant.dtype,
        scales,
        quant.zero_point,
        axis=3,
        observed=quant.observed,
        clip=quant.clip,
        method=quant.method,
    )


def _qparams_for(
    tensor: Tensor,
    group: str,
    fixed: Mapping[str, tuple[float, int]],
    imported: Mapping[str, QuantParams | None],
    spans: Mapping[str, tuple[float, float]],
    calibration: Calibration,
) -> QuantParams:
    observed = calibration.observed.get(tensor.name)
    if group in fixed:
        scale, zp = fixed[group]
        return QuantParams(DType.INT8, np.array(scale), np.array(zp), observed=observed, method="fixed")
    source = imported.get(group)
    if source is not None and tensor.dtype is DType.INT8:
        return QuantParams(DType.INT8, source.scale, source.zero_point, observed=observed, method="imported")
    if source is not None and source.dtype is tensor.dtype is DType.INT16:  # an int8 .tflite's int16 edges
        return QuantParams(DType.INT16, source.scale, source.zero_point, observed=observed, method="imported")
    if group not in spans:
        raise P.QuantizationError(f"tensor {tensor.name!r} has no calibrated range")
    lo, hi = spans[group]
    scale, zp = quant_params(lo, hi, "int16" if tensor.dtype is DType.INT16 else "int8")  # int16: symmetric
    method = calibration.methods.get(tensor.name)
    return QuantParams(
        tensor.dtype, np.array(scale), np.array(zp), observed=observed, clip=(lo, hi), method=method
    )


# -- layers ---------------------------------------------------------------------------------------


Quantizer = Callable[[Graph, Node, QuantConfig], tuple[Node, list[Tensor]]]


def _qp(graph: Graph, name: str) -> tuple[float, int]:
    quant = graph.tensor(name).quant
    assert quant is not None, name
    if quant.axis is not None:  # only conv-like layers take per-channel activation scales (_scales)
        raise P.QuantizationError(f"tensor {name!r}: per-channel scales, but a reader takes one scale")
    return float(quant.scale), int(quant.zero_point)


def _scales(graph: Graph, name: str) -> tuple[float | np.ndarray, int]:
    """A tensor's scale (an array along the channels for per-channel activation scales) and zero point."""
    quant = graph.tensor(name).quant
    assert quant is not None, name
    scale = np.asarray(quant.scale, np.float64) if quant.axis is not None else float(quant.scale)
    return scale, int(quant.zero_point)


def _clamp(graph: Graph, node: Node) -> dict[str, int]:
    """The fused activation as integer codes; one pair for every channel of a per-channel output, which
    a clamp at a real value other than 0 (ReLU6, Clip) may not give: then the layer is refused."""
    out = graph.tensor(node.outputs[0])
    scales, zp = _scales(graph, out.name)
    activation = node.attr("activation", Activation.NONE)
    pairs = {
        P.activation_range(activation, node.attr("clip"), float(s), zp, out.dtype) for s in np.ravel(scales)
    }
    if len(pairs) > 1:
        raise P.QuantizationError(
            f"layer {node.name!r}: its fused {activation.value} clamp falls on different codes per channel"
            f" of {out.name!r} ({len(pairs)} pairs), but the kernel takes one act_min/act_max"
        )
    lo, hi = pairs.pop()
    return {"act_min": lo, "act_max": hi}


def _wide(graph: Graph, node: Node) -> bool:
    """The layer runs on CMSIS-NN's s16 kernels (int16 activations)."""
    return graph.tensor(node.outputs[0]).dtype is DType.INT16


_CONV_KERNELS = {
    (Op.CONV2D, False): "arm_convolve_wrapper_s8",
    (Op.CONV2D, True): "arm_convolve_wrapper_s16",
    (Op.DEPTHWISE_CONV2D, False): "arm_depthwise_conv_wrapper_s8",
    (Op.DEPTHWISE_CONV2D, True): "arm_depthwise_conv_wrapper_s16",
}


def _conv_like(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    x, w_name, b_name = node.inputs
    s_in, zp_in = _scales(graph, x)
    s_out, zp_out = _scales(graph, node.outputs[0])
    if node.op is Op.FULLY_CONNECTED and (np.ndim(s_in) or np.ndim(s_out)):
        raise P.QuantizationError(f"layer {node.name!r}: a fully connected layer takes one scale per tensor")
    wide = _wide(graph, node)
    # arm_fully_connected_s16 takes one multiplier: its weights are quantized per tensor.
    per_channel = config.per_channel and not (wide and node.op is Op.FULLY_CONNECTED)
    wq, s_w = _weights(graph, node, w_name, per_channel)
    bias = graph.constant(b_name) if b_name else np.zeros(len(s_w), np.float32)
    bias_dtype = DType.INT64 if wide else DType.INT32  # the s16 kernels take int64 biases
    if np.ndim(s_in):  # a depthwise layer's per-channel input: output channel c reads channel c // ch_mult
        if node.op is not Op.DEPTHWISE_CONV2D:
            raise P.QuantizationError(f"layer {node.name!r}: per-channel input scales need a depthwise layer")
        s_in = np.repeat(s_in, len(s_w) // np.size(s_in))
    q_b = quantize_bias(bias, s_in, s_w, wide)
    bq = Tensor(
        f"{node.name}.bias",
        q_b.shape,
        bias_dtype,
        q_b,
        quant=QuantParams(bias_dtype, s_in * s_w, np.zeros(len(s_w), np.int64), axis=0),
    )
    params = {**P.conv_params(node.name, s_in, zp_in, s_w, s_out, zp_out), **_clamp(graph, node)}
    if node.op is Op.FULLY_CONNECTED:
        params["filter_offset"] = 0
        if not per_channel:
            params["multiplier"], params["shift"] = params["multiplier"][0], params["shift"][0]
        kernel = "arm_fully_connected_per_channel_s8" if per_channel else "arm_fully_connected_s8"
        kernel = "arm_fully_connected_s16" if wide else kernel
    else:
        top, left, _, _ = node.attr("pads", (0, 0, 0, 0))
        params["stride"] = list(node.attr("strides", (1, 1)))
        params["padding"] = [top, left]
        params["dilation"] = list(node.attr("dilations", (1, 1)))
        if node.op is Op.DEPTHWISE_CONV2D:
            params["ch_mult"] = len(s_w) // graph.tensor(x).shape[3]
        kernel = _CONV_KERNELS[(node.op, wide)]
    quantized = node.evolve(inputs=(x, wq.name, bq.name)).with_attrs(kernel=kernel, params=params)
    return quantized, [wq, bq]


def _weights(graph: Graph, node: Node, w_name: str, per_channel: bool) -> tuple[Tensor, np.ndarray]:
    """The int8 weight tensor and the per-output-channel scales s_w[c] (repeated when per tensor).

    Scales imported from a QDQ model are kept; otherwise they are max|w| / 127.
    """
    w = graph.constant(w_name)
    axis = 3 if node.op is Op.DEPTHWISE_CONV2D else 0
    channels = w.shape[axis]
    imported = graph.tensor(w_name).quant
    if imported is not None:
        scales = np.asarray(imported.scale, np.float64)
    else:
        scales = weight_scales(w, axis if per_channel else None)
    per_channel = scales.ndim == 1
    q_w = quantize_weights(w, scales, axis if per_channel else None, weight_floor(imported))
    quant = QuantParams(
        DType.INT8,
        scales,
        np.zeros(scales.shape, np.int64),
        axis=axis if per_channel else None,
        observed=_observed(w, axis if per_channel else None),
    )
    tensor = Tensor(f"{node.name}.weight", q_w.shape, DType.INT8, q_w, quant=quant)
    return tensor, np.broadcast_to(scales, (channels,)).astype(np.float64)


def _observed(w: np.ndarray, axis: int | None) -> tuple[Any, Any]:
    """(min, max) of the float weights: per output channel, or of the whole tensor."""
    if axis is None:
        return float(w.min()), float(w.max())
    rows = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    return [float(v) for v in rows.min(axis=1)], [float(v) for v in rows.max(axis=1)]


def _pool(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    top, left, _, _ = node.attr("pads", (0, 0, 0, 0))
    params = {
        "kernel": list(node.attr("kernel")),
        "stride": list(node.attr("strides", (1, 1))),
        "padding": [top, left],
        **_clamp(graph, node),
    }
    kernel = "arm_max_pool_s" if node.op is Op.MAX_POOL else "arm_avgpool_s"
    return node.with_attrs(kernel=kernel + ("16" if _wide(graph, node) else "8"), params=params), []


def _binary(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    a, b = node.inputs
    if graph.tensor(b).is_constant or graph.tensor(a).is_constant:
        raise P.QuantizationError(
            f"layer {node.name!r} ({node.op.json_name}): a constant operand is not supported yet;"
            " fold it into the preceding layer's bias/weights before export"
        )
    (s1, z1), (s2, z2), (so, zo) = _qp(graph, a), _qp(graph, b), _qp(graph, node.outputs[0])
    dtype = graph.tensor(node.outputs[0]).dtype
    if node.op is Op.ADD:
        params, kernel = P.add_params(node.name, s1, z1, s2, z2, so, zo, dtype), "arm_elementwise_add_s"
    else:
        params, kernel = P.mul_params(node.name, s1, z1, s2, z2, so, zo), "arm_elementwise_mul_s"
    kernel += "16" if dtype is DType.INT16 else "8"
    return node.with_attrs(kernel=kernel, params={**params, **_clamp(graph, node)}), []


def _requantize(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    """int8 <-> int16 conversion: out = clamp(requantize(x - zp_in, s_in / s_out) + zp_out)."""
    (s_in, zp_in), (s_out, zp_out) = _qp(graph, node.inputs[0]), _qp(graph, node.outputs[0])
    out = graph.tensor(node.outputs[0]).dtype
    assert out.qmin is not None and out.qmax is not None
    params = {
        **P.requantize_params(node.name, s_in, zp_in, s_out, zp_out),
        "act_min": out.qmin,
        "act_max": out.qmax,
    }
    return node.with_attrs(kernel="fixpoint_requantize", params=params), []


def _softmax(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    s_in, _ = _qp(graph, node.inputs[0])
    # An int16 output (imported from an int8 .tflite): TFLM's int8 -> int16 softmax, the same parameters.
    kernel = "arm_softmax_s8_s16" if _wide(graph, node) else "arm_softmax_s8"
    return node.with_attrs(kernel=kernel, params=P.softmax_params(s_in)), []


def _passthrough(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    return node.with_attrs(kernel=None, params={}), []


# arm_concatenation_s8_<axis>: CMSIS-NN names NHWC's axes w (N), y (H), x (W), z (C).
_CONCAT_KERNELS = {
    0: "arm_concatenation_s8_w",
    1: "arm_concatenation_s8_y",
    2: "arm_concatenation_s8_x",
    3: "arm_concatenation_s8_z",
}


def _concat(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    axis = node.attr("axis") + 4 - len(graph.tensor(node.outputs[0]).shape)  # as a (N, H, W, C) axis
    return node.with_attrs(kernel=_CONCAT_KERNELS[axis], params={"axis": axis}), []


def _pad(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    pads = list(node.attr("pads"))
    half = len(pads) // 2
    lead = [0] * (4 - half)
    _, zp = _qp(graph, node.inputs[0])
    params = {"pre_pad": lead + pads[:half], "post_pad": lead + pads[half:], "pad_value": zp}
    return node.with_attrs(kernel="arm_pad_s8", params=params), []


def _transpose(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    return node.with_attrs(kernel="arm_transpose_s8", params={"perm": list(node.attr("perm"))}), []


def _with_cell_states(graph: Graph, calibration: Calibration) -> Graph:
    """A float LSTM's int16 cell state, and a float SVDF's int16 state, take their scale from their
    calibrated range (quantize/recurrent.py)."""
    if not any(node.op in (Op.LSTM, Op.SVDF) for node in graph.nodes):
        return graph
    from quantcore.quantize import recurrent

    return recurrent.with_cell_states(graph, calibration.ranges)


def _recurrent(graph: Graph, node: Node, config: QuantConfig) -> tuple[Node, list[Tensor]]:
    from quantcore.quantize import recurrent

    return recurrent.quantize(graph, node)


_QUANTIZERS: dict[Op, Quantizer] = {
    Op.CONV2D: _conv_like,
    Op.DEPTHWISE_CONV2D: _conv_like,
    Op.FULLY_CONNECTED: _conv_like,
    Op.MAX_POOL: _pool,
    Op.AVG_POOL: _pool,
    Op.ADD: _binary,
    Op.MUL: _binary,
    Op.SOFTMAX: _softmax,
    Op.REQUANTIZE: _requantize,
    Op.CONCAT: _concat,
    Op.PAD: _pad,
    Op.TRANSPOSE: _transpose,
    Op.SVDF: _recurrent,
    Op.LSTM: _recurrent,
}
