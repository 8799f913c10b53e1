"""fully_connected_s8, per tensor and per channel, with literal integers."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.fully_connected import fully_connected_s8

HALF = 1 << 30
X = np.array([[1, 2, 3]], np.int8)
W = np.array([[1, 1, 1], [1, -1, 0]], np.int8)
BIAS = np.array([1, 0], np.int32)


def test_per_tensor_by_hand() -> None:
    # x + 1 = [2, 3, 4]; acc = [9, -1] + bias [1, 0] = [10, -1]; * 0.5 -> [5, 0] (-0.5 rounds up); + 3
    out = fully_connected_s8(X, W, BIAS, multiplier=HALF, shift=0, input_offset=1, output_offset=3)
    assert out.tolist() == [[8, 3]]


def test_per_channel_by_hand() -> None:
    out = fully_connected_s8(
        X,
        W,
        BIAS,
        multiplier=np.array([HALF, HALF], np.int32),
        shift=np.array([1, 0], np.int32),
        input_offset=1,
        output_offset=3,
    )
    assert out.tolist() == [[13, 3]]


def test_filter_offset_applies_to_every_weight() -> None:
    # (x + 1) . (w + 1): row 0 = 2*2 + 3*2 + 4*2 = 18, row 1 = 2*2 + 3*0 + 4*1 = 8
    out = fully_connected_s8(
        X, W, None, multiplier=HALF, shift=1, input_offset=1, output_offset=0, filter_offset=1
    )
    assert out.tolist() == [[18, 8]]


def test_batches_and_nhwc_inputs_flatten() -> None:
    x = np.arange(-6, 6, dtype=np.int8).reshape(4, 1, 1, 3)
    flat = fully_connected_s8(
        x.reshape(4, 3), W, BIAS, multiplier=HALF, shift=1, input_offset=0, output_offset=0
    )
    nhwc = fully_connected_s8(x, W, BIAS, multiplier=HALF, shift=1, input_offset=0, output_offset=0)
    assert np.array_equal(flat, nhwc)
    assert flat[:, 0].tolist() == [-14, -5, 4, 13]  # sum of each row plus bias 1


def test_offsets_beyond_a_negated_int8_zero_point_are_computed() -> None:
    # One row: x = [1, 2], w = [3, -1]; (1 + 1000)(3 + 200) + (2 + 1000)(-1 + 200) = 203203 + 199398
    # = 402601, through 0.5 * 2^-12: 402601 / 8192 = 49.1 -> 49, + output_offset 0.
    x, w = np.array([[1, 2]], np.int8), np.array([[3, -1]], np.int8)
    out = fully_connected_s8(
        x, w, None, multiplier=HALF, shift=-12, input_offset=1000, filter_offset=200, output_offset=0
    )
    assert out.tolist() == [[49]]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"multiplier": np.array([HALF], np.int32), "shift": np.array([0], np.int32)}, "multiplier"),
        ({"input_offset": 32641}, "input_offset"),  # int8 + offset leaves the DSP build's int16 lanes
        ({"filter_offset": -32641}, "filter_offset"),
        ({"shift": -32}, "shift"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, object], argument: str) -> None:
    params: dict[str, object] = {"multiplier": HALF, "shift": 0, "input_offset": 0, "output_offset": 0}
    params.update(kwargs)
    with pytest.raises(KernelArgumentError, match=f"'{argument}'"):
        fully_connected_s8(X, W, BIAS, **params)  # type: ignore[arg-type]


def test_input_depth_must_match_the_weights() -> None:
    with pytest.raises(KernelArgumentError, match=r"'input'.*3 values per sample"):
        fully_connected_s8(
            np.zeros((1, 4), np.int8), W, BIAS, multiplier=HALF, shift=0, input_offset=0, output_offset=0
        )
