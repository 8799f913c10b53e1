"""Rendering the target templates (templates/target/*.j2): startup code, linker script, harness, vectors.

The templates live in the repository's templates/ folder, packaged into the wheel as
quantcore/_templates; rendering is strict (an undefined variable is an error, never an empty string).
"""

from __future__ import annotations

import functools
import os
import tempfile
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


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # C, linker scripts and CMake, not HTML
    )


def render(name: str, **context: Any) -> str:
    """The text of templates/target/<name>.j2 for `context`."""
    return _environment().get_template(f"target/{name}.j2").render(**context)


def write_text(path: Path, text: str) -> Path:
    """Write atomically (temp file + rename) and only when the content changes, so builds stay cached."""
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    Path(tmp).replace(path)
    return path
