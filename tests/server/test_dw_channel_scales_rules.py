"""The editor's rules on a firmware tree whose quant-params JSON gives depthwise inputs per-channel scales
(transforms.dw_channel_scales): the generated tree has no finding, and a depthwise bias computed with one
input scale for every channel (the per-tensor habit) is still caught, with the per-channel s_in named."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from fixpoint_server.findings import Code
from fixpoint_server.rules import params_json, unscaled_bias, zero_point_c
from fixpoint_server.rules.context import FactsCache

from quantcore import pipeline
from quantcore.codegen.generate import Sources, generate
from quantcore.cores import Core
from quantcore.quantize import params_json as pj
from quantcore.quantize.document import from_document
from tests.onnx_models import depthwise_cnn
from tests.server.fixtures import GeneratedProject, context

CACHE = FactsCache()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> GeneratedProject:
    root = tmp_path_factory.mktemp("dwscales")
    model, params = root / "dw.onnx", root / "dw.params.json"
    onnx.save(depthwise_cnn(), model)
    loaded = pipeline.load_model(model)
    np.save(root / "calib.npy", np.random.default_rng(1).uniform(0, 1, (64, 1, 12, 12)).astype(np.float32))
    options = pipeline.QuantizeOptions(dw_channel_scales=True)
    result = pipeline.quantize(loaded, pipeline.load_data(root / "calib.npy", loaded.graph), options)
    pj.write(params, result.document)
    qgraph = from_document(loaded.graph, pj.load(params))
    generate(qgraph, root / "generated", core=Core.CORTEX_M4, sources=Sources(params, model))
    return GeneratedProject(root, model, params, root / "generated")


def test_a_tree_with_per_channel_depthwise_inputs_has_no_findings(project: GeneratedProject) -> None:
    doc = json.loads(project.params.read_text())
    assert isinstance(doc["tensors"]["a1"]["scale"], list)  # what this test is about
    ctx = context(project.root, project.project, None, CACHE)
    assert unscaled_bias.Layers(ctx), "the JSON's model must build, or the C checks test nothing"
    for rule in (params_json, unscaled_bias, zero_point_c):
        assert rule.check(ctx) == [], rule.__name__


def test_a_depthwise_bias_with_one_input_scale_is_caught(project: GeneratedProject) -> None:
    ctx = context(project.root, project.project, None, CACHE)
    layer = next(x for x in unscaled_bias.Layers(ctx).layers if x.name == "dw1")
    bias, s_in, s_w = layer.bias(), layer.tensor_scale(0), layer.tensor_scale(1)
    assert bias is not None and s_in is not None and s_w is not None and len(s_in) == 8
    # The float bias divided by the tensor's coarsest scale instead of channel c's.
    wrong = np.sign(bias * s_in / s_in.max()) * np.floor(np.abs(bias * s_in / s_in.max()) + 0.5)
    wrong = wrong.astype(np.int64)
    differ = [c for c in range(8) if wrong[c] != bias[c]]
    assert differ, "the seeded mistake must change some channel"
    path = (project.generated / "model_data.c").resolve()
    text = path.read_text()
    original = ", ".join(str(int(v)) for v in bias) + ","
    assert text.count(original) == 1
    edited = text.replace(original, ", ".join(str(int(v)) for v in wrong) + ",")
    findings = [f for f in unscaled_bias.check(context(project.root, project.project, {path: edited}, CACHE))]
    (finding,) = [f for f in findings if f.code is Code.UNSCALED_BIAS]
    c = differ[0]
    assert finding.message.startswith(f"model_l1_dw1_bias[{c}] is {wrong[c]}, but layer 'dw1'")
    assert f"with s_in[{c}] = {s_in[c]:.6g}, s_w[{c}] = {s_w[c]:.6g})" in finding.message
    assert finding.data["expected"] == [int(v) for v in bias]


def test_params_checks_catch_a_wrong_depthwise_bias_scale_in_the_json(project: GeneratedProject) -> None:
    doc = json.loads(project.params.read_text())
    s_in = doc["tensors"]["a1"]["scale"]
    doc["tensors"]["dw1.bias"]["scale"][2] = max(s_in) * doc["tensors"]["dw1.weight"]["scale"][2]
    path = project.params.resolve()
    ctx = context(project.root, project.project, {path: pj.dump(doc)}, CACHE)
    (finding,) = params_json.check(ctx)
    assert finding.code is Code.SUSPICIOUS_SCALE
    assert finding.message.startswith('$.tensors["dw1.bias"].scale[2]: ')
    assert f"s_in[2] {s_in[2]:.6g}" in finding.message
