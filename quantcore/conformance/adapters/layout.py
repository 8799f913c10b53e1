"""Adapters for CMSIS-NN's layout kernels: arm_pad_s8 and arm_transpose_s8.

Wired as Tests/UnitTest/TestCases/test_arm_pad_s8 and test_arm_transpose_s8 wire each case into the C call.
The pad test builds input_size, pre_pad and post_pad from INPUT_N/H/W/C, PRE_PAD_N/H/W/C and
POST_PAD_N/H/W/C. The transpose test builds input_dims, output_dims and the permutation from IN_DIM,
OUT_DIM and PERM, which are brace initialisers ({5, 4, 20, 0,}); the vectors keep only the plain-number
defines (SIZE, PERM_SIZE), so `TRANSPOSE_WIRING` restates those three from CMSIS-NN's
TestData/<case>/config_data.h, and each entry is checked against SIZE and PERM_SIZE before use.
"""

from __future__ import annotations

import numpy as np

from quantcore.conformance.cases import VectorCase
from quantcore.conformance.registry import Outcome, Skip, adapter, outcome
from quantcore.errors import VectorCaseError
from quantcore.kernels.pad import pad_s8
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.transpose import transpose_s8

Dims = tuple[int, int, int, int]

TRANSPOSE_WIRING: dict[str, tuple[Dims, Dims, tuple[int, ...]]] = {
    # case: (IN_DIM, OUT_DIM, PERM); unused trailing dimensions are 0, as in the C test data.
    "transpose_3dim": ((5, 4, 20, 0), (5, 20, 4, 0), (0, 2, 1)),
    "transpose_3dim2": ((5, 4, 20, 0), (4, 20, 5, 0), (1, 2, 0)),
    "transpose_chwn": ((5, 4, 12, 17), (17, 4, 12, 5), (3, 1, 2, 0)),
    "transpose_default": ((4, 3, 3, 22), (22, 3, 3, 4), (3, 2, 1, 0)),
    "transpose_matrix": ((5, 20, 0, 0), (20, 5, 0, 0), (1, 0)),
    "transpose_nchw": ((4, 9, 3, 19), (4, 19, 9, 3), (0, 3, 1, 2)),
    "transpose_ncwh": ((5, 4, 3, 9), (5, 9, 3, 4), (0, 3, 2, 1)),
    "transpose_nhcw": ((1, 1, 128, 128), (1, 1, 128, 128), (0, 1, 3, 2)),
    "transpose_nwhc": ((1, 19, 3, 64), (1, 3, 19, 64), (0, 2, 1, 3)),
    "transpose_wchn": ((4, 3, 3, 21), (3, 21, 3, 4), (2, 3, 1, 0)),
}


def _pad_dims(case: VectorCase, prefix: str) -> Dims:
    return (
        case.define(f"{prefix}_N"),
        case.define(f"{prefix}_H"),
        case.define(f"{prefix}_W"),
        case.define(f"{prefix}_C"),
    )


@adapter("arm_pad_s8")
def pad(case: VectorCase, rounding: Rounding) -> Outcome:
    x = case.array("input_tensor", "input").reshape(_pad_dims(case, "INPUT"))
    actual = pad_s8(
        x,
        pre_pad=_pad_dims(case, "PRE_PAD"),
        post_pad=_pad_dims(case, "POST_PAD"),
        pad_value=case.define("PAD_VALUE"),
    )
    expected = case.array("output_ref", "output")
    if expected.size != case.define("OUTPUT_SIZE"):
        raise VectorCaseError(str(case.npz_path), f"the output holds {expected.size} values, not OUTPUT_SIZE")
    return outcome(actual, expected)


def _transpose_wiring(case: VectorCase) -> tuple[Dims, Dims, tuple[int, ...]]:
    """IN_DIM, OUT_DIM and PERM for the case, checked against the defines the vectors do carry."""
    if case.name not in TRANSPOSE_WIRING:
        raise Skip(
            f"the vectors lack {case.name.upper()}_IN_DIM/_OUT_DIM/_PERM and TRANSPOSE_WIRING has none"
        )
    in_dim, out_dim, perm = TRANSPOSE_WIRING[case.name]
    used = in_dim[: len(perm)]
    if len(perm) != case.define("PERM_SIZE") or int(np.prod(used)) != case.define("SIZE"):
        raise VectorCaseError(
            str(case.json_path), f"TRANSPOSE_WIRING {in_dim}, {perm} disagrees with SIZE or PERM_SIZE"
        )
    return in_dim, out_dim, perm


@adapter("arm_transpose_s8")
def transpose(case: VectorCase, rounding: Rounding) -> Outcome:
    in_dim, out_dim, perm = _transpose_wiring(case)
    x = case.array("input_tensor", "input").reshape(in_dim[: len(perm)])
    actual = transpose_s8(x, perm)
    if actual.shape != out_dim[: len(perm)]:
        raise VectorCaseError(str(case.json_path), f"OUT_DIM {out_dim} is not the permuted IN_DIM {in_dim}")
    return outcome(actual, case.array("output_ref", "output"))
