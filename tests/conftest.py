"""Shared fixtures: where CMSIS-NN's test vectors are (they live next to the repo, in ../shared); the
`fuzz` marker on every property-based (hypothesis) test, so `make fuzz` can run them all for longer; the
failure of a test whose part is absent under FIXPOINT_REQUIRE_TARGETS=1 (tests/needs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import needs

REPO = Path(__file__).resolve().parents[1]


def vectors_dir() -> Path | None:
    configured = os.environ.get("FIXPOINT_VECTORS")
    path = Path(configured) if configured else REPO.parent / "shared" / "cmsisnn-vectors"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def vectors() -> Path:
    path = vectors_dir()
    if path is None:
        needs.absent("CMSIS-NN test vectors not found: set FIXPOINT_VECTORS to a <kernel>/<case>.npz folder")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the golden files (tests/codegen/golden) from the generator instead of comparing",
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every hypothesis test `fuzz` (`pytest -m fuzz`); FIXPOINT_FUZZ_EXAMPLES sets their examples."""
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.fuzz)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked by needs.unless under FIXPOINT_REQUIRE_TARGETS=1 fails here, with its reason."""
    __tracebackhide__ = True
    for mark in item.iter_markers(needs.MARK):
        needs.absent(str(mark.args[0]))
