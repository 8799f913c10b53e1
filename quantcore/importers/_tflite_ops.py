"""TFLite operators -> IR nodes (NHWC), one handler per operator, and the checks that keep an int8 model
bit-exact with TensorFlow Lite Micro's reference kernels - or refuse it with the reason.

Every operator is looked at before anything is translated, so a model with several unsupported operators
is one message listing each (its index in the subgraph, its output tensor and why). QUANTIZE/DEQUANTIZE
are taken only at the model's edges, where they convert the user's float (or uint8) data: the IR's
graph input and output stand for the int8 tensors behind them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from quantcore import display, limits
from quantcore.display import quoted
from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import _geometry
from quantcore.importers._tflite_read import TflModel, TflOperator, TflTensor
from quantcore.ir import Activation, DType, Graph, Layout, Node, Op, QuantParams, Tensor
from quantcore.ir.io_layout import MODEL_LAYOUTS
from quantcore.quantize.params import activation_range

_ACTIVATIONS: Mapping[int, tuple[Activation, tuple[float, float] | None]] = {
    0: (Activation.NONE, None),
    1: (Activation.RELU, None),
    2: (Activation.CLIP, (-1.0, 1.0)),  # RELU_N1_TO_1
    3: (Activation.RELU6, None),
}
_ACTIVATION_NAMES = {4: "TANH", 5: "SIGN_BIT"}
_FIX = "re-convert the model with supported operators in their place (SUPPORTED_OPS.md)"
_REFUSED: Mapping[str, tuple[str, str]] = {
    "LOGISTIC": ("CMSIS-NN has no int8 kernel for it (arm_nn_activation_s16 takes int16 only)", _FIX),
    "TANH": ("CMSIS-NN has no int8 kernel for it (arm_nn_activation_s16 takes int16 only)", _FIX),
    "CUSTOM:ethos-u": (
        "the model was compiled by Vela for an Ethos-U NPU (the network is inside this one operator)",
        "import the .tflite that was given to Vela, before its compilation",
    ),
}
"""Operators refused whatever their options: why, and what the user can do."""
_SIGNAL = (
    "an operator of TFLM's signal library (audio feature extraction, not a network layer)",
    "compute the features in the application (TFLM's signal library runs there) and import the network"
    " that takes them",
)
_LISTED_OUTPUTS = 3
"""Output names a group of refused operators shows (the indices are all listed)."""


@dataclass
class _State:
    model: TflModel
    quantized: bool
    names: dict[int, str]
    """TFLite tensor index -> IR tensor name (unique; edge QUANTIZE/DEQUANTIZE map two indices to one)."""
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    synthesized: list[str] = field(default_factory=list)
    consts: dict[int, np.ndarray] = field(default_factory=dict)
    """Constants computed at import (a DEQUANTIZE of float16 weights)."""
    inner: dict[int, int] = field(default_factory=dict)
    """The float/uint8 tensor at an edge conversion -> the int8 tensor it stands for."""
    wide: frozenset[int] = frozenset()
    """The int16 tensors at the model's edges (_wide_edges): an int16 input requantized to int8, an int16
    softmax output converted for the application."""

    @property
    def path(self) -> str:
        return self.model.path

    def tensor(self, index: int) -> TflTensor:
        return self.model.tensors[index]

    def error(self, op: TflOperator, problem: str) -> ModelError:
        return ModelError(self.path, f"operator {op.index} ({op.op}, output {self.label(op)}): {problem}")

    def label(self, op: TflOperator) -> str:
        return quoted(self.tensor(op.outputs[0]).name) if op.outputs else "none"

    def const(self, index: int) -> np.ndarray | None:
        if index in self.consts:
            return self.consts[index]
        return self.tensor(index).data


def translate(model: TflModel) -> Graph:
    _check_operators(model)
    state = _State(model, _is_quantized(model), _unique_names(model), wide=_wide_edges(model))
    _edges(state)
    inputs = [_graph_input(state, i) for i in model.inputs]
    for op in model.operators:
        if op.op in ("QUANTIZE", "DEQUANTIZE") and (_is_edge(state, op) or op.outputs[0] in state.consts):
            continue  # an edge conversion, or float16 weights _edges folded into a constant
        with _damaged(state, op):
            HANDLERS[op.op](state, op)
    outputs = [state.names[i] for i in model.outputs]
    for index, name in zip(model.outputs, outputs, strict=True):
        if name not in state.tensors:
            raise ModelError(
                model.path,
                f"the model's output {quoted(model.tensors[index].name)} is written by no operator;"
                " the file is damaged - re-convert the model",
            )
    meta = {
        "source": model.path,
        "sha256": model.sha256,
        "format": "tflite",
        "qdq": state.quantized,
        "layout": "NHWC",
        # TFLite's own layout is the firmware's: an application writes the model's values unchanged.
        MODEL_LAYOUTS: {n: "NHWC" for n in (*inputs, *outputs) if len(state.tensors[n].shape) == 4},
        "synthesized": tuple(state.synthesized),
    }
    graph = Graph("model", state.tensors, tuple(state.nodes), tuple(inputs), tuple(outputs), meta)
    return graph.prune()


@contextmanager
def _damaged(state: _State, op: TflOperator) -> Iterator[None]:
    """A handler's error on tensors that contradict each other, as the operator's ModelError. The checks
    before translation cover what a converter writes; a damaged file can still give, say, a bias whose
    length is not the weights' channel count, which a handler only meets while reading them."""
    try:
        yield
    except (LookupError, ValueError, TypeError, ArithmeticError) as exc:
        problem = display.shorten(f"{type(exc).__name__}: {exc}", 200)
        raise state.error(
            op, f"does not fit its tensors ({problem}); the file is damaged - re-convert it"
        ) from exc


