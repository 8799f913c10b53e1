"""Benchmark: Fixpoint's int8 PTQ against ONNX Runtime and PyTorch PT2E on five Fashion-MNIST networks.

    python bench/fashion_mnist/run.py [--out DIR] [--models ...] [--sizes 100 1000] [--test-samples 10000]
                                      [--json PATH] [--no-pt2e] [--retrain]

Trains and exports the models first when they are missing (train.py; --retrain forces it). For each model
and calibration size, every tool quantizes from the same calibration images (calib_N.npz, train split)
and is scored on the same first --test-samples images of t10k (test.npz):
  fixpoint/METHOD   pipeline.quantize with minmax, percentile, entropy, mse (per-channel weights), scored
                    by pipeline.evaluate (onnxruntime float vs the int8 reference executor)
  ort/METHOD        ONNX Runtime quant_pre_process + quantize_static (QDQ, per-channel, QInt8), run by
                    onnxruntime; MinMax, Entropy, Percentile
  pt2e/xnnpack      torch.export + torchao prepare_pt2e (XNNPACK quantizer, per-channel) + convert_pt2e
Columns: float and int8 top-1 (%), drop (points), float/int8 arg-max agreement (%), output SQNR over
the logits (dB), and the wall time of the quantization step (seconds; scoring is not counted;
Fixpoint's includes load_model (import, BN folding, fusion, NHWC), ONNX Runtime's quant_pre_process,
PT2E's torch.export).
One table per model is printed; --json writes every figure, Fixpoint's per-layer SQNR included.
Wall time on a shared 2-core machine is noisy: compare the tools within one run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fmnist
import numpy as np
import peers

MODEL_NAMES = ("lenet5", "convbn", "dscnn", "mbv2", "outlier")
FIXPOINT_METHODS = ("minmax", "percentile", "entropy", "mse")


@dataclass
class Row:
    tool: str
    method: str
    calib: int
    top1_float: float | None = None
    top1_int8: float | None = None
    agreement: float | None = None
    output_sqnr_db: float | None = None
    quantize_s: float | None = None
    """Wall time of the whole quantization step, pre-processing / model preparation included."""
    note: str = ""
    load_s: float | None = None
    """Fixpoint only: the load_model (import + prepare) share of quantize_s."""
    layers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def drop_points(self) -> float | None:
        if self.top1_float is None or self.top1_int8 is None:
            return None
        return 100 * (self.top1_float - self.top1_int8)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=fmnist.default_cache(), help="cache folder")
    parser.add_argument("--models", nargs="+", default=list(MODEL_NAMES), choices=MODEL_NAMES)
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=list(fmnist.CALIB_SIZES),
        choices=fmnist.CALIB_SIZES,
        help="calibration set sizes",
    )
    parser.add_argument("--test-samples", type=int, default=10000, help="first N images of t10k (all)")
    parser.add_argument("--json", type=Path, help="write all figures to this file")
    parser.add_argument("--no-pt2e", action="store_true", help="skip PyTorch PT2E")
    parser.add_argument("--retrain", action="store_true", help="retrain the models first")
    return parser.parse_args()


def ensure_models(args: argparse.Namespace) -> None:
    missing = [
        m for m in args.models if not (args.out / f"{m}.onnx").exists() or not (args.out / f"{m}.pt").exists()
    ]
    if missing or args.retrain:
        import subprocess

        command = [
            sys.executable,
            str(Path(__file__).with_name("train.py")),
            "--out",
            str(args.out),
            "--models",
            *(args.models if args.retrain else missing),
        ]
        subprocess.run(command + (["--retrain"] if args.retrain else []), check=True)
    fmnist.write_arrays(args.out)


# ---------------------------------------------------------------- the tools


def run_fixpoint(
    onnx_path: Path,
    calib_path: Path,
    test_path: Path,
    n_test: int,
    methods: tuple[str, ...] = FIXPOINT_METHODS,
) -> list[Row]:
    from quantcore import data, pipeline
    from quantcore.calibrate.method import Method, RangeMethod

    shape = pipeline.first_input_shape(pipeline.load_model(onnx_path))
    calib = data.load(calib_path, shape)
    test = data.load(test_path, shape).head(n_test)
    rows = []
    for name in methods:
        # Each method is timed as `fixpoint quantize` runs it: import + prepare (fold BN, fuse, NHWC), the
        # counterpart of ONNX Runtime's quant_pre_process, then calibrate + quantize.
        start = time.perf_counter()
        model = pipeline.load_model(onnx_path)
        loaded = time.perf_counter()
        result = pipeline.quantize(model, calib, pipeline.QuantizeOptions(method=RangeMethod(Method(name))))
        seconds = time.perf_counter() - start
        report = pipeline.evaluate(model, result.document, test)
        layers = [
            {"name": layer.name, "op": layer.op, "sqnr_db": layer.sqnr_db, "cosine": layer.cosine}
            for layer in report.layers
        ]
        rows.append(
            Row(
                "fixpoint",
                name,
                len(calib),
                report.top1_float,
                report.top1_int8,
                report.agreement,
                report.output_sqnr_db,
                seconds,
                note="",
                layers=layers,
                load_s=loaded - start,
            )
        )
    return rows


def run_ort(
    onnx_path: Path,
    calib_x: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    float_logits: np.ndarray,
    workdir: Path,
) -> list[Row]:
    rows, scales = [], {}
    for method in peers.ORT_METHODS:
        try:
            qdq, seconds = peers.ort_quantize(onnx_path, calib_x, method, workdir)
            s = peers.score(float_logits, peers.ort_run(qdq, test_x), test_y)
            scales[method] = peers.qdq_activation_scales(qdq)
            rows.append(Row("ort", method.lower(), len(calib_x), **asdict(s), quantize_s=seconds))
        except Exception as exc:  # a peer failing is a finding to report, not a reason to stop the run
            rows.append(Row("ort", method.lower(), len(calib_x), note=f"failed: {type(exc).__name__}: {exc}"))
    for row in rows:
        if row.method != "minmax" and scales.get(row.method.capitalize()) == scales.get("MinMax") is not None:
            row.note = "activation scales identical to ort/minmax"
    return rows


def run_pt2e(
    name: str,
    out: Path,
    calib_x: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    float_logits: np.ndarray,
) -> Row:
    from models import MODELS

    why = peers.pt2e_available()
    if why is not None:
        return Row("pt2e", "xnnpack", len(calib_x), note=f"skipped: {why}")
    try:
        run, seconds = peers.pt2e_quantize(MODELS[name], out / f"{name}.pt", calib_x)
        s = peers.score(float_logits, run(test_x), test_y)
    except Exception as exc:  # as for ONNX Runtime: reported in the table and the JSON
        return Row("pt2e", "xnnpack", len(calib_x), note=f"failed: {type(exc).__name__}: {exc}"[:300])
    return Row("pt2e", "xnnpack", len(calib_x), **asdict(s), quantize_s=seconds)


def warm_up(args: argparse.Namespace, workdir: Path) -> None:
    """One untimed pass of every tool on the first model and the smallest calibration set, so that the
    first timed row does not pay for lazy imports and one-off initialisation (none of the tools caches
    anything between models: each quantization starts from the .onnx / .pt file)."""
    name, size = args.models[0], min(args.sizes)
    calib_path = args.out / f"calib_{size}.npz"
    with np.load(calib_path) as npz:
        calib_x = npz["x"]
    with np.load(args.out / "test.npz") as npz:
        x, y = npz["x"][:100], npz["y"][:100]
    logits = peers.ort_run(args.out / f"{name}.onnx", x)
    run_fixpoint(args.out / f"{name}.onnx", calib_path, args.out / "test.npz", 100, methods=("minmax",))
    run_ort(args.out / f"{name}.onnx", calib_x, x, y, logits, workdir)
    if not args.no_pt2e:
        run_pt2e(name, args.out, calib_x, x, y, logits)


def bench_model(name: str, args: argparse.Namespace, workdir: Path) -> list[Row]:
    onnx_path = args.out / f"{name}.onnx"
    test_path = args.out / "test.npz"
    with np.load(test_path) as npz:
        test_x, test_y = npz["x"][: args.test_samples], npz["y"][: args.test_samples]
    float_logits = peers.ort_run(onnx_path, test_x)
    rows = []
    for size in args.sizes:
        calib_path = args.out / f"calib_{size}.npz"
        with np.load(calib_path) as npz:
            calib_x = npz["x"]
        print(f"  {name}: calibration {size}: fixpoint", flush=True)
        rows += run_fixpoint(onnx_path, calib_path, test_path, args.test_samples)
        print(f"  {name}: calibration {size}: onnxruntime", flush=True)
        rows += run_ort(onnx_path, calib_x, test_x, test_y, float_logits, workdir)
        if not args.no_pt2e:
            print(f"  {name}: calibration {size}: pt2e", flush=True)
            rows.append(run_pt2e(name, args.out, calib_x, test_x, test_y, float_logits))
    return rows


# ---------------------------------------------------------------- output


def _fmt(value: float | None, digits: int, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value * scale:.{digits}f}"


HEADER = ("calib", "tool/method", "top-1 float", "top-1 int8", "drop (pts)", "agree %", "SQNR dB", "quant s")


def table(name: str, rows: list[Row]) -> str:
    lines = [
        [
            str(r.calib),
            f"{r.tool}/{r.method}",
            _fmt(r.top1_float, 2, 100),
            _fmt(r.top1_int8, 2, 100),
            _fmt(r.drop_points, 2),
            _fmt(r.agreement, 2, 100),
            _fmt(r.output_sqnr_db, 2),
            _fmt(r.quantize_s, 2),
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(HEADER)]

    def render(cells: list[str] | tuple[str, ...]) -> str:
        return (
            "| "
            + " | ".join(
                c.rjust(w) if i != 1 else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    out = [f"### {name}", render(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [render(line) for line in lines]
    out += [f"  note: {r.calib} {r.tool}/{r.method}: {r.note}" for r in rows if r.note]
    return "\n".join(out)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def write_json(path: Path, args: argparse.Namespace, results: dict[str, list[Row]], seconds: float) -> None:
    training = {}
    for name in results:
        record = args.out / f"{name}.json"
        training[name] = json.loads(record.read_text()) if record.exists() else None
    payload = {
        "benchmark": "fashion_mnist",
        "test_samples": args.test_samples,
        "calib_sizes": args.sizes,
        "seconds": seconds,
        "python": platform.python_version(),
        "versions": _versions(),
        "training": training,
        "models": {
            name: [asdict(r) | {"drop_points": r.drop_points} for r in rows] for name, rows in results.items()
        },
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(payload), indent=2) + "\n")
    os.replace(tmp, path)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("onnxruntime", "onnx", "torch", "torchao", "numpy", "fixpoint"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main() -> int:
    args = parse_args()
    import torch

    torch.set_num_threads(2)
    start = time.perf_counter()
    ensure_models(args)
    results: dict[str, list[Row]] = {}
    with peers.scratch_dir() as tmp:
        print("warming up the tools (untimed)", flush=True)
        warm_up(args, Path(tmp))
        for name in args.models:
            print(f"benchmarking {name}", flush=True)
            results[name] = bench_model(name, args, Path(tmp))
            print(table(name, results[name]), flush=True)
    seconds = time.perf_counter() - start
    print(
        f"\n{len(args.models)} models, calibration sizes {args.sizes}, {args.test_samples} test images: "
        f"{seconds:.0f} s"
    )
    for name, rows in results.items():
        print("\n" + table(name, rows))
    if args.json:
        write_json(args.json, args, results, seconds)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
