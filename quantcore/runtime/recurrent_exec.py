"""The int8 executor's recurrent layers: SVDF and LSTM through the bit-exact CMSIS-NN kernels, streaming.

A recurrent layer keeps its state from one inference to the next (TFLM's variable tensors, the firmware's
persistent state buffers). The executor runs a batch of N samples as N inferences in order, from the
reset state, each one's state carried into the next - what TFLM's interpreter computes for N invokes
after a reset, and what the firmware computes for N calls after start-up.

Reset state: TFLM resets an int8 variable tensor to its zero point and any other to zeros. An SVDF state
has zero point 0 (the importer refuses another: arm_svdf_s8 has no state offset), so zeros; an LSTM's
int8 hidden state starts at its zero point, its int16 cell state at 0. An LSTM that is not `streaming`
(imported from ONNX, whose initial state is zeros) makes CMSIS-NN's stateless call for each inference:
no hidden state (the first step skips the recurrent product), the cell state zeroed by the kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantcore.ir import Graph, GraphError, Node
from quantcore.kernels.lstm import (
    Activation,
    LstmGate,
    LstmParams,
    effective_bias_s8,
    effective_bias_s64,
    lstm_unidirectional_s8,
    lstm_unidirectional_s16,
)
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import SvdfParams, svdf_s8, svdf_state_s16_s8
from quantcore.scheme.recurrent import GATES, lstm_constants

Array = np.ndarray


def _streams(node: Node, x: Array, block: int) -> int:
    """How many inferences the rows of `x` are (`block` rows each: the layer's first axis)."""
    if x.shape[0] % block:
        raise GraphError(
            f"node {node.name!r}: {x.shape[0]} rows are not a whole number of inferences of {block} rows"
        )
    return int(x.shape[0]) // block


def svdf(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    x = args[0]
    wf, wt = graph.constant(node.inputs[1]), graph.constant(node.inputs[2])
    bias = graph.constant(node.inputs[3]) if node.inputs[3] else None
    params = SvdfParams(
        rank=p["rank"],
        input_offset=p["input_offset"],
        output_offset=p["output_offset"],
        input_multiplier=p["input_multiplier"],
        input_shift=p["input_shift"],
        output_multiplier=p["output_multiplier"],
        output_shift=p["output_shift"],
        input_activation=tuple(p["input_activation"]),
        output_activation=tuple(p["output_activation"]),
    )
    kernel = svdf_s8 if node.attr("kernel") == "arm_svdf_s8" else svdf_state_s16_s8
    batch = out[0]
    state = np.zeros((batch, wf.shape[0], wt.shape[1]), wt.dtype)
    outputs = []
    for i in range(_streams(node, x, batch)):
        result = kernel(x[i * batch : (i + 1) * batch], state, wf, wt, bias, params, rounding=r)
        state = result.state
        outputs.append(result.output)
    return np.concatenate(outputs)


def lstm_params(graph: Graph, node: Node, p: dict[str, Any]) -> LstmParams:
    """cmsis_nn_lstm_params of a quantized LSTM node (effective biases as CMSIS-NN's TFLM glue makes them:
    int32 for arm_lstm_unidirectional_s8, int64 for _s16)."""
    inputs, hidden, biases = lstm_constants(node, graph)
    cell = Activation.TANH if p["cell_activation"] == "tanh" else Activation.SIGMOID
    effective_bias = effective_bias_s64 if _wide(node) else effective_bias_s8
    gates = {}
    for gate, wx, wh, b in zip(GATES, inputs, hidden, biases, strict=True):
        q = p["gates"][gate]
        gates[gate] = LstmGate(
            input_weights=wx,
            input_effective_bias=effective_bias(wx, p["input_offset"], b),
            input_multiplier=q["input_multiplier"],
            input_shift=q["input_shift"],
            hidden_weights=wh,
            hidden_effective_bias=effective_bias(wh, p["hidden_offset"]),
            hidden_multiplier=q["hidden_multiplier"],
            hidden_shift=q["hidden_shift"],
            activation=cell if gate == "cell" else Activation.SIGMOID,
        )
    return LstmParams(
        time_major=p["time_major"],
        forget_to_cell_multiplier=p["forget_to_cell_multiplier"],
        forget_to_cell_shift=p["forget_to_cell_shift"],
        input_to_cell_multiplier=p["input_to_cell_multiplier"],
        input_to_cell_shift=p["input_to_cell_shift"],
        cell_clip=p["cell_clip"],
        cell_scale_power=p["cell_scale_power"],
        output_multiplier=p["output_multiplier"],
        output_shift=p["output_shift"],
        output_offset=p["output_offset"],
        forget_gate=gates["forget"],
        input_gate=gates["input"],
        cell_gate=gates["cell"],
        output_gate=gates["output"],
    )


def _wide(node: Node) -> bool:
    """arm_lstm_unidirectional_s16: int16 input and hidden state (TensorFlow's 16x8 LSTM)."""
    return str(node.attr("kernel")) == "arm_lstm_unidirectional_s16"


def lstm(
    graph: Graph, node: Node, args: list[Any], p: dict[str, Any], out: tuple[int, ...], r: Rounding
) -> Array:
    x = args[0]
    params = lstm_params(graph, node, p)
    # One inference is the layer's whole (batch, time, features) - time-major: (time, batch, features) -
    # block; the inferences stack along the first axis either way. With last_step (ONNX's Y_h, batch-major
    # only) the output is (batch, hidden).
    block, hidden_size = out[0], out[-1]
    batch = out[1] if params.time_major else out[0]
    # The reset state: TFLM sets the int8 hidden state to its zero point, the int16 cell state to 0 (a
    # 16x8 LSTM's int16 hidden state too: its zero point is 0).
    wide = _wide(node)
    hidden = np.full((batch, hidden_size), p["output_offset"], np.int16 if wide else np.int8)
    cell = np.zeros((batch, hidden_size), np.int16)
    kernel = lstm_unidirectional_s16 if wide else lstm_unidirectional_s8
    streaming = bool(node.attr("streaming", True))
    last_step = bool(node.attr("last_step", False))
    outputs = []
    for i in range(_streams(node, x, block)):
        rows = x[i * block : (i + 1) * block]
        if not streaming:  # the C's stateless call: no hidden state, the cell state zeroed at each call
            stateless = kernel(rows, params, rounding=r)
            outputs.append(stateless.output[:, -1] if last_step else stateless.output)
            continue
        result = kernel(rows, params, hidden_state=hidden, cell_state=cell, rounding=r)
        assert result.hidden_state is not None
        hidden, cell = result.hidden_state, result.cell_state
        outputs.append(result.output)
    return np.concatenate(outputs)