# -- what the model is --------------------------------------------------------------------------------


def _check_operators(model: TflModel) -> None:
    """One message for every operator that cannot be translated: grouped by reason, each group with its
    operators (index and name), output names and why; then what to do (per operator when it differs)."""
    groups: dict[tuple[str, str], list[TflOperator]] = {}
    for op in model.operators:
        refusal = _why_not(op)
        if refusal is not None:
            groups.setdefault(refusal, []).append(op)
    if groups:
        listed = "; ".join(_group(model, ops, why) for (why, _), ops in groups.items())
        total = sum(len(ops) for ops in groups.values())
        count = "1 operator is" if total == 1 else f"{total} operators are"
        raise ModelError(model.path, f"{count} not supported: {listed}; {_fixes(groups)}")
    for op in model.operators:
        _check_tensors(model, op)
    for tensor in model.tensors:
        if tensor.dynamic is not None and any(d < 0 for d in tensor.dynamic[1:]):
            raise ModelError(
                model.path,
                f"tensor {quoted(tensor.name)} has a dynamic shape (shape signature {list(tensor.dynamic)});"
                " Fixpoint needs static shapes - convert with a fixed input shape (only the batch may be -1)",
            )


# What each translated operator needs: the rank of each required input (None: any), and its output's
# rank. Handlers read these positions and dimensions without looking, so a damaged file that gives
# fewer tensors, or tensors of another rank, is refused here, naming the operator.
_NEEDS: Mapping[str, tuple[tuple[int | None, ...], int | None]] = {
    "CONV_2D": ((4, 4), 4),
    "DEPTHWISE_CONV_2D": ((4, 4), 4),
    "FULLY_CONNECTED": ((None, 2), None),
    "AVERAGE_POOL_2D": ((4,), 4),
    "MAX_POOL_2D": ((4,), 4),
    "MEAN": ((4, None), None),
    "ADD": ((None, None), None),
    "MUL": ((None, None), None),
    "RESHAPE": ((None,), None),
    "SOFTMAX": ((None,), None),
    "PAD": ((None, 2), None),
    "PADV2": ((None, 2), None),
    "CONCATENATION": ((None,), None),
    "TRANSPOSE": ((None, 1), None),
    "QUANTIZE": ((None,), None),
    "DEQUANTIZE": ((None,), None),
    "SVDF": ((2, 2, 2), 2),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ((3, 2, 2, 2, 2, 2, 2, 2, 2), 3),
}


def _check_tensors(model: TflModel, op: TflOperator) -> None:
    ranks, out_rank = _NEEDS[op.op]
    given = op.inputs[: len(ranks)]
    if len(given) < len(ranks) or any(i < 0 for i in given) or len(op.outputs) != 1 or op.outputs[0] < 0:
        raise ModelError(
            model.path,
            f"operator {op.index} ({op.op}) has inputs {list(op.inputs)} and outputs {list(op.outputs)};"
            f" a {op.op} needs {len(ranks)} input tensor(s) and 1 output - the file is damaged or was"
            " written by a converter Fixpoint does not know; re-convert the model",
        )
    wanted = [(f"input {i}", index, rank) for i, (index, rank) in enumerate(zip(given, ranks, strict=True))]
    for what, index, rank in [*wanted, ("output", op.outputs[0], out_rank)]:
        tensor = model.tensors[index]
        if rank is not None and len(tensor.shape) != rank:
            raise ModelError(
                model.path,
                f"operator {op.index} ({op.op}): its {what} {quoted(tensor.name)} has shape"
                f" {list(tensor.shape)}; a {op.op} needs {rank} dimensions there - the file is damaged;"
                " re-convert the model",
            )


def _group(model: TflModel, ops: list[TflOperator], why: str) -> str:
    """`operator 0 SVDF (output 'a'): why`, `operators 1, 3, 5 SVDF (outputs 'a', 'b' and 1 more): why`,
    or `operators 4 CAST, 6 DIV (...): why` when they differ."""
    outputs = [quoted(model.tensors[op.outputs[0]].name) if op.outputs else "none" for op in ops]
    if len(ops) == 1:
        return f"operator {ops[0].index} {ops[0].op} (output {outputs[0]}): {why}"
    if len({_label(op) for op in ops}) == 1:
        which = ", ".join(str(op.index) for op in ops) + f" {_label(ops[0])}"
    else:
        which = ", ".join(f"{op.index} {_label(op)}" for op in ops)
    named = ", ".join(outputs[:_LISTED_OUTPUTS])
    if len(outputs) > _LISTED_OUTPUTS:
        named += f" and {len(outputs) - _LISTED_OUTPUTS} more"
    return f"operators {which} (outputs {named}): {why}"


