"""The server's side of the command worker (fixpoint_server.zygote): jobs that pay no start-up.

A command runs `fixpoint ARGV` (`python -m quantcore.cli ARGV`) as a Job. `start_job` forks it from
the warm worker where the platform can (Linux, macOS): the worker has imported the engine once, so a job
starts in milliseconds instead of the 1-2 s of a new interpreter importing numpy, onnx and onnxruntime.
The worker starts with the first command, is reused by the next ones and started again when it died.
Where fork is missing (Windows), with FIXPOINT_WARM_COMMANDS=0, or when the worker cannot start, the job
is a process of its own, as before.

Either way the job runs in the project root with the server's environment, its stdin is /dev/null
(never the server's LSP stream), and it is a session of its own: `Job.stop` signals the whole session,
so a cancel also stops the QEMU, gdb or compiler the command started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from fixpoint_server.zygote import Frames, frame

Log = Callable[[str], None]
GRACE_S = 2.0
"""A cancelled job gets SIGTERM (QEMU exits cleanly on it), then SIGKILL after this long."""
READY_TIMEOUT_S = 120.0
"""The worker's imports take 1-3 s; past this (a machine swapping) the commands start their own process."""
WARM_SETTING = "FIXPOINT_WARM_COMMANDS"
"""0: every command starts a process of its own (the worker is never started)."""


class JobLost(Exception):
    """The worker ended while a job was starting or running; the message says how."""


class _NotSent(Exception):
    """The worker died before it could receive the job: nothing ran, a new worker may run it."""


class Job(Protocol):
    pid: int
    how: str
    """How it was started, for the log."""

    def stop(self) -> None: ...

    async def finish(self) -> tuple[int, bytes, bytes]:
        """Its exit status (negative: the signal that killed it), stdout and stderr."""
        ...


def cli_command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "quantcore.cli", *argv]


async def start_job(argv: list[str], cwd: Path, log: Log) -> Job:
    """`fixpoint ARGV` started in `cwd`: forked by the warm worker, else a process of its own."""
    job = await _WARM.job(argv, cwd, log)
    return job if job is not None else await SpawnedJob.start(argv, cwd)


def prestart(cwd: Path, log: Log) -> None:
    """Start the worker now (its imports take 1.5-2 s), so the first command does not wait for them."""
    _WARM.starting = asyncio.ensure_future(_WARM._worker(cwd, log))


def stop_group(pid: int) -> None:
    """SIGTERM the session `pid` leads now, SIGKILL what is left of it after GRACE_S."""

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)

    signal_group(signal.SIGTERM)
    asyncio.get_running_loop().call_later(GRACE_S, signal_group, signal.SIGKILL)


# -- a process of its own (the old way, and the fallback) ---------------------------------------------------


