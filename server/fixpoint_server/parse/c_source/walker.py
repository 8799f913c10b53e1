"""The statement walker: `{ } ;` of the code view, jumping over initializer bodies, telling function
bodies from struct bodies and blocks, and reading field assignments and designated initializers.
Statements that may declare an array go to declarations.py.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from fixpoint_server.parse.c_source.attributes import attribute_groups, blank_groups
from fixpoint_server.parse.c_source.brackets import closing_brace, split_top_level, strip_range
from fixpoint_server.parse.c_source.conditions import BRANCH, OPEN
from fixpoint_server.parse.c_source.declarations import QUALIFIERS, Declaration, occurs_outside
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import FieldAssignment, FunctionDef
from fixpoint_server.parse.c_source.state import ScanState

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


_State = tuple[tuple[_Scope, ...], int, int]
"""The open scopes and the function and struct counts among them."""


class Walker:
    """Walks `{ } ;` of the code view: which statements are declarations, where functions are."""

    def __init__(self, state: ScanState) -> None:
        self.s = state
        self.code = state.code
        self.stack: list[_Scope] = []
        self.functions = 0
        self.structs = 0
        self.branches: list[tuple[_State, _State | None]] = []
        """Per open conditional: the walker's state at its `#if`, and after its first live branch."""

    @property
    def function(self) -> str | None:
        return next((scope.name for scope in self.stack if scope.kind == "function"), None)

    def walk(self) -> None:
        code, pos, stmt = self.code, 0, 0
        inits: list[tuple[int, int]] = []
        """The `{...}` initializers of the statement so far: one per declarator that has one."""
        events, event = self.s.conditions, 0
        next_event = events[0][0] if events else len(code)
        while True:
            match = _PUNCT.search(code, pos)
            if match is None:
                break
            at, char = match.start(), match.group()
            while next_event < at:  # the conditional directives before this `{ } ;`
                self.condition(events[event][1])
                event += 1
                next_event = events[event][0] if event < len(events) else len(code)
            if char == ";":
                self.statement(stmt, at, inits)
                stmt, pos, inits = at + 1, at + 1, []
            elif char == "{" and _INIT_HEAD.search(code, inits[-1][1] + 1 if inits else stmt, at):
                close, pos = closing_brace(code, at)
                inits.append((at, close))
            elif char == "{":
                self.open(stmt, at)
                stmt = pos = at + 1
            else:
                if inits:  # `= {...}` with no `;`: the statement ends at the initializer
                    self.statement(stmt, inits[-1][1] + 1, inits)
                    inits = []
                stmt = self.close(at)
                pos = at + 1

    def condition(self, event: int) -> None:
        """Count braces along one branch of a conditional: the first live one, as if every condition
        the scan cannot evaluate were true. Each later branch starts from the scopes open at its `#if`
        (its declarations are read there) and `#endif` goes back to where the first branch left off, so
        a function header written twice (`#ifdef X void f(int a) { #else void f(void) { #endif`)
        opens one function, and pieces of one construct split over several `#ifdef X` blocks pair up."""
        if event == OPEN:
            self.branches.append((self.state(), None))
        elif not self.branches:
            return
        elif event == BRANCH:
            at_if, after_first = self.branches[-1]
            self.branches[-1] = (at_if, after_first or self.state())
            self.restore(at_if)
        else:
            after_first = self.branches.pop()[1]
            if after_first is not None:
                self.restore(after_first)

    def state(self) -> _State:
        return tuple(self.stack), self.functions, self.structs

    def restore(self, state: _State) -> None:
        stack, self.functions, self.structs = state
        self.stack = list(stack)

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
            self.function_def(scope.name, scope.start, at + 1)
        # `typedef struct {...} name;` is one statement: it resumes at the struct's head
        return scope.start if scope.kind == "struct" else at + 1

    def function_def(self, name: str, start: int, end: int) -> None:
        """Record a function, in order of its start and once: a body closed in both branches of a
        conditional is the first branch's, one opened in a later branch may close after a longer one."""
        starts = self.s.function_starts
        i = bisect.bisect_left(starts, start)
        if i < len(starts) and starts[i] == start:
            return
        starts.insert(i, start)
        self.s.cfile.functions.insert(i, FunctionDef(name, self.s.span(start, end), start, end))

    def statement(self, start: int, end: int, inits: list[tuple[int, int]]) -> None:
        if self.structs:
            return
        if occurs_outside(self.code, "[", start, end, inits):
            Declaration(self.s, start, end, inits, self.function).read()
        if inits and self.code.find("[", start, inits[0][0]) == -1:  # `cmsis_nn_dims d = {...}`
            self.designated(start, inits[0])
        if self.functions and self.code.find("=", start, end) != -1:
            self.assignment(start, end)

    def assignment(self, start: int, end: int) -> None:
        match = _ASSIGN.search(self.code, start, end)
        if match is None:
            return
        a, b = strip_range(self.code, match.end(), end)
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
        var, struct = words[-1], " ".join(w for w in words[:-1] if w not in QUALIFIERS) or None
        self.items(var, struct, open_at, close, "")

    def items(self, var: str, struct: str | None, open_at: int, close: int, prefix: str) -> None:
        for position, (a, b) in enumerate(split_top_level(self.code, open_at + 1, close)):
            match = _DESIGNATOR.match(self.code, a, b)
            if match is None:
                if not prefix and self.code[a] != "{":
                    self.s.cfile.fields.append(self.field(var, "", a, b, a, "designated", struct, position))
                continue
            va, vb = strip_range(self.code, match.end(), b)
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
    cleaned = blank_groups(head, 0, len(head), attribute_groups(head, 0, len(head)))
    match = re.search(r"([A-Za-z_]\w*)\s*\(", cleaned)
    return match.group(1) if match else None
