"""misaligned-array on real trees and real project files: a warning or error only where the configured
core's loads need the alignment, the project's 16-byte policy only for the generated folder and what
fixpoint.toml opts in, and each message naming its evidence (the kernel, the load, the core and where the
core was read). CMSIS-NN's own repository, whose tests run its arrays unaligned, gets no warning."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fixpoint_server.commands.check import check_path
from fixpoint_server.findings import Code, Finding, Severity
from fixpoint_server.rules import misaligned_array

from quantcore.project import load_project
from tests import needs
from tests.server.fixtures import apply_edits, context

REPO = Path(__file__).resolve().parents[2]

# An int8 array cast to int32_t * as a kernel's bias: the one access here that needs alignment (4 bytes).
# The int8 weights and activations need none (CMSIS-NN reads them through memcpy and VLDRB).
FIRMWARE = """\
#include "arm_nnfunctions.h"
static const int8_t fc_weights[160] = {1, -2, 3};
static const int8_t raw_bias[64] = {1, 0, 0, 0};
static const int32_t good_bias[16] = {1, 2};
static int8_t scratch[256];

int head(const int8_t *in, int8_t *out)
{
    const cmsis_nn_context ctx = {.buf = scratch, .size = sizeof(scratch)};
    return arm_fully_connected_s8(&ctx, &fc, &q, &id, in, &fd, fc_weights, &bd, (const int32_t *)raw_bias,
                                  &od, out);
}

int dense(const int8_t *in, int8_t *out)
{
    return arm_fully_connected_s8(&ctx2, &fc, &q, &id, in, &fd, fc_weights, &bd, good_bias, &od, out);
}
"""


def tree(root: Path, toml: str | None, makefile: str | None = None, source: str = FIRMWARE) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "head.c").write_text(source)
    if toml is not None:
        (root / "fixpoint.toml").write_text(toml)
    if makefile is not None:
        (root / "Makefile").write_text(makefile)
    return root


def misaligned(root: Path) -> list[Finding]:
    """The rule's findings over `root` with its real fixpoint.toml (none: the defaults)."""
    project_file = root / "fixpoint.toml"
    project = None
    if project_file.exists():
        project, problems = load_project(project_file)
        assert problems == []
    return [f for f in misaligned_array.check(context(root, project)) if f.code is Code.MISALIGNED_ARRAY]


def by_array(findings: list[Finding]) -> dict[str, Finding]:
    return {f.data["array"]: f for f in findings}


HEAD = (
    "raw_bias (int8_t[64], 64 bytes) has no alignment attribute (so only its element's 1-byte alignment), but"
    " it is passed as bias_data to arm_fully_connected_s8, which reads it as int32_t (arm_fully_connected_s8"
    " (*bias++ on DSP/C, vldrwq_s32(bias) with MVE)), which needs 4-byte alignment: "
)


