"""The generated C of TFLM's recurrent models computes what TFLM computes, invoke after invoke: the SVDF
layers of keyword_scrambled (arm_svdf_state_s16_s8, int16 input, int16 softmax output) with their state
in the layer's own buffers, on the host, qemu-m4 and qemu-m55 - every layer against Fixpoint's reference
executor and the output against TFLM's interpreter, over cases run in a row (the state carried). The
LSTM models go through the public commands in test_tflite_firmware.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from quantcore import pipeline
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


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("svdf") / "keyword_scrambled_bias.tflite"
    path.write_bytes(tflm.svdf_biases_divided(tflm.model("keyword_scrambled").read_bytes(), 1000))
    return path


@pytest.mark.parametrize("target", ["host", "qemu-m4", "qemu-m55"])
def test_svdf_firmware_matches_the_reference_and_tflm_invoke_after_invoke(
    target: str, model: Path, cross: cmsis_nn.CmsisNn, tmp_path: Path
) -> None:
    qgraph = pipeline.quantize_imported(pipeline.load_model(model)).qgraph
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
    assert [case.output for case in run.transcript.cases] == _tflm_outputs(model, cases)
    # 7 SVDF layers' int16 state and int32 work buffers, outside the arena
    assert read_header(tmp_path / "model").state_bytes == 4 * (64 * 8 * 2 + 64 * 4 + 64 * 4) + 3 * (
        32 * 32 * 2 + 32 * 4 + 32 * 4
    )
