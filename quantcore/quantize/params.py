"""The integer parameters of each CMSIS-NN call, computed from the tensors' scales and zero points.

Formulas are TFLite's (which CMSIS-NN's kernels and test data follow): conv/fc multipliers from
s_in * s_w[c] / s_out, elementwise add with left_shift 20 and per-input multipliers relative to twice the
larger input scale, softmax's beta folded into a multiplier with 5 integer bits and its diff_min radius.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantcore.errors import QuantcoreError
from quantcore.ir import Activation, DType
from quantcore.scheme.scaling import quantize_multiplier, quantize_multipliers

ADD_LEFT_SHIFT = {DType.INT8: 20, DType.INT16: 15}
SOFTMAX_INT_BITS = 5  # kScaledDiffIntegerBits in TFLite's int8 softmax


WEIGHTED_KERNELS = frozenset({
    "arm_convolve_wrapper_s8",
    "arm_depthwise_conv_wrapper_s8",
    "arm_fully_connected_s8",
    "arm_fully_connected_per_channel_s8",
    "arm_convolve_wrapper_s16",
    "arm_depthwise_conv_wrapper_s16",
    "arm_fully_connected_s16",
})  # fmt: skip
"""The kernels that take int8 weights and an integer bias (inputs x, weights, bias)."""


class QuantizationError(QuantcoreError):
    """A layer whose scales give parameters CMSIS-NN cannot take; the message names the layer."""


def activation_range(
    activation: Activation, clip: tuple[float, float] | None, scale: float, zero_point: int, dtype: DType
) -> tuple[int, int]:
    """The fused activation as the kernel's [act_min, act_max] in the output's quantized domain."""
    assert dtype.qmin is not None and dtype.qmax is not None
    lo, hi = -math.inf, math.inf
    if activation in (Activation.RELU, Activation.RELU6):
        lo = 0.0
    if activation is Activation.RELU6:
        hi = 6.0
    if activation is Activation.CLIP and clip is not None:
        lo, hi = clip
    q_lo = dtype.qmin if lo == -math.inf else max(dtype.qmin, zero_point + round(lo / scale))
    q_hi = dtype.qmax if hi == math.inf else min(dtype.qmax, zero_point + round(hi / scale))
    return int(q_lo), int(q_hi)


def conv_params(
    layer: str, s_in: float | np.ndarray, zp_in: int, s_w: np.ndarray, s_out: float | np.ndarray, zp_out: int
) -> dict[str, Any]:
    """`s_in` and `s_out` may be per channel (activation scales into a depthwise layer, channel_scales.py):
    arrays as long as s_w, the input's repeated over the channel multiplier."""
    mult, shift = quantize_multipliers(s_in * s_w / s_out, name=f"{layer} output multiplier")
    _check_shifts(layer, shift)
    return {
        "input_offset": -zp_in,
        "output_offset": zp_out,
        "multiplier": mult.tolist(),
        "shift": shift.tolist(),
    }


def add_params(
    layer: str, s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int, dtype: DType = DType.INT8
) -> dict[str, Any]:
    left_shift = ADD_LEFT_SHIFT[dtype]
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * s_out))
    if max(sh1, sh2, sho) > 0:
        raise QuantizationError(
            f"layer {layer!r}: output scale {s_out:g} is too small for inputs of scale {s1:g} and {s2:g}"
            " (arm_elementwise_add_s8 needs every multiplier below 1); widen the output's range"
        )
    return {
        "input_1_offset": -zp1,
        "input_1_mult": m1,
        "input_1_shift": sh1,
        "input_2_offset": -zp2,
        "input_2_mult": m2,
        "input_2_shift": sh2,
        "left_shift": left_shift,
        "out_offset": zp_out,
        "out_mult": mo,
        "out_shift": sho,
    }


def mul_params(
    layer: str, s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int
) -> dict[str, Any]:
    m, sh = quantize_multiplier(s1 * s2 / s_out)
    _check_shifts(layer, np.array([sh]))
    return {
        "input_1_offset": -zp1,
        "input_2_offset": -zp2,
        "out_offset": zp_out,
        "out_mult": m,
        "out_shift": sh,
    }


def requantize_params(layer: str, s_in: float, zp_in: int, s_out: float, zp_out: int) -> dict[str, Any]:
    """A tensor's conversion to another scale/type (TFLite's Quantize of a quantized input)."""
    m, sh = quantize_multiplier(s_in / s_out)
    _check_shifts(layer, np.array([sh]))
    return {"input_offset": -zp_in, "output_offset": zp_out, "multiplier": m, "shift": sh}


def softmax_params(s_in: float, beta: float = 1.0) -> dict[str, Any]:
    """TFLite's PreprocessSoftmaxScaling + CalculateInputRadius for int8 softmax."""
    real = min(beta * s_in * (1 << (31 - SOFTMAX_INT_BITS)), float(2**31 - 1))
    mult, left_shift = quantize_multiplier(real)
    radius = ((1 << SOFTMAX_INT_BITS) - 1) * (1 << (31 - SOFTMAX_INT_BITS)) / (1 << left_shift)
    return {"mult": mult, "shift": left_shift, "diff_min": -math.floor(radius)}


def _check_shifts(layer: str, shift: np.ndarray) -> None:
    if shift.size and int(shift.max()) > 30:
        raise QuantizationError(
            f"layer {layer!r}: requantization scale too large (shift {int(shift.max())} > 30)"
        )
