"""Small models for the firmware's input/output contract: one NCHW (PyTorch-style) and one NHWC-origin.

The NHWC-origin model is written the way tf2onnx converts a Keras model: the NHWC input is transposed
to NCHW before the first convolution (Transpose perm [0,3,1,2]) and the 4-D output transposed back
(perm [0,2,3,1]). Height, width and channels all differ, so any permutation of them shows as garbage.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HEIGHT, WIDTH, CHANNELS = 6, 10, 3


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": rng.normal(0, 0.4, (8, CHANNELS, 3, 3)).astype(np.float32),
        "b1": rng.normal(0, 0.1, 8).astype(np.float32),
        "w2": rng.normal(0, 0.3, (5, 8, 3, 3)).astype(np.float32),
        "b2": rng.normal(0, 0.1, 5).astype(np.float32),
    }


def _convs(x: str, y: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Conv", [x, "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], [y], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
    ]


def _model(nodes: list[onnx.NodeProto], name: str, x_shape: list[int], y_shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, y_shape)],
        [numpy_helper.from_array(v, k) for k, v in _weights(7).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def nchw_model() -> onnx.ModelProto:
    """input (1, C, H, W) -> conv -> relu -> conv/2 -> output (1, 5, H/2, W/2)."""
    return _model(
        _convs("input", "output"), "nchw_cnn", [1, CHANNELS, HEIGHT, WIDTH], [1, 5, HEIGHT // 2, WIDTH // 2]
    )


def nhwc_model() -> onnx.ModelProto:
    """The same network as tf2onnx writes a Keras one: input (1, H, W, C), output (1, H/2, W/2, 5)."""
    nodes = [
        helper.make_node("Transpose", ["input"], ["input_nchw"], name="to_nchw", perm=[0, 3, 1, 2]),
        *_convs("input_nchw", "conv_out"),
        helper.make_node("Transpose", ["conv_out"], ["output"], name="to_nhwc", perm=[0, 2, 3, 1]),
    ]
    return _model(nodes, "nhwc_cnn", [1, HEIGHT, WIDTH, CHANNELS], [1, HEIGHT // 2, WIDTH // 2, 5])


def samples(count: int, seed: int = 0) -> np.ndarray:
    """Images in NHWC, (count, H, W, C): smooth enough that a permuted image is a different image."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0, 1, (count, HEIGHT, WIDTH, CHANNELS))
    ramp = np.linspace(-1, 1, HEIGHT)[None, :, None, None] + np.linspace(0, 2, WIDTH)[None, None, :, None]
    return (0.5 * base + ramp * np.array([1.0, -0.5, 0.25])).astype(np.float32)
