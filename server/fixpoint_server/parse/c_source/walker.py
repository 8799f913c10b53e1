"""The statement walker: `{ } ;` of the code view, jumping over initializer bodies, telling function
bodies from struct bodies and blocks, and reading field assignments and designated initializers.
Statements that may declare an array go to declarations.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fixpoint_server.parse.c_source.attributes import _attribute_groups, _blank_groups
from fixpoint_server.parse.c_source.brackets import _closing_brace, _split_top, _strip
from fixpoint_server.parse.c_source.declarations import _QUALIFIERS, _Declaration
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import FieldAssignment, FunctionDef

if TYPE_CHECKING:
    from fixpoint_server.parse.c_source.scan import _Scanner


_PUNCT = re.compile(r"[{};]")
_INIT_HEAD = re.compile(r"(?<![=!<>+\-*/%&|^])=\s*(?:\(\s*[A-Za-z_][\w\s*]*\)\s*)?$")
_STRUCT_HEAD = re.compile(r"\b(?:struct|union|enum|class)\b")
_TRANSPARENT_HEAD = re.compile(r"\bextern\s*\"|\bnamespace\b")
_ASSIGN = re.compile(
    r"(?<![\w.>])([A-Za-z_]\w*)(?:\s*\[[^\]]*\])?\s*(\.|->)\s*"
    r"([A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)\s*=(?!=)"
)
_DESIGNATOR = re.compile(r"\.\s*([A-Za-z_]\w*)\s*=")
_MAX_STRUCT_INIT = 65536
"""Initializers longer than this are tables, not struct values: no designated fields are read."""


@dataclass
class _Scope:
    kind: str
    """"function", "struct" (members, enum values), "block" or "transparent" (extern "C", namespace)."""
    start: int
    name: str | None = None


class _Walker:
    """Walks `{ } ;` of the code view: which statements are declarations, where functions are."""

    def __init__(self, scanner: _Scanner) -> None:
        self.s = scanner
        self.code = scanner.code
        self.stack: list[_Scope] = []
        self.functions = 0
        self.structs = 0

    @property
    def function(self) -> str | None:
        return next((scope.name for scope in self.stack if scope.kind == "function"), None)

    def walk(self) -> None:
        code, pos, stmt = self.code, 0, 0
        init: tuple[int, int] | None = None
        while True:
            match = _PUNCT.search(code, pos)
            if match is None:
                break
            at, char = match.start(), match.group()
            if char == ";":
                self.statement(stmt, at, init)
                stmt, pos, init = at + 1, at + 1, None
            elif char == "{" and _INIT_HEAD.search(code, stmt if init is None else init[1] + 1, at):
                close, pos = _closing_brace(code, at)
                init = init or (at, close)  # `a[] = {..}, b[] = {..};`: the first declarator is read
            elif char == "{":
                self.open(stmt, at)
                stmt = pos = at + 1
            else:
                if init is not None:  # `= {...}` with no `;`: the statement ends at the initializer
                    self.statement(stmt, init[1] + 1, init)
                    init = None
                stmt = self.close(at)
                pos = at + 1

    def open(self, stmt: int, at: int) -> None:
        head = self.code[stmt:at]
        if _TRANSPARENT_HEAD.search(head):
            kind = "transparent"
        elif _STRUCT_HEAD.search(head) and "(" not in head:
            kind = "struct"
        elif self.functions or self.structs or "(" not in head:
            kind = "block"
        else:
            kind = "function"
        name = _function_name(head) if kind == "function" else None
        self.stack.append(_Scope(kind, stmt if kind == "struct" else at, name))
        self.functions += kind == "function"
        self.structs += kind == "struct"

    def close(self, at: int) -> int:
        """Pop the scope `}` closes; the offset where the next statement starts."""
        if not self.stack:
            return at + 1
        scope = self.stack.pop()
        self.functions -= scope.kind == "function"
        self.structs -= scope.kind == "struct"
        if scope.kind == "function" and scope.name is not None:
            function = FunctionDef(scope.name, self.s.span(scope.start, at + 1), scope.start, at + 1)
            self.s.cfile.functions.append(function)
            self.s.function_starts.append(scope.start)
        # `typedef struct {...} name;` is one statement: it resumes at the struct's head
        return scope.start if scope.kind == "struct" else at + 1

    def statement(self, start: int, end: int, init: tuple[int, int] | None) -> None:
        if self.structs:
            return
        code = self.code
        head_end = init[0] if init is not None else end
        if code.find("[", start, head_end) != -1:
            _Declaration(self.s, start, end, init, self.function).read()
        elif init is not None:
            self.designated(start, init)
        if self.functions and code.find("=", start, end) != -1:
            self.assignment(start, end)

    def assignment(self, start: int, end: int) -> None:
        match = _ASSIGN.search(self.code, start, end)
        if match is None:
            return
        a, b = _strip(self.code, match.end(), end)
        if a >= b:
            return
        kind = "assign" if match.group(2) == "." else "arrow"
        path = re.sub(r"\s*(?:\.|->)\s*", ".", match.group(3))
        self.s.cfile.fields.append(self.field(match.group(1), path, a, b, match.start(), kind, None, None))

    def field(
        self,
        var: str,
        path: str,
        a: int,
        b: int,
        start: int,
        kind: str,
        struct: str | None,
        position: int | None,
    ) -> FieldAssignment:
        value = self.code[a:b]
        return FieldAssignment(
            var, path, value, evaluate(value, self.s.cfile.defines), self.s.span(a, b), self.s.span(start, b),
            start, kind, struct, position, self.function,
        )  # fmt: skip

    def designated(self, start: int, init: tuple[int, int]) -> None:
        open_at, close = init
        if close - open_at > _MAX_STRUCT_INIT:
            return
        eq = self.code.rfind("=", start, open_at)
        words = re.findall(r"[A-Za-z_]\w*", self.code[start:eq])
        if eq == -1 or len(words) < 2 or "(" in self.code[start:eq]:
            return
        var, struct = words[-1], " ".join(w for w in words[:-1] if w not in _QUALIFIERS) or None
        self.items(var, struct, open_at, close, "")

    def items(self, var: str, struct: str | None, open_at: int, close: int, prefix: str) -> None:
        for position, (a, b) in enumerate(_split_top(self.code, open_at + 1, close)):
            match = _DESIGNATOR.match(self.code, a, b)
            if match is None:
                if not prefix and self.code[a] != "{":
                    self.s.cfile.fields.append(self.field(var, "", a, b, a, "designated", struct, position))
                continue
            va, vb = _strip(self.code, match.end(), b)
            path = prefix + match.group(1)
            if va < vb and self.code[va] == "{":
                inner_close = self.code.rfind("}", va, vb)
                if inner_close != -1:
                    self.items(var, struct, va, inner_close, path + ".")
                continue
            if va < vb:
                self.s.cfile.fields.append(
                    self.field(var, path, va, vb, a, "designated", struct, position if not prefix else None)
                )


def _function_name(head: str) -> str | None:
    """The name in a function definition's head: the first `name(` outside attributes."""
    cleaned = _blank_groups(head, 0, len(head), _attribute_groups(head, 0, len(head)))
    match = re.search(r"([A-Za-z_]\w*)\s*\(", cleaned)
    return match.group(1) if match else None
