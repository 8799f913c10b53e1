"""Bit-exact reference of CMSIS-NN's arm_lstm_unidirectional_s8 and arm_lstm_unidirectional_s16.

Both run TFLite's integer LSTM (no peepholes, no projection, no layer norm) one time step after another,
as arm_nn_lstm_step_s8 / arm_nn_lstm_step_s16 do, and return what the C writes to `output` and leaves in
its `hidden_state` and `cell_state` buffers. One step, for each batch row:
    gate  = act(clamp16(requant(x @ W_x + b_x)) + requant(h @ W_h + b_h))  arm_nn_lstm_calculate_gate_*
    cell  = clamp16(requant(forget * cell))                          arm_elementwise_mul_s16
    cell  = clip(requant(input * cell_gate) + cell, +-cell_clip)     arm_elementwise_mul_acc_s16
    h     = clamp(requant(output * tanh(cell)) + output_offset)      arm_elementwise_mul_s16_s8 / _s16
`act` is the int16 LUT sigmoid or tanh of arm_nn_activation_s16, the tanh of the cell reads it as
Q(-cell_scale_power) (left_shift = cell_scale_power + 12). The b_x / b_h are the C's effective biases: the
gate bias plus the weight row sums times the input offset / the negated output zero point, which the caller
precomputes with arm_vector_sum_s8 (s8, int32) or arm_vector_sum_s8_s64 (s16, int64) - `effective_bias_s8`
and `effective_bias_s64` here.

Layouts follow cmsis_nn_lstm_params.time_major: (time, batch, size) when true, (batch, time, size) when
false; `output` has the same layout with hidden_size last. Stateless calls (hidden_state NULL) start from a
zeroed cell and skip the recurrent product of the first step; stateful calls start from the given hidden and
cell state, both of which the call updates (streaming use: pass the returned states to the next call).

Arithmetic is the pure-C build's (neither ARM_MATH_DSP nor ARM_MATH_MVEI). The products are float64 matrix
products, exact: |x * w| <= 2^22 for int16 x int8, so every partial sum over K columns is an integer below
2^22 * K < 2^53; C's int32 wrap-around is applied where the C accumulates in int32 (the s8 gates). One
build difference is not modelled: the DSP/MVE s16 gate product sums its first 512 columns in int32, which
wraps only when 512 products of -32768 * -128 meet in one row (the pure-C build sums in int64).

Argument checks are limited to what the C needs to be defined: shapes that match, shifts the C can shift
by, and a tanh input scale that does not overflow int32. Values the C merely clamps (a zero point outside
the type, a cell_clip wider than int16) are computed as the C computes them.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from quantcore.kernels._int import (
    I64,
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    Args,
    wrap32,
)
from quantcore.kernels.requantize import (
    Rounding,
    divide_by_power_of_two,
    doubling_high_mult,
    reduce_multiplier,
    requantize,
    requantize_s64,
)

Int8Array = npt.NDArray[np.int8]
Int16Array = npt.NDArray[np.int16]
F64 = npt.NDArray[np.float64]

# arm_nn_requantize shifts by (1 << shift) or divides by 2^-shift: outside [-31, 30] the shift is undefined.
SHIFT_RANGE = (-31, 30)
# arm_nn_requantize_s64 shifts an int64 right by 14 - shift: defined for 0 <= 14 - shift <= 63.
SHIFT_S64_RANGE = (-49, 14)
# arm_nn_activation_s16 computes x * (3 << left_shift) in int32 and shifts right by -left_shift: |x| <= 2^15
# keeps 3 * 2^15 << 14 below 2^31, and a right shift must stay below 32. left_shift = cell_scale_power + 12.
CELL_SCALE_POWER_RANGE = (-31 - 12, 14 - 12)


class Activation(enum.Enum):
    """arm_nn_activation_type: the gate non-linearity arm_nn_activation_s16 applies."""

    SIGMOID = "sigmoid"
    TANH = "tanh"


# sigmoid(i / 24) in unsigned 0.16 fixed point, i = 0..255: CMSIS-NN's sigmoid_table_uint16 (arm_nntables.c),
# the table TFLite's int16 logistic/tanh use. It is data, not a formula: 44 entries differ by one from
# round(65536 * sigmoid(i / 24)), so it is written out (tests compare it with the checkout's table).
_SIGMOID_TABLE_TEXT = """
    32768 33451 34133 34813 35493 36169 36843 37513 38180 38841 39498 40149 40794 41432 42064 42688
    43304 43912 44511 45102 45683 46255 46817 47369 47911 48443 48964 49475 49975 50464 50942 51409
    51865 52311 52745 53169 53581 53983 54374 54755 55125 55485 55834 56174 56503 56823 57133 57433
    57724 58007 58280 58544 58800 59048 59288 59519 59743 59959 60168 60370 60565 60753 60935 61110
    61279 61441 61599 61750 61896 62036 62172 62302 62428 62549 62666 62778 62886 62990 63090 63186
    63279 63368 63454 63536 63615 63691 63765 63835 63903 63968 64030 64090 64148 64204 64257 64308
    64357 64405 64450 64494 64536 64576 64614 64652 64687 64721 64754 64786 64816 64845 64873 64900
    64926 64950 64974 64997 65019 65039 65060 65079 65097 65115 65132 65149 65164 65179 65194 65208
    65221 65234 65246 65258 65269 65280 65291 65301 65310 65319 65328 65337 65345 65352 65360 65367
    65374 65381 65387 65393 65399 65404 65410 65415 65420 65425 65429 65433 65438 65442 65445 65449
    65453 65456 65459 65462 65465 65468 65471 65474 65476 65479 65481 65483 65485 65488 65489 65491
    65493 65495 65497 65498 65500 65501 65503 65504 65505 65507 65508 65509 65510 65511 65512 65513
    65514 65515 65516 65517 65517 65518 65519 65520 65520 65521 65522 65522 65523 65523 65524 65524
    65525 65525 65526 65526 65526 65527 65527 65528 65528 65528 65529 65529 65529 65529 65530 65530
    65530 65530 65531 65531 65531 65531 65531 65532 65532 65532 65532 65532 65532 65533 65533 65533
    65533 65533 65533 65533 65533 65534 65534 65534 65534 65534 65534 65534 65534 65534 65534 65535
