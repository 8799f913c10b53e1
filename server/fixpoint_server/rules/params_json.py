"""Checks of the quant-params JSON itself, each at the exact line of the value.

- A file that is not JSON, or fails the schema or the semantic checks of quantcore.quantize.params_json,
  gets one finding per problem at its JSON path: zero-point problems as wrong-zero-point (int8 zero
  point 128 - the uint8 habit -, weight zero point != 0), the rest as suspicious-scale.
- wrong-zero-point: an activation zero point that does not follow from its recorded range and scale
  (the scale matches the range, the zero point does not: edited by hand, or computed with another
  formula); a layer's input_offset that is not the negated zero point of its input, an output_offset
  that is not its output's zero point. Each with a quick fix writing the right value.
- suspicious-scale: a per-channel weight scale orders of magnitude off the others of its tensor
  (a dead or outlier channel: calibration or training went wrong, or the layer wants equalization).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from fixpoint_server.findings import Code, Edit, Finding, Fix, Severity
from fixpoint_server.parse.params import ParamsFile
from fixpoint_server.rules.context import CheckContext
from quantcore.calibrate.qparams import quant_params

CODES = (Code.WRONG_ZERO_POINT, Code.SUSPICIOUS_SCALE)

OUTLIER_RATIO = 1000.0
"""A channel's weight scale this many times above or below the tensor's median is flagged: int8 then
spends ~10 bits of range on one channel, or leaves one channel with almost no levels."""

_OFFSETS = {
    # layer param -> (which tensor list, index, sign): CMSIS-NN adds input offsets = -zp to the inputs
    # and the output offset = +zp to the result.
    "input_offset": ("inputs", 0, -1),
    "input_1_offset": ("inputs", 0, -1),
    "input_2_offset": ("inputs", 1, -1),
    "output_offset": ("outputs", 0, 1),
    "out_offset": ("outputs", 0, 1),
}


def check(ctx: CheckContext) -> list[Finding]:
    findings: list[Finding] = []
    for params in ctx.params_files():
        findings.extend(_problems(params))
        if params.document is not None:
            findings.extend(_zero_points_of_ranges(params))
            findings.extend(_layer_offsets(params))
            findings.extend(_weight_scale_outliers(params))
    return findings


def _problems(params: ParamsFile) -> Iterator[Finding]:
    from quantcore.quantize.params_json import json_path

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
        if not math.isclose(scale, tensor["scale"], rel_tol=1e-9) or zero_point == tensor["zero_point"]:
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


def _layer_offsets(params: ParamsFile) -> Iterator[Finding]:
    assert params.document is not None
    tensors = params.document["tensors"]
    for index, layer in enumerate(params.document["layers"]):
        for key, (side, position, sign) in _OFFSETS.items():
            value = layer.get("params", {}).get(key)
            names = layer.get(side, [])
            if not isinstance(value, int) or position >= len(names) or names[position] not in tensors:
                continue
            zero_point = tensors[names[position]].get("zero_point")
            if not isinstance(zero_point, int) or value == sign * zero_point:
                continue
            yield _offset_finding(params, index, layer, key, value, sign * zero_point, names[position])


def _offset_finding(
    params: ParamsFile, index: int, layer: dict[str, Any], key: str, value: int, expected: int, tensor: str
) -> Finding:
    path = ("layers", index, "params", key)
    rule = "the negated zero point" if expected == 0 or key.startswith("input") else "the zero point"
    habit = " - the sign is flipped" if value == -expected else ""
    return Finding(
        Code.WRONG_ZERO_POINT,
        f"layer {layer['name']!r}: {key} is {value}, but must be {rule} of {tensor!r}: {expected}{habit}",
        params.path,
        params.span(path),
        fixes=(_replace(params, path, expected, f"Set {key} of {layer['name']!r} to {expected}"),),
        data={"layer": layer["name"], "expected": expected},
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
