"""The validator of params files checks against the schema with its definitions inlined: the same
errors - instance path, keyword, value, the schema node that failed - as the schema as shipped, whose
"$ref"s jsonschema would resolve at every value (half the time of validating a MobileNetV2's file).
Arrays of plain numbers and strings are checked by a shortcut (params_checks.scalar_check) that only
ever accepts: the same errors again, and the same acceptance as jsonschema on every item schema."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import numpy as np
import onnx
import pytest

from quantcore import pipeline
from quantcore.data import DataSet
from quantcore.quantize import params_checks
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path: Path = tmp_path_factory.mktemp("schema") / "small.onnx"
    onnx.save(small_cnn(seed=2), path)
    model = pipeline.load_model(path)
    data = DataSet(np.random.default_rng(0).uniform(0, 1, (32, 1, 16, 16)).astype(np.float32), None)
    loaded: dict[str, Any] = json.loads(json.dumps(pipeline.quantize(model, data).document))
    return loaded


def _as_shipped() -> Any:
    base = jsonschema.Draft7Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    return jsonschema.validators.extend(base, type_checker=checker)(params_checks.schema())


def _errors(validator: Any, doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each error's instance path, keyword, keyword value, message, and the schema node that failed
    (its own "$ref"s inlined, as the messages read its properties and errorMessage through them)."""
    found = [
        (
            tuple(e.absolute_path),
            e.validator,
            json.dumps(params_checks._inlined(e.validator_value, params_checks.schema())),
            json.dumps(params_checks._inlined(e.schema, params_checks.schema())),
            e.message,
        )
        for e in validator.iter_errors(doc)
    ]
    return sorted(found)


def _layer(doc: dict[str, Any]) -> dict[str, Any]:
    return next(layer for layer in doc["layers"] if "multiplier" in layer.get("params", {}))


def _weights(doc: dict[str, Any]) -> dict[str, Any]:
    """A tensor with one scale per channel (per-channel weights)."""
    return next(t for t in doc["tensors"].values() if isinstance(t.get("scale"), list))


BREAKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "multiplier over int32": lambda d: _layer(d)["params"]["multiplier"].__setitem__(0, 2**31),
    "shift not an integer": lambda d: _layer(d)["params"]["shift"].__setitem__(0, 1.5),
    "offset out of range": lambda d: _layer(d)["params"].__setitem__("input_offset", 300),
    "act bound a string": lambda d: _layer(d)["params"].__setitem__("act_min", "low"),
    "stride of three": lambda d: _layer(d)["params"].__setitem__("stride", [1, 1, 1]),
    "unknown tensor property": lambda d: next(iter(d["tensors"].values())).__setitem__("scal", 1.0),
    "layer without kernel": lambda d: _layer(d).pop("kernel"),
    "zero point a bool": lambda d: next(iter(d["tensors"].values())).__setitem__("zero_point", True),
    # In arrays of numbers (the shortcut's arrays): the last item, a middle one, several at once.
    "multiplier a bool in its list": lambda d: _layer(d)["params"]["multiplier"].__setitem__(-1, True),
    "multiplier a float in its list": lambda d: _layer(d)["params"]["multiplier"].__setitem__(1, 2.0**30),
    "shift under -31 in its list": lambda d: _layer(d)["params"]["shift"].__setitem__(-1, -32),
    "shifts out of range twice": lambda d: _layer(d)["params"].__setitem__("shift", [31, 0, -40]),
    "channel scale zero": lambda d: _weights(d)["scale"].__setitem__(1, 0.0),
    "channel scale a string": lambda d: _weights(d)["scale"].__setitem__(-1, "0.1"),
    "channel scale null": lambda d: _weights(d)["scale"].__setitem__(0, None),
    "channel scale over 1e30": lambda d: _weights(d)["scale"].__setitem__(0, 1e31),
    "stride item zero": lambda d: _layer(d)["params"].__setitem__("stride", [0, 1]),
    "output name empty": lambda d: d["layers"][0].__setitem__("outputs", [""]),
}


def test_no_reference_is_left() -> None:
    assert "$ref" not in json.dumps(params_checks._validator().schema)


@pytest.mark.parametrize("name", list(BREAKS))
def test_a_broken_document_gets_the_errors_the_schema_as_shipped_gives(
    document: dict[str, Any], name: str
) -> None:
    broken = copy.deepcopy(document)
    BREAKS[name](broken)
    expected = _errors(_as_shipped(), broken)
    assert expected  # the break is one the schema sees
    assert _errors(params_checks._validator(), broken) == expected


def test_a_valid_document_is_valid_for_both(document: dict[str, Any]) -> None:
    assert _errors(_as_shipped(), document) == _errors(params_checks._validator(), document) == []


def _item_schemas(node: Any) -> list[dict[str, Any]]:
    """Every object-valued "items" of the schema the validator holds (definitions inlined)."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("items"), dict):
            found.append(node["items"])
        for value in node.values():
            found += _item_schemas(value)
    elif isinstance(node, list):
        for value in node:
            found += _item_schemas(value)
    return found


VALUES: list[Any] = [0, 1, -1, 3, 31, -32, 2**31 - 1, 2**31, 1.5, 1.0, 0.0, -0.0, 1e-41, 1e-40, 1e30, 1e31,
          float("inf"), -float("inf"), True, False, None, "", "a", [], {}]  # fmt: skip


def test_the_shortcut_accepts_what_jsonschema_accepts_on_every_item_schema() -> None:
    validator = params_checks._validator()
    schemas = _item_schemas(validator.schema)
    checked = [(s, params_checks.scalar_check(s)) for s in schemas]
    shortcut = [(s, check) for s, check in checked if check is not None]
    assert len(shortcut) >= 8  # multipliers, shifts, scales, shapes, names, ...: the shortcut is used
    for item_schema, check in shortcut:
        assert check is not None
        for value in VALUES:
            valid = not list(validator.evolve(schema=item_schema).iter_errors(value))
            assert check(value) == valid, (item_schema, value)


def test_the_shortcut_never_accepts_nan_or_subclasses() -> None:
    """What jsonschema would decide otherwise (NaN passes its bounds, an int subclass its type) goes to
    jsonschema itself: the shortcut only accepts."""
    check = params_checks.scalar_check({"type": "number", "minimum": 0})
    assert check is not None
    assert not check(float("nan"))
    assert not check(np.float64(1.0))
    assert check(1.0) and check(0) and not check(-1)


def test_item_schemas_the_shortcut_does_not_know_get_none() -> None:
    assert params_checks.scalar_check({"type": "integer", "const": 0}) is None
    assert params_checks.scalar_check({"type": "object"}) is None
    assert params_checks.scalar_check({"type": ["number", "array"]}) is None
    assert params_checks.scalar_check({"minimum": 0}) is None  # no type: any value passes jsonschema
    assert params_checks.scalar_check({"type": "number", "minimum": "0"}) is None
