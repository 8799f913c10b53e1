"""Every kernel the int8 executor calls gives on a batch exactly the bytes it gives sample by sample.

`fixpoint evaluate` runs the kernels on batches; the firmware runs one sample at a time. The per-sample
call is the oracle here: for each kernel, seeded random inputs with saturation edges (inputs at -128/127
or -32768/32767, weights at -128/127, offsets at their limits, large multipliers, narrow clamps) are run
as one batch and one sample at a time, and the results must be equal byte for byte.

The convolution and fully connected products choose float32 when it is exact and float64 (int32 for the
depthwise taps) otherwise (conv.exact_float); both paths are run here - the narrow one by default, the
wide one by raising nothing and lowering the float32 limit to -1 - and must agree with each other too. The
rounding shift of requantize is checked against the formula it replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from quantcore.kernels import conv, requantize
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.elementwise import (
    elementwise_add_s8,
    elementwise_add_s16,
    elementwise_mul_s8,
    elementwise_mul_s16,
)
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.pooling import avgpool_s8, avgpool_s16, max_pool_s8, max_pool_s16
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.s16 import convolve_s16, depthwise_conv_s16, fully_connected_s16
from quantcore.kernels.softmax import softmax_s8

Array = np.ndarray[Any, Any]
N = 6


def _ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: type[np.generic]) -> Array:
    """Random values of `dtype` with the first sample's first row pinned to the type's extremes."""
    info = np.iinfo(dtype)  # type: ignore[type-var]
    x = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    flat = x.reshape(-1)
    flat[: min(4, flat.size)] = [info.min, info.max, info.min, info.max][: min(4, flat.size)]
    return x


def _check(fn: Callable[..., Array], batch: tuple[Array, ...], *fixed: Any, **kw: Any) -> Array:
    """`fn(*batch, *fixed, **kw)` on the whole batch, asserted equal to its calls on one sample each."""
    batched = fn(*batch, *fixed, **kw)
    single = np.concatenate([fn(*(b[i : i + 1] for b in batch), *fixed, **kw) for i in range(len(batch[0]))])
    assert batched.dtype == single.dtype
    np.testing.assert_array_equal(batched, single)
    return batched


def _channel_scales(rng: np.random.Generator, channels: int) -> dict[str, Array]:
    mult = rng.integers(1 << 30, (1 << 31) - 1, channels).astype(np.int32)
    mult[0] = (1 << 31) - 1
    shift = rng.integers(-12, 2, channels).astype(np.int32)
    return {"multiplier": mult, "shift": shift}


@pytest.fixture(params=["narrow", "wide"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each product test runs twice: float32 where exact (the default), and forced to float64/int32."""
    if request.param == "wide":
        monkeypatch.setattr(conv, "_F32_EXACT", -1)
    return str(request.param)


