"""C expressions without a parser: the value of an integer constant expression (macros, casts and
sizeof of the types CMSIS-NN code uses), and the variable an argument or field value designates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from fixpoint_server.parse.c_source.brackets import matching_paren
from fixpoint_server.parse.c_source.facts import Define

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
        elif text.startswith("(") and matching_paren(text, 0, len(text)) == len(text):
            text = text[1:-1].strip()
        elif (cast := _CAST_PREFIX.match(text)) is not None:
            text = text[cast.end() :].lstrip()
        else:
            break
    match = _REFERENCE.fullmatch(text)
    return match.group(1) if match else None
