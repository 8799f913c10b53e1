"""The transcript parser: a good transcript, every way one can break, and fuzzed corruptions."""

from __future__ import annotations

import numpy as np
import pytest

from quantcore.targets import protocol
from quantcore.targets.errors import FirmwareFault
from quantcore.targets.protocol import Expectation, ProtocolError, parse

GOOD = """\
FIXPOINT BEGIN v1 model=m layers=2 cases=2
[CASE 0]
[LAYER 0 bytes=2 conv/1] 0102
[LAYER 1 bytes=1 odd] name] ff
[OUTPUT 0 bytes=1] ff
[CYCLES 0] 1234
[CASE 1]
[LAYER 0 bytes=2 conv/1] 0304
[LAYER 1 bytes=1 odd] name] 00
[OUTPUT 1 bytes=1] 00
FIXPOINT END status=ok
"""
EXPECT = Expectation((2, 1), 1, 2)


def test_a_good_transcript_parses_with_names_bytes_and_cycles() -> None:
    t = parse("boot banner\r\n" + GOOD.replace("\n", "\r\n"), EXPECT)
    assert t.ok and t.model == "m" and (t.layer_count, t.case_count) == (2, 2)
    assert t.cases[0].layers == [("conv/1", b"\x01\x02"), ("odd] name", b"\xff")]
    assert t.cases[0].cycles == 1234 and t.cases[1].cycles is None
    assert t.cases[1].output == b"\x00"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("0102", "010", "line 3: expected 4 hex digits"),
        ("bytes=2 conv/1] 0304", "bytes=3 conv/1] 030405", "line 8: expected layer 0 (conv/1) with bytes=2"),
        ("[LAYER 1 bytes=1 odd] name] 00", "[LAYER 2 bytes=1 x] 00", "line 9: expected '[LAYER 1"),
        ("[CASE 1]", "[CASE 7]", "line 7: expected [CASE 1]"),
        ("v1", "v9", "line 1: expected protocol v1"),
        ("cases=2", "cases=3", "line 1: expected layers=2 cases=2"),
        ("[OUTPUT 1 bytes=1] 00", "[OUTPUT 1 bytes=1] zz", "line 10: expected '[OUTPUT 1"),
        ("FIXPOINT END status=ok", "FIXPOINT END", "line 11: expected 'FIXPOINT END status="),
        ("[CASE 1]", "FIXPOINT END status=ok", "line 7: expected [CASE 1] (2 cases were announced)"),
    ],
)
def test_broken_lines_name_the_line_and_what_was_expected(old: str, new: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=__import__("re").escape(message)):
        parse(GOOD.replace(old, new, 1), EXPECT)


def test_a_missing_end_says_the_firmware_hung_or_crashed() -> None:
    with pytest.raises(
        ProtocolError, match=r"ends after line 10, where \[CASE 2\] or FIXPOINT END was expected.*hung"
    ):
        parse(GOOD.rsplit("FIXPOINT END", 1)[0], EXPECT)


def test_no_begin_at_all_quotes_what_was_printed() -> None:
    with pytest.raises(
        ProtocolError, match=r"'FIXPOINT BEGIN v1 \.\.\.' was expected.*printed 'Hard fault!'"
    ):
        parse("Hard fault!\n")
    with pytest.raises(ProtocolError, match="printed nothing"):
        parse("")


def test_a_failure_status_ends_early_with_its_details() -> None:
    text = GOOD.split("[CASE 1]")[0] + "[CASE 1]\nFIXPOINT END status=invoke-failed case=1 code=-3\n"
    t = parse(text, EXPECT)
    assert not t.ok and t.status == "invoke-failed" and t.details == {"case": 1, "code": -3}


def test_a_fault_report_is_a_firmware_fault_with_the_handler() -> None:
    text = GOOD.split("[CASE 1]")[0] + "FIXPOINT FAULT UsageFault cfsr=0x00010000 hfsr=0x00000000\n"
    with pytest.raises(FirmwareFault, match=r"line 7\): FIXPOINT FAULT UsageFault"):
        parse(text, EXPECT)
    assert protocol.is_final("FIXPOINT FAULT HardFault\r\n") and protocol.is_final("FIXPOINT END status=ok")
    assert not protocol.is_final("[CASE 0]")


def test_fuzzed_corruptions_are_protocol_errors_or_parse_never_anything_else() -> None:
    rng = np.random.default_rng(1)
    alphabet = list("0123456789abcdef[]= \nFIXPOINTENDLAYER\x00\xff")
    for _ in range(2000):
        chars = list(GOOD)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(chars)))
            action = int(rng.integers(0, 3))
            if action == 0:
                del chars[at]
            elif action == 1:
                chars.insert(at, str(rng.choice(alphabet)))
            else:
                chars[at] = str(rng.choice(alphabet))
        text = "".join(chars)
        cut = text[: int(rng.integers(0, len(text) + 1))] if rng.random() < 0.3 else text
        try:
            t = parse(cut, EXPECT)
        except (ProtocolError, FirmwareFault):
            continue
        # Whatever gets through is a well-formed transcript of the expected sizes.
        assert all(
            len(data) == size for c in t.cases for (_, data), size in zip(c.layers, (2, 1), strict=False)
        )
        assert all(len(c.output) == 1 for c in t.cases if c.output)
