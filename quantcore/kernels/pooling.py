"""Bit-exact reference of CMSIS-NN's pooling kernels: arm_avgpool_s8/_s16 and arm_max_pool_s8/_s16.

Each function follows the pure-C path (no ARM_MATH_DSP / ARM_MATH_MVEI) of the kernel it names and returns
the NHWC array the compiled kernel writes (arm_avgpool_s8 also as one compiled pass where
quantcore.kernels.jit runs it: quantcore.kernels.compiled). Pooling keeps the input's scale and zero
point, so there is no requantization and no rounding mode: the results are the same in every CMSIS-NN
build.

Window positions outside the input (the "before" padding and whatever lies past the far edge) are not
values: the average divides by the number of input pixels inside the window, and the maximum is taken over
those pixels only. A window must therefore hold at least one input pixel; CMSIS-NN returns
ARM_CMSIS_NN_ARG_ERROR for an empty average window and leaves garbage for an empty max window, so such
geometries are rejected here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import jit
from quantcore.kernels._int import I64, INT8_MAX, INT8_MIN, INT16_MAX, INT16_MIN, INT32_MAX, Args
from quantcore.kernels.window import Window, check_window


@dataclass(frozen=True)
class _Format:
    """An activation type of the pooling kernels: its exact numpy dtype and value range."""

    dtype: type[np.signedinteger[Any]]
    lo: int
    hi: int


S8 = _Format(np.int8, INT8_MIN, INT8_MAX)
S16 = _Format(np.int16, INT16_MIN, INT16_MAX)


@dataclass(frozen=True)
class _Call:
    """A validated pooling call: the input, its window geometry and the activation clamp."""

    x: np.ndarray[Any, Any]
    window: Window
    output_hw: tuple[int, int]
    act: tuple[int, int]


def avgpool_s8(
    x: npt.NDArray[np.int8],
    *,
    kernel: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: tuple[int, int] | None = None,
) -> npt.NDArray[np.int8]:
    """arm_avgpool_s8 on an (N, H, W, C) int8 input; `output_hw` defaults to the symmetric-padding size."""
    call = _validate("arm_avgpool_s8", S8, x, kernel, stride, padding, act_min, act_max, output_hw, sums=True)
    if jit.enabled():
        return _compiled_average(call)
    return _average(call).astype(np.int8)


def avgpool_s16(
    x: npt.NDArray[np.int16],
    *,
    kernel: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    output_hw: tuple[int, int] | None = None,
) -> npt.NDArray[np.int16]:
    """arm_avgpool_s16 on an (N, H, W, C) int16 input; same arithmetic as arm_avgpool_s8."""
    call = _validate(
        "arm_avgpool_s16", S16, x, kernel, stride, padding, act_min, act_max, output_hw, sums=True
    )
    return _average(call).astype(np.int16)


def max_pool_s8(
    x: npt.NDArray[np.int8],
    *,
    kernel: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: tuple[int, int] | None = None,
) -> npt.NDArray[np.int8]:
    """arm_max_pool_s8 on an (N, H, W, C) int8 input; `output_hw` defaults to the symmetric-padding size."""
    call = _validate(
        "arm_max_pool_s8", S8, x, kernel, stride, padding, act_min, act_max, output_hw, sums=False
    )
    return _maximum(call, S8).astype(np.int8)


def max_pool_s16(
    x: npt.NDArray[np.int16],
    *,
    kernel: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    act_min: int = INT16_MIN,
    act_max: int = INT16_MAX,
    output_hw: tuple[int, int] | None = None,
) -> npt.NDArray[np.int16]:
    """arm_max_pool_s16 on an (N, H, W, C) int16 input."""
    call = _validate(
        "arm_max_pool_s16", S16, x, kernel, stride, padding, act_min, act_max, output_hw, sums=False
    )
    return _maximum(call, S16).astype(np.int16)


def _compiled_average(call: _Call) -> npt.NDArray[np.int8]:
    """arm_avgpool_s8 in one compiled pass (quantcore.kernels.compiled): the same bytes as _average's
    (tests/kernels/test_compiled.py), without its int64 copy and per-tap passes - a global pool of 7 x 7
    x 64 over 10,000 images 0.063 -> 0.009 s. (A compiled max pool was no faster than _maximum's int8
    passes on the benchmark nets: slower at 6 channels, 5 against 4 ns an output.)"""
    from quantcore.kernels import compiled  # the compiled loops: only here (quantcore.kernels.jit)

    w = call.window
    return compiled.average_pool_s8(call.x, w.kernel, w.stride, w.padding, call.output_hw, call.act)


def _average(call: _Call) -> I64:
    """Sum of the in-input taps, divided by their count as arm_avgpool_s8's C does, then clamped."""
    padded = call.window.pad(call.x.astype(np.int64), call.output_hw, fill=0)
    total = np.zeros((call.x.shape[0], *call.output_hw, call.x.shape[3]), dtype=np.int64)
    for _, _, view in call.window.taps(padded, call.output_hw):
        total += view
    count = _valid_counts(call.window, call.output_hw, (call.x.shape[1], call.x.shape[2]))
    return np.clip(_round_divide(total, count[None, :, :, None]), *call.act)


