"""TFLite's recurrent operators -> IR nodes: SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM of an int8 model, and of
a float model (float constants; calibration and quantization give them TFLite's integer scheme).

Their constants keep TensorFlow's integers and scales (float64 values q * scale, which the quantizer turns
back into q exactly: quantcore/quantize/recurrent.py), and their state tensors - TFLite's variable
tensors, which TFLM keeps from one invoke to the next - become node attributes describing the persistent
state (dtype, shape, scale, zero point), not graph tensors: no layer writes them, the layer itself keeps
them. What CMSIS-NN's kernels cannot run is refused before translation (`refusal`), naming the operator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from quantcore.display import quoted
from quantcore.importers._tflite_ops import _float_constant, _input, _output, _State
from quantcore.importers._tflite_read import TflModel, TflOperator
from quantcore.ir import DType, Node, Op, QuantParams, Tensor

LSTM_GATES = ("input", "forget", "cell", "output")
"""The IR's order of the LSTM gates (TFLite's tensor order)."""
_LSTM_INPUT_WEIGHTS = (1, 2, 3, 4)
_LSTM_RECURRENT_WEIGHTS = (5, 6, 7, 8)
_LSTM_BIASES = (12, 13, 14, 15)
_LSTM_HIDDEN, _LSTM_CELL = 18, 19
_LSTM_UNSUPPORTED = {
    (9, 10, 11): "peephole weights (CMSIS-NN's arm_lstm_unidirectional_s8 has no peephole connections)",
    (16, 17): "a projection layer (CMSIS-NN's arm_lstm_unidirectional_s8 has none)",
    (20, 21, 22, 23): "layer normalization (CMSIS-NN's arm_lstm_unidirectional_s8 has none)",
}
_CELL_ACTIVATIONS = {4: "tanh", 6: "sigmoid"}
"""TFLite's fused activation of an LSTM = its cell gate's non-linearity (TFLM takes TANH or SIGMOID)."""
_TYPES = {"INT8": DType.INT8, "INT16": DType.INT16, "INT32": DType.INT32, "INT64": DType.INT64}
_SVDF_STATE = 4


def refusal(op: TflOperator) -> str | None:
    """Why CMSIS-NN's kernels cannot run this LSTM as TFLite wrote it (None: they can)."""
    if op.op != "UNIDIRECTIONAL_SEQUENCE_LSTM":
        return None
    inputs = list(op.inputs) + [-1] * (24 - len(op.inputs))
    if len(op.inputs) != 24:
        return f"it has {len(op.inputs)} inputs; TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM has 24"
    if inputs[1] < 0 or inputs[5] < 0:
        return (
            "it couples the input and forget gates (CIFG: no input gate weights); CMSIS-NN's kernel"
            " needs all four gates"
        )
    for positions, what in _LSTM_UNSUPPORTED.items():
        if any(inputs[p] >= 0 for p in positions):
            return f"it has {what}"
    activation = int(op.options.get("FusedActivationFunction", 4))
    if activation not in _CELL_ACTIVATIONS:
        return f"its cell activation is {activation}; TFLM and CMSIS-NN take TANH or SIGMOID"
    if float(op.options.get("ProjClip", 0.0)):
        return "it has a projection clip (CMSIS-NN's kernel has no projection)"
    return None


def state_inputs(op: TflOperator) -> tuple[int, ...]:
    """The tensors of a recurrent operator that may be int16 in an int8 model: its persistent state and,
    for SVDF, its time weights (arm_svdf_state_s16_s8)."""
    if op.op == "SVDF" and len(op.inputs) > _SVDF_STATE:
        return (op.inputs[2], op.inputs[_SVDF_STATE])
    if op.op == "UNIDIRECTIONAL_SEQUENCE_LSTM" and len(op.inputs) > _LSTM_CELL:
        return (op.inputs[_LSTM_HIDDEN], op.inputs[_LSTM_CELL])  # the hidden state is int16 in a 16x8 LSTM
    return ()


