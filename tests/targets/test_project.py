"""fixpoint.toml: defaults, sizes, relative paths, and every bad value named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantcore.kernels.requantize import Rounding
from quantcore.project import ProjectError, load_project, load_project_strict, parse_size
from quantcore.targets.backends import BackendName
from quantcore.targets.cores import Core


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fixpoint.toml"
    path.write_text(text)
    return path


def test_sizes_accept_ints_and_k_m_suffixes() -> None:
    assert [parse_size(v) for v in (512, "512K", "2M", "1.5M", "64KiB")] == [
        512,
        524288,
        2097152,
        1572864,
        65536,
    ]
    for bad in ("lots", -1, True, 1.5):
        with pytest.raises(ValueError, match="expected a size"):
            parse_size(bad)


def test_a_full_project_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
model = "m.onnx"
params = "m.json"
target = "board"
rounding = "single"
[board]
core = "cortex-m7"
flash_size = "2M"
ram_size = "512K"
uart_base = 0x40004000
[budget]
flash = "1M"
[cmsis_nn]
path = "../nn"
[flash]
backend = "jlink"
probe = "123"
serial = "/dev/ttyACM0"
device = "STM32F746NG"
""",
    )
    project = load_project_strict(path)
    assert project.model == tmp_path / "m.onnx" and project.cmsis_nn == tmp_path / "../nn"
    assert project.generated == tmp_path / "generated" and project.rounding is Rounding.SINGLE
    assert project.board is not None and project.board.core is Core.CORTEX_M7
    assert (project.board.flash_size, project.board.ram_size, project.board.uart_base) == (
        2 << 20,
        512 << 10,
        0x40004000,
    )
    assert project.budget.flash == 1 << 20 and project.budget.ram is None
    assert project.flash.backend is BackendName.JLINK and project.flash.probe == "123"


def test_bad_values_are_problems_by_key_and_keep_their_defaults(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
alignment = 3
colour = "red"
[budget]
ram = "x"
[flash]
backend = "usb"
[board]
core = "pentium"
""",
    )
    project, problems = load_project(path)
    keys = {p.key: p.message for p in problems}
    assert set(keys) == {"alignment", "colour", "budget.ram", "flash.backend", "board.core"}
    assert "power of two" in keys["alignment"] and "gdb, pyocd, openocd, jlink" in keys["flash.backend"]
    assert project.alignment == 16 and project.flash.backend is BackendName.GDB
    assert project.board is not None and project.board.core is Core.CORTEX_M4
    with pytest.raises(ProjectError, match=r"fixpoint.toml: budget.ram: expected a size"):
        load_project_strict(path)


def test_a_broken_file_is_one_problem_and_all_defaults(tmp_path: Path) -> None:
    project, problems = load_project(_write(tmp_path, "model = \n"))
    assert len(problems) == 1 and problems[0].key == "" and "cannot read" in problems[0].message
    assert project.target == "host"
