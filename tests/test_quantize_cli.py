"""`fixpoint quantize` and `fixpoint evaluate` end to end on a small ONNX CNN, and their bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from quantcore.cli import main
from quantcore.quantize import params_json
from tests.onnx_models import small_cnn


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    onnx.save(small_cnn(), root / "cnn.onnx")
    rng = np.random.default_rng(1)
    np.savez(root / "calib.npz", x=rng.uniform(0, 1, (96, 1, 16, 16)).astype(np.float32))
    x = rng.uniform(0, 1, (64, 1, 16, 16)).astype(np.float32)
    np.savez(root / "test.npz", x=x, y=rng.integers(0, 10, 64))
    return root


@pytest.mark.parametrize("method", ["minmax", "percentile", "entropy", "mse"])
def test_quantize_writes_a_valid_document(workdir: Path, method: str, capsys) -> None:  # type: ignore[no-untyped-def]
    out = workdir / f"{method}.json"
    code = main(
        [
            "quantize",
            str(workdir / "cnn.onnx"),
            "--calib",
            str(workdir / "calib.npz"),
            "--method",
            method,
            "-o",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    doc = params_json.load(out)  # validates against the schema
    assert doc["calibration"]["method"] == method and doc["calibration"]["samples"] == 96
    assert [layer["name"] for layer in doc["layers"]] == [
        "conv1",
        "pool1",
        "dwconv",
        "pwconv",
        "gap",
        "flatten",
        "fc",
        "softmax",
    ]
    assert doc["tensors"]["relu1"]["zero_point"] == -128  # ReLU output: the range starts at 0
    assert doc["tensors"]["conv1.weight"]["zero_point"] == [0] * 8
    assert doc["tensors"]["probs"]["scale"] == 1 / 256


def test_evaluate_reports_per_layer_and_model_figures(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    params = workdir / "eval.json"
    assert (
        main(
            ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz"), "-o", str(params)]
        )
        == 0
    )
    capsys.readouterr()
    csv = workdir / "layers.csv"
    code = main(
        [
            "evaluate",
            str(workdir / "cnn.onnx"),
            str(params),
            "--data",
            str(workdir / "test.npz"),
            "--json",
            "--csv",
            str(csv),
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert {"top1_float", "top1_int8", "agreement", "output_sqnr_db", "layers"} <= report.keys()
    assert [layer["name"] for layer in report["layers"]] == [
        "conv1",
        "pool1",
        "dwconv",
        "pwconv",
        "gap",
        "fc",
        "softmax",
    ]
    # A random 8-layer int8 net with min/max ranges: worst layer measured at 38.09 dB, agreement 64/64.
    # The bounds sit 3 dB and one image under: the pipeline is deterministic, and a real regression (a
    # wrong scale, a lost clip) costs more; one flip covers a near-tie on another CPU's float kernels.
    assert min(layer["sqnr_db"] for layer in report["layers"]) > 35
    assert report["agreement"] >= 63 / 64
    assert csv.read_text().splitlines()[0].startswith("name,op,sqnr_db")


def test_corrupt_model_is_one_message_naming_the_file(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = workdir / "truncated.onnx"
    bad.write_bytes((workdir / "cnn.onnx").read_bytes()[:200])
    out = workdir / "never.json"
    assert main(["quantize", str(bad), "--calib", str(workdir / "calib.npz"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "truncated.onnx" in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (np.zeros((0, 1, 16, 16), np.float32), "empty"),
        (np.zeros((4, 3, 16, 16), np.float32), "samples have shape (3, 16, 16)"),
        (np.full((4, 1, 16, 16), np.nan, np.float32), "non-finite"),
    ],
)
def test_bad_calibration_data_is_named(workdir: Path, content: np.ndarray, message: str, capsys) -> None:  # type: ignore[no-untyped-def]
    calib = workdir / "bad_calib.npz"
    np.savez(calib, x=content)
    out = workdir / "never.json"
    assert main(["quantize", str(workdir / "cnn.onnx"), "--calib", str(calib), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "bad_calib.npz" in err and message in err
    assert not out.exists()


def test_evaluate_rejects_a_document_failing_its_schema_with_the_json_path(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    params = workdir / "good.json"
    assert (
        main(
            ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz"), "-o", str(params)]
        )
        == 0
    )
    doc = json.loads(params.read_text())
    doc["tensors"]["relu1"]["zero_point"] = 128  # the uint8 habit
    broken = workdir / "broken.json"
    broken.write_text(json.dumps(doc, indent=2))
    capsys.readouterr()
    assert (
        main(["evaluate", str(workdir / "cnn.onnx"), str(broken), "--data", str(workdir / "test.npz")]) == 2
    )
    err = capsys.readouterr().err
    assert (
        "broken.json" in err and "$.tensors.relu1.zero_point: must be in [-128, 127] for int8, got 128" in err
    )


def test_int16_layer_from_the_command_line(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    params = workdir / "mixed.json"
    args = ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz"), "--int16", "pwconv"]
    assert main([*args, "-o", str(params)]) == 0
    doc = params_json.load(params)
    kernels = {layer["name"]: layer["kernel"] for layer in doc["layers"]}
    assert kernels["pwconv"] == "arm_convolve_wrapper_s16"
    assert kernels["relu6.to_int16"] == kernels["relu2.to_int8"] == "fixpoint_requantize"
    assert doc["tensors"]["pwconv.bias"]["dtype"] == "int64"
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                str(workdir / "cnn.onnx"),
                str(params),
                "--data",
                str(workdir / "test.npz"),
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert "pwconv" in [layer["name"] for layer in report["layers"]]
    assert main([*args[:-1], "softmax", "-o", str(workdir / "never.json")]) == 1
    assert "'softmax' (softmax) has no CMSIS-NN s16 kernel" in capsys.readouterr().err


def test_per_layer_method_is_recorded(workdir: Path) -> None:
    params = workdir / "per_layer.json"
    args = ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz"), "--method", "mse"]
    assert main([*args, "--layer-method", "pwconv=percentile", "-o", str(params)]) == 0
    doc = params_json.load(params)
    assert doc["calibration"] == {
        "method": "mse",
        "samples": 96,
        "percentile": 99.999,
        "per_layer": {"pwconv": "percentile"},
    }
    assert doc["tensors"]["relu2"]["method"] == "percentile" and doc["tensors"]["relu1"]["method"] == "mse"


def test_evaluate_refuses_parameters_of_another_model(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    params = workdir / "for_cnn.json"
    assert (
        main(
            ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz"), "-o", str(params)]
        )
        == 0
    )
    onnx.save(small_cnn(seed=7), workdir / "retrained.onnx")  # same graph, other weights
    capsys.readouterr()
    assert (
        main(["evaluate", str(workdir / "retrained.onnx"), str(params), "--data", str(workdir / "test.npz")])
        == 2
    )
    err = capsys.readouterr().err
    assert "for_cnn.json: made from a model with sha256" in err and "re-run fixpoint quantize" in err


def test_layer_method_takes_a_tensor_name_such_as_the_input(workdir: Path) -> None:
    params = workdir / "input_method.json"
    args = ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz")]
    assert main([*args, "--layer-method", "x=percentile", "-o", str(params)]) == 0
    doc = params_json.load(params)
    assert doc["calibration"]["per_layer"] == {"x": "percentile"}
    assert doc["tensors"]["x"]["method"] == "percentile" and doc["tensors"]["relu1"]["method"] == "minmax"


def test_layer_method_refuses_an_unknown_name_before_reading_the_data(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    params = workdir / "never_written.json"
    # The data file does not exist: the name is refused first, so its absence is never reported.
    args = ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "missing.npz")]
    assert main([*args, "--layer-method", "conv9=mse", "-o", str(params)]) == 2
    assert capsys.readouterr().err == (
        "fixpoint quantize: cnn.onnx: --layer-method 'conv9': no layer or activation tensor of that name;"
        " layers: 'conv1', 'pool1', 'dwconv', 'pwconv', 'gap', 'flatten', 'fc', 'softmax'; tensors: 'x',"
        " 'relu1', 'pool1', 'relu6', 'relu2', 'gap', 'flat', 'logits', 'probs'\n"
    )
    assert not params.exists()


def test_layer_method_refuses_an_unknown_method(workdir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    args = ["quantize", str(workdir / "cnn.onnx"), "--calib", str(workdir / "calib.npz")]
    assert main([*args, "--layer-method", "input=kl", "-o", str(workdir / "never.json")]) == 2
    assert capsys.readouterr().err == (
        "fixpoint quantize: --layer-method 'input=kl': unknown method 'kl' (one of minmax, percentile,"
        " entropy, mse)\n"
    )
