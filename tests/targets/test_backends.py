"""Flashing backends without hardware: their command lines, and their error paths for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantcore.cores import Core
from quantcore.targets import backends
from quantcore.targets.backends import FlashSettings
from quantcore.targets.build import Channel, Firmware, ModelHeader
from quantcore.targets.errors import FlashError, ToolchainNotFound
from quantcore.targets.target import Region, board_target
from quantcore.targets.toolchain import Toolchain

SETTINGS = FlashSettings(device="stm32f446re", probe="0670FF", flash_origin=0x08000000)


def _firmware(tmp_path: Path) -> Firmware:
    target = board_target(
        "nucleo", Core.CORTEX_M4, Region(0x08000000, 512 << 10), Region(0x20000000, 128 << 10), None
    )
    header = ModelHeader(tmp_path / "model.h", 1, 1, 1, 1, 0)
    return Firmware(
        target, Channel.UART, tmp_path / "firmware.elf", header, 1, "m", Toolchain("arm-none-eabi-")
    )


def test_gdb_loads_verifies_resets_and_detaches(tmp_path: Path) -> None:
    command = backends.gdb_commands(_firmware(tmp_path), FlashSettings(gdb_remote="127.0.0.1:1234"))
    exs = [command[i + 1] for i, arg in enumerate(command) if arg == "-ex"]
    assert exs == [
        "set tcp auto-retry off",
        "set tcp connect-timeout 10",
        "target remote 127.0.0.1:1234",
        "load",
        "compare-sections",
        "monitor system_reset",
        "detach",
    ]
    assert command[-1].endswith("firmware.elf")
    qemu = FlashSettings(gdb_remote="127.0.0.1:1234", gdb_starting=True)  # its stub may not listen yet
    assert "set tcp auto-retry on" in backends.gdb_commands(_firmware(tmp_path), qemu)


def test_pyocd_lists_probes_then_flashes_the_hex_without_waiting(tmp_path: Path) -> None:
    listing, flash = backends.pyocd_commands(_firmware(tmp_path), SETTINGS)
    assert listing == ["pyocd", "json", "--probes"]
    assert flash[:3] == ["pyocd", "flash", "-W"] and flash[5:7] == ["-t", "stm32f446re"]
    assert flash[7:9] == ["-u", "0670FF"] and flash[-1].endswith("firmware.hex")
    assert backends.parse_pyocd_probes('{"status": 0, "boards": []}') == []
    assert backends.parse_pyocd_probes('x {"boards": [{"unique_id": "0670FF"}]}') == ["0670FF"]
    with pytest.raises(FlashError, match="not JSON"):
        backends.parse_pyocd_probes("{broken")


def test_openocd_programs_verifies_and_resets(tmp_path: Path) -> None:
    command = backends.openocd_command(
        _firmware(tmp_path), FlashSettings(device="target/stm32f4x.cfg", probe="ABC")
    )
    assert command[:3] == ["openocd", "-f", "interface/cmsis-dap.cfg"]
    assert "adapter serial ABC" in command and "target/stm32f4x.cfg" in command
    assert command[-1].startswith("program {") and command[-1].endswith("} verify reset exit")


def test_jlink_script_connects_over_swd_loads_at_the_flash_origin_and_runs(tmp_path: Path) -> None:
    firmware = _firmware(tmp_path)
    lines = backends.jlink_script(firmware, SETTINGS).splitlines()
    assert lines[:3] == ["device stm32f446re", "si SWD", "speed 4000"]
    assert f"loadfile {firmware.hex_path} 0x08000000" in lines and lines[-3:] == ["r", "g", "exit"]
    command = backends.jlink_command(tmp_path / "flash.jlink", SETTINGS)
    assert command[7:9] == ["-USB", "0670FF"] and command[-2:] == [
        "-CommanderScript",
        str(tmp_path / "flash.jlink"),
    ]


@pytest.mark.parametrize(
    ("backend", "tool"),
    [("pyocd", "pyocd"), ("openocd", "openocd"), ("jlink", "JLinkExe"), ("gdb", "gdb-multiarch")],
)
def test_a_missing_flash_tool_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, tool: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainNotFound, match=f"{tool} is not installed.*install"):
        backends.flash(backends.BackendName(backend), _firmware(tmp_path), SETTINGS)


def test_pyocd_with_no_probe_connected_is_a_clear_flash_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in pyocd that behaves like the real one without a probe: exit 0 and an empty list.
    fake = tmp_path / "pyocd"
    fake.write_text('#!/bin/sh\necho \'{"pyocd_version": "0.36", "status": 0, "boards": []}\'\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FlashError, match="no probe '0670FF' connected"):
        backends.flash(backends.BackendName.PYOCD, _firmware(tmp_path), SETTINGS)


def test_openocd_without_a_probe_is_reported_as_no_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "openocd"
    fake.write_text("#!/bin/sh\necho 'Error: unable to find a matching CMSIS-DAP device' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FlashError, match="OpenOCD found no debug probe"):
        backends.flash(backends.BackendName.OPENOCD, _firmware(tmp_path), SETTINGS)
