"""The C rules (misaligned-array, unscaled-bias, wrong-zero-point) over real generated sources and
hand-written firmware: the pristine generated tree is clean; each seeded mistake gives the exact
finding; applying its quick fix gives a text with no finding."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from fixpoint_server.findings import Code, Finding, Severity
from fixpoint_server.parse.c_source import scan_c
from fixpoint_server.rules import misaligned_array, run_rules, unscaled_bias, zero_point_c
from fixpoint_server.rules.context import CheckContext, FactsCache

from quantcore.project import ChecksSettings, Project
from tests.server.fixtures import GeneratedProject, apply_edits, context, generated_project

RULES: dict[Code, ModuleType] = {
    Code.MISALIGNED_ARRAY: misaligned_array,
    Code.UNSCALED_BIAS: unscaled_bias,
    Code.WRONG_ZERO_POINT: zero_point_c,
}
CACHE = FactsCache()
"""Shared by every context here: facts are cached by content, so edited texts are parsed afresh while
the quantized model is built once."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> GeneratedProject:
    return generated_project(tmp_path_factory.mktemp("residual"))


def check(ctx: CheckContext, code: Code) -> list[Finding]:
    return [f for f in RULES[code].check(ctx) if f.code is code]


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if fragment in line)


def fixed(ctx: CheckContext, finding: Finding, texts: dict[Path, str]) -> dict[Path, str]:
    """`texts` (the shadowed files) with the finding's first fix applied to the files it edits."""
    out = dict(texts)
    for path in {e.path for e in finding.fixes[0].edits}:
        source = out.get(path) or ctx.read(path) or ""
        out[path] = apply_edits(source, [e for e in finding.fixes[0].edits if e.path == path])
    return out


def edited(
    project: GeneratedProject, name: str, change: Callable[[str], str]
) -> tuple[Path, dict[Path, str]]:
    path = project.source(name).resolve()
    text = path.read_text()
    new = change(text)
    assert new != text, "the seeded mistake did not apply"
    return path, {path: new}


def ctx_for(project: GeneratedProject, texts: dict[Path, str] | None = None, **settings: int) -> CheckContext:
    base = project.project
    chosen = Project(model=base.model, params=base.params, generated=base.generated, **settings)  # type: ignore[arg-type]
    return context(project.root, chosen, texts, CACHE)


def layer_scales(project: GeneratedProject, layer: str) -> tuple[np.ndarray, float, np.ndarray]:
    """(integer bias, s_in, s_w per channel) of a layer of the generated project's quantized graph."""
    layers = unscaled_bias.Layers(ctx_for(project))
    found = next(x for x in layers.layers if x.name == layer)
    bias, s_in, s_w = found.bias(), found.tensor_scale(0), found.tensor_scale(1)
    assert bias is not None and s_in is not None and s_w is not None
    return bias, float(s_in[0]), s_w


def rounded(x: np.ndarray) -> list[int]:
    return [int(v) for v in np.sign(x) * np.floor(np.abs(x) + 0.5)]


# ------------------------------------------------------------------------------- the pristine tree


def test_the_generated_tree_has_no_findings(project: GeneratedProject) -> None:
    ctx = ctx_for(project)
    assert unscaled_bias.Layers(ctx), "the JSON's model must build, or the JSON checks test nothing"
    for code in RULES:
        assert check(ctx, code) == [], code
    assert not [f for f in run_rules(ctx, only=RULES) if f.code in RULES]


def test_a_stricter_project_alignment_flags_the_generated_arrays(project: GeneratedProject) -> None:
    findings = check(ctx_for(project, alignment=32), Code.MISALIGNED_ARRAY)
    names = {f.data["array"] for f in findings}
    assert {"model_l0_conv1_weights", "model_arena", "model_scratch"} <= names
    weights = next(
        f for f in findings if f.data["array"] == "model_l0_conv1_weights" and "aligned to only" in f.message
    )
    assert "aligned to only 16 bytes, but must be aligned to 32 bytes" in weights.message
    assert "passed as filter_data to arm_convolve_wrapper_s8" in weights.message


# ------------------------------------------------------------------------------- seeded: bias values


