"""How a name taken from a file is shown: in messages, generated C comments and strings, the firmware log.

Node, tensor and file names come from models and settings the user was sent: they can hold newlines (a
forged line in a log or the firmware's line protocol), comment terminators, quotes, backslashes, trigraphs
(`??/` is a backslash to a C compiler in strict ISO modes), any Unicode, and 10,000 characters. Wherever
such a name is shown it goes through `printable` (one line of plain ASCII, no backslash) after `shorten`.
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


def name(text: object, limit: int = limits.NAME_MAX_CHARS) -> str:
    """A name for a message: shortened, on one line and quoted, e.g. 'conv1' or 'x<U+000A>y'."""
    return "'" + one_line(shorten(str(text), limit)).replace("'", "\\'") + "'"
