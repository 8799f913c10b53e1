"""Fixtures of the target tests: CMSIS-NN, the cross tools and QEMU (skipped with the reason when absent),
the fixture model's ONNX + params, and fixture variants (a hang, a fault, a wrong byte)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from quantcore import cmsis_nn
from quantcore.errors import CmsisNnNotFound
from quantcore.targets.cores import Core
from tests.targets.models import MAXPOOL_SRC, write_maxpool_project

MARKER = "/* FIXPOINT-TEST: invoke */"


@pytest.fixture(scope="session")
def checkout() -> cmsis_nn.CmsisNn:
    try:
        return cmsis_nn.locate()
    except CmsisNnNotFound as exc:
        pytest.skip(f"no CMSIS-NN checkout: {exc}")


@pytest.fixture(scope="session")
def cross(checkout: cmsis_nn.CmsisNn) -> cmsis_nn.CmsisNn:
    """CMSIS-NN plus the Arm cross compiler, newlib and QEMU; the libraries are built (cached) once."""
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            packages = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
            pytest.skip(f"{tool} is not installed (apt-get install {packages})")
    for core in (Core.CORTEX_M4, Core.CORTEX_M7, Core.CORTEX_M55):
        cmsis_nn.build_library(checkout, core)
    return checkout


@pytest.fixture(scope="session")
def gdb(cross: cmsis_nn.CmsisNn) -> cmsis_nn.CmsisNn:
    if shutil.which("gdb-multiarch") is None:
        pytest.skip("gdb-multiarch is not installed (apt-get install gdb-multiarch)")
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
