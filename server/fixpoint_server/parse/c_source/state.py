"""ScanState: what one scan of a C file shares between its readers, passed to them explicitly.

scan.py reads the directives, then builds the state; the statement walker (walker.py) and the
declaration reader (declarations.py) read the code view and the directives' alignment pragmas from it,
and add their facts to `cfile`. The walker also records where each function starts, which scan.py's
call finder reads afterwards to name the function a call is in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fixpoint_server.findings import Span
from fixpoint_server.parse.c_source.cfile import CFile
from fixpoint_server.parse.c_source.facts import Alignment


@dataclass
class ScanState:
    cfile: CFile
    """The facts found so far: the walker appends functions, fields and arrays."""
    code: str
    """The masked text with directives and dead `#if 0` blocks blanked too: what the walker reads."""
    conditions: list[tuple[int, int]] = field(default_factory=list)
    """Where live conditionals open, switch branch and close (conditions.Conditions.events)."""
    pragma_aligns: dict[str, Alignment] = field(default_factory=dict)
    """TI's `#pragma DATA_ALIGN(name, n)` by the variable it names."""
    iar_aligns: list[tuple[int, Alignment]] = field(default_factory=list)
    """IAR's `#pragma data_alignment=n` with its offset: it applies to the declaration that follows."""
    function_starts: list[int] = field(default_factory=list)
    """The offsets of cfile.functions, in the same (sorted) order: written by the walker."""

    @property
    def masked(self) -> str:
        """The masked text, directives and dead branches included (initializers of macros are read there)."""
        return self.cfile.masked

    def span(self, start: int, end: int) -> Span:
        return self.cfile.index.span(start, end)
