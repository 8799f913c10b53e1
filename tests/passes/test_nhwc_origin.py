"""to_nhwc drops the transposes a TensorFlow-converted model wraps its NHWC input and output in - only
where that is certain - and records each 4-D input's and output's layout in the model file."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper

from quantcore import pipeline
from quantcore.ir import Layout, Op
from quantcore.ir.io_layout import MODEL_LAYOUTS, model_shape
from tests.targets.nhwc_models import nchw_model, nhwc_model


def _load(model: onnx.ModelProto, tmp_path: Path) -> pipeline.LoadedModel:
    onnx.save(model, tmp_path / "m.onnx")
    return pipeline.load_model(tmp_path / "m.onnx")


def test_the_tf2onnx_transposes_go_and_the_layouts_are_recorded(tmp_path: Path) -> None:
    graph = _load(nhwc_model(), tmp_path).graph
    assert [n.op for n in graph.nodes] == [Op.CONV2D, Op.CONV2D]
    assert graph.meta[MODEL_LAYOUTS] == {"input": "NHWC", "output": "NHWC"}
    assert graph.tensor("input").shape == (1, 6, 10, 3) and graph.tensor("input").layout is Layout.NHWC
    assert model_shape(graph, "input") == (1, 6, 10, 3) and model_shape(graph, "output") == (1, 3, 5, 5)


def test_an_nchw_model_is_recorded_as_nchw(tmp_path: Path) -> None:
    graph = _load(nchw_model(), tmp_path).graph
    assert graph.meta[MODEL_LAYOUTS] == {"input": "NCHW", "output": "NCHW"}
    assert model_shape(graph, "input") == (1, 3, 6, 10) and graph.tensor("input").shape == (1, 6, 10, 3)


def test_an_input_read_by_anything_but_the_transpose_is_left_as_it_is(tmp_path: Path) -> None:
    """An Add reads the input before the transpose: the model computes on it as it states (NCHW as far as
    the converter knows), so nothing is certain and the transpose stays."""
    model = nhwc_model()
    model.graph.node[0].input[0] = "doubled"
    model.graph.node.insert(0, helper.make_node("Add", ["input", "input"], ["doubled"], name="also_reads"))
    graph = _load(model, tmp_path).graph
    assert graph.meta[MODEL_LAYOUTS] == {"input": "NCHW", "output": "NHWC"}
    assert Op.TRANSPOSE in [n.op for n in graph.nodes]
