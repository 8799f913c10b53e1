"""Fuzzing the ONNX importer: whatever the bytes, a Graph or a one-line ModelError, within a time limit.

Two sources of hostile models: a valid model's bytes mutated (bit flips, truncation, inserted and
overwritten bytes, protobuf fields appended), and small graphs built with onnx.helper from operators
that fold at import (and some that cannot), random attributes, constants with huge or negative values,
and names with newlines, quotes and 10,000 characters. Each example runs under a deadline; any other
exception, a message of several lines or a hang fails the test.

FIXPOINT_FUZZ_EXAMPLES sets the examples per property (CI's longer fuzzing pass raises it).
"""

from __future__ import annotations

import os
import struct
import time
from typing import Any

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from quantcore.errors import ModelError
from quantcore.importers import import_onnx
from quantcore.ir import Graph

from .models import value
from .test_hostile_models import deadline
from .test_onnx_ops import _cnn

EXAMPLES = int(os.environ.get("FIXPOINT_FUZZ_EXAMPLES", "40"))
SECONDS = 30.0
"""Per example; an import of these models takes milliseconds, the rest is room for a loaded machine."""

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(raw: bytes) -> Graph | ModelError:
    """What the importer makes of `raw`; fails on any other exception, a hang or a multi-line message."""
    start = time.monotonic()
    with deadline(SECONDS):
        try:
            result: Graph | ModelError = import_onnx(raw, name="fuzz.onnx")
        except ModelError as e:
            result = e
    assert time.monotonic() - start < SECONDS
    if isinstance(result, ModelError):
        message = str(result)
        assert message.startswith("fuzz.onnx: ") and "\n" not in message and "\r" not in message, message
    return result


# -- mutated bytes of a valid model ---------------------------------------------------------------------

VALID, _ = _cnn()


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "overwrite", "field"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at : at + len(chunk)] = chunk
        else:  # a field of any number and wire type, with a length or value that may be huge
            field_number, wire = draw(st.integers(1, 40)), draw(st.sampled_from([0, 1, 2, 5]))
            payload = {
                0: _varint(draw(st.integers(0, 2**64 - 1))),
                1: struct.pack("<Q", draw(st.integers(0, 2**64 - 1))),
                2: _varint(draw(st.integers(0, 2**31))) + draw(st.binary(max_size=32)),
                5: struct.pack("<I", draw(st.integers(0, 2**32 - 1))),
            }[wire]
            data += _varint(field_number << 3 | wire) + payload
    return bytes(data)


@FUZZ
@given(mutated())
def test_mutated_bytes_import_or_fail_with_one_line(raw: bytes) -> None:
    outcome(raw)


# -- a valid model with its fields edited ---------------------------------------------------------------


def _edit_node(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    node = draw(st.sampled_from(list(model.graph.node)))
    what = draw(st.sampled_from(["op", "input", "attribute", "name"]))
    if what == "op":
        node.op_type = draw(st.sampled_from(OPS))
    elif what == "input" and node.input:
        names = (
            [v.name for v in model.graph.input] + [t.name for t in model.graph.initializer] + ["", "nowhere"]
        )
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(names))
    elif what == "attribute" and node.attribute:
        attribute = draw(st.sampled_from(list(node.attribute)))
        if attribute.type == onnx.AttributeProto.INTS:
            attribute.ints[:] = draw(ATTRIBUTE[onnx.AttributeProto.INTS])
        elif attribute.type == onnx.AttributeProto.INT:
            attribute.i = draw(st.one_of(st.integers(-3, 5), BIG))
    else:
        node.name = draw(HOSTILE_NAMES)


