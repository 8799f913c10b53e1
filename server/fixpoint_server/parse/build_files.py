"""Build files as facts: which flags, definitions, include paths, libraries and sources a build uses.

`parse_build_file(path, text)` reads a GNU Makefile (or an included .mk), a CMakeLists.txt / *.cmake,
a compile_commands.json or a platformio.ini and returns BuildFacts: plain, frozen records with the span
each fact was written at, so a rule can point at the `-O3` itself and a quick fix can replace exactly
it. It never raises: a file it cannot read (binary, too large, broken JSON) gives its problems and what
was found before them.

This is a reader, not an evaluator. It follows variables defined in the same file (Make `$(VAR)`,
CMake `${VAR}`) so that a flag is reported where it is written and a path is known after expansion,
but it reads every branch of a conditional, does not follow `include`d files (it notes them), and
evaluates only the make functions that name files (wildcard, addprefix, addsuffix, `shell find`).

Scopes say which sources a flag reaches: every source of the build file, the sources matching some
patterns, or one named target. Patterns are globs relative to the build file's folder, '/'-separated;
`**` spans folders, `*` and `?` do not. Make's `%` becomes `**` (it matches across folders), and a
pattern naming objects (`build/%.o`) matches the sources they are compiled from (see pattern_covers).
"""

from __future__ import annotations

import enum
import functools
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from fixpoint_server.findings import LineIndex, Span
from fixpoint_server.parse.json_positions import Located, locate

MAX_TEXT = 8 * 1024 * 1024
"""Make/CMake/ini files larger than this are not read (no real one is; a generated blob would stall)."""
MAX_COMPILE_COMMANDS = 64 * 1024 * 1024


# ------------------------------------------------------------------------------------------------ facts


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


# ---------------------------------------------------------------------------------------------- globs


def _norm(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


@functools.lru_cache(maxsize=4096)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**", i):
            if (i == 0 or pattern[i - 1] == "/") and pattern.startswith("/", i + 2):
                out.append("(?:.*/)?")  # "**/" is zero or more folders
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        char = pattern[i]
        close = pattern.find("]", i + 2) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif close > 0:
            body = pattern[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out))


def glob_match(pattern: str, path: str) -> bool:
    """`path` matches `pattern` (both '/'-separated; `**` spans folders, `*` does not)."""
    try:
        return _glob_regex(_norm(pattern)).fullmatch(_norm(path)) is not None
    except re.error:
        return _norm(pattern) == _norm(path)


_OBJECT_SUFFIXES = (".o", ".obj")
_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".s", ".S", ".asm")
_OBJECT_DIR = re.compile(r"(?i)\$[({][^)}]*[)}]|[^/]*(?:build|obj|out)[^/]*|bin|debug|release")
"""A first folder of an object pattern that is where objects go rather than where sources are."""


@functools.lru_cache(maxsize=65536)
def pattern_covers(pattern: str, path: str) -> bool:
    """Whether a scope pattern reaches the source `path`: a source glob matches it, or an object
    pattern names its object (`CMSIS-NN/%.o` and `build/CMSIS-NN/%.o` both reach CMSIS-NN/x/y.c)."""
    if glob_match(pattern, path):
        return True
    stem, suffix = posixpath.splitext(_norm(pattern))
    if suffix not in _OBJECT_SUFFIXES:
        return False
    source_stem = posixpath.splitext(_norm(path))[0]
    if glob_match(stem, source_stem):
        return True
    head, _, rest = stem.partition("/")
    return bool(rest) and _OBJECT_DIR.fullmatch(head) is not None and glob_match(rest, source_stem)


_CMSIS_NN = re.compile(r"cmsis[-_ ]?nn|cmsis[^/\s]*/nn(?:/|$|\b)", re.IGNORECASE)


_CMSIS_NN_DIR = re.compile(
    r"(?:^|/)(?:cmsis[-_]?nn(?:[-_.]v?\d[\w.]*)?|\$[({]\w*cmsis_?nn\w*[)}]|[^/]*cmsis[^/]*/nn)(?:/|$)",
    re.IGNORECASE,
)


def in_cmsis_nn(path: str) -> bool:
    """A path inside a CMSIS-NN checkout, by a folder's name: CMSIS-NN/, cmsis_nn-6.0.0/, CMSIS/NN/,
    $(CMSIS_NN)/ (not cmsis_nn_wrapper.c or cmsis-nn-app/, which are the user's)."""
    return _CMSIS_NN_DIR.search(_norm(path)) is not None


def mentions_cmsis_nn(text: str) -> bool:
    """A path, variable, target or package that names CMSIS-NN (CMSIS-NN, cmsis_nn, CMSISNN, CMSIS/NN)."""
    return _CMSIS_NN.search(text) is not None


def _is_source(text: str) -> bool:
    return text.endswith(_SOURCE_SUFFIXES) and not text.startswith("-")


def _names_sources(text: str) -> bool:
    """A source, an object (standing for the source it is built from), or a pattern of either."""
    return _is_source(text) or text.endswith(_OBJECT_SUFFIXES) or text.endswith("*")


def _has_wildcard(text: str) -> bool:
    return any(c in text for c in "*?[")


# -------------------------------------------------------------------------------------------- collector


@dataclass(frozen=True)
class _Word:
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
class _Collector:
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

    def source(self, word: _Word, target: str | None = None, kind: SourceKind | None = None) -> None:
        for piece in word.expanded.split() or [word.expanded]:
            if kind is None and not _names_sources(piece):
                continue  # a header or a word of a list that is not all sources
            glob = word.glob or _has_wildcard(piece)
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


def _cut(text: str, start: int, end: int) -> tuple[int, int]:
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


