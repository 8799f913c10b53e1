"""The C scanner's conditional compilation and declarators: braces counted along one branch of an
`#if`/`#ifdef`/`#elif`/`#else`, declarations in every live branch, dead branches skipped whole, and
every declarator of `int8_t a[4] = {...}, b[16] = {...};` an array of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixpoint_server.findings import LineIndex
from fixpoint_server.parse.c_source import ArrayKind, CFile, CWorkspace, mask, scan_c
from fixpoint_server.parse.c_source.scan import _Scanner
from fixpoint_server.rules import misaligned_array
from hypothesis import given
from hypothesis import strategies as st

from quantcore.project import ChecksSettings, Project
from tests.fuzzing import fuzz
from tests.server.fixtures import apply_edits, context
from tests.server.test_c_source import text_at
from tests.server.test_fuzz_parsers import C_TOKENS, glued

DEFINITION, EXTERN, LOCAL = ArrayKind.DEFINITION, ArrayKind.EXTERN, ArrayKind.LOCAL


def places(cfile: CFile) -> list[tuple[str, ArrayKind, str | None]]:
    return [(a.name, a.kind, a.function) for a in cfile.arrays]


def functions(cfile: CFile) -> list[tuple[str, int, int]]:
    """Each function's name and its first and last line (0-based)."""
    return [(f.name, f.span.line, f.span.end_line) for f in cfile.functions]


# ------------------------------------------------------------------------------ conditional braces


def test_a_function_header_written_in_both_branches_opens_one_function() -> None:
    text = """\
#ifdef ARM_MATH_DSP
void run(const int8_t *in, int n) {
    int8_t dsp_only[8];
#else
void run(const int8_t *in) {
#endif
    int8_t scratch[32];
    arm_relu_q7(scratch, 32);
}
const int8_t conv1_weights[16] = {1};
void after(void) { arm_relu_q7(conv1_weights, 16); }
"""
    cfile = scan_c(text)
    assert places(cfile) == [
        ("dsp_only", LOCAL, "run"),
        ("scratch", LOCAL, "run"),
        ("conv1_weights", DEFINITION, None),
    ]
    assert functions(cfile) == [("run", 1, 8), ("after", 10, 10)]
    assert [(c.name, c.function) for c in cfile.calls] == [("arm_relu_q7", "run"), ("arm_relu_q7", "after")]


def test_elif_branches_each_start_where_the_if_did() -> None:
    text = """\
#if defined(A)
static void f(int a) {
    int8_t la[1];
#elif defined(B)
static void f(int b) {
    int8_t lb[2];
#elif defined(C)
    int8_t global_c[3];
#else
static void f(void) {
    int8_t ld[4];
#endif
    int8_t body[5];
}
int8_t g[6];
"""
    cfile = scan_c(text)
    assert places(cfile) == [
        ("la", LOCAL, "f"),
        ("lb", LOCAL, "f"),
        ("global_c", DEFINITION, None),  # that branch opens no function: read at file scope
        ("ld", LOCAL, "f"),
        ("body", LOCAL, "f"),
        ("g", DEFINITION, None),
    ]
    assert functions(cfile) == [("f", 1, 13)]


def test_nested_conditionals_follow_the_first_branch_at_every_level() -> None:
    text = """\
void f(void) {
#ifdef OUTER
#  if FAST
    for (int i = 0; i < n; i++) {
#  else
    while (n--) {
#  endif
        int8_t inner[2];
    }
#else
    do {
        int8_t other[3];
    } while (0);
#endif
    int8_t tail[4];
}
#ifndef NO_TABLES
const int8_t table_a[4] = {1, 2, 3, 4};
#else
const int8_t table_b[4] = {0};
#endif
"""
    cfile = scan_c(text)
    assert places(cfile) == [
        ("inner", LOCAL, "f"),
        ("other", LOCAL, "f"),
        ("tail", LOCAL, "f"),
        ("table_a", DEFINITION, None),
        ("table_b", DEFINITION, None),  # real where NO_TABLES is defined: every live branch is read
    ]
    assert functions(cfile) == [("f", 0, 15)]


def test_the_first_branch_decides_when_branches_differ_in_braces() -> None:
    # The #if branch opens a block the #else branch does not; the matching `}` is again conditional.
    # Counting the first branch of both pairs them up, as a build with DEBUG defined would.
    text = """\
void f(void) {
#ifdef DEBUG
    if (trace) {
#endif
        int8_t maybe_nested[2];
#ifdef DEBUG
    }
#endif
    int8_t body[3];
}
int8_t g[4];
"""
    cfile = scan_c(text)
    assert places(cfile) == [("maybe_nested", LOCAL, "f"), ("body", LOCAL, "f"), ("g", DEFINITION, None)]
    assert functions(cfile) == [("f", 0, 9)]


