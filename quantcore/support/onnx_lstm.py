"""What an ONNX LSTM node must be for CMSIS-NN's arm_lstm_unidirectional_s8 to run it.

The kernel is TensorFlow Lite's integer LSTM: one direction (forward), the standard cell (sigmoid gates,
tanh cell and output), no peepholes, no coupled input/forget gate, every sequence full length, and each
inference starting from the zero state (ONNX's absent initial_h/initial_c). Each predicate's docstring is
the rule shown when a node breaks it; its `about` sentence says what the node has.
"""

from __future__ import annotations

import numpy as np

from quantcore.display import quoted, shown
from quantcore.support.table import Constraint, OnnxConstraint, OnnxNode, about

DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")
_SEQUENCE_LENS, _INITIAL_H, _INITIAL_C, _PEEPHOLES = 4, 5, 6, 7


def _direction(node: OnnxNode) -> str:
    return f"its direction is {quoted(_text(node.attr('direction', 'forward')))}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@about(_direction)
def lstm_forward(node: OnnxNode) -> bool:
    """The LSTM must run forward (direction "forward"): CMSIS-NN's arm_lstm_unidirectional_s8 has one
    direction; export a unidirectional layer (torch.nn.LSTM(bidirectional=False)), or flip the sequence
    before the layer for a reverse one."""
    return _text(node.attr("direction", "forward")) == "forward"


@about(lambda node: f"its activations are {[_text(a) for a in node.attr('activations')]}")
def lstm_default_activations(node: OnnxNode) -> bool:
    """The gates must use ONNX's default activations (Sigmoid, Tanh, Tanh, no alpha/beta): CMSIS-NN's
    LSTM computes the gates with its int16 sigmoid and the cell and output with its int16 tanh."""
    activations = node.attr("activations")
    if node.attr("activation_alpha") is not None or node.attr("activation_beta") is not None:
        return False
    return activations is None or tuple(_text(a) for a in activations) == DEFAULT_ACTIVATIONS


@about(lambda node: f"its clip attribute is {shown(repr(node.attr('clip')))}")
def lstm_no_clip(node: OnnxNode) -> bool:
    """The LSTM must have no clip attribute: ONNX clips every gate's input, CMSIS-NN's LSTM clips only
    the cell state (TFLite's cell_clip), so the two compute different values; export without clipping."""
    return node.attr("clip") is None


@about(lambda node: f"its input_forget attribute is {node.attr('input_forget')}")
def lstm_separate_gates(node: OnnxNode) -> bool:
    """The input and forget gates must be separate (input_forget = 0): CMSIS-NN's LSTM computes all four
    gates from their own weights."""
    return int(node.attr("input_forget", 0)) == 0


def _computed(node: OnnxNode) -> str:
    names = [quoted(node.inputs[i]) for i in range(1, 4) if node.has_input(i) and not node.is_const(i)]
    return f"its weights or bias {', '.join(names)} are computed at run time, not constants"


@about(_computed)
def lstm_weights_constant(node: OnnxNode) -> bool:
    """W, R and B must be constants (initializers): the kernel reads int8 weights and int32 biases baked
    into Flash."""
    return all(node.is_const(i) for i in range(1, 4) if node.has_input(i))


@about(lambda node: f"it has peephole weights {quoted(node.inputs[_PEEPHOLES])}")
def lstm_no_peepholes(node: OnnxNode) -> bool:
    """The LSTM must have no peephole weights P (or all zeros): CMSIS-NN's arm_lstm_unidirectional_s8 has
    no peephole connections; train and export without them."""
    if not node.has_input(_PEEPHOLES):
        return True
    value = node.const(_PEEPHOLES)
    return value is not None and not np.any(value)


def _initial_state(node: OnnxNode) -> str:
    given = [quoted(node.inputs[i]) for i in (_INITIAL_H, _INITIAL_C) if _nonzero_state(node, i)]
    return f"its initial state {', '.join(given)} is not a constant of zeros"


