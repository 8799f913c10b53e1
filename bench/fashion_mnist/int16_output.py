"""Benchmark: the int16 output layer against int8 logits on the Fashion-MNIST nets.

    python bench/fashion_mnist/int16_output.py [--models ...] [--test-samples 10000] [--calib 100]

Per net (calib_N.npz for calibration, the first --test-samples images of test.npz for scoring), output
SQNR (dB) and top-1 (%) of:
  int8        the default quantization with the int16 output move switched off (int8 logits)
  default     pipeline.quantize with its default options (the automatic int16 output choice included)
  int16-out   the same with the output layer forced to int16 (`--int16 <last layer>`)
and the int8-logit ceiling: the float model's logits quantized alone to int8 with the calibrated output
range of the int8 quantization (scale and zero point of its logits tensor, clipped to [-128, 127]),
everything else float - the best any int8-output network can reach with that range. "outside" is the
share of test logits beyond the calibrated [min, max]; "closed" the share of the ceiling's gap over
int8 that the default closes.
"""

from __future__ import annotations

import argparse
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


def bench(name: str, args: argparse.Namespace) -> dict[str, Any]:
    from quantcore import data, pipeline
    from quantcore.verify.evaluate import float_outputs

    path = args.out / f"{name}.onnx"
    model = pipeline.load_model(path)
    shape = pipeline.first_input_shape(model)
    calib = data.load(args.out / f"calib_{args.calib}.npz", shape)
    test = data.load(args.out / "test.npz", shape).head(args.test_samples)
    last = model.graph.nodes[-1].name
    variants = {
        "int8": pipeline.QuantizeOptions(int16_output=False),
        "default": pipeline.QuantizeOptions(),
        "int16-out": pipeline.QuantizeOptions(int16_output=False, int16_layers=frozenset({last})),
    }
    row: dict[str, Any] = {"last": last}
    for label, options in variants.items():
        start = time.perf_counter()
        result = pipeline.quantize(model, calib, options)
        seconds = time.perf_counter() - start
        report = pipeline.evaluate(model, result.document, test)
        row[label] = (report.output_sqnr_db, 100 * (report.top1_int8 or 0.0), seconds)
        if label == "int8":
            quant = result.qgraph.tensor(model.graph.outputs[0]).quant
            row["top1_float"] = 100 * (report.top1_float or 0.0)
        if label == "default":
            row["output_int16"] = result.document.get("transforms", {}).get("int16_output", {})
    logits = float_outputs(model.float_model, model.graph, test)
    row["ceiling"], row["outside"] = _ceiling(logits, quant)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument("--calib", type=int, default=100, choices=fmnist.CALIB_SIZES)
    parser.add_argument("--test-samples", type=int, default=10000)
    args = parser.parse_args()
    print(
        f"{'net':8} {'float %':>8} {'ceiling dB':>10} {'outside %':>9} | {'int8 dB':>8} {'top-1':>6} |"
        f" {'int16-out dB':>12} {'top-1':>6} | {'default dB':>10} {'top-1':>6} {'closed':>7} {'quant s':>7}"
    )
    for name in args.models:
        r = bench(name, args)
        base, forced, chosen = r["int8"], r["int16-out"], r["default"]
        gap = r["ceiling"] - base[0]
        closed = (chosen[0] - base[0]) / gap if gap > 0 else float("nan")
        print(
            f"{name:8} {r['top1_float']:8.2f} {r['ceiling']:10.2f} {100 * r['outside']:9.3f} |"
            f" {base[0]:8.2f} {base[1]:6.2f} | {forced[0]:12.2f} {forced[1]:6.2f} |"
            f" {chosen[0]:10.2f} {chosen[1]:6.2f} {100 * closed:6.0f}% {chosen[2]:7.2f}",
            flush=True,
        )
        print(f"         int16_output: {r['output_int16']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
