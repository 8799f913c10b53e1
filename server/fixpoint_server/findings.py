"""What a checker returns: plain findings (code, severity, message, where, how to fix), never LSP types.

Only diagnostics.py turns findings into LSP diagnostics and code actions; `fixpoint check` prints the
same findings as text, JSON or SARIF, so the editor and CI always agree.

Positions are 0-based lines and 0-based columns counted in Unicode code points of the line (Python
string indices). The LSP conversion maps columns to UTF-16 units where a line has astral characters.
"""

from __future__ import annotations

import bisect
import enum
import functools
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


RULE_DOCS = Path(__file__).resolve().parent / "rule_docs"
"""One Markdown file per rule, `<code>.md`: a `# <code>` title, then what the rule checks, why it matters
on Cortex-M / CMSIS-NN, and how to fix it. Diagnostics link to it (codeDescription), so it ships with
the package and opens offline in any editor."""


class Code(enum.Enum):
    """The rules: the one place a rule's code, default severity, summary and explanation are stated.

    value = (the code users see, the default severity, a one-line summary); the long explanation is
    RULE_DOCS/<code>.md. `fixpoint check --list-rules` prints them; the VS Code extension's severity
    table and settings are generated from that (vscode-extension/scripts/gen-rules.js), and tests keep
    the README's rule table and the extension's copies equal to them.
    """

    UNSCALED_BIAS = (
        "unscaled-bias",
        Severity.ERROR,
        "a bias passed to an s8 kernel that is not int32, or not round(b / (s_in * s_w[c])) of its layer",
    )
    MISALIGNED_ARRAY = (
        "misaligned-array",
        Severity.WARNING,
        "an array a kernel reads with wider loads than its type aligns for on the configured core, or"
        " one under the project's alignment policy not aligned or padded to it",
    )
    WRONG_ZERO_POINT = (
        "wrong-zero-point",
        Severity.ERROR,
        "a zero point or kernel offset inconsistent with the int8 scheme: weight zero point != 0, the"
        " uint8 habit 128, input_offset != -zp_in, output_offset != zp_out",
    )
    KERNEL_OPT_LEVEL = (
        "kernel-opt-level",
        Severity.WARNING,
        "build flags the policy forbids on CMSIS-NN or generated sources (-O3, -Ofast, -O0, ...), or a"
        " CMSIS_NN_USE_SINGLE_ROUNDING setting other than the parameters'",
    )
    MISSING_CMSIS_NN = (
        "missing-cmsis-nn",
        Severity.ERROR,
        "CMSIS-NN kernels called but the build neither links nor compiles CMSIS-NN, or lacks its"
        " include path",
    )
    STALE_GENERATED = (
        "stale-generated",
        Severity.WARNING,
        "generated sources out of date with their JSON or model, edited by hand, or from different runs"
        " of generate",
    )
    SUSPICIOUS_SCALE = (
        "suspicious-scale",
        Severity.WARNING,
        "a quant-params JSON that fails its schema, integers that do not follow from its scales, or a"
        " scale that signals failed calibration",
    )
    PROJECT_SETTINGS = (
        "project-settings",
        Severity.WARNING,
        "a fixpoint.toml value that cannot be used (the default is kept)",
    )
    SKIPPED_FILE = (
        "skipped-file",
        Severity.WARNING,
        "a file or folder not read (special, outside the workspace, too large, too deep, unreadable), or"
        " a model a params JSON names that could not be used",
    )

    def __init__(self, code: str, severity: Severity, summary: str) -> None:
        self.code = code
        self.default_severity = severity
        self.summary = summary

    @property
    def doc_path(self) -> Path:
        """The rule's explanation file (codeDescription.href is its file: URI)."""
        return RULE_DOCS / f"{self.code}.md"

    @property
    def explanation(self) -> str:
        """The long explanation, Markdown, without the file's `# <code>` title."""
        return _explanation(self.code)


@functools.cache
def _explanation(code: str) -> str:
    text = (RULE_DOCS / f"{code}.md").read_text(encoding="utf-8")
    return text.removeprefix(f"# {code}\n").strip()


def rule_catalog() -> list[dict[str, str]]:
    """Every rule as `fixpoint check --list-rules --format json` prints it, in Code's order."""
    return [
        {
            "code": c.code,
            "severity": c.default_severity.value,
            "summary": c.summary,
            "explanation": c.explanation,
        }
        for c in Code
    ]


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
    """Offsets <-> (line, column) of one text ("\n" ends a line; a column counts code points).

    Built in a few C-level passes, not a Python step per line (a 30 MB generated weights file has
    ~400,000 lines and is scanned again on every keystroke in it): the text is cut into blocks of
    BLOCK characters, and each block keeps how many line breaks precede it and where the last one
    before it is. A lookup counts the line breaks of one block (str.count, str.rfind).
    """

    BLOCK = 4096

    def __init__(self, text: str, block: int = BLOCK) -> None:
        self.text = text
        self.block = block
        firsts = range(0, len(text) + 1, block)
        self._before = list(itertools.accumulate((text.count("\n", a, a + block) for a in firsts), initial=0))
        """Per block b, the line breaks in text[:b * BLOCK]."""
        self._last = [-1]
        """Per block b, the offset of the last line break in text[:b * BLOCK] (-1: none)."""
        for a in firsts:
            found = text.rfind("\n", a, a + block)
            self._last.append(self._last[-1] if found == -1 else found)

    def position(self, offset: int) -> tuple[int, int]:
        at = max(0, min(offset, len(self.text)))
        block = at // self.block
        first = block * self.block
        line = self._before[block] + self.text.count("\n", first, at)
        newline = self.text.rfind("\n", first, at)
        return line, offset - 1 - (self._last[block] if newline == -1 else newline)

    def span(self, start: int, end: int) -> Span:
        return Span(*self.position(start), *self.position(end))

    def offset(self, line: int, column: int) -> int:
        """The offset of (line, column); past the last line, the end of the text (a column is not
        held to its line: one past the line's end is the next line's text)."""
        if line <= 0:
            return min(column, len(self.text))
        block = bisect.bisect_left(self._before, line) - 1
        if block + 1 >= len(self._before):
            return len(self.text)
        newline = self._last[block]
        for _ in range(line - self._before[block]):
            newline = self.text.find("\n", newline + 1)
        return min(newline + 1 + column, len(self.text))


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