def _fixes(groups: Mapping[tuple[str, str], list[TflOperator]]) -> str:
    """What to do: one advice for all, else each advice after the operators it is for."""
    by_fix: dict[str, list[str]] = {}
    for (_, fix), ops in groups.items():
        by_fix.setdefault(fix, []).extend(_label(op) for op in ops)
    if len(by_fix) == 1:
        return next(iter(by_fix))
    return "; ".join(f"for {', '.join(dict.fromkeys(names))}: {fix}" for fix, names in by_fix.items())


def _label(op: TflOperator) -> str:
    """How a group names an operator: TFLM's signal library's many custom operators as one family."""
    return "CUSTOM:Signal*" if op.op.startswith("CUSTOM:Signal") else op.op


def _why_not(op: TflOperator) -> tuple[str, str] | None:
    """Why `op` cannot be translated and what to do, or None when it can."""
    if op.op in _REFUSED:
        return _REFUSED[op.op]
    if op.op.startswith("CUSTOM:Signal"):
        return _SIGNAL
    if op.op.startswith("CUSTOM:"):
        return "a custom operator has no CMSIS-NN kernel", _FIX
    if op.op not in HANDLERS:
        return "no CMSIS-NN kernel in Fixpoint's support table runs it", _FIX
    recurrent = _tflite_recurrent().refusal(op)
    if recurrent is not None:
        return recurrent, _FIX
    activation = op.options.get("FusedActivationFunction", 0)
    if activation not in _ACTIVATIONS and op.op not in _RECURRENT:
        what = _ACTIVATION_NAMES.get(activation, str(activation))
        return f"its fused activation {what} has no CMSIS-NN int8 form (only RELU, RELU6, RELU_N1_TO_1)", _FIX
    return None


def _is_quantized(model: TflModel) -> bool:
    # A recurrent layer's state (and SVDF's time weights) may be int16 in an int8 model, and its edges.
    states = {i for op in model.operators for i in _tflite_recurrent().state_inputs(op)}
    states |= _wide_edges(model)
    types = {
        model.tensors[i].dtype
        for op in model.operators
        for i in (*op.inputs, *op.outputs)
        if i >= 0 and i not in states
    }
    types -= {"INT32"}  # biases, shapes, axes
    if "INT16" in types:
        raise ModelError(
            model.path,
            "has int16 tensors (16x8 quantization); Fixpoint imports float and int8 TFLite models -"
            " re-convert with int8 activations (TFLiteConverter with supported_ops TFLITE_BUILTINS_INT8)",
        )
    return "INT8" in types or "UINT8" in types


def _unique_names(model: TflModel) -> dict[int, str]:
    names: dict[int, str] = {}
    used: set[str] = set()
    for tensor in model.tensors:
        name = tensor.name
        if name in used:
            name = f"{tensor.name}#{tensor.index}"
        used.add(name)
        names[tensor.index] = name
    return names


# -- the model's edges: QUANTIZE after an input, DEQUANTIZE before an output ----------------------------


def _is_edge(state: _State, op: TflOperator) -> bool:
    x = state.tensor(op.inputs[0])
    if _requantizes_input(state.model, op):
        return False  # a layer of its own: REQUANTIZE from the int16 input
    return (op.inputs[0] in state.model.inputs and x.data is None) or op.outputs[0] in state.model.outputs


def _requantizes_input(model: TflModel, op: TflOperator) -> bool:
    """A QUANTIZE of the model's int16 input to int8 (TFLM's streaming keyword models take int16 audio
    features): a requantization, which Fixpoint runs as a REQUANTIZE from an int16 graph input."""
    return (
        op.op == "QUANTIZE"
        and op.inputs[0] in model.inputs
        and model.tensors[op.inputs[0]].dtype == "INT16"
        and model.tensors[op.outputs[0]].dtype == "INT8"
    )


def _wide_edges(model: TflModel) -> frozenset[int]:
    """The int16 tensors an int8 model may have at its edges: an input requantized to int8, and the int16
    output of a SOFTMAX (arm_softmax_s8_s16) that a QUANTIZE/DEQUANTIZE converts into the model's output,
    with that output (Fixpoint's graph output is the int16 tensor behind it); and a 16x8 LSTM's int16
    input and output that are the model's (_tflite_recurrent.int16_edges)."""
    wide: set[int] = set()
    for op in model.operators:
        if _requantizes_input(model, op):
            wide.add(op.inputs[0])
        elif (
            op.op in ("QUANTIZE", "DEQUANTIZE")
            and op.outputs[0] in model.outputs
            and model.tensors[op.inputs[0]].dtype == "INT16"
        ):
            wide.update((op.inputs[0], op.outputs[0]))
    wide |= _tflite_recurrent().int16_edges(model)
    return frozenset(wide)


def _edges(state: _State) -> None:
    """Map the float (or uint8) tensors at the model's edges to the int8 tensors they convert."""
    for op in state.model.operators:
        if op.op == "DEQUANTIZE" and state.const(op.inputs[0]) is not None:
            _fold_dequantize(state, op)
        elif _requantizes_input(state.model, op):
            continue
        elif op.op in ("QUANTIZE", "DEQUANTIZE") and _is_edge(state, op):
            _edge(state, op)
        elif op.op in ("QUANTIZE", "DEQUANTIZE"):
            raise UnsupportedError(
                state.path,
                f"operator {op.index} (output {state.label(op)})",
                op.op,
                "a conversion between two layers (requantization or float islands) has no CMSIS-NN kernel;"
                " convert the model fully to int8 (QUANTIZE/DEQUANTIZE only at its input and output)",
            )


