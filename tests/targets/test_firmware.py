"""Real builds and runs: host, the three QEMU boards (semihosting), the GDB-stub + UART board route,
and the failure modes (hang, fault, busy port, garbage on the UART, missing toolchain, over budget)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from quantcore.cores import Core
from quantcore.targets import board, cmsis_nn, memory
from quantcore.targets.build import BuildRequest, Channel, Firmware, build_firmware
from quantcore.targets.compare import ReferenceLayer, compare
from quantcore.targets.errors import (
    BudgetError,
    FirmwareFault,
    FirmwareTimeout,
    PortBusyError,
    ToolchainNotFound,
)
from quantcore.targets.protocol import ProtocolError
from quantcore.targets.run import run_firmware
from quantcore.targets.serial_link import SerialLink
from quantcore.targets.target import BUILTIN
from tests.targets.models import MAXPOOL_SRC

INPUTS = [bytes(range(32)), bytes((np.arange(32, dtype=np.int64) * 37 % 256).tolist())]


def _reference() -> tuple[list[ReferenceLayer], np.ndarray]:
    from quantcore.kernels.pooling import max_pool_s8

    x = np.stack([np.frombuffer(case, np.int8).reshape(4, 4, 2) for case in INPUTS])
    a = max_pool_s8(x, kernel=(2, 2), stride=(2, 2))
    b = max_pool_s8(a, kernel=(2, 2), stride=(2, 2))
    return [ReferenceLayer("pool_a", a), ReferenceLayer("pool_b", b)], b


def _build(
    checkout: cmsis_nn.CmsisNn,
    tmp: Path,
    target: str,
    src: Path = MAXPOOL_SRC,
    channel: Channel | None = None,
) -> Firmware:
    return build_firmware(BuildRequest(BUILTIN[target], src, tmp, INPUTS, checkout, channel=channel))


def _assert_bit_exact(result_transcript: object) -> None:
    layers, output = _reference()
    comparison = compare(layers, output, result_transcript)  # type: ignore[arg-type]
    assert comparison.passed, comparison


def test_host_build_runs_and_matches_the_reference_kernels(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    result = run_firmware(_build(checkout, tmp_path, "host"), timeout=30)
    assert result.transcript.model == "model" and len(result.transcript.cases) == 2
    _assert_bit_exact(result.transcript)


@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m7", "qemu-m55"])
def test_qemu_semihosting_runs_match_the_reference(
    cross: cmsis_nn.CmsisNn, tmp_path: Path, target: str
) -> None:
    firmware = _build(cross, tmp_path, target)
    assert firmware.path.suffix == ".elf" and firmware.hex_path.is_file()
    _assert_bit_exact(run_firmware(firmware, timeout=30).transcript)


@pytest.mark.parametrize("target", ["qemu-m4", "qemu-m55"])
def test_the_board_route_flashes_over_gdb_and_reads_the_uart(
    gdb: cmsis_nn.CmsisNn, tmp_path: Path, target: str
) -> None:
    firmware = _build(gdb, tmp_path, target, channel=Channel.UART)
    result = run_firmware(firmware, timeout=30)
    assert result.channel.startswith("UART of QEMU")
    _assert_bit_exact(result.transcript)


def test_a_hanging_firmware_times_out_on_the_host(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path]
) -> None:
    firmware = _build(checkout, tmp_path, "host", variant("hang", "for (volatile int i = 0;; ++i) {}"))
    start = time.monotonic()
    with pytest.raises(FirmwareTimeout, match=r"timed out after 1\.5 s"):
        run_firmware(firmware, timeout=1.5)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("channel", [Channel.SEMIHOSTING, Channel.UART])
def test_a_hanging_firmware_times_out_under_qemu(
    gdb: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path], channel: Channel
) -> None:
    firmware = _build(gdb, tmp_path, "qemu-m4", variant("hang", "for (volatile int i = 0;; ++i) {}"), channel)
    start = time.monotonic()
    with pytest.raises(FirmwareTimeout, match="timed out after 2 s"):
        run_firmware(firmware, timeout=2)
    assert time.monotonic() - start < 12


@pytest.mark.parametrize(
    ("target", "channel"), [("qemu-m55", Channel.SEMIHOSTING), ("qemu-m4", Channel.UART)]
)
def test_a_faulting_firmware_reports_its_fault_handler(
    gdb: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path], target: str, channel: Channel
) -> None:
    firmware = _build(gdb, tmp_path, target, variant("fault", "__builtin_trap();"), channel)
    with pytest.raises(FirmwareFault, match=r"firmware faulted .*FIXPOINT FAULT UsageFault cfsr=0x00010000"):
        run_firmware(firmware, timeout=20)


def test_a_faulting_host_firmware_names_the_signal(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path]
) -> None:
    firmware = _build(checkout, tmp_path, "host", variant("fault", "__builtin_trap();"))
    with pytest.raises(FirmwareFault, match=r"killed by SIG(ILL|TRAP)"):
        run_firmware(firmware, timeout=20)


def test_a_wrong_byte_is_found_with_its_case_channel_and_index(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path]
) -> None:
    # Corrupt one input byte of case 0 only (its byte 1 is 1; case 1's is 37), so one pool_a byte differs.
    src = variant("wrong", "if (arena[1] == 1) { arena[3] = 127; }")
    transcript = run_firmware(_build(checkout, tmp_path, "host", src), timeout=20).transcript
    comparison = compare(*_reference(), transcript)
    first = comparison.layers[0].first
    assert not comparison.passed and comparison.layers[0].mismatched_bytes == 1
    assert first is not None and (first.case, first.channel, first.index) == (0, 1, (0, 0, 1))
    assert (first.expected, first.actual) == (11, 127)


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_busy_uart_port_is_named(gdb: cmsis_nn.CmsisNn, tmp_path: Path, listener: int) -> None:
    firmware = _build(gdb, tmp_path, "qemu-m4", channel=Channel.UART)
    with pytest.raises(PortBusyError, match=f"127.0.0.1:{listener} for QEMU's UART is already in use"):
        board.run_on_qemu_board(firmware, timeout=10, uart_port=listener)


def _serve(payload: bytes) -> tuple[int, threading.Event]:
    """A one-shot TCP server playing a UART that sends `payload` once told to (then stays open, like a
    board): pyserial's socket:// open discards what is already buffered, so the test sets the event
    after its link is open - as a board boots after the host listens."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    opened = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        opened.wait(10)
        conn.sendall(payload)
        time.sleep(3)
        conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1]), opened


