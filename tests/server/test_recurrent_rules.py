"""The editor's rules on the recurrent kernels (arm_lstm_unidirectional_s8/_s16, arm_svdf_s8,
arm_svdf_state_s16_s8): a seeded mistake per rule in real C, JSON and Makefile text, found with its
exact message and range, and the corrected file clean; the C Fixpoint generates for TFLM's recurrent
models (keyword_scrambled's SVDFs, mnist_lstm's and micro_speech_lstm's LSTMs) clean on every target;
the CMSIS-NN sources missing-cmsis-nn asks for are what the kernels link against.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fixpoint_server.commands.check import check_path
from fixpoint_server.findings import Code, Finding, Severity, Span
from fixpoint_server.rules.missing_cmsis_nn import KERNEL_SOURCES

from quantcore import cli
from quantcore.quantize.params_json import dump
from tests import tflm
from tests.server.fixtures import apply_edits

MAKEFILE = """\
CMSIS_NN ?= third_party/CMSIS-NN
CFLAGS = -mcpu=cortex-m0plus -mthumb -O2 -I$(CMSIS_NN)/Include
LDLIBS = -lcmsis-nn
SRCS = src/kws.c

firmware.elf: $(SRCS:.c=.o)
\t$(CC) $^ -o $@ $(LDLIBS)
"""

# Hand-written streaming keyword spotting: an SVDF and an LSTM, with the usual mistakes seeded - arrays
# declared as bytes and cast where the kernels read int16/int32 (the state, a context's buffer, an LSTM
# work buffer, a gate's effective bias), and 128 written as a zero point (the uint8 habit).
SEEDED = """\
#include "arm_nnfunctions.h"

static int8_t svdf_state[2048];
static const int8_t feature_weights[64 * 40] = {1};
static const int16_t time_weights[64 * 8] = {1};
static const int32_t unit_bias[64] = {1};
static int32_t filter_sums[64];
static int8_t unit_sums[256];
static const cmsis_nn_svdf_params svdf = {
    .rank = 1,
    .input_offset = 128,
    .output_offset = -128,
    .input_activation = {-32768, 32767},
    .output_activation = {-128, 127},
};

int kws_svdf(const int8_t *in, int8_t *out)
{
    const cmsis_nn_context sums_a = {.buf = filter_sums, .size = sizeof(filter_sums)};
    const cmsis_nn_context sums_b = {.buf = unit_sums, .size = sizeof(unit_sums)};
    return arm_svdf_state_s16_s8(&sums_a, &sums_b, &svdf, &in_q, &out_q, &in_dims, in, &state_dims,
                                 (int16_t *)svdf_state, &wf_dims, feature_weights, &wt_dims, time_weights,
                                 &bias_dims, unit_bias, &out_dims, out);
}

static int8_t hidden[20];
static int16_t cell[20];
static int8_t temp_a[40];
static int16_t temp_b[20];
static const int8_t forget_x[20 * 28] = {1};
static const int8_t forget_x_bias[80] = {1};
static const cmsis_nn_lstm_params lstm = {
    .time_major = 0,
    .batch_size = 1,
    .time_steps = 28,
    .input_size = 28,
    .hidden_size = 20,
    .input_offset = 128,
    .output_offset = 128,
    .forget_gate = {.input_weights = forget_x, .input_effective_bias = (const int32_t *)forget_x_bias},
};

