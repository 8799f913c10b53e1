"""SplicedDocument (documents.py) makes the text pygls's own TextDocument makes, for every change: CRLF
and astral characters (UTF-16 columns count them twice), line breaks pygls also splits at, positions
past a line's end or past the last line, reversed ranges, each position encoding."""

from __future__ import annotations

import pytest
from fixpoint_server.documents import SplicedDocument, line_start, plain
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types as lsp
from pygls.workspace import PositionCodec, TextDocument

from tests.fuzzing import fuzz

URI = "file:///fw/src/model.c"
ENCODINGS = [lsp.PositionEncodingKind.Utf16, lsp.PositionEncodingKind.Utf8, lsp.PositionEncodingKind.Utf32]
CHARS = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\U0001f600", "é", "\r", "\u2028", "\v"])
PLAIN_CHARS = st.sampled_from(["a", "b", " ", "\n", "\r\n", "\U0001f600", "é"])


def documents(text: str, encoding: str) -> tuple[TextDocument, SplicedDocument]:
    return tuple(  # type: ignore[return-value]
        kind(URI, text, 1, "c", position_codec=PositionCodec(encoding=encoding))
        for kind in (TextDocument, SplicedDocument)
    )


def change(data: st.DataObject, text: str) -> lsp.TextDocumentContentChangePartial:
    lines = text.count("\n") + 2
    position = st.builds(lsp.Position, line=st.integers(0, lines), character=st.integers(0, 12))
    start, end = data.draw(position), data.draw(position)
    if data.draw(st.booleans()):  # mostly forward ranges, as editors send them
        start, end = (
            min(start, end, key=lambda p: (p.line, p.character)),
            max(start, end, key=lambda p: (p.line, p.character)),
        )
    new = "".join(data.draw(st.lists(CHARS, max_size=4)))
    return lsp.TextDocumentContentChangePartial(range=lsp.Range(start=start, end=end), text=new)


@fuzz(150)
@given(
    chars=st.lists(st.one_of(PLAIN_CHARS, CHARS), max_size=40),
    encoding=st.sampled_from(ENCODINGS),
    data=st.data(),
)
def test_changes_make_pygls_text(chars: list[str], encoding: str, data: st.DataObject) -> None:
    theirs, ours = documents("".join(chars), encoding)
    for _ in range(data.draw(st.integers(1, 6))):
        edit = change(data, theirs.source)
        theirs.apply_change(edit.__class__(range=_copy(edit.range), text=edit.text))
        ours.apply_change(edit)
        assert ours.source == theirs.source


def _copy(rng: lsp.Range) -> lsp.Range:
    """pygls's codec clamps the positions it converts in place: each document gets its own."""
    return lsp.Range(
        start=lsp.Position(rng.start.line, rng.start.character),
        end=lsp.Position(rng.end.line, rng.end.character),
    )


def test_crlf_and_astral_characters_in_utf16() -> None:
    text = "int a; /* \U0001f600 */ int b;\r\nint c;\r\n"
    _, ours = documents(text, lsp.PositionEncodingKind.Utf16)
    # "b" is at code point 19 of line 0, UTF-16 unit 20 (the emoji is two units)
    ours.apply_change(
        lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=lsp.Position(0, 20), end=lsp.Position(0, 21)), text="weights[4]"
        )
    )
    assert ours.source == "int a; /* \U0001f600 */ int weights[4];\r\nint c;\r\n"
    ours.apply_change(
        lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=lsp.Position(0, 31), end=lsp.Position(1, 0)), text=" /* x */\r\n"
        )
    )
    assert ours.source == "int a; /* \U0001f600 */ int weights[4]; /* x */\r\nint c;\r\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\nb\r\nc", True),
        ("a\rb", False),
        ("a\r", False),
        ("a\u2028b", False),
        ("a\x0cb", False),
        ("é\U0001f600\n", True),
    ],
)
def test_plain(text: str, expected: bool) -> None:
    assert plain(text) is expected


def test_line_start_across_chunks() -> None:
    text = "x\n" * 100_000
    assert [line_start(text, n) for n in (0, 1, 65_536, 99_999, 100_000, 100_001)] == [
        0, 2, 131_072, 199_998, 200_000, None,
    ]  # fmt: skip