@pytest.mark.parametrize(
    ("toml", "makefile", "severity", "effect"),
    [
        (
            'target = "qemu-m4"\n',
            None,
            Severity.WARNING,
            'on Cortex-M4 (fixpoint.toml: target = "qemu-m4") a single LDR tolerates an unaligned address,'
            " but the compiler takes any int32_t * to be 4-byte aligned and may pair its loads into LDRD/LDM,"
            " which fault (UsageFault UNALIGNED) off a 4-byte boundary",
        ),
        (
            'target = "board"\n[board]\ncore = "cortex-m0"\n',
            None,
            Severity.ERROR,
            'Cortex-M0 (fixpoint.toml: [board] core = "cortex-m0") has no unaligned access at all'
            " (ARMv6-M/ARMv8-M Baseline): every load of it off a 4-byte boundary is a HardFault",
        ),
        (
            'target = "qemu-m55"\n',
            None,
            Severity.WARNING,
            'on Cortex-M55 (fixpoint.toml: target = "qemu-m55") CMSIS-NN\'s MVE path loads it with VLDRW,'
            " which faults (UsageFault UNALIGNED) off a 4-byte boundary",
        ),
        (
            None,
            "CFLAGS := -mcpu=cortex-m0plus -mthumb -O1\n",
            Severity.ERROR,
            "Cortex-M0+ (Makefile:1: -mcpu=cortex-m0plus) has no unaligned access at all",
        ),
        (
            'target = "host"\n',
            None,
            Severity.HINT,
            'the target is the host (fixpoint.toml: target = "host"), which tolerates unaligned loads',
        ),
        (
            None,
            None,
            Severity.WARNING,
            "no core is configured (fixpoint.toml's target or [board] core, or -mcpu= in a build file), and"
            " off a 4-byte boundary every Cortex-M core has a load of it that faults",
        ),
    ],
    ids=["m4", "m0-board", "m55", "m0plus-makefile", "host", "unknown"],
)
def test_an_int8_bias_cast_to_int32_by_core(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    toml: str | None,
    makefile: str | None,
    severity: Severity,
    effect: str,
) -> None:
    found = by_array(misaligned(tree(tmp_path, toml, makefile)))
    bias = found.pop("raw_bias")
    assert bias.message.startswith(HEAD + effect)
    assert bias.effective_severity is severity
    assert bias.data["required"] == 4 and bias.data["alignment"] == 1
    # the int8 weights and the int32 bias need nothing more; the scratch buffer only where the kernel's
    # MVE path reads it (a hint when no core says whether that path is built)
    scratch = {"m55": Severity.WARNING, "unknown": Severity.HINT}.get(request.node.callspec.id)
    assert {k: f.effective_severity for k, f in found.items()} == ({"scratch": scratch} if scratch else {})


def test_the_scratch_buffer_matters_where_the_kernel_casts_it(tmp_path: Path) -> None:
    """arm_fully_connected_s8 reads ctx->buf as int32_t kernel sums with MVE only; arm_convolve_s8 casts
    it to int16_t * on every path: LDRH tolerates that on Cortex-M4 (a hint), not on Cortex-M0."""
    tree(tmp_path / "m55", 'target = "qemu-m55"\n')
    m55 = by_array(misaligned(tmp_path / "m55"))["scratch"]
    assert m55.effective_severity is Severity.WARNING
    assert (
        "the kernels read it through ctx.buf, passed to arm_fully_connected_s8, which reads it as int32_t"
        in (m55.message)
    )
    assert "arm_fully_connected_s8.c: kernel_sum = (const int32_t *)ctx->buf" in m55.message

    conv = FIRMWARE.replace("arm_fully_connected_s8(&ctx,", "arm_convolve_s8(&ctx,")
    m4 = by_array(misaligned(tree(tmp_path / "m4", 'target = "qemu-m4"\n', source=conv)))["scratch"]
    assert m4.effective_severity is Severity.HINT
    assert "reads it as int16_t (arm_convolve_s8.c: int16_t *buffer_a = (int16_t *)ctx->buf)" in m4.message
    assert "LDRH tolerates an unaligned address" in m4.message
    m0 = by_array(
        misaligned(tree(tmp_path / "m0", 'target = "board"\n[board]\ncore = "cortex-m0"\n', source=conv))
    )
    assert m0["scratch"].effective_severity is Severity.ERROR


def test_the_quick_fix_aligns_to_what_the_load_needs(tmp_path: Path) -> None:
    root = tree(tmp_path, 'target = "qemu-m4"\n')
    bias = by_array(misaligned(root))["raw_bias"]
    (fix,) = bias.fixes
    assert fix.title == "Align raw_bias to 4 bytes" and fix.preferred
    path = root / "src" / "head.c"
    path.write_text(apply_edits(path.read_text(), fix.edits))
    assert "raw_bias[64] __attribute__((aligned(4))) = {1, 0, 0, 0};" in path.read_text()
    assert misaligned(root) == []


