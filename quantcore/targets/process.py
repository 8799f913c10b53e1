"""Running a process whose output is not to be trusted: read as it comes, kept within a cap, stopped in time.

`subprocess.run(capture_output=True)` keeps everything a process prints in memory; firmware that prints
in a loop reached 8.6 GB in 10 s. Here both pipes are read incrementally and the process runs in a
session of its own, so that it and everything it started can be killed as a group:
- a firmware transcript (`final` given) is kept up to the line that ends it (END or FAULT); reading stops
  there, and after `limit` bytes without that line the run stops with Ending.LIMIT;
- a tool's output (compiler, CMake, gdb, git) is drained to the end, and only its last `keep` bytes per
  stream are kept for the error message;
- the deadline ends every run (Ending.TIMEOUT); the group is killed whatever way the run ends, also when
  the caller is interrupted.
"""

from __future__ import annotations

import contextlib
import enum
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from quantcore import limits

TOOL_KEEP_BYTES = 256 * 1024
"""What is kept of each stream of a tool's output (the messages quote the last lines of it)."""
EXIT_GRACE_S = 2.0
"""How long a firmware may take to exit by itself after its final line before it is killed."""
DRAIN_S = 0.5
"""How long the pipes are still read after the process exited (a child it left may hold them open)."""
_CHUNK = 64 * 1024
_POLL_S = 0.1
"""Longest wait between checks of the deadline and of whether the process exited."""


class Ending(enum.Enum):
    """Why a run stopped."""

    EXITED = "exited"
    """The process exited by itself; `returncode` is its status."""
    FINAL = "final"
    """The transcript's final line arrived; the process exited or was stopped after it."""
    LIMIT = "limit"
    """The output passed the limit before the final line; the process was killed."""
    TIMEOUT = "timeout"
    """The deadline passed; the process was killed."""


@dataclass(frozen=True)
class Captured:
    """What a run printed (as much as was kept) and how it ended."""

    stdout: bytes
    stderr: bytes
    returncode: int | None
    """The exit status (negative: killed by that signal); None when Fixpoint stopped the process."""
    ending: Ending
    printed: int
    """Bytes the process printed on both streams, kept or not."""
    seconds: float

    def output(self) -> str:
        """What was kept of both streams, as text (for a tool's messages)."""
        return (self.stdout + self.stderr).decode("utf-8", "replace")


class _Stream:
    """One pipe's bytes: everything up to a cap, or only the tail."""

    def __init__(self, tail: int | None) -> None:
        self.tail = tail
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if self.tail is not None and len(self.data) > 2 * self.tail:
            del self.data[: len(self.data) - self.tail]  # amortised: trimmed once per `tail` bytes

    def value(self) -> bytes:
        data = self.data if self.tail is None else self.data[-self.tail :]
        return bytes(data)


class _FinalLine:
    """Finds the line that ends a transcript: the first one starting with one of `prefixes`.

    Searched for in C (bytes.find of newline + prefix) over what arrived since the last call, so a
    flood of short lines costs no Python loop per line.
    """

    def __init__(self, prefixes: tuple[bytes, ...]) -> None:
        self.prefixes = prefixes
        self.needles = tuple(b"\n" + prefix for prefix in prefixes)
        self.overlap = max(map(len, self.needles)) - 1
        self.start: int | None = None
        """Where the final line starts, once seen."""
        self.scanned = 0

    def end_in(self, data: bytearray) -> int | None:
        """The offset just past the final line's newline, once that newline is in `data`."""
        if self.start is None:
            self.start = self._line_start(data)
        if self.start is None:
            return None
        newline = data.find(b"\n", self.start)
        return None if newline < 0 else newline + 1

    def _line_start(self, data: bytearray) -> int | None:
        if data.startswith(self.prefixes):
            return 0
        since = max(0, self.scanned - self.overlap)  # a needle may straddle the previous chunk's end
        self.scanned = len(data)
        found = [at for needle in self.needles if (at := data.find(needle, since)) >= 0]
        return min(found) + 1 if found else None


