"""The peer tools the benchmark compares Fixpoint with, run on the same calibration and test images.

    ONNX Runtime  quant_pre_process (shape inference + graph optimisation), then quantize_static: QDQ,
                  per-channel QInt8 weights, QInt8 activations, MinMax / Entropy / Percentile with
                  ONNX Runtime's default calibration options (Entropy: 128 bins; Percentile: 2048 bins,
                  99.999%). The QDQ model is run by onnxruntime's CPU provider (its int8 kernels).
    PyTorch PT2E  torch.export.export -> torchao's prepare_pt2e with the XNNPACK quantizer (per-channel
                  symmetric int8 weights, HistogramObserver int8 activations) -> calibrate ->
                  convert_pt2e; the converted module (quantize/dequantize around float ops) is run by
                  PyTorch. torchao 0.18 no longer ships XNNPACKQuantizer in its public API (it moved to
                  ExecuTorch); the copy in torchao.testing.pt2e is the one used, as torchao's tests do.
Each quantize function returns the wall time of the whole quantization step (pre-processing, export,
calibration and conversion included), measured with time.perf_counter.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ORT_METHODS = ("MinMax", "Entropy", "Percentile")
CALIB_BATCH = 64  # the batch Fixpoint calibrates with (QuantizeOptions.batch_size), for a like comparison
# ONNX Runtime's histogram calibrators (Entropy, Percentile) stack every batch's outputs with np.asarray
# and fail ("inhomogeneous shape") when the last batch is smaller, so its reader uses a batch dividing
# both calibration sizes (100, 1000).
ORT_CALIB_BATCH = 50
EVAL_BATCH = 500


@dataclass(frozen=True)
class Scores:
    top1_float: float
    top1_int8: float
    agreement: float
    output_sqnr_db: float


def score(float_logits: np.ndarray, int8_logits: np.ndarray, y: np.ndarray) -> Scores:
    """Top-1 (fractions), arg-max agreement, and output SQNR 10*log10(sum f^2 / sum (f - q)^2)."""
    f, q = float_logits.astype(np.float64), int8_logits.astype(np.float64)
    noise = float(np.sum((f - q) ** 2))
    sqnr = float("inf") if noise == 0 else float(10 * np.log10(float(np.sum(f**2)) / noise))
    return Scores(
        float(np.mean(f.argmax(1) == y)),
        float(np.mean(q.argmax(1) == y)),
        float(np.mean(f.argmax(1) == q.argmax(1))),
        sqnr,
    )


def _batches(x: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(x), size):
        yield x[start : start + size]


# ---------------------------------------------------------------- ONNX Runtime


def ort_run(model_path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: b})[0] for b in _batches(x, EVAL_BATCH)])


class _Reader:
    """ONNX Runtime's CalibrationDataReader protocol over an array, in batches of CALIB_BATCH."""

    def __init__(self, name: str, x: np.ndarray) -> None:
        self.name, self.x = name, x
        self.rewind()
        if len(x) % ORT_CALIB_BATCH:
            raise ValueError(f"{len(x)} calibration images: not a multiple of {ORT_CALIB_BATCH}")

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = iter({self.name: b} for b in _batches(self.x, ORT_CALIB_BATCH))


def ort_quantize(
    model_path: Path, calib_x: np.ndarray, method: str, workdir: Path, per_channel: bool = True
) -> tuple[Path, float]:
    """(the QDQ model, seconds of quant_pre_process + quantize_static)."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = workdir / f"{model_path.stem}.pre.onnx"
    granularity = "pc" if per_channel else "pt"
    out = workdir / f"{model_path.stem}.{method.lower()}.{granularity}.qdq.onnx"
    start = time.perf_counter()
    with _quiet():
        quant_pre_process(str(model_path), str(pre))
        quantize_static(
            str(pre),
            str(out),
            _Reader("input", calib_x),
            quant_format=QuantFormat.QDQ,
            per_channel=per_channel,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=getattr(CalibrationMethod, method),
        )
    return out, time.perf_counter() - start


def qdq_activation_scales(path: Path) -> dict[str, float]:
    """Activation scales of a QDQ model by tensor name (to tell whether two methods picked the same)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    scales = {}
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] not in inits:
            scales[node.input[0]] = float(inits[node.input[1]])
    return scales


# ---------------------------------------------------------------- PyTorch PT2E (torchao)


def pt2e_available() -> str | None:
    """None when PT2E PTQ can run here, else why not."""
    try:
        with _quiet():
            import torchao.quantization.pt2e.quantize_pt2e
            import torchao.testing.pt2e._xnnpack_quantizer  # noqa: F401
    except Exception as exc:  # any import failure means the peer is skipped; the reason is reported
        return f"{type(exc).__name__}: {exc}"
    return None


def pt2e_quantize(
    make_net: Callable[[], object], state_path: Path, calib_x: np.ndarray
) -> tuple[Callable[[np.ndarray], np.ndarray], float]:
    """(a function running the converted model, seconds of export + prepare + calibrate + convert)."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    net = make_net()
    net.load_state_dict(torch.load(state_path, weights_only=True))
    net.eval()
    example = (torch.from_numpy(calib_x[:CALIB_BATCH]),)
    start = time.perf_counter()
    with _quiet(), torch.no_grad():
        batch = torch.export.Dim("N", min=1, max=4096)
        exported = torch.export.export(net, example, dynamic_shapes=({0: batch},)).module()
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(exported, quantizer)
        for b in _batches(calib_x, CALIB_BATCH):
            prepared(torch.from_numpy(b))
        converted = convert_pt2e(prepared)
    seconds = time.perf_counter() - start

    @torch.no_grad()
    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([converted(torch.from_numpy(b)).numpy() for b in _batches(x, EVAL_BATCH)])

    return run, seconds


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the peers' progress logging and warnings (their numbers are what the benchmark reports)."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="fixpoint-bench-")
