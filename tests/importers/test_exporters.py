"""Both of torch's exporters give the same quant-params for every test network.

torch.onnx.export's default (the torch.export-based "dynamo" exporter, opset 20 in torch 2.13) and the
TorchScript exporter (`dynamo=False`) write the same layers differently: nn.AdaptiveAvgPool2d(1) as
ReduceMean + Reshape instead of GlobalAveragePool + Flatten, nn.AdaptiveMaxPool2d(1) as ReduceMax
instead of MaxPool, a zero padding before a convolution merged into the convolution's pads. Each network
of tests/importers/torch_nets.py is exported both ways, imported, and quantized with the default method
on the same calibration data; the quant-params are compared layer by layer (the names of layers and
tensors differ between the exporters, so layers are compared in order and tensors by where they appear):
op, kernel, integer parameters (multipliers, shifts, offsets, clamps), scales, zero points and the
int8/int32 constants.

Three differences are legitimate, and each is shown to be the only one (`written_as_torchscript` writes
the dynamo export the TorchScript way; then every integer, scale and zero point is identical):
- The exporters fold BatchNorm into the convolution with their own float32 arithmetic: the folded
  weights and biases differ by 1-8 ulps (checked before the TorchScript export's values are used).
- ONNX Runtime, which computes the float activations calibration measures, sums a ReduceMean in another
  order than a GlobalAveragePool (and an opset-19+ AveragePool in another order than an older one): the
  pooled values differ in their last bits, and with them the ranges of the tensors after them.
- The dynamo exporter's optimizer merges nn.ZeroPad2d into the convolution after it: one PAD layer fewer,
  the convolution padded instead (`pad_merged_into_conv` merges the TorchScript export's PAD the same way;
  its output has its input's scale and zero point).
Before the rewrite, the two exports give the same layers and kernels, shifts, offsets and clamps, and
scales and multipliers within 1e-6 of each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

from quantcore import pipeline
from tests import needs

torch = needs.module("torch", "torch is an optional extra: pip install 'fixpoint[torch]'")

from quantcore.importers.torch import export_onnx  # noqa: E402

from .models import pool_model, run_ort  # noqa: E402
from .torch_nets import NETS, build, quantize  # noqa: E402

FLOAT_ROUNDING = 1e-6
"""Relative difference of a scale (and of the multiplier made from it) that float32 summation order
explains: one ulp of float32 is 6e-8 relative, and a range is the max of sums of hundreds of terms."""

Canonical = tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]


# -- the two rewrites that make the exports identical --------------------------------------------------


def written_as_torchscript(dynamo: bytes, torchscript: bytes) -> bytes:
    """The dynamo export with what the TorchScript export writes differently written its way: each
    ReduceMean over H and W that keeps its dimensions as the GlobalAveragePool it is, and the constants
    of each layer (Conv, Gemm, MatMul, in order) as the TorchScript exporter folded them - after checking
    that they differ by float rounding only."""
    model, reference = onnx.load_from_string(dynamo), onnx.load_from_string(torchscript)
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for i, node in enumerate(model.graph.node):
        keep = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
        axes = consts.get(node.input[1]) if node.op_type == "ReduceMean" and len(node.input) > 1 else None
        if axes is not None and keep == 1 and sorted(int(a) % 4 for a in axes) == [2, 3]:
            pool = helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output), name=node.name)
            model.graph.node[i].CopyFrom(pool)
    folded = {t.name: onnx.numpy_helper.to_array(t) for t in reference.graph.initializer}
    for mine, theirs in zip(_layers(model), _layers(reference), strict=True):
        for name, value in zip(mine.input[1:], theirs.input[1:], strict=False):
            _replace(model, name, _aligned(folded[value], consts[name]))
    return model.SerializeToString()


def _layers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type in ("Conv", "Gemm", "MatMul")]


def _aligned(theirs: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """`theirs` in the layout of `mine` (a Linear without bias is a MatMul of W^T for TorchScript, a Gemm
    of W for dynamo), checked to differ from it by float rounding only."""
    value = theirs if theirs.shape == mine.shape else theirs.T
    scale = float(np.abs(mine).max()) or 1.0
    assert float(np.abs(value - mine).max()) <= FLOAT_ROUNDING * scale, "the exporters folded differently"
    return value.astype(mine.dtype)


def _replace(model: onnx.ModelProto, name: str, value: np.ndarray) -> None:
    (tensor,) = [t for t in model.graph.initializer if t.name == name]
    tensor.CopyFrom(onnx.numpy_helper.from_array(value, name))


def pad_merged_into_conv(document: dict[str, Any]) -> dict[str, Any]:
    """The document with each PAD read only by the convolution after it merged into that convolution's
    padding, as the dynamo exporter's optimizer merges nn.ZeroPad2d into the next Conv."""
    layers = list(document["layers"])
    for pad in [layer for layer in layers if layer["op"] == "pad"]:
        readers = [layer for layer in layers if pad["outputs"][0] in layer["inputs"]]
        if len(readers) != 1 or readers[0]["op"] != "conv2d":
            continue
        (conv,) = readers
        _, top, left, _ = pad["params"]["pre_pad"]
        padding = [conv["params"]["padding"][0] + top, conv["params"]["padding"][1] + left]
        merged = conv | {"inputs": pad["inputs"], "params": conv["params"] | {"padding": padding}}
        layers = [merged if layer is conv else layer for layer in layers if layer is not pad]
    return document | {"layers": layers}


