"""OnnxFloat's session for evaluate (for_evaluation) runs onnxruntime's graph optimizations except
constant folding: every IR activation still comes back, within float32 rounding of quantize's
unoptimized run, with the same bits whatever the batch; a constant subgraph in the model is left for the
run, not computed when the session is made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore import pipeline
from quantcore.runtime import onnx_float
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("optimized") / "small.onnx"
    onnx.save(small_cnn(seed=11), path)
    return path


def _x(n: int) -> np.ndarray:
    return np.random.default_rng(2).uniform(0, 1, (n, 1, 16, 16)).astype(np.float32)


def test_every_activation_comes_back_within_float32_rounding_of_an_unoptimized_run(path: Path) -> None:
    plain, float_model = pipeline.load_model(path).float_model, pipeline.load_model(path).float_model
    assert isinstance(float_model, onnx_float.OnnxFloat) and isinstance(plain, onnx_float.OnnxFloat)
    float_model.for_evaluation()
    levels = ort.GraphOptimizationLevel
    for model, level in ((float_model, levels.ORT_ENABLE_ALL), (plain, levels.ORT_DISABLE_ALL)):
        assert model._session.session.get_session_options().graph_optimization_level == level
    name = float_model.graph.inputs[0]
    got = float_model.activations({name: _x(32)}, layout=False)
    expected = plain.activations({name: _x(32)}, layout=False)
    wanted = float_model._session.wanted
    # the layers' outputs, each the last tensor of a Conv + BatchNorm + Relu (or Clip) onnxruntime fuses
    assert {"relu1", "relu6", "relu2", "logits"} <= set(wanted)
    for tensor in wanted:
        # fusion and the blocked layout reorder float32 operations: a few ulps of the tensor's magnitude
        scale = float(np.max(np.abs(expected[tensor])))
        np.testing.assert_allclose(got[tensor], expected[tensor], rtol=0, atol=1e-5 * scale, err_msg=tensor)


def test_a_sample_has_the_same_bits_in_any_batch(path: Path) -> None:
    """evaluate sums its figures per part of a batch: they must not depend on how samples are batched."""
    float_model = pipeline.load_model(path).float_model
    assert isinstance(float_model, onnx_float.OnnxFloat)
    float_model.for_evaluation()
    name = float_model.graph.inputs[0]
    x = _x(19)
    whole = float_model.activations({name: x})
    for size in (1, 4, 7):
        for start in range(0, len(x), size):
            part = float_model.activations({name: x[start : start + size]})
            for tensor, value in whole.items():
                np.testing.assert_array_equal(part[tensor], value[start : start + size], err_msg=tensor)


def test_a_constant_subgraph_is_not_computed_when_the_session_is_made(tmp_path: Path) -> None:
    """Constant folding is the optimizer left out (UNSAFE_OPTIMIZERS): the Add of two initializers is
    still a node of the model onnxruntime optimized, while the Conv + Relu beside it were fused."""
    inits = [
        numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w"),
        numpy_helper.from_array(np.full((1, 4, 1, 1), 2.0, np.float32), "a"),
        numpy_helper.from_array(np.full((1, 4, 1, 1), 3.0, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["a", "b"], ["ab"], name="constant_add"),
        helper.make_node("Mul", ["r", "ab"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    dump = tmp_path / "optimized.onnx"
    session = onnx_float.inference_session(model.SerializeToString(), 1, optimized=True, dump=str(dump))
    optimized = onnx.load(dump)
    assert "constant_add" in {n.name for n in optimized.graph.node}
    assert "relu" not in {n.name for n in optimized.graph.node}  # fused into the convolution
    y = session.run(None, {"x": np.ones((1, 1, 8, 8), np.float32)})[0]
    np.testing.assert_array_equal(y, np.full((1, 4, 6, 6), 45.0, np.float32))
