"""Adapters for CMSIS-NN's LSTM and SVDF test cases.

The wiring follows CMSIS-NN's unit tests (Tests/UnitTest/TestCases/test_arm_lstm_unidirectional_s8/_s16,
test_arm_svdf_s8, test_arm_svdf_state_s16_s8):
- LSTM: each gate's effective biases are arm_vector_sum_s8(_s64) of its input weights with INPUT_ZERO_POINT
  (plus the gate bias) and of its hidden weights with -OUTPUT_ZERO_POINT; the forget/input/output gates are
  sigmoid, the cell gate tanh. The `stateful` cases pass a hidden state filled with OUTPUT_ZERO_POINT and a
  zeroed cell state, the others NULL. TIME_MAJOR is a C `true`/`false` the vector files do not carry: it
  is read from the define when present, is immaterial for one batch, and else comes from the case name.
- SVDF: the state starts as the case's `state` array and every INPUT_BATCHES x INPUT_SIZE slice of
  `input_sequence` is one call; the last call's output is compared.
"""

from __future__ import annotations

import numpy as np

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, Skip, adapter, outcome
from quantcore.errors import VectorCaseError
from quantcore.kernels.lstm import (
    Activation,
    LstmGate,
    LstmParams,
    effective_bias_s8,
    effective_bias_s64,
    lstm_unidirectional_s8,
    lstm_unidirectional_s16,
)
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.svdf import SvdfParams, svdf_s8, svdf_state_s16_s8

_GATES = {"forget": Activation.SIGMOID, "input": Activation.SIGMOID, "cell": Activation.TANH}


@adapter("arm_lstm_unidirectional_s8")
def lstm_s8(case: VectorCase, rounding: Rounding) -> Outcome:
    return _lstm(case, rounding, s16=False)


@adapter("arm_lstm_unidirectional_s16")
def lstm_s16(case: VectorCase, rounding: Rounding) -> Outcome:
    return _lstm(case, rounding, s16=True)


def _lstm(case: VectorCase, rounding: Rounding, s16: bool) -> Outcome:
    batch, steps = case.define("BATCH_SIZE"), case.define("TIME_STEPS")
    size, hidden = case.define("INPUT_SIZE"), case.define("HIDDEN_SIZE")
    params = case_lstm_params(case, _time_major(case, batch), s16)
    x = _array(case, "input_tensor")
    shape = (steps, batch, size) if params.time_major else (batch, steps, size)
    hidden_state: Array | None = None
    cell_state: Array | None = None
    if "stateful" in case.name:
        dtype = np.int16 if s16 else np.int8
        hidden_state = np.full((batch, hidden), case.define("OUTPUT_ZERO_POINT"), dtype=dtype)
        cell_state = np.zeros((batch, hidden), dtype=np.int16)
    run = lstm_unidirectional_s16 if s16 else lstm_unidirectional_s8
    result = run(
        x.reshape(shape), params, hidden_state=hidden_state, cell_state=cell_state, rounding=rounding
    )
    return outcome(result.output, _array(case, "output"))


def _time_major(case: VectorCase, batch: int) -> bool:
    if case.has_define("TIME_MAJOR"):
        return bool(case.define("TIME_MAJOR"))
    if batch == 1:
        return True  # one batch: (time, 1, size) and (1, time, size) are the same bytes
    if "batch_major" in case.name:
        return False
    if "time_major" in case.name:
        return True
    raise Skip(f"{case.name}: TIME_MAJOR is not in the vector file and the name does not say the layout")


