"""`fixpoint evaluate MODEL.tflite P --data D` beside TensorFlow Lite Micro's interpreter: the int8 output
bytes where Fixpoint's int8 result differs from TFLM's (tflm_mismatched_bytes), in the JSON and the text.

D is real values; both sides get them quantized with the model's input scale and zero point. An int8
vector q given as D = (q - zero_point) * scale reaches both sides as q itself. A params file whose output
zero point is one off TensorFlow's is the negative control: its count is predicted from TFLM's own
outputs. A float .tflite, and a machine without tflite-micro, get one line saying why and no key.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from quantcore import cli
from tests import tflm

INT8_MODELS = ["hello_world_int8", "micro_speech_quantized", "person_detect"]
SAMPLES = 6


def _quantize(model: Path, out: Path, *extra: str) -> Path:
    assert cli.main(["quantize", str(model), "-o", str(out), *extra]) == 0
    return out


def _int8_inputs(model: Path, seed: int = 18) -> tuple[np.ndarray, float, int]:
    """Random int8 inputs over the whole range, and the input's scale and zero point (TFLM's own)."""
    details = tflm.interpreter(model).get_input_details(0)
    quant = details["quantization_parameters"]
    shape = (SAMPLES, *details["shape"][1:])
    q = np.random.default_rng(seed).integers(-128, 128, size=shape, dtype=np.int8)
    return q, float(quant["scales"][0]), int(quant["zero_points"][0])


def _tflm_outputs(model: Path, q: np.ndarray) -> np.ndarray:
    interpreter = tflm.interpreter(model)
    rows = []
    for sample in q:
        interpreter.set_input(sample[np.newaxis], 0)
        interpreter.invoke()
        rows.append(interpreter.get_output(0).reshape(-1))
    return np.stack(rows)


def _evaluate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    assert cli.main(["evaluate", *argv]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_vectors_given_as_real_values_match_tflm_byte_for_byte(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tflm.model(name)
    params = _quantize(model, tmp_path / "p.json")
    q, scale, zero_point = _int8_inputs(model)
    data = tmp_path / "d.npy"
    np.save(data, ((q.astype(np.float64) - zero_point) * scale).astype(np.float32))
    outputs = _tflm_outputs(model, q)
    out, _ = _evaluate(capsys, str(model), str(params), "--data", str(data), "--json")
    report = json.loads(out)
    assert report["samples"] == SAMPLES
    assert report["tflm_mismatched_bytes"] == 0
    assert report["tflm_compared_bytes"] == outputs.size
    text, _ = _evaluate(capsys, str(model), str(params), "--data", str(data))
    assert text.rstrip("\n").splitlines()[-1] == (
        f"TFLM (tflite-micro, reference kernels): 0 of {outputs.size} int8 output bytes differ on 6 samples"
    )


def test_real_valued_data_is_quantized_once_for_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Values off the int8 grid (an image in [-1, 1]) round the same way for TFLM and for Fixpoint."""
    model = tflm.model("person_detect")
    params = _quantize(model, tmp_path / "p.json")
    data = tmp_path / "images.npy"
    np.save(data, np.random.default_rng(5).uniform(-1, 1, size=(3, 96, 96, 1)).astype(np.float32))
    report = json.loads(_evaluate(capsys, str(model), str(params), "--data", str(data), "--json")[0])
    assert (report["tflm_mismatched_bytes"], report["tflm_compared_bytes"]) == (0, 6)


def test_params_one_zero_point_off_are_counted_against_tflm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The negative control: the output's zero point 5 -> 6 (and the layer's offset with it, so the file
    stays consistent) moves every int8 output up by one except where TFLM's is already 127; inputs whose
    output TFLM saturates at -128 are left out (shifted, they may stay there)."""
    model = tflm.model("hello_world_int8")
    document = json.loads(_quantize(model, tmp_path / "p.json").read_text())
    last = document["layers"][-1]
    assert document["tensors"][last["outputs"][0]]["zero_point"] == 5
    document["tensors"][last["outputs"][0]]["zero_point"] = 6
    last["params"]["output_offset"] = 6
    shifted = tmp_path / "shifted.json"
    shifted.write_text(json.dumps(document))
    _, scale, zero_point = _int8_inputs(model)
    every = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
    inside = every[(_tflm_outputs(model, every) > -128).all(axis=1)]  # unsaturated below: one up moves it
    data = tmp_path / "d.npy"
    np.save(data, (inside.astype(np.float64) - zero_point) * scale)
    expected = int(np.count_nonzero(_tflm_outputs(model, inside) < 127))
    assert expected > 200
    report = json.loads(_evaluate(capsys, str(model), str(shifted), "--data", str(data), "--json")[0])
    assert report["tflm_mismatched_bytes"] == expected


def test_a_float_tflite_says_it_has_no_tflm_counterpart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tflm.model("hello_world_float")
    data = tmp_path / "x.npy"
    np.save(data, np.linspace(0, 6.28, 64, dtype=np.float32).reshape(64, 1))
    params = _quantize(model, tmp_path / "p.json", "--calib", str(data))
    line = (
        "TFLM comparison: not run: a float .tflite has no int8 counterpart in TFLM (its int8 version is"
        " Fixpoint's calibration); compare with TFLM on the int8 .tflite TensorFlow's converter writes"
    )
    text, _ = _evaluate(capsys, str(model), str(params), "--data", str(data))
    assert text.rstrip("\n").splitlines()[-1] == line
    out, err = _evaluate(capsys, str(model), str(params), "--data", str(data), "--json")
    assert not any(key.startswith("tflm") for key in json.loads(out))
    assert err == f"fixpoint evaluate: {line}\n"


def test_without_tflite_micro_one_line_says_so_and_the_key_is_left_out(tmp_path: Path) -> None:
    """A Python in which `import tflite_micro` fails (sys.modules entry None: how Python marks a module
    as not importable) runs the real CLI."""
    model = tflm.model("hello_world_int8")
    params = _quantize(model, tmp_path / "p.json")
    data = tmp_path / "d.npy"
    np.save(data, np.zeros((2, 1), np.float32))
    program = (
        "import sys; sys.modules['tflite_micro'] = None\n"
        "from quantcore import cli; sys.exit(cli.main(sys.argv[1:]))"
    )
    argv = [sys.executable, "-c", program, "evaluate", str(model), str(params), "--data", str(data)]
    line = (
        "TFLM comparison: not run: the tflite-micro package (TFLM's interpreter) is not installed"
        " (pip install 'fixpoint[tflm]')"
    )
    text = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    assert text.stdout.rstrip("\n").splitlines()[-1] == line
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=True, timeout=120)
    assert "tflm_mismatched_bytes" not in json.loads(done.stdout)
    assert done.stderr == f"fixpoint evaluate: {line}\n"
