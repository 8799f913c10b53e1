"""A float numpy executor of IR graphs, in either layout, for checking passes and feeding calibration.

It follows the ops' documented semantics (quantcore.ir.ops.Op) in float64, so a pass can be proven
function-preserving by running the graph before and after it on the same inputs. It is a reference, not a
fast runtime: convolutions are im2col matrix products over the same windows the int8 kernels use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from quantcore.ir import Activation, Graph, GraphError, Layout, Node, Op
from quantcore.kernels.window import Window
from quantcore.runtime import recurrent_float

Array = np.ndarray
Env = dict[str, Array]


def run(graph: Graph, inputs: Mapping[str, Array], keep: bool = True) -> Env:
    """Execute `graph`; returns every tensor computed (or only the graph outputs when keep=False)."""
    env: Env = {}
    for name in graph.inputs:
        if name not in inputs:
            raise GraphError(f"graph input {name!r} was not given")
        env[name] = np.asarray(inputs[name], dtype=np.float64)
    for name, tensor in graph.tensors.items():
        if tensor.data is not None:
            env[name] = tensor.data.astype(np.float64)
    for node in graph.nodes:
        env[node.outputs[0]] = evaluate(graph, node, [env[i] if i else None for i in node.inputs])
    if keep:
        return env
    return {name: env[name] for name in graph.outputs}


def evaluate(graph: Graph, node: Node, args: list[Array | None]) -> Array:
    """One node on float64 inputs (None for absent optional inputs)."""
    return _OPS[node.op](node, args, graph)


def _nhwc(graph: Graph, node: Node) -> bool:
    return graph.tensor(node.inputs[0]).layout is Layout.NHWC


def _activate(node: Node, y: Array) -> Array:
    act = node.attr("activation", Activation.NONE)
    if act is Activation.RELU:
        return np.asarray(np.maximum(y, 0.0))
    if act is Activation.RELU6:
        return np.asarray(np.clip(y, 0.0, 6.0))
    if act is Activation.CLIP:
        lo, hi = node.attr("clip")
        return np.asarray(np.clip(y, -np.inf if lo is None else lo, np.inf if hi is None else hi))
    return y


def _windowed(
    node: Node, x_nhwc: Array, kernel: tuple[int, int], fill: float
) -> tuple[Array, Window, tuple[int, int]]:
    """Pad x (NHWC) by the node's pads and return (padded, window, output_hw)."""
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    window = Window(
        kernel, tuple(node.attr("strides", (1, 1))), (top, left), tuple(node.attr("dilations", (1, 1)))
    )
    sh, sw = window.stride
    dh, dw = window.dilation
    h, w = x_nhwc.shape[1], x_nhwc.shape[2]
    oh = (h + top + bottom - dh * (kernel[0] - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kernel[1] - 1) - 1) // sw + 1
    return window.pad(x_nhwc, (oh, ow), fill), window, (oh, ow)


def _to_nhwc(x: Array, nhwc: bool) -> Array:
    return x if nhwc else x.transpose(0, 2, 3, 1)


def _from_nhwc(y: Array, nhwc: bool) -> Array:
    return y if nhwc else y.transpose(0, 3, 1, 2)


