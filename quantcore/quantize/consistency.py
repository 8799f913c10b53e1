"""Whether a quant-params document's integers follow from the scales and zero points it records.

A layer's kernel parameters (multipliers, shifts, offsets, clamps, the add and softmax constants) and its
bias scale are derived values: `fixpoint quantize` computes them from the tensors' scales and zero points
with quantcore.quantize.params. Believed blindly, a hand edit (a multiplier changed, an input_offset that
no longer negates the input's zero point) becomes firmware that computes something else without a word.
So every derived value is computed again here, with the quantizer's own functions, and compared exactly:
the JSON holds each float as the shortest text that reads back to the same double, and the functions are
deterministic double arithmetic, so a document the quantizer wrote gives back every integer bit for bit.
No tolerance is needed, and none is wanted: an off-by-one multiplier is exactly the hand edit to catch.

A deliberate hand edit stays possible: a layer's "overrides" maps the params keys set by hand to the
reason. Those keys are not compared (a loader warns about them, the editor shows them); a multiplier
set by hand must still be a normalised Q31 mantissa, as every multiplier a scale can give is one.

This module also knows which kernels each op may name (`kernel_problems`, part of the semantic stage,
since code reading the document relies on them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantcore.ir import Activation, DType
from quantcore.quantize import params as P
from quantcore.quantize.graph import SOFTMAX_OUTPUT
from quantcore.quantize.params_problems import Doc, JsonPath, Problem, json_path, quoted

KERNELS: dict[str, tuple[str | None, ...]] = {
    "conv2d": ("arm_convolve_wrapper_s8", "arm_convolve_wrapper_s16"),
    "depthwise_conv2d": ("arm_depthwise_conv_wrapper_s8", "arm_depthwise_conv_wrapper_s16"),
    "fully_connected": (
        "arm_fully_connected_s8",
        "arm_fully_connected_per_channel_s8",
        "arm_fully_connected_s16",
    ),
    "avg_pool": ("arm_avgpool_s8", "arm_avgpool_s16"),
    "max_pool": ("arm_max_pool_s8", "arm_max_pool_s16"),
    "add": ("arm_elementwise_add_s8", "arm_elementwise_add_s16"),
    "mul": ("arm_elementwise_mul_s8", "arm_elementwise_mul_s16"),
    "softmax": ("arm_softmax_s8", "arm_softmax_s8_s16"),
    "concat": (
        "arm_concatenation_s8_x",
        "arm_concatenation_s8_y",
        "arm_concatenation_s8_z",
        "arm_concatenation_s8_w",
    ),
    "pad": ("arm_pad_s8",),
    "reshape": ("arm_reshape_s8", None),
    "transpose": ("arm_transpose_s8",),
    "requantize": ("fixpoint_requantize",),
    "svdf": ("arm_svdf_s8", "arm_svdf_state_s16_s8"),
    "lstm": ("arm_lstm_unidirectional_s8", "arm_lstm_unidirectional_s16"),
}
"""Per op, the kernels the int8 reference executor and the code generator run (what the quantizer
writes); quantcore.support lists CMSIS-NN's wider set, which Fixpoint does not all generate code for."""

_MOVES = ("concat", "pad", "reshape", "transpose")
"""Ops that move data: their kernels (named _s8) also pass int16 through, so the name fixes no dtype."""

_KEEPS_QPARAMS = ("avg_pool", "max_pool", *_MOVES)
"""CMSIS-NN's kernels for these do not requantize: the output has its inputs' scale and zero point."""

_WEIGHT_AXIS = {"conv2d": 0, "depthwise_conv2d": 3, "fully_connected": 0}
"""The output-channel axis of the weights: OHWI, [1, H, W, C*mult], [out, in]."""

Q31_LOW, Q31_HIGH = 1 << 30, (1 << 31) - 1
"""A normalised Q31 multiplier: quantize_multiplier's mantissa in [0.5, 1) (or 0 for a flushed scale)."""

_MULTIPLIER_KEYS = ("multiplier", "input_1_mult", "input_2_mult", "out_mult", "mult")

_REGENERATE = "regenerate the file with fixpoint quantize"


# -- kernels (semantic stage) ------------------------------------------------------------------------


