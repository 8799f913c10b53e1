"""Fixtures of the target tests: CMSIS-NN, the cross tools and QEMU (skipped with the reason when absent,
failed under FIXPOINT_REQUIRE_TARGETS=1: tests/needs.py), the fixture model's ONNX + params, and fixture
variants (a hang, a fault, a wrong byte)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from quantcore.cores import Core
from quantcore.errors import CmsisNnNotFound
from quantcore.targets import cmsis_nn
from tests import needs
from tests.targets.models import MAXPOOL_SRC, write_maxpool_project

MARKER = "/* FIXPOINT-TEST: invoke */"


@pytest.fixture(scope="session")
def checkout() -> cmsis_nn.CmsisNn:
    try:
        return cmsis_nn.locate()
    except CmsisNnNotFound as exc:
        needs.absent(f"no CMSIS-NN checkout: {exc}")


@pytest.fixture(scope="session")
def cross(checkout: cmsis_nn.CmsisNn) -> cmsis_nn.CmsisNn:
    """CMSIS-NN plus the Arm cross compiler, newlib and QEMU; the libraries are built (cached) once."""
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        needs.require_tool(tool, "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm")
    for core in (Core.CORTEX_M4, Core.CORTEX_M7, Core.CORTEX_M55):
        cmsis_nn.build_library(checkout, core)
    return checkout


@pytest.fixture(scope="session")
def gdb(cross: cmsis_nn.CmsisNn) -> cmsis_nn.CmsisNn:
    needs.require_tool("gdb-multiarch")
    return cross


@pytest.fixture(scope="session")
def maxpool_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_maxpool_project(tmp_path_factory.mktemp("maxpool"))


@pytest.fixture(scope="session")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """A copy of the fixture model with C code put at the start of model_invoke."""

    def make(name: str, code: str) -> Path:
        out = tmp_path_factory.mktemp(f"variant-{name}")
        for file in MAXPOOL_SRC.iterdir():
            (out / file.name).write_text(file.read_text().replace(MARKER, code))
        return out

    return make