def _conv(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x, w, b = args
    assert x is not None and w is not None
    nhwc = _nhwc(graph, node)
    ohwi = w if nhwc else w.transpose(0, 2, 3, 1)
    groups = node.attr("groups", 1)
    out_ch, kh, kw, group_ch = ohwi.shape
    padded, window, hw = _windowed(node, _to_nhwc(x, nhwc), (kh, kw), 0.0)
    per_group = out_ch // groups
    parts = []
    for g in range(groups):
        cols = window.im2col(padded[..., g * group_ch : (g + 1) * group_ch], hw)
        parts.append(cols @ ohwi[g * per_group : (g + 1) * per_group].reshape(per_group, -1).T)
    y = np.concatenate(parts, axis=-1)
    if b is not None:
        y = y + b
    return _from_nhwc(_activate(node, y), nhwc)


def _depthwise(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x, w, b = args
    assert x is not None and w is not None
    nhwc = _nhwc(graph, node)
    _, kh, kw, out_ch = w.shape
    xn = _to_nhwc(x, nhwc)
    mult = out_ch // xn.shape[3]
    padded, window, hw = _windowed(node, xn, (kh, kw), 0.0)
    taps = w[0].reshape(kh, kw, xn.shape[3], mult)
    y = np.zeros((xn.shape[0], *hw, xn.shape[3], mult))
    for ky, kx, view in window.taps(padded, hw):
        y += view[..., None] * taps[ky, kx]
    y = y.reshape(xn.shape[0], *hw, out_ch)
    if b is not None:
        y = y + b
    return _from_nhwc(_activate(node, y), nhwc)


def _fully_connected(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x, w, b = args
    assert x is not None and w is not None
    y = x.reshape(x.shape[0], -1) @ w.T
    return _activate(node, y if b is None else y + b)


def _batch_norm(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x, scale, bias, mean, var = args
    assert x is not None and scale is not None and bias is not None and mean is not None and var is not None
    k = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
    shape = (1, 1, 1, -1) if _nhwc(graph, node) else (1, -1) + (1,) * (x.ndim - 2)
    return np.asarray((x - mean.reshape(shape)) * k.reshape(shape) + bias.reshape(shape))


def _pool(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x = args[0]
    assert x is not None
    nhwc = _nhwc(graph, node)
    kernel = tuple(node.attr("kernel"))
    if node.op is Op.MAX_POOL:
        padded, window, hw = _windowed(node, _to_nhwc(x, nhwc), kernel, -np.inf)
        y = np.max([view for _, _, view in window.taps(padded, hw)], axis=0)
        return _from_nhwc(_activate(node, y), nhwc)
    padded, window, hw = _windowed(node, _to_nhwc(x, nhwc), kernel, np.nan)
    stack = np.array([view for _, _, view in window.taps(padded, hw)])
    if not node.attr("count_include_pad", False):
        return _from_nhwc(_activate(node, np.nanmean(stack, axis=0)), nhwc)
    # ONNX counts the declared padding in the divisor, never the extra padding ceil_mode adds.
    declared = _declared_pad_mask(node, _to_nhwc(x, nhwc).shape, kernel)
    counted = np.array([v for _, _, v in window.taps(declared, hw)]).sum(axis=0)
    return _from_nhwc(_activate(node, np.nansum(stack, axis=0) / counted), nhwc)


def _declared_pad_mask(node: Node, shape: tuple[int, ...], kernel: tuple[int, int]) -> Array:
    """1 for every input or declared-padding position, 0 for ceil_mode's extra padding (NHWC, 1 channel)."""
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    extra_bottom, extra_right = node.attr("ceil_pads", (0, 0))
    ones = np.ones((1, shape[1] + top + bottom - extra_bottom, shape[2] + left + right - extra_right, 1))
    return np.pad(ones, ((0, 0), (0, extra_bottom), (0, extra_right), (0, 0)))


def _global_avg_pool(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x = args[0]
    assert x is not None
    axes = (1, 2) if _nhwc(graph, node) else tuple(range(2, x.ndim))
    return np.asarray(x.mean(axis=axes, keepdims=True))


def _softmax(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x = args[0]
    assert x is not None
    axis = node.attr("axis", x.ndim - 1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return np.asarray(e / e.sum(axis=axis, keepdims=True))


def _binary(fn: Callable[[Array, Array], Array]) -> Callable[[Node, list[Array | None], Graph], Array]:
    def op(node: Node, args: list[Array | None], graph: Graph) -> Array:
        a, b = args
        assert a is not None and b is not None
        return _activate(node, fn(a, b))

    return op


def _pad(node: Node, args: list[Array | None], graph: Graph) -> Array:
    x = args[0]
    assert x is not None
    pads = node.attr("pads")
    half = len(pads) // 2
    return np.pad(
        x, list(zip(pads[:half], pads[half:], strict=True)), constant_values=node.attr("value", 0.0)
    )


def _single(fn: Callable[[Node, Array], Array]) -> Callable[[Node, list[Array | None], Graph], Array]:
    def op(node: Node, args: list[Array | None], graph: Graph) -> Array:
        assert args[0] is not None
        return fn(node, args[0])

    return op


_OPS: dict[Op, Callable[[Node, list[Any], Graph], Array]] = {
    Op.CONV2D: _conv,
    Op.DEPTHWISE_CONV2D: _depthwise,
    Op.FULLY_CONNECTED: _fully_connected,
    Op.BATCH_NORM: _batch_norm,
    Op.RELU: _single(lambda n, x: np.maximum(x, 0.0)),
    Op.CLIP: _single(
        lambda n, x: np.clip(
            x,
            -np.inf if n.attr("min") is None else n.attr("min"),
            np.inf if n.attr("max") is None else n.attr("max"),
        )
    ),
    Op.MAX_POOL: _pool,
    Op.AVG_POOL: _pool,
    Op.GLOBAL_AVG_POOL: _global_avg_pool,
    Op.ADD: _binary(np.add),
    Op.MUL: _binary(np.multiply),
    Op.SOFTMAX: _softmax,
    Op.CONCAT: lambda n, a, g: np.concatenate(a, axis=n.attr("axis")),
    Op.PAD: _pad,
    # Shapes are static with the graph's batch leading; executors run any batch, so it is substituted.
    # -1: a reshape may move the leading axis (an ONNX LSTM's sequence-first tensors, batch 1), so the
    # samples stacked on it are counted, not assumed
    Op.RESHAPE: _single(lambda n, x: x.reshape((-1, *n.attr("shape")[1:]))),
    Op.TRANSPOSE: _single(lambda n, x: x.transpose(n.attr("perm"))),
    Op.IDENTITY: _single(lambda n, x: x),
    Op.REQUANTIZE: _single(lambda n, x: x),  # an int8 .tflite's int16 input requantized: the same reals
    Op.SVDF: recurrent_float.svdf,
    Op.LSTM: recurrent_float.lstm,
}
