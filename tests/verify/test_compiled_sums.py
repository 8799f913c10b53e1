"""The compiled metrics sums (quantcore.verify.compiled_sums): TensorAccumulator's update_quantized with
the compiled loop on gives sums within the recursive-summation bound of their exactly rounded values
(math.fsum), the maxima and counts exactly, in a fixed order whatever q's layout; the layouts it leaves
to numpy give numpy's figures; a whole evaluate report agrees with the numpy path's (FIXPOINT_JIT=0) to
the sums' rounding.

The data spread magnitudes over many decades, so additions round and the bound is what holds them; the
layouts are evaluate's (onnxruntime's NCHW float32 seen as NHWC, a batch part of it, the int8 side
C-ordered), plus the ones the loop leaves to numpy.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.kernels import jit
from quantcore.passes.equalize import ChannelScaled
from quantcore.quantize.document import from_document
from quantcore.verify import compiled_sums, evaluate
from quantcore.verify.metrics import MetricsError, TensorAccumulator
from tests.onnx_models import depthwise_cnn, outlier_cnn, small_cnn

pytestmark = pytest.mark.skipif(not jit.installed(), reason="numba is not installed")

Array = np.ndarray[Any, Any]
SIZES = [
    *range(1, 20), 63, 64, 65, 120, 127, 128, 129, 135, 136, 137, 255, 256, 257, 271, 272, 273, 1000,
    1023, 1024, 1025, 4095, 4096, 4097, 65535, 65536, 65537, 100003, 1_000_000,
]  # fmt: skip


def _fields(acc: TensorAccumulator) -> tuple[Any, ...]:
    return (
        acc.count,
        acc.sum_ff,
        acc.sum_ee,
        acc.sum_fq,
        acc.sum_qq,
        acc.max_abs_error,
        acc.max_abs_reference,
    )


def _spread(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    return rng.standard_normal(shape) * 10.0 ** rng.uniform(-4, 4, shape)


def _ints(
    rng: np.random.Generator, lo: int, hi: int, shape: tuple[int, ...], dtype: type[np.integer[Any]]
) -> Array:
    return np.asarray(rng.integers(lo, hi, shape), dtype=dtype)


def _exact(f: Array, d: Array) -> tuple[float, ...]:
    """The four sums exactly rounded (math.fsum), and the sum of |terms| of each: the error bound's scale."""
    f64 = np.asarray(f, dtype=np.float64).reshape(-1)
    d = np.asarray(d, dtype=np.float64).reshape(-1)
    e = f64 - d
    terms = (f64 * f64, e * e, f64 * d, d * d)
    return tuple(math.fsum(t) for t in terms) + tuple(math.fsum(np.abs(t)) for t in terms)


