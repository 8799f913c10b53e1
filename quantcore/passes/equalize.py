"""Cross-layer equalization (Nagel et al. 2019, "Data-Free Quantization"): data-free, function-preserving.

A producer layer P (conv, depthwise conv, fully connected) whose output reaches exactly one consumer C
(a conv with groups = 1, or a fully connected layer) through ops that act on each channel alone and are
positively homogeneous - P's fused ReLU (or no activation), max and average pools, a reshape that keeps
the channel as the last axis - computes the same function when P's output channel k is divided by
s_k > 0 and C's weights reading channel k are multiplied by it. With r1_k the largest |weight| of P's
output channel k and r2_k that of C's input channel k, s_k = sqrt(r1_k / r2_k) gives both the range
sqrt(r1_k r2_k): per-channel weight ranges even out, and so do the activations between P and C, whose
channel k is divided by s_k. A channel made 40x wider than its neighbours (with its reader's weights 40x
smaller, as training without BatchNorm can leave it) comes back into line; per-tensor activation scales
then spend their 256 levels on every channel rather than on the widest.

Skipped, because the function would change: ReLU6 and other clips between P and C (CMSIS-NN clamps a
whole tensor, so the clamp cannot follow a per-channel scale), tensors read by more than one layer or
that are graph outputs (residual branches), and reshapes that mix the channel into other axes.
Chains of several layers are equalized by sweeping the pairs repeatedly until the scales settle.

`equalize` returns the new graph and, for every activation tensor it rescaled, the per-channel divisors
(equalized = original / divisor along the last, NHWC channel axis), so float values observed on the
original model can be mapped onto the equalized graph (see `ChannelScaled`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quantcore.ir import Activation, Graph, Node, Op, Tensor

Floats = npt.NDArray[np.float64]

_PRODUCERS = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED)
_CHANNELWISE = (Op.MAX_POOL, Op.AVG_POOL, Op.RESHAPE, Op.IDENTITY)
_HOMOGENEOUS = (Activation.NONE, Activation.RELU)
SWEEPS = 20
SETTLED = 1e-4  # largest |log s| of a sweep below which the scales have converged


@dataclass(frozen=True)
class Pair:
    """A producer, its consumer, and the activation tensors between them (producer output first)."""

    producer: str
    consumer: str
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class Equalized:
    graph: Graph
    divisors: Mapping[str, Floats]
    """Per-channel divisors of each rescaled activation tensor (equalized = original / divisor)."""
    pairs: tuple[Pair, ...]

    @property
    def spread(self) -> float:
        """The largest ratio between two channels' divisors in one tensor: how far equalization moves
        channels relative to each other (1.0 = not at all)."""
        return max((float(d.max() / d.min()) for d in self.divisors.values()), default=1.0)


def equalize(graph: Graph) -> Equalized:
    pairs = find_pairs(graph)
    weights = {n.name: _weights(graph, n) for n in graph.nodes if n.op in _PRODUCERS}
    divisors: dict[str, Floats] = {}
    for _ in range(SWEEPS):
        largest = 0.0
        for pair in pairs:
            s = _equalize_pair(weights, pair, graph)
            largest = max(largest, float(np.abs(np.log(s)).max()))
            for name in pair.tensors:
                divisors[name] = divisors.get(name, np.ones_like(s)) * s
        if largest < SETTLED:
            break
    return Equalized(_with_weights(graph, weights), divisors, tuple(pairs))


def find_pairs(graph: Graph) -> list[Pair]:
    pairs = []
    for node in graph.nodes:
        if node.op in _PRODUCERS and node.attr("activation", Activation.NONE) in _HOMOGENEOUS:
            pair = _follow(graph, node)
            if pair is not None:
                pairs.append(pair)
    return pairs


def _follow(graph: Graph, producer: Node) -> Pair | None:
    """The consumer reached from the producer through channel-wise ops, if equalization is legal."""
    channels = graph.tensor(producer.outputs[0]).shape[-1]
    tensors = [producer.outputs[0]]
    while True:
        name = tensors[-1]
        readers = graph.consumers(name)
        if name in graph.outputs or len(readers) != 1:
            return None
        reader = readers[0]
        if _is_consumer(graph, reader, name):
            return Pair(producer.name, reader.name, tuple(tensors))
        if reader.op not in _CHANNELWISE or not _keeps_channels(graph, reader, channels):
            return None
        tensors.append(reader.outputs[0])


def _is_consumer(graph: Graph, node: Node, x: str) -> bool:
    if not node.inputs or node.inputs[0] != x:
        return False
    if node.op is Op.FULLY_CONNECTED:
        return True
    return node.op is Op.CONV2D and node.attr("groups", 1) == 1


def _keeps_channels(graph: Graph, node: Node, channels: int) -> bool:
    """Channel k stays channel k on the last axis (a reshape of N x 1 x 1 x C to N x C does)."""
    shape_in = graph.tensor(node.inputs[0]).shape
    shape_out = graph.tensor(node.outputs[0]).shape
    if node.op is Op.RESHAPE:
        return shape_out[-1] == channels and int(np.prod(shape_in[1:])) == channels
    return shape_out[-1] == channels


# -- weights ----------------------------------------------------------------------------------------
# Producer output channels: axis 0 of conv OHWI and fc (out, in) weights, axis 3 of depthwise
# (1, kh, kw, C*m). Consumer input channels: the last axis of conv OHWI and fc (out, in) weights.


def _weights(graph: Graph, node: Node) -> tuple[Floats, Floats]:
    w = graph.constant(node.inputs[1]).astype(np.float64)
    out_axis = 3 if node.op is Op.DEPTHWISE_CONV2D else 0
    has_bias = len(node.inputs) > 2 and node.inputs[2]
    b = graph.constant(node.inputs[2]).astype(np.float64) if has_bias else np.zeros(w.shape[out_axis])
    return w, b


def _out_axis(graph: Graph, name: str) -> int:
    return 3 if graph.node(name).op is Op.DEPTHWISE_CONV2D else 0


def _range(w: Floats, axis: int) -> Floats:
    others = tuple(a for a in range(w.ndim) if a != axis % w.ndim)
    return np.asarray(np.abs(w).max(axis=others), dtype=np.float64)


def _equalize_pair(weights: dict[str, tuple[Floats, Floats]], pair: Pair, graph: Graph) -> Floats:
    (w1, b1), (w2, b2) = weights[pair.producer], weights[pair.consumer]
    axis1 = _out_axis(graph, pair.producer)
    r1, r2 = _range(w1, axis1), _range(w2, -1)
    # A channel P never writes or C never reads keeps its scale: there is nothing to balance.
    s = np.where((r1 > 0) & (r2 > 0), np.sqrt(r1 / np.where(r2 > 0, r2, 1.0)), 1.0)
    shape = [1] * w1.ndim
    shape[axis1] = -1
    weights[pair.producer] = (w1 / s.reshape(shape), b1 / s)
    weights[pair.consumer] = (w2 * s, b2)
    return s


def _with_weights(graph: Graph, weights: Mapping[str, tuple[Floats, Floats]]) -> Graph:
    tensors: list[Tensor] = []
    nodes = list(graph.nodes)
    for i, node in enumerate(nodes):
        if node.name not in weights:
            continue
        w, b = weights[node.name]
        old_w = graph.tensor(node.inputs[1])
        w_name, b_name = f"{node.name}.weight", f"{node.name}.bias"
        tensors.append(old_w.evolve(name=w_name, data=w.astype(np.float32)))
        tensors.append(Tensor(b_name, (len(b),), data=b.astype(np.float32)))
        nodes[i] = node.evolve(inputs=(node.inputs[0], w_name, b_name, *node.inputs[3:]))
    return graph.with_tensors(*tensors).evolve(nodes=nodes).prune()


class ChannelScaled:
    """A float model's activations mapped onto the equalized graph: each rescaled tensor divided by its
    per-channel divisors. Values come back in the IR layout (channel last) whatever `layout` asks."""

    ir_layout = True

    def __init__(self, inner: object, divisors: Mapping[str, Floats]) -> None:
        self.inner = inner
        self.divisors = {k: v.astype(np.float32) for k, v in divisors.items()}

    def activations(self, feeds: dict[str, np.ndarray], layout: bool = True) -> dict[str, np.ndarray]:
        values = dict(self.inner.activations(feeds, layout=True))  # type: ignore[attr-defined]
        for name, d in self.divisors.items():
            values[name] = values[name] / d
        return values

    def __getattr__(self, name: str) -> object:
        if name == "inner":  # not set yet (unpickling): no delegation, or this would recurse
            raise AttributeError(name)
        return getattr(self.inner, name)