def _nonzero_state(node: OnnxNode, index: int) -> bool:
    if not node.has_input(index):
        return False
    value = node.const(index)
    return value is None or bool(np.any(value))


@about(_initial_state)
def lstm_zero_initial_state(node: OnnxNode) -> bool:
    """initial_h and initial_c must be absent or constant zeros: each inference of the generated code
    starts the LSTM from the zero state (arm_lstm_unidirectional_s8 called without a hidden state zeroes
    its cell state); a state carried in from outside the model has no place in that call."""
    return not (_nonzero_state(node, _INITIAL_H) or _nonzero_state(node, _INITIAL_C))


def _sequence_lens(node: OnnxNode) -> str:
    value = node.const(_SEQUENCE_LENS)
    if value is None:
        return f"its sequence_lens {quoted(node.inputs[_SEQUENCE_LENS])} is computed at run time"
    return f"its sequence_lens is {np.asarray(value).reshape(-1).tolist()}"


@about(_sequence_lens)
def lstm_full_sequences(node: OnnxNode) -> bool:
    """sequence_lens must be absent or a constant equal to the sequence length for every batch row: the
    kernel runs every sequence over all its time steps."""
    if not node.has_input(_SEQUENCE_LENS):
        return True
    value, shape = node.const(_SEQUENCE_LENS), node.input_shapes[0]
    if value is None or shape is None or len(shape) != 3:
        return False
    steps = shape[1] if int(node.attr("layout", 0)) == 1 else shape[0]
    return bool(np.all(np.asarray(value) == steps))


def _outputs(node: OnnxNode) -> str:
    used = [quoted(o) for o, u in zip(node.outputs, node.outputs_used, strict=False) if u]
    return f"the graph reads its output(s) {', '.join(used)}" if used else "none of its outputs is read"


@about(_outputs)
def lstm_sequence_output(node: OnnxNode) -> bool:
    """The graph must read either the output sequence Y or the final hidden state Y_h (h_n), not both,
    and never the final cell state Y_c (c_n): the kernel writes every step's hidden state, of which Y_h
    is the last (the generated code copies it out), and keeps no cell state to return."""
    used = (*(node.outputs_used or (True,)), False, False)
    return used[0] != used[1] and not used[2]


@about(lambda node: f"its layout attribute is {node.attr('layout')}")
def lstm_known_layout(node: OnnxNode) -> bool:
    """layout must be 0 (sequence first) or 1 (batch first)."""
    return int(node.attr("layout", 0)) in (0, 1)


@about(lambda node: f"its input is {node.rank(0)}-D" if node.rank(0) else "its input's shape is unknown")
def lstm_input_3d(node: OnnxNode) -> bool:
    """The LSTM's input X must be 3-D with a static shape (sequence, batch, input features), or (batch,
    sequence, input features) with layout 1."""
    return node.rank(0) == 3


CONSTRAINTS: tuple[OnnxConstraint, ...] = tuple(
    Constraint(check)
    for check in (
        lstm_input_3d,
        lstm_known_layout,
        lstm_forward,
        lstm_weights_constant,
        lstm_default_activations,
        lstm_no_clip,
        lstm_separate_gates,
        lstm_no_peepholes,
        lstm_zero_initial_state,
        lstm_full_sequences,
        lstm_sequence_output,
    )
)
"""In the order a message names the first broken one."""
NOTES = (
    "Forward only; ONNX's gates (i, o, f, c) are split into the four gates of TFLite's LSTM (i, f, c, o),"
    " B's two halves summed; each inference starts from the zero state. Y in either layout (a following"
    " Squeeze of the direction axis, or torch.onnx.export's Transpose + Reshape, is taken into the"
    " layer), or Y_h alone, or Y read only by a Gather of its last step (y[:, -1]): the layer's output"
    " is then the last step."
)
