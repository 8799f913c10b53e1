"""Float vs int8 figures: literal values on hand-made arrays, the edge cases, and streaming == one batch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from quantcore.verify.metrics import (
    ClassificationAccumulator,
    MetricsError,
    TensorAccumulator,
    agreement,
    compare,
    output_sqnr_db,
    top1,
)

U = 2.0**-53  # unit roundoff of float64


def test_figures_of_a_one_element_error() -> None:
    m = compare([1, 2, 3, 4], [1, 2, 3, 5], layer="conv1")
    # sum f^2 = 30, sum (f-q)^2 = 1, sum f q = 34, sum q^2 = 39, peak 4 over 4 elements.
    assert m.sqnr_db == 10 * math.log10(30 / 1) == 14.771212547196624
    assert m.rel_l2 == 1 / math.sqrt(30)
    assert m.max_abs == 1.0
    assert m.cosine == 34 / math.sqrt(30 * 39)
    assert m.cosine == pytest.approx(0.99399908854, abs=1e-11)  # 34 / 34.20526275...
    assert m.psnr_db == 10 * math.log10(4**2 / (1 / 4))  # peak^2 / mse = 16 / 0.25 = 64
    assert m.count == 4
    assert not m.exact


def test_figures_of_a_signed_2d_tensor() -> None:
    f = np.array([[0.5, -1.0], [2.0, 0.0]], dtype=np.float32)
    q = np.array([[0.5, -0.75], [2.25, 0.0]], dtype=np.float32)
    m = compare(f, q, layer="dw")
    # sum f^2 = 5.25, noise = 0.0625 + 0.0625 = 0.125, sum f q = 5.5, sum q^2 = 5.875; all exact in binary.
    assert m.sqnr_db == 10 * math.log10(5.25 / 0.125)  # 42
    assert m.rel_l2 == math.sqrt(0.125) / math.sqrt(5.25)
    assert m.cosine == 5.5 / math.sqrt(5.25 * 5.875)
    assert m.max_abs == 0.25
    assert m.psnr_db == 10 * math.log10(2.0**2 * 4 / 0.125)  # peak 2, mse 0.125 / 4


def test_identical_arrays_are_exact_with_infinite_sqnr() -> None:
    f = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    m = compare(f, f.copy(), layer="relu")
    assert (m.sqnr_db, m.psnr_db, m.rel_l2, m.cosine, m.max_abs) == (math.inf, math.inf, 0.0, 1.0, 0.0)
    assert m.exact


def test_all_zero_on_both_sides_is_exact() -> None:
    m = compare(np.zeros(6), np.zeros(6), layer="dead")
    assert (m.sqnr_db, m.psnr_db, m.rel_l2, m.cosine, m.max_abs) == (math.inf, math.inf, 0.0, 1.0, 0.0)


def test_zero_reference_with_nonzero_int8_is_minus_infinity() -> None:
    m = compare([0.0, 0.0, 0.0], [0.0, 0.5, 0.0], layer="relu3")
    assert (m.sqnr_db, m.psnr_db, m.rel_l2, m.cosine, m.max_abs) == (-math.inf, -math.inf, math.inf, 0.0, 0.5)


def test_all_zero_int8_against_nonzero_reference() -> None:
    m = compare([1.0, -2.0], [0.0, 0.0], layer="fc")
    assert (m.sqnr_db, m.rel_l2, m.cosine, m.max_abs) == (0.0, 1.0, 0.0, 2.0)


def test_opposite_signs_give_cosine_minus_one() -> None:
    m = compare([1.0, 2.0], [-1.0, -2.0], layer="neg")
    assert m.cosine == -1.0
    assert m.sqnr_db == 10 * math.log10(5 / 20)


def test_cosine_is_clipped_when_rounding_puts_it_above_one() -> None:
    rng = np.random.default_rng(0)
    for _ in range(1000):
        f = rng.standard_normal(7)
        q = f * (1 + 1e-9)
        raw = float(np.sum(f * q)) / math.sqrt(float(np.sum(f * f)) * float(np.sum(q * q)))
        if raw > 1.0:
            break
    else:
        pytest.fail("no vector pair found whose unclipped cosine rounds above 1")
    assert compare(f, q, layer="x").cosine == 1.0


def test_shape_mismatch_names_the_layer() -> None:
    with pytest.raises(MetricsError, match=r"conv7: float reference has shape \(2, 3\).*\(3, 2\)"):
        compare(np.zeros((2, 3)), np.zeros((3, 2)), layer="conv7")


@pytest.mark.parametrize("side", ["reference", "dequantized"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_inputs_are_rejected_naming_the_layer(side: str, bad: float) -> None:
    good = np.ones(3)
    broken = np.array([1.0, bad, 1.0])
    f, q = (broken, good) if side == "reference" else (good, broken)
    with pytest.raises(MetricsError, match=r"pool2: the .* contains NaN or infinity"):
        compare(f, q, layer="pool2")


def test_nothing_accumulated_is_an_error_naming_the_layer() -> None:
    acc = TensorAccumulator("softmax")
    acc.update(np.zeros((0, 4)), np.zeros((0, 4)))  # an empty batch is allowed and changes nothing
    with pytest.raises(MetricsError, match="softmax: no elements"):
        acc.result()


def _batches(rng: np.random.Generator, sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Float32 activations and a dequantized copy: a scale of 1/32 and an int8 clamp."""
    out = []
    for n in sizes:
        f = rng.standard_normal((n, 8, 8, 4)).astype(np.float32)
        out.append((f, (np.clip(np.round(f * 32), -128, 127) / 32).astype(np.float32)))
    return out


