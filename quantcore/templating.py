"""The jinja2 environment every generated file is rendered with (templates/ of the repository).

The templates live in the repository's templates/ folder, packaged into the wheel as
quantcore/_templates; rendering is strict (an undefined variable is an error, never an empty string) and
the filters below are the only C formatting done in Python.

Text from a model or a setting must never reach generated C, a linker script or a CMake file as is (a
node named `x */ code /*` would put code into the firmware). So every `{{ value }}` is checked on its way
out (`_finalize`): numbers pass, and plain text passes only when it cannot leave any C context -
identifiers, numbers, shapes, lists (`PLAIN`); anything else must have gone through a filter that made it
safe for where it goes (`c_comment`, `c_string`), or be C that the templates' own macros built
(`c_code`, whose values were each checked in turn). A template that forgets a filter fails to render.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

import quantcore
from quantcore.display import printable, shorten
from quantcore.errors import QuantcoreError

PLAIN = re.compile(r"[A-Za-z0-9_ .,:=+\-\[\]]*\Z")
"""Text that is safe anywhere in C, a linker script or CMake: no quote, backslash, slash, star, `#`, `?`,
`;` or line break, so it can neither end a comment or string nor start a directive, statement or trigraph."""


class TemplateValueError(QuantcoreError):
    """A template printed text that no filter made safe: a Fixpoint bug, caught before anything is written."""


class CText(str):
    """Text made safe for the place a template puts it (a filter's output, or C built by our own macros)."""


def templates_dir() -> Path:
    """templates/ of a source checkout, else the copy packaged in the wheel."""
    package = Path(quantcore.__file__).resolve().parent
    for candidate in (package / "_templates", package.parent / "templates"):
        if (candidate / "target").is_dir():
            return candidate
    raise FileNotFoundError(f"the Fixpoint templates are missing (looked in {package}/_templates)")


def c_comment(text: object) -> CText:
    """`text` safe inside a /* */ or // comment: one printable line that cannot end or open a comment
    (`*/`, `/*`) nor form a trigraph (`??/` is a line-splicing backslash in strict ISO modes)."""
    line = printable(shorten(str(text)))
    for pattern, spaced in ((r"\*(?=/)", "* "), (r"/(?=\*)", "/ "), (r"\?(?=\?)", "? ")):
        line = re.sub(pattern, spaced, line)
    return CText(line)


def c_string(text: object) -> CText:
    """A C string literal of `text` shown as one printable line (the firmware prints it on its log line):
    quotes and `?` (trigraphs) escaped; backslashes and control characters were made <U+XXXX>."""
    line = printable(shorten(str(text)))
    return CText('"' + line.replace('"', '\\"').replace("?", "\\?") + '"')


def c_code(text: object) -> CText:
    """C text our own template macros built: each value in it already passed `_finalize`."""
    return CText(str(text))


def c_float(value: float) -> str:
    """A float macro value that round-trips: repr's shortest digits, with the f suffix."""
    text = repr(float(value))
    return f"{text}f" if any(ch in text for ch in ".e") else f"{text}.0f"


def shape(dims: Sequence[int]) -> str:
    return "[" + "x".join(str(int(d)) for d in dims) + "]"


def _finalize(value: Any) -> Any:
    """Every `{{ value }}` on its way out: numbers, filtered text and PLAIN text pass; anything else stops
    the render (fail closed: a new template variable holding a name cannot slip through unescaped)."""
    if isinstance(value, (CText, int, float)):
        return value
    text = str(value)
    if PLAIN.match(text):
        return text
    raise TemplateValueError(
        f"a template printed {shorten(printable(text), 80)!r} without c_comment, c_string or c_code;"
        " nothing was written (this is a Fixpoint bug: please report it)"
    )


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # C, linker scripts and CMake, not HTML
        finalize=_finalize,
    )
    env.filters.update(c_comment=c_comment, c_string=c_string, c_code=c_code, c_float=c_float, shape=shape)
    return env


def render(template: str, **context: Any) -> str:
    """The text of templates/<template> for `context`."""
    return environment().get_template(template).render(**context)


def file_mode(path: Path) -> int:
    """The mode a file written at `path` should get: the old file's, else what a plain open() gives."""
    if path.exists():
        return path.stat().st_mode & 0o7777
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_text(path: Path, text: str) -> Path:
    """Write atomically (temp file + rename) and only when the content changes, so builds stay cached."""
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        # mkstemp makes the file private (0600); give it the mode a plain open() would have.
        os.chmod(tmp, file_mode(path))
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
