"""CMake's syntax: commands and their arguments (quoted, bracketed, unquoted; comments and bracket
comments skipped), a list argument's items, and the value a generator expression yields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_BRACKET = re.compile(r"\[(=*)\[")


@dataclass
class Arg:
    text: str
    start: int
    end: int
    outer: tuple[int, int]
    """With the quotes or brackets."""


@dataclass
class Command:
    name: str
    start: int
    name_end: int
    args: list[Arg]
    close: int


def read_commands(text: str) -> Iterable[Command]:
    pos, n = 0, len(text)
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    while pos < n:
        if text[pos] == "#":
            pos = _skip_comment(text, pos)
            continue
        match = ident.match(text, pos)
        if match is None:
            pos += 1
            continue
        paren = match.end()
        while paren < n and text[paren] in " \t":
            paren += 1
        if paren >= n or text[paren] != "(":
            pos = match.end()
            continue
        args, close = _cmake_args(text, paren + 1)
        yield Command(match[0], match.start(), match.end(), args, close)
        pos = close + 1


def _skip_comment(text: str, pos: int) -> int:
    bracket = _BRACKET.match(text, pos + 1)
    if bracket:
        close = text.find("]" + bracket[1] + "]", bracket.end())
        return len(text) if close < 0 else close + len(bracket[0])
    newline = text.find("\n", pos)
    return len(text) if newline < 0 else newline


def _cmake_args(text: str, pos: int) -> tuple[list[Arg], int]:
    """The arguments from after '(' to the matching ')' (or the end of an unterminated command)."""
    args: list[Arg] = []
    depth, n = 0, len(text)
    while pos < n:
        char = text[pos]
        bracket = _BRACKET.match(text, pos) if char == "[" else None
        if char in " \t\r\n":
            pos += 1
        elif char == "#":
            pos = _skip_comment(text, pos)
        elif char in "()":
            if char == ")" and depth == 0:
                return args, pos
            depth += 1 if char == "(" else -1
            pos += 1
        elif char == '"':
            end = _quoted_end(text, pos + 1)
            args.append(Arg(text[pos + 1 : end], pos + 1, end, (pos, min(end + 1, n))))
            pos = end + 1
        elif bracket:
            close = text.find("]" + bracket[1] + "]", bracket.end())
            close = n if close < 0 else close
            args.append(
                Arg(
                    text[bracket.end() : close],
                    bracket.end(),
                    close,
                    (pos, min(close + 2 + len(bracket[1]), n)),
                )
            )
            pos = close + 2 + len(bracket[1])
        else:
            end = _unquoted_end(text, pos)
            args.append(Arg(text[pos:end], pos, end, (pos, end)))
            pos = end
    return args, n


def _quoted_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return min(pos, len(text))


def _unquoted_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] not in " \t\r\n()":
        if text[pos] == '"':
            pos = _quoted_end(text, pos + 1)
        pos += 2 if text[pos : pos + 1] == "\\" else 1
    return min(pos, len(text))


def split_items(text: str, start: int) -> list[tuple[str, int]]:
    """A CMake argument's list items (';' or blank separated), genex and ${} kept whole."""
    items: list[tuple[str, int]] = []
    depth, begin = 0, -1
    for i, char in enumerate(text):
        if char == "$" and text[i + 1 : i + 2] in ("{", "<"):
            depth += 1
        elif char in "}>" and depth > 0:
            depth -= 1
        if char in " \t\r\n;" and depth == 0:
            if begin >= 0:
                items.append((text[begin:i], start + begin))
            begin = -1
        elif begin < 0:
            begin = i
    if begin >= 0:
        items.append((text[begin:], start + begin))
    return items


def genex_inner(text: str) -> tuple[str, int] | None:
    """The value a `$<cond:value>` yields and its offset in `text`; None when it yields nothing useful."""
    match = re.match(r"\$<.*:", text)
    if match is None:
        return None
    inner = text[match.end() :].rstrip(">")
    return (inner, match.end()) if inner and "<" not in inner and ">" not in inner else None