def _edge(state: _State, op: TflOperator) -> None:
    inner, outer = (op.outputs[0], op.inputs[0]) if op.op == "QUANTIZE" else (op.inputs[0], op.outputs[0])
    if op.op == "QUANTIZE" and op.outputs[0] in state.model.outputs:
        inner, outer = op.inputs[0], op.outputs[0]
    a, b = state.tensor(inner), state.tensor(outer)
    if a.dtype == "INT16" and inner in state.wide:
        return _wide_output(state, op, inner, outer)
    if a.dtype != "INT8":
        raise state.error(
            op, f"converts to {a.dtype}; at the model's edges Fixpoint takes conversions to int8"
        )
    if b.dtype == "UINT8":
        same = _same_uint8(a, b)
        if not same:
            raise state.error(
                op,
                "converts uint8 and int8 with different scales (not the exact shift by 128 TensorFlow's"
                " converter writes); re-convert with inference_input_type/inference_output_type int8",
            )
    elif b.dtype != "FLOAT32":
        raise state.error(
            op, f"converts {b.dtype} at the model's edge; Fixpoint takes float32 or uint8 there"
        )
    state.names[outer] = state.names[inner]
    state.inner[outer] = inner


def _wide_output(state: _State, op: TflOperator, inner: int, outer: int) -> None:
    """An int16 softmax output converted to the model's int32 or float32 output: Fixpoint's graph ends at
    the int16 tensor (the application converts it as the QUANTIZE/DEQUANTIZE would)."""
    if state.tensor(outer).dtype not in ("INT32", "FLOAT32"):
        raise state.error(
            op,
            f"converts int16 to {state.tensor(outer).dtype} at the model's output; Fixpoint takes int32"
            " or float32 there",
        )
    state.names[outer] = state.names[inner]
    state.inner[outer] = inner


def _same_uint8(a: TflTensor, b: TflTensor) -> bool:
    if a.quant is None or b.quant is None or a.quant.scale.ndim or b.quant.scale.ndim:
        return False
    return bool(a.quant.scale == b.quant.scale) and int(b.quant.zero_point) - 128 == int(a.quant.zero_point)


def _fold_dequantize(state: _State, op: TflOperator) -> None:
    data = state.const(op.inputs[0])
    assert data is not None
    if data.dtype != np.float16:
        raise UnsupportedError(
            state.path,
            f"operator {op.index} (output {state.label(op)})",
            op.op,
            f"dequantizes {data.dtype} weights at run time (dynamic-range or hybrid quantization); convert"
            " the model fully to int8 (with a representative dataset) or keep it float32",
        )
    state.consts[op.outputs[0]] = data.astype(np.float32)


# -- tensors ----------------------------------------------------------------------------------------------


def _graph_input(state: _State, index: int) -> str:
    name = state.names[index]
    if name not in state.tensors:
        _activation(state, state.inner.get(index, index), None)
    return name


def _activation(state: _State, index: int, op: TflOperator | None) -> str:
    """Register a TFLite activation as an IR tensor (float32 values; TFLite's quantization kept)."""
    t = state.tensor(index)
    name = state.names[index]
    where = f"operator {op.index} ({op.op}): " if op else ""
    expected = "INT8" if state.quantized else "FLOAT32"
    if t.dtype == "INT16" and index in state.wide:
        expected = "INT16"
    if t.dtype != expected:
        kind = "an int8" if state.quantized else "a float32"
        legacy = " (uint8 is TF1's legacy asymmetric quantization; re-convert with TF2's int8 converter)"
        raise ModelError(
            state.path,
            f"{where}tensor {quoted(t.name)} is {t.dtype} in {kind} model"
            f"{legacy if t.dtype == 'UINT8' else ''};"
            " Fixpoint imports float32 models and int8 models",
        )
    if math.prod(t.shape) > limits.ACTIVATION_MAX_ELEMENTS or not t.shape or 0 in t.shape:
        raise ModelError(
            state.path,
            f"{where}tensor {quoted(t.name)} has shape {t.shape}; Fixpoint takes activations of 1 to"
            f" {limits.ACTIVATION_MAX_ELEMENTS} elements - check the model's shapes",
        )
    quant = _activation_quant(state, t, where) if state.quantized else None
    layout = Layout.NHWC if len(t.shape) == 4 else None
    dtype = DType.INT16 if expected == "INT16" else DType.FLOAT32
    state.tensors[name] = Tensor(name, t.shape, dtype, layout=layout, quant=quant)
    return name


