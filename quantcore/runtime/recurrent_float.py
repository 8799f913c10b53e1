"""The float executor's recurrent layers: TFLite's float SVDF and LSTM, streaming as the int8 ones do.

The float model of an int8 .tflite is its dequantized constants run in float64 (what `fixpoint evaluate`
measures the int8 layers against). Like quantcore/runtime/recurrent_exec.py, a batch of N samples is N
inferences in order from the reset state (zeros: the real value of TFLM's reset int8 state), each one's
state carried into the next - unless the node is not `streaming` (an ONNX LSTM), when each starts from
zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from quantcore.ir import Graph, GraphError, Node

Array = np.ndarray
_FUSED: dict[int, Callable[[Array], Array]] = {
    0: lambda v: v,
    1: lambda v: np.maximum(v, 0.0),
    3: lambda v: np.clip(v, 0.0, 6.0),
}
"""TFLite's fused activations a float SVDF applies (NONE, RELU, RELU6; RELU_N1_TO_1 below)."""


def _sigmoid(v: Array) -> Array:
    return np.asarray(1.0 / (1.0 + np.exp(-v)))


def _relu_n1_to_1(v: Array) -> Array:
    return np.asarray(np.clip(v, -1.0, 1.0))


def _samples(node: Node, x: Array, batch: int) -> int:
    if x.shape[0] % batch:
        raise GraphError(
            f"node {node.name!r}: {x.shape[0]} rows are not a whole number of batches of {batch}"
        )
    return int(x.shape[0]) // batch


def svdf(node: Node, args: list[Any], graph: Graph) -> Array:
    x, wf, wt, bias = args
    rank = int(node.attr("rank"))
    filters, memory = wt.shape
    batch = int(node.attr("state")["shape"][0])
    units = filters // rank
    fused = int(node.attr("fused", 0))
    activation = _FUSED.get(fused, _relu_n1_to_1)
    state = np.zeros((batch, filters, memory))
    outputs = []
    for i in range(_samples(node, x, batch)):
        state = np.concatenate([state[:, :, 1:], (x[i * batch : (i + 1) * batch] @ wf.T)[:, :, None]], axis=2)
        per_filter = np.einsum("bft,ft->bf", state, wt)
        out = per_filter.reshape(batch, units, rank).sum(axis=2) + (0.0 if bias is None else bias)
        outputs.append(activation(out))
    return np.concatenate(outputs)


def svdf_states(node: Node, args: list[Any], graph: Graph) -> Array:
    """The values an SVDF writes into its state (samples, filters): each input's feature projections, the
    intermediate whose range calibration takes for the int16 state."""
    x, wf = args[0], args[1]
    return np.asarray(x @ wf.T)


def lstm(node: Node, args: list[Any], graph: Graph) -> Array:
    hidden = _lstm(node, args, graph)[0]
    return hidden[:, -1] if node.attr("last_step", False) else hidden


def lstm_cell_states(node: Node, args: list[Any], graph: Graph) -> Array:
    """Every step's cell state (samples, steps, hidden): the intermediate whose range calibration takes
    for the int16 cell state."""
    return _lstm(node, args, graph)[1]


def _lstm(node: Node, args: list[Any], graph: Graph) -> tuple[Array, Array]:
    """(hidden states, cell states) of every step, each (samples, steps, hidden)."""
    x, weights_x, weights_h, biases = args[0], args[1:5], args[5:9], args[9:13]
    cell_clip = float(node.attr("cell_clip", 0.0))
    cell_activation = np.tanh if node.attr("cell_activation", "tanh") == "tanh" else _sigmoid
    time_major = bool(node.attr("time_major", False))  # (time, batch, features)
    block, batch, steps = _lstm_block(graph.tensor(node.inputs[0]).shape, time_major)
    hidden_size = weights_h[0].shape[0]
    h, c = np.zeros((batch, hidden_size)), np.zeros((batch, hidden_size))
    streaming = bool(node.attr("streaming", True))
    axis = 0 if time_major else 1  # the steps' axis in the layer's layout
    hidden, cells = [], []
    for i in range(_samples(node, x, block)):
        if not streaming:  # an ONNX LSTM: every inference from the zero state
            h, c = np.zeros((batch, hidden_size)), np.zeros((batch, hidden_size))
        sequence = x[i * block : (i + 1) * block]
        sequence = sequence.transpose(1, 0, 2) if time_major else sequence
        steps_h, steps_c = [], []
        for t in range(steps):
            pre = [
                sequence[:, t] @ wx.T + h @ wh.T + b
                for wx, wh, b in zip(weights_x, weights_h, biases, strict=True)
            ]
            gate_i, gate_f, gate_o = _sigmoid(pre[0]), _sigmoid(pre[1]), _sigmoid(pre[3])
            c = gate_f * c + gate_i * cell_activation(pre[2])
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            h = gate_o * np.tanh(c)
            steps_h.append(h)
            steps_c.append(c)
        hidden.append(np.stack(steps_h, axis=axis))
        cells.append(np.stack(steps_c, axis=axis))
    return np.concatenate(hidden), np.concatenate(cells)


def _lstm_block(shape: tuple[int, ...], time_major: bool) -> tuple[int, int, int]:
    """(rows of one inference, batch, time steps) of an LSTM input; inferences stack along axis 0."""
    return (shape[0], shape[1], shape[0]) if time_major else (shape[0], shape[0], shape[1])