def test_streaming_equals_one_batch_exactly_when_every_sum_is_exact() -> None:
    # f = k/64 and q = j/16 with |f|, |q| <= 2.1: every square and product is a multiple of 2^-12 below 2^5
    # and the sums of 7 * 7 * 16 = 784 of them stay below 2^15, so every partial sum is exact in float64
    # whatever the order; the streamed figures must then equal the one-batch figures bit for bit.
    rng = np.random.default_rng(7)
    sizes = [1, 3, 2, 1, 0]
    fs = [rng.integers(-128, 129, (n, 7, 16)) / 64 for n in sizes]
    qs = [(np.round(f * 16) + rng.integers(-1, 2, f.shape)) / 16 for f in fs]
    streamed = TensorAccumulator("conv")
    for f, q in zip(fs, qs, strict=True):
        streamed.update(f, q)
    whole = TensorAccumulator("conv")
    whole.update(np.concatenate(fs), np.concatenate(qs))
    assert streamed == whole
    assert (
        streamed.result() == whole.result() == compare(np.concatenate(fs), np.concatenate(qs), layer="conv")
    )
    assert not streamed.result().exact


def test_streaming_random_data_within_the_float64_summation_bound() -> None:
    rng = np.random.default_rng(11)
    batches = _batches(rng, [5, 1, 9, 3])
    streamed = TensorAccumulator("conv")
    for f, q in batches:
        streamed.update(f, q)
    f_all = np.concatenate([f for f, _ in batches]).astype(np.float64)
    q_all = np.concatenate([q for _, q in batches]).astype(np.float64)
    whole = TensorAccumulator("conv")
    whole.update(f_all, q_all)
    # Both compute the same float64 terms element by element; only the order of the additions differs.
    # Any order of summing n terms is within (n-1) u sum|t| of the exact sum (Higham, Accuracy and
    # Stability of Numerical Algorithms, 4.2), so two orders differ by at most 2 (n-1) u sum|t|.
    n = f_all.size
    bound = 2 * (n - 1) * U
    for key, terms in [
        ("sum_ff", f_all * f_all),
        ("sum_ee", (f_all - q_all) ** 2),
        ("sum_fq", f_all * q_all),
        ("sum_qq", q_all * q_all),
    ]:
        assert abs(getattr(streamed, key) - getattr(whole, key)) <= bound * float(np.sum(np.abs(terms))), key
    assert streamed.count == whole.count == n
    assert streamed.max_abs_error == whole.max_abs_error  # a maximum does not depend on the order
    assert streamed.max_abs_reference == whole.max_abs_reference
    s, w = streamed.result(), whole.result()
    # Relative errors d in the two energies (both non-negative sums, so d <= bound) move 10 log10(S / N)
    # by at most 10 / ln 10 * (dS + dN) dB, plus the rounding of the logarithm itself.
    assert abs(s.sqnr_db - w.sqnr_db) <= 10 / math.log(10) * 2 * bound * 1.01 + 4 * math.ulp(w.sqnr_db)
    # Sanity: about 6 dB per bit of an int8 error, not noise against noise; 40.85 dB measured (seeded).
    assert 38 < s.sqnr_db < 44
    assert s.rel_l2 == pytest.approx(w.rel_l2, rel=2 * bound)  # sqrt halves each relative error
    assert s.max_abs == w.max_abs


