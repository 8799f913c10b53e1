"""How far the int8 network is from the float one: the figures `fixpoint evaluate` reports, in numpy (and
a compiled twin of the sums, verify/compiled_sums.py, for `update_quantized`: the same sums in another
order of float64 additions).

Per tensor (a layer's output, or all model outputs together), for a float reference f and the dequantized
int8 result q of the same shape, computed in float64:

    rel_l2  = ||f - q|| / ||f||
    cosine  = <f, q> / (||f|| ||q||), clipped to [-1, 1] (rounding can put it a hair outside)
    sqnr_db = 10 log10(sum f^2 / sum (f - q)^2)
    psnr_db = 10 log10(peak^2 / mse), peak = max |f|, mse = sum (f - q)^2 / count
    max_abs = max |f - q|

PSNR takes the peak from the float reference (its largest magnitude over every sample seen), not from the
int8 range, so it is comparable across layers with different scales.

Edge cases, chosen so that no figure is ever NaN:
    q == f exactly (no noise, including f = q = 0): sqnr_db = psnr_db = +inf, rel_l2 = 0, cosine = 1.
    f all zero, q not:                             sqnr_db = psnr_db = -inf, rel_l2 = +inf, cosine = 0.
    q all zero, f not:                             cosine = 0 (sqnr_db = 0 dB, rel_l2 = 1 by the formulas).
    shape mismatch, NaN/inf in an input, nothing accumulated: MetricsError naming the layer.
A zero vector has no direction; cosine 0 for it follows scikit-learn and ranks the layer as bad, which it
is. How the infinities are written to JSON and CSV is decided in report.py.

Streaming: TensorAccumulator keeps only sums (f^2, (f - q)^2, f q, q^2), two maxima and a count, so
evaluation can run over any number of batches and give the figures of one big batch; they differ only by
the order of float64 additions (exactly equal when every partial sum is exact). The noise energy is summed
from (f - q)^2 directly, never as f^2 - 2fq + q^2, which would cancel catastrophically when q is close to f.

Per model: top-1 and arg-max agreement mean something only for a classifier, and are reported only for
one (`classifier_classes` states the rule): a model with one output whose value per sample is one vector
of K >= 2 scores - (N, K), or (N, 1, 1, K): axes of size 1 aside - logits or Softmax probabilities alike.
An output of image shape (an autoencoder's, a segmentation map), a single value per sample (a regression)
or several outputs (a detector's heads) is not: the arg-max over all its values names no class. top1 and
agreement take logits of shape (N, classes) - everything after the batch axis is the class axis.
Dequantized or raw int8 logits give the same arg-max (dequantization is increasing). Ties go to the
lowest index (numpy's arg-max), as a firmware loop keeping the first maximum does; int8 logits tie far
more often than float ones, which is part of the agreement being measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quantcore.errors import QuantcoreError
from quantcore.kernels import jit
from quantcore.scheme.arith import dequantize


class MetricsError(QuantcoreError):
    """Arrays handed to the metrics do not fit together (shapes, values, labels); names the layer."""

    def __init__(self, subject: str, problem: str) -> None:
        self.subject = subject
        self.problem = problem
        super().__init__(f"{subject}: {problem}")


@dataclass(frozen=True)
class TensorMetrics:
    """Float vs dequantized int8 figures for one tensor, over every element and sample accumulated."""

    sqnr_db: float
    """Signal to quantization noise in dB; +inf when exact, -inf when f is all zero and q is not."""
    psnr_db: float
    """Peak signal to noise ratio with peak = max |f|; infinite in the same cases as sqnr_db."""
    cosine: float
    """Cosine similarity in [-1, 1]; 1 when exact, 0 when exactly one side is all zero."""
    rel_l2: float
    """||f - q|| / ||f||; 0 when exact, +inf when the reference is all zero and q is not."""
    max_abs: float
    """Largest |f - q| over all elements."""
    count: int
    """Number of elements compared."""

    @property
    def exact(self) -> bool:
        """The int8 result equals the float reference element for element."""
        return self.max_abs == 0.0


@dataclass
class TensorAccumulator:
    """Running sums for one tensor across batches; `result()` gives the figures of everything seen."""

    name: str
    """The layer (or output) the figures are for; every error names it."""
    count: int = 0
    sum_ff: float = 0.0
    sum_ee: float = 0.0
    sum_fq: float = 0.0
    sum_qq: float = 0.0
    max_abs_error: float = 0.0
    max_abs_reference: float = 0.0

    def update(self, reference: npt.ArrayLike, dequantized: npt.ArrayLike) -> None:
        """Add one batch: the float reference and the dequantized int8 result, same shape."""
        f, q = _as_pair(self.name, reference, dequantized, check_finite=False)
        if f.size == 0:
            return
        with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf inputs are refused below
            sums, max_error = _sums(f, q)
        if not all(math.isfinite(value) for value in sums):
            _as_pair(self.name, f, q)  # raises when an input holds NaN or infinity
        given = reference if isinstance(reference, np.ndarray) and reference.dtype.kind == "f" else f
        self._add(f.size, sums, max_error, _largest_magnitude(given))

    def update_quantized(
        self,
        reference: np.ndarray,
        q: np.ndarray,
        scale: float | np.ndarray,
        zero_point: int,
        divisor: np.ndarray | None = None,
    ) -> None:
        """`update(reference / divisor, (q - zero_point) * scale)` for integer `q` (scale one float, or
        one per channel along the last axis; the divisor, when given, float32 per channel: an equalized
        model's, passes.equalize.ChannelScaled): the same sums, up to the order of float64 additions, in
        one compiled pass with the division and dequantization inside it where quantcore.kernels.jit
        allows (verify/compiled_sums.py), else numpy's passes."""
        found = None
        if jit.enabled():
            from quantcore.verify import compiled_sums  # the compiled loop: only here (kernels/jit.py)

            found = compiled_sums.sums(reference, q, scale, zero_point, divisor)
        if found is None or not all(math.isfinite(value) for value in found[0]):
            # numpy's path: also what refuses NaN or infinity, naming the layer
            divided = reference if divisor is None else reference / divisor
            self.update(divided, dequantize(q, scale, zero_point))
            return
        sums, max_error, max_reference = found
        self._add(q.size, sums, max_error, max_reference)

    def _add(self, count: int, sums: Sequence[float], max_error: float, max_reference: float) -> None:
        """One batch's figures: its element count, (sum f^2, sum e^2, sum f q, sum q^2), max |e|, max |f|."""
        self.count += count
        self.sum_ff += sums[0]
        self.sum_ee += sums[1]
        self.sum_fq += sums[2]
        self.sum_qq += sums[3]
        self.max_abs_error = max(self.max_abs_error, max_error)
        self.max_abs_reference = max(self.max_abs_reference, max_reference)

    def merge(self, other: TensorAccumulator) -> None:
        """Fold in an accumulator of the same tensor filled elsewhere (another worker, another shard)."""
        if other.name != self.name:
            raise MetricsError(self.name, f"cannot merge the figures of another tensor, '{other.name}'")
        self.count += other.count
        self.sum_ff += other.sum_ff
        self.sum_ee += other.sum_ee
        self.sum_fq += other.sum_fq
        self.sum_qq += other.sum_qq
        self.max_abs_error = max(self.max_abs_error, other.max_abs_error)
        self.max_abs_reference = max(self.max_abs_reference, other.max_abs_reference)

    def result(self) -> TensorMetrics:
        """The figures over everything accumulated so far."""
        if self.count == 0:
            raise MetricsError(self.name, "no elements were accumulated; evaluate at least one sample")
        peak_energy = self.max_abs_reference * self.max_abs_reference * self.count
        return TensorMetrics(
            sqnr_db=_db(self.sum_ff, self.sum_ee),
            psnr_db=_db(peak_energy, self.sum_ee),
            cosine=self._cosine(),
            rel_l2=self._rel_l2(),
            max_abs=self.max_abs_error,
            count=self.count,
        )

    def _cosine(self) -> float:
        if self.sum_ee == 0.0:
            return 1.0
        if self.sum_ff == 0.0 or self.sum_qq == 0.0:
            return 0.0
        return min(1.0, max(-1.0, self.sum_fq / math.sqrt(self.sum_ff * self.sum_qq)))

    def _rel_l2(self) -> float:
        if self.sum_ee == 0.0:
            return 0.0
        if self.sum_ff == 0.0:
            return math.inf
        return math.sqrt(self.sum_ee) / math.sqrt(self.sum_ff)


def compare(reference: npt.ArrayLike, dequantized: npt.ArrayLike, *, layer: str) -> TensorMetrics:
    """The figures for one float reference and its dequantized int8 counterpart (one batch)."""
    acc = TensorAccumulator(layer)
    acc.update(reference, dequantized)
    return acc.result()


def output_sqnr_db(float_outputs: Sequence[npt.ArrayLike], int8_outputs: Sequence[npt.ArrayLike]) -> float:
    """SQNR over all model outputs together: total signal energy over total noise energy."""
    if len(float_outputs) != len(int8_outputs):
        raise MetricsError(
            "model outputs", f"{len(float_outputs)} float outputs but {len(int8_outputs)} int8 outputs"
        )
    acc = TensorAccumulator("model outputs")
    for index, (f, q) in enumerate(zip(float_outputs, int8_outputs, strict=True)):
        acc.merge(_accumulated("model outputs", f"output {index}", f, q))
    return acc.result().sqnr_db


NOT_CLASS_SCORES = "its output is not one vector of class scores per sample"
"""Why a model is not a classifier (`classifier_classes`), as the reports word it."""


def classifier_classes(output_shapes: Sequence[Sequence[int]]) -> int | None:
    """K when a model with these output shapes (batch first) is a classifier of K classes - one output,
    one vector of K >= 2 values per sample, axes of size 1 aside - else None (see the module docstring)."""
    if len(output_shapes) != 1:
        return None
    per_sample = [n for n in output_shapes[0][1:] if n != 1]
    return per_sample[0] if len(per_sample) == 1 and per_sample[0] >= 2 else None


def top1(logits: npt.ArrayLike, labels: npt.ArrayLike) -> float:
    """Share of samples whose arg-max is the label (0..1)."""
    predicted, classes = _predictions("logits", logits)
    return _top1_hits(predicted, classes, labels) / predicted.size


def agreement(float_logits: npt.ArrayLike, int8_logits: npt.ArrayLike) -> float:
    """Share of samples whose float and int8 arg-max agree (0..1)."""
    f, q, _ = _prediction_pair(float_logits, int8_logits)
    return int(np.count_nonzero(f == q)) / f.size


@dataclass
class ClassificationAccumulator:
    """Top-1 and agreement counts across batches (labels optional, but for every batch or none)."""

    samples: int = 0
    agreeing: int = 0
    labelled: int = 0
    correct_float: int = 0
    correct_int8: int = 0

    def update(
        self, float_logits: npt.ArrayLike, int8_logits: npt.ArrayLike, labels: npt.ArrayLike | None = None
    ) -> None:
        f, q, classes = _prediction_pair(float_logits, int8_logits)
        counted = ClassificationAccumulator(f.size, int(np.count_nonzero(f == q)))
        if labels is not None:
            counted.labelled = f.size
            counted.correct_float = _top1_hits(f, classes, labels)
            counted.correct_int8 = _top1_hits(q, classes, labels)
        self.merge(counted)

    def merge(self, other: ClassificationAccumulator) -> None:
        """Fold in the counts of other samples (another part of the data, counted elsewhere)."""
        if other.samples and self.samples and (other.labelled == 0) != (self.labelled == 0):
            raise MetricsError("labels", "given for some batches but not others; give them for all or none")
        self.samples += other.samples
        self.agreeing += other.agreeing
        self.labelled += other.labelled
        self.correct_float += other.correct_float
        self.correct_int8 += other.correct_int8

    @property
    def agreement(self) -> float:
        if self.samples == 0:
            raise MetricsError("logits", "no samples were accumulated")
        return self.agreeing / self.samples

    @property
    def top1_float(self) -> float | None:
        """None when no labels were given."""
        return self.correct_float / self.labelled if self.labelled else None

    @property
    def top1_int8(self) -> float | None:
        """None when no labels were given."""
        return self.correct_int8 / self.labelled if self.labelled else None


def _db(signal: float, noise: float) -> float:
    """10 log10(signal / noise) with the edge cases of the module docstring; never raises, never NaN."""
    if noise == 0.0:
        return math.inf
    ratio = signal / noise
    if ratio == 0.0:
        return -math.inf
    return 10.0 * math.log10(ratio)


def _accumulated(name: str, part: str, f: npt.ArrayLike, q: npt.ArrayLike) -> TensorAccumulator:
    acc = TensorAccumulator(name)
    try:
        acc.update(f, q)
    except MetricsError as err:
        raise MetricsError(f"{name}, {part}", err.problem) from err
    return acc


def _sums(f: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> tuple[tuple[float, ...], float]:
    """(sum f^2, sum e^2, sum f q, sum q^2) with e = f - q, and max |e|: np.sum over the float64 arrays
    f * f, e * e, f * q and q * q as numpy lays them out - the same pairwise order, the same bits as the
    plain expressions - in fewer passes.

    - No finiteness pass: a NaN or infinity in f (or q) makes sum f^2 (or sum q^2) NaN or +inf, so the
      caller looks (and refuses) only when a sum is not finite.
    - max |e| is max(|max e|, |min e|): no |e| array.
    - A binary ufunc whose operands disagree on the axis order lays its result out in C order (numpy's
      iterator: "C-order wins" conflicts), so with q C-contiguous e, f q and q q are C-ordered whatever
      f's layout. A float reference that arrives transposed (ONNX's NCHW read as NHWC) is therefore
      copied to C order once, and e and f q become contiguous passes instead of two strided ones; f * f
      keeps f's own layout (and summation order).
    - e * e is squared in place, q * q written over f q's array after its sum (both C-ordered)."""
    sum_ff = float(np.sum(f * f))
    if q.flags.c_contiguous and not f.flags.c_contiguous:
        f = np.ascontiguousarray(f)
    e = f - q
    max_error = _largest_magnitude(e)
    np.multiply(e, e, out=e)
    sum_ee = float(np.sum(e))
    product = f * q
    sum_fq = float(np.sum(product))
    if product.flags.c_contiguous and q.flags.c_contiguous:
        sum_qq = float(np.sum(np.multiply(q, q, out=product)))
    else:
        sum_qq = float(np.sum(q * q))
    return (sum_ff, sum_ee, sum_fq, sum_qq), max_error


def _largest_magnitude(values: np.ndarray) -> float:
    """max |x| of a non-empty array of finite floats, as a float64 (exact: float64 holds every smaller
    float), from its maximum and minimum (no |x| array)."""
    return max(abs(float(values.max())), abs(float(values.min())))


def _as_pair(
    name: str, reference: npt.ArrayLike, dequantized: npt.ArrayLike, check_finite: bool = True
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    f = np.asarray(reference, dtype=np.float64)
    q = np.asarray(dequantized, dtype=np.float64)
    if f.shape != q.shape:
        raise MetricsError(
            name, f"float reference has shape {f.shape} but the int8 result has shape {q.shape}"
        )
    if not check_finite:
        return f, q
    for label, array in (("float reference", f), ("int8 result", q)):
        if not np.all(np.isfinite(array)):
            raise MetricsError(
                name, f"the {label} contains NaN or infinity; the figures would be meaningless"
            )
    return f, q


def _predictions(what: str, logits: npt.ArrayLike) -> tuple[npt.NDArray[np.intp], int]:
    """Arg-max per sample, and the number of classes."""
    array = np.asarray(logits)
    if array.ndim < 2 or array.size == 0:
        raise MetricsError(what, f"expected logits of shape (samples, classes), got shape {array.shape}")
    flat = array.reshape(array.shape[0], -1)
    return np.argmax(flat, axis=1), flat.shape[1]


def _prediction_pair(
    float_logits: npt.ArrayLike, int8_logits: npt.ArrayLike
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], int]:
    f_shape, q_shape = np.shape(float_logits), np.shape(int8_logits)
    if f_shape != q_shape:
        raise MetricsError(
            "logits", f"float logits have shape {f_shape} but int8 logits have shape {q_shape}"
        )
    f, classes = _predictions("float logits", float_logits)
    q, _ = _predictions("int8 logits", int8_logits)
    return f, q, classes


def _top1_hits(predicted: npt.NDArray[np.intp], classes: int, labels: npt.ArrayLike) -> int:
    truth = np.asarray(labels)
    if truth.shape != predicted.shape:
        raise MetricsError("labels", f"expected shape {predicted.shape} (one per sample), got {truth.shape}")
    if not np.issubdtype(truth.dtype, np.integer):
        raise MetricsError("labels", f"expected integer class indices, got dtype {truth.dtype}")
    if np.any(truth < 0) or np.any(truth >= classes):
        bad = int(truth[(truth < 0) | (truth >= classes)][0])
        raise MetricsError(
            "labels", f"label {bad} is outside the {classes} classes of the logits (0..{classes - 1})"
        )
    return int(np.count_nonzero(predicted == truth))
