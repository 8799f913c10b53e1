"""Reference of CMSIS-NN's int8 convolutions: arm_convolve_s8 (and its wrapper's fast paths, which compute
the same bytes: 1x1, 1xN) and arm_depthwise_conv_s8 (and its _opt / 3x3 variants).

Arithmetic per output element, as the C does it:
    acc = bias[o] + sum((x + input_offset) * w)          int32, padding contributes 0
    out = clamp(requantize(acc, multiplier[o], shift[o]) + output_offset, act_min, act_max)
The sum is computed as an im2col matrix product in floating point, exact because every operand and every
partial sum is an integer the format holds: in any summation order a partial sum's magnitude is at most
    bound = max |x + input_offset| * max over o of sum_k |w[k, o]|
so float32 is exact when bound <= 2^24 (its integers are exact up to 2^24, and a fused multiply-add rounds
once, to an exact value), float64 always (bound < 2^15 * K < 2^53 for any real K). `exact_float` picks the
narrower one per call - half the memory traffic and twice BLAS's speed - and the per-sample tests hold
both paths to the same bytes. The result is then wrapped to int32 as C's accumulator would be (a no-op
when bound + max |bias| < 2^31, which `finish_s8` skips).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels import int_gemm, jit
from quantcore.kernels._int import INT8_MAX, INT8_MIN, INT32_MAX, INT32_MIN, Args, wrap32
from quantcore.kernels.requantize import BiasedRequantize, Rounding, requantize_int32
from quantcore.kernels.window import Window, check_window

Int8Array = npt.NDArray[np.int8]
Pair = tuple[int, int]

# Bound on the float64 im2col matrix built at once; larger batches are processed in slices.
_IM2COL_BYTES = 64 * 2**20
# finish_s8's slice: 64K int64 values (512 KB) stay in a core's L2 cache (1 MB on the benchmark machine)
# with the temporaries of each pass: measured 35 % faster than whole-batch passes.
_FINISH_ELEMENTS = 64 * 1024
# finish_s8's rows: at least this many values, so that numpy's per-channel passes run long inner loops
# (one call per row; measured twice as fast per pass as rows of 96 channels).
_ROW_ELEMENTS = 1024
# Integers of magnitude up to 2^24 are exact in float32.
_F32_EXACT = 2**24


def convolve_s8(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    input_offset: int,
    output_offset: int,
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_convolve_s8: x NHWC, weights OHWI (grouped when C is a multiple of I), per-channel requant."""
    args = Args("arm_convolve_s8")
    x = args.array("input", x, np.int8, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    out_ch, kh, kw, group_ch = weights.shape
    in_ch = x.shape[3]
    if group_ch == 0 or in_ch % group_ch:
        raise args.fail("weights", f"input depth {group_ch} must divide the input's {in_ch} channels")
    groups = in_ch // group_ch
    if out_ch % groups:
        raise args.fail("weights", f"output channels {out_ch} must be a multiple of the {groups} groups")
    if groups > 1 and bias is None:
        # arm_convolve_s8 advances the bias pointer per group and reads through it: NULL crashes.
        raise args.fail("bias", "is required for a grouped convolution (pass zeros for none)")
    quant = channel_quant(args, bias, multiplier, shift, out_ch)
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max)
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)

    acc = _conv_accumulate(x, weights, groups, window, hw, offsets[0])
    bound = accumulator_bound(x, offsets[0], np.abs(weights.reshape(out_ch, -1).astype(np.int64)).sum(axis=1))
    return finish_s8(acc, quant, offsets[1], clamp, rounding, bound)


