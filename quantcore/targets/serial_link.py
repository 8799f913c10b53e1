"""Reading a transcript from a serial line (a board's UART, or QEMU's UART on a TCP socket).

Bytes are read one at a time: a multi-byte read of a socket:// port loses what had arrived when the
peer (QEMU) closes. Reading stops at the protocol's END or FAULT line, so success is decided by the
transcript, never by the emulator's exit status; a deadline bounds every read, and
quantcore.limits.FIRMWARE_OUTPUT_MAX_BYTES what is kept.

A device is opened for this program alone: a second reader (a serial monitor left open) would take
bytes out of the transcript. pyserial's exclusive lock (flock) finds programs that lock the port, and
the programs that hold it open without a lock are found in /proc; while Fixpoint reads, TIOCEXCL keeps
others from opening it. Every way the port cannot be opened has its own message naming the cause.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import socket
import stat
import termios
import time
from types import TracebackType
from typing import Any

from quantcore import limits
from quantcore.display import quoted
from quantcore.targets import protocol
from quantcore.targets.errors import (
    FirmwareOutputLimit,
    FirmwareTimeout,
    PortBusyError,
    SettingError,
    TargetError,
)

BAUD = 115200
POLL_S = 0.2
SETTING = "[flash] serial in fixpoint.toml"
"""Where a serial port comes from unless the caller says otherwise (--serial)."""
URL_SCHEMES = ("socket://", "rfc2217://")
"""The pyserial URLs a port may be: a UART bridged to TCP. Others are refused (spy:// writes a log file
wherever its URL says; loop:// and alt:// are of no use for a board)."""
_BUSY = (errno.EBUSY, errno.EAGAIN, errno.EWOULDBLOCK)
_HOST_PORT = re.compile(r"(?P<host>[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})")
_PLAIN = re.compile(r"[A-Za-z0-9_./:@+=,-]{1,200}")


def shown(port: str) -> str:
    """A port as a message shows it: as is when plain, else quoted and made printable (it comes from a
    setting, and a newline in it must not forge a line of output)."""
    return port if _PLAIN.fullmatch(port) else quoted(port)


class SerialLink:
    """An open serial port (pyserial URL or device path); a context manager that closes it."""

    def __init__(self, url: str, baud: int = BAUD, origin: str = SETTING) -> None:
        import serial  # type: ignore[import-untyped, unused-ignore]  # pyserial ships no type hints

        self.url = url
        self.origin = origin
        device = "://" not in url
        if device:
            check_device(url, origin)
        else:
            check_url(url, origin)
        try:
            self.port: Any = serial.serial_for_url(
                url, baudrate=baud, timeout=POLL_S, exclusive=True if device else None
            )
        except (serial.SerialException, OSError, ValueError) as exc:
            raise open_error(url, exc, origin) from None
        if device:
            _keep_others_out(self.port)

    def __enter__(self) -> SerialLink:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
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
                    f"serial port {shown(self.url)} closed while reading ({exc}); got {_tail(received)}"
                ) from None
            if not byte:
                continue
            received += byte
            if byte == b"\n":
                if received.startswith(protocol.FINAL_PREFIXES, line_start):
                    return received.decode("ascii", "replace")
                line_start = len(received)
            if len(received) > limits.FIRMWARE_OUTPUT_MAX_BYTES:
                raise FirmwareOutputLimit.on(f"serial port {shown(self.url)}", _tail(received))
        raise FirmwareTimeout(
            f"serial port {shown(self.url)}: timed out after {overall or timeout:g} s waiting for "
            f"'{protocol.END}' (received {len(received)} bytes; last: {_tail(received)}); a model too slow"
            " for the timeout needs a longer one: --timeout SECONDS"
        )


def check_device(path: str, origin: str = SETTING) -> None:
    """A device path that exists, is a character device and that no other program holds open."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise _missing(path, origin) from None
    except OSError as exc:
        problem = exc.strerror or exc
        raise TargetError(f"cannot use serial device {shown(path)}: {problem} ({origin})") from None
    if not stat.S_ISCHR(info.st_mode):
        from quantcore.untrusted import kind_of

        raise SettingError(f"{shown(path)} is {kind_of(info.st_mode)}, not a serial device ({origin})")
    holders = holders_of(path)
    if holders:
        raise busy_error(path, holders)


def check_url(url: str, origin: str = SETTING) -> None:
    """A socket:// or rfc2217:// URL with a host and a port number (pyserial's own checks crash on some)."""
    if not url.startswith(URL_SCHEMES):
        raise SettingError(
            f"{shown(url)} is not a serial port Fixpoint opens: give a device path (/dev/ttyACM0) or "
            f"socket://<host>:<port> or rfc2217://<host>:<port> ({origin})"
        )
    scheme, _, rest = url.partition("://")
    if not is_host_port(rest.split("?", 1)[0]):
        raise SettingError(f"{shown(url)} is not a valid {scheme}://<host>:<port> URL ({origin})")


