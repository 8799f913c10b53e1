"""Fusion of ReLU / ReLU6 / Clip into the producing layer, where they become its output clamp.

CMSIS-NN applies [act_min, act_max] inside conv, depthwise, fully connected, pooling and add/mul kernels,
so a separate activation costs a pass over memory and, worse, a second requantization. A Clip(0, 6) is
ReLU6, Clip(0, inf) is ReLU; any other constant clip is kept as a CLIP range.
"""

from __future__ import annotations

import math

from quantcore.ir import Activation, Graph, Node, Op

_FUSES_INTO = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED, Op.ADD, Op.MUL, Op.AVG_POOL, Op.MAX_POOL)


def fuse_activations(graph: Graph) -> Graph:
    for act in [n for n in graph.nodes if n.op in (Op.RELU, Op.CLIP)]:
        graph = _fuse_one(graph, graph.node(act.name))
    return graph.prune()


def activation_of(node: Node) -> tuple[Activation, tuple[float, float] | None]:
    """The Activation an activation node stands for, with the clip range when it is a general CLIP."""
    if node.op is Op.RELU:
        return Activation.RELU, None
    lo = -math.inf if node.attr("min") is None else float(node.attr("min"))
    hi = math.inf if node.attr("max") is None else float(node.attr("max"))
    if lo == 0.0 and hi == 6.0:
        return Activation.RELU6, None
    if lo == 0.0 and hi == math.inf:
        return Activation.RELU, None
    return Activation.CLIP, (lo, hi)


def _fuse_one(graph: Graph, act: Node) -> Graph:
    producer = graph.producer(act.inputs[0])
    if (
        producer is None
        or producer.op not in _FUSES_INTO
        or producer.attr("activation", Activation.NONE) is not Activation.NONE
        or len(graph.consumers(act.inputs[0])) != 1
        or act.inputs[0] in graph.outputs
    ):
        return graph
    kind, clip = activation_of(act)
    attrs: dict[str, object] = {"activation": kind}
    if clip is not None:
        attrs["clip"] = clip
    fused = producer.with_attrs(**attrs).evolve(outputs=act.outputs)
    return graph.replace_node(producer, [fused]).replace_node(graph.node(act.name), [])
