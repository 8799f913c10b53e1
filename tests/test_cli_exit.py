"""The end of a `fixpoint` process (quantcore.cli.run): it skips the interpreter's teardown but nothing a
caller sees - the exit status, every line written to a pipe, the exit handlers (a leftover temporary
folder's finalizer, multiprocessing's) - and a thread still working is waited for."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TIMEOUT = 120


def _run(script: str) -> subprocess.CompletedProcess[str]:
    """`script` (which ends in quantcore.cli.run()) in a fresh interpreter, its output piped."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_status_output_and_exit_handlers_survive_the_quick_exit() -> None:
    done = _run(
        """
        import atexit, sys, tempfile
        from quantcore.cli import run
        atexit.register(lambda: print("exit handler ran", flush=False))
        left = tempfile.TemporaryDirectory()  # never cleaned up by the code: its finalizer does it at exit
        print(left.name, flush=False)
        sys.stdout.write("unflushed tail")
        sys.argv = ["fixpoint", "no-such-command"]
        run()
        """
    )
    assert done.returncode == 2, done.stderr  # the usage error's status
    lines = done.stdout.splitlines()
    assert lines[1:] == ["unflushed tailexit handler ran"]
    assert "no-such-command" in done.stderr

    assert not Path(lines[0]).exists()  # weakref.finalize's exit handler removed the folder


def test_a_working_thread_is_waited_for() -> None:
    done = _run(
        """
        import sys, threading, time
        from quantcore.cli import run
        def work():  # finishes only once the main thread has ended: the interpreter's exit must wait
            while threading.main_thread().is_alive():
                time.sleep(0.01)
            print("thread finished", flush=True)
        threading.Thread(target=work).start()
        sys.argv = ["fixpoint", "--help"]
        run()
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("thread finished")
    assert "usage: fixpoint" in done.stdout
