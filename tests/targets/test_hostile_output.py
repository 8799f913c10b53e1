"""Firmware and tools that print without end, never exit or leave children behind: the output is read as
it comes, kept within quantcore.limits.FIRMWARE_OUTPUT_MAX_BYTES, and the run ends with a message.

The programs are real: the fixture firmware with a print loop put into model_invoke (built for the host
against CMSIS-NN, run by `fixpoint verify`), and small C programs compiled here for what the harness
cannot be made to do (print after its END line, close its output, fork).
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantcore import cli, limits
from quantcore.targets import cmsis_nn, process
from quantcore.targets.build import BuildRequest, build_firmware
from quantcore.targets.errors import FirmwareOutputLimit, FirmwareTimeout
from quantcore.targets.protocol import FINAL_PREFIXES, is_final
from quantcore.targets.run import run_firmware, run_process
from quantcore.targets.serial_link import SerialLink
from quantcore.targets.target import BUILTIN
from tests import needs

EXAMPLES = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES") or 200)
"""Examples per property; FIXPOINT_FUZZ_EXAMPLES sets more for a longer fuzzing run."""
FLOOD = (
    "extern int puts(const char *);"
    ' for (;;) { puts("[LAYER 0 bytes=4 pool_a] 00112233 and more of the same, forever"); }'
)
TRANSCRIPT = "FIXPOINT BEGIN v1 model=m layers=0 cases=0\\nFIXPOINT END status=ok\\n"
PROGRAMS = {
    "after_end": f'int main(void) {{ fputs("{TRANSCRIPT}", stdout); fflush(stdout); '
    'for (;;) { puts("still printing after END"); } }',
    "silent": "int main(void) { fclose(stdout); fclose(stderr); for (;;) { sleep(1); } }",
    "both_streams": "int main(void) { static char line[1024]; memset(line, 'x', sizeof line - 1);"
    " for (int i = 0; i < 10 * 1024; ++i) { puts(line); fputs(line, stderr); } return 3; }",
    # The child waits on a pipe until its parent has flushed its lines, so "child=" comes first.
    "forks": "int main(void) { int go[2]; char c; if (pipe(go) != 0) { return 2; } pid_t child = fork();"
    ' if (child == 0) { close(go[1]); if (read(go[0], &c, 1) == 1) { for (;;) { puts("orphan"); } }'
    " return 0; }"
    ' printf("child=%d\\n", (int)child); fputs("' + TRANSCRIPT + '", stdout); fflush(stdout);'
    ' close(go[0]); if (write(go[1], "x", 1) != 1) { return 2; } return 0; }',
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    needs.require_tool("gcc")
    folder = tmp_path_factory.mktemp("programs")
    built = {}
    for name, body in PROGRAMS.items():
        source = folder / f"{name}.c"
        includes = "".join(f"#include <{h}>\n" for h in ("stdio.h", "string.h", "unistd.h", "sys/types.h"))
        source.write_text(includes + body + "\n")
        subprocess.run(["gcc", "-O1", str(source), "-o", str(folder / name)], check=True)
        built[name] = folder / name
    return built


def test_a_firmware_that_prints_forever_is_stopped_at_the_cap_with_bounded_memory(
    checkout: cmsis_nn.CmsisNn, tmp_path: Path, variant: Callable[[str, str], Path]
) -> None:
    request = BuildRequest(BUILTIN["host"], variant("flood", FLOOD), tmp_path, [bytes(32)], checkout)
    firmware = build_firmware(request)
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(FirmwareOutputLimit) as error:
            run_firmware(firmware, timeout=60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 20
    assert str(error.value).startswith(
        "firmware (host) stdout: the firmware printed more than 64 MiB without finishing its transcript "
        "(no 'FIXPOINT END' line; it was stopped); last output: '"
    )
    assert "00112233 and more of the same, forever\\n" in str(error.value)
    assert peak < 2 * limits.FIRMWARE_OUTPUT_MAX_BYTES  # the old capture grew by gigabytes


def test_verify_of_a_flooding_firmware_fails_with_exit_1_naming_the_cap(
    checkout: cmsis_nn.CmsisNn,
    maxpool_files: tuple[Path, Path],
    variant: Callable[[str, str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    model, params = maxpool_files
    argv = ["verify", "--target", "host", "--model", str(model), "--params", str(params)]
    code = cli.main([*argv, "--src", str(variant("flood", FLOOD)), "--no-float-metrics"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(
        "fixpoint verify: firmware (host) stdout: the firmware printed more than 64 MiB without finishing"
        " its transcript"
    )


def test_output_after_the_end_line_is_not_read_and_the_run_passes(programs: dict[str, Path]) -> None:
    start = time.monotonic()
    result = run_process([str(programs["after_end"])], "after_end", 30, None)
    assert result.text == "FIXPOINT BEGIN v1 model=m layers=0 cases=0\nFIXPOINT END status=ok\n"
    assert result.transcript.ok and time.monotonic() - start < process.EXIT_GRACE_S + 3


def test_a_firmware_that_closes_its_output_and_hangs_times_out(programs: dict[str, Path]) -> None:
    start = time.monotonic()
    with pytest.raises(FirmwareTimeout, match=r"^silent: the firmware timed out after 1\.5 s .*\(none\)$"):
        run_process([str(programs["silent"])], "silent", 1.5, None)
    assert time.monotonic() - start < 5


def test_a_tool_keeps_only_the_tail_of_both_streams(programs: dict[str, Path]) -> None:
    done = process.run_capped([str(programs["both_streams"])], 30)
    assert (done.ending, done.returncode) == (process.Ending.EXITED, 3)
    assert done.printed == 10 * 1024 * (1024 + 1023)  # puts adds the newline, fputs does not
    assert len(done.stdout) == len(done.stderr) == process.TOOL_KEEP_BYTES
    assert done.stdout.endswith(b"x\n") and done.stderr.endswith(b"x")


def test_children_a_firmware_leaves_behind_are_killed(programs: dict[str, Path]) -> None:
    done = process.run_capped([str(programs["forks"])], 30, final=(b"FIXPOINT END",))
    child = int(done.stdout.split(b"\n", 1)[0].removeprefix(b"child="))
    assert done.ending is process.Ending.FINAL and done.returncode == 0
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead, awaiting its reaper
    except (FileNotFoundError, IndexError):
        return False


@pytest.fixture
def flood_server() -> Iterator[int]:
    """A TCP 'UART' that sends bytes without a newline until the reader goes away."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        time.sleep(0.3)  # pyserial's socket:// open discards what is already buffered
        try:
            while True:
                conn.sendall(b"z" * 4096)
        except OSError:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    server.close()