def _round_divide(total: I64, count: I64) -> I64:
    """C's `sum > 0 ? (sum + count/2) / count : (sum - count/2) / count`: the midpoint goes away from zero,
    and C's '/' truncates toward zero (so -4/3 gives -1, where floor division would give -2)."""
    half = count // 2
    positive = (total + half) // count
    non_positive = -((half - total) // count)
    return np.where(total > 0, positive, non_positive)


def _valid_counts(window: Window, output_hw: tuple[int, int], input_hw: tuple[int, int]) -> I64:
    """(oh, ow): how many input pixels each output's window covers; padding does not count."""
    rows = _axis_counts(output_hw[0], window.kernel[0], window.stride[0], window.padding[0], input_hw[0])
    cols = _axis_counts(output_hw[1], window.kernel[1], window.stride[1], window.padding[1], input_hw[1])
    return np.outer(rows, cols)


def _axis_counts(out: int, kernel: int, stride: int, pad: int, size: int) -> I64:
    start = np.arange(out, dtype=np.int64) * stride - pad
    return np.clip(start + kernel, 0, size) - np.clip(start, 0, size)


def _maximum(call: _Call, fmt: _Format) -> np.ndarray[Any, Any]:
    """Maximum over the in-input taps, then clamped. Padding is filled with the type's minimum, which can
    never exceed an input pixel, and every window holds at least one input pixel (checked)."""
    padded = call.window.pad(call.x, call.output_hw, fill=fmt.lo)
    taps = call.window.taps(padded, call.output_hw)
    _, _, best = next(taps)
    best = best.copy()
    for _, _, view in taps:
        np.maximum(best, view, out=best)
    clamped: np.ndarray[Any, Any] = np.clip(best, *call.act)
    return clamped


def _validate(
    kernel_name: str,
    fmt: _Format,
    x: Any,
    kernel: Any,
    stride: Any,
    padding: Any,
    act_min: Any,
    act_max: Any,
    output_hw: Any,
    *,
    sums: bool,
) -> _Call:
    """Check a pooling call as CMSIS-NN would need it; `sums` for the average kernels, which add taps."""
    args = Args(kernel_name)
    x = args.array("x", x, fmt.dtype, ndim=4)
    if min(x.shape) < 1:
        # arm_*_pool_s* return ARM_CMSIS_NN_ARG_ERROR for a batch count below 1.
        raise args.fail("x", f"must have at least one batch, row, column and channel, got shape {x.shape}")
    size = (x.shape[1], x.shape[2])
    kernel = args.pair("kernel", kernel, 1)
    pad = args.pair("padding", padding, 0)
    if sums:
        _check_sum_fits(args, kernel, fmt)
    if output_hw is None:
        _check_kernel_fits(args, kernel, pad, size)
    window, hw = check_window(args, kernel, stride, pad, (1, 1), size, output_hw)
    _check_windows_hold_input(args, window, hw, size)
    act = args.activation(act_min, act_max)
    if not sums:
        _check_max_pool_clamp(args, act, fmt)
    return _Call(x, window, hw, act)


def _check_max_pool_clamp(args: Args, act: tuple[int, int], fmt: _Format) -> None:
    """A max pool's clamp limits must lie in its type: arm_max_pool_s16 narrows them to int16_t before it
    clamps, and the MVE build of arm_max_pool_s8 narrows them to int8 lanes where the pure-C one clamps in
    int32, so beyond the type the builds write different bytes. (Crossed limits are fine: every build gives
    act_max.) The average pools clamp their int32 sums in every build, so any int32 limits are theirs."""
    for name, value in zip(("act_min", "act_max"), act, strict=True):
        if not fmt.lo <= value <= fmt.hi:
            raise args.fail(
                name,
                f"must be in [{fmt.lo}, {fmt.hi}], got {value}: {args.kernel} narrows its clamp to the "
                "output type differently in its pure-C and vector builds",
            )


def _check_sum_fits(args: Args, kernel: tuple[int, int], fmt: _Format) -> None:
    """The C average sums in an int; a window whose sum (plus the rounding half) could leave int32 would
    overflow it (undefined behaviour), so such kernels are rejected."""
    area = kernel[0] * kernel[1]
    if max(-fmt.lo, fmt.hi) * area + area // 2 > INT32_MAX:
        raise args.fail(
            "kernel", f"{kernel} covers {area} pixels; their sum can overflow the C kernel's int32"
        )


def _check_kernel_fits(
    args: Args, kernel: tuple[int, int], pad: tuple[int, int], size: tuple[int, int]
) -> None:
    """With the output size derived from symmetric padding, the kernel must fit the padded input."""
    padded = (size[0] + 2 * pad[0], size[1] + 2 * pad[1])
    if kernel[0] > padded[0] or kernel[1] > padded[1]:
        raise args.fail(
            "kernel", f"{kernel} is larger than the padded input {padded} (input {size}, padding {pad})"
        )


def _check_windows_hold_input(
    args: Args, window: Window, output_hw: tuple[int, int], size: tuple[int, int]
) -> None:
    """Windows advance monotonically, so only the first and the last one per axis can miss the input."""
    for axis in (0, 1):
        k, s, p = window.kernel[axis], window.stride[axis], window.padding[axis]
        if p >= k:
            raise args.fail(
                "padding",
                f"{window.padding} must be smaller than the kernel {window.kernel}: the first window "
                "would hold only padding",
            )
        last_start = (output_hw[axis] - 1) * s - p
        if last_start >= size[axis]:
            raise args.fail(
                "output_hw",
                f"{output_hw} is too large for input {size}: the last window would start past "
                "the input and hold only padding",
            )
