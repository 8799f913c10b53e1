"""Checks of the quant-params JSON itself, each at the exact line of the value.

- A file that is not JSON, or fails the schema or the semantic checks of quantcore.quantize.params_json,
  gets one finding per problem at its JSON path: zero-point problems as wrong-zero-point (int8 zero
  point 128 - the uint8 habit -, weight zero point != 0), the rest as suspicious-scale.
- Integers that do not follow from the recorded scales and zero points (the consistency stage, which
  `fixpoint generate`, `evaluate` and `verify` refuse a file for), as errors with a quick fix writing the
  value that follows: offsets and pad values as wrong-zero-point (with the hint when only the sign is
  flipped); multipliers, shifts, clamps, bias scales, the add and softmax constants as suspicious-scale.
  A value the layer's "overrides" says was set by hand gets an info with its reason instead.
- wrong-zero-point: an activation zero point that does not follow from its recorded range and scale
  (the scale matches the range, the zero point does not: edited by hand, or computed with another
  formula), with a quick fix writing the right value.
- wrong-zero-point, recurrent layers (which the consistency stage leaves to the importer: their scales
  are the .tflite's): an SVDF's input_offset and output_offset must be its input's and output's zero
  points as they are (cmsis_nn_svdf_params; the kernel negates the input's), its state_zero_point 0 (the
  CMSIS-NN kernels subtract none); an LSTM's input_offset the negated input zero point, output_offset
  the zero point of its hidden state - its output - and hidden_offset that negated.
- suspicious-scale: a per-channel weight scale orders of magnitude off the others of its tensor
  (a dead or outlier channel: calibration or training went wrong, or the layer wants equalization);
  a recorded model path that is absolute or leads out of the workspace (it is not followed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from fixpoint_server.findings import Code, Edit, Finding, Fix, Severity
from fixpoint_server.parse.params import ParamsFile, ParamsProblem
from fixpoint_server.rules.context import CheckContext, FileKind, Reads
from quantcore.quantize.params_json import json_path, quoted
from quantcore.scheme.qparams import quant_params

CODES = (Code.WRONG_ZERO_POINT, Code.SUSPICIOUS_SCALE)
READS = Reads(contents=frozenset({FileKind.PARAMS_JSON, FileKind.MODEL}), outside=True)
"""The JSONs, and the models they name (read from disk, maybe outside the workspace's index)."""

OUTLIER_RATIO = 1000.0
"""A channel's weight scale this many times above or below the tensor's median is flagged: int8 then
spends ~10 bits of range on one channel, or leaves one channel with almost no levels."""

_ZERO_POINT_KEYS = frozenset({
    "input_offset", "input_1_offset", "input_2_offset", "output_offset", "out_offset", "pad_value",
    "zero_point",
})  # fmt: skip
"""Values that are (negated) zero points: their findings are wrong-zero-point."""


def check(ctx: CheckContext) -> list[Finding]:
    findings: list[Finding] = []
    for params in ctx.params_files():
        findings.extend(_problems(params))
        if params.document is not None:
            findings.extend(_recorded_model(ctx, params))
            findings.extend(_inconsistent(params))
            findings.extend(_overridden(params))
            findings.extend(_zero_points_of_ranges(params))
            findings.extend(_recurrent_offsets(params))
            findings.extend(_weight_scale_outliers(params))
    return findings


def _problems(params: ParamsFile) -> Iterator[Finding]:
    for problem in params.problems:
        code = Code.WRONG_ZERO_POINT if "zero_point" in problem.path else Code.SUSPICIOUS_SCALE
        where = json_path(problem.path) if problem.path else params.path.name
        message, fixes = f"{where}: {problem.message}", tuple[Fix, ...]()
        uint8 = _uint8_habit(params, problem.path)
        if uint8 is not None:
            _, fixed = uint8
            message += f" (a uint8 zero point? the int8 zero point of this tensor's range is {fixed})"
            fixes = (_replace(params, problem.path, fixed, f"Set the zero point to {fixed} (int8)"),)
        yield Finding(code, message, params.path, problem.span, Severity.ERROR, fixes)


def _uint8_habit(params: ParamsFile, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """(value, int8 zero point) when `path` is an activation zero point in uint8's [128, 255]."""
    if len(path) != 3 or path[0] != "tensors" or path[2] != "zero_point" or not isinstance(params.raw, dict):
        return None
    tensor = params.raw.get("tensors", {}).get(path[1], {})
    value = tensor.get("zero_point")
    if not isinstance(value, int) or not 127 < value <= 255 or tensor.get("dtype") != "int8":
        return None
    rng = tensor.get("range")
    if (
        isinstance(rng, dict)
        and isinstance(rng.get("min"), float | int)
        and isinstance(rng.get("max"), float | int)
    ):
        return value, quant_params(rng["min"], rng["max"])[1]
    return value, value - 128  # the same real range shifted from [0, 255] to [-128, 127]


def _replace(params: ParamsFile, path: tuple[str | int, ...], value: int, title: str) -> Fix:
    return Fix(title, (Edit(params.path, params.span(path), str(value)),), preferred=True)


def _zero_points_of_ranges(params: ParamsFile) -> Iterator[Finding]:
    assert params.document is not None
    for name, tensor in params.document["tensors"].items():
        if tensor.get("kind") != "activation" or tensor.get("dtype") != "int8" or "range" not in tensor:
            continue
        scale, zero_point = quant_params(tensor["range"]["min"], tensor["range"]["max"])
        # Per-channel scales (a depthwise layer's input) split the range's scale, around its zero point.
        recorded = tensor["scale"] if not isinstance(tensor["scale"], list) else scale
        if not math.isclose(scale, recorded, rel_tol=1e-9) or zero_point == tensor["zero_point"]:
            continue
        path = ("tensors", name, "zero_point")
        lo, hi = tensor["range"]["min"], tensor["range"]["max"]
        yield Finding(
            Code.WRONG_ZERO_POINT,
            f"zero point of {name!r} is {tensor['zero_point']}, but its range [{lo:.6g}, {hi:.6g}] and scale"
            f" {scale:.6g} give {zero_point} (zero_point = round(-128 - min / scale)); values near"
            f" {lo:.6g} would saturate",
            params.path,
            params.span(path),
            fixes=(_replace(params, path, zero_point, f"Set the zero point of {name!r} to {zero_point}"),),
            data={"tensor": name, "expected": zero_point},
        )


def _recurrent_offsets(params: ParamsFile) -> Iterator[Finding]:
    assert params.document is not None
    tensors = params.document["tensors"]
    for index, layer in enumerate(params.document["layers"]):
        if layer.get("op") not in ("svdf", "lstm"):
            continue
        inputs, outputs = layer.get("inputs") or [""], layer.get("outputs") or [""]
        zp_in = tensors.get(inputs[0], {}).get("zero_point")
        zp_out = tensors.get(outputs[0], {}).get("zero_point")
        for key, expected, why in _recurrent_expectations(layer["op"], inputs[0], zp_in, outputs[0], zp_out):
            value = layer.get("params", {}).get(key)
            if not isinstance(value, int) or not isinstance(expected, int) or value == expected:
                continue
            path = ("layers", index, "params", key)
            flipped = " (the sign is flipped)" if expected and value == -expected else ""
            yield Finding(
                Code.WRONG_ZERO_POINT,
                f"{json_path(path)} is {value}, but {why}: it must be {expected}{flipped}",
                params.path,
                params.span(path),
                fixes=(_replace(params, path, expected, f"Set {key} to {expected}"),),
                data={"layer": layer.get("name"), "offset": key, "expected": expected},
            )


def _recurrent_expectations(op: str, x: str, zp_in: Any, y: str, zp_out: Any) -> list[tuple[str, Any, str]]:
    """(params key, the value it must have, why) of a recurrent layer's offsets."""
    negated_in = -zp_in if isinstance(zp_in, int) else None
    if op == "svdf":
        return [
            ("input_offset", zp_in, f"cmsis_nn_svdf_params takes the zero point of input {quoted(x)}"
             f" ({zp_in}) itself - arm_svdf_s8 and arm_svdf_state_s16_s8 negate it"),
            ("output_offset", zp_out, f"it is the zero point of output {quoted(y)} ({zp_out})"),
            ("state_zero_point", 0, "CMSIS-NN's SVDF kernels subtract no zero point from the state (with"
             " another, the firmware computes another result than TFLite's reference)"),
        ]  # fmt: skip
    hidden = f"the zero point of the hidden state, which is output {quoted(y)} ({zp_out})"
    return [
        ("input_offset", negated_in, f"it is the negated zero point of input {quoted(x)} ({zp_in})"),
        ("output_offset", zp_out, f"arm_lstm_unidirectional_s8 adds it to every hidden value: {hidden}"),
        ("hidden_offset", -zp_out if isinstance(zp_out, int) else None,
         f"the recurrent products' effective biases take {hidden} negated"),
    ]  # fmt: skip


def _inconsistent(params: ParamsFile) -> Iterator[Finding]:
    """Integers that do not follow from the recorded scales: errors, since generate refuses the file."""
    for problem in params.inconsistent:
        keys = [part for part in problem.path if isinstance(part, str)]
        zero_point = bool(keys) and keys[-1] in _ZERO_POINT_KEYS
        code = Code.WRONG_ZERO_POINT if zero_point else Code.SUSPICIOUS_SCALE
        message = f"{json_path(problem.path)}: {problem.message}"
        recorded = _value_at(params.raw, problem.path)
        if zero_point and problem.expected and recorded == -problem.expected:
            message += " (the sign is flipped)"
        yield Finding(
            code, message, params.path, problem.span, Severity.ERROR, _fix_to(params, problem),
            data={"expected": problem.expected},
        )  # fmt: skip


def _fix_to(params: ParamsFile, problem: ParamsProblem) -> tuple[Fix, ...]:
    if problem.expected is None:
        return ()
    text = repr(problem.expected) if isinstance(problem.expected, float) else str(problem.expected)
    title = f"Set {json_path(problem.path)} to {text}, the value the recorded scales give"
    return (Fix(title, (Edit(params.path, problem.span, text),), preferred=True),)


def _value_at(document: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(document, dict) and isinstance(part, str):
            document = document.get(part)
        elif isinstance(document, list) and isinstance(part, int) and part < len(document):
            document = document[part]
        else:
            return None
    return document


def _overridden(params: ParamsFile) -> Iterator[Finding]:
    """A value set by hand on purpose: said once where it is, with the reason the file gives."""
    for entry in params.overrides:
        yield Finding(
            Code.SUSPICIOUS_SCALE,
            f"{json_path(entry.path)}: set by hand ({quoted(entry.message)}); not checked against the"
            " recorded scales",
            params.path,
            entry.span,
            Severity.INFO,
        )


def _recorded_model(ctx: CheckContext, params: ParamsFile) -> Iterator[Finding]:
    """A model path that is absolute or leads out of the workspace: said, and not followed."""
    problem = params.recorded_model_problem(ctx)
    if problem is not None:
        yield Finding(
            Code.SUSPICIOUS_SCALE, problem, params.path, params.span(("model", "path")), Severity.ERROR
        )


def _weight_scale_outliers(params: ParamsFile) -> Iterator[Finding]:
    assert params.document is not None
    for name, tensor in params.document["tensors"].items():
        scales = tensor.get("scale")
        if tensor.get("kind") != "weight" or not isinstance(scales, list) or len(scales) < 3:
            continue
        median = sorted(scales)[len(scales) // 2]
        for channel, scale in enumerate(scales):
            ratio = scale / median if median > 0 else math.inf
            if 1 / OUTLIER_RATIO <= ratio <= OUTLIER_RATIO:
                continue
            yield Finding(
                Code.SUSPICIOUS_SCALE,
                f"channel {channel} of {name!r} has scale {scale:.3g}, {_times(ratio)} the median"
                f" {median:.3g} of its tensor: a dead or outlier channel; check the training, or"
                " quantize with --equalize on",
                params.path,
                params.span(("tensors", name, "scale", channel)),
                data={"tensor": name, "channel": channel},
            )


def _times(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 1 else f"1/{1 / ratio:.0f} of"
