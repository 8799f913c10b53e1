"""The IR's operators in torch, with quantcore.runtime.float_exec's semantics (the reference they are
tested against): NHWC or NCHW as each tensor's layout says, explicit (top, left, bottom, right) pads,
ONNX's average-pool counting, the fused activation applied last.

4-D NHWC activations run through torch's NCHW operators as channels-last views (permute, no copy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from quantcore.ir import Activation, Graph, Layout, Node, Op

Args = Sequence[torch.Tensor | None]
OpFn = Callable[[Graph, Node, Args], torch.Tensor]


def activate(node: Node, y: torch.Tensor) -> torch.Tensor:
    act = node.attr("activation", Activation.NONE)
    if act is Activation.RELU:
        return F.relu(y)
    if act is Activation.RELU6:
        return torch.clamp(y, 0.0, 6.0)
    if act is Activation.CLIP:
        lo, hi = node.attr("clip")
        return torch.clamp(y, lo, hi)
    return y


def _nhwc(graph: Graph, node: Node) -> bool:
    return graph.tensor(node.inputs[0]).layout is Layout.NHWC


def _as_nchw(x: torch.Tensor, nhwc: bool) -> torch.Tensor:
    return x.permute(0, 3, 1, 2) if nhwc else x


def _from_nchw(y: torch.Tensor, nhwc: bool) -> torch.Tensor:
    return y.permute(0, 2, 3, 1) if nhwc else y


def _padded(node: Node, x_nchw: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
    if not (top or left or bottom or right):
        return x_nchw
    return F.pad(x_nchw, (left, right, top, bottom), value=fill)


def _conv(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x, w, b = args
    assert x is not None and w is not None
    nhwc = _nhwc(graph, node)
    weight = w.permute(0, 3, 1, 2) if nhwc else w  # OHWI -> OIHW
    y = F.conv2d(
        _padded(node, _as_nchw(x, nhwc)),
        weight,
        b,
        stride=tuple(node.attr("strides", (1, 1))),
        dilation=tuple(node.attr("dilations", (1, 1))),
        groups=node.attr("groups", 1),
    )
    return activate(node, _from_nchw(y, nhwc))


def _depthwise(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x, w, b = args
    assert x is not None and w is not None
    channels = x.shape[3]
    weight = w[0].permute(2, 0, 1).unsqueeze(1)  # (1, kh, kw, C*m) -> (C*m, 1, kh, kw); c*m+j reads c
    y = F.conv2d(
        _padded(node, _as_nchw(x, True)),
        weight,
        b,
        stride=tuple(node.attr("strides", (1, 1))),
        dilation=tuple(node.attr("dilations", (1, 1))),
        groups=channels,
    )
    return activate(node, _from_nchw(y, True))


def _fully_connected(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x, w, b = args
    assert x is not None and w is not None
    return activate(node, F.linear(x.reshape(x.shape[0], -1), w, b))


def _max_pool(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x = args[0]
    assert x is not None
    nhwc = _nhwc(graph, node)
    padded = _padded(node, _as_nchw(x, nhwc), -torch.inf)
    y = F.max_pool2d(padded, tuple(node.attr("kernel")), tuple(node.attr("strides", (1, 1))))
    return activate(node, _from_nchw(y, nhwc))


def _avg_pool(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    """Window sums over zero padding divided by the count of positions that count: the input's only,
    or also ONNX's declared padding (count_include_pad), never the padding ceil_mode added."""
    x = args[0]
    assert x is not None
    nhwc = _nhwc(graph, node)
    xc = _as_nchw(x, nhwc)
    kernel, strides = tuple(node.attr("kernel")), tuple(node.attr("strides", (1, 1)))
    area = kernel[0] * kernel[1]
    sums = F.avg_pool2d(_padded(node, xc), kernel, strides) * area
    ones = torch.ones((1, 1, *xc.shape[2:]), dtype=x.dtype, device=x.device)
    if node.attr("count_include_pad", False):
        top, left, bottom, right = node.attr("pads", (0, 0, 0, 0))
        extra_bottom, extra_right = node.attr("ceil_pads", (0, 0))
        ones = F.pad(ones, (left, right - extra_right, top, bottom - extra_bottom), value=1.0)
        ones = F.pad(ones, (0, extra_right, 0, extra_bottom))
    else:
        ones = _padded(node, ones)
    counts = F.avg_pool2d(ones, kernel, strides) * area
    return activate(node, _from_nchw(sums / counts, nhwc))


def _global_avg_pool(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x = args[0]
    assert x is not None
    axes = (1, 2) if _nhwc(graph, node) else tuple(range(2, x.ndim))
    return x.mean(dim=axes, keepdim=True)


def _batch_norm(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x, scale, bias, mean, var = args
    assert x is not None and scale is not None and bias is not None and mean is not None and var is not None
    k = scale / torch.sqrt(var + node.attr("epsilon", 1e-5))
    shape = (1, 1, 1, -1) if _nhwc(graph, node) else (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) * k.reshape(shape) + bias.reshape(shape)


def _pad(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    x = args[0]
    assert x is not None
    pads = list(node.attr("pads"))
    half = len(pads) // 2
    widths: list[int] = []
    for axis in reversed(range(half)):  # F.pad takes (begin, end) pairs from the last axis back
        widths += [pads[axis], pads[half + axis]]
    return F.pad(x, tuple(widths), value=float(node.attr("value", 0.0)))


def _one(fn: Callable[[Node, torch.Tensor], torch.Tensor]) -> OpFn:
    def op(graph: Graph, node: Node, args: Args) -> torch.Tensor:
        assert args[0] is not None
        return fn(node, args[0])

    return op


def _two(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> OpFn:
    def op(graph: Graph, node: Node, args: Args) -> torch.Tensor:
        a, b = args
        assert a is not None and b is not None
        return activate(node, fn(a, b))

    return op


def _concat(graph: Graph, node: Node, args: Args) -> torch.Tensor:
    return torch.cat([a for a in args if a is not None], dim=node.attr("axis"))


def _clip(node: Node, x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, node.attr("min"), node.attr("max"))


OPS: dict[Op, OpFn] = {
    Op.CONV2D: _conv,
    Op.DEPTHWISE_CONV2D: _depthwise,
    Op.FULLY_CONNECTED: _fully_connected,
    Op.BATCH_NORM: _batch_norm,
    Op.RELU: _one(lambda n, x: F.relu(x)),
    Op.CLIP: _one(_clip),
    Op.MAX_POOL: _max_pool,
    Op.AVG_POOL: _avg_pool,
    Op.GLOBAL_AVG_POOL: _global_avg_pool,
    Op.ADD: _two(torch.add),
    Op.MUL: _two(torch.mul),
    Op.SOFTMAX: _one(lambda n, x: torch.softmax(x, dim=n.attr("axis", x.ndim - 1))),
    Op.CONCAT: _concat,
    Op.PAD: _pad,
    # Shapes are static with the graph's batch leading; the module runs any batch, so it is substituted.
    Op.RESHAPE: _one(lambda n, x: x.reshape((x.shape[0], *n.attr("shape")[1:]))),
    Op.TRANSPOSE: _one(lambda n, x: x.permute(*n.attr("perm"))),
    Op.IDENTITY: _one(lambda n, x: x),
}
"""Op -> its torch function (graph, node, inputs with None for absent optional ones) -> output."""