def int16_edges(model: TflModel) -> set[int]:
    """The int16 input and output of a 16x8 LSTM (int16 activations, int8 weights: TensorFlow's 16x8
    quantization, arm_lstm_unidirectional_s16) that are the model's input and output - the only int16
    activations Fixpoint takes at a recurrent layer; any other is refused as a 16x8 model."""
    edges: set[int] = set()
    for op in model.operators:
        if op.op != "UNIDIRECTIONAL_SEQUENCE_LSTM" or not op.inputs or not op.outputs:
            continue
        x, y = op.inputs[0], op.outputs[0]
        if model.tensors[x].dtype == "INT16" and x in model.inputs and y in model.outputs:
            edges.update((x, y))
    return edges


# -- SVDF ---------------------------------------------------------------------------------------------


def svdf(state: _State, op: TflOperator) -> None:
    if not state.quantized:
        _float_svdf(state, op)
        return
    x = _input(state, op, 0)
    y = _output(state, op)
    rank = int(op.options.get("Rank", 1))
    features = _constant(state, op, 1, ("INT8",), "feature weights")
    memory = _constant(state, op, 2, ("INT8", "INT16"), "time weights")
    filters, depth = state.tensors[features].shape
    if depth != state.tensors[x].shape[-1] or state.tensors[memory].shape[0] != filters:
        raise state.error(op, f"has feature weights {(filters, depth)} for input {state.tensors[x].shape}")
    if rank < 1 or filters % rank:
        raise state.error(op, f"has rank {rank} for {filters} filters; the rank must divide them")
    units = filters // rank
    bias = _bias(state, op, 3, units)
    batch = state.tensors[x].shape[0]
    steps = state.tensors[memory].shape[1]
    variable = _state(state, op, _SVDF_STATE, (batch, filters * steps), "activation state")
    time_quant = state.tensors[memory].quant
    assert time_quant is not None  # _constant gave it one
    if variable["dtype"] != time_quant.dtype.label:
        raise state.error(
            op,
            f"its time weights are {time_quant.dtype.label} and its state {variable['dtype']}; TFLM and"
            " CMSIS-NN take both int8 (arm_svdf_s8) or both int16 (arm_svdf_state_s16_s8)",
        )
    if variable["dtype"] == DType.INT8.label and variable["zero_point"] != 0:
        raise state.error(
            op,
            f"its int8 activation state has zero point {variable['zero_point']}: TFLM's SVDF stores zero"
            " point + value in the int8 state (wrapping when that leaves int8) and subtracts the zero point"
            " again, which arm_svdf_s8 - it has no state offset - cannot reproduce bit for bit; convert with"
            " int16 state (TFLM's keyword_scrambled.tflite form, arm_svdf_state_s16_s8) or a state zero"
            " point of 0",
        )
    if state.tensors[y].shape != (batch, units):
        raise state.error(
            op, f"writes {state.tensors[y].shape}; an SVDF of {units} units gives {(batch, units)}"
        )
    activation = int(op.options.get("FusedActivationFunction", 0))
    state.nodes.append(
        Node(
            y,
            Op.SVDF,
            (x, features, memory, bias),
            (y,),
            {"rank": rank, "state": variable, "fused": activation},
        )
    )