def test_bias_divided_by_s_in_only(project: GeneratedProject) -> None:
    bias, _, s_w = layer_scales(project, "conv1")
    original = "    " + ", ".join(str(int(v)) for v in bias) + ","
    wrong = "    " + ", ".join(str(v) for v in rounded(bias * s_w)) + ","  # round(b / s_in)
    path, texts = edited(project, "model_data.c", lambda t: t.replace(original, wrong))
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.UNSCALED_BIAS)
    assert finding.path == path and finding.span.line == line_of(texts[path], wrong)
    assert finding.message.startswith(
        f"model_l0_conv1_bias[0] is {rounded(bias * s_w)[0]}, but layer 'conv1'"
    )
    assert f"has bias {bias[0]}" in finding.message
    assert "looks like round(b / s_in): the weight scale s_w[c] is missing" in finding.message
    assert finding.fixes[0].title == "Rescale bias from residual.params.json"
    assert check(ctx_for(project, fixed(ctx, finding, texts)), Code.UNSCALED_BIAS) == []


def test_bias_missing_the_input_scale_and_an_all_zero_bias(project: GeneratedProject) -> None:
    bias, s_in, _ = layer_scales(project, "fc")
    original = ", ".join(str(int(v)) for v in bias) + ", 0, 0,"  # 10 channels, padded to 12
    wrong = ", ".join(map(str, rounded(bias * s_in))) + ", 0, 0,"
    _, texts = edited(project, "model_data.c", lambda t: t.replace(original, wrong))
    (finding,) = check(ctx_for(project, texts), Code.UNSCALED_BIAS)
    assert finding.message.startswith(f"model_l14_fc_bias[0] is {rounded(bias * s_in)[0]}, but layer 'fc'")
    assert "looks like round(b / s_w[c]): the input scale s_in is missing" in finding.message
    _, zeros = edited(project, "model_data.c", lambda t: t.replace(original, ", ".join(["0"] * 12) + ","))
    (finding,) = check(ctx_for(project, zeros), Code.UNSCALED_BIAS)
    assert "all zero - the bias is missing, or the float bias was rounded without scaling" in finding.message


def test_int8_bias_is_an_error_and_rescaling_fixes_type_and_values(project: GeneratedProject) -> None:
    path, texts = edited(
        project,
        "model_data.c",
        lambda t: t.replace("const int32_t model_l0_conv1_bias[8]", "const int8_t model_l0_conv1_bias[8]"),
    )
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.UNSCALED_BIAS)
    assert (finding.path, finding.span.line) == (path, line_of(texts[path], "model_l0_conv1_bias[8]"))
    assert finding.message.startswith("bias model_l0_conv1_bias is an array of int8_t (8-bit integers")
    assert "arm_convolve_wrapper_s8 reads bias_data as int32_t" in finding.message
    assert finding.related and finding.related[0].path.name == "model.c"
    repaired = fixed(ctx, finding, texts)
    assert "const int32_t model_l0_conv1_bias[8]" in repaired[path]
    assert check(ctx_for(project, repaired), Code.UNSCALED_BIAS) == []


def test_int8_bias_declared_with_another_array_is_not_retyped_with_it(project: GeneratedProject) -> None:
    """The declaration's type is shared: a quick fix changing it would change the other array too."""
    path, texts = edited(
        project,
        "model_data.c",
        lambda t: t.replace(
            "const int32_t model_l0_conv1_bias[8]",
            "const int8_t model_spare[2] = {1, 2}, model_l0_conv1_bias[8]",
        ),
    )
    (finding,) = check(ctx_for(project, texts), Code.UNSCALED_BIAS)
    assert finding.path == path and finding.data["array"] == "model_l0_conv1_bias" and finding.fixes == ()
    assert finding.message.endswith(
        "; it is declared together with other arrays - split the declaration to give it int32_t"
    )


# ---------------------------------------------------------------------------------- seeded: alignment


def test_alignment_removed_from_weights(project: GeneratedProject) -> None:
    attr = "model_l0_conv1_weights[80] __attribute__((aligned(16)))"
    path, texts = edited(project, "model_data.c", lambda t: t.replace(attr, "model_l0_conv1_weights[80]"))
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.MISALIGNED_ARRAY)
    assert (finding.path, finding.span.line) == (path, line_of(texts[path], "model_l0_conv1_weights[80]"))
    assert finding.message.startswith(
        "model_l0_conv1_weights (int8_t[80], 80 bytes) has no alignment attribute"
    )
    assert finding.message == (
        "model_l0_conv1_weights (int8_t[80], 80 bytes) has no alignment attribute (so only its element's"
        " 1-byte alignment), but must be aligned to 16 bytes: Fixpoint generated this file, and the project's"
        " alignment policy holds it (fixpoint.toml: alignment = 16, the default); it is passed as filter_data"
        " to arm_convolve_wrapper_s8"
    )
    assert finding.effective_severity is Severity.WARNING
    repaired = fixed(ctx, finding, texts)
    assert attr in repaired[path]
    assert check(ctx_for(project, repaired), Code.MISALIGNED_ARRAY) == []


