"""The masked view of a C text: comments and the inside of string and character literals blanked,
every offset and line break kept, so the scan can use str.find and regexes on code alone.
"""

from __future__ import annotations

import re

CONTINUATION = re.compile(r"\\\r?\n")
"""A backslash-newline: a define's value is its lines joined where these are."""


def mask(text: str) -> str:
    """`text` with comments and the inside of string/char literals replaced by spaces (newlines kept).

    Literals keep their quotes, so `extern "C"` stays recognisable. An unterminated comment runs to
    the end of the text, an unterminated literal to the end of its line, as a compiler reads them.
    Each of `/ " '` is looked for with str.find, and again only once passed: a table of numbers
    without them costs three C-level scans.
    """
    pieces: list[str] = []
    pos, n = 0, len(text)
    ahead = {c: text.find(c) for c in "/\"'"}
    while True:
        live = [p for p in ahead.values() if p != -1]
        if not live:
            break
        start = min(live)
        end, quote = _masked_token(text, start, n)
        if end > start + 1 or quote:  # a comment or a literal (a lone `/` is a division)
            inner = blank(text[start + len(quote) : end - len(quote)])
            pieces.extend((text[pos:start], quote, inner, quote))
            pos = end
        resume = max(end, start + 1)
        for char, at in ahead.items():
            if at != -1 and at < resume:
                ahead[char] = text.find(char, resume)
    pieces.append(text[pos:])
    return "".join(pieces)


def _masked_token(text: str, start: int, n: int) -> tuple[int, str]:
    """(end, quote) of the comment or literal at `start`; end = start + 1 for a lone `/`."""
    char = text[start]
    if char == "/":
        after = text[start + 1 : start + 2]
        if after == "*":
            close = text.find("*/", start + 2)
            return (n if close == -1 else close + 2), ""
        if after == "/":
            return line_end(text, start, n), ""
        return start + 1, ""
    end = start + 1
    while end < n:
        c = text[end]
        if c == char or c == "\n":
            break
        end += 2 if c == "\\" else 1
    end = min(end, n)
    if end < n and text[end] == char:
        return end + 1, char
    return end, ""  # unterminated: blank it whole, up to the line break


def line_end(text: str, start: int, n: int) -> int:
    """The end of a line, following backslash continuations (as a `//` comment or a directive does)."""
    end = text.find("\n", start)
    while end != -1 and _continued(text, end):
        end = text.find("\n", end + 1)
    return n if end == -1 else end


def _continued(text: str, newline: int) -> bool:
    before = newline - 1
    if before >= 0 and text[before] == "\r":
        before -= 1
    return before >= 0 and text[before] == "\\"


def blank(s: str) -> str:
    """Spaces in place of `s`, its line breaks kept (offsets and line numbers do not move)."""
    if "\n" not in s:
        return " " * len(s)
    return "\n".join(" " * len(line) for line in s.split("\n"))
