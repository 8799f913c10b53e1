"""The semantic stage of a quant-params document's validation: the rules its schema cannot express.

References between tensors and layers (with "did you mean" for a misspelled name), list lengths that
depend on a shape or on the number of output channels, clamps that depend on a tensor's dtype, the
calibration's per-layer entries, and the kernels an op can use (quantcore.quantize.consistency). It runs
on a document that passed the schema stage, so it relies on the types and required keys the schema
guarantees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from quantcore.quantize import consistency
from quantcore.quantize.params_problems import Doc, JsonPath, Problem, Suggest, got, quoted

_DTYPE_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}


def problems(doc: Doc, suggest: Suggest) -> Iterator[Problem]:
    """What is wrong with a document the schema accepted (in no particular order: the caller sorts)."""
    yield from _check_tensors(doc)
    yield from _check_model(doc, suggest)
    yield from _check_layers(doc, suggest)
    yield from _check_calibration(doc)
    yield from _check_channel_activations(doc)


def _check_tensors(doc: Doc) -> Iterator[Problem]:
    per_tensor = doc["scheme"]["weights"] == "per-tensor"
    for name, tensor in doc["tensors"].items():
        at: JsonPath = ("tensors", name)
        if tensor["kind"] != "activation":
            yield from _check_channels(tensor, at)
        elif isinstance(tensor["scale"], list) or "axis" in tensor:
            yield from _check_activation_channels(tensor, at)
        if tensor["kind"] == "weight" and per_tensor and isinstance(tensor["scale"], list):
            yield Problem.at((*at, "scale"), 'must be one number: scheme.weights is "per-tensor", got a list')
        for key in ("observed", "range"):
            if key in tensor:
                yield from _check_interval(tensor[key], (*at, key))


def _check_channels(tensor: Doc, at: JsonPath) -> Iterator[Problem]:
    """Per channel (scale is a list) or per tensor (a number): the other fields follow, one per channel."""
    per_channel = isinstance(tensor["scale"], list)
    shape = tensor["shape"]
    if tensor["kind"] == "bias":
        channels, along = shape[0], f"the bias shape {shape}"
    elif not per_channel:
        if "axis" in tensor:
            yield Problem.at((*at, "axis"), "only per-channel weights (a list of scales) have an axis")
        channels, along = 1, ""
    elif "axis" not in tensor:
        yield Problem.at(at, 'missing required property "axis" (the channel axis of per-channel weights)')
        return
    elif tensor["axis"] >= len(shape):
        yield Problem.at(
            (*at, "axis"), f"must be < {len(shape)}, the rank of shape {shape}, got {tensor['axis']}"
        )
        return
    else:
        channels, along = shape[tensor["axis"]], f"axis {tensor['axis']} of shape {shape}"
    for sub, value in _channel_fields(tensor):
        if isinstance(value, list) != per_channel:
            form = "a list, like scale" if per_channel else "one number, like scale"
            yield Problem.at((*at, *sub), f"must be {form}, got {got(value)}")
        elif per_channel and len(value) != channels:
            yield Problem.at(
                (*at, *sub), f"must have {channels} entries, one per channel of {along}, got {len(value)}"
            )


def _check_activation_channels(tensor: Doc, at: JsonPath) -> Iterator[Problem]:
    """Per-channel scales of an activation: a list with an axis, one scale per channel of an int8 NHWC
    tensor (the zero point stays one number)."""
    shape = tensor["shape"]
    if not isinstance(tensor["scale"], list):
        yield Problem.at((*at, "axis"), "only per-channel scales (a list) have an axis")
    elif "axis" not in tensor:
        yield Problem.at(at, 'missing required property "axis" (the channel axis of per-channel scales, 3)')
    elif tensor["dtype"] != "int8" or len(shape) != 4:
        yield Problem.at(
            (*at, "scale"),
            f"must be one number: per-channel scales are for int8 NHWC (4-D) activations, this is"
            f" {tensor['dtype']} of shape {shape}",
        )
    elif len(tensor["scale"]) != shape[3]:
        yield Problem.at(
            (*at, "scale"),
            f"must have {shape[3]} entries, one per channel of axis 3 of shape {shape}, got"
            f" {len(tensor['scale'])}",
        )


def _check_channel_activations(doc: Doc) -> Iterator[Problem]:
    """A per-channel activation sits between a conv2d/depthwise_conv2d layer and depthwise_conv2d
    readers only (whose per-channel multipliers absorb its scales; any other kernel takes one scale),
    is no model input or output, and is what transforms.dw_channel_scales records as per channel."""
    per_channel = {
        n for n, t in doc["tensors"].items() if t["kind"] == "activation" and isinstance(t["scale"], list)
    }
    recorded = doc.get("transforms", {}).get("dw_channel_scales", {}).get("tensors", {})
    ends = {entry["name"] for side in ("inputs", "outputs") for entry in doc["model"][side]}
    for name in sorted(per_channel & ends):
        yield Problem.at(
            ("tensors", name, "scale"), "must be one number: a model input or output has one scale"
        )
    for index, layer in enumerate(doc["layers"]):
        for position, name in enumerate(layer["inputs"]):
            if name in per_channel and (layer["op"] != "depthwise_conv2d" or position != 0):
                yield Problem.at(
                    ("layers", index, "inputs", position),
                    f"{quoted(name)} has per-channel scales, which only a depthwise_conv2d layer's"
                    f" multipliers absorb; {layer['op']} takes one scale: re-run fixpoint quantize",
                )
        for name in layer["outputs"]:
            if name in per_channel and layer["op"] not in ("conv2d", "depthwise_conv2d"):
                yield Problem.at(
                    ("layers", index, "outputs", 0),
                    f"{quoted(name)} has per-channel scales, which only a conv2d or depthwise_conv2d"
                    f" layer's multipliers write; {layer['op']} writes one scale: re-run fixpoint quantize",
                )
    for name in sorted(per_channel - {n for n, r in recorded.items() if r["per_channel"]}):
        yield Problem.at(
            ("tensors", name, "scale"),
            "is per channel, but $.transforms.dw_channel_scales does not record the tensor as per channel;"
            " re-run fixpoint quantize",
        )
    for name, record in recorded.items():
        if record["per_channel"] and name not in per_channel:
            yield Problem.at(
                ("transforms", "dw_channel_scales", "tensors", name, "per_channel"),
                f"true, but {quoted(name)} is not an activation with per-channel scales in $.tensors",
            )


def _channel_fields(tensor: Doc) -> Iterator[tuple[JsonPath, Any]]:
    yield ("scale",), tensor["scale"]
    if tensor["kind"] == "weight":
        yield ("zero_point",), tensor["zero_point"]
        if "observed" in tensor:
            yield ("observed", "min"), tensor["observed"]["min"]
            yield ("observed", "max"), tensor["observed"]["max"]


def _check_interval(interval: Doc, at: JsonPath) -> Iterator[Problem]:
    lows, highs = interval["min"], interval["max"]
    if isinstance(lows, list) and isinstance(highs, list):
        pairs = [((*at, "min", i), low, high) for i, (low, high) in enumerate(zip(lows, highs, strict=False))]
    elif isinstance(lows, list) or isinstance(highs, list):
        return  # one list, one number: _check_channels reports it
    else:
        pairs = [((*at, "min"), lows, highs)]
    for where, low, high in pairs:
        if low > high:
            yield Problem.at(where, f"must be <= max ({high}), got {low}")


def _check_model(doc: Doc, suggest: Suggest) -> Iterator[Problem]:
    for side in ("inputs", "outputs"):
        for index, entry in enumerate(doc["model"][side]):
            at: JsonPath = ("model", side, index)
            found = _reference(doc, entry["name"], "activation", (*at, "name"), suggest)
            if isinstance(found, Problem):
                yield found
            elif found["shape"] != entry["shape"]:
                yield Problem.at(
                    (*at, "shape"),
                    f"must equal the shape of tensor {quoted(entry['name'])}, {found['shape']}",
                )


def _reference(doc: Doc, name: str, kind: str, at: JsonPath, suggest: Suggest) -> Doc | Problem:
    """The tensor a layer or the model names, or the problem with that name."""
    tensor: Doc | None = doc["tensors"].get(name)
    if tensor is None:
        close = suggest.close(name, doc["tensors"])
        hint = f" (did you mean {quoted(close)}?)" if close else ""
        return Problem.at(at, f"no tensor named {quoted(name)} in $.tensors{hint}")
    if tensor["kind"] != kind:
        return Problem.at(
            at, f"must name {_article(kind)} tensor; {quoted(name)} is {_article(tensor['kind'])}"
        )
    return tensor


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _check_layers(doc: Doc, suggest: Suggest) -> Iterator[Problem]:
    first_index: dict[str, int] = {}
    for index, layer in enumerate(doc["layers"]):
        at: JsonPath = ("layers", index)
        name = layer["name"]
        if name in first_index:
            yield Problem.at(
                (*at, "name"),
                f"duplicate layer name {quoted(name)}, also at $.layers[{first_index[name]}]",
            )
        first_index.setdefault(name, index)
        refs = [p for p in _layer_references(doc, layer, at, suggest) if isinstance(p, Problem)]
        yield from refs
        if not refs:
            yield from _check_layer_params(doc, layer, at)
            yield from consistency.kernel_problems(doc, layer, at)


def _layer_references(doc: Doc, layer: Doc, at: JsonPath, suggest: Suggest) -> Iterator[Doc | Problem]:
    for side in ("inputs", "outputs"):
        for index, name in enumerate(layer[side]):
            yield _reference(doc, name, "activation", (*at, side, index), suggest)
    for key, kind in (("weights", "weight"), ("bias", "bias")):
        if key in layer:
            yield _reference(doc, layer[key], kind, (*at, key), suggest)


def _check_layer_params(doc: Doc, layer: Doc, at: JsonPath) -> Iterator[Problem]:
    tensors = doc["tensors"]
    output_name = layer["outputs"][0]
    output = tensors[output_name]
    input_dtype = tensors[layer["inputs"][0]]["dtype"]
    params, at_params = layer["params"], (*at, "params")
    if "act_min" in params:
        yield from _check_clamp(params, at_params, output_name, output["dtype"])
    if "weights" in layer:
        yield from _check_layer_channels(doc, layer, at, output_name)
    if "bias" in layer and tensors[layer["bias"]]["dtype"] == "int64" and input_dtype != "int16":
        yield Problem.at(
            ("tensors", layer["bias"], "dtype"),
            f'must be "int32": int64 biases are for int16 layers, layer {quoted(layer["name"])} '
            f"has {input_dtype} input",
        )
    if layer["op"] == "softmax" and input_dtype == "int8" and "diff_min" not in params:
        yield Problem.at(at_params, 'missing required property "diff_min" (the int8 softmax kernels need it)')


def _check_clamp(params: Doc, at: JsonPath, output_name: str, dtype: str) -> Iterator[Problem]:
    low, high = _DTYPE_RANGE[dtype]
    for key in ("act_min", "act_max"):
        if not low <= params[key] <= high:
            yield Problem.at(
                (*at, key),
                f"must be in [{low}, {high}] for {dtype} output {quoted(output_name)}, got {params[key]}",
            )
    if params["act_min"] > params["act_max"]:
        yield Problem.at(
            (*at, "act_min"), f"must be <= act_max ({params['act_max']}), got {params['act_min']}"
        )


def _check_layer_channels(doc: Doc, layer: Doc, at: JsonPath, output_name: str) -> Iterator[Problem]:
    """Multipliers, shifts, bias and per-channel weights: one entry per output channel (NHWC: last dim)."""
    tensors = doc["tensors"]
    channels = tensors[output_name]["shape"][-1]
    of_output = f"one per channel of output {quoted(output_name)}"
    params = layer["params"]
    if isinstance(params["multiplier"], list) != isinstance(params["shift"], list):
        form = (
            "a list, like multiplier"
            if isinstance(params["multiplier"], list)
            else "one integer, like multiplier"
        )
        yield Problem.at((*at, "params", "shift"), f"must be {form}, got {got(params['shift'])}")
    for key in ("multiplier", "shift"):
        if isinstance(params[key], list) and len(params[key]) != channels:
            yield Problem.at(
                (*at, "params", key), f"must have {channels} entries, {of_output}, got {len(params[key])}"
            )
    weights = tensors[layer["weights"]]
    axis = weights.get("axis")
    if isinstance(weights["scale"], list) and axis is not None and axis < len(weights["shape"]):
        count = weights["shape"][axis]
        if count != channels:
            yield Problem.at(
                (*at, "weights"),
                f"has {count} channels on axis {axis}, but output {quoted(output_name)} has {channels}",
            )
    if "bias" in layer and tensors[layer["bias"]]["shape"][0] != channels:
        count = tensors[layer["bias"]]["shape"][0]
        yield Problem.at(
            (*at, "bias"),
            f"has {count} entries, but the output {quoted(output_name)} has {channels} channels",
        )


def _check_calibration(doc: Doc) -> Iterator[Problem]:
    calibration = doc["calibration"]
    per_layer = calibration.get("per_layer", {})
    # `--layer-method` takes a layer's name or an activation tensor's (the model's input has no layer).
    names = {layer["name"] for layer in doc["layers"]} | set(doc["tensors"])
    for name in per_layer:
        if name not in names:
            yield Problem.at(
                ("calibration", "per_layer", name),
                f"no layer or tensor named {quoted(name)} in $.layers or $.tensors",
            )
    uses_percentile = "percentile" in (calibration["method"], *per_layer.values())
    if uses_percentile and "percentile" not in calibration:
        yield Problem.at(
            ("calibration",), 'missing required property "percentile" (a layer uses method "percentile")'
        )
    if not uses_percentile and "percentile" in calibration:
        yield Problem.at(("calibration", "percentile"), 'is only used by method "percentile": remove it')