def _chain(length: int, rows: int) -> int:
    """The longest chain of additions of rows of `length` (compiled_sums' docstring): a lane's elements,
    the row's lanes, and the rows' totals."""
    lanes = compiled_sums.LANES if length >= compiled_sums.SHORT_ROW else compiled_sums.SHORT_LANES
    return -(-length // lanes) + lanes + rows


def _within_bound(acc: TensorAccumulator, f: Array, d: Array, chain: int) -> None:
    """Each sum within the recursive-summation bound (chain - 1) eps sum |terms| of its exact value
    (compiled_sums' docstring: `chain` is its longest chain of additions); the maxima exact."""
    exact = _exact(f, d)
    eps = np.finfo(np.float64).eps
    for got, want, scale in zip(
        (acc.sum_ff, acc.sum_ee, acc.sum_fq, acc.sum_qq), exact[:4], exact[4:], strict=True
    ):
        assert abs(got - want) <= (chain - 1) * eps * scale, (got, want)
    f64, d = np.asarray(f, dtype=np.float64), np.asarray(d, dtype=np.float64)
    assert acc.max_abs_error == float(np.max(np.abs(f64 - d)))
    assert acc.max_abs_reference == float(np.max(np.abs(f64)))
    assert acc.count == f.size


def _compiled(
    monkeypatch: pytest.MonkeyPatch, f: Array, q: Array, scale: float | Array, zp: int
) -> TensorAccumulator:
    f_before, q_before = f.copy(), q.copy()
    monkeypatch.setenv(jit.SWITCH, "1")
    acc = TensorAccumulator("conv")
    with jit.compiled_loops():
        assert jit.enabled()
        acc.update_quantized(f, q, scale, zp)
    np.testing.assert_array_equal(f, f_before)
    np.testing.assert_array_equal(q, q_before)
    return acc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_size_is_within_the_summation_bound(
    monkeypatch: pytest.MonkeyPatch, dtype: type[np.floating[Any]]
) -> None:
    rng = np.random.default_rng(3)
    for n in SIZES:
        f = _spread(rng, (n,)).astype(dtype)
        q = _ints(rng, -128, 128, (n,), np.int8)
        assert compiled_sums.sums(f, q, 0.37, -3) is not None  # the compiled loop's case: one row
        acc = _compiled(monkeypatch, f, q, 0.37, -3)
        _within_bound(acc, f, (q.astype(np.float64) + 3) * 0.37, chain=_chain(n, 1))


def test_the_bound_is_tight_enough_to_catch_a_lost_term(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sum that dropped one element, or counted one twice, would fail the bound on these data: the
    smallest term is far above (chain - 1) eps sum |terms|."""
    rng = np.random.default_rng(4)
    f = rng.uniform(1.0, 2.0, 100_000).astype(np.float32)
    q = _ints(rng, -128, 128, f.shape, np.int8)
    acc = _compiled(monkeypatch, f, q, 0.01, 0)
    chain = _chain(f.size, 1)
    _within_bound(acc, f, q.astype(np.float64) * 0.01, chain=chain)
    exact = _exact(f, q.astype(np.float64) * 0.01)
    assert float(f.min()) ** 2 > (chain - 1) * np.finfo(np.float64).eps * exact[4]


def test_the_order_is_fixed_run_after_run(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    f = _spread(rng, (9, 14, 14, 33)).astype(np.float32)
    q = _ints(rng, -128, 128, f.shape, np.int8)
    first = _fields(_compiled(monkeypatch, f, q, 0.2, 4))
    assert all(_fields(_compiled(monkeypatch, f, q, 0.2, 4)) == first for _ in range(3))


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape", [(44, 32, 14, 14), (64, 6, 28, 28), (3, 96, 7, 7), (1, 1, 1, 1), (2, 10, 1, 1), (5, 7, 3, 1)]
)
def test_evaluates_layouts_are_within_the_bound(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], dtype: type[np.floating[Any]], per_channel: bool
) -> None:
    """A batch part of an NCHW float run seen as NHWC (what `evaluate` hands over: never copied), and a
    C-ordered copy of it; one scale, or one per channel."""
    rng = np.random.default_rng(sum(shape))
    n, c, h, w = shape
    run = _spread(rng, (n + 4, c, h, w)).astype(dtype)
    q = _ints(rng, -128, 128, (n, h, w, c), np.int8)
    scale = rng.uniform(0.01, 0.5, c) if per_channel else 0.02
    d = (q.astype(np.float64) - 5) * scale
    transposed = run[2 : 2 + n].transpose(0, 2, 3, 1)
    for f in (transposed, np.ascontiguousarray(transposed)):
        assert compiled_sums.sums(f, q, scale, 5) is not None
        # the loop's rows: all of it as one for one scale; for a scale per channel, a row per (sample,
        # channel) where f comes channels first, a row per channel where it comes in C order
        rows = 1 if not per_channel else (c if f.flags.c_contiguous else n * c)
        _within_bound(_compiled(monkeypatch, f, q, scale, 5), f, d, chain=_chain(f.size // rows, rows))


def test_q_in_another_order_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """q is copied into f's memory order: q's own layout cannot change a bit of the figures."""
    rng = np.random.default_rng(8)
    f = _spread(rng, (6, 8, 10, 12)).astype(np.float32).transpose(0, 2, 3, 1)
    q = _ints(rng, -128, 128, f.shape, np.int8)
    scattered = q.transpose(0, 2, 1, 3).copy().transpose(0, 2, 1, 3)
    assert not scattered.flags.c_contiguous
    for scale in (0.1, rng.uniform(0.1, 0.2, q.shape[-1])):
        assert _fields(_compiled(monkeypatch, f, scattered, scale, 1)) == _fields(
            _compiled(monkeypatch, f, q, scale, 1)
        )


def test_int16_values(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    f = _spread(rng, (7, 9, 13)).astype(np.float32)
    q = _ints(rng, -32768, 32768, f.shape, np.int16)
    _within_bound(_compiled(monkeypatch, f, q, 3.1e-5, 0), f, q.astype(np.float64) * 3.1e-5, chain=f.size)


@pytest.mark.parametrize("f_layout", ["channels first", "C order"])
def test_a_divisor_per_channel_divides_the_reference_as_numpy_does(
    monkeypatch: pytest.MonkeyPatch, f_layout: str
) -> None:
    """An equalized model's divisors (float32, one per channel) divide f inside the pass: the same bits
    as dividing first (numpy's float32 division) and summing rows of the same channels; numpy's path
    with the divisor gives the same figures up to the order of additions."""
    rng = np.random.default_rng(10)
    run = _spread(rng, (5, 12, 9, 9)).astype(np.float32)
    f = run.transpose(0, 2, 3, 1) if f_layout == "channels first" else np.ascontiguousarray(run)
    q = _ints(rng, -128, 128, f.shape, np.int8)
    divisor = rng.uniform(0.02, 50.0, f.shape[-1]).astype(np.float32)
    divided = f / divisor
    assert not np.array_equal(divided, f.astype(np.float64) / divisor)  # float32's own rounding matters
    same_scale = np.full(f.shape[-1], 0.3)  # a scale per channel: the same rows as the divisor's
    assert compiled_sums.sums(f, q, 0.3, 2, divisor) is not None
    acc = TensorAccumulator("conv")
    monkeypatch.setenv(jit.SWITCH, "1")
    with jit.compiled_loops():
        acc.update_quantized(f, q, 0.3, 2, divisor)
    assert _fields(acc) == _fields(_compiled(monkeypatch, divided, q, same_scale, 2))
    rows = 5 * 12 if f_layout == "channels first" else 12
    _within_bound(acc, divided, (q.astype(np.float64) - 2) * 0.3, chain=_chain(f.size // rows, rows))
    monkeypatch.setenv(jit.SWITCH, "0")
    reference = TensorAccumulator("conv")
    reference.update_quantized(f, q, 0.3, 2, divisor)
    numpy_first = TensorAccumulator("conv")
    numpy_first.update(divided, (q.astype(np.float64) - 2) * 0.3)
    assert _fields(reference) == _fields(numpy_first)


def test_a_divisor_not_float32_is_left_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    f = _spread(rng, (4, 6, 6, 8)).astype(np.float32)
    q = _ints(rng, -128, 128, f.shape, np.int8)
    divisor = rng.uniform(0.5, 2.0, 8)  # float64
    assert compiled_sums.sums(f, q, 0.1, 0, divisor) is None
    acc = TensorAccumulator("conv")
    monkeypatch.setenv(jit.SWITCH, "1")
    with jit.compiled_loops():
        acc.update_quantized(f, q, 0.1, 0, divisor)
    reference = TensorAccumulator("conv")
    reference.update(f / divisor, q.astype(np.float64) * 0.1)
    assert _fields(acc) == _fields(reference)


@pytest.mark.parametrize("layout", ["f with gaps", "f reversed", "f transposed with gaps", "scale per row"])
def test_layouts_left_to_numpy_give_its_figures(monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    rng = np.random.default_rng(9)
    run = _spread(rng, (6, 8, 10, 12)).astype(np.float32)
    f: Array = run
    q = _ints(rng, -128, 128, run.shape, np.int8)
    scale: float | Array = 0.1
    if layout == "f with gaps":
        f, q = run[:, :, ::2], q[:, :, ::2].copy()
    elif layout == "f reversed":
        f = run[::-1]
    elif layout == "f transposed with gaps":
        f = run[:, :, :, ::3].transpose(0, 2, 3, 1)
        q = _ints(rng, -128, 128, f.shape, np.int8)
    else:
        scale = rng.uniform(0.1, 0.2, (6, 1, 1, 1))
    assert compiled_sums.sums(f, q, scale, 1) is None  # numpy's path
    compiled = _compiled(monkeypatch, f, q, scale, 1)
    monkeypatch.setenv(jit.SWITCH, "0")
    reference = TensorAccumulator("conv")
    reference.update(f, (q.astype(np.float64) - 1) * scale)
    assert _fields(compiled) == _fields(reference)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_reference_is_refused_naming_the_layer(
    monkeypatch: pytest.MonkeyPatch, bad: float
) -> None:
    monkeypatch.setenv(jit.SWITCH, "1")
    acc = TensorAccumulator("pool2")
    f = np.ones((2, 3), dtype=np.float32)
    f[1, 2] = bad
    with jit.compiled_loops(), pytest.raises(MetricsError, match=r"pool2: the float reference contains NaN"):
        acc.update_quantized(f, np.ones((2, 3), np.int8), 0.5, 0)
    assert acc.count == 0


def test_a_shape_mismatch_is_refused_naming_the_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit.SWITCH, "1")
    with (
        jit.compiled_loops(),
        pytest.raises(MetricsError, match=r"conv: float reference has shape \(2, 3\) but"),
    ):
        TensorAccumulator("conv").update_quantized(np.ones((2, 3)), np.ones((3, 2), np.int8), 0.5, 0)


def test_squares_that_overflow_are_accepted_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _compiled(monkeypatch, np.array([1e200, -1e200]), np.array([1, 0], np.int8), 1e200, 0)
    assert _fields(compiled) == (2, math.inf, math.inf, math.inf, math.inf, 1e200, 1e200)


@pytest.mark.parametrize("per_channel_scales", [False, True])
def test_evaluate_reports_agree_with_the_loop_on_and_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, per_channel_scales: bool
) -> None:
    """The whole report: top-1, agreement, counts and maxima to the last bit, every layer's figures to
    the sums' rounding; the depthwise net with per-channel input scales takes the per-channel scales."""
    onnx.save(depthwise_cnn() if per_channel_scales else small_cnn(), tmp_path / "m.onnx")
    loaded = pipeline.load_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(1)
    shape = (200, *loaded.graph.tensor(loaded.graph.inputs[0]).shape[1:])
    np.save(tmp_path / "x.npy", rng.uniform(0, 1, shape).astype(np.float32))
    data = pipeline.load_data(tmp_path / "x.npy", loaded.graph)
    options = pipeline.QuantizeOptions(
        dw_channel_scales=per_channel_scales, bias_correction=False, equalize=False
    )
    document = pipeline.quantize(loaded, data, options).document
    reports = []
    for switch in ("all", "0"):  # all: 200 samples are below evaluate's threshold for the loops
        monkeypatch.setenv(jit.SWITCH, switch)
        reports.append(pipeline.evaluate(loaded, document, data, batch_size=48))
    _same_but_rounding(dataclasses.asdict(reports[0]), dataclasses.asdict(reports[1]))
    assert len(reports[0].layers) >= 4 and reports[0].samples == 200


class _DividingFirst:
    """An equalized float model as evaluate took it before its divisions moved into the figures' pass:
    every activation divided up front (ChannelScaled.activations), behind a type evaluate does not
    unwrap."""

    def __init__(self, scaled: Any) -> None:
        self.scaled = scaled

    def activations(self, feeds: dict[str, Array]) -> dict[str, Array]:
        return dict(self.scaled.activations(feeds))


def test_an_equalized_models_divisions_in_the_pass_give_the_figures_of_dividing_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    onnx.save(outlier_cnn(), tmp_path / "m.onnx")
    loaded = pipeline.load_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(2)
    shape = (150, *loaded.graph.tensor(loaded.graph.inputs[0]).shape[1:])
    np.save(tmp_path / "x.npy", rng.uniform(0, 1, shape).astype(np.float32))
    data = pipeline.load_data(tmp_path / "x.npy", loaded.graph)
    options = pipeline.QuantizeOptions(equalize=True, bias_correction=False)
    document = pipeline.quantize(loaded, data, options).document
    scaled = pipeline.float_model_for(loaded, document)
    assert isinstance(scaled, ChannelScaled) and len(scaled.divisors) >= 2
    qgraph = from_document(loaded.graph, document)
    monkeypatch.setenv(jit.SWITCH, "all")
    reports = [
        dataclasses.asdict(
            evaluate.evaluate_graphs(model, qgraph, data, model="m", params_file="p", batch_size=40)
        )
        for model in (scaled, _DividingFirst(scaled))
    ]
    _same_but_rounding(reports[0], reports[1])


def _same_but_rounding(got: Any, want: Any) -> None:
    """Equal field for field, except that a float may differ by the sums' order of additions: relative
    1e-12 (the sums agree within n eps with n < 10^4 here, about 2e-12; an SQNR in dB moves by less)."""
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            _same_but_rounding(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same_but_rounding(g, w)
    elif isinstance(want, float) and math.isfinite(want):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0), (got, want)
    else:
        assert got == want


def test_evaluate_accelerates_from_ten_million_activation_values(tmp_path: Any) -> None:
    onnx.save(small_cnn(), tmp_path / "m.onnx")
    loaded = pipeline.load_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(1)
    np.save(
        tmp_path / "x.npy", rng.uniform(0, 1, (16, *loaded.graph.tensor(loaded.graph.inputs[0]).shape[1:]))
    )
    data = pipeline.load_data(tmp_path / "x.npy", loaded.graph)
    qgraph = from_document(loaded.graph, pipeline.quantize(loaded, data).document)
    per_sample = sum(
        int(np.prod(qgraph.tensor(n.outputs[0]).shape[1:])) for n in qgraph.nodes if n.op.computes
    )
    assert evaluate.COMPILED_LOOPS_FROM == 10**7  # LeNet-5 over 1,250 images (8,094 values each) is above it
    fewest = -(-evaluate.COMPILED_LOOPS_FROM // per_sample)
    assert evaluate.worth_compiling(qgraph, fewest)
    assert not evaluate.worth_compiling(qgraph, fewest - 1)