def test_a_smaller_alignment_value_is_raised_in_place(project: GeneratedProject) -> None:
    attr = "model_l3_pwconv_bias[8] __attribute__((aligned(16)))"
    path, texts = edited(project, "model_data.c", lambda t: t.replace(attr, attr.replace("16", "4")))
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.MISALIGNED_ARRAY)
    assert "is aligned to only 4 bytes" in finding.message and "passed as bias_data" in finding.message
    assert fixed(ctx, finding, texts)[path] == path.read_text()


def test_an_unpadded_bias_is_padded_with_zeros(project: GeneratedProject) -> None:
    def unpad(text: str) -> str:
        return text.replace("model_l14_fc_bias[12]", "model_l14_fc_bias[10]").replace(
            ", 0, 0,\n};", ",\n};", 1
        )

    path, texts = edited(project, "model_data.c", unpad)
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.MISALIGNED_ARRAY)
    assert finding.span.line == line_of(texts[path], "model_l14_fc_bias[10]")
    assert finding.message.startswith(
        "model_l14_fc_bias (int32_t[10], 40 bytes) is not a multiple of 16 bytes"
    )
    assert "pad it to 48 bytes (12 elements)" in finding.message
    repaired = fixed(ctx, finding, texts)
    assert "model_l14_fc_bias[12]" in repaired[path]
    assert check(ctx_for(project, repaired), Code.MISALIGNED_ARRAY) == []
    assert check(ctx_for(project, repaired), Code.UNSCALED_BIAS) == []


# -------------------------------------------------------------------------------- seeded: zero points


def test_input_offset_with_the_zero_points_sign(project: GeneratedProject) -> None:
    path, texts = edited(
        project, "model.c", lambda t: t.replace(".input_offset = -11,", ".input_offset = 11,")
    )
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.WRONG_ZERO_POINT)
    assert (finding.path, finding.span.line) == (path, line_of(texts[path], ".input_offset = 11,"))
    assert finding.message == (
        "input_offset of l0_conv1_params is 11, but layer 'conv1' reads 'x' with zero point 11"
        " (residual.params.json): it must be the negated zero point, -11 - the sign is flipped"
    )
    assert finding.related[0].path.name == "residual.params.json"
    assert check(ctx_for(project, fixed(ctx, finding, texts)), Code.WRONG_ZERO_POINT) == []


def test_output_zero_point_128(project: GeneratedProject) -> None:
    path, texts = edited(
        project, "model.c", lambda t: t.replace(".output_offset = 29,", ".output_offset = 128,")
    )
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.WRONG_ZERO_POINT)
    assert finding.span.line == line_of(texts[path], ".output_offset = 128,")
    assert (
        "output_offset of l3_pwconv_params is 128, but layer 'pwconv' writes 'pw' with zero point 29"
        in finding.message
    )
    assert "128 is the uint8 habit" in finding.message
    assert check(ctx_for(project, fixed(ctx, finding, texts)), Code.WRONG_ZERO_POINT) == []


def test_positional_offsets_of_elementwise_add_and_mul(project: GeneratedProject) -> None:
    def change(text: str) -> str:
        text = text.replace("-29, 1858112339, -2,", "29, 1858112339, -2,")
        return text.replace(
            "arm_elementwise_mul_s8(t_relu2, t_gate, 128, -57,",
            "arm_elementwise_mul_s8(t_relu2, t_gate, 128, 57,",
        )

    path, texts = edited(project, "model.c", change)
    ctx = ctx_for(project, texts)
    first, second = check(ctx, Code.WRONG_ZERO_POINT)
    assert first.message.startswith("input_1_offset of arm_elementwise_add_s8 is 29, but layer 'residual'")
    assert second.message.startswith(
        "input_2_offset of arm_elementwise_mul_s8 is 57, but layer 'gating' reads 'gate'"
    )
    assert second.span.line == line_of(texts[path], "arm_elementwise_mul_s8(")
    assert check(ctx_for(project, fixed(ctx, second, fixed(ctx, first, texts))), Code.WRONG_ZERO_POINT) == []


