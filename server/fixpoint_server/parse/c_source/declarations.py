"""Array declarations: `[quals] type name[dims] [attrs] [= init], name2[dims] ...;` read from one
statement into one ArrayDef per array declarator, with its element count, alignment and the spans a
quick fix needs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from fixpoint_server.parse.c_source.attributes import (
    AttributeGroup,
    align_value,
    attribute_groups,
    blank_groups,
    settled,
)
from fixpoint_server.parse.c_source.brackets import strip_range
from fixpoint_server.parse.c_source.expr import ELEMENT_SIZES, evaluate
from fixpoint_server.parse.c_source.facts import Alignment, ArrayDef, ArrayKind
from fixpoint_server.parse.c_source.state import ScanState
from fixpoint_server.parse.c_source.values import initializer_count

QUALIFIERS = frozenset({
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


@dataclass
class _Declarator:
    """One declarator of a declaration, `name[dims] [attrs] [= init]`, read over the code view."""

    start: int
    """Where its text starts (for the first: the declaration's first character)."""
    end: int
    """Where it ends: the `,` or `;` after it."""
    init: tuple[int, int] | None
    """(offset of `{`, offset of its `}`) of a brace initializer the walker jumped over."""
    eq: int | None
    groups: list[AttributeGroup]
    """Attribute groups in start..head_end."""
    cleaned: str
    """Its text up to its `=` (or end) with the attribute groups blanked."""


class Declaration:
    """Reads one statement that may declare arrays: `[quals] type d1, d2 ...;` where each declarator
    is `name[dims] [attrs] [= init]`. Every such declarator is an ArrayDef of its own (its name, dims,
    alignment, initializer); pointers, functions and scalars among them are skipped. Attributes among the
    specifiers apply to every declarator, those inside a declarator to that one only (as GCC reads them)."""

    def __init__(
        self, s: ScanState, start: int, end: int, inits: list[tuple[int, int]], function: str | None
    ) -> None:
        self.s, self.code = s, s.code
        self.start, self.end, self.inits, self.function = start, end, inits, function
        self.shared: list[AttributeGroup] = []
        """Attribute groups among the specifiers."""
        self.words: list[tuple[str, int, int]] = []
        """The specifier words with their offsets."""
        self.first = start
        """The declaration's first word."""

    def read(self) -> None:
        items = [
            self.declarator(a, b, init) for a, b, init in _items(self.code, self.start, self.end, self.inits)
        ]
        declares, first = self.head(items[0])
        if not declares:
            return
        found = [(items[0], first)] if first is not None else []
        for item in items[1:]:
            match = _LATER_DECLARATOR.match(item.cleaned)
            if match is not None:
                found.append((item, match))
        for index, (item, name) in enumerate(found):
            self.record(item, name, len(items), first=index == 0 and first is not None)

    def declarator(self, start: int, end: int, init: tuple[int, int] | None) -> _Declarator:
        code = self.code
        if init is not None:
            eq: int | None = code.rfind("=", start, init[0])
        else:
            eq = _top_level_eq(code, start, end)
        eq = None if eq == -1 else eq
        head_end = eq if eq is not None else end
        groups = attribute_groups(code, start, head_end)
        return _Declarator(start, end, init, eq, groups, blank_groups(code, start, head_end, groups))

    def head(self, item: _Declarator) -> tuple[bool, re.Match[str] | None]:
        """Read the specifiers from the first declarator: (whether this is a declaration, the match of
        the first declarator's name (group 1) when it declares an array)."""
        cleaned = item.cleaned
        bracket = cleaned.find("[")
        end = bracket if bracket > 0 else len(cleaned)
        name = _LAST_NAME.search(cleaned, 0, end)
        if name is None:
            return False, None
        spec = _MACRO_CALL.sub(lambda m: " " * len(m.group()), cleaned[: name.start()])
        punctuation = _NOT_WORD.search(spec)
        plain_end = len(spec) if punctuation is None else punctuation.start()
        pointer = punctuation is not None
        if pointer and not _POINTER.fullmatch(spec, plain_end):
            return False, None
        words = [
            (m.group(), item.start + m.start(), item.start + m.end())
            for m in _WORD.finditer(spec, 0, plain_end)
        ]
        if not words or any(w in _NOT_DECLARATION for w, _, _ in words) or words[0][0][0].isdigit():
            return False, None
        if not _type_words([w for w, _, _ in words]):
            return False, None
        self.words, self.first = words, item.start + _first_word(cleaned)
        before = item.start + name.start()
        self.shared = [g for g in item.groups if g.start < before]
        item.groups = [g for g in item.groups if g.start >= before]
        return True, None if pointer or bracket <= 0 else name

    def record(self, item: _Declarator, name: re.Match[str], declarators: int, first: bool) -> None:
        s, base, cleaned = self.s, item.start, item.cleaned
        bracket = cleaned.find("[", name.end(1))
        dims, dims_end = _dims(cleaned, bracket)
        if dims is None:
            return
        words = [w for w, _, _ in self.words]
        type_words = _type_words(words)
        type_parts = self.words[len(self.words) - len(type_words) :]
        qualifiers = tuple(words[: len(words) - len(type_words)])
        ctype = " ".join(type_words)
        dim_texts = tuple(cleaned[a:b].strip() for a, b in dims)
        init_range = self.initializer(item)
        kind = self.kind(qualifiers, item.eq)
        array = ArrayDef(
            name=name.group(1),
            ctype=ctype,
            qualifiers=qualifiers,
            dims=dim_texts,
            count=self.count(dim_texts, init_range),
            elem_size=ELEMENT_SIZES.get(ctype),
            kind=kind,
            align=self.alignment(item, name, dims_end, first),
            span=s.span(self.first, self.end + 1 if self.end < len(self.code) else self.end),
            name_span=s.span(base + name.start(1), base + name.end(1)),
            type_span=s.span(type_parts[0][1], type_parts[-1][2]),
            dims_span=s.span(base + bracket, base + dims_end),
            init_span=s.span(*init_range) if init_range else None,
            start=self.first,
            end=self.end,
            dims_start=base + bracket,
            dims_end=base + dims_end,
            init_start=init_range[0] if init_range else None,
            init_end=init_range[1] if init_range else None,
            function=self.function if kind is ArrayKind.LOCAL else None,
            declarators=declarators,
        )
        s.cfile.arrays.append(array)

    def kind(self, qualifiers: tuple[str, ...], eq: int | None) -> ArrayKind:
        if self.function is not None:
            return ArrayKind.LOCAL
        if "extern" in qualifiers and eq is None:
            return ArrayKind.EXTERN
        return ArrayKind.DEFINITION

    def initializer(self, item: _Declarator) -> tuple[int, int] | None:
        if item.init is not None:
            return item.init[0], min(item.init[1] + 1, len(self.code))
        if item.eq is None:
            return None
        a, b = strip_range(self.code, item.eq + 1, item.end)
        return (a, b) if a < b else None

    def count(self, dims: tuple[str, ...], init: tuple[int, int] | None) -> int | None:
        defines = self.s.cfile.defines
        values = [evaluate(d, defines) if d else None for d in dims]
        if dims and not dims[0] and init is not None and all(v is not None for v in values[1:]):
            outer = initializer_count(self.s.masked, init, defines)
            values[0] = outer
        total = 1
        for value in values:
            if value is None or value < 0:
                return None
            total *= value
        return total

    def alignment(
        self, item: _Declarator, name: re.Match[str], dims_end: int, first: bool
    ) -> Alignment | None:
        """The strictest alignment requested for this declarator: the specifiers' attributes and macros,
        its own, a TI `#pragma DATA_ALIGN(name, n)`, and (for the first declarator, the variable that
        follows it) an IAR `#pragma data_alignment`."""
        s = self.s
        found = []
        for group in (*self.shared, *item.groups):
            if group.align_text is not None:
                value = align_value(group.align_text, s.cfile.defines)
                where = s.span(group.align_start, group.align_end) if group.align_text else None
                found.append(Alignment(value, group.align_text, s.span(group.start, group.end), where))
        words = [w for w, _, _ in self.words]
        if not first:  # the words before a later declarator's name: `, ALIGN16 b[4]`
            words.extend(m.group() for m in _WORD.finditer(item.cleaned, 0, name.start(1)))
        words.extend(m.group() for m in _WORD.finditer(item.cleaned, dims_end))
        found.extend(self.macro_alignments(words))
        if name.group(1) in s.pragma_aligns:
            found.append(settled(s.pragma_aligns[name.group(1)], s.cfile.defines))
        if first:
            found.extend(settled(a, s.cfile.defines) for at, a in s.iar_aligns if self.start <= at < self.end)
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
            for group in attribute_groups(define.value, 0, len(define.value)):
                if group.align_text is not None:
                    value = align_value(group.align_text, defines)
                    yield Alignment(value, group.align_text, define.name_span, None)


_WORD = re.compile(r"\w+")
_LAST_NAME = re.compile(r"([A-Za-z_]\w*)\s*$")
_MACRO_CALL = re.compile(r"\b[A-Za-z_]\w*\s*\([^()]*\)")
_NOT_WORD = re.compile(r"[^\w\s]")
_POINTER = re.compile(r"\*[\s*\w]*")
"""What may stand between the specifiers and the name of a pointer: `* const *`."""
_LATER_DECLARATOR = re.compile(r"\s*(?:[A-Za-z_]\w*\s+)*([A-Za-z_]\w*)\s*\[")
"""A declarator after a comma that declares an array: `b[16]`, or `A16 b[16]` with a macro before it."""
_ITEM_SPLIT = re.compile(r"[()\[\],]")


def _items(
    code: str, start: int, end: int, inits: list[tuple[int, int]]
) -> list[tuple[int, int, tuple[int, int] | None]]:
    """(start, end, brace initializer) of each top-level comma-separated declarator of the statement
    code[start:end]. The initializer bodies the walker jumped over are not searched again: a 50 MB table
    is skipped, and the commas inside it split nothing."""
    if len(inits) < 2 and not occurs_outside(code, ",", start, end, inits):  # one declarator: most statements
        return [(start, end, inits[0] if inits else None)]
    items: list[tuple[int, int, tuple[int, int] | None]] = []
    depth, item, item_init, pos = 0, start, None, start
    for init in [*inits, None]:
        for match in _ITEM_SPLIT.finditer(code, pos, end if init is None else init[0]):
            char = match.group()
            if char in "([":
                depth += 1
            elif char in ")]":
                depth = max(depth - 1, 0)
            elif depth == 0:
                items.append((item, match.start(), item_init))
                item, item_init = match.end(), None
        if init is None:
            break
        item_init = item_init or init
        pos = init[1] + 1
    items.append((item, end, item_init))
    return items


def occurs_outside(code: str, char: str, start: int, end: int, inits: list[tuple[int, int]]) -> bool:
    """Whether `char` is in code[start:end] outside the initializer bodies (which are not searched)."""
    pos = start
    for open_at, close in inits:
        if code.find(char, pos, open_at) != -1:
            return True
        pos = close + 1
    return code.find(char, pos, end) != -1


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
    words = [w for w in words if w not in QUALIFIERS]
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
