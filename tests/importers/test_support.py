"""The support table: defined once, consistent with the importer, rendered as SUPPORTED_OPS.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantcore.importers._handlers import HANDLERS
from quantcore.ir import Graph, Layout, Node, Op, Tensor
from quantcore.support import KERNELS, NO_COUNTERPART, ONNX_OPS, supported_ops_markdown, unsupported_reason
from quantcore.support.kernels import conv_1xn_padding_same, elementwise_same_shape, softmax_last_axis
from quantcore.support.table import Constraint

REPO = Path(__file__).resolve().parents[2]


def test_importer_handles_exactly_the_supported_ops() -> None:
    assert set(HANDLERS) == set(ONNX_OPS)
    assert not set(ONNX_OPS) & set(NO_COUNTERPART)
    assert set(KERNELS) == set(Op)


def test_every_constraint_has_a_reason() -> None:
    constraints = [c for s in ONNX_OPS.values() for c in s.constraints]
    constraints += [c for s in KERNELS.values() for c in s.constraints]
    for constraint in constraints:
        assert constraint.check.__doc__, constraint.name
        assert constraint.reason.endswith("."), constraint.name
        assert "\n" not in constraint.reason and "  " not in constraint.reason


def test_reasons_for_ops_without_counterpart() -> None:
    assert "arm_nn_activation_s16" in unsupported_reason("Sigmoid")
    assert unsupported_reason("Tanh") == unsupported_reason("Sigmoid")
    assert unsupported_reason("GRU").startswith("CMSIS-NN has no GRU kernel")
    assert "Frobnicate" in unsupported_reason("Frobnicate")
    assert "'custom' domain" in unsupported_reason("Relu", "custom")


def test_committed_supported_ops_md_is_the_rendering() -> None:
    committed = (REPO / "SUPPORTED_OPS.md").read_text(encoding="utf-8")
    assert committed == supported_ops_markdown(), (
        "SUPPORTED_OPS.md is stale: python -m quantcore.support > SUPPORTED_OPS.md"
    )


def _graph(x_shape: tuple[int, ...], w_shape: tuple[int, ...], y_shape: tuple[int, ...], node: Node) -> Graph:
    tensors = {
        "x": Tensor("x", x_shape, layout=Layout.NHWC),
        "w": Tensor("w", w_shape, data=np.zeros(w_shape, np.float32)),
        "y": Tensor("y", y_shape, layout=Layout.NHWC),
    }
    return Graph("g", tensors, (node,), ("x",), ("y",))


def test_conv_1xn_padding_must_be_tf_same() -> None:
    check = Constraint(conv_1xn_padding_same)

    def conv(left: int, right: int) -> bool:
        ow = 16 + left + right - 3 + 1
        node = Node("c", Op.CONV2D, ("x", "w", ""), ("y",), {"pads": (0, left, 0, right), "strides": (1, 1)})
        return check((_graph((1, 1, 16, 4), (8, 1, 3, 4), (1, 1, ow, 8), node), node))

    assert conv(1, 1) and conv(0, 0) and conv(1, 2)
    assert not conv(2, 1) and not conv(1, 3)


def test_softmax_and_elementwise_kernel_constraints() -> None:
    node = Node("s", Op.SOFTMAX, ("x",), ("y",), {"axis": 3})
    g = _graph((1, 2, 2, 4), (1,), (1, 2, 2, 4), node)
    assert Constraint(softmax_last_axis)((g, node))
    assert not Constraint(softmax_last_axis)((g, node.with_attrs(axis=1)))
    add = Node("a", Op.ADD, ("x", "w"), ("y",), {})
    assert Constraint(elementwise_same_shape)((_graph((1, 2, 2, 4), (4,), (1, 2, 2, 4), add), add))
    add2 = Node("a", Op.ADD, ("x", "x"), ("y",), {})
    assert not Constraint(elementwise_same_shape)((_graph((1, 2, 2, 1), (1,), (1, 2, 2, 4), add2), add2))
