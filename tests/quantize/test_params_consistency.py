"""The quant-params JSON is never believed blindly (issue 17): its integers must follow from its scales,
its kernels must exist, its model path must stay in the project, and reading it never hangs or crashes.

The reference document is the golden residual.params.json, written by `fixpoint quantize`; every hand edit
below is one a careless or hostile user could make, and each is refused with the JSON path and both values.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import signal
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantcore import limits, pipeline, untrusted
from quantcore.calibrate.method import Method, RangeMethod
from quantcore.data import DataSet
from quantcore.kernels.requantize import Rounding
from quantcore.quantize import consistency, params_checks, params_json
from quantcore.quantize.document import DocumentError, finetuned_weights
from quantcore.quantize.params_json import QuantParamsError, load, loads, model_path, recorded_model, validate
from quantcore.scheme.scaling import quantize_multiplier
from tests.fuzzing import fuzz
from tests.onnx_models import outlier_cnn, residual_cnn, small_cnn
from tests.quantize.test_fuzz_params import GOLDEN

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "quantcore" / "schema" / "lenet.quant-params.example.json"
BROKEN_TREE = REPO / "examples" / "broken" / "model" / "fashion.params.json"


def golden() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return doc


def messages(doc: Any) -> list[str]:
    return [str(problem) for problem in validate(doc)]


def first(doc: Any) -> str:
    """The message load() would give for `doc` (its first problem, the count, the advice)."""
    with pytest.raises(QuantParamsError) as caught:
        loads(json.dumps(doc), "p.json")
    return str(caught.value)


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail, rather than hang the suite, if a read blocks (a FIFO opened for reading waits for a writer)."""

    def fail(_signum: int, _frame: Any) -> None:
        raise TimeoutError("the read blocked")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


# -- what the quantizer writes is accepted (no false positives) ------------------------------------------


def test_the_shipped_documents_are_consistent() -> None:
    for path in (GOLDEN, EXAMPLE, BROKEN_TREE):
        assert validate(json.loads(path.read_text(encoding="utf-8"))) == [], path


_MODELS = {
    "residual": (residual_cnn, (1, 12, 12)),
    "small": (lambda seed: small_cnn(seed, batch=1), (1, 16, 16)),
    "outlier": (lambda seed: outlier_cnn(seed, batch=1), (1, 16, 16)),
}
_S16_LAYERS = {
    "residual": ["conv1", "pool1", "dwconv", "pwconv", "residual", "gate", "gating", "conv3", "fc"],
    "small": ["conv1", "pool1", "dwconv", "pwconv", "fc"],
    "outlier": ["conv1", "conv2", "fc"],
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], pipeline.LoadedModel]:
    folder = tmp_path_factory.mktemp("models")
    loaded = {}
    for name, (build, _) in _MODELS.items():
        for seed in range(3):
            path = folder / f"{name}{seed}.onnx"
            onnx.save(build(seed), path)
            loaded[(name, seed)] = pipeline.load_model(path)
    return loaded


@fuzz(12)
@given(
    name=st.sampled_from(sorted(_MODELS)),
    seed=st.integers(0, 2),
    method=st.sampled_from(["minmax", "percentile", "entropy", "mse"]),
    per_channel=st.booleans(),
    rounding=st.sampled_from(list(Rounding)),
    equalize=st.booleans(),
    bias_correction=st.booleans(),
    wide=st.data(),
)
def test_every_document_the_quantizer_writes_loads(
    models: dict[tuple[str, int], pipeline.LoadedModel],
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    seed: int,
    method: str,
    per_channel: bool,
    rounding: Rounding,
    equalize: bool,
    bias_correction: bool,
    wide: st.DataObject,
) -> None:
    int16 = wide.draw(st.frozensets(st.sampled_from(_S16_LAYERS[name]), max_size=3), label="int16 layers")
    model = models[(name, seed)]
    data = DataSet(np.random.default_rng(seed).uniform(0, 1, (24, *_MODELS[name][1])).astype(np.float32))
    options = pipeline.QuantizeOptions(
        method=RangeMethod(Method(method)),
        per_channel=per_channel,
        rounding=rounding,
        int16_layers=int16,
        equalize=equalize,
        bias_correction=bias_correction,
    )
    document = pipeline.quantize(model, data, options).document
    assert validate(document) == []
    params = tmp_path_factory.mktemp("written") / "q.params.json"
    (params.parent / model.path.name).write_bytes(model.path.read_bytes())  # the model it records
    params_json.write(params, document)  # validates again, consistency included
    assert load(params, warn=pytest.fail) == document  # and no override warning


