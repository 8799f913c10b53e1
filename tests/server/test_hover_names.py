"""A hover shows names from the params JSON as text: a name cannot become a link, an image fetched from
anywhere, HTML, or end its code span; it is shortened and kept on one line."""

from __future__ import annotations

from fixpoint_server.features.hover import _code, _md

from quantcore import limits


def test_markup_in_a_name_is_escaped() -> None:
    assert _md("conv1") == "conv1"
    assert _md("![t](https://evil.example/t.png)") == r"\!\[t\]\(https\://evil\.example/t\.png\)"
    assert _md("<img src=x onerror=y>") == r"\<img src=x onerror=y\>"
    assert _md("a\nb") == r"a\<U\+000A\>b"


def test_a_code_span_cannot_be_ended_from_inside() -> None:
    assert _code("conv1.weight") == "`conv1.weight`"
    assert _code("x` [l](command:evil) `") == "`x' [l](command:evil) '`"


def test_a_long_name_is_shortened() -> None:
    assert len(_code("w" * 10_000)) == limits.NAME_MAX_CHARS + 2
