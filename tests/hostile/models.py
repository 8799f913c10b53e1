"""The corpus's models and data, built by code (onnx.helper, numpy): deterministic, no binary fixtures.

Every model is small and otherwise supported by CMSIS-NN (Conv, ReLU, global average pool, Flatten,
Gemm), so a case fails only for the one thing it is about: a hostile name, a constant `Loop` of 10^12
iterations, a `ConstantOfShape` of 6.4 GB, weights in an external file outside the model's folder.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUT_SHAPE = (1, 1, 8, 8)
"""NCHW input of every corpus model: a 1-channel 8x8 image, so image folders work as calibration data."""


@dataclass(frozen=True)
class Names:
    """The names a model carries; a hostile case replaces one kind of them."""

    graph: str = "tiny"
    input: str = "x"
    output: str = "y"
    node: Callable[[str], str] = field(default=lambda role: role)
    """role ("conv", "relu", ...) -> node name."""
    tensor: Callable[[str], str] = field(default=lambda role: role)
    """role ("conv.w", "relu.out", ...) -> tensor name (initializers and activations)."""


def _opset13(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _conv_head(names: Names, rng: np.random.Generator) -> tuple[list[onnx.NodeProto], list[TensorProto]]:
    """Conv(1->4, 3x3, pad 1) - ReLU - GlobalAveragePool - Flatten - Gemm(4->3), input to output."""
    t, n = names.tensor, names.node
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), t("conv.w")),
        numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), t("conv.b")),
        numpy_helper.from_array(rng.normal(0, 0.5, (3, 4)).astype(np.float32), t("fc.w")),
        numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), t("fc.b")),
    ]
    nodes = [
        helper.make_node(
            "Conv",
            [names.input, t("conv.w"), t("conv.b")],
            [t("conv.out")],
            name=n("conv"),
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("Relu", [t("conv.out")], [t("relu.out")], name=n("relu")),
        helper.make_node("GlobalAveragePool", [t("relu.out")], [t("gap.out")], name=n("gap")),
        helper.make_node("Flatten", [t("gap.out")], [t("flat.out")], name=n("flatten")),
        helper.make_node(
            "Gemm", [t("flat.out"), t("fc.w"), t("fc.b")], [names.output], name=n("fc"), transB=1
        ),
    ]
    return nodes, inits


def tiny(names: Names = Names(), seed: int = 0) -> onnx.ModelProto:
    """The corpus's everyday model (47 parameters); `names` places hostile text where a case wants it."""
    nodes, inits = _conv_head(names, np.random.default_rng(seed))
    graph = helper.make_graph(
        nodes,
        names.graph,
        [helper.make_tensor_value_info(names.input, TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info(names.output, TensorProto.FLOAT, [1, 3])],
        inits,
    )
    return _opset13(graph)


def wide(seed: int = 0) -> onnx.ModelProto:
    """Flatten - Gemm(64->256) - ReLU - Gemm(256->10): 19 KB of int8 weights, so model_data.c is by far
    the largest generated file (the atomicity case makes exactly its write fail)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.2, (256, 64)).astype(np.float32), "fc1.w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 256).astype(np.float32), "fc1.b"),
        numpy_helper.from_array(rng.normal(0, 0.2, (10, 256)).astype(np.float32), "fc2.w"),
        numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "fc2.b"),
    ]
    nodes = [
        helper.make_node("Flatten", ["x"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc1.w", "fc1.b"], ["fc1"], name="fc1", transB=1),
        helper.make_node("Relu", ["fc1"], ["relu"], name="relu"),
        helper.make_node("Gemm", ["relu", "fc2.w", "fc2.b"], ["y"], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return _opset13(graph)


def _with_constant(
    constant_nodes: list[onnx.NodeProto], inits: list[TensorProto], name: str
) -> onnx.ModelProto:
    """The tiny model with a scalar computed by `constant_nodes` (output `name`) added after its Conv."""
    rng = np.random.default_rng(0)
    head, head_inits = _conv_head(Names(), rng)
    head[1].input[0] = "shifted"  # Relu reads conv.out + the constant
    add = helper.make_node("Add", ["conv.out", name], ["shifted"], name="add_constant")
    graph = helper.make_graph(
        [*constant_nodes, head[0], add, *head[1:]],
        "constant_folding",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [*head_inits, *inits],
    )
    return _opset13(graph)


def constant_loop(trips: int = 10**12) -> onnx.ModelProto:
    """A constant `Loop` of `trips` iterations (v += 1) whose result is added to the Conv's output: an
    importer that folds constants executes it."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("Add", ["v_in", "one"], ["v_out"], name="count"),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, []),
        ],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    inits = [
        numpy_helper.from_array(np.array(trips, np.int64), "trips"),
        numpy_helper.from_array(np.array(True), "always"),
        numpy_helper.from_array(np.array(0.0, np.float32), "start"),
    ]
    loop = helper.make_node("Loop", ["trips", "always", "start"], ["counted"], name="endless_loop", body=body)
    return _with_constant([loop], inits, "counted")


