"""CMakeLists.txt and *.cmake files: commands read in order with the variables they set (`${VAR}`
expanded), flag variables (CMAKE_C_FLAGS, CMSIS-NN's optimization level) and the sources kept in
variables. What each command means is in cmake_commands.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fixpoint_server.parse.build_files.cmake_commands import CMAKE_HANDLERS
from fixpoint_server.parse.build_files.cmake_lex import (
    Arg,
    Command,
    genex_inner,
    read_commands,
    split_items,
)
from fixpoint_server.parse.build_files.collect import Collector, Word, classify, word_removal
from fixpoint_server.parse.build_files.facts import ALL, Definition, Scope
from fixpoint_server.parse.build_files.paths import is_source, norm_path

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
_CMAKE_REF = re.compile(r"\$\{([A-Za-z0-9_.+\-/]+)\}")


class CMake:
    """One CMakeLists.txt / .cmake: commands read in order, with the variables they set."""

    def __init__(self, out: Collector) -> None:
        self.out = out
        self.text = out.text
        self.vars: dict[str, list[Word]] = {}
        self.consumed: set[tuple[int, int]] = set()
        self.stored: dict[tuple[int, int], Word] = {}

    def run(self) -> None:
        handlers = CMAKE_HANDLERS
        for command in read_commands(self.text):
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
        return norm_path(text.replace("\x02", "${").replace("\x03", "}"))

    def items(self, args: Sequence[Arg]) -> list[Word]:
        words: list[Word] = []
        for arg in args:
            whole = split_items(arg.text, arg.start)
            for text, start in whole:
                words.extend(self.item(arg, text, start, len(whole) == 1))
        return words

    def item(self, arg: Arg, text: str, start: int, alone: bool) -> list[Word]:
        ref = re.fullmatch(r"\$\{([A-Za-z0-9_.+\-/]+)\}", text)
        if ref and ref[1] in self.vars:
            return [w if w.origin else _replace_origin(w, ref[1]) for w in self.vars[ref[1]]]
        if text.startswith("SHELL:"):
            text, start = text[6:], start + 6
        if text.startswith("$<"):
            inner = genex_inner(text)
            if inner is None:
                return []
            return [self.item_word(t, start + inner[1] + s, False, arg) for t, s in split_items(inner[0], 0)]
        return [self.item_word(text, start, alone, arg)]

    def item_word(self, text: str, start: int, alone: bool, arg: Arg) -> Word:
        end = start + len(text)
        cut = word_removal(self.text, *arg.outer) if alone else word_removal(self.text, start, end)
        return Word(text, start, end, self.expand(text), cut)

    def values(self, command: Command, skip: int = 1) -> list[Word]:
        return [w for w in self.items(command.args[skip:]) if w.text not in _CMAKE_KEYWORDS]

    # -- facts

    def flags(self, words: Sequence[Word], scope: Scope, context: str) -> None:
        classify(words, self.out, scope, context, compile=True, sources=False)

    def definitions(self, words: Sequence[Word], scope: Scope) -> None:
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

    def sources(self, words: Sequence[Word], target: str | None) -> None:
        for w in words:
            self.consumed.add((w.start, w.end))
            if (w.glob or is_source(w.expanded)) and not w.text.startswith("$<"):
                self.out.source(w, target)

    def store(self, name: str, words: list[Word], append: bool = False) -> None:
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
                and (w.glob or is_source(w.expanded))
            ):
                self.consumed.add((w.start, w.end))
                self.out.source(w)


def _replace_origin(word: Word, origin: str) -> Word:
    return Word(word.text, word.start, word.end, word.expanded, word.cut, origin, word.glob)