def test_weights_are_symmetric(project: GeneratedProject) -> None:
    _, texts = edited(project, "model.c", lambda t: t.replace(".filter_offset = 0,", ".filter_offset = 3,"))
    ctx = ctx_for(project, texts)
    (finding,) = check(ctx, Code.WRONG_ZERO_POINT)
    assert finding.message.startswith("filter_offset of l14_fc_params is 3, but int8 weights are symmetric")
    assert check(ctx_for(project, fixed(ctx, finding, texts)), Code.WRONG_ZERO_POINT) == []


# --------------------------------------------------------------------------- hand-written firmware

USER_C = """\
/* app/cnn.c: conv1 by hand, the way the articles write it */
#include "arm_nnfunctions.h"

#define CONV1_OUT_CH 8
#define CONV1_WT_SIZE (CONV1_OUT_CH * 3 * 3 * 1)

static const q7_t conv1_wt[CONV1_WT_SIZE] = {WEIGHTS};
static const q7_t conv1_bias[CONV1_OUT_CH] = {0, 1, 2, 2, -1, 0, 0, 2};
static int32_t conv1_mult[CONV1_OUT_CH] __ALIGNED(16) = {MULT};
static int32_t conv1_shift[CONV1_OUT_CH] __ALIGNED(16) = {SHIFT};
static q7_t arena[1152 + 144] __ALIGNED(16);

void run_conv1(void)
{
    cmsis_nn_context ctx = {.buf = NULL, .size = 0};
    cmsis_nn_conv_params conv_params;
    cmsis_nn_per_channel_quant_params quant = {.multiplier = conv1_mult, .shift = conv1_shift};
    conv_params.input_offset = 128;
    conv_params.output_offset = 128;
    arm_convolve_wrapper_s8(&ctx, &conv_params, &quant, &in_dims, &arena[1152], &f_dims, conv1_wt, &b_dims,
                            (const int32_t *)conv1_bias, &o_dims, arena);
}
"""


def user_project(project: GeneratedProject, root: Path) -> tuple[Path, Project]:
    """A firmware tree with the JSON and model but hand-written C using conv1's real parameters."""
    data = scan_c(project.source("model_data.c").read_text())
    values = {}
    for key, name, count in (("WEIGHTS", "weights", 72), ("MULT", "multiplier", 8), ("SHIFT", "shift", 8)):
        array = data.array(f"model_l0_conv1_{name}")
        assert array is not None
        values[key] = ", ".join(str(v) for v in (data.values(array) or [])[:count])
    text = USER_C
    for key, value in values.items():
        text = text.replace("{" + key + "}", "{" + value + "}")
    for source in (project.model, project.params):
        shutil.copyfile(source, root / source.name)
    (root / "app").mkdir()
    (root / "app" / "cnn.c").write_text(text)
    return (root / "app" / "cnn.c").resolve(), Project(
        model=root / project.model.name, params=root / project.params.name
    )


def test_hand_written_conv_against_the_json(project: GeneratedProject, tmp_path: Path) -> None:
    path, settings = user_project(project, tmp_path)
    text = path.read_text()
    ctx = context(tmp_path, settings, cache=CACHE)

    (bias,) = check(ctx, Code.UNSCALED_BIAS)
    assert (bias.path, bias.span.line) == (path, line_of(text, "conv1_bias[CONV1_OUT_CH]"))
    assert "bias conv1_bias is an array of q7_t (8-bit integers" in bias.message
    assert "the cast at the call hides this from the compiler" in bias.message
    repaired = fixed(ctx, bias, {})
    assert "static const int32_t conv1_bias[CONV1_OUT_CH] = {36, 692, 1939" in repaired[path]
    assert check(context(tmp_path, settings, repaired, CACHE), Code.UNSCALED_BIAS) == []

    offsets = check(ctx, Code.WRONG_ZERO_POINT)
    assert [(f.span.line, f.message.split(":")[0]) for f in offsets] == [
        (
            line_of(text, "input_offset = 128"),
            "input_offset of conv_params is 128, but layer 'conv1' reads 'x' with zero point 11"
            " (residual.params.json)",
        ),
        (
            line_of(text, "output_offset = 128"),
            "output_offset of conv_params is 128, but layer 'conv1' writes 'relu1' with zero point -128"
            " (residual.params.json)",
        ),
    ]
    assert "must be the negated zero point, -11" in offsets[0].message
    assert "128 is the uint8 habit" in offsets[1].message

    # int8 weights need no alignment (CMSIS-NN reads them through memcpy, VLDRB); the int8 bias cast to
    # int32_t * does: no core is configured here, and some load of it faults on every Cortex-M core
    (misaligned,) = check(ctx, Code.MISALIGNED_ARRAY)
    assert (misaligned.data["array"], misaligned.effective_severity) == ("conv1_bias", Severity.WARNING)
    assert misaligned.message.startswith(
        "conv1_bias (q7_t[8], 8 bytes) has no alignment attribute (so only its element's 1-byte alignment),"
        " but it is passed as bias_data to arm_convolve_wrapper_s8, which reads it as int32_t"
    )
    assert "which needs 4-byte alignment: no core is configured" in misaligned.message


