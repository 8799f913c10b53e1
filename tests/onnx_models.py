"""Small float ONNX models built with onnx.helper for tests (no binary fixtures in the repo)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _normal(rng: np.random.Generator, name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)


def _opset13(graph: onnx.GraphProto, full_check: bool = False) -> onnx.ModelProto:
    """The graph as a checked opset-13 model (IR version 8, as the importers' tests expect)."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=full_check)
    return model


def small_cnn(seed: int = 0, batch: int | str = "N") -> onnx.ModelProto:
    """Conv-BN-ReLU, MaxPool, depthwise Conv-Clip(0,6), Conv1x1-ReLU, GAP, Flatten, Gemm, Softmax."""
    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return _normal(rng, name, *shape, scale=scale)

    inits = [
        init("c1.w", 8, 1, 3, 3, scale=0.5),
        init("c1.b", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn.g"),
        init("bn.beta", 8, scale=0.1),
        init("bn.mean", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "bn.var"),
        init("dw.w", 8, 1, 3, 3),
        init("dw.b", 8, scale=0.1),
        init("pw.w", 12, 8, 1, 1),
        init("pw.b", 12, scale=0.1),
        init("fc.w", 10, 12),
        init("fc.b", 10, scale=0.1),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c1", "bn.g", "bn.beta", "bn.mean", "bn.var"], ["bn1"], name="bn1"
        ),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Conv", ["pool1", "dw.w", "dw.b"], ["dw"], name="dwconv", group=8, pads=[1, 1, 1, 1]
        ),
        helper.make_node("Clip", ["dw", "zero", "six"], ["relu6"], name="relu6"),
        helper.make_node("Conv", ["relu6", "pw.w", "pw.b"], ["pw"], name="pwconv"),
        helper.make_node("Relu", ["pw"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    return _opset13(graph)


def outlier_cnn(seed: int = 0, factor: float = 40.0, batch: int | str = "N") -> onnx.ModelProto:
    """Conv-ReLU, MaxPool, Conv-ReLU, GAP, Flatten, Gemm without BatchNorm, where channel 2 of the
    first conv is `factor` times wider than the rest and the second conv reads it `factor` times
    weaker: the float function is that of the unscaled network, the first activation has an outlier."""
    rng = np.random.default_rng(seed)
    c1w = rng.normal(0, 0.5, (8, 1, 3, 3)).astype(np.float32)
    c1b = rng.normal(0.1, 0.1, 8).astype(np.float32)
    c2w = rng.normal(0, 0.3, (12, 8, 3, 3)).astype(np.float32)
    c1w[2] *= factor
    c1b[2] *= factor
    c2w[:, 2] /= factor
    inits = [
        numpy_helper.from_array(c1w, "c1.w"),
        numpy_helper.from_array(c1b, "c1.b"),
        numpy_helper.from_array(c2w, "c2.w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 12).astype(np.float32), "c2.b"),
        numpy_helper.from_array(rng.normal(0, 0.3, (10, 12)).astype(np.float32), "fc.w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "fc.b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "c2.w", "c2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["relu2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["relu2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "outlier_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    return _opset13(graph)


def residual_cnn(seed: int = 0, batch: int | str = 1) -> onnx.ModelProto:
    """Every layer kind the code generator emits, in one small network (1x12x12 in, 10 classes out):
    Conv-BN-ReLU (padded), MaxPool, a residual block (depthwise Conv-Clip(0,6), 1x1 Conv, Add with the
    block's input, ReLU), Mul by a second 1x1 branch, Pad + strided dilated Conv, Concat of two branches,
    AveragePool (stride 1), Flatten of a 2x2x12 map, Gemm, Softmax."""
    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return _normal(rng, name, *shape, scale=scale)

    inits = [
        init("c1.w", 8, 1, 3, 3, scale=0.5),
        init("c1.b", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn.g"),
        init("bn.beta", 8, scale=0.1),
        init("bn.mean", 8, scale=0.1),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "bn.var"),
        init("dw.w", 8, 1, 3, 3),
        init("dw.b", 8, scale=0.1),
        init("pw.w", 8, 8, 1, 1),
        init("pw.b", 8, scale=0.1),
        init("gate.w", 8, 8, 1, 1),
        init("gate.b", 8, scale=0.1),
        init("c2.w", 6, 8, 3, 3, scale=0.2),
        init("c2.b", 6, scale=0.1),
        init("c3.w", 6, 8, 1, 1),
        init("c3.b", 6, scale=0.1),
        init("fc.w", 10, 12 * 2 * 2, scale=0.2),
        init("fc.b", 10, scale=0.1),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c1", "bn.g", "bn.beta", "bn.mean", "bn.var"], ["bn1"], name="bn1"
        ),
        helper.make_node("Relu", ["bn1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Conv", ["pool1", "dw.w", "dw.b"], ["dw"], name="dwconv", group=8, pads=[1, 1, 1, 1]
        ),
        helper.make_node("Clip", ["dw", "zero", "six"], ["relu6"], name="relu6"),
        helper.make_node("Conv", ["relu6", "pw.w", "pw.b"], ["pw"], name="pwconv"),
        helper.make_node("Add", ["pw", "pool1"], ["res"], name="residual"),
        helper.make_node("Relu", ["res"], ["relu2"], name="relu2"),
        helper.make_node("Conv", ["relu2", "gate.w", "gate.b"], ["gate"], name="gate"),
        helper.make_node("Mul", ["relu2", "gate"], ["gated"], name="gating"),
        helper.make_node("Pad", ["gated", "pads"], ["padded"], name="pad", mode="constant"),
        helper.make_node(
            "Conv",
            ["padded", "c2.w", "c2.b"],
            ["c2"],
            name="conv2",
            strides=[2, 2],
            dilations=[2, 2],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("Conv", ["gated", "c3.w", "c3.b"], ["c3full"], name="conv3"),
        helper.make_node(
            "AveragePool", ["c3full"], ["c3"], name="pool3", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node("Concat", ["c2", "c3"], ["cat"], name="concat", axis=1),
        helper.make_node(
            "AveragePool", ["cat"], ["pool2"], name="pool2", kernel_shape=[2, 2], strides=[1, 1]
        ),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "residual_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 12, 12])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    return _opset13(graph, full_check=True)


def depthwise_cnn(seed: int = 0, batch: int | str = 1) -> onnx.ModelProto:
    """Tensors read only by depthwise convolutions (1x12x12 in, 10 classes out): Conv-Clip(0,6) whose
    channels span ranges 1x to 16x apart -> depthwise Conv-ReLU -> 1x1 Conv-ReLU -> depthwise Conv with
    channel multiplier 2 -> GlobalAveragePool, Flatten, Gemm."""
    rng = np.random.default_rng(seed)
    c1w = rng.normal(0, 0.5, (8, 1, 3, 3)).astype(np.float32)
    c1w *= np.geomspace(1 / 16, 1, 8, dtype=np.float32)[:, None, None, None]
    inits = [
        numpy_helper.from_array(c1w, "c1.w"),
        numpy_helper.from_array(rng.normal(0.05, 0.05, 8).astype(np.float32), "c1.b"),
        _normal(rng, "dw1.w", 8, 1, 3, 3),
        _normal(rng, "dw1.b", 8, scale=0.1),
        _normal(rng, "pw.w", 6, 8, 1, 1),
        _normal(rng, "pw.b", 6, scale=0.1),
        _normal(rng, "dw2.w", 12, 1, 3, 3),
        _normal(rng, "dw2.b", 12, scale=0.1),
        _normal(rng, "fc.w", 10, 12),
        _normal(rng, "fc.b", 10, scale=0.1),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "zero", "six"], ["a1"], name="relu6"),
        helper.make_node("Conv", ["a1", "dw1.w", "dw1.b"], ["d1"], name="dw1", group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["d1"], ["a2"], name="relu2"),
        helper.make_node("Conv", ["a2", "pw.w", "pw.b"], ["p"], name="pw"),
        helper.make_node("Relu", ["p"], ["a3"], name="relu3"),
        helper.make_node("Conv", ["a3", "dw2.w", "dw2.b"], ["d2"], name="dw2", group=6, strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["d2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "depthwise_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 12, 12])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    return _opset13(graph)
