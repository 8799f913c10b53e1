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

The modules: facts (the records, and what scopes and their patterns mean), paths (globs, CMSIS-NN by
name), collect (what every reader shares), make_text and make, cmake_lex, cmake and cmake_commands,
compile_commands, platformio; this one picks the reader by the file's name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fixpoint_server.findings import Span
from fixpoint_server.parse.build_files.cmake import (
    CMSIS_NN_CMAKE_TARGET,
    CMSIS_NN_OPTIMIZATION_VARIABLE,
    CMake,
)
from fixpoint_server.parse.build_files.collect import Collector
from fixpoint_server.parse.build_files.compile_commands import parse_compile_commands
from fixpoint_server.parse.build_files.facts import (
    ALL,
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
    ScopeKind,
    SourceKind,
    SourceRef,
    Statement,
    Target,
)
from fixpoint_server.parse.build_files.make import Make
from fixpoint_server.parse.build_files.paths import glob_match, in_cmsis_nn, mentions_cmsis_nn, pattern_covers
from fixpoint_server.parse.build_files.platformio import parse_platformio

MAX_TEXT = 8 * 1024 * 1024
"""Make/CMake/ini files larger than this are not read (no real one is; a generated blob would stall)."""
MAX_COMPILE_COMMANDS = 64 * 1024 * 1024


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
    out = Collector(path, kind, text)
    try:
        _PARSERS[kind](out)
    except Exception as exc:  # a reader bug must cost this file's remaining facts, never the server
        out.problem(f"could not read past a construct ({type(exc).__name__}: {exc}); facts are partial")
    return out.facts()


def _unknown(out: Collector) -> None:
    out.problem(
        "not a build file this reader knows (Makefile, CMakeLists.txt, compile_commands.json, platformio.ini)"
    )


_PARSERS: dict[BuildKind, Callable[[Collector], None]] = {
    BuildKind.MAKE: lambda out: Make(out).run(),
    BuildKind.CMAKE: lambda out: CMake(out).run(),
    BuildKind.COMPILE_COMMANDS: parse_compile_commands,
    BuildKind.PLATFORMIO: parse_platformio,
    BuildKind.UNKNOWN: _unknown,
}

__all__ = [
    "ALL", "CMSIS_NN_CMAKE_TARGET", "CMSIS_NN_OPTIMIZATION_VARIABLE", "MAX_COMPILE_COMMANDS", "MAX_TEXT",
    "BuildFacts", "BuildKind", "BuildProblem", "Definition", "FlagUse", "IncludeDir", "IncludedFile",
    "Library", "LibraryDir", "LibraryKind", "Scope", "ScopeKind", "SourceKind", "SourceRef", "Statement",
    "Target", "glob_match", "in_cmsis_nn", "mentions_cmsis_nn", "parse_build_file", "pattern_covers",
]  # fmt: skip
