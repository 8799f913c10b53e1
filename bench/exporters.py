"""Benchmark: every test network through both of torch's ONNX exporters, imported and quantized.

    python bench/exporters.py [--repeat 3] [--samples 64]

For each network of tests/importers/torch_nets.py (the network of tests/importers/test_torch.py, the five
Fashion-MNIST networks of bench/fashion_mnist, and two covering the rest of the support table) and each
exporter - torch's default (the torch.export-based "dynamo" exporter, as import_torch runs it), the
TorchScript one (`dynamo=False`), and the default one with a dynamic batch and without its graph optimizer
(`dynamic_shapes`, `optimize=False`: the shape arithmetic and BatchNorm nodes it leaves for the importer
to fold) - prints:
  export ms    torch.onnx.export to bytes (best of --repeat)
  import ms    ONNX bytes -> IR graph in this process: decode, check, fold, infer shapes, translate
               (best of --repeat; `import_onnx` adds a forked child around it)
  nodes        ONNX nodes in the file -> left after constant folding -> IR nodes after the passes
  SQNR dB      output SQNR of the int8 reference executor against the float model (ONNX Runtime) on
               --samples seeded evaluation inputs, quantized with the default method on 32 seeded
               calibration inputs (tests/importers/torch_nets.calibration)
Wall time on a shared machine is noisy: compare the two exporters' columns, not absolute figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the networks live in the tests

from quantcore import pipeline  # noqa: E402
from quantcore.importers import _onnx_load  # noqa: E402
from quantcore.importers.onnx import load_source, read_onnx  # noqa: E402
from tests.importers.torch_nets import NETS, build, calibration, quantize  # noqa: E402

EXPORTERS = ("dynamo", "torchscript", "dynamo-raw")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of export and import (best kept)")
    parser.add_argument("--samples", type=int, default=64, help="evaluation inputs for the SQNR (64)")
    return parser.parse_args()


def best_ms(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of `repeat` runs in milliseconds, and the last run's result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), result


def export(net: Any, shape: tuple[int, ...], exporter: str, notes: list[str]) -> bytes:
    import torch

    from quantcore.importers.torch import export_onnx, run_exporter

    x = torch.zeros(shape)
    if exporter != "dynamo-raw":
        return export_onnx(net, x, dynamo=exporter == "dynamo", note=notes.append)
    batch = ({0: torch.export.Dim("batch")},)  # the dynamic shapes of the one argument, by position
    return run_exporter(net, (x,), dynamo=True, optimize=False, dynamic_shapes=batch)


def measure(name: str, exporter: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    import onnx

    net, (_, shape) = build(name), NETS[name]
    notes: list[str] = []
    export_ms, raw = best_ms(lambda: export(net, shape, exporter, notes), args.repeat)
    path = folder / f"{name}_{exporter}.onnx"
    result = quantize(raw, path, shape)
    source = read_onnx(path)
    import_ms, _ = best_ms(lambda: load_source(source), args.repeat)
    evaluation = calibration(shape, args.samples, seed=1)
    report = pipeline.evaluate(result.model, result.document, evaluation)
    return {
        "export_ms": export_ms,
        "import_ms": import_ms,
        "nodes": (
            len(onnx.load_from_string(raw).graph.node),
            len(_onnx_load.load(source, 1).model.graph.node),
            len(result.model.graph.nodes),
        ),
        "sqnr": report.output_sqnr_db,
        "note": "; ".join(notes),
    }


def main() -> int:
    args = parse_args()
    header = (
        f"{'network':<22} {'exporter':<12} {'export ms':>9} {'import ms':>9} {'nodes':>14} {'SQNR dB':>8}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as folder:
        for name in NETS:
            for exporter in EXPORTERS:
                row = measure(name, exporter, Path(folder), args)
                before, after, passes = row["nodes"]
                nodes = f"{before} -> {after} -> {passes}"
                print(
                    f"{name:<22} {exporter:<12} {row['export_ms']:>9.0f} {row['import_ms']:>9.1f} {nodes:>14}"
                    f" {row['sqnr']:>8.2f}" + (f"  ({row['note']})" if row["note"] else "")
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
