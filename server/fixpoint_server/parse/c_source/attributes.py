"""Attribute-like groups of a declaration (`__attribute__((...))`, `ALIGN(16)`, `[[...]]`) and the
alignment they request, in the spellings of GCC/Clang/Arm/IAR/TI/C11 and the CMSIS macros.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from fixpoint_server.parse.c_source.brackets import matching_paren, strip_range
from fixpoint_server.parse.c_source.expr import ELEMENT_SIZES, evaluate
from fixpoint_server.parse.c_source.facts import Alignment, Define
from fixpoint_server.parse.c_source.mask import blank

_ATTRIBUTE_START = re.compile(
    r"\b(__attribute__|__attribute|__declspec|__ALIGNED|ALIGNED|ALIGN|__align|alignas|_Alignas)\s*\(|\[\["
)
_ALIGNED_IN_ATTRIBUTE = re.compile(r"\b(?:__)?align(?:ed)?(?:__)?\b\s*(\()?")
_BARE_ALIGNED = 8
"""`__attribute__((aligned))` without a value is the target's biggest alignment: 8 on Cortex-M."""


@dataclass
class AttributeGroup:
    """An attribute-like group in a declaration: `__attribute__((...))`, `ALIGN(16)`, `[[...]]`."""

    start: int
    end: int
    align_text: str | None = None
    align_start: int = 0
    align_end: int = 0


def attribute_groups(code: str, start: int, end: int) -> list[AttributeGroup]:
    groups: list[AttributeGroup] = []
    pos = start
    while True:
        match = _ATTRIBUTE_START.search(code, pos, end)
        if match is None:
            return groups
        if match.group() == "[[":
            close = code.find("]]", match.end(), end)
            group = AttributeGroup(match.start(), end if close == -1 else close + 2)
            inner = (match.end(), group.end - 2)
        else:
            close = matching_paren(code, match.end() - 1, end)
            group = AttributeGroup(match.start(), close)
            inner = (match.end(), close - 1)
        _find_alignment(code, group, match.group(1), inner)
        groups.append(group)
        pos = max(group.end, match.end())


def _find_alignment(code: str, group: AttributeGroup, word: str | None, inner: tuple[int, int]) -> None:
    a, b = inner
    if word in ("__ALIGNED", "ALIGNED", "ALIGN", "__align", "alignas", "_Alignas"):
        group.align_start, group.align_end = strip_range(code, a, b)
        group.align_text = code[group.align_start : group.align_end]
        return
    match = _ALIGNED_IN_ATTRIBUTE.search(code, a, b)
    if match is None:
        return
    if match.group(1) is None:
        group.align_text, group.align_start, group.align_end = "", match.end(), match.end()
        return
    close = matching_paren(code, match.end() - 1, b)
    group.align_start, group.align_end = strip_range(code, match.end(), close - 1)
    group.align_text = code[group.align_start : group.align_end]


def settled(alignment: Alignment, defines: Mapping[str, Define]) -> Alignment:
    value = align_value(alignment.text, defines)
    return Alignment(value, alignment.text, alignment.span, alignment.value_span)


def align_value(text: str, defines: Mapping[str, Define]) -> int | None:
    if not text:
        return _BARE_ALIGNED
    size = ELEMENT_SIZES.get(" ".join(text.split()))
    return size if size is not None else evaluate(text, defines)  # alignas(int32_t) aligns as the type


def blank_groups(code: str, start: int, end: int, groups: list[AttributeGroup]) -> str:
    pieces, pos = [], start
    for group in groups:
        pieces.append(code[pos : group.start])
        pieces.append(blank(code[group.start : group.end]))
        pos = group.end
    pieces.append(code[pos:end])
    return "".join(pieces)
