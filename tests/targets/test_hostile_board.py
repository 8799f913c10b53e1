"""The board route names the real cause: a serial device that does not exist, a socket nobody listens on,
a port another program holds, no GDB server, a missing UART address, settings that would inject commands.

Everything here is real: ptys (os.openpty) stand in for a board's USB UART, other programs holding them
are real processes (`flock`, `sleep`), the free ports are the kernel's choice, and the whole board route
runs against QEMU started halted with its GDB stub and UART on TCP, as a probe and a USB UART would be.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from quantcore import cli
from quantcore.targets import backends, board, cmsis_nn
from quantcore.targets.errors import PortBusyError, SettingError
from quantcore.targets.serial_link import SerialLink
from tests import needs
from tests.targets.models import MAXPOOL_SRC

BOARD = """target = "board"
[board]
core = "cortex-m4"
flash_origin = 0x00000000
flash_size = "4M"
ram_origin = 0x20000000
ram_size = "4M"
{uart}
[flash]
backend = "gdb"
serial = "{serial}"
gdb_remote = "{gdb}"
"""
UART = "uart_base = 0x40004000"


@pytest.fixture
def pty_port() -> Iterator[str]:
    """A serial device nobody holds: a pty's slave, its master kept open here (the 'board' side)."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.close(slave)
    yield path
    os.close(master)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path / "fixpoint.toml"


def _write(path: Path, serial: str, gdb: str = "127.0.0.1:3333", uart: str = UART) -> None:
    path.write_text(BOARD.format(serial=serial, gdb=gdb, uart=uart))


