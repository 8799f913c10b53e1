"""Offsets into the masked code: the bracket matching a `(` or `{`, top-level comma-separated items,
ranges with their whitespace stripped. A missing `)` or `}` ends a search at a bound (the next `;`, the
range's end), never in an error.
"""

from __future__ import annotations

import re


def closing_brace(code: str, open_at: int, end: int | None = None) -> tuple[int, int]:
    """(offset of the `}` matching `{` at open_at, where scanning resumes), bounded by the next `;`:
    an initializer never holds one, so a missing `}` cannot swallow the rest of the file."""
    end = len(code) if end is None else end
    limit = code.find(";", open_at, end)
    if limit == -1:
        limit = end
    depth, pos = 1, open_at + 1
    while True:
        close = code.find("}", pos, limit)
        if close == -1:
            return limit, limit
        depth += code.count("{", pos, close) - 1
        if depth <= 0:
            return close, close + 1
        pos = close + 1


def strip_range(code: str, a: int, b: int) -> tuple[int, int]:
    while a < b and code[a].isspace():
        a += 1
    while b > a and code[b - 1].isspace():
        b -= 1
    return a, b


_NESTING = re.compile(r"[()\[\]{},;]")


def split_top_level(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each top-level comma-separated item of code[start:end], whitespace stripped."""
    items, depth, item = [], 0, start
    for match in _NESTING.finditer(code, start, end):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(strip_range(code, item, match.start()))
            item = match.end()
    items.append(strip_range(code, item, end))
    return [(a, b) for a, b in items if a < b]


def split_arguments(code: str, open_paren: int, limit: int = 1 << 16) -> tuple[list[tuple[int, int]], int]:
    """The top-level arguments of the call whose `(` is at open_paren, and the offset after its `)`.

    A broken call stops at the first `;`, `{` or `}` (no argument list holds one), or after `limit`
    characters, with the arguments read so far."""
    depth, item, args = 0, open_paren + 1, []
    for match in _NESTING.finditer(code, open_paren + 1, min(len(code), open_paren + limit)):
        char, at = match.group(), match.start()
        if char in ";{}":
            args.append(strip_range(code, item, at))
            return [(a, b) for a, b in args if a < b], at
        if char in "([":
            depth += 1
        elif char in ")]" and depth > 0:
            depth -= 1
        elif char == ")":
            args.append(strip_range(code, item, at))
            return [(a, b) for a, b in args if a < b], at + 1
        elif char == "," and depth == 0:
            args.append(strip_range(code, item, at))
            item = at + 1
    end = min(len(code), open_paren + limit)
    args.append(strip_range(code, item, end))
    return [(a, b) for a, b in args if a < b], end


_PARENS = re.compile(r"[()]")


def matching_paren(code: str, open_at: int, end: int) -> int:
    """The offset just after the `)` matching `(` at open_at (or `end` when it is missing)."""
    depth = 0
    for match in _PARENS.finditer(code, open_at, end):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.end()
    return end
