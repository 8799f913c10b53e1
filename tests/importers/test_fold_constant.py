"""Constant nodes folded without onnx.reference: the same arrays and the same budget as its evaluator.

Folding a Constant holding one dense tensor reads the tensor as onnx.reference's Constant does, and
checks and charges the fold budget as the guarded evaluator does, so the importer does not import
onnx.reference (~0.2 s) for models whose only constant nodes are these (PyTorch's exports of Clip)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from quantcore.importers._fold import Budget, Folder, _evaluator_class

OPSET = 17


def _constant(value: np.ndarray, name: str = "c") -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value, name))


def _by_evaluator(node: onnx.NodeProto) -> tuple[list[np.ndarray] | None, Budget]:
    """What Folder.run returned before the shortcut: the guarded onnx.reference evaluator's outputs."""
    budget = Budget()
    try:
        results = _evaluator_class(budget, OPSET)(node, opsets={"": OPSET}).run(None, {})
    except Exception:
        return None, budget
    return [np.asarray(r) for r in results], budget


@pytest.mark.parametrize(
    "value",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        np.array(6.0, np.float32),
        np.array(-3, np.int64),
        np.array([1.5, -2.25, 65504], np.float16),
        np.array([[True, False]]),
        np.array([-128, 0, 127], np.int8),
        np.array([], np.float32),
    ],
    ids=["f32", "f32-scalar", "i64-scalar", "f16", "bool", "i8", "empty"],
)
def test_a_dense_constant_folds_to_the_evaluators_array_and_charges_its_budget(value: np.ndarray) -> None:
    node = _constant(value)
    folder = Folder(OPSET)
    got = folder.run(node, {})
    expected, budget = _by_evaluator(node)
    assert got is not None and expected is not None and len(got) == len(expected) == 1
    assert got[0].dtype == expected[0].dtype == value.dtype and got[0].shape == expected[0].shape
    assert got[0].tobytes() == expected[0].tobytes() == value.tobytes()
    assert (folder.budget.elements, folder.budget.operations) == (budget.elements, budget.operations)
    assert folder.budget.elements == value.size


def test_a_constant_tensor_that_cannot_be_read_is_left_unfolded_as_the_evaluator_leaves_it() -> None:
    node = _constant(np.zeros(4, np.float32))
    node.attribute[0].t.raw_data = b"\0" * 5  # 5 bytes for 4 floats
    assert _by_evaluator(node)[0] is None
    assert Folder(OPSET).run(node, {}) is None


def test_other_constants_still_go_through_the_evaluator() -> None:
    node = helper.make_node("Constant", [], ["c"], name="c", value_floats=[1.0, 2.5])
    got = Folder(OPSET).run(node, {})
    assert got is not None and got[0].dtype == np.float32
    np.testing.assert_array_equal(got[0], np.array([1.0, 2.5], np.float32))


def test_importing_a_model_whose_constants_are_dense_does_not_import_onnx_reference() -> None:
    """A fresh process (onnx.reference is imported only on demand): a Clip bounded by Constant nodes,
    as PyTorch exports ReLU6, is imported and its bounds folded without it."""
    nodes = [
        _constant(np.array(0.0, np.float32), "lo"),
        _constant(np.array(6.0, np.float32), "hi"),
        helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    script = (
        "import sys\n"
        "from quantcore.importers._onnx_load import load, read\n"
        "loaded = load(read(sys.stdin.buffer.read(), 'clip.onnx'), 1)\n"
        "print(sorted(loaded.consts), 'onnx.reference' in sys.modules)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], input=model.SerializeToString(), capture_output=True, check=True
    )
    assert run.stdout.decode().split() == ["['hi',", "'lo']", "False"]