def is_host_port(text: str) -> bool:
    """Whether `text` is <host>:<port> (a name, IPv4 or [IPv6] address; a port from 1 to 65535)."""
    match = _HOST_PORT.fullmatch(text)
    return match is not None and 0 < int(match["port"]) < 65536


def holders_of(path: str) -> list[str]:
    """The other processes that have `path` open ("pid 123 'picocom'"), as far as /proc shows them.

    Only symlinks are read (never the files they lead to), so a process holding a hung file cannot
    block the scan; processes of other users are not visible to a normal user and are left out.
    """
    target = os.path.realpath(path)
    found = []
    for pid in _pids():
        if pid != os.getpid() and _holds(pid, target):
            found.append(f"pid {pid} {_command(pid)}")
    return found


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []  # no /proc (not Linux): the flock and TIOCEXCL checks remain


def _holds(pid: int, target: str) -> bool:
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    for entry in names:
        with contextlib.suppress(OSError):
            if os.readlink(f"{folder}/{entry}") == target:
                return True
    return False


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return quoted(handle.read(64).decode("utf-8", "replace").strip())
    except OSError:
        return "(ended)"


def busy_error(path: str, holders: list[str] | None = None) -> PortBusyError:
    who = f"{', '.join(holders)}; " if holders else ""
    return PortBusyError(f"{shown(path)} is busy: another program holds it ({who}close the serial monitor)")


def _keep_others_out(port: Any) -> None:
    # TIOCEXCL: further open()s of the tty fail with EBUSY until it is closed (root is exempt), so a
    # serial monitor started during the run cannot take bytes out of the transcript.
    with contextlib.suppress(OSError, AttributeError):
        fcntl.ioctl(port.fd, termios.TIOCEXCL)


def open_error(url: str, exc: Exception, origin: str = SETTING) -> TargetError:
    """The cause of a failed open, in words: busy, refused, unreachable, no permission, bad URL."""
    cause = _os_error(exc)
    code = cause.errno if cause is not None else getattr(exc, "errno", None)
    if "://" not in url:
        return _device_error(url, code, exc, origin)
    if isinstance(cause, ConnectionRefusedError):
        return TargetError(f"nobody listens on {shown(url)} (start the serial server or fix {origin})")
    if isinstance(cause, TimeoutError):
        return TargetError(f"no answer from {shown(url)}: the connection timed out ({origin})")
    if isinstance(cause, socket.gaierror):
        return TargetError(f"cannot resolve the host of {shown(url)}: {cause.strerror or cause} ({origin})")
    if any(isinstance(seen, ValueError) for seen in _chain(exc)):
        scheme = url.split("://", 1)[0]
        return SettingError(f"{shown(url)} is not a valid {scheme}://<host>:<port> URL ({origin})")
    return TargetError(f"cannot connect to {shown(url)}: {_reason(exc)} ({origin})")


def _device_error(path: str, code: int | None, exc: Exception, origin: str) -> TargetError:
    if code in _BUSY:
        return busy_error(path)
    if code == errno.ENOENT:
        return _missing(path, origin)
    if code in (errno.EACCES, errno.EPERM):
        return TargetError(
            f"no permission to open {shown(path)}: add your user to the group that owns it (on Debian: "
            "`sudo usermod -aG dialout $USER`, then log in again)"
        )
    return TargetError(f"cannot open serial device {shown(path)}: {_reason(exc)} ({origin})")


def _missing(path: str, origin: str) -> TargetError:
    return TargetError(f"serial device {shown(path)} does not exist (is the board plugged in? {origin})")


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from or during (pyserial re-raises socket errors inside its own)."""
    found: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(found) < 8:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError that says why: pyserial's own (an OSError too) only when it carries an errno."""
    for seen in _chain(exc):
        if isinstance(seen, OSError) and (seen.errno is not None or type(seen).__name__ != "SerialException"):
            return seen
    return None


def _reason(exc: Exception) -> str:
    cause = _os_error(exc)
    return (cause.strerror if cause is not None and cause.strerror else str(exc)) or type(exc).__name__


def _tail(data: bytes | bytearray) -> str:
    return repr(bytes(data[-160:]).decode("ascii", "replace")) if data else "nothing"
