"""Property tests (hypothesis) of the language server's message handlers, against the real server.

One server per test, on the firmware tree of tests/server/test_lsp.py, in an untrusted workspace (so
the commands check their arguments and then refuse to run a build); hypothesis drives it from a worker
thread while the client's event loop keeps running. Typed requests (pytest-lsp's client: everything
lsprotocol can express, e.g. any position up to 2^31-1, reversed ranges, random edits and documents)
must each get an answer of the right type; raw requests (the bare client of test_hostile_lsp: any JSON
as params, for any method) must each get a result or a JSON-RPC error. Afterwards the server still
checks the workspace, shuts down and exits 0 with no traceback in its log.

FIXPOINT_FUZZ_EXAMPLES (an integer) sets the examples per property for a longer fuzzing run.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_lsp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.test_fuzz_parsers import C_TOKENS, glued
from tests.server.test_hostile_lsp import Wire, assert_clean_exit
from tests.server.test_lsp import check_workspace, tree

__all__ = ["tree"]  # the fixture, shared with test_lsp.py
EXAMPLES = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES") or 40)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T = TypeVar("T")
FUZZ_ANSWER_S = 10.0
"""A request unanswered this long failed (they take milliseconds); short, so shrinking a failure is quick."""
BIG = 2**31 - 1
COMMANDS = (
    "fixpoint.regenerateModel", "fixpoint.quantize", "fixpoint.flashVerify", "fixpoint.checkWorkspace",
    "fixpoint.lastReport", "fixpoint.unknown", "",
)  # fmt: skip


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "fixpoint_server", "--stdio"])
)
async def client(lsp_client: LanguageClient, tree: Path) -> AsyncIterator[LanguageClient]:
    untrusted = {"trusted": False}
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(), root_uri=tree.as_uri(), initialization_options=untrusted
    ))  # fmt: skip
    yield lsp_client
    await lsp_client.shutdown_session()


def numbers() -> st.SearchStrategy[int]:
    """Line or column numbers: mostly where text is, sometimes anywhere an LSP uinteger reaches."""
    return st.one_of(st.integers(0, 40), st.integers(0, BIG))


def positions() -> st.SearchStrategy[lsp.Position]:
    return st.builds(lsp.Position, line=numbers(), character=numbers())


def ranges() -> st.SearchStrategy[lsp.Range]:
    return st.builds(lsp.Range, start=positions(), end=positions())


def uris(tree: Path) -> st.SearchStrategy[str]:
    files = [
        tree / "src" / "main.c",
        tree / "src" / "model" / "model.c",
        tree / "model" / "residual.params.json",
    ]
    others = [
        "untitled:Untitled-1",
        "https://example.com/a.c",
        "file:///",
        (tree.parent / "outside.c").as_uri(),
    ]
    return st.one_of(st.sampled_from([p.as_uri() for p in files] + others), st.text(max_size=30))


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30)
    )
    keys = st.sampled_from(["params", "model", "data", "output", "force", "target", "serial", "method", "x"])
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4)
    )


def in_worker(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, T]], T]:
    """Runs a coroutine on the client's loop from hypothesis' thread and waits for its result."""

    def call(coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(FUZZ_ANSWER_S)

    return call


async def still_checking_after(
    client: LanguageClient, capfd: pytest.CaptureFixture[str], run: Callable[[], None]
) -> None:
    """`run` (a hypothesis property) in a worker thread; then the server still checks the workspace, and
    its stderr (forwarded by pytest-lsp) holds no traceback."""
    await asyncio.to_thread(run)
    assert (await check_workspace(client))["ok"] is True
    assert "Traceback" not in capfd.readouterr().err


async def test_hovers_and_code_actions_anywhere_are_answered(
    client: LanguageClient, tree: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    call = in_worker(asyncio.get_running_loop())

    @FUZZ
    @given(uri=uris(tree), position=positions(), rng=ranges())
    def requests(uri: str, position: lsp.Position, rng: lsp.Range) -> None:
        document = lsp.TextDocumentIdentifier(uri=uri)
        hover = call(
            client.text_document_hover_async(lsp.HoverParams(text_document=document, position=position))
        )
        assert hover is None or isinstance(hover, lsp.Hover)
        context = lsp.CodeActionContext(diagnostics=[])
        params = lsp.CodeActionParams(text_document=document, range=rng, context=context)
        actions = call(client.text_document_code_action_async(params))
        assert actions is None or isinstance(actions, (list, tuple))

    await still_checking_after(client, capfd, requests)


async def test_random_documents_and_edits_keep_the_server_answering(
    client: LanguageClient, tree: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    call = in_worker(asyncio.get_running_loop())
    names = st.sampled_from(
        ["src/fuzz.c", "src/model/model.c", "model/residual.params.json", "Makefile", "x.h"]
    )
    edit = st.builds(lsp.TextDocumentContentChangePartial, range=ranges(), text=glued(C_TOKENS, 10))
    whole = st.builds(lsp.TextDocumentContentChangeWholeDocument, text=glued(C_TOKENS))
    versions = iter(range(2, 10**6))

    @FUZZ
    @given(name=names, text=glued(C_TOKENS), changes=st.lists(st.one_of(edit, whole), max_size=4))
    def edits(name: str, text: str, changes: list[Any]) -> None:
        uri = (tree / name).as_uri()
        item = lsp.TextDocumentItem(uri=uri, language_id="c", version=1, text=text)
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
        document = lsp.VersionedTextDocumentIdentifier(uri=uri, version=next(versions))
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(text_document=document, content_changes=changes)
        )
        at = lsp.HoverParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(0, 1))
        hover = call(client.text_document_hover_async(at))  # answered after the notifications before it
        assert hover is None or isinstance(hover, lsp.Hover)
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))

    await still_checking_after(client, capfd, edits)


async def test_commands_with_any_arguments_answer(
    client: LanguageClient, tree: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    call = in_worker(asyncio.get_running_loop())

    @FUZZ
    @given(
        command=st.sampled_from(COMMANDS), arguments=st.one_of(st.none(), st.lists(json_values(), max_size=3))
    )
    def commands(command: str, arguments: list[Any] | None) -> None:
        params = lsp.ExecuteCommandParams(command=command, arguments=arguments)
        try:
            result = call(client.workspace_execute_command_async(params))
        except Exception as exc:  # a JSON-RPC error is an answer too: only for names that are no command
            assert command not in COMMANDS[:5], exc
            return
        assert isinstance(result, dict) and isinstance(result["ok"], bool)
        if command not in ("fixpoint.checkWorkspace", "fixpoint.lastReport"):
            assert result["ok"] is False  # refused: bad arguments, or the workspace is not trusted

    await still_checking_after(client, capfd, commands)


@pytest.fixture
async def wire(tree: Path) -> AsyncIterator[Wire]:
    client = await Wire.start(tree, {"trusted": False})
    yield client
    if client.process.returncode is None:
        client.process.kill()
        await client.process.wait()


async def test_any_json_as_params_of_any_method_is_answered(wire: Wire, tree: Path) -> None:
    call = in_worker(asyncio.get_running_loop())
    methods = st.sampled_from([
        "textDocument/hover", "textDocument/codeAction", "workspace/executeCommand",
        "textDocument/completion", "textDocument/didOpen", "textDocument/didChange", "textDocument/didClose",
        "$/cancelRequest", "initialize", "fixpoint/unknown",
    ])  # fmt: skip
    position = st.fixed_dictionaries({"line": st.integers(), "character": st.integers()})
    shaped = st.fixed_dictionaries({}, optional={
        "textDocument": st.one_of(json_values(), st.fixed_dictionaries({"uri": uris(tree)})),
        "position": st.one_of(json_values(), position), "range": json_values(), "context": json_values(),
        "command": st.sampled_from(COMMANDS) | json_values(), "arguments": json_values(),
        "contentChanges": json_values(), "id": json_values(),
    })  # fmt: skip

    @FUZZ
    @given(method=methods, params=st.one_of(json_values(), shaped), notify=st.booleans())
    def messages(method: str, params: Any, notify: bool) -> None:
        if notify:
            wire.notify(method, params)
        answer = call(wire.request(method, params))
        assert ("result" in answer) != ("error" in answer), answer

    await asyncio.to_thread(messages)
    answer = await wire.request("workspace/executeCommand", {"command": "fixpoint.checkWorkspace"})
    assert answer["result"]["ok"] is True
    assert_clean_exit(*await wire.stop())