def test_the_policy_holds_what_fixpoint_toml_opts_in(tmp_path: Path) -> None:
    toml = 'target = "qemu-m4"\nalignment = 32\n[checks]\naligned = ["src/nn/**"]\n'
    root = tree(tmp_path, toml)
    (root / "src" / "nn").mkdir()
    (root / "src" / "nn" / "tables.c").write_text("const int8_t conv_weights[40] = {1};\n")
    (root / "src" / "uart.c").write_text("const int8_t conv2_weights[40] = {1};\n")
    findings = [f for f in misaligned(root) if f.data["array"] == "conv_weights"]
    assert [f.message for f in findings] == [
        "conv_weights (int8_t[40], 40 bytes) has no alignment attribute (so only its element's 1-byte"
        ' alignment), but must be aligned to 32 bytes: fixpoint.toml\'s [checks] aligned = "src/nn/**" puts'
        " it under the project's alignment policy (alignment = 32); its name says it is a kernel's weight"
        " array (no kernel call in the workspace passes it)",
        "conv_weights (int8_t[40], 40 bytes) is not a multiple of 32 bytes: fixpoint.toml's [checks]"
        ' aligned = "src/nn/**" puts it under the project\'s alignment policy (alignment = 32); its name says'
        " it is a kernel's weight array (no kernel call in the workspace passes it); pad it to 64 bytes"
        " (64 elements) so the next array starts aligned",
    ]
    assert all(f.effective_severity is Severity.WARNING for f in findings)
    assert "conv2_weights" not in by_array(misaligned(root))  # outside the globs: int8 weights need nothing


def test_a_bad_aligned_setting_is_a_problem_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "fixpoint.toml").write_text('target = "qemu-m4"\n[checks]\naligned = "src/**"\n')
    project, problems = load_project(tmp_path / "fixpoint.toml")
    assert [(p.key, p.line, p.message) for p in problems] == [
        ("checks.aligned", 3, "expected a list of strings, got 'src/**'")
    ]
    assert project.checks.aligned == ()


# ------------------------------------------------------------------------------------ real trees


def cmsis_nn_repo() -> Path:
    path = Path(os.environ.get("FIXPOINT_CMSIS_NN") or Path.home() / ".cache" / "fixpoint" / "cmsis-nn")
    if not (path / "Include" / "arm_nnfunctions.h").is_file():
        needs.absent(f"no CMSIS-NN checkout at {path} (set FIXPOINT_CMSIS_NN)")
    return path


def test_cmsis_nn_itself_gets_no_misaligned_warning() -> None:
    """CMSIS-NN's unit tests pass bit-exact with their test-data arrays unaligned: none of them is a
    warning (the previous rule gave 1,708)."""
    findings, _ = check_path(cmsis_nn_repo())
    loud = [
        f for f in findings if f.code is Code.MISALIGNED_ARRAY and f.effective_severity is not Severity.HINT
    ]
    assert loud == []


def test_the_broken_example_keeps_its_seeded_misaligned_buffer(tmp_path: Path) -> None:
    """As shipped, the broken example holds its hand-written sources to the project's policy
    ([checks] aligned), so the seeded scratch buffer is the two warnings README lists; without that
    opt-in no kernel call passes it, and it is a hint."""
    broken = shutil.copytree(REPO / "examples" / "broken", tmp_path / "broken")
    shutil.copytree(REPO / "examples" / "fashion", tmp_path / "fashion")  # the model the JSON names

    def buffers() -> list[Finding]:
        findings, _ = check_path(broken)
        return [f for f in findings if f.code is Code.MISALIGNED_ARRAY and f.path.name == "buffers.c"]

    policy = buffers()
    assert [f.effective_severity for f in policy] == [Severity.WARNING, Severity.WARNING]
    assert all(
        '[checks] aligned = "src/*.c" puts it under the project\'s alignment policy' in f.message
        for f in policy
    )
    assert json.dumps(sorted(f.data.get("padded", 0) for f in policy)) == "[0, 304]"
    toml = broken / "fixpoint.toml"
    shipped = toml.read_text()
    assert "\n[checks]\n" in shipped
    toml.write_text(shipped[: shipped.index("\n[checks]\n")] + "\n")
    (hint,) = buffers()
    assert hint.effective_severity is Severity.HINT and hint.data["array"] == "head_scratch_buffer"
