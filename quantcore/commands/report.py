"""`fixpoint report`: the evaluation, verification and calibration of a model as one HTML page (+ JSON).

    fixpoint report --evaluation E.json [--verify V.json] [--params P.json [--model M.onnx] --calib DATA]
                    [-o report.html] [--json] [--report-json PATH] [--title TEXT] [--bins 64]

E.json is what `fixpoint evaluate --report-json` writes, V.json what `fixpoint verify|flash-verify --json`
prints. With the quant-params JSON and the calibration data the page also draws every activation's
histogram (the float model rerun over the calibration set) with the clipping thresholds the quantizer
chose; the model defaults to the one the parameters record. The HTML is self-contained (inline CSS and
SVG, no script, nothing fetched) and written atomically; --json prints the merged figures, --report-json
writes them. Exit status: 0 written, 2 bad input (a missing or unreadable file, named), 1 other errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from quantcore.commands import _args
from quantcore.commands import _firmware as fw
from quantcore.commands._args import Subcommands
from quantcore.errors import InputError

EXIT_OK = 0


def register(sub: Subcommands) -> None:
    p = sub.add_parser("report", help="write the HTML report (per-layer error, histograms, memory, verdict)")
    p.add_argument(
        "--evaluation", metavar="E.json", help="evaluation report (fixpoint evaluate --report-json)"
    )
    p.add_argument("--verify", metavar="V.json", help="verification report (fixpoint flash-verify --json)")
    p.add_argument("--params", metavar="P.json", help="quant-params JSON: the activations' chosen ranges")
    p.add_argument("--model", metavar="M.onnx", help="float model (default: the one the parameters record)")
    p.add_argument("--calib", metavar="DATA", help="calibration data, for the activation histograms")
    p.add_argument("--samples", type=_args.POSITIVE, help="use only the first N calibration samples")
    p.add_argument("--bins", type=_args.integer(2, 4096), default=64, help="histogram bins (default 64)")
    p.add_argument("--title", help="the page title (default: from the model's name)")
    p.add_argument("-o", "--output", type=Path, metavar="HTML", help="the HTML file to write")
    p.add_argument("--json", action="store_true", help="print the merged report data as one JSON object")
    p.add_argument("--report-json", type=Path, metavar="PATH", help="also write the merged data as JSON")
    p.set_defaults(func=run)


class _BadInput(InputError):
    """Options that do not make a report (exit status 2, like every bad input)."""


def run(args: argparse.Namespace) -> int:
    """Errors are the CLI's one-line messages (quantcore.cli): exit 2 for bad input, 1 for failures."""
    return _report(args)


def _report(args: argparse.Namespace) -> int:
    from quantcore.report import data, html

    if not (args.output or args.json or args.report_json):
        raise _BadInput("nothing to write: give -o HTML, --json and/or --report-json PATH")
    if not (args.evaluation or args.verify or args.params):
        raise _BadInput("give at least one of --evaluation, --verify, --params")
    if args.calib and not args.params:
        raise _BadInput(
            "--calib draws the activation histograms against the chosen ranges: it needs --params"
        )
    evaluation = data.read_evaluation(args.evaluation) if args.evaluation else None
    verify = data.read_verify(args.verify) if args.verify else None
    activations, model = _activations(args)
    sources = {
        "evaluation": args.evaluation, "verify": args.verify, "params": args.params,
        "model": model, "calib": args.calib,
    }  # fmt: skip
    merged = data.merge(evaluation, verify, activations, sources, args.title)
    if args.output:
        html.write(args.output, merged)
    if args.report_json:
        from quantcore.templating import write_text

        write_text(args.report_json, data.to_json(merged))
    if args.json:
        print(data.to_json(merged), end="")
    if args.output and not args.json:
        summary = merged["summary"]
        print(
            f"wrote {args.output}: {len(merged['layers'])} layers, {len(activations)} activations"
            f"{' with histograms' if args.calib else ''}, verification {summary['verdict']}"
        )
    return EXIT_OK


def _activations(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str | None]:
    """The activation entries (with histograms when --calib is given) and the model used."""
    if not args.params:
        return [], args.model
    from quantcore.quantize import params_json
    from quantcore.report import histograms

    params = Path(args.params)
    if not params.is_file():
        raise _BadInput(f"{params} does not exist (the quant-params JSON of fixpoint quantize)")
    document = params_json.load(params)
    if not args.calib:
        return histograms.activation_entries(document), args.model
    model = args.model or fw.recorded_model_of(document, params)
    if model is None:
        raise _BadInput(f"{params} records model {document['model']['path']!r}, not found: give --model")
    for path, what in ((model, "float model"), (args.calib, "calibration data")):
        if not Path(path).exists():
            raise _BadInput(f"{path} does not exist (the {what})")
    from quantcore import pipeline

    loaded = pipeline.load_model(model)
    pipeline.check_same_model(loaded, document, str(params))
    calib = pipeline.load_data(args.calib, loaded.graph)
    if args.samples:
        calib = calib.head(args.samples)
    return histograms.compute(loaded, document, calib, bins=args.bins), str(model)
