"""Mixed precision: layers chosen to run with int16 activations on CMSIS-NN's s16 kernels.

A chosen layer reads and writes int16 tensors. Where an int16 layer reads a tensor produced at int8 (or a
graph input), and where an int8 layer reads an int16 one, a REQUANTIZE node converts between the two;
data-movement ops (reshape, transpose, pad) pass int16 through unchanged. The converted copy has the same
real values as its source, so it takes the source's calibrated range.
"""

from __future__ import annotations

from collections.abc import Iterable

from quantcore.ir import DType, Graph, Node, Op
from quantcore.quantize.params import QuantizationError

S16_CAPABLE = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED, Op.ADD, Op.MUL, Op.AVG_POOL, Op.MAX_POOL)
_PASSES_DTYPE = (Op.RESHAPE, Op.TRANSPOSE, Op.PAD)
INT16_OUTPUT_MARGIN = 4.0
"""A graph output carried at int16 takes this many times its calibrated range (both ends): nothing reads
it but the application, so its range only bounds the values it can hold, and 16 bits leave room. On the
Fashion-MNIST benchmark nets (100 calibration images), 0.07-0.44 % of the 10,000 test logits fall
outside the calibrated range, up to 1.7x its end; an int16 output with that range clips them, and 2x
clips none, raising the test output SQNR by 0.2-5.1 dB over 1x. 4x keeps 2x to spare for 0.001 dB
(its step is still 8192 times finer than the calibrated half-range), 8x costs 0.003 dB, 16x 0.03 dB
(bench/fashion_mnist/int16_output.py --margins)."""


def assign_precision(graph: Graph, int16_layers: Iterable[str]) -> tuple[Graph, dict[str, str]]:
    """Mark int16 tensors and insert conversions; returns the graph and {new tensor: its source tensor}."""
    chosen = set(int16_layers)
    names = {n.name for n in graph.nodes}
    for layer in sorted(chosen):
        if layer not in names:
            raise QuantizationError(
                f"--int16 {layer!r}: no layer of that name (layers: {', '.join(sorted(names))})"
            )
        op = graph.node(layer).op
        if op not in S16_CAPABLE:
            raise QuantizationError(
                f"layer {layer!r} ({op.json_name}) has no CMSIS-NN s16 kernel; choose another"
            )
    if not chosen:
        return graph, {}
    wide = _int16_tensors(graph, chosen)
    return _insert_conversions(graph, chosen, wide)


def _int16_tensors(graph: Graph, chosen: set[str]) -> set[str]:
    wide: set[str] = set()
    for node in graph.nodes:
        if node.name in chosen or (node.op in _PASSES_DTYPE and node.inputs[0] in wide):
            wide.add(node.outputs[0])
    return wide


def _insert_conversions(graph: Graph, chosen: set[str], wide: set[str]) -> tuple[Graph, dict[str, str]]:
    sources: dict[str, str] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        wants_wide = node.name in chosen or (node.op in _PASSES_DTYPE and node.inputs[0] in wide)
        inputs = []
        for name in node.inputs:
            if not name or graph.tensor(name).is_constant or (name in wide) == wants_wide:
                inputs.append(name)
                continue
            dtype = DType.INT16 if wants_wide else DType.INT8
            converted = f"{name}@{dtype.label}"
            if converted not in sources:
                graph = graph.with_tensors(graph.tensor(name).evolve(name=converted, dtype=dtype))
                nodes.append(Node(f"{name}.to_{dtype.label}", Op.REQUANTIZE, (name,), (converted,)))
                sources[converted] = name
            inputs.append(converted)
        nodes.append(node.evolve(inputs=tuple(inputs)))
    tensors = {n: (t.evolve(dtype=DType.INT16) if n in wide else t) for n, t in graph.tensors.items()}
    return graph.evolve(nodes=nodes, tensors=tensors), sources
