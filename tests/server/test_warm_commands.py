"""The language server's commands run warm (issue 19): one worker process imports the engine once and
forks each `fixpoint` job (fixpoint_server.worker, fixpoint_server.zygote).

Real server processes, the real CLI, real QEMU for the cancel: two commands share one worker and are two
processes; a killed worker is started again by the next command; a cancelled flash-and-verify leaves
no process of its session (QEMU included) and the worker keeps serving; the worker and its jobs never
outlive the server, killed or shut down; an untrusted workspace starts no worker; FIXPOINT_WARM_COMMANDS=0
runs each command as a process of its own with the same result. Processes are observed in /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests import needs
from tests.server.firmware_tree import make_tree
from tests.server.test_hostile_lsp import Wire, assert_clean_exit
from tests.server.test_lsp import TIMEOUT, _board_tools_missing, _qemu_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
JOB = re.compile(r"^job (\d+) forked by the command worker (\d+)$")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "fw").resolve()


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) of a process; None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[3])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"  # a zombie has exited; only its parent has not looked yet


def _session(sid: int) -> list[int]:
    """The live processes of session `sid`."""
    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return [pid for pid in pids if (s := _stat(pid)) is not None and s[2] == sid and s[0] != "Z"]


def _workers_of(server: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (stat := _stat(int(proc.name))) is not None and stat[1] == server:
            with contextlib.suppress(OSError):
                if b"fixpoint_server.zygote" in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
    return found


async def _gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    """Wait up to `seconds` for every process of `pids` to exit; the ones still running."""
    for _ in range(int(seconds / 0.05)):
        if not any(_alive(pid) for pid in pids):
            break
        await asyncio.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _jobs(logs: list[str]) -> list[tuple[int, int]]:
    """(job pid, worker pid) of every job the server's log says it forked."""
    return [(int(m[1]), int(m[2])) for m in map(JOB.match, logs) if m]


def _wire_logs(wire: Wire) -> list[str]:
    return [str(p["message"]) for p in wire.notifications("window/logMessage")]


async def _regenerate(wire: Wire) -> dict[str, Any]:
    answer = await wire.request(
        "workspace/executeCommand", {"command": "fixpoint.regenerateModel", "arguments": [{"force": True}]}
    )
    result: dict[str, Any] = answer["result"]
    assert result["ok"] is True, result
    assert sorted(Path(f["path"]).name for f in result["files"]) == ["model.c", "model.h", "model_data.c"]
    return result


async def test_two_commands_share_one_worker_and_each_job_is_a_process_of_its_own(tree: Path) -> None:
    wire = await Wire.start(tree)
    await _regenerate(wire)
    await _regenerate(wire)
    (first, worker), (second, worker_again) = _jobs(_wire_logs(wire))
    assert worker == worker_again and first != second
    assert _workers_of(wire.process.pid) == [worker]  # the server's child, alive between commands
    assert any(line.startswith(f"command worker {worker} ready: imports took ") for line in _wire_logs(wire))
    assert await _gone([first, second]) == []  # each job ended with its command
    assert_clean_exit(*await wire.stop())
    assert await _gone([worker]) == []  # the server exited: so did its worker


async def test_a_killed_worker_is_started_again_by_the_next_command(tree: Path) -> None:
    wire = await Wire.start(tree)
    await _regenerate(wire)
    [(_, worker)] = _jobs(_wire_logs(wire))
    os.kill(worker, signal.SIGKILL)
    for _ in range(200):  # until the server has seen it end
        if f"the command worker {worker} was killed by SIGKILL" in _wire_logs(wire):
            break
        await asyncio.sleep(0.05)
    await _regenerate(wire)
    [_, (_, new_worker)] = _jobs(_wire_logs(wire))
    assert new_worker != worker and _workers_of(wire.process.pid) == [new_worker]
    assert f"the command worker {worker} was killed by SIGKILL" in _wire_logs(wire)
    assert_clean_exit(*await wire.stop())


async def test_a_killed_server_takes_its_worker_and_running_job_with_it(tree: Path) -> None:
    import numpy as np

    data = tree / "model" / "calib.npz"
    np.savez(data, x=np.random.default_rng(0).normal(size=(20000, 1, 12, 12)).astype(np.float32))
    output = tree / "model" / "new.params.json"
    wire = await Wire.start(tree)
    options = {"model": "model/residual.onnx", "data": str(data), "output": str(output), "method": "mse"}
    wire.send({"jsonrpc": "2.0", "id": 99, "method": "workspace/executeCommand",
               "params": {"command": "fixpoint.quantize", "arguments": [options]}})  # fmt: skip
    for _ in range(int(TIMEOUT / 0.05)):
        if _jobs(_wire_logs(wire)):
            break
        await asyncio.sleep(0.05)
    [(job, worker)] = _jobs(_wire_logs(wire))
    stat = _stat(job)
    assert stat is not None and stat[1:] == (worker, job)  # the worker's child, leading a session of its own
    wire.process.kill()  # no shutdown, no exit: the worker learns it from its socket's end
    await wire.process.wait()
    assert await _gone([worker, job]) == [] and _session(job) == []
    assert not output.exists()  # quantize writes its JSON at the end: it never got there