HAND_NO_JSON = """\
#include "arm_nnfunctions.h"
static const q7_t fc_bias[16] __attribute__((aligned(16))) = {1, 2};
static const float fc2_bias[4] __attribute__((aligned(16))) = {0.5f, 1, 2, 3};
static const int32_t dw16_bias[4] __attribute__((aligned(16))) = {1, 2, 3, 4};
static const int64_t conv16_bias64[2] __attribute__((aligned(16))) = {1, 2};
static const int32_t conv16_bias32[4] __attribute__((aligned(16))) = {1, 2, 3, 4};
static const cmsis_nn_bias_data b64 = {.data = conv16_bias64, .is_int32_bias = false};
static const cmsis_nn_bias_data b32 = {.data = conv16_bias32, .is_int32_bias = true};
static const cmsis_nn_bias_data b32_wrong = {.data = conv16_bias32, .is_int32_bias = false};
static const cmsis_nn_fc_params fc_params = {-128, 0, 128, {-128, 127}};
static const cmsis_nn_conv_params c16_params = {.input_offset = 5, .output_offset = 0};

void run(void)
{
    cmsis_nn_conv_params p;
    p.input_offset = -128;
    p.output_offset = 200;
    arm_convolve_s8(&ctx, &p, &q, &id, in, &fd, w, &bd, NULL, &ud, &od, out);
    arm_fully_connected_s8(&ctx, &fc_params, &q, &id, in, &fd, w, &bd, fc_bias, &od, out);
    arm_fully_connected_s8(&ctx, &fc_params, &q, &id, in, &fd, w, &bd, fc2_bias, &od, out);
    arm_depthwise_conv_s16(&ctx, &dw, &q, &id, in16, &fd, w, &bd, dw16_bias, &od, out16);
    arm_convolve_wrapper_s16(&ctx, &c16_params, &q, &id, in16, &fd, w, &bd, &b64, &od, out16);
    arm_convolve_wrapper_s16(&ctx, &c16_params, &q, &id, in16, &fd, w, &bd, &b32, &od, out16);
    arm_convolve_wrapper_s16(&ctx, &c16_params, &q, &id, in16, &fd, w, &bd, &b32_wrong, &od, out16);
    arm_elementwise_add_s8(a, b, 129, m, s, -12, m, s, 20, out, -129, m, s, -128, 127, n);
}
"""


def test_hand_written_without_a_json(tmp_path: Path) -> None:
    path = tmp_path / "main.c"
    path.write_text(HAND_NO_JSON)
    ctx = context(tmp_path, Project(), cache=CACHE)

    bias = {f.data["array"]: f for f in check(ctx, Code.UNSCALED_BIAS)}
    assert sorted(bias) == ["conv16_bias32", "dw16_bias", "fc2_bias", "fc_bias"]
    assert "q7_t (8-bit integers: the `q7_t *bias` habit" in bias["fc_bias"].message
    assert "float (floats: a float bias copied unscaled)" in bias["fc2_bias"].message
    assert "arm_depthwise_conv_s16 reads bias_data as int64_t" in bias["dw16_bias"].message
    assert "adds to its 64-bit accumulator" in bias["dw16_bias"].message
    assert bias["conv16_bias32"].related[0].message == "passed as bias_data to arm_convolve_wrapper_s16 here"
    assert all(not f.fixes for f in bias.values())  # no JSON: nothing to rescale from

    offsets = check(ctx, Code.WRONG_ZERO_POINT)
    assert [(f.span.line, f.data["offset"], f.data["value"], f.data["expected"]) for f in offsets] == [
        (9, "input_offset", -128, 0), (9, "output_offset", 128, 0), (10, "input_offset", 5, 0),
        (15, "input_offset", -128, 0), (16, "output_offset", 200, None), (24, "input_1_offset", 129, None),
        (24, "out_offset", -129, None),
    ]  # fmt: skip
    positional, habit = offsets[0], offsets[1]
    assert habit.message == (
        "output_offset of fc_params is 128, outside [-128, 127] for an s8 kernel: it is the int8 zero point"
        " itself; 128 as a zero point is the uint8 habit (an int8 zero point is in [-128, 127])"
    )
    assert habit.fixes[0].edits[0].new_text == "0" and not habit.fixes[0].preferred
    assert "so the zero point would be 128; 128 as a zero point is the uint8 habit" in positional.message
    assert "s16 kernels take symmetric int16 activations" in offsets[2].message
    assert offsets[3].message.startswith("input_offset of p is -128")
    assert not offsets[4].fixes
    assert offsets[5].message.startswith(
        "input_1_offset of arm_elementwise_add_s8 is 129, outside [-127, 128]"
    )


