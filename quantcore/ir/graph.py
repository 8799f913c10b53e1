"""Graph, Node, Tensor: an immutable dataflow graph in topological order.

Stages never mutate a graph: they build a new one with `Graph.evolve` (and the helpers below), so each stage
can be checked on its own with `verify()` and a failed stage leaves its input intact. Tensors are values
(activations, constants, graph inputs); nodes list their inputs and outputs by tensor name, "" marking an
absent optional input (e.g. a conv without bias).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from quantcore.ir.dtypes import DType
from quantcore.ir.ops import Layout, Op


class GraphError(Exception):
    """A graph that breaks an invariant (raised by verify and look-ups); the message names the node/tensor."""


@dataclass(frozen=True)
class QuantParams:
    """How a tensor's integers map to reals: real = scale * (q - zero_point), per tensor or per `axis`."""

    dtype: DType
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None
    observed: tuple[Any, Any] | None = None
    """(min, max) seen in calibration (per channel arrays for weights)."""
    clip: tuple[float, float] | None = None
    """The range the calibration method chose, for activations."""
    method: str | None = None

    @property
    def per_channel(self) -> bool:
        return self.axis is not None


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: DType = DType.FLOAT32
    data: np.ndarray | None = field(default=None, repr=False, compare=False)
    layout: Layout | None = None
    quant: QuantParams | None = None

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def evolve(self, **changes: Any) -> Tensor:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Node:
    name: str
    op: Op
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def evolve(self, **changes: Any) -> Node:
        if "attrs" in changes:
            changes["attrs"] = dict(changes["attrs"])
        return dataclasses.replace(self, **changes)

    def with_attrs(self, **attrs: Any) -> Node:
        return self.evolve(attrs={**self.attrs, **attrs})


@dataclass(frozen=True)
class Graph:
    name: str
    tensors: Mapping[str, Tensor]
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    # -- look-ups -------------------------------------------------------------------------------------

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"tensor {name!r} is not in graph {self.name!r}") from None

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise GraphError(f"node {name!r} is not in graph {self.name!r}")

    def producer(self, tensor: str) -> Node | None:
        return next((n for n in self.nodes if tensor in n.outputs), None)

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    def constant(self, name: str) -> np.ndarray:
        data = self.tensor(name).data
        if data is None:
            raise GraphError(f"tensor {name!r} must be a constant")
        return data

    def activations(self) -> list[Tensor]:
        """Graph inputs and every node output, in execution order: the tensors calibration observes."""
        names = list(self.inputs) + [o for n in self.nodes for o in n.outputs]
        return [self.tensors[n] for n in dict.fromkeys(names)]

    # -- rewriting ------------------------------------------------------------------------------------

    def evolve(self, **changes: Any) -> Graph:
        if "nodes" in changes:
            changes["nodes"] = tuple(changes["nodes"])
        return dataclasses.replace(self, **changes)

    def with_tensors(self, *tensors: Tensor) -> Graph:
        merged = dict(self.tensors)
        merged.update({t.name: t for t in tensors})
        return self.evolve(tensors=merged)

    def replace_node(self, old: Node, new: Iterable[Node]) -> Graph:
        nodes: list[Node] = []
        for node in self.nodes:
            nodes.extend(new if node is old else [node])
        return self.evolve(nodes=nodes)

    def rename_tensor_uses(self, old: str, new: str) -> Graph:
        """Make every consumer (and the graph outputs) read `new` instead of `old`."""
        nodes = [n.evolve(inputs=tuple(new if i == old else i for i in n.inputs)) for n in self.nodes]
        outputs = tuple(new if o == old else o for o in self.outputs)
        return self.evolve(nodes=nodes, outputs=outputs)

    def prune(self) -> Graph:
        """Drop nodes whose outputs nobody reads and tensors nobody references."""
        live = set(self.outputs)
        kept: list[Node] = []
        for node in reversed(self.nodes):
            if live.intersection(node.outputs):
                kept.append(node)
                live.update(i for i in node.inputs if i)
        kept.reverse()
        used = set(self.inputs) | set(self.outputs) | {t for n in kept for t in (*n.inputs, *n.outputs) if t}
        return self.evolve(nodes=kept, tensors={k: v for k, v in self.tensors.items() if k in used})

    # -- invariants -----------------------------------------------------------------------------------

    def verify(self) -> Graph:
        """Check names are unique, every input is defined before use, outputs exist; returns self."""
        defined = set(self.inputs) | {n for n, t in self.tensors.items() if t.is_constant}
        seen_nodes: set[str] = set()
        for node in self.nodes:
            if node.name in seen_nodes:
                raise GraphError(f"node name {node.name!r} is used twice")
            seen_nodes.add(node.name)
            for name in node.inputs:
                if name and name not in defined:
                    raise GraphError(
                        f"node {node.name!r} ({node.op.json_name}) reads {name!r} before it is produced"
                    )
            for name in node.outputs:
                if name in defined:
                    raise GraphError(f"tensor {name!r} is produced twice (again by node {node.name!r})")
                if name not in self.tensors:
                    raise GraphError(f"node {node.name!r} writes {name!r}, which has no tensor entry")
                defined.add(name)
        for name in self.outputs:
            if name not in defined:
                raise GraphError(f"graph output {name!r} is never produced")
        return self