def test_garbage_on_the_uart_is_a_protocol_error() -> None:
    from quantcore.targets.run import finish

    port, opened = _serve(
        b"FIXPOINT BEGIN v1 model=m layers=2 cases=1\n[CASE 0]\n\x00\xff@@ noise\nFIXPOINT END status=ok\n"
    )
    with SerialLink(f"socket://127.0.0.1:{port}") as link:
        opened.set()
        text = link.read_transcript(5)
    with pytest.raises(ProtocolError, match=r"line 3: expected '\[LAYER 0"):
        finish(text, "uart", None, 0.0)


def test_a_silent_uart_times_out_quoting_what_arrived() -> None:
    port, opened = _serve(b"FIXPOINT BEGIN v1 model=m layers=2 cases=1\n[CASE 0]\n")
    with (
        SerialLink(f"socket://127.0.0.1:{port}") as link,
        pytest.raises(FirmwareTimeout, match=r"timed out after 1 s.*\[CASE 0\]"),
    ):
        opened.set()
        link.read_transcript(1)


def test_a_missing_cross_toolchain_names_the_packages(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no cached library to fall back on
    with pytest.raises(
        ToolchainNotFound,
        match=r"arm-none-eabi-gcc is not installed.*gcc-arm-none-eabi libnewlib-arm-none-eabi",
    ):
        _build(checkout, tmp_path, "qemu-m4")
    with pytest.raises(ToolchainNotFound, match="cmake is not installed"):
        cmsis_nn.build_library(checkout, Core.CORTEX_M4)


def test_cross_libraries_are_cached_per_core_and_rounding(cross: cmsis_nn.CmsisNn) -> None:
    m4 = cmsis_nn.build_library(cross, Core.CORTEX_M4)
    assert m4 == cmsis_nn.build_library(cross, Core.CORTEX_M4) and m4.is_file()
    assert m4 != cmsis_nn.build_library(cross, Core.CORTEX_M55)
    assert "cortex-m4" in m4.parent.name and "double" in m4.parent.name


def test_the_memory_audit_reads_berkeley_sizes_and_refuses_an_over_budget_model(
    cross: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    firmware = _build(cross, tmp_path, "qemu-m4")
    report = memory.measure(firmware)
    assert report.flash == report.text + report.data and report.ram == report.data + report.bss
    assert report.arena == 48 and report.budget.flash == 4 << 20 and not report.problems()
    tight = memory.measure(firmware, memory.Budget(flash=1024, ram=None))
    with pytest.raises(BudgetError, match=r"flash: \d+ bytes needed, budget 1024"):
        memory.check_budget(tight, "the test budget")


def test_a_model_bigger_than_the_target_memory_fails_at_link_as_a_budget_error(
    cross: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path]
) -> None:
    src = variant("huge", "extern volatile int8_t fixpoint_huge[]; fixpoint_huge[0] = 1;")
    (src / "huge.c").write_text("#include <stdint.h>\nvolatile int8_t fixpoint_huge[600 * 1024];\n")
    with pytest.raises(BudgetError, match="does not fit the target's memory"):
        _build(cross, tmp_path, "qemu-m55", src)