def _classify(
    words: Sequence[_Word], out: _Collector, scope: Scope, context: str, *, compile: bool, sources: bool
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
            if sources and _is_source(word.expanded):
                out.source(word)
            i += 1


def _path_flag(words: Sequence[_Word], i: int, prefix: str, out: _Collector, scope: Scope) -> int:
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
        out.include_dirs.append(IncludeDir(value, span, _norm(expanded), scope))
    return used


# ------------------------------------------------------------------------------------------------- make

_MAKE_ROOTS = ("CFLAGS", "CPPFLAGS", "CXXFLAGS")
"""Read by GNU make's built-in compile rules."""
_FLAG_NAME = re.compile(r"(?!(?:LD|AR|AS)FLAGS$)\w*FLAGS|OPT\w*|OPTIMI[SZ]\w*")
"""Variables that hold compile flags by their name, when this file does not say where they go
(a config.mk: its consumers are in the Makefile that includes it)."""
_COMPILER = re.compile(
    r"(?:^|[-/)}])(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|armclang|tiarmclang|icx|icc)(?:-[\d.]+)?(?:\.exe)?$"
)
_COMPILER_VARS = ("$(CC)", "${CC}", "$(CXX)", "${CXX}", "$(GCC)", "$(COMPILER)")
_VAR_REF = re.compile(r"\$[({]([A-Za-z0-9_.\-]+)(?::[^)}]*)?[)}]")
_MAKE_OP = re.compile(r":{1,3}=")
_MODIFIERS = ("override", "export", "private")
_CONDITIONALS = ("ifeq", "ifneq", "ifdef", "ifndef", "else", "endif")


def _make_clean(text: str) -> str:
    """The text with the same offsets, line continuations and comments blanked, so logical lines are
    physical '\\n'-separated lines of it and every offset still points into the original."""
    text = re.sub(r"\\\r?\n", lambda m: " " * len(m[0]), text.replace("\r", " "))
    return re.sub(r"(?<!\\)#[^\n]*", lambda m: " " * len(m[0]), text)


def _scan(text: str, start: int, end: int) -> Iterable[tuple[int, str, int]]:
    """(offset, char, depth) over text[start:end], depth counting $( ${ nesting."""
    depth = 0
    i = start
    while i < end:
        char = text[i]
        if char == "$" and i + 1 < end and text[i + 1] in "({":
            yield i, char, depth
            depth += 1
            i += 2
            continue
        if char in ")}" and depth > 0:
            depth -= 1
        yield i, char, depth
        i += 1


def _words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    words: list[tuple[int, int]] = []
    begin = -1
    for i, char, depth in _scan(text, start, end):
        if char in " \t\n" and depth == 0:
            if begin >= 0:
                words.append((begin, i))
            begin = -1
        elif begin < 0:
            begin = i
    if begin >= 0:
        words.append((begin, end))
    return words


def _top_level(text: str, start: int, end: int, chars: str) -> int:
    return next((i for i, char, depth in _scan(text, start, end) if depth == 0 and char in chars), -1)


_EXPANSION_BUDGET = 100_000
"""Characters one expansion may produce: a variable doubling itself forty times must not hang the server."""


class _MakeExpander:
    """Make's $(VAR) and file-naming functions, innermost first; a variable inside its own expansion
    (A = $(A) x) and anything past the budget stay as written."""

    def __init__(self, variables: dict[str, str]) -> None:
        self.variables = variables
        self.budget = 0

    def __call__(self, text: str) -> str:
        self.budget = _EXPANSION_BUDGET
        return self.text(text, frozenset())

    def text(self, text: str, active: frozenset[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            j = text.find("$", i)
            if j < 0 or self.budget <= 0:
                out.append(text[i:])
                break
            out.append(text[i:j])
            close = _closing(text, j, len(text)) if text[j + 1 : j + 2] in ("(", "{") else -1
            if close < 0 or close >= len(text):
                out.append(text[j : j + 2])
                i = j + 2
                continue
            body = self.text(text[j + 2 : close], active)
            out.append(self.call(body, active))
            i = close + 1
        result = "".join(out)
        self.budget -= len(result)
        return result

    def call(self, body: str, active: frozenset[str]) -> str:
        kept = "$(" + body + ")"
        name, _, args = body.partition(" ")
        args = args.strip()
        if args:
            return _make_function(name, args) or kept
        var, colon, subst = body.partition(":")
        if var not in self.variables or var in active or len(active) > 32:
            return kept
        value = self.text(self.variables[var], active | {var})
        return _substitute(value, subst) if colon else value


def _make_function(name: str, args: str) -> str | None:
    """The file-naming functions' values; None for the others (kept as written)."""
    if name in ("wildcard", "sort", "strip", "dir", "abspath", "realpath"):
        return args
    if name in ("addprefix", "addsuffix"):
        affix, _, items = args.partition(",")
        return " ".join(affix + w if name == "addprefix" else w + affix for w in items.split())
    if name == "shell" and args.split()[0] == "find":
        roots = [w for w in args.split()[1:] if not w.startswith(("-", "(", "!"))][:1]
        return " ".join(f"{r}/**" for r in roots) or None
    return None


def _expand_make(text: str, variables: dict[str, str]) -> str:
    return _MakeExpander(variables)(text)


def _substitute(value: str, subst: str) -> str:
    """$(VAR:.c=.o) and $(VAR:%.c=build/%.o)."""
    old, eq, new = subst.partition("=")
    if not eq:
        return value
    if "%" not in old:
        old, new = "%" + old, "%" + new
    head, _, tail = old.partition("%")
    out = []
    for word in value.split():
        if word.startswith(head) and word.endswith(tail) and len(word) >= len(head) + len(tail):
            word = new.replace("%", word[len(head) : len(word) - len(tail)], 1)
        out.append(word)
    return " ".join(out)


def _glob(text: str) -> str:
    return _norm(text.replace("%", "**"))


@dataclass
class _Assign:
    name: str
    start: int
    end: int
    """The value's offsets."""
    scope: Scope | None
    """A target-specific assignment's scope; None for a global one."""
    refs: set[str]


@dataclass
class _Rule:
    targets: list[str]
    sources: list[str]
    """Source prerequisites (patterns too): what `$<` in the recipe compiles."""


class _Make:
    """One Makefile: assignments, rules and recipe lines, then which variables reach the compiler."""

    def __init__(self, out: _Collector) -> None:
        self.out = out
        self.text = out.text
        self.clean = _make_clean(out.text)
        self.vars: dict[str, str] = {}
        self.assigns: list[_Assign] = []
        self.recipe_refs: list[tuple[set[str], Scope]] = []
        self.rule: _Rule | None = None
        self.in_define = False

    def run(self) -> None:
        start = 0
        for line in self.clean.split("\n"):
            self.line(start, start + len(line))
            start += len(line) + 1
        self.finish()

    def word(self, start: int, end: int) -> _Word:
        text = self.clean[start:end]
        return _Word(text, start, end, _expand_make(text, self.vars), _cut(self.text, start, end))

    def words(self, start: int, end: int) -> list[_Word]:
        return [self.word(a, b) for a, b in _words(self.clean, start, end)]

    def line(self, start: int, end: int) -> None:
        body = self.clean[start:end]
        if body.startswith("\t") and self.rule is not None and not self.in_define:
            self.recipe(start + 1, end)
            return
        words = body.split()
        if not words:
            return
        first = words[1] if words[0] in _MODIFIERS and len(words) > 1 else words[0]
        if self.in_define or first in ("define", "endef"):
            self.in_define = (self.in_define or first == "define") and first != "endef"
            return
        if first in _CONDITIONALS:
            return
        lead = start + len(body) - len(body.lstrip())
        if first in ("include", "-include", "sinclude"):
            for w in self.words(lead + len(first), end):
                self.out.includes.append(IncludedFile(w.text, self.out.span(w.start, w.end), w.expanded))
            return
        self.rule = None
        self.statement(lead, end)

    def find_op(self, start: int, end: int) -> tuple[str, int, int]:
        """("assign", op start, op end), ("rule", colon, colon + 1) or ("", -1, -1)."""
        pos = _top_level(self.clean, start, end, ":=")
        if pos < 0:
            return "", -1, -1
        if self.clean[pos] == "=":
            op_start = pos - 1 if pos > start and self.clean[pos - 1] in "+?!" else pos
            return "assign", op_start, pos + 1
        match = _MAKE_OP.match(self.clean, pos)
        if match:
            return "assign", pos, match.end()
        return "rule", pos, pos + 1

    def statement(self, start: int, end: int) -> None:
        kind, op_start, op_end = self.find_op(start, end)
        if kind == "assign":
            self.assignment(start, op_start, op_end, end, None, None)
        elif kind == "rule":
            self.rule_line(start, op_start, end)

    def assignment(
        self, start: int, op_start: int, op_end: int, end: int, scope: Scope | None, targets: str | None
    ) -> None:
        names = self.clean[start:op_start].split()
        while len(names) > 1 and names[0] in _MODIFIERS:
            names = names[1:]
        if len(names) != 1:
            return
        name = names[0]
        name_start = self.clean.index(name, start, op_start)
        value_end = op_end + len(self.clean[op_end:end].rstrip())
        op = self.clean[op_start:op_end]
        if scope is None:
            self.set_var(name, op, self.clean[op_end:value_end].strip())
        refs = set(_VAR_REF.findall(self.clean, op_end, value_end))
        self.assigns.append(_Assign(name, op_end, value_end, scope, refs))
        self.out.statement(name, targets, (start, value_end), (name_start, name_start + len(name)), value_end)

    def set_var(self, name: str, op: str, value: str) -> None:
        if op == "+=":
            self.vars[name] = (self.vars.get(name, "") + " " + value).strip()
        elif op == "?=":
            self.vars.setdefault(name, value)
        elif op == "!=":
            self.vars[name] = ""
        else:
            self.vars[name] = _expand_make(value, self.vars) if op != "=" else value

    def rule_line(self, start: int, colon: int, end: int) -> None:
        after = colon + 2 if self.clean.startswith("::", colon) else colon + 1
        semi = _top_level(self.clean, after, end, ";")
        prereq_end = semi if semi >= 0 else end
        targets = self.words(start, colon)
        kind, op_start, op_end = self.find_op(after, prereq_end)
        if kind == "assign":
            text = self.clean[start:colon].strip()
            self.assignment(after, op_start, op_end, end, self.target_scope(targets), text)
            return
        if kind == "rule":  # a static pattern rule: targets: target-pattern: prereq-patterns
            targets, after = self.words(after, op_start), op_end
        prereqs = self.words(after, prereq_end)
        for word in prereqs:
            if "%" not in word.expanded:  # a pattern rule says how to build, not what is built
                self.out.source(word)
        sources = [_glob(p) for w in prereqs for p in w.expanded.split() if _is_source(p)]
        self.rule = _Rule([_glob(w.expanded) for w in targets], sources)
        if semi >= 0:
            self.recipe(semi + 1, end)

    def target_scope(self, targets: list[_Word]) -> Scope:
        patterns = [_glob(p) for w in targets for p in w.expanded.split()]
        if patterns and all(p.endswith(_OBJECT_SUFFIXES) or _is_source(p) for p in patterns):
            return Scope.files(*patterns)
        return Scope.of_target(" ".join(w.text for w in targets))

    def recipe(self, start: int, end: int) -> None:
        words = self.words(start, end)
        at = next((i for i, w in enumerate(words) if _is_compiler(w)), None)
        if at is None:
            _classify(words, self.out, ALL, "recipe", compile=False, sources=False)
            return
        args = words[at + 1 :]
        explicit = [_glob(w.expanded) for w in args if _is_source(w.expanded)]
        rule = self.rule or _Rule([], [])
        automatic = any(v in w.text for w in args for v in ("$<", "$^", "$+", "$(<", "$(^"))
        compiles = bool(explicit) or any(w.text == "-c" for w in args) or (automatic and bool(rule.sources))
        scope = self.recipe_scope(explicit, rule)
        if compiles:
            refs = {r for w in args for r in _VAR_REF.findall(w.text)}
            self.recipe_refs.append((refs, scope))
        _classify(args, self.out, scope, "recipe", compile=compiles, sources=True)

    def recipe_scope(self, explicit: list[str], rule: _Rule) -> Scope:
        if explicit:
            return Scope.files(*explicit)
        if rule.sources:
            return Scope.files(*rule.sources)
        if rule.targets and all(t.endswith(_OBJECT_SUFFIXES) for t in rule.targets):
            return Scope.files(*rule.targets)
        return ALL

    def var_scopes(self) -> dict[str, set[Scope]]:
        """Which scopes each variable reaches the compiler with: the built-in rules read CFLAGS and
        friends, compile recipes read what they reference, and a variable reaches what refers to it."""
        scopes: dict[str, set[Scope]] = {name: {ALL} for name in _MAKE_ROOTS}
        referenced = {r for a in self.assigns for r in a.refs} | {
            r for refs, _ in self.recipe_refs for r in refs
        }
        for refs, scope in self.recipe_refs:
            for ref in refs:
                scopes.setdefault(ref, set()).add(scope)
        for a in self.assigns:
            if a.name not in referenced and _FLAG_NAME.fullmatch(a.name):
                scopes.setdefault(a.name, set()).add(ALL)
        for _ in range(64):
            changed = False
            for a in self.assigns:
                if a.name not in scopes:
                    continue
                reach = {a.scope} if a.scope else scopes[a.name]
                for ref in a.refs:
                    known = scopes.setdefault(ref, set())
                    changed |= not reach <= known
                    known |= reach
            if not changed:
                break
        return scopes

    def finish(self) -> None:
        scopes = self.var_scopes()
        for a in self.assigns:
            words = self.words(a.start, a.end)
            reach = sorted({a.scope} if a.scope else scopes.get(a.name, set()), key=_scope_key)
            for scope in reach or [ALL]:
                _classify(words, self.out, scope, a.name, compile=bool(reach), sources=False)
            self.sources_in(words)

    def sources_in(self, words: list[_Word]) -> None:
        """Sources named in a variable: files with a source suffix, $(wildcard ...) and $(shell find ...)."""
        for word in words:
            calls = list(re.finditer(r"\$[({](?:wildcard|shell find)\s+", word.text))
            if not calls:
                self.out.source(word)
                continue
            for call in calls:
                inner_start = word.start + call.end()
                inner_end = _closing(self.clean, word.start + call.start(), word.end)
                inner_end = word.end if inner_end < 0 else inner_end
                for inner in self.words(inner_start, inner_end):
                    if "find" in call[0] and inner.text.startswith(("-", "'", '"')):
                        break
                    suffix = "/**" if "find" in call[0] else ""
                    self.out.source(
                        _Word(inner.text, inner.start, inner.end, inner.expanded + suffix, inner.cut)
                    )
                    if "find" in call[0]:
                        break


def _scope_key(scope: Scope) -> tuple[str, tuple[str, ...], str]:
    return scope.kind.value, scope.patterns, scope.target


def _closing(text: str, start: int, end: int) -> int:
    """The offset of the ) or } closing the $( at `start`, or -1 when it is not closed."""
    for i, char, depth in _scan(text, start, end):
        if char in ")}" and depth == 0 and i > start:
            return i
    return -1


def _is_compiler(word: _Word) -> bool:
    text = word.text.lstrip("@-+")
    if text in _COMPILER_VARS:
        return True
    expanded = word.expanded.lstrip("@-+")
    return bool(expanded) and _COMPILER.search(expanded) is not None and "=" not in expanded


# ------------------------------------------------------------------------------------------------ cmake

_CMAKE_DIR_VARS = (
    "CMAKE_CURRENT_SOURCE_DIR",
    "CMAKE_CURRENT_LIST_DIR",
    "CMAKE_SOURCE_DIR",
    "PROJECT_SOURCE_DIR",
)
_CMAKE_FLAG_VAR = re.compile(r"CMAKE_(?:C|CXX|ASM)_FLAGS(?:_[A-Z]+)?(?:_INIT)?")
_CMAKE_KEYWORDS = {
    "PRIVATE", "PUBLIC", "INTERFACE", "BEFORE", "AFTER", "SYSTEM", "LINK_PUBLIC", "LINK_PRIVATE",
    "LINK_INTERFACE_LIBRARIES", "debug", "optimized", "general", "STATIC", "SHARED", "MODULE", "OBJECT",
    "EXCLUDE_FROM_ALL", "WIN32", "MACOSX_BUNDLE", "FILE_SET", "TYPE", "BASE_DIRS", "FILES", "HEADERS",
}  # fmt: skip
CMSIS_NN_OPTIMIZATION_VARIABLE = "CMSIS_OPTIMIZATION_LEVEL"
"""CMSIS-NN's CMakeLists.txt compiles its cmsis-nn target with this variable (default -Ofast)."""
CMSIS_NN_CMAKE_TARGET = "cmsis-nn"
_MAX_LIST = 10_000
_BRACKET = re.compile(r"\[(=*)\[")
_CMAKE_REF = re.compile(r"\$\{([A-Za-z0-9_.+\-/]+)\}")


@dataclass
class _Arg:
    text: str
    start: int
    end: int
    outer: tuple[int, int]
    """With the quotes or brackets."""


@dataclass
class _Command:
    name: str
    start: int
    name_end: int
    args: list[_Arg]
    close: int


def _cmake_commands(text: str) -> Iterable[_Command]:
    pos, n = 0, len(text)
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    while pos < n:
        if text[pos] == "#":
            pos = _skip_comment(text, pos)
            continue
        match = ident.match(text, pos)
        if match is None:
            pos += 1
            continue
        paren = match.end()
        while paren < n and text[paren] in " \t":
            paren += 1
        if paren >= n or text[paren] != "(":
            pos = match.end()
            continue
        args, close = _cmake_args(text, paren + 1)
        yield _Command(match[0], match.start(), match.end(), args, close)
        pos = close + 1


def _skip_comment(text: str, pos: int) -> int:
    bracket = _BRACKET.match(text, pos + 1)
    if bracket:
        close = text.find("]" + bracket[1] + "]", bracket.end())
        return len(text) if close < 0 else close + len(bracket[0])
    newline = text.find("\n", pos)
    return len(text) if newline < 0 else newline


def _cmake_args(text: str, pos: int) -> tuple[list[_Arg], int]:
    """The arguments from after '(' to the matching ')' (or the end of an unterminated command)."""
    args: list[_Arg] = []
    depth, n = 0, len(text)
    while pos < n:
        char = text[pos]
        bracket = _BRACKET.match(text, pos) if char == "[" else None
        if char in " \t\r\n":
            pos += 1
        elif char == "#":
            pos = _skip_comment(text, pos)
        elif char in "()":
            if char == ")" and depth == 0:
                return args, pos
            depth += 1 if char == "(" else -1
            pos += 1
        elif char == '"':
            end = _quoted_end(text, pos + 1)
            args.append(_Arg(text[pos + 1 : end], pos + 1, end, (pos, min(end + 1, n))))
            pos = end + 1
        elif bracket:
            close = text.find("]" + bracket[1] + "]", bracket.end())
            close = n if close < 0 else close
            args.append(
                _Arg(
                    text[bracket.end() : close],
                    bracket.end(),
                    close,
                    (pos, min(close + 2 + len(bracket[1]), n)),
                )
            )
            pos = close + 2 + len(bracket[1])
        else:
            end = _unquoted_end(text, pos)
            args.append(_Arg(text[pos:end], pos, end, (pos, end)))
            pos = end
    return args, n


def _quoted_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return min(pos, len(text))


def _unquoted_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] not in " \t\r\n()":
        if text[pos] == '"':
            pos = _quoted_end(text, pos + 1)
        pos += 2 if text[pos : pos + 1] == "\\" else 1
    return min(pos, len(text))


def _split_items(text: str, start: int) -> list[tuple[str, int]]:
    """A CMake argument's list items (';' or blank separated), genex and ${} kept whole."""
    items: list[tuple[str, int]] = []
    depth, begin = 0, -1
    for i, char in enumerate(text):
        if char == "$" and text[i + 1 : i + 2] in ("{", "<"):
            depth += 1
        elif char in "}>" and depth > 0:
            depth -= 1
        if char in " \t\r\n;" and depth == 0:
            if begin >= 0:
                items.append((text[begin:i], start + begin))
            begin = -1
        elif begin < 0:
            begin = i
    if begin >= 0:
        items.append((text[begin:], start + begin))
    return items


def _genex_inner(text: str) -> tuple[str, int] | None:
    """The value a `$<cond:value>` yields and its offset in `text`; None when it yields nothing useful."""
    match = re.match(r"\$<.*:", text)
    if match is None:
        return None
    inner = text[match.end() :].rstrip(">")
    return (inner, match.end()) if inner and "<" not in inner and ">" not in inner else None


class _CMake:
    """One CMakeLists.txt / .cmake: commands read in order, with the variables they set."""

    def __init__(self, out: _Collector) -> None:
        self.out = out
        self.text = out.text
        self.vars: dict[str, list[_Word]] = {}
        self.consumed: set[tuple[int, int]] = set()
        self.stored: dict[tuple[int, int], _Word] = {}

    def run(self) -> None:
        handlers = _CMAKE_HANDLERS
        for command in _cmake_commands(self.text):
            name = command.name.lower()
            target = command.args[0].text if command.args else None
            self.out.statement(
                name,
                target,
                (command.start, command.close + 1),
                (command.start, command.name_end),
                command.close,
            )
            handler = handlers.get(name)
            if handler is not None:
                handler(self, command)
        self.finish()

    # -- words

    def expand(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match[1]
            if name in _CMAKE_DIR_VARS:
                return "."
            if name in self.vars:
                return ";".join(w.expanded for w in self.vars[name])
            return "\x02" + name + "\x03"

        for _ in range(64):
            replaced = _CMAKE_REF.sub(value, text)
            if replaced == text or len(replaced) > 100_000:
                break
            text = replaced
        return _norm(text.replace("\x02", "${").replace("\x03", "}"))

    def items(self, args: Sequence[_Arg]) -> list[_Word]:
        words: list[_Word] = []
        for arg in args:
            whole = _split_items(arg.text, arg.start)
            for text, start in whole:
                words.extend(self.item(arg, text, start, len(whole) == 1))
        return words

    def item(self, arg: _Arg, text: str, start: int, alone: bool) -> list[_Word]:
        ref = re.fullmatch(r"\$\{([A-Za-z0-9_.+\-/]+)\}", text)
        if ref and ref[1] in self.vars:
            return [w if w.origin else _replace_origin(w, ref[1]) for w in self.vars[ref[1]]]
        if text.startswith("SHELL:"):
            text, start = text[6:], start + 6
        if text.startswith("$<"):
            inner = _genex_inner(text)
            if inner is None:
                return []
            return [self.item_word(t, start + inner[1] + s, False, arg) for t, s in _split_items(inner[0], 0)]
        return [self.item_word(text, start, alone, arg)]

    def item_word(self, text: str, start: int, alone: bool, arg: _Arg) -> _Word:
        end = start + len(text)
        cut = _cut(self.text, *arg.outer) if alone else _cut(self.text, start, end)
        return _Word(text, start, end, self.expand(text), cut)

    def values(self, command: _Command, skip: int = 1) -> list[_Word]:
        return [w for w in self.items(command.args[skip:]) if w.text not in _CMAKE_KEYWORDS]

    # -- facts

    def flags(self, words: Sequence[_Word], scope: Scope, context: str) -> None:
        _classify(words, self.out, scope, context, compile=True, sources=False)

    def definitions(self, words: Sequence[_Word], scope: Scope) -> None:
        for w in words:
            name, eq, value = w.text.removeprefix("-D").partition("=")
            if name:
                self.out.definitions.append(
                    Definition(
                        name,
                        value if eq else None,
                        self.out.span(w.start, w.end),
                        scope,
                        self.out.span(*w.cut),
                    )
                )

    def sources(self, words: Sequence[_Word], target: str | None) -> None:
        for w in words:
            self.consumed.add((w.start, w.end))
            if (w.glob or _is_source(w.expanded)) and not w.text.startswith("$<"):
                self.out.source(w, target)

    def store(self, name: str, words: list[_Word], append: bool = False) -> None:
        # A list doubling itself (set(A ${A} ${A})) is cut short rather than allowed to grow to 2**n words.
        self.vars[name] = (([*self.vars.get(name, [])] if append else []) + words)[:_MAX_LIST]
        for word in words[:_MAX_LIST]:
            self.stored.setdefault((word.start, word.end), word)
        if _CMAKE_FLAG_VAR.fullmatch(name):
            own = [w for w in words if w.origin is None or not _CMAKE_FLAG_VAR.fullmatch(w.origin)]
            self.flags(own, ALL, name)
        elif name == CMSIS_NN_OPTIMIZATION_VARIABLE:
            self.flags(words, Scope.of_target(CMSIS_NN_CMAKE_TARGET), name)

    def finish(self) -> None:
        """Sources kept in variables no target list used (a subdirectory or a later file may)."""
        for w in self.stored.values():
            if (
                (w.start, w.end) not in self.consumed
                and w.origin is None
                and (w.glob or _is_source(w.expanded))
            ):
                self.consumed.add((w.start, w.end))
                self.out.source(w)


def _replace_origin(word: _Word, origin: str) -> _Word:
    return _Word(word.text, word.start, word.end, word.expanded, word.cut, origin, word.glob)


def _set_values(args: list[_Arg]) -> list[_Arg]:
    """set(VAR values... [CACHE TYPE DOC [FORCE]] [PARENT_SCOPE]) -> the values."""
    for i, arg in enumerate(args):
        if arg.text in ("CACHE", "PARENT_SCOPE"):
            return args[:i]
    return args


def _cm_set(cm: _CMake, command: _Command) -> None:
    if command.args:
        cm.store(command.args[0].text, cm.items(_set_values(command.args[1:])))


def _cm_append(cm: _CMake, command: _Command) -> None:
    """string(APPEND VAR ...) and list(APPEND VAR ...)."""
    if len(command.args) >= 2 and command.args[0].text == "APPEND":
        cm.store(command.args[1].text, cm.items(command.args[2:]), append=True)


def _cm_file(cm: _CMake, command: _Command) -> None:
    if len(command.args) < 2 or command.args[0].text not in ("GLOB", "GLOB_RECURSE"):
        return
    args, globs = command.args[2:], []
    skip_next = False
    for arg in args:
        if skip_next or arg.text in ("CONFIGURE_DEPENDS", "FOLLOW_SYMLINKS"):
            skip_next = False
            continue
        if arg.text in ("RELATIVE", "LIST_DIRECTORIES"):
            skip_next = True
            continue
        globs.append(arg)
    words = [_Word(w.text, w.start, w.end, w.expanded, w.cut, w.origin, True) for w in cm.items(globs)]
    cm.store(command.args[1].text, words)


def _cm_compile_options(cm: _CMake, command: _Command) -> None:
    if command.name.lower() == "add_compile_options":
        cm.flags(cm.values(command, 0), ALL, "add_compile_options")
    elif command.args:
        cm.flags(cm.values(command), Scope.of_target(command.args[0].text), "target_compile_options")


def _cm_definitions(cm: _CMake, command: _Command) -> None:
    name = command.name.lower()
    if name == "target_compile_definitions" and command.args:
        cm.definitions(cm.values(command), Scope.of_target(command.args[0].text))
    elif name == "add_compile_definitions":
        cm.definitions(cm.values(command, 0), ALL)
    else:  # add_definitions takes raw flags: -DX, and anything else goes to the compiler too
        words = cm.values(command, 0)
        cm.definitions([w for w in words if w.text.startswith("-D")], ALL)
        cm.flags([w for w in words if not w.text.startswith("-D")], ALL, "add_definitions")


def _cm_source_properties(cm: _CMake, command: _Command) -> None:
    """set_source_files_properties(files... PROPERTIES COMPILE_OPTIONS ... COMPILE_FLAGS ...)."""
    names = [a.text for a in command.args]
    if "PROPERTIES" not in names:
        return
    at = names.index("PROPERTIES")
    files = [w for w in cm.items(_drop_directory_args(command.args[:at]))]
    scope = Scope.files(*[w.expanded for w in files])
    _properties(cm, command.args[at + 1 :], scope, command.name.lower())


def _cm_target_properties(cm: _CMake, command: _Command) -> None:
    names = [a.text for a in command.args]
    if "PROPERTIES" in names:
        at = names.index("PROPERTIES")
        for target in names[:at]:
            _properties(cm, command.args[at + 1 :], Scope.of_target(target), command.name.lower())


def _cm_set_property(cm: _CMake, command: _Command) -> None:
    """set_property(SOURCE files... | TARGET names... [APPEND] PROPERTY name values...)."""
    names = [a.text for a in command.args]
    if not names or names[0] not in ("SOURCE", "TARGET") or "PROPERTY" not in names:
        return
    at = names.index("PROPERTY")
    owners = [
        a for a in _drop_directory_args(command.args[1:at]) if a.text not in ("APPEND", "APPEND_STRING")
    ]
    if names[0] == "SOURCE":
        scopes = [Scope.files(*[w.expanded for w in cm.items(owners)])]
    else:
        scopes = [Scope.of_target(a.text) for a in owners]
    for scope in scopes:
        _properties(cm, command.args[at + 1 :], scope, "set_property", single=True)


def _drop_directory_args(args: list[_Arg]) -> list[_Arg]:
    out, skip = [], False
    for arg in args:
        if arg.text in ("DIRECTORY", "TARGET_DIRECTORY"):
            skip = True
        elif not skip:
            out.append(arg)
    return out


def _properties(cm: _CMake, args: list[_Arg], scope: Scope, context: str, single: bool = False) -> None:
    """PROPERTIES name value name value ... (single: one name, then its values)."""
    pairs = (
        [(args[0], args[1:])]
        if single and args
        else [(args[i], args[i + 1 : i + 2]) for i in range(0, len(args) - 1, 2)]
    )
    for name, values in pairs:
        if name.text in ("COMPILE_OPTIONS", "COMPILE_FLAGS"):
            cm.flags(cm.items(values), scope, f"{context} {name.text}")
        elif name.text == "COMPILE_DEFINITIONS":
            cm.definitions(cm.items(values), scope)
        elif name.text == "INCLUDE_DIRECTORIES":
            _include_words(cm, cm.items(values), scope)


def _cm_link(cm: _CMake, command: _Command) -> None:
    target = (
        command.args[0].text if command.name.lower() == "target_link_libraries" and command.args else None
    )
    words = cm.values(command, 1 if target is not None else 0)
    for w in words:
        span = cm.out.span(w.start, w.end)
        if w.text.startswith("-l"):
            cm.out.libraries.append(Library(w.text[2:], span, LibraryKind.FLAG, target))
        elif w.expanded.endswith(".a"):
            name = posixpath.basename(w.expanded)[:-2].removeprefix("lib")
            cm.out.libraries.append(Library(name, span, LibraryKind.ARCHIVE, target))
        elif w.text.startswith("-"):
            continue
        else:
            cm.out.libraries.append(Library(w.expanded, span, LibraryKind.TARGET, target))


def _cm_include_dirs(cm: _CMake, command: _Command) -> None:
    if command.name.lower() == "include_directories":
        _include_words(cm, cm.values(command, 0), ALL)
    elif command.args:
        _include_words(cm, cm.values(command), Scope.of_target(command.args[0].text))


def _include_words(cm: _CMake, words: Sequence[_Word], scope: Scope) -> None:
    for w in words:
        cm.out.include_dirs.append(IncludeDir(w.text, cm.out.span(w.start, w.end), w.expanded, scope))


def _cm_link_dirs(cm: _CMake, command: _Command) -> None:
    skip = 1 if command.name.lower() == "target_link_directories" else 0
    for w in cm.values(command, skip):
        cm.out.library_dirs.append(LibraryDir(w.text, cm.out.span(w.start, w.end), w.expanded))


def _cm_target(cm: _CMake, command: _Command) -> None:
    """add_executable / add_library (IMPORTED and ALIAS targets compile nothing)."""
    if not command.args or any(a.text in ("IMPORTED", "ALIAS") for a in command.args[1:3]):
        return
    name = command.args[0]
    kind = "executable" if command.name.lower() == "add_executable" else "library"
    cm.out.targets.append(Target(name.text, cm.out.span(name.start, name.end), kind))
    cm.sources(cm.values(command), name.text)


def _cm_target_sources(cm: _CMake, command: _Command) -> None:
    if command.args:
        cm.sources(cm.values(command), command.args[0].text)


def _cm_subdirectory(cm: _CMake, command: _Command) -> None:
    if command.args:  # the span is the argument here, even when it is a ${VAR} set elsewhere
        arg = command.args[0]
        cm.out.source(cm.item_word(arg.text, arg.start, True, arg), kind=SourceKind.SUBDIRECTORY)


def _cm_fetch(cm: _CMake, command: _Command) -> None:
    """FetchContent_Declare(name GIT_REPOSITORY url ...): a subdirectory made available later."""
    if not command.args:
        return
    name = command.args[0]
    named = next((a.text for a in command.args if mentions_cmsis_nn(a.text)), name.text)
    cm.out.sources.append(
        SourceRef(name.text, cm.out.span(name.start, name.end), named, SourceKind.SUBDIRECTORY)
    )


def _cm_include(cm: _CMake, command: _Command) -> None:
    for w in cm.items(command.args[:1]):
        cm.out.includes.append(IncludedFile(w.text, cm.out.span(w.start, w.end), w.expanded))


_CMAKE_HANDLERS: dict[str, Callable[[_CMake, _Command], None]] = {
    "set": _cm_set,
    "string": _cm_append,
    "list": _cm_append,
    "file": _cm_file,
    "add_compile_options": _cm_compile_options,
    "target_compile_options": _cm_compile_options,
    "add_compile_definitions": _cm_definitions,
    "target_compile_definitions": _cm_definitions,
    "add_definitions": _cm_definitions,
    "set_source_files_properties": _cm_source_properties,
    "set_target_properties": _cm_target_properties,
    "set_property": _cm_set_property,
    "target_link_libraries": _cm_link,
    "link_libraries": _cm_link,
    "include_directories": _cm_include_dirs,
    "target_include_directories": _cm_include_dirs,
    "link_directories": _cm_link_dirs,
    "target_link_directories": _cm_link_dirs,
    "add_executable": _cm_target,
    "add_library": _cm_target,
    "target_sources": _cm_target_sources,
    "add_subdirectory": _cm_subdirectory,
    "fetchcontent_declare": _cm_fetch,
    "include": _cm_include,
}


# ------------------------------------------------------------------------------------- compile_commands


def _parse_compile_commands(out: _Collector) -> None:
    try:
        located = locate(out.text)
    except (ValueError, AssertionError, RecursionError, IndexError) as exc:
        out.problem(f"not valid JSON: {exc}")
        return
    if not isinstance(located.value, list):
        out.problem("expected a list of compile commands")
        return
    for i, entry in enumerate(located.value):
        if isinstance(entry, dict) and isinstance(entry.get("file"), str):
            _compile_entry(out, located, i, entry)


def _offsets(located: Located, path: tuple[str | int, ...]) -> tuple[int, int]:
    span = located.values[path]
    return located.index.offset(span.line, span.column), located.index.offset(span.end_line, span.end_column)


def _compile_entry(out: _Collector, located: Located, i: int, entry: dict[str, object]) -> None:
    directory = entry.get("directory") if isinstance(entry.get("directory"), str) else ""
    file = str(entry["file"])
    absolute = os.path.normpath(os.path.join(str(directory), file))
    try:
        relative = Path(os.path.relpath(absolute, out.path.parent)).as_posix()
    except ValueError:  # another drive
        relative = Path(absolute).as_posix()
    start, end = _offsets(located, (i, "file"))
    out.sources.append(SourceRef(file, out.span(start + 1, end - 1), relative))
    words = [w for w in _entry_words(out, located, i, entry)[1:] if w.text != "-c"]
    words = [w for w in _drop_output(words) if posixpath.basename(w.text) != posixpath.basename(file)]
    _classify(words, out, Scope.files(relative), "compile_commands.json", compile=True, sources=False)


def _entry_words(out: _Collector, located: Located, i: int, entry: dict[str, object]) -> list[_Word]:
    arguments = entry.get("arguments")
    if isinstance(arguments, list):
        words = []
        for j, arg in enumerate(arguments):
            if isinstance(arg, str):
                start, end = _offsets(located, (i, "arguments", j))
                words.append(_Word(arg, start + 1, end - 1, arg, (start + 1, end - 1)))
        return words
    command = entry.get("command")
    if not isinstance(command, str):
        return []
    start, end = _offsets(located, (i, "command"))
    return _command_words(out.text, start + 1, end - 1, command)


def _command_words(text: str, start: int, end: int, command: str) -> list[_Word]:
    """The command's shell words, each placed in the JSON string (the whole string when escaped)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    raw, cursor, words = text[start:end], 0, []
    for token in tokens:
        at = raw.find(token, cursor)
        if at < 0:
            words.append(_Word(token, start, end, token, (start, end)))
            continue
        cursor = at + len(token)
        words.append(_Word(token, start + at, start + cursor, token, _cut(text, start + at, start + cursor)))
    return words


def _drop_output(words: list[_Word]) -> list[_Word]:
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w.text == "-o":
            skip = True
        else:
            out.append(w)
    return out


# ------------------------------------------------------------------------------------------- platformio

_INI_OPTION = re.compile(r"([A-Za-z0-9_.\-]+)[ \t]*[=:][ \t]*")
_INI_SECTION = re.compile(r"\[([^\]\n]+)\]")


@dataclass
class _Option:
    section: str
    key: str
    key_start: int
    segments: list[tuple[int, int]]
    """The value's pieces, one per physical line, comments cut off."""


def _ini_segment(text: str, start: int, end: int) -> tuple[int, int]:
    comment = re.search(r"(?:^|\s);", text[start:end])
    if comment:
        end = start + comment.start()
    while end > start and text[end - 1] in " \t\r":
        end -= 1
    while start < end and text[start] in " \t":
        start += 1
    return start, end


def _ini_options(out: _Collector) -> list[_Option]:
    text, section, pos = out.text, "", 0
    options: list[_Option] = []
    for line in text.split("\n"):
        start, end, pos = pos, pos + len(line), pos + len(line) + 1
        stripped = line.strip()
        if not stripped or stripped.startswith((";", "#")):
            continue
        if line[0] in " \t":
            if options and options[-1].section == section:
                options[-1].segments.append(_ini_segment(text, start, end))
            continue
        header = _INI_SECTION.match(line)
        option = _INI_OPTION.match(line)
        if header:
            section = header[1].strip()
            out.statement(
                "section",
                section,
                (start, end),
                (start + 1, start + 1 + len(header[1])),
                start + header.end(),
            )
        elif option:
            options.append(
                _Option(section, option[1], start, [_ini_segment(text, start + option.end(), end)])
            )
    return options


def _parse_platformio(out: _Collector) -> None:
    options = _ini_options(out)
    dirs = {
        o.key: out.text[o.segments[0][0] : o.segments[0][1]] for o in options if o.section == "platformio"
    }
    src_dir, lib_dir = (
        _norm(dirs.get("src_dir") or "src").rstrip("/"),
        _norm(dirs.get("lib_dir") or "lib").rstrip("/"),
    )
    out.default_sources = (f"{src_dir}/**", f"{lib_dir}/**")
    for option in options:
        last = ([s for s in option.segments if s[1] > s[0]] or option.segments[:1])[-1]
        out.statement(
            option.key,
            option.section,
            (option.key_start, last[1]),
            (option.key_start, option.key_start + len(option.key)),
            max(last[1], option.segments[0][0]),
        )
        _ini_option(out, option, src_dir)


def _ini_words(out: _Collector, option: _Option) -> list[_Word]:
    words = []
    for start, end in option.segments:
        for a, b in _words(out.text, start, end):
            words.append(_Word(out.text[a:b], a, b, out.text[a:b], _cut(out.text, a, b)))
    return words


def _ini_option(out: _Collector, option: _Option, src_dir: str) -> None:
    if option.key in ("build_flags", "build_src_flags", "src_build_flags"):
        scope = ALL if option.key == "build_flags" else Scope.files(f"{src_dir}/**")
        words = [w for w in _ini_words(out, option) if not w.text.startswith("!")]
        _classify(words, out, scope, option.key, compile=True, sources=False)
    elif option.key == "lib_deps":
        for start, end in option.segments:
            for match in re.finditer(r"[^,]+", out.text[start:end]):
                a, b = _ini_segment(out.text, start + match.start(), start + match.end())
                if b > a:
                    out.libraries.append(Library(out.text[a:b], out.span(a, b), LibraryKind.PACKAGE))
    elif option.key in ("build_src_filter", "src_filter"):
        for start, end in option.segments:
            for match in re.finditer(r"\+<([^>]*)>", out.text[start:end]):
                pattern = match[1].strip()
                pattern = pattern + "**" if pattern.endswith("/") else pattern.replace("*", "**")
                a = start + match.start(1)
                out.sources.append(
                    SourceRef(
                        match[1],
                        out.span(a, a + len(match[1])),
                        f"{src_dir}/{_norm(pattern)}",
                        SourceKind.GLOB,
                    )
                )


# ---------------------------------------------------------------------------------------------- driver


def parse_build_file(path: Path, text: str) -> BuildFacts:
    """The facts of one build file; never raises (what it cannot read is in `problems`)."""
    kind = BuildKind.of(path)
    limit = MAX_COMPILE_COMMANDS if kind is BuildKind.COMPILE_COMMANDS else MAX_TEXT
    if len(text) > limit:
        return BuildFacts(
            path, kind, problems=(BuildProblem(f"not read: larger than {limit} characters", Span.at(0)),)
        )
    if "\x00" in text:
        return BuildFacts(path, kind, problems=(BuildProblem("not read: a binary file", Span.at(0)),))
    out = _Collector(path, kind, text)
    try:
        _PARSERS[kind](out)
    except Exception as exc:  # a reader bug must cost this file's remaining facts, never the server
        out.problem(f"could not read past a construct ({type(exc).__name__}: {exc}); facts are partial")
    return out.facts()


def _unknown(out: _Collector) -> None:
    out.problem(
        "not a build file this reader knows (Makefile, CMakeLists.txt, compile_commands.json, platformio.ini)"
    )


_PARSERS: dict[BuildKind, Callable[[_Collector], None]] = {
    BuildKind.MAKE: lambda out: _Make(out).run(),
    BuildKind.CMAKE: lambda out: _CMake(out).run(),
    BuildKind.COMPILE_COMMANDS: _parse_compile_commands,
    BuildKind.PLATFORMIO: _parse_platformio,
    BuildKind.UNKNOWN: _unknown,
}

__all__ = [
    "ALL", "BuildFacts", "BuildKind", "BuildProblem", "Definition", "FlagUse", "IncludeDir", "IncludedFile",
    "Library", "LibraryDir", "LibraryKind", "Scope", "ScopeKind", "SourceKind", "SourceRef", "Statement",
    "Target", "glob_match", "in_cmsis_nn", "mentions_cmsis_nn", "parse_build_file", "pattern_covers",
]  # fmt: skip