class SpawnedJob:
    how = "started as a process of its own"

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process, self.pid = process, process.pid

    @classmethod
    async def start(cls, argv: list[str], cwd: Path) -> SpawnedJob:
        process = await asyncio.create_subprocess_exec(
            *cli_command(argv), cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        return cls(process)

    def stop(self) -> None:
        stop_group(self.pid)

    async def finish(self) -> tuple[int, bytes, bytes]:
        out, err = await self.process.communicate()
        return self.process.returncode or 0, out, err


# -- forked by the worker -----------------------------------------------------------------------------------


class ForkedJob:
    def __init__(self, pid: int, worker: int, ended: asyncio.Future[int], out: int, err: int) -> None:
        self.pid, self.ended, self.out, self.err = pid, ended, out, err
        self.how = f"forked by the command worker {worker}"

    def stop(self) -> None:
        stop_group(self.pid)

    async def finish(self) -> tuple[int, bytes, bytes]:
        readers = [asyncio.ensure_future(_read_all(fd)) for fd in (self.out, self.err)]
        try:
            code = await self.ended
        except JobLost:  # orphaned: stop it, or the pipes would stay open as long as it runs
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            await asyncio.gather(*readers, return_exceptions=True)
            raise
        out, err = await asyncio.gather(*readers)
        return code, out, err


async def _read_all(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        return await reader.read()
    finally:
        transport.close()


class Worker:
    """One running fixpoint_server.zygote process and the jobs it was given."""

    def __init__(self, process: asyncio.subprocess.Process, sock: socket.socket, log: Log) -> None:
        self.process, self.sock, self.log, self.pid = process, sock, log, process.pid
        self.alive = True
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.jobs: dict[int, tuple[asyncio.Future[int], asyncio.Future[int]]] = {}
        """job number -> (its pid once started, its exit status once ended)."""
        self.count = 0
        self.sending = asyncio.Lock()
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._log_stderr())]

    @classmethod
    async def start(cls, cwd: Path, log: Log) -> Worker:
        ours, theirs = socket.socketpair()
        try:
            process = await asyncio.create_subprocess_exec(
                # -P: the job's imports never come from the workspace (a `numpy.py` in it, say).
                sys.executable, "-P", "-m", "fixpoint_server.zygote", str(theirs.fileno()), cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a Ctrl-C meant for a server run in a terminal is not for it
            )  # fmt: skip
        finally:
            theirs.close()
        ours.setblocking(False)
        worker = cls(process, ours, log)
        try:
            ready = await asyncio.wait_for(asyncio.shield(worker.ready), READY_TIMEOUT_S)
        except (JobLost, TimeoutError) as exc:
            worker.kill()
            why = str(exc) or f"the command worker was not ready in {READY_TIMEOUT_S:.0f} s"
            raise JobLost(why) from None
        log(f"command worker {worker.pid} ready: imports took {ready.get('seconds')} s")
        return worker

    def kill(self) -> None:
        self.alive = False
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def submit(self, argv: list[str], cwd: Path) -> ForkedJob:
        """Hand the job to the worker; it runs once this returns."""
        loop = asyncio.get_running_loop()
        self.count += 1
        number = self.count
        started, ended = loop.create_future(), loop.create_future()
        self.jobs[number] = (started, ended)
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        message = {"job": number, "argv": argv, "cwd": str(cwd), "env": dict(os.environ)}
        try:
            async with self.sending:
                await self._send(frame(message), [out_w, err_w])
        except OSError:
            self.kill()  # its socket is broken: the next job goes to a new worker
            self.jobs.pop(number, None)
            os.close(out_r)
            os.close(err_r)
            raise _NotSent from None
        finally:
            os.close(out_w)  # the worker has its copies (in flight, or received)
            os.close(err_w)
        try:
            pid = await started
        except JobLost:
            os.close(out_r)
            os.close(err_r)
            raise
        return ForkedJob(pid, self.pid, ended, out_r, err_r)

    async def _send(self, data: bytes, fds: list[int]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sent = socket.send_fds(self.sock, [data], fds)  # the descriptors travel with the first byte
                break
            except BlockingIOError:  # its buffer is full (it is still importing): wait until it reads
                await _writable(self.sock)
        if sent < len(data):
            await loop.sock_sendall(self.sock, data[sent:])

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        frames = Frames()
        try:
            while data := await loop.sock_recv(self.sock, 65536):
                for message in frames.feed(data):
                    self._dispatch(message)
        except (OSError, ValueError) as exc:
            self.log(f"command worker {self.pid}: {exc}")
        finally:  # cancelled too (the server exits): the worker sees its socket close, and exits
            self.alive = False
            self.sock.close()
        await self._ended()

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "ready" in message:
            if not self.ready.done():
                self.ready.set_result(message)
            return
        started, ended = self.jobs.get(message.get("job", -1), (None, None))
        if started is None or ended is None:
            return
        if "pid" in message:
            started.set_result(int(message["pid"]))
        elif "error" in message:
            started.set_exception(JobLost(str(message["error"])))
            self.jobs.pop(message["job"], None)
        elif "exit" in message:
            ended.set_result(int(message["exit"]))
            self.jobs.pop(message["job"], None)

    async def _ended(self) -> None:
        """The worker closed its end: tell every waiting job how it ended."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), GRACE_S)
        if self.process.returncode is None:
            self.kill()
            await self.process.wait()
        lost = JobLost(f"the command worker {self.pid} {ended(self.process.returncode or 0)}")
        self.log(str(lost))
        futures: list[asyncio.Future[Any]] = [self.ready]
        for pair in self.jobs.values():
            futures += pair
        for future in futures:
            if not future.done():
                future.set_exception(lost)
                future.add_done_callback(lambda f: f.exception())  # read here, if no one waits for it
        self.jobs.clear()

    async def _log_stderr(self) -> None:
        """What the worker itself writes (a failed import, a crash) goes to the log."""
        stream = self.process.stderr
        while stream is not None and (chunk := await stream.read(65536)):
            self.log(f"command worker {self.pid}: {chunk.decode(errors='replace').rstrip()}")


async def _writable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    writable: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not writable.done():
            writable.set_result(None)

    loop.add_writer(sock.fileno(), wake)
    try:
        await writable
    finally:
        loop.remove_writer(sock.fileno())


def ended(code: int) -> str:
    """How a process with exit status `code` (asyncio's: negative for a signal) ended, in words."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


class _Warm:
    """The one worker of this server: started when first needed, started again when it died."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.lock = asyncio.Lock()
        self.off: str | None = None
        """Why jobs are not forked (None: they are)."""
        self.starting: asyncio.Future[Worker | None] | None = None
        """A start asked for ahead of the first command (kept: the event loop holds tasks weakly)."""

    async def job(self, argv: list[str], cwd: Path, log: Log) -> ForkedJob | None:
        for _ in range(2):  # a worker that died before it received the job: a new one runs it
            worker = await self._worker(cwd, log)
            if worker is None:
                return None
            with contextlib.suppress(_NotSent):
                return await worker.submit(argv, cwd)
        return None

    async def _worker(self, cwd: Path, log: Log) -> Worker | None:
        self.off = self.off or _unavailable()
        if self.off is not None:
            return None
        async with self.lock:
            if self.worker is None or not self.worker.alive:
                try:
                    self.worker = await Worker.start(cwd, log)
                except (JobLost, OSError) as exc:
                    self.off = str(exc)
                    log(f"{exc}: each command starts a process of its own from now on")
                    return None
            return self.worker


def _unavailable() -> str | None:
    if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return "this platform cannot fork"
    if os.environ.get(WARM_SETTING) == "0":
        return f"{WARM_SETTING}=0"
    return None


_WARM = _Warm()