def _activation_quant(state: _State, t: TflTensor, where: str) -> QuantParams:
    q = t.quant
    if q is None:
        raise ModelError(
            state.path,
            f"{where}int8 tensor {quoted(t.name)} has no quantization parameters (scale, zero point);"
            " re-convert the model with TensorFlow's full-integer converter",
        )
    dtype = DType.INT16 if t.dtype == "INT16" else DType.INT8
    assert dtype.qmin is not None and dtype.qmax is not None
    if (
        q.scale.ndim
        or not (math.isfinite(float(q.scale)) and float(q.scale) > 0)
        or not dtype.qmin <= int(q.zero_point) <= dtype.qmax
    ):
        raise ModelError(
            state.path,
            f"{where}int8 tensor {quoted(t.name)} has scale {q.scale.tolist()} and zero point"
            f" {q.zero_point.tolist()}; an activation needs one positive scale and a zero point in"
            f" [{dtype.qmin}, {dtype.qmax}] - re-convert the model",
        )
    return QuantParams(dtype, q.scale.astype(np.float32), q.zero_point.astype(np.int64), method="tflite")


def _input(state: _State, op: TflOperator, position: int) -> str:
    index = op.inputs[position]
    if index < 0:
        raise state.error(op, f"input {position} is absent (-1); Fixpoint needs an activation there")
    name = state.names[index]
    if name not in state.tensors or state.tensors[name].is_constant:
        if state.const(index) is not None:
            raise state.error(op, f"input {position} is a constant; Fixpoint needs an activation there")
        raise state.error(
            op, f"reads tensor {quoted(state.tensor(index).name)}, which no earlier operator writes"
        )
    return name


def _output(state: _State, op: TflOperator, position: int = 0) -> str:
    index = op.outputs[position]
    if state.names[index] in state.tensors:
        raise state.error(op, f"writes tensor {quoted(state.tensor(index).name)} a second time")
    return _activation(state, index, op)


def _constant_input(state: _State, op: TflOperator, position: int, what: str) -> np.ndarray:
    index = op.inputs[position] if position < len(op.inputs) else -1
    data = state.const(index) if index >= 0 else None
    if data is None:
        raise state.error(op, f"its {what} (input {position}) must be a constant")
    return data


def _weights(state: _State, op: TflOperator, axis: int) -> tuple[str, np.ndarray]:
    """The weight tensor as an IR constant: float32 for a float model; for an int8 model float64 values
    q * scale[c] that quantize_weights turns back into TensorFlow's q exactly. Returns (name, scales)."""
    index = op.inputs[1]
    data = _constant_input(state, op, 1, "weights")
    t = state.tensor(index)
    name = state.names[index]
    if not state.quantized:
        return _float_constant(state, op, name, data, "weights"), np.ones(1)
    q = t.quant
    if t.dtype != "INT8" or q is None:
        raise state.error(
            op,
            f"its weights {quoted(t.name)} are {t.dtype} without int8 quantization parameters;"
            " re-convert with TensorFlow's full-integer converter",
        )
    channels = data.shape[axis]
    if q.scale.ndim and (q.scale.size != channels or q.axis != axis):
        raise state.error(
            op,
            f"its weights have {q.scale.size} scales along axis {q.axis}; expected one per"
            f" output channel along axis {axis} ({channels}) or one",
        )
    if np.any(q.zero_point != 0):
        raise state.error(op, "its weights have a non-zero zero point; CMSIS-NN takes symmetric int8 weights")
    if not np.all(np.isfinite(q.scale) & (q.scale > 0)):
        raise state.error(op, "its weights have a scale that is not a positive finite number; re-convert it")
    scales = (
        np.broadcast_to(q.scale.astype(np.float64), (channels,))
        if q.scale.ndim
        else q.scale.astype(np.float64)
    )
    shape = [1] * data.ndim
    if q.scale.ndim:
        shape[axis] = -1
    values = data.astype(np.float64) * scales.reshape(shape)
    quant = QuantParams(
        DType.INT8,
        q.scale.astype(np.float64),
        np.zeros(q.scale.shape, np.int64),
        axis=axis if q.scale.ndim else None,
        method="tflite",
    )
    state.tensors[name] = Tensor(name, data.shape, data=values, quant=quant)
    return name, np.broadcast_to(scales, (channels,))


def _float_constant(state: _State, op: TflOperator, name: str, data: np.ndarray, what: str) -> str:
    if data.dtype != np.float32:
        raise state.error(op, f"its {what} are {data.dtype} in a float32 model")
    if not np.isfinite(data).all():
        raise state.error(op, f"its {what} hold NaN or Inf; re-export from a model with finite weights")
    state.tensors[name] = Tensor(name, data.shape, data=np.ascontiguousarray(data))
    return name


def _bias(state: _State, op: TflOperator, x: str, scales: np.ndarray, channels: int) -> str:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return ""
    index = op.inputs[2]
    data = _constant_input(state, op, 2, "bias")
    name = state.names[index]
    if data.shape != (channels,):
        raise state.error(op, f"its bias has shape {data.shape}; expected ({channels},)")
    if not state.quantized:
        return _float_constant(state, op, name, data, "bias")
    if data.dtype != np.int32:
        raise state.error(op, f"its bias is {data.dtype}; an int8 layer takes an int32 bias")
    # quantize_bias divides by s_in * s_w[c] in float64: the same product makes the round trip exact.
    s_in = state.tensors[x].quant
    assert s_in is not None
    values = data.astype(np.float64) * (float(s_in.scale) * scales)
    state.tensors[name] = Tensor(name, (channels,), data=values)
    return name


