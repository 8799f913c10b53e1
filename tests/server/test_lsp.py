"""The language server end to end over stdio, driven by pytest-lsp's real LSP client.

Each test starts `python -m fixpoint_server` on a fresh firmware tree (tests/server/firmware_tree.py):
diagnostics appear where a mistake is, go away when the quick fix is applied, re-appear when a watched
file changes on disk, and the commands (regenerate, check workspace) and hovers work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Union

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests import needs
from tests.server.firmware_tree import make_tree

TIMEOUT = 20.0


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "fw")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "fixpoint_server", "--stdio"])
)
async def client(lsp_client: LanguageClient, tree: Path) -> AsyncIterator[LanguageClient]:
    capabilities = lsp.ClientCapabilities(window=lsp.WindowClientCapabilities(work_done_progress=True))
    await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=capabilities, root_uri=tree.as_uri(),
                             workspace_folders=[lsp.WorkspaceFolder(uri=tree.as_uri(), name="fw")])
    )  # fmt: skip
    _fix_code_action_structuring(lsp_client)
    yield lsp_client
    await lsp_client.shutdown_session()


def _fix_code_action_structuring(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 reads every code action that carries a command as a bare Command (it only looks
    for a "command" key); VS Code tells them apart by the key's type, as the spec says. Do the same."""
    converter = client.protocol._converter

    def hook(obj: Any, _: type) -> lsp.Command | lsp.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, lsp.Command)
        return converter.structure(obj, lsp.CodeAction)

    converter.register_structure_hook(lsp.Command | lsp.CodeAction, hook)
    converter.register_structure_hook(Union[lsp.Command, lsp.CodeAction], hook)  # noqa: UP007


