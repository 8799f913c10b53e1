"""The quant-params JSON file: written readable and diffable, read back only if valid.

The format (version 1) is defined by quantcore/schema/quant-params.schema.json, which editors use too.
`validate` applies, in order: "is it JSON data at all" (no NaN, no numpy scalars, no tuples), the schema,
then the rules a schema cannot express: references between tensors and layers, list lengths that depend on
a shape, clamps that depend on a tensor's dtype. A later stage runs only when the earlier ones pass, since
it relies on the structure they guarantee. Every Problem carries the JSON path of the value at fault, so the
CLI can print it and the language server can place it; problems come in document order.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from quantcore.errors import QuantcoreError

FORMAT = "fixpoint-quant-params"
VERSION = 1
SCHEMA_RESOURCE = ("schema", "quant-params.schema.json")

PathPart = str | int
JsonPath = tuple[PathPart, ...]
Doc = dict[str, Any]

_LOAD_ADVICE = "fix the file, or regenerate it with the quantizer"
_WRITE_ADVICE = "nothing was written; the code that built the document must fix it"
_INDENT = "  "
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# difflib's ratio above which a name is suggested as the intended one (typos, not merely similar names).
_CLOSE = 0.8
_DTYPE_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767)}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document: where (`json_path`, and `path` as keys/indices) and what."""

    json_path: str
    message: str
    path: JsonPath = ()

    def __str__(self) -> str:
        return f"{self.json_path}: {self.message}"


class QuantParamsError(QuantcoreError):
    """A quant-params file that cannot be read, parsed, validated or written; `problems` lists all found."""

    def __init__(self, source: str, detail: str, problems: Sequence[Problem] = ()) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(f"{source}: {detail}")

    @classmethod
    def invalid(
        cls, source: str, problems: Sequence[Problem], advice: str, lead: str = ""
    ) -> QuantParamsError:
        count = f"1 of {len(problems)} problems; " if len(problems) > 1 else ""
        return cls(source, f"{lead}{problems[0]} ({count}{advice})", problems)


def json_path(path: Iterable[PathPart]) -> str:
    """`$.tensors["conv1.weight"].zero_point[3]`: keys that are not identifiers are quoted, so unambiguous."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part):
            text += f".{part}"
        else:
            text += f"[{json.dumps(part, ensure_ascii=False)}]"
    return text


def _problem(path: JsonPath, message: str) -> Problem:
    return Problem(json_path(path), message, path)


# -- writing -------------------------------------------------------------------------------------------


def dump(doc: Doc) -> str:
    """The document as text: indent 2, keys in the order given, lists of scalars on one line, floats as
    Python's repr (the shortest text that reads back to the same float), a final newline."""
    problems = _unique(_json_value_problems(doc, ()))
    if problems:
        raise QuantParamsError.invalid("<document>", problems, "convert the value to plain JSON data")
    return _encode(doc, 0) + "\n"


def _encode(value: Any, depth: int) -> str:
    inner = _INDENT * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{_scalar(key)}: {_encode(item, depth + 1)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + _INDENT * depth + "}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        items = [inner + _encode(item, depth + 1) for item in value]
        return "[\n" + ",\n".join(items) + "\n" + _INDENT * depth + "]"
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def write(path: str | os.PathLike[str], doc: Doc) -> None:
    """Validate `doc` and write it atomically: the file is either the old one or the complete new one."""
    target = Path(path)
    problems = validate(doc)
    if problems:
        raise QuantParamsError.invalid(str(target), problems, _WRITE_ADVICE, "not written: ")
    write_atomically(target, dump(doc).encode("utf-8"))


def write_atomically(target: Path, data: bytes) -> None:
    """Replace `target` with `data` in one rename: readers see the old file or the whole new one."""
    # A temp file in the same folder, so os.replace is a rename within one filesystem (atomic).
    temp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise _write_error(target, exc) from exc
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())  # the data is on disk before the rename makes it the file
        if target.exists():
            os.chmod(temp, stat.S_IMODE(target.stat().st_mode))  # keep the old file's permissions
        os.replace(temp, target)
    except BaseException as exc:
        temp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _write_error(target, exc) from exc
        raise


def _write_error(target: Path, exc: OSError) -> QuantParamsError:
    return QuantParamsError(
        str(target), f"cannot write: {exc.strerror or exc}; check that the folder exists and is writable"
    )


