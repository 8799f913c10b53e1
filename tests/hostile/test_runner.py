"""The corpus's own instruments: the process guard, the outcome classification and the C scan.

The corpus is only as good as these: a guard that does not kill, or a classification that calls a
traceback a pass, would make every case pass.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.hostile import cscan, process
from tests.hostile.runner import Step, classify_step, refuse, usage

PY = sys.executable


def finished(returncode: int, stderr: str = "", killed: str | None = None) -> process.Finished:
    return process.Finished(returncode, "", stderr, 0.1, killed, 0)


def test_the_guard_kills_a_process_past_the_memory_limit(tmp_path: Path) -> None:
    grow = (
        "import time\nblocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n    time.sleep(0.01)"
    )
    done = process.run([PY, "-c", grow], tmp_path, {}, 60, tmp_path / "logs", memory_limit=256 << 20)
    assert done.killed == "memory"
    assert done.returncode < 0
    assert done.seconds < 30


def test_the_guard_kills_the_whole_tree_at_the_deadline(tmp_path: Path) -> None:
    """A child in a session of its own (as the server starts the CLI) is killed with its parent."""
    pid_file = tmp_path / "child.pid"
    parent = (
        "import subprocess, sys, time\n"
        "sleeper = [sys.executable, '-c', 'import time; time.sleep(600)']\n"
        "child = subprocess.Popen(sleeper, start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)"
    )
    done = process.run([PY, "-c", parent], tmp_path, {}, 3, tmp_path / "logs")
    assert done.killed == "timeout"
    child = int(pid_file.read_text())
    time.sleep(0.3)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_the_file_size_limit_makes_a_large_write_fail(tmp_path: Path) -> None:
    write = "open('big', 'wb').write(bytes(1 << 20))"
    done = process.run([PY, "-c", write], tmp_path, {}, 30, tmp_path / "logs", fsize=4096)
    assert done.returncode == 1
    assert "File too large" in done.stderr


def test_classification_of_refusals() -> None:
    step = refuse("generate", names=["fixpoint.toml", ("generated", "params")])
    assert classify_step(
        step, finished(2, "fixpoint generate: fixpoint.toml:3: generated: leaves the workspace\n")
    ) == (
        "pass",
        "",
    )
    assert classify_step(step, finished(0))[0] == "accepted"
    assert classify_step(step, finished(1, "fixpoint generate: something failed\n"))[0] == "unclear"
    assert classify_step(step, finished(1, "fixpoint.toml: params\nsecond line\n"))[0] == "unclear"
    assert classify_step(step, finished(1, ""))[0] == "unclear"
    forged = "fixpoint generate: fixpoint.toml: params 'a\rfixpoint generate: ok \x1b[32m'\n"
    assert classify_step(step, finished(1, forged))[0] == "unclear"
    warned = "fixpoint: warning: old CMSIS-NN\nfixpoint generate: fixpoint.toml: params: missing\n"
    assert classify_step(step, finished(1, warned)) == ("pass", "")


def test_classification_of_crashes_hangs_and_status() -> None:
    traceback = 'Traceback (most recent call last):\n  File "x", line 1\nValueError: bad\n'
    assert classify_step(refuse("quantize"), finished(1, traceback))[0] == "crash"
    assert classify_step(refuse("quantize"), finished(1, "fixpoint: MemoryError"))[0] == "crash"
    assert classify_step(refuse("quantize"), finished(-9))[0] == "crash"
    assert classify_step(refuse("quantize"), finished(-9, killed="memory"))[0] == "crash"
    assert classify_step(refuse("quantize"), finished(-9, killed="timeout"))[0] == "hang"
    assert (
        classify_step(usage("generate", names=["--alignment"]), finished(1, "--alignment 0\n"))[0]
        == "unclear"
    )
    assert classify_step(Step(("quantize",)), finished(2, "fixpoint quantize: no\n"))[0] == "refused"
    assert classify_step(Step(("quantize",)), finished(0)) == ("pass", "")


def test_the_scan_finds_a_marker_only_where_it_is_code(tmp_path: Path) -> None:
    source = tmp_path / "model.c"
    source.write_text(
        "/* a*/ int FXPWN_1 = 1; /*b */\n"
        'const char *s = "FXPWN_2 */";\n'
        "/* FXPWN_3 in a comment */\n"
        "// a comment continued by a trigraph ??/\n"
        "int FXPWN_4;\n"
        'const char *t = "a" FXPWN_5 "b";\n'
        "int a;\r#define FXPWN_6 1\n"
    )
    found = {marker: cscan.leaks([source], marker) for marker in (f"FXPWN_{n}" for n in range(1, 7))}
    assert found == {
        "FXPWN_1": ["model.c:1"],
        "FXPWN_2": [],
        "FXPWN_3": [],
        "FXPWN_4": [],
        "FXPWN_5": ["model.c:5"],
        "FXPWN_6": ["model.c:7"],
    }