def kernel_problems(doc: Doc, layer: Doc, at: JsonPath) -> Iterator[Problem]:
    """The layer's kernel exists for its op and fits its tensors' dtypes (and its multiplier form)."""
    op, kernel = layer["op"], layer["kernel"]
    allowed = KERNELS[op]
    if kernel not in allowed:
        names = ", ".join(str(k) if k else "null" for k in allowed)
        yield Problem.at(
            (*at, "kernel"), f"{quoted(kernel)} is not a kernel {op} can use (it runs on {names})"
        )
        return
    dtypes = list(_dtype_problems(doc, layer, at))
    if dtypes:  # the wrong kernel variant, or tensors of the wrong type: the rest would only echo it
        yield from dtypes
        return
    if op == "fully_connected":
        yield from _fc_form_problems(layer, at)
    if op in _WEIGHT_AXIS:
        yield from _weight_channel_problems(doc, layer, at)
    for key in layer.get("overrides", {}):
        if key not in layer["params"]:
            yield Problem.at(
                (*at, "overrides", key),
                f"{quoted(key)} is not a parameter of this layer (it has {', '.join(layer['params'])})",
            )


def _dtype_problems(doc: Doc, layer: Doc, at: JsonPath) -> Iterator[Problem]:
    tensors, op, kernel = doc["tensors"], layer["op"], layer["kernel"]
    out_dtype = tensors[layer["outputs"][0]]["dtype"]
    if op == "requantize":
        return
    if op == "softmax":
        wanted = "int8"  # arm_softmax_s8 (int8 out) and arm_softmax_s8_s16 (int16 out) read int8
    elif op in _MOVES:
        wanted = out_dtype
    else:
        wanted = "int16" if kernel.endswith("_s16") else "int8"
        if out_dtype != wanted:
            yield Problem.at(
                (*at, "kernel"),
                f"{kernel} writes {wanted}, but output {quoted(layer['outputs'][0])} is {out_dtype}",
            )
            return
    for index, name in enumerate(layer["inputs"]):
        if tensors[name]["dtype"] != wanted:
            what = kernel if op not in _MOVES else f"{op} (which passes its input through)"
            yield Problem.at(
                (*at, "inputs", index),
                f"{quoted(name)} is {tensors[name]['dtype']}, but {what} reads {wanted}: convert it with a"
                f" requantize layer, or {_REGENERATE}",
            )
    # (an int64 bias on an int8 layer is a semantic-stage problem already)
    if "bias" in layer and wanted == "int16" and tensors[layer["bias"]]["dtype"] != "int64":
        yield Problem.at(("tensors", layer["bias"], "dtype"), f'must be "int64": {kernel} takes int64 biases')


def _fc_form_problems(layer: Doc, at: JsonPath) -> Iterator[Problem]:
    per_channel = isinstance(layer["params"]["multiplier"], list)
    kernel = layer["kernel"]
    if per_channel != isinstance(layer["params"]["shift"], list):
        return  # the forms disagree: the semantic stage reports that first
    if per_channel and kernel != "arm_fully_connected_per_channel_s8":
        yield Problem.at(
            (*at, "kernel"),
            f"{kernel} takes one multiplier (per-tensor weights), but params.multiplier has one per channel"
            + ("; use arm_fully_connected_per_channel_s8" if kernel.endswith("_s8") else ""),
        )
    elif not per_channel and kernel == "arm_fully_connected_per_channel_s8":
        yield Problem.at(
            (*at, "kernel"),
            f"{kernel} takes one multiplier per channel, but params.multiplier is one number;"
            " use arm_fully_connected_s8",
        )


def _weight_channel_problems(doc: Doc, layer: Doc, at: JsonPath) -> Iterator[Problem]:
    """The weights' channel axis is the op's, and holds one entry per output channel, per tensor too."""
    weights = doc["tensors"][layer["weights"]]
    axis, shape = _WEIGHT_AXIS[layer["op"]], weights["shape"]
    if "axis" in weights:  # per channel: the semantic stage matched shape[axis] with the output already
        if weights["axis"] != axis and weights["axis"] < len(shape):
            yield Problem.at(
                ("tensors", layer["weights"], "axis"),
                f"must be {axis}, the output-channel axis of {layer['op']} weights, got {weights['axis']}",
            )
        return
    channels = doc["tensors"][layer["outputs"][0]]["shape"][-1]
    if axis >= len(shape) or shape[axis] != channels:
        yield Problem.at(
            ("tensors", layer["weights"], "shape"),
            f"must have {channels} entries on axis {axis}, one per channel of output"
            f" {quoted(layer['outputs'][0])}, got shape {shape}",
        )