def _float_svdf(state: _State, op: TflOperator) -> None:
    """A float32 SVDF as the IR's float SVDF (float constants, a state of no scale yet): calibration ranges
    its state and quantization gives it TFLite's integer SVDF (quantcore/quantize/recurrent.py,
    arm_svdf_state_s16_s8). The state is TFLite's variable tensor: kept from one invoke to the next."""
    x = _input(state, op, 0)
    y = _output(state, op)
    rank = int(op.options.get("Rank", 1))
    features = _float_weights(state, op, 1, "feature weights")
    memory = _float_weights(state, op, 2, "time weights")
    shape = state.tensors[x].shape
    if len(state.tensors[features].shape) != 2 or len(state.tensors[memory].shape) != 2 or len(shape) != 2:
        raise state.error(
            op,
            f"has feature weights {state.tensors[features].shape} and time weights"
            f" {state.tensors[memory].shape} for input {shape}; TFLite's SVDF takes (batch, features),"
            " (filters, features) and (filters, memory)",
        )
    filters, depth = state.tensors[features].shape
    if depth != shape[-1] or state.tensors[memory].shape[0] != filters:
        raise state.error(op, f"has feature weights {(filters, depth)} for input {shape}")
    if rank < 1 or filters % rank:
        raise state.error(op, f"has rank {rank} for {filters} filters; the rank must divide them")
    units, batch, steps = filters // rank, shape[0], state.tensors[memory].shape[1]
    bias = ""
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        bias = _float_weights(state, op, 3, "bias")
        if state.tensors[bias].shape != (units,):
            raise state.error(op, f"its bias has shape {state.tensors[bias].shape}; expected ({units},)")
    variable = _float_state(state, op, _SVDF_STATE, (batch, filters * steps), "activation state")
    if state.tensors[y].shape != (batch, units):
        raise state.error(
            op, f"writes {state.tensors[y].shape}; an SVDF of {units} units gives {(batch, units)}"
        )
    attrs = {
        "rank": rank,
        "state": {"shape": [batch, filters * steps], "tensor": variable},
        "fused": int(op.options.get("FusedActivationFunction", 0)),
    }
    state.nodes.append(Node(y, Op.SVDF, (x, features, memory, bias), (y,), attrs))


# -- LSTM ---------------------------------------------------------------------------------------------


def lstm(state: _State, op: TflOperator) -> None:
    if not state.quantized:
        _float_lstm(state, op)
        return
    x, y, shape, batch = _lstm_input(state, op)
    # 16x8 (arm_lstm_unidirectional_s16): int16 input, output and hidden state, int64 biases
    wide = state.tensors[x].dtype is DType.INT16
    activations, bias_types = (("INT16",), ("INT64",)) if wide else (("INT8",), ("INT32",))
    inputs = [_constant(state, op, p, ("INT8",), "input weights") for p in _LSTM_INPUT_WEIGHTS]
    recurrent = [_constant(state, op, p, ("INT8",), "recurrent weights") for p in _LSTM_RECURRENT_WEIGHTS]
    hidden = _lstm_hidden(state, op, inputs, recurrent, shape[2])
    biases = [_bias(state, op, p, hidden, bias_types) for p in _LSTM_BIASES]
    if "" in biases:
        raise state.error(op, "has a gate without bias; TFLM's integer LSTM reads all four")
    hidden_state = _state(state, op, _LSTM_HIDDEN, (batch, hidden), "hidden state", activations)
    cell_state = _state(state, op, _LSTM_CELL, (batch, hidden), "cell state", ("INT16",))
    _same_as_hidden(state, op, y, hidden_state)
    if wide and hidden_state["zero_point"] != 0:
        raise state.error(
            op,
            f"its int16 hidden state has zero point {hidden_state['zero_point']}; TensorFlow's 16x8 scheme"
            " (and the firmware's reset of the state) takes int16 activations of zero point 0",
        )
    states = {"hidden_state": hidden_state, "cell_state": cell_state}
    _lstm_node(state, op, y, (x, *inputs, *recurrent, *biases), hidden, states)