# -- hand edits are refused with the JSON path and both values -------------------------------------------


@pytest.fixture(scope="module")
def int16_doc(models: dict[tuple[str, int], pipeline.LoadedModel]) -> dict[str, Any]:
    """The residual net with its add on int16 (CMSIS-NN's s16 add between two conversions and one back)."""
    data = DataSet(np.random.default_rng(0).uniform(0, 1, (16, 1, 12, 12)).astype(np.float32))
    options = pipeline.QuantizeOptions(
        equalize=False, bias_correction=False, int16_layers=frozenset({"residual"})
    )
    document: dict[str, Any] = pipeline.quantize(models[("residual", 0)], data, options).document
    return document


def test_int16_layers_and_their_conversions_are_checked_too(int16_doc: dict[str, Any]) -> None:
    assert validate(int16_doc) == []
    doc = copy.deepcopy(int16_doc)
    convert = _layer(doc, "pw.to_int16")
    add = _layer(doc, "residual")
    assert (convert["kernel"], add["kernel"], add["params"]["left_shift"]) == (
        "fixpoint_requantize",
        "arm_elementwise_add_s16",
        15,
    )
    convert["params"]["multiplier"] += 1
    convert["params"]["act_min"] = -128
    add["params"]["left_shift"] = 20  # the int8 add's headroom
    s_in, s_out = doc["tensors"]["pw"]["scale"], doc["tensors"]["pw@int16"]["scale"]
    multiplier, shift = quantize_multiplier(s_in / s_out)
    index = doc["layers"].index(convert)
    assert [p.split(";")[0] for p in messages(doc)] == [
        f"$.layers[{index}].params.multiplier: {multiplier + 1} does not follow from the recorded scales:"
        f" s_in {s_in:.6g} / s_out {s_out:.6g} gives {multiplier} (shift {shift})",
        f'$.layers[{index}].params.act_min: -128 does not follow from the int16 range of output "pw@int16": a'
        " conversion does not clamp further",
        f"$.layers[{index + 2}].params.left_shift: 20 does not follow from the recorded scales"
        f' ("pw@int16" {doc["tensors"]["pw@int16"]["scale"]:.6g}, "pool1@int16"'
        f" {doc['tensors']['pool1@int16']['scale']:.6g}, output {doc['tensors']['relu2']['scale']:.6g}) in"
        " TFLite's add scheme, which give 15",
    ]


