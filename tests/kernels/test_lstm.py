"""The LSTM reference on its own: the LUT activation's exact values, layouts, streaming state, errors.

Bit-exactness against the C is in tests/integration/test_host_recurrent.py and the CMSIS-NN vectors.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from quantcore.conformance.adapters.recurrent import case_lstm_params
from quantcore.conformance.cases import VectorCase
from quantcore.errors import CmsisNnNotFound, KernelArgumentError
from quantcore.kernels.lstm import (
    SIGMOID_TABLE,
    Activation,
    activation_s16,
    effective_bias_s8,
    effective_bias_s64,
    lstm_unidirectional_s8,
    lstm_unidirectional_s16,
)
from quantcore.targets import cmsis_nn
from tests import needs
from tests.kernels.recurrent_calls import lstm_call


def test_sigmoid_table_is_cmsis_nn_table() -> None:
    try:
        checkout = cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        needs.absent(str(missing))
    source = (checkout.path / "Source" / "NNSupportFunctions" / "arm_nntables.c").read_text()
    body = re.search(r"sigmoid_table_uint16\[256\]\s*=\s*\{([^}]*)\}", source)
    assert body is not None
    assert SIGMOID_TABLE.tolist() == [int(v) for v in body.group(1).split(",")]


@pytest.mark.parametrize(
    ("activation", "x", "left_shift", "expected"),
    [
        # 0: table[0] = 32768 -> half of Q15 (sigmoid), zero (tanh).
        (Activation.SIGMOID, 0, 0, 16384),
        (Activation.TANH, 0, 0, 0),
        # x = 1 in Q3.12 is 3 in the table's 1/24 steps: (32768 * 512 + 3 * 683 + 512) >> 10 = 16386;
        # (32768 * 256 + 3 * 683 - 2^23 + 128) >> 8 = 8.
        (Activation.SIGMOID, 1, 0, 16386),
        (Activation.TANH, 1, 0, 8),
        # int16 does not reach sigmoid's saturated end at left_shift 0 (index 191, frac 509 / index 192):
        # (65513 * 512 + 509 + 512) >> 10 = 32757 and (2^25 - 65514 * 512 + 511) >> 10 = 11.
        (Activation.SIGMOID, 32767, 0, 32757),
        (Activation.SIGMOID, -32768, 0, 11),
        # Saturated ends: sigmoid's negative end is 1, not 0; tanh's is -32767 (through a uint32 wrap).
        (Activation.SIGMOID, 32767, 3, 32767),
        (Activation.SIGMOID, -32768, 3, 1),
        (Activation.TANH, 32767, 0, 32767),
        (Activation.TANH, -32768, 0, -32767),
    ],
)
def test_activation_exact_values(activation: Activation, x: int, left_shift: int, expected: int) -> None:
    assert activation_s16(np.array([x], np.int16), left_shift, activation).tolist() == [expected]


def test_tanh_of_the_cell_reads_it_at_cell_scale_power() -> None:
    # left_shift 3 (cell_scale_power -9) multiplies by 24 before the table: 100 -> 2400 -> index 9, frac 96.
    got = activation_s16(np.array([100], np.int16), 3, Activation.TANH)
    assert got.tolist() == [((38841 << 8) + 96 * (39498 - 38841) - (1 << 23) + 128) >> 8]
    # left_shift -2 divides by 4, rounding half up: 3 * 6 = 18 -> (18 + 2) >> 2 = 5.
    assert activation_s16(np.array([6], np.int16), -2, Activation.SIGMOID).tolist() == [
        ((32768 << 9) + 5 * (33451 - 32768) + 512) >> 10
    ]


def test_effective_biases_wrap_like_the_c() -> None:
    weights = np.array([[1, -2, 3], [127, 127, 127]], np.int8)
    bias32 = np.array([10, 2**31 - 1], np.int32)
    # 10 + 128 * 2 = 266; (2^31 - 1) + 128 * 381 wraps to -2^31 + 48767.
    assert effective_bias_s8(weights, 128, bias32).tolist() == [266, -(2**31) + 48767]
    bias64 = np.array([10, 2**40], np.int64)
    assert effective_bias_s64(weights, 128, bias64).tolist() == [266, 2**40 + 48768]


@pytest.mark.parametrize("s16", [False, True], ids=["s8", "s16"])
def test_batch_major_is_the_time_major_call_transposed(s16: bool) -> None:
    call = lstm_call(np.random.default_rng(5), s16, time_major=True, stateful=True)
    run: Any = lstm_unidirectional_s16 if s16 else lstm_unidirectional_s8
    state = {"hidden_state": call.hidden_state, "cell_state": call.cell_state}
    time_major = run(call.x, call.params, **state)
    batch_major = run(call.x.transpose(1, 0, 2).copy(), replace(call.params, time_major=False), **state)
    assert np.array_equal(batch_major.output, time_major.output.transpose(1, 0, 2))
    assert np.array_equal(batch_major.hidden_state, time_major.hidden_state)
    assert np.array_equal(batch_major.cell_state, time_major.cell_state)


@pytest.mark.parametrize("s16", [False, True], ids=["s8", "s16"])
def test_streaming_two_calls_with_the_returned_state_equals_one_call(s16: bool) -> None:
    rng = np.random.default_rng(9)
    call = lstm_call(rng, s16, time_major=True, stateful=True)
    run: Any = lstm_unidirectional_s16 if s16 else lstm_unidirectional_s8
    x = np.concatenate([call.x, call.x[::-1]])  # at least two steps
    whole = run(x, call.params, hidden_state=call.hidden_state, cell_state=call.cell_state)
    cut = len(x) // 2
    first = run(x[:cut], call.params, hidden_state=call.hidden_state, cell_state=call.cell_state)
    second = run(x[cut:], call.params, hidden_state=first.hidden_state, cell_state=first.cell_state)
    assert np.array_equal(np.concatenate([first.output, second.output]), whole.output)
    assert np.array_equal(second.hidden_state, whole.hidden_state)
    assert np.array_equal(second.cell_state, whole.cell_state)
    assert np.array_equal(whole.hidden_state, whole.output[-1])


def test_zero_point_hidden_state_and_zero_cell_equal_the_stateless_call() -> None:
    # What CMSIS-NN's stateful unit test relies on: h - zero_point = 0 adds requant(0) = 0 to every gate.
    call = lstm_call(np.random.default_rng(11), s16=False, time_major=False, stateful=False)
    batch, hidden = call.x.shape[0], call.params.forget_gate.hidden_weights.shape[0]
    zp = np.full((batch, hidden), call.params.output_offset, np.int8)
    stateless = lstm_unidirectional_s8(call.x, call.params)
    stateful = lstm_unidirectional_s8(
        call.x, call.params, hidden_state=zp, cell_state=np.zeros_like(zp, np.int16)
    )
    assert stateless.hidden_state is None
    assert np.array_equal(stateful.output, stateless.output)
    assert np.array_equal(stateful.cell_state, stateless.cell_state)


def test_the_multibatch_vector_depends_on_its_layout(vectors: Path) -> None:
    case = VectorCase.load(
        vectors / "arm_lstm_unidirectional_s8" / "lstm_stateful_batch_major_multibatch.json"
    )
    x = case.raw_array(f"{case.name}_input_tensor").reshape(2, 2, 6)
    expected = case.raw_array(f"{case.name}_output")
    batch_major = lstm_unidirectional_s8(x, case_lstm_params(case, time_major=False, s16=False))
    time_major = lstm_unidirectional_s8(x, case_lstm_params(case, time_major=True, s16=False))
    assert batch_major.output.ravel().tolist() == expected.tolist()
    assert time_major.output.ravel().tolist() != expected.tolist()


def _rejects(argument: str, call: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(KernelArgumentError) as info:
        call(*args, **kwargs)
    assert info.value.argument == argument


def test_arguments_the_c_cannot_compute_are_rejected_by_name() -> None:
    call = lstm_call(np.random.default_rng(3), s16=False, time_major=True, stateful=True)
    p = call.params
    _rejects("forget_to_cell_shift", lstm_unidirectional_s8, call.x, replace(p, forget_to_cell_shift=31))
    _rejects("cell_scale_power", lstm_unidirectional_s8, call.x, replace(p, cell_scale_power=3))
    # INT32_MIN: the Helium build's saturating doubling multiply (arm_requantize_mve) differs there.
    _rejects("output_multiplier", lstm_unidirectional_s8, call.x, replace(p, output_multiplier=-(2**31)))
    gate = replace(p.input_gate, hidden_multiplier=-(2**31))
    _rejects("input_gate.hidden_multiplier", lstm_unidirectional_s8, call.x, replace(p, input_gate=gate))
    _rejects("cell_state", lstm_unidirectional_s8, call.x, p, hidden_state=call.hidden_state)
    _rejects("input", lstm_unidirectional_s16, call.x, p)  # int8 data for the s16 kernel
    _rejects("params", lstm_unidirectional_s8, call.x, {"time_major": True})
    wide = replace(p.cell_gate, input_effective_bias=p.cell_gate.input_effective_bias.astype(np.int64))
    _rejects("cell_gate.input_effective_bias", lstm_unidirectional_s8, call.x, replace(p, cell_gate=wide))
    narrow = replace(p.forget_gate, hidden_weights=p.forget_gate.hidden_weights[:, :-1])
    _rejects("forget_gate.hidden_weights", lstm_unidirectional_s8, call.x, replace(p, forget_gate=narrow))


def test_values_the_c_merely_clamps_are_computed() -> None:
    # An output zero point outside int8 and a cell clip beyond int16 are computed as the C computes them:
    # the offset is added before the clamp, so every unsaturated value of the first step (whose gates do
    # not read the hidden state the offset changes) moves by 200 and then clamps.
    call = lstm_call(np.random.default_rng(4), s16=False, time_major=True, stateful=False)
    params = replace(call.params, output_offset=0, cell_clip=70000)
    base = lstm_unidirectional_s8(call.x, params).output[0].astype(np.int64)
    moved = lstm_unidirectional_s8(call.x, replace(params, output_offset=200)).output[0]
    inside = (base > -128) & (base < 127)
    assert inside.any()
    assert np.array_equal(moved[inside], np.minimum(base[inside] + 200, 127))
