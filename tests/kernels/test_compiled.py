"""The compiled finish_s8, depthwise_accumulate, arm_avgpool_s8 and one-channel im2col columns
(quantcore.kernels.compiled) compute exactly what the numpy reference does.

Both paths run in one process: FIXPOINT_JIT=0 selects the numpy one (quantcore.kernels.jit). The inputs
cover what the arithmetic can meet: accumulators at INT32_MIN/MAX and beyond int32 (the C's wrap),
multipliers near 2^31 and negative ones, every shift in [-31, 30] (left shifts included), output
offsets at +-128 and far outside (the int32 wrap of out + offset), clamps wider than int8 and crossed,
both roundings, with and without bias, and the `bound` that lets the numpy path fold the bias
(BiasedRequantize) or not. The depthwise accumulation: channel multipliers 1-3, strides, padding,
dilation, an output past the input, offsets at their limits, and sums past float32's exact integers
(numpy's int32 path) and past int32 (the wrap). CMSIS-NN's own vectors run through both paths in
tests/conformance (with numba installed, the compiled one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.kernels import conv, jit
from quantcore.kernels._int import INT32_MAX, INT32_MIN
from quantcore.kernels.pooling import avgpool_s8
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.window import Window

pytestmark = pytest.mark.skipif(not jit.installed(), reason="numba is not installed")

Array = np.ndarray[Any, Any]
Pair = tuple[int, int]


def _both(monkeypatch: pytest.MonkeyPatch, acc: Array, *args: Any, **kw: Any) -> tuple[Array, Array]:
    """finish_s8 on copies of `acc` (its scratch), compiled then numpy."""
    monkeypatch.setenv(jit.SWITCH, "1")
    with jit.compiled_loops():
        assert jit.enabled()
        compiled = conv.finish_s8(acc.copy(), *args, **kw)
    monkeypatch.setenv(jit.SWITCH, "0")
    reference = conv.finish_s8(acc.copy(), *args, **kw)
    assert compiled.dtype == reference.dtype == np.int8
    assert compiled.shape == reference.shape == acc.shape
    return compiled, reference


def _quant(rng: np.random.Generator, channels: int, shifts: Array, bias: bool) -> tuple[Any, Array, Array]:
    mult = rng.integers(1 << 30, 1 << 31, channels, dtype=np.int64)
    mult[: min(2, channels)] = [INT32_MAX, INT32_MAX - 1][: min(2, channels)]
    b = rng.integers(INT32_MIN, INT32_MAX + 1, channels, dtype=np.int64).astype(np.int32) if bias else None
    return b, mult.astype(np.int32), shifts.astype(np.int32)


def _acc(rng: np.random.Generator, shape: tuple[int, ...], span: int) -> Array:
    acc = rng.integers(-span, span + 1, shape, dtype=np.int64)
    flat = acc.reshape(-1)
    flat[:6] = [INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1, 0, -1]
    return acc


@pytest.mark.parametrize("rounding", list(Rounding))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("span", [2**31 - 1, 2**33, 3000])
def test_every_shift_wide_accumulators(
    monkeypatch: pytest.MonkeyPatch, rounding: Rounding, bias: bool, span: int
) -> None:
    rng = np.random.default_rng(span + bias)
    shifts = np.arange(-31, 31)
    acc = _acc(rng, (40, 3, len(shifts)), span)
    quant = _quant(rng, len(shifts), shifts, bias)
    for offset, clamp in [
        (0, (-128, 127)),
        (-128, (-128, 127)),
        (127, (-20, 90)),
        (2**31 - 1, (-(2**31), 2**31 - 1)),
    ]:
        compiled, reference = _both(monkeypatch, acc, quant, offset, clamp, rounding)
        np.testing.assert_array_equal(compiled, reference)


@pytest.mark.parametrize("rounding", list(Rounding))
def test_folded_bias_path_and_long_rows(monkeypatch: pytest.MonkeyPatch, rounding: Rounding) -> None:
    """Accumulators within a known bound: the numpy path folds the bias and lays out long rows."""
    rng = np.random.default_rng(7)
    channels, bound = 24, 2**20
    acc = rng.integers(-bound, bound + 1, (70, 9, 11, channels), dtype=np.int64)
    shifts = rng.integers(-31, 1, channels)
    quant = _quant(rng, channels, shifts, True)
    quant = (np.clip(quant[0], -(2**24), 2**24).astype(np.int32), quant[1], quant[2])
    for offset in (-128, 5, 127):
        compiled, reference = _both(monkeypatch, acc, quant, offset, (-128, 127), rounding, bound)
        np.testing.assert_array_equal(compiled, reference)


@pytest.mark.parametrize("rounding", list(Rounding))
def test_negative_and_small_multipliers_and_odd_clamps(
    monkeypatch: pytest.MonkeyPatch, rounding: Rounding
) -> None:
    rng = np.random.default_rng(11)
    channels = 17
    mult = np.array([INT32_MIN + 1, -1, 0, 1, -(2**30), 2**30, *rng.integers(INT32_MIN + 1, INT32_MAX, 11)])
    shifts = rng.integers(-31, 31, channels)
    bias = rng.integers(-(2**20), 2**20, channels).astype(np.int32)
    acc = _acc(rng, (33, channels), 2**31)
    quant = (bias, mult.astype(np.int32), shifts.astype(np.int32))
    for clamp in [(-300, 300), (100, -100), (-(2**31), 2**31 - 1), (0, 0)]:
        for offset in (-(2**31), -128, 128, 2**31 - 1):
            compiled, reference = _both(monkeypatch, acc, quant, offset, clamp, rounding)
            np.testing.assert_array_equal(compiled, reference)


@pytest.mark.parametrize("rounding", list(Rounding))
def test_int32_accumulators(monkeypatch: pytest.MonkeyPatch, rounding: Rounding) -> None:
    """int_gemm's int32 sums go to the loop as they come (its int32 build): the same bytes as the numpy
    path's, int32's ends and a bias that wraps the sum included."""
    rng = np.random.default_rng(13)
    shifts = np.arange(-31, 31)
    acc = _acc(rng, (50, len(shifts)), 2**31 - 1).astype(np.int32)
    for bias in (True, False):
        quant = _quant(rng, len(shifts), shifts, bias)
        for offset, clamp in [(-128, (-128, 127)), (2**31 - 1, (-(2**31), 2**31 - 1))]:
            compiled, reference = _both(monkeypatch, acc, quant, offset, clamp, rounding)
            np.testing.assert_array_equal(compiled, reference)


def test_the_loops_run_only_where_asked_and_not_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit.SWITCH, "all")
    assert jit.enabled()  # everywhere: the suites run through the loops
    monkeypatch.setenv(jit.SWITCH, "1")
    assert not jit.enabled()  # quantize and every other caller: numpy
    with jit.compiled_loops():
        assert jit.enabled()
        monkeypatch.setenv(jit.SWITCH, "0")
        assert not jit.enabled()
    monkeypatch.setenv(jit.SWITCH, "1")
    assert not jit.enabled()


def test_one_channel_and_zero_dimensional(monkeypatch: pytest.MonkeyPatch) -> None:
    quant = (np.array([5], np.int32), np.array([INT32_MAX], np.int32), np.array([-3], np.int32))
    for acc in (np.array(1000, np.int64), np.arange(-500, 500, dtype=np.int64).reshape(1000, 1)):
        compiled, reference = _both(monkeypatch, acc, quant, -7, (-128, 127), Rounding.DOUBLE)
        np.testing.assert_array_equal(compiled, reference)


def _depthwise_both(monkeypatch: pytest.MonkeyPatch, x: Array, w: Array, ch_mult: int, **kw: Any) -> None:
    """depthwise_accumulate and the whole depthwise_conv_s8, compiled and numpy, equal."""
    window = Window((w.shape[0], w.shape[1]), kw["stride"], kw["padding"], kw["dilation"])
    hw = kw.pop("output_hw", None) or window.output_hw((x.shape[1], x.shape[2]))
    out_ch = w.shape[2]
    rng = np.random.default_rng(out_ch)
    quant = {
        "bias": rng.integers(-(2**20), 2**20, out_ch).astype(np.int32),
        "multiplier": rng.integers(2**30, 2**31 - 1, out_ch).astype(np.int32),
        "shift": rng.integers(-10, 2, out_ch).astype(np.int32),
    }
    results = []
    for switch in ("1", "0"):
        monkeypatch.setenv(jit.SWITCH, switch)
        with jit.compiled_loops():
            acc = conv.depthwise_accumulate(x, w, ch_mult, window, hw, kw["input_offset"])
            out = conv.depthwise_conv_s8(x, w[None], output_offset=-3, output_hw=hw, **quant, **kw)
        results.append((acc, out))
    (acc, out), (acc_ref, out_ref) = results
    assert acc.dtype == acc_ref.dtype == np.int64
    np.testing.assert_array_equal(acc, acc_ref)
    np.testing.assert_array_equal(out, out_ref)


@pytest.mark.parametrize("ch_mult", [1, 2, 3])
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 3), (2, 2), (1, 1), (1, 1)), ((5, 3), (2, 1), (2, 0), (1, 2)),
     ((1, 1), (1, 1), (0, 0), (1, 1)), ((3, 3), (1, 1), (0, 0), (2, 2))],
)  # fmt: skip
@pytest.mark.parametrize("input_offset", [-127, 0, 128])
def test_depthwise_geometries(
    monkeypatch: pytest.MonkeyPatch, ch_mult: int, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
    input_offset: int,
) -> None:  # fmt: skip
    rng = np.random.default_rng(ch_mult * 1000 + input_offset + 127)
    x = _ints8(rng, (3, 11, 9, 5))
    w = _ints8(rng, (*kernel, 5 * ch_mult))
    geometry = {"stride": stride, "padding": padding, "dilation": dilation, "input_offset": input_offset}
    _depthwise_both(monkeypatch, x, w, ch_mult, **geometry)


def test_depthwise_output_past_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller's output size reaching past the input and its padding (CMSIS-NN's after-padding)."""
    rng = np.random.default_rng(2)
    x, w = _ints8(rng, (2, 6, 6, 4)), _ints8(rng, (3, 3, 4))
    geometry = {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "input_offset": 5}
    _depthwise_both(monkeypatch, x, w, 1, output_hw=(5, 4), **geometry)


