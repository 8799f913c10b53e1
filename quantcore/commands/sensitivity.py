"""`fixpoint sensitivity MODEL params.json --data DATA`: which layers the quantization error comes from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from quantcore.commands._args import Subcommands

DEFAULT_SAMPLES = 256
"""Enough to rank layers (each figure averages over every output of every sample), quick to run."""


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "sensitivity",
        help="per layer: the output SQNR (and top-1) lost by quantizing that layer alone, and the loss"
        " gradient ranking",
    )
    p.add_argument("model", help="float ONNX model")
    p.add_argument("params", help="quant-params JSON written by fixpoint quantize")
    p.add_argument("--data", required=True, help=".npz with x (and labels y for top-1), .npy, or images")
    p.add_argument(
        "--samples", type=int, default=DEFAULT_SAMPLES, help=f"first N samples (default {DEFAULT_SAMPLES})"
    )
    p.add_argument("--no-gradient", action="store_true", help="skip the gradient ranking (it needs torch)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--report-json", metavar="PATH", help="also write the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from quantcore import pipeline
    from quantcore.quantize import params_json

    document = params_json.load(Path(args.params))
    model = pipeline.load_model(args.model)
    dataset = pipeline.load_data(args.data, model.graph).head(args.samples)
    report = pipeline.sensitivity(
        model, document, dataset, params_file=args.params, gradients=not args.no_gradient
    )
    if args.report_json:
        report.write_json(args.report_json)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format_table())
    return 0
