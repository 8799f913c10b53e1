"""The targets a model is built for and run on: the host, three QEMU boards, and the project's board.

A Target says which core to compile for, where flash and RAM are (the linker script and the memory
budget), how the harness talks (stdout, semihosting or a CMSDK UART) and how the firmware runs. The QEMU
boards are Arm's MPS2/MPS3 FPGA images that QEMU models; their UART0 is a CMSDK APB UART, so one polled
driver serves them and the board route (flash over GDB, read the UART) runs for real without a probe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quantcore.cores import Core
from quantcore.targets.errors import UnknownTargetError

KIB = 1024
MIB = 1024 * KIB


class Kind(enum.Enum):
    """How firmware for a target runs."""

    HOST = "host"
    """A program on this machine; the transcript is its stdout."""
    QEMU = "qemu"
    """qemu-system-arm with a -M board: semihosting (-kernel) or the GDB-stub + UART board route."""
    BOARD = "board"
    """A real board: flashed through a probe backend, the transcript read from its serial port."""


@dataclass(frozen=True)
class Region:
    """A memory region: where it starts and how many bytes it holds."""

    origin: int
    size: int


@dataclass(frozen=True)
class Target:
    """One place to build for and run on."""

    name: str
    core: Core
    kind: Kind
    flash: Region | None = None
    """Code and constants; None for the host."""
    ram: Region | None = None
    """Data, bss and the stack (at its top); None for the host."""
    machine: str | None = None
    """QEMU's -M board name."""
    uart_base: int | None = None
    """The CMSDK APB UART0 base address the harness writes to on the UART route."""
    description: str = ""

    @property
    def cross(self) -> bool:
        return self.kind is not Kind.HOST


BUILTIN: dict[str, Target] = {
    t.name: t
    for t in (
        Target("host", Core.HOST, Kind.HOST, description="this machine, gcc, pure-C CMSIS-NN"),
        Target(
            "qemu-m4",
            Core.CORTEX_M4,
            Kind.QEMU,
            Region(0x00000000, 4 * MIB),  # SSRAM1
            Region(0x20000000, 4 * MIB),  # SSRAM2/3
            machine="mps2-an386",
            uart_base=0x40004000,
            description="QEMU mps2-an386, Cortex-M4 (DSP)",
        ),
        Target(
            "qemu-m7",
            Core.CORTEX_M7,
            Kind.QEMU,
            Region(0x00000000, 4 * MIB),
            Region(0x20000000, 4 * MIB),
            machine="mps2-an500",
            uart_base=0x40004000,
            description="QEMU mps2-an500, Cortex-M7 (DSP)",
        ),
        Target(
            "qemu-m55",
            Core.CORTEX_M55,
            Kind.QEMU,
            Region(0x00000000, 512 * KIB),  # ITCM
            Region(0x20000000, 512 * KIB),  # DTCM
            machine="mps3-an547",
            uart_base=0x59303000,  # UART0, Secure alias: the core starts Secure
            description="QEMU mps3-an547, Cortex-M55 (MVE)",
        ),
    )
}


def get_target(name: str, board: Target | None = None) -> Target:
    """A built-in target by name, or `board` (the project's) when its name matches."""
    if board is not None and name in (board.name, "board"):
        return board
    if name in BUILTIN:
        return BUILTIN[name]
    known = ", ".join([*BUILTIN, *([board.name] if board else [])])
    hint = "" if board else "; a real board is configured in fixpoint.toml's [board] section"
    raise UnknownTargetError(f"unknown target {name!r}; known targets: {known}{hint}")


def board_target(name: str, core: Core, flash: Region, ram: Region, uart_base: int | None) -> Target:
    """A real board as a target (the project's [board] section)."""
    return Target(name, core, Kind.BOARD, flash, ram, uart_base=uart_base, description=f"board, {core.label}")
