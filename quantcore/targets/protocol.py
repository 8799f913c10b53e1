"""The text protocol between the test harness on a target and Fixpoint (version 1).

The harness writes ASCII lines ("\\n" ends a line; a "\\r" before it is ignored, as serial terminals
add one). Grammar, in order::

    FIXPOINT BEGIN v1 model=<name> layers=<n> cases=<k>
    [CASE <c>]                                   for c = 0 .. k-1
    [LAYER <i> bytes=<b> <layer name>] <hex>     for i = 0 .. n-1: layer i's output after it ran
    [OUTPUT <c> bytes=<b>] <hex>                 model_output() after model_invoke
    [CYCLES <c>] <count>                         optional, after OUTPUT
    FIXPOINT END status=ok

- <hex> is the tensor's bytes in memory order (NHWC; int16 little-endian), two lowercase hex digits
  per byte, all on the one line (no continuation lines; lines may be long). It has exactly 2*b digits.
- A layer name is everything between "bytes=<b> " and the last "] " of the line (hex has no "]").
- A failure ends the transcript early, at any line boundary, with a status other than ok:
  `FIXPOINT END status=init-failed code=<rc>` or `FIXPOINT END status=invoke-failed case=<c> code=<rc>`.
- A Cortex-M fault handler prints `FIXPOINT FAULT <handler> cfsr=0x<hex> hfsr=0x<hex>` and stops.
- Lines before BEGIN are ignored (a boot ROM's banner on a board's UART); lines after END are ignored.

The parser is strict about everything after BEGIN: a line out of order, malformed, with a wrong byte
count or missing (a hang or crash leaves no END) is a ProtocolError naming the line number and what
was expected there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from quantcore.targets.errors import FirmwareFault, TargetError

VERSION = "v1"
BEGIN = "FIXPOINT BEGIN"
END = "FIXPOINT END"
FAULT = "FIXPOINT FAULT"
FINAL_PREFIXES = (END.encode(), FAULT.encode())
"""How the lines a reader stops after begin (see is_final), as bytes."""

_BEGIN = re.compile(r"FIXPOINT BEGIN (\S+) model=(\S+) layers=(\d+) cases=(\d+)")
_END = re.compile(r"FIXPOINT END status=([a-z-]+)((?: [a-z]+=-?\d+)*)")
_CASE = re.compile(r"\[CASE (\d+)\]")
_LAYER = re.compile(r"\[LAYER (\d+) bytes=(\d+) (.*)\] ?([0-9a-f]*)")
_OUTPUT = re.compile(r"\[OUTPUT (\d+) bytes=(\d+)\] ?([0-9a-f]*)")
_CYCLES = re.compile(r"\[CYCLES (\d+)\] (\d+)")


class ProtocolError(TargetError):
    """The transcript does not follow the protocol: the message names the line and what was expected."""


@dataclass(frozen=True)
class Expectation:
    """What the firmware must report, known from the generated model: checked while parsing."""

    layer_bytes: tuple[int, ...]
    """Output bytes of each layer, in order (so also the layer count)."""
    output_bytes: int
    cases: int


@dataclass
class Case:
    """One test case as the firmware reported it."""

    index: int
    layers: list[tuple[str, bytes]] = field(default_factory=list)
    """(layer name, output bytes) in layer order."""
    output: bytes = b""
    cycles: int | None = None


@dataclass
class Transcript:
    """A parsed transcript."""

    model: str
    layer_count: int
    case_count: int
    cases: list[Case]
    status: str
    details: dict[str, int]
    """The END line's extra fields (code, case) for a failure status."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def is_final(line: str) -> bool:
    """Whether a reader can stop after `line`: the END marker or a fault report."""
    line = line.rstrip("\r\n")
    return line.startswith(END) or line.startswith(FAULT)


