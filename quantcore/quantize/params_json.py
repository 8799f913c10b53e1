"""The quant-params JSON file: written readable and diffable, read back only if valid.

The format (version 1) is defined by quantcore/schema/quant-params.schema.json, which editors use too.
`validate` applies, in order: "is it JSON data at all" (no NaN, no numpy scalars, no tuples), the schema,
then the rules a schema cannot express: references between tensors and layers, list lengths that depend on
a shape, clamps that depend on a tensor's dtype, the kernels an op can use; and last, consistency: every
integer a kernel takes must follow from the scales and zero points recorded (quantcore.quantize.
consistency). A later stage runs only when the earlier ones pass, since it relies on the structure they
guarantee. Every Problem carries the JSON path of the value at fault, so the CLI can print it and the
language server can place it; problems come in document order.

The file may be hostile: it is read through quantcore.untrusted (a regular file under a size limit, never
a FIFO or a device), its nesting is measured before the parser recurses into it, names from it are
shortened and quoted in messages, and the model path it records must stay inside the folders the user
works in (`model_path`).
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import os
import re
import secrets
import stat
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from quantcore import display, limits, untrusted
from quantcore.errors import InputError, OutputError

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
_CONSISTENCY_ADVICE = ""  # each consistency problem says itself what to do

MAX_PROBLEMS = 1000
"""Problems collected per document: a broken file of 100,000 tensors is reported by its first
problems (and the count shown as "1000+"), not by a list that takes minutes to build and sort."""

MAX_VALUES = 1_000_000
"""JSON values (numbers, strings, arrays, objects) in one document: the schema stage costs 10-30
microseconds per value, so this bounds a file's validation to seconds, not the hour a 256 MB file would
take. MobileNetV2, large for a microcontroller (17,000 output channels, about 7 values each), needs
about 120,000."""

SUGGESTIONS = 50
"""Name suggestions ("did you mean ...?") searched per document: each compares a name with every
candidate, so a file with thousands of misspelled names costs a bounded time."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a document: where (`json_path`, and `path` as keys/indices) and what."""

    json_path: str
    message: str
    path: JsonPath = ()
    expected: int | float | None = field(default=None, compare=False)
    """The value that would be right, when one follows from the rest of the document (for quick fixes)."""

    def __str__(self) -> str:
        return f"{self.json_path}: {self.message}"

    @classmethod
    def at(cls, path: JsonPath, message: str, expected: int | float | None = None) -> Problem:
        return cls(json_path(path), message, path, expected)


class QuantParamsError(InputError):
    """A quant-params file that cannot be read, parsed, validated or written; `problems` lists all found."""

    def __init__(self, source: str, detail: str, problems: Sequence[Problem] = ()) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(f"{source}: {detail}")

    @classmethod
    def invalid(
        cls, source: str, problems: Sequence[Problem], advice: str, lead: str = ""
    ) -> QuantParamsError:
        many = f"{len(problems)}+" if len(problems) >= MAX_PROBLEMS else str(len(problems))
        count = f"1 of {many} problems" if len(problems) > 1 else ""
        note = "; ".join(part for part in (count, advice) if part)
        return cls(source, f"{lead}{problems[0]}" + (f" ({note})" if note else ""), problems)


class QuantParamsWriteError(QuantParamsError, OutputError):
    """The document is fine but its file cannot be written (a failure, exit status 1, not bad input)."""


def json_path(path: Iterable[PathPart]) -> str:
    """`$.tensors["conv1.weight"].zero_point[3]`: keys that are not identifiers are quoted, so unambiguous
    (long keys are shortened, as every name from a file is in messages)."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.match(part) and len(part) <= limits.NAME_MAX_CHARS:
            text += f".{part}"
        else:
            text += f"[{quoted(part)}]"
    return text


def quoted(name: Any) -> str:
    """A name from the file for a message: shortened to NAME_MAX_CHARS, in JSON quotes, with control,
    format and line-separator characters escaped, so a hostile name cannot forge a line or reorder text."""
    text = json.dumps(display.shorten(str(name)), ensure_ascii=False)
    return "".join(_visible(char) for char in text)


def _visible(char: str) -> str:
    if char.isascii() or unicodedata.category(char) not in _HIDDEN:
        return char
    return "".join(f"\\u{unit:04x}" for unit in _utf16(char))


def _utf16(char: str) -> list[int]:
    data = char.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories that print as nothing, break lines (U+2028) or reorder text (bidi controls)."""


