"""The generated C of TFLM's recurrent models computes what TFLM computes, invoke after invoke: the SVDF
layers of keyword_scrambled (arm_svdf_state_s16_s8, int16 input, int16 softmax output) and of
keyword_scrambled_8bit with its int8 states' zero points set to 0 (arm_svdf_s8, the kernel TFLM's
int8-state SVDF then is) with their state in the layer's own buffers, on the host, qemu-m4 and qemu-m55 -
every layer against Fixpoint's reference executor and the output against TFLM's interpreter, over cases
run in a row (the state carried) - and mnist_lstm's LSTM rebuilt time-major over 3 sequences, int8
and in TensorFlow's 16x8 form (arm_lstm_unidirectional_s8 and _s16 with time_major set), its output
against both. TFLM's own (batch-major) LSTM
models go through the public commands in test_tflite_firmware.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from quantcore import cli, pipeline
from quantcore.codegen.generate import generate
from quantcore.importers._tflite_read import read_model
from quantcore.runtime import int8_exec
from quantcore.targets import cmsis_nn
from quantcore.targets.build import BuildRequest, build_firmware, read_header
from quantcore.targets.run import run_firmware
from quantcore.targets.target import BUILTIN
from quantcore.verify.tflm import inner_outputs
from tests import tflm


def _tflm_outputs(path: Path, cases: np.ndarray) -> list[bytes]:
    """TFLM's int16 softmax output (behind the model's int32 QUANTIZE) after each invoke in a row."""
    inner = inner_outputs(read_model(path.read_bytes(), str(path)))[0]
    interpreter = tflm.interpreter(path)
    rows = []
    for case in cases:
        interpreter.set_input(case[np.newaxis], 0)
        interpreter.invoke()
        rows.append(np.asarray(interpreter.GetTensor(inner, 0)["tensor_data"], np.int16).tobytes())
    return rows


CASES = 6
FEATURES = 3000
"""|q| of the int16 input features (~1.9 at the model's input scale 0.000625)."""


SVDF_BIAS_DIVISOR = 1000
"""The keyword models' scrambled SVDF biases saturate every output; divided by this they do not."""
TIME_SCALE_DIVISOR = 16
"""keyword_scrambled_8bit's time weights' scale divided by this: its outputs take many values then."""
STATE_BYTES = {
    # 7 SVDF layers' state and int32 work buffers (filter and unit sums), outside the arena: 4 of 64
    # filters of 8 steps, 3 of 32 filters of 32 steps (rank 1: as many units as filters)
    "int16_state": 4 * (64 * 8 * 2 + 64 * 4 + 64 * 4) + 3 * (32 * 32 * 2 + 32 * 4 + 32 * 4),
    "int8_state": 4 * (64 * 8 + 64 * 4 + 64 * 4) + 3 * (32 * 32 + 32 * 4 + 32 * 4),
}


@pytest.fixture(scope="module", params=list(STATE_BYTES))
def model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """keyword_scrambled (int16 state) or keyword_scrambled_8bit made an arm_svdf_s8 model (int8 state),
    their biases divided."""
    kind = str(request.param)
    path = tmp_path_factory.mktemp("svdf") / f"{kind}.tflite"
    if kind == "int16_state":
        raw = tflm.model("keyword_scrambled").read_bytes()
    else:
        raw = tflm.svdf_int8_state_model(
            tflm.model("keyword_scrambled_8bit").read_bytes(), TIME_SCALE_DIVISOR
        )
    path.write_bytes(tflm.svdf_biases_divided(raw, SVDF_BIAS_DIVISOR))
    return kind, path


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_svdf_firmware_matches_the_reference_and_tflm_invoke_after_invoke(
    target: str, model: tuple[str, Path], cross: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    kind, path = model
    qgraph = pipeline.quantize_imported(pipeline.load_model(path)).qgraph
    kernel = "arm_svdf_s8" if kind == "int8_state" else "arm_svdf_state_s16_s8"
    assert [n.attr("kernel") for n in qgraph.nodes].count(kernel) == 7
    spec = BUILTIN[target]
    generate(qgraph, tmp_path / "model", core=spec.core, force=True)
    cases = np.random.default_rng(4).integers(-FEATURES, FEATURES + 1, size=(CASES, 96)).astype(np.int16)
    request = BuildRequest(spec, tmp_path / "model", tmp_path / "build", [c.tobytes() for c in cases], cross)
    run = run_firmware(build_firmware(request), 300.0)
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: cases})
    differing = 0
    for i, case in enumerate(run.transcript.cases):
        for name, data in case.layers:
            differing += int(
                np.count_nonzero(
                    np.frombuffer(data, np.uint8) != env[name].reshape(CASES, -1)[i].view(np.uint8)
                )
            )
    assert len(run.transcript.cases) == CASES and differing == 0
    assert [case.output for case in run.transcript.cases] == _tflm_outputs(path, cases)
    assert read_header(tmp_path / "model").state_bytes == STATE_BYTES[kind]
    # the layers compute many values (not a saturated model): the first SVDF's output
    assert np.unique(env[qgraph.nodes[1].outputs[0]]).size >= 5