# -- activations and geometry -----------------------------------------------------------------------------


def _fused(state: _State, op: TflOperator, y: str) -> dict[str, Any]:
    activation, clip = _ACTIVATIONS[op.options.get("FusedActivationFunction", 0)]
    attrs: dict[str, Any] = {"activation": activation}
    if clip is not None:
        attrs["clip"] = clip
    if state.quantized and activation is not Activation.NONE:
        _check_clamp(state, op, y, activation, clip)
    return attrs


def _check_clamp(
    state: _State, op: TflOperator, y: str, activation: Activation, clip: tuple[float, float] | None
) -> None:
    """TFLM clamps at zero_point + round(bound / scale) in float32 rounding half away from zero; the
    params JSON recomputes the clamp in float64 - refuse the rare scale where the two disagree."""
    quant = state.tensors[y].quant
    assert quant is not None
    scale, zp = np.float32(quant.scale), int(quant.zero_point)
    low, high = {Activation.RELU: (0.0, None), Activation.RELU6: (0.0, 6.0)}.get(
        activation, clip or (None, None)
    )
    lo = -128 if low is None else max(-128, zp + _round_away(np.float32(low) / scale))
    hi = 127 if high is None else min(127, zp + _round_away(np.float32(high) / scale))
    ours = activation_range(activation, clip, float(quant.scale), zp, DType.INT8)
    if ours != (lo, hi):
        raise state.error(
            op,
            f"TFLM clamps its {activation.value} to [{lo}, {hi}], Fixpoint's scheme to [{ours[0]}, {ours[1]}]"
            " (the bound falls on a rounding tie at this output scale); the result would not match TFLM",
        )


def _round_away(x: np.floating[Any]) -> int:
    return int(np.sign(x) * np.floor(np.abs(x) + np.float32(0.5)))


def _window(
    state: _State, op: TflOperator, x: str, y: str, kernel: tuple[int, int], dilation: tuple[int, int]
) -> tuple[int, int, int, int]:
    """Explicit (top, left, bottom, right) pads as TFLite computes them (SAME puts the odd pixel last)."""
    stride = (int(op.options["StrideH"]), int(op.options["StrideW"]))
    padding = int(op.options["Padding"])
    in_hw, out_hw = state.tensors[x].shape[1:3], state.tensors[y].shape[1:3]
    if min(*stride, *dilation, *kernel) <= 0 or padding not in (0, 1):
        raise state.error(op, f"has stride {stride}, dilation {dilation}, kernel {kernel}, padding {padding}")
    # TFLite's SAME (0) is ONNX's SAME_UPPER, its VALID (1) ONNX's VALID.
    auto_pad = "SAME_UPPER" if padding == 0 else "VALID"
    geometry = _geometry.resolve(
        (in_hw[0], in_hw[1]), kernel, strides=stride, dilations=dilation, pads=None, auto_pad=auto_pad
    )
    if geometry.output_hw != out_hw:
        raise state.error(op, f"its output is {out_hw} but TFLite's window rule gives {geometry.output_hw}")
    return geometry.pads


def _emit(
    state: _State, name: str, op: Op, inputs: tuple[str, ...], outputs: tuple[str, ...], **attrs: Any
) -> None:
    state.nodes.append(Node(name, op, inputs, outputs, attrs))


def _synthesize(state: _State, like: str, role: str, shape: tuple[int, ...]) -> str:
    name = f"{like}:{role}"
    source = state.tensors[like]
    layout = Layout.NHWC if len(shape) == 4 else None
    state.tensors[name] = Tensor(name, shape, DType.FLOAT32, layout=layout, quant=source.quant)
    state.synthesized.append(name)
    return name


# -- operators --------------------------------------------------------------------------------------------