def test_merged_accumulators_equal_one() -> None:
    rng = np.random.default_rng(3)
    batches = [(rng.integers(-64, 65, (2, 9)) / 32, rng.integers(-64, 65, (2, 9)) / 32) for _ in range(4)]
    left, right, whole = TensorAccumulator("fc"), TensorAccumulator("fc"), TensorAccumulator("fc")
    for i, (f, q) in enumerate(batches):
        (left if i < 2 else right).update(f, q)
        whole.update(f, q)
    left.merge(right)
    assert left == whole  # dyadic values with small sums: exact, see the exact streaming test


def test_merging_another_tensor_is_refused() -> None:
    with pytest.raises(MetricsError, match=r"conv1: cannot merge .*'conv2'"):
        TensorAccumulator("conv1").merge(TensorAccumulator("conv2"))


def test_output_sqnr_pools_the_energy_of_every_output() -> None:
    # Signal 30 + 4, noise 1 + 1: 10 log10(34 / 2), not the mean of the two outputs' SQNRs.
    assert output_sqnr_db([[1, 2, 3, 4], [[2.0]]], [[1, 2, 3, 5], [[1.0]]]) == 10 * math.log10(34 / 2)


def test_output_sqnr_errors_name_the_output() -> None:
    with pytest.raises(MetricsError, match="model outputs, output 1: float reference has shape"):
        output_sqnr_db([np.zeros(3), np.zeros(2)], [np.zeros(3), np.zeros(4)])
    with pytest.raises(MetricsError, match="2 float outputs but 1 int8"):
        output_sqnr_db([np.zeros(3), np.zeros(2)], [np.zeros(3)])


LOGITS = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5], [0.2, 0.1, 0.9], [1.0, 1.5, 1.4]])
INT8_LOGITS = np.array([[0, 60, -30], [90, 0, 15], [6, 3, 27], [30, 44, 44]], dtype=np.int8)


def test_top1_counts_argmax_hits() -> None:
    # Arg-max per row: 1, 0, 2, 1; labels hit rows 0, 1 and 3.
    assert top1(LOGITS, np.array([1, 0, 0, 1])) == 3 / 4
    assert top1(LOGITS.reshape(4, 1, 1, 3), np.array([1, 0, 2, 1])) == 1.0


def test_top1_ties_go_to_the_lowest_index() -> None:
    tied = np.array([[5, 7, 7]], dtype=np.int8)
    assert top1(tied, np.array([1])) == 1.0
    assert top1(tied, np.array([2])) == 0.0


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (np.array([1, 0, 3, 1]), "label 3 is outside the 3 classes"),
        (np.array([1, 0, -1, 1]), "label -1 is outside"),
        (np.array([1.0, 0.0, 2.0, 1.0]), "integer class indices"),
        (np.array([1, 0, 2]), r"expected shape \(4,\)"),
    ],
)
def test_bad_labels_are_rejected(labels: np.ndarray, message: str) -> None:
    with pytest.raises(MetricsError, match=message):
        top1(LOGITS, labels)


def test_agreement_is_the_share_of_equal_argmax() -> None:
    # int8 arg-max 1, 0, 2, 1 (row 3 ties 44/44, the first wins) vs float 1, 0, 2, 1: all agree.
    assert agreement(LOGITS, INT8_LOGITS) == 1.0
    flipped = INT8_LOGITS.copy()
    flipped[2] = [30, 3, 27]
    assert agreement(LOGITS, flipped) == 3 / 4


@pytest.mark.parametrize("shape", [(4,), (4, 0), (0, 3)])
def test_logits_without_a_class_axis_or_samples_are_rejected(shape: tuple[int, ...]) -> None:
    with pytest.raises(MetricsError, match="expected logits of shape"):
        agreement(np.zeros(shape), np.zeros(shape))


def test_agreement_shape_mismatch() -> None:
    with pytest.raises(
        MetricsError, match=r"float logits have shape \(4, 3\) but int8 logits have shape \(4, 2\)"
    ):
        agreement(LOGITS, INT8_LOGITS[:, :2])


