"""The command worker: one process that imports the engine once and forks a fresh child for each command.

`python -m fixpoint_server.zygote FD` is started by the language server (fixpoint_server.worker) with
one end of a Unix socket as FD. It imports what the `fixpoint` commands use (numpy, onnx, jinja2, the
commands' modules) and then waits. For each job the server sends the CLI's argv, working
folder and environment, with two pipes for its stdout and stderr; the worker forks a child that starts a
session of its own (so cancelling the job is one killpg that reaches QEMU, gdb and the compiler too),
puts the pipes on fds 1 and 2 and runs quantcore.cli.main as `python -m quantcore.cli` would. The child
pays no interpreter start-up and no import: the memory is shared copy-on-write.

The worker is single-threaded where it forks (no asyncio, no thread pool, see PRELOAD), and it exits
when the server's end of the socket closes - the server exited, or was killed - after stopping the jobs
still running: it never outlives the server.

Messages both ways are frames: a 4-byte big-endian length, then a JSON object (`frame`, `Frames`).
    server -> worker  {"job": N, "argv": [...], "cwd": DIR, "env": {...}}  with 2 fds (stdout, stderr)
    worker -> server  {"ready": PID, "threads": T, "seconds": S}  once, after the imports
                      {"job": N, "pid": PID}  the job runs (in its own session)
                      {"job": N, "error": "..."}  it could not be started
                      {"job": N, "exit": CODE}  it ended (CODE < 0: killed by signal -CODE)
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from collections import deque
from collections.abc import Iterator
from typing import Any, NoReturn

HEADER = struct.Struct(">I")
FRAME_MAX = 1 << 24
"""A frame longer than this is a broken peer, not a message (an environment is a few kilobytes)."""
GRACE_S = 2.0
"""How long jobs get to exit on SIGTERM when the server has gone, before SIGKILL."""

PRELOAD = (
    "numpy", "numpy.random", "onnx", "onnx.reference", "onnx.reference.ops", "jinja2",
    "serial", "quantcore.cli", "quantcore.pipeline", "quantcore.project", "quantcore.codegen.generate",
    "quantcore.codegen.lower", "quantcore.codegen.buffers", "quantcore.importers.onnx",
    "quantcore.importers.tflite", "quantcore.targets.board", "quantcore.targets.verify",
    "quantcore.verify.tflm", "quantcore.report",
)  # fmt: skip
"""What generate, quantize, evaluate, flash-verify and report import (python -X importtime): the part
of their start-up a warm worker saves. Not here: torch (only qat imports it, and pays for it) and
onnxruntime (0.1 s), whose import starts a thread of its own - a fork must not copy a process whose
other threads may hold a lock. numpy's OpenBLAS threads are stopped by OpenBLAS itself around a fork."""


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return HEADER.pack(len(body)) + body


