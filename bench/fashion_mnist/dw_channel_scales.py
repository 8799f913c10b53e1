"""Benchmark: per-channel activation scales into depthwise convolutions (issue 20 item 5), off vs auto.

    python bench/fashion_mnist/dw_channel_scales.py [--models dscnn mbv2] [--calib 100] [--test-samples 10000]

For each model: `pipeline.quantize` with the default automatic choices and --dw-channel-scales off, then
auto (the default), from the same calibration images (calib_N.npz), each scored by `pipeline.evaluate`
on the first --test-samples images of t10k: float and int8 top-1, output SQNR over the logits, and which
tensors auto gave per-channel scales (with the calibration-sample gain it measured). Run it from a tree
without the option to get that tree's figures alone (printed as "default").
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import fmnist

from quantcore import data, pipeline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["dscnn"])
    parser.add_argument("--calib", type=int, default=100, choices=fmnist.CALIB_SIZES)
    parser.add_argument("--test-samples", type=int, default=10000)
    args = parser.parse_args()
    cache = fmnist.default_cache()
    has_option = any(f.name == "dw_channel_scales" for f in dataclasses.fields(pipeline.QuantizeOptions))
    modes: dict[str, dict[str, bool | None]] = (
        {"off": {"dw_channel_scales": False}, "auto": {}} if has_option else {"default": {}}
    )
    for name in args.models:
        model = pipeline.load_model(cache / f"{name}.onnx")
        shape = pipeline.first_input_shape(model)
        calib = data.load(cache / f"calib_{args.calib}.npz", shape)
        test = data.load(cache / "test.npz", shape).head(args.test_samples)
        for label, options in modes.items():
            start = time.perf_counter()
            result = pipeline.quantize(model, calib, pipeline.QuantizeOptions(**options))  # type: ignore[arg-type]
            seconds = time.perf_counter() - start
            report = pipeline.evaluate(model, result.document, test)
            print(
                f"{name:8} {label:7} output SQNR {report.output_sqnr_db:6.2f} dB  top-1 float"
                f" {100 * report.top1_float:5.2f} % int8 {100 * report.top1_int8:5.2f} %  agreement"
                f" {100 * report.agreement:5.2f} %  quantize {seconds:.1f} s"
            )
            entry = result.document.get("transforms", {}).get("dw_channel_scales", {})
            for tensor, record in entry.get("tensors", {}).items():
                how = "per channel" if record["per_channel"] else "per tensor"
                print(f"{'':17}{tensor}: {how} ({record['why']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
