"""What a checker returns: plain findings (code, severity, message, where, how to fix), never LSP types.

Only diagnostics.py turns findings into LSP diagnostics and code actions; `fixpoint check` prints the
same findings as text, JSON or SARIF, so the editor and CI always agree.

Positions are 0-based lines and 0-based columns counted in Unicode code points of the line (Python
string indices). The LSP conversion maps columns to UTF-16 units where a line has astral characters.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


class Code(enum.Enum):
    """The stable rule codes. value = the code users see; the metadata is the default severity and a
    one-line summary (the rule table in the README and `fixpoint check --list` come from here)."""

    UNSCALED_BIAS = ("unscaled-bias", Severity.ERROR, "bias not int32 or not round(b / (s_in * s_w[c]))")
    MISALIGNED_ARRAY = ("misaligned-array", Severity.WARNING, "weight/bias/arena array not aligned or padded")
    WRONG_ZERO_POINT = (
        "wrong-zero-point",
        Severity.ERROR,
        "zero point or offset inconsistent with the scheme",
    )
    KERNEL_OPT_LEVEL = (
        "kernel-opt-level",
        Severity.WARNING,
        "build flags the policy forbids on kernel sources",
    )
    MISSING_CMSIS_NN = ("missing-cmsis-nn", Severity.ERROR, "CMSIS-NN kernels called but not built or linked")
    STALE_GENERATED = ("stale-generated", Severity.WARNING, "generated sources out of date or edited by hand")
    SUSPICIOUS_SCALE = (
        "suspicious-scale",
        Severity.WARNING,
        "a scale that signals failed calibration, or integers that do not follow from the scales",
    )
    PROJECT_SETTINGS = ("project-settings", Severity.WARNING, "a fixpoint.toml value that cannot be used")
    SKIPPED_FILE = (
        "skipped-file",
        Severity.WARNING,
        "a file or folder not read: special, outside the workspace, too large, too deep or unreadable",
    )

    def __init__(self, code: str, severity: Severity, summary: str) -> None:
        self.code = code
        self.default_severity = severity
        self.summary = summary

    @classmethod
    def from_code(cls, code: str) -> Code:
        for member in cls:
            if member.code == code:
                return member
        raise KeyError(code)


@dataclass(frozen=True, order=True)
class Span:
    """A range in a file: from (line, column) to (end_line, end_column), end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def at(cls, line: int, column: int = 0, length: int = 0) -> Span:
        return cls(line, column, line, column + length)


class LineIndex:
    """Offsets <-> (line, column) of one text, in O(log lines) per lookup."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        start = text.find("\n")
        while start != -1:
            self.starts.append(start + 1)
            start = text.find("\n", start + 1)

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, offset - self.starts[line]

    def span(self, start: int, end: int) -> Span:
        return Span(*self.position(start), *self.position(end))

    def offset(self, line: int, column: int) -> int:
        if line >= len(self.starts):
            return len(self.text)
        return min(self.starts[line] + column, len(self.text))


@dataclass(frozen=True)
class Edit:
    """Replace `span` of `path` with `new_text` (an insertion when the span is empty)."""

    path: Path
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """One way to fix a finding: text edits (a quick fix), or a command the server runs."""

    title: str
    edits: tuple[Edit, ...] = ()
    command: str | None = None
    """A server command id, e.g. "fixpoint.regenerateModel" (its argument: the project root)."""
    arguments: tuple[Any, ...] = ()
    preferred: bool = False


@dataclass(frozen=True)
class Related:
    path: Path
    span: Span
    message: str


@dataclass(frozen=True)
class Finding:
    code: Code
    message: str
    path: Path
    span: Span
    severity: Severity | None = None
    """None: the rule's default (the project's [checks] severities may override either)."""
    fixes: tuple[Fix, ...] = ()
    related: tuple[Related, ...] = ()
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    """Extra facts for hovers and fixes (e.g. the layer name, the expected value)."""

    @property
    def effective_severity(self) -> Severity:
        return self.severity or self.code.default_severity

    def sort_key(self) -> tuple[str, Span, str]:
        return str(self.path), self.span, self.code.code
