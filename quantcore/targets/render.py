"""Rendering the target templates (templates/target/*.j2): startup code, linker script, harness, vectors."""

from __future__ import annotations

from typing import Any

from quantcore.templating import templates_dir, write_text

__all__ = ["render", "templates_dir", "write_text"]


def render(name: str, **context: Any) -> str:
    """The text of templates/target/<name>.j2 for `context`."""
    from quantcore.templating import render as render_template

    return render_template(f"target/{name}.j2", **context)
