"""Walking an ONNX model's graphs without recursion: a hostile model nests subgraphs (If in Loop in If...)
as deep as protobuf lets it, and every walk over them here uses an explicit stack."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx


def graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    """The main graph and every subgraph (of If, Loop, Scan, functions), without recursion."""
    stack = [model.graph]
    stack += [g for function in model.functions for g in _subgraphs(function.node)]
    while stack:
        graph = stack.pop()
        yield graph
        stack.extend(_subgraphs(graph.node))


def graphs_of(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The subgraphs of one node (a Loop's body, an If's branches) and theirs, without recursion."""
    stack = _subgraphs([node])
    while stack:
        graph = stack.pop()
        yield graph
        stack.extend(_subgraphs(graph.node))


def _subgraphs(nodes: Iterable[onnx.NodeProto]) -> list[onnx.GraphProto]:
    found = []
    for node in nodes:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                found.append(attribute.g)
            found.extend(attribute.graphs)
    return found


def nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node of every graph and function of the model."""
    for graph in graphs(model):
        yield from graph.node
    for function in model.functions:
        yield from function.node


def tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every dense tensor the model stores: initializers and tensor attributes, subgraphs included."""
    for graph in graphs(model):
        yield from graph.initializer
    for node in nodes(model):
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
