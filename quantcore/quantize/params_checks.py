"""The validation of a quant-params document: its stages, in order, and the limits of what they do.

`validate` applies, in order: "is it JSON data at all" (no NaN, no numpy scalars, no tuples, and not more
values than any model needs), the schema (quantcore/schema/quant-params.schema.json, which editors use
too), the semantic rules a schema cannot express (quantcore.quantize.params_semantics), and last,
consistency: every integer a kernel takes must follow from the scales and zero points recorded
(quantcore.quantize.consistency). A later stage runs only when the earlier ones pass, since it relies on
the structure they guarantee. Every Problem carries the JSON path of the value at fault, so the CLI can
print it and the language server can place it; problems come in document order.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from importlib import resources
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from quantcore.quantize import consistency, params_semantics
from quantcore.quantize.params_problems import Doc, JsonPath, Problem, Suggest, got, quoted

SCHEMA_RESOURCE = ("schema", "quant-params.schema.json")

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

Stage = Callable[[Any, Suggest], Iterable[Problem]]


def validate(doc: Any) -> list[Problem]:
    """Every problem of the first failing stage (JSON data, schema, semantics, consistency), in document
    order (at most MAX_PROBLEMS)."""
    return first_failing_stage(doc)[1]


def validate_structure(doc: Any) -> list[Problem]:
    """`validate` without the consistency stage: what code walking the document relies on (the editor
    still reads a document whose numbers disagree, to place those problems and run its other rules)."""
    return first_failing_stage(doc, STAGES[:-1])[1]


def consistency_problems(doc: Doc) -> list[Problem]:
    """The consistency stage alone, for a document `validate_structure` passed."""
    return first_failing_stage(doc, STAGES[-1:])[1]


def json_data_problems(doc: Any) -> list[Problem]:
    """Values JSON cannot hold, or that would not read back equal (what `dump` refuses to write)."""
    return _unique(_json_value_problems(doc, ()))


def first_failing_stage(
    doc: Any, stages: Sequence[tuple[str, Stage]] | None = None
) -> tuple[str, list[Problem]]:
    """The name of the first of `stages` (default: all, in order) that finds problems, and its problems in
    document order; ("", []) for a document that passes them all."""
    suggest = Suggest(SUGGESTIONS)
    for name, stage in STAGES if stages is None else stages:
        problems = _unique(itertools.islice(stage(doc, suggest), MAX_PROBLEMS))
        if problems:
            order = _DocumentOrder(doc)
            return name, sorted(problems, key=lambda p: order.key(p.path))
    return "", []


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


# -- JSON data stage -----------------------------------------------------------------------------------


def _json_stage(doc: Any, _suggest: Suggest) -> Iterable[Problem]:
    too_big = _size_problem(doc)
    return [too_big] if too_big is not None else _json_value_problems(doc, ())


def _size_problem(doc: Any) -> Problem | None:
    """More than MAX_VALUES values, counted without recursion (and without counting them all)."""
    count, stack = 0, [doc]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return Problem.at((), f"holds more than {MAX_VALUES:,} values, more than any model's parameters")
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _json_value_problems(value: Any, path: JsonPath) -> Iterator[Problem]:
    """Values JSON cannot hold, or that would not read back equal (tuples, numpy scalars, NaN)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield from _json_value_problems(item, (*path, key))
            else:
                yield Problem.at(path, f"keys must be strings, got {type(key).__name__} {key!r}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_value_problems(item, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        yield Problem.at(path, f"must be a finite number, got {got(value)}")
    elif value is not None and not isinstance(value, (str, int, float)):
        yield Problem.at(
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
    items = _ScalarItems(base.VALIDATORS["items"])
    validator = jsonschema.validators.extend(base, {"items": items}, type_checker=checker)
    return validator(_inlined(schema(), schema()))


class _ScalarItems:
    """Draft 7's "items" keyword, with a shortcut for the arrays of plain numbers (and strings) that make
    most of a params file (multipliers, shifts, scales, bias corrections: 9,900 of MobileNetV2's 11,200
    values): when the item schema holds only type and bound keywords, each item is checked by a
    comparison here instead of a validator call per value (MobileNetV2's schema stage: 0.08 -> 0.02 s).
    The shortcut only ever accepts: any item it does not pass on sight sends the whole array through
    jsonschema's own keyword, so a broken array gets exactly jsonschema's errors, in its order."""

    def __init__(self, full: Callable[..., Iterator[Any]]) -> None:
        self.full = full
        self.checks: dict[int, tuple[Any, Callable[[Any], bool] | None]] = {}
        """Per item schema (by id, the schema kept alive beside its check): the check, None when the
        schema has a keyword the shortcut does not know."""

    def __call__(self, validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if type(instance) is list and type(items) is dict:
            check = self._check(items)
            if check is not None and all(map(check, instance)):
                return
        yield from self.full(validator, items, instance, schema)

    def _check(self, items: dict[str, Any]) -> Callable[[Any], bool] | None:
        known = self.checks.get(id(items))
        if known is None:
            known = self.checks[id(items)] = (items, scalar_check(items))
        return known[1]


_SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}
"""The Python types each JSON type certainly holds (exact types: bool is not an int here, nor a number,
as in the validator's type checker)."""
_ANNOTATIONS = frozenset({"description", "errorMessage", "title", "$comment"})
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength"})


def scalar_check(item_schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A predicate that accepts a value only where `item_schema` (Draft 7, refs inlined) accepts it,
    or None when the schema has anything but a scalar "type" and the bound keywords: the bounds apply
    to numbers (int or float), minLength to strings, as Draft 7 applies them."""
    if not item_schema.keys() - _ANNOTATIONS <= _BOUNDS | {"type"}:
        return None
    named = item_schema.get("type")
    names = [named] if isinstance(named, str) else named
    if not isinstance(names, list) or not names or not all(n in _SCALAR_TYPES for n in names):
        return None
    types = frozenset(t for n in names for t in _SCALAR_TYPES[n])
    bounds = {key: item_schema[key] for key in _BOUNDS if key in item_schema}
    numeric = [bounds[key] for key in _BOUNDS - {"minLength"} if key in bounds]
    if not all(type(b) in (int, float) for b in numeric) or type(bounds.get("minLength", 0)) is not int:
        return None
    low, high = bounds.get("minimum"), bounds.get("maximum")
    above, below = bounds.get("exclusiveMinimum"), bounds.get("exclusiveMaximum")
    min_length = bounds.get("minLength", 0)

    def check(value: Any) -> bool:
        kind = type(value)
        if kind not in types:
            return False
        if kind is int or kind is float:
            return (
                (low is None or value >= low)
                and (high is None or value <= high)
                and (above is None or value > above)
                and (below is None or value < below)
            )
        return kind is not str or len(value) >= min_length

    return check


def _inlined(node: Any, root: Doc) -> Any:
    """`node` with every "#/definitions/..." reference replaced by the definition itself (inlined in
    turn): the same schema for the validator (Draft 7 ignores a $ref's sibling keywords, so the node is
    the definition; its errors name the same schema and instance paths) without resolving a reference
    at each of the thousands of values a params file has - half the time of validating one."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFINITIONS):
            return _inlined(root["definitions"][ref[len(_DEFINITIONS) :]], root)
        return {key: _inlined(value, root) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(value, root) for value in node]
    return node


_DEFINITIONS = "#/definitions/"


def _schema_problems(doc: Any, suggest: Suggest) -> Iterator[Problem]:
    for error in _validator().iter_errors(doc):
        while error.context:  # anyOf / oneOf: the branch that came closest
            error = jsonschema.exceptions.best_match(error.context)
        yield from _from_schema_error(error, suggest)


def _from_schema_error(error: Any, suggest: Suggest) -> list[Problem]:
    path: JsonPath = tuple(error.absolute_path)
    keyword, value, where = error.validator, error.validator_value, error.schema
    if keyword == "required":
        missing = [quoted(name) for name in value if name not in error.instance]
        noun = "property" if len(missing) == 1 else "properties"
        return [Problem.at(path, f"missing required {noun} {', '.join(missing)}")]
    if keyword == "additionalProperties":
        allowed = list(where.get("properties", {}))
        extra = [key for key in error.instance if key not in allowed]
        return [Problem.at((*path, key), _unknown_property(key, allowed, suggest)) for key in extra]
    text = where.get("errorMessage") or _keyword_message(keyword, value, where)
    return [Problem.at(path, f"{text}, got {got(error.instance)}")]


def _unknown_property(key: str, allowed: list[str], suggest: Suggest) -> str:
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


def _consistency_stage(doc: Doc, _suggest: Suggest) -> Iterable[Problem]:
    return consistency.problems(doc)


STAGES: tuple[tuple[str, Stage], ...] = (
    ("json", _json_stage),
    ("schema", _schema_problems),
    ("semantic", params_semantics.problems),
    ("consistency", _consistency_stage),
)
"""The validation stages in order; each relies on the structure the ones before it guarantee."""