def edited(**changes: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = golden()
    for change in changes.values():
        change(doc)
    return doc


def _layer(doc: dict[str, Any], name: str) -> dict[str, Any]:
    layer: dict[str, Any] = next(entry for entry in doc["layers"] if entry["name"] == name)
    return layer


def test_a_multiplier_edited_by_one_is_refused_with_both_values() -> None:
    doc = golden()
    doc["layers"][0]["params"]["multiplier"][0] = 1658483554
    assert first(doc) == (
        "p.json: $.layers[0].params.multiplier[0]: 1658483554 does not follow from the recorded scales:"
        " s_in 0.0280652 * s_w[0] 0.00489766 / s_out 0.0455633 gives 1658483553 (shift -8); regenerate the"
        " file with fixpoint quantize, or, if it was set by hand on purpose, record that as"
        ' $.layers[0].overrides: {"multiplier": "<why>"}'
    )
    x, w, out = doc["tensors"]["x"]["scale"], doc["tensors"]["conv1.weight"]["scale"][0], 0.04556328268612132
    assert quantize_multiplier(x * w / out) == (1658483553, -8)  # the figure the message gives


def test_a_negative_multiplier_is_refused_by_the_schema() -> None:
    doc = golden()
    doc["layers"][0]["params"]["multiplier"][2] = -1112551010
    assert messages(doc) == ["$.layers[0].params.multiplier[2]: must be in [0, 2147483647], got -1112551010"]


def test_a_shift_that_no_longer_matches() -> None:
    doc = golden()
    doc["layers"][3]["params"]["shift"][1] = -7
    assert [p.split(";")[0] for p in messages(doc)] == [
        "$.layers[3].params.shift[1]: -7 does not follow from the recorded scales: s_in 0.0185827 *"
        " s_w[1] 0.00379169 / s_out 0.0197118 gives shift -8 (multiplier 1965101741)"
    ]


def test_an_input_offset_that_does_not_negate_the_zero_point() -> None:
    doc = golden()
    doc["layers"][0]["params"]["input_offset"] = 5
    assert [p.split(";")[0] for p in messages(doc)] == [
        '$.layers[0].params.input_offset: 5 does not follow from the zero point of input "x" (11): it must'
        " be its negation"
    ]
    assert validate(doc)[0].expected == -11


_ADD_SCALES = (
    'the recorded scales ("pw" 0.0197118, "pool1" 0.0455633, output 0.042097) in TFLite\'s add scheme,'
    " which give"
)
_SOFTMAX_SCALE = "the recorded input scale 0.0716242 (beta 1, TFLite's int8 softmax scaling), which gives"


@pytest.mark.parametrize(
    ("layer", "key", "value", "expected"),
    [
        ("pwconv", "output_offset", 30, 'the zero point of output "pw": it must equal it'),
        ("residual", "out_mult", 1162153971, f"{_ADD_SCALES} 1162153970"),
        ("residual", "input_2_offset", 100, 'the zero point of input "pool1" (-128): it must be its'
            " negation"),
        ("residual", "left_shift", 19, f"{_ADD_SCALES} 20"),
        ("gating", "out_shift", -4, "the recorded scales: s_1 0.042097 * s_2 0.0561969 / s_out 0.151321 gives"
            " shift -5 (multiplier 1074344706)"),
        ("gating", "input_2_offset", 57, 'the zero point of input "gate" (57): it must be its negation'),
        ("pad", "pad_value", 0, 'the zero point of input "gated": zero padding pads with it'),
        ("softmax", "diff_min", -250, f"{_SOFTMAX_SCALE} -248"),
        ("softmax", "mult", 1230494781, f"{_SOFTMAX_SCALE} 1230494780"),
        ("conv1", "act_min", -127, "the layer's activation 'relu' on output \"relu1\" (scale 0.0455633, zero"
            " point -128, int8), which gives -128"),
        ("fc", "filter_offset", 3, "the weights' zero point 0 (weights are symmetric)"),
        ("pool2", "ch_mult", 2, 'the channels of output "pool2" over those of input "cat", which give 1'),
    ],
)  # fmt: skip
def test_each_derived_parameter_is_checked(layer: str, key: str, value: int, expected: str) -> None:
    doc = golden()
    index = doc["layers"].index(_layer(doc, layer))
    recorded = doc["layers"][index]["params"][key]
    doc["layers"][index]["params"][key] = value
    problems = validate(doc)
    assert [p.path for p in problems] == [("layers", index, "params", key)]
    assert problems[0].message.split("; ")[0] == f"{value} does not follow from {expected}"
    assert problems[0].expected == recorded  # what the quantizer wrote: the quick fix restores it


def test_a_bias_scale_is_the_accumulators_and_cannot_be_overridden() -> None:
    doc = golden()
    doc["tensors"]["conv1.bias"]["scale"][1] = 0.0002
    doc["layers"][0]["overrides"] = {"multiplier": "tuned on the board"}
    assert messages(doc) == [
        '$.tensors["conv1.bias"].scale[1]: 0.0002 does not follow from the recorded scales: s_in 0.0280652'
        " * s_w[1] 0.0085464 gives 0.00023985615088383802 (the accumulator's scale, at which the kernel adds"
        " the bias); regenerate the file with fixpoint quantize"
    ]


def test_an_edited_activation_scale_shows_in_every_integer_derived_from_it() -> None:
    doc = golden()
    doc["tensors"]["relu1"]["scale"] = 0.05  # conv1 writes it, pool1 passes it on to pool1 (shared)
    paths = [p.json_path for p in validate(doc)]
    assert paths == [
        "$.tensors.pool1.scale",
        *[f"$.layers[0].params.multiplier[{c}]" for c in range(8)],
        # multipliers below 2^30 / (0.04556 / 0.05) = 1.18e9 drop below 2^30: one shift less
        *[f"$.layers[0].params.shift[{c}]" for c in (2, 6)],
    ]
    assert validate(doc)[0].message.startswith(
        '0.04556328268612132 does not follow from the scale of input "relu1": arm_max_pool_s8 does not'
        " requantize, its output keeps its input's (0.05)"
    )


def test_the_softmax_output_is_the_kernels_fixed_scale() -> None:
    doc = golden()
    doc["tensors"]["probs"]["scale"] = 0.004
    assert [p.split(";")[0] for p in messages(doc)] == [
        "$.tensors.probs.scale: 0.004 does not follow from the kernel: arm_softmax_s8 writes its output at"
        " scale 1/256, zero point -128, so it must be 0.00390625"
    ]


@pytest.mark.parametrize(
    ("scale", "expected"),
    [
        (1e-300, "$.tensors.gate.scale: must be a positive number in [1e-40, 1e30], got 1e-300"),
        (1e31, "$.tensors.gate.scale: must be a positive number in [1e-40, 1e30], got 1e+31"),
        (-0.05, "$.tensors.gate.scale: must be a positive number in [1e-40, 1e30], got -0.05"),
    ],
)
def test_scales_outside_the_sane_range_are_refused(scale: float, expected: str) -> None:
    doc = golden()
    doc["tensors"]["gate"]["scale"] = scale
    assert messages(doc) == [expected]


# -- kernels ---------------------------------------------------------------------------------------------


def test_a_kernel_that_does_not_exist_names_the_ones_the_op_can_use() -> None:
    doc = golden()
    doc["layers"][0]["kernel"] = "arm_nonexistent_s8"
    assert first(doc) == (
        'p.json: $.layers[0].kernel: "arm_nonexistent_s8" is not a kernel conv2d can use (it runs on'
        " arm_convolve_wrapper_s8, arm_convolve_wrapper_s16) (fix the file, or regenerate it with the"
        " quantizer)"
    )


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        (
            {"layers/1/kernel": "arm_max_pool_s16"},
            '$.layers[1].kernel: arm_max_pool_s16 writes int16, but output "pool1" is int8',
        ),
        (
            {"layers/14/kernel": "arm_fully_connected_s8"},
            "$.layers[14].kernel: arm_fully_connected_s8 takes one multiplier (per-tensor weights), but"
            " params.multiplier has one per channel; use arm_fully_connected_per_channel_s8",
        ),
        (
            {"layers/14/kernel": "arm_fully_connected_s16"},
            '$.layers[14].kernel: arm_fully_connected_s16 writes int16, but output "logits" is int8',
        ),
        (
            {"layers/15/kernel": "arm_softmax_s16"},
            '$.layers[15].kernel: "arm_softmax_s16" is not a kernel softmax can use (it runs on'
            " arm_softmax_s8, arm_softmax_s8_s16)",
        ),
        (
            {"layers/13/kernel": "arm_transpose_s8"},
            '$.layers[13].kernel: "arm_transpose_s8" is not a kernel reshape can use (it runs on'
            " arm_reshape_s8, null)",
        ),
        (
            {"tensors/pool3.weight/axis": 0, "tensors/pool3.weight/shape": [6, 2, 2, 1]},
            '$.tensors["pool3.weight"].axis: must be 3, the output-channel axis of depthwise_conv2d weights,'
            " got 0",
        ),
    ],
)
def test_kernels_must_fit_the_op_the_tensor_types_and_the_weights(
    edits: dict[str, Any], expected: str
) -> None:
    doc = golden()
    for path, value in edits.items():
        *parents, last = (int(p) if p.isdigit() else p for p in path.split("/"))
        node: Any = doc
        for part in parents:
            node = node[part]
        node[last] = value
    assert messages(doc) == [expected]