def _problem(path: JsonPath, message: str) -> Problem:
    return Problem.at(path, message)


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
    return QuantParamsWriteError(
        str(target), f"cannot write: {exc.strerror or exc}; check that the folder exists and is writable"
    )


# -- reading -------------------------------------------------------------------------------------------


def load(
    path: str | os.PathLike[str],
    *,
    roots: Sequence[str | os.PathLike[str]] | None = None,
    warn: Callable[[str], None] | None = None,
) -> Doc:
    """Read, parse and validate a quant-params file; any problem raises one QuantParamsError.

    The model path the file records must lead inside one of `roots` (default: the current directory and
    the JSON's own folder; see `model_path`). Parameters a layer lists in "overrides" are not checked
    against the scales; `warn` (default: a line on stderr) is told about them in one line.
    """
    source = str(path)
    doc = loads(_read(path), source)
    model_path(doc, path, default_roots(path) if roots is None else roots)
    hand = _overrides_note(doc)
    if hand:
        (warn or _stderr)(f"{source}: warning: {hand}")
    return doc


def loads(text: str, source: str = "<string>") -> Doc:
    """Parse and validate a document held in memory (an editor buffer); `source` names it in messages."""
    doc = _parse(text, source)
    stage, problems = _first_failing_stage(doc, _STAGES)
    if problems:
        advice = _CONSISTENCY_ADVICE if stage == "consistency" else _LOAD_ADVICE
        raise QuantParamsError.invalid(source, problems, advice)
    result: Doc = doc
    return result


def _read(path: str | os.PathLike[str]) -> str:
    """The file's text: a regular file within JSON_MAX_BYTES (never a FIFO or device), UTF-8."""
    try:
        raw = untrusted.read_bytes(path, limit=limits.JSON_MAX_BYTES)
    except untrusted.UntrustedInputError as exc:
        raise QuantParamsError(str(path), exc.problem) from exc
    except OSError as exc:  # e.g. a directory, which opens but cannot be read
        raise QuantParamsError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8-sig")  # tolerate the BOM some Windows editors add
    except UnicodeDecodeError as exc:
        raise QuantParamsError(
            str(path), f"not UTF-8 text (at byte offset {exc.start}); save it as UTF-8"
        ) from exc


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _parse(text: str, source: str) -> Any:
    deep = untrusted.json_depth_problem(text)
    if deep is not None:
        # Python's parser would recurse once per level and crash with RecursionError far down.
        raise QuantParamsError(source, f"{deep}; a quant-params file nests 5 levels deep: this is not one")
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
    except ValueError as exc:  # an integer of more digits than Python converts (sys.int_info)
        raise QuantParamsError(
            source, f"invalid JSON: {exc}; no quant-params value has that many digits"
        ) from exc
    if duplicates:
        # json keeps the last of two equal keys: a merge that duplicated a tensor would silently lose one.
        raise QuantParamsError(
            source,
            f"duplicate key {quoted(duplicates[0])}: JSON keeps only the last; merge or rename them",
        )
    return doc


# -- the model the document records --------------------------------------------------------------------


