"""`fixpoint qat MODEL --train DATA -o params.json`: quantization-aware fine-tuning, the same JSON out.

Runs unchanged under torchrun for data-parallel training on several processes, GPUs or machines:
    torchrun --nproc_per_node 2 -m quantcore.cli qat MODEL --train DATA -o params.json
Only rank 0 writes (the JSON and its fine-tuned weights, <stem>.finetuned.npz next to it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantcore.commands import _args
from quantcore.commands._args import Subcommands
from quantcore.errors import TORCH_MISSING, InputError

"""What `fixpoint qat` says without torch (pyproject.toml's optional dependency "torch")."""

DEFAULT_CALIB_SAMPLES = 1000
"""Calibration samples for the start when --calib is not given: the first ones of the training set."""


def register(sub: Subcommands) -> None:
    from quantcore.qat.options import LOSSES, QatOptions

    defaults = QatOptions()
    p = sub.add_parser(
        "qat",
        help="fine-tune with fake quantization (quantization-aware training) and write the quant-params"
        " JSON; runs under torchrun for data-parallel training",
    )
    p.add_argument("model", help="float ONNX model")
    p.add_argument("--train", required=True, metavar="DATA", help=".npz with x (and labels y) or a folder")
    p.add_argument(
        "--calib",
        metavar="DATA",
        help=f"calibration data for the starting ranges (default: the first {DEFAULT_CALIB_SAMPLES}"
        " training samples)",
    )
    p.add_argument("--epochs", type=_args.POSITIVE, default=defaults.epochs, help="(default %(default)s)")
    p.add_argument(
        "--lr", type=_args.positive(float), default=defaults.lr, help="weights' Adam learning rate"
    )
    p.add_argument(
        "--range-lr",
        type=_args.positive(float),
        default=defaults.range_lr,
        help="activation ranges' learning rate, in units of each range's width (default %(default)s)",
    )
    p.add_argument(
        "--batch-size", type=_args.POSITIVE, default=defaults.batch_size, help="global batch (default 64)"
    )
    p.add_argument(
        "--loss",
        choices=LOSSES,
        default=defaults.loss,
        help="distill: match the float model's outputs (no labels needed, default); labels: cross-entropy",
    )
    p.add_argument("--samples", type=_args.POSITIVE, help="train on the first N samples per epoch")
    p.add_argument("--seed", type=int, default=defaults.seed, help="sample order seed (default 0)")
    p.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor, not per channel")
    p.add_argument("--method", choices=["minmax", "percentile", "entropy", "mse"], default="minmax")
    p.add_argument("-o", "--output", required=True, metavar="PARAMS_JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _require_torch()
    from quantcore import pipeline
    from quantcore.calibrate.method import Method, RangeMethod
    from quantcore.qat.options import QatOptions
    from quantcore.qat.train import qat
    from quantcore.quantize.document import write_finetuned

    model = pipeline.load_model(args.model)
    train = pipeline.load_data(args.train, model.graph)
    calib = pipeline.load_data(args.calib, model.graph) if args.calib else train.head(DEFAULT_CALIB_SAMPLES)
    options = QatOptions(
        epochs=args.epochs,
        lr=args.lr,
        range_lr=args.range_lr,
        batch_size=args.batch_size,
        loss=args.loss,
        samples=args.samples,
        seed=args.seed,
        start=pipeline.QuantizeOptions(
            method=RangeMethod(Method(args.method)), per_channel=not args.per_tensor
        ),
        progress=sys.stderr.isatty(),
    )
    result = qat(model, train, calib, options)
    if result.document is None:  # not rank 0: rank 0 writes
        return 0
    written = write_finetuned(Path(args.output), result.document, result.weights)
    finetuned = written["finetuned"]
    sqnr = finetuned["output_sqnr_db"]
    losses = ", ".join(f"{loss:.4g}" for loss in result.epoch_losses)
    print(
        f"{args.output}: {finetuned['epochs']} epoch(s) x {finetuned['samples']} samples on"
        f" {finetuned['processes']} process(es), {args.loss} loss per epoch {losses}; calibration output"
        f" SQNR {_db(sqnr['ptq'])} (PTQ start) -> {_db(sqnr['qat'])} dB"
        f" (epoch {finetuned['kept_epoch']} kept)"
        f" in {result.seconds:.1f} s;"
        f" weights in {Path(args.output).with_name(finetuned['weights'])}"
    )
    if finetuned["kept_epoch"] == 0:
        print(
            "fixpoint qat: warning: no epoch beat the PTQ start on the calibration samples, so these are"
            " the start's parameters: train on more samples or epochs, or lower --lr / --range-lr",
            file=sys.stderr,
        )
    return 0


def _require_torch() -> None:
    """InputError (exit 2, one line) when torch cannot be imported, before any file is read; another
    missing module is not hidden behind it."""
    try:
        import torch  # noqa: F401  (training needs it; nothing else in the CLI imports it)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise InputError(TORCH_MISSING) from None


def _db(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"
