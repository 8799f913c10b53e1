"""The one way a test says a part it needs is absent: CMSIS-NN, the toolchains, QEMU, the vectors, TFLM,
the tools and Python extras that `make install` and .ci/run install.

On a developer's machine an absent part skips the test with the reason. CI sets
FIXPOINT_REQUIRE_TARGETS=1 (.ci/run): there every such skip is a failure with the same reason, so a wrong
FIXPOINT_CMSIS_NN or a lost package cannot turn the strongest tests into quiet skips. Skips for what no CI
machine has (another OS, root, the opt-in VS Code stage) do not come here: they stay plain skips.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

SWITCH = "FIXPOINT_REQUIRE_TARGETS"
MARK = "absent_part"
"""The mark `unless` puts on a test whose part is absent under the switch; tests/conftest.py fails it."""


def required() -> bool:
    """True when CI asked for every part to be present (FIXPOINT_REQUIRE_TARGETS=1)."""
    return os.environ.get(SWITCH) == "1"


def absent(reason: str, *, allow_module_level: bool = False) -> NoReturn:
    """Skip the test because a part is absent, or fail it with the same reason under the switch."""
    __tracebackhide__ = True  # the report names the test's line, not this one
    if required():
        # from None: the lookup's exception being handled says nothing the reason does not.
        message = f"{reason} ({SWITCH}=1: an absent part is a failure)"
        raise pytest.fail.Exception(message, pytrace=False) from None
    pytest.skip(reason, allow_module_level=allow_module_level)


def unless(present: bool, reason: str) -> pytest.MarkDecorator:
    """A mark for a test (or `pytestmark`) that needs a part: none when present, else a skip with the
    reason, or under the switch a mark that makes the test fail at set-up with the reason."""
    if present:
        return pytest.mark.skipif(False, reason=reason)
    return getattr(pytest.mark, MARK)(reason) if required() else pytest.mark.skipif(True, reason=reason)


def tool(name: str, package: str | None = None) -> pytest.MarkDecorator:
    """`unless` for a program on PATH; `package` is the Debian package when it is named otherwise."""
    return unless(
        shutil.which(name) is not None, f"{name} is not installed (apt-get install {package or name})"
    )


def require_tool(name: str, package: str | None = None) -> None:
    """Inside a test or fixture: return when `name` is on PATH, else `absent`."""
    __tracebackhide__ = True
    if shutil.which(name) is None:
        absent(f"{name} is not installed (apt-get install {package or name})")


def module(name: str, reason: str) -> ModuleType:
    """pytest.importorskip through `absent`: the module, or the test skipped (failed under the switch)."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        absent(f"{reason} ({exc})", allow_module_level=True)