"""
SIGMOID_TABLE = np.array(_SIGMOID_TABLE_TEXT.split(), dtype=np.int64)


@dataclass(frozen=True)
class LstmGate:
    """cmsis_nn_lstm_gate: one gate's two weight matrices, effective biases and scales.

    Weights are [hidden][input] and [hidden][hidden] (the C's rhs, row-major). Effective biases are int32
    for arm_lstm_unidirectional_s8 and int64 for _s16; both are required, as the C reads both (the gate's
    own `bias` field is not read by the kernels: it is inside the input effective bias)."""

    input_weights: Int8Array
    input_effective_bias: npt.NDArray[Any]
    input_multiplier: int
    input_shift: int
    hidden_weights: Int8Array
    hidden_effective_bias: npt.NDArray[Any]
    hidden_multiplier: int
    hidden_shift: int
    activation: Activation


@dataclass(frozen=True)
class LstmParams:
    """cmsis_nn_lstm_params without the sizes (they come from the arrays). `input_offset` is not read by
    the kernels (it only enters the effective biases), so it is not taken."""

    time_major: bool
    forget_to_cell_multiplier: int
    forget_to_cell_shift: int
    input_to_cell_multiplier: int
    input_to_cell_shift: int
    cell_clip: int
    cell_scale_power: int
    output_multiplier: int
    output_shift: int
    output_offset: int
    forget_gate: LstmGate
    input_gate: LstmGate
    cell_gate: LstmGate
    output_gate: LstmGate

    @property
    def gates(self) -> tuple[LstmGate, LstmGate, LstmGate, LstmGate]:
        """In the order the four gates' columns are stacked here: forget, input, cell, output."""
        return (self.forget_gate, self.input_gate, self.cell_gate, self.output_gate)


@dataclass(frozen=True)
class LstmResult:
    """What the call writes: the output sequence, and the state buffers as it leaves them."""

    output: npt.NDArray[Any]
    hidden_state: npt.NDArray[Any] | None
    """(batch, hidden) - the last step's output - when a hidden state was passed, else None (NULL)."""
    cell_state: Int16Array
    """(batch, hidden): the cell_state buffer after the last step (zeros then updated, if stateless)."""


@dataclass(frozen=True)
class _Format:
    kernel: str
    dtype: type[np.signedinteger[Any]]
    lo: int
    hi: int
    bias_dtype: type[np.signedinteger[Any]]


_S8 = _Format("arm_lstm_unidirectional_s8", np.int8, INT8_MIN, INT8_MAX, np.int32)
_S16 = _Format("arm_lstm_unidirectional_s16", np.int16, INT16_MIN, INT16_MAX, np.int64)


def lstm_unidirectional_s8(
    x: Int8Array,
    params: LstmParams,
    *,
    hidden_state: Int8Array | None = None,
    cell_state: Int16Array | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> LstmResult:
    """arm_lstm_unidirectional_s8: int8 input and hidden state, int16 gates and cell, int32 biases."""
    return _run(_S8, x, params, hidden_state, cell_state, rounding)


def lstm_unidirectional_s16(
    x: Int16Array,
    params: LstmParams,
    *,
    hidden_state: Int16Array | None = None,
    cell_state: Int16Array | None = None,
    rounding: Rounding = Rounding.DOUBLE,
) -> LstmResult:
    """arm_lstm_unidirectional_s16: int16 input and hidden state, int64 effective biases. The gate products
    requantize through arm_nn_requantize_s64 (no rounding choice); the cell and output products through
    arm_nn_requantize, which follows `rounding`."""
    return _run(_S16, x, params, hidden_state, cell_state, rounding)


def effective_bias_s8(
    weights: Int8Array, lhs_offset: int, bias: npt.NDArray[np.int32] | None = None
) -> npt.NDArray[np.int32]:
    """arm_vector_sum_s8 with rhs_offset 0: bias[r] + lhs_offset * sum(weights[r]), in wrapping int32."""
    args = Args("arm_vector_sum_s8")
    weights = args.array("vector_data", weights, np.int8, ndim=2)
    offset = args.integer("lhs_offset", lhs_offset, INT32_MIN, INT32_MAX)
    sums = wrap32(weights.astype(np.int64).sum(axis=1))
    total = wrap32(sums * offset)
    if bias is not None:
        total = wrap32(total + args.array("bias_data", bias, np.int32, shape=(weights.shape[0],)))
    return total.astype(np.int32)


def effective_bias_s64(
    weights: Int8Array, lhs_offset: int, bias: npt.NDArray[np.int64] | None = None
) -> npt.NDArray[np.int64]:
    """arm_vector_sum_s8_s64: bias[r] + lhs_offset * sum(weights[r]), in int64 (no wrap at these sizes)."""
    args = Args("arm_vector_sum_s8_s64")
    weights = args.array("vector_data", weights, np.int8, ndim=2)
    offset = args.integer("lhs_offset", lhs_offset, INT32_MIN, INT32_MAX)
    total: I64 = weights.astype(np.int64).sum(axis=1) * offset
    if bias is not None:
        total += args.array("bias_data", bias, np.int64, shape=(weights.shape[0],))
    return total


def activation_s16(x: npt.NDArray[Any], left_shift: int, activation: Activation) -> Int16Array:
    """arm_nn_activation_s16: sigmoid or tanh of int16 values read as Q3.12 scaled by 2^left_shift, by linear
    interpolation in SIGMOID_TABLE; the result is Q0.15 (tanh) or Q0.15 of [0, 1) (sigmoid)."""
    values = np.asarray(x, dtype=np.int64)
    multiplier = 3 if left_shift < 0 else 3 << left_shift
    right = -left_shift if left_shift < 0 else 0
    nudge = 1 << (right - 1) if right > 0 else 0
    scaled = (values * multiplier + nudge) >> right
    magnitude = np.abs(scaled)
    sigmoid = activation is Activation.SIGMOID
    step_bits = 9 if sigmoid else 8
    index = magnitude >> step_bits
    inside = index < 255
    safe = np.where(inside, index, 0)
    low = SIGMOID_TABLE[safe]
    high = SIGMOID_TABLE[safe + 1]
    frac = magnitude & ((1 << step_bits) - 1)
    saturated = (0x7FFF << 10) if sigmoid else (0xFFFF << 8)
    result = np.where(inside, (low << step_bits) + frac * (high - low), saturated)
    positive = scaled >= 0
    if sigmoid:
        result = np.where(positive, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
        result = (result & 0xFFFFFFFF) >> 10
    else:
        # Negative inputs wrap through uint32 in C; the low 16 bits of the shifted value are still right.
        result = np.where(positive, result - (1 << 23) + (1 << 7), (1 << 23) - result + (1 << 7) - 1)
        result = (result & 0xFFFFFFFF) >> 8
    return _wrap16(result).astype(np.int16)


# ------------------------------------------------------------------------------------------------ run


@dataclass(frozen=True)
class _Prepared:
    """The four gates stacked column-wise (forget, input, cell, output): weights as exact float64 matrices."""

    w_input: F64
    w_hidden: F64
    bias_input: I64
    bias_hidden: I64
    mult_input: I64
    shift_input: I64
    mult_hidden: I64
    shift_hidden: I64
    gate_table: I64
    """The four gates' activations as one lookup: gate_table[total + gate_offset] for int16 `total`."""
    gate_offset: I64
    """Per column: 32768 for a sigmoid gate, 32768 + 65536 for a tanh one."""


def _run(
    fmt: _Format,
    x: Any,
    params: LstmParams,
    hidden_state: Any,
    cell_state: Any,
    rounding: Rounding,
) -> LstmResult:
    args = Args(fmt.kernel)
    x = args.array("input", x, fmt.dtype, ndim=3)
    if not isinstance(params, LstmParams) or not all(isinstance(g, LstmGate) for g in params.gates):
        raise args.fail("params", f"must be an LstmParams of four LstmGate, got {type(params).__name__}")
    weights = params.forget_gate.hidden_weights
    hidden = np.shape(weights)[0] if np.ndim(weights) == 2 else 0
    prepared = _prepare(args, fmt, params, x.shape[2], hidden)
    _check_scalars(args, params)
    steps_first = x if params.time_major else x.transpose(1, 0, 2)
    batch = steps_first.shape[1]
    h, cell = _initial_state(args, fmt, hidden_state, cell_state, batch, hidden)
    inputs = _input_contributions(fmt, steps_first, prepared, rounding)
    out = np.empty((steps_first.shape[0], batch, hidden), dtype=fmt.dtype)
    for t in range(steps_first.shape[0]):
        gates = _gates(fmt, inputs[t], h, prepared, rounding)
        cell = _cell_update(params, gates, cell, rounding)
        out[t] = _hidden(fmt, params, gates[:, 3 * hidden :], cell, rounding)
        h = out[t].astype(np.int64)
    output = out if params.time_major else out.transpose(1, 0, 2)
    final_hidden = None
    if hidden_state is not None:
        final_hidden = (h if h is not None else np.asarray(hidden_state)).astype(fmt.dtype)
    return LstmResult(np.ascontiguousarray(output), final_hidden, cell.astype(np.int16))


def _prepare(args: Args, fmt: _Format, params: LstmParams, input_size: int, hidden: int) -> _Prepared:
    if hidden < 1 or input_size < 1:
        raise args.fail("input", f"needs input_size and hidden_size >= 1, got {input_size} and {hidden}")
    names = ("forget_gate", "input_gate", "cell_gate", "output_gate")
    for name, gate in zip(names, params.gates, strict=True):
        _check_gate(args, fmt, name, gate, input_size, hidden)
    gates = params.gates
    requant_range = SHIFT_S64_RANGE if fmt is _S16 else SHIFT_RANGE
    for name, gate in zip(names, gates, strict=True):
        args.integer(f"{name}.input_multiplier", gate.input_multiplier, INT32_MIN + 1, INT32_MAX)
        args.integer(f"{name}.hidden_multiplier", gate.hidden_multiplier, INT32_MIN + 1, INT32_MAX)
        args.integer(f"{name}.input_shift", gate.input_shift, *requant_range)
        args.integer(f"{name}.hidden_shift", gate.hidden_shift, *requant_range)

    def column(values: list[int]) -> I64:
        return np.repeat(np.asarray(values, dtype=np.int64), hidden)

    return _Prepared(
        w_input=np.concatenate([g.input_weights for g in gates]).T.astype(np.float64),
        w_hidden=np.concatenate([g.hidden_weights for g in gates]).T.astype(np.float64),
        bias_input=np.concatenate([g.input_effective_bias for g in gates]).astype(np.int64),
        bias_hidden=np.concatenate([g.hidden_effective_bias for g in gates]).astype(np.int64),
        mult_input=column([g.input_multiplier for g in gates]),
        shift_input=column([g.input_shift for g in gates]),
        mult_hidden=column([g.hidden_multiplier for g in gates]),
        shift_hidden=column([g.hidden_shift for g in gates]),
        gate_table=np.concatenate([_table(0, Activation.SIGMOID), _table(0, Activation.TANH)]),
        gate_offset=column([32768 + 65536 * (g.activation is Activation.TANH) for g in gates]),
    )


def _check_gate(args: Args, fmt: _Format, name: str, gate: LstmGate, input_size: int, hidden: int) -> None:
    args.array(f"{name}.input_weights", gate.input_weights, np.int8, shape=(hidden, input_size))
    args.array(f"{name}.hidden_weights", gate.hidden_weights, np.int8, shape=(hidden, hidden))
    args.array(f"{name}.input_effective_bias", gate.input_effective_bias, fmt.bias_dtype, shape=(hidden,))
    args.array(f"{name}.hidden_effective_bias", gate.hidden_effective_bias, fmt.bias_dtype, shape=(hidden,))
    if not isinstance(gate.activation, Activation):
        raise args.fail(f"{name}.activation", f"must be an Activation, got {gate.activation!r}")


def _check_scalars(args: Args, params: LstmParams) -> None:
    for prefix in ("forget_to_cell", "input_to_cell", "output"):
        args.integer(
            f"{prefix}_multiplier", getattr(params, f"{prefix}_multiplier"), INT32_MIN + 1, INT32_MAX
        )
        args.integer(f"{prefix}_shift", getattr(params, f"{prefix}_shift"), *SHIFT_RANGE)
    args.integer("cell_clip", params.cell_clip, INT32_MIN, INT32_MAX)
    args.integer("cell_scale_power", params.cell_scale_power, *CELL_SCALE_POWER_RANGE)
    args.integer("output_offset", params.output_offset, INT32_MIN, INT32_MAX)


def _initial_state(
    args: Args, fmt: _Format, hidden_state: Any, cell_state: Any, batch: int, hidden: int
) -> tuple[I64 | None, I64]:
    """(hidden_in of the first step, cell) as the C starts: NULL and zeros when there is no hidden state."""
    if hidden_state is None:
        return None, np.zeros((batch, hidden), dtype=np.int64)
    h = args.array("hidden_state", hidden_state, fmt.dtype, shape=(batch, hidden))
    if cell_state is None:
        raise args.fail(
            "cell_state", "must be given with a hidden_state (the C reads it as the starting cell)"
        )
    cell = args.array("cell_state", cell_state, np.int16, shape=(batch, hidden))
    return h.astype(np.int64), cell.astype(np.int64)


def _input_contributions(fmt: _Format, x: npt.NDArray[Any], prep: _Prepared, rounding: Rounding) -> I64:
    """Every step's clamp16(requant(x @ W_x + b_x)) at once: the input product ignores the state."""
    acc = (x.astype(np.float64) @ prep.w_input).astype(np.int64)
    acc += prep.bias_input
    requantized = _gate_requantize(fmt, acc, prep.mult_input, prep.shift_input, rounding)
    return np.clip(requantized, INT16_MIN, INT16_MAX)


def _gates(fmt: _Format, from_input: I64, h: I64 | None, prep: _Prepared, rounding: Rounding) -> I64:
    """arm_nn_lstm_calculate_gate_* for the four gates: (batch, 4 * hidden) int16 values after activation."""
    total = from_input
    if h is not None:
        acc = (h.astype(np.float64) @ prep.w_hidden).astype(np.int64)
        acc += prep.bias_hidden
        total = _gate_requantize(fmt, acc, prep.mult_hidden, prep.shift_hidden, rounding)
        total += from_input
        np.clip(total, INT16_MIN, INT16_MAX, out=total)
    activated: I64 = prep.gate_table[total + prep.gate_offset]
    return activated


def _gate_requantize(fmt: _Format, acc: I64, mult: I64, shift: I64, rounding: Rounding) -> I64:
    if fmt is _S16:
        # arm_nn_vec_mat_mul_result_acc_s16: int64 sum, Q15 multiplier, one rounding in every build.
        return requantize_s64(acc, reduce_multiplier(mult), shift)
    # arm_nn_vec_mat_mul_result_acc_s8_s16: the int32 accumulator wraps.
    if (shift == shift[0]).all():
        return _requantize_one_shift(wrap32(acc), mult, int(shift[0]), rounding)
    return c_requantize(wrap32(acc), mult, shift, rounding)


def _cell_update(params: LstmParams, gates: I64, cell: I64, rounding: Rounding) -> I64:
    hidden = gates.shape[1] // 4
    forget, input_, cell_gate = (gates[:, i * hidden : (i + 1) * hidden] for i in range(3))
    # arm_elementwise_mul_s16 with the full int16 range as activation limits.
    kept = _requantize_one_shift(
        forget * cell, params.forget_to_cell_multiplier, params.forget_to_cell_shift, rounding
    )
    np.clip(kept, INT16_MIN, INT16_MAX, out=kept)
    # arm_elementwise_mul_acc_s16: a non-positive max means "no clip"; a wider one truncates to int16.
    lo, hi = (-params.cell_clip, params.cell_clip) if params.cell_clip > 0 else (INT16_MIN, INT16_MAX)
    added = _requantize_one_shift(
        input_ * cell_gate, params.input_to_cell_multiplier, params.input_to_cell_shift, rounding
    )
    added += kept
    np.clip(added, lo, hi, out=added)
    return _wrap16(added) if lo < INT16_MIN or hi > INT16_MAX else added


def _hidden(
    fmt: _Format, params: LstmParams, output_gate: I64, cell: I64, rounding: Rounding
) -> npt.NDArray[Any]:
    squashed = _table(params.cell_scale_power + 12, Activation.TANH)[cell + 32768]
    value = _requantize_one_shift(
        output_gate * squashed, params.output_multiplier, params.output_shift, rounding
    )
    value += params.output_offset
    return np.clip(value, fmt.lo, fmt.hi, out=value).astype(fmt.dtype)


@functools.lru_cache(maxsize=64)
def _table(left_shift: int, activation: Activation) -> I64:
    """activation_s16 of every int16 value (index x + 32768): one gather per step instead of the LUT math."""
    table = activation_s16(np.arange(INT16_MIN, INT16_MAX + 1), left_shift, activation).astype(np.int64)
    table.flags.writeable = False
    return table


def _requantize_one_shift(values: I64, multiplier: int | I64, shift: int, rounding: Rounding) -> I64:
    """c_requantize for one shift (the multiplier may be per column), with fewer passes over the values:
    the per-step products are small arrays, where numpy's per-call cost dominates."""
    wraps = bool(np.any(np.asarray(multiplier) == INT32_MIN))
    if rounding is Rounding.SINGLE:
        out = values * multiplier
        out >>= 30 - shift
        out += 1
        out >>= 1
        return wrap32(out) if shift >= 0 or wraps else out
    high = (wrap32(values << shift) if shift > 0 else values) * multiplier
    high += 1 << 30
    high >>= 31
    if wraps:
        high = wrap32(high)
    if shift >= 0:
        return high
    # arm_nn_divide_by_power_of_two: the threshold is one higher when the shifted result is negative.
    mask = (1 << -shift) - 1
    remainder = high & mask
    high >>= -shift
    high += remainder > (high < 0) + (mask >> 1)
    return high


def c_requantize(acc: I64, multiplier: Any, shift: Any, rounding: Rounding) -> I64:
    """arm_nn_requantize over int32 `acc` for any int32 multiplier: as `requantize`, but the doubling high
    multiply wraps to int32 like the C's cast (only INT32_MIN * INT32_MIN reaches that)."""
    if rounding is Rounding.SINGLE:
        return requantize(acc, multiplier, shift, rounding)
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    high = doubling_high_mult(wrap32(np.asarray(acc, dtype=np.int64) << left), multiplier)
    return divide_by_power_of_two(high, np.maximum(-shift, 0))


def _wrap16(values: I64) -> I64:
    """An int16 cast in C: the low 16 bits, signed."""
    return ((values + 2**15) & 0xFFFF) - 2**15
