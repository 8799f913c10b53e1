"""The language server against what a broken or hostile client and tree send it (issue 17): every request
gets an answer (a result or a JSON-RPC error, never silence), nothing is logged as a traceback, and after
shutdown + exit the process exits 0 - also with a FIFO, a symlink to /dev/zero, 1,500 nested folders
or a model whose constant Loop would run 10^12 times in the tree, and with a request still pending.

The client here is a bare one (`Wire`): it speaks LSP over the server's stdio but, unlike lsprotocol's
typed client, can send what the protocol forbids (a hover at line -1, a request without params), and it
keeps the server's stderr and exit status for the assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.firmware_tree import make_tree

ROOT = Path(__file__).resolve().parents[2]
ANSWER_TIMEOUT_S = 30.0
"""Far above any answer on these trees (a check is under 2 s); past it the request went unanswered."""
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, METHOD_NOT_FOUND = -32700, -32600, -32602, -32601


class Wire:
    """A bare LSP client on a `python -m fixpoint_server` child process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []
        self.next_id = 0
        self._arrived = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self._stderr = asyncio.create_task(process.stderr.read())  # type: ignore[union-attr]

    @classmethod
    async def start(cls, root: Path, options: dict[str, Any] | None = None, **caps: Any) -> Wire:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "fixpoint_server", "--stdio", cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        wire = cls(process)
        init = {
            "processId": None,
            "rootUri": root.as_uri(),
            "capabilities": caps,
            "initializationOptions": options,
        }
        assert "result" in await wire.request("initialize", init)
        wire.notify("initialized", {})
        return wire

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps(message).encode())

    def send_body(self, body: bytes) -> None:
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))  # type: ignore[union-attr]

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any = None, *, omit_params: bool = False) -> dict[str, Any]:
        """The server's response message to one request (its "result" or "error")."""
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        if omit_params:
            del message["params"]
        self.send(message)
        return await self.response(self.next_id)

    async def response(self, msg_id: int) -> dict[str, Any]:
        async def arrived() -> dict[str, Any]:
            while True:
                for message in self.messages:
                    if message.get("id") == msg_id and "method" not in message:
                        return message
                self._arrived.clear()
                await self._arrived.wait()

        try:
            return await asyncio.wait_for(arrived(), ANSWER_TIMEOUT_S)
        except TimeoutError:
            raise AssertionError(f"request {msg_id} got no answer in {ANSWER_TIMEOUT_S} s") from None

    def notifications(self, method: str) -> list[Any]:
        return [m.get("params") for m in self.messages if m.get("method") == method and "id" not in m]

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while (line := await stdout.readline()).strip():
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not length:
                return  # the server closed its output
            self.messages.append(json.loads(await stdout.readexactly(length)))
            self._arrived.set()

    async def stop(self) -> tuple[int, str]:
        """shutdown, exit; the exit status and everything the server wrote to stderr."""
        assert (await self.request("shutdown"))["result"] is None
        self.notify("exit", None)
        status = await asyncio.wait_for(self.process.wait(), ANSWER_TIMEOUT_S)
        stderr = (await self._stderr).decode(errors="replace")
        self._reader.cancel()
        return status, stderr


@pytest.fixture
async def wire(small: Path) -> AsyncIterator[Wire]:
    client = await Wire.start(small)
    yield client
    if client.process.returncode is None:
        client.process.kill()
        await client.process.wait()


def hover(uri: str, line: int, character: int = 0) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


def code_action(uri: str, start: tuple[int, int], end: tuple[int, int]) -> dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "range": {
            "start": {"line": start[0], "character": start[1]},
            "end": {"line": end[0], "character": end[1]},
        },
        "context": {"diagnostics": []},
    }


def assert_clean_exit(status: int, stderr: str) -> None:
    assert status == 0, stderr
    assert "Traceback" not in stderr and "RuntimeError" not in stderr, stderr


async def test_a_hover_at_line_minus_one_is_answered_with_invalid_params(wire: Wire, small: Path) -> None:
    answer = await wire.request("textDocument/hover", hover((small / "src" / "main.c").as_uri(), -1))
    assert answer["error"] == {
        "code": INVALID_PARAMS,
        "message": "'textDocument/hover': Position.line should be in range [0:2147483647], but was -1."
        " @ $.params.position",
    }
    assert_clean_exit(*await wire.stop())


