"""The convolution's integer product on onnxruntime (quantcore.kernels.int_gemm) gives the float
product's integers: the accumulators and the whole arm_convolve_s8, both paths in one process
(FIXPOINT_JIT=0 keeps the float product). Inputs at the extremes (x at -128 and 127 with input offsets
-127 and 128, weights at -128 and 127: the products that saturate an int16 pair sum on a CPU without
VNNI), grouped convolutions, strides, padding, dilation, 1x1 and one-channel inputs, sums past float32's
exact integers (the float64 product), and the limit on the number of terms. CMSIS-NN's own vectors run
through it in tests/conformance (with FIXPOINT_JIT=all, CI's fuzz run)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from quantcore.kernels import conv, int_gemm, jit
from quantcore.kernels.fully_connected import fully_connected_s8
from quantcore.kernels.requantize import Rounding
from quantcore.kernels.window import Window

pytestmark = pytest.mark.skipif(int_gemm._session() is None, reason="this machine's MLAS is not exact")

Array = np.ndarray[Any, Any]


def _both(monkeypatch: pytest.MonkeyPatch, x: Array, w: Array, **kw: Any) -> None:
    out_ch = w.shape[0]
    window = Window((w.shape[1], w.shape[2]), kw["stride"], kw["padding"], kw["dilation"])
    hw = window.output_hw((x.shape[1], x.shape[2]))
    groups = x.shape[3] // w.shape[3]
    rng = np.random.default_rng(out_ch)
    quant = {
        "bias": rng.integers(-(2**20), 2**20, out_ch).astype(np.int32),
        "multiplier": rng.integers(2**30, 2**31 - 1, out_ch).astype(np.int32),
        "shift": rng.integers(-12, 1, out_ch).astype(np.int32),
    }
    results = []
    for switch in ("all", "0"):
        monkeypatch.setenv(jit.SWITCH, switch)
        assert int_gemm.wanted(w[0].size) == (switch == "all")
        acc = conv._conv_accumulate(x, w, groups, window, hw, kw["input_offset"])
        out = conv.convolve_s8(x, w, output_offset=-3, **quant, **kw)
        results.append((acc, out))
    (acc, out), (acc_ref, out_ref) = results
    assert (acc.dtype, acc_ref.dtype) == (np.int32, np.int64)  # the integer product's sums as they come
    np.testing.assert_array_equal(acc, acc_ref)
    np.testing.assert_array_equal(out, out_ref)


@pytest.mark.parametrize("input_offset", [-127, 128, 0, 5])
@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation", "in_ch", "out_ch", "group_ch"),
    [((3, 3), (1, 1), (1, 1), (1, 1), 16, 24, 16), ((3, 3), (2, 2), (1, 1), (1, 1), 8, 8, 8),
     ((5, 3), (2, 1), (2, 0), (1, 2), 3, 5, 3), ((1, 1), (1, 1), (0, 0), (1, 1), 32, 64, 32),
     ((5, 5), (1, 1), (0, 0), (1, 1), 1, 6, 1), ((3, 3), (1, 1), (1, 1), (1, 1), 12, 6, 4)],
)  # fmt: skip
def test_random_and_extreme_inputs_give_the_float_products_integers(
    monkeypatch: pytest.MonkeyPatch,
    input_offset: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    in_ch: int,
    out_ch: int,
    group_ch: int,
) -> None:
    rng = np.random.default_rng(in_ch * 31 + out_ch)
    x = rng.integers(-128, 128, (5, 11, 9, in_ch)).astype(np.int8)
    x[0] = -128 if input_offset > 0 else 127  # the widest |x + offset|, in a whole sample
    x[1] = 127
    w = rng.integers(-128, 128, (out_ch, *kernel, group_ch)).astype(np.int8)
    w[0], w[-1] = 127, -128  # every term of one channel at the extremes: int16 pair sums would saturate
    _both(monkeypatch, x, w, input_offset=input_offset, stride=stride, padding=padding, dilation=dilation)


def test_sums_past_float32s_exact_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3x3 convolution over 256 channels at the extremes: sums reach 255 * 128 * 2304 = 7.5e7 > 2^24,
    where the float path takes float64."""
    x = np.full((2, 5, 5, 256), -128, np.int8)
    w = np.full((3, 3, 3, 256), 127, np.int8)
    w[1] = -128
    _both(monkeypatch, x, w, input_offset=128, stride=(1, 1), padding=(1, 1), dilation=(1, 1))