def _edit_tensor(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    tensor = draw(st.sampled_from(list(model.graph.initializer)))
    what = draw(st.sampled_from(["dims", "type", "data", "external"]))
    if what == "dims":
        tensor.dims[:] = draw(st.lists(st.one_of(st.integers(0, 6), BIG), max_size=4))
    elif what == "type":
        tensor.data_type = draw(st.integers(0, 22))
    elif what == "data":
        tensor.raw_data = tensor.raw_data[: draw(st.integers(0, len(tensor.raw_data)))]
    else:
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        entry = tensor.external_data.add()
        entry.key, entry.value = "location", draw(st.sampled_from(["w.bin", "../w.bin", "/dev/zero", "a\nb"]))


def _edit_model(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    what = draw(st.sampled_from(["input shape", "opset", "ir", "output"]))
    if what == "input shape":
        dims = model.graph.input[0].type.tensor_type.shape.dim
        dim = dims[draw(st.integers(0, len(dims) - 1))]
        if draw(st.booleans()):
            dim.dim_value = draw(st.one_of(st.integers(0, 6), BIG.filter(lambda d: d >= 0)))
        else:
            dim.dim_param = draw(HOSTILE_NAMES)
    elif what == "opset":
        model.opset_import[0].version = draw(st.integers(1, 25))
    elif what == "ir":
        model.ir_version = draw(st.integers(0, 12))
    else:
        model.graph.output[0].name = draw(st.sampled_from(["x", "w", "c", "nowhere"]))


@st.composite
def edited(draw: st.DrawFn) -> bytes:
    model = onnx.load_from_string(VALID)
    for _ in range(draw(st.integers(1, 3))):
        draw(st.sampled_from([_edit_node, _edit_tensor, _edit_model]))(draw, model)
    return model.SerializeToString()


@FUZZ
@given(edited())
def test_edited_models_import_or_fail_with_one_line(raw: bytes) -> None:
    outcome(raw)


# -- random small graphs --------------------------------------------------------------------------------

HOSTILE_NAMES = st.sampled_from(
    ["n", "a\nb", "x */ y", "q'\"", "back\\slash", "\x1b[2J", "n\u00e4me \u2603", "w" * 10_000, ""]
)
BIG = st.sampled_from([0, 1, 2, 3, -1, -5, 40_000, 10**9, 10**12, 2**62])
"""Values for shape-like constants: ordinary, negative, and far past every limit."""
OPS = [
    "ConstantOfShape", "Range", "Tile", "Expand", "Pad", "Reshape", "Add", "Mul", "MatMul", "Gemm",
    "Conv", "MaxPool", "AveragePool", "Concat", "Gather", "Slice", "Transpose", "Cast", "Shape",
    "Unsqueeze", "Squeeze", "OneHot", "ReduceSum", "Relu", "Softmax", "Resize", "Einsum", "Loop",
    "If", "Scan", "Flatten", "Identity", "Where", "CumSum", "NonZero", "Split", "DequantizeLinear",
]  # fmt: skip
STRINGS = st.sampled_from(
    ["constant", "reflect", "edge", "nearest", "linear", "NOTSET", "SAME_UPPER", "x\ny", ""]
)
ATTRIBUTE = {
    onnx.AttributeProto.INT: st.one_of(st.integers(-3, 5), BIG),
    onnx.AttributeProto.INTS: st.lists(st.one_of(st.integers(-2, 5), BIG), min_size=1, max_size=8),
    onnx.AttributeProto.FLOAT: st.floats(allow_nan=True, allow_infinity=True, width=32),
    onnx.AttributeProto.FLOATS: st.lists(st.floats(-2, 2, width=32), min_size=1, max_size=4),
    onnx.AttributeProto.STRING: STRINGS,
}
"""Values by attribute type; attributes of other types (graphs, tensors) are set per operator."""


@st.composite
def constant(draw: st.DrawFn) -> np.ndarray:
    kind = draw(st.sampled_from(["shape", "float", "scalar", "bool"]))
    if kind == "shape":
        return np.array(draw(st.lists(BIG, max_size=4)), np.int64)
    if kind == "scalar":
        return np.array(draw(BIG), np.int64)
    if kind == "bool":
        return np.array(draw(st.booleans()))
    dims = draw(st.lists(st.integers(1, 4), max_size=4))
    return np.full(dims, draw(st.floats(-4, 4)), np.float32)


def _loop_body() -> onnx.GraphProto:
    return helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "body",
        [value("i", [], TensorProto.INT64), value("c_in", [], TensorProto.BOOL), value("v_in", None)],
        [value("c_out", [], TensorProto.BOOL), value("v_out", None)],
    )


@st.composite
def node_of(draw: st.DrawFn, op: str, opset: int, inputs: list[str], output: str) -> onnx.NodeProto:
    """A node whose attributes are the operator's own (some left out, required ones too at times)."""
    schema = onnx.defs.get_schema(op, max_inclusive_version=opset)
    attrs: dict[str, Any] = {}
    for name, attribute in schema.attributes.items():
        if attribute.type in ATTRIBUTE and (attribute.required or draw(st.booleans())):
            attrs[name] = draw(ATTRIBUTE[attribute.type])
        elif attribute.type == onnx.AttributeProto.GRAPH:
            attrs[name] = _loop_body()
        elif attribute.type == onnx.AttributeProto.TENSOR and draw(st.booleans()):
            attrs[name] = numpy_helper.from_array(draw(constant()))
    return helper.make_node(op, inputs, [output], name=draw(HOSTILE_NAMES), **attrs)


def _exists(op: str, opset: int) -> bool:
    try:
        onnx.defs.get_schema(op, max_inclusive_version=opset)
    except onnx.defs.SchemaError:
        return False
    return True


def _arity(op: str, opset: int) -> tuple[int, int]:
    schema = onnx.defs.get_schema(op, max_inclusive_version=opset)
    return schema.min_input, min(schema.max_input, 4)


@st.composite
def graphs(draw: st.DrawFn) -> bytes:
    """1-4 nodes on x [1, 2, 4, 4] and random constants; y = x + the last node's output."""
    opset = draw(st.sampled_from([11, 13, 17]))
    available = ["x"]
    inits: list[onnx.TensorProto] = []
    nodes = []
    for index in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from([op for op in OPS if _exists(op, opset)]))
        low, high = _arity(op, opset)
        inputs = []
        for slot in range(draw(st.integers(low, max(low, high)))):
            if draw(st.booleans()):
                name = f"c{index}_{slot}"
                inits.append(numpy_helper.from_array(draw(constant()), name))
                available.append(name)
            inputs.append(draw(st.sampled_from(available if slot < low else [*available, ""])))
        output = draw(st.sampled_from([f"v{index}", f"a\nb{index}", "y" * 300 + str(index)]))
        nodes.append(draw(node_of(op, opset, inputs, output)))
        available.append(output)
    nodes.append(helper.make_node("Add", ["x", nodes[-1].output[0]], ["y"], name="add"))
    name = draw(HOSTILE_NAMES.filter(bool))
    graph = helper.make_graph(nodes, name, [value("x", [1, 2, 4, 4])], [value("y", [1, 2, 4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


@FUZZ
@given(graphs())
def test_random_graphs_import_or_fail_with_one_line(raw: bytes) -> None:
    outcome(raw)