def conv(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    w, scales = _weights(state, op, 0)
    c_out, kh, kw, c_in = state.tensors[w].shape
    if c_in != state.tensors[x].shape[3]:
        raise state.error(
            op,
            f"is a grouped convolution ({state.tensors[x].shape[3]} input channels, filters of"
            f" {c_in}); CMSIS-NN runs plain and depthwise convolutions",
        )
    b = _bias(state, op, x, scales, c_out)
    dilation = (int(op.options["DilationHFactor"]), int(op.options["DilationWFactor"]))
    pads = _window(state, op, x, y, (kh, kw), dilation)
    attrs = {
        "strides": (op.options["StrideH"], op.options["StrideW"]),
        "pads": pads,
        "dilations": dilation,
        "groups": 1,
        **_fused(state, op, y),
    }
    _emit(state, y, Op.CONV2D, (x, w, b), (y,), **attrs)


def depthwise(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    w, scales = _weights(state, op, 3)
    _, kh, kw, channels = state.tensors[w].shape
    c_in = state.tensors[x].shape[3]
    if channels % c_in or state.tensors[y].shape[3] != channels:
        raise state.error(op, f"has {channels} filters for {c_in} input channels")
    b = _bias(state, op, x, scales, channels)
    dilation = (int(op.options["DilationHFactor"]), int(op.options["DilationWFactor"]))
    pads = _window(state, op, x, y, (kh, kw), dilation)
    attrs = {
        "strides": (op.options["StrideH"], op.options["StrideW"]),
        "pads": pads,
        "dilations": dilation,
        "kernel": (kh, kw),
        **_fused(state, op, y),
    }
    _emit(state, y, Op.DEPTHWISE_CONV2D, (x, w, b), (y,), **attrs)


def fully_connected(state: _State, op: TflOperator) -> None:
    if op.options.get("WeightsFormat", 0) != 0:
        raise state.error(
            op, "uses shuffled weights (a GPU/ARM64 format); re-convert with the default format"
        )
    x = _input(state, op, 0)
    y = _output(state, op)
    w, scales = _weights(state, op, 0)
    units, depth = state.tensors[w].shape
    b = _bias(state, op, x, scales, units)
    rows = math.prod(state.tensors[x].shape) // depth
    if rows * depth != math.prod(state.tensors[x].shape) or math.prod(state.tensors[y].shape) != rows * units:
        raise state.error(
            op, f"reads {state.tensors[x].shape} with weights {(units, depth)} into {state.tensors[y].shape}"
        )
    if state.tensors[x].shape != (rows, depth):
        flat = _synthesize(state, x, "flat", (rows, depth))
        _emit(state, flat, Op.RESHAPE, (x,), (flat,), shape=(rows, depth))
        x = flat
    target = y if state.tensors[y].shape == (rows, units) else _synthesize(state, y, "2d", (rows, units))
    _emit(state, target, Op.FULLY_CONNECTED, (x, w, b), (target,), **_fused(state, op, y))
    if target != y:
        _emit(state, y, Op.RESHAPE, (target,), (y,), shape=state.tensors[y].shape)


def _pool(state: _State, op: TflOperator, kind: Op) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    _same_quant(state, op, x, y)
    kernel = (int(op.options["FilterHeight"]), int(op.options["FilterWidth"]))
    pads = _window(state, op, x, y, kernel, (1, 1))
    attrs: dict[str, Any] = {
        "kernel": kernel,
        "strides": (op.options["StrideH"], op.options["StrideW"]),
        "pads": pads,
        "ceil_pads": (0, 0),
        **_fused(state, op, y),
    }
    if kind is Op.AVG_POOL:
        attrs["count_include_pad"] = False  # TFLite averages the window's inputs only
    _emit(state, y, kind, (x,), (y,), **attrs)


def mean(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    shape = state.tensors[x].shape
    axes = sorted({int(a) % max(len(shape), 1) for a in _constant_input(state, op, 1, "axes").reshape(-1)})
    if len(shape) != 4 or axes != [1, 2]:
        raise state.error(
            op,
            f"averages axes {axes} of a {len(shape)}-D tensor; Fixpoint takes the spatial mean"
            " (axes 1 and 2 of NHWC), i.e. global average pooling",
        )
    if state.quantized:
        raise state.error(
            op,
            "TFLM computes an int8 MEAN as the requantized sum with multiplier (M << k) / N, which neither"
            " arm_avgpool_s8 (it rounds sum / N half away from zero) nor a convolution whose multiplier"
            " follows from scales reproduces bit for bit; re-convert with AVERAGE_POOL_2D (Keras"
            " AveragePooling2D over the whole plane) or import the float model",
        )
    y = _output(state, op)
    pooled = (
        y if len(state.tensors[y].shape) == 4 else _synthesize(state, y, "pooled", (shape[0], 1, 1, shape[3]))
    )
    _emit(
        state,
        pooled,
        Op.AVG_POOL,
        (x,),
        (pooled,),
        kernel=shape[1:3],
        strides=(1, 1),
        pads=(0, 0, 0, 0),
        ceil_pads=(0, 0),
        count_include_pad=False,
    )
    if pooled != y:
        _emit(state, y, Op.RESHAPE, (pooled,), (y,), shape=state.tensors[y].shape)


def _binary(state: _State, op: TflOperator, kind: Op) -> None:
    a, b = _input(state, op, 0), _input(state, op, 1)
    y = _output(state, op)
    if not state.tensors[a].shape == state.tensors[b].shape == state.tensors[y].shape:
        raise state.error(
            op,
            f"broadcasts {state.tensors[a].shape} with {state.tensors[b].shape}; CMSIS-NN's"
            " elementwise kernels take operands of the same shape",
        )
    _emit(state, y, kind, (a, b), (y,), **_fused(state, op, y))


def reshape(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    _same_quant(state, op, x, y)
    _emit(state, y, Op.RESHAPE, (x,), (y,), shape=state.tensors[y].shape)


def softmax(state: _State, op: TflOperator) -> None:
    if float(op.options.get("Beta", 1.0)) != 1.0:
        raise state.error(op, f"has beta {op.options['Beta']}; Fixpoint's softmax takes beta 1")
    x = _input(state, op, 0)
    y = _output(state, op)
    quant = state.tensors[y].quant
    if quant is not None and quant.dtype is DType.INT16:
        # arm_softmax_s8_s16 writes Q0.16 offset by -32768; TFLM accepts the scale within 0.1 % of 1/65536
        # (converters write 1/65535) and computes the same integers whatever it is.
        if abs(float(quant.scale) * 65536.0 - 1.0) > 1e-3 or int(quant.zero_point) != -32768:
            raise state.error(
                op, "its int16 output is not at scale 1/65536, zero point -32768 (arm_softmax_s8_s16's)"
            )
    elif quant is not None and (float(quant.scale) != 1.0 / 256.0 or int(quant.zero_point) != -128):
        raise state.error(op, "its int8 output is not at scale 1/256, zero point -128 (arm_softmax_s8's)")
    _emit(state, y, Op.SOFTMAX, (x,), (y,), axis=len(state.tensors[x].shape) - 1)


def pad(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    _same_quant(state, op, x, y)
    amounts = _constant_input(state, op, 1, "paddings").astype(np.int64)
    rank = len(state.tensors[x].shape)
    if amounts.shape != (rank, 2) or amounts.min(initial=0) < 0:
        raise state.error(op, f"has paddings of shape {amounts.shape} for a {rank}-D input")
    value = 0.0
    if op.op == "PADV2" and len(op.inputs) > 2:
        constant = _constant_input(state, op, 2, "pad value").reshape(-1)
        quant = state.tensors[x].quant
        zero = int(quant.zero_point) if quant is not None else 0.0
        if constant.size != 1 or (quant is not None and int(constant[0]) != zero):
            raise state.error(op, "pads with a value other than zero; arm_pad_s8 pads with the zero point")
        value = 0.0 if quant is not None else float(constant[0])
    pads = tuple(int(p) for p in amounts[:, 0]) + tuple(int(p) for p in amounts[:, 1])
    _emit(state, y, Op.PAD, (x,), (y,), pads=pads, value=value)


def concatenation(state: _State, op: TflOperator) -> None:
    inputs = tuple(_input(state, op, i) for i in range(len(op.inputs)))
    y = _output(state, op)
    if op.options.get("FusedActivationFunction", 0):
        raise state.error(op, "has a fused activation; CMSIS-NN's concatenation copies without clamping")
    for x in inputs:
        _same_quant(state, op, x, y)
    axis = int(op.options["Axis"]) % len(state.tensors[y].shape)
    _emit(state, y, Op.CONCAT, inputs, (y,), axis=axis)


def transpose(state: _State, op: TflOperator) -> None:
    x = _input(state, op, 0)
    y = _output(state, op)
    _same_quant(state, op, x, y)
    perm = tuple(int(p) for p in _constant_input(state, op, 1, "permutation").reshape(-1))
    if sorted(perm) != list(range(len(state.tensors[x].shape))):
        raise state.error(op, f"has permutation {perm} for a {len(state.tensors[x].shape)}-D input")
    _emit(state, y, Op.TRANSPOSE, (x,), (y,), perm=perm)


def _same_quant(state: _State, op: TflOperator, x: str, y: str) -> None:
    """Data-movement kernels (and TFLM's) copy integers: TFLM reinterprets them at the output's scale,
    CMSIS-NN keeps the input's - equal only when both tensors share scale and zero point."""
    a, b = state.tensors[x].quant, state.tensors[y].quant
    if a is None or b is None:
        return
    if float(a.scale) != float(b.scale) or int(a.zero_point) != int(b.zero_point):
        raise state.error(
            op,
            f"its input (scale {float(a.scale):g}, zero point {int(a.zero_point)}) and output (scale"
            f" {float(b.scale):g}, zero point {int(b.zero_point)}) differ; the integers are copied, so"
            " Fixpoint needs them equal - re-convert the model",
        )


def _quantize_edge(state: _State, op: TflOperator) -> None:
    if not _requantizes_input(state.model, op):
        raise state.error(op, "is a conversion inside the model")  # never reached: translate skips them
    x = _input(state, op, 0)
    y = _output(state, op)
    _emit(state, y, Op.REQUANTIZE, (x,), (y,))


Handler = Callable[[_State, TflOperator], None]


def _tflite_recurrent() -> Any:
    """The recurrent operators' module (it imports this one's helpers, so it is imported when used)."""
    from quantcore.importers import _tflite_recurrent

    return _tflite_recurrent


def _recurrent(name: str) -> Handler:
    def handler(state: _State, op: TflOperator) -> None:
        getattr(_tflite_recurrent(), name)(state, op)

    return handler


_RECURRENT = ("SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM")
HANDLERS: Mapping[str, Handler] = {
    "CONV_2D": conv,
    "DEPTHWISE_CONV_2D": depthwise,
    "FULLY_CONNECTED": fully_connected,
    "AVERAGE_POOL_2D": partial(_pool, kind=Op.AVG_POOL),
    "MAX_POOL_2D": partial(_pool, kind=Op.MAX_POOL),
    "MEAN": mean,
    "ADD": partial(_binary, kind=Op.ADD),
    "MUL": partial(_binary, kind=Op.MUL),
    "RESHAPE": reshape,
    "SOFTMAX": softmax,
    "PAD": pad,
    "PADV2": pad,
    "CONCATENATION": concatenation,
    "TRANSPOSE": transpose,
    "QUANTIZE": _quantize_edge,
    "DEQUANTIZE": _quantize_edge,
    "SVDF": _recurrent("svdf"),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _recurrent("lstm"),
}
__all__ = ["HANDLERS", "translate"]
