"""scan_c: one C file's facts. Reads the generated header and the directives (defines, includes,
alignment pragmas, conditionals: dead branches blanked, live ones marked for the walker), hands the code
to the statement walker, then finds the arm_* calls.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Iterator

from fixpoint_server.findings import LineIndex, Span
from fixpoint_server.parse.c_source.brackets import split_arguments
from fixpoint_server.parse.c_source.cfile import CFile
from fixpoint_server.parse.c_source.conditions import Conditions
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import (
    Alignment,
    Argument,
    CallSite,
    Define,
    FunctionDef,
    GeneratedHeader,
    Include,
)
from fixpoint_server.parse.c_source.mask import CONTINUATION, blank, line_end, mask
from fixpoint_server.parse.c_source.state import ScanState
from fixpoint_server.parse.c_source.walker import Walker

log = logging.getLogger(__name__)


def scan_c(text: str) -> CFile:
    """Every fact of one C source or header (see the package docstring). Never raises."""
    masked = mask(text)
    cfile = CFile(masked, LineIndex(masked))
    try:
        _Scanner(text, cfile).run()
    except (
        ValueError,
        IndexError,
        KeyError,
        RecursionError,
        TypeError,
    ):  # a scanner bug costs facts, not the check
        log.exception("C scan stopped early; keeping the facts found so far")
    return cfile


_CALL_NAME = "arm_"
"""Calls are recorded for CMSIS-NN's (and CMSIS-DSP's) functions only: the rules read no others."""
_CALL_REST = re.compile(r"(\w*)\s*\(")
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", re.DOTALL)
_INCLUDE = re.compile(r"#\s*include\s*([<\"])([^>\"\n]+)[>\"]")
_DIRECTIVE = re.compile(r"#\s*([A-Za-z_]\w*)(.*)", re.DOTALL)
_DATA_ALIGN = re.compile(r"DATA_ALIGN\s*\(\s*([A-Za-z_]\w*)\s*,\s*([^)]+)\)")
_IAR_ALIGN = re.compile(r"data_alignment\s*=\s*(\S+)")


class _Scanner:
    """Reads one file's header and directives, then hands the code view to the statement walker in a
    ScanState, then finds the calls."""

    def __init__(self, text: str, cfile: CFile) -> None:
        self.text = text
        self.masked = cfile.masked
        self.cfile = cfile
        self.pragma_aligns: dict[str, Alignment] = {}
        self.iar_aligns: list[tuple[int, Alignment]] = []
        self.conditions: list[tuple[int, int]] = []
        """Where live conditionals open, switch branch and close, for the walker (Conditions.events)."""

    def span(self, start: int, end: int) -> Span:
        return self.cfile.index.span(start, end)

    def run(self) -> None:
        self.cfile.generated = self._generated()
        blanks = self._directives()
        state = ScanState(
            self.cfile, _blanked(self.masked, blanks), self.conditions, self.pragma_aligns, self.iar_aligns
        )
        Walker(state).walk()
        self._calls(state)

    # -- header and directives ---------------------------------------------------------------------

    def _generated(self) -> GeneratedHeader | None:
        from quantcore.codegen.files import read_header

        header = read_header(self.text) if self.text.startswith("/*") else None
        if header is None:
            return None
        close = self.text.find("*/")
        end = len(self.text) if close == -1 else close + 2
        params, model = header.params, header.model
        return GeneratedHeader(
            params.name if params else None, params.sha256 if params else None,
            model.name if model else None, model.sha256 if model else None,
            header.content_sha256, self.span(0, end),
        )  # fmt: skip

    def _directives(self) -> list[tuple[int, int]]:
        """Read every directive (defines, includes, alignment pragmas); return the ranges to blank."""
        blanks: list[tuple[int, int]] = []
        conditions = Conditions()
        for start, end in _directive_lines(self.masked):
            blanks.append((start, end))
            match = _DIRECTIVE.match(self.masked, start, end)
            if match is None:
                continue
            name = match.group(1)
            dead = conditions.step(name, match.group(2).replace("\\\n", " ").strip(), start, end)
            if dead is not None:
                blanks.append(dead)
            if not conditions.dead:
                self._directive(name, start, end)
        blanks.extend(conditions.unterminated(len(self.masked)))
        self.conditions = conditions.events
        self._evaluate_defines()
        return blanks

    def _directive(self, name: str, start: int, end: int) -> None:
        if name == "define":
            self._define(start, end)
        elif name == "undef":
            self.cfile.defines.pop(self.masked[start:end].split()[-1], None)
        elif name == "include":
            match = _INCLUDE.match(self.text, start, end)
            if match is not None:
                self.cfile.includes.append(
                    Include(match.group(2).strip(), match.group(1) == "<", self.span(start, end))
                )
        elif name == "pragma":
            self._pragma(start, end)

    def _define(self, start: int, end: int) -> None:
        match = _DEFINE.match(self.masked, start, end)
        if match is None:
            return
        value_start = match.start(3)
        while value_start < end and self.masked[value_start] in " \t\\\r\n":
            value_start += 1
        value_end = end
        while value_end > value_start and self.masked[value_end - 1] in " \t\\\r\n":
            value_end -= 1
        params = None
        if match.group(2) is not None:
            params = tuple(p.strip() for p in match.group(2)[1:-1].split(",") if p.strip())
        value = CONTINUATION.sub(" ", self.masked[value_start:value_end])
        self.cfile.defines[match.group(1)] = Define(
            match.group(1), value, None, params, self.span(start, end),
            self.span(match.start(1), match.end(1)), value_start, value_end,
        )  # fmt: skip

    def _evaluate_defines(self) -> None:
        """Values are computed once every define is known: a macro may use one defined after it."""
        defines = self.cfile.defines
        for name, define in list(defines.items()):
            if define.params is None:
                value = evaluate(define.value, defines)
                defines[name] = Define(
                    define.name, define.value, value, None, define.span, define.name_span,
                    define.value_start, define.value_end,
                )  # fmt: skip

    def _pragma(self, start: int, end: int) -> None:
        line = self.masked[start:end]
        ti = _DATA_ALIGN.search(line)
        if ti is not None:
            text = ti.group(2).strip()
            where = self.span(start + ti.start(2), start + ti.start(2) + len(text))
            self.pragma_aligns[ti.group(1)] = Alignment(None, text, self.span(start, end), where)
        iar = _IAR_ALIGN.search(line)
        if iar is not None:
            where = self.span(start + iar.start(1), start + iar.end(1))
            self.iar_aligns.append((start, Alignment(None, iar.group(1), self.span(start, end), where)))

    # -- calls -------------------------------------------------------------------------------------

    def _calls(self, state: ScanState) -> None:
        code, pos = state.code, 0
        while True:
            at = code.find(_CALL_NAME, pos)
            if at == -1:
                return
            pos = at + len(_CALL_NAME)
            if at > 0 and (code[at - 1].isalnum() or code[at - 1] == "_"):
                continue
            function = _function_at(state, at)
            match = _CALL_REST.match(code, pos)
            if function is None or match is None:
                continue
            name_end = match.end(1)
            open_at = match.end() - 1
            args, close = split_arguments(code, open_at)
            arguments = tuple(Argument(code[a:b], self.span(a, b), a, b) for a, b in args)
            name_span, span = self.span(at, name_end), self.span(at, close)
            self.cfile.calls.append(
                CallSite(code[at:name_end], name_span, arguments, span, at, function.name)
            )
            pos = open_at + 1


def _function_at(state: ScanState, offset: int) -> FunctionDef | None:
    functions = state.cfile.functions
    i = bisect.bisect_right(state.function_starts, offset) - 1
    if i >= 0 and functions[i].start <= offset < functions[i].end:
        return functions[i]
    return None


# ---------------------------------------------------------------------------------- preprocessing


def _directive_lines(masked: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every line whose first non-blank character is `#`, continuations included."""
    pos, n = 0, len(masked)
    while True:
        at = masked.find("#", pos)
        if at == -1:
            return
        before = at - 1
        while before >= 0 and masked[before] in " \t":
            before -= 1
        if before >= 0 and masked[before] not in "\n\r\f\v":
            pos = at + 1
            continue
        end = line_end(masked, at, n)
        yield at, end
        pos = end


def _blanked(masked: str, ranges: list[tuple[int, int]]) -> str:
    if not ranges:
        return masked
    pieces, pos = [], 0
    for start, end in sorted(ranges):
        if end <= pos:
            continue
        start = max(start, pos)
        pieces.append(masked[pos:start])
        pieces.append(blank(masked[start:end]))
        pos = end
    pieces.append(masked[pos:])
    return "".join(pieces)