int kws_lstm(const int8_t *in, int8_t *out)
{
    cmsis_nn_lstm_context buffers = {.temp1 = temp_a, .temp2 = temp_b, .cell_state = cell,
                                     .hidden_state = hidden};
    return arm_lstm_unidirectional_s8(in, out, &lstm, &buffers);
}
"""
CORRECTED = (
    SEEDED.replace("static int8_t svdf_state[2048];", "static int16_t svdf_state[1024];")
    .replace("(int16_t *)svdf_state", "svdf_state")
    .replace("static int8_t unit_sums[256];", "static int32_t unit_sums[64];")
    .replace("static int8_t temp_a[40];", "static int16_t temp_a[20];")
    .replace("static const int8_t forget_x_bias[80] = {1};", "static const int32_t forget_x_bias[20] = {1};")
    .replace("(const int32_t *)forget_x_bias", "forget_x_bias")
    .replace(".rank = 1,\n    .input_offset = 128,", ".rank = 1,\n    .input_offset = -128,")
    .replace(".output_offset = 128,\n    .forget", ".output_offset = -128,\n    .forget")
)  # fmt: skip
M0 = (
    "Makefile:2: -mcpu=cortex-m0plus) has no unaligned access at all (ARMv6-M/ARMv8-M Baseline): every load"
    " of it off a"
)


def _tree(root: Path, source: str, makefile: str = MAKEFILE) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "kws.c").write_text(source)
    (root / "Makefile").write_text(makefile)
    (root / "fixpoint.toml").write_text("")
    return root


def _span(text: str, needle: str, occurrence: int = 0) -> Span:
    """The span of the `occurrence`-th `needle` in `text`."""
    at = [m.start() for m in re.finditer(re.escape(needle), text)][occurrence]
    line = text.count("\n", 0, at)
    column = at - (text.rfind("\n", 0, at) + 1)
    return Span(line, column, line, column + len(needle))


def _value_span(text: str, key: str, value: str, occurrence: int = 0) -> Span:
    """The span of `value` written as `key = value` (its `occurrence`-th time)."""
    whole = _span(text, f"{key} = {value}", occurrence)
    start = whole.column + len(key) + 3
    return Span(whole.line, start, whole.line, start + len(value))


def _of(findings: list[Finding], code: Code) -> list[Finding]:
    return sorted((f for f in findings if f.code is code), key=Finding.sort_key)


def test_misaligned_recurrent_buffers_are_errors_on_cortex_m0(tmp_path: Path) -> None:
    root = _tree(tmp_path / "fw", SEEDED)
    found = _of(check_path(root)[0], Code.MISALIGNED_ARRAY)
    assert [(f.data["array"], f.span, f.severity, f.data["required"]) for f in found] == [
        ("svdf_state", _span(SEEDED, "svdf_state"), Severity.ERROR, 2),
        ("unit_sums", _span(SEEDED, "unit_sums"), Severity.ERROR, 4),
        ("temp_a", _span(SEEDED, "temp_a"), Severity.ERROR, 2),
        ("forget_x_bias", _span(SEEDED, "forget_x_bias"), Severity.ERROR, 4),
    ]
    messages = {f.data["array"]: f.message for f in found}
    assert messages["svdf_state"] == (
        "svdf_state (int8_t[2048], 2048 bytes) has no alignment attribute (so only its element's 1-byte"
        " alignment), but it is passed as state_data to arm_svdf_state_s16_s8, which reads it as int16_t"
        " (arm_svdf_state_s16_s8.c: the time weights and the state are int16_t, multiplied as *v1 * *v2 (as"
        " arm_nn_read_q15x2_ia pairs with DSP)), which needs 2-byte alignment: Cortex-M0+ (" + M0 + " 2-byte"
        " boundary is a HardFault"
    )
    assert messages["unit_sums"].startswith(
        "unit_sums (int8_t[256], 256 bytes) has no alignment attribute (so only its element's 1-byte"
        " alignment), but the kernels read it through sums_b.buf, passed to arm_svdf_state_s16_s8, which"
        " reads it as int32_t (arm_svdf_s8.c and arm_svdf_state_s16_s8.c: int32_t *buffer_a ="
    )
    assert messages["temp_a"].startswith(
        "temp_a (int8_t[40], 40 bytes) has no alignment attribute (so only its element's 1-byte alignment),"
        " but the kernels read it through buffers.temp1, passed to arm_lstm_unidirectional_s8, which reads it"
        " as int16_t (arm_nn_lstm_step_s8.c / _s16.c: the gates' outputs, int16_t *forget_gate ="
        " buffers->temp1), which needs 2-byte alignment"
    )
    assert messages["forget_x_bias"].startswith(
        "forget_x_bias (int8_t[80], 80 bytes) has no alignment attribute (so only its element's 1-byte"
        " alignment), but the kernels read it through lstm.forget_gate.input_effective_bias, passed to"
        " arm_lstm_unidirectional_s8, which reads it as int32_t (arm_nn_vec_mat_mul_result_acc_s8_s16.c:"
        " *effective_bias_ptr++ (const int32_t *)), which needs 4-byte alignment"
    )
    fixed = apply_edits(SEEDED, [e for f in found for e in f.fixes[0].edits])
    assert "static int8_t svdf_state[2048] __attribute__((aligned(2)));" in fixed
    assert "static const int8_t forget_x_bias[80] __attribute__((aligned(4))) = {1};" in fixed


def test_the_int8_arrays_of_the_recurrent_kernels_need_no_alignment(tmp_path: Path) -> None:
    """hidden (int8 hidden state of the s8 LSTM), the int8 weights and input: byte loads, no finding."""
    root = _tree(tmp_path / "fw", SEEDED)
    flagged = {f.data["array"] for f in _of(check_path(root)[0], Code.MISALIGNED_ARRAY)}
    assert flagged.isdisjoint({"hidden", "forget_x", "feature_weights", "cell", "temp_b", "filter_sums"})


def test_recurrent_offsets_outside_their_range_are_wrong_zero_points(tmp_path: Path) -> None:
    root = _tree(tmp_path / "fw", SEEDED)
    found = _of(check_path(root)[0], Code.WRONG_ZERO_POINT)
    assert [(f.message, f.span) for f in found] == [
        (
            "input_offset of svdf is 128, outside [-128, 127] for an s8 kernel: it is the input's int8 zero"
            " point itself; 128 as a zero point is the uint8 habit (an int8 zero point is in [-128, 127])",
            _value_span(SEEDED, ".input_offset", "128", 0),
        ),
        (
            "output_offset of lstm is 128, outside [-128, 127] for an s8 kernel: it is the hidden state's"
            " int8 zero point (the LSTM's output too) itself; 128 as a zero point is the uint8 habit (an"
            " int8 zero point is in [-128, 127])",
            _value_span(SEEDED, ".output_offset", "128"),
        ),
    ]
    assert all(f.fixes[0].edits[0].new_text == "0" for f in found)


def test_the_corrected_file_is_clean(tmp_path: Path) -> None:
    """SVDF's input_offset -128 (a zero point of -128, valid) and the LSTM's input_offset 128 (-zp)."""
    root = _tree(tmp_path / "fw", CORRECTED)
    assert check_path(root)[0] == []


def test_an_s16_lstm_takes_symmetric_activations(tmp_path: Path) -> None:
    source = CORRECTED.replace("arm_lstm_unidirectional_s8", "arm_lstm_unidirectional_s16")
    root = _tree(tmp_path / "fw", source)
    found = _of(check_path(root)[0], Code.WRONG_ZERO_POINT)
    assert [(f.message, f.span) for f in found] == [
        (
            "input_offset of lstm is 128, but the s16 kernels take symmetric int16 activations (zero point"
            " 0)",
            _value_span(source, ".input_offset", "128", 0),
        ),
        (
            "output_offset of lstm is -128, but the s16 kernels take symmetric int16 activations (zero point"
            " 0)",
            _value_span(source, ".output_offset", "-128", 1),
        ),
    ]


# ------------------------------------------------------------------------------------- missing-cmsis-nn

FILE_BY_FILE = """\
CMSIS_NN ?= third_party/CMSIS-NN
CFLAGS = -mcpu=cortex-m4 -mthumb -O2 -I$(CMSIS_NN)/Include
SRCS = src/kws.c \\
       $(CMSIS_NN)/Source/SVDFunctions/arm_svdf_state_s16_s8.c \\
       $(CMSIS_NN)/Source/NNSupportFunctions/arm_nn_vec_mat_mult_t_svdf_s8.c \\
       $(CMSIS_NN)/Source/LSTMFunctions/arm_lstm_unidirectional_s8.c

