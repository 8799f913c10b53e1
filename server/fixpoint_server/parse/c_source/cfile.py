"""CFile: the facts of one C file (facts.py's records) and the values they read on demand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fixpoint_server.findings import LineIndex, Span
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import (
    ArrayDef,
    ArrayKind,
    CallSite,
    Define,
    Element,
    FieldAssignment,
    FunctionDef,
    GeneratedHeader,
    Include,
)
from fixpoint_server.parse.c_source.values import array_elements, array_values


@dataclass
class CFile:
    masked: str
    """The text with comments and literal contents blanked (same length, same lines)."""
    index: LineIndex
    arrays: list[ArrayDef] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    fields: list[FieldAssignment] = field(default_factory=list)
    defines: dict[str, Define] = field(default_factory=dict)
    includes: list[Include] = field(default_factory=list)
    functions: list[FunctionDef] = field(default_factory=list)
    generated: GeneratedHeader | None = None

    def array(self, name: str) -> ArrayDef | None:
        """The definition of `name` in this file (else its extern declaration), if any."""
        found = [a for a in self.arrays if a.name == name]
        return next((a for a in found if a.kind is not ArrayKind.EXTERN), found[0] if found else None)

    def elements(self, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[Element] | None:
        return array_elements(self.masked, array, defines if defines is not None else self.defines)

    def values(self, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[int] | None:
        return array_values(self.masked, array, defines if defines is not None else self.defines)

    def evaluate(self, expr: str) -> int | None:
        return evaluate(expr, self.defines)

    def span(self, start: int, end: int) -> Span:
        return self.index.span(start, end)