def _flash_verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["flash-verify", "--src", str(MAXPOOL_SRC), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _hold(*command: str, stdin: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """Another program, in a session of its own so that it and its children can be stopped together;
    returned once it runs `sleep`, the program it ends as: `flock --no-fork` execs it only after taking
    the lock, so the port is held from then on (a wait on that, not a guess at how long it takes)."""
    holder = subprocess.Popen(list(command), stdin=stdin, start_new_session=True)
    comm = Path(f"/proc/{holder.pid}/comm")
    deadline = time.monotonic() + 10
    while comm.read_text().strip() != "sleep":
        assert holder.poll() is None, f"{' '.join(command)} exited with {holder.returncode}"
        assert time.monotonic() < deadline, f"{' '.join(command)} did not get to run sleep within 10 s"
        time.sleep(0.01)
    return holder


def _release(holder: subprocess.Popen[bytes]) -> None:
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()


# ------------------------------------------------------------------------------------ serial device


def test_a_serial_device_that_does_not_exist_is_named_before_anything_is_built(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = project.parent / "ttyACM9"
    _write(project, str(missing))
    code, _, err = _flash_verify(capsys)
    assert (code, err) == (
        1,
        f"fixpoint flash-verify: serial device {missing} does not exist (is the board plugged in? "
        "[flash] serial in fixpoint.toml)\n",
    )
    assert not (project.parent / "build").exists()


def test_the_serial_option_is_named_when_it_chose_the_device(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project, "/dev/ttyACM0")
    missing = project.parent / "ttyUSB7"
    code, _, err = _flash_verify(capsys, "--serial", str(missing))
    assert code == 1
    assert err == (
        f"fixpoint flash-verify: serial device {missing} does not exist (is the board plugged in? --serial)\n"
    )


def test_a_socket_nobody_listens_on_is_named(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"socket://127.0.0.1:{board.free_port()}"
    _write(project, url)
    code, _, err = _flash_verify(capsys)
    assert (code, err) == (
        1,
        f"fixpoint flash-verify: nobody listens on {url} (start the serial server or fix [flash] serial "
        "in fixpoint.toml)\n",
    )


@needs.tool("flock", "util-linux")
def test_a_port_another_program_locks_is_busy_naming_that_program(
    project: Path, pty_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project, pty_port)
    holder = _hold("flock", "--no-fork", pty_port, "sleep", "60")
    try:
        code, _, err = _flash_verify(capsys)
    finally:
        _release(holder)
    assert (code, err) == (
        1,
        f"fixpoint flash-verify: {pty_port} is busy: another program holds it (pid {holder.pid} 'sleep'; "
        "close the serial monitor)\n",
    )


def test_a_port_held_open_without_a_lock_is_busy_too(pty_port: str) -> None:
    with open(pty_port, "rb") as device:
        holder = _hold("sleep", "60", stdin=device)
        try:
            with pytest.raises(PortBusyError) as error:
                SerialLink(pty_port)
        finally:
            _release(holder)
    assert str(error.value) == (
        f"{pty_port} is busy: another program holds it (pid {holder.pid} 'sleep'; close the serial monitor)"
    )


def test_the_exclusive_lock_refuses_a_second_reader(pty_port: str) -> None:
    # The same process holds it (so /proc names nobody else): pyserial's flock is what refuses.
    fd = os.open(pty_port, os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(PortBusyError) as error:
            SerialLink(pty_port)
    finally:
        os.close(fd)
    assert str(error.value) == f"{pty_port} is busy: another program holds it (close the serial monitor)"
    with SerialLink(pty_port) as link, pytest.raises(PortBusyError):
        SerialLink(pty_port)  # and while Fixpoint reads, nobody else gets it
    assert not link.port.is_open


@pytest.mark.parametrize(
    ("serial", "message"),
    [
        ("spy:///dev/ttyACM0?file=/tmp/log", "is not a serial port Fixpoint opens: give a device path"),
        ("socket://127.0.0.1", "is not a valid socket://<host>:<port> URL"),
        ("socket://127.0.0.1:99999", "is not a valid socket://<host>:<port> URL"),
    ],
)
def test_a_serial_url_fixpoint_does_not_open_is_bad_input(
    project: Path, serial: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project, serial)
    code, _, err = _flash_verify(capsys)
    assert code == 2 and message in err and "([flash] serial in fixpoint.toml)" in err


def test_a_folder_is_not_a_serial_device(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(project, str(project.parent))
    code, _, err = _flash_verify(capsys)
    assert (code, err) == (
        2,
        f"fixpoint flash-verify: {project.parent} is a directory, not a serial device ([flash] serial in "
        "fixpoint.toml)\n",
    )


# ------------------------------------------------------------------------------ UART, GDB settings


def test_a_board_without_a_uart_address_says_so_once_the_port_is_fine(
    project: Path, pty_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(project, pty_port, uart="")
    code, _, err = _flash_verify(capsys)
    assert (code, err) == (
        2,
        "fixpoint flash-verify: target board has no UART base address: the test harness writes its "
        "transcript to a CMSDK APB UART at that address; set [board] uart_base in fixpoint.toml (e.g. "
        "0x40004000)\n",
    )


def test_a_gdb_remote_that_would_run_a_command_is_refused(
    project: Path, pty_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `target remote | cmd` makes gdb run cmd: refused when fixpoint.toml is read, and again here.
    marker = project.parent / "ran"
    _write(project, pty_port, gdb=f"| touch {marker}")
    code, _, err = _flash_verify(capsys)
    assert code == 2 and "gdb_remote" in err and f"'| touch {marker}'" in err
    assert not marker.exists()
    with pytest.raises(SettingError) as error:
        backends.check_gdb_remote(f"| touch {marker}")
    assert str(error.value) == (
        f"[flash] gdb_remote '| touch {marker}' is not <host>:<port> with a port from 1 to 65535 "
        "(e.g. 127.0.0.1:3333); fix it in fixpoint.toml"
    )


@pytest.mark.parametrize(
    ("key", "value"), [("probe", "ABC; exec touch x"), ("device", "stm32\nexec x"), ("device", "-h")]
)
def test_probe_and_device_settings_that_would_inject_commands_are_refused(key: str, value: str) -> None:
    # The probe goes into OpenOCD's Tcl, the device into a J-Link script line and pyocd's arguments.
    with pytest.raises(SettingError, match=rf"^\[flash\] {key} .* holds characters a probe {key} does not"):
        backends.check_settings(backends.FlashSettings(**{key: value}))


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--gdb-port", "99999", "99999 is not a TCP port: give 1 to 65535, or 0 for a free one"),
        ("--gdb-port", "-1", "-1 is not a TCP port: give 1 to 65535, or 0 for a free one"),
        ("--uart-port", "70000", "70000 is not a TCP port: give 1 to 65535, or 0 for a free one"),
        ("--uart-port", "x", "'x' is not a port number"),
    ],
)
def test_ports_out_of_range_are_refused_at_parsing(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli.main(["flash-verify", f"{option}={value}"])
    except SystemExit as exit_:  # argparse's own way out
        code = int(exit_.code or 0)
    assert code == 2 and f"argument {option}: {message}" in capsys.readouterr().err


def test_no_gdb_server_is_named_with_the_setting(
    gdb: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    project: Path,
    pty_port: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    remote = f"127.0.0.1:{board.free_port()}"
    _write(project, pty_port, gdb=remote)
    model, params = maxpool_files
    code, _, err = _flash_verify(capsys, "--model", str(model), "--params", str(params), "--json")
    assert code == 1
    assert err == (
        f"fixpoint flash-verify: no GDB server at {remote} ([flash] gdb_remote): the connection was "
        "refused; start the probe's GDB server (pyocd gdbserver, openocd, JLinkGDBServer) or point "
        "gdb_remote at it\n"
    )


def _wait_until_listening(port: int) -> None:
    # Binding the port fails once QEMU listens on it: a probe that does not connect (a connection
    # would be QEMU's one UART client, or would resume the halted core from its GDB stub).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            board.check_port_free(port, "the test")
        except PortBusyError:
            return
        time.sleep(0.05)
    raise AssertionError(f"QEMU did not listen on port {port} within 10 s")


def test_the_board_route_passes_end_to_end_against_qemu_as_the_board(
    gdb: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    project: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # QEMU halted, its GDB stub and UART on TCP: the project's board flashed through [flash] gdb_remote,
    # its transcript read from [flash] serial, the port opened before the build and held through it.
    model, params = maxpool_files
    with board.qemu_board("mps2-an386") as qemu:
        _write(project, qemu.serial_url, gdb=qemu.gdb_remote)
        _wait_until_listening(qemu.uart_port)
        code, out, _ = _flash_verify(
            capsys, "--model", str(model), "--params", str(params), "--json", "--no-float-metrics"
        )
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "pass" and report["target"] == "board"
    assert report["channel"] == f"serial port {qemu.serial_url}" and report["mismatched_bytes_total"] == 0