firmware.elf: $(SRCS:.c=.o)
\t$(CC) $^ -o $@
"""


def test_a_file_by_file_build_without_the_lstm_support_sources_is_flagged(tmp_path: Path) -> None:
    root = _tree(tmp_path / "fw", CORRECTED, FILE_BY_FILE)
    found = _of(check_path(root)[0], Code.MISSING_CMSIS_NN)
    unlisted = list(KERNEL_SOURCES["arm_lstm_unidirectional_s8"][1:])
    why = (
        f"the build compiles CMSIS-NN file by file and lists no {', '.join(unlisted)}: the link fails with"
        " undefined references"
    )
    anchor = _span(FILE_BY_FILE, "$(CMSIS_NN)/Source/LSTMFunctions/arm_lstm_unidirectional_s8.c")
    call = _span(CORRECTED, "arm_lstm_unidirectional_s8")
    assert [(f.path.name, f.message, f.span) for f in found] == [
        ("Makefile", f"arm_lstm_unidirectional_s8 (src/kws.c:{call.line + 1}) needs 8 more of CMSIS-NN's"
         f" sources, but {why}", anchor),
        ("kws.c", f"arm_lstm_unidirectional_s8 is a CMSIS-NN kernel, but {why}", call),
    ]  # fmt: skip
    makefile = apply_edits(FILE_BY_FILE, found[0].fixes[0].edits)
    assert "$(CMSIS_NN)/Source/ActivationFunctions/arm_nn_activation_s16.c" in makefile
    (root / "Makefile").write_text(makefile)
    assert check_path(root)[0] == []


def test_a_build_that_links_the_library_needs_no_list(tmp_path: Path) -> None:
    root = _tree(tmp_path / "fw", CORRECTED, FILE_BY_FILE.replace("CFLAGS", "LDLIBS = -lcmsis-nn\nCFLAGS"))
    assert check_path(root)[0] == []


@pytest.mark.cmsis_nn
@pytest.mark.parametrize("core", ["host", "cortex-m4", "cortex-m55"])
def test_the_listed_sources_are_what_the_kernels_link_against(core: str) -> None:
    """The closure of each kernel's undefined symbols over the built libcmsis-nn.a, file by file."""
    from quantcore.cores import Core
    from quantcore.errors import CmsisNnNotFound
    from quantcore.targets import cmsis_nn

    try:
        checkout = cmsis_nn.locate()
    except CmsisNnNotFound as missing:
        pytest.skip(str(missing))
    library = cmsis_nn.build_library(checkout, Core.from_label(core))
    nm = "nm" if core == "host" else "arm-none-eabi-nm"
    if shutil.which(nm) is None:
        pytest.skip(f"{nm} is not installed")
    listing = subprocess.run([nm, "-A", str(library)], capture_output=True, text=True, check=True).stdout
    defined: dict[str, str] = {}
    undefined: dict[str, set[str]] = collections.defaultdict(set)
    for line in listing.splitlines():
        match = re.match(r".*?:(\w+)\.c\.o(?:bj)?:\s*(?:[0-9a-f]+)?\s+(\w)\s+(\S+)$", line)
        if match is None:
            continue
        unit, kind, symbol = match.groups()
        if kind == "U":
            undefined[unit].add(symbol)
        elif kind in "TDRB":
            defined.setdefault(symbol, unit)
    for kernel, sources in KERNEL_SOURCES.items():
        needed, todo = set(), [defined[kernel]]
        while todo:
            unit = todo.pop()
            if unit not in needed:
                needed.add(unit)
                todo += [defined[s] for s in undefined[unit] if s in defined]
        assert sorted(needed) == sorted(Path(s).stem for s in sources), kernel
        assert all((checkout.path / s).is_file() for s in sources), kernel