LSTM_STEPS, LSTM_SEQUENCES, LSTM_UNITS = 6, 3, 20


@pytest.fixture(scope="module")
def time_major_lstm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mnist_lstm's LSTM alone, time-major over 6 steps of 3 sequences (tests/tflm.py's lstm_model)."""
    path = tmp_path_factory.mktemp("lstm") / "time_major.tflite"
    raw = tflm.model("trained_lstm_int8").read_bytes()
    path.write_bytes(tflm.lstm_model(raw, LSTM_STEPS, LSTM_SEQUENCES, time_major=True))
    return path


LSTM_STATE_BYTES = {
    # hidden state (int8 or int16) + int16 cell state + two int16 work buffers of 3 x 20 values, each
    # padded to the 16-byte alignment
    "s8": 64 + 3 * 128,
    "s16": 128 + 3 * 128,
}


@pytest.mark.parametrize("kind", list(LSTM_STATE_BYTES))
@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_time_major_lstm_firmware_matches_the_reference_and_tflm_invoke_after_invoke(
    target: str, kind: str, cross: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    """arm_lstm_unidirectional_s8 - and _s16, the model in TensorFlow's 16x8 form - called with
    time_major = 1 on a (time, batch, features) input, the hidden and cell state carried over the cases in
    a row."""
    path = tmp_path / f"time_major_{kind}.tflite"
    raw = tflm.model("trained_lstm_int8").read_bytes()
    path.write_bytes(tflm.lstm_model(raw, LSTM_STEPS, LSTM_SEQUENCES, time_major=True, int16=kind == "s16"))
    qgraph = pipeline.quantize_imported(pipeline.load_model(path)).qgraph
    assert [n.attr("kernel") for n in qgraph.nodes] == [f"arm_lstm_unidirectional_{kind}"]
    spec = BUILTIN[target]
    generate(qgraph, tmp_path / "model", core=spec.core, force=True)
    assert ".time_major = 1," in (tmp_path / "model" / "model.c").read_text()
    shape, dtype = (LSTM_STEPS, LSTM_SEQUENCES, 28), np.dtype(np.int16 if kind == "s16" else np.int8)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(6)
    cases = rng.integers(info.min, info.max, size=(CASES, *shape), endpoint=True).astype(dtype)
    request = BuildRequest(spec, tmp_path / "model", tmp_path / "build", [c.tobytes() for c in cases], cross)
    run = run_firmware(build_firmware(request), 300.0)
    env = int8_exec.run(qgraph, {qgraph.inputs[0]: cases.reshape(-1, *shape[1:])})
    ours = env[qgraph.outputs[0]].reshape(CASES, -1)
    assert [case.output for case in run.transcript.cases] == [row.tobytes() for row in ours]
    interpreter = tflm.interpreter(path)
    theirs = []
    for case in cases:
        interpreter.set_input(case, 0)
        interpreter.invoke()
        theirs.append(np.asarray(interpreter.get_output(0), dtype).tobytes())
    assert [case.output for case in run.transcript.cases] == theirs
    assert read_header(tmp_path / "model").state_bytes == LSTM_STATE_BYTES[kind]


def test_fixpoint_verify_takes_a_time_major_lstm_a_case_per_inference(
    time_major_lstm: Path, cross: cmsis_nn.CmsisNn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fixpoint verify --data`: the model's input (6, 3, 28) is one inference of 6 time steps, so 6
    samples of (3, 28) make one case - 24 samples, 4 cases in a row, every layer checked and measured
    against the float layer; 25 are refused, saying why."""
    params = tmp_path / "p.json"
    assert cli.main(["quantize", str(time_major_lstm), "-o", str(params)]) == 0
    _, scale, zero_point = tflm.input_quantization(tflm.interpreter(time_major_lstm))
    q = np.random.default_rng(9).integers(-128, 128, size=(4 * LSTM_STEPS, LSTM_SEQUENCES, 28))
    data = tmp_path / "d.npy"
    np.save(data, tflm.real_values(q, scale, zero_point))
    argv = ["verify", "--target", "host", "--model", str(time_major_lstm), "--params", str(params)]
    argv += ["--data", str(data), "--build-dir", str(tmp_path / "build"), "--json"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["verdict"], report["cases"], report["mismatched_bytes_total"]) == ("pass", 4, 0)
    assert report["layers"][0]["bytes"] == LSTM_STEPS * LSTM_SEQUENCES * LSTM_UNITS
    assert isinstance(report["layers"][0]["float_sqnr_db"], float)  # the float layer ran on those cases
    np.save(data, tflm.real_values(np.concatenate([q, q[:1]]), scale, zero_point))
    assert cli.main(argv) == 2
    assert json.loads(capsys.readouterr().out)["error"] == (
        f"{data}: 25 samples; the model's input [6, 3, 28] takes 6 per inference (one per time step of a"
        " time-major recurrent input), so give a multiple of 6"
    )
