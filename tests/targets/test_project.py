"""fixpoint.toml: defaults, sizes, relative paths, and every bad value named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantcore.cores import Core
from quantcore.kernels.requantize import Rounding
from quantcore.project import Problem, ProjectError, load_project, load_project_strict, parse_size
from quantcore.targets.backends import BackendName


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
    assert {p.key: p.line for p in problems} == {
        "alignment": 2, "colour": 3, "budget.ram": 5, "flash.backend": 7, "board.core": 9
    }  # fmt: skip
    with pytest.raises(ProjectError) as error:
        load_project_strict(path)
    assert str(error.value) == (
        f"{path}:2: alignment: expected a power of two from 4 to 4096, got 3"
        " (and 4 more: board.core, budget.ram, flash.backend, colour)"
    )


def test_a_broken_file_is_one_problem_and_all_defaults(tmp_path: Path) -> None:
    project, problems = load_project(_write(tmp_path, "model = \n"))
    assert problems == [Problem("", "not valid TOML: Invalid value (at line 1, column 9)", 1)]
    assert project.target == "host"


@pytest.mark.parametrize("key", ["model", "params", "generated"])
def test_a_path_leading_out_of_the_project_folder_is_refused_with_its_line(tmp_path: Path, key: str) -> None:
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    path = _write(project_dir, f'target = "host"\n{key} = "../escape"\n')
    project, problems = load_project(path)
    assert [(p.key, p.line) for p in problems] == [(key, 2)]
    where = project_dir.resolve()
    assert problems[0].message == (
        f"'../escape' leads outside {where}, fixpoint.toml's folder, below which generated code goes; give a"
        " folder inside it, or name it with -o"
        if key == "generated"
        else f"'../escape' leads outside the workspace {where} (the repository holding fixpoint.toml,"
        " else its folder); give a path inside it, or name the file with --model/--params"
    )
    assert getattr(project, key) != project_dir / "../escape"


def test_the_model_may_sit_above_the_project_within_the_folder_the_user_works_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    firmware = tmp_path / "example" / "firmware"
    firmware.mkdir(parents=True)
    path = _write(firmware, 'model = "../model.onnx"\nparams = "../../outside.json"\n')
    monkeypatch.chdir(tmp_path / "example")
    project, problems = load_project(path)
    assert project.model == firmware / "../model.onnx"
    assert [p.key for p in problems] == ["params"]


def test_a_symlink_leading_out_of_the_project_folder_is_refused(tmp_path: Path) -> None:
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    (project_dir / "out").symlink_to(tmp_path)
    _, problems = load_project(_write(project_dir, 'generated = "out/model"\nmodel = "m.onnx"\n'))
    assert [p.key for p in problems] == ["generated"]
    assert "leads outside" in problems[0].message


def test_in_a_repository_the_paths_may_leave_the_firmware_folder_but_not_the_repository(
    tmp_path: Path,
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    firmware = tmp_path / "repo" / "firmware"
    firmware.mkdir()
    path = _write(firmware, 'model = "../model.onnx"\nparams = "../../escape.json"\ngenerated = "../src"\n')
    project, problems = load_project(path)
    assert project.model == firmware / "../model.onnx"
    assert [(p.key, p.line) for p in problems] == [("params", 2), ("generated", 3)]
    assert f"leads outside the workspace {(tmp_path / 'repo').resolve()}" in problems[0].message


def test_cmsis_nn_may_live_anywhere(tmp_path: Path) -> None:
    project, problems = load_project(_write(tmp_path, '[cmsis_nn]\npath = "../../CMSIS-NN"\n'))
    assert problems == [] and project.cmsis_nn == tmp_path / "../../CMSIS-NN"


@pytest.mark.parametrize(
    ("table", "key", "value", "expected"),
    [
        ("board", "name", "b */ evil /*",
         "expected 1-64 letters, digits, '_', '.' or '-', got 'b */ evil /*'"),
        ("flash", "device", "--script=evil.tcl", "expected a name without control characters that does not"
         " start with '-', got '--script=evil.tcl'"),
        ("flash", "probe", "a\\nb", "expected a name without control characters that does not start with"
         " '-', got 'a\\nb'"),
        ("flash", "gdb_remote", "localhost",
         "expected host:port with a port from 1 to 65535, got 'localhost'"),
        ("flash", "gdb_remote", "h:99999", "expected host:port with a port from 1 to 65535, got 'h:99999'"),
    ],
)  # fmt: skip
def test_strings_that_reach_a_command_line_or_a_generated_file_are_checked(
    tmp_path: Path, table: str, key: str, value: str, expected: str
) -> None:
    _, problems = load_project(_write(tmp_path, f'[{table}]\n{key} = "{value}"\n'))
    assert [(p.key, p.line, p.message) for p in problems] == [(f"{table}.{key}", 2, expected)]


def test_a_fifo_or_a_huge_file_is_one_problem_not_a_hang(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.toml")
    _, problems = load_project(tmp_path / "fifo.toml")
    assert [p.message for p in problems] == [
        "cannot read it: is a FIFO (named pipe), not a regular file; Fixpoint reads only regular files"
    ]
    big = tmp_path / "big.toml"
    big.write_text("# x\n" * 400_000)
    _, problems = load_project(big)
    assert [p.message for p in problems] == [
        "cannot read it: is larger than Fixpoint reads (1.5 MiB; the limit is 1.0 MiB)"
    ]
