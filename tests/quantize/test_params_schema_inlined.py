"""The validator of params files checks against the schema with its definitions inlined: the same
errors - instance path, keyword, value, the schema node that failed - as the schema as shipped, whose
"$ref"s jsonschema would resolve at every value (half the time of validating a MobileNetV2's file)."""

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


BREAKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "multiplier over int32": lambda d: _layer(d)["params"]["multiplier"].__setitem__(0, 2**31),
    "shift not an integer": lambda d: _layer(d)["params"]["shift"].__setitem__(0, 1.5),
    "offset out of range": lambda d: _layer(d)["params"].__setitem__("input_offset", 300),
    "act bound a string": lambda d: _layer(d)["params"].__setitem__("act_min", "low"),
    "stride of three": lambda d: _layer(d)["params"].__setitem__("stride", [1, 1, 1]),
    "unknown tensor property": lambda d: next(iter(d["tensors"].values())).__setitem__("scal", 1.0),
    "layer without kernel": lambda d: _layer(d).pop("kernel"),
    "zero point a bool": lambda d: next(iter(d["tensors"].values())).__setitem__("zero_point", True),
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
