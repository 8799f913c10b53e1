"""compile_commands.json: each entry's source and the flags of its command (an `arguments` list or a
`command` string, split as the shell does), scoped to that one source, with spans inside the JSON.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from pathlib import Path

from fixpoint_server.parse.build_files.collect import Collector, Word, classify, word_removal
from fixpoint_server.parse.build_files.facts import Scope, SourceRef
from fixpoint_server.parse.json_positions import Located, locate


def parse_compile_commands(out: Collector) -> None:
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


def _compile_entry(out: Collector, located: Located, i: int, entry: dict[str, object]) -> None:
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
    classify(words, out, Scope.files(relative), "compile_commands.json", compile=True, sources=False)


def _entry_words(out: Collector, located: Located, i: int, entry: dict[str, object]) -> list[Word]:
    arguments = entry.get("arguments")
    if isinstance(arguments, list):
        words = []
        for j, arg in enumerate(arguments):
            if isinstance(arg, str):
                start, end = _offsets(located, (i, "arguments", j))
                words.append(Word(arg, start + 1, end - 1, arg, (start + 1, end - 1)))
        return words
    command = entry.get("command")
    if not isinstance(command, str):
        return []
    start, end = _offsets(located, (i, "command"))
    return _command_words(out.text, start + 1, end - 1, command)


def _command_words(text: str, start: int, end: int, command: str) -> list[Word]:
    """The command's shell words, each placed in the JSON string (the whole string when escaped)."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    raw, cursor, words = text[start:end], 0, []
    for token in tokens:
        at = raw.find(token, cursor)
        if at < 0:
            words.append(Word(token, start, end, token, (start, end)))
            continue
        cursor = at + len(token)
        words.append(
            Word(token, start + at, start + cursor, token, word_removal(text, start + at, start + cursor))
        )
    return words


def _drop_output(words: list[Word]) -> list[Word]:
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w.text == "-o":
            skip = True
        else:
            out.append(w)
    return out
