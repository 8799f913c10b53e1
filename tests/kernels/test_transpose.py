"""transpose_s8: hand-computed permutations of 1 to 4 dimensions, the 2-D swap the C makes of any permutation,
and the permutations the C mis-handles."""

from __future__ import annotations

import re

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.transpose import transpose_s8


def test_four_dimensions_by_hand() -> None:
    # NHWC (1, 2, 1, 3) to NCWH: out[0, c, 0, h] = x[0, h, 0, c]
    x = np.array([0, 1, 2, 3, 4, 5], np.int8).reshape(1, 2, 1, 3)
    out = transpose_s8(x, (0, 3, 2, 1))
    assert out.tolist() == [[[[0, 3]], [[1, 4]], [[2, 5]]]]


def test_three_dimensions_by_hand() -> None:
    # out[a, b, c] = x[c, a, b]
    x = np.array([1, 2, 3, 4, 5, 6], np.int8).reshape(2, 1, 3)
    out = transpose_s8(x, (1, 2, 0))
    assert out.tolist() == [[[1, 4], [2, 5], [3, 6]]]


def test_matrix_and_vector_by_hand() -> None:
    assert transpose_s8(np.array([[1, 2, 3], [4, 5, 6]], np.int8), [1, 0]).tolist() == [
        [1, 4],
        [2, 5],
        [3, 6],
    ]
    assert transpose_s8(np.array([7, -8], np.int8), [0]).tolist() == [7, -8]


def test_two_dimensions_swap_whatever_the_permutation() -> None:
    # arm_transpose_s8 with num_dims 2 never reads the permutation: (0, 1) swaps the matrix like (1, 0).
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    assert transpose_s8(x, (0, 1)).tolist() == [[1, 4], [2, 5], [3, 6]]


def test_output_is_in_c_byte_order() -> None:
    out = transpose_s8(np.arange(12, dtype=np.int8).reshape(3, 4), (1, 0))
    assert out.flags.c_contiguous
    assert out.tobytes() == bytes([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11])


@pytest.mark.parametrize(
    ("shape", "perm", "argument"),
    [
        ((2, 3, 4), (0, 0, 1), "perm"),  # the C accepts repeats and leaves an output stride at 0
        ((2, 3, 4), (0, 1, 3), "perm[2]"),
        ((2, 3, 4), (0, 1), "perm"),
        ((2, 3, 4), "012", "perm"),
        ((1, 1, 1, 1, 2), (0, 1, 2, 3, 4), "input"),
    ],
)
def test_bad_permutations_name_the_argument(shape: tuple[int, ...], perm: object, argument: str) -> None:
    with pytest.raises(KernelArgumentError, match=re.escape(f"'{argument}'")) as err:
        transpose_s8(np.zeros(shape, np.int8), perm)  # type: ignore[arg-type]
    assert err.value.kernel == "arm_transpose_s8"


def test_other_dtypes_are_rejected() -> None:
    with pytest.raises(KernelArgumentError, match="'input' must have dtype int8"):
        transpose_s8(np.zeros((2, 3), np.uint8), (1, 0))  # type: ignore[arg-type]
