"""C identifiers for graph names: ONNX names such as "/layer1/Conv_0" or "x@int16" are not identifiers.

Names from converted models are long (TensorFlow's run to hundreds of characters), so a name gives at
most NAME_PART characters of a symbol and every generated identifier stays within IDENTIFIER_MAX: the
63 significant initial characters C99 guarantees for an internal identifier (5.2.4.1), which also keeps
compiler messages and the editor's outline readable. The full name, shown safely (quantcore.display), is
in the comment beside each symbol's definition. Symbols are unique (a numeric suffix settles collisions)
and deterministic: the same graph gives the same symbols.
"""

from __future__ import annotations

import re

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]+")
IDENTIFIER_MAX = 63
NAME_PART = 32
"""Characters of a name kept in a symbol (c_identifier cuts there)."""


def c_identifier(name: str, limit: int = NAME_PART) -> str:
    """`name` with every run of non-identifier characters turned into one underscore, at most `limit`
    characters; never starts with a digit."""
    ident = _NOT_IDENT.sub("_", name).strip("_")[:limit].rstrip("_") or "x"
    return ident if not ident[0].isdigit() else f"_{ident[: limit - 1]}"


class Symbols:
    """Hands out identifiers unique within one generated program (a suffix settles collisions)."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def unique(self, name: str) -> str:
        """A fresh identifier from `name`: its c_identifier, then "_2", "_3", ... while that is taken."""
        base = c_identifier(name)
        candidate, n = base, 2
        while candidate in self._used:
            candidate, n = f"{base}_{n}", n + 1
        self._used.add(candidate)
        return candidate
