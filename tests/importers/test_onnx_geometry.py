"""Window geometry: auto_pad and ceil_mode become explicit pads that reproduce ONNX Runtime's outputs.

Each case runs the ONNX model in ONNX Runtime and a direct numpy reading of the IR attributes (pads =
(top, left, bottom, right); for pools, ceil_pads is the part of the bottom/right padding that ceil_mode
added, which never counts in an average), and compares them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.errors import ModelError
from quantcore.importers import import_onnx
from quantcore.ir import Node

from .models import conv_model, data, pool_model, rng, run_ort


def _taps(
    padded: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dil: tuple[int, int],
    out: tuple[int, int],
) -> Any:
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dil, out
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            yield ky, kx, padded[:, :, y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw]


def _pad(x: np.ndarray, pads: tuple[int, ...], fill: float) -> np.ndarray:
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)


def conv_reference(node: Node, x: np.ndarray, w: np.ndarray, out: tuple[int, int]) -> np.ndarray:
    padded = _pad(x.astype(np.float64), node.attrs["pads"], 0.0)
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for ky, kx, view in _taps(padded, w.shape[2:], node.attrs["strides"], node.attrs["dilations"], out):
        y += np.einsum("nchw,oc->nohw", view, w[:, :, ky, kx].astype(np.float64))
    return y


def pool_reference(node: Node, x: np.ndarray, out: tuple[int, int]) -> np.ndarray:
    kernel, strides = node.attrs["kernel"], node.attrs["strides"]
    pads = node.attrs["pads"]
    if node.attrs.get("count_include_pad") is None:
        padded = _pad(x, pads, -np.inf)
        return np.max([v for _, _, v in _taps(padded, kernel, strides, (1, 1), out)], axis=0)
    values = _pad(x.astype(np.float64), pads, 0.0)
    counted = np.zeros_like(x, dtype=np.float64) + 1.0
    if node.attrs["count_include_pad"]:
        extra_b, extra_r = node.attrs["ceil_pads"]
        declared = (pads[0], pads[1], pads[2] - extra_b, pads[3] - extra_r)
        counted = _pad(_pad(counted, declared, 1.0), (0, 0, extra_b, extra_r), 0.0)
    else:
        counted = _pad(counted, pads, 0.0)
    total = sum(v for _, _, v in _taps(values, kernel, strides, (1, 1), out))
    count = sum(v for _, _, v in _taps(counted, kernel, strides, (1, 1), out))
    return total / count


@pytest.mark.parametrize(
    ("auto_pad", "size", "kernel", "stride", "pads"),
    [
        ("SAME_UPPER", 5, 2, 1, (0, 0, 1, 1)),  # even kernel: the extra pad goes at the end
        ("SAME_LOWER", 5, 2, 1, (1, 1, 0, 0)),  # ... or at the beginning
        ("SAME_UPPER", 7, 3, 2, (1, 1, 1, 1)),
        ("SAME_UPPER", 8, 3, 2, (0, 0, 1, 1)),
        ("SAME_LOWER", 8, 4, 2, (1, 1, 1, 1)),
        ("SAME_LOWER", 6, 4, 1, (2, 2, 1, 1)),
        ("VALID", 7, 3, 2, (0, 0, 0, 0)),
    ],
)
def test_conv_auto_pad_becomes_explicit_pads(
    auto_pad: str, size: int, kernel: int, stride: int, pads: tuple[int, ...]
) -> None:
    r = rng(20)
    w = r.standard_normal((2, 3, kernel, kernel)).astype(np.float32)
    m = conv_model([1, 3, size, size], w, auto_pad=auto_pad, strides=[stride, stride])
    g = import_onnx(data(m))
    (node,) = g.nodes
    assert node.attrs["pads"] == pads
    x = r.standard_normal((1, 3, size, size)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    assert g.tensor("y").shape == expected.shape
    # float64 reference vs ONNX Runtime's float32 convolution: rounding only.
    np.testing.assert_allclose(conv_reference(node, x, w, expected.shape[2:]), expected, rtol=1e-4, atol=1e-5)


def test_conv_explicit_asymmetric_pads_and_dilation() -> None:
    r = rng(21)
    w = r.standard_normal((2, 3, 3, 2)).astype(np.float32)
    m = conv_model([1, 3, 6, 7], w, pads=[2, 0, 1, 3], dilations=[2, 1], strides=[1, 2])
    g = import_onnx(data(m))
    (node,) = g.nodes
    assert node.attrs["pads"] == (2, 0, 1, 3) and node.attrs["dilations"] == (2, 1)
    x = r.standard_normal((1, 3, 6, 7)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    np.testing.assert_allclose(conv_reference(node, x, w, expected.shape[2:]), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("op", "size", "kernel", "stride", "pads", "cip", "ir_pads", "ceil_pads"),
    [
        ("MaxPool", 5, 2, 2, [0, 0, 0, 0], None, (0, 0, 1, 1), (1, 1)),
        ("MaxPool", 6, 3, 2, [1, 1, 1, 1], None, (1, 1, 2, 2), (1, 1)),
        ("AveragePool", 5, 2, 2, [0, 0, 0, 0], 0, (0, 0, 1, 1), (1, 1)),
        ("AveragePool", 5, 2, 2, [0, 0, 0, 0], 1, (0, 0, 1, 1), (1, 1)),
        ("AveragePool", 6, 3, 2, [1, 1, 1, 1], 1, (1, 1, 2, 2), (1, 1)),  # declared pad counts, ceil's not
        ("AveragePool", 6, 3, 2, [1, 1, 1, 1], 0, (1, 1, 2, 2), (1, 1)),
        ("AveragePool", 7, 3, 2, [1, 1, 1, 1], 1, (1, 1, 1, 1), (0, 0)),  # ceil_mode changes nothing here
    ],
)
def test_ceil_mode_adds_bottom_right_padding(
    op: str,
    size: int,
    kernel: int,
    stride: int,
    pads: list[int],
    cip: int | None,
    ir_pads: tuple[int, ...],
    ceil_pads: tuple[int, int],
) -> None:
    attrs: dict[str, Any] = {
        "kernel_shape": [kernel, kernel],
        "strides": [stride, stride],
        "pads": pads,
        "ceil_mode": 1,
    }
    if cip is not None:
        attrs["count_include_pad"] = cip
    m = pool_model(op, [1, 2, size, size], **attrs)
    g = import_onnx(data(m))
    (node,) = g.nodes
    assert node.attrs["pads"] == ir_pads and node.attrs["ceil_pads"] == ceil_pads
    if cip is not None:
        assert node.attrs["count_include_pad"] is bool(cip)
    x = rng(22).standard_normal((1, 2, size, size)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    assert g.tensor("y").shape == expected.shape
    # Max is exact; the average's float64 sum/count vs ONNX Runtime's float32 sum differs by rounding.
    np.testing.assert_allclose(pool_reference(node, x, expected.shape[2:]), expected, rtol=1e-6, atol=1e-6)


def test_pool_auto_pad_same_lower() -> None:
    m = pool_model("MaxPool", [1, 1, 6, 6], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_LOWER")
    g = import_onnx(data(m))
    assert g.nodes[0].attrs["pads"] == (1, 1, 0, 0) and g.tensor("y").shape == (1, 1, 6, 6)
    x = rng(23).standard_normal((1, 1, 6, 6)).astype(np.float32)
    (expected,) = run_ort(m, {"x": x})
    assert np.array_equal(pool_reference(g.nodes[0], x, (6, 6)), expected)


def test_ceil_mode_window_starting_in_the_padding_is_reported() -> None:
    # ONNX Runtime drops the last window (3x3 output); onnx's shape inference keeps it (4x4).
    m = pool_model(
        "MaxPool", [1, 1, 5, 5], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1
    )
    with pytest.raises(ModelError, match="ceil_mode") as info:
        import_onnx(data(m), name="pool.onnx")
    assert "pool.onnx" in str(info.value) and "'pool'" in str(info.value)
