"""import_onnx, operator by operator: the IR nodes, attributes, shapes and constants, checked exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from quantcore.errors import UnsupportedError
from quantcore.importers import import_onnx
from quantcore.ir import Activation, DType, Layout, Op
from tests.fuzzing import fuzz

from .models import data, megabyte_model, model, rng, run_ort, value


def _cnn(opset: int = 13) -> tuple[bytes, dict[str, np.ndarray]]:
    r = rng()
    inits = {
        "w": r.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "b": r.standard_normal(4).astype(np.float32),
        "fw": r.standard_normal((5, 4 * 6 * 6)).astype(np.float32),
        "fb": r.standard_normal(5).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),  # unnamed
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    m = model(nodes, [value("x", [1, 3, 12, 12])], [value("y", [1, 5])], inits, opset)
    return data(m), inits


def test_small_cnn_imports_exactly() -> None:
    raw, inits = _cnn()
    g = import_onnx(raw, name="cnn")
    assert [(n.name, n.op) for n in g.nodes] == [
        ("conv", Op.CONV2D),
        ("relu", Op.RELU),
        ("MaxPool_2", Op.MAX_POOL),
        ("flat", Op.RESHAPE),
        ("fc", Op.FULLY_CONNECTED),
    ]
    conv, _, pool, flat, fc = g.nodes
    assert conv.inputs == ("x", "w", "b") and conv.outputs == ("c",)
    assert dict(conv.attrs) == {
        "strides": (1, 1),
        "pads": (1, 1, 1, 1),
        "dilations": (1, 1),
        "groups": 1,
        "activation": Activation.NONE,
    }
    assert dict(pool.attrs) == {
        "kernel": (2, 2),
        "strides": (2, 2),
        "pads": (0, 0, 0, 0),
        "ceil_pads": (0, 0),
    }
    assert flat.attrs["shape"] == (1, 144)
    assert fc.inputs == ("f", "fw", "fb") and fc.attrs["activation"] is Activation.NONE
    for name, array in inits.items():
        tensor = g.tensor(name)
        assert tensor.data is not None and tensor.data.dtype == np.float32
        assert np.array_equal(tensor.data, array) and tensor.shape == array.shape
    assert g.tensor("x").shape == (1, 3, 12, 12) and g.tensor("x").layout is Layout.NCHW
    assert g.tensor("c").shape == (1, 4, 12, 12) and g.tensor("p").shape == (1, 4, 6, 6)
    assert g.tensor("f").shape == (1, 144) and g.tensor("f").layout is None
    assert g.inputs == ("x",) and g.outputs == ("y",) and g.name == "cnn"
    assert g.meta["format"] == "onnx" and g.meta["opset"] == 13 and g.meta["qdq"] is False
    assert len(g.meta["sha256"]) == 64 and g.meta["synthesized"] == ()


def test_meta_names_the_file_and_its_hash(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import hashlib

    raw, _ = _cnn()
    path = tmp_path / "cnn.onnx"
    path.write_bytes(raw)
    g = import_onnx(path)
    assert g.meta["source"] == str(path) and g.meta["sha256"] == hashlib.sha256(raw).hexdigest()
    assert g.name == "test"  # the ONNX graph's name


@pytest.mark.parametrize("opset", [11, 13, 17, 21])
def test_opsets_11_to_21(opset: int) -> None:
    raw, _ = _cnn(opset)
    assert import_onnx(raw).nodes[0].op is Op.CONV2D


def test_depthwise_and_dilated_conv() -> None:
    w = rng(1).standard_normal((6, 1, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=3, dilations=[2, 2], strides=[1, 2])
    g = import_onnx(data(model([node], [value("x", [1, 3, 9, 9])], [value("y", None)], {"w": w})))
    (conv,) = g.nodes
    assert conv.inputs == ("x", "w", "") and conv.attrs["groups"] == 3
    assert conv.attrs["dilations"] == (2, 2) and conv.attrs["strides"] == (1, 2)
    assert g.tensor("y").shape == (1, 6, 5, 3)


def test_gemm_transb0_transposes_the_weights_to_out_in() -> None:
    r = rng(2)
    b, c = r.standard_normal((8, 3)).astype(np.float32), r.standard_normal(3).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "B", "C"], ["y"], name="fc")
    g = import_onnx(data(model([node], [value("x", [2, 8])], [value("y", None)], {"B": b, "C": c})))
    (fc,) = g.nodes
    assert fc.inputs == ("x", "B:weight", "C")
    assert np.array_equal(g.constant("B:weight"), b.T) and g.tensor("B:weight").shape == (3, 8)
    assert np.array_equal(g.constant("C"), c)


def test_gemm_alpha_beta_trans_a_and_row_bias() -> None:
    r = rng(3)
    b, c = r.standard_normal((3, 8)).astype(np.float32), r.standard_normal((1, 3)).astype(np.float32)
    node = helper.make_node(
        "Gemm", ["x", "B", "C"], ["y"], name="fc", alpha=0.5, beta=2.0, transA=1, transB=1
    )
    m = model([node], [value("x", [8, 2])], [value("y", None)], {"B": b, "C": c})
    g = import_onnx(data(m))
    transpose, fc = g.nodes
    assert transpose.op is Op.TRANSPOSE and transpose.attrs["perm"] == (1, 0)
    assert transpose.outputs == ("fc:A_T",) and g.meta["synthesized"] == ("fc:A_T",)
    assert fc.inputs == ("fc:A_T", "B:weight", "C:bias")
    assert np.array_equal(g.constant("B:weight"), b * np.float32(0.5))
    assert np.array_equal(g.constant("C:bias"), c.reshape(3) * np.float32(2.0))
    x = r.standard_normal((8, 2)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    ir = x.T @ g.constant("B:weight").T + g.constant("C:bias")
    # alpha is applied to the weights instead of the product: float32 rounding differs by a few ulp.
    np.testing.assert_allclose(ir, expected, rtol=1e-5, atol=1e-6)


def test_matmul_then_add_of_a_vector_is_one_fully_connected() -> None:
    r = rng(4)
    b, bias = r.standard_normal((6, 4)).astype(np.float32), r.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "B"], ["mm"], name="linear"),
        helper.make_node("Add", ["bias", "mm"], ["y"], name="linear_bias"),
    ]
    g = import_onnx(data(model(nodes, [value("x", [1, 6])], [value("y", None)], {"B": b, "bias": bias})))
    (fc,) = g.nodes
    assert (fc.name, fc.op, fc.inputs, fc.outputs) == (
        "linear",
        Op.FULLY_CONNECTED,
        ("x", "B:weight", "bias"),
        ("y",),
    )
    assert np.array_equal(g.constant("B:weight"), b.T) and np.array_equal(g.constant("bias"), bias)
    assert "mm" not in g.tensors


def test_matmul_whose_result_is_also_read_elsewhere_keeps_its_add() -> None:
    r = rng(5)
    b, bias = r.standard_normal((6, 4)).astype(np.float32), r.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "B"], ["mm"], name="linear"),
        helper.make_node("Add", ["mm", "bias"], ["y"], name="add"),
        helper.make_node("Relu", ["mm"], ["z"], name="relu"),
    ]
    m = model(nodes, [value("x", [1, 6])], [value("y", None), value("z", None)], {"B": b, "bias": bias})
    g = import_onnx(data(m))
    assert [n.op for n in g.nodes] == [Op.FULLY_CONNECTED, Op.ADD, Op.RELU]
    assert g.nodes[0].inputs == ("x", "B:weight", "") and g.nodes[1].inputs == ("mm", "bias")


def test_batchnorm_clip_pools_and_elementwise() -> None:
    r = rng(6)
    c = 4
    bn = {k: r.random(c).astype(np.float32) + 0.5 for k in ("s", "bb", "m", "v")}
    k = r.standard_normal((1, c, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"], name="bn", epsilon=1e-3),
        helper.make_node("Clip", ["n", "", "six"], ["c"], name="clip"),
        helper.make_node("Mul", ["k", "c"], ["mk"], name="scale"),
        helper.make_node("Add", ["mk", "x"], ["a"], name="residual"),
        helper.make_node("GlobalAveragePool", ["a"], ["y"], name="gap"),
    ]
    inits = {**bn, "k": k, "six": np.array(6.0, np.float32)}
    g = import_onnx(data(model(nodes, [value("x", [1, c, 5, 5])], [value("y", None)], inits)))
    assert [n.op for n in g.nodes] == [Op.BATCH_NORM, Op.CLIP, Op.MUL, Op.ADD, Op.GLOBAL_AVG_POOL]
    bn_node, clip, mul, add, _ = g.nodes
    assert bn_node.inputs == ("x", "s", "bb", "m", "v") and bn_node.attrs["epsilon"] == pytest.approx(1e-3)
    assert dict(clip.attrs) == {"min": None, "max": 6.0}
    assert mul.inputs == ("c", "k")  # the constant goes second
    assert add.inputs == ("mk", "x") and add.attrs["activation"] is Activation.NONE
    assert g.tensor("y").shape == (1, c, 1, 1)
    assert "six" not in g.tensors  # Clip bounds are attributes, not tensors


def test_clip_attributes_before_opset_11() -> None:
    node = helper.make_node("Clip", ["x"], ["y"], name="relu6", min=0.0, max=6.0)
    g = import_onnx(data(model([node], [value("x", [1, 3])], [value("y", None)], opset=10)))
    assert dict(g.nodes[0].attrs) == {"min": 0.0, "max": 6.0}


def test_reshape_family_gets_the_static_shape() -> None:
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax"], ["u"], name="unsqueeze"),
        helper.make_node("Squeeze", ["u", "ax"], ["s"], name="squeeze"),
        helper.make_node("Reshape", ["s", "shape"], ["r"], name="reshape"),
        helper.make_node("Flatten", ["r"], ["y"], name="flatten", axis=1),
    ]
    inits = {"ax": np.array([0], np.int64), "shape": np.array([0, -1, 2], np.int64)}
    g = import_onnx(data(model(nodes, [value("x", ["N", 4, 3])], [value("y", None)], inits)), batch=2)
    assert [n.op for n in g.nodes] == [Op.RESHAPE] * 4
    assert [n.attrs["shape"] for n in g.nodes] == [(1, 2, 4, 3), (2, 4, 3), (2, 6, 2), (2, 12)]
    assert "ax" not in g.tensors and "shape" not in g.tensors


def test_shape_arithmetic_is_folded_like_a_dynamic_torch_export() -> None:
    # x.view(x.size(0), -1) exported with a dynamic batch: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="view"),
    ]
    inits = {
        "zero": np.array(0, np.int64),
        "axes": np.array([0], np.int64),
        "minus_one": np.array([-1], np.int64),
    }
    g = import_onnx(data(model(nodes, [value("x", ["batch", 2, 3, 3])], [value("y", None)], inits)), batch=3)
    (view,) = g.nodes
    assert view.op is Op.RESHAPE and view.attrs["shape"] == (3, 18)
    assert set(g.tensors) == {"x", "y"}
    assert all(t.dtype is DType.FLOAT32 for t in g.tensors.values())


def test_constant_nodes_become_float_constants() -> None:
    k = np.arange(3, dtype=np.float32)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.FLOAT, [3], k)),
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Mul", ["k", "half"], ["k2"]),  # constant-only: folded
        helper.make_node("Add", ["x", "k2"], ["y"], name="add"),
    ]
    g = import_onnx(data(model(nodes, [value("x", [1, 3])], [value("y", None)])))
    (add,) = g.nodes
    assert add.inputs == ("x", "k2") and np.array_equal(g.constant("k2"), k * 0.5)
    assert g.constant("k2").dtype == np.float32


@pytest.mark.parametrize(
    ("opset", "shape", "axis", "expected"),
    [(13, (1, 2, 3), -1, 2), (13, (1, 2, 3), -2, 1), (11, (1, 10), 1, 1), (11, (1, 5, 1, 1), 1, 1)],
)
def test_softmax_axis_is_normalised(opset: int, shape: tuple[int, ...], axis: int, expected: int) -> None:
    node = helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=axis)
    g = import_onnx(data(model([node], [value("x", shape)], [value("y", None)], opset=opset)))
    assert [n.op for n in g.nodes] == [Op.SOFTMAX] and g.nodes[0].attrs["axis"] == expected


def test_softmax_before_opset_13_coerces_to_2d() -> None:
    node = helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=1)
    m = model([node], [value("x", [2, 3, 4])], [value("y", None)], opset=11)
    g = import_onnx(data(m))
    assert [n.op for n in g.nodes] == [Op.RESHAPE, Op.SOFTMAX, Op.RESHAPE]
    to_2d, softmax, back = g.nodes
    assert to_2d.attrs["shape"] == (2, 12) and softmax.attrs["axis"] == 1 and back.attrs["shape"] == (2, 3, 4)
    assert back.outputs == ("y",) and g.meta["synthesized"] == ("softmax:2d_in", "softmax:2d_out")
    x = rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    flat = x.reshape(2, 12)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    # exp/sum in numpy vs ONNX Runtime's vectorised exp: a few ulp apart.
    np.testing.assert_allclose((e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4), expected, rtol=1e-5)


def test_concat_pad_transpose_identity_dropout() -> None:
    k = np.ones((1, 1, 2, 2), np.float32)
    nodes = [
        helper.make_node("Concat", ["x", "k"], ["c"], name="cat", axis=-3),
        helper.make_node("Pad", ["c", "pads", "pv"], ["p"], name="pad", mode="constant"),
        helper.make_node("Transpose", ["p"], ["t"], name="t"),
        helper.make_node("Identity", ["t"], ["i"], name="id"),
        helper.make_node("Dropout", ["i"], ["y"], name="drop"),
    ]
    inits = {"k": k, "pads": np.array([0, 0, 1, 0, 0, 0, 0, 2], np.int64), "pv": np.array(0.5, np.float32)}
    g = import_onnx(data(model(nodes, [value("x", [1, 3, 2, 2])], [value("y", None)], inits)))
    assert [n.op for n in g.nodes] == [Op.CONCAT, Op.PAD, Op.TRANSPOSE, Op.IDENTITY, Op.IDENTITY]
    cat, pad, t, _, _ = g.nodes
    assert cat.inputs == ("x", "k") and cat.attrs["axis"] == 1
    assert dict(pad.attrs) == {"pads": (0, 0, 1, 0, 0, 0, 0, 2), "value": 0.5}
    assert t.attrs["perm"] == (3, 2, 1, 0) and g.tensor("y").shape == (4, 3, 4, 1)


def test_pad_with_axes_input_and_attribute_form() -> None:
    node = helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"], name="pad")
    inits = {"pads": np.array([1, 2, 3, 4], np.int64), "axes": np.array([-1, 2], np.int64)}
    g = import_onnx(data(model([node], [value("x", [1, 1, 2, 2])], [value("y", None)], inits, opset=18)))
    assert g.nodes[0].attrs["pads"] == (0, 0, 2, 1, 0, 0, 4, 3) and g.nodes[0].attrs["value"] == 0.0
    old = helper.make_node("Pad", ["x"], ["y"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1], value=-1.0)
    g = import_onnx(data(model([old], [value("x", [1, 1, 2, 2])], [value("y", None)], opset=10)))
    assert dict(g.nodes[0].attrs) == {"pads": (0, 0, 1, 1, 0, 0, 1, 1), "value": -1.0}


@pytest.mark.parametrize("batch", [1, 4])
def test_dynamic_batch_is_fixed(batch: int) -> None:
    w = np.ones((2, 3, 1, 1), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv")
    m = model([node], [value("x", ["N", 3, 4, 4])], [value("y", ["N", 2, 4, 4])], {"w": w})
    g = import_onnx(data(m), batch=batch)
    assert g.tensor("x").shape == (batch, 3, 4, 4) and g.tensor("y").shape == (batch, 2, 4, 4)


def test_megabytes_of_weights_import_exactly() -> None:
    # How fast it imports (vectorised: well under 0.5 s) is bench/import_speed.py's figure, not a test's.
    raw, inits = megabyte_model()
    g = import_onnx(raw)
    assert np.array_equal(g.constant("w2"), inits["w2"])


# -- reductions over H and W: what torch's default (dynamo) exporter writes for adaptive pooling ----------


def _reduction(op: str, opset: int, axes: list[int] | None, keepdims: int, shape=(2, 3, 4, 5)):  # type: ignore[no-untyped-def]
    """A model of one Reduce* node: axes as an input from opset 18 (13 for ReduceSum), else an attribute."""
    axes_input = axes is not None and opset >= (13 if op == "ReduceSum" else 18)
    inputs = ["x", "axes"] if axes_input else ["x"]
    attrs = {"keepdims": keepdims} | ({"axes": axes} if axes is not None and not axes_input else {})
    node = helper.make_node(op, inputs, ["y"], name="reduce", **attrs)
    inits = {"axes": np.array(axes, np.int64)} if axes_input else {}
    return model([node], [value("x", list(shape))], [value("y", None)], inits, opset)


def _float_run(g, x: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    from quantcore.runtime.float_exec import run

    return run(g, {g.inputs[0]: x})[g.outputs[0]]


@pytest.mark.parametrize("opset", [13, 17, 18, 20])
@pytest.mark.parametrize("axes", [[2, 3], [-1, -2], [3, 2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_over_h_and_w_is_global_average_pooling(
    opset: int, axes: list[int], keepdims: int
) -> None:
    m = _reduction("ReduceMean", opset, axes, keepdims)
    g = import_onnx(data(m))
    if keepdims:
        assert [(n.name, n.op) for n in g.nodes] == [("reduce", Op.GLOBAL_AVG_POOL)]
    else:  # the pooled (2, 3, 1, 1) tensor, then the (2, 3) the node outputs
        assert [(n.name, n.op) for n in g.nodes] == [
            ("reduce", Op.GLOBAL_AVG_POOL),
            ("reduce:squeeze", Op.RESHAPE),
        ]
        assert g.tensor("reduce:pooled").shape == (2, 3, 1, 1) and g.meta["synthesized"] == ("reduce:pooled",)
    assert g.tensor("y").shape == ((2, 3, 1, 1) if keepdims else (2, 3))
    x = rng().standard_normal((2, 3, 4, 5)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    np.testing.assert_allclose(_float_run(g, x), expected, rtol=1e-6, atol=1e-6)  # float sums in any order


@pytest.mark.parametrize(("op", "ir_op"), [("ReduceMean", Op.AVG_POOL), ("ReduceMax", Op.MAX_POOL)])
@pytest.mark.parametrize(("axes", "window"), [([2], (4, 1)), ([-1], (1, 5)), ([1, 3], (1, 5))])
def test_reduction_over_one_spatial_axis_is_a_pool_over_that_whole_axis(
    op: str, ir_op: Op, axes: list[int], window: tuple[int, int]
) -> None:
    # Axis 1 of size 1 counts as either: averaging or maximising one value changes nothing.
    m = _reduction(op, 18, axes, 0, shape=(1, 1, 4, 5))
    g = import_onnx(data(m))
    pool, squeeze = g.nodes
    assert (pool.op, squeeze.op) == (ir_op, Op.RESHAPE)
    expected_attrs = {"kernel": window, "strides": window, "pads": (0, 0, 0, 0), "ceil_pads": (0, 0)}
    assert dict(pool.attrs) == expected_attrs | ({"count_include_pad": False} if ir_op is Op.AVG_POOL else {})
    x = rng().standard_normal((1, 1, 4, 5)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    assert g.tensor("y").shape == expected.shape
    np.testing.assert_allclose(_float_run(g, x), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [13, 18, 20])
def test_reduce_max_over_h_and_w_and_global_max_pool_are_a_whole_map_max_pool(opset: int) -> None:
    x = rng().standard_normal((1, 3, 4, 5)).astype(np.float32)
    global_max = helper.make_node("GlobalMaxPool", ["x"], ["y"], name="reduce")
    for m in (
        _reduction("ReduceMax", opset, [2, 3], 1, shape=(1, 3, 4, 5)),
        model([global_max], [value("x", [1, 3, 4, 5])], [value("y", None)], {}, opset),
    ):
        g = import_onnx(data(m))
        (pool,) = g.nodes
        assert pool.op is Op.MAX_POOL and pool.attrs["kernel"] == (4, 5) and pool.attrs["strides"] == (4, 5)
        np.testing.assert_array_equal(_float_run(g, x), run_ort(m, {"x": x})[0])  # a maximum is exact


def test_reduction_whose_axes_all_have_size_one_is_a_reshape() -> None:
    g = import_onnx(data(_reduction("ReduceMean", 18, [2, 3], 0, shape=(1, 3, 1, 1))))
    assert [(n.op, n.attrs["shape"]) for n in g.nodes] == [(Op.RESHAPE, (1, 3))]


def test_cast_like_of_a_constant_to_an_activations_type_is_folded() -> None:
    # torch's exporter without its optimizer: a conv bias made by Expand(CastLike(0.0, input), Shape(w)[0]).
    w = rng().standard_normal((4, 1, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Shape", ["w"], ["out_channels"], start=0, end=1),
        helper.make_node("CastLike", ["zero", "x"], ["zero_f"]),
        helper.make_node("Expand", ["zero_f", "out_channels"], ["bias"]),
        helper.make_node("Conv", ["x", "w", "bias"], ["y"], name="conv"),
    ]
    inits = {"w": w, "zero": np.array(0.0, np.float64)}
    g = import_onnx(data(model(nodes, [value("x", [1, 1, 5, 5])], [value("y", None)], inits, 20)))
    (conv,) = g.nodes
    bias = g.constant(conv.inputs[2])
    assert conv.op is Op.CONV2D and bias.dtype == np.float32 and np.array_equal(bias, np.zeros(4, np.float32))


def test_every_shape_operator_torch_writes_folds_into_the_reshape() -> None:
    # Shape, Gather, Unsqueeze, Range, Slice, Cast, ReduceProd, ConstantOfShape, Mul, Concat: the shape
    # arithmetic of an export with a dynamic batch and without the exporter's optimizer, feeding Reshapes.
    ones = helper.make_tensor("one", TensorProto.INT64, [1], [1])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axis0"], ["n1"]),
        helper.make_node("Range", ["one_s", "four_s", "one_s"], ["chw_index"]),
        helper.make_node("Gather", ["shape", "chw_index"], ["chw"], axis=0),
        helper.make_node("Cast", ["chw"], ["chw_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceProd", ["chw_f"], ["features_f"], keepdims=1),
        helper.make_node("Cast", ["features_f"], ["features_i"], to=TensorProto.INT64),
        helper.make_node("ConstantOfShape", ["axis0_len"], ["unit"], value=ones),
        helper.make_node("Mul", ["features_i", "unit"], ["features"]),
        helper.make_node("Concat", ["n1", "features"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"], name="view"),
        helper.make_node("Slice", ["shape", "zero_1", "one_1"], ["batch"]),
        helper.make_node("Concat", ["batch", "minus_one"], ["target2"], axis=0),
        helper.make_node("Reshape", ["flat", "target2"], ["y"], name="view2"),
    ]
    inits = {
        "zero": np.array(0, np.int64),
        "axis0": np.array([0], np.int64),
        "axis0_len": np.array([1], np.int64),
        "one_s": np.array(1, np.int64),
        "four_s": np.array(4, np.int64),
        "zero_1": np.array([0], np.int64),
        "one_1": np.array([1], np.int64),
        "minus_one": np.array([-1], np.int64),
    }
    m = model(nodes, [value("x", ["batch", 2, 3, 3])], [value("y", None)], inits, 20)
    g = import_onnx(data(m), batch=2)
    assert [(n.name, n.op, n.attrs["shape"]) for n in g.nodes] == [
        ("view", Op.RESHAPE, (2, 18)),
        ("view2", Op.RESHAPE, (2, 18)),
    ]
    assert set(g.tensors) == {"x", "flat", "y"}


@st.composite
def _reductions(draw: st.DrawFn) -> tuple[str, int, tuple[int, ...], list[int] | None, int]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=3, max_size=4)))
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape)))
    unique = list({a % len(shape): a for a in axes}.values())  # one spelling per axis: ONNX refuses repeats
    op, opset = draw(st.sampled_from(["ReduceMean", "ReduceMax"])), draw(st.sampled_from([13, 17, 18, 20]))
    return op, opset, shape, unique or None, draw(st.integers(0, 1))


@fuzz(30)
@given(_reductions())
def test_any_reduction_is_the_pool_onnx_runtime_computes_or_refused_saying_what_it_does(
    reduction: tuple[str, int, tuple[int, ...], list[int] | None, int],
) -> None:
    op, opset, shape, axes, keepdims = reduction
    m = _reduction(op, opset, axes, keepdims, shape)
    reduced = sorted({a % len(shape) for a in axes} if axes else range(len(shape)))
    # The batch dimension must stay: a reduction over it with keepdims=0 is refused even when it is 1.
    pooled = len(shape) == 4 and all(a in (2, 3) or shape[a] == 1 for a in reduced)
    pooled = pooled and not (0 in reduced and keepdims == 0)
    if not pooled:
        with pytest.raises(UnsupportedError) as info:
            import_onnx(data(m))
        verb = "averages" if op == "ReduceMean" else "takes the maximum"
        fact = f"It {verb} over axes {reduced} of its {len(shape)}-D input of shape {shape}"
        assert info.value.reason.startswith(f"{fact} (keepdims={keepdims}). ")
        return
    g = import_onnx(data(m))
    assert {n.op for n in g.nodes} <= {Op.GLOBAL_AVG_POOL, Op.AVG_POOL, Op.MAX_POOL, Op.RESHAPE}
    x = rng().standard_normal(shape).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    got = _float_run(g, x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)  # a mean's float sums in any order
