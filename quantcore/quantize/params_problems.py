"""A problem of a quant-params document: where it is (its JSON path) and how it shows what it found.

Shared by the stages that check a document (quantcore.quantize.params_checks, params_semantics,
consistency) and by the file's reader (params_json). Names and values come from a file that may be
hostile: `quoted` shortens a name and escapes what would forge a line or reorder text, `got` shows a value
by its size when it is large, and `Suggest` bounds the "did you mean" searches a document can cause.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from quantcore import display, limits

PathPart = str | int
JsonPath = tuple[PathPart, ...]
Doc = dict[str, Any]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# difflib's ratio above which a name is suggested as the intended one (typos, not merely similar names).
_CLOSE = 0.8


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document: where (`json_path`, and `path` as keys/indices) and what."""

    json_path: str
    message: str
    path: JsonPath = ()
    expected: int | float | None = field(default=None, compare=False)
    """The value that would be right, when one follows from the rest of the document (for quick fixes)."""

    def __str__(self) -> str:
        return f"{self.json_path}: {self.message}"

    @classmethod
    def at(cls, path: JsonPath, message: str, expected: int | float | None = None) -> Problem:
        return cls(json_path(path), message, path, expected)


def json_path(path: Iterable[PathPart]) -> str:
    """`$.tensors["conv1.weight"].zero_point[3]`: keys that are not identifiers are quoted, so unambiguous
    (long keys are shortened, as every name from a file is in messages)."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part) and len(part) <= limits.NAME_MAX_CHARS:
            text += f".{part}"
        else:
            text += f"[{quoted(part)}]"
    return text


def quoted(name: Any) -> str:
    """A name from the file for a message: shortened to NAME_MAX_CHARS, in JSON quotes, with every
    character that is not printable (str.isprintable, as for quantcore.display.one_line: controls, format
    and line-separator characters) as its JSON escape, so a hostile name cannot forge a line or reorder
    text, and the path it is part of stays JSON."""
    text = json.dumps(display.shorten(str(name)), ensure_ascii=False)
    return "".join(c if c.isascii() or c.isprintable() else json.dumps(c)[1:-1] for c in text)


def got(value: Any) -> str:
    """A value the document holds, for "..., got <value>": large arrays and numbers by their size."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return "an object" if value else "{}"
    if isinstance(value, list) and (len(value) > 4 or any(isinstance(v, (dict, list)) for v in value)):
        return f"an array of {len(value)} items"
    if isinstance(value, list):
        return "[" + ", ".join(got(item) for item in value) + "]"
    if isinstance(value, str):
        return quoted(value)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    # An integer of thousands of digits is shown by its size, not printed whole.
    return text if len(text) <= 40 else f"a number of {len(text)} digits"


class Suggest:
    """ "Did you mean" lookups (difflib), at most `budget` per document: each costs a comparison with
    every candidate name."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def close(self, name: str, candidates: Iterable[str]) -> str | None:
        if self.budget <= 0 or len(name) > limits.NAME_MAX_CHARS:
            return None
        self.budget -= 1
        short = [c for c in candidates if len(c) <= limits.NAME_MAX_CHARS]
        found = difflib.get_close_matches(name, short, n=1, cutoff=_CLOSE)
        return found[0] if found else None
