"""The import's child process (quantcore/importers/_isolated.py): crashes become messages, results and
errors cross back intact, the child's output never reaches the parent's stdout, and it dies with an
interrupted parent."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers._isolated import isolated, start

from .test_hostile_models import Hang, deadline


def test_a_child_killed_by_a_signal_is_a_model_error() -> None:
    def crash() -> None:
        os.kill(os.getpid(), signal.SIGSEGV)

    with pytest.raises(ModelError) as info:
        isolated("m.onnx", crash)
    assert str(info.value) == (
        "m.onnx: reading this model was killed by SIGSEGV (onnx's C++ code aborts on some malformed models,"
        " e.g. a negative dimension); check the model's shapes, or re-export it"
    )


def test_errors_keep_their_class_and_attributes_and_bugs_their_traceback() -> None:
    def unsupported() -> None:
        raise UnsupportedError("m.onnx", "n", "Foo", "no kernel")

    with pytest.raises(UnsupportedError) as info:
        isolated("m.onnx", unsupported)
    assert (str(info.value), info.value.op_type, info.value.reason) == (
        "m.onnx: node 'n': Foo is not supported: no kernel",
        "Foo",
        "no kernel",
    )
    assert not getattr(info.value, "__notes__", [])

    def bug() -> None:
        raise KeyError("w")

    with pytest.raises(KeyError) as bug_info:
        isolated("m.onnx", bug)
    (note,) = bug_info.value.__notes__
    assert note.startswith("raised in the import's child process:\nTraceback") and "in bug" in note


def test_the_childs_output_goes_to_stderr_never_to_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    def chatty() -> int:
        print("to stdout")
        print("to stderr", file=sys.stderr)
        os.write(1, b"fd 1\n")
        return 7

    assert isolated("m.onnx", chatty) == 7
    out, err = capfd.readouterr()
    assert out == "" and "to stdout" in err and "to stderr" in err and "fd 1" in err


def _children() -> set[int]:
    """This process's children, zombies included (from /proc: other tests may have children of their own)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to list child processes")
def test_an_interrupted_parent_kills_its_child() -> None:
    before = _children()
    start = time.monotonic()
    with pytest.raises(Hang), deadline(1):
        isolated("m.onnx", lambda: time.sleep(60))
    assert time.monotonic() - start < 10
    assert _children() <= before  # no child left behind, not even a zombie


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to list child processes")
def test_a_cancelled_child_is_stopped_and_reaped() -> None:
    before = _children()
    pending = start("m.onnx", lambda: time.sleep(60))
    assert len(_children() - before) == 1  # it runs while this process goes on
    pending.cancel()
    assert _children() <= before
    pending.cancel()  # a second cancel (or one after the answer was taken) does nothing


def test_the_parent_goes_on_while_the_child_works(tmp_path: Path) -> None:
    """start returns at once; the answer is the work's, taken when asked for (here after this process
    wrote the file the child waits for: both ran at the same time)."""
    flag = tmp_path / "parent-went-on"

    def work() -> str:
        while not flag.exists():
            time.sleep(0.01)
        return "answered"

    with deadline(30):
        pending = start("m.onnx", work)
        flag.write_text("")
        assert pending.result() == "answered"
