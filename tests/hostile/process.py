"""Running a product process as a user would, with a guard: a deadline, a memory watchdog, an output cap.

The guard follows the whole process tree (the CLI starts gcc, QEMU, gdb; the language server starts the
CLI in a session of its own), sums its resident memory from /proc and kills every process of it when the
deadline passes, the memory goes past MEMORY_LIMIT or the output past OUTPUT_LIMIT, so a runaway case
never exhausts the machine and never outlives its case.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

MEMORY_LIMIT = 3 * 1024**3
"""Resident bytes of a case's process tree above which it is killed and classified a crash ("memory")."""
OUTPUT_LIMIT = 256 * 1024**2
"""Bytes a case may write to its stdout or stderr file before it is killed (an output flood)."""
POLL_S = 0.1
_PAGE = os.sysconf("SC_PAGE_SIZE")

# Sets RLIMIT_FSIZE, then becomes the command: a portable `ulimit -f` (Python ignores SIGXFSZ, so a
# write past the limit fails with EFBIG instead of killing the process).
_FSIZE_WRAPPER = (
    "import os, resource, sys; n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n));"
    " os.execv(sys.argv[2], sys.argv[2:])"
)


@dataclass
class Guard:
    """Watches one process tree; `reason` says why it was killed ("timeout", "memory", "output")."""

    process: subprocess.Popen[bytes]
    deadline: float
    watched_files: Sequence[Path] = ()
    memory_limit: int = MEMORY_LIMIT
    reason: str | None = None
    peak_rss: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Guard:
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def extend(self, seconds: float) -> None:
        self.deadline = max(self.deadline, time.monotonic() + seconds)

    def _watch(self) -> None:
        while not self._stop.is_set() and self.process.poll() is None:
            rss = sum(tree(self.process.pid).values())
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.memory_limit:
                self.kill("memory")
            elif time.monotonic() > self.deadline:
                self.kill("timeout")
            elif any(_size(p) > OUTPUT_LIMIT for p in self.watched_files):
                self.kill("output")
            self._stop.wait(POLL_S)

    def kill(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        kill_tree(self.process.pid)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _processes() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, session id, resident bytes) of every process we can see."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[3]), int(fields[21]) * _PAGE)
    return table


def tree(root: int) -> dict[int, int]:
    """pid -> resident bytes of `root`, its descendants, and what is left of its session."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [root, *(pid for pid, (_, sid, _) in table.items() if sid == root)]
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += children.get(pid, [])
    return {pid: table[pid][2] for pid in seen if pid in table}


def kill_tree(root: int) -> None:
    """SIGKILL `root`'s session and every descendant (also those that started sessions of their own)."""
    for _ in range(3):  # a dying parent's children are reparented; look again
        pids = tree(root)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)
        if not pids:
            return
        time.sleep(0.05)


@dataclass(frozen=True)
class Finished:
    """A finished (or killed) command."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    killed: str | None
    """"timeout", "memory", "output" or None."""
    peak_rss: int


def run(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    logs: Path,
    fsize: int | None = None,
    memory_limit: int = MEMORY_LIMIT,
) -> Finished:
    """Run `argv` in its own session under a Guard; stdout/stderr go to files in `logs` (read back capped)."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / "stdout", logs / "stderr"
    command = list(argv)
    if fsize is not None:
        command = [sys.executable, "-c", _FSIZE_WRAPPER, str(fsize), *command]
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        guard = Guard(process, started + timeout, (out_path, err_path), memory_limit).start()
        try:
            returncode = process.wait()
        finally:
            guard.stop()
            kill_tree(process.pid)  # nothing it started outlives it
    return Finished(
        returncode,
        read_capped(out_path),
        read_capped(err_path),
        time.monotonic() - started,
        guard.reason,
        guard.peak_rss,
    )


def read_capped(path: Path, limit: int = 1024 * 1024) -> str:
    """The first `limit` bytes of a log, decoded leniently."""
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""
