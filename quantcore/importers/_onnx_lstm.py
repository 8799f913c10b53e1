"""ONNX LSTM -> the IR's LSTM (TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM form, batch-major), forward only.

ONNX packs the gates as (i, o, f, c) in W (1, 4H, I), R (1, 4H, H) and B (1, 8H) = [Wb, Rb]; the IR takes
one matrix per gate in TFLite's order (i, f, c, o) and one bias per gate, Wb + Rb (summed in float32: the
kernel adds one bias per gate). What the kernel cannot run was refused by the support table
(quantcore/support/onnx_lstm.py) before this handler runs.

Y is (seq, 1, batch, H) (layout 0) or (batch, seq, 1, H) (layout 1). Exporters follow it with a Squeeze
of the direction axis, or torch.onnx.export's Transpose + Reshape; those order-preserving nodes are taken
into the layer, so the IR has no 4-D tensor here (one would be taken for an NCHW image by the layout
pass). The layer's input and output are moved between ONNX's layout and the IR's batch-major one by a
RESHAPE where only size-1 axes move (batch 1), by a TRANSPOSE otherwise.

Each inference starts from the zero state (initial_h/initial_c absent or zeros): the node's `streaming`
attribute is False, so the executors and the generated code reset the state for every sample. A graph that
reads Y_h (torch's h_n) instead of Y gets the layer with `last_step`: its output is the last step's
hidden state (batch, H), reshaped into Y_h; so does one whose Y is only read, through order-keeping
nodes, by a Gather of its last step (torch's y[:, -1]), the Gather's output being the layer's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from quantcore.display import quoted
from quantcore.importers._builder import Builder
from quantcore.ir import Op
from quantcore.support import OnnxNode

ONNX_GATE = {"input": 0, "output": 1, "forget": 2, "cell": 3}
"""Each gate's block in ONNX's packed W, R and B."""
IR_GATES = ("input", "forget", "cell", "output")
_ORDER_KEEPING = ("Squeeze", "Reshape", "Flatten", "Unsqueeze", "Identity")


def lstm(b: Builder, n: OnnxNode) -> None:
    layout = int(n.attr("layout", 0))
    shape = b.shape(n.inputs[0], n.name)
    steps, batch, size = (shape[1], shape[0], shape[2]) if layout else shape
    if layout == 0 and batch != 1:
        raise b.error(
            f"is a sequence-first LSTM (layout 0) over a batch of {batch}; Fixpoint stacks the samples of"
            " a run along the first axis, which here is time - export it with batch 1 or batch first"
            " (torch.nn.LSTM(batch_first=True))",
            n.name,
        )
    w, r, bias = _packed(b, n, size)
    hidden = r.shape[1]
    x = _batch_major_input(b, n, layout, (batch, steps, size))
    weights_x = [_gate_constant(b, n.inputs[1], g, "input_weights", w, hidden) for g in IR_GATES]
    weights_h = [_gate_constant(b, n.inputs[2], g, "recurrent_weights", r, hidden) for g in IR_GATES]
    summed = bias[: 4 * hidden] + bias[4 * hidden :]
    source = n.inputs[3] if n.has_input(3) else n.name
    biases = [_gate_constant(b, source, g, "bias", summed, hidden) for g in IR_GATES]
    last_step = len(n.outputs_used) > 1 and n.outputs_used[1]  # Y_h read, Y not (the support table)
    picked = None if last_step else _last_step_pick(b, n.outputs[0], (batch, steps, hidden))
    if last_step:
        y, moves = _final_hidden_output(b, n, (batch, hidden))
    elif picked is not None:  # y[:, -1]: the same last step, read from Y
        y, moves, last_step = b.output(picked, n.name), (lambda: None), True
    else:
        wanted = (steps, batch, hidden) if layout == 0 else (batch, steps, hidden)
        target = _absorbed_output(b, n.outputs[0], wanted)
        y, moves = _lstm_output(b, n, target, layout, (batch, steps, hidden))
    attrs = {
        "time_major": False,
        "cell_clip": 0.0,
        "cell_activation": "tanh",
        "streaming": False,
        "last_step": last_step,
    }
    b.emit(n.name, Op.LSTM, (x, *weights_x, *weights_h, *biases), (y,), attrs)
    moves()


def _packed(b: Builder, n: OnnxNode, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W (4H, I), R (4H, H) and B (8H,) of the one direction, checked against hidden_size."""
    w, r = b.float_data(n.inputs[1], n.name), b.float_data(n.inputs[2], n.name)
    hidden = int(n.attr("hidden_size", r.shape[-1]))
    bias = b.float_data(n.inputs[3], n.name) if n.has_input(3) else np.zeros((1, 8 * hidden), np.float32)
    expected = {"W": (1, 4 * hidden, size), "R": (1, 4 * hidden, hidden), "B": (1, 8 * hidden)}
    for what, value in zip(expected, (w, r, bias), strict=True):
        if value.shape != expected[what]:
            raise b.error(
                f"its {what} has shape {value.shape}; a forward LSTM of hidden_size {hidden} on {size}"
                f" input features has {expected[what]} - re-export the model",
                n.name,
            )
    return w[0], r[0], bias[0]


def _gate_constant(b: Builder, source: str, gate: str, role: str, packed: np.ndarray, hidden: int) -> str:
    block = ONNX_GATE[gate]
    return b.derived(source, f"{gate}_{role}", packed[block * hidden : (block + 1) * hidden], None)