def test_a_body_closed_in_both_branches_is_one_function() -> None:
    text = """\
void f(void) {
    int8_t a[1];
#ifdef X
}
#else
    arm_relu_q7(a, 1);
}
#endif
int8_t g[2];
#ifdef Y
void h(void) {
#else
void k(void) { int8_t in_k[3]; }
void h(int y) {
#endif
}
"""
    cfile = scan_c(text)
    assert places(cfile) == [("a", LOCAL, "f"), ("g", DEFINITION, None), ("in_k", LOCAL, "k")]
    # k closes inside its branch, h (opened before it in the text) only after #endif: kept in order
    assert functions(cfile) == [("f", 0, 3), ("h", 10, 15), ("k", 12, 12)]
    assert [f.start for f in cfile.functions] == sorted(f.start for f in cfile.functions)


def test_dead_branches_are_skipped_entirely() -> None:
    text = """\
#if 0
void never(void) {
    int8_t dead1[1];
#define DEAD 1
#endif
int8_t g1[1];
#if 0
#  ifdef X
#  else
void never2(void) {
#  endif
#else
int8_t g2[2];
#endif
#ifdef MAYBE
int8_t live[3];
#elif 0
void never3(void) {
#elif 1
int8_t known[4];
#else
void never4(void) {
#endif
#if 1
int8_t g3[5];
#elif defined(Z)
void never5(void) {
#endif
int8_t g4[6];
"""
    cfile = scan_c(text)
    assert places(cfile) == [
        ("g1", DEFINITION, None),
        ("g2", DEFINITION, None),
        ("live", DEFINITION, None),
        ("known", DEFINITION, None),
        ("g3", DEFINITION, None),
        ("g4", DEFINITION, None),
    ]
    assert cfile.functions == [] and "DEAD" not in cfile.defines


@pytest.mark.parametrize(
    "tail",
    [
        "#ifdef X\nvoid f(void) {\n",  # no #endif
        "#ifdef X\nvoid f(void) {\n#else\n",
        "#ifdef X\nvoid f(void) {\n#else\nvoid f(int x) {\nint8_t l[2];\n",
        "#if 0\nvoid f(void) {\n",  # a dead branch to the end of the file
        "#if 0\n#ifdef X\n#else\n",
        "#endif\n#else\n#elif 1\n}\n",  # closers without an #if
    ],
)
def test_a_conditional_left_open_at_the_end_of_the_file_costs_nothing_before_it(tail: str) -> None:
    text = "void f0(void) { int8_t a[1]; }\nconst int8_t g[2] = {1, 2};\n" + tail
    cfile = scan_c(text)
    assert places(cfile)[:2] == [("a", LOCAL, "f0"), ("g", DEFINITION, None)]
    assert functions(cfile)[0] == ("f0", 0, 0)


# ----------------------------------------------------------------------------------- declarators


def test_every_declarator_is_an_array_with_its_own_name_size_initializer_and_place() -> None:
    text = """\
const int8_t conv_wt[4] = {1, 2, 3, 4}, conv_bias[16] = {5, 6},
    grid[][2] = {{1, 2}, {3, 4}, {5, 6}}, plain[3];
"""
    cfile = scan_c(text)
    got = [(a.name, a.dims, a.count, a.kind, a.declarators) for a in cfile.arrays]
    assert got == [
        ("conv_wt", ("4",), 4, DEFINITION, 4),
        ("conv_bias", ("16",), 16, DEFINITION, 4),
        ("grid", ("", "2"), 6, DEFINITION, 4),
        ("plain", ("3",), 3, DEFINITION, 4),
    ]
    wt, bias, grid, plain = cfile.arrays
    assert [(a.name_span.line, a.name_span.column) for a in cfile.arrays] == [
        (0, 13),
        (0, 40),
        (1, 4),
        (1, 42),
    ]
    assert [text_at(text, a.name_span) for a in cfile.arrays] == ["conv_wt", "conv_bias", "grid", "plain"]
    assert [text_at(text, a.dims_span) for a in cfile.arrays] == ["[4]", "[16]", "[][2]", "[3]"]
    assert text_at(text, wt.init_span or wt.name_span) == "{1, 2, 3, 4}"
    assert text_at(text, bias.init_span or bias.name_span) == "{5, 6}"
    assert plain.init_span is None
    assert cfile.values(wt) == [1, 2, 3, 4] and cfile.values(bias) == [5, 6]
    assert cfile.values(grid) == [1, 2, 3, 4, 5, 6] and cfile.values(plain) is None
    assert all(a.ctype == "int8_t" and a.qualifiers == ("const",) for a in cfile.arrays)
    assert all(text_at(text, a.type_span) == "int8_t" for a in cfile.arrays)  # shared: see `declarators`
    assert wt.span == plain.span and text_at(text, wt.span).startswith("const int8_t conv_wt")


