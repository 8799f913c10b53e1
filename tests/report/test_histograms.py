"""`fixpoint report --params P --calib D`: every activation gets a histogram and its clipping thresholds,
including those whose range no calibration chose (a softmax output: fixed by the op; an imported int8
model's: its own scales) - issue 18, found on real models that end in Softmax."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from quantcore.cli import main
from quantcore.report import charts, histograms
from tests.onnx_models import small_cnn

SAMPLES = 24


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """small_cnn (it ends in Softmax), quantized on its calibration data: (folder, calib, document)."""
    root = tmp_path_factory.mktemp("report")
    onnx.save(small_cnn(), root / "cnn.onnx")
    calib = root / "calib.npz"
    np.savez(calib, x=np.random.default_rng(5).uniform(0, 1, (SAMPLES, 1, 16, 16)).astype(np.float32))
    params = root / "p.json"
    assert main(["quantize", str(root / "cnn.onnx"), "--calib", str(calib), "-o", str(params)]) == 0
    return root, calib, json.loads(params.read_text())


def test_a_model_ending_in_softmax_gets_its_report(
    quantized: tuple[Path, Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, calib, document = quantized
    assert document["tensors"]["probs"]["method"] == "fixed" and "range" not in document["tensors"]["probs"]
    capsys.readouterr()
    html = root / "r.html"
    argv = ["report", "--params", str(root / "p.json"), "--calib", str(calib), "-o", str(html), "--json"]
    assert main(argv) == 0
    merged = json.loads(capsys.readouterr().out)
    by_tensor = {entry["tensor"]: entry for entry in merged["activations"]}
    probs = by_tensor["probs"]
    # The range softmax's scale 1/256 and zero point -128 represent: what clips its output.
    assert probs["range"] == {"min": 0.0, "max": 255 / 256}
    assert probs["observed"] == document["tensors"]["probs"]["observed"]
    histogram = probs["histogram"]
    assert histogram["values"] == SAMPLES * 10 and sum(histogram["counts"]) == SAMPLES * 10
    assert histogram["clipped_low"] == histogram["clipped_high"] == 0  # probabilities fit [0, 255/256]
    assert histogram["edges"][0] == 0.0 and histogram["edges"][-1] == 255 / 256
    # A calibrated activation keeps the range its method chose.
    assert by_tensor["relu1"]["range"] == document["tensors"]["relu1"]["range"]
    assert "probs" in html.read_text()


def test_an_activation_without_observed_or_chosen_range_is_drawn_from_its_scale(
    quantized: tuple[Path, Path, dict[str, Any]],
) -> None:
    """An imported int8 model's activations record a scale and zero point only."""
    document = copy.deepcopy(quantized[2])
    relu = document["tensors"]["relu1"]
    del relu["observed"], relu["range"]
    relu.update(method="imported", scale=0.5, zero_point=-128)
    entry = next(e for e in histograms.activation_entries(document) if e["tensor"] == "relu1")
    assert entry["observed"] is None and entry["range"] == {"min": 0.0, "max": 127.5}
    chart = charts.histogram_chart(entry)
    assert chart["observed"] == [] and [t["label"] for t in chart["thresholds"]] == ["0", "127.5"]
    assert chart["axis"][0]["label"] == "0" and chart["axis"][1]["label"] == "128"


def test_an_int16_activation_represents_its_sixteen_bit_range() -> None:
    tensor = {"dtype": "int16", "scale": 2.0**-10, "zero_point": 0}
    assert histograms.represented(tensor) == {"min": -32.0, "max": 32767 / 1024}


def test_an_int16_output_and_its_converted_input_get_histograms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default int16 output: the conversion's copy `flat@int16` (no tensor of the float model) shows
    the values of `flat`, which it holds (before the fix: KeyError); the output's range, widened 4x,
    clips none of them."""
    from tests.onnx_models import outlier_cnn

    onnx.save(outlier_cnn(factor=1.0), tmp_path / "m.onnx")
    calib = tmp_path / "calib.npz"
    np.savez(calib, x=np.random.default_rng(5).uniform(0, 1, (SAMPLES, 1, 16, 16)).astype(np.float32))
    params = tmp_path / "p.json"
    assert main(["quantize", str(tmp_path / "m.onnx"), "--calib", str(calib), "-o", str(params)]) == 0
    capsys.readouterr()
    argv = [
        "report",
        "--params",
        str(params),
        "--calib",
        str(calib),
        "-o",
        str(tmp_path / "r.html"),
        "--json",
    ]
    assert main(argv) == 0
    by_tensor = {e["tensor"]: e for e in json.loads(capsys.readouterr().out)["activations"]}
    copied, source, logits = by_tensor["flat@int16"], by_tensor["flat"], by_tensor["logits"]
    assert copied["dtype"] == logits["dtype"] == "int16" and source["dtype"] == "int8"
    assert copied["observed"] == source["observed"]
    for entry in (copied, source):  # the same values, binned over each one's own range
        assert entry["histogram"]["values"] == sum(entry["histogram"]["counts"]) == SAMPLES * 12
    assert logits["histogram"]["values"] == SAMPLES * 10
    assert logits["histogram"]["clipped_low"] == logits["histogram"]["clipped_high"] == 0
