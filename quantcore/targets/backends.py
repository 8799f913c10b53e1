"""Flashing backends: QEMU's GDB stub (gdb-multiarch), pyOCD, OpenOCD and SEGGER J-Link.

Each backend builds its commands from the project's settings (probe id, device, flash origin) and runs
them with a timeout; a missing tool is ToolchainNotFound naming what to install, and the tools' own
"no probe" and verify-failure messages become FlashError. Only the GDB backend can be exercised without
hardware (against QEMU); the others are checked by their command lines and error paths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from quantcore.targets import process
from quantcore.targets.backend_names import BackendName as BackendName  # re-exported: its old home
from quantcore.targets.build import Firmware
from quantcore.targets.errors import FlashError, SettingError
from quantcore.targets.process import last_lines as _tail
from quantcore.targets.serial_link import is_host_port, shown
from quantcore.targets.toolchain import require_tool

FLASH_TIMEOUT_S = 120.0
GDB_CONNECT_TIMEOUT_S = 10
"""Seconds gdb waits for a GDB server's host to answer a connection."""
_PROBE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
"""A probe serial number: it goes into OpenOCD's Tcl (`adapter serial ...`), where `;` or `[` would run
a command."""
_DEVICE = re.compile(r"[A-Za-z0-9_.+/:@][A-Za-z0-9_.+/:@ -]{0,199}")
"""A device / target name or OpenOCD config path: one line (a J-Link script is one command per line),
no leading '-' (an option to pyocd)."""


@dataclass(frozen=True)
class FlashSettings:
    """What a backend needs to know about the board and the probe."""

    device: str = ""
    """pyOCD target type / OpenOCD target cfg / J-Link device name (e.g. stm32f446re)."""
    probe: str = ""
    """Probe serial number / unique id; empty: the only one connected."""
    flash_origin: int = 0x08000000
    gdb_remote: str = "127.0.0.1:3333"
    """host:port of a GDB server (QEMU's -gdb stub, or a probe's)."""
    gdb_starting: bool = False
    """The GDB server was just started by Fixpoint (QEMU's stub) and may not listen yet: gdb retries a
    refused connection for up to GDB_CONNECT_TIMEOUT_S. A probe's server the user runs is there or not,
    and a refusal is said at once."""
    interface: str = "interface/cmsis-dap.cfg"
    """OpenOCD's interface (probe) configuration."""
    speed_khz: int = 4000


def _run(command: list[str], doing: str, timeout: float, cwd: Path | None = None, check: bool = True) -> str:
    done = process.run_tool(command, timeout, doing, FlashError, cwd=cwd)
    output = done.output()
    if check and done.returncode != 0:
        raise FlashError(f"{doing} failed (exit {done.returncode}): {_tail(output)}")
    return output


# ----------------------------------------------------------------------------------------------- gdb


def gdb_commands(firmware: Firmware, settings: FlashSettings, gdb: str = "gdb-multiarch") -> list[str]:
    # compare-sections is the verify step; system_reset reloads SP/PC from the vector table (after load
    # SP is 0); no `continue`, which would block until the firmware exits. Without auto-retry a refused
    # connection fails at once instead of after gdb's 15 s of retrying; QEMU's stub, started a moment
    # before, opens its port after the UART's (under load, later than gdb connects), so there it is on.
    retry = "on" if settings.gdb_starting else "off"
    return [
        gdb, "-nx", "-batch",
        "-ex", f"set tcp auto-retry {retry}",
        "-ex", f"set tcp connect-timeout {GDB_CONNECT_TIMEOUT_S}",
        "-ex", f"target remote {check_gdb_remote(settings.gdb_remote)}",
        "-ex", "load",
        "-ex", "compare-sections",
        "-ex", "monitor system_reset",
        "-ex", "detach",
        str(firmware.path),
    ]  # fmt: skip


def check_gdb_remote(remote: str) -> str:
    """`remote` when it is <host>:<port>; anything else is refused (`| command` would make gdb run it)."""
    if not is_host_port(remote):
        raise SettingError(
            f"[flash] gdb_remote {shown(remote)} is not <host>:<port> with a port from 1 to 65535 "
            "(e.g. 127.0.0.1:3333); fix it in fixpoint.toml"
        )
    return remote


def flash_gdb(firmware: Firmware, settings: FlashSettings, timeout: float = FLASH_TIMEOUT_S) -> None:
    gdb = require_tool("gdb-multiarch", "gdb-multiarch")
    command = gdb_commands(firmware, settings, gdb)
    output = _run(command, f"flashing over GDB ({settings.gdb_remote})", timeout, check=False)
    connect = _gdb_connect_problem(output, settings.gdb_remote)
    if connect:
        raise FlashError(connect)
    if "MIS-MATCHED" in output:
        raise FlashError(
            f"the image at {settings.gdb_remote} does not match {firmware.path} after load: {_tail(output)}"
        )
    for bad in ("Remote communication error", "No such file", "Error"):
        if bad in output:
            raise FlashError(f"flashing over GDB ({settings.gdb_remote}) failed: {_tail(output)}")
    if "Transfer rate" not in output and "Start address" not in output:
        raise FlashError(f"gdb did not load {firmware.path} into {settings.gdb_remote}: {_tail(output)}")


def _gdb_connect_problem(output: str, remote: str) -> str | None:
    """Why gdb could not reach a GDB server at `remote`, from what it printed; None if it could."""
    where = f"{remote} ([flash] gdb_remote)"
    if "Connection refused" in output:
        return (
            f"no GDB server at {where}: the connection was refused; start the probe's GDB server "
            "(pyocd gdbserver, openocd, JLinkGDBServer) or point gdb_remote at it"
        )
    if "Connection timed out" in output:
        return f"no GDB server at {where}: the connection timed out after {GDB_CONNECT_TIMEOUT_S} s"
    if "cannot resolve name" in output:
        return f"cannot resolve the host of {where}"
    if "Remote replied unexpectedly" in output or "Ignoring packet error" in output:
        return (
            f"what listens at {where} does not answer as a GDB server (the serial port's TCP bridge, or "
            f"another program?): {_tail(output)}"
        )
    return None