def test_per_tensor_weights_must_hold_one_row_per_output_channel() -> None:
    doc = golden()
    weights = doc["tensors"]["fc.weight"]
    weights.update(scale=weights["scale"][0], zero_point=0, shape=[12, 48])
    del weights["axis"], weights["observed"]
    assert messages(doc) == [
        '$.tensors["fc.weight"].shape: must have 10 entries on axis 0, one per channel of output "logits",'
        " got shape [12, 48]"
    ]


def test_an_int16_input_needs_the_s16_kernel_and_an_int64_bias() -> None:
    doc = golden()
    doc["tensors"]["pool1"].update(dtype="int16", zero_point=0)
    doc["tensors"]["relu1"].update(dtype="int16", zero_point=0)
    assert [p.split(":")[0] + ":" + p.split(":")[1] for p in messages(doc)] == [
        '$.layers[0].kernel: arm_convolve_wrapper_s8 writes int8, but output "relu1" is int16',
        '$.layers[1].kernel: arm_max_pool_s8 writes int8, but output "pool1" is int16',
        '$.layers[2].inputs[0]: "pool1" is int16, but arm_depthwise_conv_wrapper_s8 reads int8',
        '$.layers[4].inputs[1]: "pool1" is int16, but arm_elementwise_add_s8 reads int8',
    ]


