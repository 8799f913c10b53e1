"""`fixpoint verify --target T`: generate, build, run (stdout / QEMU semihosting), compare every layer.

The reference is the int8 executor on the same quantized inputs; the table shows per layer the bytes
that differ and the first difference (case, channel, index). Exit 0 when every byte matches, 1 if not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from quantcore.commands import _firmware as fw
from quantcore.commands._args import Subcommands

if TYPE_CHECKING:  # imported where used: building the CLI parser imports nothing heavy
    from quantcore.targets.backends import FlashSettings
    from quantcore.targets.build import Firmware
    from quantcore.targets.memory import MemoryReport
    from quantcore.targets.protocol import Expectation
    from quantcore.targets.run import RunResult
    from quantcore.targets.serial_link import SerialLink


def register(sub: Subcommands) -> None:
    p = sub.add_parser("verify", help="run the generated model on a target and compare with the reference")
    fw.add_arguments(p)
    p.add_argument("--no-float-metrics", action="store_true", help="skip the float-vs-int8 figures")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return fw.guarded("verify", args, lambda: _verify(args, board=False))


def _verify(args: argparse.Namespace, board: bool) -> int:
    from quantcore.targets import verify
    from quantcore.targets.build import Channel

    ctx = fw.resolve(args)
    with contextlib.ExitStack() as stack:
        link = _board_link(ctx, stack) if board else None
        model = fw.load_model(ctx, required=True)
        assert model is not None
        src = fw.sources(ctx, model)
        cases = fw.cases(ctx, model, src)
        firmware, cases = fw.build(ctx, src, cases, Channel.UART if board else None)
        memory = fw.audit(ctx, firmware)
        if board and not args.json:
            print(f"memory (checked before flashing): {memory.format()}", flush=True)
        metrics = [] if getattr(args, "no_float_metrics", False) else fw.float_metrics(model, cases)
        report = verify.verify_run(
            model.qgraph, cases, firmware, _executor(ctx, firmware, board, link, memory), memory, metrics
        )
    print(json.dumps(report.to_dict()) if args.json else verify.format_table(report))
    return fw.EXIT_PASS if report.comparison.passed else fw.EXIT_FAIL


def _board_link(ctx: fw.Context, stack: contextlib.ExitStack[bool | None]) -> SerialLink | None:
    """What the board route needs, checked before the model is built: the serial port (opened and held
    from here on: a missing device or a port another program holds is the message, not a later
    failure) and the UART the harness writes to. None for QEMU, whose UART is a socket of its own."""
    from quantcore.targets import backends
    from quantcore.targets import board as board_route
    from quantcore.targets.build import Channel, check_channel
    from quantcore.targets.serial_link import SETTING
    from quantcore.targets.target import Kind

    if ctx.target.kind is Kind.HOST:
        raise fw.BadInput("flash-verify needs a QEMU target or a board; use `fixpoint verify` for the host")
    if ctx.target.kind is not Kind.BOARD:
        return None
    serial, flash = ctx.args.serial, ctx.project.flash
    origin = "--serial" if serial else SETTING
    link = stack.enter_context(board_route.open_uart(serial or flash.serial, flash.baud, origin))
    check_channel(ctx.target, Channel.UART)
    backends.check_settings(_settings(ctx))
    if flash.backend is backends.BackendName.GDB:
        backends.check_gdb_remote(flash.gdb_remote)
    return link


def _executor(
    ctx: fw.Context, firmware: Firmware, board: bool, link: SerialLink | None, memory: MemoryReport | None
) -> Callable[[Expectation], RunResult]:
    from quantcore.targets import board as board_route
    from quantcore.targets.run import run_firmware
    from quantcore.targets.target import Kind
    from quantcore.targets.verify import default_timeout

    timeout = ctx.args.timeout
    if timeout is None:
        timeout = default_timeout(memory.flash if memory else None, firmware.cases)
    if not board:
        return lambda expect: run_firmware(firmware, timeout, expect)
    if ctx.target.kind is Kind.QEMU:
        ports = (getattr(ctx.args, "gdb_port", 0) or 0, getattr(ctx.args, "uart_port", 0) or 0)
        return lambda expect: board_route.run_on_qemu_board(firmware, timeout, expect, *ports)
    assert link is not None, "_board_link opens the serial port of every board target"
    return lambda expect: board_route.flash_and_read(
        firmware, ctx.project.flash.backend, _settings(ctx), link, timeout, expect
    )


def _settings(ctx: fw.Context) -> FlashSettings:
    from quantcore.targets.backends import FlashSettings

    flash = ctx.project.flash
    origin = ctx.target.flash.origin if ctx.target.flash else 0x08000000
    return FlashSettings(
        device=flash.device,
        probe=ctx.args.probe or flash.probe,
        flash_origin=origin,
        gdb_remote=flash.gdb_remote,
    )