def _batch_major_input(b: Builder, n: OnnxNode, layout: int, shape: tuple[int, int, int]) -> str:
    x = b.activation(n.inputs[0], n.name)
    if layout == 1:
        return x
    if not any(x in node.outputs for node in b.nodes):
        raise b.error(
            f"reads the model input {quoted(n.inputs[0])} sequence first (layout 0: time, batch,"
            " features); Fixpoint takes a model's inputs batch first (samples stack along the first"
            " axis) - export with torch.nn.LSTM(batch_first=True), or transpose the input in the model",
            n.name,
        )
    moved = b.synthesize(n.name, "batch_major", shape)
    move(b, f"{n.name}:to_batch_major", x, moved, (1, 0, 2))
    return moved


def _lstm_output(
    b: Builder, n: OnnxNode, target: str | None, layout: int, shape: tuple[int, int, int]
) -> tuple[str, Callable[[], None]]:
    """The LSTM's own (batch, seq, H) output, and what moves it into `target` or into ONNX's 4-D Y (to be
    emitted after the layer)."""
    if target is not None and layout == 1:
        return b.output(target, n.name), lambda: None
    y = b.synthesize(n.name, "batch_major_output", shape)
    if target is not None:
        sequence_major = b.output(target, n.name)
        return y, lambda: move(b, f"{n.name}:to_sequence_major", y, sequence_major, (1, 0, 2))
    onnx_y = b.output(n.outputs[0], n.name)
    ordered = y
    if layout == 0:
        ordered = b.synthesize(n.name, "sequence_major_output", (shape[1], shape[0], shape[2]))

    def moves() -> None:
        if layout == 0:
            move(b, f"{n.name}:to_sequence_major", y, ordered, (1, 0, 2))
        attrs = {"shape": b.tensors[onnx_y].shape}
        b.emit(f"{n.name}:direction_axis", Op.RESHAPE, (ordered,), (onnx_y,), attrs)

    return y, moves


def _final_hidden_output(b: Builder, n: OnnxNode, shape: tuple[int, int]) -> tuple[str, Callable[[], None]]:
    """The layer's (batch, H) last step, reshaped into Y_h ((1, batch, H), or (batch, 1, H) in layout 1:
    the same bytes)."""
    y = b.synthesize(n.name, "last_step", shape)
    y_h = b.output(n.outputs[1], n.name)

    def moves() -> None:
        b.emit(f"{n.name}:direction_axis", Op.RESHAPE, (y,), (y_h,), {"shape": b.tensors[y_h].shape})

    return y, moves


def move(b: Builder, name: str, x: str, y: str, perm: tuple[int, ...]) -> None:
    """TRANSPOSE x into y, or RESHAPE when the permutation moves only axes of size 1 (same bytes)."""
    shape = b.tensors[x].shape
    if _keeps_order(shape, perm):
        b.emit(name, Op.RESHAPE, (x,), (y,), {"shape": b.tensors[y].shape})
    else:
        b.emit(name, Op.TRANSPOSE, (x,), (y,), {"perm": perm})


def _keeps_order(shape: tuple[int, ...], perm: tuple[int, ...]) -> bool:
    """Whether transposing by `perm` leaves the elements in memory order: the axes longer than 1 keep
    their relative order."""
    moved = [axis for axis in perm if shape[axis] != 1]
    return moved == sorted(moved)


def _last_step_pick(b: Builder, y: str, shape: tuple[int, int, int]) -> str | None:
    """The output of a Gather that picks Y's last step (torch's y[:, -1]) at the end of a chain of
    order-keeping nodes from Y, each the only reader of the one before; those nodes and the Gather are
    skipped. The Gather must read the sequence in memory order: (batch, seq, H) along axis 1, or with a
    batch of 1 (seq, 1, H) along axis 0."""
    chain: list[onnx.NodeProto] = []
    value = y
    while value not in b.graph_outputs and len(b.readers.get(value, [])) == 1:
        reader = b.readers[value][0]
        if reader.op_type == "Gather" and _picks_last_step(b, reader, value, shape):
            b.skip.update(node.name for node in (*chain, reader))
            return str(reader.output[0])
        if not _order_keeping(b, reader, value):
            return None
        chain.append(reader)
        value = str(reader.output[0])
    return None


def _picks_last_step(b: Builder, gather: onnx.NodeProto, value: str, shape: tuple[int, int, int]) -> bool:
    batch, steps, hidden = shape
    axis = next((int(a.i) for a in gather.attribute if a.name == "axis"), 0)
    index = b.consts.get(gather.input[1]) if len(gather.input) > 1 else None
    read = b.known_shape(value)
    sequence = (read == (batch, steps, hidden) and axis == 1) or (read == (steps, 1, hidden) and axis == 0)
    last = index is not None and np.ndim(index) == 0 and int(index) in (-1, steps - 1)
    picked = b.known_shape(str(gather.output[0]))
    return bool(gather.name) and sequence and last and picked == (batch, hidden)


def _absorbed_output(b: Builder, y: str, wanted: tuple[int, int, int]) -> str | None:
    """The 3-D tensor of shape `wanted` that a chain of order-keeping nodes (each the only reader of the
    one before) makes of Y; those nodes are skipped. None when Y is read otherwise."""
    chain: list[onnx.NodeProto] = []
    value = y
    while True:
        readers = b.readers.get(value, [])
        if value in b.graph_outputs or len(readers) != 1 or not _order_keeping(b, readers[0], value):
            return None
        chain.append(readers[0])
        value = str(readers[0].output[0])
        if b.known_shape(value) == wanted:
            b.skip.update(node.name for node in chain)
            return value


def _order_keeping(b: Builder, node: onnx.NodeProto, value: str) -> bool:
    if not node.name or node.domain not in ("", "ai.onnx") or node.name in b.skip or len(node.output) != 1:
        return False
    if node.op_type in _ORDER_KEEPING:
        return True
    if node.op_type != "Transpose":
        return False
    shape = b.known_shape(value)
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    return shape is not None and perm is not None and _keeps_order(shape, tuple(perm))