# ------------------------------------------------------------------------ generated trees of TFLM models


def _generated(root: Path, model: str, target: str) -> Path:
    """`fixpoint quantize` + `fixpoint generate` of a TFLM model into a project, as a user would."""
    (root / "model").mkdir(parents=True)
    shutil.copyfile(tflm.model(model), root / "model" / f"{model}.tflite")
    toml = root / "fixpoint.toml"
    toml.write_text(
        f'model = "model/{model}.tflite"\nparams = "model/{model}.params.json"\ngenerated = "src/model"\n'
        f'target = "{target}"\n'
    )
    params = root / "model" / f"{model}.params.json"
    assert cli.main(["quantize", str(root / "model" / f"{model}.tflite"), "-o", str(params)]) == 0
    assert cli.main(["generate", "--project", str(toml)]) == 0
    return root


@pytest.fixture(scope="module")
def svdf_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory.mktemp("svdf"), "keyword_scrambled", "qemu-m55")


@pytest.fixture(scope="module")
def lstm_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory.mktemp("lstm"), "trained_lstm_int8", "qemu-m55")


@pytest.mark.parametrize("model", ["keyword_scrambled", "trained_lstm_int8", "micro_speech_lstm"])
@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_the_generated_c_of_tflms_recurrent_models_has_no_finding(
    model: str, target: str, tmp_path: Path
) -> None:
    root = _generated(tmp_path / "fw", model, target)
    source = (root / "src" / "model" / "model.c").read_text()
    assert (
        "arm_svdf_state_s16_s8(" if model == "keyword_scrambled" else "arm_lstm_unidirectional_s8("
    ) in source
    assert check_path(root)[0] == []


def _edit_params(root: Path, model: str, change) -> Path:  # type: ignore[no-untyped-def]
    path = root / "model" / f"{model}.params.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(dump(document))
    return path


def _layer(document: dict, op: str, nth: int = 0) -> dict:  # type: ignore[type-arg]
    return [layer for layer in document["layers"] if layer["op"] == op][nth]