async def test_an_untrusted_workspace_starts_no_worker(tree: Path) -> None:
    wire = await Wire.start(tree, {"trusted": False})
    answer = await wire.request(
        "workspace/executeCommand", {"command": "fixpoint.regenerateModel", "arguments": [{"force": True}]}
    )
    assert answer["result"] == {
        "ok": False,
        "error": "the workspace is not trusted: builds, flashing and generation are off in it",
    }
    assert _workers_of(wire.process.pid) == [] and _jobs(_wire_logs(wire)) == []
    assert_clean_exit(*await wire.stop())


async def test_with_warm_commands_off_each_command_is_a_process_of_its_own(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIXPOINT_WARM_COMMANDS", "0")
    wire = await Wire.start(tree)
    cold = await _regenerate(wire)
    started = [line for line in _wire_logs(wire) if line.startswith("job ")]
    assert len(started) == 1 and started[0].endswith(" started as a process of its own")
    assert _workers_of(wire.process.pid) == []
    assert_clean_exit(*await wire.stop())
    monkeypatch.delenv("FIXPOINT_WARM_COMMANDS")
    wire = await Wire.start(tree)
    warm = await _regenerate(wire)
    assert warm == cold and len(_jobs(_wire_logs(wire))) == 1  # the same answer, forked this time
    assert_clean_exit(*await wire.stop())


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "fixpoint_server", "--stdio"])
)
async def client(lsp_client: LanguageClient, tree: Path) -> AsyncIterator[LanguageClient]:
    capabilities = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True))
    params = lsp.InitializeParams(capabilities=capabilities, root_uri=tree.as_uri())
    await lsp_client.initialize_session(params)
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_cancelling_a_forked_flash_and_verify_ends_its_whole_session_not_the_worker(
    client: LanguageClient, tree: Path
) -> None:
    """The editor's cancel of a running Flash and Verify on QEMU: the command answers "cancelled", no
    process of the job's session survives (QEMU included), and the worker runs the next command."""
    missing = _board_tools_missing()
    if missing:
        needs.absent(missing)
    job = asyncio.ensure_future(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.flashVerify", arguments=[{"target": "qemu-m4"}])
    ))  # fmt: skip
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while not _qemu_for(tree):  # built, and QEMU started: cancel now
        assert asyncio.get_running_loop().time() < deadline and not job.done(), "QEMU never started"
        await asyncio.sleep(0.02)
    [(flash, worker)] = _jobs([m.message for m in client.log_messages])
    [qemu] = _qemu_for(tree)
    stat = _stat(qemu)
    assert stat is not None and stat[2] == flash  # QEMU runs in the job's session
    client.window_work_done_progress_cancel(
        lsp.WorkDoneProgressCancelParams(token=next(iter(client.progress_reports)))
    )
    assert await asyncio.wait_for(job, TIMEOUT) == {
        "ok": False,
        "error": "Flash and verify (qemu-m4): cancelled",
    }
    assert await _gone([flash, qemu]) == [] and _session(flash) == []
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.regenerateModel", arguments=[{"force": True}])
    )
    assert result["ok"] is True
    [_, (regenerate, same_worker)] = _jobs([m.message for m in client.log_messages])
    assert same_worker == worker and regenerate != flash


async def test_regenerate_on_the_shipped_example_opened_as_its_own_workspace(tmp_path: Path) -> None:
    """examples/broken's fixpoint.toml reads `../fashion/model.onnx`, inside the repository holding it
    but outside the folder the editor opens: the command reads it there, as `fixpoint generate` does."""
    import shutil

    examples = tmp_path / "examples"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples", examples)
    (examples / ".git").mkdir()  # a checkout, as the user has it (read_roots looks for .git)
    root = (examples / "broken").resolve()
    wire = await Wire.start(root)
    answer = await wire.request(
        "workspace/executeCommand", {"command": "fixpoint.regenerateModel", "arguments": [str(root), False]}
    )
    result = answer["result"]
    assert result["ok"] is True, result
    written = [(Path(f["path"]).relative_to(root).as_posix(), f["outcome"]) for f in result["files"]]
    assert written == [(f"src/model/{name}", "updated") for name in ("model.h", "model.c", "model_data.c")]
    (examples / ".git").rmdir()  # no repository: the model is outside the project, and refused
    await wire.request("workspace/executeCommand", {"command": "fixpoint.checkWorkspace"})  # reads it again
    answer = await wire.request(
        "workspace/executeCommand", {"command": "fixpoint.regenerateModel", "arguments": [str(root), True]}
    )
    assert answer["result"]["ok"] is False and "../fashion/model.onnx" in answer["result"]["error"]
    assert_clean_exit(*await wire.stop())
