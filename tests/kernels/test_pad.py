"""pad_s8: hand-computed outputs for both of the C's copy paths, and bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.pad import pad_s8

X = np.array([5, 6], np.int8).reshape(1, 1, 2, 1)


def test_pad_every_dimension_by_hand() -> None:
    # Channels change, so the C pads pixel by pixel: one row before, one channel before, one pixel and
    # one batch after.
    out = pad_s8(X, pre_pad=(0, 1, 0, 1), post_pad=(1, 0, 1, 0), pad_value=-1)
    fill = [[-1, -1]] * 3
    assert out.shape == (2, 2, 3, 2)
    assert out.tolist() == [[fill, [[-1, 5], [-1, 6], [-1, -1]]], [fill, fill]]


def test_pad_rows_and_pixels_only_by_hand() -> None:
    # Same channel count: the C copies whole rows of the input.
    x = np.array([1, 2, 3, 4], np.int8).reshape(1, 2, 1, 2)
    out = pad_s8(x, pre_pad=(0, 0, 1, 0), post_pad=(0, 1, 0, 0), pad_value=-128)
    assert out.tolist() == [[[[-128, -128], [1, 2]], [[-128, -128], [3, 4]], [[-128, -128], [-128, -128]]]]


def test_no_padding_is_a_copy() -> None:
    out = pad_s8(X, pre_pad=(0, 0, 0, 0), post_pad=(0, 0, 0, 0), pad_value=9)
    assert out.tolist() == X.tolist()
    assert out is not X


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"x": X.astype(np.int16)}, "input"),
        ({"x": X[0]}, "input"),
        ({"pre_pad": (0, -1, 0, 0)}, "pre_pad.h"),
        ({"post_pad": (0, 0, 1)}, "post_pad"),
        ({"post_pad": (0, 0, 1.5, 0)}, "post_pad.w"),
        ({"pad_value": 128}, "pad_value"),
        ({"pad_value": True}, "pad_value"),
        ({"post_pad": (2**16, 2**16, 0, 0)}, "post_pad"),
    ],
)
def test_bad_arguments_name_the_argument(change: dict[str, object], argument: str) -> None:
    kwargs: dict[str, object] = {"pre_pad": (0, 0, 0, 0), "post_pad": (0, 0, 0, 0), "pad_value": 0}
    x = change.pop("x", X)
    kwargs.update(change)
    with pytest.raises(KernelArgumentError, match=re.escape(f"'{argument}'")) as err:
        pad_s8(x, **kwargs)  # type: ignore[arg-type]
    assert err.value.kernel == "arm_pad_s8"