def test_attributes_apply_to_the_declarator_they_follow_or_to_all_from_the_specifiers() -> None:
    text = (
        "static const int8_t x[2] __attribute__((aligned(16))) = {1, 2}, y[3] = {1, 2, 3};\n"
        "__attribute__((aligned(8))) int8_t a[2], b[3] __attribute__((aligned(32))), __ALIGNED(64) c[4];\n"
        "#define A16 __attribute__((aligned(16)))\n"
        "int8_t m[4], n[4] A16;\n"
        "#pragma DATA_ALIGN(q, 4)\n"
        "int8_t p[4], q[4];\n"
        "#pragma data_alignment = 8\n"
        "int8_t r[4], s[4];\n"
    )
    cfile = scan_c(text)
    assert [(a.name, a.alignment) for a in cfile.arrays] == [
        ("x", 16), ("y", None),
        ("a", 8), ("b", 32), ("c", 64),
        ("m", None), ("n", 16),
        ("p", None), ("q", 4),
        ("r", 8), ("s", None),  # IAR's pragma aligns "the immediately following variable"
    ]  # fmt: skip
    x, y, a, b = cfile.arrays[:4]
    assert x.align is not None and text_at(text, x.align.span) == "__attribute__((aligned(16)))"
    assert text_at(text, y.init_span or y.name_span) == "{1, 2, 3}"
    assert b.align is not None and text_at(text, b.align.span) == "__attribute__((aligned(32)))"
    # the quick fix's insertion point is after each declarator's own dims
    assert text[y.dims_end :].startswith(" = {1, 2, 3}") and text[a.dims_end :].startswith(", b[3]")


def test_pointers_scalars_and_functions_among_the_declarators_are_skipped() -> None:
    text = """\
int8_t *p, q[4];
int8_t *r[4], s[5], *const t, u[6];
int x = f(1, 2), w[3] = {g(1, 2), 3, (4, 5)};
int32_t n = 3, *v[2], k[2];
unsigned char *restrict z, img[2][3];
"""
    cfile = scan_c(text)
    got = [(a.name, a.ctype, a.count, a.declarators) for a in cfile.arrays]
    assert got == [
        ("q", "int8_t", 4, 2),
        ("s", "int8_t", 5, 4),
        ("u", "int8_t", 6, 4),
        ("w", "int", 3, 2),
        ("k", "int32_t", 2, 3),
        ("img", "unsigned char", 6, 2),
    ]
    w = cfile.arrays[3]
    assert text_at(text, w.init_span or w.name_span) == "{g(1, 2), 3, (4, 5)}"


def test_declarators_inside_functions_and_extern_declarations() -> None:
    text = """\
extern const int8_t ext_a[4], ext_b[8];
const int8_t def_a[4] = {0}, def_b[8];
void run(void) {
    int8_t buf_a[16], buf_b[32] = {0};
    for (i = 0, j[0] = 1; i < 4; i++) { }
    x = a[1], b[2];
}
"""
    cfile = scan_c(text)
    assert places(cfile) == [
        ("ext_a", EXTERN, None),
        ("ext_b", EXTERN, None),
        ("def_a", DEFINITION, None),
        ("def_b", DEFINITION, None),
        ("buf_a", LOCAL, "run"),
        ("buf_b", LOCAL, "run"),
    ]


def test_a_struct_value_declared_before_an_array_keeps_its_fields() -> None:
    cfile = scan_c("static const cmsis_nn_dims d = {.n = 1, .h = 2}, shape[2] = {3, 4};")
    assert [(f.var, f.field, f.int_value, f.struct_type) for f in cfile.fields] == [
        ("d", "n", 1, "cmsis_nn_dims"),
        ("d", "h", 2, "cmsis_nn_dims"),
    ]
    assert [(a.name, a.ctype, cfile.values(a)) for a in cfile.arrays] == [("shape", "cmsis_nn_dims", [3, 4])]


