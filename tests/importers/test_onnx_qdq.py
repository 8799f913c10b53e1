"""QDQ models written by ONNX Runtime's quantize_static: Q/DQ nodes stripped, their exact scales kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from quantcore.errors import ModelError
from quantcore.importers import import_onnx
from quantcore.ir import DType, Op
from tests import needs

from .models import data, model, rng, value

quantization = needs.module("onnxruntime.quantization", "onnxruntime.quantization is needed")


def _float_model(path: Path) -> None:
    r = rng(40)
    inits = {
        "w": r.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "b": r.standard_normal(4).astype(np.float32),
        "fw": r.standard_normal((5, 4 * 6 * 6)).astype(np.float32),
        "fb": r.standard_normal(5).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    onnx.save(model(nodes, [value("x", [1, 3, 12, 12])], [value("y", [1, 5])], inits, opset=13), path)


class _Reader:
    def __init__(self) -> None:
        r = rng(41)
        self._batches = iter([{"x": r.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)


def _quantize(tmp_path: Path, activation: Any) -> Path:
    source, target = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    _float_model(source)
    quantization.quantize_static(
        str(source),
        str(target),
        _Reader(),  # type: ignore[arg-type]
        quant_format=quantization.QuantFormat.QDQ,
        per_channel=True,
        activation_type=activation,
        weight_type=quantization.QuantType.QInt8,
    )
    return target


def _inits(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_quantize_static_scales_are_kept_exactly(tmp_path: Path, activation: str) -> None:
    path = _quantize(tmp_path, getattr(quantization.QuantType, activation))
    qdq = onnx.load(path)
    inits = _inits(qdq)
    g = import_onnx(path)
    assert g.meta["qdq"] is True
    ops = [n.op for n in g.nodes if n.op is not Op.RELU]  # ONNX Runtime may remove a ReLU it can fold
    assert ops == [Op.CONV2D, Op.MAX_POOL, Op.RESHAPE, Op.FULLY_CONNECTED]
    assert g.inputs == ("x",) and g.outputs == ("y",)
    offset = -128 if activation == "QUInt8" else 0
    checked = 0
    for node in qdq.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        scale, zero_point = inits[node.input[1]], inits[node.input[2]]
        if node.op_type == "QuantizeLinear":
            # The activation the pair quantized (the graph output keeps its name 'y').
            name = "y" if node.input[0] == "y_QuantizeLinear_Input" else node.input[0]
            quant = g.tensor(name).quant
            assert quant is not None and quant.dtype is DType.INT8 and quant.axis is None
            assert quant.scale.dtype == np.float32 and np.array_equal(quant.scale, scale)
            assert np.array_equal(quant.zero_point, zero_point.astype(np.int64) + offset)
            checked += 1
        elif node.input[0] in inits:  # a weight or a bias
            tensor = g.tensor(node.output[0])
            quant = tensor.quant
            q = inits[node.input[0]]
            assert quant is not None and quant.axis == 0 and np.array_equal(quant.scale, scale)
            assert quant.dtype is (DType.INT32 if q.dtype == np.int32 else DType.INT8)
            assert np.array_equal(quant.zero_point, zero_point.astype(np.int64))
            expected = (q.astype(np.int64) - zero_point.reshape(-1, *[1] * (q.ndim - 1))).astype(np.float32)
            expected = expected * scale.reshape(-1, *[1] * (q.ndim - 1))
            assert tensor.data is not None and np.array_equal(tensor.data, expected)
            checked += 1
    assert checked >= 8
    assert not any(t.dtype is not DType.FLOAT32 for t in g.tensors.values())
    conv = g.nodes[0]
    assert g.tensor(conv.inputs[1]).quant.axis == 0  # type: ignore[union-attr]


def test_a_dequantize_of_an_input_is_not_a_float_model() -> None:
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")]
    inits = {"s": np.array(0.1, np.float32), "z": np.array(0, np.int8)}
    m = model(nodes, [value("x", [1, 4], onnx.TensorProto.INT8)], [value("y", [1, 4])], inits)
    with pytest.raises(ModelError, match="node 'dq': DequantizeLinear reads 'x', which is neither"):
        import_onnx(data(m))


def test_a_lone_quantize_at_the_output_is_rejected() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"], name="q"),
    ]
    inits = {"s": np.array(0.1, np.float32), "z": np.array(0, np.int8)}
    m = model(nodes, [value("x", [1, 4])], [value("y", [1, 4], onnx.TensorProto.INT8)], inits)
    with pytest.raises(ModelError, match=r"node 'q'.*only by DequantizeLinear"):
        import_onnx(data(m))


def test_hand_written_qdq_pair_with_per_tensor_weights() -> None:
    wq = np.array([[1, -2], [3, 4], [-5, 6]], np.int8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="qx"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dqx"),
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], name="dqw"),
        helper.make_node("MatMul", ["xd", "w"], ["y"], name="mm"),
    ]
    inits = {
        "xs": np.array(0.25, np.float32),
        "xz": np.array(3, np.int8),
        "wq": wq,
        "ws": np.array(0.5, np.float32),
    }
    g = import_onnx(data(model(nodes, [value("x", [1, 3])], [value("y", [1, 2])], inits)))
    (fc,) = g.nodes
    assert fc.inputs == ("x", "w:weight", "")
    assert np.array_equal(g.constant("w:weight"), wq.T.astype(np.float32) * 0.5)
    wquant, xquant = g.tensor("w:weight").quant, g.tensor("x").quant
    assert wquant is not None and wquant.axis is None and float(wquant.scale) == 0.5
    assert xquant is not None and float(xquant.scale) == 0.25 and int(xquant.zero_point) == 3