def test_a_uart_that_never_ends_its_transcript_is_stopped_at_the_cap(
    flood_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The serial route reads byte by byte; a 64 KiB cap keeps the test short, the logic is the same.
    monkeypatch.setattr(limits, "FIRMWARE_OUTPUT_MAX_BYTES", 64 * 1024)
    url = f"socket://127.0.0.1:{flood_server}"
    with SerialLink(url) as link, pytest.raises(FirmwareOutputLimit) as error:
        link.read_transcript(30)
    assert str(error.value) == (
        f"serial port {url}: the firmware printed more than 0.0625 MiB without finishing its transcript "
        f"(no 'FIXPOINT END' line; it was stopped); last output: '{'z' * 160}'"
    )


_LINES = st.sampled_from([
    "FIXPOINT BEGIN v1 model=m layers=1 cases=1", "[CASE 0]", "[LAYER 0 bytes=1 x] 0a",
    "FIXPOINT END status=ok", "FIXPOINT FAULT HardFault cfsr=0x1 hfsr=0x2", "FIXPOINT ENDING",
    "noise FIXPOINT END", "", "FIXPOINT",
])  # fmt: skip


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    lines=st.lists(_LINES, max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=7), max_size=40),
    crlf=st.booleans(),
)
def test_the_final_line_is_found_however_the_output_is_cut_into_chunks(
    lines: list[str], cuts: list[int], crlf: bool
) -> None:
    # The reader searches each chunk for newline + prefix in C; it must agree with a plain line-by-line
    # reading (protocol.is_final) wherever the chunks split a line or a prefix.
    data = "".join(f"{line}{chr(13) if crlf else ''}\n" for line in lines).encode()
    expected = None
    offset = 0
    for line in data.decode().splitlines(keepends=True):
        offset += len(line)
        if is_final(line):
            expected = offset
            break
    finder, received, found = process._FinalLine(FINAL_PREFIXES), bytearray(), None
    position, sizes = 0, iter(cuts)
    while position < len(data) and found is None:
        size = next(sizes, len(data))
        received += data[position : position + size]
        position += size
        found = finder.end_in(received)
    assert found == expected