def _float_lstm(state: _State, op: TflOperator) -> None:
    """A float32 LSTM as the IR's float LSTM (the ONNX importer's form: float constants, no state scales),
    which calibration ranges (its cell state) and quantization turns into TFLite's integer LSTM exactly as
    for an ONNX LSTM (quantcore/quantize/recurrent.py). Its state stays TFLite's: the variable tensors
    persist from one invoke to the next (`streaming`, as in TFLM), reset to zeros."""
    x, y, shape, batch = _lstm_input(state, op)
    inputs = [_float_weights(state, op, p, "input weights") for p in _LSTM_INPUT_WEIGHTS]
    recurrent = [_float_weights(state, op, p, "recurrent weights") for p in _LSTM_RECURRENT_WEIGHTS]
    hidden = _lstm_hidden(state, op, inputs, recurrent, shape[2])
    biases = [_float_weights(state, op, p, "bias") for p in _LSTM_BIASES]
    for name in biases:
        if state.tensors[name].shape != (hidden,):
            raise state.error(op, f"its bias has shape {state.tensors[name].shape}; expected ({hidden},)")
    for position, what in ((_LSTM_HIDDEN, "hidden state"), (_LSTM_CELL, "cell state")):
        _float_state(state, op, position, (batch, hidden), what)
    _lstm_node(state, op, y, (x, *inputs, *recurrent, *biases), hidden, {"streaming": True})


def _lstm_input(state: _State, op: TflOperator) -> tuple[str, str, tuple[int, ...], int]:
    """The input, the output, the input's shape and the batch. Time-major: (time, batch, features) - the
    kernel's time_major flag; the first axis is still the one inferences stack along (each inference is
    the whole block)."""
    x = _input(state, op, 0)
    y = _output(state, op)
    shape = state.tensors[x].shape
    if len(shape) != 3:
        raise state.error(op, f"takes an input of shape {shape}; TFLite's sequence LSTM takes 3 axes")
    return x, y, shape, shape[1] if op.options.get("TimeMajor", False) else shape[0]


def _lstm_hidden(
    state: _State, op: TflOperator, inputs: list[str], recurrent: list[str], features: int
) -> int:
    """The hidden size, every gate's weights checked against it: (hidden, features) and (hidden, hidden)."""
    hidden = state.tensors[recurrent[0]].shape[0]
    for name in inputs + recurrent:
        wanted = (hidden, features) if name in inputs else (hidden, hidden)
        if state.tensors[name].shape != wanted:
            raise state.error(
                op, f"has weights {quoted(name)} of shape {state.tensors[name].shape}; expected {wanted}"
            )
    return int(hidden)


def _lstm_node(
    state: _State, op: TflOperator, y: str, operands: tuple[str, ...], hidden: int, attrs: dict[str, Any]
) -> None:
    """The LSTM node over `operands` (input, weights, biases), its output's shape checked, with the
    options every LSTM has and `attrs` (an int8 layer's states, a float one's streaming)."""
    shape = state.tensors[operands[0]].shape
    if state.tensors[y].shape != (*shape[:2], hidden):
        raise state.error(
            op, f"writes {state.tensors[y].shape}; an LSTM of {hidden} units gives {(*shape[:2], hidden)}"
        )
    options = {
        "time_major": bool(op.options.get("TimeMajor", False)),
        "cell_clip": float(op.options.get("CellClip", 0.0)),
        "cell_activation": _CELL_ACTIVATIONS[int(op.options.get("FusedActivationFunction", 4))],
    }
    state.nodes.append(Node(y, Op.LSTM, operands, (y,), options | attrs))


def _same_as_hidden(state: _State, op: TflOperator, y: str, hidden: dict[str, Any]) -> None:
    """The kernel writes the hidden state's integers as the output: TFLM reads them at the output tensor's
    scale, which must therefore be the hidden state's."""
    quant = state.tensors[y].quant
    assert quant is not None
    if float(quant.scale) != hidden["scale"] or int(quant.zero_point) != hidden["zero_point"]:
        raise state.error(
            op,
            f"its output (scale {float(quant.scale):g}, zero point {int(quant.zero_point)}) and hidden state"
            f" (scale {hidden['scale']:g}, zero point {hidden['zero_point']}) differ; the kernel writes the"
            " hidden state as the output - re-convert the model",
        )


# -- tensors ------------------------------------------------------------------------------------------


