"""The quant-params JSON format: exact round trips, atomic writes, and one exact message per rule."""

from __future__ import annotations

import copy
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from quantcore.kernels.requantize import Rounding
from quantcore.quantize import params_checks, params_json
from quantcore.quantize.params_json import (
    Problem,
    QuantParamsError,
    dump,
    json_path,
    load,
    loads,
    validate,
    write,
)
from quantcore.scheme.scaling import quantize_multiplier

SCHEMA_DIR = Path(params_json.__file__).parents[1] / "schema"
EXAMPLE = SCHEMA_DIR / "lenet.quant-params.example.json"
DELETE = object()


def example() -> dict[str, Any]:
    """The LeNet document shipped next to the schema (a fresh copy)."""
    doc: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return doc


def _act(shape: list[int], zero_point: int = -3, scale: float = 0.05) -> dict[str, Any]:
    return {"kind": "activation", "dtype": "int8", "scale": scale, "zero_point": zero_point, "shape": shape}


def _layer(name: str, op: str, kernel: str, inputs: list[str], output: str, **rest: Any) -> dict[str, Any]:
    return {"name": name, "op": op, "kernel": kernel, "inputs": inputs, "outputs": [output], **rest}


CLAMP = {"act_min": -128, "act_max": 127}


def every_op_doc() -> dict[str, Any]:
    """A small network using every op (and per-tensor fully-connected weights): each params schema in use."""
    doc = example()
    doc["model"]["inputs"] = [{"name": "x", "shape": [1, 8, 8, 4], "layout": "NHWC"}]
    doc["model"]["outputs"] = [{"name": "p", "shape": [1, 4], "layout": "NC"}]
    doc["calibration"] = {"method": "percentile", "percentile": 99.99, "samples": 500}
    doc["tensors"] = {
        "x": _act([1, 8, 8, 4]),
        "xp": _act([1, 10, 10, 4]),
        "dw.weight": {
            "kind": "weight",
            "dtype": "int8",
            "scale": [0.01, 0.02, 0.03, 0.04],
            "zero_point": [0, 0, 0, 0],
            "axis": 3,
            "shape": [1, 3, 3, 4],
        },
        "dw.bias": {
            "kind": "bias",
            "dtype": "int32",
            "scale": [5e-4, 1e-3, 1.5e-3, 2e-3],
            "zero_point": 0,
            "shape": [4],
        },
        **{name: _act([1, 8, 8, 4]) for name in ("d", "a", "s", "m")},
        "c": _act([1, 8, 8, 8]),
        "t": _act([1, 8, 8, 8]),
        "f": _act([1, 512]),
        "fc.weight": {"kind": "weight", "dtype": "int8", "scale": 0.002, "zero_point": 0, "shape": [4, 512]},
        "fc.bias": {"kind": "bias", "dtype": "int32", "scale": 1e-4, "zero_point": 0, "shape": [4]},
        "y": _act([1, 4]),
        "p": _act([1, 4], zero_point=-128, scale=0.00390625),
    }
    conv = {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1]}
    doc["layers"] = [
        _layer(
            "pad",
            "pad",
            "arm_pad_s8",
            ["x"],
            "xp",
            params={"pre_pad": [0, 1, 1, 0], "post_pad": [0, 1, 1, 0], "pad_value": -3},
        ),
        _layer(
            "dw",
            "depthwise_conv2d",
            "arm_depthwise_conv_wrapper_s8",
            ["xp"],
            "d",
            weights="dw.weight",
            bias="dw.bias",
            activation="relu6",
            params={
                "input_offset": 3,
                "output_offset": -3,
                "ch_mult": 1,
                "act_min": -3,
                "act_max": 117,
                **conv,
                "multiplier": [1374389535, 1374389535, 2061584302, 1374389535],
                "shift": [-6, -5, -5, -4],
            },
        ),
        _layer(
            "avg",
            "avg_pool",
            "arm_avgpool_s8",
            ["d"],
            "a",
            params={"kernel": [3, 3], "stride": [1, 1], "padding": [1, 1], **CLAMP},
        ),
        _layer(
            "add",
            "add",
            "arm_elementwise_add_s8",
            ["a", "x"],
            "s",
            activation="none",
            params={
                "input_1_offset": 3,
                "input_1_mult": 1073741824,
                "input_1_shift": 0,
                "input_2_offset": 3,
                "input_2_mult": 1073741824,
                "input_2_shift": 0,
                "left_shift": 20,
                "out_offset": -3,
                "out_mult": 1073741824,
                "out_shift": -18,
                **CLAMP,
            },
        ),
        _layer(
            "mul",
            "mul",
            "arm_elementwise_mul_s8",
            ["s", "x"],
            "m",
            params={
                "input_1_offset": 3,
                "input_2_offset": 3,
                "out_offset": -3,
                "out_mult": 1717986918,
                "out_shift": -4,
                **CLAMP,
            },
        ),
        _layer("cat", "concat", "arm_concatenation_s8_x", ["m", "s"], "c", params={"axis": 3}),
        _layer("tr", "transpose", "arm_transpose_s8", ["c"], "t", params={"perm": [0, 2, 1, 3]}),
        _layer("flat", "reshape", "arm_reshape_s8", ["t"], "f", params={}),
        _layer(
            "fc",
            "fully_connected",
            "arm_fully_connected_s8",
            ["f"],
            "y",
            weights="fc.weight",
            bias="fc.bias",
            params={
                "input_offset": 3,
                "filter_offset": 0,
                "output_offset": -3,
                "multiplier": 1099511628,
                "shift": -8,
                **CLAMP,
            },
        ),
        _layer(
            "softmax",
            "softmax",
            "arm_softmax_s8",
            ["y"],
            "p",
            params={"mult": 1717986918, "shift": 22, "diff_min": -496},
        ),
    ]
    return doc


