"""The editor flags every integer of a quant-params JSON that does not follow from its scales (issue 17):
an error on the exact value, with the value that follows as a quick fix; an info where a layer's
"overrides" says a value was set by hand; a recorded model path that leaves the workspace; and a hostile
file is a finding, never an exception."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fixpoint_server.findings import Code, Finding, Severity, Span
from fixpoint_server.parse.params import read_params
from fixpoint_server.rules import params_json as rule
from fixpoint_server.rules.context import CheckContext, FactsCache
from hypothesis import given

from quantcore.project import Project
from quantcore.quantize.params_json import dump
from tests.fuzzing import fuzz
from tests.quantize.test_fuzz_params import mutated
from tests.server.fixtures import GeneratedProject, apply_edits, context, generated_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> GeneratedProject:
    return generated_project(tmp_path_factory.mktemp("residual"))


def _ctx(project: GeneratedProject, text: str) -> CheckContext:
    return context(project.root, project.project, {project.params: text}, FactsCache())


def findings(project: GeneratedProject, text: str) -> list[Finding]:
    return [f for f in rule.check(_ctx(project, text)) if f.path == project.params.resolve()]


def edited(project: GeneratedProject, change: Any) -> str:
    doc = json.loads(project.params.read_text())
    change(doc)
    return dump(doc)


def span_of(text: str, line_fragment: str, value: str) -> Span:
    """The span of `value` on the first line holding `line_fragment`."""
    line = next(i for i, row in enumerate(text.split("\n")) if line_fragment in row)
    column = text.split("\n")[line].index(value, text.split("\n")[line].index(line_fragment))
    return Span(line, column, line, column + len(value))


def test_the_generated_json_has_no_findings(project: GeneratedProject) -> None:
    assert findings(project, project.params.read_text()) == []


def test_an_edited_multiplier_is_an_error_on_the_value_and_the_fix_restores_it(
    project: GeneratedProject,
) -> None:
    text = edited(project, lambda doc: doc["layers"][0]["params"]["multiplier"].__setitem__(0, 1658483554))
    (finding,) = findings(project, text)
    assert (finding.code, finding.effective_severity) == (Code.SUSPICIOUS_SCALE, Severity.ERROR)
    assert finding.span == span_of(text, '"multiplier": [1658483554', "1658483554")
    assert finding.message.startswith(
        "$.layers[0].params.multiplier[0]: 1658483554 does not follow from the recorded scales:"
        " s_in 0.0280652 * s_w[0] 0.00489766 / s_out 0.0455633 gives 1658483553 (shift -8); regenerate"
    )
    assert finding.fixes[0].title == (
        "Set $.layers[0].params.multiplier[0] to 1658483553, the value the recorded scales give"
    )
    repaired = apply_edits(text, finding.fixes[0].edits)
    assert json.loads(repaired) == json.loads(project.params.read_text())
    assert findings(project, repaired) == []


def test_an_offset_with_the_sign_flipped_is_a_wrong_zero_point(project: GeneratedProject) -> None:
    text = edited(project, lambda doc: doc["layers"][0]["params"].__setitem__("input_offset", 11))
    (finding,) = findings(project, text)
    assert (finding.code, finding.effective_severity) == (Code.WRONG_ZERO_POINT, Severity.ERROR)
    assert finding.span == span_of(text, '"input_offset": 11', "11")
    assert finding.message.endswith("(the sign is flipped)")
    assert finding.fixes[0].edits[0].new_text == "-11"


def test_a_bias_scale_off_the_accumulators_is_flagged_with_the_exact_float(project: GeneratedProject) -> None:
    text = edited(project, lambda doc: doc["tensors"]["conv1.bias"]["scale"].__setitem__(1, 0.0002))
    (finding,) = findings(project, text)
    where = span_of(text, "[0.00013745367133656574, 0.0002,", "0.0002")
    assert finding.code is Code.SUSPICIOUS_SCALE and finding.span == where
    assert finding.fixes[0].edits[0].new_text == "0.00023985615088383802"
    assert findings(project, apply_edits(text, finding.fixes[0].edits)) == []


def test_a_value_set_by_hand_is_an_info_with_its_reason(project: GeneratedProject) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["layers"][4]["params"]["out_mult"] = 1162153971
        doc["layers"][4]["overrides"] = {"out_mult": "matched to the TFLite Micro build"}

    text = edited(project, change)
    (finding,) = findings(project, text)
    assert (finding.code, finding.effective_severity) == (Code.SUSPICIOUS_SCALE, Severity.INFO)
    assert finding.span == span_of(text, '"out_mult": 1162153971', "1162153971")
    assert finding.message == (
        '$.layers[4].params.out_mult: set by hand ("matched to the TFLite Micro build"); not checked against'
        " the recorded scales"
    )


def test_a_kernel_that_does_not_exist_is_placed_on_the_kernel(project: GeneratedProject) -> None:
    text = edited(project, lambda doc: doc["layers"][2].__setitem__("kernel", "arm_nonexistent_s8"))
    (finding,) = findings(project, text)
    assert finding.span == span_of(text, '"kernel": "arm_nonexistent_s8"', '"arm_nonexistent_s8"')
    assert finding.message == (
        '$.layers[2].kernel: "arm_nonexistent_s8" is not a kernel depthwise_conv2d can use (it runs on'
        " arm_depthwise_conv_wrapper_s8, arm_depthwise_conv_wrapper_s16)"
    )


def test_a_model_path_leaving_the_workspace_is_flagged_and_not_followed(project: GeneratedProject) -> None:
    text = edited(project, lambda doc: doc["model"].__setitem__("path", "../../../etc/passwd"))
    # No fixpoint.toml naming the model: the server would follow the path the JSON records.
    ctx = context(project.root, Project(), {project.params: text}, FactsCache())
    (finding,) = [f for f in rule.check(ctx) if f.path == project.params.resolve()]
    assert finding.span == span_of(text, '"path": "../../../etc/passwd"', '"../../../etc/passwd"')
    assert finding.message.startswith('$.model.path: "../../../etc/passwd" leads to "')
    assert f'outside "{os.path.realpath(project.root)}"; keep the model in the project' in finding.message
    (params,) = ctx.params_files()
    assert params.model_path(ctx) is None
    pristine = context(project.root, Project(), None, FactsCache())
    (params,) = pristine.params_files()
    assert params.model_path(pristine) == project.model.resolve()  # the path it records, followed


def test_two_hundred_thousand_nested_arrays_are_one_finding_at_their_line(project: GeneratedProject) -> None:
    text = '{\n  "format": ' + "[" * 200_000 + "]" * 200_000 + "\n}"
    (finding,) = findings(project, text)
    assert finding.span.line == 1
    assert "nest deeper than 64 levels" in finding.message
    parsed = read_params(project.params, text)
    assert parsed.document is None and parsed.located is None


def test_an_integer_of_ten_thousand_digits_is_a_finding(project: GeneratedProject) -> None:
    (finding,) = findings(project, '{"version": ' + "9" * 10_000 + "}")
    assert finding.message.startswith("residual.params.json: invalid JSON: Exceeds the limit")


@fuzz(40)
@given(mutated())
def test_any_mutated_json_gives_findings_and_never_an_exception(
    project: GeneratedProject, doc: dict[str, Any]
) -> None:
    text = json.dumps(doc, indent=2)
    for finding in findings(project, text):
        assert finding.span.line >= 0 and "\n" not in finding.message


def test_an_int16_output_has_no_findings_and_its_edited_zero_point_is_flagged(tmp_path: Path) -> None:
    """The quantizer's default int16 output (an s16 fully connected layer writing the graph output,
    symmetric, its range widened): nothing to flag; a zero point written into it is."""
    import numpy as np
    import onnx

    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.quantize import params_json
    from tests.onnx_models import outlier_cnn

    onnx.save(outlier_cnn(factor=1.0), tmp_path / "outlier.onnx")
    loaded = pipeline.load_model(tmp_path / "outlier.onnx")
    x = np.random.default_rng(1).uniform(0, 1, (96, 1, 16, 16)).astype(np.float32)
    document = pipeline.quantize(loaded, DataSet(x), pipeline.QuantizeOptions(bias_correction=False)).document
    params = tmp_path / "outlier.params.json"
    params_json.write(params, document)
    text = params.read_text()
    assert json.loads(text)["tensors"]["logits"]["dtype"] == "int16"

    def found(text: str) -> list[Finding]:
        ctx = context(tmp_path, None, {params: text}, FactsCache())
        return [f for f in rule.check(ctx) if f.path == params.resolve()]

    assert found(text) == []
    doc = json.loads(text)
    doc["tensors"]["logits"]["zero_point"] = 3
    (finding,) = found(dump(doc))
    assert (finding.code, finding.message) == (
        Code.WRONG_ZERO_POINT,
        "$.tensors.logits.zero_point: must be 0 for int16 activations (CMSIS-NN's s16 kernels are"
        " symmetric; -32768 only for the int16 output of arm_softmax_s8_s16), got 3",
    )
