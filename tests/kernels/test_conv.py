"""convolve_s8 and depthwise_conv_s8: hand-computed outputs, padding semantics, batching, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.conv import convolve_s8, depthwise_conv_s8
from quantcore.kernels.requantize import Rounding

HALF = 1 << 30


def _one_channel(**overrides: object) -> dict[str, object]:
    params: dict[str, object] = {
        "multiplier": np.array([HALF], np.int32),
        "shift": np.array([1], np.int32),  # 0.5 * 2^1 = 1.0: the accumulator passes through unchanged
        "input_offset": 0,
        "output_offset": -5,
        "padding": (1, 1),
        "output_hw": (3, 3),
    }
    params.update(overrides)
    return params


X = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 2, 1)
ONES = np.ones((1, 2, 2, 1), np.int8)
BIAS = np.array([10], np.int32)


def test_conv_with_padding_by_hand() -> None:
    out = convolve_s8(X, ONES, BIAS, **_one_channel())
    # window sums 1,3,2 / 4,10,6 / 3,7,4, plus bias 10, minus 5
    assert out[0, ..., 0].tolist() == [[6, 8, 7], [9, 15, 11], [8, 12, 9]]


def test_conv_activation_clamp() -> None:
    out = convolve_s8(X, ONES, BIAS, **_one_channel(act_min=7, act_max=10))
    assert out[0, ..., 0].tolist() == [[7, 8, 7], [9, 10, 10], [8, 10, 9]]


def test_padding_counts_as_the_input_zero_point() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 5, 6, 3), dtype=np.int8)
    w = rng.integers(-127, 128, (4, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, 4, dtype=np.int32)
    quant = {"multiplier": np.full(4, 1_500_000_000, np.int32), "shift": np.full(4, -9, np.int32)}
    zero_point = -100
    padded = np.pad(x, ((0, 0), (1, 1), (2, 2), (0, 0)), constant_values=zero_point)
    implicit = convolve_s8(
        x, w, bias, input_offset=100, output_offset=3, padding=(1, 2), output_hw=(5, 8), **quant
    )
    explicit = convolve_s8(padded, w, bias, input_offset=100, output_offset=3, **quant)
    assert np.array_equal(implicit, explicit)


def test_batches_are_independent() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (3, 6, 6, 2), dtype=np.int8)
    w = rng.integers(-127, 128, (5, 3, 2, 2), dtype=np.int8)
    kw = {
        "multiplier": np.full(5, 1_200_000_000, np.int32),
        "shift": np.arange(-9, -4, dtype=np.int32),
        "input_offset": 7,
        "output_offset": -2,
        "stride": (2, 1),
        "dilation": (1, 2),
    }
    whole = convolve_s8(x, w, None, **kw)
    assert whole.shape == (3, 2, 4, 5)  # H: (6-3)//2+1; W: (6-3)//1+1 with the dilated 1x3 reach
    for n in range(3):
        assert np.array_equal(whole[n : n + 1], convolve_s8(x[n : n + 1], w, None, **kw))


def test_grouped_conv_is_independent_convs_per_group() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 4, 4, 4), dtype=np.int8)
    w = rng.integers(-127, 128, (6, 2, 2, 2), dtype=np.int8)
    kw = {
        "multiplier": np.full(6, HALF, np.int32),
        "shift": np.full(6, -6, np.int32),
        "input_offset": 1,
        "output_offset": 0,
    }
    zeros6 = np.zeros(6, np.int32)
    grouped = convolve_s8(x, w, zeros6, **kw)
    with pytest.raises(KernelArgumentError, match="'bias' is required for a grouped"):
        convolve_s8(x, w, None, **kw)
    kw3 = {**kw, "multiplier": np.full(3, HALF, np.int32), "shift": np.full(3, -6, np.int32)}
    first = convolve_s8(np.ascontiguousarray(x[..., :2]), w[:3], zeros6[:3], **kw3)
    second = convolve_s8(np.ascontiguousarray(x[..., 2:]), w[3:], zeros6[3:], **kw3)
    assert np.array_equal(grouped, np.concatenate([first, second], axis=-1))


def test_depthwise_channel_multiplier_by_hand() -> None:
    x = np.array([1, 10, 2, 20], np.int8).reshape(1, 1, 2, 2)  # two pixels, channels (a, b)
    # kernel 1x2, ch_mult 2: output channel c*2+m reads input channel c
    w = np.array([1, 2, 3, 4, 1, 1, 1, 1], np.int8).reshape(1, 1, 2, 4)
    out = depthwise_conv_s8(
        x,
        w,
        np.array([0, 0, 0, 100], np.int32),
        multiplier=np.full(4, HALF, np.int32),
        shift=np.full(4, 1, np.int32),
        input_offset=0,
        output_offset=0,
    )
    # ch0 m0: 1*1 + 2*1 = 3; ch0 m1: 1*2 + 2*1 = 4; ch1 m0: 10*3 + 20*1 = 50;
    # ch1 m1: 10*4 + 20*1 + 100 = 160, clamped to 127
    assert out.ravel().tolist() == [3, 4, 50, 127]


def test_single_rounding_changes_the_result() -> None:
    x = np.full((1, 1, 1, 1), 1, np.int8)
    w = np.ones((1, 1, 1, 1), np.int8)
    kw = {
        "multiplier": np.array([HALF], np.int32),
        "shift": np.array([-1], np.int32),
        "input_offset": 0,
        "output_offset": 0,
    }
    assert convolve_s8(x, w, None, **kw).item() == 1
    assert convolve_s8(x, w, None, rounding=Rounding.SINGLE, **kw).item() == 0


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"weights": ONES.astype(np.int16)}, "weights"),
        ({"x": X.astype(np.uint8)}, "input"),
        ({"bias": BIAS.astype(np.int8)}, "bias"),
        ({"bias": np.array([1, 2], np.int32)}, "bias"),
        ({"input_offset": -128}, "input_offset"),
        ({"shift": np.array([31], np.int32)}, "shift"),
        ({"stride": (0, 1)}, "stride"),
        ({"x": X[0]}, "input"),
    ],
)
def test_bad_arguments_name_the_argument(change: dict[str, object], argument: str) -> None:
    x = change.pop("x", X)
    weights = change.pop("weights", ONES)
    bias = change.pop("bias", BIAS)
    with pytest.raises(KernelArgumentError, match=f"'{argument}") as err:
        convolve_s8(x, weights, bias, **_one_channel(**change))  # type: ignore[arg-type]
    assert err.value.kernel == "arm_convolve_s8"


def test_input_smaller_than_the_window_is_rejected() -> None:
    with pytest.raises(KernelArgumentError, match="smaller than the kernel window"):
        convolve_s8(X, np.ones((1, 3, 3, 1), np.int8), BIAS, **_one_channel(padding=(0, 0), output_hw=None))


def test_depthwise_rejects_output_channels_not_a_multiple_of_input() -> None:
    with pytest.raises(KernelArgumentError, match=r"'weights'.*multiple"):
        depthwise_conv_s8(
            np.zeros((1, 2, 2, 2), np.int8),
            np.zeros((1, 1, 1, 3), np.int8),
            None,
            multiplier=np.full(3, HALF, np.int32),
            shift=np.zeros(3, np.int32),
            input_offset=0,
            output_offset=0,
        )
