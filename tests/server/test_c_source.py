"""The C scanner: the facts it finds in small inline sources, in the generated golden files, and that it
never raises (broken code, binary junk, truncated files) and keeps offsets exact."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fixpoint_server.findings import Span
from fixpoint_server.parse.c_source import (
    ArrayKind,
    CFile,
    CWorkspace,
    array_elements,
    array_values,
    evaluate,
    mask,
    referenced_name,
    scan_c,
)

from tests.server.fixtures import GOLDEN


def text_at(text: str, span: Span) -> str:
    lines = text.split("\n")
    if span.line == span.end_line:
        return lines[span.line][span.column : span.end_column]
    return "\n".join(
        [
            lines[span.line][span.column :],
            *lines[span.line + 1 : span.end_line],
            lines[span.end_line][: span.end_column],
        ]
    )


def names(cfile: CFile) -> list[str]:
    return [a.name for a in cfile.arrays]


# ---------------------------------------------------------------------------------------- masking


def test_masking_blanks_comments_and_literals_and_keeps_every_offset() -> None:
    text = 'a /* x\n y */ b // c "d"\ne "f\\"g" \'h\' i / j'
    masked = mask(text)
    assert len(masked) == len(text)
    assert [i for i, c in enumerate(masked) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]
    assert masked.split("\n") == ["a     ", " " * 6 + "b" + " " * 9, "e \"    \" ' ' i / j"]


def test_unterminated_comment_and_literal_run_to_the_end_of_file_and_of_line() -> None:
    assert mask("x /* never closed\nint8_t w[4];") == "x                \n            "
    assert mask('s = "open\nint8_t w[4];') == "s =      \nint8_t w[4];"


def test_comments_and_strings_hide_arrays_calls_and_assignments() -> None:
    text = """
    /* static const q7_t fake_wt[16] = {1}; */
    // int8_t fake_bias[3];
    const char *s = "int8_t fake_arena[64]; arm_convolve_s8(a, b);";
    #if 0
    int8_t dead[4];
    #endif
    void f(void) {
        /* p.input_offset = 128; */
        // arm_convolve_s8(x);
        const char *t = "q.output_offset = 5;";
    }
    int8_t real_weights[16];
    """
    cfile = scan_c(text)
    assert names(cfile) == ["real_weights"]
    assert cfile.calls == [] and cfile.fields == []


# ----------------------------------------------------------------------------------------- arrays


@pytest.mark.parametrize(
    ("declaration", "alignment", "spelled"),
    [
        ("const int8_t w[16] __attribute__((aligned(16)));", 16, "__attribute__((aligned(16)))"),
        ("__attribute__((aligned(32))) const int8_t w[16];", 32, "__attribute__((aligned(32)))"),
        ('const int8_t w[16] __attribute__ ((__aligned__ (64), section(".sram")));', 64, None),
        ('int8_t w[16] __attribute__((section(".x"), aligned(8)));', 8, None),
        ("int8_t w[16] __attribute__((aligned));", 8, "__attribute__((aligned))"),
        ("__ALIGNED(16) static int8_t w[16];", 16, "__ALIGNED(16)"),
        ("static int8_t w[16] __ALIGNED(4);", 4, "__ALIGNED(4)"),
        ("ALIGN(32) int8_t w[16];", 32, "ALIGN(32)"),
        ("alignas(16) int8_t w[16];", 16, "alignas(16)"),
        ("_Alignas(16) int8_t w[16];", 16, "_Alignas(16)"),
        ("_Alignas(int32_t) int8_t w[16];", 4, "_Alignas(int32_t)"),
        ("__align(8) int8_t w[16];", 8, "__align(8)"),
        ("[[gnu::aligned(16)]] int8_t w[16];", 16, "[[gnu::aligned(16)]]"),
        ("__declspec(align(16)) int8_t w[16];", 16, "__declspec(align(16))"),
        ("#pragma DATA_ALIGN(w, 16)\nint8_t w[16];", 16, "#pragma DATA_ALIGN(w, 16)"),
        ("#pragma data_alignment = 16\nint8_t w[16];", 16, "#pragma data_alignment = 16"),
        ("#define A16 __attribute__((aligned(16)))\nA16 int8_t w[16];", 16, "A16"),
        ("#define N 8\nint8_t w[16] __attribute__((aligned(N * 2)));", 16, "__attribute__((aligned(N * 2)))"),
        ("int8_t w[16] __attribute__((aligned(4))) __attribute__((aligned(16)));", 16, None),
    ],
)
def test_every_alignment_spelling(declaration: str, alignment: int, spelled: str | None) -> None:
    cfile = scan_c(declaration)
    (array,) = cfile.arrays
    assert (array.name, array.alignment) == ("w", alignment)
    assert array.align is not None
    if spelled is not None:
        assert text_at(declaration, array.align.span) == spelled


def test_alignment_written_with_another_files_macro_is_kept_as_text() -> None:
    (array,) = scan_c("static int8_t arena[ARENA_BYTES] __attribute__((aligned(MODEL_ALIGNMENT)));").arrays
    assert array.align is not None and (array.alignment, array.align.text) == (None, "MODEL_ALIGNMENT")
    assert array.count is None and array.dims == ("ARENA_BYTES",)
    assert array.align.value_span is not None


def test_types_qualifiers_sizes_and_counts() -> None:
    text = """
    #define N_OUT 8
    #define K (3 * 3)
    #define W_SIZE (N_OUT * K)
    static const q7_t conv1_wt[W_SIZE] = {1, 2, 3};
    extern const int32_t conv1_bias[N_OUT];
    const q31_t mult[0x10 >> 1];
    unsigned char img[2][3][4];
    int16_t in[] = {1, 2, 3, };
    int8_t grid[][2] = {{1, 2}, {3, 4}, {5, 6}};
    float f[N_OUT / 3];
    static int8_t *const views[4];
    struct point pts[010];
    """
    cfile = scan_c(text)
    got = {
        a.name: (a.ctype, a.qualifiers, a.dims, a.count, a.elem_size, a.total_bytes, a.kind)
        for a in cfile.arrays
    }
    definition, extern = ArrayKind.DEFINITION, ArrayKind.EXTERN
    assert got == {
        "conv1_wt": ("q7_t", ("static", "const"), ("W_SIZE",), 72, 1, 72, definition),
        "conv1_bias": ("int32_t", ("extern", "const"), ("N_OUT",), 8, 4, 32, extern),
        "mult": ("q31_t", ("const",), ("0x10 >> 1",), 8, 4, 32, definition),
        "img": ("unsigned char", (), ("2", "3", "4"), 24, 1, 24, definition),
        "in": ("int16_t", (), ("",), 3, 2, 6, definition),
        "grid": ("int8_t", (), ("", "2"), 6, 1, 6, definition),
        "f": ("float", (), ("N_OUT / 3",), 2, 4, 8, definition),
        "pts": ("struct point", (), ("010",), 8, None, None, definition),
    }


def test_spans_point_at_the_name_type_dims_initializer_and_whole_declaration() -> None:
    text = "\n  static const q7_t  conv1_wt [ 4 ]  __ALIGNED(4) = { 1, -2,\n 3, 4 } ;\nint x;"
    (array,) = scan_c(text).arrays
    assert text_at(text, array.name_span) == "conv1_wt"
    assert text_at(text, array.type_span) == "q7_t"
    assert text_at(text, array.dims_span) == "[ 4 ]"
    assert text_at(text, array.init_span or Span.at(0)) == "{ 1, -2,\n 3, 4 }"
    assert (
        text_at(text, array.span) == "static const q7_t  conv1_wt [ 4 ]  __ALIGNED(4) = { 1, -2,\n 3, 4 } ;"
    )
    assert text[array.dims_end :].startswith("  __ALIGNED")


def test_locals_and_struct_members_are_not_file_scope_arrays() -> None:
    text = """
    typedef struct { int8_t buf[16]; int n; } holder_t;
    struct s { int32_t member[4]; };
    void run(void) {
        int8_t scratch[32];
        for (int i = 0; i < 4; i++) { buf[i] = 0; }
        x = table[3];
    }
    int8_t after[4];
    """
    cfile = scan_c(text)
    assert [(a.name, a.kind, a.function) for a in cfile.arrays] == [
        ("scratch", ArrayKind.LOCAL, "run"),
        ("after", ArrayKind.DEFINITION, None),
    ]


def test_if_0_and_the_else_of_if_1_are_dropped_other_conditionals_are_live() -> None:
    text = """
    #if 0
    int8_t dead1[1];
    #define DEAD 1
    #else
    int8_t live1[1];
    #endif
    #if 1
    int8_t live2[1];
    #else
    int8_t dead2[1];
    #endif
    #ifdef ARM_MATH_MVEI
    int8_t live3[1];
    #if 0
    int8_t dead3[1];
    #endif
    #endif
    """
    cfile = scan_c(text)
    assert names(cfile) == ["live1", "live2", "live3"]
    assert "DEAD" not in cfile.defines


# ---------------------------------------------------------------------------------------- values


def test_values_are_parsed_lazily_through_macros_hex_octal_and_nested_lists() -> None:
    text = """
    #define N 8
    #define B0 (-3)
    #define CONV1_BIAS {1, -2, 0x10, \\
                        010, N, B0, -(4), (int8_t)200}
    static const q31_t conv1_bias[] = CONV1_BIAS;
    const int8_t grid[2][2] = {{1, 2}, /* row 2 */ {3, 4}};
    const float f[2] = {0.5f, 1};
    const int8_t named[2] = {[1] = 3};
    int8_t no_init[4];
    """
    cfile = scan_c(text)
    bias = cfile.array("conv1_bias")
    assert bias is not None and bias.count == 8
    assert array_values(text, bias, cfile.defines) == [1, -2, 16, 8, 8, -3, -4, -56]
    assert cfile.values(bias) == [1, -2, 16, 8, 8, -3, -4, -56]
    grid = cfile.array("grid")
    assert grid is not None and cfile.values(grid) == [1, 2, 3, 4]
    for name in ("f", "named", "no_init"):
        array = cfile.array(name)
        assert array is not None and cfile.values(array) is None, name


def test_elements_know_where_each_value_is() -> None:
    text = "const int32_t b[3] = {\n    36, -692,\n    0x10,\n};"
    cfile = scan_c(text)
    (array,) = cfile.arrays
    elements = array_elements(text, array)
    assert elements is not None
    assert [(e.value, text[e.start : e.end]) for e in elements] == [(36, "36"), (-692, "-692"), (16, "0x10")]


def test_a_macro_of_another_file_gives_no_values_rather_than_wrong_offsets() -> None:
    header = scan_c("#define TABLE {1, 2, 3}")
    source = scan_c("const int8_t t[3] = TABLE;")
    (array,) = source.arrays
    assert source.values(array, header.defines) is None


# ------------------------------------------------------------------------------- defines, includes


def test_defines_includes_and_undef() -> None:
    text = """
    #include "arm_nnfunctions.h"
    #  include <stdint.h>
    #define A 3
    #define B (A << 2) /* sixteen? twelve */
    #define LONG 1 + \\
        2
    #define F(x) ((x) * 2)
    #define S "text"
    #define GONE 1
    #undef GONE
    """
    cfile = scan_c(text)
    assert [(i.name, i.system) for i in cfile.includes] == [("arm_nnfunctions.h", False), ("stdint.h", True)]
    got = {name: (d.value, d.int_value, d.params) for name, d in cfile.defines.items()}
    assert got["A"] == ("3", 3, None)
    assert got["B"][1:] == (12, None)
    assert got["LONG"][1] == 3
    assert got["F"][2] == ("x",) and got["F"][1] is None
    assert got["S"][1] is None
    assert "GONE" not in got
    assert text_at(text, cfile.defines["A"].name_span) == "A"


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("-128", -128), ("-(128)", -128), ("0x7f", 127), ("010", 8), ("0b101", 5), ("16u", 16),
        ("1UL << 4", 16), ("7 / -2", -3), ("-7 % 3", -1), ("(int8_t)200", -56), ("(uint8_t)-1", 255),
        ("sizeof(int32_t) * 4", 16), ("N * (N + 1)", 72), ("M", 72), ("1 ? 2 : 3", None), ("1.5f", None),
        ("f(2)", None), ("UNKNOWN", None), ("1 << 100", None), ("1 / 0", None), ("", None), ("(", None),
        ("LOOP", None), ("- -", None),
    ],
)  # fmt: skip
def test_evaluate_integer_constant_expressions(expr: str, value: int | None) -> None:
    defines = scan_c("#define N 8\n#define M (N * 9)\n#define LOOP (LOOP + 1)").defines
    assert evaluate(expr, defines) == value


# -------------------------------------------------------------------------------- calls and fields


def test_kernel_calls_with_arguments_split_at_top_level_commas() -> None:
    text = """
    arm_cmsis_nn_status arm_convolve_s8(const cmsis_nn_context *ctx, int n);  /* a prototype */
    static int run(void)
    {
        arm_convolve_wrapper_s8(&ctx, &conv_params, &quant, &in_dims, input,
            &f_dims, conv1_wt, &b_dims, (const int32_t *)conv1_bias, &o_dims, f(a, b[1]));
        if (arm_convolve_wrapper_s8_get_buffer_size(&p, &i, &f, &o) > 10) { return 1; }
        my_arm_helper(1);
        return 0;
    }
    """
    cfile = scan_c(text)
    assert [(c.name, c.function) for c in cfile.calls] == [
        ("arm_convolve_wrapper_s8", "run"),
        ("arm_convolve_wrapper_s8_get_buffer_size", "run"),
    ]
    call = cfile.calls[0]
    assert [a.text for a in call.args][6:] == [
        "conv1_wt",
        "&b_dims",
        "(const int32_t *)conv1_bias",
        "&o_dims",
        "f(a, b[1])",
    ]
    assert text_at(text, call.args[8].span) == "(const int32_t *)conv1_bias"
    assert text_at(text, call.name_span) == "arm_convolve_wrapper_s8"
    assert [f.name for f in cfile.functions] == ["run"]


def test_a_broken_call_keeps_the_arguments_read_so_far() -> None:
    cfile = scan_c("void f(void) { arm_relu_q7(buf, 16; }")
    (call,) = cfile.calls
    assert [a.text for a in call.args] == ["buf", "16"]


def test_field_assignments_statements_designated_nested_and_positional() -> None:
    text = """
    #define ZP 11
    static const cmsis_nn_conv_params l0_conv1_params = {
        .input_offset = -ZP,
        .output_offset = -128,
        .stride = {.w = 1, .h = 2},
    };
    static const cmsis_nn_fc_params fc = {25, 0, -66, {-128, 127}};
    void run(cmsis_nn_conv_params *p) {
        conv_params.input_offset = 128;
        p->output_offset = (int32_t)-5;
        if (x) conv_params.stride.w = 2;
        conv_params.output_offset == 3;
        conv_params.output_offset += 3;
    }
    """
    cfile = scan_c(text)
    got = [
        (f.var, f.field, f.value, f.int_value, f.kind, f.struct_type, f.position, f.function)
        for f in cfile.fields
    ]
    conv, fc = "cmsis_nn_conv_params", "cmsis_nn_fc_params"
    assert got == [
        ("l0_conv1_params", "input_offset", "-ZP", -11, "designated", conv, 0, None),
        ("l0_conv1_params", "output_offset", "-128", -128, "designated", conv, 1, None),
        ("l0_conv1_params", "stride.w", "1", 1, "designated", conv, None, None),
        ("l0_conv1_params", "stride.h", "2", 2, "designated", conv, None, None),
        ("fc", "", "25", 25, "designated", fc, 0, None),
        ("fc", "", "0", 0, "designated", fc, 1, None),
        ("fc", "", "-66", -66, "designated", fc, 2, None),
        ("conv_params", "input_offset", "128", 128, "assign", None, None, "run"),
        ("p", "output_offset", "(int32_t)-5", -5, "arrow", None, None, "run"),
        ("conv_params", "stride.w", "2", 2, "assign", None, None, "run"),
    ]
    assert text_at(text, cfile.fields[0].value_span) == "-ZP"


@pytest.mark.parametrize(
    ("expr", "name"),
    [
        ("conv1_wt", "conv1_wt"), ("(int32_t *)model_l0_conv1_multiplier", "model_l0_conv1_multiplier"),
        ("(int8_t *)(void *)&model_arena[1152]", "model_arena"), ("&l0_conv1_params", "l0_conv1_params"),
        ("bias + 8", "bias"), ("(bias)", "bias"), ("(const q7_t *) &w[0]", "w"),
        ("model_ctx.buf", None), ("p->x", None), ("foo(1)", None), ("12", None), ("a * b", None),
    ],
)  # fmt: skip
def test_referenced_name(expr: str, name: str | None) -> None:
    assert referenced_name(expr) == name


# ------------------------------------------------------------------------------- generated sources


def test_the_generated_golden_sources() -> None:
    data = scan_c((GOLDEN / "model_data.c").read_text())
    model = scan_c((GOLDEN / "model.c").read_text())
    header = scan_c((GOLDEN / "model.h").read_text())
    assert data.generated is not None and data.generated.params_name == "residual.params.json"
    assert data.generated.model_name == "residual.onnx" and len(data.generated.content_sha256) == 64
    assert data.generated.span.line == 0 and data.generated.span.end_line == 9  # its generation line too
    assert len(data.arrays) == 36 and all(
        a.alignment == 16 and a.kind is ArrayKind.DEFINITION for a in data.arrays
    )
    bias = data.array("model_l0_conv1_bias")
    assert bias is not None and data.values(bias) == [36, 692, 1939, 1518, -951, -200, 377, 1513]
    arena = model.array("model_arena")
    assert arena is not None and arena.count is None  # sized by model.h's macros
    ws = CWorkspace({Path("model.c"): model, Path("model.h"): header})
    assert ws.count(Path("model.c"), arena) == 1440 and ws.alignment(Path("model.c"), arena) == 16
    add = next(c for c in model.calls if c.name == "arm_elementwise_add_s8")
    assert add.function == "l4_residual" and [a.text for a in add.args][2] == "-29"
    offsets = {(f.var, f.field): f.int_value for f in model.fields if f.field.endswith("offset")}
    assert offsets[("l0_conv1_params", "input_offset")] == -11
    assert offsets[("l14_fc_params", "filter_offset")] == 0
    assert header.defines["MODEL_ARENA_BYTES"].int_value == 1440
    assert scan_c("/* a plain comment */\nint x;").generated is None


def test_workspace_definitions_prefer_the_definition_over_extern_declarations() -> None:
    model = scan_c((GOLDEN / "model.c").read_text())
    data = scan_c((GOLDEN / "model_data.c").read_text())
    ws = CWorkspace({Path("model.c"): model, Path("model_data.c"): data})
    found = ws.definition("model_l0_conv1_bias")
    assert found is not None and found[0] == Path("model_data.c") and found[1].kind is ArrayKind.DEFINITION
    assert ws.definition("nowhere") is None


# ---------------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "text",
    [
        "", "{", "}", "}}}} int8_t w[4];", "int8_t w[4] = {1, 2", "int8_t w[", "int8_t w[4] = {{{{",
        "#define", "#if 0", "#else\n#endif\n#endif", "/*", "\"", "'", "arm_x(", "a[b[c[d",
        "void f(void) { arm_x(a, (b, c", "\x00\xff\x1b[0m binary \x00 {;} [[ ]] ((",
        "__attribute__((aligned(", "int8_t w[4] __attribute__((aligned(", "int8_t w[1 << 200];",
        "#define A A\nint8_t w[A];", "x.y = ;", "void f(void) { p.q = 3 }",
    ],
)  # fmt: skip
def test_broken_text_never_raises(text: str) -> None:
    cfile = scan_c(text)
    assert len(cfile.masked) == len(text)
    for array in cfile.arrays:
        cfile.values(array)


def test_unbalanced_braces_lose_only_the_broken_part() -> None:
    text = """
    int8_t broken[4] = {1, 2
    ;
    void f(void) { arm_relu_q7(a, 4);
    }}
    int8_t after[4] __attribute__((aligned(16)));
    """
    cfile = scan_c(text)
    assert "after" in names(cfile)
    assert [c.name for c in cfile.calls] == ["arm_relu_q7"]


def test_random_junk_and_truncated_golden_files_never_raise() -> None:
    rng = random.Random(0)
    alphabet = "int8_t w[]{}();=,.#*/\"'\\\n \t0123456789xX-+&<>_abc"
    for _ in range(300):
        scan_c("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))))
    source = (GOLDEN / "model.c").read_text()
    for _ in range(60):
        a = rng.randint(0, len(source))
        b = rng.randint(a, len(source))
        cfile = scan_c(source[:a] + source[b:])
        assert len(cfile.masked) == len(source) - (b - a)
