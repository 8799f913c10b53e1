"""Facts about C sources for the rules: arrays, kernel calls, struct fields, macros, includes and the
header of a Fixpoint-generated file, found by a fast and forgiving scan - not a compiler.

No preprocessor runs and nothing becomes a syntax tree. The text is first masked (comments and the
inside of string and character literals become spaces, keeping every offset and line break), so a
commented-out array is no fact; directives are read line by line; then the code is walked at the level
of `{ } ;`, jumping over initializer bodies with str.find, so a 50 MB generated weights table costs a
few C-level passes. Array values are parsed only when a rule asks (`array_values`). Nothing here raises
on any text: unbalanced braces, unterminated comments or binary junk give fewer facts, never an error.

Limits, on purpose: macros are expanded only where a fact needs a number (dims, alignment, offsets,
initializer lists); `#if 0` / `#if 1 ... #else` blocks are dropped, other conditionals are read as if
every branch were live; only the first declarator of a declaration is read.
"""

from __future__ import annotations

import bisect
import enum
import logging
import re
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fixpoint_server.findings import LineIndex, Span

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------- facts


class ArrayKind(enum.Enum):
    DEFINITION = "definition"
    EXTERN = "extern"
    """A declaration without storage (`extern const int8_t w[80];`): its alignment is the definition's."""
    LOCAL = "local"
    """Inside a function body (a stack array)."""


@dataclass(frozen=True)
class Alignment:
    """An alignment request in one of its spellings (GCC/Clang/Arm/IAR/TI/C11/CMSIS macros)."""

    value: int | None
    """Bytes; None when the expression uses macros this file does not define."""
    text: str
    """The expression as written ("16", "MODEL_ALIGNMENT"); "" for a bare `aligned`."""
    span: Span
    """The whole spelling: `__attribute__((aligned(16)))`, `__ALIGNED(16)`, the pragma ..."""
    value_span: Span | None
    """Where `text` is, for a fix that changes the value (None: the value is not written here)."""


@dataclass(frozen=True)
class ArrayDef:
    name: str
    ctype: str
    """The element type with qualifiers removed: "int8_t", "q7_t", "unsigned char", "struct foo"."""
    qualifiers: tuple[str, ...]
    """static, const, extern, volatile ... and unknown words (section macros) in source order."""
    dims: tuple[str, ...]
    """Each dimension's expression as written ("" for `[]`)."""
    count: int | None
    """Number of elements (product of the dims, or counted from the initializer for `[]`)."""
    elem_size: int | None
    """Bytes of one element for known types (Arm's ILP32: int and long are 4 bytes)."""
    kind: ArrayKind
    align: Alignment | None
    span: Span
    """The whole declaration, from its first word through the `;`."""
    name_span: Span
    type_span: Span
    dims_span: Span
    """From the first `[` through the last `]`."""
    init_span: Span | None
    """The initializer after `=`: a `{...}` list, a macro name, a string."""
    start: int
    end: int
    dims_start: int
    dims_end: int
    """Offset just after the last `]`: where an attribute after the declarator goes."""
    init_start: int | None = None
    init_end: int | None = None
    function: str | None = None
    """The enclosing function of a LOCAL array."""

    @property
    def alignment(self) -> int | None:
        return self.align.value if self.align is not None else None

    @property
    def total_bytes(self) -> int | None:
        if self.count is None or self.elem_size is None:
            return None
        return self.count * self.elem_size


@dataclass(frozen=True)
class Argument:
    text: str
    span: Span
    start: int
    end: int


@dataclass(frozen=True)
class CallSite:
    name: str
    name_span: Span
    args: tuple[Argument, ...]
    span: Span
    """From the function name through the closing parenthesis (or where a broken call stops)."""
    start: int
    function: str | None
    """The function whose body holds the call."""


@dataclass(frozen=True)
class FieldAssignment:
    """`var.field = value;`, `var->field = value;`, or `.field = value` in `TYPE var = {...}`."""

    var: str
    field: str
    """Dotted for nested designators ("stride.w"); "" for a positional initializer item."""
    value: str
    int_value: int | None
    value_span: Span
    span: Span
    start: int
    kind: str
    """"assign" (var.field), "arrow" (var->field) or "designated" (in an initializer)."""
    struct_type: str | None = None
    """The declared type for designated initializers ("cmsis_nn_conv_params"); None for statements."""
    position: int | None = None
    """Index among the initializer's top-level items (positional and designated alike)."""
    function: str | None = None


@dataclass(frozen=True)
class Define:
    name: str
    value: str
    """The replacement text with comments removed and line continuations joined."""
    int_value: int | None
    params: tuple[str, ...] | None
    """The parameters of a function-like macro; None for an object-like one."""
    span: Span
    name_span: Span
    value_start: int
    value_end: int


@dataclass(frozen=True)
class Include:
    name: str
    system: bool
    """<name> rather than "name"."""
    span: Span


@dataclass(frozen=True)
class GeneratedHeader:
    """What a file `fixpoint generate` wrote says about its inputs (templates/model/header.j2)."""

    params_name: str | None
    params_sha256: str | None
    model_name: str | None
    model_sha256: str | None
    content_sha256: str
    span: Span


@dataclass(frozen=True)
class FunctionDef:
    name: str
    span: Span
    start: int
    end: int


@dataclass(frozen=True)
class Element:
    """One value of an initializer list and where it is in the file."""

    value: int
    start: int
    end: int


