"""C identifiers for graph names: ONNX names such as "/layer1/Conv_0" or "x@int16" are not identifiers."""

from __future__ import annotations

import re

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]+")
MAX_CHARS = 64
"""Identifiers are cut to this many characters (a 10,000-character node name would otherwise become a
10,000-character symbol); Symbols keeps them unique with a numeric suffix."""


def c_identifier(name: str) -> str:
    """`name` with every run of non-identifier characters turned into one underscore, at most MAX_CHARS."""
    ident = _NOT_IDENT.sub("_", name).strip("_")[:MAX_CHARS].rstrip("_") or "x"
    return ident if not ident[0].isdigit() else f"_{ident}"


class Symbols:
    """Hands out identifiers unique within one generated program (a suffix settles collisions)."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def unique(self, name: str) -> str:
        base = c_identifier(name)
        candidate, n = base, 2
        while candidate in self._used:
            candidate, n = f"{base}_{n}", n + 1
        self._used.add(candidate)
        return candidate
