"""Array declarations: `[quals] type name[dims] [attrs] [= init];` read from one statement into an
ArrayDef, with its element count, alignment and the spans a quick fix needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fixpoint_server.parse.c_source.attributes import (
    _align_value,
    _attribute_groups,
    _blank_groups,
    _Group,
    _settled,
)
from fixpoint_server.parse.c_source.brackets import _strip
from fixpoint_server.parse.c_source.expr import ELEMENT_SIZES, evaluate
from fixpoint_server.parse.c_source.facts import Alignment, ArrayDef, ArrayKind
from fixpoint_server.parse.c_source.values import _initializer_count

if TYPE_CHECKING:
    from fixpoint_server.parse.c_source.scan import _Scanner


_QUALIFIERS = frozenset({
    "static", "const", "extern", "volatile", "register", "inline", "__inline", "__inline__", "restrict",
    "__restrict", "auto", "thread_local", "_Thread_local", "__thread", "__I", "__O", "__IO", "__root",
    "__no_init", "PROGMEM",
})  # fmt: skip
_NOT_DECLARATION = frozenset({
    "return", "if", "else", "while", "for", "do", "switch", "case", "goto", "sizeof", "typedef", "break",
    "continue", "default",
})  # fmt: skip
_BUILTIN_TYPE_WORDS = frozenset(
    {"unsigned", "signed", "short", "long", "int", "char", "float", "double", "_Bool"}
)


class _Declaration:
    """Reads one statement that may declare an array: `[quals] type name[dims] [attrs] [= init];`."""

    def __init__(self, s: _Scanner, start: int, end: int, init: tuple[int, int] | None, function: str | None):
        self.s, self.code = s, s.code
        self.start, self.end, self.init, self.function = start, end, init, function
        self.groups: list[_Group] = []

    def read(self) -> None:
        code = self.code
        if self.init is not None:
            eq: int | None = code.rfind("=", self.start, self.init[0])
        else:
            eq = _top_level_eq(code, self.start, self.end)
        eq = None if eq == -1 else eq
        head_end = eq if eq is not None else self.end
        self.groups = _attribute_groups(code, self.start, head_end)
        cleaned = _blank_groups(code, self.start, head_end, self.groups)
        bracket = cleaned.find("[")
        name = re.search(r"([A-Za-z_]\w*)\s*$", cleaned[:bracket]) if bracket > 0 else None
        if name is None:
            return
        words = self.specifiers(cleaned[: name.start()])
        if words is None:
            return
        dims, dims_end = _dims(cleaned, bracket)
        if dims is None:
            return
        self.record(words, name, dims, bracket, dims_end, eq, cleaned)

    def specifiers(self, spec: str) -> list[tuple[str, int, int]] | None:
        """The words before the declarator with their offsets; None when this is no declaration."""
        spec = re.sub(r"\b[A-Za-z_]\w*\s*\([^()]*\)", lambda m: " " * len(m.group()), spec)
        if not re.fullmatch(r"[\w\s]*", spec):
            return None
        words = [(m.group(), self.start + m.start(), self.start + m.end()) for m in re.finditer(r"\w+", spec)]
        if not words or any(w in _NOT_DECLARATION for w, _, _ in words) or words[0][0][0].isdigit():
            return None
        return words

    def record(
        self, words: list[tuple[str, int, int]], name: re.Match[str], dims: list[tuple[int, int]],
        bracket: int, dims_end: int, eq: int | None, cleaned: str,
    ) -> None:  # fmt: skip
        s, base = self.s, self.start
        type_words = _type_words([w for w, _, _ in words])
        if not type_words:
            return
        type_parts = words[len(words) - len(type_words) :]
        qualifiers = tuple(w for w, _, _ in words[: len(words) - len(type_words)])
        ctype = " ".join(type_words)
        dim_texts = tuple(cleaned[a:b].strip() for a, b in dims)
        init_range = self.initializer(eq)
        kind = self.kind(qualifiers, eq)
        array = ArrayDef(
            name=name.group(1),
            ctype=ctype,
            qualifiers=qualifiers,
            dims=dim_texts,
            count=self.count(dim_texts, init_range),
            elem_size=ELEMENT_SIZES.get(ctype),
            kind=kind,
            align=self.alignment(name.group(1), [w for w, _, _ in words], dims_end, cleaned),
            span=s.span(base + _first_word(cleaned), self.end + 1 if self.end < len(self.code) else self.end),
            name_span=s.span(base + name.start(1), base + name.end(1)),
            type_span=s.span(type_parts[0][1], type_parts[-1][2]),
            dims_span=s.span(base + bracket, base + dims_end),
            init_span=s.span(*init_range) if init_range else None,
            start=base + _first_word(cleaned),
            end=self.end,
            dims_start=base + bracket,
            dims_end=base + dims_end,
            init_start=init_range[0] if init_range else None,
            init_end=init_range[1] if init_range else None,
            function=self.function if kind is ArrayKind.LOCAL else None,
        )
        s.cfile.arrays.append(array)

    def kind(self, qualifiers: tuple[str, ...], eq: int | None) -> ArrayKind:
        if self.function is not None:
            return ArrayKind.LOCAL
        if "extern" in qualifiers and eq is None:
            return ArrayKind.EXTERN
        return ArrayKind.DEFINITION

    def initializer(self, eq: int | None) -> tuple[int, int] | None:
        if self.init is not None:
            return self.init[0], min(self.init[1] + 1, len(self.code))
        if eq is None:
            return None
        a, b = _strip(self.code, eq + 1, self.end)
        return (a, b) if a < b else None

    def count(self, dims: tuple[str, ...], init: tuple[int, int] | None) -> int | None:
        defines = self.s.cfile.defines
        values = [evaluate(d, defines) if d else None for d in dims]
        if dims and not dims[0] and init is not None and all(v is not None for v in values[1:]):
            outer = _initializer_count(self.s.masked, init, defines)
            values[0] = outer
        total = 1
        for value in values:
            if value is None or value < 0:
                return None
            total *= value
        return total

    def alignment(self, name: str, words: list[str], dims_end: int, cleaned: str) -> Alignment | None:
        s = self.s
        found = []
        for group in self.groups:
            if group.align_text is not None:
                value = _align_value(group.align_text, s.cfile.defines)
                where = s.span(group.align_start, group.align_end) if group.align_text else None
                found.append(Alignment(value, group.align_text, s.span(group.start, group.end), where))
        for match in re.finditer(r"[A-Za-z_]\w*", cleaned[dims_end:]):
            words.append(match.group())
        found.extend(self.macro_alignments(words))
        if name in s.pragma_aligns:
            found.append(_settled(s.pragma_aligns[name], s.cfile.defines))
        found.extend(_settled(a, s.cfile.defines) for at, a in s.iar_aligns if self.start <= at < self.end)
        if not found:
            return None
        # Several requests: compilers use the strictest (GCC: "the largest alignment wins").
        return max(found, key=lambda a: -1 if a.value is None else a.value)

    def macro_alignments(self, words: list[str]) -> Iterator[Alignment]:
        """Alignment hidden in an object-like macro: `#define ALIGN16 __attribute__((aligned(16)))`."""
        defines = self.s.cfile.defines
        for word in words:
            define = defines.get(word)
            if define is None or define.params is not None or "align" not in define.value.lower():
                continue
            for group in _attribute_groups(define.value, 0, len(define.value)):
                if group.align_text is not None:
                    value = _align_value(group.align_text, defines)
                    yield Alignment(value, group.align_text, define.name_span, None)


def _first_word(cleaned: str) -> int:
    match = re.search(r"\S", cleaned)
    return match.start() if match else 0


_EQ_OR_BRACKET = re.compile(r"[\[\]()]|(?<![=!<>+\-*/%&|^])=(?!=)")


def _top_level_eq(code: str, start: int, end: int) -> int | None:
    """The `=` of a declaration's initializer (not `==`, `<=` ...), outside brackets."""
    depth = 0
    for match in _EQ_OR_BRACKET.finditer(code, start, end):
        char = match.group()
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif depth == 0:
            return match.start()
    return None