# -- deliberate hand edits -------------------------------------------------------------------------------


def test_an_override_is_accepted_and_reported_in_one_line(tmp_path: Path) -> None:
    doc = golden()
    doc["layers"][0]["params"]["multiplier"][0] = 1658483554
    doc["layers"][0]["params"]["act_min"] = -100
    doc["layers"][0]["overrides"] = {"multiplier": "rounded up on the board", "act_min": "clip the noise"}
    path = tmp_path / "residual.params.json"
    path.write_text(params_json.dump(doc), encoding="utf-8")
    warnings: list[str] = []
    assert load(path, warn=warnings.append) == doc
    assert warnings == [
        f"{path}: warning: 2 values were set by hand and not checked against the scales:"
        ' $.layers[0].params.multiplier ("rounded up on the board"); $.layers[0].params.act_min ("clip the'
        ' noise")'
    ]


def test_an_override_still_needs_a_normalised_multiplier() -> None:
    doc = golden()
    doc["layers"][0]["params"]["multiplier"][2] = 1000
    doc["layers"][0]["overrides"] = {"multiplier": "hand-tuned"}
    assert messages(doc) == [
        "$.layers[0].params.multiplier[2]: 1000, set by hand, is not a normalised Q31 multiplier (0 or in"
        " [1073741824, 2147483647]): write the same factor with a mantissa in [0.5, 1) and adjust the shift"
    ]


def test_an_override_must_name_a_parameter_and_give_a_reason() -> None:
    doc = golden()
    doc["layers"][0]["overrides"] = {"multiplyer": "typo"}
    assert messages(doc) == [
        '$.layers[0].overrides.multiplyer: "multiplyer" is not a parameter of this layer (it has'
        " input_offset, output_offset, multiplier, shift, act_min, act_max, stride, padding, dilation)"
    ]
    doc["layers"][0]["overrides"] = {"multiplier": ""}
    assert messages(doc) == [
        '$.layers[0].overrides.multiplier: must say why the value was set by hand, got ""'
    ]


def test_overrides_lists_where_and_why() -> None:
    doc = golden()
    doc["layers"][4]["overrides"] = {"out_mult": "why"}
    assert consistency.overrides(doc) == [(("layers", 4, "params", "out_mult"), "why")]


# -- reading a hostile file ------------------------------------------------------------------------------


def test_two_hundred_thousand_nested_arrays_are_a_message_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.params.json"
    text = '{"format":\n' + "[" * 200_000 + "]" * 200_000 + "}"
    path.write_text(text)
    deep = untrusted.json_depth_problem(text)
    assert deep is not None and deep.startswith("line 2:")
    with pytest.raises(QuantParamsError) as caught:
        load(path)
    assert str(caught.value) == f"{path}: {deep}; a quant-params file nests 5 levels deep: this is not one"


def test_recorded_model_reads_within_the_same_limits(tmp_path: Path) -> None:
    path = tmp_path / "deep.params.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(QuantParamsError, match="nest deeper than 64 levels"):
        recorded_model(path)


