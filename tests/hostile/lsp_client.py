"""A small JSON-RPC client that drives the language server over stdio the way an editor does.

It answers the server's own requests (configuration, capability registration, progress tokens) so the
server never waits on the client, and it records when each of its requests got an answer. A scenario is
a list of actions after `initialize`/`initialized`, always followed by `shutdown` and `exit`. Pass: every
request answered (a result or an error) within its time limit, no traceback on stderr, exit status 0,
nothing written outside the workspace (checked by the runner).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hostile import process
from tests.hostile.runner import _TRACEBACK, _short

REQUEST_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Request:
    method: str
    params: Any
    timeout: float = REQUEST_TIMEOUT_S


@dataclass(frozen=True)
class Notify:
    method: str
    params: Any


@dataclass(frozen=True)
class Raw:
    """Bytes written to the server as they are (a broken frame, invalid JSON)."""

    data: bytes


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass
class Scenario:
    actions: list[Any] = field(default_factory=list)
    init_options: dict[str, Any] | None = None
    initialize_timeout: float = REQUEST_TIMEOUT_S


class Client:
    """JSON-RPC over a server process's stdin/stdout (Content-Length frames)."""

    def __init__(self, server: subprocess.Popen[bytes]) -> None:
        self.server = server
        self.answers: dict[int, dict[str, Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.garbage: bytes | None = None
        """The first frame on stdout that was not JSON-RPC (the protocol is broken from there on)."""
        self._next = 0
        self._ready = threading.Condition()
        self._write_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def request(self, method: str, params: Any, timeout: float) -> dict[str, Any] | None:
        """The answer (with "result" or "error"), or None when none came within `timeout` s."""
        with self._ready:
            self._next += 1
            ident = self._next
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        with self._ready:
            while ident not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.server.poll() is not None:
                    return None
                self._ready.wait(min(left, 0.2))
            return self.answers[ident]

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def raw(self, data: bytes) -> None:
        with self._write_lock:
            try:
                assert self.server.stdin is not None
                self.server.stdin.write(data)
                self.server.stdin.flush()
            except (BrokenPipeError, OSError):
                pass

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def _read(self) -> None:
        stream = self.server.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = stream.read(length) if length is not None else b""
            try:
                message = json.loads(body)
            except ValueError:
                self.garbage = body[:200] or b"a frame without Content-Length"
                return
            self._handle(message)

    def _handle(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # the server asks: answer so it never waits
            result: Any = None
            if message["method"] == "workspace/configuration":
                result = [None] * len(message.get("params", {}).get("items", []))
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        elif "method" in message:
            self.notifications.append(message)
        elif "id" in message:
            with self._ready:
                self.answers[message["id"]] = message
                self._ready.notify_all()


def initialize_params(root: Path, options: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "processId": None,
        "rootUri": root.as_uri(),
        "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}],
        "capabilities": {"textDocument": {"hover": {"contentFormat": ["markdown"]}}},
        "initializationOptions": options,
    }


def run_scenario(w: Any, scenario: Scenario) -> tuple[str, str]:
    """Start the server in the workspace, play the scenario, shut it down; (outcome, detail)."""
    logs = w.case_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "server.stderr", "wb") as err:
        server = subprocess.Popen(
            w.product.server(), cwd=w.ws, env=w.product.env(), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=err, start_new_session=True,
        )  # fmt: skip
        budget = scenario.initialize_timeout + sum(_budget(a) for a in scenario.actions) + 2 * EXIT_TIMEOUT_S
        guard = process.Guard(server, time.monotonic() + budget + 30, (logs / "server.stderr",)).start()
        try:
            client = Client(server)
            problem = _play(client, w.ws, scenario)
            code = _wait(server)
        finally:
            guard.stop()
            process.kill_tree(server.pid)
    stderr = process.read_capped(logs / "server.stderr")
    if client.garbage is not None:
        return "crash", f"the server wrote something not JSON-RPC to stdout: {client.garbage!r}"
    return _outcome(problem, code, guard.reason, stderr)


def _budget(action: Any) -> float:
    return action.timeout if isinstance(action, Request) else getattr(action, "seconds", 0.0)


def _play(client: Client, root: Path, scenario: Scenario) -> str | None:
    """The first request left unanswered (as text), or None when every one was answered."""
    init = initialize_params(root, scenario.init_options)
    if client.request("initialize", init, scenario.initialize_timeout) is None:
        return f"no answer to initialize within {scenario.initialize_timeout:g} s"
    client.notify("initialized", {})
    problem = None
    for action in scenario.actions:
        if problem is not None:
            break  # a server that left one request unanswered is stuck: go to shutdown
        if isinstance(action, Request):
            if client.request(action.method, action.params, action.timeout) is None:
                params = _short(json.dumps(action.params), 100)
                problem = f"no answer to {action.method} {params} within {action.timeout:g} s"
        elif isinstance(action, Notify):
            client.notify(action.method, action.params)
        elif isinstance(action, Raw):
            client.raw(action.data)
        else:
            time.sleep(action.seconds)
    if client.request("shutdown", None, EXIT_TIMEOUT_S) is None and problem is None:
        problem = f"no answer to shutdown within {EXIT_TIMEOUT_S:g} s"
    client.notify("exit", None)
    return problem


def _wait(server: subprocess.Popen[bytes]) -> int | None:
    try:
        assert server.stdin is not None
        server.stdin.close()
    except OSError:
        pass
    try:
        return server.wait(EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None


_EXCEPTION = re.compile(r"^[\s|+]*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\w*(?::.*)?)$")


def exception_line(stderr: str, start: int) -> str:
    """What a logged traceback at `start` was about: the log line before it and its first exception."""
    start = stderr.rfind("\n", 0, start) + 1
    before = stderr[:start].rstrip("\n").rsplit("\n", 1)[-1].strip()
    found = next((m.group(1) for line in stderr[start:].splitlines() if (m := _EXCEPTION.match(line))), "")
    return ": ".join(part for part in (before, found) if part) or "a traceback"


def _outcome(problem: str | None, code: int | None, killed: str | None, stderr: str) -> tuple[str, str]:
    if killed == "memory":
        return "crash", f"server killed by the memory watchdog (RSS above {process.MEMORY_LIMIT >> 30} GiB)"
    found = _TRACEBACK.search(stderr)
    if found:
        return "crash", f"server stderr: {_short(exception_line(stderr, found.start()))} ({found.group(0)})"
    if problem is not None and code not in (0, None):
        return "crash", f"the server exited with status {code}; {problem}"
    if problem is not None:
        return "hang", problem
    if killed is not None:
        return "hang", f"server killed ({killed})"
    if code is None:
        return "hang", f"the server did not exit within {EXIT_TIMEOUT_S:g} s of `exit`"
    if code != 0:
        return "crash", f"the server exited with status {code} after shutdown and exit"
    return "pass", ""