# --------------------------------------------------------------------------------------------- pyocd


def check_settings(settings: FlashSettings) -> FlashSettings:
    """`settings` when its probe and device can go into a command line, a Tcl command or a J-Link script."""
    for key, value, pattern in (("probe", settings.probe, _PROBE), ("device", settings.device, _DEVICE)):
        if value and not pattern.fullmatch(value):
            raise SettingError(
                f"[flash] {key} {shown(value)} holds characters a probe {key} does not have; fix it in "
                "fixpoint.toml"
            )
    return settings


def pyocd_commands(firmware: Firmware, settings: FlashSettings) -> list[list[str]]:
    """`pyocd json --probes` (is a probe there?) then `pyocd flash` (-W: fail at once without a probe)."""
    check_settings(settings)
    flash = ["pyocd", "flash", "-W", "--format", "hex"]
    flash += ["-t", settings.device] if settings.device else []
    flash += ["-u", settings.probe] if settings.probe else []
    return [["pyocd", "json", "--probes"], [*flash, str(firmware.hex_path)]]


def flash_pyocd(firmware: Firmware, settings: FlashSettings, timeout: float = FLASH_TIMEOUT_S) -> None:
    require_tool("pyocd", "pyocd (pip install pyocd)")
    listing, flash = pyocd_commands(firmware, settings)
    probes = parse_pyocd_probes(_run(listing, "listing probes with pyocd", timeout))
    wanted = [p for p in probes if not settings.probe or p == settings.probe]
    if not wanted:
        which = f"probe {settings.probe!r}" if settings.probe else "debug probe"
        raise FlashError(f"no {which} connected (pyocd json --probes lists {probes or 'none'}); plug one in")
    _run(flash, f"flashing {firmware.hex_path.name} with pyocd", timeout)


def parse_pyocd_probes(output: str) -> list[str]:
    """Unique ids from `pyocd json --probes` (it exits 0 with an empty list when none is connected)."""
    start = output.find("{")
    try:
        document = json.loads(output[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        raise FlashError(f"pyocd json --probes printed something that is not JSON: {_tail(output)}") from None
    entries = document.get("boards", document.get("probes", []))
    return [str(e.get("unique_id", "")) for e in entries if isinstance(e, dict)]


# ------------------------------------------------------------------------------------------- openocd


def openocd_command(firmware: Firmware, settings: FlashSettings) -> list[str]:
    check_settings(settings)
    command = ["openocd", "-f", settings.interface]
    command += ["-c", f"adapter serial {settings.probe}"] if settings.probe else []
    command += ["-c", f"adapter speed {settings.speed_khz}"]
    command += ["-f", settings.device or "target/stm32f4x.cfg"]
    return [*command, "-c", f"program {{{firmware.path}}} verify reset exit"]


def flash_openocd(firmware: Firmware, settings: FlashSettings, timeout: float = FLASH_TIMEOUT_S) -> None:
    require_tool("openocd", "openocd")
    try:
        _run(openocd_command(firmware, settings), f"flashing {firmware.path.name} with OpenOCD", timeout)
    except FlashError as exc:
        text = str(exc)
        if "unable to find" in text or "open failed" in text or "init failed" in text:
            raise FlashError(f"OpenOCD found no debug probe ({settings.interface}): {text}") from None
        raise


# --------------------------------------------------------------------------------------------- jlink


def jlink_script(firmware: Firmware, settings: FlashSettings) -> str:
    """A J-Link Commander script: connect over SWD, load the .hex, reset and run."""
    check_settings(settings)
    lines = [
        f"device {settings.device or 'Unspecified'}",
        "si SWD",
        f"speed {settings.speed_khz}",
        "connect",
        "r",
        "h",
        f"loadfile {firmware.hex_path} 0x{settings.flash_origin:08X}",
        "r",
        "g",
        "exit",
    ]
    return "\n".join(lines) + "\n"


def jlink_command(script: Path, settings: FlashSettings) -> list[str]:
    check_settings(settings)
    command = ["JLinkExe", "-NoGui", "1", "-ExitOnError", "1", "-AutoConnect", "1"]
    command += ["-USB", settings.probe] if settings.probe else []
    return [*command, "-CommanderScript", str(script)]


def flash_jlink(firmware: Firmware, settings: FlashSettings, timeout: float = FLASH_TIMEOUT_S) -> None:
    require_tool("JLinkExe", "SEGGER J-Link Software (from segger.com; not in Debian)")
    script = firmware.path.with_name("flash.jlink")
    script.write_text(jlink_script(firmware, settings))
    output = _run(jlink_command(script, settings), f"flashing {firmware.hex_path.name} with J-Link", timeout)
    if "FAILED" in output or "Cannot connect" in output:
        raise FlashError(f"J-Link could not flash {firmware.hex_path}: {_tail(output)}")


FLASHERS = {
    BackendName.GDB: flash_gdb,
    BackendName.PYOCD: flash_pyocd,
    BackendName.OPENOCD: flash_openocd,
    BackendName.JLINK: flash_jlink,
}


def flash(
    backend: BackendName, firmware: Firmware, settings: FlashSettings, timeout: float = FLASH_TIMEOUT_S
) -> None:
    """Write `firmware` to the board with `backend`, verify it and start it."""
    FLASHERS[backend](firmware, settings, timeout)
