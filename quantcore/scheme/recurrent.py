"""The parts of the recurrent kernels' integer scheme that the executor and calibration read, below both:
the LSTM's gate order, the key a float LSTM's cell-state range has in a calibration, and the quantized
node's constants in gate order. The kernels' integer parameters themselves are computed in
quantcore.quantize.recurrent (TensorFlow Lite Micro's arithmetic, exactly).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantcore.ir import Graph, Node, Op

GATES = ("input", "forget", "cell", "output")


def cell_state_key(node: Node) -> str:
    """The name a float LSTM's cell-state range (a float SVDF's state range) has in the Calibration (not
    a tensor of the graph)."""
    return f"{node.name}:state" if node.op is Op.SVDF else f"{node.name}:cell_state"


def is_float_lstm(graph: Graph, node: Node) -> bool:
    """An LSTM with float weights (from ONNX or a float .tflite), quantized here rather than by
    TensorFlow."""
    return node.op is Op.LSTM and is_float_recurrent(graph, node)


def is_float_recurrent(graph: Graph, node: Node) -> bool:
    """An LSTM or SVDF with float weights, quantized here rather than by TensorFlow."""
    return node.op in (Op.LSTM, Op.SVDF) and graph.tensor(node.inputs[1]).quant is None


def needs_cell_range(graph: Graph, node: Node) -> bool:
    """Calibration must range this node's cell state, or an SVDF's state (it has no imported scale)."""
    return is_float_recurrent(graph, node)


def lstm_constants(
    node: Node, graph: Graph
) -> tuple[Sequence[np.ndarray], Sequence[np.ndarray], Sequence[np.ndarray]]:
    """The quantized node's (input weights, recurrent weights, biases), each in GATES order."""
    arrays = [graph.constant(name) for name in node.inputs[1:13]]
    return arrays[0:4], arrays[4:8], arrays[8:12]


__all__ = [
    "GATES",
    "cell_state_key",
    "is_float_lstm",
    "is_float_recurrent",
    "lstm_constants",
    "needs_cell_range",
]
