"""The language server: editor events in, diagnostics, code actions, hovers and commands out.

Handlers stay small: update the index, ask the checker for a run, convert findings (diagnostics.py); the
server's state and what they share is FixpointServer (language_server.py).
Long work (regenerate, quantize, flash and verify) lives in features/commands.py and runs off the event
loop. The watchdog observer (watcher.py) feeds file-system changes of files not open in the editor.
Every request gets an answer, whatever its params (protocol.py); a document URI that is not a local
file (`untitled:`, a malformed URI) is a document the server knows nothing about: empty answers.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lsprotocol import types as lsp

from fixpoint_server import diagnostics, settings
from fixpoint_server.checker import DISK_DELAY
from fixpoint_server.documents import SplicedDocument
from fixpoint_server.language_server import FixpointServer
from fixpoint_server.protocol import OneLineParseErrors
from quantcore.project import FILENAME

log = logging.getLogger(__name__)


_SYNC = lsp.TextDocumentSyncKind.Incremental
"""The text synchronization the server announces (pygls's default, which FixpointServer keeps)."""
server = FixpointServer()
logging.getLogger("pygls.server").addFilter(OneLineParseErrors())


@server.feature(lsp.INITIALIZE)
def initialize(ls: FixpointServer, params: lsp.InitializeParams) -> None:
    folders = params.workspace_folders or []
    uri = folders[0].uri if folders else params.root_uri
    root = ls.path_of(uri) if uri else None
    options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
    ls.trusted = options.get("trusted", True) is not False
    ls.editor_severity = settings.editor_severities(options.get("severity"))
    ls.open_workspace(root or Path.cwd())
    if ls.trusted:  # make -pn runs the workspace's $(shell ...): trusted workspaces only
        ls.enable_build_query()


@server.feature(lsp.INITIALIZED)
def initialized(ls: FixpointServer, params: lsp.InitializedParams) -> None:
    from fixpoint_server.watcher import start_watching

    ls.watcher = start_watching(ls)
    ls.checker.request()
    if ls.trusted and ls.index.project.params is not None:  # a project whose commands will be run
        from fixpoint_server import worker

        def log(text: str) -> None:
            ls.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=text))

        worker.prestart(ls.index.root, log)


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: FixpointServer, params: None) -> None:
    if ls.watcher is not None:
        ls.watcher.stop()
        ls.watcher = None
    ls.checker.stop()


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: FixpointServer, params: lsp.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    splice_changes(ls, doc.uri)
    path = ls.path_of(doc.uri)
    if path is not None:
        ls.index.opened(path, doc.version, doc.text)
        ls.checker.request()


def splice_changes(ls: FixpointServer, uri: str) -> None:
    """pygls's copy of the document just opened becomes a SplicedDocument: the same text, with each
    incremental change applied by one splice instead of rewriting every line (documents.py)."""
    documents = ls.workspace.text_documents
    opened = ls.workspace.get_text_document(uri)
    for key, document in documents.items():
        if document is opened:
            documents[key] = SplicedDocument(
                opened.uri, opened.source, opened.version, opened.language_id,
                sync_kind=_SYNC,  position_codec=opened.position_codec,
            )  # fmt: skip
            return


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: FixpointServer, params: lsp.DidChangeTextDocumentParams) -> None:
    path = ls.path_of(params.text_document.uri)
    if path is None:
        return
    document = ls.workspace.get_text_document(params.text_document.uri)
    ls.index.opened(path, params.text_document.version, document.source)
    ls.checker.request()


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: FixpointServer, params: lsp.DidSaveTextDocumentParams) -> None:
    path = ls.path_of(params.text_document.uri)
    if path is not None and path.name == FILENAME:
        ls.reload_project()
    ls.checker.request()


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: FixpointServer, params: lsp.DidCloseTextDocumentParams) -> None:
    path = ls.path_of(params.text_document.uri)
    if path is not None:
        ls.index.closed(path)
        ls.checker.request(DISK_DELAY)


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix])
)
def code_action(ls: FixpointServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    path = ls.path_of(params.text_document.uri)
    if path is None:
        return []
    return [
        diagnostics.code_action(fix, finding, diag, ls.index.read)
        for finding, diag in ls.findings_at(path, params.range)
        for fix in finding.fixes
    ]


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: FixpointServer, params: lsp.HoverParams) -> lsp.Hover | None:
    from fixpoint_server.features.hover import explain_rules, hover_markdown

    path = ls.path_of(params.text_document.uri)
    if path is None:
        return None
    text = hover_markdown(
        ls.index.context(), path, params.position.line, params.position.character, ls.last_report
    )
    # The rule's explanation too: Neovim and Emacs do not show a diagnostic's codeDescription link.
    here = lsp.Range(start=params.position, end=params.position)
    rules = explain_rules(finding.code for finding, _ in ls.findings_at(path, here))
    parts = [part for part in (text, rules) if part]
    if not parts:
        return None
    value = "\n\n---\n\n".join(parts)
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value))


def register_commands() -> None:
    from fixpoint_server.features import commands

    commands.register(server)


register_commands()