def test_classification_accumulator_streams_like_one_batch() -> None:
    rng = np.random.default_rng(5)
    f = rng.standard_normal((50, 10))
    q = np.clip(np.round(f * 2), -128, 127).astype(np.int8)  # coarse on purpose: ties and flips
    labels = rng.integers(0, 10, 50)
    acc = ClassificationAccumulator()
    for start in (0, 7, 20, 21):
        stop = {0: 7, 7: 20, 20: 21, 21: 50}[start]
        acc.update(f[start:stop], q[start:stop], labels[start:stop])
    assert acc.samples == 50
    assert acc.agreement == agreement(f, q)
    assert acc.top1_float == top1(f, labels)
    assert acc.top1_int8 == top1(q, labels)
    assert acc.agreement < 1.0  # the rounding must have flipped some arg-max, or agreement is untested


def test_classification_without_labels_has_no_top1() -> None:
    acc = ClassificationAccumulator()
    acc.update(LOGITS, INT8_LOGITS)
    assert (acc.top1_float, acc.top1_int8, acc.agreement) == (None, None, 1.0)
    with pytest.raises(MetricsError, match="labels: given for some batches but not others"):
        acc.update(LOGITS, INT8_LOGITS, np.array([1, 0, 2, 1]))


def test_classification_with_nothing_accumulated() -> None:
    with pytest.raises(MetricsError, match="no samples"):
        _ = ClassificationAccumulator().agreement


LAYOUTS = {
    # evaluate's case: onnxruntime's NCHW float32 seen as NHWC, the int8 side dequantized in NHWC
    "float32 transposed, q C-ordered": (np.float32, True, False),
    "float64 transposed, q C-ordered": (np.float64, True, False),
    "float64 C-ordered, q transposed": (np.float64, False, True),
    "float32 transposed, q transposed": (np.float32, True, True),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sums_are_the_plain_float64_sums_to_the_last_bit(layout: str) -> None:
    # evaluate's report must keep its last bits: each sum is the plain float64 expression, whatever the
    # layouts (numpy adds in memory order, so a faster path laying a product out differently, or summing
    # it in pieces, would round differently).
    dtype, f_transposed, q_transposed = LAYOUTS[layout]
    rng = np.random.default_rng(7)
    # magnitudes spread over 12 decades: every addition rounds, so a sum in another order differs
    nchw = rng.standard_normal((5, 6, 9, 11)) * 10.0 ** rng.uniform(-6, 6, (5, 6, 9, 11))
    f_src = nchw.astype(dtype)
    q_src = np.round(nchw * 8) / 8
    f = f_src.transpose(0, 2, 3, 1) if f_transposed else np.ascontiguousarray(f_src.transpose(0, 2, 3, 1))
    q = q_src.transpose(0, 2, 3, 1) if q_transposed else np.ascontiguousarray(q_src.transpose(0, 2, 3, 1))
    f_before, q_before = f.copy(), q.copy()
    acc = TensorAccumulator("conv")
    acc.update(f, q)
    f64, q64 = np.asarray(f, dtype=np.float64), np.asarray(q, dtype=np.float64)
    e = f64 - q64
    assert (acc.sum_ff, acc.sum_qq) == (float(np.sum(f64 * f64)), float(np.sum(q64 * q64)))
    assert (acc.sum_ee, acc.sum_fq) == (float(np.sum(e * e)), float(np.sum(f64 * q64)))
    assert acc.max_abs_error == float(np.max(np.abs(e)))
    assert acc.max_abs_reference == float(np.max(np.abs(f64)))
    np.testing.assert_array_equal(f, f_before)  # the caller's arrays are left alone
    np.testing.assert_array_equal(q, q_before)


def test_finite_values_whose_squares_overflow_are_accepted_as_before() -> None:
    # finiteness is looked at only when a sum is not finite (update's fast path): an overflow of finite
    # values must not be mistaken for a NaN or infinity in the input.
    acc = TensorAccumulator("huge")
    acc.update(np.array([1e200, -1e200]), np.array([1e200, 0.0]))
    assert (acc.sum_ff, acc.sum_ee, acc.sum_qq, acc.max_abs_error) == (math.inf, math.inf, math.inf, 1e200)
    assert acc.count == 2


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_refused_batch_leaves_the_sums_alone(bad: float) -> None:
    acc = TensorAccumulator("pool2")
    acc.update(np.ones(4), np.ones(4))
    before = (acc.count, acc.sum_ff, acc.sum_ee, acc.sum_fq, acc.sum_qq, acc.max_abs_error)
    with pytest.raises(MetricsError, match=r"pool2: the int8 result contains NaN or infinity"):
        acc.update(np.ones((2, 3), dtype=np.float32), np.full((2, 3), bad))
    assert (acc.count, acc.sum_ff, acc.sum_ee, acc.sum_fq, acc.sum_qq, acc.max_abs_error) == before
