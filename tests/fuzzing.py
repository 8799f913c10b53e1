"""Hypothesis settings for the property-based tests (tests/conftest.py marks them `fuzz`).

A test states its own modest number of examples for `make test`; FIXPOINT_FUZZ_EXAMPLES (what `make
fuzz` sets) overrides it for the longer rounds."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings

FUZZ = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES") or 0)


def fuzz(default: int) -> Any:
    """Hypothesis settings: `default` examples (FIXPOINT_FUZZ_EXAMPLES overrides), no deadline."""
    return settings(
        max_examples=FUZZ or default,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