class Frames:
    """Bytes from a stream in, whole messages out."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        self.buffer += data
        while len(self.buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self.buffer)
            if length > FRAME_MAX:
                raise ValueError(f"a frame of {length} bytes (at most {FRAME_MAX})")
            if len(self.buffer) < HEADER.size + length:
                return
            end = HEADER.size + length
            body, self.buffer = self.buffer[HEADER.size : end], self.buffer[end:]
            message = json.loads(body)
            if not isinstance(message, dict):
                raise ValueError("a frame that is not a JSON object")
            yield message


# -- the worker process ----------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    started = time.perf_counter()
    preload()
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0
    seconds = round(time.perf_counter() - started, 3)
    try:
        sock.sendall(frame({"ready": os.getpid(), "threads": threads, "seconds": seconds}))
        Worker(sock).serve()
    except OSError:  # the server went away while we were talking to it: nothing is left to do
        pass
    return 0


def preload() -> None:
    for name in PRELOAD:
        # An optional package that is absent or broken: the job imports it again and reports that its
        # own way, as the CLI always has.
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):
        importlib.import_module("quantcore.cli").build_parser()  # every command's module, entry points too
    gc.collect()
    gc.freeze()  # a job's collections then never touch (and copy) the pages of what was imported here


class Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.jobs: dict[int, int] = {}
        """pid -> job number, for the jobs not yet reaped."""
        self.fds: deque[int] = deque()
        """Descriptors received and not yet given to a job, in the order they came."""
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        # SIGCHLD (a job ended) and SIGTERM (stop) wake the select below through the wakeup fd.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.set_wakeup_fd(self.wake_w)

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def serve(self) -> None:
        frames = Frames()
        try:
            while not self.stopping:
                ready, _, _ = select.select([self.sock.fileno(), self.wake_r], [], [])
                if self.wake_r in ready:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 512)
                    self.reap()
                if self.sock.fileno() in ready:
                    data, fds, _, _ = socket.recv_fds(self.sock, 65536, 16)
                    self.fds.extend(fds)
                    if not data:
                        return  # the server's end closed: it exited, or was killed
                    for message in frames.feed(data):
                        self.start(message)
        finally:
            self.stop_jobs()

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(frame(message))

    def start(self, message: dict[str, Any]) -> None:
        job = message.get("job")
        out, err = self.fds.popleft(), self.fds.popleft()
        ready_r, ready_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (out, err, ready_r, ready_w):
                os.close(fd)
            self.send({"job": job, "error": f"could not fork: {exc.strerror or exc}"})
            return
        if pid == 0:
            os.close(ready_r)
            inherited = [self.sock.fileno(), self.wake_r, self.wake_w, *self.fds]
            run_job(message, out, err, ready_w, inherited)
        for fd in (out, err, ready_w):
            os.close(fd)  # the job holds the pipes now: the server sees their end when the job's ends
        os.read(ready_r, 1)  # the child has its own session: a killpg from now on reaches the whole job
        os.close(ready_r)
        self.jobs[pid] = job if isinstance(job, int) else -1
        self.send({"job": job, "pid": pid})

    def reap(self) -> None:
        while self.jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = self.jobs.pop(pid, None)
            if job is not None:
                self.send({"job": job, "exit": os.waitstatus_to_exitcode(status)})

    def stop_jobs(self) -> None:
        """The server is gone: nobody will read the jobs' results. SIGTERM their sessions (QEMU exits
        cleanly on it), SIGKILL what is left after GRACE_S."""
        groups = list(self.jobs)
        for pid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while self.jobs and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # the server cannot hear the exits any more
                self.reap()
            time.sleep(0.02)
        for pid in groups:  # also what a job started and left behind in its session
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


# -- a job (in the forked child) --------------------------------------------------------------------------


def run_job(message: dict[str, Any], out: int, err: int, ready: int, inherited: list[int]) -> NoReturn:
    """Become `python -m quantcore.cli ARGV` run in `cwd` with `env`; never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        _own_output(out, err)
        os.close(ready)  # the worker's read returns: the session exists
        code = _run_cli(message)
    finally:
        os._exit(code)


def _own_output(out: int, err: int) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    for fd in (null, out, err):
        os.close(fd)


def _run_cli(message: dict[str, Any]) -> int:
    try:
        os.chdir(message["cwd"])
        os.environ.clear()
        os.environ.update(message["env"])
        argv = [str(a) for a in message["argv"]]
        cli = importlib.import_module("quantcore.cli")
        sys.argv = [str(cli.__file__), *argv]
        if "numpy.random" in sys.modules:  # a fresh process would not share the worker's global seed
            sys.modules["numpy.random"].seed()
        code = _status(cli.main(argv))
    except SystemExit as exit_:
        code = _status(exit_.code)
    except BaseException:  # what the interpreter would do with an uncaught exception
        traceback.print_exc()
        code = 1
    # The interpreter's exit, which os._exit skips (quantcore.cli's, imported at the worker's start).
    importlib.import_module("quantcore.cli").close_process()
    return code


def _status(code: object) -> int:
    """sys.exit's rules: None is 0, an int is itself, anything else is printed and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
