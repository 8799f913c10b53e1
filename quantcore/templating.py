"""The jinja2 environment every generated file is rendered with (templates/ of the repository).

The templates live in the repository's templates/ folder, packaged into the wheel as
quantcore/_templates; rendering is strict (an undefined variable is an error, never an empty string) and
the filters below are the only C formatting done in Python.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

import quantcore


def templates_dir() -> Path:
    """templates/ of a source checkout, else the copy packaged in the wheel."""
    package = Path(quantcore.__file__).resolve().parent
    for candidate in (package / "_templates", package.parent / "templates"):
        if (candidate / "target").is_dir():
            return candidate
    raise FileNotFoundError(f"the Fixpoint templates are missing (looked in {package}/_templates)")


def c_comment(text: object) -> str:
    """`text` safe inside a /* */ comment: no comment terminator, no line break."""
    return " ".join(str(text).replace("*/", "* /").replace("/*", "/ *").split())


def c_string(text: object) -> str:
    """A C string literal; JSON's escapes are C's for the ASCII names graphs use."""
    return json.dumps(str(text), ensure_ascii=True)


def c_float(value: float) -> str:
    """A float macro value that round-trips: repr's shortest digits, with the f suffix."""
    text = repr(float(value))
    return f"{text}f" if any(ch in text for ch in ".e") else f"{text}.0f"


def shape(dims: Sequence[int]) -> str:
    return "[" + "x".join(str(int(d)) for d in dims) + "]"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # C, linker scripts and CMake, not HTML
    )
    env.filters.update(c_comment=c_comment, c_string=c_string, c_float=c_float, shape=shape)
    return env


def render(template: str, **context: Any) -> str:
    """The text of templates/<template> for `context`."""
    return environment().get_template(template).render(**context)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
