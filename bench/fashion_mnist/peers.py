"""The peer tools the benchmark compares Fixpoint with, run on the same calibration and test images.

    ONNX Runtime  quant_pre_process (shape inference + graph optimisation), then quantize_static: QDQ,
                  QInt8 weights (per-channel or per-tensor), QInt8 activations, MinMax / Entropy /
                  Percentile with ONNX Runtime's default calibration options (Entropy: 128 bins;
                  Percentile: 2048 bins, 99.999%). The QDQ model is run by onnxruntime's CPU provider.
    Intel NNCF    nncf.quantize on the ONNX model (its ONNX backend), after the same quant_pre_process
                  (NNCF's ONNX backend does not fold BatchNorm: without it the weights it quantizes are
                  not the ones an int8 Conv runs). Two configurations (NNCF_CONFIGS): NNCF's default,
                  and the one matched to CMSIS-NN's scheme. The QDQ model is run like ONNX Runtime's.
    PyTorch PT2E  torch.export.export -> torchao's prepare_pt2e with the XNNPACK quantizer (per-channel
                  symmetric int8 weights, HistogramObserver int8 activations) -> calibrate ->
                  convert_pt2e; the converted module (quantize/dequantize around float ops) is run by
                  PyTorch. torchao 0.18 no longer ships XNNPACKQuantizer in its public API (it moved to
                  ExecuTorch); the copy in torchao.testing.pt2e is the one used, as torchao's tests do.
Each quantize function returns the wall time of the whole quantization step (pre-processing, export,
calibration and conversion included), measured with time.perf_counter in a process that has done it
before (warm). The fresh-process figure runs this file as a script, which does one quantization:

    python peers.py {ort,nncf} MODEL CALIB_NPZ WORKDIR --config CONFIG [--per-tensor]

and is timed from outside by run.py (python start and imports included; PyTorch hidden, see main).
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
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


# ---------------------------------------------------------------- Intel NNCF (ONNX backend)

# "default": nncf.quantize with nothing but the calibration set (PERFORMANCE preset: symmetric activations;
# mean-of-per-sample min/max ranges; fast bias correction; the first layer's weights on 7 bits, its
# "overflow fix"; float logits). "cmsis": the configuration matched to CMSIS-NN's int8 scheme, its best
# for a Cortex-M: MIXED preset (asymmetric activations, symmetric per-channel weights), global min/max
# ranges, per-tensor activations, full 8-bit weights, int8 logits, no bias correction. "cmsis+fbc": the
# same with NNCF's fast bias correction (Fixpoint corrects biases too, when it helps).
NNCF_CONFIGS = ("default", "cmsis", "cmsis+fbc")


def nncf_available() -> str | None:
    """None when nncf can run here, else how to get it."""
    try:
        with _quiet():
            import nncf  # noqa: F401
    except ImportError:
        return "nncf is not installed: pip install -e '.[bench]' (nncf 3.4.0) for the NNCF rows"
    return None


def nncf_quantize(model_path: Path, calib_x: np.ndarray, config: str, workdir: Path) -> tuple[Path, float]:
    """(the QDQ model, seconds of quant_pre_process + nncf.quantize + save)."""
    import nncf
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    pre = workdir / f"{model_path.stem}.nncf-pre.onnx"
    out = workdir / f"{model_path.stem}.nncf-{config}.qdq.onnx"
    start = time.perf_counter()
    with _quiet():
        quant_pre_process(str(model_path), str(pre))
        model = onnx.load(str(pre))
        name = model.graph.input[0].name
        # One sample per item, as NNCF's examples feed it (its mean-of-minima ranges are per item).
        dataset = nncf.Dataset([calib_x[i : i + 1] for i in range(len(calib_x))], lambda b: {name: b})
        if config == "default":
            quantized = nncf.quantize(model, dataset, subset_size=len(calib_x))
        else:
            quantized = nncf.quantize(
                _identity_outputs(model),
                dataset,
                subset_size=len(calib_x),
                preset=nncf.QuantizationPreset.MIXED,
                advanced_parameters=_nncf_cmsis_parameters(bias_correction=config == "cmsis+fbc"),
            )
        onnx.save(quantized, str(out))
    return out, time.perf_counter() - start


def _nncf_cmsis_parameters(bias_correction: bool) -> object:
    from nncf.quantization.advanced_parameters import (
        AdvancedQuantizationParameters,
        OverflowFix,
        QuantizationParameters,
    )
    from nncf.quantization.range_estimator import RangeEstimatorParametersSet

    return AdvancedQuantizationParameters(
        overflow_fix=OverflowFix.DISABLE,
        quantize_outputs=True,
        activations_quantization_params=QuantizationParameters(per_channel=False),
        activations_range_estimator_params=RangeEstimatorParametersSet.MINMAX,
        weights_range_estimator_params=RangeEstimatorParametersSet.MINMAX,
        disable_bias_correction=not bias_correction,
    )


def _identity_outputs(model: object) -> object:
    """The model with an Identity before each graph output. NNCF's ONNX backend puts an output quantizer
    (quantize_outputs) on the edge into a consumer and fails on a graph output, which has none ("Can not
    add the quantizer to the logits edge. This edge does not have end node.")."""
    from onnx import helper

    graph = model.graph  # type: ignore[attr-defined]
    for output in graph.output:
        inner = f"{output.name}_float"
        for node in graph.node:
            node.output[:] = [inner if name == output.name else name for name in node.output]
        graph.node.append(
            helper.make_node("Identity", [inner], [output.name], name=f"{output.name}_identity")
        )
    return model


# ---------------------------------------------------------------- PyTorch PT2E (torchao)


def pt2e_available() -> str | None:
    """None when PT2E PTQ can run here, else why not."""
    try:
        with _quiet():
            import torchao.quantization.pt2e.quantize_pt2e
            import torchao.testing.pt2e._xnnpack_quantizer  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "torchao":
            return "torchao is not installed: pip install -e '.[bench]' (torchao 0.18.0) for the PT2E rows"
        return f"{type(exc).__name__}: {exc}"
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


# ---------------------------------------------------------------- one quantization per process


def main(argv: list[str] | None = None) -> int:
    """One quantization, for run.py's fresh-process timing (see the module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(description="one peer quantization (timed by run.py)")
    parser.add_argument("tool", choices=("ort", "nncf"))
    parser.add_argument("model", type=Path)
    parser.add_argument("calib", type=Path, help=".npz with the calibration images as x")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--config", required=True, help="an ORT method or an NNCF configuration")
    parser.add_argument("--per-tensor", action="store_true", help="ORT: per-tensor weights")
    args = parser.parse_args(argv)
    # Timed as in an environment without PyTorch, which neither peer needs for an ONNX model: installed
    # (this venv has it for Fixpoint's PyTorch importer), onnxruntime.tools (quant_pre_process) and nncf
    # import it at start-up, 3-6 s of a 2-core machine. A None entry makes find_spec and import say no.
    sys.modules["torch"] = None  # type: ignore[assignment]
    with np.load(args.calib) as npz:
        calib_x = npz["x"]
    if args.tool == "ort":
        ort_quantize(args.model, calib_x, args.config, args.workdir, per_channel=not args.per_tensor)
    else:
        nncf_quantize(args.model, calib_x, args.config, args.workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