# -- derived values (consistency stage) ----------------------------------------------------------------


@dataclass(frozen=True)
class Derived:
    """One value of the document that follows from others: where, what it is, what it must be, and why."""

    path: JsonPath
    recorded: Any
    expected: Any
    basis: str
    """What it follows from, e.g. "s_in 0.02 * s_w[3] 0.004 / s_out 0.05 gives multiplier ..., shift ..."."""
    key: str | None = None
    """The params key, when a layer's "overrides" may exempt it; None: never exempt (a bias scale)."""


def problems(doc: Doc) -> Iterator[Problem]:
    """Every derived value of a structurally valid document that differs from what its inputs give."""
    for index, layer in enumerate(doc["layers"]):
        yield from _layer_problems(doc["tensors"], layer, ("layers", index))


def overrides(doc: Doc) -> list[tuple[JsonPath, str]]:
    """(path of the params value, reason) for every key a layer says was set by hand."""
    return [
        (("layers", index, "params", key), reason)
        for index, layer in enumerate(doc["layers"])
        for key, reason in layer.get("overrides", {}).items()
    ]


def _layer_problems(tensors: Doc, layer: Doc, at: JsonPath) -> Iterator[Problem]:
    view = _View(tensors, layer, at)
    hand = set(layer.get("overrides", {}))
    reported: set[JsonPath] = set()
    try:
        derived = list(_DERIVATIONS[layer["op"]](view))
    except P.QuantizationError as exc:
        yield Problem.at((*at, "params"), f"the recorded scales give no parameters CMSIS-NN can take: {exc}")
        return
    for item in derived:
        if item.key in hand:
            continue
        if item.recorded != item.expected and item.path not in reported:
            reported.add(item.path)  # one problem per value, though several inputs may fix it
            yield Problem.at(item.path, _mismatch(item, at), item.expected)
    for key in sorted(hand & set(_MULTIPLIER_KEYS)):
        yield from _normalised(layer["params"][key], (*at, "params", key))


def _mismatch(item: Derived, at: JsonPath) -> str:
    text = f"{_number(item.recorded)} does not follow from {item.basis}"
    if item.key is None:
        return f"{text}; {_REGENERATE}"
    return (
        f"{text}; {_REGENERATE}, or, if it was set by hand on purpose, record that as"
        f' {json_path((*at, "overrides"))}: {{"{item.key}": "<why>"}}'
    )


def _normalised(value: Any, at: JsonPath) -> Iterator[Problem]:
    values = value if isinstance(value, list) else [value]
    for index, multiplier in enumerate(values):
        if multiplier != 0 and not Q31_LOW <= multiplier <= Q31_HIGH:
            where = (*at, index) if isinstance(value, list) else at
            yield Problem.at(
                where,
                f"{multiplier}, set by hand, is not a normalised Q31 multiplier (0 or in [{Q31_LOW},"
                f" {Q31_HIGH}]): write the same factor with a mantissa in [0.5, 1) and adjust the shift",
            )


@dataclass(frozen=True)
class _View:
    """A layer and the tensors it names, for the derivations."""

    tensors: Doc
    layer: Doc
    at: JsonPath

    @property
    def params(self) -> Doc:
        params: Doc = self.layer["params"]
        return params

    def qparams(self, name: str) -> tuple[float, int]:
        return float(self.tensors[name]["scale"]), int(self.tensors[name]["zero_point"])

    def scales(self, name: str) -> tuple[float | np.ndarray, int]:
        """A tensor's scale, per channel (an array) for an activation with per-channel scales (the
        semantic stage allows those only between a conv-like producer and depthwise readers)."""
        scale = self.tensors[name]["scale"]
        values = np.asarray(scale, np.float64) if isinstance(scale, list) else float(scale)
        return values, int(self.tensors[name]["zero_point"])

    def input(self, index: int = 0) -> tuple[str, float, int]:
        name = self.layer["inputs"][index]
        return (name, *self.qparams(name))

    def output(self) -> tuple[str, float, int]:
        name = self.layer["outputs"][0]
        return (name, *self.qparams(name))

    def dtype(self, name: str) -> DType:
        return DType.INT16 if self.tensors[name]["dtype"] == "int16" else DType.INT8

    def param(self, key: str, expected: Any, basis: str) -> Derived:
        return Derived((*self.at, "params", key), self.params[key], expected, basis, key)


