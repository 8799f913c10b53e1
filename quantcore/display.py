"""How a name taken from a file is shown: in messages, generated C comments and strings, the firmware log.

Node, tensor and file names come from models and settings the user was sent: they can hold newlines (a
forged line in a log or the firmware's line protocol), comment terminators, quotes, backslashes, trigraphs
(`??/` is a backslash to a C compiler in strict ISO modes), any Unicode, and 10,000 characters. Wherever
such a name is shown it is shortened, then kept on one line: `printable` (plain ASCII, no backslash) for
generated C and the firmware's log, `one_line` (`shown`, `quoted`) for messages.
"""

from __future__ import annotations

from quantcore import limits

_ELLIPSIS = "..."


def shorten(text: str, limit: int = limits.NAME_MAX_CHARS) -> str:
    """`text` cut in the middle to at most `limit` characters (both ends carry meaning in graph names)."""
    if len(text) <= limit:
        return text
    keep = max(limit - len(_ELLIPSIS), 2)
    return text[: keep - keep // 2] + _ELLIPSIS + text[len(text) - keep // 2 :]


def printable(text: str) -> str:
    """`text` as one line of printable ASCII: other characters and the backslash become <U+XXXX>."""
    return "".join(ch if " " <= ch <= "~" and ch != "\\" else f"<U+{ord(ch):04X}>" for ch in text)


def one_line(text: str) -> str:
    """`text` with every character that is not printable (line breaks, controls, bidi overrides) as
    <U+XXXX>; other Unicode (a folder named in Chinese) stays as it is. For messages."""
    return "".join(ch if ch.isprintable() else f"<U+{ord(ch):04X}>" for ch in text)


def shown(name: str, limit: int = limits.NAME_MAX_CHARS) -> str:
    """`name` shortened and on one line (unprintable characters as <U+XXXX>), not yet quoted."""
    return one_line(shorten(name, limit))


def quoted(name: object, limit: int = limits.NAME_MAX_CHARS) -> str:
    """A name for a message: shown and quoted, e.g. 'conv1' or 'x<U+000A>y'."""
    return repr(shown(str(name), limit))


def said(error: BaseException, limit: int = 4 * limits.NAME_MAX_CHARS) -> str:
    """A library's message (it may quote the model's names, or long lists of its numbers): every run of
    whitespace one space, then shown."""
    return shown(" ".join(str(error).split()), limit)
