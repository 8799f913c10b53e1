"""Initializer values, parsed only when a rule asks: the `{...}` list of an array (or of the macro it
is initialized with), its integer elements with their offsets, and a count of its items.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fixpoint_server.parse.c_source.brackets import closing_brace
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import ArrayDef, Define, Element
from fixpoint_server.parse.c_source.mask import CONTINUATION, mask

_ITEM = re.compile(r"[^,\s{}\\](?:[^,{}\\\n]*[^,\s{}\\])?")
_PLAIN_INT = re.compile(r"[-+]?(?:[1-9]\d*|0)")


def initializer_list(
    masked: str, array: ArrayDef, defines: Mapping[str, Define] | None = None
) -> tuple[int, int] | None:
    """(offset of `{`, offset after `}`) of the array's value list: its own, or that of the macro it
    is initialized with (`= CONV1_BIAS;` with `#define CONV1_BIAS {...}` in the same file)."""
    if array.init_start is None or array.init_end is None:
        return None
    if masked[array.init_start : array.init_start + 1] == "{":
        return array.init_start, array.init_end
    name = masked[array.init_start : array.init_end].strip()
    define = (defines or {}).get(name)
    if (
        define is None
        or define.params is not None
        or masked[define.value_start : define.value_start + 1] != "{"
    ):
        return None
    if CONTINUATION.sub(" ", masked[define.value_start : define.value_end]) != define.value:
        return None  # the macro is another file's: its offsets are not in this text
    close = masked.rfind("}", define.value_start, define.value_end)
    return (define.value_start, close + 1) if close != -1 else None


def array_elements(
    text: str, array: ArrayDef, defines: Mapping[str, Define] | None = None
) -> list[Element] | None:
    """The array's initializer values with their offsets; None when one is not an integer constant
    (floats, strings, designators, unknown macros) or there is no initializer list. Nested lists are
    flattened in order. `text` is the file's text (masked or not)."""
    region = initializer_list(text, array, defines)
    if region is None:
        return None
    start, end = region
    body = mask(text[start:end]) if "/" in text[start:end] or '"' in text[start:end] else text[start:end]
    elements = []
    for match in _ITEM.finditer(body):
        token = match.group()
        value = int(token) if _PLAIN_INT.fullmatch(token) and token.lstrip("+-")[:1] != "0" else None
        if value is None:
            value = 0 if token in ("0", "-0", "+0") else evaluate(token, defines)
        if value is None:
            return None
        elements.append(Element(value, start + match.start(), start + match.end()))
    return elements


def array_values(text: str, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[int] | None:
    """The array's initializer as integers (see array_elements), parsed only now."""
    elements = array_elements(text, array, defines)
    return None if elements is None else [e.value for e in elements]


def initializer_count(masked: str, init: tuple[int, int], defines: Mapping[str, Define]) -> int | None:
    """How many top-level items the initializer list has, counted with str.count (no values parsed)."""
    start, end = init
    if masked[start : start + 1] != "{":
        name = masked[start:end].strip()
        define = defines.get(name)
        if define is None or masked[define.value_start : define.value_start + 1] != "{":
            return None
        start, end = define.value_start, define.value_end
    close = masked.rfind("}", start, end)
    if close == -1:
        return None
    return _count_items(masked, start + 1, close)


def _count_items(code: str, a: int, b: int) -> int | None:
    if code.find("{", a, b) == -1:
        return _flat_count(code, a, b)
    count, pos = 0, a
    while True:
        inner = code.find("{", pos, b)
        gap = code[pos : inner if inner != -1 else b]
        if gap.replace(",", "").strip():
            return None  # a mix of lists and plain values: not a shape worth guessing
        if inner == -1:
            return count
        close, _ = closing_brace(code, inner, b)
        count, pos = count + 1, close + 1


def _flat_count(code: str, a: int, b: int) -> int:
    if re.compile(r"\S").search(code, a, b) is None:
        return 0
    last = b - 1
    while last > a and code[last].isspace():
        last -= 1
    return code.count(",", a, b) + (0 if code[last] == "," else 1)