def test_the_number_of_terms_is_held_within_int32(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit.SWITCH, "all")
    assert int_gemm.BOUND_K * 255 * 128 <= 2**31 - 1 < (int_gemm.BOUND_K + 1) * 255 * 128
    assert int_gemm.wanted(int_gemm.BOUND_K)
    assert not int_gemm.wanted(int_gemm.BOUND_K + 1)
    assert not int_gemm.wanted(0)
    monkeypatch.setenv(jit.SWITCH, "1")
    assert not int_gemm.wanted(9)  # outside evaluate's batches: the float product


def test_the_probe_refuses_a_product_that_saturates_pair_sums() -> None:
    """What a CPU without VNNI computes (pairs of uint8 x int8 products summed in int16 with saturation),
    as a stand-in session: the probe sees it and the path stays off."""

    class Saturating:
        def run(self, _: Any, feeds: dict[str, Array]) -> list[Array]:
            u = feeds["u"].astype(np.int64)
            w = feeds["w"].astype(np.int64)
            k = u.shape[1] - u.shape[1] % 2
            pairs = u[:, :k:2, None] * w[None, :k:2] + u[:, 1:k:2, None] * w[None, 1:k:2]
            sums = np.clip(pairs, -(2**15), 2**15 - 1).sum(axis=1)
            if u.shape[1] % 2:
                sums += u[:, -1, None] * w[None, -1]
            zp = int(feeds["zp"])
            return [(sums - zp * w.sum(axis=0)).astype(np.int32)]

    assert not int_gemm._exact_here(Saturating())
    assert int_gemm._exact_here(int_gemm._session())


@pytest.mark.parametrize("rounding", list(Rounding))
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("input_offset", [-127, 128, 0, 7])
def test_fully_connected_layers_give_the_float_products_bytes(
    monkeypatch: pytest.MonkeyPatch, rounding: Rounding, per_channel: bool, input_offset: int
) -> None:
    """arm_fully_connected_(per_channel_)s8 on the integer product (no weight offset) and on the float
    product: the same bytes, with inputs and weights at their ends, a bias up to 2^16, and shifts that
    spread the outputs over the int8 range (one channel's a left shift)."""
    rng = np.random.default_rng(input_offset + 128 + 300 * per_channel)
    depth, out_ch = 400, 24
    x = rng.integers(-128, 128, (37, 5, 5, 16)).astype(np.int8)
    x[0], x[1] = -128, 127
    w = rng.integers(-128, 128, (out_ch, depth)).astype(np.int8)
    w[0], w[1] = -128, 127
    bias = rng.integers(-(2**16), 2**16, out_ch).astype(np.int32)
    if per_channel:
        shifts = rng.integers(-12, -8, out_ch)
        shifts[2] = 2
        quant: dict[str, Any] = {
            "multiplier": rng.integers(2**30, 2**31 - 1, out_ch).astype(np.int32),
            "shift": shifts.astype(np.int32),
        }
    else:
        quant = {"multiplier": 1_518_500_250, "shift": -10}
    outs = []
    for switch in ("all", "0"):
        monkeypatch.setenv(jit.SWITCH, switch)
        assert int_gemm.wanted(depth) == (switch == "all")
        outs.append(
            fully_connected_s8(
                x, w, bias, input_offset=input_offset, output_offset=-5, rounding=rounding, **quant
            )
        )
    assert outs[0].dtype == np.int8 and outs[0].shape == (37, out_ch)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert len(np.unique(outs[0])) > 50  # the requantized values spread over the range, not one clamp
