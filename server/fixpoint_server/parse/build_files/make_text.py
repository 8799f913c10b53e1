"""Make's text, read the way make reads it: continuations and comments blanked (offsets kept), words
and top-level characters with `$(...)` / `${...}` kept whole, and the expansion of variables and of the
functions that name files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def make_clean(text: str) -> str:
    """The text with the same offsets, line continuations and comments blanked, so logical lines are
    physical '\\n'-separated lines of it and every offset still points into the original."""
    text = re.sub(r"\\\r?\n", lambda m: " " * len(m[0]), text.replace("\r", " "))
    return re.sub(r"(?<!\\)#[^\n]*", lambda m: " " * len(m[0]), text)


def _scan(text: str, start: int, end: int) -> Iterable[tuple[int, str, int]]:
    """(offset, char, depth) over text[start:end], depth counting $( ${ nesting."""
    depth = 0
    i = start
    while i < end:
        char = text[i]
        if char == "$" and i + 1 < end and text[i + 1] in "({":
            yield i, char, depth
            depth += 1
            i += 2
            continue
        if char in ")}" and depth > 0:
            depth -= 1
        yield i, char, depth
        i += 1


def make_words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    words: list[tuple[int, int]] = []
    begin = -1
    for i, char, depth in _scan(text, start, end):
        if char in " \t\n" and depth == 0:
            if begin >= 0:
                words.append((begin, i))
            begin = -1
        elif begin < 0:
            begin = i
    if begin >= 0:
        words.append((begin, end))
    return words


def find_top_level(text: str, start: int, end: int, chars: str) -> int:
    return next((i for i, char, depth in _scan(text, start, end) if depth == 0 and char in chars), -1)


_EXPANSION_BUDGET = 100_000
"""Characters one expansion may produce: a variable doubling itself forty times must not hang the server."""


class _MakeExpander:
    """Make's $(VAR) and file-naming functions, innermost first; a variable inside its own expansion
    (A = $(A) x) and anything past the budget stay as written."""

    def __init__(self, variables: dict[str, str]) -> None:
        self.variables = variables
        self.budget = 0

    def __call__(self, text: str) -> str:
        self.budget = _EXPANSION_BUDGET
        return self.text(text, frozenset())

    def text(self, text: str, active: frozenset[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            j = text.find("$", i)
            if j < 0 or self.budget <= 0:
                out.append(text[i:])
                break
            out.append(text[i:j])
            close = closing_paren(text, j, len(text)) if text[j + 1 : j + 2] in ("(", "{") else -1
            if close < 0 or close >= len(text):
                out.append(text[j : j + 2])
                i = j + 2
                continue
            body = self.text(text[j + 2 : close], active)
            out.append(self.call(body, active))
            i = close + 1
        result = "".join(out)
        self.budget -= len(result)
        return result

    def call(self, body: str, active: frozenset[str]) -> str:
        kept = "$(" + body + ")"
        name, _, args = body.partition(" ")
        args = args.strip()
        if args:
            return _make_function(name, args) or kept
        var, colon, subst = body.partition(":")
        if var not in self.variables or var in active or len(active) > 32:
            return kept
        value = self.text(self.variables[var], active | {var})
        return _substitute(value, subst) if colon else value


def _make_function(name: str, args: str) -> str | None:
    """The file-naming functions' values; None for the others (kept as written)."""
    if name in ("wildcard", "sort", "strip", "dir", "abspath", "realpath"):
        return args
    if name in ("addprefix", "addsuffix"):
        affix, _, items = args.partition(",")
        return " ".join(affix + w if name == "addprefix" else w + affix for w in items.split())
    if name == "shell" and args.split()[0] == "find":
        roots = [w for w in args.split()[1:] if not w.startswith(("-", "(", "!"))][:1]
        return " ".join(f"{r}/**" for r in roots) or None
    return None


def expand_make(text: str, variables: dict[str, str]) -> str:
    return _MakeExpander(variables)(text)


def _substitute(value: str, subst: str) -> str:
    """$(VAR:.c=.o) and $(VAR:%.c=build/%.o)."""
    old, eq, new = subst.partition("=")
    if not eq:
        return value
    if "%" not in old:
        old, new = "%" + old, "%" + new
    head, _, tail = old.partition("%")
    out = []
    for word in value.split():
        if word.startswith(head) and word.endswith(tail) and len(word) >= len(head) + len(tail):
            word = new.replace("%", word[len(head) : len(word) - len(tail)], 1)
        out.append(word)
    return " ".join(out)


def closing_paren(text: str, start: int, end: int) -> int:
    """The offset of the ) or } closing the $( at `start`, or -1 when it is not closed."""
    for i, char, depth in _scan(text, start, end):
        if char in ")}" and depth == 0 and i > start:
            return i
    return -1