def default_roots(params_file: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Where a recorded model may be, on the command line: the current directory or the JSON's folder."""
    return Path.cwd(), Path(params_file).parent


def model_path(
    doc: Any, params_file: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]
) -> Path:
    """The model file the document records ($.model.path), relative to the JSON's folder, resolved.

    Refused (QuantParamsError at $.model.path) when absolute, or when it leads - through "..", or a
    symlink - outside every folder of `roots`: a params file someone sent must not make Fixpoint read
    /etc/passwd as a model. Projects keep the model next to the JSON, or one level up (`../model.onnx`
    from build/), both inside the project the user works in. The file need not exist.
    """
    source = str(params_file)
    model = doc.get("model") if isinstance(doc, dict) else None
    recorded = model.get("path") if isinstance(model, dict) else None
    if not isinstance(recorded, str):
        raise QuantParamsError(source, "$.model.path: missing; it names the model the parameters belong to")
    at = f"$.model.path: {quoted(recorded)}"
    if "\0" in recorded or not recorded:
        raise QuantParamsError(
            source, f"{at} is not a file name; record the model's path relative to the JSON"
        )
    if os.path.isabs(recorded) or re.match(r"[A-Za-z]:|[\\/]", recorded):
        raise QuantParamsError(
            source,
            f"{at} is absolute; record the model's path relative to the JSON's folder (e.g. \"model.onnx\")",
        )
    candidate = Path(params_file).parent / recorded
    if not any(untrusted.is_inside(candidate, root) for root in roots):
        folders = " or ".join(quoted(root) for root in dict.fromkeys(os.path.realpath(r) for r in roots))
        raise QuantParamsError(
            source,
            f"{at} leads to {quoted(os.path.realpath(candidate))}, outside {folders}; keep the model in the"
            " project and record its path relative to the JSON",
        )
    return Path(os.path.realpath(candidate))


def recorded_model(
    params_file: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]] | None = None
) -> Path | None:
    """The model file a params JSON records, when it exists (`fixpoint generate`'s default --model).

    Read within the same limits as `load` (without validating the rest: that is load's job); None when
    the file records no usable path or the model is not there; QuantParamsError for an unreadable or
    hostile file or a path leading outside `roots` (default: the current directory and the JSON's folder).
    """
    doc = _parse(_read(params_file), str(params_file))
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        return None
    if not isinstance(doc["model"].get("path"), str):
        return None
    path = model_path(doc, params_file, default_roots(params_file) if roots is None else roots)
    return path if path.is_file() else None


def _overrides_note(doc: Doc) -> str:
    from quantcore.quantize import consistency

    hand = consistency.overrides(doc)
    if not hand:
        return ""
    listed = "; ".join(f"{json_path(path)} ({quoted(reason)})" for path, reason in hand[:3])
    more = f"; and {len(hand) - 3} more" if len(hand) > 3 else ""
    noun = "value was" if len(hand) == 1 else "values were"
    return f"{len(hand)} {noun} set by hand and not checked against the scales: {listed}{more}"


# -- validation ----------------------------------------------------------------------------------------

Stage = Callable[[Any, "_Suggest"], Iterable[Problem]]


def validate(doc: Any) -> list[Problem]:
    """Every problem of the first failing stage (JSON data, schema, semantics, consistency), in document
    order (at most MAX_PROBLEMS)."""
    return _first_failing_stage(doc, _STAGES)[1]


def validate_structure(doc: Any) -> list[Problem]:
    """`validate` without the consistency stage: what code walking the document relies on (the editor
    still reads a document whose numbers disagree, to place those problems and run its other rules)."""
    return _first_failing_stage(doc, _STAGES[:-1])[1]


def consistency_problems(doc: Doc) -> list[Problem]:
    """The consistency stage alone, for a document `validate_structure` passed."""
    return _first_failing_stage(doc, _STAGES[-1:])[1]


def _first_failing_stage(doc: Any, stages: Sequence[tuple[str, Stage]]) -> tuple[str, list[Problem]]:
    suggest = _Suggest(SUGGESTIONS)
    for name, stage in stages:
        problems = _unique(itertools.islice(stage(doc, suggest), MAX_PROBLEMS))
        if problems:
            order = _DocumentOrder(doc)
            return name, sorted(problems, key=lambda p: order.key(p.path))
    return "", []


