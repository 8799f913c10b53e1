"""batch_matmul_s8 / _s16: hand-computed products, batch broadcasting, the C's accumulators, bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.batch_matmul import batch_matmul_s8, batch_matmul_s16
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.requantize import Rounding

HALF = 1 << 30
PASS = {"multiplier": HALF, "shift": 1}  # 0.5 * 2^1 = 1.0: the accumulator passes through unchanged
LHS = np.array([[1, 2], [3, 4]], np.int8).reshape(1, 1, 2, 2)
RHS = np.array([[1, 0], [1, 1]], np.int8).reshape(1, 1, 2, 2)  # transposed: row j is output column j


def _s8(lhs: np.ndarray, rhs: np.ndarray, **overrides: object) -> np.ndarray:
    kwargs: dict[str, object] = {**PASS, "input_offset": 0, "filter_offset": 0, "output_offset": 0}
    kwargs.update(overrides)
    return batch_matmul_s8(lhs, rhs, **kwargs)  # type: ignore[arg-type]


def test_s8_with_offsets_by_hand() -> None:
    # lhs + 1 = [[2, 3], [4, 5]]; rhs - 1 = [[0, -1], [0, 0]]; rows . rows = [[-3, 0], [-5, 0]]; + 10
    out = _s8(LHS, RHS, input_offset=1, filter_offset=-1, output_offset=10)
    assert out.tolist() == [[[[7, 10], [5, 10]]]]


def test_s8_output_offset_and_clamp_outside_int8_are_the_cs() -> None:
    # Products [[1, 3], [3, 7]]; + 128 = [[129, 131], [131, 135]]. arm_batch_matmul_s8 adds the offset in
    # int32, clamps and casts: within int8's clamp every value is 127; with act_max 200 the int8 cast of
    # 129 is -127 (129 - 256); crossed limits give act_max everywhere (MIN(MAX(v, 5), 4) = 4).
    assert _s8(LHS, RHS, output_offset=128).tolist() == [[[[127, 127], [127, 127]]]]
    assert _s8(LHS, RHS, output_offset=128, act_max=200).tolist() == [[[[-127, -125], [-125, -121]]]]
    assert _s8(LHS, RHS, act_min=5, act_max=4).tolist() == [[[[4, 4], [4, 4]]]]
    # The int32 sum wraps as on the targets: 1 + INT32_MAX is INT32_MIN, whose low byte is 0 (and 3, 7 give
    # INT32_MIN + 2, + 6); without the wrap the clamp would make every value 127.
    wrapped = _s8(LHS, RHS, output_offset=2**31 - 1, act_min=-(2**31))
    assert wrapped.tolist() == [[[[0, 2], [2, 6]]]]


def test_s8_rhs_rows_are_output_columns() -> None:
    assert _s8(LHS, RHS)[0, 0].tolist() == [[1, 3], [3, 7]]


def test_batch_dimensions_broadcast() -> None:
    lhs = np.array([1, 2], np.int8).reshape(2, 1, 1, 1)
    rhs = np.array([1, 10, 100], np.int8).reshape(1, 3, 1, 1)
    out = _s8(lhs, rhs)
    assert out.shape == (2, 3, 1, 1)
    assert out.ravel().tolist() == [1, 10, 100, 2, 20, 127]  # 200 is clamped


def test_s8_accumulator_wraps_like_int32() -> None:
    depth = 33100  # 255 * 255 * 33100 = 2152327500 wraps to -2142639796
    lhs = np.full((1, 1, 1, depth), 127, np.int8)
    out = _s8(lhs, lhs, input_offset=128, filter_offset=128, multiplier=HALF, shift=-24)
    assert out.item() == -64  # unwrapped it would be +64


def test_single_rounding_changes_the_result() -> None:
    one = np.ones((1, 1, 1, 1), np.int8)
    assert _s8(one, one, shift=-1).item() == 1
    assert _s8(one, one, shift=-1, rounding=Rounding.SINGLE).item() == 0


def test_s16_by_hand() -> None:
    lhs = np.array([1000, -2000], np.int16).reshape(1, 1, 1, 2)
    rhs = np.array([[3, 4], [30000, 1]], np.int16).reshape(1, 1, 2, 2)
    # [3000 - 8000, 30000000 - 2000] through a unit scale, the second clamped
    out = batch_matmul_s16(lhs, rhs, **PASS)
    assert out.ravel().tolist() == [-5000, 32767]


def test_s16_accumulates_in_int64() -> None:
    lhs = np.full((1, 1, 1, 4), -32768, np.int16)
    # acc = 4 * 2^30 = 2^32 (0 in int32); * 2^-1 (Q15 0.5) * 2^-18 = 2^13
    out = batch_matmul_s16(lhs, lhs, multiplier=HALF, shift=-18)
    assert out.item() == 8192


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"lhs": LHS.astype(np.int16)}, "lhs"),
        ({"lhs": LHS[0]}, "lhs"),
        ({"rhs": np.zeros((1, 1, 2, 3), np.int8)}, "rhs"),  # depth 3 against lhs's 2: not transposed
        ({"lhs": np.zeros((2, 1, 2, 2), np.int8), "rhs": np.zeros((3, 1, 2, 2), np.int8)}, "rhs"),
        ({"input_offset": -32641}, "input_offset"),
        ({"filter_offset": 32641}, "filter_offset"),
        ({"multiplier": -(2**31)}, "multiplier"),
        ({"shift": 31}, "shift"),
    ],
)
def test_s8_bad_arguments_name_the_argument(change: dict[str, object], argument: str) -> None:
    lhs = change.pop("lhs", LHS)
    rhs = change.pop("rhs", RHS)
    with pytest.raises(KernelArgumentError, match=re.escape(f"'{argument}'")) as err:
        _s8(lhs, rhs, **change)  # type: ignore[arg-type]
    assert err.value.kernel == "arm_batch_matmul_s8"


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"lhs": LHS}, "lhs"),  # int8 operands belong to batch_matmul_s8
        ({"shift": 15}, "shift"),  # arm_nn_requantize_s64 shifts by 14 - shift: negative beyond 14
    ],
)
def test_s16_bad_arguments_name_the_argument(change: dict[str, object], argument: str) -> None:
    lhs = change.pop("lhs", LHS.astype(np.int16))
    kwargs: dict[str, object] = {**PASS, **change}
    with pytest.raises(KernelArgumentError, match=re.escape(f"'{argument}'")) as err:
        batch_matmul_s16(lhs, RHS.astype(np.int16), **kwargs)  # type: ignore[arg-type]
    assert err.value.kernel == "arm_batch_matmul_s16"


@pytest.mark.parametrize("offsets", [(-128, 0), (1000, -5000), (32640, -32640), (-32640, 129)])
@pytest.mark.parametrize("rounding", list(Rounding))
def test_s8_offsets_beyond_int8_compute_as_fully_connected(
    offsets: tuple[int, int], rounding: Rounding
) -> None:
    """Both kernels are arm_nn_vec_mat_mult_t_s8 in the C, so a batch matmul of one matrix pair is a fully
    connected layer without bias: the same bytes for offsets up to the int16 lanes' end (fully connected's
    offsets beyond int8 are checked against compiled CMSIS-NN in test_kernel_argument_audit.py)."""
    rng = np.random.default_rng(21)
    lhs = rng.integers(-128, 128, size=(5, 40)).astype(np.int8)
    rhs = rng.integers(-128, 128, size=(7, 40)).astype(np.int8)
    acc = (lhs.astype(np.int64) + offsets[0]) @ (rhs.astype(np.int64) + offsets[1]).T
    wrapped = (acc + 2**31) % 2**32 - 2**31  # the C's int32 accumulator
    # A shift that brings the largest accumulator to about +-100 (the multiplier is 0.707).
    shift = int(np.floor(np.log2(100 / (0.707 * np.abs(wrapped).max()))))
    arguments = {
        "multiplier": 1_518_500_250,
        "shift": shift,
        "input_offset": offsets[0],
        "filter_offset": offsets[1],
        "output_offset": 3,
        "rounding": rounding,
    }
    expected = fully_connected_s8(lhs, rhs, None, **arguments)  # type: ignore[arg-type]
    out = batch_matmul_s8(lhs.reshape(1, 1, 5, 40), rhs.reshape(1, 1, 7, 40), **arguments)  # type: ignore[arg-type]
    np.testing.assert_array_equal(out.reshape(5, 7), expected)
    assert len(np.unique(wrapped)) > 10 and expected.min() > -128 and expected.max() < 127  # none clamped
