"""TFLM's float mnist_lstm (trained_lstm.tflite) quantized by Fixpoint beside TensorFlow's own int8 twin
(trained_lstm_int8.tflite, its full-integer converter's), both measured against the float model's outputs
on the same inputs, run in a row (the LSTM's state carried from one invoke to the next, as TFLM does).

    python bench/tflite_lstm_twin.py [--cases 200] [--calib 100] [--json out.json]

The inputs are TFLM's ten sample digits (examples/mnist_lstm/samples) shifted by up to 3 pixels and
lightly noised (tests/tflm.py's mnist_digits): seeded, one set for calibration (seed 1) and another for
the measurement (seed 2). The checkout is found as the tests find it (FIXPOINT_TFLM_REPO or
~/.cache/fixpoint/tflite-micro).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from quantcore import pipeline  # noqa: E402
from quantcore.data import DataSet  # noqa: E402
from quantcore.ir import Graph  # noqa: E402
from quantcore.runtime import float_exec, int8_exec  # noqa: E402
from quantcore.scheme.arith import dequantize, quantize_activation  # noqa: E402
from tests import tflm  # noqa: E402  (the checkout, the models and the digits the tests use)


def int8_outputs(qgraph: Graph, x: np.ndarray) -> np.ndarray:
    """The int8 graph's output as real values, its input quantized with its scale and zero point."""
    qin, qout = qgraph.tensor(qgraph.inputs[0]).quant, qgraph.tensor(qgraph.outputs[0]).quant
    assert qin is not None and qout is not None
    q = quantize_activation(x, float(qin.scale), int(qin.zero_point))
    out = int8_exec.run(qgraph, {qgraph.inputs[0]: q})[qgraph.outputs[0]]
    return dequantize(out, float(qout.scale), int(qout.zero_point))


def lstm_scales(qgraph: Graph) -> dict[str, Any]:
    """The quantized LSTM's input, hidden state (= output) and cell state scales and zero points."""
    (node,) = [n for n in qgraph.nodes if n.op.json_name == "lstm"]
    x = qgraph.tensor(node.inputs[0]).quant
    assert x is not None
    hidden, params = node.attr("hidden_state"), node.attr("params")
    return {
        "input": (float(x.scale), int(x.zero_point)),
        "hidden": (float(hidden["scale"]), int(hidden["zero_point"])),
        "cell_scale_power": int(params["cell_scale_power"]),
        "cell_clip": int(params["cell_clip"]),
    }


def figures(reference: np.ndarray, values: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    noise = float(np.sum((values - reference) ** 2))
    return {
        "output_sqnr_db": 10 * float(np.log10(np.sum(reference**2) / noise)) if noise else float("inf"),
        "top1": float(np.mean(values.argmax(-1) == labels)),
        "agreement": float(np.mean(values.argmax(-1) == reference.argmax(-1))),
        "max_abs": float(np.abs(values - reference).max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--calib", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    calib, _ = tflm.mnist_digits(args.calib, seed=1)
    x, labels = tflm.mnist_digits(args.cases, seed=2)
    model = pipeline.load_model(tflm.model("trained_lstm"))
    graph = model.graph
    reference = float_exec.run(graph, {graph.inputs[0]: x}, keep=False)[graph.outputs[0]]
    ours = pipeline.quantize(model, DataSet(calib)).qgraph
    twin = pipeline.quantize_imported(pipeline.load_model(tflm.model("trained_lstm_int8"))).qgraph
    report: dict[str, Any] = {
        "cases": args.cases,
        "calibration": args.calib,
        "float_top1": float(np.mean(reference.argmax(-1) == labels)),
        "fixpoint": figures(reference, int8_outputs(ours, x), labels),
        "tensorflow_int8": figures(reference, int8_outputs(twin, x), labels),
        "scales": {"fixpoint": lstm_scales(ours), "tensorflow_int8": lstm_scales(twin)},
    }
    print(f"{args.cases} inputs in a row, float top-1 {report['float_top1']:.1%}")
    for who in ("fixpoint", "tensorflow_int8"):
        f = report[who]
        print(
            f"  {who:16s} output SQNR {f['output_sqnr_db']:6.2f} dB  top-1 {f['top1']:.1%}"
            f"  agreement {f['agreement']:.1%}  max |err| {f['max_abs']:.4f}"
        )
    for who, scales in report["scales"].items():
        print(f"  {who:16s} LSTM " + ", ".join(f"{k} {v}" for k, v in scales.items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
