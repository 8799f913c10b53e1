"""Did hostile text reach code? A scan of generated C (and linker scripts) for a marker outside comments
and string literals.

Translation phases 1-2 (trigraphs, line splicing) are applied here, since `gcc -fpreprocessed` skips them
but the firmware build (-std=c11) does not; then gcc removes the comments (`-fpreprocessed -dD -E`: no
macro expansion, directives kept) and a string-literal aware tokenizer looks for the marker as a token.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

SUFFIXES = {".c", ".h", ".ld", ".cmake", ".mk"}
_TRIGRAPHS = {"=": "#", "(": "[", "/": "\\", ")": "]", "'": "^", "<": "{", "!": "|", ">": "}", "-": "~"}
_TOKEN = re.compile(
    r"""
      "(?:\\.|[^"\\\n])*("|$)      # a string literal (to the line's end when unterminated)
    | '(?:\\.|[^'\\\n])*('|$)      # a character constant
    | (?P<ident>[A-Za-z_]\w*)
    """,
    re.VERBOSE | re.MULTILINE,
)


_LINE_MARKER = re.compile(r'^# (\d+) "')


def phases_1_2(text: str) -> str:
    """Line endings (CR, CR LF) to LF, trigraphs replaced, backslash-newline spliced, as C11 does."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"\?\?([=(/)'<!>-])", lambda m: _TRIGRAPHS[m.group(1)], text)
    return text.replace("\\\n", "")


def without_comments(text: str) -> str:
    """The text with its comments removed by gcc (directives kept, no macro expanded), with gcc's line
    markers (`# 12 "<stdin>"`) that say which line of the input each line of output is."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("gcc is needed to scan generated C")
    done = subprocess.run(
        [gcc, "-fpreprocessed", "-dD", "-E", "-x", "c", "-"],
        input=phases_1_2(text).encode("utf-8", "surrogateescape"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.stdout.decode("utf-8", "replace")


def code_tokens(text: str) -> list[tuple[int, str]]:
    """(input line, identifier) of every identifier outside string literals and character constants, in
    gcc's output (literals never span lines there: phases 1-2 are done)."""
    found = []
    line = 1
    for row in text.split("\n"):
        marker = _LINE_MARKER.match(row)
        if marker:
            line = int(marker.group(1))
            continue
        found += [(line, m.group("ident")) for m in _TOKEN.finditer(row) if m.group("ident")]
        line += 1
    return found


def generated_files(*folders: Path) -> list[Path]:
    """The text files of the firmware (model sources, harness, linker script) under `folders`."""
    files: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            files += sorted(
                p for p in folder.rglob("*") if p.is_file() and (p.suffix in SUFFIXES or p.name == "Makefile")
            )
    return files


def leaks(files: list[Path], marker: str) -> list[str]:
    """`file:line` of each place where `marker` is a token of code (outside comments and literals); the
    line counts lines as C does after phases 1-2 (a lone CR ends a line, a spliced line joins the last)."""
    places = []
    for path in files:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
        if marker not in text:
            continue
        for line, ident in code_tokens(without_comments(text)):
            if ident == marker:
                places.append(f"{path.name}:{line}")
    return places


def syntax_errors(folder: Path, include: Path) -> str | None:
    """The first error gcc finds in the C files of `folder` (syntax and types only, nothing built)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("gcc is needed to compile generated C")
    for source in sorted(folder.glob("*.c")):
        done = subprocess.run(
            [gcc, "-std=c11", "-fsyntax-only", f"-I{folder}", f"-I{include}", str(source)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "error" in line]
            return f"{source.name} does not compile: {(errors or [done.stderr.strip()])[0][-200:]}"
    return None
