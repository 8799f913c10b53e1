"""platformio.ini: options by section, with continuation lines and `;` comments; build_flags,
lib_deps and build_src_filter become facts, and src/ and lib/ are the sources it builds unnamed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fixpoint_server.parse.build_files.collect import Collector, Word, classify, word_removal
from fixpoint_server.parse.build_files.facts import ALL, Library, LibraryKind, Scope, SourceKind, SourceRef
from fixpoint_server.parse.build_files.make_text import make_words
from fixpoint_server.parse.build_files.paths import norm_path

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


def _ini_options(out: Collector) -> list[_Option]:
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


def parse_platformio(out: Collector) -> None:
    options = _ini_options(out)
    dirs = {
        o.key: out.text[o.segments[0][0] : o.segments[0][1]] for o in options if o.section == "platformio"
    }
    src_dir, lib_dir = (
        norm_path(dirs.get("src_dir") or "src").rstrip("/"),
        norm_path(dirs.get("lib_dir") or "lib").rstrip("/"),
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


def _ini_words(out: Collector, option: _Option) -> list[Word]:
    words = []
    for start, end in option.segments:
        for a, b in make_words(out.text, start, end):
            words.append(Word(out.text[a:b], a, b, out.text[a:b], word_removal(out.text, a, b)))
    return words


def _ini_option(out: Collector, option: _Option, src_dir: str) -> None:
    if option.key in ("build_flags", "build_src_flags", "src_build_flags"):
        scope = ALL if option.key == "build_flags" else Scope.files(f"{src_dir}/**")
        words = [w for w in _ini_words(out, option) if not w.text.startswith("!")]
        classify(words, out, scope, option.key, compile=True, sources=False)
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
                        f"{src_dir}/{norm_path(pattern)}",
                        SourceKind.GLOB,
                    )
                )
