"""transpose_conv_s8 and its wrapper: hand-computed scatters, the wrapper's path choice, the geometries each
C path cannot compute, and bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.requantize import Rounding, requantize
from quantcore.kernels.transpose_conv import transpose_conv_s8, transpose_conv_wrapper_s8, uses_reverse_conv

HALF = 1 << 30
X = np.array([1, 2], np.int8).reshape(1, 1, 2, 1)
W = np.array([1, 2, 30], np.int8).reshape(1, 1, 3, 1)
BIAS = np.array([-10], np.int32)


def _unit(channels: int = 1, **overrides: object) -> dict[str, object]:
    params: dict[str, object] = {
        "multiplier": np.full(channels, HALF, np.int32),
        "shift": np.ones(channels, np.int32),  # 0.5 * 2^1 = 1.0: the accumulator passes through unchanged
        "input_offset": 1,
        "output_offset": 0,
        "stride": (1, 2),
    }
    params.update(overrides)
    return params


def test_scatter_by_hand() -> None:
    # x + 1 = [2, 3], each spreads w = [1, 2, 30] from column 2j: [2, 4, 60 + 3, 6, 90], plus bias -10
    out = transpose_conv_s8(X, W, BIAS, **_unit())
    assert out.shape == (1, 1, 5, 1)
    assert out.ravel().tolist() == [-8, -6, 53, -4, 80]


def test_output_offset_and_clamp_outside_int8_are_the_cs() -> None:
    # [-8, -6, 53, -4, 80] + 128 = [120, 122, 181, 124, 208]: clamped to int8's 127, or, with act_max 255,
    # cast to int8 as the C casts (181 - 256 = -75, 208 - 256 = -48); crossed limits give act_max.
    assert transpose_conv_s8(X, W, BIAS, **_unit(output_offset=128)).ravel().tolist() == [
        120,
        122,
        127,
        124,
        127,
    ]
    wide = transpose_conv_s8(X, W, BIAS, **_unit(output_offset=128, act_max=255))
    assert wide.ravel().tolist() == [120, 122, -75, 124, -48]
    crossed = transpose_conv_s8(X, W, BIAS, **_unit(act_min=10, act_max=5))
    assert crossed.ravel().tolist() == [5, 5, 5, 5, 5]


def test_padding_crops_the_full_output() -> None:
    out = transpose_conv_s8(X, W, BIAS, **_unit(padding=(0, 1)))
    assert out.ravel().tolist() == [-6, 53, -4]  # default width (2 - 1) * 2 + 3 - 2 * 1


def test_columns_no_tap_reaches_hold_the_bias() -> None:
    # A 1x1 kernel with stride 3: the C's buffer is max(kernel, stride) wide per input column.
    w = np.array([5], np.int8).reshape(1, 1, 1, 1)
    out = transpose_conv_s8(X, w, np.array([7], np.int32), **_unit(stride=(1, 3), output_hw=(1, 6)))
    assert out.ravel().tolist() == [17, 7, 7, 22, 7, 7]


def test_rows_and_channels_by_hand() -> None:
    # Two input rows, stride 1, a 2x1 kernel of 1s: row r of the output sums input rows r - 1 and r;
    # output channel 1 has weights 2 and a bias of 1.
    x = np.array([1, 10], np.int8).reshape(1, 2, 1, 1)
    w = np.array([1, 1, 2, 2], np.int8).reshape(2, 2, 1, 1)
    out = transpose_conv_s8(x, w, np.array([0, 1], np.int32), **_unit(2, input_offset=0, stride=(1, 1)))
    assert out[0, :, 0].tolist() == [[1, 3], [11, 23], [10, 21]]


def _naive(
    x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pad: tuple[int, int], hw: tuple[int, int]
) -> np.ndarray:
    """Unscaled accumulators by explicit loops over input pixels and taps (offset 0, no bias)."""
    n, ih, iw, _ = x.shape
    out_ch, kh, kw, _ = w.shape
    acc = np.zeros((n, hw[0], hw[1], out_ch), np.int64)
    for b, i, j, ky, kx in np.ndindex(n, ih, iw, kh, kw):
        y, xx = i * stride[0] + ky - pad[0], j * stride[1] + kx - pad[1]
        if 0 <= y < hw[0] and 0 <= xx < hw[1]:
            acc[b, y, xx] += w[:, ky, kx, :].astype(np.int64) @ x[b, i, j].astype(np.int64)
    return acc


@pytest.mark.parametrize(("in_ch", "stride"), [(3, (2, 3)), (17, (2, 1)), (17, (3, 2))])
def test_both_paths_match_explicit_loops(in_ch: int, stride: tuple[int, int]) -> None:
    # (17, (2, 1)) takes the wrapper's reverse-conv path, the others arm_transpose_conv_s8's.
    rng = np.random.default_rng(in_ch + stride[1])
    x = rng.integers(-8, 8, (2, 3, 4, in_ch), dtype=np.int8)
    w = rng.integers(-8, 8, (3, 3, 4, in_ch), dtype=np.int8)
    hw = (3 * stride[0] - 1, 3 * stride[1] + 2)  # the default height; 2 columns short of the default width
    quant = _unit(3, input_offset=0, output_offset=0, stride=stride, padding=(1, 0), output_hw=hw)
    quant["shift"] = np.full(3, -3, np.int32)  # scale 1/16, so that most outputs stay inside int8
    out = transpose_conv_wrapper_s8(x, w, None, **quant)
    expected = requantize(_naive(x, w, stride, (1, 0), hw), HALF, -3, Rounding.DOUBLE)
    assert np.array_equal(out, np.clip(expected, -128, 127))


def test_wrapper_path_choice() -> None:
    assert uses_reverse_conv((2, 2), 17)
    assert uses_reverse_conv((1, 2), 64)
    assert not uses_reverse_conv((2, 2), 16)  # REVERSE_TCOL_EFFICIENT_THRESHOLD: more than 16 channels
    assert not uses_reverse_conv((3, 1), 64)


def test_reverse_path_takes_outputs_the_rolling_buffer_cannot_write() -> None:
    # 1x1 kernel, stride 2, no padding: the output is 3 wide, but arm_transpose_conv_s8 writes in_w*2 = 4.
    x = np.zeros((1, 2, 2, 17), np.int8)
    x[0, 0, :, 0] = [1, 2]
    w = np.zeros((1, 1, 1, 17), np.int8)
    w[0, 0, 0, 0] = 5
    params = _unit(input_offset=0, stride=(2, 2))
    out = transpose_conv_wrapper_s8(x, w, np.array([1], np.int32), **params)
    assert out.shape == (1, 3, 3, 1)
    assert out[0, ..., 0].tolist() == [[6, 1, 11], [1, 1, 1], [1, 1, 1]]
    with pytest.raises(KernelArgumentError, match="'output_hw' height 3 is below in_h"):
        transpose_conv_s8(x, w, np.array([1], np.int32), **params)


def test_single_rounding_changes_the_result() -> None:
    one = np.ones((1, 1, 1, 1), np.int8)
    kw = _unit(input_offset=0, stride=(1, 1), shift=np.array([-1], np.int32))
    assert transpose_conv_s8(one, one, None, **kw).item() == 1
    assert transpose_conv_s8(one, one, None, rounding=Rounding.SINGLE, **kw).item() == 0


@pytest.mark.parametrize(
    ("shape", "change", "message"),
    [
        # in_h * stride_h - pad_h = 2 rows are flushed before the tail: the output must hold them
        ((2, 1, 1), {"stride": (1, 1), "output_hw": (1, 1)}, "'output_hw' height 1 is below"),
        # rows: (2 - 1) * 1 + max(1, 1) = 2 exist in the buffer
        (
            (2, 1, 1),
            {"stride": (1, 1), "output_hw": (3, 1)},
            "'output_hw' height 3 with pad_h 0 reaches past",
        ),
        ((1, 2, 1), {"stride": (1, 1), "output_hw": (1, 3)}, "'output_hw' width 3 with pad_w 0 reaches past"),
        ((1, 1, 5), {"stride": (1, 1), "padding": (2, 0), "output_hw": (1, 1)}, "'padding' pad_h 2 exceeds"),
    ],
)
def test_rolling_buffer_rejects_geometries_it_mis_writes(
    shape: tuple[int, int, int], change: dict[str, object], message: str
) -> None:
    ih, iw, kh = shape
    x, w = np.ones((1, ih, iw, 1), np.int8), np.ones((1, kh, 1, 1), np.int8)
    for fn in (transpose_conv_s8, transpose_conv_wrapper_s8):  # one channel: the wrapper's direct path too
        with pytest.raises(KernelArgumentError, match=re.escape(message)):
            fn(x, w, None, **_unit(**change))  # type: ignore[operator]


def test_reverse_path_rejects_padding_beyond_the_kernel() -> None:
    x, w = np.ones((1, 2, 2, 17), np.int8), np.ones((1, 2, 2, 17), np.int8)
    with pytest.raises(KernelArgumentError, match=r"'padding' \(2, 0\) exceeds kernel - 1 = \(1, 1\)"):
        transpose_conv_wrapper_s8(x, w, None, **_unit(stride=(2, 2), padding=(2, 0), output_hw=(1, 4)))


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"x": X.astype(np.int16)}, "input"),
        ({"weights": np.ones((1, 1, 3, 2), np.int8)}, "weights"),  # C_IN 2 against the input's 1
        ({"bias": BIAS.astype(np.int64)}, "bias"),
        ({"bias": np.array([1, 2], np.int32)}, "bias"),
        ({"input_offset": -128}, "input_offset"),
        ({"shift": np.array([-32], np.int32)}, "shift"),
        ({"stride": (0, 2)}, "stride"),
        ({"padding": (0, -1)}, "padding"),
        ({"output_hw": (0, 5)}, "output_hw"),
        ({"padding": (1, 0)}, "padding"),  # the default height (1 - 1) * 1 + 1 - 2 leaves no output
    ],
)
def test_bad_arguments_name_the_argument(change: dict[str, object], argument: str) -> None:
    x = change.pop("x", X)
    weights = change.pop("weights", W)
    bias = change.pop("bias", BIAS)
    with pytest.raises(KernelArgumentError, match=re.escape(f"'{argument}")) as err:
        transpose_conv_s8(x, weights, bias, **_unit(**change))  # type: ignore[arg-type]
    assert err.value.kernel == "arm_transpose_conv_s8"
