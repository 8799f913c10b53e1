"""The IR float executor agrees with onnxruntime on imported models (pool geometry included)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from quantcore.importers.onnx import import_onnx
from quantcore.ir.io_layout import to_firmware, to_model
from quantcore.passes import prepare
from quantcore.runtime import float_exec
from tests.onnx_models import small_cnn

# onnxruntime computes in float32, the executor in float64: differences are float32 rounding.
TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.mark.parametrize(
    ("pads", "count_include_pad"), [((0, 0, 0, 0), 1), ((1, 1, 1, 1), 1), ((1, 1, 1, 1), 0)]
)
def test_ceil_mode_average_pool_counts_only_declared_padding(
    pads: tuple[int, ...], count_include_pad: int
) -> None:
    node = helper.make_node(
        "AveragePool",
        ["x"],
        ["y"],
        kernel_shape=[3, 3],
        strides=[2, 2],
        pads=list(pads),
        ceil_mode=1,
        count_include_pad=count_include_pad,
    )
    graph = helper.make_graph(
        [node],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, None, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = np.random.default_rng(0).random((1, 2, 6, 6)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    ir = import_onnx(model.SerializeToString())
    np.testing.assert_allclose(float_exec.run(ir, {"x": x}, keep=False)[ir.outputs[0]], expected, **TOL)


def test_prepared_graph_computes_the_onnx_model() -> None:
    model = small_cnn()
    x = np.random.default_rng(1).random((4, 1, 16, 16)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    graph = prepare(import_onnx(model.SerializeToString()))
    out = float_exec.run(graph, {"x": to_firmware(graph, "x", x)}, keep=False)[graph.outputs[0]]
    np.testing.assert_allclose(to_model(graph, graph.outputs[0], out), expected, **TOL)