# -- reading -------------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str]) -> Doc:
    """Read, parse and validate a quant-params file; any problem raises one QuantParamsError."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise QuantParamsError(source, f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")  # tolerate the BOM some Windows editors add
    except UnicodeDecodeError as exc:
        raise QuantParamsError(
            source, f"not UTF-8 text (at byte offset {exc.start}); save it as UTF-8"
        ) from exc
    return loads(text, source)


def loads(text: str, source: str = "<string>") -> Doc:
    """Parse and validate a document held in memory (an editor buffer); `source` names it in messages."""
    doc = _parse(text, source)
    problems = validate(doc)
    if problems:
        raise QuantParamsError.invalid(source, problems, _LOAD_ADVICE)
    result: Doc = doc
    return result


def _parse(text: str, source: str) -> Any:
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                duplicates.append(key)
            obj[key] = value
        return obj

    try:
        doc = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise QuantParamsError(source, f"{where}: invalid JSON: {exc.msg}; fix the syntax there") from exc
    if duplicates:
        # json keeps the last of two equal keys: a merge that duplicated a tensor would silently lose one.
        raise QuantParamsError(
            source,
            f"duplicate key {json.dumps(duplicates[0])}: JSON keeps only the last; merge or rename them",
        )
    return doc


# -- validation ----------------------------------------------------------------------------------------


def validate(doc: Any) -> list[Problem]:
    """Every problem of the first failing stage (JSON data, schema, semantics), in document order."""
    stages: tuple[Callable[[Any], Iterable[Problem]], ...] = (
        lambda d: _json_value_problems(d, ()),
        _schema_problems,
        _semantic_problems,
    )
    for stage in stages:
        problems = _unique(stage(doc))
        if problems:
            return sorted(problems, key=lambda p: _document_order(doc, p.path))
    return []


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def _document_order(doc: Any, path: JsonPath) -> tuple[int, ...]:
    key: list[int] = []
    node = doc
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            keys = list(node)
            key.append(keys.index(part) if part in node else len(keys))
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            key.append(part)
            node = node[part]
        else:
            break
    return tuple(key)


def _json_value_problems(value: Any, path: JsonPath) -> Iterator[Problem]:
    """Values JSON cannot hold, or that would not read back equal (tuples, numpy scalars, NaN)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield from _json_value_problems(item, (*path, key))
            else:
                yield _problem(path, f"keys must be strings, got {type(key).__name__} {key!r}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_value_problems(item, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        yield _problem(path, f"must be a finite number, got {_got(value)}")
    elif value is not None and not isinstance(value, (str, int, float)):
        yield _problem(
            path,
            f"must be plain JSON data (dict, list, str, int, float, bool, None), got {type(value).__name__} "
            f"{value!r}; convert numpy values with .tolist() and tuples with list()",
        )


# -- schema stage --------------------------------------------------------------------------------------


@cache
def schema() -> Doc:
    """The JSON Schema of the format, as shipped in the package."""
    text = resources.files("quantcore").joinpath(*SCHEMA_RESOURCE).read_text(encoding="utf-8")
    loaded: Doc = json.loads(text)
    return loaded


@cache
def _validator() -> Any:
    base = jsonschema.Draft7Validator
    # JSON Schema counts 1.0 as an integer; codegen writes integers into C arrays, so require true ints.
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return jsonschema.validators.extend(base, type_checker=checker)(schema())


def _schema_problems(doc: Any) -> Iterator[Problem]:
    for error in _validator().iter_errors(doc):
        while error.context:  # anyOf / oneOf: the branch that came closest
            error = jsonschema.exceptions.best_match(error.context)
        yield from _from_schema_error(error)


def _from_schema_error(error: Any) -> list[Problem]:
    path: JsonPath = tuple(error.absolute_path)
    keyword, value, where = error.validator, error.validator_value, error.schema
    if keyword == "required":
        missing = [json.dumps(name) for name in value if name not in error.instance]
        noun = "property" if len(missing) == 1 else "properties"
        return [_problem(path, f"missing required {noun} {', '.join(missing)}")]
    if keyword == "additionalProperties":
        allowed = list(where.get("properties", {}))
        extra = [key for key in error.instance if key not in allowed]
        return [_problem((*path, key), _unknown_property(key, allowed)) for key in extra]
    text = where.get("errorMessage") or _keyword_message(keyword, value, where)
    return [_problem(path, f"{text}, got {_got(error.instance)}")]


def _unknown_property(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=_CLOSE)
    if close:
        hint = f"did you mean {json.dumps(close[0])}?"
    else:
        hint = "allowed here: " + ", ".join(allowed) if allowed else "this object takes no properties"
    return f"unknown property {json.dumps(key)} ({hint})"


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
    "boolean": "true or false",
    "null": "null",
}