def test_what_misaligned_array_holds_to_the_kernels_alignment(tmp_path: Path) -> None:
    text = """\
#include "arm_nnfunctions.h"
char uart_buffer[100];
float weights_f32[10];
uint8_t rx_buffer[64];
static int8_t conv_wt[72] __attribute__((aligned(16))) = {1, 2, 3};
static int8_t sized_weights[20] __attribute__((aligned(16)));
static int8_t unknown_weights[8] __attribute__((aligned(BOARD_ALIGN)));
static int32_t table[4];
static int32_t mults[3] __attribute__((aligned(16)));
static int8_t input_q[10];
static const cmsis_nn_per_channel_quant_params quant = {.multiplier = mults, .shift = shifts};

void run(void)
{
    int8_t local_buffer[30];
    for (int i = 0; i < sizeof(sized_weights); i++) {}
    arm_relu_q7(input_q, 10);
    arm_convolve_s8(&ctx, &p, &quant, &id, input_q, &fd, conv_wt, &bd, b, &ud, &od, out);
}
"""
    (tmp_path / "main.c").write_text(text)
    vendored = tmp_path / "CMSIS-NN" / "Tests" / "weights.h"
    vendored.parent.mkdir(parents=True)
    vendored.write_text("const int8_t conv_weights[3] = {1, 2, 3};\n")
    # outside the project's policy only what a kernel's loads need counts: nothing of these but a hint
    (hint,) = check(context(tmp_path, Project(), cache=CACHE), Code.MISALIGNED_ARRAY)
    assert (hint.data["array"], hint.effective_severity) == ("rx_buffer", Severity.HINT)
    assert (
        "its name says it is a kernel's buffer array (no kernel call in the workspace passes it)"
        in hint.message
    )

    opted_in = Project(checks=ChecksSettings(aligned=("main.c",)))  # [checks] aligned = ["main.c"]
    findings = check(context(tmp_path, opted_in, cache=CACHE), Code.MISALIGNED_ARRAY)
    assert all(f.effective_severity is Severity.WARNING for f in findings)
    assert all(
        '[checks] aligned = "main.c" puts it under the project\'s alignment policy (alignment = 16,'
        " the default)" in f.message
        for f in findings
    )
    got = {(f.data["array"], "padded" in f.data) for f in findings}
    assert got == {
        ("rx_buffer", False),
        ("conv_wt", True),
        ("sized_weights", True),
        ("unknown_weights", True),  # its alignment is a macro no file defines: only its size is judged
        ("mults", True),
        ("input_q", False),
        ("input_q", True),
    }
    by = {(f.data["array"], "padded" in f.data): f for f in findings}
    assert "its name says it is a kernel's buffer array" in by[("rx_buffer", False)].message
    assert "must be aligned to 16 bytes" in by[("rx_buffer", False)].message
    assert "passed as filter_data to arm_convolve_s8" in by[("conv_wt", True)].message
    assert (
        "the kernels read it through quant.multiplier, passed to arm_convolve_s8"
        in by[("mults", True)].message
    )
    assert "passed as argument 1 to arm_relu_q7" in by[("input_q", False)].message
    sized = by[("sized_weights", True)]
    assert not sized.fixes and "the code takes sizeof(sized_weights)" in sized.message
    padding = by[("conv_wt", True)].fixes[0]
    repaired = apply_edits(text, padding.edits)
    assert "conv_wt[80] __attribute__((aligned(16))) = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}" in repaired