def depthwise_conv_s8(
    x: Int8Array,
    weights: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    *,
    multiplier: npt.NDArray[np.int32],
    shift: npt.NDArray[np.int32],
    input_offset: int,
    output_offset: int,
    stride: Pair = (1, 1),
    padding: Pair = (0, 0),
    dilation: Pair = (1, 1),
    act_min: int = INT8_MIN,
    act_max: int = INT8_MAX,
    output_hw: Pair | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> Int8Array:
    """arm_depthwise_conv_s8: weights (1, kh, kw, C*ch_mult); output channel c*ch_mult+m reads channel c."""
    args = Args("arm_depthwise_conv_s8")
    x = args.array("input", x, np.int8, ndim=4)
    weights = args.array("weights", weights, np.int8, ndim=4)
    one, kh, kw, out_ch = weights.shape
    in_ch = x.shape[3]
    if one != 1:
        raise args.fail("weights", f"must have shape (1, kh, kw, C*ch_mult), got {weights.shape}")
    if in_ch == 0 or out_ch % in_ch:
        raise args.fail("weights", f"output channels {out_ch} must be a multiple of the input's {in_ch}")
    quant = channel_quant(args, bias, multiplier, shift, out_ch)
    offsets = check_offsets(args, input_offset, output_offset)
    clamp = args.activation(act_min, act_max)
    window, hw = check_window(args, (kh, kw), stride, padding, dilation, (x.shape[1], x.shape[2]), output_hw)

    acc = depthwise_accumulate(x, weights[0], out_ch // in_ch, window, hw, offsets[0])
    bound = accumulator_bound(x, offsets[0], np.abs(weights[0].astype(np.int64)).sum(axis=(0, 1)))
    return finish_s8(acc, quant, offsets[1], clamp, rounding, bound)


def channel_quant(
    args: Args, bias: Any, multiplier: Any, shift: Any, channels: int
) -> tuple[np.ndarray[Any, Any] | None, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Validate the per-output-channel bias (int32 or None), multiplier and shift."""
    if bias is not None:
        bias = args.array("bias", bias, np.int32, shape=(channels,))
    multiplier = args.array("multiplier", multiplier, np.int32, shape=(channels,))
    shift = args.array("shift", shift, np.int32, shape=(channels,))
    args.int_values("multiplier", multiplier, INT32_MIN + 1, INT32_MAX)
    args.int_values("shift", shift, -31, 30)
    return bias, multiplier, shift


def check_offsets(args: Args, input_offset: Any, output_offset: Any) -> tuple[int, int]:
    """(input_offset, output_offset) of a convolution.

    input_offset stays in [-127, 128]: the pure-C arm_convolve_s8 pads its im2col buffer with
    (int8_t)-input_offset, which adds back to zero only there; beyond it the padding's value is a narrowing
    conversion, and the DSP/MVE builds hold x + input_offset in int16 lanes, so the builds' bytes part.
    output_offset is any int32 (its C type): every build adds it to the requantized int32 and clamps, which
    the reference does exactly (an int8 zero point in [-128, 127] is the quant-params schema's rule)."""
    return (
        args.integer("input_offset", input_offset, -127, 128),
        args.integer("output_offset", output_offset, INT32_MIN, INT32_MAX),
    )


def exact_float(x: Int8Array, offset: int, w_abs_sums: npt.NDArray[np.int64]) -> type[np.floating[Any]]:
    """float32 when every partial sum of (x + offset) * w is an integer of magnitude <= 2^24 (exact in
    float32 in any order), else float64; `w_abs_sums` holds sum_k |w[k, o]| per output channel."""
    return np.float32 if accumulator_bound(x, offset, w_abs_sums) <= _F32_EXACT else np.float64


def accumulator_bound(x: Int8Array, offset: int, w_abs_sums: npt.NDArray[np.int64]) -> int:
    """Largest |partial sum| of (x + offset) * w that any output channel can reach on this input."""
    if x.size == 0 or w_abs_sums.size == 0:
        return 0
    widest = max(abs(int(x.min()) + offset), abs(int(x.max()) + offset))
    return widest * int(w_abs_sums.max())


def _conv_accumulate(
    x: Int8Array, weights: Int8Array, groups: int, window: Window, hw: Pair, input_offset: int
) -> npt.NDArray[np.int64] | npt.NDArray[np.int32]:
    """sum((x + input_offset) * w) per output pixel and channel, grouped, in batch slices: an im2col matrix
    product, on onnxruntime's exact integer product where quantcore.kernels.int_gemm runs (its int32 sums,
    kept as they come: no term count it takes can leave int32), else in the float type that holds it
    exactly (exact_float), as int64."""
    n = x.shape[0]
    out_ch, group_ch = weights.shape[0], weights.shape[3]
    # (kh*kw*group_ch, out_ch) with rows in im2col order (ky, kx, c).
    w_int = weights.reshape(out_ch, -1).T
    k = w_int.shape[0]
    # The padding is -input_offset in the raw domain, which adds back to zero as in the C.
    source: npt.NDArray[Any]
    dtype: type[np.number[Any]]
    product: Callable[[npt.NDArray[Any], npt.NDArray[Any]], npt.NDArray[Any]]
    zero_point = int_gemm.zero_point(input_offset)  # an offset check_offsets allows always has one
    if zero_point is not None and int_gemm.wanted(k):
        # x + 128 as uint8, the offset carried by the product's zero point (the raw padding value).
        source, fill, offset, dtype, w_cols = int_gemm.to_uint8(x), zero_point, 0, np.uint8, w_int
        product = functools.partial(int_gemm.product, zero_point=zero_point)
        sums: type[np.signedinteger[Any]] = np.int32
    else:
        dtype = exact_float(x, input_offset, np.abs(w_int.astype(np.int64)).sum(axis=0))
        source, fill, offset, w_cols, product = x, 0, input_offset, w_int.astype(dtype), np.matmul
        sums = np.int64
    per_sample = hw[0] * hw[1] * k * groups * np.dtype(dtype).itemsize
    step = max(1, _IM2COL_BYTES // max(per_sample, 1))
    out_per_group = out_ch // groups
    acc = None
    for start in range(0, n, step):
        padded = window.pad_shifted(source[start : start + step], hw, fill, offset, dtype)
        for g in range(groups):
            cols = _columns(window, padded[..., g * group_ch : (g + 1) * group_ch], hw)
            o = slice(g * out_per_group, (g + 1) * out_per_group)
            products = product(cols.reshape(-1, k), w_cols[:, o]).reshape(*cols.shape[:3], out_per_group)
            if acc is None and step >= n and groups == 1 and products.dtype == sums:
                return products  # the whole result at once: no copy
            if acc is None:
                acc = np.empty((n, hw[0], hw[1], out_ch), dtype=sums)
            acc[start : start + step, ..., o] = products
    return np.empty((n, hw[0], hw[1], out_ch), dtype=sums) if acc is None else acc


def _columns(window: Window, padded: npt.NDArray[Any], hw: Pair) -> npt.NDArray[Any]:
    """window.im2col, or its compiled loop for a one-channel uint8 input under a window of unit stride and
    dilation where the loops run (the same bytes: tests/kernels/test_compiled.py)."""
    unit = window.stride == window.dilation == (1, 1)
    if unit and padded.shape[3] == 1 and padded.dtype == np.uint8 and jit.enabled():
        from quantcore.kernels import compiled  # the compiled loops: only here (quantcore.kernels.jit)

        return compiled.one_channel_columns(padded, window, hw)
    return window.im2col(padded, hw)


def depthwise_accumulate(
    x: Int8Array, weights: Int8Array, ch_mult: int, window: Window, hw: Pair, input_offset: int
) -> npt.NDArray[np.int64]:
    """Per tap: acc[..., c, m] += (x[..., c] + input_offset) * w[ky, kx, c*ch_mult + m].

    In float32 when that is exact (see exact_float: a tap sum is at most kh*kw products), else in int32,
    whose wrap-around is the C accumulator's. With the compiled loops on (quantcore.kernels.jit), one
    compiled loop computes the same integers (quantcore.kernels.compiled); what follows is the reference.
    """
    if jit.enabled() and x.size:
        from quantcore.kernels import compiled  # the compiled loops: only here (quantcore.kernels.jit)

        geometry = (window.stride, window.padding, window.dilation)
        return compiled.depthwise_accumulate(x, weights, ch_mult, geometry, hw, input_offset)
    n, _, _, in_ch = x.shape
    taps = weights.reshape(weights.shape[0], weights.shape[1], in_ch, ch_mult)
    w_abs_sums = np.abs(taps.astype(np.int64)).sum(axis=(0, 1)).ravel()
    dtype: type[np.number[Any]] = np.int32
    if exact_float(x, input_offset, w_abs_sums) is np.float32:
        dtype = np.float32
    padded = window.pad_shifted(x, hw, 0, input_offset, dtype)
    taps = taps.astype(dtype)
    if ch_mult == 1:
        # The common case without the broadcast axis: one multiply into a scratch buffer and one add per tap.
        # The first tap's products are the accumulator's first value (no zeros to add them to).
        # Each tap's weights repeated along the output row, (out_w, C): numpy then runs one inner loop
        # over a whole row of a stride-1 tap (out_w * C values) instead of one per pixel (C values)
        # - measured 2.3x faster per multiply at 14 x 96 - with the same products.
        row_taps = np.ascontiguousarray(
            np.broadcast_to(taps[:, :, None, :, 0], (*taps.shape[:2], hw[1], in_ch))
        )
        acc: np.ndarray[Any, Any] = np.empty((n, hw[0], hw[1], in_ch), dtype=dtype)
        product = np.empty_like(acc)
        for i, (ky, kx, view) in enumerate(window.taps(padded, hw)):
            np.multiply(view, row_taps[ky, kx], out=product if i else acc)
            if i:
                acc += product
        return acc.astype(np.int64)
    wide: np.ndarray[Any, Any] = np.zeros((n, hw[0], hw[1], in_ch, ch_mult), dtype=dtype)
    for ky, kx, view in window.taps(padded, hw):
        wide += view[..., None] * taps[ky, kx]
    return wide.reshape(n, hw[0], hw[1], in_ch * ch_mult).astype(np.int64)


def finish_s8(
    acc: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    quant: tuple[np.ndarray[Any, Any] | None, np.ndarray[Any, Any], np.ndarray[Any, Any]],
    output_offset: int,
    clamp: Pair,
    rounding: Rounding,
    bound: int | None = None,
) -> Int8Array:
    """Add bias, requantize per channel (the last axis), add the output offset, clamp, narrow to int8.

    Every step is per element, so it runs on slices of about _FINISH_ELEMENTS values that stay in the
    CPU's cache across the dozen passes, instead of a dozen passes over the whole batch through memory.
    `acc` (int64, or int32 sums that hold the C accumulator exactly) is the caller's scratch, overwritten.
    `bound`, when the caller knows one, is the largest |acc|
    before the bias (accumulator_bound): with the bias it proves the int32 wrap a no-op, without the two
    passes that look. With the compiled loops on (quantcore.kernels.jit), one compiled pass computes the
    same bytes (quantcore.kernels.compiled); what follows is the numpy reference."""
    bias, multiplier, shift = quant
    if jit.enabled() and acc.size:
        from quantcore.kernels import compiled  # the compiled loops: only here (quantcore.kernels.jit)

        rows = acc.reshape(-1, acc.shape[-1] if acc.ndim else 1)
        single = rounding is Rounding.SINGLE
        result = compiled.finish_rows(rows, bias, multiplier, shift, single, output_offset, clamp)
        return result.reshape(acc.shape)
    acc = acc.astype(np.int64, copy=False)  # the passes below add the bias in place
    wide_bias = None if bias is None else bias.astype(np.int64)
    largest_bias = 0 if wide_bias is None else int(np.abs(wide_bias).max(initial=0))
    fits = bound is not None and bound + largest_bias <= INT32_MAX
    channels = acc.shape[-1] if acc.ndim else 1
    rows = acc.reshape(-1, channels)
    result = np.empty(rows.shape, dtype=np.int8)
    step = max(1, _FINISH_ELEMENTS // max(channels, 1))
    folded = BiasedRequantize.of(bias, multiplier, shift, rounding) if fits else None
    if folded is not None:
        # |requantized| <= |acc + bias| (a multiplier below 2^31, no left shift): with the offset still
        # in int32, clamp_offset_s8 need not look for a wrap.
        wraps = bound is None or bound + largest_bias + abs(output_offset) > INT32_MAX
        # Slices of whole long rows (`widen` pixels of channels to a row, see BiasedRequantize.widened);
        # a last slice that is not whole long rows keeps the plain layout.
        widen = max(1, _ROW_ELEMENTS // max(channels, 1))
        step = max(widen, step // widen * widen)
        wide = folded.widened(widen) if widen > 1 else folded
        for start in range(0, len(rows), step):
            part, into = rows[start : start + step], result[start : start + step]
            if len(part) % widen == 0:
                part, into = part.reshape(-1, widen * channels), into.reshape(-1, widen * channels)
                clamp_offset_s8(wide(part), output_offset, clamp, into, wraps)
            else:
                clamp_offset_s8(folded(part), output_offset, clamp, into, wraps)
        return result.reshape(acc.shape)
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        if wide_bias is not None:
            part += wide_bias
        if not fits and part.size and (int(part.min()) < INT32_MIN or int(part.max()) > INT32_MAX):
            part = wrap32(part)  # two passes to look spare the four of a wrap that would change nothing
        out = requantize_int32(part, multiplier, shift, rounding)
        clamp_offset_s8(out, output_offset, clamp, result[start : start + step])
    return result.reshape(acc.shape)


def clamp_offset_s8(
    out: npt.NDArray[np.int64],
    output_offset: int,
    clamp: Pair,
    result: Int8Array | None = None,
    wraps: bool = True,
) -> Int8Array:
    """clamp(out + output_offset, lo, hi) as int8 (into `result` when given), in two passes: clamping
    out (overwritten) to [lo - offset, hi - offset] first gives the same values (integers, no overflow),
    and the add then writes int8 (the low bits, as the C's cast keeps them when a clamp is wider than int8).

    The C adds the offset to an int32; where that sum leaves int32 it wraps on the targets (one reduction
    looks for it: only a requantized value within `output_offset` of int32's end gets there; wraps=False
    is the caller's proof that none is)."""
    if wraps and _offset_wraps(out, output_offset):
        out[...] = wrap32(out + output_offset)
        output_offset = 0
    np.clip(out, clamp[0] - output_offset, clamp[1] - output_offset, out=out)
    if result is None:
        result = np.empty(out.shape, dtype=np.int8)
    np.add(out, output_offset, out=result, casting="unsafe")
    return result


def _offset_wraps(out: npt.NDArray[np.int64], output_offset: int) -> bool:
    """Whether some out + output_offset leaves int32 (out holds int32 values)."""
    if output_offset == 0 or out.size == 0:
        return False
    if output_offset > 0:
        return int(out.max()) > INT32_MAX - output_offset
    return int(out.min()) < INT32_MIN - output_offset
