"""Benchmark: the int16 output layer against int8 logits on the Fashion-MNIST nets.

    python bench/fashion_mnist/int16_output.py [--models ...] [--test-samples 10000] [--calib 100]
                                               [--margins 1 2 4 8 16]

Per net (calib_N.npz for calibration, the first --test-samples images of test.npz for scoring), output
SQNR (dB), top-1 (%) and float/int8 arg-max agreement (%) of:
  int8        pipeline.quantize with the int16 output switched off (int16_output=False): int8 logits
  int16-out   the same with the output layer forced to int16 (`--int16 <last layer>`)
  default     pipeline.quantize with its default options (the automatic int16 output choice included)
and the int8-logit ceiling: the float model's logits quantized alone to int8 with the calibrated output
range of the int8 quantization (its logits tensor's scale and zero point, clamped to [-128, 127]), every
other tensor float - what an int8-output network reaches at best with that range. "bound" is what no
output precision can pass: the int8 network's output layer accumulator (int8 input, int8 weights, int32
bias) read as a real number, neither rounded nor clipped - the noise left is the layers before it and
the output layer's weights. "outside" is the
share of test logits beyond the calibrated [min, max]; "closed" the share of the gap between int8 and
the ceiling that the default closes (above 100 %: past the ceiling). With --margins, the int16 output is
scored with each range margin instead (quantcore.quantize.precision.INT16_OUTPUT_MARGIN): the share of
test logits outside the widened range, and the output SQNR. Run on a tree without the int16 output
(int16_output not an option), only the default is scored.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import fmnist
import numpy as np

MODEL_NAMES = ("lenet5", "convbn", "dscnn", "mbv2", "outlier")


def _ceiling(logits: np.ndarray, quant: Any) -> tuple[float, float]:
    """(SQNR in dB of the logits quantized alone to int8 with `quant`, share of logits outside its clip)."""
    from quantcore.verify.metrics import output_sqnr_db

    scale, zp = float(quant.scale), int(quant.zero_point)
    q = np.clip(np.round(logits.astype(np.float64) / scale) + zp, -128, 127)
    lo, hi = quant.clip
    outside = float(np.mean((logits < lo) | (logits > hi)))
    return output_sqnr_db([logits], [((q - zp) * scale).astype(np.float32)]), outside


def _bound(qgraph: Any, test: Any, logits: np.ndarray, batch: int = 500) -> float:
    """Output SQNR (dB) of the int8 graph's output-layer accumulator as a real number (see the docstring)."""
    from quantcore.ir.io_layout import to_firmware
    from quantcore.runtime import int8_exec
    from quantcore.verify.metrics import output_sqnr_db

    node = next(n for n in qgraph.nodes if qgraph.outputs[0] in n.outputs)
    weights = qgraph.constant(node.inputs[1]).astype(np.int64)
    bias = qgraph.constant(node.inputs[2]).astype(np.int64)
    x_quant, w_quant = qgraph.tensor(node.inputs[0]).quant, qgraph.tensor(node.inputs[1]).quant
    scale = float(x_quant.scale) * np.asarray(w_quant.scale, np.float64)
    parts = []
    for start in range(0, len(test), batch):
        x = to_firmware(qgraph, qgraph.inputs[0], test.x[start : start + batch])
        env = int8_exec.run(qgraph, int8_exec.quantize_inputs(qgraph, {qgraph.inputs[0]: x}))
        q = env[node.inputs[0]].reshape(len(x), -1).astype(np.int64) - int(x_quant.zero_point)
        parts.append(((q @ weights.T + bias) * scale).astype(np.float32))
    return output_sqnr_db([logits], [np.concatenate(parts)])


def _has_switch() -> bool:
    from quantcore import pipeline

    return "int16_output" in {f.name for f in dataclasses.fields(pipeline.QuantizeOptions)}


def _score(model: Any, calib: Any, test: Any, options: Any) -> tuple[Any, Any, float]:
    from quantcore import pipeline

    start = time.perf_counter()
    result = pipeline.quantize(model, calib, options)
    seconds = time.perf_counter() - start
    return result, pipeline.evaluate(model, result.document, test), seconds


