"""LineIndex (findings.py) against the plain definition: a line is what lies between two "\n", a column
counts code points; "\r", U+2028 and astral characters are ordinary characters of a line. The index
works in blocks of characters: tiny blocks put every line break at every place relative
to a block's edges."""

from __future__ import annotations

import pytest
from fixpoint_server.findings import LineIndex, Span
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import fuzz


def reference_position(text: str, offset: int) -> tuple[int, int]:
    before = text[: max(0, offset)]
    return before.count("\n"), offset - (before.rfind("\n") + 1)


def reference_offset(text: str, line: int, column: int) -> int:
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    return len(text) if line >= len(starts) else min(starts[max(line, 0)] + column, len(text))


TEXTS = st.text(alphabet=st.sampled_from("ab\n\r\u2028\U0001f600"), max_size=300)


@fuzz(150)
@given(text=TEXTS, block=st.sampled_from([1, 2, 3, 7, 64, 4096]), data=st.data())
def test_positions_and_offsets_are_the_plain_ones(text: str, block: int, data: st.DataObject) -> None:
    index = LineIndex(text, block)
    for offset in data.draw(st.lists(st.integers(0, len(text) + 3), max_size=20)):
        assert index.position(offset) == reference_position(text, offset)
    lines = text.count("\n")
    for line, column in data.draw(
        st.lists(st.tuples(st.integers(0, lines + 2), st.integers(0, 9)), max_size=20)
    ):
        assert index.offset(line, column) == reference_offset(text, line, column)


@pytest.mark.parametrize("block", [1, 4096])
def test_crlf_and_astral_characters(block: int) -> None:
    text = "a\U0001f600b\r\nc\u2028d\n\nend"
    index = LineIndex(text, block)
    assert index.span(text.index("b"), text.index("d")) == Span(0, 2, 1, 2)
    assert index.position(len(text)) == (3, 3)
    assert index.position(len(text) + 2) == (3, 5)
    assert [index.offset(line, 0) for line in range(5)] == [0, 5, 9, 10, len(text)]