async def wait_for(client: LanguageClient, uri: str, predicate, what: str) -> list[lsp.Diagnostic]:  # type: ignore[no-untyped-def]
    """Wait until the diagnostics of `uri` satisfy `predicate` (each publish is checked)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while True:
        current = client.diagnostics.get(uri, [])
        if predicate(current):
            return current
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise AssertionError(f"timed out waiting for {what}; last diagnostics of {uri}: {current}")
        with contextlib.suppress(TimeoutError):  # the loop re-checks and reports the timeout
            await asyncio.wait_for(
                client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), remaining
            )


async def check_workspace(client: LanguageClient) -> dict:  # type: ignore[type-arg]
    """Run the checkWorkspace command: returns when a full check has run and been published."""
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.checkWorkspace", arguments=[])
    )
    assert isinstance(result, dict)
    return result


def codes(diags: list[lsp.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diags)


def open_doc(client: LanguageClient, path: Path, language: str, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(
            uri=uri, language_id=language, version=1, text=text if text is not None else path.read_text()
        )
    ))  # fmt: skip
    return uri


def apply_edits(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = offsets[edit.range.start.line] + edit.range.start.character
        end = offsets[edit.range.end.line] + edit.range.end.character
        text = text[:start] + edit.new_text + text[end:]
    return text


async def test_a_uint8_zero_point_is_flagged_and_the_quick_fix_clears_it(
    client: LanguageClient, tree: Path
) -> None:
    params = tree / "model" / "residual.params.json"
    text = params.read_text().replace('"zero_point": -128,', '"zero_point": 128,', 1)
    uri = open_doc(client, params, "json", text)
    diags = await wait_for(client, uri, lambda d: "wrong-zero-point" in codes(d), "the zero-point finding")
    finding = next(d for d in diags if d.code == "wrong-zero-point")
    bad_line = next(n for n, line in enumerate(text.split("\n")) if '"zero_point": 128,' in line)
    assert finding.range.start.line == bad_line and finding.severity == lsp.DiagnosticSeverity.Error
    assert (
        "$.tensors.x.zero_point" in finding.message or "zero_point: must be in [-128, 127]" in finding.message
    )

    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=finding.range,
        context=lsp.CodeActionContext(diagnostics=[finding]),
    ))  # fmt: skip
    assert actions, "no code action for the zero point"
    fix = actions[0]
    assert fix.edit is not None and fix.edit.changes is not None
    fixed = apply_edits(text, fix.edit.changes[uri])
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)],
    ))  # fmt: skip
    await wait_for(client, uri, lambda d: "wrong-zero-point" not in codes(d), "the fix to clear the finding")
    assert json.loads(fixed) == json.loads(params.read_text())  # the fix restored the generated value


async def test_a_change_on_disk_makes_the_generated_code_stale_and_regenerate_fixes_it(
    client: LanguageClient, tree: Path
) -> None:
    model_c = tree / "src" / "model" / "model.c"
    uri = open_doc(client, model_c, "c")
    settled = await check_workspace(client)
    assert settled["findings"] == 0 and client.diagnostics.get(uri, []) == []
    params = tree / "model" / "residual.params.json"
    doc = json.loads(params.read_text())
    doc["calibration"]["samples"] += 1  # a new calibration run: same layers, different file
    params.write_text(json.dumps(doc, indent=2) + "\n")  # not open in the editor: seen by the watcher
    diags = await wait_for(client, uri, lambda d: "stale-generated" in codes(d), "the stale finding")
    assert "residual.params.json" in diags[0].message and diags[0].range.start.line == 4

    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=diags[0].range,
        context=lsp.CodeActionContext(diagnostics=diags),
    ))  # fmt: skip
    regenerate = next(a for a in actions or [] if a.title == "Regenerate model")
    assert isinstance(regenerate, lsp.CodeAction)
    command = regenerate.command
    assert command is not None and command.command == "fixpoint.regenerateModel"
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=command.command, arguments=command.arguments)
    )
    assert result["ok"] is True and {Path(f["path"]).name for f in result["files"]} == {
        "model.h",
        "model.c",
        "model_data.c",
    }
    # The editor reloads an unmodified buffer whose file changed on disk (VS Code and Neovim both do).
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=model_c.read_text())],
    ))  # fmt: skip
    await wait_for(client, uri, lambda d: "stale-generated" not in codes(d), "regeneration to clear it")
    assert (await check_workspace(client))["findings"] == 0


async def test_check_workspace_counts_the_findings_of_unopened_files(
    client: LanguageClient, tree: Path
) -> None:
    data = tree / "src" / "model" / "model_data.c"
    data.write_text(data.read_text() + "/* tuned by hand */\n")
    result = await check_workspace(client)
    assert result["ok"] is True and result["by_code"] == {"stale-generated": 1}
    diags = await wait_for(client, data.as_uri(), lambda d: d != [], "the edited file's finding")
    assert "edited by hand" in diags[0].message


async def test_a_bad_fixpoint_toml_value_is_shown_at_its_key(client: LanguageClient, tree: Path) -> None:
    await check_workspace(client)  # the server is up and watching
    toml = tree / "fixpoint.toml"
    toml.write_text(toml.read_text() + '\n[flash]\nbackend = "usb"\n')
    uri = toml.as_uri()
    diags = await wait_for(client, uri, lambda d: d != [], "the settings finding")
    assert codes(diags) == ["project-settings"] and diags[0].range.start.line == 6
    assert "flash.backend" in diags[0].message and "(the default is used)" in diags[0].message


async def test_hover_on_a_layer_shows_its_quantization(client: LanguageClient, tree: Path) -> None:
    model_c = tree / "src" / "model" / "model.c"
    text = model_c.read_text()
    uri = open_doc(client, model_c, "c", text)
    line = next(n for n, row in enumerate(text.split("\n")) if "l0_conv1_params = {" in row)
    column = text.split("\n")[line].index("l0_conv1_params") + 3
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(line=line, character=column)
    ))  # fmt: skip
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    value = hover.contents.value
    assert "**conv1** - conv2d, `arm_convolve_wrapper_s8`" in value
    assert "input_offset -11, output_offset -128" in value
    assert "| 0 | 1658483553 | -8 | 0.00301676 |" in value  # 1658483553 / 2^31 * 2^-8


def _board_tools_missing() -> str | None:
    import shutil

    from quantcore.errors import CmsisNnNotFound
    from quantcore.targets import cmsis_nn

    try:
        cmsis_nn.locate()
    except CmsisNnNotFound as exc:
        return f"no CMSIS-NN checkout: {exc}"
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "gdb-multiarch"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


async def test_flash_and_verify_on_qemu_reports_every_layer_with_progress(
    client: LanguageClient, tree: Path
) -> None:
    missing = _board_tools_missing()
    if missing:
        needs.absent(missing)
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.flashVerify", arguments=[{"target": "qemu-m4"}])
    )
    assert result["verdict"] == "pass" and result["mismatched_bytes_total"] == 0, result
    assert [layer["name"] for layer in result["layers"]][:3] == ["conv1", "pool1", "dwconv"]
    assert len(result["layers"]) == 16 and result["arena_bytes"] == 1440
    reports = list(client.progress_reports.values())
    assert reports and isinstance(reports[-1][0], lsp.WorkDoneProgressBegin)
    assert reports[-1][0].title == "Flash and verify (qemu-m4)" and reports[-1][0].cancellable is True
    assert isinstance(reports[-1][-1], lsp.WorkDoneProgressEnd) and reports[-1][-1].message == "exit 0"
    last = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.lastReport", arguments=[])
    )
    assert last["report"]["kind"] == "verification" and last["report"]["verdict"] == "pass"


async def test_cancelling_a_long_command_kills_it_and_writes_nothing(
    client: LanguageClient, tree: Path
) -> None:
    import numpy as np

    data = tree / "model" / "calib.npz"
    np.savez(data, x=np.random.default_rng(0).normal(size=(20000, 1, 12, 12)).astype(np.float32))
    output = tree / "model" / "new.params.json"
    options = {"model": "model/residual.onnx", "data": str(data), "output": str(output), "method": "mse"}
    job = asyncio.ensure_future(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.quantize", arguments=[options])
    ))  # fmt: skip
    while not (pids := _job_pids([m.message for m in client.log_messages])):  # the server names the job
        assert not job.done(), job.result()
        await asyncio.sleep(0.05)
    [pid] = pids
    # Frozen (its whole session, as the server stops it): however fast quantize gets, it cannot reach
    # its write (at the end) before the cancel is handled - the order is made, not hoped for.
    os.killpg(pid, signal.SIGSTOP)
    try:
        assert not output.exists()
        token = next(iter(client.progress_reports))
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
        result = await asyncio.wait_for(job, TIMEOUT)  # SIGTERM stays pending; SIGKILL after the grace
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    assert result == {"ok": False, "error": "Quantizing: cancelled"}
    assert not output.exists()


def _job_pids(logs: list[str]) -> list[int]:
    """The pid of every job the server's log says it started (forked by its worker, or spawned)."""
    return [int(m[1]) for m in map(re.compile(r"^job (\d+) (?:forked|started) ").match, logs) if m]


def _qemu_for(tree: Path) -> list[int]:
    """QEMU processes started for `tree` (working in it, or naming a file of it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if not argv or not argv[0].endswith(b"qemu-system-arm"):
                    continue
                cwd = Path(os.readlink(proc / "cwd"))
                if cwd.is_relative_to(tree) or str(tree).encode() in b" ".join(argv):
                    found.append(int(proc.name))
    return found


async def test_quantize_then_evaluate_returns_the_report(client: LanguageClient, tree: Path) -> None:
    import numpy as np

    data = tree / "model" / "calib.npz"
    np.savez(data, x=np.random.default_rng(2).normal(size=(64, 1, 12, 12)).astype(np.float32))
    options = {"model": "model/residual.onnx", "data": "model/calib.npz", "output": "model/q.params.json"}
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.quantize", arguments=[options])
    )
    assert result["ok"] is True and Path(result["params"]) == (tree / "model" / "q.params.json").resolve()
    report = result["report"]
    assert [layer["name"] for layer in report["layers"]][:2] == ["conv1", "pool1"] and report[
        "output_sqnr_db"
    ] > 20
    last = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="fixpoint.lastReport")
    )
    assert last["report"]["kind"] == "evaluation"
