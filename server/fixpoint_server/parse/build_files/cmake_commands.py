"""One handler per CMake command the reader understands (set, add_compile_options,
target_link_libraries, set_source_files_properties, add_subdirectory ...), each turning the command's
arguments into facts.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Protocol

from fixpoint_server.parse.build_files.cmake_lex import Arg, Command
from fixpoint_server.parse.build_files.collect import Collector, Word
from fixpoint_server.parse.build_files.facts import (
    ALL,
    IncludedFile,
    IncludeDir,
    Library,
    LibraryDir,
    LibraryKind,
    Scope,
    SourceKind,
    SourceRef,
    Target,
)
from fixpoint_server.parse.build_files.paths import mentions_cmsis_nn


class CMakeReader(Protocol):
    """What the handlers use of the reader that dispatches to them (cmake.CMake): its collector, its
    word readers and its fact recorders. Named by what it offers, so this module needs nothing of
    cmake.py."""

    @property
    def out(self) -> Collector: ...

    def items(self, args: Sequence[Arg]) -> list[Word]: ...

    def item_word(self, text: str, start: int, alone: bool, arg: Arg) -> Word: ...

    def values(self, command: Command, skip: int = 1) -> list[Word]: ...

    def flags(self, words: Sequence[Word], scope: Scope, context: str) -> None: ...

    def definitions(self, words: Sequence[Word], scope: Scope) -> None: ...

    def sources(self, words: Sequence[Word], target: str | None) -> None: ...

    def store(self, name: str, words: list[Word], append: bool = False) -> None: ...


def _set_values(args: list[Arg]) -> list[Arg]:
    """set(VAR values... [CACHE TYPE DOC [FORCE]] [PARENT_SCOPE]) -> the values."""
    for i, arg in enumerate(args):
        if arg.text in ("CACHE", "PARENT_SCOPE"):
            return args[:i]
    return args


def _cm_set(cm: CMakeReader, command: Command) -> None:
    if command.args:
        cm.store(command.args[0].text, cm.items(_set_values(command.args[1:])))


def _cm_append(cm: CMakeReader, command: Command) -> None:
    """string(APPEND VAR ...) and list(APPEND VAR ...)."""
    if len(command.args) >= 2 and command.args[0].text == "APPEND":
        cm.store(command.args[1].text, cm.items(command.args[2:]), append=True)


def _cm_file(cm: CMakeReader, command: Command) -> None:
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
    words = [Word(w.text, w.start, w.end, w.expanded, w.cut, w.origin, True) for w in cm.items(globs)]
    cm.store(command.args[1].text, words)


def _cm_compile_options(cm: CMakeReader, command: Command) -> None:
    if command.name.lower() == "add_compile_options":
        cm.flags(cm.values(command, 0), ALL, "add_compile_options")
    elif command.args:
        cm.flags(cm.values(command), Scope.of_target(command.args[0].text), "target_compile_options")


def _cm_definitions(cm: CMakeReader, command: Command) -> None:
    name = command.name.lower()
    if name == "target_compile_definitions" and command.args:
        cm.definitions(cm.values(command), Scope.of_target(command.args[0].text))
    elif name == "add_compile_definitions":
        cm.definitions(cm.values(command, 0), ALL)
    else:  # add_definitions takes raw flags: -DX, and anything else goes to the compiler too
        words = cm.values(command, 0)
        cm.definitions([w for w in words if w.text.startswith("-D")], ALL)
        cm.flags([w for w in words if not w.text.startswith("-D")], ALL, "add_definitions")


def _cm_source_properties(cm: CMakeReader, command: Command) -> None:
    """set_source_files_properties(files... PROPERTIES COMPILE_OPTIONS ... COMPILE_FLAGS ...)."""
    names = [a.text for a in command.args]
    if "PROPERTIES" not in names:
        return
    at = names.index("PROPERTIES")
    files = [w for w in cm.items(_drop_directory_args(command.args[:at]))]
    scope = Scope.files(*[w.expanded for w in files])
    _properties(cm, command.args[at + 1 :], scope, command.name.lower())


def _cm_target_properties(cm: CMakeReader, command: Command) -> None:
    names = [a.text for a in command.args]
    if "PROPERTIES" in names:
        at = names.index("PROPERTIES")
        for target in names[:at]:
            _properties(cm, command.args[at + 1 :], Scope.of_target(target), command.name.lower())


def _cm_set_property(cm: CMakeReader, command: Command) -> None:
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


def _drop_directory_args(args: list[Arg]) -> list[Arg]:
    out, skip = [], False
    for arg in args:
        if arg.text in ("DIRECTORY", "TARGET_DIRECTORY"):
            skip = True
        elif not skip:
            out.append(arg)
    return out


def _properties(cm: CMakeReader, args: list[Arg], scope: Scope, context: str, single: bool = False) -> None:
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


def _cm_link(cm: CMakeReader, command: Command) -> None:
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


def _cm_include_dirs(cm: CMakeReader, command: Command) -> None:
    if command.name.lower() == "include_directories":
        _include_words(cm, cm.values(command, 0), ALL)
    elif command.args:
        _include_words(cm, cm.values(command), Scope.of_target(command.args[0].text))


def _include_words(cm: CMakeReader, words: Sequence[Word], scope: Scope) -> None:
    for w in words:
        cm.out.include_dirs.append(IncludeDir(w.text, cm.out.span(w.start, w.end), w.expanded, scope))


def _cm_link_dirs(cm: CMakeReader, command: Command) -> None:
    skip = 1 if command.name.lower() == "target_link_directories" else 0
    for w in cm.values(command, skip):
        cm.out.library_dirs.append(LibraryDir(w.text, cm.out.span(w.start, w.end), w.expanded))


def _cm_target(cm: CMakeReader, command: Command) -> None:
    """add_executable / add_library (IMPORTED and ALIAS targets compile nothing)."""
    if not command.args or any(a.text in ("IMPORTED", "ALIAS") for a in command.args[1:3]):
        return
    name = command.args[0]
    kind = "executable" if command.name.lower() == "add_executable" else "library"
    cm.out.targets.append(Target(name.text, cm.out.span(name.start, name.end), kind))
    cm.sources(cm.values(command), name.text)


def _cm_target_sources(cm: CMakeReader, command: Command) -> None:
    if command.args:
        cm.sources(cm.values(command), command.args[0].text)


def _cm_subdirectory(cm: CMakeReader, command: Command) -> None:
    if command.args:  # the span is the argument here, even when it is a ${VAR} set elsewhere
        arg = command.args[0]
        cm.out.source(cm.item_word(arg.text, arg.start, True, arg), kind=SourceKind.SUBDIRECTORY)


def _cm_fetch(cm: CMakeReader, command: Command) -> None:
    """FetchContent_Declare(name GIT_REPOSITORY url ...): a subdirectory made available later."""
    if not command.args:
        return
    name = command.args[0]
    named = next((a.text for a in command.args if mentions_cmsis_nn(a.text)), name.text)
    cm.out.sources.append(
        SourceRef(name.text, cm.out.span(name.start, name.end), named, SourceKind.SUBDIRECTORY)
    )


def _cm_include(cm: CMakeReader, command: Command) -> None:
    for w in cm.items(command.args[:1]):
        cm.out.includes.append(IncludedFile(w.text, cm.out.span(w.start, w.end), w.expanded))


CMAKE_HANDLERS: dict[str, Callable[[CMakeReader, Command], None]] = {
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
