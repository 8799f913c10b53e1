"""Benchmark quantization-aware training against our best post-training quantization.

    python bench/fashion_mnist/qat.py [--out DIR] [--models ...] [--epochs 2] [--samples 20000]
                                      [--loss distill] [--lr 1e-4] [--range-lr 1e-3]
                                      [--test-samples 10000] [--json PATH]

For every model (run.py's BatchNorm nets and beyond_ptq.py's outlier family) and weight granularity:
  ptq/auto   fixpoint quantize's default (calibration 1,000 images, min/max; equalization and bias
             correction kept where they raise the calibration output SQNR) - the QAT start
  qat        fixpoint qat from that start: --epochs over the first --samples images of the training
             subset (train.py's, disjoint from the calibration images), then exported to the JSON
Both are scored by the bit-exact int8 reference on the first --test-samples t10k images: top-1 drop
against float (points), float/int8 agreement and output SQNR, plus the training time.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import fmnist
import numpy as np
from beyond_ptq import BN_MODELS, OUTLIER_MODELS, Row, ensure_outlier_variants


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    models = [*BN_MODELS, *OUTLIER_MODELS]
    parser.add_argument("--models", nargs="+", default=models, choices=models)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=20000, help="training images per epoch")
    parser.add_argument("--loss", default="distill", choices=["distill", "labels"])
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--range-lr", type=float, default=1e-3)
    parser.add_argument("--test-samples", type=int, default=10000)
    parser.add_argument("--json", type=Path, help="write all figures to this file")
    return parser.parse_args()


def run_model(name: str, args: argparse.Namespace, train_x: np.ndarray, train_y: np.ndarray) -> list[Row]:
    from quantcore import data, pipeline
    from quantcore.qat.train import QatOptions, qat

    model = pipeline.load_model(args.out / f"{name}.onnx")
    shape = pipeline.first_input_shape(model)
    calib = data.load(args.out / "calib_1000.npz", shape)
    test = data.load(args.out / "test.npz", shape).head(args.test_samples)
    train = data.DataSet(train_x[: args.samples], train_y[: args.samples], "fashion-mnist train subset")
    rows = []
    for per_channel in (True, False):
        weights = "per-channel" if per_channel else "per-tensor"
        start_options = pipeline.QuantizeOptions(per_channel=per_channel)
        started = time.perf_counter()
        ptq = pipeline.quantize(model, calib, start_options)
        rows.append(_row(weights, "ptq/auto", pipeline.evaluate(model, ptq.document, test),
                         time.perf_counter() - started))  # fmt: skip
        options = QatOptions(
            epochs=args.epochs, lr=args.lr, range_lr=args.range_lr, loss=args.loss, start=start_options
        )
        result = qat(model, train, calib, options)
        assert result.document is not None
        report = pipeline.evaluate(model, result.document, test, finetuned=result.weights)
        rows.append(_row(weights, "qat", report, result.seconds))
        for row in rows[-2:]:
            print(
                f"  {weights:11s} {row.config:8s} top-1 drop {row.drop_points:+.2f}  agree"
                f" {100 * row.agreement:.2f} %  SQNR {row.output_sqnr_db:6.2f} dB  {row.quantize_s:6.1f} s",
                flush=True,
            )
    return rows


def _row(weights: str, config: str, report: Any, seconds: float) -> Row:
    """One result in beyond_ptq.py's row form; quantize_s holds the PTQ or QAT time."""
    return Row("fixpoint", config, weights, report.top1_float, report.top1_int8, report.agreement,
               report.output_sqnr_db, seconds)  # fmt: skip


def main() -> int:
    args = parse_args()
    fmnist.write_arrays(args.out)
    if any(m in OUTLIER_MODELS for m in args.models):
        ensure_outlier_variants(args.out)
    x, y = fmnist.load_split("train")
    train_idx, _ = fmnist.train_and_calib_indices(len(x))
    train_x, train_y = x[train_idx], y[train_idx]
    started = time.perf_counter()
    results: dict[str, list[Row]] = {}
    for name in args.models:
        print(f"== {name}", flush=True)
        results[name] = run_model(name, args, train_x, train_y)
    seconds = time.perf_counter() - started
    print(f"\n{seconds:.0f} s; QAT {args.epochs} epochs x {args.samples} images ({args.loss} loss,"
          f" lr {args.lr}, range lr {args.range_lr}); {args.test_samples} test images")  # fmt: skip
    worse = [
        (name, q.weights, round(q.output_sqnr_db - p.output_sqnr_db, 2))
        for name, rows in results.items()
        for p, q in zip(rows[::2], rows[1::2], strict=True)
        if q.output_sqnr_db < p.output_sqnr_db
    ]
    print("QAT >= best PTQ (output SQNR) on every model" if not worse else f"QAT below PTQ: {worse}")
    if args.json:
        figures = {
            name: [{**asdict(r), "drop_points": r.drop_points} for r in rows]
            for name, rows in results.items()
        }
        record = {"args": {k: str(v) for k, v in vars(args).items()}, "seconds": seconds, "results": figures}
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