def _consistency_stage(doc: Doc, _suggest: _Suggest) -> Iterable[Problem]:
    from quantcore.quantize import consistency  # it builds on this module's Problem

    return consistency.problems(doc)


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


class _DocumentOrder:
    """Sort keys for JSON paths: the position of each key in its object, index of each item."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.positions: dict[int, dict[str, int]] = {}  # per object (by id): key -> position, built once

    def key(self, path: JsonPath) -> tuple[int, ...]:
        key: list[int] = []
        node = self.doc
        for part in path:
            if isinstance(node, dict) and isinstance(part, str):
                positions = self.positions.get(id(node))
                if positions is None:
                    positions = self.positions[id(node)] = {k: i for i, k in enumerate(node)}
                key.append(positions.get(part, len(positions)))
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                key.append(part)
                node = node[part]
            else:
                break
        return tuple(key)


class _Suggest:
    """ "Did you mean" lookups (difflib), at most `budget` per document: each costs a comparison with
    every candidate name."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def close(self, name: str, candidates: Iterable[str]) -> str | None:
        if self.budget <= 0 or len(name) > limits.NAME_MAX_CHARS:
            return None
        self.budget -= 1
        short = [c for c in candidates if len(c) <= limits.NAME_MAX_CHARS]
        found = difflib.get_close_matches(name, short, n=1, cutoff=_CLOSE)
        return found[0] if found else None


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


def _schema_problems(doc: Any, suggest: _Suggest) -> Iterator[Problem]:
    for error in _validator().iter_errors(doc):
        while error.context:  # anyOf / oneOf: the branch that came closest
            error = jsonschema.exceptions.best_match(error.context)
        yield from _from_schema_error(error, suggest)


def _from_schema_error(error: Any, suggest: _Suggest) -> list[Problem]:
    path: JsonPath = tuple(error.absolute_path)
    keyword, value, where = error.validator, error.validator_value, error.schema
    if keyword == "required":
        missing = [quoted(name) for name in value if name not in error.instance]
        noun = "property" if len(missing) == 1 else "properties"
        return [_problem(path, f"missing required {noun} {', '.join(missing)}")]
    if keyword == "additionalProperties":
        allowed = list(where.get("properties", {}))
        extra = [key for key in error.instance if key not in allowed]
        return [_problem((*path, key), _unknown_property(key, allowed, suggest)) for key in extra]
    text = where.get("errorMessage") or _keyword_message(keyword, value, where)
    return [_problem(path, f"{text}, got {_got(error.instance)}")]


def _unknown_property(key: str, allowed: list[str], suggest: _Suggest) -> str:
    close = suggest.close(key, allowed)
    if close:
        hint = f"did you mean {quoted(close)}?"
    else:
        hint = "allowed here: " + ", ".join(allowed) if allowed else "this object takes no properties"
    return f"unknown property {quoted(key)} ({hint})"


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
    if isinstance(value, list):
        return "[" + ", ".join(_got(item) for item in value) + "]"
    if isinstance(value, str):
        return quoted(value)
    text = _scalar(value)
    # An integer of thousands of digits is shown by its size, not printed whole.
    return text if len(text) <= 40 else f"a number of {len(text)} digits"


# -- semantic stage: what the schema cannot express ----------------------------------------------------


def _semantic_problems(doc: Doc, suggest: _Suggest) -> Iterator[Problem]:
    yield from _check_tensors(doc)
    yield from _check_model(doc, suggest)
    yield from _check_layers(doc, suggest)
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


def _check_model(doc: Doc, suggest: _Suggest) -> Iterator[Problem]:
    for side in ("inputs", "outputs"):
        for index, entry in enumerate(doc["model"][side]):
            at: JsonPath = ("model", side, index)
            found = _reference(doc, entry["name"], "activation", (*at, "name"), suggest)
            if isinstance(found, Problem):
                yield found
            elif found["shape"] != entry["shape"]:
                yield _problem(
                    (*at, "shape"),
                    f"must equal the shape of tensor {quoted(entry['name'])}, {found['shape']}",
                )


