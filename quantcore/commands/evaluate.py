"""`fixpoint evaluate MODEL params.json --data DATA`: float vs int8, layer by layer and end to end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from quantcore.commands import _args


def register(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="compare the float model with its int8 version (reference kernels)")
    p.add_argument("model", help="float ONNX model")
    p.add_argument("params", help="quant-params JSON written by fixpoint quantize")
    p.add_argument("--data", required=True, help=".npz with x (and labels y for top-1), .npy, or images")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--report-json", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--csv", metavar="PATH", help="also write the per-layer figures as CSV")
    p.add_argument("--samples", type=_args.POSITIVE, help="use only the first N samples")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from quantcore import data, pipeline
    from quantcore.quantize import params_json

    document = params_json.load(Path(args.params))
    model = pipeline.load_model(args.model)
    dataset = data.load(args.data, pipeline.first_input_shape(model))
    if args.samples:
        dataset = dataset.head(args.samples)
    report = pipeline.evaluate(
        model, document, dataset, params_file=args.params, progress=sys.stderr.isatty()
    )
    if args.report_json:
        report.write_json(Path(args.report_json))
    if args.csv:
        report.write_csv(Path(args.csv))
    print(report.to_json() if args.json else report.format_table())
    return 0
