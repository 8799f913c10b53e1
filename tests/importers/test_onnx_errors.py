"""Bad models: each gives one ModelError / UnsupportedError naming the file, the node and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import NodeProto, TensorProto, helper

from quantcore.errors import ModelError, UnsupportedError
from quantcore.importers import import_onnx
from quantcore.support import NO_COUNTERPART, ONNX_OPS

from .models import data, model, rng, value
from .test_onnx_ops import _cnn, _reduction


def _write(tmp_path: Path, raw: bytes, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated_file(tmp_path: Path, keep: float) -> None:
    raw, _ = _cnn()
    path = _write(tmp_path, raw[: int(len(raw) * keep)])
    with pytest.raises(ModelError) as info:
        import_onnx(path)
    assert type(info.value) is ModelError and str(path) in str(info.value)


def test_garbage_and_empty_files(tmp_path: Path) -> None:
    for raw in (b"", b"\xff" * 64, rng(30).integers(0, 256, 1000, dtype=np.uint8).tobytes()):
        path = _write(tmp_path, raw)
        with pytest.raises(ModelError, match=str(path)):
            import_onnx(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot read the model file"):
        import_onnx(tmp_path / "absent.onnx")


def test_dynamic_height_names_the_tensor_and_the_fix(tmp_path: Path) -> None:
    w = np.ones((2, 3, 3, 3), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1")
    m = model([node], [value("x", ["N", 3, "H", 32])], [value("y", ["N", 2, "H2", 30])], {"w": w})
    path = _write(tmp_path, data(m))
    with pytest.raises(ModelError) as info:
        import_onnx(path)
    message = str(info.value)
    assert str(path) in message and "'conv1'" in message and "'x'" in message and "'H'" in message
    assert "static input shapes" in message


def test_nan_weight_names_the_initializer_and_its_reader(tmp_path: Path) -> None:
    w = np.ones((2, 3, 3, 3), np.float32)
    w[1, 2, 0, 1] = np.nan
    node = helper.make_node("Conv", ["x", "conv.weight"], ["y"], name="conv1")
    path = _write(
        tmp_path, data(model([node], [value("x", [1, 3, 8, 8])], [value("y", None)], {"conv.weight": w}))
    )
    with pytest.raises(ModelError) as info:
        import_onnx(path)
    message = str(info.value)
    assert str(path) in message and "'conv1'" in message and "'conv.weight'" in message and "NaN" in message
    assert "(1, 2, 0, 1)" in message


def test_gru_is_unsupported_with_the_tables_reason(tmp_path: Path) -> None:
    r = rng(31)
    inits = {
        "W": r.standard_normal((1, 12, 3)).astype(np.float32),
        "R": r.standard_normal((1, 12, 4)).astype(np.float32),
    }
    node = helper.make_node("GRU", ["x", "W", "R"], ["y"], name="encoder/gru", hidden_size=4)
    path = _write(tmp_path, data(model([node], [value("x", [5, 1, 3])], [value("y", None)], inits)))
    with pytest.raises(UnsupportedError) as info:
        import_onnx(path)
    error = info.value
    assert error.op_type == "GRU" and error.node == "encoder/gru" and error.reason == NO_COUNTERPART["GRU"]
    assert str(path) in str(error) and "CMSIS-NN has no GRU kernel" in str(error)


def test_pad_reflect_is_unsupported(tmp_path: Path) -> None:
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad1", mode="reflect")
    inits = {"pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    path = _write(tmp_path, data(model([node], [value("x", [1, 1, 4, 4])], [value("y", None)], inits)))
    with pytest.raises(UnsupportedError) as info:
        import_onnx(path)
    (constraint,) = [c for c in ONNX_OPS["Pad"].constraints if c.name == "pad_mode_constant"]
    assert info.value.reason == "Its mode attribute is 'reflect'. " + constraint.reason
    assert str(info.value) == f"{path}: node 'pad1': Pad is not supported: {info.value.reason}"


X = [value("x", [1, 2, 4, 4])]
Y = [value("y", [1, 2, 3, 3])]
_MAXPOOL = {"kernel_shape": [2, 2]}


@pytest.mark.parametrize(
    ("node", "inputs", "outputs", "constraint", "fact"),
    [
        (
            helper.make_node("MaxPool", ["x"], ["y"], name="n", storage_order=1, **_MAXPOOL),
            X,
            Y,
            "maxpool_storage_order_default",
            "Its storage_order attribute is 1.",
        ),
        (
            helper.make_node("MaxPool", ["x"], ["y"], name="n", dilations=[2, 2], **_MAXPOOL),
            X,
            [value("y", [1, 2, 2, 2])],
            "pool_dilations_one",
            "Its dilations attribute is [2, 2].",
        ),
        (
            helper.make_node("MaxPool", ["x"], ["y", "idx"], name="n", **_MAXPOOL),
            X,
            [*Y, value("idx", [1, 2, 3, 3], TensorProto.INT64)],
            "maxpool_no_indices",
            "Its output(s) 'idx' are read by the graph.",
        ),
        (
            helper.make_node("Dropout", ["x"], ["y", "mask"], name="n"),
            X,
            [value("y", [1, 2, 4, 4]), value("mask", [1, 2, 4, 4], TensorProto.BOOL)],
            "dropout_inference",
            "Its output(s) 'mask' are read by the graph.",
        ),
        (
            helper.make_node("MatMul", ["x", "x2"], ["y"], name="n"),
            [value("x", [1, 4]), value("x2", [4, 3])],
            [value("y", [1, 3])],
            "matmul_b_constant_2d",
            "Its B input 'x2' is computed at run time.",
        ),
        (
            helper.make_node("Clip", ["x", "x2"], ["y"], name="n"),
            [*X, value("x2", [])],
            [value("y", [1, 2, 4, 4])],
            "clip_bounds_constant",
            "Its input(s) 'x2' are computed at run time, not constants.",
        ),
    ],
)
def test_attribute_constraints(
    node: NodeProto, inputs: list[Any], outputs: list[Any], constraint: str, fact: str
) -> None:
    with pytest.raises(UnsupportedError) as info:
        import_onnx(data(model([node], inputs, outputs)), name="bad.onnx")
    (expected,) = [c for c in ONNX_OPS[info.value.op_type].constraints if c.name == constraint]
    assert info.value.reason == f"{fact} {expected.reason}" and info.value.node == "n"
    assert str(info.value).startswith("bad.onnx: node 'n': ")


def test_negative_pads_onnx_forbids_are_reported_by_shape_inference() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="crop", pads=[-1, 0, 0, 0])
    m = model(
        [node],
        [value("x", [1, 1, 5, 5])],
        [value("y", [1, 1, 2, 3])],
        {"w": np.ones((1, 1, 3, 3), np.float32)},
    )
    with pytest.raises(ModelError, match=r"shape inference failed.*crop.*negative"):
        import_onnx(data(m), name="crop.onnx")


def test_negative_pad_amounts_crop_and_are_unsupported() -> None:
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="crop")
    inits = {"pads": np.array([0, 0, -1, 0, 0, 0, 0, 0], np.int64)}
    with pytest.raises(UnsupportedError, match="Negative Pad amounts crop"):
        import_onnx(data(model([node], [value("x", [1, 1, 4, 4])], [value("y", None)], inits)))


def test_one_dimensional_conv_is_unsupported() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1d")
    m = model([node], [value("x", [1, 2, 9])], [value("y", None)], {"w": np.ones((3, 2, 3), np.float32)})
    with pytest.raises(UnsupportedError, match="Only 2-D spatial layers"):
        import_onnx(data(m))


def test_unknown_and_foreign_ops() -> None:
    node = helper.make_node("Erf", ["x"], ["y"], name="erf")
    with pytest.raises(UnsupportedError, match="no kernel for ONNX Erf"):
        import_onnx(data(model([node], [value("x", [1, 3])], [value("y", None)])))
    custom = helper.make_node("FusedConv", ["x"], ["y"], name="fused", domain="com.microsoft")
    m = model([custom], [value("x", [1, 3])], [value("y", [1, 3])])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedError, match=r"'com\.microsoft' domain"):
        import_onnx(data(m))


def test_non_float_input_and_old_opset() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    m = model([node], [value("x", [1, 3], TensorProto.DOUBLE)], [value("y", [1, 3], TensorProto.DOUBLE)])
    with pytest.raises(ModelError, match="graph input 'x' is double"):
        import_onnx(data(m))
    with pytest.raises(ModelError, match="opset 6"):
        import_onnx(data(model([node], [value("x", [1, 3])], [value("y", [1, 3])], opset=6)))


def test_integer_activation_is_rejected() -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["i"], name="cast", to=TensorProto.INT64),
        helper.make_node("Identity", ["i"], ["y"], name="id"),
    ]
    m = model(nodes, [value("x", [1, 3])], [value("y", [1, 3], TensorProto.INT64)])
    with pytest.raises(UnsupportedError, match="Cast"):
        import_onnx(data(m))


def _reduce(op: str, shape: list[int], axes: list[int] | None, keepdims: int = 1) -> bytes:
    """One Reduce* node of opset 20 (axes as an input), as torch's default exporter writes it."""
    return data(_reduction(op, 20, axes, keepdims, tuple(shape)))