async def test_every_odd_request_gets_an_answer_and_the_log_has_no_traceback(wire: Wire, small: Path) -> None:
    main = (small / "src" / "main.c").as_uri()
    outside = small.parent / "secret.c"
    outside.write_text("int secret_layer;\n")
    big = 2**31 - 1
    results = {
        "huge line": await wire.request("textDocument/hover", hover(main, big, big)),
        "outside": await wire.request("textDocument/hover", hover(outside.as_uri(), 0, 4)),
        "untitled": await wire.request("textDocument/hover", hover("untitled:Untitled-1", 0)),
        "https": await wire.request("textDocument/hover", hover("https://example.com/a.c", 0)),
        "bad uri": await wire.request("textDocument/hover", hover("file://[::1/a.c", 0)),
        "reversed": await wire.request("textDocument/codeAction", code_action(main, (5, 9), (0, 0))),
        "out of range": await wire.request(
            "textDocument/codeAction", code_action(main, (big, 0), (big, big))
        ),
    }
    assert {what: answer.get("result", answer) for what, answer in results.items()} == {
        "huge line": None, "outside": None, "untitled": None, "https": None, "bad uri": None,
        "reversed": [], "out of range": [],
    }  # fmt: skip
    errors = {
        "no params": await wire.request("textDocument/hover", omit_params=True),
        "no range": await wire.request("textDocument/codeAction", {"textDocument": {"uri": main}}),
        "arguments not a list": await wire.request(
            "workspace/executeCommand", {"command": "fixpoint.lastReport", "arguments": 7}
        ),
        "unknown command": await wire.request(
            "workspace/executeCommand", {"command": "fixpoint.rm", "arguments": []}
        ),
        "unknown method": await wire.request("fixpoint/nothing", {}),
        "a notification with an id": await wire.request(
            "textDocument/didClose", {"textDocument": {"uri": main}}
        ),
    }
    assert {what: answer["error"]["code"] for what, answer in errors.items()} == {
        "no params": INVALID_PARAMS, "no range": INVALID_PARAMS, "arguments not a list": INVALID_PARAMS,
        "unknown command": INVALID_PARAMS, "unknown method": METHOD_NOT_FOUND,
        "a notification with an id": INVALID_REQUEST,
    }  # fmt: skip
    assert (
        errors["unknown command"]["error"]["message"]
        == "Invalid Params: Command name 'fixpoint.rm' is not defined"
    )
    assert_clean_exit(*await wire.stop())


async def test_a_body_that_is_not_json_is_answered_with_a_parse_error(wire: Wire) -> None:
    for body in (
        b'{"jsonrpc": "2.0", "id": 9, "method": "textDocument/hover", "params": {',
        b"\xff\xfe",
        b"[" * 100_000,
    ):
        wire.send_body(body)
    wire.send_body(b"[1, 2]")  # JSON, but no message: nothing to answer
    assert "result" in await wire.request("workspace/executeCommand", {"command": "fixpoint.lastReport"})
    answers = [m for m in wire.messages if "id" in m and m["id"] is None]
    assert [(a["error"]["code"], a["error"]["message"].split(":")[:2]) for a in answers] == [
        (PARSE_ERROR, ["not JSON", " JSONDecodeError"]),
        (PARSE_ERROR, ["not JSON", " JSONDecodeError"]),  # bytes that no JSON encoding decodes
        (PARSE_ERROR, ["not JSON", " RecursionError"]),
    ]
    assert_clean_exit(*await wire.stop())


async def test_commands_with_arguments_of_the_wrong_shape_say_so(wire: Wire) -> None:
    async def run(command: str, arguments: list[Any]) -> Any:
        answer = await wire.request("workspace/executeCommand", {"command": command, "arguments": arguments})
        return answer["result"]

    assert await run("fixpoint.regenerateModel", [5]) == {
        "ok": False, "error": "expects one object of options, got '5'"
    }  # fmt: skip
    assert await run("fixpoint.quantize", [{"model": ["a"], "data": "d.npz"}]) == {
        "ok": False, "error": "\"model\" must be a string, got '[\"a\"]'"
    }  # fmt: skip
    assert await run("fixpoint.flashVerify", [{"data": {"x": 1}}]) == {
        "ok": False, "error": "\"data\" must be a string, got '{\"x\": 1}'"
    }  # fmt: skip
    assert (await run("fixpoint.lastReport", [None, None])) == {
        "ok": False, "error": "expects one object of options, got 'null'"
    }  # fmt: skip
    assert (await run("fixpoint.lastReport", [])) == {"ok": False, "report": None}  # none yet
    assert_clean_exit(*await wire.stop())


async def test_a_fifo_a_dev_zero_link_and_deep_folders_are_findings_and_shutdown_is_clean(
    small: Path, deep: list[Path]
) -> None:
    os.mkfifo(small / "src" / "pipe.c")
    (small / "src" / "zero.c").symlink_to("/dev/zero")
    wire = await Wire.start(small)
    answer = await wire.request("workspace/executeCommand", {"command": "fixpoint.checkWorkspace"})
    assert answer["result"]["by_code"] == {"skipped-file": 3}
    published = {p["uri"]: p["diagnostics"] for p in wire.notifications("textDocument/publishDiagnostics")}
    for name, problem in (("pipe.c", "is a FIFO (named pipe)"), ("zero.c", "(a symlink to /dev/zero)")):
        [diagnostic] = published[(small / "src" / name).as_uri()]
        assert diagnostic["code"] == "skipped-file" and problem in diagnostic["message"]
    shown = [m["message"] for m in wire.notifications("window/showMessage")]
    assert any(m.startswith("1 folder(s) nested more than 64 levels below") for m in shown), shown
    assert_clean_exit(*await wire.stop())


