"""The import runs in a child process, so that a crash of onnx's C++ code is a message, not the end.

onnx's checker and shape inference (and onnxruntime, which embeds them) are C++ built with libstdc++'s
assertions: on some malformed models they abort the process - SIGABRT, which no `except` catches (onnx
issue 8481: Slice over a tensor whose dimension is negative). The language server would die with the
workspace that holds such a model, `fixpoint check` with a traceback-less core dump. So the import runs
in a forked child (a few milliseconds: the memory is shared copy-on-write) that sends back its result,
or the exception it raised; a child that dies is a ModelError naming the signal. Where fork does not
exist (Windows) the import runs in the process itself.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import pickle
import signal
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, NoReturn, TypeVar

from quantcore.errors import ModelError, QuantcoreError

T = TypeVar("T")


def isolated(source: str, work: Callable[[], T]) -> T:
    """`work()` run in a forked child: its result, or its exception raised here; ModelError naming
    `source` when the child dies (a signal) instead of answering."""
    return start(source, work).result()


def start(source: str, work: Callable[[], T]) -> Pending[T]:
    """`work()` started in a forked child; this process goes on until it asks for the answer
    (Pending.result). Where fork does not exist (Windows) the work is done here, now."""
    if not hasattr(os, "fork"):
        return Pending(source, None, (work(),))
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the Pending
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(work, write_end, errors.fileno())
    os.close(write_end)
    return Pending(source, _Child(pid, read_end, errors))


class _Child(NamedTuple):
    pid: int
    answer: int
    """The read end of the pipe the child sends its pickled answer on."""
    errors: Any
    """The file the child's stdout and stderr go to."""


class Pending(Generic[T]):
    """The isolated work of `start`, under way in a child process (or done, where fork does not exist).
    Ask for its answer once (`result`), or `cancel` it: a child is never left behind unwaited."""

    def __init__(self, source: str, child: _Child | None, done: tuple[T] | None = None) -> None:
        self.source, self._child, self._done = source, child, done

    def result(self) -> T:
        """What work() returned, or its exception raised here; ModelError when the child died instead."""
        child, self._child = self._child, None
        if child is None:
            if self._done is None:
                raise RuntimeError(f"{self.source}: the isolated work's answer was asked for twice")
            return self._done[0]  # done here (no fork)
        with child.errors:
            try:
                data = _read_all(child.answer)
            except BaseException:  # interrupted (Ctrl-C, a test's deadline): the child must not outlive us
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
                raise
            finally:
                os.close(child.answer)
            _, status = os.waitpid(child.pid, 0)
            written = _tail(child.errors)
        if not data:
            death = ModelError(self.source, _death(status))
            if written:
                death.add_note(f"the child process wrote:\n{written}")
            raise death
        if written:
            sys.stderr.write(written)  # its warnings, as if it had run here
        result: T = _answer(pickle.loads(data))  # what work() returned, pickled by the child
        return result

    def cancel(self) -> None:
        """Stop the child if it still runs (its answer is not wanted: the command failed before)."""
        child, self._child = self._child, None
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            os.waitpid(child.pid, 0)
            os.close(child.answer)
            child.errors.close()


def _child(work: Callable[[], Any], write_end: int, errors: int) -> NoReturn:
    code = 0
    gc.disable()  # short-lived: a collection would touch (and copy) every page it shares with the parent
    faulthandler.disable()  # an abort is reported by the parent, not as a dump of this process's stack
    _own_output(errors)
    try:
        try:
            payload: tuple[Any, ...] = ("result", work())
        except BaseException as e:
            payload = ("error", *_describe(e))
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
    except BaseException:
        code = 1  # even the answer could not be sent: the parent reports the child's death
    finally:
        sys.stderr.flush()
        os._exit(code)  # no atexit handlers, no flushing of the parent's buffers a second time


def _own_output(errors: int) -> None:
    """Send everything the child prints (Python or C++, stdout or stderr) to the `errors` file, through
    new stream objects: the parent's may be locked by another of its threads at the fork (a language
    server logging), and its stdout may be the language server's protocol channel."""
    os.dup2(errors, 1)
    os.dup2(errors, 2)
    sys.stdout = sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def _describe(error: BaseException) -> tuple[type[BaseException], tuple[Any, ...], dict[str, Any], str]:
    """What rebuilds `error` in the parent: its class, args and attributes (QuantcoreError subclasses
    take other arguments than their message, so they are not pickled as themselves), and the traceback
    for --debug."""
    trace = "" if isinstance(error, QuantcoreError) else "".join(traceback.format_exception(error))
    state = dict(vars(error))
    try:
        pickle.dumps((type(error), error.args, state))
    except Exception:
        return RuntimeError, (f"{type(error).__name__}: {error}",), {}, trace
    return type(error), error.args, state, trace


def _answer(payload: tuple[Any, ...]) -> Any:
    if payload[0] == "result":
        return payload[1]
    _, cls, args, state, trace = payload
    error = cls.__new__(cls)
    error.args = args
    vars(error).update(state)
    if trace:
        error.add_note(f"raised in the import's child process:\n{trace}")
    raise error


def _tail(errors: Any, limit: int = 64 * 1024) -> str:
    """The last `limit` bytes the child wrote to its stderr."""
    size = errors.seek(0, os.SEEK_END)
    errors.seek(max(size - limit, 0))
    return str(errors.read().decode("utf-8", "replace"))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            how = f"was killed by {signal.Signals(number).name}"
        except ValueError:
            how = f"was killed by signal {number}"
    else:
        how = f"ended with status {os.waitstatus_to_exitcode(status)} without an answer"
    return (
        f"reading this model {how} (onnx's C++ code aborts on some malformed models, e.g. a negative"
        " dimension); check the model's shapes, or re-export it"
    )
