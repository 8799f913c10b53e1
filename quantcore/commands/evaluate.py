"""`fixpoint evaluate MODEL params.json --data DATA`: float vs int8, layer by layer and end to end.

For an int8 .tflite it also runs TensorFlow Lite Micro's interpreter on the same inputs and reports the
int8 output bytes that differ (tflm_mismatched_bytes; quantcore/verify/tflm.py says what DATA is and
how both sides get it). Without the tflite-micro package, or for a float .tflite, one line says why
and the JSON has no such key.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from quantcore.commands import _args
from quantcore.commands._args import Subcommands

if TYPE_CHECKING:  # imported where used: building the CLI parser imports nothing heavy
    from quantcore.data import DataSet
    from quantcore.pipeline import LoadedModel
    from quantcore.quantize.params_problems import Doc
    from quantcore.verify.tflm import TflmComparison


def register(sub: Subcommands) -> None:
    p = sub.add_parser("evaluate", help="compare the float model with its int8 version (reference kernels)")
    p.add_argument("model", help="float ONNX model, or a .tflite (an int8 one is also compared with TFLM)")
    p.add_argument("params", help="quant-params JSON written by fixpoint quantize")
    p.add_argument(
        "--data",
        required=True,
        help=".npz with x (and labels y for top-1), .npy, or images: real values in the model's input layout"
        " (an int8 .tflite's inputs are quantized with its input scale and zero point, as TFLM's users do)",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--report-json", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--csv", metavar="PATH", help="also write the per-layer figures as CSV")
    p.add_argument("--samples", type=_args.POSITIVE, help="use only the first N samples")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from quantcore import loading

    with loading.start(args.model) as child:  # the model is read there while the engine is imported here
        from quantcore import pipeline
        from quantcore.quantize import params_json
        from quantcore.verify.report import json_text, write_atomically

        document = params_json.load(Path(args.params))
        model = pipeline.load_model(args.model, started=child)
    dataset = pipeline.load_data(args.data, model.graph)
    if args.samples:
        dataset = dataset.head(args.samples)
    report = pipeline.evaluate(
        model, document, dataset, params_file=args.params, progress=sys.stderr.isatty()
    )
    tflm = _tflm(model, document, dataset)
    result = report.to_dict()
    if not isinstance(tflm, str) and tflm is not None:
        result["tflm_mismatched_bytes"] = tflm.mismatched_bytes
        result["tflm_compared_bytes"] = tflm.compared_bytes
    text = json_text(result)
    if args.report_json:
        write_atomically(Path(args.report_json), text)
    if args.csv:
        report.write_csv(Path(args.csv))
    line = None if tflm is None else f"TFLM comparison: {tflm}" if isinstance(tflm, str) else tflm.line()
    if args.json:
        print(text)
        if isinstance(tflm, str):
            print(f"fixpoint evaluate: {line}", file=sys.stderr)
    else:
        print(report.format_table() + (f"{line}\n" if line else ""))
    return 0


def _tflm(model: LoadedModel, document: Doc, dataset: DataSet) -> TflmComparison | str | None:
    """TFLM against Fixpoint's int8 result (a TflmComparison), why it was not run (a str), or None for
    a model that is not a .tflite."""
    from quantcore.quantize.document import from_document
    from quantcore.verify import tflm

    if not tflm.is_tflite_graph(model.graph):
        return None
    reason = tflm.unavailable(model.graph)
    if reason is not None:
        return reason
    qgraph = from_document(model.graph, document)
    return tflm.compare(str(model.path), model.graph, qgraph, dataset.x)
