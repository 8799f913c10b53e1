"""Removal of nodes that compute nothing: Identity/Dropout, reshapes to the same shape, identity
transposes, zero pads. Their consumers read the node's input instead."""

from __future__ import annotations

from quantcore.ir import Graph, Node, Op


def remove_noops(graph: Graph) -> Graph:
    for node in list(graph.nodes):
        if _is_noop(graph, node):
            graph = bypass(graph, node)
    return graph.prune()


def bypass(graph: Graph, node: Node) -> Graph:
    """Drop a one-input node; its output's readers (and graph outputs) read its input instead.

    When the output is a graph output, the input takes over the output's name, so the model keeps its
    interface names.
    """
    src, dst = node.inputs[0], node.outputs[0]
    graph = graph.replace_node(node, [])
    if dst in graph.outputs and src not in graph.inputs:
        producer = graph.producer(src)
        if producer is not None and len(graph.consumers(src)) == 0:
            graph = graph.replace_node(producer, [producer.evolve(outputs=(dst,))])
            return graph.with_tensors(
                graph.tensor(dst).evolve(quant=graph.tensor(src).quant or graph.tensor(dst).quant)
            )
    return graph.rename_tensor_uses(dst, src)


def _is_noop(graph: Graph, node: Node) -> bool:
    if node.op is Op.IDENTITY:
        return True
    if node.op is Op.RESHAPE:
        return tuple(graph.tensor(node.inputs[0]).shape) == tuple(node.attr("shape"))
    if node.op is Op.TRANSPOSE:
        return list(node.attr("perm")) == sorted(node.attr("perm"))
    if node.op is Op.PAD:
        return not any(node.attr("pads"))
    return False