def _dims(cleaned: str, bracket: int) -> tuple[list[tuple[int, int]] | None, int]:
    """(inner ranges of each `[...]` from `bracket`, offset after the last `]`), relative to cleaned."""
    dims, pos, n = [], bracket, len(cleaned)
    while pos < n and cleaned[pos] == "[":
        depth, i = 0, pos
        while i < n:
            if cleaned[i] == "[":
                depth += 1
            elif cleaned[i] == "]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if i >= n:
            return None, pos
        dims.append((pos + 1, i))
        pos = i + 1
        while pos < n and cleaned[pos] in " \t\r\n":
            pos += 1
    end = pos
    while end > bracket and cleaned[end - 1] in " \t\r\n":
        end -= 1
    return dims, end


def _type_words(words: list[str]) -> list[str]:
    """The element type at the end of the specifiers: builtin words together, `struct X`, or a name."""
    words = [w for w in words if w not in _QUALIFIERS]
    if not words:
        return []
    if words[-1] in _BUILTIN_TYPE_WORDS:
        i = len(words)
        while i > 0 and words[i - 1] in _BUILTIN_TYPE_WORDS:
            i -= 1
        return words[i:]
    if len(words) >= 2 and words[-2] in ("struct", "union", "enum"):
        return words[-2:]
    return words[-1:]
