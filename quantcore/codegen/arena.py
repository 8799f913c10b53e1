"""The static activation arena: where every activation tensor of a quantized graph lives in one buffer.

A tensor lives from the layer that produces it to its last consumer (a graph input from the start, a
graph output to the end); tensors whose lifetimes do not overlap may share bytes. Placement is TFLite
Micro's "greedy by size": largest first, each at the lowest aligned offset that collides with no placed
tensor alive at the same time. A layer's inputs and output are alive together at that layer, so a kernel
never writes over what it reads (CMSIS-NN's kernels are not in-place).

Reshape/Identity outputs are byte-for-byte their input, so they alias it: one buffer, whose lifetime is
the union of its members'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from quantcore.ir import Graph, Op

ALIASING_OPS = (Op.RESHAPE, Op.IDENTITY)
"""Ops whose output is the same bytes as their input (CMSIS-NN's arm_reshape_s8 is a plain copy)."""


@dataclass(frozen=True)
class Lifetime:
    """A buffer to place: `size` bytes alive from step `first` to step `last` (inclusive)."""

    name: str
    size: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Placement:
    lifetime: Lifetime
    offset: int

    @property
    def end(self) -> int:
        return self.offset + self.lifetime.size


@dataclass(frozen=True)
class ArenaPlan:
    """Offsets of every activation tensor in the arena, and figures to judge the planner by."""

    offsets: Mapping[str, int]
    """Tensor name -> byte offset in the arena (aliases share their source's offset)."""
    aliases: Mapping[str, str]
    """Tensor name -> the tensor whose buffer it shares (only for aliasing tensors)."""
    arena_bytes: int
    """The arena's size: the end of the last-ending buffer, rounded up to the alignment."""
    alignment: int
    tensor_bytes: int
    """Sum of every activation tensor's bytes: what the arena would take with no sharing at all."""
    lower_bound: int
    """Max over layers of the bytes of its inputs plus its output: no plan can be smaller."""
    peak_live_bytes: int
    """Max over layers of the bytes of all buffers alive at once (a tighter lower bound, no alignment)."""


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def place(lifetimes: Iterable[Lifetime], alignment: int = 16) -> dict[str, int]:
    """Greedy by size: offsets for `lifetimes` such that buffers alive together never overlap."""
    if alignment < 1:
        raise ValueError(f"alignment must be positive, got {alignment}")
    order = sorted(lifetimes, key=lambda t: (-t.size, t.first, t.name))
    placed: list[Placement] = []
    for lifetime in order:
        offset = _lowest_gap(lifetime, placed, alignment)
        placed.append(Placement(lifetime, offset))
    return {p.lifetime.name: p.offset for p in placed}


def _lowest_gap(lifetime: Lifetime, placed: Sequence[Placement], alignment: int) -> int:
    """The lowest aligned offset where `lifetime` fits between the placed buffers alive with it."""
    candidate = 0
    for other in sorted((p for p in placed if p.lifetime.overlaps(lifetime)), key=lambda p: p.offset):
        if candidate + lifetime.size <= other.offset:
            break
        candidate = max(candidate, align_up(other.end, alignment))
    return candidate


# -- the graph's lifetimes ------------------------------------------------------------------------


def tensor_bytes(graph: Graph, name: str) -> int:
    tensor = graph.tensor(name)
    return int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.numpy.itemsize


def alias_roots(graph: Graph) -> dict[str, str]:
    """Every activation tensor -> the tensor whose buffer holds it (itself unless it aliases)."""
    roots = {t.name: t.name for t in graph.activations()}
    for node in graph.nodes:
        if _aliases(graph, node.op, node.inputs[0] if node.inputs else "", node.outputs[0]):
            roots[node.outputs[0]] = roots[node.inputs[0]]
    return roots


def _aliases(graph: Graph, op: Op, source: str, target: str) -> bool:
    if op not in ALIASING_OPS or not source or graph.tensor(source).is_constant:
        return False
    src, dst = graph.tensor(source), graph.tensor(target)
    # Legal only as a reinterpretation of the same bytes: same element type, same byte count.
    return src.dtype is dst.dtype and tensor_bytes(graph, source) == tensor_bytes(graph, target)


def lifetimes(graph: Graph, roots: Mapping[str, str]) -> list[Lifetime]:
    """One lifetime per buffer (alias root), in steps = node indices."""
    end = max(len(graph.nodes) - 1, 0)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for name in graph.inputs:
        first[roots[name]], last[roots[name]] = 0, 0
    for step, node in enumerate(graph.nodes):
        for name in (*node.inputs, *node.outputs):
            if name in roots:
                root = roots[name]
                first.setdefault(root, step)
                last[root] = step
    for name in graph.outputs:
        last[roots[name]] = end
    return [Lifetime(r, tensor_bytes(graph, r), first[r], last[r]) for r in dict.fromkeys(roots.values())]


def plan_arena(graph: Graph, alignment: int = 16) -> ArenaPlan:
    """Place every activation tensor of `graph` in one arena."""
    roots = alias_roots(graph)
    spans = lifetimes(graph, roots)
    root_offsets = place(spans, alignment)
    size = max((root_offsets[s.name] + s.size for s in spans), default=0)
    return ArenaPlan(
        offsets={name: root_offsets[root] for name, root in roots.items()},
        aliases={name: root for name, root in roots.items() if name != root},
        arena_bytes=align_up(size, alignment),
        alignment=alignment,
        tensor_bytes=sum(tensor_bytes(graph, name) for name in roots),
        lower_bound=_layer_io_bound(graph, roots),
        peak_live_bytes=_peak_live(spans, len(graph.nodes)),
    )


def _layer_io_bound(graph: Graph, roots: Mapping[str, str]) -> int:
    best = 0
    for node in graph.nodes:
        buffers = {roots[n] for n in (*node.inputs, *node.outputs) if n in roots}
        best = max(best, sum(tensor_bytes(graph, b) for b in buffers))
    return best


def _peak_live(spans: Sequence[Lifetime], steps: int) -> int:
    return max((sum(s.size for s in spans if s.first <= k <= s.last) for k in range(steps)), default=0)
