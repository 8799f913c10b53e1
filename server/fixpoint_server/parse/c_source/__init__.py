"""Facts about C sources for the rules: arrays, kernel calls, struct fields, macros, includes and the
header of a Fixpoint-generated file, found by a fast and forgiving scan - not a compiler.

No preprocessor runs and nothing becomes a syntax tree. The text is first masked (comments and the
inside of string and character literals become spaces, keeping every offset and line break), so a
commented-out array is no fact; directives are read line by line; then the code is walked at the level
of `{ } ;`, jumping over initializer bodies with str.find, so a 50 MB generated weights table costs a
few C-level passes. Array values are parsed only when a rule asks (`array_values`). Nothing here raises
on any text: unbalanced braces, unterminated comments or binary junk give fewer facts, never an error.

Conditional compilation (conditions): a branch never compiled (`#if 0`, `#elif 0`, what follows an
`#if 1`) is dropped whole. Every other branch is live - its declarations are facts, real in some
configuration - but braces are counted along one branch only: the first live one, as if every condition
the scan cannot evaluate were true. Each later branch starts from the scopes open at its `#if`, and
`#endif` resumes where the first branch left off, so a function header written in both branches opens
one function, and a `{` and its `}` under two `#ifdef X` blocks pair up.

Every declarator of a declaration is read: `int8_t a[4] = {...}, *p, b[16] __ALIGNED(16);` gives the
arrays a and b, each with its own name, dims, alignment and initializer (attributes among the specifiers
apply to both, one after a declarator to that one only).

Limits, on purpose: macros are expanded only where a fact needs a number (dims, alignment, offsets,
initializer lists); a statement split by a conditional (`int8_t w[4]` `#ifdef X` `= {...}` `#else` ...)
is read as the text of all its branches together; arrays of pointers and function pointers are no
arrays here.

The modules, in the order a scan uses them: mask (the masked text), scan (scan_c: header, directives,
calls), conditions (live and dead branches), walker (`{ } ;` and field assignments), declarations and
attributes (arrays and their alignment), brackets (matching and splitting over the masked text), expr
(integer constant expressions, the variable an argument names), values (initializer lists, read
lazily); facts holds the records, cfile the CFile gathering one file's, state the ScanState the scan
hands to the walker and the declaration reader, workspace the facts of several files taken together.
"""

from fixpoint_server.parse.c_source.brackets import split_arguments
from fixpoint_server.parse.c_source.cfile import CFile
from fixpoint_server.parse.c_source.expr import ELEMENT_SIZES, evaluate, referenced_name
from fixpoint_server.parse.c_source.facts import (
    Alignment,
    Argument,
    ArrayDef,
    ArrayKind,
    CallSite,
    Define,
    Element,
    FieldAssignment,
    FunctionDef,
    GeneratedHeader,
    Include,
)
from fixpoint_server.parse.c_source.mask import mask
from fixpoint_server.parse.c_source.scan import scan_c
from fixpoint_server.parse.c_source.values import array_elements, array_values, initializer_list
from fixpoint_server.parse.c_source.workspace import CWorkspace

__all__ = [
    "ELEMENT_SIZES",
    "Alignment",
    "Argument",
    "ArrayDef",
    "ArrayKind",
    "CFile",
    "CWorkspace",
    "CallSite",
    "Define",
    "Element",
    "FieldAssignment",
    "FunctionDef",
    "GeneratedHeader",
    "Include",
    "array_elements",
    "array_values",
    "evaluate",
    "initializer_list",
    "mask",
    "referenced_name",
    "scan_c",
    "split_arguments",
]
