"""Benchmark of the language server's commands as an editor user feels them (prints figures; not a test).

On a copy of the shipped example examples/broken (made a git repository, as in a checkout, so its
`model = "../fashion/model.onnx"` lies inside the project), with a client that has work-done progress
like VS Code:
- fixpoint.checkWorkspace: executeCommand request -> its answer, --runs times after a first one.
- Regenerate: the params JSON changes on disk as a new calibration run would (`calibration.samples`
  bumped), the server marks the generated files stale; then from the "Regenerate model" code action's
  executeCommand to the publishDiagnostics that clears the last stale-generated diagnostic of the three
  generated files. The first run (as shipped: stale) is shown on its own - it pays for the command worker
  starting - then --runs more.

    .venv/bin/python bench/server_commands.py [--runs 10] [--tree PATH] [--model-in-workspace]

--tree runs the server (and so its commands) from another checkout, e.g. a worktree of an older commit
(`git worktree add /tmp/fixpoint-before <commit>`), through PYTHONPATH; compare figures of the same run.
--model-in-workspace copies the model into the example's folder first: servers before the warm commands
refused this Regenerate, the model (../fashion/model.onnx) lying outside the workspace.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.server_latency import summary  # noqa: E402

GENERATED = ("model.h", "model.c", "model_data.c")
STALE = "stale-generated"
TIMEOUT_S = 120.0


class Editor:
    """A pygls client that keeps every document's latest diagnostics and answers progress requests."""

    def __init__(self) -> None:
        self.client = LanguageClient("fixpoint-bench", "1")
        self.diagnostics: dict[str, list[lsp.Diagnostic]] = {}
        self.changed = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: lsp.PublishDiagnosticsParams) -> None:
            self.diagnostics[params.uri] = list(params.diagnostics)
            self.changed.set()

        @self.client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(params: lsp.WorkDoneProgressCreateParams) -> None:
            return None

        @self.client.feature(lsp.PROGRESS)
        def on_progress(params: Any) -> None:
            return None

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: lsp.LogMessageParams) -> None:
            return None

        @self.client.feature(lsp.WINDOW_SHOW_MESSAGE)
        def on_show(params: lsp.ShowMessageParams) -> None:
            print(f"  server says: {params.message}")

    async def start(self, root: Path, env: dict[str, str]) -> None:
        self._code_actions_as_vs_code_reads_them()
        await self.client.start_io(sys.executable, "-m", "fixpoint_server", "--stdio", cwd=str(root), env=env)
        # pygls's client pipes the server's stderr without reading it: drain it, or a full pipe stalls it.
        self._drain = asyncio.create_task(self._discard(self.client._server.stderr))  # type: ignore[union-attr]
        capabilities = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True))
        await self.client.initialize_async(lsp.InitializeParams(
            capabilities=capabilities, root_uri=root.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        ))  # fmt: skip
        self.client.initialized(lsp.InitializedParams())

    def _code_actions_as_vs_code_reads_them(self) -> None:
        """lsprotocol reads every code action that carries a command as a bare Command; tell them apart
        by the type of "command", as the spec and VS Code do (tests/server/test_lsp.py does the same)."""
        converter = self.client.protocol._converter

        def hook(obj: Any, _: type) -> lsp.Command | lsp.CodeAction:
            kind = lsp.Command if isinstance(obj.get("command"), str) else lsp.CodeAction
            return converter.structure(obj, kind)  # type: ignore[no-any-return]

        converter.register_structure_hook(lsp.Command | lsp.CodeAction, hook)

    @staticmethod
    async def _discard(stream: Any) -> None:
        while await stream.read(65536):
            pass

    async def until(self, predicate: Any, what: str) -> None:
        deadline = time.perf_counter() + TIMEOUT_S
        while not predicate():
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no {what} in {TIMEOUT_S:.0f} s")
            with contextlib.suppress(TimeoutError):  # the loop checks the deadline
                await asyncio.wait_for(self.changed.wait(), left)

    async def command(self, name: str, arguments: list[Any] | None = None) -> Any:
        return await self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=arguments or [])
        )

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def stale(editor: Editor, uris: list[str]) -> list[str]:
    """The generated files whose latest diagnostics say stale-generated."""
    return [u for u in uris if any(d.code == STALE for d in editor.diagnostics.get(u, []))]


