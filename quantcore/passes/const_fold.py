"""Constant folding: a node whose inputs are all constants is evaluated once and becomes a constant."""

from __future__ import annotations

import numpy as np

from quantcore.ir import Graph
from quantcore.runtime.float_exec import evaluate


def fold_constants(graph: Graph) -> Graph:
    for node in list(graph.nodes):
        inputs = [graph.tensor(i) for i in node.inputs if i]
        if not inputs or not all(t.is_constant for t in inputs) or node.outputs[0] in graph.outputs:
            continue
        value = evaluate(graph, node, [graph.constant(i) if i else None for i in node.inputs])
        out = graph.tensor(node.outputs[0])
        graph = graph.replace_node(graph.node(node.name), []).with_tensors(
            out.evolve(shape=tuple(value.shape), data=value.astype(np.float32))
        )
    return graph.prune()