# -- the quant-params without the names ----------------------------------------------------------------


def canonical(result: pipeline.QuantizeResult, document: dict[str, Any] | None = None) -> Canonical:
    """Layers in order and tensors numbered by first appearance (input, outputs, weights, bias), each
    tensor with its int8/int32 data; no layer or tensor names."""
    document = document or result.document
    ids: dict[str, str] = {}

    def number(name: str) -> str:
        return ids.setdefault(name, f"t{len(ids)}")

    layers = []
    for layer in document["layers"]:
        entry = {k: v for k, v in layer.items() if k != "name"}
        entry["inputs"] = [number(n) for n in layer["inputs"]]
        entry["outputs"] = [number(n) for n in layer["outputs"]]
        entry |= {k: number(layer[k]) for k in ("weights", "bias") if layer.get(k)}
        layers.append(entry)
    tensors = {}
    for name, id_ in ids.items():
        tensor = dict(document["tensors"][name])
        data = result.qgraph.tensor(name).data
        if data is not None:
            tensor["data"] = np.asarray(data).tolist()
        tensors[id_] = tensor
    return layers, tensors


def float_rounding_differences(a: Any, b: Any, where: str = "") -> Iterator[tuple[str, float]]:
    """Where `a` and `b` differ, and by how much (relative), when every difference is one that an ulp of
    float32 explains: a float, a multiplier (a scale ratio in 31 bits), or an int8/int32 constant one
    step away (its float value sat at a rounding boundary). Anything else (structure, a shift, an
    offset, a clamp, a kernel) that differs raises AssertionError."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            yield from float_rounding_differences(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} elements"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from float_rounding_differences(x, y, f"{where}[{i}]")
    elif a != b:
        key = where.rsplit(".", 1)[-1].split("[")[0]
        if key == "data":
            assert abs(a - b) == 1, f"{where}: {a!r} != {b!r}"
            yield where, 0.0
        else:  # multiplier, input_1_mult, out_mult, mult
            assert isinstance(a, float) or "mult" in key, f"{where}: {a!r} != {b!r}"
            yield where, abs(a - b) / max(abs(a), abs(b))


# -- the tests -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=sorted(NETS))
def exports(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    name = request.param
    net, (_, shape) = build(name), NETS[name]
    x = torch.zeros(shape)
    folder = tmp_path_factory.mktemp(name)
    notes: list[str] = []
    dynamo = export_onnx(net, x, note=notes.append)
    assert notes == [], "torch's default exporter exported the network"
    torchscript = export_onnx(net, x, dynamo=False)
    rewritten = written_as_torchscript(dynamo, torchscript)
    uncorrected = pipeline.QuantizeOptions(bias_correction=False)
    return {
        "onnx": (onnx.load_from_string(dynamo), onnx.load_from_string(torchscript)),
        "dynamo": quantize(dynamo, folder / "dynamo.onnx", shape),
        "rewritten": quantize(rewritten, folder / "rewritten.onnx", shape),
        "torchscript": quantize(torchscript, folder / "torchscript.onnx", shape),
        "uncorrected": [
            quantize(raw, folder / f"uncorrected_{i}.onnx", shape, uncorrected)
            for i, raw in enumerate((dynamo, rewritten))
        ],
    }


def test_the_default_export_is_opset_20_with_reductions_for_global_pools(exports: dict[str, Any]) -> None:
    dynamo, torchscript = exports["onnx"]
    assert [o.version for o in dynamo.opset_import if o.domain in ("", "ai.onnx")] == [20]
    ops, torchscript_ops = ({n.op_type for n in m.graph.node} for m in (dynamo, torchscript))
    assert "GlobalAveragePool" not in ops
    assert "ReduceMean" in ops or "GlobalAveragePool" not in torchscript_ops


def test_both_exports_give_the_same_layers_and_kernels(exports: dict[str, Any]) -> None:
    dynamo = exports["dynamo"].document["layers"]
    torchscript = pad_merged_into_conv(exports["torchscript"].document)["layers"]
    assert [(a["op"], a["kernel"]) for a in dynamo] == [(b["op"], b["kernel"]) for b in torchscript]


def test_both_exports_give_the_same_quant_params_once_written_alike(exports: dict[str, Any]) -> None:
    torchscript = exports["torchscript"]
    differences = float_rounding_differences(
        canonical(exports["rewritten"]), canonical(torchscript, pad_merged_into_conv(torchscript.document))
    )
    # Every integer, scale and zero point is identical. Only a recorded "observed" range (the raw min/max
    # of a tensor whose quantization range is its input's, such as an average pool's output) may differ in
    # its last bits: ONNX Runtime's AveragePool sums in another order from opset 19 (test below).
    for where, relative in differences:
        assert ".observed." in where and relative <= FLOAT_ROUNDING, (where, relative)


def test_the_default_export_differs_only_by_float_rounding(exports: dict[str, Any]) -> None:
    # Layers, kernels, shifts, offsets and clamps are the same; scales and multipliers differ by float
    # rounding, constants by one step where a value sat at a rounding boundary.
    layers = [
        [(la["op"], la["kernel"]) for la in exports[k].document["layers"]] for k in ("dynamo", "rewritten")
    ]
    assert layers[0] == layers[1]
    # Compared without empirical bias correction, which measures the mean int8 error of each channel: an
    # ulp moved in a scale moves some int8 roundings and with them that mean, so corrected int32 biases
    # differ by a few steps - a consequence of the rounding, but not one an ulp bounds.
    dynamo, rewritten = (canonical(result) for result in exports["uncorrected"])
    differences = list(float_rounding_differences(dynamo, rewritten))
    assert all(relative <= FLOAT_ROUNDING for _, relative in differences), differences


def test_onnx_runtime_average_pool_rounds_differently_from_opset_19() -> None:
    """Why an average pool's observed range differs between the exports in its last bits."""
    x = np.random.default_rng(0).uniform(0, 2, (16, 8, 16, 16)).astype(np.float32)
    outputs = {
        opset: run_ort(
            pool_model("AveragePool", x.shape, opset, kernel_shape=[2, 2], strides=[2, 2]), {"x": x}
        )[0]
        for opset in (17, 20)
    }
    exact = x.reshape(16, 8, 8, 2, 8, 2).astype(np.float64).mean((3, 5))
    assert not np.array_equal(outputs[17], outputs[20])
    for y in outputs.values():
        assert float(np.abs(y - exact).max()) <= 2 * float(
            np.spacing(np.float32(2))
        )  # both correctly rounded-ish