def _keyword_message(keyword: str, value: Any, where: Doc) -> str:
    if keyword in ("minimum", "maximum") and {"minimum", "maximum"} <= where.keys():
        return f"must be in [{where['minimum']}, {where['maximum']}]"
    if keyword in ("minItems", "maxItems") and where.get("minItems") == where.get("maxItems"):
        return f"must have exactly {value} item{'s' if value != 1 else ''}"
    messages: dict[str, Callable[[], str]] = {
        "type": lambda: (
            "must be " + " or ".join(_TYPE_NAMES[t] for t in ([value] if isinstance(value, str) else value))
        ),
        "enum": lambda: "must be one of " + ", ".join(json.dumps(v) for v in value),
        "const": lambda: f"must be {json.dumps(value)}",
        "minimum": lambda: f"must be >= {value}",
        "maximum": lambda: f"must be <= {value}",
        "exclusiveMinimum": lambda: f"must be > {value}",
        "minItems": lambda: f"must have at least {value} item{'s' if value != 1 else ''}",
        "maxItems": lambda: f"must have at most {value} item{'s' if value != 1 else ''}",
        "minLength": lambda: "must not be empty",
        "minProperties": lambda: "must not be empty",
        "uniqueItems": lambda: "must not repeat a value",
        "pattern": lambda: f"must match {value}",
    }
    return messages[keyword]() if keyword in messages else f"fails the schema's {keyword!r} rule"


