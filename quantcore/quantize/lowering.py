"""Quantization-time lowering: an average pool whose output is much narrower than its input runs as a
depthwise convolution, which may requantize to its own scale.

arm_avgpool_s8 keeps its input's scale and zero point. A global average pool typically averages a wide
ReLU output down to a narrow one (outlier net: range 1200 in, 486 out), so the pooled values use a
fraction of the int8 codes and the next layer reads them coarsely (-4 dB, -5 top-1 points there). A
depthwise convolution with all weights 1/(kh*kw) computes the same average exactly (each weight
quantizes to 127 at scale 1/(127*kh*kw)) and requantizes to the output's own range.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from quantcore.ir import Graph, Node, Op, Tensor

NARROWING = 2.0
"""Lower when the input's range is at least this many times the output's (one bit of resolution)."""


def lower_narrowing_pools(graph: Graph, ranges: Mapping[str, tuple[float, float]]) -> Graph:
    for node in list(graph.nodes):
        if node.op is Op.AVG_POOL and not any(node.attr("pads", (0, 0, 0, 0))) and _narrows(node, ranges):
            graph = avgpool_as_depthwise(graph, node)
    return graph


def _narrows(node: Node, ranges: Mapping[str, tuple[float, float]]) -> bool:
    if node.inputs[0] not in ranges or node.outputs[0] not in ranges:
        return False
    lo_in, hi_in = ranges[node.inputs[0]]
    lo_out, hi_out = ranges[node.outputs[0]]
    return hi_out - lo_out > 0 and (hi_in - lo_in) >= NARROWING * (hi_out - lo_out)


def avgpool_as_depthwise(graph: Graph, node: Node) -> Graph:
    """Replace an unpadded AVG_POOL by the equivalent DEPTHWISE_CONV2D (same name, same tensors)."""
    kh, kw = node.attr("kernel")
    channels = graph.tensor(node.inputs[0]).shape[-1]
    w_name, b_name = f"{node.name}.mean_weights", f"{node.name}.mean_bias"
    weights = np.full((1, kh, kw, channels), 1.0 / (kh * kw), np.float32)
    graph = graph.with_tensors(
        Tensor(w_name, weights.shape, data=weights),
        Tensor(b_name, (channels,), data=np.zeros(channels, np.float32)),
    )
    attrs = {k: v for k, v in node.attrs.items() if k not in ("count_include_pad", "ceil_pads")}
    dw = Node(node.name, Op.DEPTHWISE_CONV2D, (node.inputs[0], w_name, b_name), node.outputs, attrs)
    return graph.replace_node(node, [dw])
