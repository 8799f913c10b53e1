"""Running built firmware and collecting its transcript: host process, QEMU semihosting, or the board route.

Every route has a timeout (a hung firmware is an error after N seconds, never a hung Fixpoint) and
turns a crash into FirmwareFault with what the fault handler printed. The transcript is parsed by
quantcore.targets.protocol against the sizes the model declares.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from quantcore.targets import process, protocol
from quantcore.targets.build import Channel, Firmware
from quantcore.targets.errors import (
    FirmwareFailed,
    FirmwareFault,
    FirmwareOutputLimit,
    FirmwareTimeout,
    TargetError,
)
from quantcore.targets.target import Kind
from quantcore.targets.toolchain import require_tool

DEFAULT_TIMEOUT_S = 60.0
FAULT_STATUS = 127
"""The exit status the semihosting fault handlers leave QEMU with."""


@dataclass(frozen=True)
class RunResult:
    """A finished run: the parsed transcript, the raw text and where it came from."""

    transcript: protocol.Transcript
    text: str
    channel: str
    seconds: float


def run_firmware(
    firmware: Firmware, timeout: float = DEFAULT_TIMEOUT_S, expect: protocol.Expectation | None = None
) -> RunResult:
    """Run on the host or under QEMU (semihosting, or the GDB-stub + UART route for a UART build)."""
    if firmware.target.kind is Kind.HOST:
        return run_process([str(firmware.path)], f"{firmware.path.name} (host) stdout", timeout, expect)
    if firmware.target.kind is Kind.QEMU and firmware.channel is Channel.SEMIHOSTING:
        return run_process(
            qemu_semihosting_command(firmware), f"QEMU {firmware.target.machine}", timeout, expect
        )
    if firmware.target.kind is Kind.QEMU and firmware.channel is Channel.UART:
        from quantcore.targets.board import run_on_qemu_board

        return run_on_qemu_board(firmware, timeout, expect)
    raise TargetError(
        f"{firmware.target.name} is a board: run it with `fixpoint flash-verify` (flash, then read its UART)"
    )


def qemu_command(machine: str) -> list[str]:
    qemu = require_tool("qemu-system-arm", "qemu-system-arm")
    return [qemu, "-M", machine, "-nographic", "-monitor", "none"]


def qemu_semihosting_command(firmware: Firmware) -> list[str]:
    assert firmware.target.machine is not None
    base = qemu_command(firmware.target.machine)
    return [
        *base,
        "-serial",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
        str(firmware.path),
    ]


def run_process(
    command: list[str], channel: str, timeout: float, expect: protocol.Expectation | None
) -> RunResult:
    """Run `command`, its stdout being the transcript; timeout, fault, flood and failure become clear errors.

    The output is read as it comes and kept only up to the transcript's final line: a firmware that
    prints without end is stopped at quantcore.limits.FIRMWARE_OUTPUT_MAX_BYTES.
    """
    try:
        done = process.run_capped(command, timeout, final=protocol.FINAL_PREFIXES)
    except OSError as exc:
        raise TargetError(f"{channel}: cannot start {command[0]}: {exc.strerror or exc}") from None
    text = done.stdout.decode("ascii", "replace")
    stderr = done.stderr.decode("utf-8", "replace")
    if done.ending is process.Ending.TIMEOUT:
        raise FirmwareTimeout(
            f"{channel}: the firmware timed out after {timeout:g} s (a hang, or a model too slow for the "
            f"timeout: give it longer with --timeout SECONDS); last output: {_tail(text)}"
        )
    if done.ending is process.Ending.LIMIT:
        raise FirmwareOutputLimit.on(channel, _tail(text))
    check_exit(done.returncode or 0, text, stderr, channel)
    return finish(text, channel, expect, done.seconds, stderr)


def check_exit(returncode: int, text: str, stderr: str, channel: str) -> None:
    """A fault (exit 127 or a signal) is FirmwareFault, whatever the transcript says."""
    if returncode < 0:
        name = _signal_name(-returncode)
        raise FirmwareFault(f"firmware faulted ({channel}): killed by {name}; last output: {_tail(text)}")
    if returncode == FAULT_STATUS or protocol.FAULT in text:
        report = next((line for line in text.splitlines() if line.startswith(protocol.FAULT)), "")
        raise FirmwareFault(
            f"firmware faulted ({channel}, exit {returncode}): {report or 'no fault report'}; "
            f"stderr: {stderr.strip()[-300:] or '(empty)'}"
        )


def finish(
    text: str, channel: str, expect: protocol.Expectation | None, seconds: float, stderr: str = ""
) -> RunResult:
    """Parse the transcript; a failure status is FirmwareFailed, a broken one ProtocolError (with stderr)."""
    try:
        transcript = protocol.parse(text, expect, channel)
    except protocol.ProtocolError as exc:
        if stderr.strip():
            raise protocol.ProtocolError(f"{exc}\n{channel} stderr: {stderr.strip()[-500:]}") from None
        raise
    if not transcript.ok:
        details = " ".join(f"{k}={v}" for k, v in transcript.details.items())
        raise FirmwareFailed(
            f"{channel}: the firmware reported status={transcript.status} {details}".rstrip()
        )
    return RunResult(transcript, text, channel, seconds)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # real-time signals between SIGRTMIN and SIGRTMAX have no name of their own
        return f"signal {number}"


def _tail(data: bytes | str | None, chars: int = 200) -> str:
    if not data:
        return "(none)"
    text = data.decode("ascii", "replace") if isinstance(data, bytes) else data
    return repr(text[-chars:])