def _constant(state: _State, op: TflOperator, position: int, types: tuple[str, ...], what: str) -> str:
    """A per-tensor quantized, symmetric constant as float64 q * scale with its QuantParams."""
    index = op.inputs[position]
    t = state.tensor(index)
    data = state.const(index)
    if data is None:
        raise state.error(op, f"its {what} (input {position}) must be a constant")
    q = t.quant
    if t.dtype not in types or q is None:
        raise state.error(
            op, f"its {what} {quoted(t.name)} are {t.dtype}; expected {' or '.join(types)} with a scale"
        )
    if (
        q.scale.size != 1
        or np.any(q.zero_point != 0)
        or not (np.isfinite(q.scale).all() and q.scale.max() > 0)
    ):
        raise state.error(
            op,
            f"its {what} {quoted(t.name)} have scale {q.scale.tolist()} and zero point"
            f" {q.zero_point.tolist()}; the recurrent kernels take one positive scale and zero point 0"
            " per tensor",
        )
    name = state.names[index]
    scale = np.float64(q.scale.reshape(-1)[0])
    dtype = _TYPES[t.dtype]
    quant = QuantParams(dtype, np.array(scale), np.array(0, np.int64), method="tflite")
    state.tensors[name] = Tensor(name, data.shape, data=data.astype(np.float64) * scale, quant=quant)
    return name


def _float_weights(state: _State, op: TflOperator, position: int, what: str) -> str:
    """A float32 constant of a float LSTM (every gate's weights and bias: TFLM's float LSTM reads all)."""
    index = op.inputs[position]
    data = state.const(index) if index >= 0 else None
    if data is None:
        raise state.error(op, f"its {what} (input {position}) must be a constant")
    return _float_constant(state, op, state.names[index], data, what)


def _float_state(state: _State, op: TflOperator, position: int, shape: tuple[int, ...], what: str) -> str:
    """A float layer's state must be a float32 variable tensor of the layer's shape: the layer keeps it
    (the executors, the firmware), starting from zeros as TFLM's reset leaves it. Returns its name."""
    index = op.inputs[position] if position < len(op.inputs) else -1
    if index < 0 or state.const(index) is not None:
        raise state.error(op, f"its {what} (input {position}) must be a variable tensor")
    t = state.tensor(index)
    if t.dtype != "FLOAT32" or tuple(t.shape) != shape:
        raise state.error(
            op, f"its {what} {quoted(t.name)} is {t.dtype} {list(t.shape)}; expected FLOAT32 {list(shape)}"
        )
    return t.name


def _bias(
    state: _State, op: TflOperator, position: int, length: int, types: tuple[str, ...] = ("INT32",)
) -> str:
    if position >= len(op.inputs) or op.inputs[position] < 0:
        return ""
    name = _constant(state, op, position, types, "bias")
    if state.tensors[name].shape != (length,):
        raise state.error(op, f"its bias has shape {state.tensors[name].shape}; expected ({length},)")
    return name


def _state(
    state: _State,
    op: TflOperator,
    position: int,
    shape: tuple[int, ...],
    what: str,
    types: tuple[str, ...] = ("INT8", "INT16"),
) -> dict[str, Any]:
    """A variable tensor as the node's persistent state: dtype, shape, scale, zero point."""
    index = op.inputs[position] if position < len(op.inputs) else -1
    if index < 0 or state.const(index) is not None:
        raise state.error(op, f"its {what} (input {position}) must be a variable tensor")
    t = state.tensor(index)
    q = t.quant
    if t.dtype not in types or q is None or q.scale.size != 1 or q.zero_point.size != 1:
        raise state.error(
            op, f"its {what} {quoted(t.name)} is {t.dtype}; expected {' or '.join(types)} with one scale"
        )
    if tuple(t.shape) != shape:
        raise state.error(
            op, f"its {what} {quoted(t.name)} has shape {list(t.shape)}; expected {list(shape)}"
        )
    return {
        "dtype": _TYPES[t.dtype].label,
        "shape": list(shape),
        "scale": float(q.scale.reshape(-1)[0]),
        "zero_point": int(q.zero_point.reshape(-1)[0]),
        "tensor": t.name,
    }