def edited(doc: dict[str, Any], edits: dict[str, Any]) -> dict[str, Any]:
    """A copy of `doc` with each path ("tensors/conv1.weight/zero_point/3") set to its value, or DELETEd."""
    doc = copy.deepcopy(doc)
    for path, value in edits.items():
        *parents, last = (int(p) if p.isdigit() else p for p in path.split("/"))
        node = doc
        for part in parents:
            node = node[part]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return doc


def messages(doc: Any) -> list[str]:
    return [str(problem) for problem in validate(doc)]


# -- the example and the schema ------------------------------------------------------------------------


def test_the_example_document_is_valid() -> None:
    assert validate(example()) == []


def test_a_document_using_every_op_is_valid() -> None:
    assert validate(every_op_doc()) == []


def test_the_schema_is_a_valid_draft_07_schema() -> None:
    jsonschema.Draft7Validator.check_schema(params_checks.schema())
    assert params_checks.schema()["$schema"] == "http://json-schema.org/draft-07/schema#"
    identity = params_checks.schema()["properties"]
    assert (identity["format"]["const"], identity["version"]["const"]) == (
        params_json.FORMAT,
        params_json.VERSION,
    )


def _properties_without_description(node: Any, where: str = "#") -> list[str]:
    if isinstance(node, list):
        return [
            m for i, item in enumerate(node) for m in _properties_without_description(item, f"{where}/{i}")
        ]
    if not isinstance(node, dict):
        return []
    found = [
        f"{where}/properties/{name}"
        for name, sub in node.get("properties", {}).items()
        if isinstance(sub, dict)
        and "description" not in sub
        and where.split("/")[-1] not in ("if", "then", "else")
    ]
    for key, sub in node.items():
        found += _properties_without_description(sub, f"{where}/{key}")
    return found


def test_every_property_of_the_schema_has_a_description() -> None:
    # Editors show these on hover; conditions (if/then/else) only narrow properties described elsewhere.
    assert _properties_without_description(params_checks.schema()) == []


def test_the_example_numbers_follow_the_int8_scheme() -> None:
    """The example is the reference document for other tests: its integers follow from its scales."""
    doc = example()
    tensors = doc["tensors"]
    for layer in doc["layers"]:
        if layer["op"] not in ("conv2d", "fully_connected"):
            continue
        s_in = tensors[layer["inputs"][0]]["scale"]
        s_out = tensors[layer["outputs"][0]]["scale"]
        s_w = tensors[layer["weights"]]["scale"]
        pairs = [quantize_multiplier(s_in * s / s_out) for s in s_w]
        assert layer["params"]["multiplier"] == [m for m, _ in pairs]
        assert layer["params"]["shift"] == [s for _, s in pairs]
        assert tensors[layer["bias"]]["scale"] == [s_in * s for s in s_w]
        assert layer["params"]["input_offset"] == -tensors[layer["inputs"][0]]["zero_point"]
        assert layer["params"]["output_offset"] == tensors[layer["outputs"][0]]["zero_point"]
    assert Rounding(doc["scheme"]["rounding"]) is Rounding.DOUBLE


# -- dump, write, load ---------------------------------------------------------------------------------