async def test_shutdown_while_a_request_waits_answers_it_and_exits_cleanly(tmp_path: Path) -> None:
    """pygls' shutdown cancelled the pending requests while iterating over the dict their callbacks
    remove them from: RuntimeError, and the exit status was lost. A regeneration waiting for the client
    to create its progress bar (this client never answers) is such a pending request."""
    tree = make_tree(tmp_path / "fw")
    wire = await Wire.start(tree, window={"workDoneProgress": True})
    wire.next_id += 1
    pending = wire.next_id
    wire.send({"jsonrpc": "2.0", "id": pending, "method": "workspace/executeCommand",
               "params": {"command": "fixpoint.regenerateModel", "arguments": [{}]}})  # fmt: skip
    while not any(m.get("method") == "window/workDoneProgress/create" for m in wire.messages):
        await asyncio.sleep(0.05)
    status, stderr = await wire.stop()
    assert (await wire.response(pending))["error"]["code"] == -32800  # RequestCancelled
    assert_clean_exit(status, stderr)


async def test_regenerate_refuses_a_generated_folder_outside_the_workspace(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "fw")
    toml = tree / "fixpoint.toml"
    toml.write_text(toml.read_text().replace('generated = "src/model"', 'generated = "../escape"'))
    wire = await Wire.start(tree)
    answer = await wire.request(
        "workspace/executeCommand", {"command": "fixpoint.regenerateModel", "arguments": [{"force": True}]}
    )
    result = answer["result"]
    assert result["ok"] is False and result["error"].startswith("fixpoint.toml:3: generated: ")
    assert "../escape" in result["error"] and "leads outside" in result["error"]
    assert not (tmp_path / "escape").exists() and not (tree / "generated").exists()
    (tmp_path / "elsewhere").mkdir()
    (tree / "src" / "out").symlink_to(tmp_path / "elsewhere")  # inside by name, outside in fact
    for output in ("src/../../escape", "src/out"):
        answer = await wire.request(
            "workspace/executeCommand",
            {"command": "fixpoint.regenerateModel", "arguments": [{"output": output, "force": True}]},
        )
        assert answer["result"] == {
            "ok": False, "error": f"output '{output}' is outside the workspace {tree.resolve()}"
        }  # fmt: skip
    assert not (tmp_path / "escape").exists() and list((tmp_path / "elsewhere").iterdir()) == []
    assert_clean_exit(*await wire.stop())


async def test_an_untrusted_workspace_with_a_runaway_model_answers_and_exits(tmp_path: Path) -> None:
    """A model whose constant Loop would run 10^12 times at import, named by the project: opening the
    folder (untrusted) must not hang the server; the model is refused and that is a finding."""
    tree = make_tree(tmp_path / "fw")
    _loop_model(tree / "model" / "residual.onnx")
    wire = await Wire.start(tree, {"trusted": False})
    hovered = await wire.request("textDocument/hover", hover((tree / "src" / "main.c").as_uri(), 0))
    assert hovered["result"] is None
    answer = await wire.request("workspace/executeCommand", {"command": "fixpoint.checkWorkspace"})
    assert answer["result"]["by_code"].get("skipped-file") == 1
    params = (tree / "model" / "residual.params.json").as_uri()
    published = {p["uri"]: p["diagnostics"] for p in wire.notifications("textDocument/publishDiagnostics")}
    [finding] = [d for d in published[params] if d["code"] == "skipped-file"]
    assert finding["message"].startswith("model not used: ") and "'loop'" in finding["message"]
    assert_clean_exit(*await wire.stop())


def _loop_model(path: Path) -> None:
    """y = x + Loop(10^12 times: v += 1): folding the constant Loop at import would never end."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def value(name: str, kind: int, shape: list[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, kind, shape)

    body = helper.make_graph(
        [
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [
            value("i", TensorProto.INT64, []),
            value("c_in", TensorProto.BOOL, []),
            value("v_in", TensorProto.FLOAT, [1]),
        ],
        [value("c_out", TensorProto.BOOL, []), value("v_out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array([1.0], np.float32), "one")],
    )
    constants = [
        numpy_helper.from_array(np.array(10**12, np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.array([0.0], np.float32), "v0"),
    ]
    nodes = [
        helper.make_node("Loop", ["trips", "go", "v0"], ["v"], body=body, name="loop"),
        helper.make_node("Add", ["x", "v"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "runaway",
        [value("x", TensorProto.FLOAT, [1])],
        [value("y", TensorProto.FLOAT, [1])],
        constants,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
