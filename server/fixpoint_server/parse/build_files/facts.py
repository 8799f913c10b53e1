"""The facts a build file gives, as plain frozen records with the span each was written at: flags,
definitions, include and library paths, libraries, sources, targets, included files and the statements
a quick fix can extend, gathered in BuildFacts.

Scopes say which sources a flag reaches: every source of the build file, the sources matching some
patterns, or one named target. Patterns are globs relative to the build file's folder, '/'-separated;
`**` spans folders, `*` and `?` do not. Make's `%` becomes `**` (it matches across folders), and a
pattern naming objects (`build/%.o`) matches the sources they are compiled from (see pattern_covers).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

from fixpoint_server.findings import Span
from fixpoint_server.parse.build_files.paths import pattern_covers

_START = Span(0, 0, 0, 0)


class BuildKind(enum.Enum):
    MAKE = "make"
    CMAKE = "cmake"
    COMPILE_COMMANDS = "compile_commands"
    PLATFORMIO = "platformio"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, path: Path) -> BuildKind:
        name = path.name.lower()
        if name in ("makefile", "gnumakefile") or name.endswith((".mk", ".make")):
            return cls.MAKE
        if name == "cmakelists.txt" or name.endswith(".cmake"):
            return cls.CMAKE
        if name == "compile_commands.json":
            return cls.COMPILE_COMMANDS
        if name == "platformio.ini":
            return cls.PLATFORMIO
        return cls.UNKNOWN


class ScopeKind(enum.Enum):
    ALL = "all"
    """Every source the build file compiles (Make globals, add_compile_options, CMAKE_C_FLAGS,
    build_flags)."""
    FILES = "files"
    """The sources matching Scope.patterns (pattern rules, set_source_files_properties, a compile command)."""
    TARGET = "target"
    """The sources of one named target: a CMake target, or a make goal (`app.elf: CFLAGS += ...`)."""


@dataclass(frozen=True)
class Scope:
    """Which sources a flag, definition or include path applies to."""

    kind: ScopeKind = ScopeKind.ALL
    patterns: tuple[str, ...] = ()
    """FILES: globs relative to the build file's folder (see the module docstring for the syntax)."""
    target: str = ""
    """TARGET: the target's name as written."""

    @classmethod
    def files(cls, *patterns: str) -> Scope:
        return cls(ScopeKind.FILES, tuple(patterns))

    @classmethod
    def of_target(cls, name: str) -> Scope:
        return cls(ScopeKind.TARGET, (), name)

    def matches(self, path: str) -> bool:
        """Whether this FILES scope reaches `path` (relative to the build file's folder)."""
        return self.kind is ScopeKind.FILES and any(pattern_covers(p, path) for p in self.patterns)

    def describe(self) -> str:
        if self.kind is ScopeKind.FILES:
            return ", ".join(self.patterns)
        if self.kind is ScopeKind.TARGET:
            return f"target {self.target}"
        return "all sources"


ALL = Scope()


@dataclass(frozen=True)
class FlagUse:
    """A compiler flag (not -I/-D/-L/-l, which have their own facts) and the sources it reaches.

    The same written flag can appear once per scope when a variable holding it is used in several places.
    """

    flag: str
    span: Span
    scope: Scope
    removal: Span
    """What to delete to remove the flag: the flag, its quotes when it is a whole argument, one blank."""
    context: str = ""
    """Where it was set, for messages: the variable (CFLAGS, CMAKE_C_FLAGS), command or option."""


@dataclass(frozen=True)
class Definition:
    """A preprocessor definition: -DNAME[=VALUE], or a CMake compile definition."""

    name: str
    value: str | None
    span: Span
    scope: Scope
    removal: Span


class LibraryKind(enum.Enum):
    FLAG = "flag"
    """-lname"""
    ARCHIVE = "archive"
    """a path to libname.a"""
    TARGET = "target"
    """a CMake target or library name in target_link_libraries / link_libraries"""
    PACKAGE = "package"
    """a platformio lib_deps entry (owner/name, a URL, a path)"""


