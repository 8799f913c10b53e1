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

import flatbuffers
import numpy as np
import pytest
import tflite

from quantcore import cli
from tests import tflm

INT8_MODELS = ["hello_world_int8", "micro_speech_quantized", "person_detect"]
SAMPLES = 6


def _quantize(model: Path, out: Path, *extra: str) -> Path:
    assert cli.main(["quantize", str(model), "-o", str(out), *extra]) == 0
    return out


def _int8_inputs(model: Path, seed: int = 18) -> tuple[np.ndarray, float, int]:
    """Random int8 inputs over the whole range, and the input's scale and zero point (TFLM's own)."""
    shape, scale, zero_point = tflm.input_quantization(tflm.interpreter(model))
    q = np.random.default_rng(seed).integers(-128, 128, size=(SAMPLES, *shape), dtype=np.int8)
    return q, scale, zero_point


def _tflm_outputs(model: Path, q: np.ndarray) -> np.ndarray:
    return np.stack([output.reshape(-1) for output in tflm.outputs(tflm.interpreter(model), q)])


def _edge_model(input_type: str) -> bytes:
    """An int8 FULLY_CONNECTED between the edges TensorFlow's converter writes for float or uint8 I/O:
    QUANTIZE (float32 or uint8 -> int8) before it, DEQUANTIZE (int8 -> float32) after it."""
    b = flatbuffers.Builder(1024)
    rng = np.random.default_rng(7)
    weights = rng.integers(-127, 128, size=(3, 4), dtype=np.int8)
    in_scale, w_scale, out_scale = 0.02, 0.01, 0.05
    bias = rng.integers(-500, 500, size=3).astype(np.int32)

    def vec(array):
        return b.CreateNumpyVector(np.ascontiguousarray(array))

    def buffer(data):
        raw = vec(np.frombuffer(data, np.uint8)) if data else None
        tflite.BufferStart(b)
        if raw is not None:
            tflite.BufferAddData(b, raw)
        return tflite.BufferEnd(b)

    def quant(scale, zero_point):
        s, z = vec(np.array([scale], np.float32)), vec(np.array([zero_point], np.int64))
        tflite.QuantizationParametersStart(b)
        tflite.QuantizationParametersAddScale(b, s)
        tflite.QuantizationParametersAddZeroPoint(b, z)
        return tflite.QuantizationParametersEnd(b)

    def tensor(name, shape, dtype, buffer_index, q):
        n, sh = b.CreateString(name), vec(np.array(shape, np.int32))
        tflite.TensorStart(b)
        tflite.TensorAddName(b, n)
        tflite.TensorAddShape(b, sh)
        tflite.TensorAddType(b, dtype)
        tflite.TensorAddBuffer(b, buffer_index)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        return tflite.TensorEnd(b)

    def table_vector(offsets):
        b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            b.PrependUOffsetTRelative(offset)
        return b.EndVector()

    def opcode(code):
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, code)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, 1)
        return tflite.OperatorCodeEnd(b)

    def operator(index, inputs, outputs, options=None):
        i, o = vec(np.array(inputs, np.int32)), vec(np.array(outputs, np.int32))
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, index)
        tflite.OperatorAddInputs(b, i)
        tflite.OperatorAddOutputs(b, o)
        if options is not None:
            tflite.OperatorAddBuiltinOptionsType(b, tflite.BuiltinOptions.FullyConnectedOptions)
            tflite.OperatorAddBuiltinOptions(b, options)
        return tflite.OperatorEnd(b)

    T = tflite.TensorType
    outer_in = {"float32": (T.FLOAT32, None), "uint8": (T.UINT8, quant(in_scale, 133))}[input_type]
    tensors = [
        tensor("x", [1, 4], outer_in[0], 0, outer_in[1]),
        tensor("x_int8", [1, 4], T.INT8, 0, quant(in_scale, 5)),
        tensor("w", [3, 4], T.INT8, 1, quant(w_scale, 0)),
        tensor("b", [3], T.INT32, 2, quant(in_scale * w_scale, 0)),
        tensor("y_int8", [1, 3], T.INT8, 0, quant(out_scale, -7)),
        tensor("y", [1, 3], T.FLOAT32, 0, None),
    ]
    tflite.FullyConnectedOptionsStart(b)
    fc_options = tflite.FullyConnectedOptionsEnd(b)
    operators = [
        operator(0, [0], [1]),
        operator(1, [1, 2, 3], [4], fc_options),
        operator(2, [4], [5]),
    ]
    t, ops = table_vector(tensors), table_vector(operators)
    ins, outs = vec(np.array([0], np.int32)), vec(np.array([5], np.int32))
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, t)
    tflite.SubGraphAddInputs(b, ins)
    tflite.SubGraphAddOutputs(b, outs)
    tflite.SubGraphAddOperators(b, ops)
    subgraph = tflite.SubGraphEnd(b)
    codes = table_vector(
        [
            opcode(tflite.BuiltinOperator.QUANTIZE),
            opcode(tflite.BuiltinOperator.FULLY_CONNECTED),
            opcode(tflite.BuiltinOperator.DEQUANTIZE),
        ]
    )
    buffers = table_vector([buffer(b""), buffer(weights.tobytes()), buffer(bias.tobytes())])
    subgraphs = table_vector([subgraph])
    description = b.CreateString("edges")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes)
    tflite.ModelAddSubgraphs(b, subgraphs)
    tflite.ModelAddBuffers(b, buffers)
    tflite.ModelAddDescription(b, description)
    b.Finish(tflite.ModelEnd(b), b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("input_type", ["float32", "uint8"])
def test_an_int8_model_with_float_or_uint8_edges_is_compared_behind_them(
    input_type: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TFLM gets what its application would write (the real values, or them quantized to uint8) and its
    int8 output is read behind the DEQUANTIZE; the values lie off the int8 grid."""
    model = tmp_path / f"{input_type}.tflite"
    model.write_bytes(_edge_model(input_type))
    params = _quantize(model, tmp_path / "p.json")
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).uniform(-2.5, 2.5, size=(50, 4)).astype(np.float32))
    report = json.loads(_evaluate(capsys, str(model), str(params), "--data", str(data), "--json")[0])
    assert (report["tflm_mismatched_bytes"], report["tflm_compared_bytes"]) == (0, 150)


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
    np.save(data, tflm.real_values(q, scale, zero_point))
    outputs = _tflm_outputs(model, q)
    written = tmp_path / "report.json"
    out, _ = _evaluate(
        capsys, str(model), str(params), "--data", str(data), "--json", "--report-json", str(written)
    )
    report = json.loads(out)
    assert json.loads(written.read_text()) == report
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