def constant_of_shape(side: int = 40000) -> onnx.ModelProto:
    """`ConstantOfShape` 1x1xSIDExSIDE (6.4 GB of float32 at 40000), reduced to a scalar added after the
    Conv."""
    inits = [numpy_helper.from_array(np.array([1, 1, side, side], np.int64), "huge_shape")]
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["huge_shape"],
            ["huge"],
            name="huge_constant",
            value=numpy_helper.from_array(np.array([0.5], np.float32)),
        ),
        helper.make_node("ReduceMean", ["huge"], ["huge_mean"], name="huge_mean", keepdims=0),
    ]
    return _with_constant(nodes, inits, "huge_mean")


def constant(kind: str) -> onnx.ModelProto:
    """constant_loop ("loop") or constant_of_shape ("huge")."""
    return constant_loop() if kind == "loop" else constant_of_shape()


def two_inputs_two_outputs() -> onnx.ModelProto:
    """Add(x1, x2) - ReLU as the first output, Conv(x1) as the second: CMSIS-NN firmware has one of each."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(0, 0.5, (2, 1, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.zeros(2, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Add", ["x1", "x2"], ["sum"], name="add"),
        helper.make_node("Relu", ["sum"], ["y1"], name="relu"),
        helper.make_node("Conv", ["x1", "w", "b"], ["y2"], name="conv", pads=[1, 1, 1, 1]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_in_two_out",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(INPUT_SHAPE)) for n in ("x1", "x2")],
        [
            helper.make_tensor_value_info("y1", TensorProto.FLOAT, list(INPUT_SHAPE)),
            helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 2, 8, 8]),
        ],
        inits,
    )
    return _opset13(graph)


def with_external_weights(location: str) -> onnx.ModelProto:
    """The tiny model whose Conv weight lives in the external file `location` (relative to the model)."""
    model = tiny()
    weight = next(t for t in model.graph.initializer if t.name == "conv.w")
    raw = weight.raw_data or numpy_helper.to_array(weight).tobytes()
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(len(raw)))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    return model


def conv_weight_bytes() -> bytes:
    """The bytes with_external_weights expects in its external file (the tiny model's Conv weight)."""
    weight = next(t for t in tiny().graph.initializer if t.name == "conv.w")
    return numpy_helper.to_array(weight).astype(np.float32).tobytes()


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


# -- data -------------------------------------------------------------------------------------------


def calibration(samples: int = 8, seed: int = 0) -> np.ndarray:
    """`samples` images in [0, 1), the tiny model's input layout."""
    return np.random.default_rng(seed).random((samples, *INPUT_SHAPE[1:]), dtype=np.float32)


def save_npz(path: Path, **arrays: np.ndarray) -> Path:
    """`arrays` as an .npz at exactly `path` (np.savez given a name adds ".npz" to one without it)."""
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]  # numpy types allow_pickle as the 2nd arg
    return path


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png(width: int, height: int, idat: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def png(width: int, height: int) -> bytes:
    """An all-black 8-bit grey PNG of width x height, every row present (compressed row by row)."""
    compressor = zlib.compressobj(1)
    row = bytes(width + 1)  # filter byte 0 + the pixels
    return _png(width, height, b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush())


def bomb_png(side: int = 30000) -> bytes:
    """A PNG whose header claims side x side pixels (900 M at 30000) with one row of data: decoding it would
    need the whole image; Pillow's guard (or the product's) must refuse it by its header."""
    return _png(side, side, zlib.compress(bytes(side + 1), 9))