def run_capped(
    command: Sequence[str],
    timeout: float,
    *,
    final: tuple[bytes, ...] = (),
    limit: int = limits.FIRMWARE_OUTPUT_MAX_BYTES,
    keep: int = TOOL_KEEP_BYTES,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """Run `command` with stdin closed; see the module docstring for `final`, `limit` and `keep`.

    With `final` (a firmware transcript: the prefixes of the lines that end it) stdout is kept whole
    up to its final line, and the run stops after `limit` bytes printed in all without one (only
    the last `keep` bytes are kept then); without `final` (a tool) the process runs to its end and the
    last `keep` bytes of each stream are kept.
    OSError (a missing program) propagates for the caller to name.
    """
    start = time.monotonic()
    process = subprocess.Popen(
        list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=None if env is None else dict(env), start_new_session=True,
    )  # fmt: skip
    try:
        run = _Run(process, start + timeout, final, limit, keep)
        ending = run.collect()
        exited = _exited_within(process.pid, _wait_budget(ending, run.deadline))
    finally:
        _stop(process)
    if ending is None:
        ending = Ending.EXITED if exited else Ending.TIMEOUT  # it closed its output but kept running
    returncode = process.returncode if exited else None
    seconds = time.monotonic() - start
    return Captured(run.out.value(), run.err.value(), returncode, ending, run.printed, seconds)


def run_tool(
    command: Sequence[str],
    timeout: float,
    doing: str,
    error: Callable[[str], Exception],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """`run_capped` for a tool (compiler, CMake, git, a flasher): a program that cannot be started, or
    does not finish within `timeout`, is `error` with a message saying what was being done; the caller
    judges the exit status and the output."""
    try:
        done = run_capped(command, timeout, cwd=cwd, env=env)
    except OSError as exc:
        raise error(f"{doing}: cannot start {command[0]}: {exc.strerror or exc}") from None
    if done.ending is Ending.TIMEOUT:
        raise error(f"{doing} timed out after {timeout:g} s: {' '.join(command)}")
    return done


def last_lines(text: str, count: int = 12) -> str:
    """The last `count` lines of a tool's output, for a message ("(no output)" when there is none)."""
    return "\n".join(text.strip().splitlines()[-count:]) or "(no output)"


class _Run:
    """The reading loop over both pipes of one process."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        deadline: float,
        final: tuple[bytes, ...],
        limit: int,
        keep: int,
    ) -> None:
        self.process = process
        self.deadline = deadline
        self.limit = limit
        self.keep = keep
        self.finder = _FinalLine(final) if final else None
        self.out = _Stream(None if final else keep)
        self.err = _Stream(keep)
        self.printed = 0

    def collect(self) -> Ending | None:
        """Read until both pipes close (None), the final line, the limit or the deadline."""
        assert self.process.stdout is not None and self.process.stderr is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout.fileno(), selectors.EVENT_READ, self.out)
            selector.register(self.process.stderr.fileno(), selectors.EVENT_READ, self.err)
            drain_until: float | None = None
            while selector.get_map():
                now = time.monotonic()
                if now >= self.deadline:
                    return Ending.TIMEOUT
                if drain_until is None and _exited_within(self.process.pid, 0.0):
                    drain_until = now + DRAIN_S
                if drain_until is not None and now >= drain_until:
                    return None
                for key, _ in selector.select(min(self.deadline - now, _POLL_S)):
                    ending = self._take(selector, key.fd, key.data)
                    if ending is not None:
                        return ending
        return None

    def _take(self, selector: selectors.BaseSelector, fd: int, stream: _Stream) -> Ending | None:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            selector.unregister(fd)
            return None
        self.printed += len(chunk)
        stream.add(chunk)
        if self.finder is None:
            return None
        end = self.finder.end_in(self.out.data) if stream is self.out else None
        if end is not None:
            del self.out.data[end:]  # lines after the final one are not part of the transcript
            return Ending.FINAL
        if self.printed <= self.limit:
            return None
        del self.out.data[: -self.keep]  # a transcript that never ended is useless; its tail says why
        return Ending.LIMIT


def _wait_budget(ending: Ending | None, deadline: float) -> float:
    """How long the process may still take to exit by itself."""
    if ending is Ending.FINAL:
        return EXIT_GRACE_S
    if ending is None:
        return max(0.0, deadline - time.monotonic())
    return 0.0


def _exited_within(pid: int, seconds: float) -> bool:
    """Whether the process has exited (or does within `seconds`), without reaping it.

    Not reaping keeps its process id, which is also the group's id, from being reused by another
    program before the group is killed.
    """
    until = time.monotonic() + seconds
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is not None:
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.01)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Kill the process's whole session (what it started too), reap it and close the pipes."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
