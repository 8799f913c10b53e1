"""The reference kernels against CMSIS-NN compiled for this machine, on seeded random calls, both roundings.

CMSIS-NN's test vectors pin one input per case and only the default rounding. Here every kernel gets a few
hundred random calls - shapes, geometry (TFLite's VALID and SAME padding, explicit padding, strides,
dilation, groups, batches), offsets, requantization multipliers, clamps and inputs, all inside the ranges
the reference validates - and compiled CMSIS-NN must write the reference's bytes, in the default build and
in one with CMSIS_NN_USE_SINGLE_ROUNDING. All calls of a kernel go to tests/integration/c/kernel_calls.c
in one run.

Multipliers are mostly what TFLite's QuantizeMultiplier makes of a plausible scale; some have their low
bits cleared, so that requantization lands exactly on ties (where the two roundings differ), and some are
anywhere in the valid range. A case is reproducible alone: its generator is seeded with (SEED, kernel
code, case index), and `cases(name)[index]` gives it back. Needs a CMSIS-NN checkout, found as the product
finds one; skipped without.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore.errors import CmsisNnNotFound, KernelArgumentError
from quantcore.kernels.requantize import Rounding
from quantcore.scheme.scaling import quantize_multiplier, quantize_multipliers
from quantcore.targets import cmsis_nn
from tests import needs
from tests.integration.kernel_harness import KERNELS, build_kernel_calls, describe, mismatch, run_calls

pytestmark = pytest.mark.cmsis_nn

try:
    CHECKOUT = cmsis_nn.locate()
except CmsisNnNotFound as missing:
    needs.absent(str(missing), allow_module_level=True)

SEED = 20240917
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
Gen = np.random.Generator
Case = dict[str, Any]


# ------------------------------------------------------------------------------ random parameters


def _int(rng: Gen, lo: int, hi: int) -> int:
    """Uniform in [lo, hi]."""
    return int(rng.integers(lo, hi, endpoint=True))


def _values(rng: Gen, shape: tuple[int, ...], dtype: type[np.integer[Any]]) -> np.ndarray:
    """Inputs over the whole type, over a random part of it (activations rarely fill their range), or
    rarely all at one end (the largest sums, where C's int32 accumulators wrap)."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    mode = rng.random()
    if mode < 0.04:
        return np.full(shape, lo if mode < 0.02 else hi, dtype)
    if mode < 0.4:
        lo, hi = sorted(_int(rng, lo, hi) for _ in range(2))
    return rng.integers(lo, hi, endpoint=True, size=shape).astype(dtype)


def _clamp(rng: Gen, dtype: type[np.integer[Any]]) -> dict[str, int]:
    """No clamp, or a random narrower one (a fused ReLU-like activation), rarely a single value."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    mode = rng.random()
    if mode < 0.4:
        lo, hi = _int(rng, lo, lo // 4), _int(rng, hi // 4, hi)
    elif mode < 0.45:
        lo = hi = _int(rng, lo, hi)
    return {"act_min": lo, "act_max": hi}


def _rms(values: np.ndarray, axis: int | tuple[int, ...] | None = None) -> Any:
    rms = np.sqrt(np.mean(np.square(values.astype(np.float64)), axis=axis))
    return np.where(rms > 0, rms, 1.0)


def _target(rng: Gen, dtype: type[np.integer[Any]]) -> float:
    """The output spread to aim at: from well inside the type to mostly saturated."""
    return float(rng.uniform(4, 100) if dtype is np.int8 else rng.uniform(200, 30000))


def _quant(rng: Gen, real: np.ndarray, shift_range: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """int32 (multiplier, shift) per element of the real scales `real`: TFLite's, tie-prone, or anything
    arm_nn_requantize documents (negative multipliers and shifts that overflow included)."""
    mode = rng.random()
    if mode < 0.1:
        mult = rng.integers(INT32_MIN + 1, INT32_MAX, endpoint=True, size=real.shape)
        shift = rng.integers(*shift_range, endpoint=True, size=real.shape)
        return mult.astype(np.int32), shift.astype(np.int32)
    mult64, shift64 = (a.astype(np.int64) for a in quantize_multipliers(real))
    if mode < 0.4:
        # Clearing the low bits keeps the scale but makes acc * multiplier / 2^(31 - shift) end in an exact
        # half far more often: the cases where DOUBLE and SINGLE rounding disagree.
        cleared = rng.integers(16, 31, size=real.shape)
        mult64 = (mult64 >> cleared) << cleared
    shift64 = np.clip(shift64, *shift_range)
    return mult64.astype(np.int32), shift64.astype(np.int32)


def _quant1(rng: Gen, real: float, shift_range: tuple[int, int]) -> tuple[int, int]:
    mult, shift = _quant(rng, np.array([real]), shift_range)
    return int(mult[0]), int(shift[0])


def _axis(rng: Gen, size: int, k: int, dilation: int, stride: int) -> tuple[int, int]:
    """(padding before, output size) on one axis: TFLite VALID or SAME (odd padding goes after, so
    windows reach past the input's end), or an explicit symmetric padding below the window's span."""
    span = (k - 1) * dilation + 1
    mode = rng.integers(3)
    if mode == 0 and size >= span:
        return 0, (size - span) // stride + 1
    if mode == 2:
        pad = _int(rng, 0, span - 1)
        out = (size + 2 * pad - span) // stride + 1
        if out >= 1:
            return pad, out
    out = -(-size // stride)
    return max((out - 1) * stride + span - size, 0) // 2, out


def _geometry(rng: Gen, hw: tuple[int, int], k: tuple[int, int], dilation: tuple[int, int]) -> Case:
    stride = (_int(rng, 1, 3), _int(rng, 1, 3)) if rng.random() < 0.6 else (1, 1)
    (ph, oh), (pw, ow) = (_axis(rng, hw[i], k[i], dilation[i], stride[i]) for i in (0, 1))
    return {"stride": stride, "padding": (ph, pw), "output_hw": (oh, ow)}


def _dilation(rng: Gen) -> tuple[int, int]:
    return (_int(rng, 1, 3), _int(rng, 1, 3)) if rng.random() < 0.35 else (1, 1)


def _bias(rng: Gen, spread: np.ndarray, dtype: type[np.integer[Any]]) -> np.ndarray | None:
    if rng.random() < 0.15:
        return None
    return np.round(rng.normal(0.0, spread)).astype(dtype)


# ------------------------------------------------------------------------------------- convolutions


def _conv_shape(rng: Gen, s16: bool) -> dict[str, Any]:
    """Shapes that reach each arm_convolve_wrapper_s8 path: 1x1 (fast when stride 1), 1xN, generic, grouped;
    for s16 (no groups) a deep one crossing the 512 columns arm_nn_mat_mult_kernel_s16 sums in int32."""
    family = rng.choice(["1x1", "1xn", "generic", "grouped" if not s16 else "deep"], p=[0.2, 0.2, 0.4, 0.2])
    n, h, w = _int(rng, 1, 3), _int(rng, 1, 10), _int(rng, 1, 10)
    k, dilation = (_int(rng, 1, 5), _int(rng, 1, 5)), _dilation(rng)
    groups, group_ch, per_group = 1, _int(rng, 1, 8), _int(rng, 1, 8)
    if family == "1x1":
        k, dilation = (1, 1), (1, 1)
    elif family == "1xn":
        # arm_nn_is_convolve_1_x_n: input height 1, kernel height 1, no width dilation, stride_w * C % 4 == 0.
        h, k, dilation, group_ch = 1, (1, k[1]), (dilation[0], 1), 4 * _int(rng, 1, 3)
    elif family == "grouped":
        groups, group_ch = _int(rng, 2, 4), _int(rng, 1, 4)
    elif family == "deep":
        n, h, w, k, group_ch = 1, _int(rng, 3, 5), _int(rng, 3, 5), (3, 3), _int(rng, 48, 80)
    return {"n": n, "hw": (h, w), "k": k, "dilation": dilation, "groups": groups, "c": (group_ch, per_group)}


def _conv_s8(rng: Gen) -> Case:
    shape = _conv_shape(rng, s16=False)
    (group_ch, per_group), groups, (kh, kw) = shape["c"], shape["groups"], shape["k"]
    x = _values(rng, (shape["n"], *shape["hw"], groups * group_ch), np.int8)
    weights = _values(rng, (groups * per_group, kh, kw, group_ch), np.int8)
    input_offset = _int(rng, -127, 128)
    spread = (
        math.sqrt(kh * kw * group_ch)
        * float(_rms(x.astype(np.int64) + input_offset))
        * _rms(weights, (1, 2, 3))
    )
    real = _target(rng, np.int8) / spread * np.exp(rng.normal(0, 0.25, spread.shape))
    multiplier, shift = _quant(rng, real, (-31, 30))
    bias = _bias(rng, spread, np.int32)
    if groups > 1 and bias is None:
        # arm_convolve_s8 steps its bias pointer per group even when it is NULL, then reads through it
        # (a crash); the reference accepts the call, so grouped calls here always have a bias.
        bias = np.zeros(spread.shape, np.int32)
    return {
        "x": x,
        "weights": weights,
        "bias": bias,
        "multiplier": multiplier,
        "shift": shift,
        "input_offset": input_offset,
        "output_offset": _int(rng, -128, 127),
        "dilation": shape["dilation"],
        **_geometry(rng, shape["hw"], shape["k"], shape["dilation"]),
        **_clamp(rng, np.int8),
    }


def _depthwise_shape(rng: Gen) -> dict[str, Any]:
    """Half the calls qualify for arm_depthwise_conv_s8_opt (ch_mult 1, one batch, no dilation); the rest
    use the generic kernel with channel multipliers (4 and 8 take its ch_mult % 4 path), dilation, batches."""
    if rng.random() < 0.5:
        n, ch_mult, dilation = 1, 1, (1, 1)
    else:
        n, ch_mult, dilation = _int(rng, 1, 2), int(rng.choice([1, 2, 3, 4, 8])), _dilation(rng)
    k = (3, 3) if rng.random() < 0.4 else (_int(rng, 1, 5), _int(rng, 1, 5))
    hw = (_int(rng, 1, 10), _int(rng, 1, 10))
    if rng.random() < 0.08:
        # Large kernels; from 512 taps arm_depthwise_conv_wrapper_s16 leaves arm_depthwise_conv_fast_s16.
        k, dilation = (_int(rng, 6, 24), _int(rng, 6, 24)), (1, 1)
        hw = (_int(rng, k[0] - 2, 26), _int(rng, k[1] - 2, 26))
    return {"n": n, "hw": hw, "c": _int(rng, 1, 8), "ch_mult": ch_mult, "k": k, "dilation": dilation}


def _depthwise_s8(rng: Gen) -> Case:
    shape = _depthwise_shape(rng)
    c, (kh, kw) = shape["c"], shape["k"]
    x = _values(rng, (shape["n"], *shape["hw"], c), np.int8)
    weights = _values(rng, (1, kh, kw, c * shape["ch_mult"]), np.int8)
    input_offset = _int(rng, -127, 128)
    spread = math.sqrt(kh * kw) * float(_rms(x.astype(np.int64) + input_offset)) * _rms(weights, (0, 1, 2))
    real = _target(rng, np.int8) / spread * np.exp(rng.normal(0, 0.25, spread.shape))
    multiplier, shift = _quant(rng, real, (-31, 30))
    return {
        "x": x,
        "weights": weights,
        "bias": _bias(rng, spread, np.int32),
        "multiplier": multiplier,
        "shift": shift,
        "input_offset": input_offset,
        "output_offset": _int(rng, -128, 127),
        "dilation": shape["dilation"],
        **_geometry(rng, shape["hw"], shape["k"], shape["dilation"]),
        **_clamp(rng, np.int8),
    }


def _conv_s16(rng: Gen) -> Case:
    shape = _conv_shape(rng, s16=True)
    (c_in, c_out), (kh, kw) = shape["c"], shape["k"]
    x = _values(rng, (shape["n"], *shape["hw"], c_in), np.int16)
    weights = _values(rng, (c_out, kh, kw, c_in), np.int8)
    int32_bias = bool(rng.random() < 0.4)
    spread = math.sqrt(kh * kw * c_in) * float(_rms(x)) * _rms(weights, (1, 2, 3))
    real = _target(rng, np.int16) / spread * np.exp(rng.normal(0, 0.25, spread.shape))
    # arm_nn_requantize (int32 bias) takes shifts up to 30; arm_nn_requantize_s64 (int64 bias) up to 7.
    multiplier, shift = _quant(rng, real, (-31, 30) if int32_bias else (-31, 7))
    return {
        "x": x,
        "weights": weights,
        "bias": _bias(rng, spread, np.int32 if int32_bias else np.int64),
        "multiplier": multiplier,
        "shift": shift,
        "int32_bias": int32_bias,
        "dilation": shape["dilation"],
        **_geometry(rng, shape["hw"], shape["k"], shape["dilation"]),
        **_clamp(rng, np.int16),
    }


def _depthwise_s16(rng: Gen) -> Case:
    shape = _depthwise_shape(rng)
    c, (kh, kw) = shape["c"], shape["k"]
    x = _values(rng, (shape["n"], *shape["hw"], c), np.int16)
    weights = _values(rng, (1, kh, kw, c * shape["ch_mult"]), np.int8)
    spread = math.sqrt(kh * kw) * float(_rms(x)) * _rms(weights, (0, 1, 2))
    real = _target(rng, np.int16) / spread * np.exp(rng.normal(0, 0.25, spread.shape))
    multiplier, shift = _quant(rng, real, (-31, 7))
    return {
        "x": x,
        "weights": weights,
        "bias": _bias(rng, spread, np.int64),
        "multiplier": multiplier,
        "shift": shift,
        "dilation": shape["dilation"],
        **_geometry(rng, shape["hw"], shape["k"], shape["dilation"]),
        **_clamp(rng, np.int16),
    }


# ---------------------------------------------------------------------------------- fully connected


def _fc_shape(rng: Gen) -> tuple[int, int, int]:
    depth = int(np.exp(rng.uniform(0, math.log(300))))
    return _int(rng, 1, 4), depth, _int(rng, 1, 32)


def _fc_s8(rng: Gen, per_channel: bool) -> Case:
    batches, depth, out_ch = _fc_shape(rng)
    x = _values(rng, (batches, depth), np.int8)
    weights = _values(rng, (out_ch, depth), np.int8)
    input_offset = _int(rng, -127, 128)
    # The C API documents filter_offset 0 (symmetric weights), but every path adds it; so does the reference.
    filter_offset = 0 if rng.random() < 0.7 else _int(rng, -127, 128)
    rows = _rms(weights.astype(np.int64) + filter_offset, 1)
    spread = math.sqrt(depth) * float(_rms(x.astype(np.int64) + input_offset)) * rows
    case: Case = {
        "x": x,
        "weights": weights,
        "bias": _bias(rng, spread, np.int32),
        "input_offset": input_offset,
        "filter_offset": filter_offset,
        "output_offset": _int(rng, -128, 127),
        **_clamp(rng, np.int8),
    }
    target = _target(rng, np.int8)
    if per_channel:
        real = target / spread * np.exp(rng.normal(0, 0.25, spread.shape))
        case["multiplier"], case["shift"] = _quant(rng, real, (-31, 30))
    else:
        case["multiplier"], case["shift"] = _quant1(rng, target / float(np.mean(spread)), (-31, 30))
    return case


def _fc_s16(rng: Gen) -> Case:
    batches, depth, out_ch = _fc_shape(rng)
    x = _values(rng, (batches, depth), np.int16)
    weights = _values(rng, (out_ch, depth), np.int8)
    spread = math.sqrt(depth) * float(_rms(x)) * _rms(weights, 1)
    multiplier, shift = _quant1(rng, _target(rng, np.int16) / float(np.mean(spread)), (-31, 7))
    return {
        "x": x,
        "weights": weights,
        "bias": _bias(rng, spread, np.int64),
        "multiplier": multiplier,
        "shift": shift,
        **_clamp(rng, np.int16),
    }


# ------------------------------------------------------------------------------------------ pooling


def _pool(dtype: type[np.integer[Any]]) -> Callable[[Gen], Case]:
    def generate(rng: Gen) -> Case:
        hw = (_int(rng, 1, 10), _int(rng, 1, 10))
        kernel = (_int(rng, 1, 5), _int(rng, 1, 5))
        if rng.random() < 0.1:
            # Global pooling (the window is the whole input), as networks end.
            hw = (_int(rng, 1, 32), _int(rng, 1, 32))
            kernel = hw
        x = _values(rng, (_int(rng, 1, 3), *hw, _int(rng, 1, 12)), dtype)
        return {"x": x, "kernel": kernel, **_geometry(rng, hw, kernel, (1, 1)), **_clamp(rng, dtype)}

    return generate


# ------------------------------------------------------------------------------------------ softmax


def _rows_shape(rng: Gen) -> tuple[int, ...]:
    row = _int(rng, 1, 64) if rng.random() < 0.9 else _int(rng, 65, 300)
    return (_int(rng, 1, 3), _int(rng, 1, 4), row) if rng.random() < 0.3 else (_int(rng, 1, 6), row)


def _softmax_s8(rng: Gen) -> Case:
    """TFLite's PreprocessSoftmaxScaling (beta * input scale in Q5.26) and CalculateInputRadius, or any
    valid triple (shift in [0, 31], a non-negative multiplier, any diff_min)."""
    x = _values(rng, _rows_shape(rng), np.int8)
    if rng.random() < 0.15:
        diff_min = _int(rng, -300, 5) if rng.random() < 0.7 else -int(np.exp(rng.uniform(0, math.log(2**31))))
        return {"x": x, "mult": _int(rng, 0, INT32_MAX), "shift": _int(rng, 0, 31), "diff_min": diff_min}
    beta = 1.0 if rng.random() < 0.5 else float(rng.uniform(0.3, 2.0))
    scale = float(np.exp(rng.uniform(math.log(1 / 256), math.log(1 / 4))))
    mult, shift = quantize_multiplier(min(beta * scale * 2**26, 2.0**31 - 1))
    if rng.random() < 0.3:
        mult = (mult >> 16) << 16
    radius = math.floor(31 * 2**26 / 2**shift)
    return {"x": x, "mult": mult, "shift": shift, "diff_min": -radius}


def _softmax_s16(rng: Gen) -> Case:
    """TFLite Micro's int16 softmax scaling (input scale * beta mapped so that 65535 steps span [-10, 0])."""
    x = _values(rng, (*_rows_shape(rng)[:-1], _int(rng, 1, 64)), np.int16)
    beta = 1.0 if rng.random() < 0.5 else float(rng.uniform(0.3, 2.0))
    scale = float(np.exp(rng.uniform(math.log(1e-5), math.log(3e-3))))
    mult, shift = _quant1(rng, scale * beta / (10.0 / 65535.0), (-31, 30))
    return {"x": x, "mult": mult, "shift": shift}


# -------------------------------------------------------------------------------------- elementwise


def _block(rng: Gen, dtype: type[np.integer[Any]]) -> tuple[np.ndarray, np.ndarray]:
    shape = (
        (_int(rng, 1, 256),) if rng.random() < 0.7 else (_int(rng, 1, 2), _int(rng, 1, 6), _int(rng, 1, 6), 3)
    )
    return _values(rng, shape, dtype), _values(rng, shape, dtype)


def _add(dtype: type[np.integer[Any]]) -> Callable[[Gen], Case]:
    """TFLite's add scaling: both inputs to twice the larger scale, after a left shift for headroom (20 for
    int8, 15 for int16, sometimes another valid one); every shift is at most 0."""

    def generate(rng: Gen) -> Case:
        s8 = dtype is np.int8
        a, b = _block(rng, dtype)
        top = 23 if s8 else 16
        left_shift = (20 if s8 else 15) if rng.random() < 0.7 else _int(rng, 0, top)
        s1, s2 = np.exp(rng.uniform(math.log(1e-3), 0.0, 2))
        s_out = max(s1, s2) * float(rng.uniform(0.5, 4.0))
        twice_max = 2 * max(s1, s2)
        m1, sh1 = _quant1(rng, s1 / twice_max, (-31, 0))
        m2, sh2 = _quant1(rng, s2 / twice_max, (-31, 0))
        mo, sho = _quant1(rng, twice_max / (2**left_shift * s_out), (-31, 0))
        case: Case = {"a": a, "b": b, "input_1_mult": m1, "input_1_shift": sh1, "input_2_mult": m2}
        case |= {"input_2_shift": sh2, "left_shift": left_shift, "out_mult": mo, "out_shift": sho}
        if s8:
            case |= {"input_1_offset": _int(rng, -127, 128), "input_2_offset": _int(rng, -127, 128)}
            case["out_offset"] = _int(rng, -128, 127)
        return case | _clamp(rng, dtype)

    return generate


def _mul(dtype: type[np.integer[Any]]) -> Callable[[Gen], Case]:
    def generate(rng: Gen) -> Case:
        s8 = dtype is np.int8
        a, b = _block(rng, dtype)
        case: Case = {"a": a, "b": b}
        if s8:
            case |= {"input_1_offset": _int(rng, -127, 128), "input_2_offset": _int(rng, -127, 128)}
            case["out_offset"] = _int(rng, -128, 127)
        offsets = case.get("input_1_offset", 0), case.get("input_2_offset", 0)
        product = (a.astype(np.int64) + offsets[0]) * (b.astype(np.int64) + offsets[1])
        real = _target(rng, dtype) / float(_rms(product)) * float(np.exp(rng.normal(0, 0.5)))
        case["out_mult"], case["out_shift"] = _quant1(rng, real, (-31, 30))
        return case | _clamp(rng, dtype)

    return generate


# --------------------------------------------------------------------------------------------- suite

GENERATORS: dict[str, tuple[int, Callable[[Gen], Case]]] = {
    "arm_convolve_wrapper_s8": (300, _conv_s8),
    "arm_depthwise_conv_wrapper_s8": (300, _depthwise_s8),
    "arm_fully_connected_s8": (400, lambda rng: _fc_s8(rng, per_channel=False)),
    "arm_fully_connected_per_channel_s8": (400, lambda rng: _fc_s8(rng, per_channel=True)),
    "arm_fully_connected_wrapper_s8": (400, lambda rng: _fc_s8(rng, per_channel=bool(rng.random() < 0.5))),
    "arm_avgpool_s8": (400, _pool(np.int8)),
    "arm_max_pool_s8": (400, _pool(np.int8)),
    "arm_softmax_s8": (400, _softmax_s8),
    "arm_softmax_s8_s16": (400, _softmax_s8),
    "arm_softmax_s16": (400, _softmax_s16),
    "arm_elementwise_add_s8": (400, _add(np.int8)),
    "arm_elementwise_add_s16": (400, _add(np.int16)),
    "arm_elementwise_mul_s8": (400, _mul(np.int8)),
    "arm_elementwise_mul_s16": (400, _mul(np.int16)),
    "arm_convolve_wrapper_s16": (200, _conv_s16),
    "arm_depthwise_conv_wrapper_s16": (300, _depthwise_s16),
    "arm_fully_connected_s16": (400, _fc_s16),
    "arm_avgpool_s16": (400, _pool(np.int16)),
    "arm_max_pool_s16": (400, _pool(np.int16)),
}
"""Kernel -> (number of random calls, generator of one call's reference arguments)."""


@functools.cache
def cases(name: str) -> tuple[tuple[Case, np.ndarray], ...]:
    """The kernel's calls with the reference's default-rounding output. A generated call that the reference
    rejects (outside CMSIS-NN's documented ranges) is drawn again from the same generator."""
    kernel, (count, generate) = KERNELS[name], GENERATORS[name]
    made, rejected = [], 0
    for index in range(count):
        rng = np.random.default_rng([SEED, kernel.code, index])
        while True:
            args = generate(rng)
            try:
                made.append((args, kernel.expected(args, Rounding.DOUBLE)))
                break
            except KernelArgumentError as error:
                rejected += 1
                if rejected > count // 10 + 5:
                    raise AssertionError(f"the {name} generator makes invalid calls: {error}") from error
    return tuple(made)


@functools.cache
def expected(name: str, rounding: Rounding) -> tuple[np.ndarray, ...]:
    kernel = KERNELS[name]
    if rounding is Rounding.DOUBLE or not kernel.rounds:
        return tuple(out for _, out in cases(name))
    return tuple(kernel.expected(args, rounding) for args, _ in cases(name))


@functools.cache
def executable(rounding: Rounding) -> Path:
    return build_kernel_calls(CHECKOUT, rounding)


def failures(name: str, build: Rounding, reference: Rounding) -> list[tuple[int, str]]:
    """(case index, what differs) for every call where the `build` library and the `reference` disagree."""
    kernel = KERNELS[name]
    results = run_calls(executable(build), [kernel.record(args) for args, _ in cases(name)])
    pairs = zip(expected(name, reference), results, strict=True)
    return [(i, problem) for i, (out, got) in enumerate(pairs) if (problem := mismatch(out, got)) is not None]


def report(name: str, build: Rounding, reference: Rounding, failed: list[tuple[int, str]]) -> str:
    kernel, (index, problem) = KERNELS[name], failed[0]
    args = cases(name)[index][0]
    listed = ", ".join(str(i) for i, _ in failed[:12]) + (", ..." if len(failed) > 12 else "")
    return (
        f"{name}: {len(failed)} of {len(cases(name))} random calls differ between CMSIS-NN built with "
        f"{build.value} rounding and the reference with {reference.value} rounding (cases {listed}).\n"
        f"First: case {index} (rng seed [{SEED}, {kernel.code}, {index}]): {problem}\n"
        f"  C record ints: {kernel.record(args)[1][0]}\n  {describe(kernel.bind(args))}"
    )


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
@pytest.mark.parametrize("name", list(GENERATORS))
def test_reference_is_bit_exact_with_compiled_cmsis_nn(name: str, rounding: Rounding) -> None:
    failed = failures(name, rounding, rounding)
    assert not failed, report(name, rounding, rounding, failed)


def test_a_build_with_the_other_rounding_is_caught() -> None:
    # The comparison must be able to fail: arm_elementwise_mul_s8 requantizes every output with
    # arm_nn_requantize, so the single-rounding library parts from the default-rounding reference on ties.
    name = "arm_elementwise_mul_s8"
    failed = failures(name, Rounding.SINGLE, Rounding.DOUBLE)
    assert failed, "the single-rounding build agreed with the double-rounding reference on every call"
    assert "values differ" in failed[0][1]
    assert f"case {failed[0][0]}" in report(name, Rounding.SINGLE, Rounding.DOUBLE, failed)


@pytest.mark.parametrize("name", [name for name in GENERATORS if KERNELS[name].rounds])
def test_the_random_calls_tell_the_two_roundings_apart(name: str) -> None:
    # Calls on which both roundings give the same bytes could not tell a build's rounding from the other;
    # there must be some that do not (ties, or results the double rounding moves by one).
    pairs = zip(expected(name, Rounding.DOUBLE), expected(name, Rounding.SINGLE), strict=True)
    assert any(not np.array_equal(d, s) for d, s in pairs)


@pytest.mark.parametrize(
    "name", [n for n in GENERATORS if "act_min" in inspect.signature(KERNELS[n].reference).parameters]
)
def test_the_random_calls_reach_both_clamps(name: str) -> None:
    low = high = 0
    for args, out in cases(name):
        info = np.iinfo(out.dtype)
        low += bool(args["act_min"] > info.min and (out == args["act_min"]).any())
        high += bool(args["act_max"] < info.max and (out == args["act_max"]).any())
    assert low and high, f"narrowed clamps reached: act_min in {low} calls, act_max in {high}"