CONV_CASES = [
    # (input shape, weights shape, stride, padding, dilation, input_offset)
    ((N, 9, 9, 3), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 128),
    ((N, 10, 7, 4), (6, 3, 2, 2), (2, 1), (0, 1), (1, 2), -127),  # grouped (2 groups), strided, dilated
    ((N, 6, 6, 16), (8, 1, 1, 16), (1, 1), (0, 0), (1, 1), 3),
    ((N, 8, 8, 128), (4, 3, 3, 128), (1, 1), (1, 1), (1, 1), 128),  # K = 1152: past float32's bound
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolve_s8(case: tuple[Any, ...], path: str) -> None:
    shape, wshape, stride, padding, dilation, offset = case
    rng = np.random.default_rng(1)
    x, w = _ints(rng, shape, np.int8), _ints(rng, wshape, np.int8)
    bias = rng.integers(-(2**20), 2**20, wshape[0]).astype(np.int32)
    kw = dict(_channel_scales(rng, wshape[0]), input_offset=offset, output_offset=-5)
    kw |= {"stride": stride, "padding": padding, "dilation": dilation, "act_min": -100, "act_max": 120}
    out = _check(convolve_s8, (x,), w, bias, **kw)
    assert -100 in out and 120 in out  # the clamp is reached: saturation is exercised
    if path == "narrow":
        with pytest.MonkeyPatch.context() as m:
            m.setattr(conv, "_F32_EXACT", -1)
            np.testing.assert_array_equal(out, convolve_s8(x, w, bias, **kw))


def test_convolve_s8_accumulator_wraps_like_int32(path: str) -> None:
    # 576 products of 255 * -128 plus a bias at INT32_MIN + 1 leave int32: the wrap must happen per sample.
    x = np.full((3, 3, 3, 64), 127, np.int8)
    w = np.full((2, 3, 3, 64), -128, np.int8)
    bias = np.array([-(2**31) + 1, 0], np.int32)
    kw = dict(_channel_scales(np.random.default_rng(2), 2), input_offset=128, output_offset=0)
    out = _check(convolve_s8, (x,), w, bias, **kw, padding=(1, 1))
    assert out[0, 1, 1, 0] == 127  # wrapped to a large positive value, then saturated


@pytest.mark.parametrize("ch_mult", [1, 2])
@pytest.mark.parametrize("offset", [128, -127, 0])
def test_depthwise_conv_s8(ch_mult: int, offset: int, path: str) -> None:
    rng = np.random.default_rng(3)
    x = _ints(rng, (N, 11, 9, 5), np.int8)
    w = _ints(rng, (1, 3, 3, 5 * ch_mult), np.int8)
    bias = rng.integers(-(2**16), 2**16, 5 * ch_mult).astype(np.int32)
    kw: dict[str, Any] = dict(_channel_scales(rng, 5 * ch_mult), input_offset=offset, output_offset=7)
    out = _check(depthwise_conv_s8, (x,), w, bias, **kw, stride=(2, 1), padding=(1, 1))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(conv, "_F32_EXACT", -1)
        np.testing.assert_array_equal(out, depthwise_conv_s8(x, w, bias, **kw, stride=(2, 1), padding=(1, 1)))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("depth", [40, 700])  # 700: 255 * 128 * 700 > 2^24, the float64 path
def test_fully_connected_s8(per_channel: bool, depth: int, path: str) -> None:
    rng = np.random.default_rng(4)
    x, w = _ints(rng, (N, depth), np.int8), _ints(rng, (9, depth), np.int8)
    bias = rng.integers(-(2**20), 2**20, 9).astype(np.int32)
    scales = _channel_scales(rng, 9)
    mult = scales["multiplier"] if per_channel else int(scales["multiplier"][0])
    shift = scales["shift"] if per_channel else int(scales["shift"][0])
    for filter_offset in (0, 128):
        kw = dict(
            multiplier=mult, shift=shift, input_offset=-127, output_offset=3, filter_offset=filter_offset
        )
        _check(fully_connected_s8, (x,), w, bias, **kw)


@pytest.mark.parametrize(
    ("fn", "dtype"),
    [(avgpool_s8, np.int8), (max_pool_s8, np.int8), (avgpool_s16, np.int16), (max_pool_s16, np.int16)],
)
def test_pools(fn: Callable[..., Array], dtype: type[np.generic]) -> None:
    x = _ints(np.random.default_rng(5), (N, 9, 8, 4), dtype)
    _check(fn, (x,), kernel=(3, 2), stride=(2, 2), padding=(1, 0), act_min=-100, act_max=100)


def test_elementwise_add_and_mul_s8() -> None:
    rng = np.random.default_rng(6)
    a, b = _ints(rng, (N, 5, 5, 3), np.int8), _ints(rng, (N, 5, 5, 3), np.int8)
    add = dict(input_1_offset=128, input_1_mult=(1 << 31) - 1, input_1_shift=0, input_2_offset=-127)
    add |= dict(input_2_mult=1 << 30, input_2_shift=-1, left_shift=20, out_offset=-3)
    add |= dict(out_mult=1 << 30, out_shift=-18)
    _check(elementwise_add_s8, (a, b), **add)
    mul = dict(input_1_offset=128, input_2_offset=-127, out_offset=2, out_mult=(1 << 31) - 1, out_shift=-8)
    for rounding in Rounding:
        _check(elementwise_mul_s8, (a, b), **mul, rounding=rounding)


def test_elementwise_add_and_mul_s16() -> None:
    rng = np.random.default_rng(7)
    a, b = _ints(rng, (N, 4, 4, 3), np.int16), _ints(rng, (N, 4, 4, 3), np.int16)
    add = dict(input_1_mult=(1 << 31) - 1, input_1_shift=0, input_2_mult=1 << 30, input_2_shift=-1)
    _check(elementwise_add_s16, (a, b), **add, left_shift=15, out_mult=1 << 30, out_shift=-15)
    _check(elementwise_mul_s16, (a, b), out_mult=(1 << 31) - 1, out_shift=-15)


def test_softmax_s8() -> None:
    x = _ints(np.random.default_rng(8), (N, 10), np.int8)
    _check(softmax_s8, (x,), mult=1 << 30, shift=23, diff_min=-248)


def test_s16_convolutions_and_fully_connected() -> None:
    rng = np.random.default_rng(9)
    x = _ints(rng, (N, 7, 7, 4), np.int16)
    w = _ints(rng, (3, 3, 3, 4), np.int8)
    scales = _channel_scales(rng, 3)
    _check(convolve_s16, (x,), w, rng.integers(-(2**30), 2**30, 3).astype(np.int64), **scales, padding=(1, 1))
    dw = _ints(rng, (1, 3, 3, 4), np.int8)
    _check(depthwise_conv_s16, (x,), dw, None, **_channel_scales(rng, 4), stride=(2, 2))
    flat = x.reshape(N, -1)
    fc_w = _ints(rng, (5, flat.shape[1]), np.int8)
    _check(
        fully_connected_s16,
        (flat,),
        fc_w,
        None,
        multiplier=(1 << 31) - 1,
        shift=-10,
        act_min=-30000,
        act_max=30000,
    )


def _old_round_shift_right(value: Array, exponent: Array) -> Array:
    """The formula requantize used before (np.where), kept here as the oracle of the shorter one."""
    nudge_pos = (np.int64(1) << exponent) >> 1
    nudge_neg = nudge_pos - (exponent > 0)
    return (value + np.where(value < 0, nudge_neg, nudge_pos)) >> exponent


def test_round_shift_right_matches_the_formula_it_replaced() -> None:
    rng = np.random.default_rng(10)
    edges = np.array([-(2**31), -(2**31) + 1, -3, -2, -1, 0, 1, 2, 3, 2**31 - 1], np.int64)
    values = np.concatenate([edges, rng.integers(-(2**31), 2**31, 5000)])[:, None]
    exponents = np.arange(0, 32, dtype=np.int64)[None, :]
    expected = _old_round_shift_right(values, exponents)
    got = requantize._round_shift_right(np.broadcast_to(values, expected.shape).copy(), exponents)
    np.testing.assert_array_equal(got, expected)


def test_exact_float_picks_float32_only_within_its_exact_integers() -> None:
    x = np.array([[127, -128]], np.int8)
    # max |x + 1| = 128 (127 + 1 and -127); 128 * 131072 = 2^24 exactly: still exact in float32.
    assert conv.exact_float(x, 1, np.array([131072, 5])) is np.float32
    assert conv.exact_float(x, 1, np.array([131073])) is np.float64
    assert conv.exact_float(np.full((1, 1152), 127, np.int8), 128, np.full(4, 1152 * 64)) is np.float64
