"""Reading a transcript from a serial line (a board's UART, or QEMU's UART on a TCP socket).

Bytes are read one at a time: a multi-byte read of a socket:// port loses what had arrived when the
peer (QEMU) closes. Reading stops at the protocol's END or FAULT line, so success is decided by the
transcript, never by the emulator's exit status; a deadline bounds every read.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from quantcore.targets import protocol
from quantcore.targets.errors import FirmwareTimeout, PortBusyError, TargetError

BAUD = 115200
POLL_S = 0.2


class SerialLink:
    """An open serial port (pyserial URL or device path); a context manager that closes it."""

    def __init__(self, url: str, baud: int = BAUD) -> None:
        import serial  # type: ignore[import-untyped, unused-ignore]  # pyserial ships no type hints

        self.url = url
        try:
            self.port: Any = serial.serial_for_url(url, baudrate=baud, timeout=POLL_S)
        except serial.SerialException as exc:
            raise _open_error(url, exc) from None

    def __enter__(self) -> SerialLink:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.port.close()

    def read_transcript(self, timeout: float, overall: float | None = None) -> str:
        """Everything up to and including the END (or FAULT) line; FirmwareTimeout after `timeout` s.

        `overall` is the timeout the user gave, named in the message when part of it went on flashing.
        """
        import serial  # type: ignore[import-untyped, unused-ignore]

        deadline = time.monotonic() + timeout
        received = bytearray()
        line_start = 0
        while time.monotonic() < deadline:
            try:
                byte = self.port.read(1)
            except serial.SerialException as exc:
                raise TargetError(
                    f"serial port {self.url} closed while reading ({exc}); got {_tail(received)}"
                ) from None
            if not byte:
                continue
            received += byte
            if byte == b"\n":
                if protocol.is_final(received[line_start:].decode("ascii", "replace")):
                    return received.decode("ascii", "replace")
                line_start = len(received)
        raise FirmwareTimeout(
            f"serial port {self.url}: timed out after {overall or timeout:g} s waiting for '{protocol.END}' "
            f"(received {len(received)} bytes; last: {_tail(received)})"
        )


def _open_error(url: str, exc: Exception) -> TargetError:
    text = str(exc)
    if "busy" in text.lower() or "in use" in text.lower():
        return PortBusyError(f"serial port {url} is busy (another program has it open): {text}")
    return TargetError(f"cannot open serial port {url}: {text}; check [flash] serial in fixpoint.toml")


def _tail(data: bytes | bytearray) -> str:
    return repr(bytes(data[-160:]).decode("ascii", "replace")) if data else "nothing"