def case_lstm_params(case: VectorCase, time_major: bool, s16: bool) -> LstmParams:
    """The LstmParams an LSTM case's unit test builds (effective biases by arm_vector_sum_s8(_s64))."""
    in_offset, out_zero = case.define("INPUT_ZERO_POINT"), case.define("OUTPUT_ZERO_POINT")

    def gate(name: str) -> LstmGate:
        w_in = _array(case, f"{name}_gate_input_weights").reshape(case.define("HIDDEN_SIZE"), -1)
        w_h = _array(case, f"{name}_gate_hidden_weights").reshape(w_in.shape[0], w_in.shape[0])
        bias = _array(case, f"{name}_gate_bias")
        vector_sum = effective_bias_s64 if s16 else effective_bias_s8
        key = name.upper()
        return LstmGate(
            input_weights=w_in,
            input_effective_bias=vector_sum(w_in, in_offset, bias),
            input_multiplier=case.define(f"{key}_GATE_INPUT_MULTIPLIER"),
            input_shift=case.define(f"{key}_GATE_INPUT_SHIFT"),
            hidden_weights=w_h,
            hidden_effective_bias=vector_sum(w_h, -out_zero, None),
            hidden_multiplier=case.define(f"{key}_GATE_HIDDEN_MULTIPLIER"),
            hidden_shift=case.define(f"{key}_GATE_HIDDEN_SHIFT"),
            activation=_GATES.get(name, Activation.SIGMOID),
        )

    return LstmParams(
        time_major=time_major,
        forget_to_cell_multiplier=case.define("FORGET_TO_CELL_MULTIPLIER"),
        forget_to_cell_shift=case.define("FORGET_TO_CELL_SHIFT"),
        input_to_cell_multiplier=case.define("INPUT_TO_CELL_MULTIPLIER"),
        input_to_cell_shift=case.define("INPUT_TO_CELL_SHIFT"),
        cell_clip=case.define("CELL_CLIP"),
        cell_scale_power=case.define("CELL_SCALE_POWER"),
        output_multiplier=case.define("OUTPUT_MULTIPLIER"),
        output_shift=case.define("OUTPUT_SHIFT"),
        output_offset=out_zero,
        forget_gate=gate("forget"),
        input_gate=gate("input"),
        cell_gate=gate("cell"),
        output_gate=gate("output"),
    )


@adapter("arm_svdf_s8")
def svdf_s8_case(case: VectorCase, rounding: Rounding) -> Outcome:
    return _svdf(case, rounding, s16_state=False)


@adapter("arm_svdf_state_s16_s8")
def svdf_s16_case(case: VectorCase, rounding: Rounding) -> Outcome:
    return _svdf(case, rounding, s16_state=True)


def _svdf(case: VectorCase, rounding: Rounding, s16_state: bool) -> Outcome:
    batches, size = case.define("INPUT_BATCHES"), case.define("INPUT_SIZE")
    features, time = case.define("FEATURE_BATCHES"), case.define("TIME_BATCHES")
    params = SvdfParams(
        rank=case.define("RANK"),
        input_offset=case.define("INPUT_OFFSET"),
        output_offset=case.define("OUTPUT_OFFSET"),
        input_multiplier=case.define("MULTIPLIER_IN"),
        input_shift=case.define("SHIFT_1"),
        output_multiplier=case.define("MULTIPLIER_OUT"),
        output_shift=case.define("SHIFT_2"),
        input_activation=(case.define("IN_ACTIVATION_MIN"), case.define("IN_ACTIVATION_MAX")),
        output_activation=(case.define("OUT_ACTIVATION_MIN"), case.define("OUT_ACTIVATION_MAX")),
    )
    sequence = _array(case, "input_sequence")
    if sequence.size % (batches * size):
        raise VectorCaseError(str(case.npz_path), f"input_sequence is not whole {batches}x{size} inputs")
    state = _array(case, "state").reshape(batches, features, time)
    weights_feature = _array(case, "weights_feature").reshape(features, size)
    weights_time = _array(case, "weights_time").reshape(features, time)
    bias = _array(case, "biases")
    # test_arm_svdf_state_s16_s8 passes NULL for an all-zero bias (check_null_bias); the sum is the same.
    run = svdf_state_s16_s8 if s16_state else svdf_s8
    calls = sequence.reshape(-1, batches, size)
    if not len(calls):
        raise VectorCaseError(str(case.npz_path), "input_sequence is empty")
    for x in calls:
        out, state = run(x, state, weights_feature, weights_time, bias, params, rounding=rounding)
    return outcome(out, _array(case, "output_ref"))


def _array(case: VectorCase, suffix: str) -> Array:
    return case.array(suffix)