def test_dump_is_indented_ordered_and_keeps_scalar_lists_on_one_line() -> None:
    doc = {"b": 1, "a": {"list": [1, 2.5, "x"], "empty": [], "obj": {}, "nested": [[1, 2], {"k": None}]}}
    assert dump(doc) == (
        "{\n"
        '  "b": 1,\n'
        '  "a": {\n'
        '    "list": [1, 2.5, "x"],\n'
        '    "empty": [],\n'
        '    "obj": {},\n'
        '    "nested": [\n'
        "      [1, 2],\n"
        "      {\n"
        '        "k": null\n'
        "      }\n"
        "    ]\n"
        "  }\n"
        "}\n"
    )


def test_the_example_file_is_exactly_what_dump_writes() -> None:
    # A golden file for the layout: a change to dump's formatting shows up here as a diff.
    assert dump(example()) == EXAMPLE.read_text(encoding="utf-8")


TRICKY_FLOATS = [0.1 + 0.2, 1 / 3, 5e-324, 2.0**-40, 1.7976931348623157e308, 123456789.12345679, 1e22, 1.0]


def test_write_then_load_gives_back_the_document_with_exact_floats(tmp_path: Path) -> None:
    # Observed ranges take any finite number (scales have a range, and multipliers follow from them).
    doc = edited(
        example(), {"tensors/conv1.weight/observed/max": TRICKY_FLOATS, "tensors/relu1/observed/min": -0.0}
    )
    path = tmp_path / "params.json"
    write(path, doc)
    loaded = load(path)
    assert loaded == doc
    highs = loaded["tensors"]["conv1.weight"]["observed"]["max"]
    assert [s.hex() for s in highs] == [s.hex() for s in TRICKY_FLOATS]  # bit for bit
    assert loaded["tensors"]["relu1"]["observed"]["min"].hex() == "-0x0.0p+0"  # the sign of zero too
    assert path.read_text(encoding="utf-8") == dump(doc)
    assert list(loaded["tensors"]) == list(doc["tensors"])  # key order kept


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_an_invalid_document_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "params.json"
    write(path, example())
    before = _listing(tmp_path)
    with pytest.raises(QuantParamsError) as caught:
        write(path, edited(example(), {"version": 2}))
    assert str(caught.value) == (
        f"{path}: not written: $.version: must be 1, the only version this Fixpoint reads, got 2 "
        "(nothing was written; the code that built the document must fix it)"
    )
    assert _listing(tmp_path) == before


def test_a_failing_rename_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "params.json"
    write(path, example())
    before = _listing(tmp_path)

    def replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(params_json.os, "replace", replace)
    with pytest.raises(QuantParamsError) as caught:
        write(path, every_op_doc())
    assert str(caught.value) == (
        f"{path}: cannot write: No space left on device; check that the folder exists and is writable"
    )
    assert _listing(tmp_path) == before


