"""Bit-exact reference of CMSIS-NN's arm_svdf_s8 (int8 state) and arm_svdf_state_s16_s8 (int16 state).

An SVDF layer (TFLite's SVDF, as streaming keyword-spotting models use it) keeps, per batch and feature
filter, the last `time` activations of a rank-factored filter. One call, as the pure-C build computes it:
  1. the state shifts one place towards the past (a memmove of the whole buffer by one element: each
     filter's row loses its oldest value, and its newest slot is overwritten next);
  2. state[b, f, -1] = clip(requant(sum((x[b] - input_offset) * weights_feature[f])), input_activation)
     (arm_nn_vec_mat_mult_t_s8 / arm_nn_vec_mat_mult_t_svdf_s8; an int32 accumulator that wraps);
  3. a[b, f] = sum_t weights_time[f, t] * state[b, f, t] (int32, wrapping);
  4. out[b, u] = clip(requant(bias[u] + sum_r a[b, u * rank + r]) + output_offset, output_activation).
The state is returned rather than updated in place; the next call takes it (streaming use). `input_offset`
is subtracted, as the C does (it passes -input_offset as the matrix product's lhs offset).

The C casts its clamped state values to the state type without checking the input activation limits
against it, so limits wider than the type truncate here too. Argument checks are what the C needs to be
defined - matching shapes, a rank of at least 1 (the C divides by it), shifts the requantization can shift
by - and one where the builds part: the output activation must be an int8 range with min <= max, because
the MVE build narrows its limits to int8 and clamps MAX-then-MIN where the pure-C one clamps in int32
MIN-then-MAX (arm_svdf_s8.c, arm_svdf_state_s16_s8.c), so wider or crossed limits give different bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import I64, INT8_MAX, INT8_MIN, INT16_MAX, INT32_MAX, INT32_MIN, Args, wrap32
from quantcore.kernels.lstm import SHIFT_RANGE, c_requantize
from quantcore.kernels.requantize import Rounding

Int8Array = npt.NDArray[np.int8]


@dataclass(frozen=True)
class SvdfParams:
    """cmsis_nn_svdf_params plus the two cmsis_nn_per_tensor_quant_params (input = multiplier_in/shift_1,
    output = multiplier_out/shift_2). Activations are (min, max) pairs."""

    rank: int
    input_offset: int
    output_offset: int
    input_multiplier: int
    input_shift: int
    output_multiplier: int
    output_shift: int
    input_activation: tuple[int, int]
    output_activation: tuple[int, int]


class SvdfResult(NamedTuple):
    output: Int8Array
    """(batches, feature_batches // rank) int8."""
    state: npt.NDArray[Any]
    """(batches, feature_batches, time_batches): the state buffer as the call leaves it."""


def svdf_s8(
    x: Int8Array,
    state: Int8Array,
    weights_feature: Int8Array,
    weights_time: Int8Array,
    bias: npt.NDArray[np.int32] | None,
    params: SvdfParams,
    *,
    rounding: Rounding = Rounding.DOUBLE,
) -> SvdfResult:
    """arm_svdf_s8: int8 state and time weights."""
    return _svdf(
        Args("arm_svdf_s8"), np.int8, x, state, weights_feature, weights_time, bias, params, rounding
    )


def svdf_state_s16_s8(
    x: Int8Array,
    state: npt.NDArray[np.int16],
    weights_feature: Int8Array,
    weights_time: npt.NDArray[np.int16],
    bias: npt.NDArray[np.int32] | None,
    params: SvdfParams,
    *,
    rounding: Rounding = Rounding.DOUBLE,
) -> SvdfResult:
    """arm_svdf_state_s16_s8: int16 state and time weights, int8 input and output."""
    args = Args("arm_svdf_state_s16_s8")
    return _svdf(args, np.int16, x, state, weights_feature, weights_time, bias, params, rounding)


def _svdf(
    args: Args,
    state_dtype: type[np.signedinteger[Any]],
    x: Any,
    state: Any,
    weights_feature: Any,
    weights_time: Any,
    bias: Any,
    params: SvdfParams,
    rounding: Rounding,
) -> SvdfResult:
    if not isinstance(params, SvdfParams):
        raise args.fail("params", f"must be an SvdfParams, got {type(params).__name__}")
    x = args.array("input", x, np.int8, ndim=2)
    batches, size = x.shape
    wf = args.array("weights_feature", weights_feature, np.int8, ndim=2)
    features = wf.shape[0]
    if wf.shape[1] != size or batches < 1 or size < 1 or features < 1:
        raise args.fail(
            "weights_feature", f"must be (features >= 1, {size}) for input {x.shape}, got {wf.shape}"
        )
    wt = args.array("weights_time", weights_time, state_dtype, ndim=2)
    if wt.shape[0] != features or wt.shape[1] < 1:
        raise args.fail("weights_time", f"must be ({features}, time >= 1), got {wt.shape}")
    time = wt.shape[1]
    state = args.array("state", state, state_dtype, shape=(batches, features, time))
    rank = args.integer("rank", params.rank, 1, INT16_MAX)  # the C reads it as int16_t and divides by it
    units = features // rank
    if bias is not None:
        bias = args.array("bias", bias, np.int32, shape=(units,))
    _check_scalars(args, params)

    shifted = np.empty_like(state)
    shifted[:, :, :-1] = state[:, :, 1:]
    shifted[:, :, -1] = _newest(x, wf, params, state_dtype, rounding)
    filtered = wrap32(np.einsum("bft,ft->bf", shifted.astype(np.int64), wt.astype(np.int64)))
    per_unit = wrap32(filtered[:, : units * rank].reshape(batches, units, rank).sum(axis=2))
    if bias is not None:
        per_unit = wrap32(per_unit + bias.astype(np.int64))
    out = (
        c_requantize(per_unit, params.output_multiplier, params.output_shift, rounding) + params.output_offset
    )
    lo, hi = params.output_activation
    # CLAMP(x, max, min) = MAX(MIN(x, max), min): with min > max every value becomes min.
    return SvdfResult(_cast(np.maximum(np.minimum(out, hi), lo), np.int8), shifted)


def _newest(
    x: Int8Array, wf: Int8Array, params: SvdfParams, dtype: type[np.signedinteger[Any]], rounding: Rounding
) -> npt.NDArray[Any]:
    """Step 2: each filter's response to this input, clamped to the input activation and cast to the state."""
    # Exact in float64: |x - offset| * |w| * size stays far below 2^53 for any int32 offset and real size.
    lhs = x.astype(np.float64) - params.input_offset
    acc = wrap32((lhs @ wf.T.astype(np.float64)).astype(np.int64))
    value = c_requantize(acc, params.input_multiplier, params.input_shift, rounding)
    lo, hi = params.input_activation
    # MIN(MAX(x, min), max): with min > max every value becomes max (np.clip's order).
    return _cast(np.clip(value, lo, hi), dtype)


def _check_scalars(args: Args, params: SvdfParams) -> None:
    # -input_offset is computed in int32 and the product sums must stay exact: |offset| < 2^31 - 1 suffices.
    args.integer("input_offset", params.input_offset, INT32_MIN + 1, INT32_MAX)
    args.integer("output_offset", params.output_offset, INT32_MIN, INT32_MAX)
    for name in ("input", "output"):
        args.integer(f"{name}_multiplier", getattr(params, f"{name}_multiplier"), INT32_MIN + 1, INT32_MAX)
        args.integer(f"{name}_shift", getattr(params, f"{name}_shift"), *SHIFT_RANGE)
    for name in ("input_activation", "output_activation"):
        pair = getattr(params, name)
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise args.fail(name, f"must be a (min, max) pair, got {pair!r}")
        args.integer(f"{name}.min", pair[0], INT32_MIN, INT32_MAX)
        args.integer(f"{name}.max", pair[1], INT32_MIN, INT32_MAX)
    _check_output_activation(args, params.output_activation)


def _check_output_activation(args: Args, limits: tuple[int, int]) -> None:
    """The MVE build clamps the output with vdupq_n_s32((int8_t)limit), max first; the pure-C build with
    CLAMP = MAX(MIN(v, max), min) on the int32 limits: they agree only on ordered int8 limits."""
    lo, hi = limits
    if not INT8_MIN <= lo <= hi <= INT8_MAX:
        raise args.fail(
            "output_activation",
            f"must be (min, max) with -128 <= min <= max <= 127, got {limits}: the pure-C and MVE builds "
            "of the kernel clamp wider or crossed limits differently",
        )


def _cast(values: I64, dtype: type[np.signedinteger[Any]]) -> npt.NDArray[Any]:
    """C's cast to int8_t / int16_t: the low bits, signed (gcc's and armclang's conversion)."""
    return values.astype(dtype)