@pytest.mark.parametrize("taps", [33, 257])
def test_depthwise_wide_sums_and_the_int32_wrap(monkeypatch: pytest.MonkeyPatch, taps: int) -> None:
    """33 x 33 taps at the extremes pass float32's exact 2^24 (numpy's int32 path); 257 x 257 pass 2^31
    (the C accumulator wraps)."""
    x = np.full((1, taps, taps, 2), 127, np.int8)
    w = np.full((taps, taps, 2), 127, np.int8)
    w[..., 1] = -128
    geometry = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "input_offset": 128}
    monkeypatch.setenv(jit.SWITCH, "1")
    with jit.compiled_loops():
        acc = conv.depthwise_accumulate(x, w, 1, Window((taps, taps)), (1, 1), 128)
    assert acc.tolist() == [[[[_wrap(taps * taps * 255 * 127), _wrap(taps * taps * 255 * -128)]]]]
    _depthwise_both(monkeypatch, x, w, 1, **geometry)


def _wrap(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _ints8(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    values = np.asarray(rng.integers(-128, 128, shape), dtype=np.int8)
    values.reshape(-1)[:2] = [-128, 127]
    return values


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "output_hw"),
    [
        ((28, 28), (2, 2), (2, 2), (0, 0), None),  # the benchmark nets' pools
        ((7, 7), (7, 7), (1, 1), (0, 0), None),  # a global average pool
        ((9, 7), (3, 2), (2, 3), (1, 1), None),  # windows over the padding on both sides
        ((5, 6), (3, 3), (1, 1), (1, 1), (5, 6)),  # "same": the last windows past the far edge
        ((4, 4), (3, 3), (2, 2), (2, 0), (3, 1)),  # a first window of one row
        ((1, 1), (1, 1), (1, 1), (0, 0), None),
    ],
)
def test_average_pool_compiled_and_numpy_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
    size: Pair,
    kernel: Pair,
    stride: Pair,
    padding: Pair,
    output_hw: Pair | None,
) -> None:
    """arm_avgpool_s8 in one compiled pass and on numpy's: extreme pixels, midpoints of both signs, clamps
    inside, crossed, and wider than int8, where the C's cast keeps the low bits."""
    rng = np.random.default_rng(sum(size) + 10 * kernel[0])
    x = rng.integers(-128, 128, (11, *size, 5)).astype(np.int8)
    x[0], x[1], x[2, ..., 0] = -128, 127, -3  # all the least, all the most, a channel of -3s
    clamps = [(-128, 127), (-20, 90), (30, -30), (-1000, 1000), (-(2**31), 2**31 - 1)]
    for act_min, act_max in clamps:
        outs = []
        for switch in ("all", "0"):
            monkeypatch.setenv(jit.SWITCH, switch)
            outs.append(
                avgpool_s8(
                    x, kernel=kernel, stride=stride, padding=padding, act_min=act_min, act_max=act_max,
                    output_hw=output_hw,
                )
            )  # fmt: skip
        assert outs[0].dtype == np.int8
        np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize(
    ("kernel", "hw"),
    [((5, 5), (28, 28)), ((3, 3), (14, 14)), ((1, 1), (6, 5)), ((3, 2), (7, 4)), ((10, 4), (5, 9))],
)
def test_one_channel_columns_are_im2cols(monkeypatch: pytest.MonkeyPatch, kernel: Pair, hw: Pair) -> None:
    """The compiled columns of a one-channel uint8 input are Window.im2col's bytes, every tap in its
    column (a wrong tap order would move values between columns), with rows and columns to spare."""
    from quantcore.kernels import compiled

    window = Window(kernel=kernel)
    need = [o + k - 1 for o, k in zip(hw, kernel, strict=True)]
    rng = np.random.default_rng(sum(need))
    padded = rng.integers(0, 256, (3, need[0] + 1, need[1] + 2, 1)).astype(np.uint8)
    monkeypatch.setenv(jit.SWITCH, "1")
    with jit.compiled_loops():
        got = compiled.one_channel_columns(padded, window, hw)
    want = window.im2col(padded, hw)
    assert got.dtype == np.uint8 and got.shape == (3, *hw, kernel[0] * kernel[1])
    np.testing.assert_array_equal(got, want)


