"""Issue 17's hostile-input corpus under pytest: one test per case, each asserting the outcome "pass".

The selected cases run once per session, FIXPOINT_HOSTILE_JOBS (default 2) at a time, in child
processes of this checkout (see runner.py); each test then looks up its case's outcome. Cases that fail
on today's code are listed in KNOWN_FAILING with their outcome class and marked xfail(strict=True), so
the suite stays green now and a case that starts passing forces its removal from the list.
`.venv/bin/python bench/hostile.py` prints the same outcomes as per-class figures.
"""

from __future__ import annotations

import os

import pytest

from tests import needs
from tests.hostile.cases import corpus
from tests.hostile.kit import missing
from tests.hostile.runner import Result, run_all
from tests.hostile.workspace import Fixtures, Product

KNOWN_FAILING: dict[str, str] = {}
"""Case id -> the outcome class it has today (crash, hang, outside, damaged, injected, accepted, refused,
unclear). Remove a case when its fix lands: its test then passes (an xfail(strict=True) that passes fails)."""

CASES = corpus()

ENVIRONMENT = {"read-only", "immutable"}
"""Needs (kit.NEEDS) that depend on who runs the suite (root, chattr), not on what CI installs: a case
lacking one stays a skip. Any other need (CMSIS-NN, the Arm tools, git, gcc) goes through needs.absent."""


def _param(case_id: str) -> object:
    marks = (
        [pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[case_id])] if case_id in KNOWN_FAILING else []
    )
    return pytest.param(case_id, id=case_id, marks=marks)


@pytest.fixture(scope="session")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """The outcome of every selected case that can run here, run `FIXPOINT_HOSTILE_JOBS` at a time."""
    selected = {
        item.callspec.params["case_id"]
        for item in request.session.items
        if hasattr(item, "callspec") and "case_id" in item.callspec.params
    }
    cases = [c for c in CASES if c.id in selected and not missing(c.needs)]
    folder = tmp_path_factory.mktemp("hostile")
    jobs = int(os.environ.get("FIXPOINT_HOSTILE_JOBS", "2"))
    results = run_all(cases, Fixtures(folder / "fixtures", Product()), folder / "cases", jobs)
    return {r.case: r for r in results}


def test_known_failing_names_real_cases() -> None:
    unknown = sorted(set(KNOWN_FAILING) - {c.id for c in CASES})
    assert unknown == []


@pytest.mark.parametrize("case_id", [_param(c.id) for c in CASES])
def test_case(case_id: str, outcomes: dict[str, Result]) -> None:
    case = next(c for c in CASES if c.id == case_id)
    absent = missing(case.needs)
    if set(absent) - ENVIRONMENT:
        needs.absent(f"needs {', '.join(absent)} (not found on this machine)")
    if absent:
        pytest.skip(f"needs {', '.join(absent)} (not possible for this user)")
    result = outcomes[case_id]
    assert (result.outcome, result.detail) == ("pass", ""), case.about