# -- one derivation per op -----------------------------------------------------------------------------


def _offsets(view: _View, keys: Sequence[tuple[str, int | None]]) -> Iterator[Derived]:
    """Input offsets negate their input's zero point, output offsets are the output's zero point."""
    for key, input_index in keys:
        if input_index is None:
            name = view.layer["outputs"][0]
            zero_point = view.scales(name)[1]  # per-channel scales (a conv's output) share one zero point
            yield view.param(key, zero_point, f"the zero point of output {quoted(name)}: it must equal it")
        else:
            name = view.layer["inputs"][input_index]
            zero_point = view.scales(name)[1]
            yield view.param(
                key,
                -zero_point,
                f"the zero point of input {quoted(name)} ({zero_point}): it must be its negation",
            )


def _clamp(view: _View) -> Iterator[Derived]:
    """act_min/act_max of a fused none/relu/relu6 (a "clip" records no bounds to compare with). With
    per-channel output scales every channel's clamp must be the one pair the kernel takes: the first
    channel that gives another is named."""
    activation = Activation(view.layer.get("activation", "none"))
    if activation is Activation.CLIP:
        return
    name = view.layer["outputs"][0]
    scales, zero_point = view.scales(name)
    per_channel, flat = np.ndim(scales) > 0, [float(s) for s in np.ravel(scales)]
    pairs = [P.activation_range(activation, None, s, zero_point, view.dtype(name)) for s in flat]
    for key, index in (("act_min", 0), ("act_max", 1)):
        codes = [pair[index] for pair in pairs]
        channel = next((c for c, code in enumerate(codes) if code != view.params[key]), 0)
        scale, code = flat[channel], codes[channel]
        where = f"scale[{channel}] {scale:.6g}" if per_channel else f"scale {scale:.6g}"
        basis = (
            f"the layer's activation {activation.value!r} on output {quoted(name)} ({where}, zero point"
            f" {zero_point}, {view.tensors[name]['dtype']}), which gives {code}"
        )
        yield view.param(key, code, basis)


def _channel_values(
    view: _View, key: str, expected: list[int], basis: Callable[[int], str]
) -> Iterator[Derived]:
    """A per-channel parameter (a list), or one number standing for every channel; only mismatches are
    described (a layer may have thousands of channels)."""
    recorded = view.params[key]
    path: JsonPath = (*view.at, "params", key)
    if isinstance(recorded, list):
        for channel, value in enumerate(expected):
            if recorded[channel] != value:
                yield Derived((*path, channel), recorded[channel], value, basis(channel), key)
        return
    mismatch = next((c for c, value in enumerate(expected) if value != recorded), None)
    if mismatch is not None:
        yield Derived(path, recorded, expected[mismatch], basis(mismatch), key)