def test_a_one_channel_convolution_is_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """arm_convolve_s8 on an image's first layer (1 input channel, padded; unit stride, and strided on
    numpy's columns), with the compiled columns and the integer product (FIXPOINT_JIT=1) and with numpy's
    float product (0)."""
    from quantcore.kernels import compiled, int_gemm

    rng = np.random.default_rng(21)
    x = rng.integers(-128, 128, (5, 13, 11, 1)).astype(np.int8)
    w = rng.integers(-128, 128, (7, 5, 3, 1)).astype(np.int8)
    quant = {
        "multiplier": rng.integers(1 << 30, 1 << 31, 7).astype(np.int32),
        "shift": rng.integers(-12, -6, 7).astype(np.int32),
    }
    bias = rng.integers(-5000, 5000, 7).astype(np.int32)
    calls = []
    columns = compiled.one_channel_columns
    monkeypatch.setattr(compiled, "one_channel_columns", lambda *a: calls.append(a) or columns(*a))
    for stride, runs in (((1, 1), 1), ((2, 1), 0)):
        results, exact = [], []
        for switch in ("1", "0"):
            monkeypatch.setenv(jit.SWITCH, switch)
            with jit.compiled_loops():
                exact.append(int_gemm.wanted(15))
                results.append(
                    conv.convolve_s8(
                        x, w, bias, **quant, input_offset=128, output_offset=-3, stride=stride, padding=(2, 1)
                    )
                )
        assert exact[1] is False
        if exact[0]:  # this machine's integer product is exact (its probe): the compiled columns ran
            assert len(calls) == runs
        calls.clear()
        np.testing.assert_array_equal(results[0], results[1])
