"""Where every value of a JSON document is: JSON path -> span of its key and of its value.

The standard json module gives values without positions, and a finding about `$.tensors["x"].scale`
must point at that line. The document itself is still decoded by json (numbers, strings, escapes);
this scanner only walks the same text to record offsets, so both always agree. It accepts exactly the
JSON that json.loads accepts and assumes the text has already been decoded by it. Both recurse once per
level of nesting, so a document nested deeper than quantcore.limits.JSON_MAX_DEPTH is refused first,
as a JSONDecodeError at its line (every caller already reports those where they are).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fixpoint_server.findings import LineIndex, Span
from quantcore import untrusted

Path = tuple[str | int, ...]
"""A JSON path as keys and indices: ("tensors", "conv1.weight", "scale")."""

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERAL = re.compile(r"true|false|null|NaN|-?Infinity")
_PROBLEM_LINE = re.compile(r"line (\d+): ")


@dataclass(frozen=True)
class Located:
    """A decoded document and the spans of its values (and of object keys)."""

    value: Any
    values: dict[Path, Span]
    keys: dict[Path, Span]
    index: LineIndex

    def span(self, path: Path) -> Span:
        """The value's span, or the closest enclosing value's when `path` is not in the document."""
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.values:
                return self.values[path[:cut]]
        return Span.at(0)

    def key_span(self, path: Path) -> Span:
        return self.keys.get(path) or self.span(path)


def locate(text: str) -> Located:
    """Decode `text` (json.JSONDecodeError as json.loads raises it) and record every value's span."""
    too_deep = untrusted.json_depth_problem(text)
    if too_deep is not None:
        line = _PROBLEM_LINE.match(too_deep)
        at = LineIndex(text).offset(int(line.group(1)) - 1, 0) if line else 0
        raise json.JSONDecodeError(_PROBLEM_LINE.sub("", too_deep, count=1), text, at)
    value = json.loads(text)
    walker = _Walker(text)
    walker.value(walker.skip(0), ())
    return Located(value, walker.values, walker.keys, walker.index)


class _Walker:
    def __init__(self, text: str) -> None:
        self.text = text
        self.index = LineIndex(text)
        self.values: dict[Path, Span] = {}
        self.keys: dict[Path, Span] = {}

    def skip(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int, path: Path) -> int:
        char = self.text[pos]
        if char == "{":
            end = self._object(pos, path)
        elif char == "[":
            end = self._array(pos, path)
        else:
            pattern = _STRING if char == '"' else _NUMBER if char in "-0123456789" else _LITERAL
            if char == "-" and self.text.startswith("-Infinity", pos):
                pattern = _LITERAL
            match = pattern.match(self.text, pos)
            assert match is not None, f"json accepted what the walker cannot read at offset {pos}"
            end = match.end()
        self.values[path] = self.index.span(pos, end)
        return end

    def _object(self, pos: int, path: Path) -> int:
        pos = self.skip(pos + 1)
        if self.text[pos] == "}":
            return pos + 1
        while True:
            key_match = _STRING.match(self.text, pos)
            assert key_match is not None
            key = json.loads(key_match.group())
            self.keys[(*path, key)] = self.index.span(pos, key_match.end())
            pos = self.skip(self.skip(key_match.end()) + 1)  # past the colon
            pos = self.skip(self.value(pos, (*path, key)))
            if self.text[pos] == "}":
                return pos + 1
            pos = self.skip(pos + 1)  # past the comma

    def _array(self, pos: int, path: Path) -> int:
        pos = self.skip(pos + 1)
        if self.text[pos] == "]":
            return pos + 1
        i = 0
        while True:
            pos = self.skip(self.value(pos, (*path, i)))
            if self.text[pos] == "]":
                return pos + 1
            pos, i = self.skip(pos + 1), i + 1
