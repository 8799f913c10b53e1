"""What every reader shares: the Collector that gathers facts (offsets become Spans) and the
classifier that turns the words of a flag list into flags, definitions, paths, libraries and sources.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from fixpoint_server.findings import LineIndex, Span
from fixpoint_server.parse.build_files.facts import (
    BuildFacts,
    BuildKind,
    BuildProblem,
    Definition,
    FlagUse,
    IncludedFile,
    IncludeDir,
    Library,
    LibraryDir,
    LibraryKind,
    Scope,
    SourceKind,
    SourceRef,
    Statement,
    Target,
)
from fixpoint_server.parse.build_files.paths import has_wildcard, is_source, names_sources, norm_path


@dataclass(frozen=True)
class Word:
    """A word of a flag list with its offsets in the text (`cut`: what to delete to remove it)."""

    text: str
    start: int
    end: int
    expanded: str
    cut: tuple[int, int]
    origin: str | None = None
    """CMake: the variable it was written in, when it came through ${VAR}."""
    glob: bool = False


@dataclass
class Collector:
    """Gathers facts while a parser reads; offsets become Spans through the file's LineIndex."""

    path: Path
    kind: BuildKind
    text: str
    index: LineIndex = field(init=False)
    flags: list[FlagUse] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)
    libraries: list[Library] = field(default_factory=list)
    library_dirs: list[LibraryDir] = field(default_factory=list)
    include_dirs: list[IncludeDir] = field(default_factory=list)
    sources: list[SourceRef] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    includes: list[IncludedFile] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    default_sources: tuple[str, ...] = ()
    problems: list[BuildProblem] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = LineIndex(self.text)

    def span(self, start: int, end: int) -> Span:
        return self.index.span(start, end)

    def problem(self, message: str, start: int = 0, end: int = 0) -> None:
        self.problems.append(BuildProblem(message, self.span(start, end)))

    def source(self, word: Word, target: str | None = None, kind: SourceKind | None = None) -> None:
        for piece in word.expanded.split() or [word.expanded]:
            if kind is None and not names_sources(piece):
                continue  # a header or a word of a list that is not all sources
            glob = word.glob or has_wildcard(piece)
            found = kind or (SourceKind.GLOB if glob else SourceKind.FILE)
            self.sources.append(SourceRef(word.text, self.span(word.start, word.end), piece, found, target))

    def statement(
        self, keyword: str, target: str | None, span: tuple[int, int], name: tuple[int, int], append_at: int
    ) -> None:
        self.statements.append(
            Statement(keyword, target, self.span(*span), self.span(*name), self.span(append_at, append_at))
        )

    def facts(self) -> BuildFacts:
        """The facts, each kind in the order they are written (variables are resolved after reading)."""
        return BuildFacts(
            self.path,
            self.kind,
            _in_order(self.flags),
            _in_order(self.definitions),
            _in_order(self.libraries),
            _unique(self.library_dirs),
            _in_order(self.include_dirs),
            _in_order(self.sources),
            _unique(self.targets),
            _unique(self.includes),
            tuple(self.statements),
            self.default_sources,
            tuple(self.problems),
            self.span(len(self.text), len(self.text)),
        )


T = TypeVar("T")


def _unique(items: Iterable[T]) -> tuple[T, ...]:
    return tuple(dict.fromkeys(items))


class _Spanned(Protocol):
    @property
    def span(self) -> Span: ...


S = TypeVar("S", bound=_Spanned)


def _in_order(items: Iterable[S]) -> tuple[S, ...]:
    return tuple(sorted(_unique(items), key=lambda item: item.span))


def word_removal(text: str, start: int, end: int) -> tuple[int, int]:
    """The word and one run of blanks after it (or before it, at the end of a line or argument)."""
    after = end
    while after < len(text) and text[after] in " \t":
        after += 1
    if after > end and after < len(text) and text[after] not in "\r\n":
        return start, after
    before = start
    while before > 0 and text[before - 1] in " \t":
        before -= 1
    return before, end


# ------------------------------------------------------------------------------------------ flag words

_VALUE_FLAGS = {"-o", "-MF", "-MT", "-MQ", "-x", "-include", "-imacros", "-Xlinker", "-T", "-arch", "-target"}
"""Flags whose value is the next word."""
_PATH_FLAGS = ("-isystem", "-iquote", "-idirafter", "-I", "-D", "-L", "-l")


def classify(
    words: Sequence[Word], out: Collector, scope: Scope, context: str, *, compile: bool, sources: bool
) -> None:
    """Turn the words of a flag list into facts; `compile`: the words reach a compiler (flags count)."""
    i = 0
    while i < len(words):
        word = words[i]
        prefix = next((p for p in _PATH_FLAGS if word.text.startswith(p)), None)
        if prefix is not None:
            i += _path_flag(words, i, prefix, out, scope)
        elif word.expanded.endswith(".a") and not word.text.startswith("-"):
            name = posixpath.basename(word.expanded)[:-2]
            out.libraries.append(
                Library(name.removeprefix("lib"), out.span(word.start, word.end), LibraryKind.ARCHIVE)
            )
            i += 1
        elif word.text.startswith("-") and len(word.text) > 1:
            if compile and word.text not in ("-c", "-o"):
                out.flags.append(
                    FlagUse(word.text, out.span(word.start, word.end), scope, out.span(*word.cut), context)
                )
            i += 2 if word.text in _VALUE_FLAGS else 1
        else:
            if sources and is_source(word.expanded):
                out.source(word)
            i += 1


def _path_flag(words: Sequence[Word], i: int, prefix: str, out: Collector, scope: Scope) -> int:
    """-I/-D/-L/-l with the value attached or as the next word; returns the number of words used."""
    word = words[i]
    value, expanded, end, used = word.text[len(prefix) :], word.expanded[len(prefix) :], word.end, 1
    if not value and i + 1 < len(words):
        value, expanded, end, used = words[i + 1].text, words[i + 1].expanded, words[i + 1].end, 2
    if not value:
        return used
    span = out.span(word.start, end)
    cut = out.span(word.cut[0], words[i + used - 1].cut[1])
    if prefix == "-D":
        name, eq, val = value.partition("=")
        out.definitions.append(Definition(name, val if eq else None, span, scope, cut))
    elif prefix == "-L":
        out.library_dirs.append(LibraryDir(value, span, expanded))
    elif prefix == "-l":
        out.libraries.append(Library(value.removeprefix(":"), span, LibraryKind.FLAG))
    else:
        out.include_dirs.append(IncludeDir(value, span, norm_path(expanded), scope))
    return used
