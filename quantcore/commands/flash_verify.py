"""`fixpoint flash-verify --target T`: the board flow: build, memory audit, flash, run, read UART, compare.

On a QEMU target the "board" is QEMU started halted, flashed through its GDB stub, its UART0 on TCP;
on the project's board the [flash] backend (pyocd, openocd, jlink, gdb) flashes and [flash] serial is
read. The memory audit runs first: a firmware over budget is never flashed.
"""

from __future__ import annotations

import argparse

from quantcore.commands import _args
from quantcore.commands import _firmware as fw
from quantcore.commands._args import Subcommands
from quantcore.commands.verify import _verify


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "flash-verify", help="flash the model's firmware, read its UART, compare with the reference"
    )
    fw.add_arguments(p)
    p.add_argument("--no-float-metrics", action="store_true", help="skip the float-vs-int8 figures")
    p.add_argument("--serial", help="the board's serial port or pyserial URL (default: [flash] serial)")
    p.add_argument("--probe", help="the probe's serial number (default: [flash] probe)")
    p.add_argument(
        "--gdb-port", type=_args.PORT, default=0, help="QEMU: GDB stub port (default 0: a free one)"
    )
    p.add_argument(
        "--uart-port", type=_args.PORT, default=0, help="QEMU: UART TCP port (default 0: a free one)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return fw.guarded("flash-verify", args, lambda: _verify(args, board=True))