def _reference(doc: Doc, name: str, kind: str, at: JsonPath, suggest: _Suggest) -> Doc | Problem:
    """The tensor a layer or the model names, or the problem with that name."""
    tensor: Doc | None = doc["tensors"].get(name)
    if tensor is None:
        close = suggest.close(name, doc["tensors"])
        hint = f" (did you mean {quoted(close)}?)" if close else ""
        return _problem(at, f"no tensor named {quoted(name)} in $.tensors{hint}")
    if tensor["kind"] != kind:
        return _problem(
            at, f"must name {_article(kind)} tensor; {quoted(name)} is {_article(tensor['kind'])}"
        )
    return tensor


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _check_layers(doc: Doc, suggest: _Suggest) -> Iterator[Problem]:
    from quantcore.quantize import consistency  # it builds on this module's Problem

    first_index: dict[str, int] = {}
    for index, layer in enumerate(doc["layers"]):
        at: JsonPath = ("layers", index)
        name = layer["name"]
        if name in first_index:
            yield _problem(
                (*at, "name"),
                f"duplicate layer name {quoted(name)}, also at $.layers[{first_index[name]}]",
            )
        first_index.setdefault(name, index)
        refs = [p for p in _layer_references(doc, layer, at, suggest) if isinstance(p, Problem)]
        yield from refs
        if not refs:
            yield from _check_layer_params(doc, layer, at)
            yield from consistency.kernel_problems(doc, layer, at)


def _layer_references(doc: Doc, layer: Doc, at: JsonPath, suggest: _Suggest) -> Iterator[Doc | Problem]:
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
        yield _problem(
            ("tensors", layer["bias"], "dtype"),
            f'must be "int32": int64 biases are for int16 layers, layer {quoted(layer["name"])} '
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
                f"must be in [{low}, {high}] for {dtype} output {quoted(output_name)}, got {params[key]}",
            )
    if params["act_min"] > params["act_max"]:
        yield _problem((*at, "act_min"), f"must be <= act_max ({params['act_max']}), got {params['act_min']}")


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
                f"has {count} channels on axis {axis}, but output {quoted(output_name)} has {channels}",
            )
    if "bias" in layer and tensors[layer["bias"]]["shape"][0] != channels:
        count = tensors[layer["bias"]]["shape"][0]
        yield _problem(
            (*at, "bias"),
            f"has {count} entries, but the output {quoted(output_name)} has {channels} channels",
        )


def _check_calibration(doc: Doc) -> Iterator[Problem]:
    calibration = doc["calibration"]
    per_layer = calibration.get("per_layer", {})
    layer_names = {layer["name"] for layer in doc["layers"]}
    for name in per_layer:
        if name not in layer_names:
            yield _problem(("calibration", "per_layer", name), f"no layer named {quoted(name)} in $.layers")
    uses_percentile = "percentile" in (calibration["method"], *per_layer.values())
    if uses_percentile and "percentile" not in calibration:
        yield _problem(
            ("calibration",), 'missing required property "percentile" (a layer uses method "percentile")'
        )
    if not uses_percentile and "percentile" in calibration:
        yield _problem(("calibration", "percentile"), 'is only used by method "percentile": remove it')


def _json_stage(doc: Any, _suggest: _Suggest) -> Iterable[Problem]:
    too_big = _size_problem(doc)
    return [too_big] if too_big is not None else _json_value_problems(doc, ())


def _size_problem(doc: Any) -> Problem | None:
    """More than MAX_VALUES values, counted without recursion (and without counting them all)."""
    count, stack = 0, [doc]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return _problem((), f"holds more than {MAX_VALUES:,} values, more than any model's parameters")
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


_STAGES: tuple[tuple[str, Stage], ...] = (
    ("json", _json_stage),
    ("schema", _schema_problems),
    ("semantic", _semantic_problems),
    ("consistency", _consistency_stage),
)
"""The validation stages in order; each relies on the structure the ones before it guarantee."""
