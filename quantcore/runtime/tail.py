"""Runs of an int8 graph that start where a run of another graph left off, when both begin the same.

`fixpoint quantize` scores candidate graphs that differ only from some layer on (an average pool run as a
depthwise convolution, per-channel scales on one tensor, the output layer at int16): every tensor before
that layer has the same bits in both. `shared` finds those tensors by comparing the two graphs node by
node - ops, attributes, kernel parameters, quantization and constant data, not names alone - and `run`
computes only the nodes the outputs need past the tensors it is given, with the same kernels in the
same order as a whole run, so its outputs are the whole run's, bit for bit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from quantcore.ir import Graph
from quantcore.kernels.blas import single_threaded
from quantcore.kernels.requantize import Rounding
from quantcore.runtime import int8_exec


class Needed(NamedTuple):
    names: set[str]
    """The nodes to run."""
    inputs: set[str]
    """The tensors they read that no node to run makes (graph inputs, tensors given)."""


def needed(graph: Graph, given: set[str]) -> Needed:
    """The nodes the graph's outputs need when the tensors `given` are known already."""
    producer = {out: node for node in graph.nodes for out in node.outputs}
    names: set[str] = set()
    inputs: set[str] = set()
    wanted = list(graph.outputs)
    while wanted:
        name = wanted.pop()
        node = producer.get(name)
        if name in given or node is None:
            inputs.add(name)
        elif node.name not in names:
            names.add(node.name)
            wanted += [i for i in node.inputs if i and not graph.tensor(i).is_constant]
    return Needed(names, inputs)


def shared(before: Graph, after: Graph) -> set[str]:
    """The activation tensors `after` computes exactly as `before` does: equal tensors (quantization
    included) made by equal nodes from shared tensors and equal constants; equal graph inputs."""
    if not equal(before.meta.get("rounding"), after.meta.get("rounding")):
        return set()
    same = {n for n in after.inputs if n in before.tensors and equal(before.tensor(n), after.tensor(n))}
    made_before = {out: node for node in before.nodes for out in node.outputs}
    for node in after.nodes:
        other = made_before.get(node.outputs[0])
        if other is None or not equal(node, other):
            continue
        if all(not i or i in same or _same_constant(before, after, i) for i in node.inputs):
            made = (o for o in node.outputs if o in before.tensors)
            same |= {o for o in made if equal(before.tensor(o), after.tensor(o))}
    return same


def _same_constant(before: Graph, after: Graph, name: str) -> bool:
    tensor = after.tensor(name)
    return tensor.is_constant and name in before.tensors and equal(before.tensor(name), tensor)


Env = dict[str, np.ndarray]


def run(graph: Graph, env: Env, names: set[str], rounding: Rounding) -> Env:
    """Run the nodes `names` of `graph` in graph order on `env` (the tensors they read that they do not
    make); returns `env` with their outputs."""
    for node in graph.nodes:
        if node.name in names:
            with single_threaded():
                env[node.outputs[0]] = int8_exec.run_node(graph, node, env, rounding)
    return env


def equal(a: Any, b: Any) -> bool:
    """Deep equality of IR values: arrays by dtype, shape and every element, dataclasses field by field
    (a tensor's data included, which its own __eq__ leaves out)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.dtype == y.dtype and x.shape == y.shape and bool(np.array_equal(x, y))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        fields = dataclasses.fields(a)
        return type(a) is type(b) and all(equal(getattr(a, f.name), getattr(b, f.name)) for f in fields)
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(equal, a, b))
    return type(a) is type(b) and bool(a == b)
