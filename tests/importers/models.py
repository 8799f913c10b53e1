"""Small ONNX models built with onnx.helper for the importer tests, and ONNX Runtime to run them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG_SEED = 20260101


def rng(offset: int = 0) -> np.random.Generator:
    return np.random.default_rng(RNG_SEED + offset)


def value(name: str, shape: Sequence[int | str | None] | None, elem_type: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, elem_type, shape)


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test",
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if any(not o.type.tensor_type.HasField("shape") for o in m.graph.output):
        # onnx.checker wants every graph output to have a shape: take the one ONNX infers.
        inferred = {o.name: o for o in onnx.shape_inference.infer_shapes(m).graph.output}
        for o in m.graph.output:
            o.CopyFrom(inferred[o.name])
    return m


def data(m: onnx.ModelProto) -> bytes:
    return m.SerializeToString()


def megabyte_model() -> tuple[bytes, dict[str, np.ndarray]]:
    """A conv + fully connected model with ~2.1 M float weights (8 MB in one matrix), serialized, and its
    initializers: the import test checks them exactly, bench/import_speed.py times the import."""
    r = rng(8)
    inits = {
        "w1": r.standard_normal((128, 64, 3, 3)).astype(np.float32),
        "w2": r.standard_normal((1000, 2048)).astype(np.float32),  # 8 MB
        "b2": r.standard_normal(1000).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[4, 4], strides=[4, 4]),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1),
    ]
    return data(model(nodes, [value("x", [1, 64, 16, 16])], [value("y", None)], inits)), inits


def run_ort(
    m: onnx.ModelProto, feeds: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None
) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    # No graph optimisation: the outputs are ONNX's semantics, not a fused rewrite of them.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return list(session.run(list(outputs) if outputs else None, dict(feeds)))


def conv_model(
    x_shape: Sequence[int | str], w: np.ndarray, opset: int = 17, bias: np.ndarray | None = None, **attrs: Any
) -> onnx.ModelProto:
    inits = {"w": w} if bias is None else {"w": w, "b": bias}
    node = helper.make_node("Conv", ["x", "w"] + ([] if bias is None else ["b"]), ["y"], name="conv", **attrs)
    return model([node], [value("x", x_shape)], [value("y", None)], inits, opset)


def pool_model(op: str, x_shape: Sequence[int], opset: int = 17, **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], name="pool", **attrs)
    return model([node], [value("x", x_shape)], [value("y", None)], {}, opset)
