"""Names from a model as messages show them (the importer's errors, the support table's reasons).

A node or tensor name is whatever the file says: a newline would forge a second line of a message (or of
the language server's diagnostics), and 10,000 characters would bury it. `shown` shortens a name
(quantcore.display.shorten, to quantcore.limits.NAME_MAX_CHARS) and writes every unprintable character
as <U+XXXX>; messages then quote it with repr() (ModelError does so for its node).
"""

from __future__ import annotations

from quantcore import display, limits


def shown(name: str, limit: int = limits.NAME_MAX_CHARS) -> str:
    """`name` shortened and on one line (unprintable characters as <U+XXXX>), not yet quoted."""
    return display.one_line(display.shorten(name, limit))


def quoted(name: str) -> str:
    """`name` shown and quoted, for a message: 'conv1', 'x<U+000A>y'."""
    return repr(shown(name))


def said(error: BaseException, limit: int = 4 * limits.NAME_MAX_CHARS) -> str:
    """A library's message (it may quote the model's names, or long lists of its numbers): every run of
    whitespace one space, then shown."""
    return shown(" ".join(str(error).split()), limit)
