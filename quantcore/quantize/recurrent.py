"""The integer parameters of CMSIS-NN's recurrent kernels, computed from an int8 .tflite's scales exactly as
TensorFlow Lite Micro computes them (kernels/svdf_common.cc, lstm_eval_common.cc and CMSIS-NN's glue in
kernels/cmsis_nn/svdf.cc and unidirectional_sequence_lstm.cc), so the kernels match TFLM byte for byte.

SVDF (arm_svdf_s8 / arm_svdf_state_s16_s8):
  input multiplier  = QuantizeMultiplier(double(float32 s_in * s_wf / s_state))  (float32 arithmetic)
  output multiplier = QuantizeMultiplier(double(float32 s_state * s_wt / s_out))
  the new state value is clamped to the state type's range, the output to int8's (TFLM's int8 SVDF
  applies no fused activation).
  A float SVDF (a float .tflite) takes TFLite's quantizer's scheme: int8 feature weights (max|w| / 127),
  int16 time weights of 10 bits (max|w| / 512), an int16 symmetric state over its calibrated range
  (max / 32767), an int32 bias at s_state * s_wt; a fused activation is what the calibrated output
  range clamps (RELU: zero point -128).
LSTM (arm_lstm_unidirectional_s8; _s16 for TensorFlow's 16x8 LSTM - int16 input and hidden state, int64
biases, the same parameters), TFLite's integer LSTM: every gate's two products requantize to Q3.12
(scale 2^-12, int16), the gates' outputs are Q0.15 (2^-15), and
  gate input multiplier     = QM(double(s_in) * double(s_wx) / 2^-12),  recurrent: s_hidden, s_wh
  forget_to_cell            = QM(2^-15 * s_cell / s_cell),  input_to_cell = QM(2^-15 * 2^-15 / s_cell)
  output (hidden)           = QM(2^-15 * 2^-15 / s_hidden), offset zp_hidden
  cell_scale_power          = round(log2(s_cell)) (TFLite's CheckedLog2)
  cell_clip                 = (int16) clamp(cell_clip / s_cell, -32768, 32767)
  effective biases          = bias + sum(w_x) * -zp_in, and sum(w_h) * -zp_hidden (arm_vector_sum_s8),
                              computed from the weights where the call is made (int8_exec, the C).
The state is not a tensor of the graph: the node's attrs describe it, the executor and the firmware keep it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from quantcore.ir import DType, Graph, Node, Op, QuantParams, Tensor
from quantcore.quantize.params import QuantizationError
from quantcore.scheme.arith import quantize_bias, quantize_weights, weight_scales
from quantcore.scheme.recurrent import (
    GATES,
    cell_state_key,
    is_float_lstm,
    is_float_recurrent,
    needs_cell_range,
)
from quantcore.scheme.scaling import quantize_multiplier

GATE_INPUT_SCALE = 2.0**-12
"""Q3.12: the scale each gate's products requantize to (TFLM's nonlinear_input_scale)."""
GATE_OUTPUT_SCALE = 2.0**-15
"""Q0.15: the scale of a gate's sigmoid/tanh output (TFLM's nonlinear_output_scale)."""
RECURRENT_KERNELS = frozenset(
    {"arm_svdf_s8", "arm_svdf_state_s16_s8", "arm_lstm_unidirectional_s8", "arm_lstm_unidirectional_s16"}
)
_INTEGER_TYPES: dict[DType, type[np.signedinteger[Any]]] = {
    DType.INT8: np.int8,
    DType.INT16: np.int16,
    DType.INT32: np.int32,
    DType.INT64: np.int64,  # a 16x8 LSTM's biases
}


def quantize(graph: Graph, node: Node) -> tuple[Node, list[Tensor]]:
    """The node with its kernel, integer parameters and integer constants (TensorFlow's, exactly)."""
    if node.op is Op.SVDF:
        return _svdf(graph, node)
    return _lstm(graph, node)


def integers(graph: Graph, name: str, node: Node, role: str) -> Tensor:
    """An imported constant (float64 q * scale) back as TensorFlow's integers q, named after the layer."""
    tensor = graph.tensor(name)
    quant = tensor.quant
    if quant is None or quant.dtype not in _INTEGER_TYPES or tensor.data is None:
        raise QuantizationError(
            f"layer {node.name!r}: its {role} {name!r} has no imported integer scale, though the layer's"
            " weights have one; every constant of an int8 .tflite's recurrent layer has - re-convert the"
            " model"
        )
    q = np.round(np.asarray(tensor.data, np.float64) / float(quant.scale))
    info = np.iinfo(_INTEGER_TYPES[quant.dtype])
    if q.min(initial=0) < info.min or q.max(initial=0) > info.max:
        raise QuantizationError(f"layer {node.name!r}: its {role} {name!r} do not fit {quant.dtype.label}")
    values = q.astype(_INTEGER_TYPES[quant.dtype])
    return Tensor(f"{node.name}.{role}", values.shape, quant.dtype, values, quant=quant)


def _scale_zp(graph: Graph, name: str) -> tuple[float, int]:
    quant = graph.tensor(name).quant
    assert quant is not None, name
    return float(quant.scale), int(quant.zero_point)


def _f32(value: float) -> np.float32:
    return np.float32(value)


# -- SVDF -----------------------------------------------------------------------------------------------


def _svdf(graph: Graph, node: Node) -> tuple[Node, list[Tensor]]:
    x, wf_name, wt_name, b_name = node.inputs
    s_in, zp_in = _scale_zp(graph, x)
    s_out, zp_out = _scale_zp(graph, node.outputs[0])
    if is_float_recurrent(graph, node):
        node = _float_svdf_state(node)
        wf, wt, bias = _float_svdf_constants(graph, node)
        constants = [wf, wt, *([bias] if bias is not None else [])]
    else:
        wf = integers(graph, wf_name, node, "weights_feature")
        wt = integers(graph, wt_name, node, "weights_time")
        constants = [wf, wt]
        if b_name:
            constants.append(integers(graph, b_name, node, "bias"))
    state = node.attr("state")
    s_state = _f32(state["scale"])
    s_wf, s_wt = _f32(float(wf.quant.scale)), _f32(float(wt.quant.scale))  # type: ignore[union-attr]
    # TFLM multiplies and divides the float32 scales in float32 before widening to double.
    m1, sh1 = quantize_multiplier(float(_f32(s_in) * s_wf / s_state), f"{node.name} input multiplier")
    m2, sh2 = quantize_multiplier(float(s_state * s_wt / _f32(s_out)), f"{node.name} output multiplier")
    wide = state["dtype"] == DType.INT16.label
    lo, hi = (-32768, 32767) if wide else (-128, 127)
    params = {
        "rank": int(node.attr("rank")),
        "input_offset": zp_in,
        "output_offset": zp_out,
        "input_multiplier": m1,
        "input_shift": sh1,
        "output_multiplier": m2,
        "output_shift": sh2,
        "input_activation": [lo, hi],
        "output_activation": [-128, 127],
        "state_zero_point": int(state["zero_point"]),
    }
    if is_float_recurrent(graph, node):  # what the params file needs to rebuild the layer
        params["state_scale"] = float(state["scale"])
    kernel = "arm_svdf_state_s16_s8" if wide else "arm_svdf_s8"
    inputs = (x, wf.name, wt.name, constants[2].name if b_name else "")
    return node.evolve(inputs=inputs).with_attrs(kernel=kernel, params=params), constants


# -- LSTM -----------------------------------------------------------------------------------------------


def _lstm(graph: Graph, node: Node) -> tuple[Node, list[Tensor]]:
    x = node.inputs[0]
    s_in, zp_in = _scale_zp(graph, x)
    if is_float_lstm(graph, node):
        node = _float_states(graph, node)
        weights_x, weights_h, biases = _float_constants(graph, node, s_in)
    else:
        weights_x, weights_h, biases = _integer_constants(graph, node)
    hidden, cell = node.attr("hidden_state"), node.attr("cell_state")
    s_hidden, zp_hidden, s_cell = hidden["scale"], int(hidden["zero_point"]), cell["scale"]
    gates = {
        gate: _gate(node, gate, s_in, wx, s_hidden, wh)
        for gate, wx, wh in zip(GATES, weights_x, weights_h, strict=True)
    }
    f32_out, f32_cell = _f32(GATE_OUTPUT_SCALE), _f32(s_cell)
    params: dict[str, Any] = {
        "time_major": bool(node.attr("time_major")),
        "input_offset": -zp_in,
        "hidden_offset": -zp_hidden,
        **_mul(node, "forget_to_cell", float(f32_out) * float(f32_cell) / float(f32_cell)),
        **_mul(node, "input_to_cell", float(f32_out) * float(f32_out) / float(f32_cell)),
        **_mul(node, "output", float(f32_out) * float(f32_out) / float(_f32(s_hidden))),
        "output_offset": zp_hidden,
        "cell_clip": _cell_clip(node.attr("cell_clip", 0.0), s_cell),
        "cell_scale_power": _checked_log2(node, s_cell),
        "cell_activation": node.attr("cell_activation", "tanh"),
        "gates": gates,
    }
    constants = [*weights_x, *weights_h, *biases]
    node = node.evolve(inputs=(x, *(t.name for t in constants)))
    # 16x8 (int16 input and hidden state, int64 biases): the same parameters, TFLM's int16 LSTM
    x_quant = graph.tensor(x).quant
    wide = x_quant is not None and x_quant.dtype is DType.INT16
    kernel = "arm_lstm_unidirectional_s16" if wide else "arm_lstm_unidirectional_s8"
    return node.with_attrs(kernel=kernel, params=params), constants


Constants = tuple[list[Tensor], list[Tensor], list[Tensor]]


def _integer_constants(graph: Graph, node: Node) -> Constants:
    """An int8 .tflite's own integers (input weights, recurrent weights, biases; each in GATES order)."""
    roles = ("input_weights", "recurrent_weights", "bias")
    groups = (node.inputs[1:5], node.inputs[5:9], node.inputs[9:13])
    weights_x, weights_h, biases = (
        [integers(graph, n, node, f"{role}_{g}") for n, g in zip(names, GATES, strict=True)]
        for role, names in zip(roles, groups, strict=True)
    )
    return weights_x, weights_h, biases


# -- a float LSTM (ONNX): TFLite's quantization of it ----------------------------------------------------


def cell_scale(lo: float, hi: float) -> float:
    """TFLite's int16 cell state: symmetric, scale 2^pot / 32768 with pot the smallest integer in [0, 10]
    whose 2^pot covers max(|lo|, |hi|) (its quantizer's GetPowerOfTwoScale: ten steps from 0, so a wider
    range is clipped at 1024), and the kernel's tanh reads the cell as a fixed-point number
    (cell_scale_power = pot - 15)."""
    peak = np.float32(max(abs(lo), abs(hi)))  # TFLite compares its float range
    pot = 0
    for _ in range(10):
        if 2.0**pot < peak:
            pot += 1
    return float(2.0 ** (pot - 15))


def state_scale(lo: float, hi: float) -> float:
    """TFLite's int16 SVDF state (a 16-bit state tensor of its quantizer): symmetric, max(|lo|, |hi|) /
    32767 (GetSymmetricQuantizationParams); 1 / 32767 for a state never seen away from 0."""
    peak = max(abs(lo), abs(hi))
    return float(peak / 32767) if peak > 0 else 1 / 32767


def with_cell_states(graph: Graph, ranges: Mapping[str, tuple[float, float]]) -> Graph:
    """Each float LSTM with its calibrated int16 cell state (the node's cell_state attribute), each float
    SVDF with its calibrated int16 state (its state attribute's dtype, scale and zero point)."""
    for node in graph.nodes:
        if not needs_cell_range(graph, node):
            continue
        key = cell_state_key(node)
        if key not in ranges:
            raise QuantizationError(f"layer {node.name!r}: its cell state has no calibrated range")
        if node.op is Op.SVDF:
            state = {**node.attr("state"), "dtype": DType.INT16.label, "zero_point": 0}
            replaced = node.with_attrs(state={**state, "scale": state_scale(*ranges[key])})
        else:
            cell = {"dtype": DType.INT16.label, "scale": cell_scale(*ranges[key]), "zero_point": 0}
            replaced = node.with_attrs(cell_state=cell)
        graph = graph.replace_node(node, [replaced])
    return graph


TIME_WEIGHT_RANGE = 512.0
"""TFLite's SVDF time weights: int16 holding 10 bits, scale max|w| / 512 (its quantizer's number_of_bits
10: the other 6 bits are left for the sum over the memory)."""


def _float_svdf_state(node: Node) -> Node:
    """The int16 state as calibrated, or as a params file records it (state_scale)."""
    state = node.attr("state")
    if "scale" not in state:
        params = node.attr("params") or {}
        if "state_scale" not in params:
            raise QuantizationError(f"layer {node.name!r}: its state has no scale (calibrate it)")
        scale = float(params["state_scale"])
        state = {**state, "dtype": DType.INT16.label, "scale": scale, "zero_point": 0}
    return node.with_attrs(state=state)


def _float_svdf_constants(graph: Graph, node: Node) -> tuple[Tensor, Tensor, Tensor | None]:
    """TFLite's quantization of a float SVDF: per-tensor symmetric int8 feature weights (max|w| / 127),
    int16 time weights of 10 bits (max|w| / 512, rounded and held within +-32767) and int32 biases at
    s_state * s_time (its derived bias scale)."""
    wf, _ = _int8_weights(graph, node.inputs[1], f"{node.name}.weights_feature")
    w = graph.constant(node.inputs[2]).astype(np.float32)
    peak = float(np.abs(w).max(initial=0.0))
    s_time = float(np.float32(peak) / np.float32(TIME_WEIGHT_RANGE)) if peak > 0 else 1.0
    q = np.clip(np.round(w.astype(np.float64) / s_time), -32767, 32767).astype(np.int16)
    quant = QuantParams(DType.INT16, np.asarray(s_time), np.array(0, np.int64))
    wt = Tensor(f"{node.name}.weights_time", q.shape, DType.INT16, q, quant=quant)
    if not node.inputs[3]:
        return wf, wt, None
    s_state = float(node.attr("state")["scale"])
    b = quantize_bias(graph.constant(node.inputs[3]), s_state, np.asarray(s_time))
    b_quant = QuantParams(DType.INT32, np.asarray(s_state * s_time), np.array(0, np.int64))
    return wf, wt, Tensor(f"{node.name}.bias", b.shape, DType.INT32, b, quant=b_quant)


def _float_states(graph: Graph, node: Node) -> Node:
    """The int8 hidden state at the output's scale and zero point (the kernel writes the hidden state as
    the output); the cell state as calibrated, or as a params file records it (cell_scale_power)."""
    out = graph.tensor(node.outputs[0]).quant
    if out is None:
        raise QuantizationError(f"layer {node.name!r}: its output has no scale")
    hidden = {"dtype": DType.INT8.label, "scale": float(out.scale), "zero_point": int(out.zero_point)}
    cell = node.attr("cell_state")
    if cell is None:
        params = node.attr("params") or {}
        if "cell_scale_power" not in params:
            raise QuantizationError(f"layer {node.name!r}: its cell state has no scale (calibrate it)")
        cell = {"dtype": DType.INT16.label, "scale": 2.0 ** int(params["cell_scale_power"]), "zero_point": 0}
    return node.with_attrs(hidden_state=hidden, cell_state=cell)


def _float_constants(graph: Graph, node: Node, s_in: float) -> Constants:
    """Per-tensor symmetric int8 weights (max|w| / 127) and int32 biases at s_in * s_wx, TFLite's scheme
    for its integer LSTM (the bias is added to the gate's input product)."""
    weights_x, weights_h, biases = [], [], []
    for position, gate in enumerate(GATES):
        wx, s_wx = _int8_weights(graph, node.inputs[1 + position], f"{node.name}.input_weights_{gate}")
        wh, _ = _int8_weights(graph, node.inputs[5 + position], f"{node.name}.recurrent_weights_{gate}")
        b = quantize_bias(graph.constant(node.inputs[9 + position]), s_in, s_wx)
        quant = QuantParams(DType.INT32, np.asarray(s_in * s_wx), np.array(0, np.int64))
        weights_x.append(wx)
        weights_h.append(wh)
        biases.append(Tensor(f"{node.name}.bias_{gate}", b.shape, DType.INT32, b, quant=quant))
    return weights_x, weights_h, biases


def _int8_weights(graph: Graph, name: str, new_name: str) -> tuple[Tensor, np.ndarray]:
    w = graph.constant(name)
    scale = weight_scales(w, None)
    quant = QuantParams(DType.INT8, scale, np.array(0, np.int64))
    q = quantize_weights(w, scale, None)
    return Tensor(new_name, q.shape, DType.INT8, q, quant=quant), scale


def _gate(node: Node, gate: str, s_in: float, wx: Tensor, s_hidden: float, wh: Tensor) -> dict[str, int]:
    """A gate's two fully connected products into Q3.12 (TFLM's CreateGateParams: double products)."""
    scale_x, scale_h = float(_f32(float(wx.quant.scale))), float(_f32(float(wh.quant.scale)))  # type: ignore[union-attr]
    m_x, sh_x = quantize_multiplier(
        float(_f32(s_in)) * scale_x / GATE_INPUT_SCALE, f"{node.name} {gate} gate input multiplier"
    )
    m_h, sh_h = quantize_multiplier(
        float(_f32(s_hidden)) * scale_h / GATE_INPUT_SCALE, f"{node.name} {gate} gate recurrent multiplier"
    )
    return {"input_multiplier": m_x, "input_shift": sh_x, "hidden_multiplier": m_h, "hidden_shift": sh_h}


def _mul(node: Node, name: str, scale: float) -> dict[str, int]:
    mult, shift = quantize_multiplier(scale, f"{node.name} {name} multiplier")
    return {f"{name}_multiplier": mult, f"{name}_shift": shift}


def _cell_clip(clip: float, s_cell: float) -> int:
    """TFLM: static_cast<int16_t>(min(max(double(clip) / double(s_cell), -32768), 32767)), truncating."""
    value = min(max(float(_f32(clip)) / float(_f32(s_cell)), -32768.0), 32767.0)
    return math.trunc(value)


def _checked_log2(node: Node, scale: float) -> int:
    """TFLite's CheckedLog2: round(log2(x)); the cell state's scale must be a power of two."""
    log = math.log2(float(_f32(scale)))
    rounded = int(math.copysign(math.floor(abs(log) + 0.5), log))
    if abs(log - rounded) > 1e-3:
        raise QuantizationError(
            f"layer {node.name!r}: its cell state scale {scale:g} is not a power of two, as TFLite's integer"
            " LSTM requires (the cell's tanh reads it as a fixed-point number); re-convert the model"
        )
    return rounded


__all__ = [
    "RECURRENT_KERNELS",
    "cell_scale",
    "integers",
    "quantize",
    "state_scale",
    "with_cell_states",
]
