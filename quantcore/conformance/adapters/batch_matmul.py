"""Adapters for CMSIS-NN's arm_batch_matmul_s8 and arm_batch_matmul_s16 test cases.

Wired as Tests/UnitTest/TestCases/test_arm_batch_matmul_s8 / _s16 wire each case into the C call. The C
ignores adj_x / adj_y and wants the right-hand side transposed, so the test hands it pre-transposed data:
- the lhs is `lhs_input_tensor` of (LHS_BATCH, LHS_HEIGHT, LHS_ROWS, LHS_COLS), or with ADJ_X the
  `lhs_transposed_tensor` of (..., LHS_COLS, LHS_ROWS);
- the rhs is `rhs_transposed_tensor` of (RHS_BATCH, RHS_HEIGHT, RHS_COLS, RHS_ROWS), or with ADJ_Y the
  `rhs_input_tensor` of (..., RHS_ROWS, RHS_COLS), already the layout the C wants.
The s8 case's LHS_OFFSET / RHS_OFFSET are fc_params.input_offset / filter_offset. The s16 kernel reads no
offsets and rounds once (arm_nn_requantize_s64), so neither the offsets nor `rounding` reach it.
"""

from __future__ import annotations

from quantcore.conformance.cases import Array, VectorCase
from quantcore.conformance.registry import Outcome, adapter, outcome
from quantcore.errors import VectorCaseError
from quantcore.kernels.batch_matmul import batch_matmul_s8, batch_matmul_s16
from quantcore.kernels.requantize import Rounding


def _operand(case: VectorCase, side: str, adjoint: bool) -> Array:
    """The `side` ("LHS"/"RHS") array and shape the unit test passes; the rhs is stored transposed
    unless ADJ_Y says the input already is."""
    rows, cols = case.define(f"{side}_ROWS"), case.define(f"{side}_COLS")
    transposed = adjoint if side == "LHS" else not adjoint
    matrix = (cols, rows) if transposed else (rows, cols)
    shape = (case.define(f"{side}_BATCH"), case.define(f"{side}_HEIGHT"), *matrix)
    name = f"{side.lower()}_{'transposed' if transposed else 'input'}_tensor"
    return case.array(name).reshape(shape)


def _operands(case: VectorCase) -> tuple[Array, Array]:
    lhs = _operand(case, "LHS", bool(case.define("ADJ_X")))
    rhs = _operand(case, "RHS", bool(case.define("ADJ_Y")))
    return lhs, rhs


def _expected(case: VectorCase) -> Array:
    expected = case.array("output_ref", "output")
    shape = tuple(case.define(f"OUTPUT_{d}") for d in ("BATCH", "HEIGHT", "ROWS", "COLS"))
    if expected.size != case.define("DST_SIZE"):
        raise VectorCaseError(str(case.npz_path), f"the output holds {expected.size} values, not DST_SIZE")
    return expected.reshape(shape)


def _clamp(case: VectorCase) -> dict[str, int]:
    return {"act_min": case.define("ACTIVATION_MIN"), "act_max": case.define("ACTIVATION_MAX")}


@adapter("arm_batch_matmul_s8")
def batch_matmul_s8_case(case: VectorCase, rounding: Rounding) -> Outcome:
    lhs, rhs = _operands(case)
    actual = batch_matmul_s8(
        lhs,
        rhs,
        multiplier=case.define("OUTPUT_MULTIPLIER"),
        shift=case.define("OUTPUT_SHIFT"),
        input_offset=case.define("LHS_OFFSET"),
        filter_offset=case.define("RHS_OFFSET"),
        output_offset=case.define("OUTPUT_OFFSET"),
        rounding=rounding,
        **_clamp(case),
    )
    return _compare(case, actual)


@adapter("arm_batch_matmul_s16")
def batch_matmul_s16_case(case: VectorCase, rounding: Rounding) -> Outcome:
    lhs, rhs = _operands(case)
    actual = batch_matmul_s16(
        lhs,
        rhs,
        multiplier=case.define("OUTPUT_MULTIPLIER"),
        shift=case.define("OUTPUT_SHIFT"),
        **_clamp(case),
    )
    return _compare(case, actual)


def _compare(case: VectorCase, actual: Array) -> Outcome:
    expected = _expected(case)
    if actual.shape != expected.shape:
        # The C writes output_dims' n * h matrices whatever the operands; a mismatch is a wiring error.
        raise VectorCaseError(
            str(case.json_path), f"OUTPUT_* is {expected.shape}, operands give {actual.shape}"
        )
    return outcome(actual, expected)
