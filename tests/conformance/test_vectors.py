"""Every CMSIS-NN vector case the reference covers passes byte for byte; required families are covered.

Cases are collected from the vector folder at run time, so a new CMSIS-NN data set is picked up as is.
A case the runner skips (a variant the reference does not cover) is a pytest skip with the runner's
reason, never a pass; without the vector folder the one test left is skipped (failed under
FIXPOINT_REQUIRE_TARGETS=1) by the `vectors` fixture.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quantcore.conformance.cases import VectorCase, discover
from quantcore.conformance.registry import adapter_for
from quantcore.conformance.runner import Status, run_case
from quantcore.kernels.requantize import Rounding
from tests.conftest import vectors_dir

# The kernel families the foundation issue requires; a skip in any of them is a failure here.
REQUIRED = {
    "arm_convolve_s8",
    "arm_depthwise_conv_s8",
    "arm_fully_connected_s8",
    "arm_avgpool_s8",
    "arm_max_pool_s8",
    "arm_softmax_s8",
    "arm_elementwise_add_s8",
    "arm_elementwise_mul_s8",
    "arm_convolve_s16",
    "arm_depthwise_conv_s16",
    "arm_fully_connected_s16",
    "arm_elementwise_add_s16",
    "arm_ds_cnn_s_s8",
    # Issue 21: the recurrent kernels.
    "arm_lstm_unidirectional_s8",
    "arm_lstm_unidirectional_s16",
    "arm_svdf_s8",
    "arm_svdf_state_s16_s8",
}


def _covered_cases() -> list[VectorCase | None]:
    """The cases the reference covers; [None] without the vector folder (an empty parameter set would be
    a quiet skip): that one test asks the `vectors` fixture, which says what is missing."""
    root = vectors_dir()
    return [c for c in discover(root) if adapter_for(c) is not None] if root else [None]


def _id(case: VectorCase | None) -> str:
    return f"{case.kernel}/{case.name}" if case else "no-vectors"


@pytest.mark.parametrize("case", _covered_cases(), ids=_id)
def test_case_is_bit_exact(case: VectorCase | None, vectors: Path) -> None:
    assert case is not None, f"{vectors} appeared during the run"  # found at collection, else skipped above
    result = run_case(case, Rounding.DOUBLE)
    if result.status is Status.SKIP:
        pytest.skip(result.line())
    assert result.status is Status.PASS, result.line()


def test_required_families_are_covered_and_never_skipped(vectors: Path) -> None:
    cases = [c for c in discover(vectors) if c.kernel in REQUIRED]
    assert {c.kernel for c in cases} == REQUIRED, "the vector folder lacks a required family"
    results = [run_case(c, Rounding.DOUBLE) for c in cases]
    assert [r.line() for r in results if r.status is not Status.PASS] == []
