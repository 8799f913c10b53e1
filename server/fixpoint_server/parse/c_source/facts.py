"""The facts a C scan finds, as plain records with their spans: arrays, kernel calls, struct fields,
macros, includes, functions, initializer values and the header of a Fixpoint-generated file (one file's
are gathered in a cfile.CFile). Records only: this module imports no other of the scanner's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fixpoint_server.findings import Span


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
    """The whole declaration, from its first word through the `;` (see `declarators`)."""
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
    declarators: int = 1
    """How many declarators its declaration has (`int8_t a[4], *p, b[8];`: 3). Above 1, `span`, `start`,
    `end`, `type_span` and `qualifiers` are shared with the others: an edit there changes every one."""

    @property
    def alignment(self) -> int | None:
        return self.align.value if self.align is not None else None

    @property
    def total_bytes(self) -> int | None:
        if self.count is None or self.elem_size is None:
            return None
        return self.count * self.elem_size


@dataclass(frozen=True)
class Element:
    """One value of an initializer list and where it is in the file."""

    value: int
    start: int
    end: int


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