def test_a_flipped_svdf_input_offset_in_the_json_is_found(svdf_tree: Path, tmp_path: Path) -> None:
    root = Path(shutil.copytree(svdf_tree, tmp_path / "fw"))

    def seed(document: dict) -> None:  # type: ignore[type-arg]
        params = _layer(document, "svdf", 1)["params"]
        params["input_offset"], params["state_zero_point"] = 7, 3

    path = _edit_params(root, "keyword_scrambled", seed)
    text = path.read_text()
    found = [f for f in _of(check_path(root)[0], Code.WRONG_ZERO_POINT) if f.path == path.resolve()]
    assert [f.message for f in found] == [
        "$.layers[3].params.input_offset is 7, but cmsis_nn_svdf_params takes the zero point of input"
        ' "tensor_8" (-7) itself - arm_svdf_s8 and arm_svdf_state_s16_s8 negate it: it must be -7 (the'
        " sign is flipped)",
        "$.layers[3].params.state_zero_point is 3, but CMSIS-NN's SVDF kernels subtract no zero point"
        " from the state (with another, the firmware computes another result than TFLite's reference):"
        " it must be 0",
    ]
    # each on its value's line: the first "7" and "3" after the layer's keys
    assert [text.split("\n")[f.span.line].split(":")[0].strip() for f in found] == [
        '"input_offset"',
        '"state_zero_point"',
    ]
    lines = text.split("\n")
    assert [lines[f.span.line][f.span.column : f.span.end_column] for f in found] == ["7", "3"]
    assert '"input_offset": -7' in apply_edits(text, found[0].fixes[0].edits)


def test_an_lstm_hidden_offset_that_is_not_the_negated_hidden_zero_point_is_found(
    lstm_tree: Path, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(lstm_tree, tmp_path / "fw"))
    path = _edit_params(
        root, "trained_lstm_int8", lambda d: _layer(d, "lstm")["params"].__setitem__("hidden_offset", 128)
    )
    found = [f for f in _of(check_path(root)[0], Code.WRONG_ZERO_POINT) if f.path == path.resolve()]
    assert [f.message for f in found] == [
        "$.layers[0].params.hidden_offset is 128, but the recurrent products' effective biases take the zero"
        ' point of the hidden state, which is output "tfl.unidirectional_sequence_lstm" (0) negated: it must'
        " be 0"
    ]
    line = path.read_text().split("\n")[found[0].span.line]
    assert line[found[0].span.column : found[0].span.end_column] == "128"


def test_a_c_offset_is_compared_with_its_recurrent_layer(svdf_tree: Path, tmp_path: Path) -> None:
    """The generated SVDF's input_offset sign-flipped in model.c: the layer's zero point, from the JSON."""
    root = Path(shutil.copytree(svdf_tree, tmp_path / "fw"))
    model_c = root / "src" / "model" / "model.c"
    text = model_c.read_text()
    start = text.index("l3_tensor_13_params = {")
    seeded = text[:start] + text[start:].replace(".input_offset = -7,", ".input_offset = 7,", 1)
    model_c.write_text(seeded)
    found = [f for f in _of(check_path(root)[0], Code.WRONG_ZERO_POINT) if f.path == model_c.resolve()]
    assert [f.message for f in found] == [
        "input_offset of l3_tensor_13_params is 7, but layer 'tensor_13' reads 'tensor_8' with zero point -7"
        " (keyword_scrambled.params.json): it must be the zero point (the input's int8 zero point), -7 - the"
        " sign is flipped"
    ]
    at = seeded.index(".input_offset = 7,", start) + len(".input_offset = ")
    line = seeded.count("\n", 0, at)
    column = at - (seeded.rfind("\n", 0, at) + 1)
    assert found[0].span == Span(line, column, line, column + 1)


def test_a_float_svdfs_state_scale_is_a_row_of_its_hover() -> None:
    """A float SVDF's params carry the calibrated state scale the multipliers came from (an int8 .tflite's
    do not: its state scale is the model's), and the layer's hover lists it with its value."""
    from fixpoint_server.features.kernel_docs import layer_rows

    rows = layer_rows({"op": "svdf", "params": {"rank": 2, "state_zero_point": 0, "state_scale": 0.0005}})
    assert rows[3].startswith("| rank | 2 |")
    assert rows[-1].startswith("| state_scale | 0.0005 | a float SVDF's int16 state scale")
    assert not any("state_scale" in row for row in layer_rows({"op": "svdf", "params": {"rank": 2}}))
