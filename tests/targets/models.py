"""The fixture model the target tests build against: an ONNX file and its quant params, made here.

fixtures/maxpool/ is a hand-written stand-in for `fixpoint generate` output: two 2x2/2 max pools on a
4x4x2 input, calling arm_max_pool_s8. The ONNX model below is the same network, so the reference
executor (int8_exec) run on its quantized graph is what the fixture firmware must reproduce.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MAXPOOL_SRC = FIXTURES / "maxpool"


def maxpool_onnx() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p0"], name="pool_a", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxPool", ["p0"], ["p1"], name="pool_b", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    graph = helper.make_graph(
        nodes,
        "maxpool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("p1", TensorProto.FLOAT, [1, 2, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def write_maxpool_project(folder: Path, node_names: Sequence[str] = ()) -> tuple[Path, Path]:
    """maxpool.onnx and maxpool.params.json in `folder`, quantized on seeded random data; `node_names`
    renames the pools."""
    from quantcore import pipeline
    from quantcore.data import DataSet
    from quantcore.quantize import params_json

    model = maxpool_onnx()
    for node, name in zip(model.graph.node, node_names, strict=False):
        node.name = name
    model_path = folder / "maxpool.onnx"
    onnx.save(model, model_path)
    loaded = pipeline.load_model(model_path)
    x = np.random.default_rng(0).normal(size=(16, 2, 4, 4)).astype(np.float32)
    result = pipeline.quantize(loaded, DataSet(x))
    params_path = folder / "maxpool.params.json"
    params_json.write(params_path, result.document)
    return model_path, params_path
