"""`fixpoint quantize MODEL --calib DATA -o params.json`: calibrate and write the quant-params JSON.

MODEL is an ONNX or a TFLite file. An int8 .tflite keeps TensorFlow's scales and needs no --calib
(pipeline.quantize_imported); every float model needs it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quantcore.commands import _args
from quantcore.commands._args import Subcommands
from quantcore.cores import Core
from quantcore.errors import InputError
from quantcore.kernels.rounding import Rounding

if TYPE_CHECKING:  # imported where used: building the CLI parser imports nothing heavy
    from quantcore.calibrate.method import RangeMethod

METHODS = ("minmax", "percentile", "entropy", "mse")


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "quantize",
        help="calibrate a float ONNX/TFLite model (or take an int8 .tflite's scales) and write"
        " its int8 quant-params JSON",
    )
    p.add_argument("model", help="float ONNX or TFLite model, or an int8 .tflite")
    p.add_argument(
        "--calib",
        metavar="DATA",
        help=".npy/.npz (array x) or a folder of images; not needed for an int8 .tflite",
    )
    p.add_argument("--method", choices=METHODS, default="minmax")
    p.add_argument(
        "--percentile", type=_args.PERCENTILE, default=99.999, help="for --method percentile (default 99.999)"
    )
    p.add_argument(
        "--layer-method",
        action="append",
        default=[],
        metavar="LAYER=METHOD",
        help="calibration method for one layer or tensor (repeatable)",
    )
    p.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor, not per channel")
    p.add_argument(
        "--int16",
        action="append",
        default=[],
        metavar="LAYER",
        help="run this layer with int16 activations on CMSIS-NN's s16 kernels (repeatable); 'auto' picks"
        " the tensors worth it by sensitivity within --flash-budget/--ram-budget",
    )
    p.add_argument(
        "--int16-output",
        choices=list(_MODES),
        default="auto",
        help="the output layer on CMSIS-NN's s16 kernels (int16 logits, their range widened 4x): auto"
        " where it raises the output SQNR on the calibration set and fits --flash-budget/--ram-budget"
        " (default); on/off force it",
    )
    p.add_argument(
        "--flash-budget",
        type=_args.size,
        metavar="SIZE",
        help="model constants budget for --int16 auto and --int16-output auto (e.g. 256K)",
    )
    p.add_argument(
        "--ram-budget",
        type=_args.size,
        metavar="SIZE",
        help="arena + scratch budget for --int16 auto and --int16-output auto (e.g. 64K)",
    )
    p.add_argument(
        "--core",
        default="cortex-m4",
        choices=[core.label for core in Core if core is not Core.HOST],
        help="core the memory of --int16 auto and --pool-as-depthwise auto is costed for (default cortex-m4)",
    )
    p.add_argument(
        "--rounding",
        choices=[r.value for r in Rounding],
        default="double",
        help="requantization rounding of the firmware's CMSIS-NN build",
    )
    for flag, what in (("--equalize", "cross-layer equalization"), ("--bias-correction", "bias correction")):
        p.add_argument(
            flag,
            choices=list(_MODES),
            default="auto",
            help=f"{what}: auto keeps it where it raises the output SQNR on the calibration set (default);"
            " on/off force it",
        )
    p.add_argument(
        "--pool-as-depthwise",
        choices=list(_MODES),
        default="auto",
        help="run average pools as depthwise convolutions (their own output scale): auto where the output"
        " SQNR gained on the calibration set is worth the flash and scratch added on --core (default);"
        " on/off force it",
    )
    p.add_argument(
        "--dw-channel-scales",
        choices=list(_MODES),
        default="auto",
        help="per-channel scales for activations read only by depthwise convolutions (folded into the"
        " producer's and the depthwise layers' multipliers): auto where they raise the output SQNR on the"
        " calibration set (default); on/off force it",
    )
    p.add_argument(
        "--workers",
        type=_args.WORKERS,
        default=1,
        help="calibrate in N processes (same result as one; default 1)",
    )
    p.add_argument("--samples", type=_args.POSITIVE, help="use only the first N calibration samples")
    p.add_argument("-o", "--output", required=True, metavar="PARAMS_JSON")
    p.set_defaults(func=run)


_MODES = {"auto": None, "on": True, "off": False}
_TRANSFORMS = {"cross_layer_equalization": "cross-layer equalized", "bias_correction": "bias corrected"}


def _method(name: str, percentile: float) -> RangeMethod:
    from quantcore.calibrate.method import Method, RangeMethod

    return RangeMethod(Method(name), percentile=percentile)


def run(args: argparse.Namespace) -> int:
    from quantcore import loading

    started = time.perf_counter()
    with loading.start(args.model) as child:  # the model is read there while the quantizer is imported here
        from quantcore import pipeline
        from quantcore.quantize import params_json
        from quantcore.quantize.mixed_precision import Budget

        model = pipeline.load_model(args.model, started=child)
    if model.fully_quantized:
        return _imported(args, model, started)
    if args.calib is None:
        raise InputError(
            f"{args.model}: a float model needs --calib DATA (representative inputs) to choose its"
            " activation ranges; only an int8 .tflite (TensorFlow's full-integer converter) brings its own"
        )
    per_layer = {}
    for item in args.layer_method:
        layer, _, method = item.partition("=")
        if not method:
            print(f"fixpoint quantize: --layer-method {item!r}: expected LAYER=METHOD", file=sys.stderr)
            return 2
        if method not in METHODS:
            print(
                f"fixpoint quantize: --layer-method {item!r}: unknown method {method!r} (one of"
                f" {', '.join(METHODS)})",
                file=sys.stderr,
            )
            return 2
        per_layer[layer] = _method(method, args.percentile)
    # Before the data is read and anything calibrated: a misspelt name costs nothing.
    pipeline.check_layer_methods(model, per_layer, "--layer-method")
    calib = pipeline.load_data(args.calib, model.graph)
    if args.samples:
        calib = calib.head(args.samples)
    options = pipeline.QuantizeOptions(
        method=_method(args.method, args.percentile),
        per_layer=per_layer,
        per_channel=not args.per_tensor,
        rounding=Rounding(args.rounding),
        int16_layers=frozenset(layer for layer in args.int16 if layer != "auto"),
        int16_output=_MODES[args.int16_output],
        int16_auto="auto" in args.int16,
        budget=Budget(args.flash_budget, args.ram_budget),
        core=args.core,
        workers=args.workers,
        equalize=_MODES[args.equalize],
        bias_correction=_MODES[args.bias_correction],
        pool_as_depthwise=_MODES[args.pool_as_depthwise],
        dw_channel_scales=_MODES[args.dw_channel_scales],
        progress=sys.stderr.isatty(),
    )
    result = pipeline.quantize(model, calib, options)
    params_json.write(Path(args.output), result.document)
    transforms = result.document["transforms"]
    applied = [label for key, label in _TRANSFORMS.items() if transforms[key]["applied"]]
    mixed = result.document.get("mixed_precision")
    if mixed is not None:
        figures, memory = mixed["output_sqnr_db"], mixed["memory"]
        print(
            f"int16: {', '.join(mixed['layers']) or 'no layer worth it'}; calibration output SQNR"
            f" {figures['int8']:.2f} -> {figures['mixed']:.2f} dB; flash {memory['int8']['flash']} ->"
            f" {memory['mixed']['flash']} B, ram {memory['int8']['ram']} -> {memory['mixed']['ram']} B"
        )
    for line in (
        _pools_line(transforms["pool_as_depthwise"]),
        _channels_line(transforms["dw_channel_scales"]),
        _output_line(transforms["int16_output"]),
    ):
        if line:
            print(line)
    scheme = ", ".join(["per-tensor" if args.per_tensor else "per-channel", *applied])
    return _written(
        args, result.document, f"quantized from {len(calib)} samples ({args.method}, {scheme})", started
    )


def _written(args: argparse.Namespace, document: dict[str, Any], how: str, started: float) -> int:
    """The last line once the params JSON is written: '<output>: <N> layers <how> in <seconds> s'."""
    layers = sum(1 for layer in document["layers"] if layer["kernel"])
    print(f"{args.output}: {layers} layers {how} in {time.perf_counter() - started:.2f} s")
    return 0


def _output_line(entry: dict[str, Any]) -> str:
    """What became of the int16 output: its layers and the figures that decided, or why it stayed int8."""
    if entry["mode"] == "off":
        return "int16 output: off"
    layers = ", ".join(entry.get("layers", []))
    if entry["applied"]:
        line = f"int16 output: {layers}"
    else:
        line = f"int16 output: kept int8 ({entry.get('reason', 'no gain')})"
    figures = entry.get("output_sqnr_db")
    memory = entry.get("memory")
    if figures and memory:
        line += (
            f"; calibration output SQNR {figures['off']:.2f} -> {figures['on']:.2f} dB; flash"
            f" {memory['off']['flash']} -> {memory['on']['flash']} B, ram {memory['off']['ram']} ->"
            f" {memory['on']['ram']} B"
        )
    elif entry["applied"]:
        line += f" ({entry['reason']})"
    return line


def _pools_line(entry: dict[str, Any]) -> str:
    """What became of the average pools the rule looked at ("" when it looked at none)."""
    return _choices_line("avg_pool", entry["layers"], "substituted", ("as depthwise_conv2d", "kept"))


def _channels_line(entry: dict[str, Any]) -> str:
    """Which depthwise inputs got per-channel scales, and why ("" when no tensor was a candidate)."""
    return _choices_line("depthwise inputs", entry["tensors"], "per_channel", ("per channel", "per tensor"))


def _choices_line(title: str, records: dict[str, Any], flag: str, hows: tuple[str, str]) -> str:
    """'title: 'name' how (why); ...' for a transform's per-name records, each chosen by `flag`."""
    from quantcore import display

    if not records:
        return ""
    parts = [
        f"{display.quoted(name)} {hows[0] if record[flag] else hows[1]} ({display.shown(record['why'])})"
        for name, record in records.items()
    ]
    return f"{title}: {'; '.join(parts)}"


def _imported(args: argparse.Namespace, model: Any, started: float) -> int:
    """An int8 .tflite: TensorFlow's scales and integers as they are; calibration options do not apply."""
    from quantcore import pipeline
    from quantcore.quantize import params_json

    if args.pool_as_depthwise == "on":
        raise InputError(
            f"{args.model}: --pool-as-depthwise on: the model is int8 already, and its average pools must"
            " stay what TensorFlow Lite Micro runs; use auto or off (its pools stay average pools either way)"
        )
    if args.calib is not None:
        print(
            f"fixpoint quantize: {args.model} is int8 already: its own scales are kept, --calib is not used",
            file=sys.stderr,
        )
    result = pipeline.quantize_imported(model, Rounding(args.rounding))
    params_json.write(Path(args.output), result.document)
    return _written(args, result.document, "with the model's own int8 scales (no calibration)", started)