def test_special_files_are_refused_without_blocking(tmp_path: Path, no_hang: None) -> None:
    fifo = tmp_path / "fifo.params.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.params.json"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.params.json"
    folder.mkdir()
    for path, kind in ((fifo, "a FIFO (named pipe)"), (zero, "a character device")):
        with pytest.raises(QuantParamsError) as caught:
            load(path)
        assert (
            str(caught.value) == f"{path}: is {kind}, not a regular file; Fixpoint reads only regular files"
        )
    with pytest.raises(QuantParamsError) as caught:
        load(folder)
    assert str(caught.value).startswith(f"{folder}: ") and "directory" in str(caught.value)


def test_a_file_larger_than_the_limit_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.params.json"
    with path.open("wb") as file:
        file.truncate(limits.JSON_MAX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(QuantParamsError, match=r"is larger than Fixpoint reads .*the limit is 256\.0 MiB"):
        load(path)


def test_an_integer_of_ten_thousand_digits_is_a_message() -> None:
    with pytest.raises(QuantParamsError) as caught:
        loads('{"version": ' + "9" * 10_000 + "}", "p.json")
    assert str(caught.value).startswith("p.json: invalid JSON: Exceeds the limit")


def test_hostile_names_are_shortened_and_cannot_forge_lines() -> None:
    doc = golden()
    name = "x\n*/ evil\u2028\u202e" + "y" * 10_000
    doc["layers"][0]["inputs"] = [name]
    [problem] = messages(doc)
    assert "\n" not in problem and "\u2028" not in problem and "\u202e" not in problem
    assert "\\n*/ evil\\u2028\\u202e" in problem and len(problem) < 400
    assert problem.endswith('yyy" in $.tensors')


def test_problems_are_capped() -> None:
    doc = golden()
    weights = doc["tensors"]["fc.weight"]
    weights["scale"] = [0.0] * 1500
    assert len(validate(doc)) == params_checks.MAX_PROBLEMS
    assert first(doc).endswith("(1 of 1000+ problems; fix the file, or regenerate it with the quantizer)")


def test_name_suggestions_are_budgeted() -> None:
    doc = golden()
    for index in range(100):
        doc["tensors"][f"extra{index}"] = copy.deepcopy(doc["tensors"]["flat"])
    doc["layers"] += [
        {**doc["layers"][13], "name": f"r{i}", "inputs": [f"extro{i}"], "outputs": [f"extra{i}"]}
        for i in range(100)
    ]
    problems = validate(doc)
    assert len(problems) == 100  # each misspelled, each close to a name
    suggested = [p for p in problems if p.message.endswith(f'(did you mean "extra{p.path[1] - 16}"?)')]
    assert len(suggested) == params_checks.SUGGESTIONS


def test_a_document_of_more_values_than_any_model_needs_is_refused_before_the_schema() -> None:
    doc = golden()
    doc["tensors"]["fc.weight"]["observed"]["min"] = [0.0] * params_checks.MAX_VALUES
    assert messages(doc) == ["$: holds more than 1,000,000 values, more than any model's parameters"]


# -- the model the JSON records --------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "build").mkdir()
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    return tmp_path


def _with_model(path: str) -> dict[str, Any]:
    doc = golden()
    doc["model"]["path"] = path
    return doc


def test_a_model_one_level_up_is_found_from_the_project(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    params = project / "build" / "p.params.json"
    params.write_text(json.dumps(_with_model("../model.onnx")))
    assert load(params)["model"]["path"] == "../model.onnx"
    assert recorded_model(params) == (project / "model.onnx").resolve()


def test_a_model_outside_the_current_folder_and_the_jsons_is_refused(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "build")
    params = project / "build" / "p.params.json"
    params.write_text(json.dumps(_with_model("../../../etc/passwd")))
    build, target = os.path.realpath(project / "build"), os.path.realpath(project.parents[1] / "etc/passwd")
    with pytest.raises(QuantParamsError) as caught:
        load(params)  # the current folder and the JSON's are one: named once
    assert str(caught.value) == (
        f'{params}: $.model.path: "../../../etc/passwd" leads to "{target}", outside "{build}"; keep the'
        " model in the project and record its path relative to the JSON"
    )
    params.write_text(json.dumps(_with_model("../model.onnx")))
    with pytest.raises(QuantParamsError, match=r'\$\.model\.path: "\.\./model\.onnx" leads to'):
        recorded_model(params)  # from inside build/, the project is not the folder the user works in


def test_an_absolute_model_path_is_refused(project: Path) -> None:
    assert messages(_with_model("/etc/passwd")) == [
        '$.model.path: must be a path relative to this file\'s folder, such as "model.onnx" or'
        ' "../model.onnx", got "/etc/passwd"'
    ]
    with pytest.raises(QuantParamsError) as caught:
        model_path(_with_model("/etc/passwd"), project / "p.json", [project])
    assert str(caught.value) == (
        f'{project / "p.json"}: $.model.path: "/etc/passwd" is absolute; record the model\'s path relative to'
        ' the JSON\'s folder (e.g. "model.onnx")'
    )


def test_a_symlinked_model_leading_out_is_refused(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "model.onnx"
    elsewhere.write_bytes(b"onnx")
    (project / "linked.onnx").symlink_to(elsewhere)
    with pytest.raises(QuantParamsError, match=r"leads to .*elsewhere.*, outside"):
        model_path(_with_model("linked.onnx"), project / "p.json", [project])
    assert (
        model_path(_with_model("model.onnx"), project / "p.json", [project])
        == (project / "model.onnx").resolve()
    )


def test_recorded_model_is_none_when_the_model_is_not_there(project: Path) -> None:
    params = project / "p.params.json"
    params.write_text(json.dumps(_with_model("missing.onnx")))
    assert recorded_model(params) is None
    params.write_text(json.dumps({"model": {"path": 3}}))
    assert recorded_model(params) is None


def test_recorded_model_of_a_loaded_document_does_not_read_the_file_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    params = project / "p.params.json"
    params.write_text(json.dumps(_with_model("model.onnx")))
    document = load(params)
    params.unlink()
    assert recorded_model(params, document=document) == (project / "model.onnx").resolve()


# -- the fine-tuned weights next to the JSON -------------------------------------------------------------


def _finetuned(sidecar: str, digest: str) -> dict[str, Any]:
    return {"finetuned": {"method": "qat", "weights": sidecar, "sha256": digest}}


def test_a_fifo_as_the_fine_tuned_weights_is_refused_without_blocking(tmp_path: Path, no_hang: None) -> None:
    os.mkfifo(tmp_path / "p.finetuned.npz")
    with pytest.raises(DocumentError) as caught:
        finetuned_weights(_finetuned("p.finetuned.npz", "0" * 64), tmp_path / "p.json")
    assert "is a FIFO (named pipe), not a regular file" in str(caught.value)


def test_a_zip_bomb_as_the_fine_tuned_weights_is_refused_before_it_expands(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("w.npy", b"\x93NUMPY")
    raw = bytearray(buffer.getvalue())
    central = raw.index(b"PK\x01\x02")
    raw[central + 24 : central + 28] = (0xF000_0000).to_bytes(4, "little")  # claims 4 GB uncompressed
    (tmp_path / "p.finetuned.npz").write_bytes(raw)
    doc = _finetuned("p.finetuned.npz", hashlib.sha256(raw).hexdigest())
    with pytest.raises(DocumentError) as caught:
        finetuned_weights(doc, tmp_path / "p.json")
    assert str(caught.value) == (
        f"{tmp_path / 'p.finetuned.npz'}: its arrays would expand to 4026531840 bytes, more than a model's"
        f" weights ({limits.MODEL_MAX_BYTES}); re-run fixpoint qat"
    )


def test_garbage_as_the_fine_tuned_weights_is_a_message(tmp_path: Path) -> None:
    raw = b"PK\x03\x04" + b"garbage" * 10
    (tmp_path / "p.finetuned.npz").write_bytes(raw)
    with pytest.raises(DocumentError, match=r"not a readable \.npz of weights \(.*\); re-run fixpoint qat"):
        finetuned_weights(_finetuned("p.finetuned.npz", hashlib.sha256(raw).hexdigest()), tmp_path / "p.json")


def test_the_checks_do_not_alter_the_document() -> None:
    doc = golden()
    before = copy.deepcopy(doc)
    assert validate(doc) == [] and doc == before