@dataclass(frozen=True)
class Library:
    name: str
    """As linked: "cmsis-nn" for -lcmsis-nn and .../libcmsis-nn.a; the entry itself for the others."""
    span: Span
    kind: LibraryKind
    target: str | None = None
    """The CMake target that links it (None: every target)."""


@dataclass(frozen=True)
class IncludeDir:
    path_text: str
    """As written, e.g. $(CMSIS_NN)/Include."""
    span: Span
    expanded: str = ""
    """With the file's own variables substituted (unknown ones stay as written)."""
    scope: Scope = ALL


@dataclass(frozen=True)
class LibraryDir:
    """-L / link_directories."""

    path_text: str
    span: Span
    expanded: str = ""


class SourceKind(enum.Enum):
    FILE = "file"
    GLOB = "glob"
    """A pattern ($(wildcard ...), file(GLOB ...), a platformio build_src_filter entry)."""
    SUBDIRECTORY = "subdirectory"
    """A folder built by its own build file (add_subdirectory, FetchContent_Declare)."""


@dataclass(frozen=True)
class SourceRef:
    """A source (or pattern or folder of sources) the build file compiles; an object (build/x.o) stands
    for the source it is built from."""

    path_text: str
    span: Span
    expanded: str
    """Relative to the build file's folder, variables substituted, Make's % as **."""
    kind: SourceKind = SourceKind.FILE
    target: str | None = None
    """The CMake target it belongs to (None: not tied to one)."""


@dataclass(frozen=True)
class Target:
    """A CMake add_executable / add_library."""

    name: str
    span: Span
    kind: str
    """"executable" or "library"."""


@dataclass(frozen=True)
class IncludedFile:
    """A Make `include` / CMake `include()`: noted, not followed."""

    path_text: str
    span: Span
    expanded: str = ""


@dataclass(frozen=True)
class Statement:
    """One assignment, command or option: where a quick fix can extend it.

    keyword: Make the variable (LDLIBS), CMake the command in lower case (target_link_libraries),
    platformio the option (build_flags), or "section" for an [env:...] header.
    """

    keyword: str
    target: str | None
    """Make: the targets of a target-specific assignment; CMake: the first argument; ini: the section."""
    span: Span
    name_span: Span
    """The variable / command / option name: where a finding about the statement goes."""
    append_at: Span
    """An empty span where " <item>" extends the statement's value (before a CMake command's ')')."""


@dataclass(frozen=True)
class BuildProblem:
    message: str
    span: Span


@dataclass(frozen=True)
class BuildFacts:
    path: Path
    kind: BuildKind
    flags: tuple[FlagUse, ...] = ()
    definitions: tuple[Definition, ...] = ()
    libraries: tuple[Library, ...] = ()
    library_dirs: tuple[LibraryDir, ...] = ()
    include_dirs: tuple[IncludeDir, ...] = ()
    sources: tuple[SourceRef, ...] = ()
    targets: tuple[Target, ...] = ()
    includes: tuple[IncludedFile, ...] = ()
    statements: tuple[Statement, ...] = ()
    default_sources: tuple[str, ...] = ()
    """Globs the build compiles without naming them (platformio: src/**, lib/**)."""
    problems: tuple[BuildProblem, ...] = ()
    end: Span = _START
    """An empty span at the end of the text."""

    def statements_named(self, keyword: str, target: str | None = None) -> list[Statement]:
        return [s for s in self.statements if s.keyword == keyword and (target is None or s.target == target)]

    def rooted(self, pattern: str, root: Path) -> str:
        """A path or pattern of this file (relative to its folder) made relative to `root`."""
        joined = os.path.normpath(os.path.join(self.path.parent, pattern))
        try:
            return Path(os.path.relpath(joined, root)).as_posix()
        except ValueError:  # another drive
            return Path(joined).as_posix()

    def local(self, rooted: str, root: Path) -> str:
        """A path relative to `root` made relative to this file's folder (what scope patterns match)."""
        try:
            return Path(os.path.relpath(os.path.join(root, rooted), self.path.parent)).as_posix()
        except ValueError:
            return rooted