def parse(text: str, expect: Expectation | None = None, channel: str = "the firmware output") -> Transcript:
    """Parse a whole transcript; ProtocolError (or FirmwareFault for a fault report) when it is not one."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline ending the last line does not start another one
    return _Parser(expect, channel).run(lines)


class _Parser:
    def __init__(self, expect: Expectation | None, channel: str) -> None:
        self.expect = expect
        self.channel = channel
        self.number = 0
        self.line = ""

    def fail(self, expected: str) -> ProtocolError:
        got = repr(self.line[:120]) + ("..." if len(self.line) > 120 else "")
        return ProtocolError(f"{self.channel}, line {self.number}: expected {expected}, got {got}")

    def run(self, lines: Iterable[str]) -> Transcript:
        stream = self._numbered(lines)
        head = self._begin(stream)
        cases: list[Case] = []
        pending = self._next(stream, "[CASE 0]")
        for c in range(head.case_count):
            if pending.startswith(END):
                return self._end(head, cases, final=False)
            case, pending = self._case(stream, head, c, pending)
            cases.append(case)
        if not pending.startswith(END):
            raise self.fail(f"{END} status=ok after {head.case_count} cases")
        return self._end(head, cases, final=True)

    def _numbered(self, lines: Iterable[str]) -> Iterable[tuple[int, str]]:
        for number, raw in enumerate(lines, 1):
            line = raw[:-1] if raw.endswith("\r") else raw
            if line.startswith(FAULT):
                raise FirmwareFault(f"firmware faulted ({self.channel}, line {number}): {line}")
            yield number, line

    def _next(self, stream: Iterable[tuple[int, str]], expected: str) -> str:
        for self.number, self.line in stream:
            return self.line
        self.number += 1
        self.line = ""
        raise ProtocolError(
            f"{self.channel} ends after line {self.number - 1}, where {expected} was expected "
            f"(no '{END}': the firmware hung, crashed or its output was cut)"
        )

    def _begin(self, stream: Iterable[tuple[int, str]]) -> Transcript:
        skipped: list[str] = []
        while True:
            try:
                line = self._next(stream, f"'{BEGIN} {VERSION} ...'")
            except ProtocolError as exc:
                seen = f"; it printed {skipped[-1][:80]!r}" if skipped else "; it printed nothing"
                raise ProtocolError(f"{exc}{seen}") from None
            if line.startswith(BEGIN):
                break
            if line.strip():
                skipped.append(line)
        match = _BEGIN.fullmatch(line)
        if not match:
            raise self.fail(f"'{BEGIN} {VERSION} model=<name> layers=<n> cases=<k>'")
        if match[1] != VERSION:
            raise self.fail(f"protocol {VERSION} (this Fixpoint reads only {VERSION}; rebuild the firmware)")
        head = Transcript(match[2], int(match[3]), int(match[4]), [], "", {})
        if self.expect is not None:
            want = (len(self.expect.layer_bytes), self.expect.cases)
            if (head.layer_count, head.case_count) != want:
                raise self.fail(f"layers={want[0]} cases={want[1]} (the model and cases built)")
        return head

    def _case(
        self, stream: Iterable[tuple[int, str]], head: Transcript, c: int, line: str
    ) -> tuple[Case, str]:
        match = _CASE.fullmatch(line)
        if not match or int(match[1]) != c:
            raise self.fail(f"[CASE {c}]")
        case = Case(c)
        for i in range(head.layer_count):
            line = self._next(stream, f"[LAYER {i} ...] of case {c}")
            if line.startswith(END):
                return case, line
            case.layers.append(self._layer(line, c, i))
        line = self._next(stream, f"[OUTPUT {c} ...]")
        if line.startswith(END):
            return case, line
        case.output = self._output(line, c)
        line = self._next(stream, f"[CASE {c + 1}] or {END}")
        cycles = _CYCLES.fullmatch(line)
        if cycles and int(cycles[1]) == c:
            case.cycles = int(cycles[2])
            line = self._next(stream, f"[CASE {c + 1}] or {END}")
        return case, line

    def _layer(self, line: str, c: int, i: int) -> tuple[str, bytes]:
        head, _, digits = line.rpartition("] ")
        match = _LAYER.fullmatch(f"{head}] {digits}" if head else line)
        if not match or int(match[1]) != i:
            raise self.fail(f"'[LAYER {i} bytes=<b> <name>] <hex>' of case {c}")
        want = self.expect.layer_bytes[i] if self.expect else None
        return match[3], self._hex(match[4], int(match[2]), want, f"layer {i} ({match[3]})")

    def _output(self, line: str, c: int) -> bytes:
        match = _OUTPUT.fullmatch(line)
        if not match or int(match[1]) != c:
            raise self.fail(f"'[OUTPUT {c} bytes=<b>] <hex>'")
        want = self.expect.output_bytes if self.expect else None
        return self._hex(match[3], int(match[2]), want, f"the output of case {c}")

    def _hex(self, digits: str, declared: int, want: int | None, what: str) -> bytes:
        if want is not None and declared != want:
            raise self.fail(f"{what} with bytes={want} (the model's size), not bytes={declared}")
        if len(digits) != 2 * declared:
            raise self.fail(
                f"{2 * declared} hex digits for the {declared} bytes of {what}, not {len(digits)}"
            )
        return bytes.fromhex(digits)

    def _end(self, head: Transcript, cases: list[Case], final: bool) -> Transcript:
        match = _END.fullmatch(self.line)
        if not match:
            raise self.fail(f"'{END} status=<status>'")
        details = {k: int(v) for k, v in (item.split("=") for item in match[2].split())}
        if match[1] == "ok" and not final:
            raise self.fail(f"[CASE {len(cases)}] ({head.case_count} cases were announced)")
        head.cases, head.status, head.details = cases, match[1], details
        return head
