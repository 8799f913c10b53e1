"""The SVDF reference on hand-computed calls: the state shift, rank sums, the two clamps' orders, casts.

Every call uses multiplier 2^30 with shift 1, which requantizes exactly to the identity in both roundings
(x * 2 * 2^30 / 2^31 = x), so the expected numbers are plain integer arithmetic.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from quantcore.errors import KernelArgumentError
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import SvdfParams, svdf_s8, svdf_state_s16_s8

IDENTITY = {"input_multiplier": 1 << 30, "input_shift": 1, "output_multiplier": 1 << 30, "output_shift": 1}
PARAMS = SvdfParams(
    rank=2,
    input_offset=1,
    output_offset=-50,
    input_activation=(-128, 127),
    output_activation=(-128, 127),
    **IDENTITY,
)
X = np.array([[3, -2]], np.int8)
WEIGHTS_FEATURE = np.array([[1, 2], [-1, 1]], np.int8)
STATE = np.array([[[10, 20, 30], [40, 50, 60]]], np.int8)
WEIGHTS_TIME = np.array([[1, 0, 2], [0, 1, 1]], np.int8)
BIAS = np.array([100], np.int32)


def _call(params: SvdfParams = PARAMS, kernel: Any = svdf_s8, dtype: Any = np.int8, **kw: Any) -> Any:
    given = {"x": X, "state": STATE.astype(dtype), "weights_feature": WEIGHTS_FEATURE}
    given |= {"weights_time": WEIGHTS_TIME.astype(dtype), "bias": BIAS} | kw
    return kernel(
        given["x"], given["state"], given["weights_feature"], given["weights_time"], given["bias"], params
    )


@pytest.mark.parametrize("rounding", list(Rounding), ids=lambda r: r.value)
@pytest.mark.parametrize(("kernel", "dtype"), [(svdf_s8, np.int8), (svdf_state_s16_s8, np.int16)])
def test_one_call_by_hand(kernel: Any, dtype: Any, rounding: Rounding) -> None:
    # Features: (x - 1) = (2, -3) -> 2 - 6 = -4 and -2 - 3 = -5, written to each row's newest slot after the
    # shift: rows (20, 30, -4) and (50, 60, -5). Time products: 20 - 8 = 12 and 60 - 5 = 55; rank 2 sums
    # them into one unit: 67 + bias 100 = 167; + output_offset -50 = 117.
    x, state = X, STATE.astype(dtype)
    out, new_state = kernel(
        x, state, WEIGHTS_FEATURE, WEIGHTS_TIME.astype(dtype), BIAS, PARAMS, rounding=rounding
    )
    assert out.dtype == np.int8 and out.tolist() == [[117]]
    assert new_state.dtype == dtype and new_state.tolist() == [[[20, 30, -4], [50, 60, -5]]]
    assert state.tolist() == STATE.tolist()  # the caller's state is not modified


def test_no_bias_and_rank_one_units() -> None:
    out, _ = _call(replace(PARAMS, rank=1), bias=None)
    assert out.tolist() == [[12 - 50, 55 - 50]]


def test_a_filter_left_over_by_the_rank_updates_the_state_but_no_unit() -> None:
    three = np.array([[1, 2], [-1, 1], [0, 1]], np.int8)
    state = np.zeros((1, 3, 3), np.int8)
    out, new_state = _call(
        replace(PARAMS, rank=2), weights_feature=three, state=state, weights_time=np.ones((3, 3), np.int8)
    )
    assert out.tolist() == [[-4 - 5 + 100 - 50]]
    assert new_state[0, :, -1].tolist() == [-4, -5, -3]


def test_inverted_input_limits_give_max() -> None:
    # Input stage MIN(MAX(v, min), max) in every build: min > max gives max.
    params = replace(PARAMS, input_activation=(3, -3))
    _, state = _call(params)
    assert state[0, :, -1].tolist() == [-3, -3]


@pytest.mark.parametrize("limits", [(5, -5), (-300, 300), (-128, 128)])
def test_output_limits_the_builds_clamp_differently_are_refused(limits: tuple[int, int]) -> None:
    # Pure C: MAX(MIN(v, max), min) on the int32 limits (crossed gives min, wide ones truncate in the cast);
    # MVE: vmaxq with (int8_t)min, then vminq with (int8_t)max. They agree only on ordered int8 limits.
    with pytest.raises(KernelArgumentError) as refused:
        _call(replace(PARAMS, output_activation=limits))
    assert refused.value.argument == "output_activation" and "MVE" in str(refused.value)


def test_limits_wider_than_the_state_type_truncate_like_the_c_cast() -> None:
    params = replace(PARAMS, input_offset=0, input_activation=(-300, 300))
    # (100, 50) . (1, 2) = 200 -> int8 -56; a 16-bit state keeps it.
    x = np.array([[100, 50]], np.int8)
    _, state8 = _call(params, x=x)
    _, state16 = _call(params, kernel=svdf_state_s16_s8, dtype=np.int16, x=x)
    assert state8[0, 0, -1] == -56
    assert state16[0, 0, -1] == 200


def test_streaming_calls_see_the_previous_inputs() -> None:
    # Time weights (0, 0, 1) read only the newest slot; (1, 0, 0) read the slot two calls old.
    newest = np.array([[0, 0, 1], [0, 0, 1]], np.int8)
    oldest = np.array([[1, 0, 0], [1, 0, 0]], np.int8)
    params = replace(PARAMS, rank=1, output_offset=0)
    state = np.zeros((1, 2, 3), np.int8)
    outputs = []
    for k in range(3):
        x = np.array([[k + 2, 1]], np.int8)  # (x - 1) . (1, 2) = k + 1 and . (-1, 1) = -(k + 1)
        now, _ = svdf_s8(x, state, WEIGHTS_FEATURE, newest, None, params)
        past, state = svdf_s8(x, state, WEIGHTS_FEATURE, oldest, None, params)
        outputs.append((now.tolist(), past.tolist()))
    assert outputs == [([[1, -1]], [[0, 0]]), ([[2, -2]], [[0, 0]]), ([[3, -3]], [[1, -1]])]


def _rejects(argument: str, **kw: Any) -> None:
    params = kw.pop("params", PARAMS)
    with pytest.raises(KernelArgumentError) as info:
        _call(params, **kw)
    assert info.value.argument == argument


def test_arguments_the_c_cannot_compute_are_rejected_by_name() -> None:
    _rejects("rank", params=replace(PARAMS, rank=0))
    # INT32_MIN: the Helium build's saturating doubling multiply (arm_requantize_mve) differs there.
    _rejects("output_multiplier", params=replace(PARAMS, output_multiplier=-(2**31)))
    _rejects("params", params={"rank": 1})
    _rejects("bias", bias=np.array([1, 2], np.int32))
    _rejects("state", state=np.zeros((1, 2, 2), np.int8))
    _rejects("weights_time", weights_time=WEIGHTS_TIME.astype(np.int16))
    _rejects("output_shift", params=replace(PARAMS, output_shift=31))
    _rejects("input_activation", params=replace(PARAMS, input_activation=(1, 2, 3)))  # type: ignore[arg-type]
