"""CWorkspace: the facts of several C files taken together, for the rules that follow an array or a
macro from the file that uses it to the file that defines it."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping
from pathlib import Path

from fixpoint_server.parse.c_source.attributes import align_value
from fixpoint_server.parse.c_source.cfile import CFile
from fixpoint_server.parse.c_source.expr import evaluate
from fixpoint_server.parse.c_source.facts import (
    ArrayDef,
    ArrayKind,
    CallSite,
    Define,
    Element,
    FieldAssignment,
)


class CWorkspace:
    """The facts of several C files taken together: a file sees its own macros first, then every
    other file's (the generated model.c sizes its arena with MODEL_ARENA_BYTES from model.h), and an
    array passed in one file is defined in another."""

    def __init__(self, files: Mapping[Path, CFile]) -> None:
        self.files = dict(files)
        # Sorted by string: Path's own ordering costs ~5 us a comparison, 10 ms for a 2,000-file tree.
        self.order = sorted(self.files, key=str)
        self._by_path: tuple[list[Path], list[Path]] | None = None
        """(a copy of `order`, the same files in Path order), for path_order."""
        self.defines: dict[str, Define] = {}
        self._arrays: dict[str, list[tuple[Path, ArrayDef]]] = {}
        self._fields: dict[str, list[tuple[Path, FieldAssignment]]] = {}
        for path in self.order:
            cfile = self.files[path]
            for name, define in cfile.defines.items():
                self.defines.setdefault(name, define)
            for array in cfile.arrays:
                self._arrays.setdefault(array.name, []).append((path, array))
            for assignment in cfile.fields:
                self._fields.setdefault(assignment.var, []).append((path, assignment))

    def path_order(self) -> list[Path]:
        """The files in Path's own order (which differs from `order` where a name sorts before "/", as
        "a-b" and "a/b"), sorted again only when the files listed change (a 2,000-file tree costs
        milliseconds to sort by Path)."""
        if self._by_path is None or self._by_path[0] != self.order:  # one identity check per file
            self._by_path = (list(self.order), sorted(self.order))
        return self._by_path[1]

    def defines_for(self, path: Path) -> Mapping[str, Define]:
        return ChainMap(self.files[path].defines, self.defines) if path in self.files else self.defines

    def calls(self) -> Iterator[tuple[Path, CallSite]]:
        for path in self.order:
            for call in self.files[path].calls:
                yield path, call

    def arrays(self) -> Iterator[tuple[Path, ArrayDef]]:
        for path in self.order:
            for array in self.files[path].arrays:
                yield path, array

    def definition(self, name: str, near: Path | None = None) -> tuple[Path, ArrayDef] | None:
        """Where `name` is defined (a local array of the same file first when `near` is given), else
        its extern declaration; None when no file declares it."""
        found = self._arrays.get(name, [])
        ranked = sorted(found, key=lambda f: (f[1].kind is ArrayKind.EXTERN, f[0] != near, str(f[0])))
        if near is None:
            ranked = [f for f in ranked if f[1].kind is not ArrayKind.LOCAL] or ranked
        return ranked[0] if ranked else None

    def fields_of(self, var: str) -> list[tuple[Path, FieldAssignment]]:
        return self._fields.get(var, [])

    def count(self, path: Path, array: ArrayDef) -> int | None:
        """Elements of the array, with macros from the other files where its own do not settle it."""
        if array.count is not None or not array.dims or not all(array.dims):
            return array.count
        defines = self.defines_for(path)
        total = 1
        for dim in array.dims:
            value = evaluate(dim, defines)
            if value is None or value < 0:
                return None
            total *= value
        return total

    def total_bytes(self, path: Path, array: ArrayDef) -> int | None:
        count = self.count(path, array)
        return None if count is None or array.elem_size is None else count * array.elem_size

    def alignment(self, path: Path, array: ArrayDef) -> int | None:
        if array.align is None or array.align.value is not None:
            return array.alignment
        return align_value(array.align.text, self.defines_for(path))

    def elements(self, path: Path, array: ArrayDef) -> list[Element] | None:
        cfile = self.files.get(path)
        return None if cfile is None else cfile.elements(array, self.defines_for(path))