def _weighted(view: _View) -> Iterator[Derived]:
    """conv2d, depthwise_conv2d, fully_connected: per channel s_in * s_w[c] / s_out (TFLite's formula)."""
    in_name, out_name = view.layer["inputs"][0], view.layer["outputs"][0]
    (s_in, zp_in), (s_out, zp_out) = view.scales(in_name), view.scales(out_name)
    channels = view.tensors[out_name]["shape"][-1]
    s_w = np.broadcast_to(np.asarray(view.tensors[view.layer["weights"]]["scale"], np.float64), (channels,))
    if np.ndim(s_in):  # per-channel input of a depthwise layer: output channel c reads channel c // ch_mult
        if channels % np.size(s_in):
            raise P.QuantizationError(
                f"{np.size(s_in)} input scales do not divide the {channels} output channels evenly"
            )
        s_in = np.repeat(s_in, channels // np.size(s_in))
    expected = P.conv_params(view.layer["name"], s_in, zp_in, s_w, s_out, zp_out)
    mults, shifts = expected["multiplier"], expected["shift"]

    def scales(c: int) -> str:
        s_in_c, s_out_c = _channel(s_in, c), _channel(s_out, c)
        return f"the recorded scales: s_in{s_in_c} * s_w[{c}] {s_w[c]:.6g} / s_out{s_out_c}"

    yield from _channel_values(
        view, "multiplier", mults, lambda c: f"{scales(c)} gives {mults[c]} (shift {shifts[c]})"
    )
    yield from _channel_values(
        view, "shift", shifts, lambda c: f"{scales(c)} gives shift {shifts[c]} (multiplier {mults[c]})"
    )
    yield from _offsets(view, [("input_offset", 0), ("output_offset", None)])
    if view.layer["op"] == "fully_connected":
        yield view.param("filter_offset", 0, "the weights' zero point 0 (weights are symmetric)")
    if view.layer["op"] == "depthwise_conv2d":
        ch_mult = channels // view.tensors[in_name]["shape"][-1]
        between = f"the channels of output {quoted(out_name)} over those of input {quoted(in_name)}"
        yield view.param("ch_mult", ch_mult, f"{between}, which give {ch_mult}")
    yield from _clamp(view)
    if "bias" in view.layer:
        yield from _bias_scales(view, s_in, s_w)


def _channel(scale: float | np.ndarray, c: int) -> str:
    """ " 0.02" for a per-tensor scale, "[3] 0.02" for channel c of a per-channel one."""
    return f"[{c}] {float(scale[c]):.6g}" if isinstance(scale, np.ndarray) else f" {scale:.6g}"


def _bias_scales(view: _View, s_in: float | np.ndarray, s_w: np.ndarray) -> Iterator[Derived]:
    """The bias is added to sum(x * w), whose scale is s_in * s_w[c] (s_in[c // ch_mult] for a depthwise
    layer's per-channel input): at any other scale it is wrong."""
    name = view.layer["bias"]
    recorded = view.tensors[name]["scale"]
    path: JsonPath = ("tensors", name, "scale")
    expected = (s_in * s_w).tolist()
    for channel, value in enumerate(expected):
        here = recorded[channel] if isinstance(recorded, list) else recorded
        if here == value:
            continue
        basis = (
            f"the recorded scales: s_in{_channel(s_in, channel)} * s_w[{channel}] {s_w[channel]:.6g} gives"
            f" {value!r} (the accumulator's scale, at which the kernel adds the bias)"
        )
        yield Derived((*path, channel) if isinstance(recorded, list) else path, here, value, basis)
        if not isinstance(recorded, list):
            return


_ADD_DERIVED = (
    "input_1_mult",
    "input_1_shift",
    "input_2_mult",
    "input_2_shift",
    "left_shift",
    "out_mult",
    "out_shift",
)


def _add(view: _View) -> Iterator[Derived]:
    (a, s1, zp1), (b, s2, zp2), (out, so, zo) = view.input(0), view.input(1), view.output()
    expected = P.add_params(view.layer["name"], s1, zp1, s2, zp2, so, zo, view.dtype(out))
    scales = f"{quoted(a)} {s1:.6g}, {quoted(b)} {s2:.6g}, output {so:.6g}"
    for key in _ADD_DERIVED:
        basis = f"the recorded scales ({scales}) in TFLite's add scheme, which give {expected[key]}"
        yield view.param(key, expected[key], basis)
    yield from _offsets(view, [("input_1_offset", 0), ("input_2_offset", 1), ("out_offset", None)])
    yield from _clamp(view)


def _mul(view: _View) -> Iterator[Derived]:
    (_, s1, zp1), (_, s2, zp2), (_, so, zo) = view.input(0), view.input(1), view.output()
    expected = P.mul_params(view.layer["name"], s1, zp1, s2, zp2, so, zo)
    scales = f"the recorded scales: s_1 {s1:.6g} * s_2 {s2:.6g} / s_out {so:.6g}"
    m, sh = expected["out_mult"], expected["out_shift"]
    yield view.param("out_mult", m, f"{scales} gives {m} (shift {sh})")
    yield view.param("out_shift", sh, f"{scales} gives shift {sh} (multiplier {m})")
    yield from _offsets(view, [("input_1_offset", 0), ("input_2_offset", 1), ("out_offset", None)])
    yield from _clamp(view)


def _requantize(view: _View) -> Iterator[Derived]:
    (_, s_in, zp_in), (out, s_out, zp_out) = view.input(), view.output()
    expected = P.requantize_params(view.layer["name"], s_in, zp_in, s_out, zp_out)
    scales = f"the recorded scales: s_in {s_in:.6g} / s_out {s_out:.6g}"
    m, sh = expected["multiplier"], expected["shift"]
    yield view.param("multiplier", m, f"{scales} gives {m} (shift {sh})")
    yield view.param("shift", sh, f"{scales} gives shift {sh} (multiplier {m})")
    yield from _offsets(view, [("input_offset", 0), ("output_offset", None)])
    dtype = view.dtype(out)
    for key, bound in (("act_min", dtype.qmin), ("act_max", dtype.qmax)):
        yield view.param(
            key,
            bound,
            f"the {dtype.label} range of output {quoted(out)}: a conversion does not clamp further",
        )


def _nothing(view: _View) -> Iterator[Derived]:
    return iter(())


def _softmax(view: _View) -> Iterator[Derived]:
    (_, s_in, _), (out, s_out, zp_out) = view.input(), view.output()
    expected = P.softmax_params(s_in)
    basis = f"the recorded input scale {s_in:.6g} (beta 1, TFLite's int8 softmax scaling)"
    for key in ("mult", "shift", "diff_min"):
        yield view.param(key, expected[key], f"{basis}, which gives {expected[key]}")
    if view.layer["kernel"] == "arm_softmax_s8_s16":  # an int8 .tflite's int16 output, scale ~1/65536
        why = "arm_softmax_s8_s16 writes its output at zero point -32768"
        yield Derived(("tensors", out, "zero_point"), zp_out, -32768, f"the kernel: {why}")
        return
    fixed_scale, fixed_zero_point = SOFTMAX_OUTPUT
    why = "arm_softmax_s8 writes its output at scale 1/256, zero point -128"
    yield Derived(
        ("tensors", out, "scale"), s_out, fixed_scale, f"the kernel: {why}, so it must be {fixed_scale}"
    )
    yield Derived(("tensors", out, "zero_point"), zp_out, fixed_zero_point, f"the kernel: {why}")


def _keeps_qparams(view: _View) -> Iterator[Derived]:
    """Pools and data movement: the output's scale and zero point are every input's."""
    out, s_out, zp_out = view.output()
    kernel = view.layer["kernel"] or view.layer["op"]
    for index in range(len(view.layer["inputs"])):
        name, scale, zero_point = view.input(index)
        why = f"input {quoted(name)}: {kernel} does not requantize, its output keeps its input's"
        yield Derived(("tensors", out, "scale"), s_out, scale, f"the scale of {why} ({scale!r})")
        yield Derived(
            ("tensors", out, "zero_point"), zp_out, zero_point, f"the zero point of {why} ({zero_point})"
        )
    if view.layer["op"] in ("avg_pool", "max_pool"):
        yield from _clamp(view)
    if view.layer["op"] == "pad":
        name, _, zero_point = view.input()
        yield view.param(
            "pad_value", zero_point, f"the zero point of input {quoted(name)}: zero padding pads with it"
        )


_DERIVATIONS: dict[str, Callable[[_View], Iterator[Derived]]] = {
    "conv2d": _weighted,
    "depthwise_conv2d": _weighted,
    "fully_connected": _weighted,
    "add": _add,
    "mul": _mul,
    "requantize": _requantize,
    "softmax": _softmax,
    # The recurrent layers' parameters follow from their constants' and states' scales, which the file
    # does not hold (an int8 .tflite's own): the importer computes them as TFLM does.
    "svdf": _nothing,
    "lstm": _nothing,
    **{op: _keeps_qparams for op in _KEEPS_QPARAMS},
}


def _number(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)