def test_an_interrupted_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "params.json"
    write(path, example())
    before = _listing(tmp_path)

    def fsync(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(params_json.os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        write(path, every_op_doc())
    assert _listing(tmp_path) == before


def test_write_into_a_missing_folder_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "params.json"
    with pytest.raises(
        QuantParamsError, match=r"cannot write: No such file or directory; check that the folder"
    ):
        write(path, example())


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_write_keeps_the_old_files_permissions_and_otherwise_follows_the_umask(tmp_path: Path) -> None:
    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.json"
    old_umask = os.umask(0o022)
    try:
        write(fresh, example())
        kept.write_text("{}")
        kept.chmod(0o640)
        write(kept, example())
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644  # not the 0o600 of a typical temp file
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640


def test_load_names_the_file_the_path_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "params.json"
    doc = edited(example(), {"tensors/conv1.weight/zero_point/3": 5})
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(QuantParamsError) as caught:
        load(path)
    assert str(caught.value) == (
        f'{path}: $.tensors["conv1.weight"].zero_point[3]: must be 0 for weights, got 5 '
        "(fix the file, or regenerate it with the quantizer)"
    )
    assert caught.value.problems == (
        Problem(
            '$.tensors["conv1.weight"].zero_point[3]',
            "must be 0 for weights, got 5",
            ("tensors", "conv1.weight", "zero_point", 3),
        ),
    )


def test_load_reports_the_first_problem_in_document_order_and_the_count(tmp_path: Path) -> None:
    doc = edited(
        example(), {"layers/0/params/shift/0": 31, "calibration/samples": 0, "tensors/relu1/zero_point": 128}
    )
    assert messages(doc) == [
        "$.calibration.samples: must be >= 1, got 0",
        "$.tensors.relu1.zero_point: must be in [-128, 127] for int8, got 128",
        "$.layers[0].params.shift[0]: must be in [-31, 30], got 31",
    ]
    with pytest.raises(QuantParamsError) as caught:
        loads(json.dumps(doc), "params.json")
    assert str(caught.value) == (
        "params.json: $.calibration.samples: must be >= 1, got 0 "
        "(1 of 3 problems; fix the file, or regenerate it with the quantizer)"
    )


def test_problems_come_in_document_order_whichever_check_finds_them() -> None:
    # Tensors are checked before the model, but the model comes first in the file, so it is reported first.
    doc = edited(example(), {"tensors/conv1.weight/scale": [0.01] * 7, "model/outputs/0/name": "prob"})
    assert messages(doc) == [
        '$.model.outputs[0].name: no tensor named "prob" in $.tensors (did you mean "probs"?)',
        '$.tensors["conv1.weight"].scale: must have 8 entries, one per channel of axis 0 of shape '
        "[8, 5, 5, 1], got 7",
    ]
    reordered = {key: doc[key] for key in ("layers", *(k for k in doc if k != "layers"))}
    assert messages(edited(reordered, {"layers/0/params/shift/0": 31, "tensors/relu1/zero_point": 128})) == [
        "$.layers[0].params.shift[0]: must be in [-31, 30], got 31",
        "$.tensors.relu1.zero_point: must be in [-128, 127] for int8, got 128",
    ]


def test_invalid_json_syntax_names_line_and_column() -> None:
    text = '{\n  "format": "fixpoint-quant-params",\n  "version": 1,\n}\n'
    with pytest.raises(QuantParamsError) as caught:
        loads(text, "params.json")
    assert str(caught.value) == (
        "params.json: line 4, column 1: invalid JSON: Expecting property name enclosed in double quotes; "
        "fix the syntax there"
    )


def test_a_duplicated_key_is_an_error_not_a_silent_overwrite() -> None:
    text = dump(example()).replace('"generator": "fixpoint 0.1.0",', '"generator": "a",\n  "generator": "b",')
    with pytest.raises(
        QuantParamsError, match=r'^params.json: duplicate key "generator": JSON keeps only the last'
    ):
        loads(text, "params.json")


def test_nan_in_the_file_is_reported_at_its_path() -> None:
    text = dump(example()).replace('"scale": 0.0125,', '"scale": NaN,', 1)
    with pytest.raises(QuantParamsError) as caught:
        loads(text, "params.json")
    assert [str(p) for p in caught.value.problems] == [
        "$.tensors.relu1.scale: must be a finite number, got NaN"
    ]


def test_unreadable_files_raise_the_same_error_type(tmp_path: Path) -> None:
    with pytest.raises(QuantParamsError, match=r"missing.json: cannot read: No such file or directory$"):
        load(tmp_path / "missing.json")
    (tmp_path / "latin1.json").write_bytes(b'{"generator": "caf\xe9"}')
    with pytest.raises(
        QuantParamsError, match=r"latin1.json: not UTF-8 text \(at byte offset 18\); save it as UTF-8$"
    ):
        load(tmp_path / "latin1.json")


def test_dump_refuses_values_that_would_not_read_back_equal() -> None:
    doc = edited(example(), {"tensors/input/shape": (1, 28, 28, 1), "tensors/input/scale": np.float32(0.5)})
    assert messages(doc) == [
        "$.tensors.input.scale: must be plain JSON data (dict, list, str, int, float, bool, None), got "
        "float32 np.float32(0.5); convert numpy values with .tolist() and tuples with list()",
        "$.tensors.input.shape: must be plain JSON data (dict, list, str, int, float, bool, None), got tuple "
        "(1, 28, 28, 1); convert numpy values with .tolist() and tuples with list()",
    ]
    with pytest.raises(
        QuantParamsError, match=r"^<document>: \$\.tensors\.input\.scale: must be plain JSON data"
    ):
        dump(doc)


def test_json_paths_quote_keys_that_are_not_identifiers() -> None:
    assert json_path(()) == "$"
    assert json_path(("tensors", "conv1.weight", "scale", 0)) == '$.tensors["conv1.weight"].scale[0]'
    assert json_path(("tensors", 'a"b', "x y", "_ok1")) == '$.tensors["a\\"b"]["x y"]._ok1'


# -- one rule at a time: (edits, the exact problems) ---------------------------------------------------


def case(name: str, edits: dict[str, Any], *expected: str) -> Any:
    """One rule broken: edits as {"tensors/conv1.weight/zero_point/3": value}, then the exact problems."""
    return pytest.param(edits, list(expected), id=name)


RULES = [
    case(
        "format",
        {"format": "other"},
        '$.format: must be "fixpoint-quant-params" (the mark of a Fixpoint quant-params file), got "other"',
    ),
    case("required", {"generator": DELETE}, '$: missing required property "generator"'),
    case(
        "unknown-top-level",
        {"extra": 1},
        (
            '$.extra: unknown property "extra" (allowed here: $schema, format, version, generator, model, '
            "scheme, calibration, transforms, mixed_precision, finetuned, tensors, layers)"
        ),
    ),
    case(
        "sha256",
        {"model/sha256": "ABC"},
        '$.model.sha256: must be the model file\'s SHA-256 as 64 lowercase hex digits, got "ABC"',
    ),
    case(
        "nhwc-rank",
        {"model/inputs/0/shape": [1, 28, 28]},
        "$.model.inputs[0].shape: an NHWC shape has 4 dimensions, got [1, 28, 28]",
    ),
    case(
        "model-output-exists",
        {"model/outputs/0/name": "prob"},
        '$.model.outputs[0].name: no tensor named "prob" in $.tensors (did you mean "probs"?)',
    ),
    case(
        "model-shape",
        {"model/outputs/0/shape": [1, 11]},
        '$.model.outputs[0].shape: must equal the shape of tensor "probs", [1, 10]',
    ),
    case(
        "rounding",
        {"scheme/rounding": "nearest"},
        '$.scheme.rounding: must be one of "double", "single", got "nearest"',
    ),
    case(
        "per-tensor-scheme",
        {"scheme/weights": "per-tensor"},
        '$.tensors["conv1.weight"].scale: must be one number: scheme.weights is "per-tensor", got a list',
        '$.tensors["conv2.weight"].scale: must be one number: scheme.weights is "per-tensor", got a list',
        '$.tensors["fc1.weight"].scale: must be one number: scheme.weights is "per-tensor", got a list',
    ),
    case(
        "percentile-required",
        {"calibration/method": "percentile"},
        '$.calibration: missing required property "percentile"',
    ),
    case(
        "percentile-required-per-layer",
        {"calibration/per_layer/conv2": "percentile"},
        '$.calibration: missing required property "percentile" (a layer uses method "percentile")',
    ),
    case(
        "fixed-is-a-tensor-method-only",
        {"calibration/method": "fixed"},
        '$.calibration.method: must be one of "minmax", "percentile", "entropy", "mse", "imported",'
        ' got "fixed"',
    ),
    case(
        "imported-means-no-samples",
        {"calibration/method": "imported"},
        "$.calibration.samples: must be 0, got 1000",
    ),
    case(
        "imported-is-not-a-layer-method",
        {"calibration/per_layer": {"conv1": "imported"}},
        '$.calibration.per_layer.conv1: must be one of "minmax", "percentile", "entropy", "mse",'
        ' got "imported"',
    ),
    case(
        "calibrated-means-samples", {"calibration/samples": 0}, "$.calibration.samples: must be >= 1, got 0"
    ),
    case(
        "percentile-unused",
        {"calibration/percentile": 99.9},
        '$.calibration.percentile: is only used by method "percentile": remove it',
    ),
    case(
        "per-layer-name",
        {"calibration/per_layer/conv9": "mse"},
        '$.calibration.per_layer.conv9: no layer or tensor named "conv9" in $.layers or $.tensors',
    ),
    case(
        "activation-dtype",
        {"tensors/input/dtype": "uint8"},
        '$.tensors.input.dtype: must be "int8" or "int16" for activations, got "uint8"',
    ),
    case(
        "int8-zero-point",
        {"tensors/relu1/zero_point": 128},
        "$.tensors.relu1.zero_point: must be in [-128, 127] for int8, got 128",
    ),
    case(
        "int16-zero-point",
        {"tensors/relu1/dtype": "int16"},
        (
            "$.tensors.relu1.zero_point: must be 0 for int16 activations (CMSIS-NN's s16 kernels are "
            "symmetric; -32768 only for the int16 output of arm_softmax_s8_s16), got -128"
        ),
    ),
    case(
        "integers-are-ints",
        {"tensors/relu1/zero_point": -128.0},
        "$.tensors.relu1.zero_point: must be an integer, got -128.0",
    ),
    case(
        "scale-positive",
        {"tensors/relu1/scale": 0.0},
        "$.tensors.relu1.scale: must be a positive number in [1e-40, 1e30], got 0.0",
    ),
    case(
        "scale-finite",
        {"tensors/relu1/scale": float("inf")},
        "$.tensors.relu1.scale: must be a finite number, got Infinity",
    ),
    case(
        "kind",
        {"tensors/relu1/kind": "act"},
        '$.tensors.relu1.kind: must be one of "activation", "weight", "bias", got "act"',
    ),
    case(
        "misspelled-property",
        {"tensors/relu1/zero_piont": 0},
        '$.tensors.relu1.zero_piont: unknown property "zero_piont" (did you mean "zero_point"?)',
    ),
    case(
        "range-order",
        {"tensors/relu1/range/min": 4.0},
        "$.tensors.relu1.range.min: must be <= max (3.1875), got 4.0",
    ),
    case(
        "weight-zero-point",
        {"tensors/conv1.weight/zero_point/3": 5},
        '$.tensors["conv1.weight"].zero_point[3]: must be 0 for weights, got 5',
    ),
    case(
        "weight-dtype",
        {"tensors/conv1.weight/dtype": "int16"},
        (
            '$.tensors["conv1.weight"].dtype: must be "int8" (every CMSIS-NN kernel, s8 and s16, takes int8 '
            'weights), got "int16"'
        ),
    ),
    case(
        "per-channel-length",
        {"tensors/conv1.weight/scale": [0.01] * 7},
        (
            '$.tensors["conv1.weight"].scale: must have 8 entries, one per channel of axis 0 of shape [8, 5, '
            "5, 1], got 7"
        ),
    ),
    case(
        "per-channel-form",
        {"tensors/conv1.weight/zero_point": 0},
        '$.tensors["conv1.weight"].zero_point: must be a list, like scale, got 0',
    ),
    case(
        "axis-required",
        {"tensors/conv1.weight/axis": DELETE},
        (
            '$.tensors["conv1.weight"]: missing required property "axis" (the channel axis of per-channel '
            "weights)"
        ),
    ),
    case(
        "axis-in-shape",
        {"tensors/conv1.weight/axis": 4},
        '$.tensors["conv1.weight"].axis: must be < 4, the rank of shape [8, 5, 5, 1], got 4',
    ),
    case(
        "observed-order",
        {"tensors/conv1.weight/observed/min/2": 0.5},
        '$.tensors["conv1.weight"].observed.min[2]: must be <= max (0.2993), got 0.5',
    ),
    case(
        "bias-dtype",
        {"tensors/conv1.bias/dtype": "int8"},
        '$.tensors["conv1.bias"].dtype: must be "int32", or "int64" for a layer with int16 input, got "int8"',
    ),
    case(
        "int64-bias-needs-int16",
        {"tensors/conv1.bias/dtype": "int64"},
        (
            '$.tensors["conv1.bias"].dtype: must be "int32": int64 biases are for int16 layers, layer '
            '"conv1" has int8 input'
        ),
    ),
    case(
        "bias-zero-point",
        {"tensors/conv1.bias/zero_point": 1},
        '$.tensors["conv1.bias"].zero_point: must be 0 for biases, got 1',
    ),
    case(
        "bias-length",
        {"tensors/conv1.bias/scale": [1e-05] * 9},
        '$.tensors["conv1.bias"].scale: must have 8 entries, one per channel of the bias shape [8], got 9',
    ),
    case(
        "layer-names-unique",
        {"layers/1/name": "conv1"},
        '$.layers[1].name: duplicate layer name "conv1", also at $.layers[0]',
    ),
    case(
        "op",
        {"layers/0/op": "conv3d"},
        (
            '$.layers[0].op: must be one of "conv2d", "depthwise_conv2d", "fully_connected", "avg_pool", '
            '"max_pool", "add", "mul", "softmax", "concat", "pad", "reshape", "transpose", "requantize", '
            '"svdf", "lstm", got "conv3d"'
        ),
    ),
    case(
        "kernel-name",
        {"layers/0/kernel": "convolve_s8"},
        (
            '$.layers[0].kernel: must be a CMSIS-NN function name such as "arm_convolve_wrapper_s8" '
            '(or fixpoint_requantize), got "convolve_s8"'
        ),
    ),
    case(
        "kernel-null-only-for-reshape",
        {"layers/0/kernel": None},
        "$.layers[0].kernel: must be a CMSIS-NN function name; only a reshape may have null (no call), "
        "got null",
    ),
    case(
        "input-exists",
        {"layers/1/inputs/0": "relu_1"},
        '$.layers[1].inputs[0]: no tensor named "relu_1" in $.tensors (did you mean "relu1"?)',
    ),
    case(
        "weights-kind",
        {"layers/0/weights": "conv1.bias"},
        '$.layers[0].weights: must name a weight tensor; "conv1.bias" is a bias',
    ),
    case(
        "one-output",
        {"layers/0/outputs": ["relu1", "pool1"]},
        '$.layers[0].outputs: must have exactly 1 item, got ["relu1", "pool1"]',
    ),
    case(
        "one-input",
        {"layers/0/inputs": ["input", "relu1"]},
        '$.layers[0].inputs: this op takes one input, got ["input", "relu1"]',
    ),
    case(
        "weights-required", {"layers/0/weights": DELETE}, '$.layers[0]: missing required property "weights"'
    ),
    case("bias-required", {"layers/0/bias": DELETE}, '$.layers[0]: missing required property "bias"'),
    case(
        "weights-not-allowed",
        {"layers/1/weights": "conv1.weight"},
        (
            "$.layers[1].weights: only conv2d, depthwise_conv2d and fully_connected layers take weights, got "
            '"conv1.weight"'
        ),
    ),
    case(
        "activation-not-allowed",
        {"layers/6/activation": "relu"},
        (
            "$.layers[6].activation: only layers with an act_min/act_max clamp take a fused activation, got "
            '"relu"'
        ),
    ),
    case(
        "multiplier-range",
        {"layers/0/params/multiplier/2": 2147483648},
        "$.layers[0].params.multiplier[2]: must be in [0, 2147483647], got 2147483648",
    ),
    case(
        "shift-range",
        {"layers/0/params/shift/0": 31},
        "$.layers[0].params.shift[0]: must be in [-31, 30], got 31",
    ),
    case(
        "shift-length",
        {"layers/0/params/shift": [-9] * 7},
        '$.layers[0].params.shift: must have 8 entries, one per channel of output "relu1", got 7',
    ),
    case(
        "pair",
        {"layers/0/params/stride": [1, 1, 1]},
        "$.layers[0].params.stride: must have exactly 2 items, got [1, 1, 1]",
    ),
    case(
        "act-order",
        {"layers/0/params/act_min": 10, "layers/0/params/act_max": 5},
        "$.layers[0].params.act_min: must be <= act_max (5), got 10",
    ),
    case(
        "act-in-output-dtype",
        {"layers/0/params/act_max": 200},
        '$.layers[0].params.act_max: must be in [-128, 127] for int8 output "relu1", got 200',
    ),
    case(
        "pool-params",
        {"layers/1/params/dilation": [1, 1]},
        (
            '$.layers[1].params.dilation: unknown property "dilation" (allowed here: kernel, stride, '
            "padding, act_min, act_max)"
        ),
    ),
    case(
        "softmax-params",
        {"layers/6/params/shift": DELETE},
        '$.layers[6].params: missing required property "shift"',
    ),
    case(
        "softmax-diff-min",
        {"layers/6/params/diff_min": DELETE},
        '$.layers[6].params: missing required property "diff_min" (the int8 softmax kernels need it)',
    ),
    case(
        "fc-forms-match",
        {"layers/5/params/multiplier": 1121161447},
        "$.layers[5].params.shift: must be one integer, like multiplier, got an array of 10 items",
    ),
    case(
        "reshape-params",
        {"layers/4/params": {"shape": [1, 400]}},
        '$.layers[4].params.shape: unknown property "shape" (this object takes no properties)',
    ),
    case(
        "bias-channels",
        {"layers/5/bias": "conv2.bias"},
        '$.layers[5].bias: has 16 entries, but the output "logits" has 10 channels',
    ),
]


@pytest.mark.parametrize(("edits", "expected"), RULES)
def test_each_rule(edits: dict[str, Any], expected: list[str]) -> None:
    assert messages(edited(example(), edits)) == expected


EVERY_OP_RULES = [
    case(
        "add-params",
        {"layers/3/params/input_1_shfit": 0},
        (
            '$.layers[3].params.input_1_shfit: unknown property "input_1_shfit" (did you mean '
            '"input_1_shift"?)'
        ),
    ),
    case(
        "add-shift",
        {"layers/3/params/out_shift": 1},
        "$.layers[3].params.out_shift: must be in [-31, 0], got 1",
    ),
    case(
        "add-two-inputs",
        {"layers/3/inputs": ["a"]},
        '$.layers[3].inputs: add and mul take two inputs, got ["a"]',
    ),
    case(
        "mul-params",
        {"layers/4/params/left_shift": 20},
        (
            '$.layers[4].params.left_shift: unknown property "left_shift" (allowed here: input_1_offset, '
            "input_2_offset, out_offset, out_mult, out_shift, act_min, act_max)"
        ),
    ),
    case(
        "input-offset",
        {"layers/4/params/input_1_offset": -128},
        "$.layers[4].params.input_1_offset: must be in [-127, 128], got -128",
    ),
    case(
        "depthwise-params", {"layers/1/params/ch_mult": 0}, "$.layers[1].params.ch_mult: must be >= 1, got 0"
    ),
    case(
        "depthwise-axis",
        {"tensors/dw.weight/scale": [0.01, 0.01, 0.01]},
        (
            '$.tensors["dw.weight"].scale: must have 4 entries, one per channel of axis 3 of shape [1, 3, 3, '
            "4], got 3"
        ),
    ),
    case(
        "per-tensor-no-axis",
        {"tensors/fc.weight/axis": 0},
        '$.tensors["fc.weight"].axis: only per-channel weights (a list of scales) have an axis',
    ),
    case(
        "fc-per-tensor-forms",
        {"layers/8/params/shift": [-5] * 4},
        "$.layers[8].params.shift: must be one integer, like multiplier, got [-5, -5, -5, -5]",
    ),
    case(
        "concat-inputs",
        {"layers/5/inputs": ["m"]},
        '$.layers[5].inputs: concat takes two or more inputs, got ["m"]',
    ),
    case(
        "transpose-perm",
        {"layers/6/params/perm": [0, 2, 2, 3]},
        "$.layers[6].params.perm: must not repeat a value, got [0, 2, 2, 3]",
    ),
    case(
        "pad-value",
        {"layers/0/params/pad_value": 128},
        "$.layers[0].params.pad_value: must be in [-128, 127], got 128",
    ),
    case(
        "softmax-mult",
        {"layers/9/params/mult": -1},
        "$.layers[9].params.mult: must be in [0, 2147483647], got -1",
    ),
]


@pytest.mark.parametrize(("edits", "expected"), EVERY_OP_RULES)
def test_each_op_rule(edits: dict[str, Any], expected: list[str]) -> None:
    assert messages(edited(every_op_doc(), edits)) == expected


def test_int16_layers_take_int64_biases_and_int16_clamps() -> None:
    doc = edited(
        example(),
        {
            "tensors/input/dtype": "int16",
            "tensors/relu1/dtype": "int16",
            "tensors/relu1/zero_point": 0,
            "tensors/conv1.bias/dtype": "int64",
            "layers/0/kernel": "arm_convolve_wrapper_s16",
            "layers/0/params/output_offset": 0,
            "layers/0/params/act_min": 0,
            "layers/0/params/act_max": 32767,
            "layers/1/inputs": ["relu1@int8"],
        },
    )
    # The int8 pool reads an int8 copy, converted as the quantizer converts (s_in / s_out = 1: 2^30, 1).
    doc["tensors"]["relu1@int8"] = {**doc["tensors"]["pool1"], "shape": [1, 28, 28, 8]}
    doc["layers"].insert(1, _layer(
        "relu1.to_int8", "requantize", "fixpoint_requantize", ["relu1"], "relu1@int8",
        params={"input_offset": 0, "output_offset": -128, "multiplier": 1 << 30, "shift": 1, **CLAMP},
    ))  # fmt: skip
    assert validate(doc) == []
    too_wide = edited(doc, {"layers/0/params/act_max": 32768})
    assert messages(too_wide) == ["$.layers[0].params.act_max: must be in [-32768, 32767], got 32768"]


def test_optional_forms_a_quantizer_may_write() -> None:
    # An aliasing reshape runs no kernel, a 2-D output has no layout, softmax fixes its output's range, and
    # an editor may be pointed at the schema from inside the file.
    doc = edited(
        example(),
        {
            "layers/4/kernel": None,
            "model/outputs/0/layout": DELETE,
            "tensors/probs/method": "fixed",
            "$schema": "./quant-params.schema.json",
        },
    )
    assert validate(doc) == []


def test_problems_carry_the_path_as_keys_and_indices() -> None:
    [problem] = validate(edited(example(), {"layers/0/params/shift/0": 31}))
    assert problem.path == ("layers", 0, "params", "shift", 0)
    assert problem.json_path == json_path(problem.path)


def test_a_document_that_is_not_an_object() -> None:
    assert messages([1, 2]) == ["$: must be an object, got [1, 2]"]