async def regenerate_once(editor: Editor, uris: list[str]) -> tuple[float, float]:
    """(answer, last diagnostic cleared) in seconds from the code action's executeCommand."""
    await editor.until(lambda: len(stale(editor, uris)) == len(uris), "stale-generated on every file")
    diag = next(d for d in editor.diagnostics[uris[0]] if d.code == STALE)
    actions = await editor.client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uris[0]), range=diag.range,
        context=lsp.CodeActionContext(diagnostics=[diag]),
    ))  # fmt: skip
    action = next(a for a in actions or [] if a.title == "Regenerate model")
    command = action.command if isinstance(action, lsp.CodeAction) else action
    assert command is not None
    started = time.perf_counter()
    result = await editor.command(command.command, command.arguments)
    answered = time.perf_counter() - started
    if not isinstance(result, dict) or result.get("ok") is not True:
        raise RuntimeError(f"regenerate failed: {result}")
    await editor.until(lambda: stale(editor, uris) == [], "clearing of the stale-generated diagnostics")
    return answered, time.perf_counter() - started


def recalibrate(params: Path, run: int) -> None:
    """What a new `fixpoint quantize` run does to the file, as far as staleness goes: other content."""
    doc = json.loads(params.read_text())
    doc["calibration"]["samples"] = 300 + run
    params.write_text(json.dumps(doc, indent=2) + "\n")


def model_in_workspace(root: Path) -> None:
    """The model copied into the example's folder and fixpoint.toml pointed at it: servers before the
    warm-commands change refused a Regenerate whose model lies outside the workspace (../fashion)."""
    shutil.copy(root.parent / "fashion" / "model.onnx", root / "model" / "fashion.onnx")
    toml = root / "fixpoint.toml"
    toml.write_text(toml.read_text().replace('"../fashion/model.onnx"', '"model/fashion.onnx"'))


def source_tree(tree: Path | None) -> tuple[str, dict[str, str]]:
    """The checkout the server runs from (its commit) and the environment that makes it so."""
    env = dict(os.environ)
    root = tree or REPO
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "server"), env.get("PYTHONPATH", "")])
    commit = subprocess.run(
        ["git", "-C", str(root), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    return commit[:100], env


async def main_async(args: argparse.Namespace) -> None:
    commit, env = source_tree(args.tree)
    print(f"server from: {'--tree' if args.tree else 'this checkout'} at {commit}")
    with tempfile.TemporaryDirectory(prefix="fixpoint-bench-") as tmp:
        examples = Path(tmp) / "examples"
        shutil.copytree(REPO / "examples", examples, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run(["git", "init", "-q", str(examples)], check=True)
        root = (examples / "broken").resolve()
        if args.model_in_workspace:
            model_in_workspace(root)
        uris = [(root / "src" / "model" / name).as_uri() for name in GENERATED]
        editor = Editor()
        await editor.start(root, env)
        started = time.perf_counter()
        await editor.command("fixpoint.checkWorkspace")
        first = (time.perf_counter() - started) * 1e3
        print(f"{'checkWorkspace, first (indexes the tree)':40} {first:7.1f} ms")
        checks = []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = await editor.command("fixpoint.checkWorkspace")
            checks.append(time.perf_counter() - started)
        print(f"workspace: {result['indexed']} files, {result['findings']} findings {result['by_code']}")
        print(summary("checkWorkspace round trip", checks))
        answered, cleared = await regenerate_once(editor, uris)
        print(f"{'regenerate, first (as shipped)':40} answer {answered * 1e3:7.1f} ms  "
              f"last diagnostic cleared {cleared * 1e3:7.1f} ms")  # fmt: skip
        answers, clears = [], []
        for run in range(1, args.runs + 1):
            recalibrate(root / "model" / "fashion.params.json", run)
            answered, cleared = await regenerate_once(editor, uris)
            answers.append(answered)
            clears.append(cleared)
        print(summary("regenerate: executeCommand answer", answers))
        print(summary("regenerate: last diagnostic cleared", clears))
        await editor.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tree", type=Path, help="run the server from this checkout (PYTHONPATH)")
    parser.add_argument(
        "--model-in-workspace", action="store_true", help="copy the model into the example's folder"
    )
    args = parser.parse_args()
    print("command: " + " ".join(["bench/server_commands.py", *sys.argv[1:]]))
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
