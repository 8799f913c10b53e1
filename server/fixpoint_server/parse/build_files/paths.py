"""Paths and patterns of build files: glob matching (the syntax of facts.py's scopes), object patterns
that stand for the sources they are built from, CMSIS-NN recognised by a folder's or a word's name, and
which words name sources.
"""

from __future__ import annotations

import functools
import posixpath
import re


def norm_path(path: str) -> str:
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
        return _glob_regex(norm_path(pattern)).fullmatch(norm_path(path)) is not None
    except re.error:
        return norm_path(pattern) == norm_path(path)


OBJECT_SUFFIXES = (".o", ".obj")
_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".s", ".S", ".asm")
_OBJECT_DIR = re.compile(r"(?i)\$[({][^)}]*[)}]|[^/]*(?:build|obj|out)[^/]*|bin|debug|release")
"""A first folder of an object pattern that is where objects go rather than where sources are."""


@functools.lru_cache(maxsize=65536)
def pattern_covers(pattern: str, path: str) -> bool:
    """Whether a scope pattern reaches the source `path`: a source glob matches it, or an object
    pattern names its object (`CMSIS-NN/%.o` and `build/CMSIS-NN/%.o` both reach CMSIS-NN/x/y.c)."""
    if glob_match(pattern, path):
        return True
    stem, suffix = posixpath.splitext(norm_path(pattern))
    if suffix not in OBJECT_SUFFIXES:
        return False
    source_stem = posixpath.splitext(norm_path(path))[0]
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
    return _CMSIS_NN_DIR.search(norm_path(path)) is not None


def mentions_cmsis_nn(text: str) -> bool:
    """A path, variable, target or package that names CMSIS-NN (CMSIS-NN, cmsis_nn, CMSISNN, CMSIS/NN)."""
    return _CMSIS_NN.search(text) is not None


def is_source(text: str) -> bool:
    return text.endswith(_SOURCE_SUFFIXES) and not text.startswith("-")


def names_sources(text: str) -> bool:
    """A source, an object (standing for the source it is built from), or a pattern of either."""
    return is_source(text) or text.endswith(OBJECT_SUFFIXES) or text.endswith("*")


def has_wildcard(text: str) -> bool:
    return any(c in text for c in "*?[")