@pytest.mark.parametrize(
    ("op", "shape", "axes", "keepdims", "does"),
    [
        ("ReduceMean", [1, 4, 8, 8], [1], 1, "averages over axes [1]"),
        ("ReduceMean", [2, 4, 8, 8], [0, 2, 3], 0, "averages over axes [0, 2, 3]"),
        ("ReduceMean", [1, 4, 8, 8], None, 0, "averages over axes [0, 1, 2, 3]"),
        ("ReduceMean", [1, 4, 8], [2], 0, "averages over axes [2]"),
        ("ReduceMax", [1, 4, 8, 8], [-3], 1, "takes the maximum over axes [1]"),
    ],
)
def test_a_reduction_that_is_no_pool_says_what_it_does(
    op: str, shape: list[int], axes: list[int] | None, keepdims: int, does: str
) -> None:
    with pytest.raises(UnsupportedError) as info:
        import_onnx(_reduce(op, shape, axes, keepdims), name="reduce.onnx")
    (constraint,) = ONNX_OPS[op].constraints
    fact = f"It {does} of its {len(shape)}-D input of shape {tuple(shape)} (keepdims={keepdims})."
    assert info.value.reason == f"{fact} {constraint.reason}"
    assert str(info.value) == f"reduce.onnx: node 'reduce': {op} is not supported: {info.value.reason}"
    # The advice is what would work for this node, never "export nn.AdaptiveAvgPool2d(1) instead of
    # x.mean((2, 3))": torch's default exporter writes that very layer as a ReduceMean.
    assert "AdaptiveAvgPool2d" not in info.value.reason


def test_a_sum_over_h_and_w_is_told_the_mean_that_maps() -> None:
    with pytest.raises(UnsupportedError) as info:
        import_onnx(_reduce("ReduceSum", [1, 4, 8, 8], [2, 3]), name="sum.onnx")
    assert info.value.reason == NO_COUNTERPART["ReduceSum"]
    assert (
        "use x.mean((2, 3)) and multiply the weights of the layer that reads it by H*W" in info.value.reason
    )
