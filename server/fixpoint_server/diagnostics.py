"""The only place findings become LSP types: diagnostics, code actions and workspace edits.

Columns: findings count code points; LSP counts UTF-16 code units (the default position encoding).
They differ only on lines with characters outside the BMP, which are converted with the line's text.
Each diagnostic's codeDescription links to its rule's explanation (findings.RULE_DOCS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from fixpoint_server.findings import Code, Edit, Finding, Fix, Severity, Span

SOURCE = "fixpoint"
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}
Reader = Callable[[Path], str | None]


def utf16_column(line_text: str | None, column: int) -> int:
    if line_text is None or line_text.isascii():
        return column
    head = line_text[:column]
    return column + sum(1 for ch in head if ord(ch) > 0xFFFF)


class Positions:
    """Converts spans of one file to LSP ranges (reads the file's lines only when they are not ASCII)."""

    def __init__(self, path: Path, read: Reader) -> None:
        self.path, self.read = path, read
        self._lines: list[str] | None = None

    def _line(self, n: int) -> str | None:
        if self._lines is None:
            text = self.read(self.path)
            if text is None or text.isascii():
                return None
            self._lines = text.split("\n")
        return self._lines[n] if n < len(self._lines) else None

    def range(self, span: Span) -> lsp.Range:
        return lsp.Range(
            start=lsp.Position(line=span.line, character=utf16_column(self._line(span.line), span.column)),
            end=lsp.Position(
                line=span.end_line, character=utf16_column(self._line(span.end_line), span.end_column)
            ),
        )


def rule_uri(code: Code) -> str:
    """The rule's explanation, a Markdown file shipped with the server: a file: URI opens offline in any
    editor (VS Code makes the code in the Problems panel a link to it)."""
    return code.doc_path.as_uri()


def diagnostic(finding: Finding, positions: Positions) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=positions.range(finding.span),
        message=finding.message,
        severity=_SEVERITY[finding.effective_severity],
        code=finding.code.code,
        code_description=lsp.CodeDescription(href=rule_uri(finding.code)),
        source=SOURCE,
        related_information=[
            lsp.DiagnosticRelatedInformation(
                location=lsp.Location(
                    uri=r.path.as_uri(), range=Positions(r.path, positions.read).range(r.span)
                ),
                message=r.message,
            )
            for r in finding.related
        ]
        or None,
        data={"fixes": len(finding.fixes)},
    )


def workspace_edit(edits: Iterable[Edit], read: Reader) -> lsp.WorkspaceEdit:
    changes: dict[str, list[lsp.TextEdit]] = {}
    positions: dict[Path, Positions] = {}
    for edit in edits:
        conv = positions.setdefault(edit.path, Positions(edit.path, read))
        changes.setdefault(edit.path.as_uri(), []).append(
            lsp.TextEdit(range=conv.range(edit.span), new_text=edit.new_text)
        )
    return lsp.WorkspaceEdit(changes=changes)


def code_action(fix: Fix, finding: Finding, diag: lsp.Diagnostic, read: Reader) -> lsp.CodeAction:
    action = lsp.CodeAction(
        title=fix.title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diag],
        is_preferred=fix.preferred or None,
    )
    if fix.edits:
        action.edit = workspace_edit(fix.edits, read)
    if fix.command:
        action.command = lsp.Command(
            title=fix.title, command=fix.command, arguments=list(_jsonable(fix.arguments))
        )
    return action


def _jsonable(values: Iterable[Any]) -> Iterable[Any]:
    for value in values:
        yield str(value) if isinstance(value, Path) else value


def overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    def key(p: lsp.Position) -> tuple[int, int]:
        return p.line, p.character

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