def _got(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return "an object" if value else "{}"
    if isinstance(value, list) and (len(value) > 4 or any(isinstance(v, (dict, list)) for v in value)):
        return f"an array of {len(value)} items"
    return _scalar(value)


# -- semantic stage: what the schema cannot express ----------------------------------------------------


def _semantic_problems(doc: Doc) -> Iterator[Problem]:
    yield from _check_tensors(doc)
    yield from _check_model(doc)
    yield from _check_layers(doc)
    yield from _check_calibration(doc)


def _check_tensors(doc: Doc) -> Iterator[Problem]:
    per_tensor = doc["scheme"]["weights"] == "per-tensor"
    for name, tensor in doc["tensors"].items():
        at: JsonPath = ("tensors", name)
        if tensor["kind"] != "activation":
            yield from _check_channels(tensor, at)
        if tensor["kind"] == "weight" and per_tensor and isinstance(tensor["scale"], list):
            yield _problem((*at, "scale"), 'must be one number: scheme.weights is "per-tensor", got a list')
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
            yield _problem((*at, "axis"), "only per-channel weights (a list of scales) have an axis")
        channels, along = 1, ""
    elif "axis" not in tensor:
        yield _problem(at, 'missing required property "axis" (the channel axis of per-channel weights)')
        return
    elif tensor["axis"] >= len(shape):
        yield _problem(
            (*at, "axis"), f"must be < {len(shape)}, the rank of shape {shape}, got {tensor['axis']}"
        )
        return
    else:
        channels, along = shape[tensor["axis"]], f"axis {tensor['axis']} of shape {shape}"
    for sub, value in _channel_fields(tensor):
        if isinstance(value, list) != per_channel:
            form = "a list, like scale" if per_channel else "one number, like scale"
            yield _problem((*at, *sub), f"must be {form}, got {_got(value)}")
        elif per_channel and len(value) != channels:
            yield _problem(
                (*at, *sub), f"must have {channels} entries, one per channel of {along}, got {len(value)}"
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
            yield _problem(where, f"must be <= max ({high}), got {low}")


def _check_model(doc: Doc) -> Iterator[Problem]:
    for side in ("inputs", "outputs"):
        for index, entry in enumerate(doc["model"][side]):
            at: JsonPath = ("model", side, index)
            found = _reference(doc, entry["name"], "activation", (*at, "name"))
            if isinstance(found, Problem):
                yield found
            elif found["shape"] != entry["shape"]:
                yield _problem(
                    (*at, "shape"),
                    f"must equal the shape of tensor {json.dumps(entry['name'])}, {found['shape']}",
                )


def _reference(doc: Doc, name: str, kind: str, at: JsonPath) -> Doc | Problem:
    """The tensor a layer or the model names, or the problem with that name."""
    tensor: Doc | None = doc["tensors"].get(name)
    if tensor is None:
        close = difflib.get_close_matches(name, list(doc["tensors"]), n=1, cutoff=_CLOSE)
        hint = f" (did you mean {json.dumps(close[0])}?)" if close else ""
        return _problem(at, f"no tensor named {json.dumps(name)} in $.tensors{hint}")
    if tensor["kind"] != kind:
        return _problem(
            at, f"must name {_article(kind)} tensor; {json.dumps(name)} is {_article(tensor['kind'])}"
        )
    return tensor


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _check_layers(doc: Doc) -> Iterator[Problem]:
    first_index: dict[str, int] = {}
    for index, layer in enumerate(doc["layers"]):
        at: JsonPath = ("layers", index)
        name = layer["name"]
        if name in first_index:
            yield _problem(
                (*at, "name"),
                f"duplicate layer name {json.dumps(name)}, also at $.layers[{first_index[name]}]",
            )
        first_index.setdefault(name, index)
        refs = [p for p in _layer_references(doc, layer, at) if isinstance(p, Problem)]
        yield from refs
        if not refs:
            yield from _check_layer_params(doc, layer, at)


def _layer_references(doc: Doc, layer: Doc, at: JsonPath) -> Iterator[Doc | Problem]:
    for side in ("inputs", "outputs"):
        for index, name in enumerate(layer[side]):
            yield _reference(doc, name, "activation", (*at, side, index))
    for key, kind in (("weights", "weight"), ("bias", "bias")):
        if key in layer:
            yield _reference(doc, layer[key], kind, (*at, key))


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
        yield _problem(
            ("tensors", layer["bias"], "dtype"),
            f'must be "int32": int64 biases are for int16 layers, layer {json.dumps(layer["name"])} '
            f"has {input_dtype} input",
        )
    if layer["op"] == "softmax" and input_dtype == "int8" and "diff_min" not in params:
        yield _problem(at_params, 'missing required property "diff_min" (the int8 softmax kernels need it)')


def _check_clamp(params: Doc, at: JsonPath, output_name: str, dtype: str) -> Iterator[Problem]:
    low, high = _DTYPE_RANGE[dtype]
    for key in ("act_min", "act_max"):
        if not low <= params[key] <= high:
            yield _problem(
                (*at, key),
                f"must be in [{low}, {high}] for {dtype} output {json.dumps(output_name)}, got {params[key]}",
            )
    if params["act_min"] > params["act_max"]:
        yield _problem((*at, "act_min"), f"must be <= act_max ({params['act_max']}), got {params['act_min']}")


def _check_layer_channels(doc: Doc, layer: Doc, at: JsonPath, output_name: str) -> Iterator[Problem]:
    """Multipliers, shifts, bias and per-channel weights: one entry per output channel (NHWC: last dim)."""
    tensors = doc["tensors"]
    channels = tensors[output_name]["shape"][-1]
    of_output = f"one per channel of output {json.dumps(output_name)}"
    params = layer["params"]
    if isinstance(params["multiplier"], list) != isinstance(params["shift"], list):
        form = (
            "a list, like multiplier"
            if isinstance(params["multiplier"], list)
            else "one integer, like multiplier"
        )
        yield _problem((*at, "params", "shift"), f"must be {form}, got {_got(params['shift'])}")
    for key in ("multiplier", "shift"):
        if isinstance(params[key], list) and len(params[key]) != channels:
            yield _problem(
                (*at, "params", key), f"must have {channels} entries, {of_output}, got {len(params[key])}"
            )
    weights = tensors[layer["weights"]]
    axis = weights.get("axis")
    if isinstance(weights["scale"], list) and axis is not None and axis < len(weights["shape"]):
        count = weights["shape"][axis]
        if count != channels:
            yield _problem(
                (*at, "weights"),
                f"has {count} channels on axis {axis}, but output {json.dumps(output_name)} has {channels}",
            )
    if "bias" in layer and tensors[layer["bias"]]["shape"][0] != channels:
        count = tensors[layer["bias"]]["shape"][0]
        yield _problem(
            (*at, "bias"),
            f"has {count} entries, but the output {json.dumps(output_name)} has {channels} channels",
        )


def _check_calibration(doc: Doc) -> Iterator[Problem]:
    calibration = doc["calibration"]
    per_layer = calibration.get("per_layer", {})
    layer_names = {layer["name"] for layer in doc["layers"]}
    for name in per_layer:
        if name not in layer_names:
            yield _problem(
                ("calibration", "per_layer", name), f"no layer named {json.dumps(name)} in $.layers"
            )
    uses_percentile = "percentile" in (calibration["method"], *per_layer.values())
    if uses_percentile and "percentile" not in calibration:
        yield _problem(
            ("calibration",), 'missing required property "percentile" (a layer uses method "percentile")'
        )
    if not uses_percentile and "percentile" in calibration:
        yield _problem(("calibration", "percentile"), 'is only used by method "percentile": remove it')
