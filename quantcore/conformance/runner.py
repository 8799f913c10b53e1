"""Run every case under a vector directory and report pass / FAIL / skip, one line per case."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantcore.conformance.cases import VectorCase, discover
from quantcore.conformance.registry import Skip, adapter_for
from quantcore.errors import QuantcoreError
from quantcore.kernels.requantize import Rounding


class Status(enum.Enum):
    PASS = "pass"
    FAIL = "FAIL"
    SKIP = "skip"


@dataclass(frozen=True)
class CaseResult:
    kernel: str
    case: str
    status: Status
    detail: str = ""
    first_diff: int | None = None
    mismatches: int = 0

    def line(self) -> str:
        text = f"{self.status.value:4}  {self.kernel}/{self.case}"
        return f"{text}  {self.detail}" if self.detail else text


def compare(actual: np.ndarray, expected: np.ndarray) -> tuple[int | None, int, str]:
    """(first differing index, number of differing elements, description); (None, 0, ...) when equal."""
    if actual.size != expected.size:
        return 0, max(actual.size, expected.size), f"size {actual.size} != expected {expected.size}"
    diff = np.flatnonzero(actual.astype(np.int64) != expected.astype(np.int64))
    if diff.size == 0:
        return None, 0, f"{actual.size} values identical"
    i = int(diff[0])
    return (
        i,
        int(diff.size),
        (
            f"first difference at index {i}: got {int(actual[i])}, expected {int(expected[i])}"
            f" ({diff.size} of {actual.size} values differ)"
        ),
    )


def run_case(case: VectorCase, rounding: Rounding) -> CaseResult:
    fn = adapter_for(case)
    if fn is None:
        return CaseResult(case.kernel, case.name, Status.SKIP, f"no reference for {case.kernel} yet")
    try:
        result = fn(case, rounding)
    except Skip as why:
        return CaseResult(case.kernel, case.name, Status.SKIP, str(why))
    except QuantcoreError as exc:
        return CaseResult(case.kernel, case.name, Status.FAIL, f"error: {exc}")
    first, count, text = compare(result.actual, result.expected)
    status = Status.PASS if first is None else Status.FAIL
    return CaseResult(case.kernel, case.name, status, text if first is not None else "", first, count)


def run_all(
    root: Path,
    rounding: Rounding = Rounding.DOUBLE,
    kernels: Iterable[str] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    wanted = set(kernels) if kernels else None
    results = []
    for case in discover(root):
        if wanted is not None and case.kernel not in wanted:
            continue
        result = run_case(case, rounding)
        if on_result:
            on_result(result)
        results.append(result)
    return results


def summary(results: list[CaseResult]) -> str:
    count = {s: sum(r.status is s for r in results) for s in Status}
    return f"{count[Status.PASS]} passed, {count[Status.FAIL]} failed, {count[Status.SKIP]} skipped"
