"""Hostile names: legal ONNX (and file) names that break C, a linker script or the firmware's protocol if
they reach them unescaped.

Each kind embeds a marker identifier (FXPWN_<n>); the product must keep it inside comments and string
literals. A scan of the generated C (cscan.py) looks for the marker as a token of code.
"""

from __future__ import annotations

from collections.abc import Callable

KINDS: dict[str, Callable[[str], str]] = {
    "comment-end": lambda m: f"a*/ int {m} = 1; /*b",
    "comment-start": lambda m: f"a /* {m}",
    "newline": lambda m: f"a\nint {m} = 1;\nb",
    "cr": lambda m: f"a\rint {m} = 1;\rb",
    "double-quote": lambda m: f'a" {m} "b',
    "single-quote": lambda m: f"a' {m} 'b",
    "backslash": lambda m: f"{m} \\",
    "backslash-newline": lambda m: f"a \\\nint {m} = 1;",
    "hash-directive": lambda m: f"a\n#define {m} 1\n",
    "hash": lambda m: f'#include "{m}.h"',
    "trigraph": lambda m: f"{m} ??/",
    "non-ascii": lambda m: f"ñame_é_中文_🙂 {m}",
    "bidi": lambda m: f"a\u202e {m} \u2066b",
    "control": lambda m: f"a\x01\x07\x1b[31m {m}\x7f",
    "format": lambda m: f"%s%n%x {m} {{0}}",
    "make": lambda m: f"$(shell false) `false` {m}",
    "long": lambda m: "A" * 9990 + f" {m}",
}
"""kind -> hostile text around a marker. Every character is legal in an ONNX name (UTF-8, no NUL)."""

FILE_KINDS = ("newline", "double-quote", "backslash", "control")
"""Kinds tried in file names (legal there: no '/', at most 255 bytes)."""

GRAPH_PLACEMENTS = ("node", "tensor", "input", "output", "graph")
"""Where in the model a case puts the hostile text: every node name, every tensor name (initializers and
activations), the graph's input, its output, the graph's own name."""

FILE_PLACEMENTS = ("model-file", "params-file")
"""File names: the ONNX model's and the quant-params JSON's (both named in every generated header)."""

FULL_MATRIX_PLACEMENTS = ("node",)
"""Placements tried with every kind; the others get CORE_KINDS (the corpus must run in minutes)."""

CORE_KINDS = ("comment-end", "newline", "double-quote", "trigraph")


def marker(index: int) -> str:
    return f"FXPWN_{index}"


def selection() -> list[tuple[str, str]]:
    """(kind, placement) pairs the corpus runs."""
    pairs = [(kind, place) for place in FULL_MATRIX_PLACEMENTS for kind in KINDS]
    others = [place for place in GRAPH_PLACEMENTS if place not in FULL_MATRIX_PLACEMENTS]
    pairs += [(kind, place) for place in others for kind in CORE_KINDS]
    pairs += [(kind, place) for place in FILE_PLACEMENTS for kind in FILE_KINDS]
    return pairs
