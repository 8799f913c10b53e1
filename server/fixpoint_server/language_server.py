"""FixpointServer: the language server's state (the workspace index, the checker, the editor's settings)
and what it does for its handlers: open the workspace, publish findings, find those at a range.

The handlers that pygls calls are in app.py; features/commands.py and watcher.py act on the server
through this class, so they and app.py depend on it and not on each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from fixpoint_server import __version__, diagnostics, settings
from fixpoint_server.checker import DISK_DELAY, Checker
from fixpoint_server.findings import Finding
from fixpoint_server.index import WorkspaceIndex
from fixpoint_server.protocol import NOT_JSON, FixpointProtocol, answer_parse_error
from fixpoint_server.rules.context import FileKind

_PARAMS = (FileKind.PARAMS_JSON,)


class FixpointServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fixpoint", __version__, protocol_cls=FixpointProtocol)
        self.index = WorkspaceIndex(Path.cwd())
        self.project_findings: list[Finding] = []
        self.checker = Checker(self.index, self.publish, lambda: list(self.project_findings))
        self.watcher: Any = None
        self.trusted = True
        """False when the editor says the workspace is untrusted: diagnostics only, no commands run."""
        self.editor_severity: dict[str, str] = {}
        """Severities the editor's settings give (initializationOptions), over fixpoint.toml's."""
        self.last_report: dict[str, Any] | None = None
        """The last flash-and-verify (or evaluation) report, for hovers and the editor's report view."""

    # -- workspace ----------------------------------------------------------------------------------

    def open_workspace(self, root: Path) -> None:
        self.index.root = root.resolve()
        self.reload_project()

    def enable_build_query(self) -> None:
        """make -pn and CMake's file-API replies confirm or drop the build rules' findings (make runs the
        workspace's code: trusted workspaces only); the answers come from a background thread."""
        import asyncio

        from fixpoint_server.parse.build_files.build_query import BuildQuery
        from fixpoint_server.rules.build_facts import enable_build_query

        loop = asyncio.get_running_loop()

        def answered(paths: list[Path]) -> None:  # in the query's thread
            loop.call_soon_threadsafe(self.build_files_answered, paths)

        enable_build_query(self.index.cache, BuildQuery(self.index.root, on_update=answered))

    def build_files_answered(self, paths: list[Path]) -> None:
        for path in paths:
            self.index.changed_on_disk(path)  # the incremental checker re-runs what reads them
        self.checker.request(DISK_DELAY)

    def reload_project(self) -> None:
        root = self.index.root
        project, self.project_findings = settings.load(root)
        project = settings.with_severities(project, self.editor_severity)
        self.index.project = project
        self.index.scan()
        ctx = self.index.context()
        self.index.project = settings.discover(
            root, project, ctx.files_of(*_PARAMS), ctx.c_files(), self.index.read
        )
        for message in [f.message for f in self.project_findings] + list(self.index.notes):
            self.warn(message)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls' report of what went wrong outside a request; a body that is not JSON is answered."""
        if source is JsonRpcException and isinstance(error, NOT_JSON):
            answer_parse_error(self.protocol, error)  # type: ignore[arg-type]
            return
        super().report_server_error(error, source)

    def warn(self, message: str) -> None:
        self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))

    def path_of(self, uri: str) -> Path | None:
        """The local file a document URI names, resolved; None for any other URI (untitled:, https:,
        a malformed one)."""
        try:
            path = to_fs_path(uri)
            return Path(path).resolve() if path else None
        except (ValueError, OSError, RuntimeError):  # e.g. `file://[::1`, a NUL byte, a symlink loop
            return None

    # -- publishing ---------------------------------------------------------------------------------

    def publish(self, grouped: dict[Path, list[Finding]]) -> None:
        for path, findings in grouped.items():
            positions = diagnostics.Positions(path, self.index.read)
            diags = [diagnostics.diagnostic(f, positions) for f in findings]
            version = self.index.open_docs.get(path, (None, ""))[0]
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=path.as_uri(), diagnostics=diags, version=version)
            )

    def findings_at(self, path: Path, rng: lsp.Range) -> list[tuple[Finding, lsp.Diagnostic]]:
        positions = diagnostics.Positions(path, self.index.read)
        found = []
        for finding in self.checker.findings:
            if finding.path == path:
                diag = diagnostics.diagnostic(finding, positions)
                if diagnostics.overlaps(diag.range, rng):
                    found.append((finding, diag))
        return found