def _cells(report: Any) -> str:
    return f"{report.output_sqnr_db:8.2f} {100 * report.top1_int8:6.2f} {100 * report.agreement:6.2f}"


def bench(name: str, args: argparse.Namespace) -> None:
    from quantcore import data, pipeline
    from quantcore.verify.evaluate import float_outputs

    model = pipeline.load_model(args.out / f"{name}.onnx")
    shape = pipeline.first_input_shape(model)
    calib = data.load(args.out / f"calib_{args.calib}.npz", shape)
    test = data.load(args.out / "test.npz", shape).head(args.test_samples)
    last = model.graph.nodes[-1].name
    if not _has_switch():
        _, report, seconds = _score(model, calib, test, pipeline.QuantizeOptions())
        print(f"{name:8} default {_cells(report)} {seconds:7.2f} s", flush=True)
        return
    if args.margins:
        _margins(name, model, calib, test, args.margins)
        return
    result, base, _ = _score(model, calib, test, pipeline.QuantizeOptions(int16_output=False))
    quant = result.qgraph.tensor(model.graph.outputs[0]).quant
    wide = pipeline.QuantizeOptions(int16_output=False, int16_layers=frozenset({last}))
    _, forced, _ = _score(model, calib, test, wide)
    chosen_result, chosen, seconds = _score(model, calib, test, pipeline.QuantizeOptions())
    logits = float_outputs(model.float_model, model.graph, test)
    ceiling, outside = _ceiling(logits, quant)
    bound = _bound(result.qgraph, test, logits)
    gap = ceiling - base.output_sqnr_db
    closed = (chosen.output_sqnr_db - base.output_sqnr_db) / gap if gap > 0 else float("nan")
    print(
        f"{name:8} {100 * (base.top1_float or 0):7.2f} {ceiling:8.2f} {100 * outside:8.3f} {bound:6.2f} |"
        f" {_cells(base)} | {_cells(forced)} | {_cells(chosen)} {100 * closed:7.0f}% {seconds:6.2f}",
        flush=True,
    )
    entry = chosen_result.document["transforms"]["int16_output"]
    print(f"{'':8} transforms.int16_output: {entry}", flush=True)


def _margins(name: str, model: Any, calib: Any, test: Any, margins: list[float]) -> None:
    from quantcore import pipeline
    from quantcore.quantize import graph
    from quantcore.verify.evaluate import float_outputs

    logits = float_outputs(model.float_model, model.graph, test)
    saved = graph.INT16_OUTPUT_MARGIN
    try:
        for margin in margins:
            graph.INT16_OUTPUT_MARGIN = margin
            options = pipeline.QuantizeOptions(int16_output=True)
            result, report, _ = _score(model, calib, test, options)
            lo, hi = result.qgraph.tensor(model.graph.outputs[0]).quant.clip
            outside = float(np.mean((logits < lo) | (logits > hi)))
            print(f"{name:8} {margin:6g} {100 * outside:9.3f} {_cells(report)}", flush=True)
    finally:
        graph.INT16_OUTPUT_MARGIN = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument("--calib", type=int, default=100, choices=fmnist.CALIB_SIZES)
    parser.add_argument("--test-samples", type=int, default=10000)
    parser.add_argument("--margins", nargs="+", type=float, help="score the int16 output's range margins")
    args = parser.parse_args()
    cells = f"{'SQNR dB':>8} {'top-1':>6} {'agree':>6}"
    if args.margins:
        print(f"{'net':8} {'margin':>6} {'outside %':>9} {cells}")
    else:
        print(
            f"{'net':8} {'float %':>7} {'ceiling':>8} {'outside%':>8} {'bound':>6} | int8: {cells} |"
            f" int16-out: {cells} |"
            f" default: {cells} {'closed':>8} {'quant s':>6}"
        )
    for name in args.models:
        bench(name, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
