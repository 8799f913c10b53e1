"""The board route: open the serial line, flash through a backend, read the transcript from the UART.

On real hardware the backend is pyOCD, OpenOCD or J-Link and the serial line the board's USB UART. The
same route runs for real against QEMU: QEMU starts halted (-S) with its GDB stub and its UART0 on TCP
ports; we connect to the UART first (with wait=off QEMU drops output nobody reads), flash over the
GDB stub (load, compare-sections, system_reset, detach) and read until the END line.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from quantcore.targets import backends, protocol
from quantcore.targets.build import Channel, Firmware
from quantcore.targets.errors import PortBusyError, TargetError
from quantcore.targets.run import RunResult, check_exit, finish, qemu_command
from quantcore.targets.serial_link import BAUD, SETTING, SerialLink, shown

CONNECT_TIMEOUT_S = 10.0
STDERR_TAIL_BYTES = 64 * 1024


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_port_free(port: int, what: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise PortBusyError(
                f"TCP port 127.0.0.1:{port} for {what} is already in use; stop what holds it or choose "
                "another port (0 picks a free one)"
            ) from None


@dataclass
class QemuBoard:
    """A halted QEMU board with its GDB stub and UART0 on TCP ports (a stand-in for a probe + USB UART)."""

    machine: str
    gdb_port: int
    uart_port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path

    @property
    def gdb_remote(self) -> str:
        return f"127.0.0.1:{self.gdb_port}"

    @property
    def serial_url(self) -> str:
        return f"socket://127.0.0.1:{self.uart_port}"

    def stderr(self) -> str:
        """The end of what QEMU printed on stderr (its own messages: the firmware cannot reach it)."""
        try:
            with open(self.stderr_path, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - STDERR_TAIL_BYTES))
                return handle.read(STDERR_TAIL_BYTES).decode("utf-8", "replace")
        except OSError:
            return ""


@contextlib.contextmanager
def qemu_board(machine: str, gdb_port: int = 0, uart_port: int = 0) -> Iterator[QemuBoard]:
    """Start QEMU halted; ports 0 are chosen free. QEMU is terminated on exit, whatever happened."""
    gdb_port, uart_port = gdb_port or free_port(), uart_port or free_port()
    check_port_free(gdb_port, "QEMU's GDB stub")
    check_port_free(uart_port, "QEMU's UART")
    command = [*qemu_command(machine), "-S", "-gdb", f"tcp:127.0.0.1:{gdb_port}"]
    command += ["-serial", f"tcp:127.0.0.1:{uart_port},server=on,wait=off"]
    with tempfile.TemporaryDirectory(prefix="fixpoint-qemu-") as tmp:
        stderr_path = Path(tmp) / "qemu.stderr"
        with open(stderr_path, "wb") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        board = QemuBoard(machine, gdb_port, uart_port, process, stderr_path)
        try:
            yield board
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def connect_uart(board: QemuBoard, timeout: float = CONNECT_TIMEOUT_S) -> SerialLink:
    """The UART link once QEMU listens; a QEMU that exits first is reported with its stderr."""
    deadline = time.monotonic() + timeout
    while True:
        if board.process.poll() is not None:
            raise _qemu_exit_error(board)
        try:
            return SerialLink(board.serial_url)
        except TargetError:
            if time.monotonic() > deadline:
                raise TargetError(
                    f"QEMU {board.machine} did not open its UART on {board.serial_url} within {timeout:g} s"
                ) from None
            time.sleep(0.05)


def _qemu_exit_error(board: QemuBoard) -> TargetError:
    stderr = board.stderr().strip()
    if "Address already in use" in stderr:
        return PortBusyError(
            f"QEMU {board.machine} could not listen on port {board.gdb_port} or {board.uart_port}: {stderr}"
        )
    return TargetError(
        f"QEMU {board.machine} exited ({board.process.returncode}) at start: {stderr or '(no output)'}"
    )


def run_on_qemu_board(
    firmware: Firmware,
    timeout: float,
    expect: protocol.Expectation | None = None,
    gdb_port: int = 0,
    uart_port: int = 0,
) -> RunResult:
    """The whole board route against QEMU: start halted, connect UART, flash over GDB, read, stop."""
    if firmware.channel is not Channel.UART or firmware.target.machine is None:
        raise TargetError(
            f"{firmware.path} was not built for a QEMU board's UART (build with the UART channel)"
        )
    start = time.monotonic()
    with qemu_board(firmware.target.machine, gdb_port, uart_port) as board, connect_uart(board) as link:
        settings = backends.FlashSettings(gdb_remote=board.gdb_remote, gdb_starting=True)
        backends.flash_gdb(firmware, settings, timeout=min(timeout, backends.FLASH_TIMEOUT_S))
        channel = f"UART of QEMU {board.machine} ({link.url})"
        text = link.read_transcript(max(1.0, timeout - (time.monotonic() - start)), timeout)
        stderr = board.stderr()
        check_exit(0, text, stderr, channel)
        return finish(text, channel, expect, time.monotonic() - start, stderr)


def open_uart(serial_url: str, baud: int = BAUD, origin: str = SETTING) -> SerialLink:
    """The board's serial port, opened for this program alone before anything is built or flashed.

    Opened first, so that a missing device, a port nobody serves or a port another program holds is
    the message, and so that nothing the firmware prints after the reset is lost.
    """
    if not serial_url:
        raise TargetError(
            "no serial port for the board's UART: set [flash] serial in fixpoint.toml (or --serial)"
        )
    return SerialLink(serial_url, baud, origin)


def flash_and_read(
    firmware: Firmware,
    backend: backends.BackendName,
    settings: backends.FlashSettings,
    link: SerialLink,
    timeout: float,
    expect: protocol.Expectation | None = None,
) -> RunResult:
    """A real board: flash and start it, read the transcript from its serial port (`open_uart`)."""
    start = time.monotonic()
    link.port.reset_input_buffer()  # what an earlier firmware printed is not this run's transcript
    backends.flash(backend, firmware, settings)
    text = link.read_transcript(timeout)
    channel = f"serial port {shown(link.url)}"
    check_exit(0, text, "", channel)
    return finish(text, channel, expect, time.monotonic() - start)