def test_the_workspace_finds_a_later_declarator_by_name() -> None:
    data = scan_c("const int8_t model_w[4] = {1, 2, 3, 4}, model_b[2] = {5, 6};")
    user = scan_c("extern const int8_t model_w[4], model_b[2];")
    ws = CWorkspace({Path("data.c"): data, Path("user.c"): user})
    found = ws.definition("model_b")
    assert found is not None and found[0] == Path("data.c") and found[1].kind is DEFINITION
    assert ws.elements(Path("data.c"), found[1]) is not None
    assert [e.value for e in ws.elements(Path("data.c"), found[1]) or []] == [5, 6]


def test_misaligned_array_lands_on_the_declarator_and_its_fix_aligns_that_one(tmp_path: Path) -> None:
    text = """\
#include "arm_nnfunctions.h"
static const int8_t conv_wt[16] __attribute__((aligned(16))) = {1, 2}, conv2_wt[32] = {3, 4},
    conv3_wt[16] __attribute__((aligned(4)));
"""
    path = tmp_path / "main.c"
    path.write_text(text)
    opted_in = Project(checks=ChecksSettings(aligned=("main.c",)))
    findings = misaligned_array.check(context(tmp_path, opted_in))
    assert [(f.data["array"], text_at(text, f.span), f.span.line) for f in findings] == [
        ("conv2_wt", "conv2_wt", 1),
        ("conv3_wt", "conv3_wt", 2),
    ]
    edits = [e for f in findings for e in f.fixes[0].edits]
    repaired = apply_edits(text, edits)
    assert repaired.split("\n")[1:3] == [
        "static const int8_t conv_wt[16] __attribute__((aligned(16))) = {1, 2},"
        " conv2_wt[32] __attribute__((aligned(16))) = {3, 4},",
        "    conv3_wt[16] __attribute__((aligned(16)));",
    ]
    assert misaligned_array.check(context(tmp_path, opted_in, {path: repaired})) == []


# ------------------------------------------------------------------------------------- properties

_BRANCH_TOKENS = (
    *C_TOKENS,
    "#ifdef X\n", "#ifndef X\n", "#if defined(X)\n", "#elif X\n", "#elif 0\n", "#elif 1\n", "#else\n",
    "#endif\n", "void f(void) {", "static int g(int a) {", "}", "int8_t a[4] = {1, 2}, b[2], *p, c[] = {3};",
)  # fmt: skip
_PLAIN_TOKENS = (
    "int8_t", "static", "const", "w", "f", "(", ")", "void", "{", "}", "[", "]", "4", ";", ",", "=", "*",
    "\n", " ", "struct", "s", "if", "x", "typedef", "extern", "arm_relu_q7", "enum", "void f(void) {",
    "g(x) {", "int8_t a[2] = {1, 2}, b[1];",
)  # fmt: skip
"""No comment, literal or directive: text that cannot swallow the directives put around it."""


@fuzz(150)
@given(glued(_BRANCH_TOKENS))
def test_the_walker_never_fails_on_any_conditional_structure(text: str) -> None:
    masked = mask(text)
    cfile = CFile(masked, LineIndex(masked))
    _Scanner(text, cfile).run()  # not scan_c: its last-resort catch would hide a scanner bug
    starts = [f.start for f in cfile.functions]
    assert starts == sorted(set(starts))
    for array in cfile.arrays:
        assert text_at(text, array.name_span) == array.name


@fuzz(150)
@given(st.lists(st.sampled_from(_PLAIN_TOKENS), max_size=40).map("".join), st.integers(0, 2))
def test_a_branch_written_twice_leaves_the_scanner_where_one_copy_does(code: str, closers: int) -> None:
    code += "\n;\n"  # the text after it starts a statement of its own
    marker = "}\n" * closers + "int8_t marker[4];\n"  # closers: where the copies' braces end matters
    once = scan_c(code + marker).array("marker")
    twice = scan_c(f"#ifdef X\n{code}#else\n{code}#endif\n{marker}").array("marker")
    dead = scan_c(f"#if 0\n{code}#endif\n{marker}")
    if once is None:  # inside a struct left open: members are no arrays
        assert twice is None
    else:
        assert twice is not None and (twice.kind, twice.function) == (once.kind, once.function)
    assert places(dead) == [("marker", DEFINITION, None)]