@dataclass
class CFile:
    masked: str
    """The text with comments and literal contents blanked (same length, same lines)."""
    index: LineIndex
    arrays: list[ArrayDef] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    fields: list[FieldAssignment] = field(default_factory=list)
    defines: dict[str, Define] = field(default_factory=dict)
    includes: list[Include] = field(default_factory=list)
    functions: list[FunctionDef] = field(default_factory=list)
    generated: GeneratedHeader | None = None

    def array(self, name: str) -> ArrayDef | None:
        """The definition of `name` in this file (else its extern declaration), if any."""
        found = [a for a in self.arrays if a.name == name]
        return next((a for a in found if a.kind is not ArrayKind.EXTERN), found[0] if found else None)

    def elements(self, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[Element] | None:
        return array_elements(self.masked, array, defines if defines is not None else self.defines)

    def values(self, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[int] | None:
        return array_values(self.masked, array, defines if defines is not None else self.defines)

    def evaluate(self, expr: str) -> int | None:
        return evaluate(expr, self.defines)

    def span(self, start: int, end: int) -> Span:
        return self.index.span(start, end)


# ------------------------------------------------------------------------------------ expressions

_TOKEN = re.compile(
    r"\s*(?:(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)[uUlL]*(?![\w.])|([A-Za-z_]\w*)"
    r"|(<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()~!<>&|^]))"
)
_BINARY = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, ">": 7, "<=": 7, ">=": 7,
    "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}  # fmt: skip
_LIMIT = 1 << 64
"""Results outside +-2^64 are no C integer constant of any target: give up rather than compute 1 << 10**9."""
_MAX_MACRO_DEPTH = 24

ELEMENT_SIZES = {
    **dict.fromkeys(
        ("int8_t", "uint8_t", "q7_t", "char", "signed char", "unsigned char", "bool", "_Bool"), 1
    ),
    **dict.fromkeys(("int8", "uint8", "s8", "u8"), 1),
    **dict.fromkeys(("int16_t", "uint16_t", "q15_t", "short", "unsigned short", "signed short"), 2),
    **dict.fromkeys(("short int", "unsigned short int", "int16", "uint16", "float16_t", "__fp16"), 2),
    **dict.fromkeys(("int32_t", "uint32_t", "q31_t", "int", "unsigned", "unsigned int", "signed int"), 4),
    # Arm's AAPCS is ILP32: long is 4 bytes on every Cortex-M.
    **dict.fromkeys(("signed", "long", "unsigned long", "long int", "float", "float32_t", "int32"), 4),
    **dict.fromkeys(("uint32", "s32", "u32", "cmsis_nn_tile", "cmsis_nn_activation"), 4),
    **dict.fromkeys(("int64_t", "uint64_t", "q63_t", "long long", "unsigned long long", "double"), 8),
    **dict.fromkeys(("long long int", "float64_t", "int64", "uint64"), 8),
    "cmsis_nn_dims": 16,
}
"""Bytes per element of the types CMSIS-NN code declares arrays of."""
_CAST = re.compile(r"\(\s*(?:const\s+|volatile\s+)*((?:unsigned\s+|signed\s+)?[A-Za-z_]\w*)\s*\)")


def evaluate(expr: str, defines: Mapping[str, Define] | None = None) -> int | None:
    """The value of an integer constant expression (C semantics: truncating division, casts to known
    integer types wrap), or None when it is not one (floats, calls, unknown names, junk)."""
    try:
        return _Evaluator(defines or {}, 0, frozenset()).run(expr)
    except (ValueError, IndexError, KeyError, ZeroDivisionError, RecursionError):
        return None


class _Evaluator:
    def __init__(self, defines: Mapping[str, Define], depth: int, expanding: frozenset[str]) -> None:
        self.defines, self.depth, self.expanding = defines, depth, expanding
        self.tokens: list[tuple[str, str]] = []
        self.pos = 0

    def run(self, expr: str) -> int | None:
        self.tokens = _tokens(expr)
        if not self.tokens:
            return None
        value = self.binary(0)
        return value if self.pos == len(self.tokens) else None

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ("", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        self.pos += 1
        return token

    def binary(self, min_precedence: int) -> int | None:
        left = self.unary()
        while True:
            kind, op = self.peek()
            precedence = _BINARY.get(op, 0) if kind == "op" else 0
            if precedence <= min_precedence:
                return left
            self.take()
            right = self.binary(precedence)
            if left is None or right is None:
                return None
            left = _apply(op, left, right)

    def unary(self) -> int | None:
        kind, text = self.take()
        if not kind:
            raise ValueError("expression ends early")
        if kind == "num":
            return _literal(text)
        if kind == "name":
            return self.name(text)
        if text == "(":
            cast = self.cast_type()
            if cast is not None:
                operand = self.unary()
                return _wrap(operand, cast) if operand is not None else None
            value = self.binary(0)
            if self.take()[1] != ")":
                raise ValueError("unbalanced parenthesis")
            return value
        operand = self.unary()
        if operand is None or text not in ("-", "+", "~", "!"):
            return None
        return {"-": -operand, "+": operand, "~": ~operand, "!": int(not operand)}[text]

    def cast_type(self) -> str | None:
        """`(int32_t)` before an operand: the type's name, with the tokens consumed; else None."""
        words, i = [], self.pos
        while i < len(self.tokens) and self.tokens[i][0] == "name":
            words.append(self.tokens[i][1])
            i += 1
        words = [w for w in words if w not in ("const", "volatile")]
        name = " ".join(words)
        if not words or i >= len(self.tokens) or self.tokens[i][1] != ")" or name not in ELEMENT_SIZES:
            return None
        if i + 1 >= len(self.tokens) or (
            self.tokens[i + 1][0] == "op" and self.tokens[i + 1][1] not in "-+~!("
        ):
            return None
        self.pos = i + 1
        return name

    def name(self, name: str) -> int | None:
        if name == "sizeof":
            return self.sizeof()
        define = self.defines.get(name)
        if define is None or define.params is not None or name in self.expanding:
            return None
        if self.depth >= _MAX_MACRO_DEPTH:
            return None
        inner = _Evaluator(self.defines, self.depth + 1, self.expanding | {name})
        return inner.run(define.value)

    def sizeof(self) -> int | None:
        if self.take()[1] != "(":
            return None
        words = []
        while self.peek()[0] == "name":
            words.append(self.take()[1])
        if self.take()[1] != ")":
            return None
        return ELEMENT_SIZES.get(" ".join(w for w in words if w not in ("const", "volatile")))


def _tokens(expr: str) -> list[tuple[str, str]]:
    tokens, pos, text = [], 0, expr.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"not an integer expression at {pos}")
        number, name, op = match.groups()
        if number is not None:
            tokens.append(("num", number))
        elif name is not None:
            tokens.append(("name", name))
        elif op is not None:
            tokens.append(("op", op))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def _literal(text: str) -> int:
    if text[:2] in ("0x", "0X", "0b", "0B"):
        return int(text, 0)
    if len(text) > 1 and text[0] == "0":
        return int(text, 8)  # C's leading-zero octal
    return int(text)


def _apply(op: str, a: int, b: int) -> int | None:
    if op in ("<<", ">>") and not 0 <= b < 64:
        return None
    if op in ("/", "%"):
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
        result = quotient if op == "/" else a - quotient * b
    else:
        result = _OPS[op](a, b)
    return result if -_LIMIT < result < _LIMIT else None


_OPS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b, "&": lambda a, b: a & b,
    "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b), "<=": lambda a, b: int(a <= b), ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "&&": lambda a, b: int(bool(a and b)), "||": lambda a, b: int(bool(a or b)),
}  # fmt: skip


def _wrap(value: int, ctype: str) -> int:
    """`(int8_t)200` is -56: the conversion of a cast to a known integer type."""
    size = ELEMENT_SIZES[ctype]
    if ctype in ("float", "double", "float32_t", "float64_t", "float16_t", "__fp16"):
        return value
    bits = 8 * size
    value &= (1 << bits) - 1
    unsigned = ctype.startswith(("u", "unsigned")) or ctype in ("bool", "_Bool")
    return value - (1 << bits) if not unsigned and value >= 1 << (bits - 1) else value


# ------------------------------------------------------------------------------------------ masking


def mask(text: str) -> str:
    """`text` with comments and the inside of string/char literals replaced by spaces (newlines kept).

    Literals keep their quotes, so `extern "C"` stays recognisable. An unterminated comment runs to
    the end of the text, an unterminated literal to the end of its line, as a compiler reads them.
    Each of `/ " '` is looked for with str.find, and again only once passed: a table of numbers
    without them costs three C-level scans.
    """
    pieces: list[str] = []
    pos, n = 0, len(text)
    ahead = {c: text.find(c) for c in "/\"'"}
    while True:
        live = [p for p in ahead.values() if p != -1]
        if not live:
            break
        start = min(live)
        end, quote = _masked_token(text, start, n)
        if end > start + 1 or quote:  # a comment or a literal (a lone `/` is a division)
            inner = _blank(text[start + len(quote) : end - len(quote)])
            pieces.extend((text[pos:start], quote, inner, quote))
            pos = end
        resume = max(end, start + 1)
        for char, at in ahead.items():
            if at != -1 and at < resume:
                ahead[char] = text.find(char, resume)
    pieces.append(text[pos:])
    return "".join(pieces)


def _masked_token(text: str, start: int, n: int) -> tuple[int, str]:
    """(end, quote) of the comment or literal at `start`; end = start + 1 for a lone `/`."""
    char = text[start]
    if char == "/":
        after = text[start + 1 : start + 2]
        if after == "*":
            close = text.find("*/", start + 2)
            return (n if close == -1 else close + 2), ""
        if after == "/":
            return _line_end(text, start, n), ""
        return start + 1, ""
    end = start + 1
    while end < n:
        c = text[end]
        if c == char or c == "\n":
            break
        end += 2 if c == "\\" else 1
    end = min(end, n)
    if end < n and text[end] == char:
        return end + 1, char
    return end, ""  # unterminated: blank it whole, up to the line break


def _line_end(text: str, start: int, n: int) -> int:
    """The end of a line, following backslash continuations (as a `//` comment or a directive does)."""
    end = text.find("\n", start)
    while end != -1 and _continued(text, end):
        end = text.find("\n", end + 1)
    return n if end == -1 else end


def _continued(text: str, newline: int) -> bool:
    before = newline - 1
    if before >= 0 and text[before] == "\r":
        before -= 1
    return before >= 0 and text[before] == "\\"


def _blank(s: str) -> str:
    if "\n" not in s:
        return " " * len(s)
    return "\n".join(" " * len(line) for line in s.split("\n"))


# --------------------------------------------------------------------------------------- the scan


def scan_c(text: str) -> CFile:
    """Every fact of one C source or header (see the module docstring). Never raises."""
    masked = mask(text)
    cfile = CFile(masked, LineIndex(masked))
    try:
        _Scanner(text, cfile).run()
    except (
        ValueError,
        IndexError,
        KeyError,
        RecursionError,
        TypeError,
    ):  # a scanner bug costs facts, not the check
        log.exception("C scan stopped early; keeping the facts found so far")
    return cfile


_PUNCT = re.compile(r"[{};]")
_INIT_HEAD = re.compile(r"(?<![=!<>+\-*/%&|^])=\s*(?:\(\s*[A-Za-z_][\w\s*]*\)\s*)?$")
_STRUCT_HEAD = re.compile(r"\b(?:struct|union|enum|class)\b")
_TRANSPARENT_HEAD = re.compile(r"\bextern\s*\"|\bnamespace\b")
_CALL_NAME = "arm_"
"""Calls are recorded for CMSIS-NN's (and CMSIS-DSP's) functions only: the rules read no others."""
_CALL_REST = re.compile(r"(\w*)\s*\(")
_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", re.DOTALL)
_INCLUDE = re.compile(r"#\s*include\s*([<\"])([^>\"\n]+)[>\"]")
_DIRECTIVE = re.compile(r"#\s*([A-Za-z_]\w*)(.*)", re.DOTALL)
_DATA_ALIGN = re.compile(r"DATA_ALIGN\s*\(\s*([A-Za-z_]\w*)\s*,\s*([^)]+)\)")
_IAR_ALIGN = re.compile(r"data_alignment\s*=\s*(\S+)")
_ASSIGN = re.compile(
    r"(?<![\w.>])([A-Za-z_]\w*)(?:\s*\[[^\]]*\])?\s*(\.|->)\s*"
    r"([A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)\s*=(?!=)"
)
_DESIGNATOR = re.compile(r"\.\s*([A-Za-z_]\w*)\s*=")
_MAX_STRUCT_INIT = 65536
"""Initializers longer than this are tables, not struct values: no designated fields are read."""


class _Scanner:
    def __init__(self, text: str, cfile: CFile) -> None:
        self.text = text
        self.masked = cfile.masked
        self.cfile = cfile
        self.code = cfile.masked
        """The masked text with directives and dead `#if 0` blocks blanked too."""
        self.function_starts: list[int] = []
        self.pragma_aligns: dict[str, Alignment] = {}
        self.iar_aligns: list[tuple[int, Alignment]] = []

    def span(self, start: int, end: int) -> Span:
        return self.cfile.index.span(start, end)

    def run(self) -> None:
        self.cfile.generated = self._generated()
        blanks = self._directives()
        self.code = _blanked(self.masked, blanks)
        _Walker(self).walk()
        self._calls()

    # -- header and directives ---------------------------------------------------------------------

    def _generated(self) -> GeneratedHeader | None:
        from quantcore.codegen.files import read_header

        header = read_header(self.text) if self.text.startswith("/*") else None
        if header is None:
            return None
        close = self.text.find("*/")
        end = len(self.text) if close == -1 else close + 2
        params, model = header.params, header.model
        return GeneratedHeader(
            params.name if params else None, params.sha256 if params else None,
            model.name if model else None, model.sha256 if model else None,
            header.content_sha256, self.span(0, end),
        )  # fmt: skip

    def _directives(self) -> list[tuple[int, int]]:
        """Read every directive (defines, includes, alignment pragmas); return the ranges to blank."""
        blanks: list[tuple[int, int]] = []
        conditions = _Conditions()
        for start, end in _directive_lines(self.masked):
            blanks.append((start, end))
            match = _DIRECTIVE.match(self.masked, start, end)
            if match is None:
                continue
            name = match.group(1)
            dead = conditions.step(name, match.group(2).replace("\\\n", " ").strip(), start, end)
            if dead is not None:
                blanks.append(dead)
            if not conditions.dead:
                self._directive(name, start, end)
        blanks.extend(conditions.unterminated(len(self.masked)))
        self._evaluate_defines()
        return blanks

    def _directive(self, name: str, start: int, end: int) -> None:
        if name == "define":
            self._define(start, end)
        elif name == "undef":
            self.cfile.defines.pop(self.masked[start:end].split()[-1], None)
        elif name == "include":
            match = _INCLUDE.match(self.text, start, end)
            if match is not None:
                self.cfile.includes.append(
                    Include(match.group(2).strip(), match.group(1) == "<", self.span(start, end))
                )
        elif name == "pragma":
            self._pragma(start, end)

    def _define(self, start: int, end: int) -> None:
        match = _DEFINE.match(self.masked, start, end)
        if match is None:
            return
        value_start = match.start(3)
        while value_start < end and self.masked[value_start] in " \t\\\r\n":
            value_start += 1
        value_end = end
        while value_end > value_start and self.masked[value_end - 1] in " \t\\\r\n":
            value_end -= 1
        params = None
        if match.group(2) is not None:
            params = tuple(p.strip() for p in match.group(2)[1:-1].split(",") if p.strip())
        value = _CONTINUATION.sub(" ", self.masked[value_start:value_end])
        self.cfile.defines[match.group(1)] = Define(
            match.group(1), value, None, params, self.span(start, end),
            self.span(match.start(1), match.end(1)), value_start, value_end,
        )  # fmt: skip

    def _evaluate_defines(self) -> None:
        """Values are computed once every define is known: a macro may use one defined after it."""
        defines = self.cfile.defines
        for name, define in list(defines.items()):
            if define.params is None:
                value = evaluate(define.value, defines)
                defines[name] = Define(
                    define.name, define.value, value, None, define.span, define.name_span,
                    define.value_start, define.value_end,
                )  # fmt: skip

    def _pragma(self, start: int, end: int) -> None:
        line = self.masked[start:end]
        ti = _DATA_ALIGN.search(line)
        if ti is not None:
            text = ti.group(2).strip()
            where = self.span(start + ti.start(2), start + ti.start(2) + len(text))
            self.pragma_aligns[ti.group(1)] = Alignment(None, text, self.span(start, end), where)
        iar = _IAR_ALIGN.search(line)
        if iar is not None:
            where = self.span(start + iar.start(1), start + iar.end(1))
            self.iar_aligns.append((start, Alignment(None, iar.group(1), self.span(start, end), where)))

    # -- calls -------------------------------------------------------------------------------------

    def _calls(self) -> None:
        code, pos = self.code, 0
        while True:
            at = code.find(_CALL_NAME, pos)
            if at == -1:
                return
            pos = at + len(_CALL_NAME)
            if at > 0 and (code[at - 1].isalnum() or code[at - 1] == "_"):
                continue
            function = self._function_at(at)
            match = _CALL_REST.match(code, pos)
            if function is None or match is None:
                continue
            name_end = match.end(1)
            open_at = match.end() - 1
            args, close = split_arguments(code, open_at)
            arguments = tuple(Argument(code[a:b], self.span(a, b), a, b) for a, b in args)
            name_span, span = self.span(at, name_end), self.span(at, close)
            self.cfile.calls.append(
                CallSite(code[at:name_end], name_span, arguments, span, at, function.name)
            )
            pos = open_at + 1

    def _function_at(self, offset: int) -> FunctionDef | None:
        functions = self.cfile.functions
        i = bisect.bisect_right(self.function_starts, offset) - 1
        if i >= 0 and functions[i].start <= offset < functions[i].end:
            return functions[i]
        return None


# ---------------------------------------------------------------------------------- preprocessing


def _directive_lines(masked: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every line whose first non-blank character is `#`, continuations included."""
    pos, n = 0, len(masked)
    while True:
        at = masked.find("#", pos)
        if at == -1:
            return
        before = at - 1
        while before >= 0 and masked[before] in " \t":
            before -= 1
        if before >= 0 and masked[before] not in "\n\r\f\v":
            pos = at + 1
            continue
        end = _line_end(masked, at, n)
        yield at, end
        pos = end


class _Conditions:
    """Tracks `#if 0` / `#if 1 ... #else` so the dead branch yields no facts; others count as live."""

    def __init__(self) -> None:
        self.live: list[bool] = []
        """One entry per open live conditional: True for an `#if 1` (its #else branch is dead)."""
        self.depth = 0
        """Nesting inside the dead branch; 0 when live."""
        self.dead_from = 0

    @property
    def dead(self) -> bool:
        return self.depth > 0

    def step(self, name: str, rest: str, start: int, end: int) -> tuple[int, int] | None:
        """Advance over one directive; the dead range it closes, if any."""
        opens = name in ("if", "ifdef", "ifndef")
        if self.depth:
            if opens:
                self.depth += 1
            elif name == "endif":
                self.depth -= 1
            elif name in ("else", "elif") and self.depth == 1:
                self.depth = 0
                self.live.append(False)  # the live branch, closed by this conditional's #endif
            if self.depth == 0:
                return self.dead_from, start
            return None
        if opens:
            constant = evaluate(rest) if name == "if" else None
            if constant == 0:
                self.depth, self.dead_from = 1, end
            else:
                self.live.append(constant is not None)
        elif name in ("else", "elif") and self.live and self.live[-1]:
            self.live.pop()
            self.depth, self.dead_from = 1, end
        elif name == "endif" and self.live:
            self.live.pop()
        return None

    def unterminated(self, n: int) -> list[tuple[int, int]]:
        return [(self.dead_from, n)] if self.depth else []


def _blanked(masked: str, ranges: list[tuple[int, int]]) -> str:
    if not ranges:
        return masked
    pieces, pos = [], 0
    for start, end in sorted(ranges):
        if end <= pos:
            continue
        start = max(start, pos)
        pieces.append(masked[pos:start])
        pieces.append(_blank(masked[start:end]))
        pos = end
    pieces.append(masked[pos:])
    return "".join(pieces)


# -------------------------------------------------------------------------------- statement walker


@dataclass
class _Scope:
    kind: str
    """"function", "struct" (members, enum values), "block" or "transparent" (extern "C", namespace)."""
    start: int
    name: str | None = None


class _Walker:
    """Walks `{ } ;` of the code view: which statements are declarations, where functions are."""

    def __init__(self, scanner: _Scanner) -> None:
        self.s = scanner
        self.code = scanner.code
        self.stack: list[_Scope] = []
        self.functions = 0
        self.structs = 0

    @property
    def function(self) -> str | None:
        return next((scope.name for scope in self.stack if scope.kind == "function"), None)

    def walk(self) -> None:
        code, pos, stmt = self.code, 0, 0
        init: tuple[int, int] | None = None
        while True:
            match = _PUNCT.search(code, pos)
            if match is None:
                break
            at, char = match.start(), match.group()
            if char == ";":
                self.statement(stmt, at, init)
                stmt, pos, init = at + 1, at + 1, None
            elif char == "{" and _INIT_HEAD.search(code, stmt if init is None else init[1] + 1, at):
                close, pos = _closing_brace(code, at)
                init = init or (at, close)  # `a[] = {..}, b[] = {..};`: the first declarator is read
            elif char == "{":
                self.open(stmt, at)
                stmt = pos = at + 1
            else:
                if init is not None:  # `= {...}` with no `;`: the statement ends at the initializer
                    self.statement(stmt, init[1] + 1, init)
                    init = None
                stmt = self.close(at)
                pos = at + 1

    def open(self, stmt: int, at: int) -> None:
        head = self.code[stmt:at]
        if _TRANSPARENT_HEAD.search(head):
            kind = "transparent"
        elif _STRUCT_HEAD.search(head) and "(" not in head:
            kind = "struct"
        elif self.functions or self.structs or "(" not in head:
            kind = "block"
        else:
            kind = "function"
        name = _function_name(head) if kind == "function" else None
        self.stack.append(_Scope(kind, stmt if kind == "struct" else at, name))
        self.functions += kind == "function"
        self.structs += kind == "struct"

    def close(self, at: int) -> int:
        """Pop the scope `}` closes; the offset where the next statement starts."""
        if not self.stack:
            return at + 1
        scope = self.stack.pop()
        self.functions -= scope.kind == "function"
        self.structs -= scope.kind == "struct"
        if scope.kind == "function" and scope.name is not None:
            function = FunctionDef(scope.name, self.s.span(scope.start, at + 1), scope.start, at + 1)
            self.s.cfile.functions.append(function)
            self.s.function_starts.append(scope.start)
        # `typedef struct {...} name;` is one statement: it resumes at the struct's head
        return scope.start if scope.kind == "struct" else at + 1

    def statement(self, start: int, end: int, init: tuple[int, int] | None) -> None:
        if self.structs:
            return
        code = self.code
        head_end = init[0] if init is not None else end
        if code.find("[", start, head_end) != -1:
            _Declaration(self.s, start, end, init, self.function).read()
        elif init is not None:
            self.designated(start, init)
        if self.functions and code.find("=", start, end) != -1:
            self.assignment(start, end)

    def assignment(self, start: int, end: int) -> None:
        match = _ASSIGN.search(self.code, start, end)
        if match is None:
            return
        a, b = _strip(self.code, match.end(), end)
        if a >= b:
            return
        kind = "assign" if match.group(2) == "." else "arrow"
        path = re.sub(r"\s*(?:\.|->)\s*", ".", match.group(3))
        self.s.cfile.fields.append(self.field(match.group(1), path, a, b, match.start(), kind, None, None))

    def field(
        self,
        var: str,
        path: str,
        a: int,
        b: int,
        start: int,
        kind: str,
        struct: str | None,
        position: int | None,
    ) -> FieldAssignment:
        value = self.code[a:b]
        return FieldAssignment(
            var, path, value, evaluate(value, self.s.cfile.defines), self.s.span(a, b), self.s.span(start, b),
            start, kind, struct, position, self.function,
        )  # fmt: skip

    def designated(self, start: int, init: tuple[int, int]) -> None:
        open_at, close = init
        if close - open_at > _MAX_STRUCT_INIT:
            return
        eq = self.code.rfind("=", start, open_at)
        words = re.findall(r"[A-Za-z_]\w*", self.code[start:eq])
        if eq == -1 or len(words) < 2 or "(" in self.code[start:eq]:
            return
        var, struct = words[-1], " ".join(w for w in words[:-1] if w not in _QUALIFIERS) or None
        self.items(var, struct, open_at, close, "")

    def items(self, var: str, struct: str | None, open_at: int, close: int, prefix: str) -> None:
        for position, (a, b) in enumerate(_split_top(self.code, open_at + 1, close)):
            match = _DESIGNATOR.match(self.code, a, b)
            if match is None:
                if not prefix and self.code[a] != "{":
                    self.s.cfile.fields.append(self.field(var, "", a, b, a, "designated", struct, position))
                continue
            va, vb = _strip(self.code, match.end(), b)
            path = prefix + match.group(1)
            if va < vb and self.code[va] == "{":
                inner_close = self.code.rfind("}", va, vb)
                if inner_close != -1:
                    self.items(var, struct, va, inner_close, path + ".")
                continue
            if va < vb:
                self.s.cfile.fields.append(
                    self.field(var, path, va, vb, a, "designated", struct, position if not prefix else None)
                )


def _function_name(head: str) -> str | None:
    """The name in a function definition's head: the first `name(` outside attributes."""
    cleaned = _blank_groups(head, 0, len(head), _attribute_groups(head, 0, len(head)))
    match = re.search(r"([A-Za-z_]\w*)\s*\(", cleaned)
    return match.group(1) if match else None


def _closing_brace(code: str, open_at: int, end: int | None = None) -> tuple[int, int]:
    """(offset of the `}` matching `{` at open_at, where scanning resumes), bounded by the next `;`:
    an initializer never holds one, so a missing `}` cannot swallow the rest of the file."""
    end = len(code) if end is None else end
    limit = code.find(";", open_at, end)
    if limit == -1:
        limit = end
    depth, pos = 1, open_at + 1
    while True:
        close = code.find("}", pos, limit)
        if close == -1:
            return limit, limit
        depth += code.count("{", pos, close) - 1
        if depth <= 0:
            return close, close + 1
        pos = close + 1


def _strip(code: str, a: int, b: int) -> tuple[int, int]:
    while a < b and code[a].isspace():
        a += 1
    while b > a and code[b - 1].isspace():
        b -= 1
    return a, b


_NESTING = re.compile(r"[()\[\]{},;]")


def _split_top(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each top-level comma-separated item of code[start:end], whitespace stripped."""
    items, depth, item = [], 0, start
    for match in _NESTING.finditer(code, start, end):
        char = match.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(_strip(code, item, match.start()))
            item = match.end()
    items.append(_strip(code, item, end))
    return [(a, b) for a, b in items if a < b]


def split_arguments(code: str, open_paren: int, limit: int = 1 << 16) -> tuple[list[tuple[int, int]], int]:
    """The top-level arguments of the call whose `(` is at open_paren, and the offset after its `)`.

    A broken call stops at the first `;`, `{` or `}` (no argument list holds one), or after `limit`
    characters, with the arguments read so far."""
    depth, item, args = 0, open_paren + 1, []
    for match in _NESTING.finditer(code, open_paren + 1, min(len(code), open_paren + limit)):
        char, at = match.group(), match.start()
        if char in ";{}":
            args.append(_strip(code, item, at))
            return [(a, b) for a, b in args if a < b], at
        if char in "([":
            depth += 1
        elif char in ")]" and depth > 0:
            depth -= 1
        elif char == ")":
            args.append(_strip(code, item, at))
            return [(a, b) for a, b in args if a < b], at + 1
        elif char == "," and depth == 0:
            args.append(_strip(code, item, at))
            item = at + 1
    end = min(len(code), open_paren + limit)
    args.append(_strip(code, item, end))
    return [(a, b) for a, b in args if a < b], end


# ----------------------------------------------------------------------------------- declarations

_QUALIFIERS = frozenset({
    "static", "const", "extern", "volatile", "register", "inline", "__inline", "__inline__", "restrict",
    "__restrict", "auto", "thread_local", "_Thread_local", "__thread", "__I", "__O", "__IO", "__root",
    "__no_init", "PROGMEM",
})  # fmt: skip
_NOT_DECLARATION = frozenset({
    "return", "if", "else", "while", "for", "do", "switch", "case", "goto", "sizeof", "typedef", "break",
    "continue", "default",
})  # fmt: skip
_BUILTIN_TYPE_WORDS = frozenset(
    {"unsigned", "signed", "short", "long", "int", "char", "float", "double", "_Bool"}
)
_ATTRIBUTE_START = re.compile(
    r"\b(__attribute__|__attribute|__declspec|__ALIGNED|ALIGNED|ALIGN|__align|alignas|_Alignas)\s*\(|\[\["
)
_ALIGNED_IN_ATTRIBUTE = re.compile(r"\b(?:__)?align(?:ed)?(?:__)?\b\s*(\()?")
_BARE_ALIGNED = 8
"""`__attribute__((aligned))` without a value is the target's biggest alignment: 8 on Cortex-M."""


@dataclass
class _Group:
    """An attribute-like group in a declaration: `__attribute__((...))`, `ALIGN(16)`, `[[...]]`."""

    start: int
    end: int
    align_text: str | None = None
    align_start: int = 0
    align_end: int = 0


def _attribute_groups(code: str, start: int, end: int) -> list[_Group]:
    groups: list[_Group] = []
    pos = start
    while True:
        match = _ATTRIBUTE_START.search(code, pos, end)
        if match is None:
            return groups
        if match.group() == "[[":
            close = code.find("]]", match.end(), end)
            group = _Group(match.start(), end if close == -1 else close + 2)
            inner = (match.end(), group.end - 2)
        else:
            close = _matching_paren(code, match.end() - 1, end)
            group = _Group(match.start(), close)
            inner = (match.end(), close - 1)
        _find_alignment(code, group, match.group(1), inner)
        groups.append(group)
        pos = max(group.end, match.end())


def _find_alignment(code: str, group: _Group, word: str | None, inner: tuple[int, int]) -> None:
    a, b = inner
    if word in ("__ALIGNED", "ALIGNED", "ALIGN", "__align", "alignas", "_Alignas"):
        group.align_start, group.align_end = _strip(code, a, b)
        group.align_text = code[group.align_start : group.align_end]
        return
    match = _ALIGNED_IN_ATTRIBUTE.search(code, a, b)
    if match is None:
        return
    if match.group(1) is None:
        group.align_text, group.align_start, group.align_end = "", match.end(), match.end()
        return
    close = _matching_paren(code, match.end() - 1, b)
    group.align_start, group.align_end = _strip(code, match.end(), close - 1)
    group.align_text = code[group.align_start : group.align_end]


_PARENS = re.compile(r"[()]")


def _matching_paren(code: str, open_at: int, end: int) -> int:
    """The offset just after the `)` matching `(` at open_at (or `end` when it is missing)."""
    depth = 0
    for match in _PARENS.finditer(code, open_at, end):
        depth += 1 if match.group() == "(" else -1
        if depth == 0:
            return match.end()
    return end


class _Declaration:
    """Reads one statement that may declare an array: `[quals] type name[dims] [attrs] [= init];`."""

    def __init__(self, s: _Scanner, start: int, end: int, init: tuple[int, int] | None, function: str | None):
        self.s, self.code = s, s.code
        self.start, self.end, self.init, self.function = start, end, init, function
        self.groups: list[_Group] = []

    def read(self) -> None:
        code = self.code
        if self.init is not None:
            eq: int | None = code.rfind("=", self.start, self.init[0])
        else:
            eq = _top_level_eq(code, self.start, self.end)
        eq = None if eq == -1 else eq
        head_end = eq if eq is not None else self.end
        self.groups = _attribute_groups(code, self.start, head_end)
        cleaned = _blank_groups(code, self.start, head_end, self.groups)
        bracket = cleaned.find("[")
        name = re.search(r"([A-Za-z_]\w*)\s*$", cleaned[:bracket]) if bracket > 0 else None
        if name is None:
            return
        words = self.specifiers(cleaned[: name.start()])
        if words is None:
            return
        dims, dims_end = _dims(cleaned, bracket)
        if dims is None:
            return
        self.record(words, name, dims, bracket, dims_end, eq, cleaned)

    def specifiers(self, spec: str) -> list[tuple[str, int, int]] | None:
        """The words before the declarator with their offsets; None when this is no declaration."""
        spec = re.sub(r"\b[A-Za-z_]\w*\s*\([^()]*\)", lambda m: " " * len(m.group()), spec)
        if not re.fullmatch(r"[\w\s]*", spec):
            return None
        words = [(m.group(), self.start + m.start(), self.start + m.end()) for m in re.finditer(r"\w+", spec)]
        if not words or any(w in _NOT_DECLARATION for w, _, _ in words) or words[0][0][0].isdigit():
            return None
        return words

    def record(
        self, words: list[tuple[str, int, int]], name: re.Match[str], dims: list[tuple[int, int]],
        bracket: int, dims_end: int, eq: int | None, cleaned: str,
    ) -> None:  # fmt: skip
        s, base = self.s, self.start
        type_words = _type_words([w for w, _, _ in words])
        if not type_words:
            return
        type_parts = words[len(words) - len(type_words) :]
        qualifiers = tuple(w for w, _, _ in words[: len(words) - len(type_words)])
        ctype = " ".join(type_words)
        dim_texts = tuple(cleaned[a:b].strip() for a, b in dims)
        init_range = self.initializer(eq)
        kind = self.kind(qualifiers, eq)
        array = ArrayDef(
            name=name.group(1),
            ctype=ctype,
            qualifiers=qualifiers,
            dims=dim_texts,
            count=self.count(dim_texts, init_range),
            elem_size=ELEMENT_SIZES.get(ctype),
            kind=kind,
            align=self.alignment(name.group(1), [w for w, _, _ in words], dims_end, cleaned),
            span=s.span(base + _first_word(cleaned), self.end + 1 if self.end < len(self.code) else self.end),
            name_span=s.span(base + name.start(1), base + name.end(1)),
            type_span=s.span(type_parts[0][1], type_parts[-1][2]),
            dims_span=s.span(base + bracket, base + dims_end),
            init_span=s.span(*init_range) if init_range else None,
            start=base + _first_word(cleaned),
            end=self.end,
            dims_start=base + bracket,
            dims_end=base + dims_end,
            init_start=init_range[0] if init_range else None,
            init_end=init_range[1] if init_range else None,
            function=self.function if kind is ArrayKind.LOCAL else None,
        )
        s.cfile.arrays.append(array)

    def kind(self, qualifiers: tuple[str, ...], eq: int | None) -> ArrayKind:
        if self.function is not None:
            return ArrayKind.LOCAL
        if "extern" in qualifiers and eq is None:
            return ArrayKind.EXTERN
        return ArrayKind.DEFINITION

    def initializer(self, eq: int | None) -> tuple[int, int] | None:
        if self.init is not None:
            return self.init[0], min(self.init[1] + 1, len(self.code))
        if eq is None:
            return None
        a, b = _strip(self.code, eq + 1, self.end)
        return (a, b) if a < b else None

    def count(self, dims: tuple[str, ...], init: tuple[int, int] | None) -> int | None:
        defines = self.s.cfile.defines
        values = [evaluate(d, defines) if d else None for d in dims]
        if dims and not dims[0] and init is not None and all(v is not None for v in values[1:]):
            outer = _initializer_count(self.s.masked, init, defines)
            values[0] = outer
        total = 1
        for value in values:
            if value is None or value < 0:
                return None
            total *= value
        return total

    def alignment(self, name: str, words: list[str], dims_end: int, cleaned: str) -> Alignment | None:
        s = self.s
        found = []
        for group in self.groups:
            if group.align_text is not None:
                value = _align_value(group.align_text, s.cfile.defines)
                where = s.span(group.align_start, group.align_end) if group.align_text else None
                found.append(Alignment(value, group.align_text, s.span(group.start, group.end), where))
        for match in re.finditer(r"[A-Za-z_]\w*", cleaned[dims_end:]):
            words.append(match.group())
        found.extend(self.macro_alignments(words))
        if name in s.pragma_aligns:
            found.append(_settled(s.pragma_aligns[name], s.cfile.defines))
        found.extend(_settled(a, s.cfile.defines) for at, a in s.iar_aligns if self.start <= at < self.end)
        if not found:
            return None
        # Several requests: compilers use the strictest (GCC: "the largest alignment wins").
        return max(found, key=lambda a: -1 if a.value is None else a.value)

    def macro_alignments(self, words: list[str]) -> Iterator[Alignment]:
        """Alignment hidden in an object-like macro: `#define ALIGN16 __attribute__((aligned(16)))`."""
        defines = self.s.cfile.defines
        for word in words:
            define = defines.get(word)
            if define is None or define.params is not None or "align" not in define.value.lower():
                continue
            for group in _attribute_groups(define.value, 0, len(define.value)):
                if group.align_text is not None:
                    value = _align_value(group.align_text, defines)
                    yield Alignment(value, group.align_text, define.name_span, None)


def _settled(alignment: Alignment, defines: Mapping[str, Define]) -> Alignment:
    value = _align_value(alignment.text, defines)
    return Alignment(value, alignment.text, alignment.span, alignment.value_span)


def _align_value(text: str, defines: Mapping[str, Define]) -> int | None:
    if not text:
        return _BARE_ALIGNED
    size = ELEMENT_SIZES.get(" ".join(text.split()))
    return size if size is not None else evaluate(text, defines)  # alignas(int32_t) aligns as the type


def _first_word(cleaned: str) -> int:
    match = re.search(r"\S", cleaned)
    return match.start() if match else 0


def _blank_groups(code: str, start: int, end: int, groups: list[_Group]) -> str:
    pieces, pos = [], start
    for group in groups:
        pieces.append(code[pos : group.start])
        pieces.append(_blank(code[group.start : group.end]))
        pos = group.end
    pieces.append(code[pos:end])
    return "".join(pieces)


_EQ_OR_BRACKET = re.compile(r"[\[\]()]|(?<![=!<>+\-*/%&|^])=(?!=)")


def _top_level_eq(code: str, start: int, end: int) -> int | None:
    """The `=` of a declaration's initializer (not `==`, `<=` ...), outside brackets."""
    depth = 0
    for match in _EQ_OR_BRACKET.finditer(code, start, end):
        char = match.group()
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif depth == 0:
            return match.start()
    return None


def _dims(cleaned: str, bracket: int) -> tuple[list[tuple[int, int]] | None, int]:
    """(inner ranges of each `[...]` from `bracket`, offset after the last `]`), relative to cleaned."""
    dims, pos, n = [], bracket, len(cleaned)
    while pos < n and cleaned[pos] == "[":
        depth, i = 0, pos
        while i < n:
            if cleaned[i] == "[":
                depth += 1
            elif cleaned[i] == "]":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if i >= n:
            return None, pos
        dims.append((pos + 1, i))
        pos = i + 1
        while pos < n and cleaned[pos] in " \t\r\n":
            pos += 1
    end = pos
    while end > bracket and cleaned[end - 1] in " \t\r\n":
        end -= 1
    return dims, end


def _type_words(words: list[str]) -> list[str]:
    """The element type at the end of the specifiers: builtin words together, `struct X`, or a name."""
    words = [w for w in words if w not in _QUALIFIERS]
    if not words:
        return []
    if words[-1] in _BUILTIN_TYPE_WORDS:
        i = len(words)
        while i > 0 and words[i - 1] in _BUILTIN_TYPE_WORDS:
            i -= 1
        return words[i:]
    if len(words) >= 2 and words[-2] in ("struct", "union", "enum"):
        return words[-2:]
    return words[-1:]


# ------------------------------------------------------------------------------------ initializers

_CONTINUATION = re.compile(r"\\\r?\n")
_ITEM = re.compile(r"[^,\s{}\\](?:[^,{}\\\n]*[^,\s{}\\])?")
_PLAIN_INT = re.compile(r"[-+]?(?:[1-9]\d*|0)")


def initializer_list(
    masked: str, array: ArrayDef, defines: Mapping[str, Define] | None = None
) -> tuple[int, int] | None:
    """(offset of `{`, offset after `}`) of the array's value list: its own, or that of the macro it
    is initialized with (`= CONV1_BIAS;` with `#define CONV1_BIAS {...}` in the same file)."""
    if array.init_start is None or array.init_end is None:
        return None
    if masked[array.init_start : array.init_start + 1] == "{":
        return array.init_start, array.init_end
    name = masked[array.init_start : array.init_end].strip()
    define = (defines or {}).get(name)
    if (
        define is None
        or define.params is not None
        or masked[define.value_start : define.value_start + 1] != "{"
    ):
        return None
    if _CONTINUATION.sub(" ", masked[define.value_start : define.value_end]) != define.value:
        return None  # the macro is another file's: its offsets are not in this text
    close = masked.rfind("}", define.value_start, define.value_end)
    return (define.value_start, close + 1) if close != -1 else None


def array_elements(
    text: str, array: ArrayDef, defines: Mapping[str, Define] | None = None
) -> list[Element] | None:
    """The array's initializer values with their offsets; None when one is not an integer constant
    (floats, strings, designators, unknown macros) or there is no initializer list. Nested lists are
    flattened in order. `text` is the file's text (masked or not)."""
    region = initializer_list(text, array, defines)
    if region is None:
        return None
    start, end = region
    body = mask(text[start:end]) if "/" in text[start:end] or '"' in text[start:end] else text[start:end]
    elements = []
    for match in _ITEM.finditer(body):
        token = match.group()
        value = int(token) if _PLAIN_INT.fullmatch(token) and token.lstrip("+-")[:1] != "0" else None
        if value is None:
            value = 0 if token in ("0", "-0", "+0") else evaluate(token, defines)
        if value is None:
            return None
        elements.append(Element(value, start + match.start(), start + match.end()))
    return elements


def array_values(text: str, array: ArrayDef, defines: Mapping[str, Define] | None = None) -> list[int] | None:
    """The array's initializer as integers (see array_elements), parsed only now."""
    elements = array_elements(text, array, defines)
    return None if elements is None else [e.value for e in elements]


def _initializer_count(masked: str, init: tuple[int, int], defines: Mapping[str, Define]) -> int | None:
    """How many top-level items the initializer list has, counted with str.count (no values parsed)."""
    start, end = init
    if masked[start : start + 1] != "{":
        name = masked[start:end].strip()
        define = defines.get(name)
        if define is None or masked[define.value_start : define.value_start + 1] != "{":
            return None
        start, end = define.value_start, define.value_end
    close = masked.rfind("}", start, end)
    if close == -1:
        return None
    return _count_items(masked, start + 1, close)


def _count_items(code: str, a: int, b: int) -> int | None:
    if code.find("{", a, b) == -1:
        return _flat_count(code, a, b)
    count, pos = 0, a
    while True:
        inner = code.find("{", pos, b)
        gap = code[pos : inner if inner != -1 else b]
        if gap.replace(",", "").strip():
            return None  # a mix of lists and plain values: not a shape worth guessing
        if inner == -1:
            return count
        close, _ = _closing_brace(code, inner, b)
        count, pos = count + 1, close + 1


def _flat_count(code: str, a: int, b: int) -> int:
    if re.compile(r"\S").search(code, a, b) is None:
        return 0
    last = b - 1
    while last > a and code[last].isspace():
        last -= 1
    return code.count(",", a, b) + (0 if code[last] == "," else 1)


# ------------------------------------------------------------------------------------- references

_CAST_PREFIX = re.compile(
    r"\(\s*(?:(?:const|volatile|struct|unsigned|signed)\s+)*[A-Za-z_]\w*\s*[*\s]*(?:const\s*)?\)"
)
_REFERENCE = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)?(?:[-+]\s*[\w\s()*+-]+)?")


def referenced_name(expr: str) -> str | None:
    """The variable an argument or field value designates: `conv1_wt`, `(int32_t *)mult`, `&arena[64]`,
    `&params`, `bias + 8` -> its identifier; None for anything else (member access, calls, numbers)."""
    text = expr.strip()
    for _ in range(16):  # casts, `&` and parentheses, outermost first
        if text.startswith("&"):
            text = text[1:].lstrip()
        elif text.startswith("(") and _matching_paren(text, 0, len(text)) == len(text):
            text = text[1:-1].strip()
        elif (cast := _CAST_PREFIX.match(text)) is not None:
            text = text[cast.end() :].lstrip()
        else:
            break
    match = _REFERENCE.fullmatch(text)
    return match.group(1) if match else None


# ------------------------------------------------------------------------------------- workspace


class CWorkspace:
    """The facts of several C files taken together: a file sees its own macros first, then every
    other file's (the generated model.c sizes its arena with MODEL_ARENA_BYTES from model.h), and an
    array passed in one file is defined in another."""

    def __init__(self, files: Mapping[Path, CFile]) -> None:
        self.files = dict(files)
        self.defines: dict[str, Define] = {}
        self._arrays: dict[str, list[tuple[Path, ArrayDef]]] = {}
        self._fields: dict[str, list[tuple[Path, FieldAssignment]]] = {}
        for path in sorted(self.files):
            cfile = self.files[path]
            for name, define in cfile.defines.items():
                self.defines.setdefault(name, define)
            for array in cfile.arrays:
                self._arrays.setdefault(array.name, []).append((path, array))
            for assignment in cfile.fields:
                self._fields.setdefault(assignment.var, []).append((path, assignment))

    def defines_for(self, path: Path) -> Mapping[str, Define]:
        return ChainMap(self.files[path].defines, self.defines) if path in self.files else self.defines

    def calls(self) -> Iterator[tuple[Path, CallSite]]:
        for path in sorted(self.files):
            for call in self.files[path].calls:
                yield path, call

    def arrays(self) -> Iterator[tuple[Path, ArrayDef]]:
        for path in sorted(self.files):
            for array in self.files[path].arrays:
                yield path, array

    def definition(self, name: str, near: Path | None = None) -> tuple[Path, ArrayDef] | None:
        """Where `name` is defined (a local array of the same file first when `near` is given), else
        its extern declaration; None when no file declares it."""
        found = self._arrays.get(name, [])
        ranked = sorted(found, key=lambda f: (f[1].kind is ArrayKind.EXTERN, f[0] != near, str(f[0])))
        if near is None:
            ranked = [f for f in ranked if f[1].kind is not ArrayKind.LOCAL] or ranked
        return ranked[0] if ranked else None

    def fields_of(self, var: str) -> list[tuple[Path, FieldAssignment]]:
        return self._fields.get(var, [])

    def count(self, path: Path, array: ArrayDef) -> int | None:
        """Elements of the array, with macros from the other files where its own do not settle it."""
        if array.count is not None or not array.dims or not all(array.dims):
            return array.count
        defines = self.defines_for(path)
        total = 1
        for dim in array.dims:
            value = evaluate(dim, defines)
            if value is None or value < 0:
                return None
            total *= value
        return total

    def total_bytes(self, path: Path, array: ArrayDef) -> int | None:
        count = self.count(path, array)
        return None if count is None or array.elem_size is None else count * array.elem_size

    def alignment(self, path: Path, array: ArrayDef) -> int | None:
        if array.align is None or array.align.value is not None:
            return array.alignment
        return _align_value(array.align.text, self.defines_for(path))

    def elements(self, path: Path, array: ArrayDef) -> list[Element] | None:
        cfile = self.files.get(path)
        return None if cfile is None else cfile.elements(array, self.defines_for(path))
